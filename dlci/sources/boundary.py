"""``boundary``: migrated instances widened to boundary values, shapes and parameters.

:func:`widen` takes instances of the other sources (``torch_fn``, ``torch_module``, ``keras_layer``; ``onnx_model``
for value boundaries only) and derives, per instance, variants that keep what the original satisfies and move
one thing to a boundary:

- values of one float input (kind ``large``: magnitudes ~sqrt(dtype max); ``huge``: ~dtype max / 4; ``tiny``:
  ~sqrt(smallest normal); ``subnormal``; ``signed_zero``: -0.0 and +0.0 mixed in; ``edge``: at the OpInfo domain
  bounds), every float input as complex (``complex``, where OpInfo lists the complex dtype for the CPU), and, as
  separate variants marked "non-finite", ``nan`` and ``inf``;
- shapes: ``empty`` (a zero-size dimension, the same one in every input that shares it) and ``rank0``;
- parameters: ``flag`` (a boolean flipped), ``enum`` (another value of a string option: values seen in other
  instances of the operator, named in its docstring, or the usual ones of well-known option names), ``default``
  (an optional argument set back to None) and ``int_edge`` (1, 0 or -1 where the name says which applies).

Constraints kept: the OpInfo ``domain`` (log's small values are tiny *positive* ones; bounded domains get no
large values), OpInfo's dtype support (complex), the shapes of weights and the shape relations between inputs (value
boundaries rescale: signs, zeros and order survive). Each variant is validated by computing the eager reference
in-process (:func:`dlci.models.references.reference`): one the framework rejects is dropped and counted under
``<kind>:rejected:<exception>``; one whose every output is NaN (outside the non-finite kinds) under
``<kind>:all-nan-output``.

Sources ``boundary`` (opinfo + module_db) and ``keras_boundary`` (keras_tests) widen their base sources' cached
instances, at most ``limit_per_op`` variants per operator (default :attr:`BoundarySource.variants_per_op`), one
operator per job in sandboxed workers (:mod:`dlci.exec`): a variant that kills the framework (torch's
``linalg.eigvals`` on NaN segfaults) is dropped under ``<kind>:crashed:<signal>``, listed in the stats' ``crashes``,
and the operator widened again without it.
"""
from __future__ import annotations

import ast
import collections
import copy
import functools
import inspect
import json
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec, decode_value, to_numpy
from dlci.sources import Source, load_with_stats, register, stable_seed
from dlci.instance.recipe import has_tensor, keras_params, params_of, resolve, try_resolve
from dlci.sources._common import dist_version, harvest_in_workers
from dlci.torch_testing import opinfo

VALUE_KINDS = ("large", "tiny", "signed_zero", "subnormal", "edge", "huge", "complex", "nan", "inf")
SHAPE_KINDS = ("empty", "rank0")
PARAM_KINDS = ("flag", "default", "enum", "int_edge")
NONFINITE_KINDS = ("nan", "inf")
KINDS = VALUE_KINDS + SHAPE_KINDS + PARAM_KINDS
_RANK = {k: i for i, k in enumerate(KINDS)}
_CATEGORY = {**{k: "value" for k in VALUE_KINDS}, **{k: "shape" for k in SHAPE_KINDS},
             **{k: "param" for k in PARAM_KINDS}}
_CATEGORIES = ("value", "shape", "param")
RECIPES = ("torch_fn", "torch_module", "keras_layer", "onnx_model")

_VALUE_TEXT = {"large": "magnitudes ~sqrt(dtype max)", "huge": "magnitudes near dtype max (max/4)",
               "tiny": "magnitudes ~sqrt(smallest normal)", "subnormal": "subnormal magnitudes",
               "signed_zero": "-0.0 and +0.0 mixed in", "edge": "values at the domain bounds",
               "nan": "NaN elements (non-finite variant)", "inf": "Inf elements (non-finite variant)"}

# well-known string options: the values a name usually takes when neither the docs nor other samples list them
_ENUMS = {
    "approximate": ("none", "tanh"),
    "reduction": ("none", "mean", "sum"),
    "padding_mode": ("zeros", "reflect", "replicate", "circular"),
    "rounding_mode": ("trunc", "floor"),
    "norm": ("backward", "ortho", "forward"),
    "side": ("left", "right"),
    "nonlinearity": ("tanh", "relu"),
    "data_format": ("channels_last", "channels_first"),
    "padding": ("valid", "same"),
    "activation": ("relu", "tanh", "sigmoid", "linear"),
}
_MAX_OPTIONS = 4
_DIM_NAMES = re.compile(r"^(dim|dims|axis|axes|start_dim|end_dim|dim\d|dim_\w+|\w+_dim)$")
# integer parameters tied to the inputs' shapes: 1 there only produces a rejection
_SHAPE_TIED = re.compile(r"^(in_\w+|input_size|num_features|normalized_shape|num_channels|embed_dim|num_embeddings|"
                         r"embedding_dim|in1_features|in2_features|kdim|vdim|units)$")
