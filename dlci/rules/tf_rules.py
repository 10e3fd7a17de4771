"""TensorFlow/Keras equivalence rules (TF 2.x with Keras 3 on the TF backend): each turns one keras layer instance
into two graphs that must agree.

Every rule's ``code`` is standalone (it is pasted into reproducers): it sees ``np``, ``tf``, ``keras``, ``INPUTS``,
``CALL``, ``CONFIG``, ``WEIGHTS`` and the instance's model code (``build_layer``, ``call_layer``,
``build_keras_model``, ``flatten``). Graph A is the layer as recorded, called eagerly; ``graph_a(inputs,
dtype="float64")`` builds the same layer in float64, the reference that arbitrates float32 rounding.

Category 10 (time-major vs batch-major RNNs) has no rule: Keras 3 RNN layers have no ``time_major`` argument, and
the TF API that has one, ``tf.compat.v1.nn.dynamic_rnn``, takes ``tf.compat.v1.nn.rnn_cell`` cells, which raise "not
available with Keras 3" in TF 2.16 and later.
Category "device" has no TF rule either: it needs a GPU runner.
"""
from __future__ import annotations

import dataclasses

from dlci.rules import _tf_meta as meta
from dlci.rules import register
from dlci.rules.base import Rule

LIB = "tensorflow"

# -- code pieces (each rule's code is the pieces it needs, joined) ----------------------------------------------

_LAYER = '''
def layer_class(name=None):
    """keras.layers.<name>: the instance's layer class by default."""
    return getattr(keras.layers, name or CALL["cls"].rsplit(".", 1)[-1])


def make_layer(config, x, weights=(), cls=None):
    """A layer from a config, built on the one input x, holding the given weights."""
    layer = (cls or layer_class()).from_config(dict(config))
    layer(x)
    if len(weights):
        layer.set_weights(list(weights))
    return layer


def spatial(config, rank):
    """(spatial axes, channel axis) of a rank-`rank` input under the layer's data_format."""
    if config.get("data_format") == "channels_first":
        return list(range(2, rank)), 1
    return list(range(1, rank - 1)), rank - 1


def float_dtype(x):
    """The dtype name to build a helper layer with so that it keeps x's values (ints pass through keras layers)."""
    return str(x.dtype) if x.dtype.kind == "f" else None
'''

_EAGER_A = '''
def graph_a(inputs, dtype=None):
    """The layer as recorded, called eagerly (dtype="float64": the same layer in float64)."""
    return flatten(call_layer(build_layer(dtype, inputs), inputs))
'''


def _code(*pieces: str) -> str:
    return "\n".join(p.strip("\n") + "\n\n" for p in pieces).rstrip() + "\n"


# 1. optimization ----------------------------------------------------------------------------------------------

def _optimization(jit: bool) -> str:
    return _code(_EAGER_A, f'''
def graph_b(inputs):
    """The same layer traced by tf.function{'(jit_compile=True): compiled by XLA' if jit else ' (graph mode)'}."""
    layer = build_layer(None, inputs)

    def step(*xs):
        return call_layer(layer, list(xs))
    # autograph=False: the layer's code needs no conversion (and this source may not be on disk for autograph)
    return flatten(tf.function(step, jit_compile={jit!r}, autograph=False)(*[tf.constant(x) for x in inputs]))
''')


_XLA_UNSUPPORTED = (r"unsupported operations when trying to compile", r"No registered '\w+' OpKernel for XLA_",
                    r"XLA compilation requires (a )?fixed tensor", r"is not compilable", r"XLA can't deduce compile "
                    r"time constant")

# 2. same padding ---------------------------------------------------------------------------------------------

_SAME_PADDING = _code(_LAYER, _EAGER_A, '''
def same_pads(sizes, kernel, strides, dilation, causal=False):
    """Padding per spatial dim. 'same' as the tf.nn.convolution docs define it: out = ceil(n / s) and a total of
    max((out - 1) * s + (k - 1) * d + 1 - n, 0), the odd element on the right/bottom; 'causal' all on the left."""
    pads = []
    for n, k, s, d in zip(sizes, kernel, strides, dilation):
        span = (k - 1) * d + 1
        if causal:
            pads.append((span - 1, 0))
            continue
        total = max((-(-n // s) - 1) * s + span - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def graph_b(inputs):
    """Explicit padding, then the same layer with padding="valid" and the same weights."""
    x = inputs[0]
    axes, _ = spatial(CONFIG, x.ndim)
    n = len(axes)
    kernel = CONFIG.get("kernel_size") or CONFIG["pool_size"]
    strides = CONFIG.get("strides") or kernel  # pooling: strides=None means pool_size
    dilation = CONFIG.get("dilation_rate") or [1] * n
    pads = same_pads([x.shape[a] for a in axes], kernel, strides, dilation, CONFIG["padding"] == "causal")
    valid = dict(CONFIG, padding="valid")
    name = CALL["cls"].rsplit(".", 1)[-1]
    if "MaxPooling" in name:  # 'same' max pooling never selects the padding: pad with -inf
        full = [(0, 0)] * x.ndim
        for a, p in zip(axes, pads):
            full[a] = p
        xp = tf.pad(x, full, constant_values=-np.inf)
        return flatten(make_layer(valid, xp)(xp))
    fmt = "channels_last" if n == 1 and CONFIG.get("data_format") != "channels_first" else CONFIG.get("data_format")
    zero_pad = layer_class(f"ZeroPadding{n}D")(padding=pads[0] if n == 1 else pads, data_format=fmt,
                                               dtype=float_dtype(x))
    xp = zero_pad(x)
    if "AveragePooling" in name:  # 'same' averages over in-bounds elements only: window sums / window counts
        layer = make_layer(valid, xp)
        return flatten(layer(xp) / layer(zero_pad(np.ones_like(x))))
    return flatten(make_layer(valid, xp, WEIGHTS)(xp))
''')

