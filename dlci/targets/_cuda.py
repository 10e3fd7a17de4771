"""What the PyTorch targets on CUDA share: numerics set as PyTorch's own CUDA tests expect, the worker's share of GPU
memory, moving a test to the device, CUDA's sticky errors, torch's deterministic mode, and what OpInfo says about
an operator on CUDA (tolerance overrides; CPU-vs-CUDA comparisons PyTorch itself skips or expects to fail)."""
from __future__ import annotations

import os
import re
from typing import Any, Sequence

import numpy as np

from dlci.operators.facts import COMPARE_CPU_TESTS
from dlci.torch_testing import opinfo

# CUDA errors after which the context is unusable: every later CUDA call in the process fails, so the test that
# caused it is the one reported and the worker is replaced (Outcome.retire_worker)
_STICKY = (("illegal memory access", "illegal memory access"), ("device-side assert", "device-side assert"),
           ("misaligned address", "misaligned address"), ("unspecified launch failure", "launch failure"),
           ("illegal instruction", "illegal instruction"), ("an illegal address", "illegal address"),
           ("CUBLAS_STATUS_EXECUTION_FAILED", "cuBLAS execution failed"),
           ("CUDNN_STATUS_EXECUTION_FAILED", "cuDNN execution failed"))
NONDETERMINISTIC = "does not have a deterministic implementation"


def sticky_cuda_error(exc: BaseException) -> str | None:
    from dlci.errors import chain
    for e in chain(exc):
        msg = str(e)
        if not any(word in msg for word in ("CUDA", "CUBLAS", "CUDNN", "cudaError")):  # torch, TVM, ORT wordings
            continue
        for needle, name in _STICKY:
            if needle.lower() in msg.lower():
                return f"CUDA error: {name}"
    return None


_READY = False


def strict_numerics(allow_tf32: bool = False) -> None:
    """Full float32 precision on CUDA, as PyTorch's CUDA tests run: TF32 off for matmul and cuDNN, no reduced
    precision reductions in float16/bfloat16 GEMMs. Once per worker, also the worker's share of device memory."""
    global _READY
    import torch
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("high" if allow_tf32 else "highest")
    if not _READY:
        _READY = True
        share = os.environ.get("DLCI_GPU_MEMORY_MB", "")
        if share.isdigit() and torch.cuda.is_available():  # the worker's share: beyond it torch raises OOM
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, (int(share) << 20) / total))


def asks_for_tf32(instance) -> bool:
    """A test may ask for TF32 (an instance recipe flag ``allow_tf32``): then it is judged as TF32 computes."""
    return bool((getattr(instance, "call", None) or {}).get("allow_tf32"))


def device_name() -> str:
    import torch
    if not torch.cuda.is_available():
        return "cuda"
    i = torch.cuda.current_device()
    return f"cuda:{i} {torch.cuda.get_device_name(i)}"


def to_device(x: Any, device: str = "cuda") -> Any:
    import torch
    return x.to(device) if isinstance(x, (torch.Tensor, torch.nn.Module)) else x


def outputs_on(out: Any, device: str = "cuda") -> None:
    """Every tensor output must come from the device: an op that created its result on the CPU (a ``device='cpu'``
    argument) tested nothing of the device's kernels."""
    import torch
    stack = [out]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, torch.Tensor) and x.device.type != device:
            raise NotOnDevice(f"an output was computed on {x.device}, not {device}: the call does not run on the "
                              "device")


class NotOnDevice(RuntimeError):
    """The test did not exercise the device (counts as unsupported)."""


def synchronize() -> None:
    """Wait for the device: an asynchronous CUDA error surfaces in the test that caused it, not in the next one."""
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def deterministic(fn, *args) -> Any | str:
    """``fn(*args)`` under torch.use_deterministic_algorithms: its result, or torch's statement that the computation
    has no deterministic implementation (the str)."""
    import torch
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        try:
            out = fn(*args)
            synchronize()
            return out
        except RuntimeError as e:
            if NONDETERMINISTIC in str(e):
                return str(e).strip().splitlines()[0][:300]
            raise
    finally:
        torch.use_deterministic_algorithms(before)


# -- OpInfo: what PyTorch's own tests allow on CUDA --------------------------------------------------------------

# (which of PyTorch's OpInfo tests speak for which target: dlci.operators.facts.EAGER_TESTS, INDUCTOR_TESTS)
_OP_DB_TEST = re.compile(r"op_db:([^\[\s]+)\[([^\]]*)\]")


def _opinfo(instance):
    """The OpInfo an instance came from (its origin names it: ``op_db:nn.functional.elu[]#3 ...``, kept by the
    variant sources), or None."""
    m = _OP_DB_TEST.search(getattr(getattr(instance, "origin", None), "test", "") or "")
    return opinfo(m.group(1), m.group(2)) if m else None


def _applies(d, tests: set, dtype) -> bool:
    cls, test = getattr(d, "cls_name", None), getattr(d, "test_name", None)
    if getattr(d, "device_type", None) not in (None, "cuda"):
        return False
    if (cls, test) not in tests and (cls, None) not in tests:
        return False
    if getattr(d, "dtypes", None) is not None and dtype is not None and dtype not in d.dtypes:
        return False
    active = getattr(d, "active_if", True)
    return bool(active() if callable(active) else active)


def opinfo_tolerances(instance, tests: set) -> dict[str, tuple[float, float]]:
    """(rtol, atol) per dtype from the instance's OpInfo ``toleranceOverride`` decorators for CUDA in ``tests`` (the
    largest where several apply)."""
    op = _opinfo(instance)
    if op is None:
        return {}
    from torch.testing._internal.common_device_type import toleranceOverride
    out: dict[str, tuple[float, float]] = {}
    for d in op.decorators:
        if not _applies(d, tests, None):
            continue
        for dec in getattr(d, "decorators", ()):
            if isinstance(dec, toleranceOverride):
                for dt, tol in dec.d.items():
                    key = str(dt).split(".")[-1]
                    old = out.get(key, (0.0, 0.0))
                    out[key] = (max(old[0], tol.rtol), max(old[1], tol.atol))
    return out


def opinfo_expects_difference(instance) -> str | None:
    """A skip or expected failure of PyTorch's own CPU-vs-CUDA test (TestCommon.test_compare_cpu, or all of
    TestCommon) for the instance's OpInfo, or an OpInfo whose output is nondeterministic: PyTorch itself does not
    expect CUDA to match the CPU there."""
    op = _opinfo(instance)
    if op is None:
        return None
    if getattr(op, "has_nondeterministic_output", False):
        return f"OpInfo {op.name}: has_nondeterministic_output (its values are not specified)"
    for d in op.decorators:
        if not _applies(d, COMPARE_CPU_TESTS, None):
            continue
        for dec in getattr(d, "decorators", ()):
            name = getattr(dec, "__name__", "") or type(dec).__name__
            if name in ("expectedFailure", "decorator", "skip", "skipIf", "skipCUDAIf"):
                why = re.sub(r"\s+", " ", _closure_reason(dec) or name)
                return f"OpInfo {op.name}: TestCommon.test_compare_cpu is marked {name} ({why})"
    return None


def _closure_reason(dec) -> str:
    for cell in getattr(dec, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, str):
            return value
    return ""


def np_inputs_to(inputs: Sequence[np.ndarray], device: str = "cuda") -> list:
    from dlci.models.convert import np_to_torch
    return [np_to_torch(x).to(device) for x in inputs]
