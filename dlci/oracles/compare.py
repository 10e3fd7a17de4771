"""The inconsistency oracle: does a target's output agree with the source framework's?

Rules that keep it quiet (each one removes a class of false report that maintainers reject):
- per-dtype tolerances (PyTorch's defaults) against the float32 reference first;
- where that fails, an fp64 recomputation decides: the target is only wrong when it is much further from the
  fp64 result than the float32 reference itself is (the accuracy check torch._dynamo uses for its own bugs): its RMS
  distance to fp64 exceeds FP64_MULTIPLIER times the reference's, plus a relative floor (FP64_REL_FLOOR, at least
  FP64_FLOOR_ULPS units of the dtype's precision) times the fp64 RMS, plus atol;
- NaN/Inf masks are compared, not ignored: a position counts only when the target's class (nan/±inf/finite)
  differs from the float32 reference *and* from the fp64 reference rounded to the output dtype;
- index outputs (argmax, sort indices, ...) are compared by shape and dtype only: ties make their values arbitrary;
  so are the outputs of operators whose values are undefined (empty, empty_like, ...);
- dtypes must be the declared ones (the reference's): an int32 where the model declares int64 is a bug;
- the integer outputs of a quantized model may be one quantization step off (rounding), no more.

Each rule is one small function that needs nothing but numpy: a standalone reproducer pastes the very ones its
finding's symptom needs (dlci.findings.repro.checks), so that it judges exactly as the campaign did.
"""
from __future__ import annotations

import numpy as np

# (rtol, atol) per dtype against the float32 reference: torch.testing's defaults
TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
# (rtol, atol) when there is no fp64 reference to arbitrate (e.g. ONNX expected outputs): the ONNX backend
# test runner's looser relative tolerance
LOOSE_TOLERANCES = {
    "float16": (1e-2, 1e-3),
    "bfloat16": (5e-2, 1e-2),
    "float32": (1e-3, 1e-5),
    "float64": (1e-6, 1e-7),
    "complex64": (1e-3, 1e-5),
    "complex128": (1e-6, 1e-7),
}
FP64_MULTIPLIER = 3.0  # how much further from fp64 than the float32 reference a target may be
FP64_REL_FLOOR = 1e-4  # relative RMS error always tolerated after fp64 arbitration (float32 accumulation order)
FP64_FLOOR_ULPS = 4  # ... and never less than this many units of the output dtype's own precision (float16 math)


def rel_floor(dtype: str) -> float:
    """The relative RMS error always tolerated after fp64 arbitration for an output of ``dtype``: float16's
    precision (1e-3) alone is ten times FP64_REL_FLOOR, so a float16 kernel that accumulates in float16 is not
    judged by float32's floor."""
    eps = {"bfloat16": 2.0 ** -7}.get(dtype)  # an ml_dtypes type: numpy's finfo does not know it
    if eps is None:
        try:
            eps = float(np.finfo(np.dtype(dtype)).eps) if np.dtype(dtype).kind in "fc" else 0.0
        except TypeError:
            eps = 0.0
    return max(FP64_REL_FLOOR, FP64_FLOOR_ULPS * eps)
QUANTIZATION_STEPS = 1  # a quantized value may round to the neighbouring step (TVM's and TFLite's tests allow 1)


def tolerance(dtype: str, arbitrated: bool) -> tuple[float, float]:
    """(rtol, atol) for an output of this dtype; ``arbitrated``: an fp64 reference exists."""
    table = TOLERANCES if arbitrated else LOOSE_TOLERANCES
    return table.get(dtype, table["float32"])


def _kind(a: np.ndarray) -> str:
    k = a.dtype.kind
    if k == "V" or a.dtype.name in ("bfloat16",) or a.dtype.name.startswith("float8"):
        return "f"  # ml_dtypes types
    return {"b": "b", "i": "i", "u": "i", "f": "f", "c": "c"}.get(k, k)


def nan_classes(a):
    """Elementwise class of a float64 array: 0 finite, 1 nan, 2 +inf, 3 -inf."""
    return np.select([np.isnan(a), np.isposinf(a), np.isneginf(a)], [1, 2, 3], 0).astype(np.int8)