# 3. dim lift -----------------------------------------------------------------------------------------------------

_DIM_LIFT = _code(_LAYER, _EAGER_A, '''
def graph_b(inputs):
    """The (N+1)-D layer on the input with a size-1 spatial dim in front, kernels given that dim, squeezed back."""
    import re
    x = inputs[0]
    name = CALL["cls"].rsplit(".", 1)[-1]
    n = int(re.search(r"(\\d)D(Transpose)?$", name).group(1))
    lifted = re.sub(r"\\dD(Transpose)?$", lambda m: f"{n + 1}D{m.group(1) or ''}", name)
    neutral = {"output_padding": 0}  # the new dim's value: size 1 (kernel, strides, pool, ...) or no padding
    config = {k: [neutral.get(k, 1)] + list(v) if isinstance(v, (list, tuple)) and len(v) == n else v
              for k, v in CONFIG.items()}
    axis = 2 if CONFIG.get("data_format") == "channels_first" else 1
    xl = np.expand_dims(x, axis)
    weights = [np.expand_dims(w, 0) if w.ndim == n + 2 else w for w in WEIGHTS]
    out = flatten(make_layer(config, xl, weights, layer_class(lifted))(xl))
    return [np.squeeze(o, axis) if o.ndim == x.ndim + 1 else o for o in out]
''')

# 4. depthwise / grouped convolution --------------------------------------------------------------------------

_DEPTHWISE = _code(_LAYER, _EAGER_A, '''
def graph_b(inputs):
    """One plain Conv per group (per input channel for DepthwiseConv*D) on its slice of channels and of the kernel,
    concatenated in order, then the bias and the activation."""
    x = inputs[0]
    n = x.ndim - 2
    _, ch = spatial(CONFIG, x.ndim)
    kernel = WEIGHTS[0]
    if "filters" not in CONFIG:  # DepthwiseConv*D: kernel (*k, C, multiplier), output channel c * multiplier + m
        groups, per_in = x.shape[ch], 1
        kernels = [kernel[..., c:c + 1, :] for c in range(groups)]
    else:  # grouped Conv*D: kernel (*k, C / groups, filters), output channels split in `groups` blocks
        groups = CONFIG["groups"]
        per_in, per_out = x.shape[ch] // groups, CONFIG["filters"] // groups
        kernels = [kernel[..., j * per_out:(j + 1) * per_out] for j in range(groups)]
    plain = {k: CONFIG[k] for k in ("kernel_size", "strides", "padding", "dilation_rate", "data_format", "dtype")
             if k in CONFIG}
    outs = []
    for j, k in enumerate(kernels):
        xj = np.take(x, list(range(j * per_in, (j + 1) * per_in)), axis=ch)
        conv = make_layer(dict(plain, filters=k.shape[-1], use_bias=False), xj, [k], layer_class(f"Conv{n}D"))
        outs.append(conv(xj))
    y = tf.concat(outs, axis=ch)
    if CONFIG.get("use_bias", True):
        shape = [1] * y.ndim
        shape[ch] = -1
        y = y + tf.cast(WEIGHTS[1].reshape(shape), y.dtype)
    return flatten(keras.activations.get(CONFIG.get("activation"))(y))
''')

# 5. separable convolution ------------------------------------------------------------------------------------------

_SEPARABLE = _code(_LAYER, _EAGER_A, '''
def graph_b(inputs):
    """DepthwiseConv*D with the depthwise kernel (strides, padding, dilation here, no bias), then a 1x1 Conv*D with
    the pointwise kernel, the bias and the activation."""
    x = inputs[0]
    n = x.ndim - 2
    common = {k: CONFIG[k] for k in ("data_format", "dtype") if k in CONFIG}
    depthwise = dict(common, **{k: CONFIG[k] for k in ("kernel_size", "strides", "padding", "dilation_rate",
                                                         "depth_multiplier")}, use_bias=False)
    dw = make_layer(depthwise, x, WEIGHTS[:1], layer_class(f"DepthwiseConv{n}D"))
    h = dw(x)
    pointwise = dict(common, filters=CONFIG["filters"], kernel_size=[1] * n, use_bias=CONFIG.get("use_bias", True),
                     activation=CONFIG.get("activation"))
    pw = make_layer(pointwise, h, WEIGHTS[1:], layer_class(f"Conv{n}D"))
    return flatten(pw(h))
''')

# 6. dilated convolution ---------------------------------------------------------------------------------------------

_DILATED = _code(_LAYER, _EAGER_A, '''
def zero_insert(w, rates, n):
    """The kernel with rate - 1 zeros between neighbouring taps along each of its n leading (spatial) axes."""
    shape = [(s - 1) * r + 1 for s, r in zip(w.shape[:n], rates)] + list(w.shape[n:])
    out = np.zeros(shape, w.dtype)
    out[tuple(slice(None, None, r) for r in rates)] = w
    return out


def graph_b(inputs):
    """The same layer with dilation_rate 1 and zero-inserted kernels of the dilated size."""
    x = inputs[0]
    n = x.ndim - 2
    rates = list(CONFIG["dilation_rate"])
    size = [(k - 1) * r + 1 for k, r in zip(CONFIG["kernel_size"], rates)]
    config = dict(CONFIG, kernel_size=size, dilation_rate=[1] * n)
    weights = [zero_insert(w, rates, n) if w.ndim == n + 2 else w for w in WEIGHTS]
    return flatten(make_layer(config, x, weights)(x))
''')

