"""tf2onnx: a TensorFlow/keras instance converted to ONNX by ``tf2onnx.convert.from_function`` and run by ONNX
Runtime (CPU), judged against TensorFlow's own output (the keras reference, with its fp64 recomputation).

The keras model is called inside a ``tf.function`` with the instance's static input signature (tf2onnx 1.17's
``from_keras`` reads Keras 2 internals: with Keras 3 it fails on every model, ``KeyError: 'keras_tensor'``), converted
at tf2onnx's default opset. "Unsupported" is a TensorFlow op tf2onnx has no handler for
(it logs ``Unsupported ops: Counter(...)`` and leaves the op in the graph), a handler's statement of its own limit
("... is not supported"), or ONNX Runtime's NOT_IMPLEMENTED for what tf2onnx wrote.
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.targets._common import NOT_SUPPORTED, raised_in
from dlci.targets.base import Target, register
from dlci.targets.onnxruntime import ort_run, ort_session, ort_unsupported


class UnsupportedOps(Exception):
    """tf2onnx has no handler for some TensorFlow ops of the graph (it said so and left them unconverted)."""


class _Unmapped(logging.Handler):
    """Catches tf2onnx's "Unsupported ops: Counter({...})" record while a conversion runs."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.ops: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Unsupported ops") and record.args:
            found = record.args[0] if isinstance(record.args, tuple) else record.args
            self.ops += [str(op) for op in dict(found)]


def tensor_specs(inputs: Sequence[np.ndarray]) -> list:
    """The static input signature of the instance's keras model (its inputs are named in0, in1, ...)."""
    import tensorflow as tf
    return [tf.TensorSpec(x.shape, tf.dtypes.as_dtype(str(x.dtype)), name=f"in{i}") for i, x in enumerate(inputs)]


@register
class TF2ONNX(Target):
    name = "tf2onnx"
    frameworks = ("keras",)
    form = "keras_model"
    package = "tf2onnx"
    modules = ("tf2onnx",)
    reaches = ("tf2onnx:tf",)
    warm_imports = ("tensorflow",)

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        if stage != "convert":
            return ort_unsupported(exc)
        for e in chain(exc):
            if isinstance(e, UnsupportedOps):
                return True
            # a handler's own limit: utils.make_sure(cond, "... is not supported") and friends
            if raised_in(e, ("tf2onnx",)) and NOT_SUPPORTED.search(str(e)):
                return True
        return False

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        import tensorflow as tf
        import tf2onnx
        fn = tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0], training=False))
        caught = _Unmapped()
        logger = logging.getLogger("tf2onnx")
        logger.addHandler(caught)
        try:
            proto, _ = tf2onnx.convert.from_function(fn, input_signature=tensor_specs(inputs))
        finally:
            logger.removeHandler(caught)
        if caught.ops:
            raise UnsupportedOps(f"tf2onnx has no handler for the TensorFlow op(s) {', '.join(sorted(caught.ops))}")
        return proto

    def compile(self, model: Any) -> Any:
        return ort_session(model)

    def run(self, sess: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return ort_run(sess, inputs)
