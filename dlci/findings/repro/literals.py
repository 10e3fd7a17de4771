"""Python literals of a reproducer's values: strings, floats, arrays rebuilt exactly (:func:`array_code`: small ones
written out, larger ones as base64 ``.npy``), and the stable piece of an error message a crash check looks for
(:func:`message_key`).
"""
from __future__ import annotations

import base64
import io
import json
import re

import numpy as np

INLINE_ELEMENTS = 64  # arrays up to this size are written as literals; larger ones as base64 .npy


def py_str(text: str) -> str:
    """A double-quoted Python string literal, as the target repositories write them (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def float_lit(v: float) -> str:
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def _element(v, dtype: np.dtype) -> str:
    """One array element as text: floats of a narrow type by their shortest form that round-trips."""
    if isinstance(v, float) and v == v and abs(v) != float("inf") and dtype.name in ("float16", "float32"):
        short = str(getattr(np, dtype.name)(v))
        if getattr(np, dtype.name)(float(short)) == getattr(np, dtype.name)(v):
            return short
    return float_lit(v) if isinstance(v, float) else repr(v)


def nested_literal(v, dtype: np.dtype) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(nested_literal(x, dtype) for x in v) + "]"
    return _element(v, dtype)


def array_code(a: np.ndarray) -> str:
    """Source text rebuilding the array exactly."""
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":  # ml_dtypes' type, which np.save cannot name: its values are exact in float32
        return f"{array_code(a.astype(np.float32))}.astype(ml_dtypes.bfloat16)"
    if a.size <= INLINE_ELEMENTS and a.dtype.kind in "biuf" and a.dtype.name in np.sctypeDict:
        dtype = "bool" if a.dtype.kind == "b" else f"np.{a.dtype.name}"
        if a.ndim == 1 and a.size:
            return f"np.array({nested_literal(a.tolist(), a.dtype)}, dtype={dtype})"
        flat = nested_literal(a.reshape(-1).tolist(), a.dtype)
        return f"np.array({flat}, dtype={dtype}).reshape({tuple(a.shape)!r})"
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    blob = base64.b64encode(buf.getvalue()).decode()
    return f"np.load(io.BytesIO(base64.b64decode({blob!r})))"


def message_key(message: str) -> str:
    """A stable piece of an error message: its first sentence, cut before addresses, long numbers and, when
    enough text is left, before the names of values (which differ between dlci's model and the reproducer's,
    e.g. `inp_0` vs `x0`)."""
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    first = re.split(r"0x[0-9a-fA-F]+|\d{5,}|/tmp/|/root/|site-packages", first)[0]
    first = re.split(r"(?<=[a-z])\.\s", first)[0].strip()
    short = re.split(r"\(|\[|'|\"|`", first)[0].strip()
    return (short if len(short) >= 24 else first)[:100]
