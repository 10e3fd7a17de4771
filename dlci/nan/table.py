"""The vulnerable-operation table: which framework calls can turn finite inputs into NaN/Inf, and how far a call's
operand is from the values that do it.

The table is data. Each entry names one operation, the check that measures its operand (a small vocabulary of
distance kinds, below), and, per framework, the public names that reach it with the operand's position/keyword:

    {"name": "log", "check": "domain", "low": 0.0, "high": None,
     "torch": {"torch.log": [0, "input"], "torch.Tensor.log": [0, "self"]}, "tf": {"tf.math.log": [0, "x"]}}

Distance kinds (``d >= 0`` inside the valid region, ``d <= 0`` at or past the nearest invalid value; the search
drives the *minimum over the operand's elements* to zero):

- ``domain``   [low, high] from the operator metadata; d = min(x - low, high - x). The boundary itself is where
               log/log1p/logit/erfinv return +-Inf and where sqrt/acos/asin/acosh have an infinite derivative.
- ``nonzero``  divisors, reciprocals: d = |x|.
- ``overflow`` exp-like: d = log(max finite of the dtype) / log(base) - x.
- ``pow``      base ** exponent: a negative base with a fractional exponent (NaN), a zero base with a negative
               exponent (Inf), |base| ** exponent past the largest finite value (Inf); computed from the call.
- ``poles``    lgamma/digamma: d = distance to the nearest non-positive integer.
- ``softmax``  softmax/log_softmax/cross-entropy: d = (-log smallest subnormal) - (max - min along the dim): once
               the logits spread that far a probability underflows to exactly 0 (a precursor: the NaN/Inf comes from
               the log or the division that consumes it).
- ``variance`` normalisations: d = var over the normalised dims; only a candidate when the call's eps is 0.

Entries whose name matches an OpInfo with a ``domain`` attribute take their interval from
``torch.testing._internal.common_methods_invocations.op_db`` (:func:`derive_opinfo_domains`, cached per torch
version); OpInfo ops that are domain-restricted but absent here are added as new ``domain`` entries, with the
torch names OpInfo resolves to and ``tf.math.<name>`` as the TensorFlow candidate (unresolvable names are
ignored at interception time).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

# positions: [index, keyword]; Tensor methods take self at index 0
_U = [0, "input"]
_S = [0, "self"]
_X = [0, "x"]


def _unary(torch_fn: str, *aliases: str, tf: tuple[str, ...] = (), method: bool = True) -> tuple[dict, dict]:
    names = {f"torch.{torch_fn}": _U}
    for a in aliases:
        names[a] = _U
    if method:
        names[f"torch.Tensor.{torch_fn}"] = _S
        names[f"torch.Tensor.{torch_fn}_"] = _S
    return names, {t: _X for t in tf}


def _entry(name: str, check: str, names: tuple[dict, dict], about: str, **extra) -> dict:
    return {"name": name, "check": check, "about": about, "torch": names[0], "tf": names[1], **extra}


_DIV_TORCH = {
    "torch.div": [1, "other"], "torch.divide": [1, "other"], "torch.true_divide": [1, "other"],
    "torch.Tensor.div": [1, "other"], "torch.Tensor.divide": [1, "other"], "torch.Tensor.true_divide": [1, "other"],
    "torch.Tensor.div_": [1, "other"], "torch.Tensor.divide_": [1, "other"], "torch.Tensor.true_divide_": [1, "other"],
    "torch.Tensor.__truediv__": [1, "other"], "torch.Tensor.__div__": [1, "other"],
    "torch.Tensor.__itruediv__": [1, "other"], "torch.Tensor.__idiv__": [1, "other"],
    "torch.Tensor.__rtruediv__": _S, "torch.Tensor.__rdiv__": _S,
    "torch.fmod": [1, "other"], "torch.Tensor.fmod": [1, "other"],
    "torch.remainder": [1, "other"], "torch.Tensor.remainder": [1, "other"],
}
_DIV_TF = {
    "tf.math.divide": [1, "y"], "tf.math.truediv": [1, "y"], "tf.math.realdiv": [1, "y"],
    "tf.Tensor.__truediv__": [1, "y"], "tf.Tensor.__div__": [1, "y"],
    "tf.Tensor.__rtruediv__": [0, "x"], "tf.Tensor.__rdiv__": [0, "x"],
}

# The hand-written part: operations that OpInfo does not mark with a domain, and the framework names of those that
# it does (their intervals are replaced by OpInfo's when it is importable).
ENTRIES: list[dict] = [
    {"name": "div", "check": "nonzero", "about": "division: the divisor reaches 0",
     "torch": _DIV_TORCH, "tf": _DIV_TF},
    _entry("reciprocal", "nonzero", _unary("reciprocal", tf=("tf.math.reciprocal",)), "1/x: x reaches 0"),
    _entry("log", "domain", _unary("log", tf=("tf.math.log",)), "log: operand reaches 0 (-Inf) or below (NaN)",
           low=0.0, high=None),
    _entry("log2", "domain", _unary("log2"), "log2: operand reaches 0", low=0.0, high=None),
    _entry("log10", "domain", _unary("log10"), "log10: operand reaches 0", low=0.0, high=None),
    _entry("log1p", "domain", _unary("log1p", "torch.special.log1p", tf=("tf.math.log1p",)),
           "log1p: operand reaches -1", low=-1.0, high=None),
    _entry("sqrt", "domain", _unary("sqrt", tf=("tf.math.sqrt",)),
           "sqrt: operand below 0 (NaN); at 0 the derivative is infinite", low=0.0, high=None, grad=True),
    _entry("rsqrt", "domain", _unary("rsqrt", tf=("tf.math.rsqrt",)), "rsqrt: operand reaches 0",
           low=0.0, high=None, grad=True),
    _entry("exp", "overflow", _unary("exp", "torch.special.exp", tf=("tf.math.exp",)),
           "exp: argument past log(max float) overflows", base=math.e),
    _entry("exp2", "overflow", _unary("exp2", "torch.special.exp2"), "exp2 overflow", base=2.0),
    _entry("expm1", "overflow", _unary("expm1", "torch.special.expm1", tf=("tf.math.expm1",)),
           "expm1 overflow", base=math.e),
    {"name": "pow", "check": "pow", "about": "pow: negative base with fractional exponent, 0 ** negative, overflow",
     "torch": {"torch.pow": _U, "torch.Tensor.pow": _S, "torch.Tensor.pow_": _S, "torch.Tensor.__pow__": _S,
               "torch.Tensor.__ipow__": _S, "torch.Tensor.__rpow__": _S, "torch.float_power": _U,
               "torch.Tensor.float_power": _S},
     "tf": {"tf.math.pow": _X, "tf.Tensor.__pow__": _X, "tf.Tensor.__rpow__": _X}, "grad": True},
    _entry("lgamma", "poles", _unary("lgamma", "torch.special.gammaln", tf=("tf.math.lgamma",)),
           "lgamma: operand reaches a non-positive integer (a pole)"),
    _entry("digamma", "poles", _unary("digamma", "torch.special.digamma", "torch.special.psi",
                                       tf=("tf.math.digamma",)),
           "digamma: operand reaches a non-positive integer (a pole)"),
    _entry("acos", "domain", _unary("acos", "torch.arccos", tf=("tf.math.acos",)),
           "acos: |x| past 1 (NaN); at +-1 the derivative is infinite", low=-1.0, high=1.0, grad=True),
    _entry("asin", "domain", _unary("asin", "torch.arcsin", tf=("tf.math.asin",)),
           "asin: |x| past 1 (NaN); at +-1 the derivative is infinite", low=-1.0, high=1.0, grad=True),
    _entry("atanh", "domain", _unary("atanh", "torch.arctanh", tf=("tf.math.atanh",)),
           "atanh: |x| reaches 1 (Inf)", low=-1.0, high=1.0, grad=True),
    _entry("acosh", "domain", _unary("acosh", "torch.arccosh", tf=("tf.math.acosh",)),
           "acosh: x below 1 (NaN); at 1 the derivative is infinite", low=1.0, high=None, grad=True),
    {"name": "softmax", "check": "softmax", "precursor": True,
     "about": "softmax family: the logits spread past the float range and a probability underflows to 0",
     "torch": {"torch.softmax": _U, "torch.nn.functional.softmax": _U, "torch.Tensor.softmax": _S,
               "torch.special.softmax": _U, "torch.log_softmax": _U, "torch.nn.functional.log_softmax": _U,
               "torch.Tensor.log_softmax": _S, "torch.special.log_softmax": _U,
               "torch.nn.functional.cross_entropy": _U},
     "torch_dim": {"torch.nn.functional.cross_entropy": 1},
     "tf": {"tf.nn.softmax": [0, "logits"], "tf.nn.log_softmax": [0, "logits"],
            "tf.nn.softmax_cross_entropy_with_logits": [1, "logits"],
            "tf.nn.sparse_softmax_cross_entropy_with_logits": [1, "logits"]}},
    {"name": "normalize", "check": "variance", "guard": "eps",
     "about": "normalisation: the variance over the normalised dims reaches 0 (only unguarded with eps=0)",
     "torch": {"torch.nn.functional.layer_norm": _U, "torch.nn.functional.group_norm": _U,
               "torch.nn.functional.instance_norm": _U, "torch.nn.functional.batch_norm": _U},
     "tf": {"tf.nn.batch_normalization": [2, "variance"]}},
]

FORMAT = 1  # bump when the derived cache layout changes


# -- OpInfo derivation -----------------------------------------------------------------------------------

def _torch_public_names() -> dict[int, str]:
    from dlci.nan.standalone import torch_public_names
    return torch_public_names()


def derive_opinfo_domains() -> list[dict]:
    """Entries for every OpInfo of ``op_db`` that declares a ``domain`` (uncached; imports torch's test tree).

    Each: ``{"name", "check": "domain", "low", "high", "torch": {public name: operand}, "tf": {...}, "opinfo":
    "<name>[.<variant>]"}``. Names come from the OpInfo's function, method and alias objects resolved to their
    public dotted names.
    """
    from dlci.torch_testing import op_db
    names_of = _torch_public_names()
    out: dict[str, dict] = {}
    for op in op_db():
        dom = getattr(op, "domain", None)
        if not dom or tuple(dom) == (None, None):
            continue
        low, high = (None if v is None else float(v) for v in dom)
        variant = op.variant_test_name or ""
        if variant:  # variants restrict by a parameter (mvlgamma p): the interval depends on the call's arguments
            continue
        torch_names: dict[str, list] = {}
        for obj, pos in ((op.op, _U), (getattr(op, "method_variant", None), _S),
                         (getattr(op, "inplace_variant", None), _S)):
            n = names_of.get(id(obj)) if obj is not None else None
            if n:
                torch_names[n] = pos
        for alias in getattr(op, "aliases", ()) or ():
            for obj, pos in ((getattr(alias, "op", None), _U), (getattr(alias, "method_variant", None), _S)):
                n = names_of.get(id(obj)) if obj is not None else None
                if n:
                    torch_names[n] = pos
        short = op.name.split(".")[-1]
        out[op.name] = {"name": short, "check": "domain", "low": low, "high": high, "torch": torch_names,
                        "tf": {f"tf.math.{short}": _X}, "opinfo": op.name,
                        "about": f"{op.name}: OpInfo domain [{low}, {high}]"}
    return list(out.values())


def _cache_path() -> Path:
    import importlib.metadata
    try:  # the installed version, without importing torch (a TensorFlow program need not pay for it)
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError("torch is not installed") from None
    from dlci import cache
    return cache.root() / f"nan-opinfo-domains-{version}-f{FORMAT}.json"


def opinfo_domains() -> list[dict]:
    """:func:`derive_opinfo_domains`, cached on disk per torch version ([] when op_db cannot be imported)."""
    try:
        path = _cache_path()
    except ImportError:  # no torch here (a TensorFlow-only install): the hand-written intervals apply
        return []
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    try:
        derived = derive_opinfo_domains()
    except Exception:  # noqa: BLE001 - torch's test tree missing: the hand-written intervals still apply
        return []
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(derived, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
    return derived


def merge(entries: list[dict], derived: list[dict]) -> list[dict]:
    """The hand table with OpInfo's intervals and names folded in; OpInfo-only ops become new entries."""
    merged = [dict(e, torch=dict(e["torch"]), tf=dict(e["tf"])) for e in entries]
    by_name = {e["name"]: e for e in merged}
    for d in derived:
        e = by_name.get(d["name"])
        if e is None:
            e = dict(d, torch=dict(d["torch"]), tf=dict(d["tf"]))
            merged.append(e)
            by_name[e["name"]] = e
            continue
        if e["check"] == "domain":
            e["low"], e["high"], e["opinfo"] = d["low"], d["high"], d["opinfo"]
        for n, pos in d["torch"].items():
            e["torch"].setdefault(n, pos)
    return merged


class Table:
    """Lookups over the merged entries: framework name -> (entry, operand position)."""

    def __init__(self, entries: list[dict]):
        self.entries = entries
        self._torch = {n: (e, pos) for e in entries for n, pos in e["torch"].items()}
        self._tf = {n: (e, pos) for e in entries for n, pos in e["tf"].items()}

    def torch(self, name: str) -> tuple[dict, list] | None:
        return self._torch.get(name)

    def tf(self, name: str) -> tuple[dict, list] | None:
        return self._tf.get(name)

    def tf_names(self) -> list[str]:
        return sorted(self._tf)

    def by_name(self, name: str) -> dict | None:
        return next((e for e in self.entries if e["name"] == name), None)


_TABLE: Table | None = None


def table(with_opinfo: bool = True) -> Table:
    global _TABLE
    if not with_opinfo:
        return Table(merge(ENTRIES, []))
    if _TABLE is None:
        _TABLE = Table(merge(ENTRIES, opinfo_domains()))
    return _TABLE


def canonical(op: str) -> str:
    """The table entry name an operator name reaches ("torch.Tensor.log" -> "log"), else the last name part."""
    t = table()
    hit = t.torch(op) or t.tf(op)
    if hit:
        return hit[0]["name"]
    return op.rsplit(".", 1)[-1].strip("_")


def same_op(a: str, b: str) -> bool:
    """Do two operator names reach the same table entry (torch.log ~ torch.Tensor.log, tf.math.log ~ log)?"""
    return a == b or canonical(a) == canonical(b)


# -- distances (framework-neutral through a small adapter) -----------------------------------------------

def operand(args: tuple, kwargs: dict, pos: list) -> Any:
    i, kw = pos
    if kw in kwargs:
        return kwargs[kw]
    return args[i] if i < len(args) else None


def arg(args: tuple, kwargs: dict, i: int, kw: str, default=None) -> Any:
    if kw in kwargs:
        return kwargs[kw]
    return args[i] if i < len(args) else default


def elementwise_distance(entry: dict, x, xp, *, exponent=None, base_scalar=None):
    """The per-element distance map of ``x`` for elementwise checks, or None when the call is not vulnerable."""
    check = entry["check"]
    if check == "nonzero":
        return xp.abs(x)
    if check == "domain":
        parts = []
        if entry.get("low") is not None:
            parts.append(x - entry["low"])
        if entry.get("high") is not None:
            parts.append(entry["high"] - x)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else xp.minimum(parts[0], parts[1])
    if check == "overflow":
        return xp.log_max() / math.log(entry.get("base", math.e)) - x
    if check == "poles":
        return xp.where(x > 0, x, xp.abs(x - xp.round(x)))
    if check == "pow":
        if base_scalar is not None:  # scalar ** tensor: overflow only
            b = abs(float(base_scalar))
            if b <= 1.0:
                return None
            return xp.log_max() / math.log(b) - x
        if exponent is None or not isinstance(exponent, (int, float)) or isinstance(exponent, bool):
            return None  # tensor exponents: left to the other checks
        e = float(exponent)
        cands = []
        if e != int(e):
            cands.append(x)  # negative base, fractional exponent: NaN
        elif e < 0:
            cands.append(xp.abs(x))  # 0 ** negative: Inf
        if e > 1:
            cands.append(xp.log_max() / e - xp.log(xp.abs(x) + 1e-300))
        if not cands:
            return None
        out = cands[0]
        for c in cands[1:]:
            out = xp.minimum(out, c)
        return out
    return None


def call_distance(entry: dict, name: str, args: tuple, kwargs: dict, pos: list, xp, framework: str):
    """The distance map of one call (float64, one value per operand element, per softmax row, per normalised
    group), or None when the call cannot go invalid. The call's distance is the map's minimum."""
    x = operand(args, kwargs, pos)
    if xp.is_tensor(x):
        xp = xp.bind(x)  # thresholds (largest finite, smallest subnormal) follow the operand's own dtype
    check = entry["check"]
    if check == "pow":
        if name.endswith("__rpow__"):  # tensor is the exponent, the other argument the scalar base
            base = args[1] if len(args) > 1 else None
            if not xp.is_tensor(x) or not isinstance(base, (int, float)):
                return None
            d = elementwise_distance(entry, xp.f64(x), xp, base_scalar=base)
            return d
        exponent = arg(args, kwargs, 1, "exponent" if framework == "torch" else "y")
        if not xp.is_tensor(x):
            return None
        d = elementwise_distance(entry, xp.f64(x), xp, exponent=exponent)
        return d
    if not xp.is_tensor(x) or not xp.is_float(x):
        return None
    if check == "softmax":
        if framework == "torch":
            dim = entry.get("torch_dim", {}).get(name)
            if dim is None:
                dim = arg(args, kwargs, 1, "dim", None)
            if dim is None:
                dim = -1 if xp.ndim(x) != 0 else None
        else:
            dim = kwargs.get("axis", -1)
        if dim is None or xp.ndim(x) == 0:
            return None
        x64 = xp.f64(x)
        spread = xp.amax_dim(x64, dim) - xp.amin_dim(x64, dim)
        return -xp.log_tiny() - spread
    if check == "variance":
        eps = kwargs.get("eps", kwargs.get("variance_epsilon"))
        if framework == "tf":
            eps = arg(args, kwargs, 5, "variance_epsilon", None)
            if eps is None or float(eps) != 0.0:
                return None
            return xp.f64(x)
        if eps is None:
            eps = {"torch.nn.functional.layer_norm": arg(args, kwargs, 4, "eps", 1e-5),
                   "torch.nn.functional.group_norm": arg(args, kwargs, 4, "eps", 1e-5),
                   "torch.nn.functional.instance_norm": arg(args, kwargs, 7, "eps", 1e-5),
                   "torch.nn.functional.batch_norm": arg(args, kwargs, 7, "eps", 1e-5)}.get(name, 1e-5)
        if float(eps) != 0.0:
            return None  # guarded by eps: the variance cannot make it invalid
        dims = xp.norm_dims(name, x, args, kwargs)
        if dims is None:
            return None
        return xp.var_dims(xp.f64(x), dims)
    return elementwise_distance(entry, xp.f64(x), xp)


def scale_of(entry: dict, d: float) -> float:
    """A yardstick for ordering candidates by how close they already are (smaller: closer)."""
    if entry["check"] in ("overflow", "softmax"):
        return max(d, 0.0) / 100.0
    return max(d, 0.0)
