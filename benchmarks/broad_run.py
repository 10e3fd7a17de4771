"""The broad run: `dlci test --ops all --targets all --budget B` three ways, one after the other on the same machine:
the plan's instance-by-instance order one test per model (`--schedule plan --no-batch`: the engine before batches
and the scheduler), the plan's order batched (`--schedule plan`), and the cost-aware scheduler (`--schedule cost`,
the default). Per side: tests run and valid, confirmed findings, how many
reproducers were checked alone and reproduced, whether testing ended early to leave time for them, wall time, peak
memory (summed PSS of dlci and its workers), the per-arm shares, and whether the two named TVM from_fx bugs of
issue 15 are among the findings (BatchNorm2d in eval mode, conv_transpose2d with keyword arguments).

    .venv/bin/python benchmarks/broad_run.py [--budget 300] [--sides unbatched,plan,cost] [--out /tmp/dlci-broad]
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]  # benchmarks/bisect.py shadows bisect

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks._common import TreeMemory  # noqa: E402  (ROOT is on sys.path; this folder is not)


def named_bugs(findings: list[dict]) -> dict:
    """The two TVM from_fx bugs issue 15 names: the findings that show each (empty: not found). BatchNorm2d in eval
    mode normalises with the batch's statistics (a value mismatch); conv_transpose2d's stride/padding/dilation given
    as keywords are dropped (a shape or value mismatch)."""
    def matching(pred):
        return [f"{f['id']} {f['symptom']} (reproduced alone: {f.get('repro_checked')})" for f in findings if pred(f)]
    return {
        "from_fx BatchNorm2d eval": matching(
            lambda f: f["target"] == "tvm.from_fx" and f["operator"] in ("nn::BatchNorm2d", "aten::batch_norm")
            and f["symptom"] == "value mismatch"),
        "from_fx conv_transpose2d keyword arguments": matching(
            lambda f: f["target"] == "tvm.from_fx" and f["operator"] == "aten::conv_transpose2d"
            and f["symptom"] in ("shape mismatch", "value mismatch")),
    }


# a side's name -> its flags: the plan's order and one test per model (the engine before issue 15), the plan's order
# batched, the cost-aware scheduler batched (today's default)
SIDES = {"unbatched": ["--schedule", "plan", "--no-batch"], "plan": ["--schedule", "plan"],
         "cost": ["--schedule", "cost"]}


def side(name: str, budget: float, out: Path) -> dict:
    t0 = time.time()
    with TreeMemory() as mem:
        proc = subprocess.run([sys.executable, "-m", "dlci", "test", "--ops", "all", "--targets", "all", "--budget",
                               str(budget), *SIDES[name], "--out", str(out)], cwd=ROOT, check=False,
                              capture_output=True, text=True)
    doc = json.loads((out / "findings.json").read_text())
    stats, findings = doc["stats"], doc["findings"]
    checked = [f for f in findings if f.get("repro_checked") is not None]
    return {
        "exit": proc.returncode,
        "wall_s": round(time.time() - t0, 1),
        "peak_pss_gb": round(mem.peak / 2**30, 2),
        "tests_run": stats["tests_run"],
        "tests_valid": stats["tests_valid"],
        "share_in_targets": stats["share_in_targets"],
        "respawns": stats["engine"].get("respawns"),
        "findings": len(findings),
        "reproducers_checked": len(checked),
        "reproduced_alone": sum(1 for f in checked if f["repro_checked"]),
        "dropped_not_reproducing": len(stats.get("unreproduced", [])),
        "ended_early": stats.get("ended_early", ""),
        "named_bugs": named_bugs(findings),
        "findings_by_target": _count(f["target"] for f in findings),
        "arms": {k: {x: v[x] for x in ("tests", "valid", "seconds", "signatures")}
                 for k, v in stats.get("arms", {}).items()},
    }


def _count(items) -> dict:
    out: dict = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return dict(sorted(out.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=300)
    ap.add_argument("--sides", default="unbatched,plan,cost", help=f"comma-separated, of {', '.join(SIDES)}")
    ap.add_argument("--out", type=Path, default=Path("/tmp/dlci-broad"))
    args = ap.parse_args()
    report = {"budget_s": args.budget}
    for schedule in args.sides.split(","):
        if schedule not in SIDES:
            ap.error(f"--sides: no side {schedule!r} (known: {', '.join(SIDES)})")
        report[schedule] = side(schedule, args.budget, args.out / schedule)
        print(f"{schedule}: {report[schedule]['tests_valid']} valid of {report[schedule]['tests_run']} tests, "
              f"{report[schedule]['findings']} findings", file=sys.stderr)
    for a, b in (("plan", "cost"), ("unbatched", "cost"), ("unbatched", "plan")):
        if a in report and b in report:
            report[f"valid_tests_{b}_over_{a}"] = round(report[b]["tests_valid"] / max(1, report[a]["tests_valid"]),
                                                        2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
