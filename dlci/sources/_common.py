"""Helpers shared by the sources: tensor slots, argument encoding, dotted-path resolution."""
from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

import numpy as np

from dlci.instance import encode_value

# numpy dtypes an instance may carry: they survive npz without pickling and every framework here reads them.
STORABLE_KINDS = "biuf"


class Unencodable(TypeError):
    """A value that cannot become part of an instance; ``reason`` is the stats key it is counted under."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


def dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def to_numpy(t: Any, detach: bool = False) -> np.ndarray:
    """A torch tensor or numpy array as a plain numpy array, or :class:`Unencodable` with a reason.

    ``detach``: accept tensors that require grad (an instrumented suite's activations), keeping only the data.
    """
    if isinstance(t, np.ndarray):
        a = t
    else:
        import torch
        if not isinstance(t, torch.Tensor):
            raise Unencodable("unencodable-arg", f"not a tensor: {type(t).__name__}")
        if t.layout != torch.strided or t.is_sparse:
            raise Unencodable("sparse-tensor")
        if t.is_quantized:
            raise Unencodable("quantized-tensor")
        if t.is_complex():
            raise Unencodable("complex-tensor")
        if t.requires_grad and not detach:
            raise Unencodable("requires-grad")
        if t.is_nested or type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            raise Unencodable("tensor-subclass", type(t).__name__)
        if t.dtype in (torch.bfloat16,) or str(t.dtype).startswith("torch.float8"):
            raise Unencodable(f"unsupported-dtype:{str(t.dtype).replace('torch.', '')}")
        a = t.detach().cpu().resolve_conj().resolve_neg().numpy()
    if a.dtype.kind not in STORABLE_KINDS:
        raise Unencodable(f"unsupported-dtype:{a.dtype}")
    return np.require(a, requirements="C").copy()


class Slots:
    """Collects the tensor inputs of one call; the same tensor object used twice gets one slot."""

    def __init__(self, detach: bool = False):
        self.detach = detach
        self.arrays: list[np.ndarray] = []
        self._by_id: dict[int, int] = {}
        self._keep: list = []  # keep the originals alive so id() stays unique

    def __call__(self, t) -> int:
        key = id(t)
        if key in self._by_id:
            return self._by_id[key]
        self.arrays.append(to_numpy(t, self.detach))
        self._keep.append(t)
        self._by_id[key] = len(self.arrays) - 1
        return self._by_id[key]


def encode(value: Any, slots: Slots) -> Any:
    try:
        return encode_value(value, slots)
    except Unencodable:
        raise
    except TypeError as e:
        raise Unencodable("unencodable-arg", str(e)) from e


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
    """Import a dotted path such as ``torch.nn.functional.elu`` or ``torch.Tensor.add``."""
    parts = path.split(".")
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
