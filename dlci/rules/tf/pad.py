"""Category 14, pad -> unpad: the layer on its input padded and cropped back (keras layers, or tf.pad and a slice)."""
import tensorflow as tf

from dlci.rules.tf.common import float_dtype, layer_class

PADS = (1, 2)


def keras_unpadded(case, inputs):
    """The layer on Cropping*D(ZeroPadding*D(x)) with the same amounts: x itself."""
    x = inputs[0]
    n = x.ndim - 2
    fmt = case.config.get("data_format", "channels_last") if n > 1 else "channels_last"  # Cropping1D: channels last
    amounts = PADS if n == 1 else [PADS] * n
    pad = layer_class(case, f"ZeroPadding{n}D")(padding=amounts, data_format=fmt, dtype=float_dtype(x))
    crop_args = {"data_format": fmt} if n > 1 else {}
    crop = layer_class(case, f"Cropping{n}D")(cropping=amounts, dtype=float_dtype(x), **crop_args)
    return case.flatten(case.call_layer(case.build_layer(None, inputs), [crop(pad(x))]))


def tf_unpadded(case, inputs):
    """The layer on tf.pad(x) (every axis) sliced back: x itself."""
    x = inputs[0]
    padded = tf.pad(x, [PADS] * x.ndim)
    back = padded[tuple(slice(PADS[0], PADS[0] + n) for n in x.shape)]
    return case.flatten(case.call_layer(case.build_layer(None, inputs), [back]))
