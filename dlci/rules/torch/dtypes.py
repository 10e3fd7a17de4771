"""Category 12, dtype: the same values in two dtypes whose ranges both hold them (int64 vs int32 for integer
operators; float32 vs float64 and float16 vs float32 for operators that only select or move values)."""
import numpy as np
import torch

from dlci.rules.torch.common import na, plain

I32 = np.iinfo(np.int32)


def in_int32(arrays):
    return all(a.dtype.kind != "i" or not a.size or (a.min() >= I32.min and a.max() <= I32.max) for a in arrays)


def in_int64(case, inputs, dtype=None):
    """The instance in int64."""
    if dtype == "float64":
        raise NotImplementedError("integer computation: no float64 form")
    return plain(case, inputs)


def in_int32_too(case, inputs):
    """The int64 inputs as int32 (their values fit); the int64 results must fit int32 too (no wrap-around)."""
    if not in_int32(inputs) or not in_int32(plain(case, inputs)):
        na("values outside the int32 range")
    return [o.astype(np.int64) if o.dtype == np.int32 else o
            for o in plain(case, [x.astype(np.int32) if x.dtype == np.int64 else x for x in inputs])]


def explicit_dtype(case):
    if "dtype" in case.call.get("kwargs", {}):
        na("an explicit dtype argument fixes the computation dtype")


def run_in(case, inputs, name, narrow):
    """The model in dtype `name`, its floating weights and inputs first rounded to `narrow` (values both hold)."""
    model = case.build_model().to(getattr(torch, narrow)).to(getattr(torch, name))
    xs = [x.astype(narrow).astype(name) if x.dtype.kind == "f" else x for x in inputs]
    with torch.no_grad():
        return case.flatten(model(*case.to_torch(xs)))


def selected(case, outs, inputs, narrow):
    """Every finite float result is, up to sign, one of the input or weight values (or 0): values selected or
    moved, not computed; otherwise the two dtypes may round differently and the rule does not apply."""
    pool = [np.abs(x.astype(narrow).astype(np.float64)).ravel() for x in inputs if x.dtype.kind == "f"]
    pool += [np.abs(t.detach().to(getattr(torch, narrow)).double().numpy()).ravel()
             for t in list(case.build_model().parameters()) + list(case.build_model().buffers())
             if t.is_floating_point()]
    pool = np.concatenate(pool + [np.zeros(1)])
    for o in outs:
        if o.dtype.kind == "f":
            v = np.abs(o[np.isfinite(o)].astype(np.float64))
            if not np.isin(v, pool).all():
                na("results on this instance are computed values, not selected ones")


def narrow_run(case, inputs, narrow):
    """The operator in `narrow` (inputs and weights rounded to it: the values both dtypes hold)."""
    explicit_dtype(case)
    return run_in(case, inputs, narrow, narrow)


def wide_run(case, inputs, dtype, narrow, wide):
    """The operator in `wide` on the same values, results rounded to the dtypes the `narrow` run gives (dtype
    "float64": the `wide` results as they are)."""
    explicit_dtype(case)
    out = run_in(case, inputs, wide, narrow)
    if dtype == "float64":
        return out
    selected(case, out, inputs, narrow)
    ref = narrow_run(case, inputs, narrow)
    return [w.astype(n.dtype) if w.dtype.kind == "f" and n.dtype.kind == "f" else w for w, n in zip(out, ref)]


def float64_rounded(case, inputs, dtype=None):
    """The operator in float64 on the float32 values, rounded back to float32."""
    return wide_run(case, inputs, dtype, "float32", "float64")


def float32_run(case, inputs):
    """The operator in float32 (the instance)."""
    return narrow_run(case, inputs, "float32")


def float32_rounded(case, inputs, dtype=None):
    """The operator in float32 on the values rounded to float16, results rounded to float16."""
    return wide_run(case, inputs, dtype, "float16", "float32")


def float16_run(case, inputs):
    """The operator in float16 on the same values."""
    return narrow_run(case, inputs, "float16")
