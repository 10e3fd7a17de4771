"""Layout: channels_first and channels_last are the same layer on transposed tensors."""
import numpy as np

from dlci.rules.tf.common import make_layer


def other_data_format(case, inputs):
    """The layer with the other data_format (same weights: keras kernels do not depend on it) on the transposed
    input, outputs of the input's rank transposed back."""
    x = inputs[0]
    r = x.ndim
    first = case.config.get("data_format") == "channels_first"
    to_first, to_last = [0, r - 1] + list(range(1, r - 1)), [0] + list(range(2, r)) + [1]
    perm, back = (to_last, to_first) if first else (to_first, to_last)
    config = dict(case.config, data_format="channels_last" if first else "channels_first")
    xt = np.ascontiguousarray(np.transpose(x, perm))
    out = case.flatten(make_layer(case, config, xt, case.weights)(xt))
    return [np.transpose(o, back) if o.ndim == r else o for o in out]
