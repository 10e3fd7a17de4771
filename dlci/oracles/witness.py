"""A second reading of the ONNX specification for generated and reduced graphs.

ONNX's shape inference and its reference implementation accept graphs the specification rules out (a pooling whose
pads exceed its kernel, a convolution whose kernel is wider than its padded input, a per-channel scale of the wrong
length): a target that rejects such a graph, or computes something else on it, is right to. ONNX Runtime with its
graph optimisations off checks those constraints in its kernels; a graph it cannot run, or on which it disagrees with
the reference, is outside the specification (or in a corner the readings disagree on) and is not a test of any
target. The ONNX Runtime *target* runs with its optimisations on: its graph rewrites stay under test; what this
trades away is a crash of an ONNX Runtime kernel on a valid graph, which single-operator tests look for.
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
    if verdict is not None:
        return f"ONNX Runtime without optimisations and the reference disagree on it: {verdict['message'][:160]}"
    return None
