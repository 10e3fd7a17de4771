"""Audee's fitness for a candidate's inputs and weights (dlci.evolve's search): how close its tests came to an
inconsistency.

Measured in the worker on each passing test (:func:`measure`, called by dlci.testcase for instances marked
``search``), combined in the parent over the candidate's targets (:func:`score`):

- **inconsistency** with the fp64 reference: per output, the error in units of what the value oracle allows
  (dlci.oracles.error.ratio: above 1 the fp64 arbitration would call it wrong) — Audee's layer distance, measured
  against the float64 reference of the whole graph instead of another framework;
- **between targets**: the targets' errors compared with one another through a sketch — the error of each output,
  in the same units, projected on a few random ±1 vectors drawn from the instance's seed (the same vectors in every
  target's worker), so that two targets wrong in different directions count even when each one alone is not far;
- **NaN/Inf**: Audee's outlier heuristic — the spread (max - min) of the target's own outputs, which grows toward the
  overflow and the domain edges where NaN and Inf come from (log-scaled, as the other terms).

A failing test needs no fitness: it is what the search looks for (the stream records it and moves on).
"""
from __future__ import annotations

import math

import numpy as np

SKETCH = 4  # random projections per output
CAP = 1e6  # a ratio beyond this (or a wrong NaN/Inf class) counts as this
WEIGHTS = {"inconsistency": 1.0, "between": 0.5, "nan": 0.25}


def measure(got: list, ref: list, ref64: list | None, seed: int) -> dict:
    """{"ratio", "spread", "sketch"} of one test's outputs (floats only; others are left out)."""
    from dlci.oracles import compare as C
    from dlci.oracles.error import ratio
    worst, spread, sketch = 0.0, 0.0, []
    for i, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        if r.dtype.kind != "f" or g.shape != r.shape or not r.size:
            continue
        r64 = np.asarray(ref64[i]) if ref64 is not None and i < len(ref64) else None
        worst = max(worst, min(CAP, ratio(g, r, r64)))
        gf = g.astype(np.float64)
        finite = gf[np.isfinite(gf)]
        if finite.size:
            spread = max(spread, math.log10(1.0 + float(finite.max() - finite.min())))
        base = r64.astype(np.float64) if r64 is not None and r64.shape == r.shape else r.astype(np.float64)
        rtol, atol = C.tolerance(r.dtype.name, r64 is not None)
        ok = np.isfinite(gf) & np.isfinite(base)
        unit = atol + C.rel_floor(r.dtype.name) * C._rms(base[ok])
        e = np.where(ok, gf - base, 0.0) / unit
        signs = np.random.default_rng([seed, i, e.size]).choice([-1.0, 1.0], size=(SKETCH, e.size))
        sketch.append([float(v) for v in signs @ e.reshape(-1) / max(1.0, math.sqrt(e.size))])
    return {"ratio": worst, "spread": round(spread, 4), "sketch": sketch}


def score(measures: dict[str, dict]) -> float:
    """One candidate's fitness from its targets' measures (target -> :func:`measure`): the largest
    inconsistency, the largest disagreement between two targets, and the largest spread, each log-scaled."""
    if not measures:
        return 0.0
    worst = max(m.get("ratio", 0.0) for m in measures.values())
    spread = max(m.get("spread", 0.0) for m in measures.values())
    between = 0.0
    names = sorted(measures)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            sa, sb = measures[names[a]].get("sketch") or [], measures[names[b]].get("sketch") or []
            for xa, xb in zip(sa, sb):
                if len(xa) == len(xb) and xa:
                    between = max(between, max(abs(u - v) for u, v in zip(xa, xb)))
    return (WEIGHTS["inconsistency"] * math.log10(1.0 + worst) + WEIGHTS["between"] * math.log10(1.0 + between)
            + WEIGHTS["nan"] * spread)
