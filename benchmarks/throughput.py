"""Throughput: the same instances through each target named, valid tests per minute three ways: dlci's engine with
batched tests (members packed into one model where the target can, dlci.testcase.batch.execute_batch), the engine
one test per job, and one process per test (on the first --naive-count instances). Batched and per-test sides must
report the same (status, stage, symptom) per test (``same_statuses``) and so the same failing tests.

A fourth side, the engine as issue 15 found it (``engine_as_filed``): one test per job with torch's exporters as
torch ships them (``DLCI_EXPORT_CACHES=off``: no torchlib registry or CIA set kept per process, both built while
that issue was worked on and now shared by every side above). ``--no-as-filed`` leaves it out.

Each side's ``target_floor_s`` is the wall it would take if only the workers' start and the target's own stages
(convert, compile, run, as its outcomes record them, shared by the workers) cost anything; the batched side's, over
the other sides, is the ceiling of what batching can reach with the target as it is (``ceiling_over_engine``,
``ceiling_over_engine_as_filed``): TVM compiles each member's kernels with LLVM however many share a module.

Both sides use the same parallelism (2 at a time on 2 cores). Also reports the share of worker busy time that is
spent inside convert/compile/run (the rest is reference computation, model building and harness overhead), and
the peak memory of the engine run with 2 workers.

Each side has its own store of exported models (dlci.models.store): by default an empty one per target and side,
so that a ratio measures batching alone; with ``--store shared`` each side keeps its store across the targets of
the run, as a campaign does, and a target that consumes a form an earlier one built (openvino.onnx after
tvm.from_onnx) reads it.

    .venv/bin/python benchmarks/throughput.py [--count 100] [--targets tvm.from_exported_program,...] [--source opinfo]
    .venv/bin/python benchmarks/throughput.py --count 300 --source opinfo \
        --targets tvm.from_onnx,tvm.from_exported_program,openvino.onnx,openvino.pytorch
"""
from __future__ import annotations

import os
import sys

