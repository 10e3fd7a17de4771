"""Which valid candidates of an operator are kept (:func:`select`: the most diverse, boundary and non-finite value
domains a minority) and each as an instance (:func:`to_instance`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.sources import stable_seed
from dlci.sources.tf_ops.candidate import _Cand, _Rt
from dlci.sources.tf_ops.roles import BOUNDARY_DOMAINS, NONFINITE


def _features(cand: _Cand) -> frozenset:
    from dlci.instance import value_partition
    f = {f"domain:{cand.domain}"}
    for k, v in cand.kwargs.items():
        if isinstance(v, _Rt):
            f.add(f"{k}:{v.array.dtype}:r{v.array.ndim}")
        elif isinstance(v, list) and v and isinstance(v[0], _Rt):
            f.add(f"{k}:{v[0].array.dtype}:r{v[0].array.ndim}:n{len(v)}")
    for k, v in cand.params.items():
        f.add(f"{k}={value_partition(v)}")
    if cand.runtime_arg:
        f.add(f"runtime:{cand.runtime_arg}")
    return frozenset(f)


def select(valid: list[tuple[_Cand, list[np.ndarray]]], cap: int) -> list[tuple[_Cand, list[np.ndarray]]]:
    """At most ``cap`` of the valid candidates, greedily the ones adding the most new features; boundary value
    domains at most a third of them, NaN/Inf ones at most an eighth (at least one)."""
    covered: set = set()
    chosen: list = []
    left = list(valid)
    n_boundary = n_nonfinite = 0
    max_boundary, max_nonfinite = max(1, cap // 3), max(1, cap // 8)
    if left and left[0][0].index == 0 and cap > 0:  # the plain float32 case first, where it is valid
        chosen.append(left.pop(0))
        covered |= chosen[0][0].features
    while left and len(chosen) < cap:
        best, best_score = None, None
        for k, (cand, outs) in enumerate(left):
            if cand.domain in BOUNDARY_DOMAINS and n_boundary >= max_boundary:
                continue
            if cand.domain in NONFINITE and n_nonfinite >= max_nonfinite:
                continue
            new = len(cand.features - covered)
            nan_out = cand.domain not in NONFINITE and any(
                a.dtype.kind in "fc" and a.size and np.isnan(a).any() for a in outs)
            score = (new - (3 if nan_out else 0), -cand.index)
            if best_score is None or score > best_score:
                best, best_score = k, score
        if best is None:
            break
        cand, outs = left.pop(best)
        chosen.append((cand, outs))
        covered |= cand.features
        n_boundary += cand.domain in BOUNDARY_DOMAINS
        n_nonfinite += cand.domain in NONFINITE
    return sorted(chosen, key=lambda co: co[0].index)


def _json_value(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    return v


def to_instance(name: str, cand: _Cand, outs: list[np.ndarray], version: str) -> Instance:
    arrays: dict[str, np.ndarray] = {}
    call_kwargs: dict[str, Any] = {}

    def slot(a: np.ndarray) -> dict:
        i = sum(1 for k in arrays if k.startswith("in:"))
        arrays[f"in:{i}"] = np.require(a, requirements="C").copy()
        return {"$t": i}

    for k, v in cand.kwargs.items():
        if isinstance(v, _Rt):
            call_kwargs[k] = slot(v.array)
        elif isinstance(v, list) and v and isinstance(v[0], _Rt):
            call_kwargs[k] = [slot(x.array) for x in v]
        else:
            call_kwargs[k] = _json_value(v)
    n_in = len(arrays)
    for j, o in enumerate(outs):
        arrays[f"expected:{j}"] = np.require(o, requirements="C").copy()
    return Instance(op=f"tf::{name}", framework="keras",
                    call={"kind": "tf_fn", "fn": f"tf.raw_ops.{name}", "kwargs": call_kwargs},
                    inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(n_in)],
                    params={k: _json_value(v) for k, v in cand.params.items()},
                    origin=Origin("tf_ops", f"{name}#{cand.index} {cand.detail}".strip(), f"tensorflow {version}"),
                    seed=stable_seed("tf_ops", name, str(cand.index)), arrays=arrays)
