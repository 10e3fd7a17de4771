"""Helpers shared by the torch rules' graphs: the instance's call by parameter name, its module's weights, the
plain graph A. Pasted into reproducers with the rules that use them, so nothing here imports dlci."""
import importlib
import re

import numpy as np
import torch

from dlci.rules.torch.docs import param_names


def na(reason):
    """This rule does not cover the instance (the test counts as unsupported)."""
    raise NotImplementedError("not applicable: " + reason)


def dec(v, ts):
    """An encoded argument of the instance's call as a Python value (tensors taken from ts)."""
    if isinstance(v, list):
        return [dec(x, ts) for x in v]
    if not isinstance(v, dict):
        return v
    if "$t" in v:
        return ts[v["$t"]]
    if "$float" in v:
        return float(v["$float"])
    if "$tuple" in v:
        return tuple(dec(x, ts) for x in v["$tuple"])
    if "$dict" in v:
        return {k: dec(x, ts) for k, x in v["$dict"].items()}
    if "$dtype" in v:
        return getattr(torch, v["$dtype"])
    if "$torch" in v:
        return getattr(torch, v["$torch"].split(".", 1)[1])
    if "$device" in v:
        return torch.device(v["$device"])
    if "$complex" in v:
        return complex(*(dec(x, ts) for x in v["$complex"]))
    raise ValueError(f"unknown encoded value {v!r}")


def resolve(path):
    """The object a dotted path names (torch.nn.functional.elu, torch.Tensor.add)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def is_fn(case):
    return case.call["kind"] == "torch_fn"


def encoded_call(case):
    """(callable, {parameter: encoded argument}): the function's arguments or the module constructor's, by name."""
    call = case.call
    obj = resolve(call["fn"] if is_fn(case) else call["cls"])
    names = param_names(obj)
    args = call.get("args", [])
    if len(args) > len(names):
        na("more positional arguments than documented parameters")
    d = dict(zip(names, args))
    d.update(call.get("kwargs", {}))
    return obj, d


def the_call(case, ts):
    """Like encoded_call, with the arguments decoded (tensors from ts)."""
    obj, d = encoded_call(case)
    return obj, {k: dec(v, ts) for k, v in d.items()}


def forward_args(case, ts):
    return (dec(case.call.get("forward_args", []), ts),
            {k: dec(v, ts) for k, v in case.call.get("forward_kwargs", {}).items()})


def forward_slots(case):
    """Module instances: forward parameter name -> input index, for the tensors passed to forward."""
    names = param_names(resolve(case.call["cls"]).forward)
    d = dict(zip(names, case.call.get("forward_args", [])))
    d.update(case.call.get("forward_kwargs", {}))
    return {k: v["$t"] for k, v in d.items() if isinstance(v, dict) and "$t" in v}


def state(case, dtype=None):
    """The module's weights (torch_module instances), in float64 when dtype says so."""
    out = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in case.state.items()}
    if dtype == "float64":
        out = {k: v.double() if v.is_floating_point() else v for k, v in out.items()}
    return out


def make(cls, kwargs, weights, dtype=None):
    """A module of class cls built from constructor arguments, given weights, in eval mode."""
    torch.manual_seed(0)
    m = cls(**kwargs)
    m.load_state_dict(weights)
    m = m.eval()
    return m.double() if dtype == "float64" else m


def plain(case, inputs, dtype=None):
    """Graph A of most rules: the instance as it is (the model in float64 when dtype says so; the inputs come
    widened)."""
    model = case.build_model()
    if dtype == "float64":
        model = model.double()
    with torch.no_grad():
        return case.flatten(model(*case.to_torch(inputs)))


def leaves(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in leaves(o)]
    return []


def tup(v, n):
    """A per-dimension setting as an n-tuple (one value, alone or in a 1-sequence, stands for every dim)."""
    if isinstance(v, (list, tuple)):
        return tuple(v) * n if len(v) == 1 else tuple(v)
    return (v,) * n


def module_forms(fname):
    """nn module classes documented as a function's module form: the same name up to case, underscores, a
    dimension suffix or a Loss suffix (conv2d -> Conv2d, batch_norm -> BatchNorm1d/2d/3d, mse_loss -> MSELoss)."""
    key = fname.replace("_", "").lower()
    out = []
    for c in vars(torch.nn).values():
        if isinstance(c, type) and issubclass(c, torch.nn.Module) and not c.__name__.startswith("Lazy"):
            n = c.__name__.lower()
            if n in (key, key + "loss") or re.sub(r"\dd$", "", n) == key:
                out.append(c)
    return out


def pointwise(op):
    """Whether an overload of the aten operator carries torch.Tag.pointwise (elementwise with broadcasting)."""
    packet = getattr(torch.ops.aten, op.split("::", 1)[1], None) if op.startswith("aten::") else None
    try:
        return packet is not None and any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())
    except Exception:
        return False


def derivation_reason(case, check):
    """Applicability by a rule's own derivation: None when ``check(case, tensors)`` accepts the instance, else
    the reason it gives."""
    try:
        check(case, case.to_torch([np.array(x, copy=True) for x in case.inputs]))
    except NotImplementedError as e:
        return str(e).replace("not applicable: ", "", 1)
    return None
