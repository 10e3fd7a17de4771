"""Array conversions between numpy and the frameworks, shared by model templates and targets."""
from __future__ import annotations

from typing import Any

import numpy as np


def np_to_torch(a: np.ndarray):
    """A fresh torch tensor (never sharing memory with the instance's array)."""
    import torch

    a = np.asarray(a)
    name = str(a.dtype)
    if name == "bfloat16":  # ml_dtypes: torch.from_numpy does not know it
        return torch.from_numpy(np.require(a, requirements="C").view(np.uint16).copy()).view(torch.bfloat16)
    if name.startswith("float8"):
        tdt = {"float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}.get(name)
        if tdt is None:
            raise TypeError(f"no torch dtype for {name}")
        return torch.from_numpy(np.require(a, requirements="C").view(np.uint8).copy()).view(tdt)
    return torch.from_numpy(np.array(a, copy=True))


def torch_to_np(t) -> np.ndarray:
    import torch

    t = t.detach()
    if t.is_sparse or t.layout != torch.strided:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    t = t.resolve_conj().resolve_neg().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16).copy()
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        import ml_dtypes
        return t.view(torch.uint8).numpy().view(getattr(ml_dtypes, str(t.dtype).split(".")[1])).copy()
    return t.numpy().copy()


def to_numpy(x: Any) -> np.ndarray | None:
    """numpy array of one framework output value; None when it is not a tensor."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.generic):
        return np.asarray(x)
    mod = type(x).__module__ or ""
    if mod.startswith("torch"):
        import torch
        if isinstance(x, torch.Tensor):
            return torch_to_np(x)
        return None
    if hasattr(x, "numpy") and callable(x.numpy):  # tvm Tensor, tf Tensor, keras tensors
        try:
            return np.asarray(x.numpy())
        except Exception:  # a non-tensor object with a numpy() method
            return None
    if mod.startswith("openvino") and hasattr(x, "data"):
        return np.array(x.data, copy=True)
    return None


def flatten_outputs(out: Any) -> list[np.ndarray]:
    """Flatten nested tuples/lists/dicts (and TVM Arrays) into a list of numpy arrays; non-tensors are dropped."""
    result: list[np.ndarray] = []

    def walk(x):
        if x is None or isinstance(x, (bool, int, float, complex, str)):
            return
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
            return
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
            return
        arr = to_numpy(x)
        if arr is not None:
            result.append(arr)
            return
        # TVM ffi Array / OpenVINO OVDict and other sequences that are not tensors
        if hasattr(x, "__len__") and hasattr(x, "__getitem__"):
            try:
                items = [x[i] for i in range(len(x))]
            except Exception:
                return
            for v in items:
                walk(v)

    walk(out)
    return result
