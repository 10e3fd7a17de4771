"""Rebuild an instance's operator call in a fresh process from its recipe and arrays.

- :func:`torch_call` — ``torch_fn`` / ``torch_module`` recipes → ``(nn.Module, [input tensors])``; a user's model
  (``torch_program``, dlci.models.program), a generated graph (``torch_graph``, dlci.models.graph_torch) and a program
  recorded from a repository's tests (``torch_exported``, ``torch_fx``: dlci.models.recorded) too
- :func:`keras_call` — ``keras_layer`` recipes → ``(built keras layer with its weights, [input arrays])``; ``tf_fn``
  recipes (one TensorFlow op call) → ``(a keras layer making that call, [input arrays])``
- :func:`onnx_call` — ``onnx_model`` recipes → ``(onnx.ModelProto, {graph input name: array})``
- :func:`check_torch_instance` — the determinism check of a rebuilt torch call (what sources keep)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dlci.instance import Instance, decode_value
from dlci.instance.recipe import outputs_equal, resolve, tensor_leaves
from dlci.operators.facts import values_undefined
from dlci.models.convert import np_to_torch


def _torch_inputs(inst: Instance) -> list:
    # copies: arrays from npz may be read-only, and ops must not write into the cached data; bfloat16 included
    return [np_to_torch(a) for a in inst.input_arrays()]


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
            if self.fn_path.startswith("torch.Tensor.") and args:
                # a tensor method is called on its tensor: torch.fx's Proxy (and any tracer's stand-in) has the
                # method, while the unbound descriptor refuses anything but a real tensor
                return getattr(args[0], self.fn_path.rsplit(".", 1)[1])(*args[1:], **kwargs)
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
    if call["kind"] == "torch_program":  # a user's whole model (dlci.models.program)
        from dlci.models.program import program_module
        return program_module(inst), tensors
    FnCall, ModuleCall = _classes()
    if call["kind"] == "torch_fn":
        return FnCall(resolve(call["fn"]), call["fn"], call.get("args", []), call.get("kwargs", {})), tensors
    if call["kind"] == "torch_module":
        module = build_torch_module(call, _state_dict(inst))
        fargs, fkwargs = call.get("forward_args", []), call.get("forward_kwargs", {})
        if not fkwargs and fargs == [{"$t": i} for i in range(len(tensors))]:
            return module, tensors
        return ModuleCall(module, fargs, fkwargs).eval(), tensors
    if call["kind"] in ("torch_exported", "torch_fx"):  # recorded from a repository's tests (dlci.models.recorded)
        from dlci.models.recorded import recorded_module
        return recorded_module(inst), tensors
    if call["kind"] == "torch_graph":  # a generated multi-operator graph (dlci.models.graph)
        from dlci.models.graph import graph_of
        from dlci.models.graph_torch import build_module
        return build_module(graph_of(inst)), tensors
    raise ValueError(f"{inst.id}: not a torch recipe: {call['kind']!r}")


_TF_CALL = None


def _tf_call_class():
    """A keras layer whose ``call(*tensors)`` makes one TensorFlow op call: TensorFlow ops reach every keras-consuming
    target (TFLite, SavedModel, XLA) the way keras layers do. ``autocast`` off: the op sees its inputs' dtypes."""
    global _TF_CALL
    if _TF_CALL is None:
        import keras

        class TFCall(keras.layers.Layer):
            def __init__(self, fn_path: str, kwargs: dict, **kw):
                super().__init__(autocast=False, **kw)
                self.fn, self.fn_path, self.call_kwargs = resolve(fn_path), fn_path, kwargs

            def call(self, *tensors):
                import tensorflow as tf
                # as tensors: from numpy arrays a raw op would infer its type attributes as from Python values
                tensors = [tf.convert_to_tensor(t) for t in tensors]
                out = tf.nest.flatten(self.fn(**{k: decode_value(v, tensors) for k, v in self.call_kwargs.items()}))
                return out[0] if len(out) == 1 else out  # several: a flat list (a namedtuple's fields by position)

        _TF_CALL = TFCall
    return _TF_CALL


def keras_call(inst: Instance) -> tuple[Any, list[np.ndarray]]:
    """``(layer, inputs)``: the layer rebuilt from its config, built on the inputs and given its weights (a ``tf_fn``
    recipe: a layer making the op call)."""
    call = inst.call
    if call["kind"] == "tf_fn":
        return _tf_call_class()(call["fn"], call.get("kwargs", {})), inst.input_arrays()
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


def check_torch_instance(inst: Instance) -> str | None:
    """Run the rebuilt call twice: a skip reason, or None when it is a usable instance."""
    import torch
    try:
        module, xs = torch_call(inst)
        with torch.no_grad():
            out1 = module(*xs)
            leaves = tensor_leaves(out1)
            if leaves is None:
                return "non-tensor-output"
            if any(not isinstance(t, torch.Tensor) or t.layout != torch.strided for t in leaves):
                return "non-strided-output"
            out1 = [t.clone() for t in leaves]
            if any(not np.array_equal(x.numpy(), a, equal_nan=x.dtype.is_floating_point)
                   for x, a in zip(xs, inst.input_arrays())):
                return "mutates-input"
            module, xs = torch_call(inst)
            out2 = tensor_leaves(module(*xs))
    except Exception as e:  # noqa: BLE001 - the sample does not run as a standalone call
        return f"call-error:{type(e).__name__}"
    if values_undefined(inst.op):  # the same shapes and dtypes twice is all an uninitialised tensor promises
        same = [(t.shape, t.dtype) for t in out1] == [(t.shape, t.dtype) for t in out2]
        return None if same else "nondeterministic-output"
    if not outputs_equal(out1, out2):
        return "nondeterministic-output"
    return None
