"""Snap moves: jumps of the external values to the exact values where a vulnerable operand collapses.

A gradient step only approaches a boundary such as ``std == 0`` or ``cos == 1``: the operand is a reduction (a
variance, a norm, a dot product) of values computed from the externals, and rounding keeps it a few ulps away. The
collapse itself happens at structured points of the externals: a weight column at zero (a feature constant over the
batch), rows of a batch equal (every batch statistic degenerate), a vector at a basis direction (its normalisation
exact), two inputs equal (their distance exactly zero).

The moves are read off the structure of the operand as one differentiable run shows it (framework-neutral, numpy
only):
- which externals feed it: those with a gradient of the target distance (the frameworks give none for an
  unconnected input);
- which of their elements feed the driven element: where that gradient is non-zero (a column of ``w`` for a column
  statistic of ``x @ w``, a row of ``x`` for a row norm); a connected external whose gradient vanishes everywhere (a
  bias under a shift-invariant statistic) is moved whole;
- through which reductions: an axis along which that support spans several slices is one the operand reduces over
  (the batch axis of a batch statistic), and only along such axes are slices made equal;
- toward which value: the boundary of the operation's table entry (:func:`family`): 0 for a divisor, a variance, a
  norm, the operand of sqrt/rsqrt/log; +-1 for acos/asin.
Every value stays inside its generator's legal range (:meth:`External.clip`), so a collapse found this way is one the
program can meet.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dlci.nan.core import External

MAX_SNAPS = 24  # proposals per round: a round costs one program run each


@dataclass
class Snap:
    label: str  # e.g. "zero e3", "equal e0 axis 0", "copy e1<-e0", "zero all"
    values: dict[int, np.ndarray]  # external index -> new value (the externals the move changes)


def short(v: np.ndarray, bits: int = 8) -> np.ndarray:
    """``v`` rounded to ``bits`` significant bits: sums of a few such values and their means are exact."""
    m, e = np.frexp(np.asarray(v, dtype=np.float64))
    return np.ldexp(np.round(m * 2.0 ** bits) / 2.0 ** bits, e)


def _support(g: np.ndarray) -> np.ndarray:
    s = g != 0
    return s if s.any() else np.ones_like(s)


def _slices(mask: np.ndarray, axis: int) -> np.ndarray:
    """Indices along ``axis`` where ``mask`` has any element."""
    other = tuple(a for a in range(mask.ndim) if a != axis)
    return np.flatnonzero(mask.any(axis=other) if other else mask)


def _fit(e: External, v: np.ndarray, cur: np.ndarray) -> np.ndarray | None:
    """The move's value clipped to the legal range, in the external's dtype; None when it changes nothing."""
    out = e.clip(np.asarray(v, dtype=np.float64)).astype(cur.dtype)
    return None if np.array_equal(out, cur) else out


def zero(e: External, cur: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    v = cur.astype(np.float64)
    v[mask] = 0.0
    return _fit(e, v, cur)


def equal(e: External, cur: np.ndarray, mask: np.ndarray, axis: int, g: np.ndarray) -> np.ndarray | None:
    """The slices along ``axis`` that feed the operand made equal to the most influential one (short values, so
    that a mean over them is exact)."""
    idx = _slices(mask, axis)
    if idx.size < 2:
        return None
    other = tuple(a for a in range(g.ndim) if a != axis)
    mass = np.abs(g).sum(axis=other) if other else np.abs(g)
    r = int(idx[np.argmax(mass[idx])])
    v = cur.astype(np.float64)
    rep = short(np.take(v, [r], axis=axis))
    index = [slice(None)] * v.ndim
    index[axis] = idx
    v[tuple(index)] = rep  # broadcasts along axis
    return _fit(e, v, cur)


def unit(e: External, cur: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    """Each vector (last axis) that feeds the operand set to a signed power of two on its largest component and 0
    elsewhere: its norm, its normalisation and its dot product with an equal vector are exact."""
    if cur.ndim == 0 or cur.shape[-1] < 2:
        return None
    low, high = e.bounds()
    if not low <= 0.0 <= high:
        return None
    v = cur.astype(np.float64).reshape(-1, cur.shape[-1])
    rows = np.flatnonzero(mask.reshape(-1, cur.shape[-1]).any(axis=1))
    for i in rows:
        k = int(np.argmax(np.abs(v[i])))
        sign = 1.0 if v[i, k] >= 0 else -1.0
        limit = min(1.0, high if sign > 0 else -low)
        if limit <= 0:
            return None
        v[i] = 0.0
        v[i, k] = sign * 2.0 ** math.floor(math.log2(limit))
    return _fit(e, v.reshape(cur.shape), cur)


def family(entry: dict) -> str | None:
    """Which collapses a table entry's boundary calls for: "zero" (a divisor, a variance, the operand of sqrt/log
    at 0), "unit" (acos/asin/atanh at +-1: two vectors parallel, a normalisation exact), "both" (an interval with 0 at
    one end), or None (overflow, softmax spread, poles: a matter of magnitude, which continuous steps handle)."""
    check = entry.get("check")
    if check in ("nonzero", "variance", "pow"):
        return "zero"
    if check != "domain":
        return None
    bounds = [b for b in (entry.get("low"), entry.get("high")) if b is not None]
    if bounds == [0.0]:
        return "zero"
    return "both" if 0.0 in bounds else "unit"


def snaps(externals: list[External], values: dict[int, np.ndarray], grads: dict[int, np.ndarray],
          kind: str = "both", max_snaps: int = MAX_SNAPS) -> list[Snap]:
    """The snap moves for one target distance, the likeliest first.

    ``values``: each external's current value (its substitution, else what the seed drew); ``grads``: the gradient
    of the target distance for the externals that reach it; ``kind``: :func:`family` of the target's entry."""
    live = []
    for e in externals:
        g = grads.get(e.index)
        if e.kind != "real" or g is None or g.shape != e.shape or e.orig.size == 0 or not np.all(np.isfinite(g)):
            continue
        cur = np.asarray(values.get(e.index, e.orig))
        live.append((e, cur, g, _support(g)))
    # the externals that move the operand most first (|gradient| x the generator's scale)
    live.sort(key=lambda t: -float(np.abs(t[2]).sum()) * t[0].scale)
    out: list[Snap] = []
    seen: set[bytes] = set()

    def add(label: str, moved: dict[int, np.ndarray | None]) -> None:
        moved = {k: v for k, v in moved.items() if v is not None}
        if not moved:
            return
        key = b"".join(str(k).encode() + v.tobytes() for k, v in sorted(moved.items()))
        if key not in seen:
            seen.add(key)
            out.append(Snap(label, moved))

    def zeros():  # a weight column, an input row, a bias: the elements that feed the operand at 0
        for e, cur, g, m in live:
            add(f"zero e{e.index}", {e.index: zero(e, cur, m)})
        if len(live) > 1:
            add("zero all", {e.index: zero(e, cur, m) for e, cur, g, m in live})
        # whole externals too: elements whose gradient happens to vanish here still feed the operand
        for e, cur, g, m in live:
            add(f"zero e{e.index} whole", {e.index: zero(e, cur, np.ones_like(m))})
        if len(live) > 1:
            add("zero all whole", {e.index: zero(e, cur, np.ones_like(m)) for e, cur, g, m in live})

    def equals():  # rows of a batch equal (batch statistics degenerate); two inputs equal (their distance is 0)
        for e, cur, g, m in live:
            for axis in range(cur.ndim):
                add(f"equal e{e.index} axis {axis}", {e.index: equal(e, cur, m, axis, g)})
        for i, (e, cur, g, m) in enumerate(live):
            for e2, cur2, _g2, _m2 in live[i + 1:]:
                if cur2.shape == cur.shape:
                    add(f"copy e{e.index}<-e{e2.index}", {e.index: _fit(e, np.where(m, cur2, cur), cur)})
        batch = [t for t in live if t[1].ndim >= 2]
        if len(batch) > 1 and len({t[1].shape[0] for t in batch}) == 1:
            add("equal all axis 0", {e.index: equal(e, cur, np.ones_like(m), 0, g) for e, cur, g, m in batch})

    def units():  # a vector at a basis direction: its normalisation and its dot product with itself are exact
        for e, cur, g, m in live:
            add(f"unit e{e.index}", {e.index: unit(e, cur, m)})
        if len(live) > 1:
            add("unit all", {e.index: unit(e, cur, m) for e, cur, g, m in live})

    order = {"zero": (zeros, equals), "unit": (equals, units), "both": (zeros, equals, units)}.get(kind, ())
    for make in order:
        make()
    return out[:max_snaps]
