"""Helpers shared by the TensorFlow/Keras rules' graphs, and graph A of most of them (the layer called eagerly).
Pasted into reproducers with the rules that use them, so nothing here imports dlci."""
import keras


def layer_name(case):
    """The instance's keras layer class name (Conv2D, Dense, ...)."""
    return case.call["cls"].rsplit(".", 1)[-1]


def layer_class(case, name=None):
    """keras.layers.<name>: the instance's layer class by default."""
    return getattr(keras.layers, name or layer_name(case))


def make_layer(case, config, x, weights=(), cls=None):
    """A layer from a config, built on the one input x, holding the given weights."""
    layer = (cls or layer_class(case)).from_config(dict(config))
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


def eager(case, inputs, dtype=None):
    """The layer as recorded, called eagerly (dtype="float64": the same layer in float64)."""
    return case.flatten(case.call_layer(case.build_layer(dtype, inputs), inputs))
