"""Category 1, optimization: the layer called eagerly (graph A: dlci.rules.tf.common.eager) vs traced by
tf.function, with and without XLA (graph B)."""
import tensorflow as tf


def traced(case, inputs, jit_compile):
    layer = case.build_layer(None, inputs)

    def step(*xs):
        return case.call_layer(layer, list(xs))
    # autograph=False: the layer's code needs no conversion (and this source may not be on disk for autograph)
    return case.flatten(tf.function(step, jit_compile=jit_compile, autograph=False)(*[tf.constant(x)
                                                                                       for x in inputs]))


def graph_mode(case, inputs):
    """The same layer traced by tf.function (graph mode)."""
    return traced(case, inputs, False)


def xla(case, inputs):
    """The same layer traced by tf.function(jit_compile=True): compiled by XLA."""
    return traced(case, inputs, True)
