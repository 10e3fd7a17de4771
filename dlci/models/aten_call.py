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


def _dispatched(fn, args: list, kwargs: dict, inputs: list):
    """The one ATen overload a library-level call comes down to (``F.interpolate(mode="trilinear")`` ->
    ``aten.upsample_trilinear3d.default``, ``F.max_pool2d(return_indices=True)`` -> ``max_pool2d_with_indices``),
    with its arguments encoded over the instance's inputs; None when the call runs other ATen operators as well or
    hands the operator a tensor that is not one of the inputs."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from dlci.instance import encode_value
    calls = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), k=None):
            calls.append((func, a, k or {}))
            return func(*a, **(k or {}))
    with torch.no_grad(), Record():
        fn(*args, **kwargs)
    ops = [c for c in calls if c[0]._schema.name not in ("aten::detach", "aten::alias", "aten::lift_fresh")]
    if len(ops) != 1:
        return None
    func, a, k = ops[0]
    ids = {id(t): i for i, t in enumerate(inputs)}

    def slot(t):
        if id(t) not in ids:
            raise TypeError("a tensor that is not an input")
        return ids[id(t)]
    try:
        return func, [encode_value(v, slot) for v in a], {n: encode_value(v, slot) for n, v in k.items()}
    except TypeError:
        return None


def not_an_aten_call(instance: Instance) -> str | None:
    """Why the instance cannot be one ATen overload call, said from its recipe alone (nothing is called): an
    ``nn.Module``, an ONNX node, a call carrying another target's options. None: it may be one; only calling it
    tells (a ``Tensor.__getitem__`` is one ``aten::index`` for a tensor index, several calls for slices)."""
    call = instance.call
    if call.get("kind") != "torch_fn" or not instance.op.startswith("aten::"):
        return "not a torch function call on an aten operator"
    if call.get("options"):
        return "the instance carries entry-point options of other targets"
    return None


def aten_call(instance: Instance) -> AtenCall:
    """The instance's call as an ATen overload call; raises NotAnAtenCall when it is not one. The call's own
    operator name first (its arguments resolving one of that operator's overloads); else the single ATen overload
    the call runs (a library function with arguments of its own)."""
    import torch
    call = instance.call
    why_not = not_an_aten_call(instance)
    if why_not:
        raise NotAnAtenCall(why_not)
    args, kwargs = call.get("args", []), call.get("kwargs", {})

    def decoded():
        tensors = [np_to_torch(a) for a in instance.input_arrays()]
        return tensors, decode_value(args, tensors), {k: decode_value(v, tensors) for k, v in kwargs.items()}
    _, a, k = decoded()
    with torch.no_grad():
        tensors, a2, k2 = decoded()
        want = resolve(call["fn"])(*a2, **k2)
    packet = getattr(torch.ops.aten, instance.op.split("::", 1)[1], None)
    try:
        overload = torch._C._jit_resolve_packet(instance.op, *a, **k) if packet is not None else None
    except RuntimeError:
        overload = None
    if overload is not None:
        with torch.no_grad():
            got = getattr(packet, overload)(*a, **k)
        if outputs_equal(got, want):
            return AtenCall(instance.op, overload, args, kwargs, _specs(instance.op, overload, got))
    tensors, a3, k3 = decoded()
    recorded = _dispatched(resolve(call["fn"]), a3, k3, tensors)
    if recorded is None:
        raise NotAnAtenCall(f"{call['fn']} is no one ATen overload of {instance.op} with these arguments")
    func, eargs, ekwargs = recorded
    tensors, a4, k4 = decoded()
    with torch.no_grad():
        got = func(*decode_value(eargs, tensors), **{n: decode_value(v, tensors) for n, v in ekwargs.items()})
    if not outputs_equal(got, want):
        raise NotAnAtenCall(f"{call['fn']} is not {func} one to one")
    return AtenCall(func._schema.name, func._overloadname, eargs, ekwargs,
                    _specs(func._schema.name, func._overloadname, got))


def _specs(packet: str, overload: str, got) -> list[OutputSpec]:
    try:
        return [_spec(v) for v in (got if isinstance(got, tuple) else (got,))]
    except TypeError as e:
        raise NotAnAtenCall(f"{packet}.{overload} {e}") from e


def call_target(call: AtenCall) -> Any:
    """The torch OpOverload itself."""
    import torch
    return getattr(getattr(torch.ops.aten, call.packet.split("::", 1)[1]), call.overload)
