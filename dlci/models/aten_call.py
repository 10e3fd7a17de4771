"""The ``aten_call`` form: a torch instance as one call of an ATen operator overload.

A converter library keyed by ATen names (onnxscript's torchlib: ``@torch_op("aten::chunk")``) is tested by calling
its function for the overload directly, as its own OpInfo harness does: ``torch.onnx`` decomposes many operators
(``chunk``, ``unfold``, the window functions...) before it dispatches, so a function can be broken while every
export passes. The form says which overload the instance's call is (``torch._C._jit_resolve_packet`` on the real
arguments) and what it returns; it is built only when calling that overload in torch gives what the instance's own
call gives, so a library-level wrapper with other semantics (``nn.functional.max_pool2d(return_indices=...)``) is
never taken for the operator.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dlci.instance import Instance, decode_value
from dlci.instance.recipe import outputs_equal, resolve
from dlci.models.convert import np_to_torch


class NotAnAtenCall(ValueError):
    """The instance is not one call of an ATen overload (the form is unavailable)."""


@dataclass
class OutputSpec:
    """One returned value: a tensor (``shape``, ``dtype`` as torch names it) or a list of them (``items``)."""
    shape: list[int] | None = None
    dtype: str = ""
    items: list["OutputSpec"] | None = None


@dataclass
class AtenCall:
    packet: str            # aten::chunk
    overload: str          # default, Tensor, Scalar...
    args: list             # the instance's encoded arguments ({"$t": i}: its i-th input)
    kwargs: dict
    outputs: list[OutputSpec]

    @property
    def qualified(self) -> str:
        """The registry spelling: ``aten::add.Tensor``, and ``aten::chunk`` for the default overload."""
        return self.packet if self.overload == "default" else f"{self.packet}.{self.overload}"


def _spec(value) -> OutputSpec:
    import torch
    if isinstance(value, torch.Tensor):
        return OutputSpec(list(value.shape), str(value.dtype).replace("torch.", ""))
    if isinstance(value, (list, tuple)) and all(isinstance(v, torch.Tensor) for v in value):
        return OutputSpec(items=[_spec(v) for v in value])
    raise TypeError(f"returns a {type(value).__name__}, not tensors")


def aten_call(instance: Instance) -> AtenCall:
    """The instance's call as an ATen overload call; raises NotAnAtenCall when it is not one."""
    import torch
    call = instance.call
    if call.get("kind") != "torch_fn" or not instance.op.startswith("aten::"):
        raise NotAnAtenCall("not a torch function call on an aten operator")
    if call.get("options"):
        raise NotAnAtenCall("the instance carries entry-point options of other targets")
    name = instance.op.split("::", 1)[1]
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        raise NotAnAtenCall(f"torch has no operator {instance.op}")
    args, kwargs = call.get("args", []), call.get("kwargs", {})

    def decoded():
        tensors = [np_to_torch(a) for a in instance.input_arrays()]
        return decode_value(args, tensors), {k: decode_value(v, tensors) for k, v in kwargs.items()}
    a, k = decoded()
    try:
        overload = torch._C._jit_resolve_packet(instance.op, *a, **k)
    except RuntimeError as e:
        raise NotAnAtenCall(f"{call['fn']}'s arguments fit no overload of {instance.op}: "
                              f"{str(e).splitlines()[0][:200]}") from e
    with torch.no_grad():
        got = getattr(packet, overload)(*a, **k)
        a2, k2 = decoded()
        want = resolve(call["fn"])(*a2, **k2)
    if not outputs_equal(got, want):
        raise NotAnAtenCall(f"{call['fn']} is not {instance.op}.{overload} one to one")
    try:
        outputs = [_spec(v) for v in (got if isinstance(got, tuple) else (got,))]
    except TypeError as e:
        raise NotAnAtenCall(f"{instance.op}.{overload} {e}") from e
    return AtenCall(instance.op, overload, args, kwargs, outputs)


def call_target(call: AtenCall) -> Any:
    """The torch OpOverload itself."""
    import torch
    return getattr(getattr(torch.ops.aten, call.packet.split("::", 1)[1]), call.overload)
