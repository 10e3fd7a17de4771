"""Categories 11 and 15, pipeline and batch: the whole batch at once vs through tf.data, or one sample at a time."""
import numpy as np
import tensorflow as tf


def dataset_map(case, inputs):
    """tf.data.Dataset.from_tensor_slices(inputs).batch(2).map(layer); the batches' outputs concatenated."""
    layer = case.build_layer(None, inputs)

    def step(*xs):
        return case.call_layer(layer, list(xs))
    ds = tf.data.Dataset.from_tensor_slices(tuple(inputs)).batch(2).map(tf.autograph.experimental.do_not_convert(step))
    parts = [case.flatten(o) for o in ds]
    return [np.concatenate(p, axis=0) for p in zip(*parts)]


def one_by_one(case, inputs):
    """The same layer on one sample at a time, the outputs concatenated."""
    layer = case.build_layer(None, inputs)
    parts = [case.flatten(case.call_layer(layer, [x[i:i + 1] for x in inputs])) for i in range(inputs[0].shape[0])]
    return [np.concatenate(p, axis=0) for p in zip(*parts)]
