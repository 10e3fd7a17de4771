"""Rebuild an instance's operator call in a fresh process from its recipe and arrays.

- :func:`torch_call` — ``torch_fn`` / ``torch_module`` recipes → ``(nn.Module, [input tensors])``
- :func:`keras_call` — ``keras_layer`` recipes → ``(built keras layer with its weights, [input arrays])``; ``tf_fn``
  recipes (one TensorFlow op call) → ``(a keras layer making that call, [input arrays])``
- :func:`onnx_call` — ``onnx_model`` recipes → ``(onnx.ModelProto, {graph input name: array})``

and what every package that handles recipes shares: dotted-path resolution, the params of an encoded call, the tensors
of a call result, the determinism check of a torch call, and the JSON form of an ONNX node.
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from dlci.instance import Instance, decode_value


def _torch_inputs(inst: Instance) -> list:
    from dlci.models.convert import np_to_torch
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
    if call["kind"] == "torch_program":  # a user's whole model (dlci.models.fx)
        from dlci.models.fx import program_module
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
    if call["kind"] == "torch_graph":  # a generated multi-operator graph (dlci.models.graph)
        from dlci.models.graph import graph_of
        return graph_of(inst).to_torch(), tensors
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


# -- shared by the packages that handle recipes ---------------------------------------------------------

def has_tensor(encoded: Any) -> bool:
    if isinstance(encoded, dict):
        return "$t" in encoded or any(has_tensor(v) for v in encoded.values())
    if isinstance(encoded, list):
        return any(has_tensor(v) for v in encoded)
    return False


def params_of(args: list, kwargs: dict) -> dict:
    """The non-tensor arguments of an encoded call, positional ones named ``arg<i>``."""
    out = {f"arg{i}": v for i, v in enumerate(args) if not has_tensor(v)}
    out.update({k: v for k, v in kwargs.items() if not has_tensor(v)})
    return out


def resolve(path: str) -> Any:
    """Import a dotted path such as ``torch.nn.functional.elu`` or ``torch.Tensor.add`` (``tf.`` is TensorFlow's
    conventional alias, as the reproducers write it)."""
    parts = path.split(".")
    if parts[0] == "tf":
        parts[0] = "tensorflow"
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {path}")


def try_resolve(path: str) -> Any:
    try:
        return resolve(path)
    except (ImportError, AttributeError):
        return None


def outputs_equal(a: Any, b: Any) -> bool:
    """Bitwise-ish equality of two call results (NaN == NaN), for the determinism check."""
    import torch
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.layout != torch.strided or a.is_complex():
            return torch.equal(a.to_dense() if a.layout != torch.strided else a,
                               b.to_dense() if b.layout != torch.strided else b)
        return bool(torch.equal(a, b)) or (a.is_floating_point() and bool(
            torch.equal(torch.nan_to_num(a.detach(), nan=0.5), torch.nan_to_num(b.detach(), nan=0.5))
            and torch.equal(a.isnan(), b.isnan())))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(outputs_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    return a == b


def tensor_leaves(out: Any) -> list | None:
    """The tensors of a call result, or None when it holds anything else (then no model can return it)."""
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        leaves = []
        for o in out:
            sub = tensor_leaves(o)
            if sub is None:
                return None
            leaves += sub
        return leaves
    return None


def keras_params(config: dict) -> dict:
    """A keras layer's config as instance params (what OPERA partitions): nested serialized objects (initializers,
    regularizers, dtype policies) by their class name; names and bookkeeping keys dropped."""
    def enc(v):
        if isinstance(v, dict):
            if "class_name" in v:  # serialized initializer / regularizer / dtype policy: its class is its value
                return v["class_name"]
            return {"$dict": {k: enc(x) for k, x in v.items()}}
        if isinstance(v, list):
            return [enc(x) for x in v]
        return v
    return {k: enc(v) for k, v in config.items() if k not in ("name", "trainable", "dtype")}


# operators whose output values are undefined (uninitialised memory): only shapes, dtypes and crashes can be judged
VALUES_UNDEFINED = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                              "empty_permuted"})


def op_base_name(op: str) -> str:
    """'aten::max.dim' -> 'max', 'torch.Tensor.argmax' -> 'argmax', 'onnx::TopK' -> 'TopK'."""
    base = op.split("::", 1)[1].split(".")[0] if "::" in op else op.rsplit(".", 1)[-1]
    if base.startswith("special_"):
        base = base[len("special_"):]
    return base.rstrip("_")


def values_undefined(op: str) -> bool:
    return op_base_name(op) in VALUES_UNDEFINED


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


# -- ONNX nodes ------------------------------------------------------------------------------------------

def op_id(node) -> str:
    domain = node.domain
    return f"onnx::{node.op_type}" if domain in ("", "ai.onnx") else f"{domain}::{node.op_type}"


def _float(v: float) -> float:
    # attributes are float32: keep the short spelling (0.2, not 0.20000000298023224) for partitioning
    return float(str(np.float32(v)))


def attribute_value(attr) -> Any:
    """JSON form of a node attribute; tensors and graphs are summarised, not embedded."""
    import onnx
    from onnx import helper, numpy_helper
    A = onnx.AttributeProto
    t = attr.type
    if t == A.INT:
        return int(attr.i)
    if t == A.FLOAT:
        return _float(attr.f)
    if t == A.STRING:
        return attr.s.decode("utf-8", "replace")
    if t == A.INTS:
        return [int(v) for v in attr.ints]
    if t == A.FLOATS:
        return [_float(v) for v in attr.floats]
    if t == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in attr.strings]
    if t == A.TENSOR:
        summary = {"shape": list(attr.t.dims), "dtype": helper.tensor_dtype_to_np_dtype(attr.t.data_type).name}
        if not attr.t.dims:  # scalars (e.g. ConstantOfShape's value) are worth their value
            try:
                summary["value"] = numpy_helper.to_array(attr.t).item()
            except Exception:  # noqa: BLE001
                pass
        return {"$dict": {"tensor": summary}}
    if t == A.GRAPH:
        return {"$dict": {"graph": attr.g.name, "nodes": len(attr.g.node)}}
    if t == A.TENSORS:
        return [{"$dict": {"tensor": {"shape": list(x.dims)}}} for x in attr.tensors]
    if t == A.GRAPHS:
        return [{"$dict": {"graph": g.name, "nodes": len(g.node)}} for g in attr.graphs]
    return A.AttributeType.Name(t)  # sparse tensors, type protos: their kind is what partitions them
