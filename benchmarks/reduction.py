"""Reduction: every finding's representative instance reduced (dlci.reduce) in sandboxed workers, side by side with
the unreduced baseline — elements, inputs, parameters, rank, reproducer size, and whether each reproducer still
reproduces alone in a fresh interpreter.

    .venv/bin/python benchmarks/reduction.py [--run DIR] [--budget 60] [--workers 2]

Without --run it first runs a short real campaign (`dlci test --ops avg_pool2d,elu,softplus --targets
tvm.from_exported_program,tvm.from_fx,openvino.pytorch --budget 120 --limit-per-op 4`). Instances are found by id
in the sources' harvest caches (``$DLCI_CACHE_DIR`` or ~/.cache/dlci).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlci import findings as F  # noqa: E402
from dlci.instance import Instance  # noqa: E402

DEFAULT_CAMPAIGN = ["--ops", "avg_pool2d,elu,softplus",
                    "--targets", "tvm.from_exported_program,tvm.from_fx,openvino.pytorch",
                    "--budget", "120", "--limit-per-op", "4"]
WARM = {"tvm.": ("tvm",), "openvino.": ("openvino",), "onnxruntime": ("onnx", "onnxruntime"),
        "torch.": ("torch",), "tf.": ("tensorflow",)}


def find_instances(ids: set[str], sources: set[str]) -> dict[str, Instance]:
    """The instances with these ids, read from the harvest caches of these sources (any limit they were cached
    with), without loading whole caches."""
    from dlci.sources import cache_root
    found: dict[str, Instance] = {}
    for source in sorted(sources):
        for meta in sorted(cache_root().glob(f"{source}-*.jsonl")):
            want = ids - set(found)
            if not want:
                return found
            hits = {}
            with open(meta) as fh:
                next(fh, None)  # header
                for idx, line in enumerate(fh):
                    if any(f'"id": "{i}"' in line for i in want):
                        m = json.loads(line)
                        if m["id"] in want:
                            hits[idx] = m
            if not hits:
                continue
            with np.load(meta.with_suffix(".npz"), allow_pickle=False) as npz:
                for idx, m in hits.items():
                    prefix = f"{idx}/"
                    arrays = {k[len(prefix):]: npz[k] for k in npz.files if k.startswith(prefix)}
                    found[m["id"]] = Instance.from_meta(m, arrays)
    return found


def run_campaign(out: Path) -> None:
    cmd = [sys.executable, "-m", "dlci", "test", *DEFAULT_CAMPAIGN, "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT))
    if not (out / "findings.json").exists():
        raise SystemExit(f"campaign failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def repro_stats(finding: F.Finding, inst: Instance, folder: Path) -> tuple[Path | None, dict]:
    from dlci.findings.repro import render_repro
    folder.mkdir(parents=True, exist_ok=True)
    try:
        path = render_repro(finding, inst, folder)
    except Exception as e:  # noqa: BLE001
        return None, {"render_error": f"{type(e).__name__}: {e}"}
    text = path.read_text()
    # the instance-specific part: the inputs section and the model section (the rest is the same for every
    # reproducer of a target: its entry point and the embedded comparison)
    sections = text.split("# ----------------------------------------------------------------")
    inputs = next((sec for sec in sections if sec.startswith(" inputs")), "")
    model = next((sec for sec in sections if sec.startswith(" the single-operator model")), "")
    return path, {"repro_lines": len(text.splitlines()), "repro_bytes": len(text.encode()),
                  "inputs_section_bytes": len(inputs.encode()), "model_section_bytes": len(model.encode()),
                  "inputs_as_literals": "base64" not in inputs}


def median(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, help="the --out of a finished `dlci test` run (default: run a short one)")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per reduction")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, help="where the reproducers go (default: a temp dir)")
    args = ap.parse_args()

    from dlci.exec import Engine
    from dlci.findings.repro import check_repro
    from dlci.reduce import engine_runner, reduce_instance
    from dlci.targets import get

    work = args.out or Path(tempfile.mkdtemp(prefix="dlci-reduction-"))
    work.mkdir(parents=True, exist_ok=True)
    run_dir = args.run
    campaign_s = None
    if run_dir is None:
        run_dir = work / "run"
        t = time.monotonic()
        run_campaign(run_dir)
        campaign_s = round(time.monotonic() - t, 1)
    doc = json.loads((run_dir / "findings.json").read_text())
    fields = {f.name for f in dataclasses.fields(F.Finding)}
    findings = [F.Finding(**{k: v for k, v in d.items() if k in fields}) for d in doc["findings"]]
    instances = find_instances({f.instance_id for f in findings}, {f.origin.get("source", "") for f in findings})

    warm = {"torch", "dlci.testcase"}
    for f in findings:
        for prefix, mods in WARM.items():
            if f.target.startswith(prefix):
                warm.update(mods)
    rows = []
    reductions = {}
    with Engine(workers=args.workers, timeout=120, memory_mb=3000, warm_imports=sorted(warm)) as engine:
        engine.start()
        for f in findings:
            inst = instances.get(f.instance_id)
            if inst is None:
                rows.append({"finding": f.id, "error": f"instance {f.instance_id} not found in the caches"})
                continue
            target = get(f.target)
            red = reduce_instance(inst, f.target, f.signature, run=engine_runner(engine, f.target),
                                  modules=target.modules, budget=args.budget)
            reductions[f.id] = red
    # reproducers: the unreduced baseline and the reduced instance, each run alone
    jobs = []
    for f in findings:
        red = reductions.get(f.id)
        if red is None:
            continue
        base_path, base = repro_stats(f, red.original, work / "original")
        rf = dataclasses.replace(f, instance_id=red.reduced.id)
        o = red.outcome or {}
        if red.confirmed and o:
            rf = dataclasses.replace(rf, message=o.get("message", "")[:2000], symptom=o.get("symptom", f.symptom),
                                     stage=o.get("stage", f.stage), distance=o.get("distance"),
                                     traceback=(o.get("traceback") or "")[-4000:])
        red_path, reduced = repro_stats(rf, red.reduced, work / "reduced")
        jobs.append((f, red, base_path, base, red_path, reduced))

    def check(path):
        return check_repro(path) if path is not None else False

    with ThreadPoolExecutor(max(1, args.workers)) as pool:
        base_ok = list(pool.map(check, [j[2] for j in jobs]))
        red_ok = list(pool.map(check, [j[4] for j in jobs]))
    for (f, red, _bp, base, _rp, reduced), b_ok, r_ok in zip(jobs, base_ok, red_ok):
        rows.append({
            "finding": f.id, "target": f.target, "operator": f.operator, "symptom": f.symptom,
            "instance": red.original.id, "reduced_instance": red.reduced.id,
            "before": {**red.before, **base, "reproduces_alone": b_ok},
            "after": {**red.after, **reduced, "reproduces_alone": r_ok},
            "reduction_s": round(red.seconds, 2), "candidates_run": red.tried, "confirmed": red.confirmed,
            "steps": [f"{s['kind']}: {s['what']}" for s in red.steps],
            "params_that_matter": red.params_that_matter, "params_required": red.params_required,
            "inputs_that_matter": red.inputs_that_matter, "notes": red.notes,
        })
    ok = [r for r in rows if "before" in r]
    n = len(ok)
    totals = {
        "findings": len(rows), "reduced": sum(1 for r in ok if r["instance"] != r["reduced_instance"]),
        "confirmed": sum(1 for r in ok if r["confirmed"]),
        "share_reduced_repro_reproduces_alone": round(sum(r["after"]["reproduces_alone"] for r in ok) / n, 3)
        if n else None,
        "share_baseline_repro_reproduces_alone": round(sum(r["before"]["reproduces_alone"] for r in ok) / n, 3)
        if n else None,
        "elements_before_total": sum(r["before"]["elements"] for r in ok),
        "elements_after_total": sum(r["after"]["elements"] for r in ok),
        "median_elements_before": median([r["before"]["elements"] for r in ok]),
        "median_elements_after": median([r["after"]["elements"] for r in ok]),
        "median_params_before": median([r["before"]["params"] for r in ok]),
        "median_params_after": median([r["after"]["params"] for r in ok]),
        "median_repro_lines_before": median([r["before"].get("repro_lines") for r in ok]),
        "median_repro_lines_after": median([r["after"].get("repro_lines") for r in ok]),
        "median_repro_bytes_before": median([r["before"].get("repro_bytes") for r in ok]),
        "median_repro_bytes_after": median([r["after"].get("repro_bytes") for r in ok]),
        "median_inputs_section_bytes_before": median([r["before"].get("inputs_section_bytes") for r in ok]),
        "median_inputs_section_bytes_after": median([r["after"].get("inputs_section_bytes") for r in ok]),
        "median_model_section_bytes_before": median([r["before"].get("model_section_bytes") for r in ok]),
        "median_model_section_bytes_after": median([r["after"].get("model_section_bytes") for r in ok]),
        "inputs_as_literals_before": sum(bool(r["before"].get("inputs_as_literals")) for r in ok),
        "inputs_as_literals_after": sum(bool(r["after"].get("inputs_as_literals")) for r in ok),
        "median_reduction_s": median([r["reduction_s"] for r in ok]),
        "total_reduction_s": round(sum(r["reduction_s"] for r in ok), 1),
        "median_candidates_run": median([r["candidates_run"] for r in ok]),
    }
    print(json.dumps({"run": str(run_dir), "campaign_s": campaign_s, "budget_per_reduction_s": args.budget,
                      "workers": args.workers, "reproducers": str(work), "totals": totals, "findings": rows},
                     indent=2))


if __name__ == "__main__":
    main()