# 7. formulas --------------------------------------------------------------------------------------------------

_FORMULA_COMMON = '''
def out_dtype():
    """The layer's compute dtype: float inputs are cast to it (keras autocasting)."""
    layer = layer_class().from_config(dict(CONFIG))
    return np.dtype(keras.backend.standardize_dtype(layer.compute_dtype))


def named_weights(inputs):
    """The layer's weights by variable name (kernel, bias, gamma, moving_mean, ...), in float64."""
    layer = build_layer(None, inputs)
    return {v.name: np.asarray(v.numpy(), np.float64) for v in layer.weights}


def axes_of(axis, rank):
    return sorted(a % rank for a in (axis if isinstance(axis, (list, tuple)) else [axis]))


def spanning(p, rank, axes):
    """A parameter whose dims are the input's `axes` (sorted), shaped to broadcast against the input."""
    shape = [1] * rank
    for j, a in enumerate(axes):
        shape[a] = p.shape[j]
    return np.reshape(p, shape)
'''

_ACTIVATIONS = '''
import math

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
'''

_FORMULA_B = '''
def graph_b(inputs):
    """The documented formula in float64 numpy, rounded once to the layer's compute dtype."""
    x = np.asarray(inputs[0], np.float64)
    name = CALL["cls"].rsplit(".", 1)[-1]
    family = name[:-2] if name[-2:] in ("1D", "2D", "3D") else name
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        y = FORMULAS[name if name in FORMULAS else family](x, CONFIG, inputs)
    return [np.asarray(y).astype(out_dtype())]
'''

_FORMULA_ACTIVATION = _code(_LAYER, _FORMULA_COMMON, _ACTIVATIONS, _EAGER_A, '''
def relu_formula(x, c, inputs):
    mv, t, ns = c.get("max_value"), c.get("threshold") or 0.0, c.get("negative_slope") or 0.0
    y = np.where(x >= t, x, ns * (x - t))
    return y if mv is None else np.where(x >= mv, mv, y)


FORMULAS = {
    "ELU": lambda x, c, inputs: np.where(x >= 0, x, c["alpha"] * np.expm1(x)),
    "LeakyReLU": lambda x, c, inputs: np.where(x >= 0, x, c["negative_slope"] * x),
    "PReLU": lambda x, c, inputs: np.where(x >= 0, x, named_weights(inputs)["alpha"] * x),
    "ReLU": relu_formula,
    "Softmax": lambda x, c, inputs: softmax(x, tuple(axes_of(c.get("axis", -1), x.ndim))),
    "Activation": lambda x, c, inputs: ACTIVATIONS[c["activation"]](x),
}
''', _FORMULA_B)

_FORMULA_NORMALIZATION = _code(_LAYER, _FORMULA_COMMON, _EAGER_A, '''
def batch_norm(x, c, inputs):
    w, ax = named_weights(inputs), axes_of(c.get("axis", -1), x.ndim)
    p = lambda k, default: spanning(w[k], x.ndim, ax) if k in w else default
    return p("gamma", 1.0) * (x - p("moving_mean", 0.0)) / np.sqrt(p("moving_variance", 1.0) + c["epsilon"]) \\
        + p("beta", 0.0)


def layer_norm(x, c, inputs):
    w, ax = named_weights(inputs), axes_of(c.get("axis", -1), x.ndim)
    mean = np.mean(x, axis=tuple(ax), keepdims=True)
    var = np.mean((x - mean) ** 2, axis=tuple(ax), keepdims=True)
    y = (x - mean) / np.sqrt(var + c["epsilon"])
    if "gamma" in w:
        y = y * spanning(w["gamma"], x.ndim, ax)
    return y + spanning(w["beta"], x.ndim, ax) if "beta" in w else y


def group_norm(x, c, inputs):
    w, a = named_weights(inputs), c.get("axis", -1) % x.ndim
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


def rms_norm(x, c, inputs):
    w, ax = named_weights(inputs), axes_of(c.get("axis", -1), x.ndim)
    y = x / np.sqrt(np.mean(x * x, axis=tuple(ax), keepdims=True) + c["epsilon"])
    return y * spanning(w["scale"], x.ndim, ax) if "scale" in w else y


FORMULAS = {
    "BatchNormalization": batch_norm,
    "LayerNormalization": layer_norm,
    "GroupNormalization": group_norm,
    "RMSNormalization": rms_norm,
    "UnitNormalization": lambda x, c, inputs: x / np.sqrt(np.sum(x * x, axis=tuple(axes_of(c.get("axis", -1), x.ndim)),
                                                                 keepdims=True)),
}
''', _FORMULA_B)

