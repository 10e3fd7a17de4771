"""TensorFlow's own compilers for keras instances: tf.lite (TFLiteConverter + interpreter) and tf.xla."""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.models.convert import flatten_outputs
from dlci.targets.base import Target, register


def tflite_input_order(details: list[dict], n: int) -> list[int]:
    """Map the model's input i (keras Input named in<i>) to the interpreter's input detail index."""
    order = []
    for i in range(n):
        pat = re.compile(rf"(^|[_:/])in{i}(:|$|_)")
        hits = [k for k, d in enumerate(details) if pat.search(d["name"])]
        order.append(hits[0] if len(hits) == 1 else i)
    return order


class _Lite:
    def __init__(self, interp):
        self.interp = interp


@register
class TFLite(Target):
    name = "tf.lite"
    frameworks = ("keras",)
    form = "keras_model"
    tflite_outputs = True
    package = "tensorflow-cpu"
    modules = ("tensorflow.lite",)
    reaches = ("tensorflow:lite.converter", "tensorflow:lite.kernels")
    test_style = "tensorflow"

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        for e in chain(exc):
            msg = str(e)
            # the converter refuses ops that are neither TFLite builtins nor allowed select-TF ops
            if "are not supported by TensorFlow Lite" in msg or "is neither a custom op nor a flex op" in msg \
                    or "did not find any TFLite kernel" in msg.lower() or "Didn't find op for builtin" in msg:
                return True
        return False

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        from dlci.models import keras_to_tflite
        return keras_to_tflite(model)

    def compile(self, buf: bytes) -> Any:
        import tensorflow as tf
        interp = tf.lite.Interpreter(model_content=buf, num_threads=1)
        interp.allocate_tensors()
        return _Lite(interp)

    def run(self, lite: _Lite, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        interp = lite.interp
        details = interp.get_input_details()
        for i, k in enumerate(tflite_input_order(details, len(inputs))):
            interp.set_tensor(details[k]["index"], np.require(inputs[i], requirements="C"))
        interp.invoke()
        return [np.array(interp.get_tensor(d["index"]), copy=True) for d in interp.get_output_details()]


class _Xla:
    def __init__(self, fn, inputs):
        self.fn, self.inputs = fn, inputs


@register
class TFXLA(Target):
    name = "tf.xla"
    frameworks = ("keras",)
    form = "keras_model"
    package = "tensorflow-cpu"
    modules = ("tensorflow.compiler", "tensorflow.python.eager")
    reaches = ("tensorflow:xla",)
    test_style = "tensorflow"

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        for e in chain(exc):
            msg = str(e)
            # XLA has no kernel for the op: "Detected unsupported operations when trying to compile graph"
            if "unsupported operations when trying to compile" in msg or (
                    "No registered" in msg and "XLA_CPU_JIT" in msg):
                return True
        return False

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        import tensorflow as tf
        return _Xla(tf.function(lambda *xs: model(list(xs) if len(xs) > 1 else xs[0], training=False),
                                jit_compile=True), inputs)

    def compile(self, x: _Xla) -> Any:
        x.fn(*x.inputs)  # tracing + XLA compilation happen on the first call
        return x

    def run(self, x: _Xla, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return flatten_outputs(x.fn(*inputs))