_SKIP_CONFIG = ("name", "trainable", "dtype")


class _NotApplicable(Exception):
    """This boundary does not apply to this instance (never counted as a drop: nothing was generated)."""


@dataclass
class _Cand:
    kind: str
    detail: str  # what exactly moves (an input, a parameter): spread over the instances of an operator
    label: str  # appended to origin.test
    make: Callable[[], Instance]

    @property
    def category(self) -> str:
        return _CATEGORY[self.kind]


# -- operator metadata ----------------------------------------------------------------------------------------

@dataclass
class _Meta:
    domain: tuple[float | None, float | None] = (None, None)
    complex_dtypes: frozenset = frozenset()  # complex dtype names OpInfo lists for the CPU; empty: unknown / none


_OPINFO_TEST = re.compile(r"^op_db:(?P<name>[^\[]+)\[(?P<variant>[^\]]*)\]#")


@functools.lru_cache(maxsize=None)
def _opinfo_meta(name: str, variant: str) -> _Meta:
    op = opinfo(name, variant)
    if op is None:
        return _Meta()
    lo, hi = getattr(op, "domain", None) or (None, None)
    try:
        names = {str(d).replace("torch.", "") for d in op.supported_dtypes("cpu")}
    except Exception:  # noqa: BLE001 - odd OpInfo: no complex variants then
        names = set()
    return _Meta((lo, hi), frozenset(n for n in names if n in ("complex64", "complex128")))


def _meta(inst: Instance) -> _Meta:
    m = _OPINFO_TEST.match(inst.origin.test or "") if inst.call.get("kind") == "torch_fn" else None
    if not m:
        return _Meta()
    return _opinfo_meta(m["name"], m["variant"])


# -- signatures and documented options ----------------------------------------------------------------------------

_EMPTY = object()  # no default


@dataclass(frozen=True)
class _P:
    name: str
    default: Any = _EMPTY
    keyword: bool = True  # may be passed by name
    var: bool = False  # *args: positions from here on have no name


def _literal(node) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return _EMPTY


def _doc_signature(doc: str) -> list[_P] | None:
    """The first line of a torch builtin's docstring, ``gelu(input, approximate='none') -> Tensor``, as parameters."""
    from dlci.reduce._introspect import _from_docstring
    params = _from_docstring(doc)
    if params is None:
        return None
    return [_P(p["name"].lstrip("*"), p.get("default", _EMPTY), keyword=p["keyword"], var=p.get("var", False))
            for p in params]


def _from_inspect(obj) -> list[_P] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            continue
        if p.kind == p.VAR_POSITIONAL:
            out.append(_P(p.name, keyword=False, var=True))
            continue
        out.append(_P(p.name, _EMPTY if p.default is p.empty else p.default, keyword=p.kind != p.POSITIONAL_ONLY))
    return out


@functools.lru_cache(maxsize=None)
def _signature(kind: str, path: str) -> tuple[_P, ...] | None:
    """Positional order, names and defaults of a recipe's callable (torch_fn function or torch_module class)."""
    obj = try_resolve(path)
    if obj is None:
        return None
    params = _from_inspect(obj)
    if params is None and kind == "torch_fn":
        params = _doc_signature(getattr(obj, "__doc__", "") or "")
        if params is not None and path.startswith("torch.Tensor.") and (not params or params[0].name != "self"):
            params = [_P("self", keyword=False)] + params  # method docs leave self out; the recipe passes it first
    return tuple(params) if params is not None else None


_QUOTED = re.compile(r"``'([^'`\s]+)'``|``\"([^\"`\s]+)\"``|``([^`\s]+)``|`\"([^\"`\s]+)\"`|'([^'\s]+)'|\"([^\"\s]+)\"")
_TOKEN = re.compile(r"^[A-Za-z][\w\-.]{0,23}$")


@functools.lru_cache(maxsize=None)
def _doc_options(path: str, name: str) -> tuple[str, ...]:
    """String values the docstring of ``path`` quotes for parameter ``name`` (its entry, and lines naming it)."""
    obj = try_resolve(path)
    doc = inspect.getdoc(obj) if obj is not None else None
    if not doc:
        return ()
    lines = doc.splitlines()
    entry = re.compile(rf"^(\s*){re.escape(name)}\s*(\(|:)")
    mention = re.compile(rf"\b{re.escape(name)}\b")
    picked: list[str] = []
    i = 0
    while i < len(lines):
        m = entry.match(lines[i])
        if m:
            indent = len(m.group(1))
            block = [lines[i]]
            i += 1
            while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                block.append(lines[i])
                i += 1
            picked += block
            continue
        if mention.search(lines[i]) and i > 0:  # the first line is the signature: only its default is quoted there
            picked.append(lines[i])
        i += 1
    out = []
    for line in picked:
        for groups in _QUOTED.findall(line):
            tok = next(g for g in groups if g)
            if _TOKEN.match(tok) and tok not in ("None", "True", "False", name) and tok not in out:
                out.append(tok)
    return tuple(out)


