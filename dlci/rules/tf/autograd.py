"""Autograd: forward and reverse mode agree, <u, J v> (ForwardAccumulator) == <J^T u, v> (GradientTape), float64."""
import numpy as np
import tensorflow as tf

# |derivative| above this: the point is an overflow edge (tiny denominators, huge products), where the two modes'
# orders of evaluation decide between a huge number, Inf and NaN
_OVERFLOW = 1e150


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


def check_differentiable(arrays, what):
    """Raises ArithmeticError where the derivative is undefined in float64: a non-finite input or output (no
    derivative there), or a derivative that overflows."""
    for a in arrays:
        a = np.asarray(a)
        if a.dtype.kind not in "fc" or not a.size:
            continue
        if what == "derivative":  # NaN is left to the comparison: it may be the bug
            if np.any(np.isinf(a)) or np.nanmax(np.abs(a), initial=0.0) > _OVERFLOW:
                raise ArithmeticError(f"not differentiable in float64 here: the derivative overflows "
                                      f"({_OVERFLOW:g})")
        elif not np.all(np.isfinite(a)):
            raise ArithmeticError(f"not differentiable in float64 here: a non-finite {what}")


def forward_mode(case, inputs, dtype=None):
    """<u, J v> by forward mode (tf.autodiff.ForwardAccumulator), always in float64."""
    layer, xs, v, u = setup(case, inputs)
    check_differentiable(xs, "input")
    with tf.autodiff.ForwardAccumulator(xs, [tf.constant(t) for t in v]) as acc:
        ys = as_list(case.call_layer(layer, xs))
    check_differentiable(ys, "output")
    total = 0.0
    for y, uu in zip(ys, u):
        jv = acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO) if uu is not None else None
        if jv is not None:
            check_differentiable([jv], "derivative")
            total += float(np.sum(uu * np.asarray(jv)))
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
    grads = [np.asarray(tf.convert_to_tensor(g)) for g in grads]
    for k, (g, x) in enumerate(zip(grads, xs)):
        if g.shape != tuple(x.shape):  # the registered gradient function's own bug: said plainly
            raise ValueError(f"the gradient of input {k} has shape {list(g.shape)}, the input {list(x.shape)}")
    check_differentiable(grads, "derivative")
    return [np.array(float(sum(np.sum(g * t) for g, t in zip(grads, v))))]