def classes_differ(got, ref, ref64, dtype):
    """Positions whose NaN/Inf class differs from the float32 reference's and, with an fp64 reference, from that
    one's rounded to the output ``dtype`` (which reproduces legitimate float32 overflow to inf)."""
    bad = nan_classes(got) != nan_classes(ref)
    if ref64 is not None and bad.any():
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = ref64.astype(dtype if np.dtype(dtype).kind == "f" else np.float32).astype(np.float64)
        bad &= nan_classes(got) != nan_classes(rounded)
    return bad


def values_differ(got, ref, ref64, rtol, atol, multiplier, floor):
    """Beyond (rtol, atol) where both are finite, and (with ref64) further from fp64 than rounding explains."""
    ok = np.isfinite(got) & np.isfinite(ref)
    beyond = bool(np.any(np.abs(got[ok] - ref[ok]) > atol + rtol * np.abs(ref[ok])))
    if not beyond or ref64 is None:
        return beyond
    ok &= np.isfinite(ref64)
    g, r, r64 = got[ok], ref[ok], ref64[ok]
    rms = [float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0 for a in (g - r64, r - r64, r64)]
    return rms[0] > multiplier * rms[1] + floor * rms[2] + atol


def integers_differ(got, ref, ref64, steps=0):
    """Integer and boolean outputs compare exactly, with the float32 reference or else the fp64 one (the values of a
    quantized model: within ``steps`` quantization steps)."""
    got = got.astype(np.int64)
    return bool(np.any(np.abs(got - ref.astype(np.int64)) > steps)) and (
        ref64 is None or bool(np.any(np.abs(got - np.asarray(ref64).astype(np.int64)) > steps)))


def _as_real(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag], axis=-1).astype(np.float64)
    return a.astype(np.float64)


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0


