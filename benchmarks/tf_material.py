"""TensorFlow operator material: what the TensorFlow rules (and the TFLite / OpenVINO tf targets) get from the
``tf_ops`` source and its domain-edge derivative ``nan_search_tf`` (the raw ops of the NaN table, operands moved
to the edge of their domain), side by side with the baseline they had before them (``keras_tests``: keras's layer
tests only).

    .venv/bin/python benchmarks/tf_material.py [--budget 300] [--json FILE]

Parts:
1. material: operators and instances per TensorFlow module (tf_ops groups its OpDefs by the module that exports
   them: math, nn, linalg, signal, array, ...; every instance was run eagerly in a sandboxed worker at harvest, the
   candidates that failed there are counted as rejected), and the keras layers of the baseline.
2. rules: `dlci rules --library tensorflow --sources S --ops all --no-widen --budget B` once per material (a fresh
   process each, the real campaign: 2 sandboxed workers, confirmation, reduction, reproducers run alone): rule tests
   by status, operators reached, confirmed findings and how many of their reproducers reproduce alone.
"""
from __future__ import annotations

import os
import sys

# run as a script, this file's folder comes first on sys.path, and benchmarks/bisect.py shadows the standard library's
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import collections
import json
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlci import sources as S  # noqa: E402

MATERIALS = {"tf_ops": "tf_ops", "tf_ops at domain edges (nan_search_tf)": "nan_search_tf",
             "baseline (keras_tests)": "keras_tests"}


def material(name: str) -> dict:
    instances, stats = S.load_with_stats(name)
    per_op = collections.Counter(i.op for i in instances)
    out = {"operators": len(per_op), "instances": len(instances)}
    if stats.get("modules"):
        out["per_module"] = {m: {"operators": v.get("harvested_ops", v.get("ops")), "instances": v["instances"]}
                             for m, v in sorted(stats["modules"].items())}
    if stats.get("candidates"):
        out["candidates"] = stats["candidates"]  # tried at harvest / valid when run eagerly
    return out


def rules_run(source: str, budget: float, work: Path) -> dict:
    out = work / source
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "dlci", "rules", "--library", "tensorflow", "--sources", source,
                           "--ops", "all", "--no-widen", "--budget", str(budget), "--out", str(out),
                           "--fail-on", "never"], cwd=ROOT, capture_output=True, text=True)
    rows = []
    if (out / "results.jsonl").exists():
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    first = [r for r in rows if not r.get("confirming")]
    findings = []
    if (out / "findings.json").exists():
        findings = json.loads((out / "findings.json").read_text()).get("findings", [])
    valid = [r for r in first if r["status"] in ("pass", "inconsistency", "crash")]
    return {
        "exit": proc.returncode, "wall_seconds": round(time.time() - t0, 1),
        "rule_tests": len(first), "statuses": dict(collections.Counter(r["status"] for r in first)),
        "valid_per_rule": dict(sorted(collections.Counter(r["target"] for r in valid).items())),
        "operators_reached": len({r["op"] for r in valid}),
        "confirmed_findings": len(findings),
        "reproduce_alone": sum(1 for f in findings if f.get("repro_checked") is True),
        "findings": [{"operator": f["operator"], "rule": f["target"], "symptom": f["symptom"],
                      "repro_checked": f.get("repro_checked"), "message": f.get("message", "")[:160]}
                     for f in findings],
        "stderr_tail": proc.stderr[-600:] if proc.returncode not in (0, 1) else "",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=300.0, help="seconds per `dlci rules` run")
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument("--work", help="keep the rules runs' outputs here")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="dlci-tf-material-"))
    result = {"benchmark": "tf_material", "budget": args.budget, "materials": {}, "rules": {}}
    for label, source in MATERIALS.items():
        result["materials"][label] = material(source)
    for label, source in MATERIALS.items():
        result["rules"][label] = rules_run(source, args.budget, work)
    for label in MATERIALS:
        m, r = result["materials"][label], result["rules"][label]
        print(f"{label:40s} {m['operators']:4d} operators {m['instances']:6d} instances | rules: "
              f"{r['rule_tests']} tests, {sum(r['valid_per_rule'].values())} valid on {r['operators_reached']} "
              f"operators, {r['confirmed_findings']} confirmed findings ({r['reproduce_alone']} reproduce alone)",
              file=sys.stderr)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
