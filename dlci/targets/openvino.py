"""OpenVINO targets: one per frontend (pytorch, exported program, onnx, tf, tflite); CPU plugin with f32 precision."""
from __future__ import annotations

import os
import re
import tempfile
from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.targets._common import NOT_SUPPORTED
from dlci.targets._openvino_quiet import telemetry_off
from dlci.targets.base import Target, register

# frontends list ops they have no translator for: "-- No conversion rule found for operations: aten::i0";
# the TFLite frontend says "No translator found for BUCKETIZE node."
_NO_RULE = re.compile(r"No conversion rule found for operations?|No translator found for \S+ node")
# the CPU plugin rejecting an op/precision/mode it lacks
_PLUGIN = re.compile(r"Unsupported operation of type|from unsupported opset|doesn't support|"
                     r"Unsupported precision|has unsupported precision", re.I)


telemetry_off()  # before the first conversion


class _OpenVINO(Target):
    package = "openvino"
    modules = ("openvino",)
    test_style = "openvino"
    unsupported_dtypes = ("complex64", "complex128")  # OpenVINO has no complex element type

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        for e in chain(exc):
            msg = str(e)
            if _NO_RULE.search(msg):
                return True
            if stage == "convert" and type(e).__name__ == "OpConversionFailure" and NOT_SUPPORTED.search(msg):
                return True  # a translator that explicitly rejects an attribute value or dtype
            if stage == "compile" and (_PLUGIN.search(msg) or NOT_SUPPORTED.search(msg)):
                return True
        return False

    def unsupported_operators(self, message: str) -> set[str]:
        # "-- No conversion rule found for operations: aten::histc, aten::special_bessel_j0"
        listed = re.search(r"No conversion rule found for operations?: ([^\n]*)", message)
        return {n.strip().split("::")[-1] for n in listed.group(1).split(",")} if listed else set()

    def compile(self, model: Any) -> Any:
        import openvino as ov
        # f32 hint: otherwise this CPU computes in bf16 and every test reports false mismatches
        return ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})

    def run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import ml_dtypes
        import openvino as ov
        req = compiled.create_infer_request()
        res = req.infer([_bf16_tensor(x) if _is_bf16(x) else np.require(x, requirements="C") for x in inputs])
        # copies: the results alias the request's buffers; OpenVINO hands bf16 results over as float16 bit patterns
        return [np.array(res[out], copy=True).view(np.uint16).view(ml_dtypes.bfloat16) if out.get_element_type() == ov.Type.bf16
                else np.array(res[out], copy=True) for out in compiled.outputs]


def _is_bf16(x: np.ndarray) -> bool:
    return x.dtype.name == "bfloat16"  # ml_dtypes' type: numpy has none


def _bf16_tensor(x: np.ndarray) -> Any:
    """An ml_dtypes bfloat16 array as an OpenVINO bf16 tensor (numpy's view of it is taken for float16 otherwise)."""
    import openvino as ov
    return ov.Tensor(np.require(x.view(np.uint16), requirements="C"), ov.Shape(list(x.shape)), ov.Type.bf16)


def static_shapes(model: Any, inputs: Sequence[np.ndarray]) -> Any:
    """Pin dynamic input dims to the test's shapes: the torch frontends leave them dynamic, and the CPU plugin then
    rejects e.g. convolutions with dynamic weights, which would test nothing of the operator."""
    import openvino as ov
    params = model.inputs
    if len(params) == len(inputs) and any(p.get_partial_shape().is_dynamic for p in params):
        model.reshape({p: ov.PartialShape(list(x.shape)) for p, x in zip(params, inputs)})
    return model


def _torch_example(inputs: Sequence[np.ndarray]) -> tuple:
    from dlci.models.convert import np_to_torch
    return tuple(np_to_torch(x) for x in inputs)


@register
class OpenVINOPyTorch(_OpenVINO):
    name = "openvino.pytorch"
    frameworks = ("torch",)
    form = "torch_module"
    batch_size = 16
    reaches = ("openvino:frontend.pytorch.ts", "openvino:ovc", "openvino:cpu", "pytorch:eager", "pytorch:jit")

    options = {"static_shapes": (False,)}  # the inputs left dynamic, as convert_model gives them

    def convert(self, module: Any, inputs: Sequence[np.ndarray]) -> Any:
        import openvino as ov
        model = ov.convert_model(module, example_input=_torch_example(inputs))
        return static_shapes(model, inputs) if self.chosen.get("static_shapes", True) else model


@register
class OpenVINOExportedProgram(_OpenVINO):
    name = "openvino.exported_program"
    frameworks = ("torch",)
    form = "exported_program"
    batch_size = 16  # one export and one conversion per batch
    reaches = ("openvino:frontend.pytorch.fx", "openvino:frontend.pytorch.export", "openvino:ovc", "openvino:cpu",
               "pytorch:eager", "pytorch:export",
               "pytorch:decompositions")

    options = {"static_shapes": (False,)}

    def convert(self, ep: Any, inputs: Sequence[np.ndarray]) -> Any:
        import openvino as ov
        model = ov.convert_model(ep)
        return static_shapes(model, inputs) if self.chosen.get("static_shapes", True) else model


def _via_file(data: bytes, suffix: str) -> Any:
    import openvino as ov
    fd, path = tempfile.mkstemp(suffix=suffix, prefix="dlci-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return ov.convert_model(path)
    finally:
        os.unlink(path)


@register
class OpenVINOONNX(_OpenVINO):
    name = "openvino.onnx"
    frameworks = ("torch", "onnx")
    form = "onnx"
    batch_size = 16
    reaches = ("openvino:frontend.onnx", "openvino:ovc", "openvino:cpu", "pytorch:eager")
    exporters = {"torch": "torch.onnx"}

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        return _via_file(model.SerializeToString(), ".onnx")


@register
class OpenVINOTF(_OpenVINO):
    name = "openvino.tf"
    frameworks = ("keras",)
    form = "saved_model"
    reaches = ("openvino:frontend.tf", "openvino:ovc", "openvino:cpu")

    def convert(self, saved_model: Any, inputs: Sequence[np.ndarray]) -> Any:
        import openvino as ov
        return ov.convert_model(os.fspath(saved_model))


@register
class OpenVINOTFLite(_OpenVINO):
    name = "openvino.tflite"
    frameworks = ("keras", "tflite")
    form = "tflite"
    tflite_outputs = True
    reaches = ("openvino:frontend.tflite", "openvino:ovc", "openvino:cpu", "tensorflow:lite.converter")

    def convert(self, buf: bytes, inputs: Sequence[np.ndarray]) -> Any:
        return _via_file(buf, ".tflite")


@register
class OpenVINOONNXGPU(OpenVINOONNX):
    """The ONNX frontend's model on OpenVINO's GPU plugin (Intel GPUs, through OpenCL), f32 as on the CPU: the GPU
    plugin's default is f16, which would report its rounding as bugs."""
    name = "openvino.onnx.gpu"
    device = "gpu"
    probe = "openvino:GPU"
    reaches = ("openvino:gpu",)
    batch_size = 1  # a device's failure is judged on its own model, as the device oracle expects
    test_style = None

    def compile(self, model: Any) -> Any:
        import openvino as ov
        return ov.Core().compile_model(model, "GPU", {"INFERENCE_PRECISION_HINT": "f32"})

    def device_name(self) -> str:
        import openvino as ov
        try:
            return f"GPU {ov.Core().get_property('GPU', 'FULL_DEVICE_NAME')}"
        except Exception:  # noqa: BLE001 - no GPU plugin device: the test itself said so
            return "GPU"