# -- value boundaries ----------------------------------------------------------------------------------------------

def _in_domain(x: np.ndarray, lo, hi) -> bool:
    f = x[np.isfinite(x)].astype(np.float64)
    return not ((lo is not None and (f < lo).any()) or (hi is not None and (f > hi).any()))


def _value_array(kind: str, a: np.ndarray, lo, hi, rng: np.random.Generator) -> np.ndarray:
    """Input ``a`` moved to the boundary ``kind`` within the domain [lo, hi]; raises _NotApplicable."""
    fi = np.finfo(a.dtype)
    x = a.astype(np.float64)
    finite = np.isfinite(x)
    if kind in ("large", "huge", "tiny", "subnormal"):
        if kind in ("tiny", "subnormal") and lo is not None and lo > 0:
            raise _NotApplicable("domain-excludes-small")  # the edge kind approaches such a bound instead
        if kind in ("large", "huge") and hi is not None:
            raise _NotApplicable("domain-bounded-above")
        target = {"large": math.sqrt(float(fi.max)), "huge": float(fi.max) / 4,
                  "tiny": math.sqrt(float(fi.tiny)), "subnormal": float(fi.tiny) / 2}[kind]
        m = float(np.abs(x[finite]).max()) if finite.any() else 0.0
        if m == 0.0:
            # nothing to rescale: fresh magnitudes, negative ones only where the domain has negatives
            signs = np.ones(x.shape) if lo is not None and lo >= 0 else rng.choice([-1.0, 1.0], x.shape)
            y = np.where(finite, signs * rng.uniform(0.5, 1.0, x.shape) * target, x)
        else:
            y = x * (target / m)  # signs, zeros and order survive: sorted, positive or PD inputs stay so
        if kind in ("tiny", "subnormal") and lo is not None and lo >= 0:
            # a domain starting at 0 (log, sqrt): small means tiny positive values, never 0 or negative
            y = np.where(finite & (y <= 0), rng.uniform(0.5, 1.0, x.shape) * target, y)
        with np.errstate(all="ignore"):
            out = y.astype(a.dtype)
        if kind == "subnormal" and not ((out != 0) & (np.abs(out) < fi.tiny)).any():
            raise _NotApplicable("no-subnormal")
        if kind in ("tiny", "subnormal") and lo is not None and lo >= 0:
            # values far below the largest one underflow to 0 in the cast: lift them to the smallest subnormal
            out = np.where(np.isfinite(out) & (out <= 0), np.asarray(fi.smallest_subnormal, a.dtype), out)
    elif kind == "edge":
        bounds = [(b, s) for b, s in ((lo, 1), (hi, -1)) if b is not None and b != 0]
        if not bounds:
            raise _NotApplicable("no-nonzero-domain-bound")
        out = np.empty_like(a)
        which = rng.integers(0, len(bounds), a.shape)
        steps = rng.integers(0, 4, a.shape)
        for j, (b, s) in enumerate(bounds):
            bt = np.asarray(b, a.dtype)
            sp = np.abs(np.spacing(bt))
            # at the lower bound itself and a few ulps inside; the upper bound is excluded ([low, high))
            vals = (bt + steps.astype(a.dtype) * sp) if s > 0 else (bt - (steps + 1).astype(a.dtype) * sp)
            out = np.where(which == j, vals, out).astype(a.dtype)
    elif kind == "signed_zero":
        if not ((lo is None or lo <= 0) and (hi is None or hi >= 0)):
            raise _NotApplicable("domain-excludes-zero")
        out = a.copy().reshape(-1)
        pos = rng.permutation(out.size)[:max(1, out.size // 2)]
        out[pos[0::2]] = -0.0
        out[pos[1::2]] = 0.0
        out = out.reshape(a.shape)
    elif kind in ("nan", "inf"):
        out = a.copy().reshape(-1)
        pos = rng.permutation(out.size)[:max(1, out.size // 8)]
        if kind == "nan":
            out[pos] = np.nan
        else:
            signs = ([np.inf] if hi is None else []) + ([-np.inf] if lo is None else [])
            if not signs:
                raise _NotApplicable("domain-bounded")
            out[pos] = np.resize(np.asarray(signs, a.dtype), pos.size)
        out = out.reshape(a.shape)
    else:
        raise ValueError(kind)
    if kind not in NONFINITE_KINDS and not _in_domain(out, lo, hi):
        raise _NotApplicable("outside-domain")
    if np.array_equal(out, a, equal_nan=True) and (kind != "signed_zero" or np.array_equal(
            np.signbit(out), np.signbit(a))):
        raise _NotApplicable("unchanged")
    return out


def _complex_arrays(inst: Instance, allowed: frozenset, rng) -> dict[str, np.ndarray]:
    arrays = dict(inst.arrays)
    changed = 0
    for i, a in enumerate(inst.input_arrays()):
        if a.dtype.kind != "f":
            continue
        target = {"float32": "complex64", "float64": "complex128"}.get(a.dtype.name)
        if target is None or target not in allowed:
            raise _NotApplicable(f"no-complex-for-{a.dtype.name}")
        x = a.astype(np.float64)
        finite = x[np.isfinite(x)]
        scale = float(np.std(finite)) if finite.size > 1 and np.std(finite) > 0 else 1.0
        arrays[f"in:{i}"] = (x + 1j * rng.standard_normal(a.shape) * scale).astype(target)
        changed += 1
    if not changed:
        raise _NotApplicable("no-float-input")
    return arrays


# -- the widener ----------------------------------------------------------------------------------------------

def _rng(*parts) -> np.random.Generator:
    return np.random.default_rng(stable_seed("boundary", *(str(p) for p in parts)))


def _float_inputs(inst: Instance) -> list[int]:
    return [i for i, a in enumerate(inst.input_arrays()) if a.dtype.kind == "f" and a.size]


def _decoded(v: Any) -> Any:
    return decode_value(v, []) if not has_tensor(v) else v


def _encoded(v: Any) -> Any:
    if isinstance(v, tuple):
        return {"$tuple": [_encoded(x) for x in v]}
    if isinstance(v, list):
        return [_encoded(x) for x in v]
    return v


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_edges(name: str, value: Any) -> list:
    if name.startswith("forward."):
        name = name[len("forward."):]
    if _SHAPE_TIED.match(name):
        return []
    if _is_int(value):
        cands = [0, -1] if _DIM_NAMES.match(name) else [0] if "pad" in name else [1]
        return [c for c in cands if c != value]
    if isinstance(value, (list, tuple)) and value and all(_is_int(v) for v in value):
        fill = 0 if "pad" in name else 1
        new = type(value)([fill] * len(value))
        return [new] if new != value else []
    return []


class Widener:
    """Derives validated boundary variants; keeps per-operator counts so that an operator's instances spread
    over the kinds, and the stats of everything generated, dropped and not applicable."""

    def __init__(self, *, per_instance: int = 4, seed: int = 0, validate: bool = True, source: str = "boundary",
                 max_attempts: int | None = None, skip: Iterable[str] = (), hook: Callable[[str], None] | None = None):
        self.per_instance, self.seed, self.validate, self.source = per_instance, seed, validate, source
        self.max_attempts = max_attempts if max_attempts is not None else 3 * per_instance + 2
        # candidate keys (see candidate_key) not to try: they crashed the process that tried them before
        self.skip = set(skip)
        self.hook = hook  # told each candidate's key before it is built and run (a crash then names it)
        self.stats: dict[str, Any] = {"instances": 0, "variants": 0, "kinds": collections.Counter(),
                                      "dropped": collections.Counter(), "inapplicable": collections.Counter()}
        self._done: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self._seen: set[str] = set()
        self._observed: dict[tuple[str, str], list[str]] = collections.defaultdict(list)

    # -- other instances of an operator name its string options ------------------------------------------------
    def observe(self, instances: Iterable[Instance]) -> None:
        for inst in instances:
            self._seen.add(inst.id)
            for name, _where, value, _default in self._named(inst):
                if isinstance(value, str) and value not in self._observed[(inst.op, name)]:
                    self._observed[(inst.op, name)].append(value)

    def _named(self, inst: Instance) -> list[tuple[str, tuple, Any, Any]]:
        """(name, where, decoded value, default) of the non-tensor settings, including defaulted ones."""
        call = inst.call
        kind = call.get("kind")
        if kind == "keras_layer":
            return [(k, ("config", k), v, _EMPTY) for k, v in call.get("config", {}).items()
                    if k not in _SKIP_CONFIG and not isinstance(v, dict)]
        if kind not in ("torch_fn", "torch_module"):
            return []
        path = call["fn"] if kind == "torch_fn" else call["cls"]
        sig = _signature(kind, path) or ()
        out, named = [], set()
        for i, v in enumerate(call.get("args", [])):
            p = sig[i] if i < len(sig) and not any(q.var for q in sig[:i + 1]) else None
            name = p.name if p is not None else f"arg{i}"
            named.add(name)
            if not has_tensor(v):
                out.append((name, ("args", i), _decoded(v), p.default if p is not None else _EMPTY))
        by_name = {p.name: p for p in sig}
        for k, v in call.get("kwargs", {}).items():
            named.add(k)
            if not has_tensor(v):
                out.append((k, ("kwargs", k), _decoded(v), by_name[k].default if k in by_name else _EMPTY))
        for p in sig:
            if p.var or not p.keyword or p.name in named or p.default is _EMPTY or p.name in ("out", "self"):
                continue
            out.append((p.name, ("absent", p.name), p.default, p.default))
        if kind == "torch_module":
            for k, v in call.get("forward_kwargs", {}).items():
                if not has_tensor(v):
                    out.append((f"forward.{k}", ("forward_kwargs", k), _decoded(v), _EMPTY))
        return out

    # -- candidates ---------------------------------------------------------------------------------------------
    def _value_cands(self, inst: Instance) -> list[_Cand]:
        floats = _float_inputs(inst)
        if not floats:
            self.stats["inapplicable"]["value:no-float-input"] += 1
            return []
        pick = _rng(self.seed, inst.id, "input")
        idx = floats[0] if len(floats) == 1 or pick.random() < 0.6 else int(pick.choice(floats[1:]))
        meta = _meta(inst)
        lo, hi = meta.domain if idx == 0 else (None, None)  # OpInfo's domain is the first input's
        cands = []
        for kind in VALUE_KINDS:
            if kind == "complex":
                if inst.call.get("kind") == "torch_fn" and meta.complex_dtypes:
                    cands.append(_Cand(kind, "all", "float inputs as complex",
                                       functools.partial(self._make_complex, inst, meta)))
                continue
            cands.append(_Cand(kind, f"in{idx}", f"in{idx}: {_VALUE_TEXT[kind]}",
                               functools.partial(self._make_value, inst, kind, idx, lo, hi)))
        return cands

    def _make_value(self, inst, kind, idx, lo, hi) -> Instance:
        arrays = dict(inst.arrays)
        arrays[f"in:{idx}"] = _value_array(kind, inst.arrays[f"in:{idx}"], lo, hi, _rng(self.seed, inst.id, kind))
        return self._derive(inst, kind, f"in{idx}: {_VALUE_TEXT[kind]}", arrays=arrays)

    def _make_complex(self, inst, meta) -> Instance:
        arrays = _complex_arrays(inst, meta.complex_dtypes, _rng(self.seed, inst.id, "complex"))
        return self._derive(inst, "complex", "float inputs as complex", arrays=arrays)

    def _shape_cands(self, inst: Instance) -> list[_Cand]:
        if inst.call.get("kind") == "onnx_model":
            return []  # the graph declares its input shapes
        xs = inst.input_arrays()
        if not xs:
            return []
        a0 = xs[0]
        if not (a0.ndim and a0.size):
            self.stats["inapplicable"]["shape:already-" + ("rank0" if a0.ndim == 0 else "empty")] += 1
            return []
        cands = []
        # empty: the same axis (counted from the left, then from the right) in every input of that size there,
        # so that broadcasting and weight shapes still line up
        for axis, text in ((0, "dim 0"), (-1, "last dim"))[:a0.ndim]:
            size = a0.shape[axis]
            which = [i for i, a in enumerate(xs) if a.ndim and a.shape[axis] == size]
            label = f"empty: {text} {size} -> 0 in " + ",".join(f"in{i}" for i in which)
            cands.append(_Cand("empty", text, label,
                               functools.partial(self._make_shape, inst, "empty", label, which, axis)))
        # rank 0: the first input alone (the others broadcast against it), then every input of its shape
        same = [i for i, a in enumerate(xs) if a.shape == a0.shape]
        for which in ([0], same) if len(same) > 1 else ([0],):
            label = "rank-0: " + ",".join(f"in{i}" for i in which)
            cands.append(_Cand("rank0", "all" if len(which) > 1 else "in0", label,
                               functools.partial(self._make_shape, inst, "rank0", label, which, None)))
        return cands

    def _make_shape(self, inst, kind, label, which, axis) -> Instance:
        arrays = dict(inst.arrays)
        for i in which:
            a = inst.arrays[f"in:{i}"]
            if kind == "empty":
                arrays[f"in:{i}"] = np.array(np.take(a, np.arange(0), axis=axis), copy=True)
            else:
                arrays[f"in:{i}"] = np.array(a.reshape(-1)[0], dtype=a.dtype, copy=True)  # ndim 0
        return self._derive(inst, kind, label, arrays=arrays)

    def _options(self, inst: Instance, name: str, value: Any) -> list:
        base = name.split(".", 1)[-1]
        call = inst.call
        path = call.get("fn") or call.get("cls") or ""
        opts = list(self._observed.get((inst.op, name), []))
        opts += list(_ENUMS.get(base, ()))
        if isinstance(value, str):  # documented values only for parameters that are strings
            opts += list(_doc_options(path, base))
        return [o for o in dict.fromkeys(opts) if o != value][:_MAX_OPTIONS]

    def _param_cands(self, inst: Instance) -> list[_Cand]:
        kind = inst.call.get("kind")
        if kind not in ("torch_fn", "torch_module", "keras_layer"):
            return []
        cands = []
        for name, where, value, default in self._named(inst):
            edits: list[tuple[str, Any]] = []
            if isinstance(value, bool):
                edits.append(("flag", not value))
            elif isinstance(value, str) or (value is None and name.split(".", 1)[-1] in _ENUMS):
                edits += [("enum", o) for o in self._options(inst, name, value)]
            if value is not None and default is None and where[0] != "absent":
                edits.append(("default", None))
            edits += [("int_edge", v) for v in _int_edges(name, value)]
            for pkind, new in edits:
                was = "its default" if where[0] == "absent" else repr(value)
                label = f"param {name}={new!r}" + (" (its default)" if pkind == "default" else "") + f", was {was}"
                cands.append(_Cand(pkind, name, label,
                                   functools.partial(self._make_param, inst, pkind, label, where, name, new)))
        return cands

    def _make_param(self, inst, kind, label, where, name, new) -> Instance:
        call = copy.deepcopy(inst.call)
        section, key = where
        if section == "config":
            call["config"][key] = new
        elif section == "args":
            call["args"][key] = _encoded(new)
        elif section == "absent":
            call.setdefault("kwargs", {})[key] = _encoded(new)
        elif new is None and kind == "default":
            del call[section][key]  # back to the default
        else:
            call[section][key] = _encoded(new)
        arrays = dict(inst.arrays)
        if call["kind"] == "torch_module" and section != "forward_kwargs":
            arrays = {k: v for k, v in arrays.items() if not k.startswith("state:")}
            arrays.update(_module_state(call, inst.seed))
        elif call["kind"] == "keras_layer":
            arrays = {k: v for k, v in arrays.items() if not k.startswith("weight:")}
            arrays.update(_keras_weights(inst, call))
        return self._derive(inst, kind, label, call=call, arrays=arrays)

    # -- the variant ----------------------------------------------------------------------------------------------
    def _derive(self, inst: Instance, kind: str, label: str, *, call: dict | None = None,
                arrays: dict | None = None) -> Instance:
        call = copy.deepcopy(inst.call) if call is None else call
        arrays = {k: v for k, v in (inst.arrays if arrays is None else arrays).items()
                  if not k.startswith("expected:")}  # outputs of the original inputs: stale
        n = len(inst.inputs)
        if call["kind"] == "torch_fn":
            params = params_of(call.get("args", []), call.get("kwargs", {}))
        elif call["kind"] == "torch_module":
            params = params_of(call.get("args", []), call.get("kwargs", {}))
            params.update({f"forward.{k}": v for k, v in params_of(call.get("forward_args", []),
                                                                    call.get("forward_kwargs", {})).items()})
        elif call["kind"] == "keras_layer":
            params = keras_params(call.get("config", {}))
        else:
            params = dict(inst.params)
        params["boundary"] = kind  # its own OPERA partition: boundary=enum:<kind>
        return Instance(op=inst.op, framework=inst.framework, call=call,
                        inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(n)], params=params,
                        origin=Origin(self.source, f"{inst.origin.test} | {label}", inst.origin.library),
                        seed=inst.seed, arrays=arrays)

    def _order(self, op: str, cands: list[_Cand], inst_id: str) -> list[_Cand]:
        """Round robin over value / shape / param boundaries, each list least-covered-for-this-operator first."""
        done = self._done[op]
        tie = _rng(self.seed, inst_id, "order")
        keyed = [(done[(c.kind, c.detail)], done[c.kind], _RANK[c.kind], tie.random(), c) for c in cands]
        by_cat = {cat: [k[-1] for k in sorted((k for k in keyed if k[-1].category == cat), key=lambda k: k[:4])]
                  for cat in _CATEGORIES}
        cats = sorted(_CATEGORIES, key=lambda cat: (done["cat:" + cat], _CATEGORIES.index(cat)))
        out = []
        while any(by_cat.values()):
            for cat in cats:
                if by_cat[cat]:
                    out.append(by_cat[cat].pop(0))
        return out

    def widen_one(self, inst: Instance, limit: int | None = None) -> list[Instance]:
        """Up to ``limit`` (default ``per_instance``) validated variants of one instance."""
        limit = self.per_instance if limit is None else limit
        kind = inst.call.get("kind")
        if kind not in RECIPES:
            self.stats["inapplicable"][f"recipe:{kind}"] += 1
            return []
        self.stats["instances"] += 1
        self._seen.add(inst.id)
        cands = self._value_cands(inst) + self._shape_cands(inst) + self._param_cands(inst)
        out: list[Instance] = []
        used: set = set()
        attempts = 0
        for c in self._order(inst.op, cands, inst.id):
            if len(out) >= limit or attempts >= self.max_attempts:
                break
            if c.kind in used and c.category != "param" or (c.kind, c.detail) in used:
                continue  # one variant per value/shape kind and per parameter edit kind of one instance
            key = candidate_key(inst, c.kind, c.detail)
            if key in self.skip:
                continue  # counted by whoever saw it crash
            if self.hook is not None:
                self.hook(key)
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    variant = c.make()
            except _NotApplicable as e:
                self.stats["inapplicable"][f"{c.kind}:{e}"] += 1
                continue
            except Exception as e:  # noqa: BLE001 - the constructor rejects the new setting
                attempts += 1
                self.stats["dropped"][f"{c.kind}:rejected:{type(e).__name__}"] += 1
                continue
            if variant.id in self._seen:
                self.stats["dropped"][f"{c.kind}:duplicate"] += 1
                continue
            self._seen.add(variant.id)
            attempts += 1
            reason = validate(variant) if self.validate else None
            if reason:
                self.stats["dropped"][f"{c.kind}:{reason}"] += 1
                continue
            out.append(variant)
            used.update((c.kind, (c.kind, c.detail)))
            done = self._done[inst.op]
            done[c.kind] += 1
            done[(c.kind, c.detail)] += 1
            done["cat:" + c.category] += 1
            self.stats["kinds"][c.kind] += 1
        self.stats["variants"] += len(out)
        return out


def candidate_key(inst: Instance, kind: str, detail: str) -> str:
    return f"{inst.id}|{kind}|{detail}"


def validate(variant: Instance) -> str | None:
    """None when the eager reference of ``variant`` computes, else the reason it is dropped."""
    from dlci.models.references import ReferenceError_, reference
    kind = variant.params.get("boundary")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            ref, _ = reference(variant)
    except ReferenceError_ as e:
        cause = e.__cause__
        return "rejected:" + (type(cause).__name__ if cause is not None else str(e).split(":", 1)[0])
    if _CATEGORY.get(kind) == "value" and kind not in NONFINITE_KINDS:
        # finite boundary values that only produce NaN test nothing but NaN propagation (shape and parameter
        # boundaries keep what the operator defines, e.g. the NaN mean of an empty batch)
        floats = [np.asarray(o) for o in ref if np.asarray(o).dtype.kind in "fc" and np.asarray(o).size]
        if floats and all(np.isnan(o).all() for o in floats):
            return "all-nan-output"
    return None


def _module_state(call: dict, seed: int) -> dict[str, np.ndarray]:
    """The weights of a torch_module recipe with changed constructor arguments, built as module_db builds them."""
    from dlci.models.rebuild import build_torch_module
    from dlci.models import seed_torch
    seed_torch(seed)
    module = build_torch_module(call)
    return {f"state:{n}": to_numpy(v) for n, v in module.state_dict().items()}


def _keras_weights(inst: Instance, call: dict) -> dict[str, np.ndarray]:
    """The original weights where the new config keeps their shapes, else the layer's own seeded initial ones."""
    import keras
    keras.utils.set_random_seed(inst.seed % 2**32)
    layer = resolve(call["cls"]).from_config(dict(call["config"]))
    xs = inst.input_arrays()
    layer(*decode_value(call.get("args", [{"$t": i} for i in range(len(xs))]), xs))
    new = [np.asarray(w) for w in layer.get_weights()]
    names = sorted((k for k in inst.arrays if k.startswith("weight:")), key=lambda k: int(k.split(":")[1]))
    old = [inst.arrays[k] for k in names]
    keep = [w.shape for w in old] == [w.shape for w in new] and [w.dtype for w in old] == [w.dtype for w in new]
    return {f"weight:{i}": w for i, w in enumerate(old if keep else new)}


def widen(instances: Iterable[Instance], *, per_instance: int = 4, seed: int = 0, validate: bool = True,
          stats: dict | None = None, source: str = "boundary") -> list[Instance]:
    """Validated boundary variants of ``instances`` (at most ``per_instance`` each, deterministic in ``seed``).

    ``stats``, when given, receives the counts: ``kinds`` (variants per boundary kind), ``dropped`` (per
    ``<kind>:<reason>``), ``inapplicable`` (boundaries that do not apply, never generated), ``instances``,
    ``variants``.
    """
    instances = list(instances)
    w = Widener(per_instance=per_instance, seed=seed, validate=validate, source=source)
    w.observe(instances)
    out = [v for inst in instances for v in w.widen_one(inst)]
    if stats is not None:
        stats.update(w.stats)
    return out


# -- sources ----------------------------------------------------------------------------------------------------

def _spread(group: list[Instance]) -> list[Instance]:
    """An operator's instances in the order to widen them: with non-empty float inputs and new settings first."""
    seen: collections.Counter = collections.Counter()
    keyed = []
    for pos, inst in enumerate(group):
        key = json.dumps([inst.params, [s.dtype for s in inst.inputs]], sort_keys=True, default=str)
        keyed.append((not _float_inputs(inst), seen[key], pos, inst))
        seen[key] += 1
    return [k[-1] for k in sorted(keyed, key=lambda k: k[:3])]


def widen_op(instances: list[Instance], *, cap: int, per_instance: int = 4, seed: int = 0,
             source: str = "boundary", skip: Iterable[str] = (),
             hook: Callable[[str], None] | None = None) -> tuple[list[Instance], dict]:
    """At most ``cap`` validated variants of one operator's instances, spread over them and over the kinds."""
    w = Widener(per_instance=max(1, min(per_instance, cap)), seed=seed, source=source, skip=skip, hook=hook)
    w.observe(instances)
    out: list[Instance] = []
    tries = 2 * -(-cap // w.per_instance) + 2  # originals tried: bounds the time one operator takes
    for inst in _spread(instances)[:tries]:
        if len(out) >= cap:
            break
        out += w.widen_one(inst, limit=min(w.per_instance, cap - len(out)))
    return out, w.stats


def widen_job(payload: dict, *, stage_hook=None) -> dict:
    """Engine job (``dlci.sources.boundary:widen_job``): :func:`widen_op` in a sandboxed worker, plain data back.

    Validation runs the framework on inputs its own tests never use: it can crash (linalg kernels on NaN) or
    hang, and a worker turns that into a result instead of ending the harvest.
    """
    instances = [Instance.from_meta(m, a) for m, a in payload["instances"]]
    out, stats = widen_op(instances, cap=payload["cap"], per_instance=payload["per_instance"],
                          seed=payload["seed"], source=payload["source"], skip=payload.get("skip", ()),
                          hook=(lambda key: stage_hook("candidate " + key)) if stage_hook else None)
    return {"variants": [[v.to_meta(), dict(v.arrays)] for v in out],
            "stats": {k: dict(v) if isinstance(v, collections.Counter) else v for k, v in stats.items()}}


@register
class BoundarySource(Source):
    name = "boundary"
    framework = "torch"
    description = "opinfo + module_db instances widened to boundary values, shapes and parameters (validated)"
    default_limit_per_op = None  # None: the base sources keep their default limits (and share their caches)
    bases: tuple[str, ...] = ("opinfo", "module_db")
    warm_imports: tuple[str, ...] = ("torch",)
    variants_per_op = 8
    per_instance = 4
    seed = 0
    workers = 2
    job_timeout = 300.0  # one operator's widening in a worker
    max_rounds = 6  # re-runs of an operator whose widening crashed (each without the candidates that crashed)

    def library_versions(self) -> dict[str, str]:
        return {"torch": dist_version("torch")}

    def cache_extra(self) -> dict:
        return {"variants_per_op": self.variants_per_op, "per_instance": self.per_instance, "seed": self.seed}

    def base_instances(self, limit_per_op: int | None) -> list[Instance]:
        base: list[Instance] = []
        self.stats["base"] = {}
        for name in self.bases:
            insts, _ = load_with_stats(name, limit_per_op=limit_per_op, ops=self.ops)
            self.stats["base"][name] = len(insts)
            base += insts
        return base

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        import os
        from dlci.exec import Engine
        cap = limit_per_op if limit_per_op is not None else self.variants_per_op
        groups: dict[str, list[Instance]] = collections.defaultdict(list)
        for inst in self.base_instances(limit_per_op):
            groups[inst.op].append(inst)
        kinds, inapplicable = collections.Counter(), collections.Counter()
        results: dict[str, list[Instance]] = {}

        def payload(op, skip):
            return {"instances": [[i.to_meta(), dict(i.arrays)] for i in groups[op]], "cap": cap,
                    "per_instance": self.per_instance, "seed": self.seed, "source": self.name, "skip": skip}

        def on_done(op, res) -> bool:
            if "variants" not in res:
                return False
            results[op] = [Instance.from_meta(m, a) for m, a in res["variants"]]
            kinds.update(res["stats"]["kinds"])
            inapplicable.update(res["stats"]["inapplicable"])
            for reason, n in res["stats"]["dropped"].items():
                self.skip(reason, n)
            return True

        todo = list(groups)
        workers = max(1, min(self.workers, os.cpu_count() or 1, len(todo)))
        with Engine(workers=workers, timeout=self.job_timeout, warm_imports=self.warm_imports + (__name__,)) as eng:
            harvest_in_workers(self, eng, todo, payload, on_done, job_func=f"{__name__}:widen_job",
                               max_rounds=self.max_rounds,
                               crash_reason=lambda key, symptom: f"{key.split('|')[1]}:crashed:{symptom}")
        self.stats["kinds"] = dict(kinds)
        self.stats["inapplicable"] = dict(inapplicable)
        for op in groups:
            yield from results.get(op, [])


@register
class KerasBoundarySource(BoundarySource):
    name = "keras_boundary"
    framework = "keras"
    description = "keras_tests instances widened to boundary values, shapes and parameters (validated)"
    bases = ("keras_tests",)
    warm_imports = ("keras",)

    def library_versions(self) -> dict[str, str]:
        tf = dist_version("tensorflow-cpu")
        return {"keras": dist_version("keras"), "tensorflow": tf if tf != "missing" else dist_version("tensorflow")}


__all__ = ["widen", "widen_op", "widen_job", "validate", "Widener", "BoundarySource", "KerasBoundarySource", "KINDS",
           "VALUE_KINDS", "SHAPE_KINDS", "PARAM_KINDS", "NONFINITE_KINDS"]
