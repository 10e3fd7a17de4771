"""Category 3, dim lift: a 1-d/2-d operator vs its 2-d/3-d sibling on the input with a size-1 spatial dim."""
import inspect
import re

import torch

from dlci.rules.torch.common import forward_args, is_fn, leaves, module_forms, na, resolve, state, the_call
from dlci.rules.torch.docs import shape_doc

# parameters given per spatial dimension, and their value for a new leading spatial dim of size 1
LIFT = {"kernel_size": 1, "stride": 1, "dilation": 1, "padding": 0, "output_padding": 0, "output_size": 1}


def lift_param(name, v, nd, pad_module):
    if v is None or isinstance(v, str) or (isinstance(v, (list, tuple)) and len(v) == 0):
        return v
    if pad_module and name == "padding":  # F.pad order: last dim first, so the new dim's pair goes at the end
        return tuple(v if isinstance(v, (list, tuple)) else [v] * (2 * nd)) + (0, 0)
    vals = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(vals) == 1:
        vals = vals * nd  # one value stands for every spatial dim
    if len(vals) != nd:
        na(f"{name}={v!r} also sizes non-spatial dims")
    return tuple([LIFT[name]] + vals)


def lift_plan(case, ts):
    """(lifted callable, its arguments, nd): the (nd+1)-d form of the operator."""
    path = case.call["fn"] if is_fn(case) else case.call["cls"]
    m = re.search(r"([12])d$", path, re.I)
    if not m:
        na("not a 1-d/2-d operator name")
    nd = int(m.group(1))
    path2 = path[:-2] + f"{nd + 1}" + path[-1]
    try:
        obj2 = resolve(path2)
    except (ImportError, AttributeError):
        na(f"no {nd + 1}-d form")
    obj, d = the_call(case, ts)
    x0 = ts[0]
    cls, cls2 = (module_forms(path.rsplit(".", 1)[1]), module_forms(path2.rsplit(".", 1)[1])) if is_fn(case) \
        else ([obj], [obj2])
    ranks = {len(a) for c in cls for a in shape_doc(c).get("input", [])}
    ranks2 = {len(a) for c in cls2 for a in shape_doc(c).get("input", [])}
    if x0.ndim not in ranks or x0.ndim + 1 not in ranks2:
        na(f"a {x0.ndim}-d input has no documented {nd + 1}-d counterpart")
    pad_module = not is_fn(case) and (inspect.getdoc(obj) or "").startswith("Pads")
    for k, v in list(d.items()):
        if k in LIFT:
            d[k] = lift_param(k, v, nd, pad_module)
        elif is_fn(case) and isinstance(v, torch.Tensor) and v.ndim >= nd + 1:
            d[k] = v.unsqueeze(v.ndim - nd)
    return obj2, d, nd


def lifted(case, inputs):
    """The (N+1)-d sibling on the input with a size-1 spatial dim inserted, that dim squeezed from the outputs."""
    ts = case.to_torch(inputs)
    obj2, d, nd = lift_plan(case, ts)
    with torch.no_grad():
        if is_fn(case):
            out = obj2(**d)
        else:
            torch.manual_seed(0)
            m2 = obj2(**d).eval()
            mine = m2.state_dict()
            m2.load_state_dict({k: v.unsqueeze(v.ndim - nd) if mine[k].ndim == v.ndim + 1 else v
                                for k, v in state(case).items()})
            a, k = forward_args(case, [t.unsqueeze(t.ndim - nd) if t.ndim >= nd + 1 else t for t in ts])
            out = m2(*a, **k)
    # drop the new size-1 dim again: it sits right before the last nd dims
    return case.flatten([o.squeeze(o.ndim - nd - 1) if o.ndim >= nd + 2 and o.shape[o.ndim - nd - 1] == 1 else o
                         for o in leaves(out)])
