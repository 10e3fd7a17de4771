"""Reduction: every finding's representative instance reduced (dlci.reduce) in sandboxed workers, side by side with
the unreduced baseline — elements, inputs, parameters, rank, reproducer size, and whether each reproducer still
reproduces alone in a fresh interpreter.

    .venv/bin/python benchmarks/reduction.py [--section single|multi|all] [--run DIR] [--multi-run DIR]
                                             [--budget 60] [--workers 2]

single (the findings of a campaign): without --run it first runs a short real campaign (`dlci test --ops
avg_pool2d,elu,softplus --targets tvm.from_exported_program,tvm.from_fx,openvino.pytorch --budget 120
--limit-per-op 4`). Instances are found by id in the sources' harvest caches (``$DLCI_CACHE_DIR`` or ~/.cache/dlci).

multi (models with several operators, dlci.reduce.graph): today's ONNX node tests hold no multi-node case without a
single-node form, so the multi-operator failures are built: (a) every ONNX node-test failure of an ONNX campaign
(without --multi-run: `dlci test --sources onnx_node --ops MULTI_OPS --targets onnxruntime,tvm.from_onnx,
openvino.onnx --budget 120 --no-reduce`) with its node embedded in a value-preserving graph (Identity and Reshape
on every input, Identity, Neg, Neg on every output, a Sigmoid side branch: 7-16 operators), run whole to get the
signature the campaign would see; (b) three hand-built graphs around real bugs (ONNX Runtime's MaxUnpool among 11
operators; TVM's MaxUnpool fed by Shape, which needs both; TVM's MaxUnpool fed by Shape and two Casts). Each is
reduced and both reproducers (whole graph, reduced) are run alone.
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
MULTI_OPS = "MaxUnpool,Col2Im,NonMaxSuppression,RoiAlign,LayerNormalization,ConvInteger"
MULTI_CAMPAIGN = ["--sources", "onnx_node", "--ops", MULTI_OPS,
                  "--targets", "onnxruntime,tvm.from_onnx,openvino.onnx", "--budget", "120", "--no-reduce",
                  "--no-repro-check"]
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


def run_campaign(out: Path, campaign: list[str] = DEFAULT_CAMPAIGN) -> None:
    cmd = [sys.executable, "-m", "dlci", "test", *campaign, "--out", str(out)]
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
    ap.add_argument("--section", choices=("single", "multi", "all"), default="all")
    ap.add_argument("--run", type=Path, help="the --out of a finished `dlci test` run (default: run a short one)")
    ap.add_argument("--multi-run", type=Path, help="the --out of a finished ONNX `dlci test` run for the "
                                                   "multi-operator section (default: run one)")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per reduction")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, help="where the reproducers go (default: a temp dir)")
    args = ap.parse_args()
    work = args.out or Path(tempfile.mkdtemp(prefix="dlci-reduction-"))
    work.mkdir(parents=True, exist_ok=True)
    doc = {"budget_per_reduction_s": args.budget, "workers": args.workers, "reproducers": str(work)}
    if args.section in ("single", "all"):
        doc.update(single_section(args, work))
    if args.section in ("multi", "all"):
        doc["multi_operator"] = multi_section(args, work / "multi")
    print(json.dumps(doc, indent=2))


def single_section(args, work: Path) -> dict:
    from dlci.exec import Engine
    from dlci.findings.repro import check_repro
    from dlci.reduce import engine_runner, reduce_instance
    from dlci.targets import get

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
    return {"run": str(run_dir), "campaign_s": campaign_s, "totals": totals, "findings": rows}



# -- multi-operator models (dlci.reduce.graph) -------------------------------------------------------------

def embed(inst: Instance) -> Instance | None:
    """A single-node ONNX instance inside a value-preserving graph: Identity then Reshape (to its own shape) on
    every input, Identity, Neg, Neg (Identity, Identity for unsigned and bool values) on every output, and a
    Sigmoid of the first float input as an extra output. The node sees the very arrays it saw alone."""
    import onnx
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from dlci.models.onnx_io import feed_names, instance_from_model, load_onnx
    model = load_onnx(inst.arrays)
    if len(model.graph.node) != 1 or model.functions:
        return None
    g = model.graph
    node = onnx.NodeProto()
    node.CopyFrom(g.node[0])
    feeds = feed_names(model)
    xs = inst.input_arrays()
    nodes, inits = [], list(g.initializer)
    renamed = {}
    for name, a in zip(feeds, xs):
        nodes.append(h.make_node("Identity", [name], [f"{name}__id"]))
        inits.append(nh.from_array(np.array(a.shape, np.int64), f"{name}__shape"))
        nodes.append(h.make_node("Reshape", [f"{name}__id", f"{name}__shape"], [f"{name}__in"]))
        renamed[name] = f"{name}__in"
    for j, x in enumerate(node.input):
        node.input[j] = renamed.get(x, x)
    outs = [o.name for o in g.output]
    for j, x in enumerate(node.output):
        if x in outs:
            node.output[j] = f"{x}__raw"
    nodes.append(node)
    out_vis = list(g.output)
    for o in g.output:
        signed = o.type.tensor_type.elem_type in (1, 3, 5, 6, 7, 10, 11, 16) if o.type.HasField("tensor_type") \
            else False  # float, int8..int64, float16, double, bfloat16: Neg is exact there
        step = "Neg" if signed else "Identity"
        nodes += [h.make_node("Identity", [f"{o.name}__raw"], [f"{o.name}__id"]),
                  h.make_node(step, [f"{o.name}__id"], [f"{o.name}__n"]),
                  h.make_node(step, [f"{o.name}__n"], [o.name])]
    float_feed = next((n for n, a in zip(feeds, xs) if a.dtype in (np.float32, np.float64)), None)
    if float_feed is not None:
        nodes.append(h.make_node("Sigmoid", [float_feed], ["side"]))
        a = xs[feeds.index(float_feed)]
        out_vis.append(h.make_tensor_value_info("side", h.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
    graph = h.make_graph(nodes, f"{g.name}_embedded", list(g.input), out_vis, initializer=inits)
    m = h.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    try:
        onnx.checker.check_model(m)
    except Exception:  # noqa: BLE001 - an op this embedding does not fit: left out
        return None
    return instance_from_model(m, xs, op=inst.op, source=inst.origin.source, test=inst.origin.test + " (embedded)",
                               seed=inst.seed)


def built_graphs() -> list[tuple[str, str, Instance]]:
    """(name, target, instance): multi-operator graphs around real bugs of today's releases."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from dlci.models.onnx_io import instance_from_model

    def const(name, value):
        return h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(value), name + "_value"))

    rng = np.random.default_rng(0)
    opset = [h.make_opsetid("", 13)]
    chain = [h.make_node("Relu", ["x"], ["a"]),
             h.make_node("MaxPool", ["a"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             const("two", np.float32(2.0)), h.make_node("Mul", ["p", "two"], ["q"]),
             h.make_node("Shape", ["z"], ["s"]),
             h.make_node("MaxUnpool", ["q", "i", "s"], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Sigmoid", ["u"], ["v"]), h.make_node("Add", ["v", "z"], ["w"]),
             h.make_node("Identity", ["w"], ["w2"]), const("flat", np.array([1, 25], np.int64)),
             h.make_node("Reshape", ["w2", "flat"], ["out"])]
    g = h.make_graph(chain, "unpool_chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4]),
                                             h.make_tensor_value_info("z", T.FLOAT, [1, 1, 5, 5])],
                     [h.make_tensor_value_info("out", T.FLOAT, [1, 25])])
    out = [("ort_maxunpool_chain", "onnxruntime", instance_from_model(
        h.make_model(g, opset_imports=opset), [rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
                                               rng.standard_normal((1, 1, 5, 5)).astype(np.float32)],
        op="onnx::MaxUnpool", source="built", test="unpool_chain"))]
    for name, middle in (("tvm_maxunpool_shape", []),
                         ("tvm_maxunpool_shape_casts", [h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
                                                        h.make_node("Cast", ["sf"], ["s2"], to=T.INT64)])):
        shape_value = middle[-1].output[0] if middle else "s"
        nodes = [h.make_node("Abs", ["p"], ["pa"]), h.make_node("Neg", ["pa"], ["pn"]),
                 h.make_node("Shape", ["z"], ["s"]), *middle,
                 h.make_node("MaxUnpool", ["pn", "i", shape_value], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
                 h.make_node("Relu", ["z"], ["zr"]), h.make_node("Add", ["u", "zr"], ["w"]),
                 h.make_node("Identity", ["w"], ["w2"]), h.make_node("Tanh", ["w2"], ["out"])]
        g = h.make_graph(nodes, name, [h.make_tensor_value_info("p", T.FLOAT, [1, 1, 2, 2]),
                                       h.make_tensor_value_info("i", T.INT64, [1, 1, 2, 2]),
                                       h.make_tensor_value_info("z", T.FLOAT, [1, 1, 5, 5])],
                         [h.make_tensor_value_info("out", T.FLOAT, [1, 1, 5, 5])])
        xs = [rng.standard_normal((1, 1, 2, 2)).astype(np.float32),
              np.array([5, 7, 13, 15], np.int64).reshape(1, 1, 2, 2),
              rng.standard_normal((1, 1, 5, 5)).astype(np.float32)]
        out.append((name, "tvm.from_onnx", instance_from_model(h.make_model(g, opset_imports=opset), xs,
                                                               op="onnx::MaxUnpool", source="built", test=name)))
    return out


def finding_for(fid: str, target_name: str, inst: Instance, outcome: dict, sig: str) -> F.Finding:
    """The finding a campaign would make of this failing outcome (for the reproducer)."""
    from dlci.outcome import Outcome
    from dlci.targets import get
    o = Outcome.from_dict(outcome)
    target = get(target_name)
    return F.Finding(id=fid, oracle=target.oracle_of(o), operator=inst.op, target=target_name,
                     target_version=target.version(),
                     symptom=o.symptom, stage=o.stage, signature=sig, message=(o.message or "")[:2000],
                     instance_id=inst.id, origin=dataclasses.asdict(inst.origin), distance=o.distance,
                     traceback=(o.traceback or "")[-4000:], confirmed=True)


def model_lines(inst: Instance) -> int:
    """Lines of the model in ONNX's textual form (the reproducer embeds it as one string: its line count does not
    show how big the graph is)."""
    import onnx.printer
    from dlci.models.onnx_io import load_onnx
    return len(onnx.printer.to_text(load_onnx(inst.arrays)).splitlines())


def multi_section(args, work: Path) -> dict:
    from dlci.exec import Engine
    from dlci.findings.repro import check_repro
    from dlci.outcome import Outcome
    from dlci.models.onnx_io import load_onnx
    from dlci.reduce import engine_runner, reduce_instance
    from dlci.targets import get

    work.mkdir(parents=True, exist_ok=True)
    run_dir, campaign_s = args.multi_run, None
    if run_dir is None:
        run_dir = work / "run"
        t = time.monotonic()
        run_campaign(run_dir, MULTI_CAMPAIGN)
        campaign_s = round(time.monotonic() - t, 1)
    doc = json.loads((run_dir / "findings.json").read_text())
    fields = {f.name for f in dataclasses.fields(F.Finding)}
    found = [F.Finding(**{k: v for k, v in d.items() if k in fields}) for d in doc["findings"]]
    found = [f for f in found if f.origin.get("source") == "onnx_node"]
    instances = find_instances({f.instance_id for f in found}, {"onnx_node"})
    cases: list[tuple[str, str, Instance | None, str]] = []  # (name, target, instance, how it was made)
    for f in found:
        inst = instances.get(f.instance_id)
        cases.append((f"{f.id}:{f.origin.get('test', '').rsplit(':', 1)[-1]}", f.target,
                      embed(inst) if inst is not None else None, "node test embedded"))
    cases += [(name, target, inst, "built") for name, target, inst in built_graphs()]

    rows, jobs = [], []
    with Engine(workers=args.workers, timeout=120, memory_mb=3000,
                warm_imports=("onnx", "onnxruntime", "tvm", "openvino", "dlci.testcase")) as engine:
        engine.start()
        for k, (name, target_name, inst, how) in enumerate(cases):
            row = {"case": name, "target": target_name, "made": how}
            rows.append(row)
            if inst is None:
                row["error"] = "no multi-operator form (instance not cached, or the embedding does not fit the op)"
                continue
            target = get(target_name)
            run = engine_runner(engine, target_name)
            first = run([inst])[0]
            o = Outcome.from_dict(first)
            if not F.is_failure(o):
                row["error"] = f"the whole graph does not fail ({o.status}: {o.symptom} {o.message[:120]})"
                continue
            sig = F.signature(o, target.modules)
            red = reduce_instance(inst, target_name, sig, run=run, modules=target.modules, budget=args.budget)
            fid = f"g{k:02d}"
            base_f = finding_for(fid, target_name, inst, first, sig)
            base_path, base = repro_stats(base_f, inst, work / "original")
            red_f = finding_for(fid, target_name, red.reduced, red.outcome or first, sig) if red.confirmed \
                else dataclasses.replace(base_f, instance_id=red.reduced.id)
            red_path, reduced = repro_stats(red_f, red.reduced, work / "reduced")
            row.update({"signature": sig, "reduced_operators": [n.op_type for n in
                                                                load_onnx(red.reduced.arrays).graph.node],
                        "before": {**red.before, **base, "model_text_lines": model_lines(inst)},
                        "after": {**red.after, **reduced, "model_text_lines": model_lines(red.reduced)},
                        "reduction_s": round(red.seconds, 2), "candidates_run": red.tried,
                        "confirmed": red.confirmed, "steps": [f"{s['kind']}: {s['what']}" for s in red.steps],
                        "notes": red.notes})
            jobs.append((row, base_path, red_path))

    def check(path):
        return check_repro(path) if path is not None else False

    with ThreadPoolExecutor(max(1, args.workers)) as pool:
        base_ok = list(pool.map(check, [j[1] for j in jobs]))
        red_ok = list(pool.map(check, [j[2] for j in jobs]))
    for (row, _b, _r), b_ok, r_ok in zip(jobs, base_ok, red_ok):
        row["before"]["reproduces_alone"] = b_ok
        row["after"]["reproduces_alone"] = r_ok
    ok = [r for r in rows if "before" in r]
    n = len(ok)
    totals = {
        "cases": len(rows), "reduced": n, "confirmed": sum(r["confirmed"] for r in ok),
        "operators_before_total": sum(r["before"]["operators"] for r in ok),
        "operators_after_total": sum(r["after"]["operators"] for r in ok),
        "median_operators_before": median([r["before"]["operators"] for r in ok]),
        "median_operators_after": median([r["after"]["operators"] for r in ok]),
        "reduced_to_one_operator": sum(r["after"]["operators"] == 1 for r in ok),
        "median_elements_before": median([r["before"]["elements"] for r in ok]),
        "median_elements_after": median([r["after"]["elements"] for r in ok]),
        "median_repro_lines_before": median([r["before"].get("repro_lines") for r in ok]),
        "median_repro_lines_after": median([r["after"].get("repro_lines") for r in ok]),
        "median_model_section_bytes_before": median([r["before"].get("model_section_bytes") for r in ok]),
        "median_model_section_bytes_after": median([r["after"].get("model_section_bytes") for r in ok]),
        "median_model_text_lines_before": median([r["before"]["model_text_lines"] for r in ok]),
        "median_model_text_lines_after": median([r["after"]["model_text_lines"] for r in ok]),
        "median_reduction_s": median([r["reduction_s"] for r in ok]),
        "max_reduction_s": max((r["reduction_s"] for r in ok), default=None),
        "median_candidates_run": median([r["candidates_run"] for r in ok]),
        "share_whole_graph_repro_reproduces_alone": round(sum(r["before"]["reproduces_alone"] for r in ok) / n, 3)
        if n else None,
        "share_reduced_repro_reproduces_alone": round(sum(r["after"]["reproduces_alone"] for r in ok) / n, 3)
        if n else None,
    }
    return {"run": str(run_dir), "campaign_s": campaign_s, "totals": totals, "cases": rows}


if __name__ == "__main__":
    main()
