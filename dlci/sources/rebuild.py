"""Rebuild an instance's operator call in a fresh process from its recipe and arrays.

- :func:`torch_call` — ``torch_fn`` / ``torch_module`` recipes → ``(nn.Module, [input tensors])``
- :func:`keras_call` — ``keras_layer`` recipes → ``(built keras layer with its weights, [input arrays])``
- :func:`onnx_call` — ``onnx_model`` recipes → ``(onnx.ModelProto, {graph input name: array})``
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dlci.instance import Instance, decode_value
from dlci.sources._common import resolve


def _torch_inputs(inst: Instance) -> list:
    import torch
    # copy: arrays from npz may be read-only, and ops must not write into the cached data
    return [torch.from_numpy(np.array(a, copy=True)) for a in inst.input_arrays()]


def _state_dict(inst: Instance) -> dict:
    import torch
    return {k.split(":", 1)[1]: torch.from_numpy(np.array(v, copy=True))
            for k, v in inst.arrays.items() if k.startswith("state:")}


def _fn_module_class():
    import torch

    class FnCall(torch.nn.Module):
        """``forward(*tensors)`` calls ``fn`` with the recipe's arguments; non-tensor arguments are constants."""

        def __init__(self, fn, fn_path: str, args: list, kwargs: dict):
            super().__init__()
            self.fn, self.fn_path, self.args, self.kwargs = fn, fn_path, args, kwargs

        def forward(self, *tensors):
            args = decode_value(self.args, list(tensors))
            kwargs = {k: decode_value(v, list(tensors)) for k, v in self.kwargs.items()}
            return self.fn(*args, **kwargs)

        def extra_repr(self) -> str:
            return self.fn_path

    class ModuleCall(torch.nn.Module):
        """Wraps a module whose forward takes non-tensor or nested arguments, so that forward(*tensors) works."""

        def __init__(self, inner, args: list, kwargs: dict):
            super().__init__()
            self.inner, self.args, self.kwargs = inner, args, kwargs

        def forward(self, *tensors):
            args = decode_value(self.args, list(tensors))
            kwargs = {k: decode_value(v, list(tensors)) for k, v in self.kwargs.items()}
            return self.inner(*args, **kwargs)

    return FnCall, ModuleCall


_CLASSES = None


def _classes():
    global _CLASSES
    if _CLASSES is None:
        _CLASSES = _fn_module_class()
    return _CLASSES


def build_torch_module(call: dict, state: dict | None = None):
    """Construct the ``torch_module`` recipe's module (constructor arguments never hold tensors)."""
    import torch
    cls = resolve(call["cls"])
    args = decode_value(call.get("args", []), [])
    kwargs = {k: decode_value(v, []) for k, v in call.get("kwargs", {}).items()}
    module = cls(*args, **kwargs)
    if state is not None:
        missing, unexpected = module.load_state_dict(state, strict=False)
        if unexpected or [m for m in missing if not m.endswith("num_batches_tracked")]:
            raise RuntimeError(f"state dict mismatch for {call['cls']}: missing {missing}, unexpected {unexpected}")
    return module.eval() if isinstance(module, torch.nn.Module) else module


def torch_call(inst: Instance) -> tuple[Any, list]:
    """``(module, inputs)`` such that ``module(*inputs)`` performs the instance's call.

    For ``torch_fn`` the module is a small wrapper holding the function; for ``torch_module`` it is the built
    module itself (weights loaded, ``.eval()``) when its forward takes exactly the input tensors in order, else a
    wrapper whose ``.inner`` is that module.
    """
    call = inst.call
    tensors = _torch_inputs(inst)
    FnCall, ModuleCall = _classes()
    if call["kind"] == "torch_fn":
        return FnCall(resolve(call["fn"]), call["fn"], call.get("args", []), call.get("kwargs", {})), tensors
    if call["kind"] == "torch_module":
        module = build_torch_module(call, _state_dict(inst))
        fargs, fkwargs = call.get("forward_args", []), call.get("forward_kwargs", {})
        if not fkwargs and fargs == [{"$t": i} for i in range(len(tensors))]:
            return module, tensors
        return ModuleCall(module, fargs, fkwargs).eval(), tensors
    raise ValueError(f"{inst.id}: not a torch recipe: {call['kind']!r}")


def keras_call(inst: Instance) -> tuple[Any, list[np.ndarray]]:
    """``(layer, inputs)``: the layer rebuilt from its config, built on the inputs and given its weights."""
    call = inst.call
    if call["kind"] != "keras_layer":
        raise ValueError(f"{inst.id}: not a keras recipe: {call['kind']!r}")
    import keras
    cls = resolve(call["cls"])
    layer = cls.from_config(dict(call["config"]))
    inputs = inst.input_arrays()
    args = decode_value(call.get("args", [{"$t": i} for i in range(len(inputs))]), inputs)
    layer(*args)  # builds the weights with the real input shapes
    names = sorted((k for k in inst.arrays if k.startswith("weight:")), key=lambda k: int(k.split(":")[1]))
    if names:
        layer.set_weights([inst.arrays[k] for k in names])
    assert isinstance(layer, keras.layers.Layer)
    return layer, inputs


def onnx_call(inst: Instance) -> tuple[Any, dict[str, np.ndarray]]:
    """``(ModelProto, feeds)`` with feeds keyed by the graph's (non-initializer) input names, in order."""
    import onnx
    model = onnx.load_model_from_string(inst.arrays["model"].tobytes())
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    return model, dict(zip(names, inst.input_arrays()))
