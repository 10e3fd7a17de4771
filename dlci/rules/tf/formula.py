"""Category 7, formula: keras layers vs the formulas their docstrings give, in float64 numpy, rounded once to the
layer's compute dtype. One table per family (activation, normalization, pooling, linear), each mapping a layer
class name (or its name without the rank suffix) to ``formula(x, config, weights)``; ``weights()`` gives the layer's
weights by variable name. dlci.rules.tf.meta.FORMULAS says where each formula is documented."""
import itertools
import math

import keras
import numpy as np

from dlci.rules.tf.common import layer_class, layer_name


def out_dtype(case):
    """The layer's compute dtype: float inputs are cast to it (keras autocasting)."""
    layer = layer_class(case).from_config(dict(case.config))
    return np.dtype(keras.backend.standardize_dtype(layer.compute_dtype))


def named_weights(case, inputs):
    """The layer's weights by variable name (kernel, bias, gamma, moving_mean, ...), in float64."""
    layer = case.build_layer(None, inputs)
    return {v.name: np.asarray(v.numpy(), np.float64) for v in layer.weights}


def axes_of(axis, rank):
    return sorted(a % rank for a in (axis if isinstance(axis, (list, tuple)) else [axis]))


def spanning(p, rank, axes):
    """A parameter whose dims are the input's `axes` (sorted), shaped to broadcast against the input."""
    shape = [1] * rank
    for j, a in enumerate(axes):
        shape[a] = p.shape[j]
    return np.reshape(p, shape)


def documented(case, inputs, formulas):
    """The documented formula of the instance's layer from the table `formulas`."""
    x = np.asarray(inputs[0], np.float64)
    name = layer_name(case)
    family = name[:-2] if name[-2:] in ("1D", "2D", "3D") else name
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        y = formulas[name if name in formulas else family](x, case.config, lambda: named_weights(case, inputs))
    return [np.asarray(y).astype(out_dtype(case))]


# -- activations ------------------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf, otypes=[np.float64])


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def softplus(x):
    return np.logaddexp(x, 0.0)


# keras.activations.<name> docstring formulas (defaults of their optional arguments)
ACTIVATIONS = {
    "linear": lambda x: x,
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "relu6": lambda x: np.clip(x, 0.0, 6.0),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.2 * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: 1.05070098 * np.where(x > 0, x, 1.67326324 * np.expm1(x)),
    "softplus": softplus,
    "softsign": lambda x: x / (np.abs(x) + 1),
    "soft_shrink": lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0)),
    "sparse_plus": lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, x, 0.25 * (x + 1) ** 2)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "swish": lambda x: x / (1 + np.exp(-x)),
    "squareplus": lambda x: (x + np.sqrt(x * x + 4)) / 2,
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2.0))),
    "celu": lambda x: np.where(x >= 0, x, np.expm1(x)),
    "tanh": np.tanh,
    "tanh_shrink": lambda x: x - np.tanh(x),
    "hard_tanh": lambda x: np.clip(x, -1.0, 1.0),
    "hard_shrink": lambda x: np.where(np.abs(x) > 0.5, x, 0.0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "exponential": np.exp,
    "hard_sigmoid": lambda x: np.clip(x / 6 + 0.5, 0.0, 1.0),
    "log_sigmoid": lambda x: -softplus(-x),
    "sparse_sigmoid": lambda x: np.clip(0.5 * (x + 1), 0.0, 1.0),
    "hard_silu": lambda x: x * np.clip(x + 3, 0.0, 6.0) / 6,
    "hard_swish": lambda x: x * np.clip(x + 3, 0.0, 6.0) / 6,
    "mish": lambda x: x * np.tanh(softplus(x)),
    "softmax": softmax,
    "log_softmax": log_softmax,
}


def relu_formula(x, c, weights):
    mv, t, ns = c.get("max_value"), c.get("threshold") or 0.0, c.get("negative_slope") or 0.0
    y = np.where(x >= t, x, ns * (x - t))
    return y if mv is None else np.where(x >= mv, mv, y)


ACTIVATION_LAYERS = {
    "ELU": lambda x, c, weights: np.where(x >= 0, x, c["alpha"] * np.expm1(x)),
    "LeakyReLU": lambda x, c, weights: np.where(x >= 0, x, c["negative_slope"] * x),
    "PReLU": lambda x, c, weights: np.where(x >= 0, x, weights()["alpha"] * x),
    "ReLU": relu_formula,
    "Softmax": lambda x, c, weights: softmax(x, tuple(axes_of(c.get("axis", -1), x.ndim))),
    "Activation": lambda x, c, weights: ACTIVATIONS[c["activation"]](x),
}


def activation_formula(case, inputs):
    """The documented activation formula."""
    return documented(case, inputs, ACTIVATION_LAYERS)


# -- normalization (inference) ----------------------------------------------------------------------------------

def batch_norm(x, c, weights):
    w, ax = weights(), axes_of(c.get("axis", -1), x.ndim)

    def p(k, default):
        return spanning(w[k], x.ndim, ax) if k in w else default
    return p("gamma", 1.0) * (x - p("moving_mean", 0.0)) / np.sqrt(p("moving_variance", 1.0) + c["epsilon"]) \
        + p("beta", 0.0)


