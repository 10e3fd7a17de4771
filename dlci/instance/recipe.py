"""What every package that handles recipes shares: dotted-path resolution, the params of an encoded call, the tensors
of a call result, the equality a determinism check uses, and the JSON form of an ONNX node. Rebuilding the call
itself is dlci.models.rebuild's; the operators whose values are undefined are listed in
dlci.operators.facts.
"""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np


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
        if a.dtype == torch.complex32:  # no kernel compares ComplexHalf: compare its float pairs
            a, b = torch.view_as_real(a), torch.view_as_real(b)
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
