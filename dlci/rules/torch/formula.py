"""Category 7, formula: an activation / normalization / pooling / loss API vs the formula its documentation gives.

The formulas of the torch.nn / torch.nn.functional documentation (the "Math" / formula blocks of each page), keyed by
the functional's name and reading its documented parameters. Computed in float64."""
import inspect
import itertools
import math
import re

import torch
import torch.nn.functional as F

from dlci.rules.torch.common import forward_args, is_fn, na, the_call, tup
from dlci.rules.torch.docs import is_star, param_names, shape_doc


def sigmoid(x):
    return 1 / (1 + torch.exp(-x))


def softplus(x, beta=1.0, threshold=20.0):
    # Softplus(x) = 1/beta * log(1 + exp(beta * x)); "reverts to the linear function when input * beta > threshold"
    return torch.where(x * beta > threshold, x, torch.log1p(torch.exp(beta * x)) / beta)


def reduce(v, reduction="mean"):
    return v.mean() if reduction == "mean" else v.sum() if reduction == "sum" else v


def per_channel(v, x):
    """A per-channel vector broadcast along dim 1 of x."""
    return v.reshape([1, -1] + [1] * (x.ndim - 2))


def normalized(x, dims, eps):
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)  # the biased estimator, as the docs say
    return (x - mean) / torch.sqrt(var + eps)


def affine(y, w, b, shape):
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def batch_norm(a):
    x, eps = a["input"], a.get("eps", 1e-5)
    if a.get("training", False) or a.get("running_mean") is None:
        y = normalized(x, [d for d in range(x.ndim) if d != 1], eps)
    else:
        y = (x - per_channel(a["running_mean"], x)) / torch.sqrt(per_channel(a["running_var"], x) + eps)
    return affine(y, a.get("weight"), a.get("bias"), [1, -1] + [1] * (x.ndim - 2))


def instance_norm(a):
    x, eps = a["input"], a.get("eps", 1e-5)
    if a.get("use_input_stats", True) or a.get("running_mean") is None:
        y = normalized(x, list(range(2, x.ndim)), eps)
    else:
        y = (x - per_channel(a["running_mean"], x)) / torch.sqrt(per_channel(a["running_var"], x) + eps)
    return affine(y, a.get("weight"), a.get("bias"), [1, -1] + [1] * (x.ndim - 2))


def layer_norm(a):
    x, shape = a["input"], list(a["normalized_shape"])
    y = normalized(x, list(range(x.ndim - len(shape), x.ndim)), a.get("eps", 1e-5))
    return affine(y, a.get("weight"), a.get("bias"), shape)


def group_norm(a):
    x, g = a["input"], a["num_groups"]
    y = normalized(x.reshape(x.shape[0], g, -1), [2], a.get("eps", 1e-5)).reshape(x.shape)
    return affine(y, a.get("weight"), a.get("bias"), [1, -1] + [1] * (x.ndim - 2))


def rms_norm(a):
    x, shape = a["input"], list(a["normalized_shape"])
    eps = a.get("eps")
    eps = torch.finfo(a["$dtype"]).eps if eps is None else eps  # "defaults to torch.finfo(x.dtype).eps"
    dims = list(range(x.ndim - len(shape), x.ndim))
    y = x / torch.sqrt((x * x).mean(dims, keepdim=True) + eps)
    return y if a.get("weight") is None else y * a["weight"]


def softmax(x, dim):
    if dim is None:
        na("implicit softmax dim (deprecated)")
    e = torch.exp(x - x.amax(dim, keepdim=True))  # shifting by the max leaves the formula's value unchanged
    return e / e.sum(dim, keepdim=True)


def log_softmax(x, dim):
    if dim is None:
        na("implicit softmax dim (deprecated)")
    z = x - x.amax(dim, keepdim=True)  # log(exp(x_i) / sum_j exp(x_j)), shifted by the max: the same value
    return z - torch.log(torch.exp(z).sum(dim, keepdim=True))