_FORMULA_POOLING = _code(_LAYER, _FORMULA_COMMON, _EAGER_A, '''
import itertools


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


def pool(x, c, inputs, reduce):
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


def adaptive(x, c, inputs, reduce):
    xl = channels_last(x, c)
    bounds = [[(i * n // o, -(-(i + 1) * n // o)) for i in range(o)]
              for n, o in zip(xl.shape[1:-1], c["output_size"])]
    return channels_back(windows(xl, bounds, reduce), c)


def global_pool(x, c, inputs, reduce):
    xl = channels_last(x, c)
    y = reduce(xl, axis=tuple(range(1, xl.ndim - 1)), keepdims=bool(c.get("keepdims")))
    return channels_back(y, c) if c.get("keepdims") else y


FORMULAS = {
    "AveragePooling": lambda x, c, inputs: pool(x, c, inputs, np.mean),
    "MaxPooling": lambda x, c, inputs: pool(x, c, inputs, np.max),
    "AdaptiveAveragePooling": lambda x, c, inputs: adaptive(x, c, inputs, np.mean),
    "AdaptiveMaxPooling": lambda x, c, inputs: adaptive(x, c, inputs, np.max),
    "GlobalAveragePooling": lambda x, c, inputs: global_pool(x, c, inputs, np.mean),
    "GlobalMaxPooling": lambda x, c, inputs: global_pool(x, c, inputs, np.max),
}
''', _FORMULA_B)

_FORMULA_LINEAR = _code(_LAYER, _FORMULA_COMMON, _ACTIVATIONS, _EAGER_A, '''
def dense(x, c, inputs):
    w = named_weights(inputs)
    y = np.matmul(x, w["kernel"])
    if "bias" in w:
        y = y + w["bias"]
    return ACTIVATIONS[c.get("activation")](y)


FORMULAS = {
    "Dense": dense,
    "Rescaling": lambda x, c, inputs: x * np.asarray(c["scale"], np.float64) + np.asarray(c["offset"], np.float64),
}
''', _FORMULA_B)

# 8. sparse -----------------------------------------------------------------------------------------------------

_SPARSE = _code('''
def sparsify(x):
    """Every third element (by flat index) set to zero: the same values reach both graphs."""
    y = np.array(x, copy=True)
    y.reshape(-1)[::3] = 0
    return y


def graph_a(inputs, dtype=None):
    """The layer on the dense tensor (dtype="float64": the same layer in float64)."""
    xs = [sparsify(x) for x in inputs]
    return flatten(call_layer(build_layer(dtype, xs), xs))


def graph_b(inputs):
    """The layer on tf.sparse.from_dense of the same values; a sparse output made dense."""
    xs = [sparsify(x) for x in inputs]
    out = call_layer(build_layer(None, xs), [tf.sparse.from_dense(x) for x in xs])
    outs = out if isinstance(out, (list, tuple)) else [out]
    return flatten([tf.sparse.to_dense(o) if isinstance(o, tf.SparseTensor) else o for o in outs])
''')

_SPARSE_UNSUPPORTED = (r"Attempt to convert a value \(SparseTensor", r"SparseTensor.{0,80}(not supported|unsupported)",
                       r"(does not|doesn't) support sparse", r"sparse (inputs? )?(is|are) not supported",
                       r"^TypeError: .*SparseTensor")  # an op of the layer takes no SparseTensor operand

# 9. image scale ------------------------------------------------------------------------------------------------

_IMAGE_SCALE = _code(_LAYER, _EAGER_A, f'''
SCALE = {meta.IMAGE_SCALE!r}  # 0-255 images vs normalized ones
# scaling laws read off the layers' formulas: with the input times SCALE and these config entries and weights times
# SCALE ** power, the output is SCALE ** degree times the original
LAWS = {meta.SCALING!r}


def graph_b(inputs):
    """The layer on the inputs times 255 (its input-unit parameters scaled alike), divided by 255 ** degree."""
    name = CALL["cls"].rsplit(".", 1)[-1]
    law = LAWS[name]
    config = dict(CONFIG)
    for key, power in law.get("config", {{}}).items():
        if config.get(key) is not None:
            config[key] = config[key] * SCALE ** power
    xs = [x * np.asarray(SCALE, x.dtype) for x in inputs]
    layer = layer_class().from_config(config)
    call_layer(layer, xs)
    if WEIGHTS:
        layer.set_weights(WEIGHTS)
    for v in layer.weights:
        power = law.get("weights", {{}}).get(v.name)
        if power:
            v.assign(np.asarray(v.numpy()) * np.asarray(SCALE ** power, v.numpy().dtype))
    return [o / np.asarray(SCALE ** law["degree"], o.dtype) if o.dtype.kind == "f" else o
            for o in flatten(call_layer(layer, xs))]
''')

# 11. pipeline ---------------------------------------------------------------------------------------------

_PIPELINE = _code(_EAGER_A, '''
def graph_b(inputs):
    """tf.data.Dataset.from_tensor_slices(inputs).batch(2).map(layer); the batches' outputs concatenated."""
    layer = build_layer(None, inputs)

    def step(*xs):
        return call_layer(layer, list(xs))
    ds = tf.data.Dataset.from_tensor_slices(tuple(inputs)).batch(2).map(tf.autograph.experimental.do_not_convert(step))
    parts = [flatten(o) for o in ds]
    return [np.concatenate(p, axis=0) for p in zip(*parts)]
''')

# 12. dtypes --------------------------------------------------------------------------------------------------

_DTYPE_WIDEN = _code('''
def narrow(x):
    return x.astype(np.float32) if x.dtype.kind == "f" else x.astype(np.int32) if x.dtype.kind in "iu" else x


def wide(x):
    return narrow(x).astype(np.float64) if x.dtype.kind == "f" else narrow(x).astype(np.int64) \\
        if x.dtype.kind in "iu" else x


def as_int64(outs):
    """Integer outputs follow their input's width by design: compared as int64."""
    return [o.astype(np.int64) if o.dtype.kind in "iu" else o for o in outs]


def graph_a(inputs, dtype=None):
    """The layer on float32 / int32 inputs."""
    xs = [narrow(x) for x in inputs]
    return as_int64(flatten(call_layer(build_layer(None, xs), xs)))


def graph_b(inputs):
    """The same layer (same dtype policy) on the same values as float64 / int64."""
    layer = build_layer(None, [narrow(x) for x in inputs])
    if not layer.autocast and any(x.dtype.kind == "f" for x in inputs):
        raise NotImplementedError("not applicable: the layer does not autocast its inputs")
    return as_int64(flatten(call_layer(layer, [wide(x) for x in inputs])))
''')

