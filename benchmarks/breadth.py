"""Breadth: operators with at least one runnable instance per source, and per target the share of tests that run
vs are unsupported.

Part 1 computes the reference (eager source framework) of every instance of every source in this process.
Part 2 runs a real campaign (`dlci test --ops all --targets all`, a few instances per operator) within a budget,
or reads the results.jsonl of one that already ran (--results), and reports per-target shares.

    .venv/bin/python benchmarks/breadth.py [--budget 900] [--limit-per-op 2] [--results DIR/results.jsonl]

The campaign's peak memory (PSS of dlci and its 2 workers, sampled every 0.1 s) is reported too.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SOURCES = ("opinfo", "module_db", "onnx_node", "keras_tests")


def runnable_per_source() -> dict:
    from dlci import models
    from dlci.models.references import reference
    from dlci.sources import load
    report = {}
    for name in SOURCES:
        t0 = time.time()
        instances = load(name)
        ops, runnable = set(), set()
        ok = 0
        for inst in instances:
            ops.add(inst.op)
            try:
                reference(inst)
            except Exception:
                continue
            finally:
                models.clear_cache()
            ok += 1
            runnable.add(inst.op)
        report[name] = {"operators": len(ops), "operators_runnable": len(runnable), "instances": len(instances),
                        "instances_runnable": ok, "seconds": round(time.time() - t0, 1)}
    return report


def per_target(results_path: Path) -> dict:
    counts: dict[str, Counter] = defaultdict(Counter)
    ops_run: dict[str, set] = defaultdict(set)
    for line in results_path.read_text().splitlines():
        r = json.loads(line)
        if r.get("confirming"):
            continue
        counts[r["target"]][r["status"]] += 1
        if r["status"] in ("pass", "crash", "inconsistency"):
            ops_run[r["target"]].add(r["op"])
    out = {}
    for target, c in sorted(counts.items()):
        total = sum(c.values())
        ran = c["pass"] + c["crash"] + c["inconsistency"]
        out[target] = {"tests": total, "ran_share": round(ran / total, 3),
                       "unsupported_share": round(c["unsupported"] / total, 3),
                       "invalid_share": round(c["invalid"] / total, 3), "operators_ran": len(ops_run[target]),
                       **dict(c)}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=900)
    ap.add_argument("--limit-per-op", type=int, default=2)
    ap.add_argument("--results", type=Path, help="analyse this results.jsonl instead of running a campaign")
    ap.add_argument("--out", type=Path, default=Path("/tmp/dlci-breadth"))
    args = ap.parse_args()
    report = {"sources": runnable_per_source()}
    results = args.results
    if results is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import TreeMemory
        t0 = time.time()
        with TreeMemory() as mem:
            subprocess.run([sys.executable, "-m", "dlci", "test", "--ops", "all", "--targets", "all", "--budget",
                            str(args.budget), "--limit-per-op", str(args.limit_per_op), "--out", str(args.out)],
                           cwd=ROOT, check=False)
        report["campaign"] = {"wall_s": round(time.time() - t0, 1), "peak_pss_gb_2_workers": round(mem.peak / 2**30, 2)}
        doc = json.loads((args.out / "findings.json").read_text())
        report["campaign"].update({k: doc["stats"][k] for k in ("tests_run", "tests_valid", "share_in_targets")})
        report["campaign"]["findings"] = len(doc["findings"])
        results = args.out / "results.jsonl"
    report["targets"] = per_target(results)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
