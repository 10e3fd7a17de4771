"""Category 12, dtype: the same values as float32/int32 vs float64/int64 inputs, and a float32 layer vs its
float64 twin."""
import numpy as np


def narrow(x):
    return x.astype(np.float32) if x.dtype.kind == "f" else x.astype(np.int32) if x.dtype.kind in "iu" else x


def wide(x):
    return narrow(x).astype(np.float64) if x.dtype.kind == "f" else narrow(x).astype(np.int64) \
        if x.dtype.kind in "iu" else x


def as_int64(outs):
    """Integer outputs follow their input's width by design: compared as int64."""
    return [o.astype(np.int64) if o.dtype.kind in "iu" else o for o in outs]


def narrow_inputs(case, inputs, dtype=None):
    """The layer on float32 / int32 inputs."""
    xs = [narrow(x) for x in inputs]
    return as_int64(case.flatten(case.call_layer(case.build_layer(None, xs), xs)))


def wide_inputs(case, inputs):
    """The same layer (same dtype policy) on the same values as float64 / int64."""
    layer = case.build_layer(None, [narrow(x) for x in inputs])
    if not layer.autocast and any(x.dtype.kind == "f" for x in inputs):
        raise NotImplementedError("not applicable: the layer does not autocast its inputs")
    return as_int64(case.flatten(case.call_layer(layer, [wide(x) for x in inputs])))


def half_values(x):
    """The inputs rounded to float16-representable values (float32 and float64 hold them exactly)."""
    return x.astype(np.float16).astype(np.float32) if x.dtype.kind == "f" else x


def float32_policy(case, inputs, dtype=None):
    """The layer with its float32 dtype policy. No fp64 recomputation: graph B is that recomputation."""
    if dtype == "float64":
        raise NotImplementedError("graph B is the float64 form")
    xs = [half_values(x) for x in inputs]
    return case.flatten(case.call_layer(case.build_layer(None, xs), xs))


def float64_policy(case, inputs):
    """The same layer with a float64 dtype policy on the same values, its outputs rounded to float32."""
    xs = [half_values(x).astype(np.float64) if x.dtype.kind == "f" else x for x in inputs]
    return [o.astype(np.float32) if o.dtype == np.float64 else o
            for o in case.flatten(case.call_layer(case.build_layer("float64", xs), xs))]