def cosine_similarity(a):
    x1, x2 = torch.broadcast_tensors(a["x1"], a["x2"])  # "dim refers to the dimension in this common shape"
    dim, eps = a.get("dim", 1), a.get("eps", 1e-8)
    n1 = torch.clamp_min(torch.linalg.vector_norm(x1, 2, dim), eps)
    n2 = torch.clamp_min(torch.linalg.vector_norm(x2, 2, dim), eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def unweighted(a):
    if a.get("weight") is not None:
        na("weighted loss")
    return a


def avg_pool(a, nd):
    """out = sum of the window / divisor: divisor_override if given, else the window size, counting the implicit
    zero padding when count_include_pad (but not the ceil_mode overhang past it), else only input elements."""
    x = a["input"]
    k = tup(a["kernel_size"], nd)
    s = a.get("stride")
    s = k if s is None or (isinstance(s, (list, tuple)) and not s) else tup(s, nd)
    p = tup(a.get("padding", 0), nd)
    ceil, cip, div = a.get("ceil_mode", False), a.get("count_include_pad", True), a.get("divisor_override")
    size = x.shape[x.ndim - nd:]
    out = []
    for n, kk, ss, pp in zip(size, k, s, p):
        o = (-(-(n + 2 * pp - kk) // ss) if ceil else (n + 2 * pp - kk) // ss) + 1
        if ceil and (o - 1) * ss >= n + pp:
            o -= 1  # "sliding windows that would start in the right padded region are ignored"
        out.append(o)
    y = x.new_zeros(tuple(x.shape[:x.ndim - nd]) + tuple(out))
    for idx in itertools.product(*(range(o) for o in out)):
        lo = [i * ss - pp for i, ss, pp in zip(idx, s, p)]
        hi = [l + kk for l, kk in zip(lo, k)]
        lo_in, hi_in = [max(l, 0) for l in lo], [min(h, n) for h, n in zip(hi, size)]
        window = x[(...,) + tuple(slice(l, h) for l, h in zip(lo_in, hi_in))]
        if div:
            count = div
        elif cip:
            count = math.prod(min(h, n + pp) - l for l, h, n, pp in zip(lo, hi, size, p))
        else:
            count = math.prod(h - l for l, h in zip(lo_in, hi_in))
        y[(...,) + idx] = window.sum(tuple(range(-nd, 0))) / count
    return y


def prelu(a):
    x, w = a["input"], a["weight"]
    w = w.reshape(()) if w.numel() == 1 else per_channel(w, x) if x.ndim >= 2 else w
    return torch.clamp_min(x, 0) + w * torch.clamp_max(x, 0)


def smooth_l1(d, beta):
    return torch.abs(d) - 0.5 * beta if beta == 0 else torch.where(torch.abs(d) < beta, 0.5 * d * d / beta,
                                                                    torch.abs(d) - 0.5 * beta)


def bce(a):
    x, y = a["input"], a["target"]
    # "our solution is that BCELoss clamps its log function outputs to be greater than or equal to -100"
    v = -(y * torch.clamp_min(torch.log(x), -100) + (1 - y) * torch.clamp_min(torch.log(1 - x), -100))
    return reduce(v if a.get("weight") is None else v * a["weight"], a.get("reduction", "mean"))


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

FORMULAS = {
    "relu": lambda a: torch.clamp_min(a["input"], 0),
    "relu6": lambda a: torch.clamp(a["input"], 0, 6),
    "hardtanh": lambda a: torch.clamp(a["input"], a.get("min_val", -1.0), a.get("max_val", 1.0)),
    "leaky_relu": lambda a: torch.clamp_min(a["input"], 0)
    + a.get("negative_slope", 0.01) * torch.clamp_max(a["input"], 0),
    "elu": lambda a: torch.where(a["input"] > 0, a["input"], a.get("alpha", 1.0) * (torch.exp(a["input"]) - 1)),
    "selu": lambda a: SELU_SCALE * (torch.clamp_min(a["input"], 0)
                                    + torch.clamp_max(SELU_ALPHA * (torch.exp(a["input"]) - 1), 0)),
    "celu": lambda a: torch.clamp_min(a["input"], 0) + torch.clamp_max(
        a.get("alpha", 1.0) * (torch.exp(a["input"] / a.get("alpha", 1.0)) - 1), 0),
    "gelu": lambda a: 0.5 * a["input"] * (1 + (
        torch.tanh(math.sqrt(2 / math.pi) * (a["input"] + 0.044715 * a["input"] ** 3))
        if a.get("approximate", "none") == "tanh" else torch.erf(a["input"] / math.sqrt(2)))),
    "silu": lambda a: a["input"] * sigmoid(a["input"]),
    "mish": lambda a: a["input"] * torch.tanh(torch.log1p(torch.exp(a["input"]))),
    "softplus": lambda a: softplus(a["input"], a.get("beta", 1.0), a.get("threshold", 20.0)),
    "hardswish": lambda a: a["input"] * torch.clamp(a["input"] + 3, 0, 6) / 6,
    "hardsigmoid": lambda a: torch.clamp(a["input"] / 6 + 0.5, 0, 1),
    # log(1 / (1 + exp(-x))), written min(x, 0) - log1p(exp(-|x|)) so that it does not overflow
    "logsigmoid": lambda a: torch.clamp_max(a["input"], 0) - torch.log1p(torch.exp(-torch.abs(a["input"]))),
    "sigmoid": lambda a: sigmoid(a["input"]),
    "softsign": lambda a: a["input"] / (1 + torch.abs(a["input"])),
    "tanhshrink": lambda a: a["input"] - torch.tanh(a["input"]),
    "softshrink": lambda a: torch.where(a["input"] > a.get("lambd", 0.5), a["input"] - a.get("lambd", 0.5),
                                        torch.where(a["input"] < -a.get("lambd", 0.5),
                                                    a["input"] + a.get("lambd", 0.5), 0.0)),
    "hardshrink": lambda a: torch.where(torch.abs(a["input"]) > a.get("lambd", 0.5), a["input"], 0.0),
    "threshold": lambda a: torch.where(a["input"] > a["threshold"], a["input"], float(a["value"])),
    "prelu": prelu,
    "glu": lambda a: (lambda h: h[0] * sigmoid(h[1]))(a["input"].chunk(2, a.get("dim", -1))),
    "softmax": lambda a: softmax(a["input"], a.get("dim")),
    "softmin": lambda a: softmax(-a["input"], a.get("dim")),
    "log_softmax": lambda a: log_softmax(a["input"], a.get("dim")),
    "batch_norm": batch_norm,
    "instance_norm": instance_norm,
    "layer_norm": layer_norm,
    "group_norm": group_norm,
    "rms_norm": rms_norm,
    "avg_pool1d": lambda a: avg_pool(a, 1),
    "avg_pool2d": lambda a: avg_pool(a, 2),
    "avg_pool3d": lambda a: avg_pool(a, 3),
    "normalize": lambda a: a["input"] / torch.clamp_min(
        torch.linalg.vector_norm(a["input"], a.get("p", 2.0), a.get("dim", 1), keepdim=True), a.get("eps", 1e-12)),
    "cosine_similarity": cosine_similarity,
    "logit": lambda a: (lambda z: torch.log(z / (1 - z)))(
        a["input"] if a.get("eps") is None else torch.clamp(a["input"], a["eps"], 1 - a["eps"])),
    "mse_loss": lambda a: reduce((unweighted(a)["input"] - a["target"]) ** 2, a.get("reduction", "mean")),
    "l1_loss": lambda a: reduce(torch.abs(unweighted(a)["input"] - a["target"]), a.get("reduction", "mean")),
    "smooth_l1_loss": lambda a: reduce(smooth_l1(a["input"] - a["target"], a.get("beta", 1.0)),
                                       a.get("reduction", "mean")),
    "huber_loss": lambda a: reduce(a.get("delta", 1.0) * smooth_l1(unweighted(a)["input"] - a["target"],
                                                                   a.get("delta", 1.0)),
                                   a.get("reduction", "mean")),
    "soft_margin_loss": lambda a: reduce(torch.log1p(torch.exp(-a["target"] * a["input"])),
                                         a.get("reduction", "mean")),
    "binary_cross_entropy": bce,
}
IGNORED = {"inplace", "_stacklevel", "momentum", "out"}  # no effect on the value in eval mode
LEGACY = {"size_average", "reduce"}  # deprecated spellings of reduction


def module_functional(cls):
    """The documented functional a module class calls: the first F.<name>(...) of its forward (or the self._helper
    methods it calls) that has a formula here."""
    seen = set()

    def scan(fn, depth):
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            return None
        for kind, name in re.findall(r"\b(F|self)\.(\w+)\(", src):
            if kind == "F" and name in FORMULAS:
                return name
            if kind == "self" and depth < 2 and name not in seen and callable(getattr(cls, name, None)):
                seen.add(name)
                found = scan(getattr(cls, name), depth + 1)
                if found:
                    return found
        return None
    return scan(cls.forward, 0)


DOCUMENTED = ("torch.nn.functional", "torch", "torch.special")  # the documented namespaces (not torch.masked)


def formula_call(case, ts):
    """(formula name, arguments by the functional's parameter names, unbatched?): for a module, its forward
    input is given a batch dim when the module's documented Shape says it is the unbatched form."""
    if is_fn(case):
        space, name = case.call["fn"].rsplit(".", 1)
        if name not in FORMULAS or space not in DOCUMENTED:
            na(f"no documented formula for {case.call['fn']}")
        _, d = the_call(case, ts)
        return name, d, False
    m = case.build_model().m
    name = module_functional(type(m))
    if name is None:
        na(f"{type(m).__name__} calls no functional with a documented formula")
    a, k = forward_args(case, ts)
    alts = shape_doc(type(m)).get("input", [])
    x = a[0]
    unbatched = isinstance(x, torch.Tensor) and any(
        len(alt) == x.ndim and alt[0] != "N" and not any(is_star(s) for s in alt) for alt in alts) and any(
        len(alt) == x.ndim + 1 and alt[0] == "N" for alt in alts)
    if unbatched:
        a = [x.unsqueeze(0)] + list(a[1:])
    names = param_names(getattr(F, name))
    d = dict(zip(names, a))
    d.update(k)
    for n in names[len(a):]:
        if n in ("training", "use_input_stats") and hasattr(m, "running_mean"):
            d[n] = m.training or m.running_mean is None  # the module's rule for using batch statistics
        elif n not in d and hasattr(m, n):
            d[n] = getattr(m, n)
    return name, d, unbatched


def formula_checks(case, ts):
    """Refusals no formula covers: legacy reduction arguments, integer or empty inputs."""
    name, d, unbatched = formula_call(case, ts)
    if any(d.get(k) is not None for k in LEGACY):
        na("legacy size_average/reduce arguments")
    x = next(v for v in d.values() if isinstance(v, torch.Tensor))
    if not x.is_floating_point():
        na("integer input")
    if not x.numel():
        na("empty input")



def documented_formula(case, inputs):
    """The documented formula, evaluated in float64 and rounded to the output dtype."""
    ts = case.to_torch(inputs)
    formula_checks(case, ts)
    name, d, unbatched = formula_call(case, ts)
    x = next(v for v in d.values() if isinstance(v, torch.Tensor))
    out_dtype = d.get("dtype") or x.dtype
    a = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
         for k, v in d.items() if k not in IGNORED and k not in LEGACY}
    a["$dtype"] = x.dtype
    with torch.no_grad():
        y = FORMULAS[name](a).to(out_dtype)
    return case.flatten(y.squeeze(0) if unbatched else y)