_DTYPE_POLICY = _code('''
def half_values(x):
    """The inputs rounded to float16-representable values (float32 and float64 hold them exactly)."""
    return x.astype(np.float16).astype(np.float32) if x.dtype.kind == "f" else x


def graph_a(inputs, dtype=None):
    """The layer with its float32 dtype policy. No fp64 recomputation: graph B is that recomputation."""
    if dtype == "float64":
        raise NotImplementedError("graph B is the float64 form")
    xs = [half_values(x) for x in inputs]
    return flatten(call_layer(build_layer(None, xs), xs))


def graph_b(inputs):
    """The same layer with a float64 dtype policy on the same values, its outputs rounded to float32."""
    xs = [half_values(x).astype(np.float64) if x.dtype.kind == "f" else x for x in inputs]
    return [o.astype(np.float32) if o.dtype == np.float64 else o
            for o in flatten(call_layer(build_layer("float64", xs), xs))]
''')

# 13. codec ---------------------------------------------------------------------------------------------------

_CODEC = _code('''
def quantize(y, levels):
    """y mapped linearly onto 0..levels (its min to 0, its max to levels) and rounded."""
    y = y.astype(np.float64)
    lo, hi = float(np.min(y)), float(np.max(y))
    q = np.zeros(y.shape) if hi == lo else np.round((y - lo) / (hi - lo) * levels)
    return q.astype(np.uint8 if levels == 255 else np.uint16)


def images(inputs):
    """The layer's first output quantized to uint8 and uint16 images (channels last, 1, 3 or 4 channels)."""
    y = flatten(call_layer(build_layer(None, inputs), inputs))[0]
    if CONFIG.get("data_format") == "channels_first" and y.ndim in (3, 4):
        y = np.moveaxis(y, 1, -1)
    if y.ndim not in (3, 4) or y.shape[-1] not in (1, 3, 4) or y.dtype.kind not in "fiu" or 0 in y.shape:
        raise NotImplementedError(f"not applicable: output {y.dtype}{list(y.shape)} is not image-shaped")
    if not np.all(np.isfinite(y)):
        raise NotImplementedError("not applicable: non-finite output")
    return [quantize(y, 255), quantize(y, 65535)]


def graph_a(inputs, dtype=None):
    """The quantized output."""
    return images(inputs)


def graph_b(inputs):
    """The quantized output through tf.io.encode_png and tf.io.decode_png (lossless), image by image."""
    outs = []
    for q in images(inputs):
        batch = q if q.ndim == 4 else q[None]
        dtype = tf.uint8 if q.dtype == np.uint8 else tf.uint16
        decoded = np.stack([tf.io.decode_png(tf.io.encode_png(img), dtype=dtype).numpy() for img in batch])
        outs.append(decoded if q.ndim == 4 else decoded[0])
    return outs
''')

# 14. pad -> unpad -----------------------------------------------------------------------------------------------

_PAD_UNPAD_KERAS = _code(_LAYER, _EAGER_A, '''
PADS = (1, 2)


def graph_b(inputs):
    """The layer on Cropping*D(ZeroPadding*D(x)) with the same amounts: x itself."""
    x = inputs[0]
    n = x.ndim - 2
    fmt = CONFIG.get("data_format", "channels_last") if n > 1 else "channels_last"  # Cropping1D: channels last
    amounts = PADS if n == 1 else [PADS] * n
    pad = layer_class(f"ZeroPadding{n}D")(padding=amounts, data_format=fmt, dtype=float_dtype(x))
    crop_args = {"data_format": fmt} if n > 1 else {}
    crop = layer_class(f"Cropping{n}D")(cropping=amounts, dtype=float_dtype(x), **crop_args)
    return flatten(call_layer(build_layer(None, inputs), [crop(pad(x))]))
''')

_PAD_UNPAD_TF = _code(_EAGER_A, '''
PADS = (1, 2)


def graph_b(inputs):
    """The layer on tf.pad(x) (every axis) sliced back: x itself."""
    x = inputs[0]
    padded = tf.pad(x, [PADS] * x.ndim)
    back = padded[tuple(slice(PADS[0], PADS[0] + n) for n in x.shape)]
    return flatten(call_layer(build_layer(None, inputs), [back]))
''')

# 15. batch --------------------------------------------------------------------------------------------------

_BATCH = _code(_EAGER_A, '''
def graph_b(inputs):
    """The same layer on one sample at a time, the outputs concatenated."""
    layer = build_layer(None, inputs)
    parts = [flatten(call_layer(layer, [x[i:i + 1] for x in inputs])) for i in range(inputs[0].shape[0])]
    return [np.concatenate(p, axis=0) for p in zip(*parts)]
''')

# 16. save -> load -------------------------------------------------------------------------------------------

_MODEL_CALL = '''
def model_outputs(model, inputs):
    return flatten(model(inputs[0] if len(inputs) == 1 else list(inputs)))
'''

