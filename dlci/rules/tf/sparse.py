"""Category 8, sparse: a layer on a dense tensor vs on tf.sparse.from_dense of the same values."""
import numpy as np
import tensorflow as tf


def sparsify(x):
    """Every third element (by flat index) set to zero: the same values reach both graphs."""
    y = np.array(x, copy=True)
    y.reshape(-1)[::3] = 0
    return y


def dense_input(case, inputs, dtype=None):
    """The layer on the dense tensor (dtype="float64": the same layer in float64)."""
    xs = [sparsify(x) for x in inputs]
    return case.flatten(case.call_layer(case.build_layer(dtype, xs), xs))


def sparse_input(case, inputs):
    """The layer on tf.sparse.from_dense of the same values; a sparse output made dense."""
    xs = [sparsify(x) for x in inputs]
    out = case.call_layer(case.build_layer(None, xs), [tf.sparse.from_dense(x) for x in xs])
    outs = out if isinstance(out, (list, tuple)) else [out]
    return case.flatten([tf.sparse.to_dense(o) if isinstance(o, tf.SparseTensor) else o for o in outs])
