"""PyTorch on CUDA: the eager CUDA kernels (``torch.cuda``) and inductor's Triton kernels (``torch.compile.cuda``),
each judged against the CPU reference (float32, arbitrated by fp64) with dlci.oracles.device, the way PyTorch's own
``test_ops`` compares CUDA with the CPU over OpInfo samples. Absent (not on this runner) without a CUDA build of
torch and a device."""
from __future__ import annotations

import copy
import os
from typing import Any, Sequence

import numpy as np

from dlci.models.convert import flatten_outputs
from dlci.operators.facts import EAGER_TESTS, INDUCTOR_TESTS
from dlci.targets import _cuda
from dlci.targets.base import Target, register
from dlci.targets.torch_compile import DynamoTarget, TorchCompile, dynamo_unsupported


class TorchOnCUDA:
    """What every torch target on CUDA declares: the device and its probe, OpInfo's CUDA expectations, CUDA's
    sticky errors, torch's deterministic mode."""
    device = "cuda"
    probe = "torch:cuda"
    package = "torch"
    batch_size = 1  # the device oracle runs a failing model again: one test per model
    frameworks = ("torch",)
    form = "torch_module"
    test_style = None  # the standalone script (it names the device) is the reproducer
    opinfo_tests = EAGER_TESTS

    def tolerances(self, instance) -> dict[str, tuple[float, float]]:
        return _cuda.opinfo_tolerances(instance, self.opinfo_tests)

    def expected_to_differ(self, instance) -> str | None:
        return _cuda.opinfo_expects_difference(instance)

    def device_error(self, exc: BaseException) -> str | None:
        return _cuda.sticky_cuda_error(exc)

    def device_name(self) -> str:
        return _cuda.device_name()

    def on_device(self, module: Any) -> Any:
        """A copy of the (cached, CPU) module on the device, with PyTorch's CUDA-test numerics."""
        _cuda.strict_numerics(allow_tf32=os.environ.get("DLCI_ALLOW_TF32") == "1")
        return copy.deepcopy(module).to("cuda")

    def deterministic_run(self, compiled: Any, inputs: Sequence[np.ndarray]):
        return _cuda.deterministic(self.run, compiled, inputs)


@register
class TorchCUDA(TorchOnCUDA, Target):
    name = "torch.cuda"
    modules = ("torch.nn", "torch.functional", "torch._tensor", "torch._refs", "torch._decomp")
    reaches = ("pytorch:eager.cuda",)

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return isinstance(exc, _cuda.NotOnDevice) or "not implemented for 'CUDA'" in str(exc) or \
            "Could not run" in str(exc) and "CUDA" in str(exc)

    def convert(self, module: Any, inputs: Sequence[np.ndarray]) -> Any:
        return self.on_device(module)

    def run(self, module: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch
        xs = _cuda.np_inputs_to(inputs)
        with torch.no_grad(), torch.device("cuda"):  # factory calls inside the op default to the device too
            out = module(*xs)
        _cuda.outputs_on(out)
        _cuda.synchronize()
        return flatten_outputs(out)


@register
class TorchCompileCUDA(TorchOnCUDA, DynamoTarget):
    name = "torch.compile.cuda"
    modules = TorchCompile.modules
    # inductor's Triton code generation, plus the aten CUDA kernels it calls for fallbacks and extern kernels
    reaches = ("pytorch:eager.cuda", "pytorch:dynamo", "pytorch:decompositions", "pytorch:inductor",
               "pytorch:inductor.triton")
    opinfo_tests = INDUCTOR_TESTS

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        return isinstance(exc, _cuda.NotOnDevice) or TorchCompile.is_unsupported(self, exc, stage)

    def backend(self) -> tuple[str, dict]:
        return TorchCompile.backend(self)

    def convert(self, module: Any, inputs: Sequence[np.ndarray]) -> Any:
        return DynamoTarget.convert(self, self.on_device(module), inputs)

    def compile(self, c) -> Any:
        import torch
        with torch.no_grad():
            c.fn(*_cuda.np_inputs_to(c.inputs))  # dynamo and inductor compile (Triton) on the first call
        _cuda.synchronize()
        return c

    def run(self, c, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch
        with torch.no_grad():
            out = c.fn(*_cuda.np_inputs_to(inputs))
        _cuda.outputs_on(out)
        _cuda.synchronize()
        return flatten_outputs(out)


__all__ = ["TorchCUDA", "TorchCompileCUDA", "TorchOnCUDA", "dynamo_unsupported"]
