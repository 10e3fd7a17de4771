"""Validating a candidate (worker side): built in a graph first (shape functions reject most invalid arguments there),
then run eagerly twice; a candidate that raises, returns non-numeric, empty or all-NaN outputs, or differs between
the runs is dropped under that reason (:func:`_check`). :func:`instance_outputs` validates an instance again.
"""
from __future__ import annotations

import numpy as np

from dlci.instance import Instance
from dlci.operators.facts import unspecified_outputs
from dlci.sources.tf_ops.candidate import _Cand, _Rt
from dlci.sources.tf_ops.plan import _tf


MAX_OUTPUT_ELEMENTS = 200_000


def _flatten(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    return [out]


def _call(fn, kwargs: dict):
    """``fn(**kwargs)`` with the runtime inputs as tensors (as a model's inputs are: with numpy arrays instead, raw
    ops infer a type attribute from the Python constants, e.g. Range's Tidx as int32 beside a float32 start)."""
    tf = _tf()

    def tensor(x):
        return tf.constant(x.array) if isinstance(x, _Rt) else x
    py = {k: ([tensor(x) for x in v] if isinstance(v, list) and any(isinstance(x, _Rt) for x in v) else tensor(v))
          for k, v in kwargs.items()}
    return fn(**py)


def _static_check(fn, kwargs: dict) -> str | None:
    """Build the call in a graph first: TensorFlow's shape functions reject most invalid arguments there, where some
    kernels would abort the process on them (oneDNN convolutions and pooling CHECK-fail on wrong ranks)."""
    tf = _tf()

    def const(v):
        if isinstance(v, _Rt):
            return tf.constant(v.array)
        if isinstance(v, list) and v and isinstance(v[0], _Rt):
            return [tf.constant(x.array) for x in v]
        return v

    try:
        with tf.Graph().as_default():
            fn(**{k: const(v) for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 - the op's shape function or attr checks reject the arguments
        return f"rejected-static:{type(e).__name__}"
    return None


def _check(name: str, cand: _Cand) -> tuple[list[np.ndarray] | None, str | None]:
    """Build the candidate in a graph, then run it eagerly twice: (outputs, None) or (None, reason)."""
    import warnings
    tf = _tf()
    fn = getattr(tf.raw_ops, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reason = _static_check(fn, cand.kwargs)
    if reason:
        return None, reason
    outs = []
    for _ in range(2):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                res = _call(fn, cand.kwargs)
                flat = _flatten(res)
                arrays = []
                for t in flat:
                    if not hasattr(t, "numpy") or not getattr(t, "dtype", None) or \
                            not (t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool or t.dtype.is_complex) \
                            or t.dtype.is_quantized:
                        return None, "non-numeric-output"
                    arrays.append(np.asarray(t.numpy()))
        except Exception as e:  # noqa: BLE001 - TensorFlow rejects the arguments
            return None, f"rejected:{type(e).__name__}"
        outs.append(arrays)
    first, second = outs
    if not first:
        return None, "no-output"
    if any(a.dtype == object or a.dtype.kind not in "biufc" for a in first):
        return None, "non-numeric-output"
    if all(a.size == 0 for a in first):
        return None, "empty-output"
    if sum(a.size for a in first) > MAX_OUTPUT_ELEMENTS:
        return None, "output-too-large"
    unspecified = unspecified_outputs(f"tf::{name}")
    for k, (a, b) in enumerate(zip(first, second)):
        if k in unspecified:  # contents unspecified (SelfAdjointEigV2's v without compute_v): never compared
            continue
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            return None, "nondeterministic"
    floats = [a for a in first if a.dtype.kind in "fc" and a.size]
    if floats and all(np.isnan(a).all() for a in floats) and len(floats) == len([a for a in first if a.size]):
        return None, "all-nan-output"
    return first, None


def instance_outputs(inst: Instance) -> list[np.ndarray] | None:
    """A tf_ops instance (or one derived from it, e.g. moved to a domain edge) validated as its candidate was: built
    in a graph, run eagerly twice; its outputs, or None where TensorFlow rejects it or the runs differ."""
    arrays = inst.input_arrays()

    def decode(v):
        if isinstance(v, dict) and "$t" in v:
            return _Rt(arrays[v["$t"]])
        if isinstance(v, list) and v and all(isinstance(x, dict) and "$t" in x for x in v):
            return [_Rt(arrays[x["$t"]]) for x in v]
        return v
    cand = _Cand(0, {k: decode(v) for k, v in inst.call.get("kwargs", {}).items()}, {}, "", None, "")
    outs, _ = _check(inst.call["fn"].rsplit(".", 1)[-1], cand)
    return outs
