"""PyTorch's own compilers: torch.compile (dynamo + inductor) and torch.onnx (dynamo exporter, run by ORT)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.models.convert import flatten_outputs, np_to_torch
from dlci.targets._common import onnx_fingerprint, onnx_nodes
from dlci.targets.base import Target, register
from dlci.targets.onnxruntime import ORTOnCUDA, ort_run, ort_session, ort_unsupported


class _Compiled:
    """A torch.compile'd module plus the inputs of its first (compiling) call."""

    def __init__(self, fn, inputs):
        self.fn, self.inputs = fn, inputs


class DynamoTarget(Target):
    """A torch.compile backend: ``convert`` wraps the module (dynamo reset first: no guards or graphs left over from
    the previous test), the first call compiles, later calls run the compiled code."""
    frameworks = ("torch",)
    form = "torch_module"
    package = "torch"

    def backend(self) -> tuple[str, dict]:
        """(backend name, keyword arguments of torch.compile)."""
        raise NotImplementedError

    def convert(self, module: Any, inputs: Sequence[np.ndarray]) -> Any:
        import torch
        import torch._dynamo
        torch._dynamo.reset()
        backend, kwargs = self.backend()
        return _Compiled(torch.compile(module, backend=backend, **kwargs), inputs)

    def compile(self, c: _Compiled) -> Any:
        import torch
        with torch.no_grad():
            c.fn(*[np_to_torch(x) for x in c.inputs])  # dynamo and the backend compile on the first call
        return c

    def run(self, c: _Compiled, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch
        with torch.no_grad():
            return flatten_outputs(c.fn(*[np_to_torch(x) for x in inputs]))


def dynamo_unsupported(e: BaseException) -> bool:
    try:
        from torch._dynamo.exc import Unsupported
    except ImportError:
        return False
    return isinstance(e, Unsupported)


@register
class TorchCompile(DynamoTarget):
    name = "torch.compile"
    batch_size = 16  # 48 opinfo tests: 3.9x the tests per minute packed (benchmarks/throughput.py)
    modules = ("torch._dynamo", "torch._inductor", "torch._functorch", "torch.fx")
    reaches = ("pytorch:eager", "pytorch:dynamo", "pytorch:decompositions", "pytorch:inductor", "pytorch:inductor.cpp")
    test_style = "pytorch"

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return any(dynamo_unsupported(e) or "Could not guard on data-dependent expression" in str(e)
                   for e in chain(exc))

    def backend(self) -> tuple[str, dict]:
        import torch._inductor.config as cfg
        cfg.compile_threads = 1
        cfg.fallback_random = True  # eager RNG: random ops then match the seeded reference
        return "inductor", {"fullgraph": True}


@register
class TorchONNX(Target):
    name = "torch.onnx"
    frameworks = ("torch",)
    form = "torch_module"
    batch_size = 16  # one export per batch: 48 opinfo tests 8.2x the tests per minute packed
    package = "torch"
    modules = ("torch.onnx", "onnxscript", "onnx_ir")
    reaches = ("pytorch:eager", "pytorch:export", "pytorch:decompositions", "onnxscript:torchlib", "onnxruntime:cpu")
    test_style = "pytorch"

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        if stage != "convert":
            return ort_unsupported(exc)
        for e in chain(exc):
            name, msg = type(e).__name__, str(e)
            # DispatchError: "No ONNX function found for <OpOverload(op='aten.kthvalue', ...)>"
            if name == "DispatchError" or "No ONNX function found" in msg or "Unsupported FX nodes" in msg:
                return True
            if dynamo_unsupported(e):  # torch.export could not capture the call: nothing to convert
                return True
            # data-dependent output shapes (ctc_loss, nonzero, ...) cannot be exported statically
            if name in ("DynamicOutputShapeException", "DataDependentOutputException",
                        "GuardOnDataDependentSymNode") or "DynamicOutputShapeException" in msg:
                return True
        return False

    def convert(self, module: Any, inputs: Sequence[np.ndarray]) -> Any:
        from dlci.models import export_onnx
        from dlci.models.onnx_io import check_strict
        model = export_onnx(module, [np_to_torch(x) for x in inputs])
        check_strict(model)  # the exporter under test writes valid ONNX, not one ORT merely tolerates
        return model

    def fingerprint(self, converted: Any) -> str | None:
        return onnx_fingerprint(converted)

    def graph_nodes(self, converted: Any) -> list[str] | None:
        return onnx_nodes(converted)

    def compile(self, model: Any) -> Any:
        return ort_session(model)

    def run(self, sess: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        return ort_run(sess, inputs)


@register
class TorchONNXCUDA(ORTOnCUDA, TorchONNX):
    """The exporter's model on ORT's CUDA execution provider: the export is the CPU target's, the kernels are CUDA's."""
    name = "torch.onnx.cuda"
    reaches = ("onnxruntime:cuda",)

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return ORTOnCUDA.is_unsupported(self, exc, stage) or TorchONNX.is_unsupported(self, exc, stage)
