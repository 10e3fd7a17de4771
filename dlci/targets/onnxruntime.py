"""ONNX Runtime (CPU execution provider, default graph optimizations) on the ONNX form."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dlci.targets._common import NOT_SUPPORTED, chain
from dlci.targets.base import Target, register


def ort_unsupported(exc: BaseException) -> bool:
    """ORT's NOT_IMPLEMENTED status: no kernel for this op/opset/dtype ("Could not find an implementation ...")."""
    for e in chain(exc):
        msg = str(e)
        if type(e).__name__ == "NotImplemented" or "NOT_IMPLEMENTED" in msg \
                or "Could not find an implementation" in msg:
            return True
        # an op (e.g. ai.onnx.preview.training::Adam) or an opset newer than this ORT release knows
        if "is not a registered function/op" in msg or "only *guarantees* support for models stamped with" in msg \
                or "Unsupported model IR version" in msg or "Unrecognized attribute:" in msg:
            return True  # ("Unrecognized attribute": one added to the op in an opset newer than this release)
        # a kernel refusing an attribute/input form it does not implement ("Non per-tensor quantization is not
        # supported"), as opposed to an internal failure
        if NOT_SUPPORTED.search(msg):
            return True
    return False


def ort_session(model: Any) -> Any:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1  # workers share few cores
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_run(sess: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(inputs):
        raise ValueError(f"session has {len(names)} inputs, test has {len(inputs)}")
    return [np.asarray(o) for o in sess.run(None, dict(zip(names, inputs)))]


@register
class ONNXRuntime(Target):
    name = "onnxruntime"
    # torch instances reach ORT through the torch.onnx target (the same export + session): not run twice
    frameworks = ("onnx",)
    form = "onnx"
    package = "onnxruntime"
    modules = ("onnxruntime",)
    reaches = ("onnxruntime:cpu",)
    test_style = "onnxruntime"

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return ort_unsupported(exc)

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        return model  # ORT has no separate conversion: the session build is its compile

    def compile(self, model: Any) -> Any:
        return ort_session(model)

    def run(self, sess: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return ort_run(sess, inputs)