# run as a script, this file's folder comes first on sys.path, and benchmarks/bisect.py shadows the standard library's
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _load_common():
    """benchmarks/_common.py by its path: the workers inherit sys.path, which must not hold this folder."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("dlci_bench_common", os.path.join(_HERE, "_common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_COMMON = _load_common()
TreeMemory, pick_instances = _COMMON.TreeMemory, _COMMON.pick_instances
from dlci.exec import Engine, Job, run_isolated  # noqa: E402


def jobs_for(instances, target):
    return [Job(id=f"{i.id}@{target}", func="dlci.testcase:execute_job", args=(i, target), instance_id=i.id,
                op=i.op, target=target, affinity=i.id) for i in instances]


def batch_jobs_for(instances, target):
    from dlci.targets import get
    size = get(target).batch_size
    return [Job(id=f"b{k}@{target}", func="dlci.testcase.batch:execute_batch_job", args=(instances[k:k + size], target),
                instance_id=instances[k].id, op=instances[k].op, target=target, affinity=f"batch:{target}",
                timeout=480) for k in range(0, len(instances), size)]


def unbatch(results):
    return [o for r in results for o in r.get("batch_outcomes", [r])]


VALID = ("pass", "crash", "inconsistency")


def engine_side(jobs, workers, warm, store, env=None):
    results, dead = [], []

    def collect(job, r):
        if job.func.endswith("execute_batch_job") and "batch_outcomes" not in r:
            dead.append(job)  # the worker died under the batch: its members run alone, as the campaign does
        else:
            results.append(r)

    with TreeMemory() as mem:
        t0 = time.monotonic()
        with Engine(workers=workers, timeout=120, warm_imports=warm,
                    env={"DLCI_FORM_STORE": store, **(env or {})}) as engine:
            info = engine.run(jobs, collect)
            if dead:
                retry = [j for job in dead for j in jobs_for(job.args[0], job.args[1])]
                more = engine.run(retry, collect)
                info.respawns += more.respawns
        wall = time.monotonic() - t0
    results = unbatch(results)
    busy = sum(info.busy_seconds)
    inside = sum(sum(v for k, v in (r.get("timings") or {}).items() if k in ("convert", "compile", "run"))
                 for r in results)
    valid = sum(1 for r in results if r["status"] in VALID)
    phases: dict = {}  # each stage's seconds over all tests (a packed model's stage is shared among its members)
    for r in results:
        for k, v in (r.get("timings") or {}).items():
            phases[k] = phases.get(k, 0.0) + v
    # the wall this side would take if only the target's own stages (as the outcomes record them: a group's
    # failed conversions are not all charged, so this floor is low) and the workers' start cost anything
    floor = max(info.startup_seconds, default=0.0) + inside / workers
    return {"tests": len(results), "valid": valid, "wall_s": round(wall, 1),
            "tests_per_min": round(60 * len(results) / wall, 1), "valid_per_min": round(60 * valid / wall, 1),
            "target_floor_s": round(floor, 1),
            "valid_per_min_at_target_floor": round(60 * valid / floor, 1) if floor else None,
            "busy_s": round(busy, 1), "stage_seconds": {k: round(v, 1) for k, v in sorted(phases.items())},
            "share_inside_targets_of_busy": round(inside / busy, 3) if busy else None,
            "share_inside_targets_of_wall": round(inside / (wall * workers), 3),
            "worker_startup_s": [round(s, 2) for s in info.startup_seconds], "respawns": info.respawns,
            "peak_pss_gb": round(mem.peak / 2**30, 2), "statuses": _statuses(results),
            "by_instance": {r["instance_id"]: (r["status"], r["stage"], r["symptom"]) for r in results}}


def naive_side(jobs, workers, store):
    t0 = time.monotonic()
    with ThreadPoolExecutor(workers) as pool:
        results = list(pool.map(lambda j: run_isolated(j, timeout=180, memory_mb=4000,
                                                       env={"DLCI_FORM_STORE": store}), jobs))
    wall = time.monotonic() - t0
    valid = sum(1 for r in results if r["status"] in VALID)
    return {"tests": len(results), "valid": valid, "wall_s": round(wall, 1),
            "tests_per_min": round(60 * len(results) / wall, 1), "valid_per_min": round(60 * valid / wall, 1),
            "statuses": _statuses(results)}


def _statuses(results):
    out = {}
    for r in results:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def _ratio(a, b):
    return round(a / b, 2) if b else None


def one_target(target, source, count, workers, naive_count, stores, as_filed=True):
    from dlci.targets import get
    instances = pick_instances(source, target, count)
    warm = tuple(sorted({"torch", "dlci.testcase", *get(target).warm_imports, *get(target).modules[:1]}))
    batched = engine_side(batch_jobs_for(instances, target), workers, warm, stores("batched"))
    engine = engine_side(jobs_for(instances, target), workers, warm, stores("engine"))
    filed = engine_side(jobs_for(instances, target), workers, warm, stores("as-filed"),
                        {"DLCI_EXPORT_CACHES": "off"}) if as_filed else None
    naive = naive_side(jobs_for(instances[:naive_count], target), workers, stores("naive")) if naive_count else None
    differ = sorted(f"{i}: batched {batched['by_instance'].get(i)}, alone {st}"
                    for i, st in engine["by_instance"].items() if batched["by_instance"].get(i) != st)
    failures = {m: sorted(i for i, st in side["by_instance"].items() if st[0] in ("crash", "inconsistency"))
                for m, side in (("batched", batched), ("engine", engine))}
    if filed is not None:
        differ += sorted(f"{i}: as filed {filed['by_instance'].get(i)}, engine {st}"
                         for i, st in engine["by_instance"].items() if filed["by_instance"].get(i) != st)
    for side in (batched, engine, filed):
        if side is not None:
            side.pop("by_instance")
    return {"target": target, "source": source, "instances": len(instances), "workers": workers,
            "engine_batched": batched, "engine": engine, "engine_as_filed": filed, "naive_process_per_test": naive,
            "engine_over_naive": _ratio(engine["valid_per_min"], naive["valid_per_min"]) if naive else None,
            "batched_over_engine": _ratio(batched["valid_per_min"], engine["valid_per_min"]),
            "batched_over_engine_as_filed": _ratio(batched["valid_per_min"], filed["valid_per_min"]) if filed else None,
            # the most batching could reach over each side with this target as it is (target_floor_s)
            "ceiling_over_engine": _ratio(batched["valid_per_min_at_target_floor"], engine["valid_per_min"]),
            "ceiling_over_engine_as_filed": _ratio(batched["valid_per_min_at_target_floor"], filed["valid_per_min"])
            if filed else None,
            "same_statuses": not differ, "status_differs": differ,
            "same_failing_tests": failures["batched"] == failures["engine"], "failing_tests": len(failures["engine"])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--targets", "--target", default="tvm.from_exported_program",
                    help="comma-separated: each measured on its own, one after the other")
    ap.add_argument("--source", default="opinfo")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--naive-count", type=int, default=30,
                    help="tests of the process-per-test side (each process imports the stack: minutes at 300)")
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--no-as-filed", action="store_true", help="leave out the engine with torch's exporters as shipped")
    ap.add_argument("--store", choices=("fresh", "shared"), default="fresh",
                    help="stores of exported models: an empty one per target and side, or one per side for the run")
    args = ap.parse_args()
    import tempfile
    with tempfile.TemporaryDirectory(prefix="dlci-throughput-") as tmp:
        report = []
        for t in args.targets.split(","):
            def stores(side, t=t):
                return os.path.join(tmp, side if args.store == "shared" else f"{side}-{t}")
            report.append(one_target(t, args.source, args.count, args.workers,
                                     0 if args.no_naive else args.naive_count, stores, not args.no_as_filed))
            report[-1]["store"] = args.store
    for r in report:
        print(f"{r['target']}: batched {r['engine_batched']['valid_per_min']} valid/min, engine "
              f"{r['engine']['valid_per_min']}, naive {(r['naive_process_per_test'] or {}).get('valid_per_min')}"
              f" -> {r['batched_over_engine']}x (as filed {(r['engine_as_filed'] or {}).get('valid_per_min')}"
              f" -> {r['batched_over_engine_as_filed']}x; ceilings {r['ceiling_over_engine']}x,"
              f" {r['ceiling_over_engine_as_filed']}x); same statuses: {r['same_statuses']}", file=sys.stderr)
    print(json.dumps(report if len(report) > 1 else report[0], indent=2))


if __name__ == "__main__":
    main()
