"""Audee's genetic search vs random input/weight sampling: the same seeds, budget, targets and sampler, each run a
fresh `python -m dlci evolve` process; the two strategies run at the same time, one worker each, so that they share
the machine alike.

    .venv/bin/python benchmarks/evolve.py [--budget 600] [--onnx-budget 300] [--seeds 0] [--json PATH]

Seeds (benchmarks/audee_zoo.py): small PyTorch MLPs each ending in an operator OpenVINO 2026.4 gets wrong only at the
edge of its domain — exp (+inf from 88.38 to 88.72), erfinv (~1e-3 off within 4e-3 of 1), softplus with a threshold
(ignored, wrong only above it) — with example values far from that edge, plus a clean twin (no buggy operator: the
search must find nothing), run on openvino.pytorch; and an ONNX perceptron ending in Exp, run on openvino.onnx.

Per strategy: time from process start to the first confirmed inconsistency, confirmed inconsistencies (distinct
signatures, and the seeds where one was found), candidates run, and the findings whose reproducer fails alone.
Prints one JSON document (and writes it with --json); each run's output folder stays under --work.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# run as a script, this file's folder comes first on sys.path, and benchmarks/bisect.py shadows the standard library's
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
STRATEGIES = ("ga", "random")


from benchmarks import audee_zoo as Z  # noqa: E402  (ROOT is on sys.path; this folder is not)


def run_one(strategy: str, seed: int, budget: float, models: list[str], targets: str, out: Path) -> dict:
    cmd = [sys.executable, "-m", "dlci", "evolve", "--strategy", strategy, "--seed", str(seed), "--budget",
           str(budget), "--targets", targets, "--workers", "1", "--out", str(out), "--fail-on", "never"]
    for m in models:
        cmd += ["--model", m]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.time() - t0
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    st = doc.get("stats") or {}
    ev = st.get("evolve") or {}
    first = st.get("first_confirmed_at")
    return {"strategy": strategy, "seed": seed, "targets": targets, "exit": proc.returncode,
            "wall_seconds": round(wall, 1),
            "first_confirmed_seconds": round(first - t0, 1) if first else None,
            "confirmed_signatures": (st.get("signatures") or {}).get("confirmed", 0),
            "confirmed_at_seconds": sorted(round(t - t0, 1) for t in (st.get("confirmed_at") or {}).values()),
            "findings": [{"operator": f["operator"], "target": f["target"], "symptom": f["symptom"],
                          "seed": f["origin"]["test"].split(" [")[0].rsplit("/", 1)[-1],
                          "repro_checked": f.get("repro_checked"),
                          "parameters_that_matter": (f.get("graph") or {}).get("parameters_that_matter"),
                          "share": ((f.get("graph") or {}).get("share") or {}).get("share")}
                         for f in doc.get("findings", [])],
            "seeds": [{"seed": s["seed"].rsplit("/", 1)[-1], "candidates": s["candidates"], "scored": s["scored"],
                       "best_fitness": s["best_fitness"], "found": s["found"], "rejected": s["rejected"]}
                      for s in ev.get("seeds", [])],
            "tests_run": st.get("tests_run"), "out": str(out),
            "stderr_tail": proc.stderr[-600:] if proc.returncode not in (0, 1) else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=600.0, help="seconds per run of the torch seeds")
    ap.add_argument("--onnx-budget", type=float, default=300.0, help="seconds per run of the ONNX seed")
    ap.add_argument("--seeds", default="0", help="comma-separated search seeds")
    ap.add_argument("--work", help="folder for the seeds and the runs (default: a temporary one)")
    ap.add_argument("--json", help="also write the JSON document here")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="dlci-evolve-"))
    seeds = Z.write_seeds(work / "seeds")
    torch_models = [spec for name, spec, _ in seeds if not spec.endswith(".onnx")]
    onnx_models = [spec for name, spec, _ in seeds if spec.endswith(".onnx")]
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for label, models, targets, budget in (("torch", torch_models, "openvino.pytorch", args.budget),
                                               ("onnx", onnx_models, "openvino.onnx", args.onnx_budget)):
            with ThreadPoolExecutor(len(STRATEGIES)) as pool:
                futures = [pool.submit(run_one, s, seed, budget, models, targets, work / f"{label}_{s}_seed{seed}")
                           for s in STRATEGIES]
                runs += [f.result() for f in futures]
    summary = {}
    for s in STRATEGIES:
        mine = [r for r in runs if r["strategy"] == s]
        firsts = [r["first_confirmed_seconds"] for r in mine if r["first_confirmed_seconds"] is not None]
        summary[s] = {"runs": len(mine), "confirmed_signatures": sum(r["confirmed_signatures"] for r in mine),
                      "seeds_with_a_confirmed_inconsistency": sorted({f["seed"] for r in mine
                                                                      for f in r["findings"]}),
                      "reproducing_alone": sum(1 for r in mine for f in r["findings"] if f["repro_checked"]),
                      "first_confirmed_seconds": firsts, "runs_without_any": len(mine) - len(firsts),
                      "candidates": sum(x["candidates"] for r in mine for x in r["seeds"]),
                      "clean_seed_findings": sum(1 for r in mine for f in r["findings"] if "clean" in f["seed"])}
    doc = {"budget": {"torch": args.budget, "onnx": args.onnx_budget}, "summary": summary, "runs": runs,
           "work": str(work)}
    text = json.dumps(doc, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