_SAVE_KERAS = _code(_MODEL_CALL, '''
def graph_a(inputs, dtype=None):
    """The single-layer keras model, called eagerly."""
    return model_outputs(build_keras_model(), inputs)


def graph_b(inputs):
    """The model saved with model.save("x.keras") and loaded back with keras.models.load_model."""
    import os
    import tempfile
    model = build_keras_model()
    with tempfile.TemporaryDirectory() as d:
        model.save(os.path.join(d, "x.keras"))
        loaded = keras.models.load_model(os.path.join(d, "x.keras"))
    return model_outputs(loaded, inputs)
''')

_SAVE_CONFIG = _code('''
def graph_a(inputs, dtype=None):
    """The layer, called eagerly."""
    return flatten(call_layer(build_layer(None, inputs), inputs))


def graph_b(inputs):
    """A copy: type(layer).from_config(layer.get_config()), built, then set_weights(layer.get_weights())."""
    layer = build_layer(None, inputs)
    copy = type(layer).from_config(layer.get_config())
    call_layer(copy, inputs)
    copy.set_weights(layer.get_weights())
    return flatten(call_layer(copy, inputs))
''')

_SAVE_SAVED_MODEL = _code('''
def serving(model):
    """tf.function over the model with a fixed input signature (inputs named in0, in1, ...)."""
    spec = [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"in{i}") for i, x in enumerate(INPUTS)]

    def serve(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs))
    return tf.function(serve, input_signature=spec, autograph=False)


def graph_a(inputs, dtype=None):
    """The model's serving function, called before saving."""
    return flatten(serving(build_keras_model())(*[tf.constant(x) for x in inputs]))


def graph_b(inputs):
    """tf.saved_model.save with that serving signature, tf.saved_model.load, the "serving_default" signature."""
    import os
    import tempfile
    module = tf.Module()
    module.model = build_keras_model()
    module.serve = serving(module.model)
    with tempfile.TemporaryDirectory() as d:
        tf.saved_model.save(module, os.path.join(d, "sm"), signatures={"serving_default": module.serve})
        sig = tf.saved_model.load(os.path.join(d, "sm")).signatures["serving_default"]
        out = sig(**{f"in{i}": tf.constant(x) for i, x in enumerate(inputs)})
    return [np.asarray(out[k]) for k in sorted(out, key=lambda k: int(k.rsplit("_", 1)[-1]))]
''')

# extras: layout, autograd ----------------------------------------------------------------------------------

_LAYOUT = _code(_LAYER, _EAGER_A, '''
def graph_b(inputs):
    """The layer with the other data_format (same weights: keras kernels do not depend on it) on the transposed
    input, outputs of the input's rank transposed back."""
    x = inputs[0]
    r = x.ndim
    first = CONFIG.get("data_format") == "channels_first"
    to_first, to_last = [0, r - 1] + list(range(1, r - 1)), [0] + list(range(2, r)) + [1]
    perm, back = (to_last, to_first) if first else (to_first, to_last)
    config = dict(CONFIG, data_format="channels_last" if first else "channels_first")
    xt = np.ascontiguousarray(np.transpose(x, perm))
    out = flatten(make_layer(config, xt, WEIGHTS)(xt))
    return [np.transpose(o, back) if o.ndim == r else o for o in out]
''')

_LAYOUT_UNSUPPORTED = (r"only supports NHWC", r"NCHW.{0,80}(not supported|unsupported)", r"data_format.{0,40}CPU",
                       r"CPU.{0,80}(NHWC|NDHWC|channels_last)")

_AUTOGRAD = _code('''
def setup(inputs):
    """The layer in float64, its float64 inputs, a tangent v per input and a cotangent u per output (fixed seed)."""
    xs = [np.asarray(x, np.float64) for x in inputs]
    layer = build_layer("float64", xs)
    outs = flatten(call_layer(layer, xs))
    rng = np.random.default_rng(0)
    v = [rng.standard_normal(x.shape) for x in xs]
    u = [rng.standard_normal(o.shape) if o.dtype.kind == "f" else None for o in outs]
    return layer, [tf.constant(x) for x in xs], v, u


def as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def graph_a(inputs, dtype=None):
    """<u, J v> by forward mode (tf.autodiff.ForwardAccumulator), always in float64."""
    layer, xs, v, u = setup(inputs)
    with tf.autodiff.ForwardAccumulator(xs, [tf.constant(t) for t in v]) as acc:
        ys = as_list(call_layer(layer, xs))
    total = 0.0
    for y, uu in zip(ys, u):
        jv = acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO) if uu is not None else None
        total += float(np.sum(uu * np.asarray(jv))) if jv is not None else 0.0
    return [np.array(total)]


def graph_b(inputs):
    """<J^T u, v> by reverse mode (tf.GradientTape), always in float64."""
    layer, xs, v, u = setup(inputs)
    with tf.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        ys = as_list(call_layer(layer, xs))
    pairs = [(y, tf.constant(uu)) for y, uu in zip(ys, u) if uu is not None]
    grads = tape.gradient([y for y, _ in pairs], xs, output_gradients=[uu for _, uu in pairs],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return [np.array(float(sum(np.sum(np.asarray(g) * t) for g, t in zip(grads, v))))]
''')

# TF has CPU kernels of some ops for some dtypes only (MaxPool3D/AvgPool3D: no float64, no float16 MaxPool3D)
_NO_DTYPE_KERNEL = (r"Value for attr 'T' of \w+ is not in the list of allowed values",
                    r"Could not find device for node: \{\{node \w+\}\} = \w+\[[^\]]*T=DT_\w+")
# TF's CPU convolutions are NHWC-only without oneDNN (and in float64 always): channels_first then has no kernel
_NO_CPU_KERNEL = (r"only supports (the )?NHWC", r"only supports (the )?NDHWC") + _NO_DTYPE_KERNEL
_NO_GRADIENT = (r"No gradient defined for operation", r"gradient registry has no entry",
                r"LookupError: .*gradient")


