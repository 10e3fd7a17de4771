"""ONNX Runtime on the ONNX form, default graph optimizations: the CPU execution provider (``onnxruntime``) and the
CUDA execution provider of onnxruntime-gpu (``onnxruntime.cuda``: every node on CUDA or the session is refused, so a
kernel the provider lacks is unsupported rather than silently run by the CPU)."""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.targets._common import NOT_SUPPORTED
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


# the session refuses a graph some of whose nodes only the CPU provider can run (session.disable_cpu_ep_fallback)
CPU_FALLBACK_REFUSED = "fallback to CPU EP has been explicitly disabled"


def ort_session(model: Any, device: str = "cpu") -> Any:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1  # workers share few cores
    so.inter_op_num_threads = 1
    if device == "cpu":
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    if hasattr(ort, "preload_dlls"):  # CUDA and cuDNN from the pip packages CUDA torch installed
        ort.preload_dlls()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")  # test the CUDA kernels, not the CPU's
    limit = os.environ.get("DLCI_GPU_MEMORY_MB", "")  # the worker's share of device memory
    options = {"gpu_mem_limit": str(int(limit) << 20)} if limit.isdigit() else {}
    return ort.InferenceSession(model.SerializeToString(), so, providers=[("CUDAExecutionProvider", options)])


def cuda_sticky_error(exc: BaseException) -> str | None:
    """ORT's CUDA provider reports a poisoned context as a CUDA failure status."""
    from dlci.targets._cuda import sticky_cuda_error
    return sticky_cuda_error(exc)


def cuda_device_name() -> str:
    """The GPU the CUDA provider runs on (device 0 of the visible ones), as nvidia-smi names it."""
    from dlci.devices import nvidia_names
    names = nvidia_names()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    first = visible.split(",")[0] if visible else "0"
    name = next((n for n in names if n.startswith(f"cuda:{first} ")), names[0] if names else "cuda")
    return name + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible else "")


def ort_run(sess: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(inputs):
        raise ValueError(f"session has {len(names)} inputs, test has {len(inputs)}")
    # a complex tensor reaches a float input as (real, imaginary) pairs: how torch.onnx writes complex tensors (the
    # reference's complex outputs are read back the same way: dlci.testcase._as_output_array)
    inputs = [np.stack([x.real, x.imag], axis=-1).astype(np.float32 if i.type == "tensor(float)" else np.float64)
              if x.dtype.kind == "c" and i.type in ("tensor(float)", "tensor(double)") else x
              for i, x in zip(sess.get_inputs(), inputs)]
    bf16 = any(x.dtype.name == "bfloat16" for x in inputs) or any(
        o.type == "tensor(bfloat16)" for o in sess.get_outputs())
    if not bf16:
        return [np.asarray(o) for o in sess.run(None, dict(zip(names, inputs)))]
    # numpy has no bfloat16 that ORT's Python binding reads or writes (ml_dtypes' is refused: "Numpy_type 256 can't
    # be converted"): such tensors cross as OrtValues of their 16-bit patterns
    import onnxruntime as ort
    from onnx import TensorProto
    feeds = {n: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(x).view(np.uint16),
                                                                 TensorProto.BFLOAT16)
             if x.dtype.name == "bfloat16" else ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))
             for n, x in zip(names, inputs)}
    return [_ort_numpy(o) for o in sess.run_with_ort_values(None, feeds)]


def _ort_numpy(value: Any) -> np.ndarray:
    """An OrtValue as numpy; a bfloat16 one read as its bit patterns (ml_dtypes.bfloat16)."""
    if value.data_type() != "tensor(bfloat16)":
        return np.asarray(value.numpy())
    import ctypes

    import ml_dtypes
    shape = value.shape()
    n = int(np.prod(shape)) if shape else 1
    if n == 0:
        return np.zeros(shape, dtype=ml_dtypes.bfloat16)
    raw = (ctypes.c_uint16 * n).from_address(value.data_ptr())
    return np.frombuffer(raw, dtype=np.uint16).copy().reshape(shape).view(ml_dtypes.bfloat16)


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


class ORTOnCUDA:
    """ORT's CUDA execution provider (onnxruntime-gpu), judged against the CPU reference."""
    device = "cuda"
    probe = "onnxruntime:cuda"
    package = "onnxruntime-gpu"
    test_style = None
    batch_size = 1  # the device oracle runs a failing model again: one test per model

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return any(CPU_FALLBACK_REFUSED in str(e) for e in chain(exc)) or ort_unsupported(exc)

    def compile(self, model: Any) -> Any:
        return ort_session(model, "cuda")

    def device_error(self, exc: BaseException) -> str | None:
        return cuda_sticky_error(exc)

    def device_name(self) -> str:
        return cuda_device_name()


@register
class ONNXRuntimeCUDA(ORTOnCUDA, ONNXRuntime):
    name = "onnxruntime.cuda"
    reaches = ("onnxruntime:cuda",)
