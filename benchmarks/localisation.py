"""Localisation (Audee): multi-operator models built around real single-operator bugs of the pinned stack, the buggy
operator at varied depths among 5-15 other operators (benchmarks/audee_zoo.py), each judged as `dlci test --model`
judges a model: the whole model through the target in dlci's sandboxed workers, its failure localised there
(dlci.localise: the trace of intermediate values, each suspect alone on the reference's inputs, the culprit's
parameters reset one at a time, its share of the final error). Side by side, the clean twin of every model (the same
file without the buggy operator) must give no failure at all.

    .venv/bin/python benchmarks/localisation.py [--kinds K1,K2] [--workers 2] [--pipeline N] [--json PATH]

Per case and target: whether the culprit operator and its parameters that matter are named exactly (the
benchmark's figure: the share named correctly; goal all), the first divergent operator of the trace, the culprit's
share of the final error, how many operators were run alone, seconds. ``--pipeline N``: for N cases per bug kind,
also the whole `dlci test --model` pipeline in a fresh process (confirmation, reduction to the culprit, the
standalone reproducer run alone). Prints one JSON document.
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
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


from benchmarks import audee_zoo as Z  # noqa: E402  (ROOT is on sys.path; this folder is not)


def judge_all(jobs: list[tuple[str, str, str | None, str]], workers: int) -> dict[str, dict]:
    """job key -> {status, symptom, localised, seconds}, each model run whole on its target in dlci's workers."""
    from dlci.exec import Engine, Job
    from dlci.sources.model_file import model_instance
    results: dict[str, dict] = {}
    built = []
    for key, spec, inputs, target in jobs:
        inst = model_instance(spec, inputs, 0)
        built.append(Job(id=key, func="dlci.testcase:execute_job", args=(inst, target), instance_id=inst.id,
                         op=inst.op, target=target, timeout=900, affinity=key))
    with Engine(workers=workers, timeout=900, memory_mb=4000, warm_imports=("torch", "tvm", "openvino")) as engine:
        engine.run(built, lambda job, r: results.__setitem__(job.id, r))
    return results


def pipeline(spec: str, inputs: str | None, target: str, out: Path) -> dict:
    cmd = [sys.executable, "-m", "dlci", "test", "--model", spec, "--targets", target, "--budget", "240",
           "--reduce-seconds", "90", "--out", str(out), "--fail-on", "never"]
    if inputs:
        cmd += ["--inputs", inputs]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    return {"exit": proc.returncode, "seconds": round(time.monotonic() - t0, 1),
            "findings": [{"operator": f["operator"], "signature": f["signature"], "repro_checked": f["repro_checked"],
                          "reduced_operators": (f.get("reduction") or {}).get("after", {}).get("operators"),
                          "parameters_that_matter": (f.get("graph") or {}).get("parameters_that_matter"),
                          "repro": f["repro"]} for f in doc.get("findings", [])]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", help="comma-separated bug kinds (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pipeline", type=int, default=0, help="cases per kind also run through `dlci test --model`")
    ap.add_argument("--work", help="folder for the models (default: a temporary one)")
    ap.add_argument("--json", help="also write the JSON document here")
    args = ap.parse_args()
    cases = Z.torch_cases() + Z.onnx_cases()
    if args.kinds:
        cases = [c for c in cases if c.kind in args.kinds.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="dlci-localisation-"))
    jobs, meta = [], {}
    for case in cases:
        spec, clean = Z.write(case, work)
        inputs = str(work / f"{case.name}.npz") if case.onnx else None
        clean_inputs = str(work / f"{case.name}_clean.npz") if case.onnx else None
        for target in case.truth["targets"]:
            jobs.append((f"{case.name}@{target}", spec, inputs, target))
            jobs.append((f"{case.name}_clean@{target}", clean, clean_inputs, target))
            meta[f"{case.name}@{target}"] = (case, target, spec, inputs)
    t0 = time.monotonic()
    results = judge_all(jobs, args.workers)
    rows = []
    for key, (case, target, spec, inputs) in meta.items():
        r, clean = results.get(key) or {}, results.get(key.replace("@", "_clean@", 1)) or {}
        loc = r.get("localised") or {}
        params = sorted((loc.get("parameters") or {}).get("matter") or [])
        trace = loc.get("trace") or {}
        rows.append({
            "case": case.name, "kind": case.kind, "target": target, "operators": loc.get("nodes"),
            "status": r.get("status"), "symptom": r.get("symptom"),
            "named": loc.get("operator"), "truth": case.truth["operator"],
            "parameters": params, "truth_parameters": case.truth["parameters"],
            "operator_correct": loc.get("operator") == case.truth["operator"] and not loc.get("multi_operator"),
            "parameters_correct": params == case.truth["parameters"],
            "first_divergent": trace.get("first_divergent"), "trace_used": trace.get("used"),
            "trace_first_is_culprit": bool(trace.get("used")) and trace.get("first_divergent") == loc.get("node"),
            "share": (loc.get("share") or {}).get("share"), "checked_alone": loc.get("checked"),
            "localise_seconds": loc.get("seconds"), "test_seconds": round(r.get("seconds") or 0.0, 1),
            "clean_status": clean.get("status"), "clean_symptom": clean.get("symptom"),
        })
    correct = [r for r in rows if r["operator_correct"] and r["parameters_correct"]]
    noise = [r for r in rows if r["clean_status"] in ("crash", "inconsistency")]
    doc = {
        "cases": len(rows), "named_correctly": len(correct),
        "share_named_correctly": round(len(correct) / len(rows), 3) if rows else None,
        "operator_correct": sum(r["operator_correct"] for r in rows),
        "parameters_correct": sum(r["parameters_correct"] for r in rows),
        "trace_first_divergent_is_culprit": sum(r["trace_first_is_culprit"] for r in rows),
        "clean_twins_with_a_failure": len(noise),
        "median_checked_alone": sorted(r["checked_alone"] or 0 for r in rows)[len(rows) // 2] if rows else None,
        "seconds": round(time.monotonic() - t0, 1), "work": str(work), "rows": rows,
    }
    if args.pipeline:
        runs, seen = [], {}
        for key, (case, target, spec, inputs) in meta.items():
            if seen.get(case.kind, 0) >= args.pipeline:
                continue
            seen[case.kind] = seen.get(case.kind, 0) + 1
            runs.append({"case": case.name, "target": target,
                         **pipeline(spec, inputs, target, work / "runs" / key.replace("@", "_"))})
        doc["pipeline"] = runs
        doc["pipeline_reproducing_alone"] = sum(1 for r in runs if r["findings"] and
                                                all(f["repro_checked"] for f in r["findings"]))
    text = json.dumps(doc, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
