"""Convolution and pooling window rules: 'same' padding vs explicit padding (category 2), an N-D layer vs its
(N+1)-D form (3), depthwise / grouped (4), separable (5) and dilated (6) convolutions rebuilt from plain ones."""
import re

import keras
import numpy as np
import tensorflow as tf

from dlci.rules.tf.common import float_dtype, layer_class, layer_name, make_layer, spatial


# -- 2. same padding --------------------------------------------------------------------------------------------

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


def explicit_padding(case, inputs):
    """Explicit padding, then the same layer with padding="valid" and the same weights."""
    config = case.config
    x = inputs[0]
    axes, _ = spatial(config, x.ndim)
    n = len(axes)
    kernel = config.get("kernel_size") or config["pool_size"]
    strides = config.get("strides") or kernel  # pooling: strides=None means pool_size
    dilation = config.get("dilation_rate") or [1] * n
    pads = same_pads([x.shape[a] for a in axes], kernel, strides, dilation, config["padding"] == "causal")
    valid = dict(config, padding="valid")
    name = layer_name(case)
    if "MaxPooling" in name:  # 'same' max pooling never selects the padding: pad with -inf
        full = [(0, 0)] * x.ndim
        for a, p in zip(axes, pads):
            full[a] = p
        xp = tf.pad(x, full, constant_values=-np.inf)
        return case.flatten(make_layer(case, valid, xp)(xp))
    fmt = "channels_last" if n == 1 and config.get("data_format") != "channels_first" else config.get("data_format")
    zero_pad = layer_class(case, f"ZeroPadding{n}D")(padding=pads[0] if n == 1 else pads, data_format=fmt,
                                                     dtype=float_dtype(x))
    xp = zero_pad(x)
    if "AveragePooling" in name:  # 'same' averages over in-bounds elements only: window sums / window counts
        layer = make_layer(case, valid, xp)
        return case.flatten(layer(xp) / layer(zero_pad(np.ones_like(x))))
    return case.flatten(make_layer(case, valid, xp, case.weights)(xp))


# -- 3. dim lift ------------------------------------------------------------------------------------------------

def lifted(case, inputs):
    """The (N+1)-D layer on the input with a size-1 spatial dim in front, kernels given that dim, squeezed back."""
    x = inputs[0]
    name = layer_name(case)
    n = int(re.search(r"(\d)D(Transpose)?$", name).group(1))
    higher = re.sub(r"\dD(Transpose)?$", lambda m: f"{n + 1}D{m.group(1) or ''}", name)
    neutral = {"output_padding": 0}  # the new dim's value: size 1 (kernel, strides, pool, ...) or no padding
    config = {k: [neutral.get(k, 1)] + list(v) if isinstance(v, (list, tuple)) and len(v) == n else v
              for k, v in case.config.items()}
    axis = 2 if case.config.get("data_format") == "channels_first" else 1
    xl = np.expand_dims(x, axis)
    weights = [np.expand_dims(w, 0) if w.ndim == n + 2 else w for w in case.weights]
    out = case.flatten(make_layer(case, config, xl, weights, layer_class(case, higher))(xl))
    return [np.squeeze(o, axis) if o.ndim == x.ndim + 1 else o for o in out]


# -- 4. depthwise / grouped convolution ------------------------------------------------------------------------

def per_group(case, inputs):
    """One plain Conv per group (per input channel for DepthwiseConv*D) on its slice of channels and of the kernel,
    concatenated in order, then the bias and the activation."""
    config, weights = case.config, case.weights
    x = inputs[0]
    n = x.ndim - 2
    _, ch = spatial(config, x.ndim)
    kernel = weights[0]
    if "filters" not in config:  # DepthwiseConv*D: kernel (*k, C, multiplier), output channel c * multiplier + m
        groups, per_in = x.shape[ch], 1
        kernels = [kernel[..., c:c + 1, :] for c in range(groups)]
    else:  # grouped Conv*D: kernel (*k, C / groups, filters), output channels split in `groups` blocks
        groups = config["groups"]
        per_in, per_out = x.shape[ch] // groups, config["filters"] // groups
        kernels = [kernel[..., j * per_out:(j + 1) * per_out] for j in range(groups)]
    plain = {k: config[k] for k in ("kernel_size", "strides", "padding", "dilation_rate", "data_format", "dtype")
             if k in config}
    outs = []
    for j, k in enumerate(kernels):
        xj = np.take(x, list(range(j * per_in, (j + 1) * per_in)), axis=ch)
        conv = make_layer(case, dict(plain, filters=k.shape[-1], use_bias=False), xj, [k],
                          layer_class(case, f"Conv{n}D"))
        outs.append(conv(xj))
    y = tf.concat(outs, axis=ch)
    if config.get("use_bias", True):
        shape = [1] * y.ndim
        shape[ch] = -1
        y = y + tf.cast(weights[1].reshape(shape), y.dtype)
    return case.flatten(keras.activations.get(config.get("activation"))(y))


# -- 5. separable convolution -----------------------------------------------------------------------------------

def depthwise_then_pointwise(case, inputs):
    """DepthwiseConv*D with the depthwise kernel (strides, padding, dilation here, no bias), then a 1x1 Conv*D with
    the pointwise kernel, the bias and the activation."""
    config, weights = case.config, case.weights
    x = inputs[0]
    n = x.ndim - 2
    common = {k: config[k] for k in ("data_format", "dtype") if k in config}
    depthwise = dict(common, **{k: config[k] for k in ("kernel_size", "strides", "padding", "dilation_rate",
                                                         "depth_multiplier")}, use_bias=False)
    dw = make_layer(case, depthwise, x, weights[:1], layer_class(case, f"DepthwiseConv{n}D"))
    h = dw(x)
    pointwise = dict(common, filters=config["filters"], kernel_size=[1] * n, use_bias=config.get("use_bias", True),
                     activation=config.get("activation"))
    pw = make_layer(case, pointwise, h, weights[1:], layer_class(case, f"Conv{n}D"))
    return case.flatten(pw(h))


# -- 6. dilated convolution -------------------------------------------------------------------------------------

def zero_insert(w, rates, n):
    """The kernel with rate - 1 zeros between neighbouring taps along each of its n leading (spatial) axes."""
    shape = [(s - 1) * r + 1 for s, r in zip(w.shape[:n], rates)] + list(w.shape[n:])
    out = np.zeros(shape, w.dtype)
    out[tuple(slice(None, None, r) for r in rates)] = w
    return out


def undilated(case, inputs):
    """The same layer with dilation_rate 1 and zero-inserted kernels of the dilated size."""
    x = inputs[0]
    n = x.ndim - 2
    rates = list(case.config["dilation_rate"])
    size = [(k - 1) * r + 1 for k, r in zip(case.config["kernel_size"], rates)]
    config = dict(case.config, kernel_size=size, dilation_rate=[1] * n)
    weights = [zero_insert(w, rates, n) if w.ndim == n + 2 else w for w in case.weights]
    return case.flatten(make_layer(case, config, x, weights)(x))
