"""A second reading of the ONNX specification for generated and reduced graphs.

ONNX's shape inference and its reference implementation accept graphs the specification rules out (a pooling whose
pads exceed its kernel, a convolution whose kernel is wider than its padded input, a per-channel scale of the wrong
length): a target that rejects such a graph, or computes something else on it, is right to. ONNX Runtime with its
graph optimisations off checks those constraints in its kernels; a graph it cannot run, or on which it disagrees with
the reference, is outside the specification (or in a corner the readings disagree on) and is not a test of any
target. The ONNX Runtime *target* runs with its optimisations on: its graph rewrites stay under test; what this
trades away is a crash of an ONNX Runtime kernel on a valid graph, which single-operator tests look for.

A disagreement on the whole graph is checked node by node. When ONNX Runtime without optimisations runs every node
alone on the reference's values and agrees with the reference on each, every operator is inside the specification
and the readings agree on it; and when its whole-graph result also differs from its own nodes run one after the
other (each fed the outputs ONNX Runtime gave the nodes before), the difference is not its rounding accumulating
along the graph (a float32 sum feeding a cosine) but what it does to the graph even with its optimisations off (its
always-on transformers: the casts it inserts around a float16 node without a kernel, and removes again in pairs,
dropping a float16 rounding the graph asks for) — a valid test, of every target.
"""
from __future__ import annotations

import numpy as np


def available() -> bool:
    try:
        import onnxruntime  # noqa: F401
        return True
    except ImportError:
        return False


def outside_spec(model, inputs: list[np.ndarray], ref: list[np.ndarray], ref64: list[np.ndarray] | None
                 ) -> str | None:
    """Why ``model`` on ``inputs`` is not a valid test (None when ONNX Runtime without optimisations runs it and
    agrees with the reference ``ref``/``ref64`` by the oracle)."""
    import onnxruntime as ort
    from dlci.oracles.compare import compare_outputs
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    so.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        got = sess.run(None, dict(zip(names, inputs)))
    except Exception as e:  # noqa: BLE001
        return f"ONNX Runtime without optimisations rejects it: {str(e).splitlines()[0][:160]}"
    verdict = compare_outputs([np.asarray(g) for g in got], list(ref), ref64)
    if verdict is not None and not (_changed_as_a_graph(model, inputs, got, so)
                                    and _well_conditioned(model, inputs, verdict, ref, ref64)):
        return f"ONNX Runtime without optimisations and the reference disagree on it: {verdict['message'][:160]}"
    return None


def _well_conditioned(model, inputs, verdict: dict, ref, ref64) -> bool:
    """Whether the disagreeing output is one the oracle can judge: float64 evaluations of the graph with inputs and
    weights moved by a rounding's worth all pass it (dlci.oracles.localise's conditioning check), so a difference
    that grew from each node's own rounding is not taken for the graph's."""
    from dlci.oracles.compare import compare_one
    from dlci.oracles.localise import ENSEMBLE, PERTURBATION, _perturbed
    from dlci.reduce.graph import instance_from_model
    i = (verdict.get("distance") or {}).get("output", 0) or 0
    if ref64 is None or i >= len(ref):
        return False
    try:
        members = _perturbed(instance_from_model(model, list(inputs)), i, ENSEMBLE, PERTURBATION,
                             np.random.default_rng(7))
    except Exception:  # noqa: BLE001 - no float64 evaluation: conditioning unknown, the disagreement stands
        return False
    r, r64 = np.asarray(ref[i]), np.asarray(ref64[i])
    return bool(members) and all(
        compare_one(np.asarray(m).astype(r.dtype) if r.dtype.kind == "f" else np.asarray(m), r, r64) is None
        for m in members)


def _changed_as_a_graph(model, inputs: list[np.ndarray], got: list, so) -> bool:
    """Whether ONNX Runtime (session options ``so``) runs each node of ``model`` alone, fed the reference's values,
    agreeing with the reference on its outputs, while its whole-graph outputs ``got`` differ from its nodes run one
    after the other on its own values. False for a node it cannot run alone or that holds a subgraph."""
    import onnxruntime as ort
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    from dlci.models import onnx_input_names
    from dlci.oracles.compare import compare_outputs
    try:
        values = dict(zip(onnx_input_names(model), inputs))
        values.update(ReferenceEvaluator(model).run(None, dict(values), intermediate=True))
        chained = dict(values)  # ONNX Runtime's own values, node after node
        for node in model.graph.node:
            if any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
                return False
            ins = list(dict.fromkeys(x for x in node.input if x))
            outs = [x for x in node.output if x]
            arrays = [np.asarray(values[x]) for x in ins]
            expected = [np.asarray(values[x]) for x in outs]
            if not all(isinstance(a, np.ndarray) and a.dtype.kind in "biufc" for a in arrays + expected):
                return False

            def info(name, a):
                return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            graph = helper.make_graph([node], "node", [info(x, a) for x, a in zip(ins, arrays)],
                                      [info(x, a) for x, a in zip(outs, expected)])
            alone = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version,
                                      functions=list(model.functions))
            sess = ort.InferenceSession(alone.SerializeToString(), so, providers=["CPUExecutionProvider"])
            mine = sess.run(None, dict(zip(ins, arrays)))
            if compare_outputs([np.asarray(g) for g in mine], expected, None) is not None:
                return False
            chained.update(zip(outs, sess.run(None, {x: np.asarray(chained[x]) for x in ins})))
        outputs = [np.asarray(chained[o.name]) for o in model.graph.output]
    except Exception:  # noqa: BLE001 - a node that cannot be checked alone: the disagreement stands
        return False
    # its own node-by-node result as the float64 arbiter too: the tolerance then allows a difference from it
    # of no more than the oracle's relative floor
    as64 = [o.astype(np.float64) if o.dtype.kind == "f" else o for o in outputs]
    return compare_outputs([np.asarray(g) for g in got], outputs, as64) is not None
