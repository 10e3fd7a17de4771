"""Autograd: forward and reverse mode agree, <u, J v> (ForwardAccumulator) == <J^T u, v> (GradientTape), float64."""
import numpy as np
import tensorflow as tf


def setup(case, inputs):
    """The layer in float64, its float64 inputs, a tangent v per input and a cotangent u per output (fixed seed)."""
    xs = [np.asarray(x, np.float64) for x in inputs]
    layer = case.build_layer("float64", xs)
    outs = case.flatten(case.call_layer(layer, xs))
    rng = np.random.default_rng(0)
    v = [rng.standard_normal(x.shape) for x in xs]
    u = [rng.standard_normal(o.shape) if o.dtype.kind == "f" else None for o in outs]
    return layer, [tf.constant(x) for x in xs], v, u


def as_list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def forward_mode(case, inputs, dtype=None):
    """<u, J v> by forward mode (tf.autodiff.ForwardAccumulator), always in float64."""
    layer, xs, v, u = setup(case, inputs)
    with tf.autodiff.ForwardAccumulator(xs, [tf.constant(t) for t in v]) as acc:
        ys = as_list(case.call_layer(layer, xs))
    total = 0.0
    for y, uu in zip(ys, u):
        jv = acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO) if uu is not None else None
        total += float(np.sum(uu * np.asarray(jv))) if jv is not None else 0.0
    return [np.array(total)]


def reverse_mode(case, inputs):
    """<J^T u, v> by reverse mode (tf.GradientTape), always in float64."""
    layer, xs, v, u = setup(case, inputs)
    with tf.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        ys = as_list(case.call_layer(layer, xs))
    pairs = [(y, tf.constant(uu)) for y, uu in zip(ys, u) if uu is not None]
    grads = tape.gradient([y for y, _ in pairs], xs, output_gradients=[uu for _, uu in pairs],
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    # a gather's gradient is IndexedSlices: made dense before the product
    return [np.array(float(sum(np.sum(np.asarray(tf.convert_to_tensor(g)) * t) for g, t in zip(grads, v))))]