RULES = [
    Rule("tf.function", "optimization", LIB,
         "tf.function traces the layer into a graph: its outputs must match eager execution",
         "the layer called eagerly", "the same layer called through tf.function", _optimization(False),
         applies=meta.applies_any, derived_from="every keras layer instance"),
    Rule("tf.function.xla", "optimization", LIB,
         "XLA (tf.function(jit_compile=True)) must compute what eager execution computes",
         "the layer called eagerly", "the same layer through tf.function(jit_compile=True)", _optimization(True),
         applies=meta.applies_any, unsupported=_XLA_UNSUPPORTED, timeout=300,
         derived_from="every keras layer instance; ops without an XLA kernel are unsupported (error text)"),
    Rule("tf.same_padding", "same_padding", LIB,
         "padding='same' (and 'causal') is explicit padding followed by padding='valid'",
         "the layer with padding='same'/'causal'",
         "ZeroPadding*D (tf.pad with -inf for max pooling; window counts for average pooling) + padding='valid'",
         _SAME_PADDING, applies=meta.applies_same_padding,
         derived_from="get_config(): padding in ('same', 'causal') with kernel_size or pool_size; rank from the "
                      "class name and data_format"),
    Rule("tf.dim_lift", "dim_lift", LIB,
         "an N-D layer equals its (N+1)-D form on the input with a size-1 spatial dim",
         "the N-D layer (Conv1D, MaxPooling2D, ...)", "keras.layers.<(N+1)D form> with kernels given a size-1 dim",
         _DIM_LIFT, applies=meta.applies_dim_lift,
         derived_from="class name rank suffix; the (N+1)-D class exists in keras.layers and its inspect.signature "
                      "takes every get_config() key; list-valued keys are one value per spatial dim"),
    Rule("tf.depthwise", "depthwise", LIB,
         "a depthwise (or grouped) convolution is one plain convolution per channel group, concatenated",
         "DepthwiseConv*D / Conv*D(groups > 1)", "Conv*D per input channel / per group, concatenated, + bias",
         _DEPTHWISE, applies=meta.applies_depthwise,
         derived_from="get_config(): depth_multiplier without filters (depthwise) or groups > 1 (grouped)"),
    Rule("tf.separable", "separable", LIB,
         "a separable convolution is a depthwise convolution followed by a 1x1 convolution with the same weights",
         "SeparableConv*D", "DepthwiseConv*D(depthwise kernel) then Conv*D(1x1 pointwise kernel, bias, activation)",
         _SEPARABLE, applies=meta.applies_separable,
         derived_from="get_config(): depth_multiplier and filters (SeparableConv1D/2D)"),
    Rule("tf.dilated", "dilated", LIB,
         "a dilated convolution is an undilated one with a zero-inserted kernel",
         "the layer with dilation_rate d", "the layer with dilation_rate 1 and kernels (k-1)*d+1 with zeros between",
         _DILATED, applies=meta.applies_dilated,
         derived_from="get_config(): kernel_size and a dilation_rate > 1"),
    Rule("tf.formula.activation", "formula", LIB,
         "activation layers compute the formula their keras docstring gives",
         "ELU / LeakyReLU / PReLU / ReLU / Softmax / Activation(name)", "the docstring formula in float64 numpy",
         _FORMULA_ACTIVATION, applies=meta.applies_formula("activation"),
         derived_from="_tf_meta.FORMULAS['activation'] (keras docstrings) and ACTIVATION_NAMES"),
    Rule("tf.formula.normalization", "formula", LIB,
         "normalization layers (inference) compute the formula their keras docstring gives",
         "BatchNormalization / LayerNormalization / GroupNormalization / RMSNormalization / UnitNormalization",
         "the docstring formula in float64 numpy", _FORMULA_NORMALIZATION,
         applies=meta.applies_formula("normalization"),
         derived_from="_tf_meta.FORMULAS['normalization'] (keras docstrings)"),
    Rule("tf.formula.pooling", "formula", LIB,
         "pooling layers compute window means/maxima as documented",
         "Average/Max/GlobalAverage/GlobalMax/AdaptiveAverage/AdaptiveMax pooling",
         "the windows in float64 numpy", _FORMULA_POOLING, applies=meta.applies_formula("pooling"),
         derived_from="_tf_meta.FORMULAS['pooling'] (keras docstrings, tf.nn.pool padding rules)"),
    Rule("tf.formula.linear", "formula", LIB,
         "Dense is activation(x @ kernel + bias) and Rescaling is x * scale + offset, as documented",
         "Dense / Rescaling", "the docstring formula in float64 numpy", _FORMULA_LINEAR,
         applies=meta.applies_formula("linear"), derived_from="_tf_meta.FORMULAS['linear'] (keras docstrings)"),
    Rule("tf.sparse", "sparse", LIB,
         "a layer that accepts a tf.SparseTensor must compute what it computes on the dense tensor",
         "the layer on a dense input with every third element zero", "the layer on tf.sparse.from_dense(input)",
         _SPARSE, applies=meta.applies_sparse, unsupported=_SPARSE_UNSUPPORTED,
         derived_from="probe: every float instance; layers that reject SparseTensor inputs are unsupported "
                      "(error text)"),
    Rule("tf.image_scale", "image_scale", LIB,
         "0-255 images vs normalized ones: a layer's scaling law (read off its formula) must hold",
         "the layer on x", "the layer on 255 * x with its input-unit parameters scaled, divided by 255 ** degree",
         _IMAGE_SCALE, applies=meta.applies_image_scale,
         derived_from="_tf_meta.SCALING (homogeneity degree and scaled config/weights per layer class, from the "
                      "formulas); HOMOGENEOUS_ACTIVATIONS"),
    Rule("tf.data.pipeline", "pipeline", LIB,
         "mapping the layer over a tf.data pipeline of batches gives the direct call's outputs",
         "the layer on the whole batch", "tf.data.Dataset.from_tensor_slices(...).batch(2).map(layer), concatenated",
         _PIPELINE, applies=meta.applies_batch,
         derived_from="input specs (rank >= 2, batch > 1) and get_config() axis keys (no reduction over dim 0)"),
    Rule("tf.dtype.widen", "dtype", LIB,
         "the same values as float32/int32 or float64/int64 inputs give bit-identical outputs (keras autocasts)",
         "the layer on float32 / int32 inputs", "the same layer on the same values as float64 / int64", _DTYPE_WIDEN,
         applies=meta.applies_dtype_widen, exact=True,
         derived_from="input specs: float inputs, or integers within int32; layer.autocast"),
    Rule("tf.dtype.policy", "dtype", LIB,
         "a float32 layer and its float64 twin agree on float16-representable inputs (loose float32 tolerance)",
         "the layer with a float32 dtype policy", "the layer with a float64 dtype policy, rounded to float32",
         _DTYPE_POLICY, applies=meta.applies_dtype_policy,
         derived_from="get_config()['dtype'] is float32 and the inputs are float"),
    Rule("tf.codec.png", "codec", LIB,
         "PNG is lossless: the layer's output as an 8/16-bit image survives tf.io.encode_png -> decode_png",
         "the output quantized to uint8 and uint16", "the same through tf.io.encode_png and tf.io.decode_png",
         _CODEC, applies=meta.applies_codec, exact=True,
         derived_from="the output's shape: rank 3/4 with 1, 3 or 4 channels (checked on the output)"),
    Rule("tf.pad_unpad.keras", "pad_unpad", LIB,
         "Cropping*D undoes ZeroPadding*D exactly: the layer sees its own input",
         "the layer on x", "the layer on Cropping*D(ZeroPadding*D(x))", _PAD_UNPAD_KERAS,
         applies=meta.applies_pad_unpad_keras, exact=True, derived_from="input rank 3..5 (ZeroPadding1D..3D)"),
    Rule("tf.pad_unpad.tf", "pad_unpad", LIB,
         "slicing undoes tf.pad exactly: the layer sees its own input",
         "the layer on x", "the layer on tf.pad(x) sliced back", _PAD_UNPAD_TF,
         applies=meta.applies_pad_unpad_tf, exact=True, derived_from="any input of rank >= 1"),
    Rule("tf.batch", "batch", LIB,
         "in inference mode each sample's output does not depend on the rest of the batch",
         "the layer on the whole batch", "the layer on one sample at a time, concatenated", _BATCH,
         applies=meta.applies_batch,
         derived_from="input specs (rank >= 2, batch > 1) and get_config() axis keys (no reduction over dim 0)"),
    Rule("tf.save_load.keras", "save_load", LIB,
         "model.save('x.keras') -> keras.models.load_model gives a model with the same outputs",
         "the single-layer keras model", "the same model saved and loaded (.keras)", _SAVE_KERAS,
         applies=meta.applies_any, exact=True, derived_from="every keras layer instance"),
    Rule("tf.save_load.config", "save_load", LIB,
         "from_config(get_config()) plus set_weights(get_weights()) rebuilds the same layer",
         "the layer", "its copy through get_config/from_config and get_weights/set_weights", _SAVE_CONFIG,
         applies=meta.applies_any, exact=True, derived_from="every keras layer instance"),
    Rule("tf.save_load.saved_model", "save_load", LIB,
         "tf.saved_model.save -> tf.saved_model.load keeps the serving function's outputs",
         "the model's tf.function serving function", "the same after tf.saved_model.save/load (serving_default)",
         _SAVE_SAVED_MODEL, applies=meta.applies_any, exact=True, derived_from="every keras layer instance"),
    Rule("tf.layout.data_format", "layout", LIB,
         "channels_first and channels_last are the same layer on transposed tensors",
         "the layer with its data_format", "the layer with the other data_format on transposed inputs",
         _LAYOUT, applies=meta.applies_layout, unsupported=_LAYOUT_UNSUPPORTED,
         derived_from="get_config(): data_format; rank from the class name"),
    Rule("tf.autograd.jvp_vjp", "autograd", LIB,
         "forward and reverse mode agree: <u, J v> (ForwardAccumulator) == <J^T u, v> (GradientTape), in float64",
         "<u, J v> by tf.autodiff.ForwardAccumulator", "<J^T u, v> by tf.GradientTape", _AUTOGRAD,
         applies=meta.applies_autograd, unsupported=_NO_GRADIENT, derived_from="float inputs"),
]



def _conditioned(applies):
    def check(inst):
        return applies(inst) or meta.well_conditioned(inst)
    return check


# a layer with no CPU kernel here (float64 3-D pooling, channels_first convolutions) is outside every rule's reach;
# tolerance-compared rules skip outputs that are rounding noise by construction
RULES = [dataclasses.replace(r, unsupported=tuple(dict.fromkeys(r.unsupported + _NO_CPU_KERNEL)),
                             applies=r.applies if r.exact else _conditioned(r.applies)) for r in RULES]
register(*RULES)