def compare_one(got: np.ndarray, ref: np.ndarray, ref64: np.ndarray | None, *,
                values: bool = True, rtol: float | None = None, atol: float | None = None,
                steps: int = 0, widen: dict[str, tuple[float, float]] | None = None) -> dict | None:
    """Compare one output. Returns None when consistent, else {symptom, message, distance}. ``steps``: the
    quantization steps an integer output may be off by (a quantized model's values)."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    if got.shape != ref.shape:
        return {"symptom": "shape mismatch", "message": f"shape {list(got.shape)} != expected {list(ref.shape)}",
                "distance": {"got_shape": list(got.shape), "expected_shape": list(ref.shape)}}
    gk, rk = _kind(got), _kind(ref)
    if gk != rk or got.dtype.itemsize != ref.dtype.itemsize or got.dtype.kind != ref.dtype.kind:
        # the reference has the type the model declares: int32 where it says int64 is a bug users hit downstream
        return {"symptom": "dtype mismatch", "message": f"dtype {got.dtype} != expected {ref.dtype}",
                "distance": {"got_dtype": str(got.dtype), "expected_dtype": str(ref.dtype)}}
    if not values or got.size == 0:
        return None
    if rk in "bi":
        if not integers_differ(got, ref, ref64, steps):
            return None
        diff = np.abs(got.astype(np.int64) - ref.astype(np.int64)) > steps
        how = f"by more than {steps} quantization step{'s' if steps > 1 else ''}" if steps else "(exact comparison)"
        return {"symptom": "value mismatch",
                "message": f"{int(diff.sum())} of {got.size} elements differ {how}",
                "distance": {"mismatched": int(diff.sum()), "total": int(got.size),
                             "max_abs": float(np.max(np.abs(got.astype(np.float64) - ref.astype(np.float64))))}}
    return _compare_float(got, ref, None if ref64 is None else np.asarray(ref64), rtol, atol, widen)


def _compare_float(got, ref, ref64, rtol, atol, widen=None) -> dict | None:
    d_rtol, d_atol = tolerance(ref.dtype.name, ref64 is not None)
    if widen and ref.dtype.name in widen:  # what the target's own project allows on its device, per dtype
        d_rtol, d_atol = max(d_rtol, widen[ref.dtype.name][0]), max(d_atol, widen[ref.dtype.name][1])
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    g, r = _as_real(got), _as_real(ref)
    r64 = _as_real(ref64) if ref64 is not None else None
    if r64 is not None and r64.shape != r.shape:
        r64 = None  # fp64 recomputation took another path (e.g. a different output layout): do not arbitrate

    # 1. NaN / Inf classes
    bad_class = classes_differ(g, r, r64, ref.dtype)
    n_class = int(bad_class.sum())
    if n_class:
        gc, rc = nan_classes(g), nan_classes(r)
        idx = tuple(int(i) for i in np.argwhere(bad_class)[0])
        names = {0: "finite", 1: "nan", 2: "+inf", 3: "-inf"}
        return {"symptom": "nan mismatch",
                "message": (f"{n_class} of {g.size} elements have another NaN/Inf class, e.g. at {list(idx)}: "
                            f"{names[int(gc[idx])]} ({g[idx]!r}) vs expected {names[int(rc[idx])]} ({r[idx]!r})"),
                "distance": {"mismatched": n_class, "total": int(g.size), "first_index": list(idx)}}

    # 2. values where both are finite
    if not values_differ(g, r, r64, rtol, atol, FP64_MULTIPLIER, rel_floor(ref.dtype.name)):
        return None
    return _value_verdict(g, r, r64, rtol, atol, rel_floor(ref.dtype.name))


def _value_verdict(g, r, r64, rtol, atol, floor=FP64_REL_FLOOR) -> dict:
    """What a value mismatch reports (values_differ decided it)."""
    finite = np.isfinite(g) & np.isfinite(r)
    gf, rf = g[finite], r[finite]
    err = np.abs(gf - rf)
    close = err <= atol + rtol * np.abs(rf)
    distance = {"max_abs": float(err.max()),
                "max_rel": float(np.max(err / np.maximum(np.abs(rf), np.finfo(np.float64).tiny))),
                "mismatched": int((~close).sum()), "total": int(g.size), "rtol": rtol, "atol": atol}
    if r64 is not None:
        ok = finite & np.isfinite(r64)
        got_err, ref_err, scale = _rms(g[ok] - r64[ok]), _rms(r[ok] - r64[ok]), _rms(r64[ok])
        allowed = FP64_MULTIPLIER * ref_err + floor * scale + atol
        distance.update({"fp64_rmse_target": got_err, "fp64_rmse_reference": ref_err, "fp64_allowed": allowed})
    worst = int(np.argmax(err))
    return {"symptom": "value mismatch",
            "message": (f"{distance['mismatched']} of {g.size} elements differ; max abs diff {distance['max_abs']:.6g} "
                        f"(got {gf[worst]:.8g}, expected {rf[worst]:.8g})"),
            "distance": distance}


def compare_outputs(got: list[np.ndarray], ref: list[np.ndarray], ref64: list[np.ndarray] | None, *,
                    skip_values: set[int] = frozenset(), ignore: set[int] = frozenset(), rtol: float | None = None,
                    atol: float | None = None, quantized: set[int] = frozenset(),
                    widen: dict[str, tuple[float, float]] | None = None) -> dict | None:
    """Compare all outputs of one test; None when consistent. ``skip_values``: outputs compared by shape only;
    ``ignore``: outputs not compared at all (implementation-defined, e.g. statistics saved for backward);
    ``quantized``: integer outputs holding quantized values, which may be one step off; ``widen``: (rtol, atol) per
    dtype that a device target's project allows beyond the defaults (the larger of the two is used)."""
    if ignore and len(got) == len(ref):
        keep = [i for i in range(len(ref)) if i not in ignore]
        got, ref = [got[i] for i in keep], [ref[i] for i in keep]
        ref64 = None if ref64 is None else [ref64[i] for i in keep if i < len(ref64)]
        skip_values = {keep.index(i) for i in skip_values if i in keep}
        quantized = {keep.index(i) for i in quantized if i in keep}
    if len(got) != len(ref):
        return {"symptom": "output count", "message": f"{len(got)} outputs != expected {len(ref)}",
                "distance": {"got": len(got), "expected": len(ref)}}
    for i, (g, r) in enumerate(zip(got, ref)):
        r64 = ref64[i] if ref64 is not None and i < len(ref64) else None
        verdict = compare_one(g, r, r64, values=i not in skip_values, rtol=rtol, atol=atol,
                              steps=QUANTIZATION_STEPS if i in quantized else 0, widen=widen)
        if verdict is not None:
            verdict["distance"]["output"] = i
            if len(got) > 1:
                verdict["message"] = f"output {i}: " + verdict["message"]
            return verdict
    return None
