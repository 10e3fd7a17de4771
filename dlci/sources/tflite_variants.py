"""``tflite_variants``: TensorFlow-side instances converted the ways deployed TFLite models are, quantized.

TFLite converters (TVM's ``from_tflite``, OpenVINO's TFLite frontend) take another path for every quantized tensor:
the scale and zero point of each input and output, requantization between them, ``QUANTIZE``/``DEQUANTIZE`` at the
model's edges, weights stored in int8 or float16. A float model built from a keras layer or a TensorFlow op never
reaches those branches. Per base instance (``keras_tests``, ``tf_ops``) with floating-point inputs, the kinds:

- ``int8``: full-integer post-training quantization (int8 activations and weights, int8 model inputs and outputs),
  calibrated on the instance's own inputs;
- ``uint8_io``: the same model with uint8 inputs and outputs (the converter adds the requantizing edge ops, the
  uint8 models older toolchains produced);
- ``float16``: float16 weights dequantized in the graph (``DEQUANTIZE`` feeding the op; only where the op has
  constant weights).

Each variant is a ``tflite`` instance: the converter's flatbuffer (array ``model``), the inputs quantized with the
model's own input scale and zero point, in the model's input order, and the TFLite interpreter's outputs as the
expected ones (the format's own reference; quantized outputs are compared within one quantization step).
A conversion that fails, a model without the kind's quantized tensors, or one the interpreter cannot run is not a
case: dropped and counted.
"""
from __future__ import annotations

import warnings
from typing import Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.sources import register
from dlci.sources._common import dist_version
from dlci.sources.variant_base import VariantSource

KINDS = ("int8", "uint8_io", "float16")
EDGE_OPS = {"QUANTIZE", "DEQUANTIZE", "DELEGATE"}
MAX_CALIBRATED = 1e4  # largest float input magnitude a quantized variant is calibrated on


def _representative(arrays: list[np.ndarray]):
    """Calibration samples: the instance's inputs and two scaled copies, so that its own values sit inside the
    calibrated ranges rather than on their edges."""
    def gen():
        for scale in (1.0, 1.1, 0.9):
            yield [(a * scale).astype(a.dtype) if a.dtype.kind == "f" else a for a in arrays]
    return gen


def convert(model, arrays: list[np.ndarray], kind: str) -> bytes:
    """The keras model converted to TFLite the way ``kind`` says; exceptions propagate."""
    import tensorflow as tf
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if kind == "float16":
        conv.target_spec.supported_types = [tf.float16]
    else:
        conv.representative_dataset = _representative(arrays)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        io = tf.uint8 if kind == "uint8_io" else tf.int8
        conv.inference_input_type = conv.inference_output_type = io
    return bytes(conv.convert())


def quantize(x: np.ndarray, detail: dict) -> np.ndarray:
    """An input as the model takes it: a float array quantized with the input's scale and zero point."""
    dtype = np.dtype(detail["dtype"])
    scale, zero = detail["quantization"]
    if dtype.kind not in "iu" or x.dtype.kind != "f" or not scale:
        return np.asarray(x, dtype=dtype)
    info = np.iinfo(dtype)
    return np.clip(np.round(x / scale) + zero, info.min, info.max).astype(dtype)


def op_names(interp) -> list[str]:
    return [d["op_name"] for d in interp._get_ops_details()]


@register
class TFLiteVariantSource(VariantSource):
    name = "tflite_variants"
    framework = "tflite"
    description = ("keras layers and TensorFlow ops as quantized TFLite models (int8, uint8 inputs/outputs, float16 "
                   "weights), the interpreter's outputs expected")
    default_limit_per_op = None
    bases = ("keras_tests", "tf_ops")
    kinds = KINDS
    variants_per_op = 6

    def library_versions(self) -> dict[str, str]:
        return {"tensorflow": dist_version("tensorflow-cpu") or dist_version("tensorflow")}

    def accepts(self, inst: Instance) -> bool:
        # calibration needs the values a deployed model sees: finite, of moderate size (the boundary domains of
        # tf_ops, huge or subnormal, make degenerate scales that no deployment has)
        return inst.framework == "keras" and any(s.dtype == "float32" for s in inst.inputs) and all(
            s.rank >= 1 and s.dtype in ("float32", "int32", "int64", "bool") for s in inst.inputs) and all(
            np.isfinite(a).all() and (not a.size or np.abs(a).max() <= MAX_CALIBRATED)
            for a in inst.input_arrays() if a.dtype.kind == "f")

    def candidates(self, inst: Instance) -> Iterator[tuple[str, str]]:
        for kind in KINDS:
            yield kind, kind

    def build(self, inst: Instance, kind: str, payload) -> Instance:
        from dlci import models
        from dlci.targets.tensorflow import tflite_input_order
        arrays = inst.input_arrays()
        try:
            with warnings.catch_warnings(), models.quiet():
                warnings.simplefilter("ignore")
                buf = convert(models.build(inst, "keras_model"), arrays, kind)
                import tensorflow as tf
                interp = tf.lite.Interpreter(model_content=buf, num_threads=1)
                interp.allocate_tensors()
        except Exception as e:
            raise ValueError(f"{kind}:not-convertible") from e
        ops = op_names(interp)
        if kind == "float16" and "DEQUANTIZE" not in ops:
            raise ValueError("float16:no-float16-weights")  # no constant weights: the float model again
        if not set(ops) - EDGE_OPS:
            raise ValueError(f"{kind}:folded")  # the converter computed the op away
        details = interp.get_input_details()
        if kind != "float16" and not any(np.dtype(d["dtype"]).kind in "iu" and d["quantization"][0]
                                         for d in details):
            raise ValueError(f"{kind}:not-quantized")
        order = tflite_input_order(details, len(arrays))
        by_position = {k: i for i, k in enumerate(order)}
        if sorted(by_position) != list(range(len(details))):
            raise ValueError(f"{kind}:inputs-unmatched")
        inputs = [quantize(arrays[by_position[k]], details[k]) for k in range(len(details))]
        try:
            with models.quiet():
                expected = models.tflite_outputs(buf, inputs)
        except Exception as e:
            raise ValueError(f"{kind}:interpreter-failed") from e
        if any(e.dtype.kind not in "biuf" for e in expected):
            raise ValueError(f"{kind}:unstorable-output")
        store = {f"in:{i}": x for i, x in enumerate(inputs)}
        store.update({f"expected:{i}": e for i, e in enumerate(expected)})
        store["model"] = np.frombuffer(buf, dtype=np.uint8).copy()
        quantized = [op for op in ops if op not in EDGE_OPS]
        detail = f"{kind}: {', '.join(dict.fromkeys(quantized))}"
        return Instance(op=inst.op, framework="tflite", call={"kind": "tflite_model", "variant": kind},
                        inputs=[TensorSpec.of(x) for x in inputs], params={**inst.params, "quantization": kind},
                        origin=Origin("tflite_variants", f"{inst.origin.test} [{detail}]", inst.origin.library),
                        seed=inst.seed, arrays=store)
