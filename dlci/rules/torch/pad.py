"""Category 14, pad -> unpad: a padding operator, then slicing the padding off, gives back its input exactly."""
import numpy as np
import torch

from dlci.rules.torch.common import is_fn, leaves, na, the_call


def pads(case):
    """The F.pad-style amounts (last dim first) of the instance's padding."""
    if is_fn(case):
        return list(the_call(case, case.to_torch(case.inputs))[1]["pad"])
    p = case.build_model().m.padding
    return list(p) if isinstance(p, (list, tuple)) else [p] * 2


def no_cropping(case, ts):
    if any(p < 0 for p in pads(case)):
        na("negative padding crops: nothing to slice back")


def first_input(case, inputs, dtype=None):
    """Input 0 itself."""
    return [np.array(inputs[0], copy=True)]


def unpadded(case, inputs):
    """The pad operator, then narrow() by the pad amounts on each padded dim."""
    ts = case.to_torch(inputs)
    no_cropping(case, ts)
    p = pads(case)
    with torch.no_grad():
        out = leaves(case.build_model()(*ts))[0]
    for i in range(len(p) // 2):
        dim = out.ndim - 1 - i
        out = out.narrow(dim, p[2 * i], out.shape[dim] - p[2 * i] - p[2 * i + 1])
    return case.flatten(out)
