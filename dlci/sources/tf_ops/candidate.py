"""A candidate call as it is being built: its runtime tensors and constants (:class:`_Cand`), the choices made so far
(:class:`_Ctx`), and the value and shape helpers the builder draws them with.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlci.sources.tf_ops.plan import _Attr, _In, _Plan, _Skip
from dlci.sources.tf_ops.roles import _CONST_ROLES, MAIN_DTYPES, NONFINITE, SUPPORTED


@dataclass
class _Rt:
    """A runtime tensor input of a candidate."""
    array: np.ndarray


@dataclass
class _Cand:
    index: int
    kwargs: dict  # keyword -> _Rt | [_Rt] | JSON constant
    params: dict
    domain: str
    runtime_arg: str | None
    detail: str
    features: frozenset = frozenset()


class _Ctx:
    """What one candidate has chosen so far."""

    def __init__(self, p: _Plan, rng: np.random.Generator, first: bool):
        self.p, self.rng, self.first = p, rng, first
        self.values: dict[str, Any] = {}  # keyword -> chosen value (arrays for data, JSON for the rest)
        self.dtypes: dict[str, str] = {}  # type attr -> dtype
        self.shape: list[int] | None = None  # the primary data shape
        self.layout = "NHWC"
        self.spatial = 3 if p.kind == "volume" else 2
        self.domain = "normal"
        self.notes: list[str] = []

    # a choice: the first candidate takes the first option, the others the first one with probability p0
    def pick(self, options, p0: float = 0.5):
        options = list(options)
        if not options:
            raise _Skip("no-option")
        if self.first or len(options) == 1 or self.rng.random() < p0:
            return options[0]
        return options[int(self.rng.integers(1, len(options)))]

    @property
    def rank(self) -> int:
        return len(self.shape) if self.shape is not None else 2

    def dim(self, axis: int, default: int = 3) -> int:
        if self.shape is None or not self.shape:
            return default
        return self.shape[axis % len(self.shape)]

    @property
    def channel_axis(self) -> int:
        return 1 if self.layout.startswith("NC") else -1

    def spatial_axes(self) -> list[int]:
        r = self.rank
        return list(range(2, r)) if self.layout.startswith("NC") else list(range(1, r - 1))


def _floatish(dtype: str) -> bool:
    return dtype.startswith(("float", "complex"))


def _values(rng: np.random.Generator, shape, dtype: str, domain: str) -> np.ndarray:
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return rng.random(shape) < (0.8 if domain == "positive" else 0.5)
    if dtype.startswith("complex"):
        part = "float32" if dtype == "complex64" else "float64"
        re_ = _values(rng, shape, part, domain)
        im = _values(rng, shape, part, domain if domain not in NONFINITE else "normal")
        return (re_ + 1j * im).astype(dtype)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        lo = 0 if dtype.startswith("uint") else None
        if domain == "zeros":
            return np.zeros(shape, dtype)
        if domain in ("large", "huge"):
            pool = [info.max, info.max // 2, info.max - 1, 1, 0] + ([] if lo == 0 else [info.min, info.min // 2, -1])
            return np.asarray(rng.choice(pool, size=shape)).astype(dtype)
        lo_hi = {"positive": (1, 7), "small_int": (0, 4), "unit": (-1, 2)}.get(domain, (-5, 6))
        a, b = lo_hi
        if lo == 0:
            a, b = max(a, 0), max(b, 3)
        return rng.integers(a, b, size=shape).astype(dtype)
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        if domain == "positive":
            x = rng.uniform(0.1, 3.0, shape)
        elif domain == "unit":
            x = rng.uniform(-0.95, 0.95, shape)
        elif domain == "small_int":
            x = rng.integers(-3, 4, shape).astype(np.float64)
        elif domain == "zeros":
            x = np.zeros(shape)
        elif domain == "signed_zero":
            x = rng.standard_normal(shape)
            flat = x.reshape(-1)
            pos = rng.permutation(n)[:max(1, n // 2)]
            flat[pos[0::2]] = -0.0
            flat[pos[1::2]] = 0.0
            x = flat.reshape(shape)
        elif domain in ("large", "huge", "tiny", "subnormal"):
            target = {"large": math.sqrt(float(fi.max)), "huge": float(fi.max) / 4,
                      "tiny": math.sqrt(float(fi.tiny)), "subnormal": float(fi.tiny) / 4}[domain]
            x = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.0, shape) * target
        else:
            x = rng.standard_normal(shape)
            if domain in NONFINITE and n:
                flat = x.reshape(-1)
                pos = rng.permutation(n)[:max(1, n // 8)]
                flat[pos] = np.nan if domain == "nan" else rng.choice([np.inf, -np.inf], pos.size)
                x = flat.reshape(shape)
        out = np.asarray(x).astype(dtype)
    if domain == "signed_zero":
        out = np.where(np.asarray(x) == 0, np.copysign(np.zeros((), dtype), np.asarray(x)).astype(dtype), out)
    return np.asarray(out, dtype=dtype)


def _spd(rng, shape, dtype: str) -> np.ndarray:
    n = shape[-1]
    m = rng.standard_normal(shape)
    a = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    return a.astype(dtype)


_GENERIC_SHAPES = ([2, 3, 4], [3, 4], [5], [2, 3, 4, 5], [], [4, 1, 3], [6], [3, 3], [2, 1, 5, 1])
_MATRIX_SHAPES = ([3, 3], [2, 4, 4], [3, 4], [4, 3], [2, 3, 3], [1, 5, 5])
_IMAGE_SHAPES = ([1, 5, 5, 3], [2, 4, 4, 2], [1, 6, 6, 1], [1, 2, 2, 4], [4, 2, 2, 3], [1, 7, 5, 2], [1, 4, 4, 4])
_VOLUME_SHAPES = ([1, 4, 4, 4, 2], [2, 3, 3, 3, 1], [1, 5, 4, 3, 2])


def _primary_shape(c: _Ctx) -> list[int]:
    kind = c.p.kind
    if kind == "volume":
        shapes = _VOLUME_SHAPES + ([1, 5, 5, 3], [2, 3, 4])
    elif kind == "image":
        shapes = _IMAGE_SHAPES + ([2, 3, 4], [3, 4], [])
    elif kind == "matrix":
        shapes = _MATRIX_SHAPES + ([2, 3, 4], [5])
    else:
        shapes = _GENERIC_SHAPES
    if any(a.role == "squeeze" for a in c.p.attrs):
        shapes = ([4, 1, 3], [2, 1, 5, 1], [1, 3], [1]) + tuple(shapes)
    s = list(c.pick(shapes, p0=0.35))
    if c.layout.startswith("NC") and len(s) >= 3:
        s = [s[0], s[-1]] + s[1:-1]
    return s


def _related_shape(c: _Ctx, role: str) -> list[int]:
    s = list(c.shape) if c.shape is not None else [3, 4]
    r = len(s)
    if role == "rhs":
        opts = [s[:-2] + [s[-1], 2] if r >= 2 else [s[0] if s else 3, 2], s, s[:-1] + [1] if r >= 1 else [3, 1]]
        return c.pick(opts, 0.6)
    opts: list[list[int]] = [s]
    if r >= 1:
        b = [d if c.rng.random() < 0.5 else 1 for d in s]
        opts.append(b if b != s else s[1:])
        opts.append(s[1:] if r >= 2 else [])
    opts.append([])
    if r >= 2:
        opts.append(s[:-2] + [s[-1], 3])  # matmul partner
    return c.pick(opts, 0.55)


def _data_dtype(c: _Ctx, inp: _In) -> str:
    if inp.fixed:
        return inp.fixed
    if inp.type_attr and inp.type_attr in c.dtypes:
        return c.dtypes[inp.type_attr]
    return inp.allowed[0]


def _choose_dtypes(c: _Ctx) -> None:
    for attr, allowed in c.p.type_attrs.items():
        roles = {i.role for i in c.p.inputs if i.type_attr == attr}
        main = [t for t in allowed if t in MAIN_DTYPES] or [t for t in allowed if t in SUPPORTED]
        if not main:
            continue
        if roles <= _CONST_ROLES:
            # constants only (Range's start/limit/delta): a Python int or float decides
            main = [t for t in ("int32", "float32") if t in main] or main
        main = sorted(main, key=lambda t: SUPPORTED.index(t))
        if c.first or c.rng.random() < 0.45:
            c.dtypes[attr] = main[0]
        else:
            c.dtypes[attr] = main[int(c.rng.integers(0, len(main)))]


def _scalar_for(dtype: str, x: float):
    if dtype == "bool":
        return bool(x)
    if dtype.startswith(("int", "uint")):
        return int(round(x))
    return float(x)


def _const_dtype(c: _Ctx, inp: _In) -> str:
    if inp.fixed:
        return inp.fixed
    if inp.type_attr and inp.type_attr in c.dtypes:
        return c.dtypes[inp.type_attr]
    return "int32" if "int32" in inp.allowed else inp.allowed[0]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] or [1]


def _conv_out(size: int, k: int, s: int, d: int, padding: str, pads=(0, 0)) -> int:
    ek = (k - 1) * d + 1
    if padding == "SAME":
        return -(-size // s)
    if padding == "EXPLICIT":
        size = size + pads[0] + pads[1]
    return max(0, (size - ek) // s + 1)


def _list_attr(c: _Ctx, spatial_values: list[int], rank: int | None = None) -> list[int]:
    rank = rank or c.spatial + 2
    vals = list(spatial_values)[:rank - 2]
    vals += [vals[-1] if vals else 1] * (rank - 2 - len(vals))
    return [1, 1] + vals if c.layout.startswith("NC") else [1] + vals + [1]


def _attr_len(c: _Ctx, a: _Attr) -> int:
    d = a.default
    if isinstance(d, list) and d:
        return len(d)
    return c.spatial + 2



def _spec(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)}".replace(" ", "")
