"""How wrong one value is, in the value oracle's own terms (dlci.oracles.compare): what localisation's trace
(dlci.localise.causal) and the search's fitness (dlci.oracles.fitness) measure.
"""
from __future__ import annotations

import numpy as np


def error(got, ref, ref64) -> tuple[int, float]:
    """(elements whose NaN/Inf class the oracle finds wrong, RMS distance to the float64 reference — else to the
    float32 one — over the elements finite in all)."""
    from dlci.oracles.compare import _as_real, classes_differ
    g, r = _as_real(np.asarray(got)), _as_real(np.asarray(ref))
    r64 = _as_real(np.asarray(ref64)) if ref64 is not None and np.shape(ref64) == np.shape(ref) else None
    if g.shape != r.shape:
        return int(r.size) or 1, float("inf")
    bad = int(classes_differ(g, r, r64, np.asarray(ref).dtype if np.asarray(ref).dtype.kind == "f" else "float32"
                             ).sum())
    base = r64 if r64 is not None else r
    ok = np.isfinite(g) & np.isfinite(base)
    d = (g - base)[ok]
    return bad, float(np.sqrt(np.mean(np.square(d)))) if d.size else 0.0


def ratio(got, ref, ref64) -> float:
    """One value's error in units of what the value oracle allows it: RMS distance to float64 over (FP64_MULTIPLIER
    times the float32 reference's own + the relative floor + atol); inf for a wrong NaN/Inf class. Above 1 the
    oracle's fp64 arbitration would call it wrong."""
    from dlci.oracles import compare as C
    g, r = np.asarray(got), np.asarray(ref)
    if g.shape != r.shape or r.dtype.kind not in "fc":
        return 0.0 if g.shape == r.shape and np.array_equal(g, r) else float("inf")
    bad, _ = error(g, r, ref64)
    if bad:
        return float("inf")
    gr, rr = C._as_real(g), C._as_real(r)
    r64 = C._as_real(np.asarray(ref64)) if ref64 is not None and np.shape(ref64) == r.shape else rr
    ok = np.isfinite(gr) & np.isfinite(rr) & np.isfinite(r64)
    rtol, atol = C.tolerance(r.dtype.name, ref64 is not None)
    allowed = C.FP64_MULTIPLIER * C._rms(rr[ok] - r64[ok]) + C.rel_floor(r.dtype.name) * C._rms(r64[ok]) + atol
    return C._rms(gr[ok] - r64[ok]) / allowed if allowed > 0 else 0.0