def layer_norm(x, c, weights):
    w, ax = weights(), axes_of(c.get("axis", -1), x.ndim)
    mean = np.mean(x, axis=tuple(ax), keepdims=True)
    var = np.mean((x - mean) ** 2, axis=tuple(ax), keepdims=True)
    y = (x - mean) / np.sqrt(var + c["epsilon"])
    if "gamma" in w:
        y = y * spanning(w["gamma"], x.ndim, ax)
    return y + spanning(w["beta"], x.ndim, ax) if "beta" in w else y


def group_norm(x, c, weights):
    w, a = weights(), c.get("axis", -1) % x.ndim
    channels = x.shape[a]
    groups = channels if c["groups"] == -1 else c["groups"]
    xm = np.moveaxis(x, a, -1)
    xg = xm.reshape(xm.shape[:-1] + (groups, channels // groups))
    over = tuple(range(1, xg.ndim - 2)) + (xg.ndim - 1,)  # all but the batch and the group axes
    mean = np.mean(xg, axis=over, keepdims=True)
    var = np.mean((xg - mean) ** 2, axis=over, keepdims=True)
    y = ((xg - mean) / np.sqrt(var + c["epsilon"])).reshape(xm.shape)
    if "gamma" in w:
        y = y * w["gamma"]
    if "beta" in w:
        y = y + w["beta"]
    return np.moveaxis(y, -1, a)


def rms_norm(x, c, weights):
    w, ax = weights(), axes_of(c.get("axis", -1), x.ndim)
    y = x / np.sqrt(np.mean(x * x, axis=tuple(ax), keepdims=True) + c["epsilon"])
    return y * spanning(w["scale"], x.ndim, ax) if "scale" in w else y


def unit_norm(x, c, weights):
    return x / np.sqrt(np.sum(x * x, axis=tuple(axes_of(c.get("axis", -1), x.ndim)), keepdims=True))


NORMALIZATION_LAYERS = {
    "BatchNormalization": batch_norm,
    "LayerNormalization": layer_norm,
    "GroupNormalization": group_norm,
    "RMSNormalization": rms_norm,
    "UnitNormalization": unit_norm,
}


def normalization_formula(case, inputs):
    """The documented normalization formula (inference)."""
    return documented(case, inputs, NORMALIZATION_LAYERS)


# -- pooling ----------------------------------------------------------------------------------------------------

def channels_last(x, c):
    return np.moveaxis(x, 1, -1) if c.get("data_format") == "channels_first" else x


def channels_back(y, c):
    return np.moveaxis(y, -1, 1) if c.get("data_format") == "channels_first" else y


def windows(x, bounds, reduce):
    """Reduce x (channels last) over the window [lo, hi) of every output position; bounds: per dim a list."""
    out = np.empty((x.shape[0],) + tuple(len(b) for b in bounds) + (x.shape[-1],))
    for idx in itertools.product(*[range(len(b)) for b in bounds]):
        sl = tuple(slice(*bounds[d][i]) for d, i in enumerate(idx))
        out[(slice(None),) + idx] = reduce(x[(slice(None),) + sl], axis=tuple(range(1, len(bounds) + 1)))
    return out


def pool(x, c, reduce):
    xl = channels_last(x, c)
    sizes, k = xl.shape[1:-1], list(c["pool_size"])
    s = list(c.get("strides") or k)
    bounds = []
    for n, kk, ss in zip(sizes, k, s):
        if c.get("padding") == "same":  # TF: out = ceil(n / s), the odd padding element at the end
            out = -(-n // ss)
            left = max((out - 1) * ss + kk - n, 0) // 2
        else:
            out, left = (n - kk) // ss + 1, 0
        bounds.append([(max(i * ss - left, 0), min(i * ss - left + kk, n)) for i in range(out)])
    return channels_back(windows(xl, bounds, reduce), c)


def adaptive(x, c, reduce):
    xl = channels_last(x, c)
    bounds = [[(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]
              for n, o in zip(xl.shape[1:-1], c["output_size"])]
    return channels_back(windows(xl, bounds, reduce), c)


def global_pool(x, c, reduce):
    xl = channels_last(x, c)
    y = reduce(xl, axis=tuple(range(1, xl.ndim - 1)), keepdims=bool(c.get("keepdims")))
    return channels_back(y, c) if c.get("keepdims") else y


POOLING_LAYERS = {
    "AveragePooling": lambda x, c, weights: pool(x, c, np.mean),
    "MaxPooling": lambda x, c, weights: pool(x, c, np.max),
    "AdaptiveAveragePooling": lambda x, c, weights: adaptive(x, c, np.mean),
    "AdaptiveMaxPooling": lambda x, c, weights: adaptive(x, c, np.max),
    "GlobalAveragePooling": lambda x, c, weights: global_pool(x, c, np.mean),
    "GlobalMaxPooling": lambda x, c, weights: global_pool(x, c, np.max),
}


def pooling_formula(case, inputs):
    """The documented pooling windows."""
    return documented(case, inputs, POOLING_LAYERS)


# -- linear -----------------------------------------------------------------------------------------------------

def dense(x, c, weights):
    w = weights()
    y = np.matmul(x, w["kernel"])
    if "bias" in w:
        y = y + w["bias"]
    return ACTIVATIONS[c.get("activation")](y)


LINEAR_LAYERS = {
    "Dense": dense,
    "Rescaling": lambda x, c, weights: x * np.asarray(c["scale"], np.float64) + np.asarray(c["offset"], np.float64),
}


def linear_formula(case, inputs):
    """The documented Dense / Rescaling formula."""
    return documented(case, inputs, LINEAR_LAYERS)
