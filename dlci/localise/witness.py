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

from dlci import models
from dlci.models.references import reference


def spec_violation(instance) -> str | None:
    """For a generated or reduced graph (an ``onnx_model`` instance marked ``localise``): why it is outside the ONNX
    specification, or None; cached with the reference. Other instances: None."""
    if instance.framework != "onnx" or not instance.call.get("localise") or instance.origin.source == "model":
        return None  # a user's model is what they run: judged as it is, not held to a second reading

    def make():
        if not available():
            return None
        ref, ref64 = reference(instance)
        return outside_spec(models.build(instance, "onnx"), instance.input_arrays(), ref, ref64)
    return models.cached(instance, "spec", make)


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
    """Whether the disagreeing output is one the oracle can judge (dlci.localise's conditioning check:
    float64 evaluations of the graph with inputs, weights and intermediate values moved by a rounding's worth all
    pass it), so a difference that grew from each node's own rounding is not taken for the graph's."""
    from dlci.localise import ill_conditioned
    from dlci.models.onnx_io import instance_from_model
    i = (verdict.get("distance") or {}).get("output", 0) or 0
    if ref64 is None or i >= len(ref):
        return False
    return ill_conditioned(instance_from_model(model, list(inputs)), i, ref[i], ref64[i], 7) == ""


def _changed_as_a_graph(model, inputs: list[np.ndarray], got: list, so) -> bool:
    """Whether ONNX Runtime (session options ``so``) runs each node of ``model`` alone, fed the reference's values,
    agreeing with the reference on its outputs, while its whole-graph outputs ``got`` differ from its nodes run one
    after the other on its own values. False for a node it cannot run alone or that holds a subgraph."""
    import onnxruntime as ort
    from dlci.models.onnx_io import feed_names, instance_from_model
    from dlci.oracles.compare import compare_outputs
    from dlci.reduce.graph import _Base, cut_model
    try:
        base = _Base(instance_from_model(model, list(inputs)))
        values = base.values()
        chained = dict(zip(base.feeds, inputs))  # ONNX Runtime's own values, node after node
        for k, node in enumerate(base.nodes):
            if base.implicit[k] or any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
                return False
            alone, arrays = cut_model(base, {k})  # the node fed from the reference (constants folded in)
            feeds, outs = feed_names(alone), [o.name for o in alone.graph.output]
            sess = ort.InferenceSession(alone.SerializeToString(), so, providers=["CPUExecutionProvider"])
            mine = sess.run(None, {x: arrays[f"in:{i}"] for i, x in enumerate(feeds)})
            if compare_outputs([np.asarray(g) for g in mine], [np.asarray(values[x]) for x in outs], None) is not None:
                return False
            chained.update(zip(outs, sess.run(None, {x: np.asarray(chained.get(x, values[x])) for x in feeds})))
        outputs = [np.asarray(chained[o]) for o in base.outputs]
    except Exception:  # noqa: BLE001 - a node that cannot be checked alone: the disagreement stands
        return False
    # its own node-by-node result as the float64 arbiter too: the tolerance then allows a difference from it
    # of no more than the oracle's relative floor
    as64 = [o.astype(np.float64) if o.dtype.kind == "f" else o for o in outputs]
    return compare_outputs([np.asarray(g) for g in got], outputs, as64) is not None
