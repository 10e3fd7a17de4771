"""Canonical operator identity across frameworks.

A converter change names an operator in its repository's vocabulary (``avg_pool2d.default``,
``nn.AvgPool2d``, ``AveragePool``, ``AvgPool``, ``AVERAGE_POOL_2D``, ``AveragePooling2D``); a dlci instance
names it in its source's (``aten::avg_pool2d``, ``nn::AvgPool2d``, ``onnx::AveragePool``,
``keras::AveragePooling2D``). Both are mapped to **canonical ids**: aten-style lowercase snake names
(``avg_pool2d``, ``conv2d``, ``batch_norm``, ``linear``), a *set* where one name covers several
(``AveragePool`` -> ``{avg_pool1d, avg_pool2d, avg_pool3d}``).

The selection rule
------------------
``canonical(name)`` is what a *changed* name denotes: the operator itself, its exact aliases (``true_divide`` ~
``div``, ``special_erf`` ~ ``erf``) and, for a kernel variant, its family root (``_native_batch_norm_legit`` ->
also ``batch_norm``; ``max_pool2d_with_indices`` -> also ``max_pool2d``). Nothing wider: a change to
``conv2d`` must not select ``conv1d`` instances, a change to ``add`` not ``addmm``, ``avg_pool2d`` not
``adaptive_avg_pool2d`` or ``max_pool2d``.

``instance_ops(op)`` is what an *instance* exercises: its canonical set, closed under (a) the whole family of
each member (``batch_norm`` instances also run ``_native_batch_norm_legit_no_training`` once exported),
(b) the core-ATen lowering table (``conv2d`` -> ``convolution``, ``relu6`` -> ``hardtanh``, ``linear`` ->
``addmm``/``mm``; ``torch.masked`` reductions -> the plain reduction), and aliases.
``select(instances, ops)`` keeps the instances whose ``instance_ops`` intersect ``ops``. So a change to the
``convolution`` converter selects every conv instance, a change to ``conv2d`` only the 2-D ones (and ONNX
``Conv``, whose instances may be 2-D); a change to ``hardtanh`` selects ``relu6`` instances, not the reverse.

Namespaces
----------
``aten`` (``aten::x``, ``aten.x``, ``torch.ops.aten.x.default``, ``x.Tensor``, ``x_`` in-place, ``torch.x``,
``torch.nn.functional.x``/``F.x``/``nn.functional.x``, ``Tensor.x``, ``torch.special.x`` -> ``special_x``,
dunders and python ``operator`` names), ``torch.nn`` (module classes: ``nn::X``, ``nn.X``, ``torch.nn.X``,
``torch.nn.modules.x.X``), ``onnx`` (``onnx::X`` and other domains ``ai.onnx.ml::X``, ``com.microsoft::X``),
``tf`` (raw ops ``AvgPool``/``FusedBatchNormV3`` and python names ``tf.nn.x``/``tf.math.x``), ``tflite``
(``BuiltinOperator`` names), ``keras`` (layer classes), and ``None``/``"any"``: guessed from the name's form
(an explicit ``ns::`` prefix wins; bare CamelCase/UPPER names are looked up in every foreign vocabulary).

Where the identities come from
------------------------------
Derived from the installed packages (:mod:`dlci.operators._derive`, cached on disk per package versions):
aten operator names and view ops (torch schemas), ``torch.nn.functional`` names, aliases (torch docstrings
"Alias for torch.x" and onnxscript registrations that share one implementation), torch.nn module classes
(mapped to their functional by comparing names without underscores, dimension and ``Loss`` suffixes), ONNX
<-> aten (onnxscript's torchlib: the *characteristic* ONNX op of each aten implementation, shape plumbing and
arithmetic glue excluded), ONNX/TFLite/keras/TF vocabularies. Foreign names go through generic normalisation
(CamelCase/UPPER_SNAKE -> snake, ``V2``/``V3`` suffixes dropped, ``2D`` -> ``2d``, token rewrites such as
``average`` -> ``avg``, ``normalization`` -> ``norm``, ``global_*_pool`` -> ``adaptive_*_pool``, and a name
without a dimension expands to the ``1d/2d/3d`` family). What cannot be derived is in
:mod:`dlci.operators._tables`, one reason per entry. An unknown name still maps to its normalised snake name.
"""
from __future__ import annotations

import functools
import re
from typing import Iterable

from dlci.operators import _tables as T
from dlci.operators.names import rewrite, snake, squash, strip_affixes

__all__ = ["canonical", "instance_ops", "select", "vocabulary", "NAMESPACES"]

NAMESPACES = ("aten", "torch.nn", "onnx", "tf", "tflite", "keras")
# canonical operators nearly every graph has, most basic first: what stands for "any graph" (a change on a
# frontend's own path is tested with them; a failure spread over many operators is shown on the first of them)
BASIC_OPERATORS = ("add", "mul", "relu", "linear", "matmul", "conv2d", "softmax")
_NS_ALIASES = {
    None: None, "": None, "any": None, "aten": "aten", "torch": "aten", "pytorch": "aten", "fx": "aten",
    "torch.nn.functional": "aten", "functional": "aten", "torch.nn": "torch.nn", "nn": "torch.nn",
    "module": "torch.nn", "onnx": "onnx", "tf": "tf", "tensorflow": "tf", "tflite": "tflite", "keras": "keras",
}
_PREFIX_NS = {"aten": "aten", "prim": "aten", "prims": "aten", "_operator": "aten", "operator": "aten",
              "torch": "aten", "nn": "torch.nn", "keras": "keras", "tf": "tf", "tensorflow": "tf",
              "tflite": "tflite", "onnx": "onnx", "ai.onnx": "onnx"}


# -- small helpers ---------------------------------------------------------------------------------------------

def _split(spec: str) -> list[str]:
    return spec.split()


# -- derived tables, indexed -----------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _idx() -> dict:
    from dlci.operators._derive import tables
    t = tables()
    aten = frozenset(t.get("aten", ()))
    functional = frozenset(t.get("functional", ()))
    views = frozenset(t.get("views", ()))
    sq_aten: dict[str, set] = {}
    for n in aten:
        sq_aten.setdefault(squash(n), set()).add(n)
    sq_fn: dict[str, set] = {}
    for n in functional:
        sq_fn.setdefault(squash(n), set()).add(n)
    # alias classes (union-find)
    parent: dict[str, str] = {}

    def find(x):
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x
    pairs = [tuple(p) for p in t.get("torch_aliases", ())] + [tuple(p) for p in t.get("torchlib_aliases", ())]
    pairs += [(a, b) for a, (targets, _r) in T.ATEN_ALIASES.items() for b in _split(targets)]
    for a, b in pairs:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    classes: dict[str, set] = {}
    for x in list(parent):
        classes.setdefault(find(x), set()).add(x)
    alias = {x: frozenset(classes[find(x)]) for x in parent}
    known = aten | functional
    idx = {"aten": aten, "functional": functional, "views": views, "known": known, "sq_aten": sq_aten,
           "sq_fn": sq_fn, "alias": alias, "torchlib": t.get("torchlib", {}), "tables": t}
    # family roots and members
    roots: dict[str, str] = {}
    for n in aten:
        r = _root_of(n, aten, views)
        if r != n:
            roots[n] = r
    families: dict[str, set] = {}
    for n, r in roots.items():
        families.setdefault(r, {r}).add(n)
    idx["roots"] = roots
    idx["families"] = {r: frozenset(m) for r, m in families.items()}
    return idx


def _root_of(name: str, aten: frozenset, views: frozenset) -> str:
    """The plain operator a kernel variant belongs to, or the name itself (see ``FAMILY_*`` in the tables)."""
    best = name
    s = name.lstrip("_")
    while True:
        before = s
        if s in aten and s != name:
            best = s
        s = strip_affixes(s)
        if s.endswith("_copy") and s[:-5] in views:
            s = s[:-5]
        if s == before:
            break
    if s in aten and s != name:
        best = s
    return best


# -- torch (aten) names ----------------------------------------------------------------------------------------

_TORCH_PREFIXES = (
    ("torch.ops.aten.", False), ("ops.aten.", False), ("aten::", False), ("aten.", False),
    ("torch.ops.prims.", False), ("prims::", False), ("prim::", False), ("_operator::", False),
    ("operator.", False), ("_operator.", False),
    ("torch.nn.functional.", True), ("nn.functional.", True), ("F.", True), ("functional.", True),
    ("torch._C._nn.", False), ("torch._C._VariableFunctions.", False), ("torch._C._special.", False),
    ("torch._C._linalg.", False), ("torch._C._fft.", False), ("torch.Tensor.", False), ("Tensor.", False),
    ("torch.", False),
)


def _parse_torch(name: str) -> tuple[str, bool]:
    """(bare aten-ish name, came from torch.nn.functional)."""
    s = name.strip()
    functional = False
    stripped = True
    while stripped:  # "aten::nn.functional.softplus", "torch.ops.aten.x.default"
        stripped = False
        for p, fn in _TORCH_PREFIXES:
            if s.startswith(p):
                s, functional, stripped = s[len(p):], functional or fn, True
                break
    for sub in ("special", "linalg", "fft"):
        if s.startswith(sub + "."):
            s = f"{sub}_{s[len(sub) + 1:]}"
    s = _op_part(s)
    m = re.fullmatch(r"torch_ops_aten_(\w+?)(?:_default)?", s)  # OpInfo's spelling of torch.ops.aten.x.default
    if m:
        s = m.group(1)
    m = re.fullmatch(r"__(\w+?)__", s)
    if m:
        inner = m.group(1)
        if inner in T.OPERATOR_FUNCS or inner in _idx()["known"]:
            s = inner
        elif inner[:1] in "ri" and (inner[1:] in T.OPERATOR_FUNCS or inner[1:] in _idx()["known"]):
            s = inner[1:]  # reflected (__radd__) and in-place (__iadd__) forms
    elif s.endswith("_") and len(s) > 1:
        s = s.rstrip("_") or s  # in-place variant
    return s, functional


def _op_part(s: str) -> str:
    """The operator in a dotted torch spelling: ``x.overload`` -> ``x``; ``some.python.path.x`` -> ``x``."""
    if "." not in s:
        return s
    parts = s.split(".")
    k = _idx()["known"]
    if parts[0] in k or parts[0].rstrip("_") in k:
        return parts[0]
    if parts[-1] in k or parts[-1].rstrip("_") in k:
        return parts[-1]
    return parts[0] if len(parts) == 2 else parts[-1]


def _functional_to_aten(f: str, depth: int = 0) -> set[str]:
    idx = _idx()
    if f in T.FUNCTIONAL_TO_ATEN and depth < 4:
        out = set()
        for t in _split(T.FUNCTIONAL_TO_ATEN[f][0]):
            out |= _functional_to_aten(t[1:], depth + 1) if t.startswith("@") else {t}
        return out
    if f in idx["aten"]:
        return {f}
    hits = idx["sq_aten"].get(squash(f))
    return set(hits) if hits else {f}


def _close_aliases(names: Iterable[str]) -> set[str]:
    idx = _idx()
    out = set()
    for b in names:
        out.add(b)
        out |= idx["alias"].get(b, frozenset())
    for b in list(out):
        r = idx["roots"].get(b)
        if r:
            out.add(r)
            out |= idx["alias"].get(r, frozenset())
    return out


def _aten(name: str) -> frozenset[str]:
    idx = _idx()
    s, functional = _parse_torch(name)
    if not s:
        return frozenset({_fallback(name)})
    if s in T.OPERATOR_FUNCS:
        base = set(_split(T.OPERATOR_FUNCS[s][0]))
    elif functional or s not in idx["aten"]:
        base = _functional_to_aten(s)
        if base == {s} and s not in idx["known"]:
            base = {s.lower()}
    else:
        base = {s}
    return frozenset(_close_aliases(base))


# -- torch.nn modules ----------------------------------------------------------------------------------------

def _module_targets(cls: str) -> set[str]:
    idx = _idx()
    if cls in T.MODULE_EXCEPTIONS:
        out = set()
        for t in _split(T.MODULE_EXCEPTIONS[cls][0]):
            out |= _functional_to_aten(t[1:]) if t.startswith("@") else {t}
        return out
    bare = cls[4:] if cls.startswith("Lazy") and cls[4:5].isupper() else cls
    low = bare.lower()
    stages = [[low] + ([low[:-4]] if low.endswith("loss") else [])]  # CrossEntropyLoss: cross_entropy(_loss)
    m = re.fullmatch(r"(.+?)[123]d", low)
    if m:
        stages.append([m.group(1)])  # BatchNorm2d -> batch_norm, Softmax2d -> softmax
    for stage in stages:
        out: set[str] = set()
        for c in stage:
            hit = idx["sq_fn"].get(c)  # prefer the functional: Unfold is F.unfold (im2col), not Tensor.unfold
            if hit:
                out |= set().union(*(_functional_to_aten(f) for f in hit))
            elif idx["sq_aten"].get(c):
                out |= idx["sq_aten"][c]
        if out:
            return out
    return {snake(bare)}


@functools.lru_cache(maxsize=None)
def module_map() -> dict[str, frozenset[str]]:
    """Every torch.nn module class -> its canonical set (the derived module -> functional table)."""
    return {cls: _module(cls) for cls in _idx()["tables"].get("modules", ())}


def _module(name: str) -> frozenset[str]:
    s = name.strip()
    if "::" in s:
        s = s.split("::", 1)[1]
    cls = s.split(".")[-1]
    return frozenset(_close_aliases(_module_targets(cls)))


# -- foreign vocabularies (ONNX, TF, TFLite, keras) ----------------------------------------------------------

def _lookup(s: str) -> set[str] | None:
    """A snake name among the torch names: exact, underscore-insensitive, dimension-expanded or -stripped."""
    idx = _idx()
    if not s:
        return None
    if s in idx["known"]:
        return _functional_to_aten(s)
    q = squash(s)
    hit = idx["sq_aten"].get(q) or idx["sq_fn"].get(q)
    if hit:
        return set().union(*(_functional_to_aten(h) for h in hit))
    dims = {f"{s}{d}d" for d in (1, 2, 3)} & idx["known"]
    if dims:
        return set().union(*(_functional_to_aten(h) for h in dims))
    m = re.fullmatch(r"(.+?)_?[123]d", s)
    if m and m.group(1) in idx["known"]:
        return _functional_to_aten(m.group(1))
    return None


def _foreign(snake: str) -> tuple[set[str], bool]:
    """Resolve a snake-cased foreign name: (canonical names, resolved?). Unresolved: the normalised name."""
    rewritten = rewrite(snake)
    for key in (snake, rewritten):
        if key in T.FOREIGN:
            return set(_split(T.FOREIGN[key][0])), True
    if snake in T.OPERATOR_FUNCS:  # tf.math.truediv, floordiv
        return set(_split(T.OPERATOR_FUNCS[snake][0])), True
    for key in (rewritten, snake):
        hit = _lookup(key)
        if hit:
            return hit, True
    return {rewritten}, False


def _targets(spec: str, resolve) -> set[str]:
    out = set()
    for t in _split(spec):
        out |= set(resolve(t[1:])) if t.startswith("@") else {t}
    return out


def _onnx(name: str) -> frozenset[str]:
    s = name.strip()
    domain = ""
    if "::" in s:
        domain, s = s.rsplit("::", 1)
    for p in ("onnx.", "ai.onnx.", "op."):
        if s.startswith(p):
            s = s[len(p):]
    if domain in ("", "onnx", "ai.onnx"):
        if s in T.ONNX:
            return frozenset(_close_aliases(_targets(T.ONNX[s][0], _onnx)))
        derived = set(_idx()["torchlib"].get(s, ()))
    else:
        derived = set()
    named, ok = _foreign(snake(s))
    out = derived | named if (ok or not derived) else derived
    return frozenset(_close_aliases(out))


def _tf(name: str) -> frozenset[str]:
    s = name.strip()
    for p in ("tf::", "tensorflow::", "tf.raw_ops.", "raw_ops.", "tf.compat.v1.", "tf.compat.v2."):
        if s.startswith(p):
            s = s[len(p):]
    if s.startswith(("tf.keras.", "keras.")):
        return _keras(s)
    if "." in s or s[:1].islower():  # python API name: tf.nn.avg_pool2d, tf.math.reduce_mean, bias_add
        snaked = snake(s.split(".")[-1])
    else:
        s = s.lstrip("_")
        for cand in (s, re.sub(r"V\d+$", "", s)):
            if cand in T.TF_RAW:
                return frozenset(_close_aliases(_split(T.TF_RAW[cand][0])))
        snaked = snake(re.sub(r"V\d+$", "", s))
    return frozenset(_close_aliases(_foreign(snaked)[0]))


def _tflite(name: str) -> frozenset[str]:
    s = name.strip()
    for p in ("tflite::", "tflite.BuiltinOperator.", "BuiltinOperator.", "tflite."):
        if s.startswith(p):
            s = s[len(p):]
    s = s.upper()
    for cand in (s, re.sub(r"_V\d+$", "", s)):  # versions of one op (TOPK_V2, REVERSE_V2), as TF's raw ops
        if cand in T.TFLITE:
            return frozenset(_close_aliases(_split(T.TFLITE[cand][0])))
    return frozenset(_close_aliases(_foreign(snake(re.sub(r"_V\d+$", "", s)))[0]))


def _keras(name: str) -> frozenset[str]:
    s = name.strip()
    if "::" in s:
        s = s.split("::", 1)[1]
    cls = s.split(".")[-1]
    cls = _idx()["tables"].get("keras", {}).get(cls, cls)  # exported alias -> class (AvgPool2D -> AveragePooling2D)
    if cls in T.KERAS:
        return frozenset(_close_aliases(_split(T.KERAS[cls][0])))
    return frozenset(_close_aliases(_foreign(snake(cls))[0]))


def _fallback(name: str) -> str:
    s = name.strip().split("::")[-1].split(".")[-1] or name.strip()
    return snake(s) or s.lower() or "?"


# -- guessing the namespace -----------------------------------------------------------------------------------

_RESOLVERS = {"aten": _aten, "torch.nn": _module, "onnx": _onnx, "tf": _tf, "tflite": _tflite, "keras": _keras}


def _guess(name: str) -> frozenset[str]:
    s = name.strip()
    if "::" in s:
        prefix = s.rsplit("::", 1)[0]
        ns = _PREFIX_NS.get(prefix)
        if ns is None and ("onnx" in prefix or prefix.startswith(("com.", "org.", "ai."))):
            ns = "onnx"
        if ns is not None:
            return _RESOLVERS[ns](s)
        return frozenset(_close_aliases(_foreign(snake(s.rsplit("::", 1)[1]))[0]))
    if s.startswith("torch.nn.modules.") or re.match(r"^(torch\.)?nn\.[A-Z]", s):
        return _module(s)
    if s.startswith(("tf.keras.", "keras.")):
        return _keras(s)
    if s.startswith("tf."):
        return _tf(s)
    if s.startswith(("tflite.", "BuiltinOperator.")):
        return _tflite(s)
    if s.startswith("op.") and s[3:4].isupper():
        return _onnx(s[3:])
    if s.startswith(tuple(p for p, _fn in _TORCH_PREFIXES if p.endswith(".") and p != "torch.")) \
            or s.startswith(("torch.ops.", "torch.special.", "torch.linalg.", "torch.fft.")):
        return _aten(s)
    if "." in s and s.split(".")[0].rstrip("_") in _idx()["known"]:
        return _aten(s)  # an overload: add.Tensor, div.Tensor_mode
    if "." in s and s.rsplit(".", 1)[1][:1].isupper():  # a dotted path to a class
        path, cls = s.rsplit(".", 1)
        if path.startswith(("torch", "nn")):
            return _module(s)
        if "onnx" in path:
            return _onnx(cls)
        return frozenset(_close_aliases(_foreign(snake(cls))[0]))
    if "." in s or s[:1].islower() or s[:1] == "_":
        return _aten(s)
    if not s:
        return frozenset({"?"})
    # a bare CamelCase / UPPER name: every vocabulary that knows it
    voc = vocabulary()
    found = [ns for ns in ("torch.nn", "onnx", "keras", "tf", "tflite") if s in voc.get(ns, ())]
    if found:
        return frozenset().union(*(_RESOLVERS[ns](s) for ns in found))
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", s) and "_" in s:
        return _tflite(s)
    return frozenset(_close_aliases(_foreign(snake(s))[0]))


# -- public API -----------------------------------------------------------------------------------------------

_TORCHISH_NAMESPACES = frozenset({"prim", "prims", "_operator", "operator", "python", "quantized",
                                  "quantized_decomposed", "torchvision", "inductor_prims", "_c10d_functional"})


def _namespace(namespace) -> tuple[str | None, str | None]:
    """(resolver namespace or None to guess, ONNX domain to prefix). Profiles pass their repository's own
    spellings (ONNX domains, ``prim``, ``tensorflow_lite``, ...): anything unrecognised means "guess"."""
    if namespace is None:
        return None, None
    if not isinstance(namespace, str):
        raise TypeError(f"namespace must be a string or None, not {type(namespace).__name__}")
    k = namespace.strip().lower()
    if k in _NS_ALIASES:
        return _NS_ALIASES[k], None
    if "onnx" in k or k.startswith(("com.", "org.", "ai.")) or k == "mmdeploy":
        return "onnx", namespace.strip()
    if k in _TORCHISH_NAMESPACES:
        return "aten", None
    if k in ("tensorflow_lite", "tensorflow.lite", "lite"):
        return "tflite", None
    return None, None


@functools.lru_cache(maxsize=65536)
def canonical(name: str, namespace: str | None = None) -> frozenset[str]:
    """Canonical ids (aten-style snake names) that ``name`` denotes in ``namespace``.

    ``namespace``: ``aten``/``torch``, ``torch.nn``, ``onnx``, ``tf``, ``tflite``, ``keras`` or ``None``/``"any"``
    (guessed from the name's form); an ONNX domain (``com.microsoft``, ``ai.onnx.ml``) means ``onnx`` in that
    domain, torch-side namespaces (``prim``, ``_operator``, ``quantized``) mean ``aten``, anything else is
    guessed. An explicit ``ns::`` prefix (``onnx::Conv``, ``nn::Conv2d``) always wins. Never raises for string
    arguments; an unknown name gives its normalised snake form.
    """
    if not isinstance(name, str):
        raise TypeError(f"operator name must be a string, not {type(name).__name__}")
    ns, domain = _namespace(namespace)
    s = name.strip()
    if domain and "::" not in s and s:
        s = f"{domain}::{s}"  # an ONNX domain given as the namespace: com.microsoft, ai.onnx.ml
    if ns is None or "::" in s:
        out = _guess(s)
    elif ns == "aten" and (s[:1].isupper() or re.match(r"^(torch\.)?nn\.[A-Z]", s)):
        out = _guess(s)  # a class name passed as a torch name
    else:
        out = _RESOLVERS[ns](s)
    if "" in out or not out:  # nothing name-like in it ("!!", "::")
        out = (out - {""}) or frozenset({re.sub(r"\W+", "_", s).strip("_").lower() or "?"})
    return out


@functools.lru_cache(maxsize=65536)
def instance_ops(op: str) -> frozenset[str]:
    """Everything an instance with id ``op`` (``aten::elu``, ``nn::AvgPool2d``, ``onnx::AveragePool``,
    ``keras::Conv2D``) exercises: its canonical set closed under families, lowering and aliases."""
    idx = _idx()
    out = set(canonical(op))
    todo = list(out)
    while todo:
        n = todo.pop()
        more = set(idx["families"].get(idx["roots"].get(n, n), ()))
        more |= idx["alias"].get(n, frozenset())
        if n in T.LOWERING:
            more |= set(_split(T.LOWERING[n][0]))
        elif n.startswith("masked_") and n not in idx["aten"] and n[7:] in idx["known"]:
            more.add(n[7:])  # torch.masked.amax & co. run amax on a where-masked input
        for m in more - out:
            out.add(m)
            todo.append(m)
    return frozenset(out)


def select(instances, canonical_ops: set[str]) -> list:
    """The instances (objects with ``.op``; plain op strings also work) whose ``instance_ops`` meet
    ``canonical_ops``, in their original order. A non-canonical spelling among ``canonical_ops``
    (``aten::add``, ``add.Tensor``, a framework's own ``ReduceMax``) is canonicalised first rather than silently
    matching nothing."""
    ops = frozenset(x for o in canonical_ops for x in ((o,) if "::" not in o and "." not in o and o.islower()
                                                       else {o} | set(canonical(o))))
    if not ops:
        return []
    return [i for i in instances if not instance_ops(getattr(i, "op", i)).isdisjoint(ops)]


@functools.lru_cache(maxsize=1)
def _vocabulary() -> dict[str, frozenset[str]]:
    t = _idx()["tables"]
    voc = {
        "aten": frozenset(t.get("aten", ())),
        "torch.nn.functional": frozenset(t.get("functional", ())),
        "torch.nn": frozenset(t.get("modules", ())),
        "onnx": frozenset(t.get("onnx", ())),
        "tf": frozenset(t.get("tf", ())),
        "tflite": frozenset(t.get("tflite", ())),
        "keras": frozenset(t.get("keras", {})),
    }
    return {k: v for k, v in voc.items() if v}


def vocabulary() -> dict[str, frozenset[str]]:
    """Namespace -> the operator names known there, in that namespace's own spelling (``aten``: operator
    packets; ``torch.nn.functional``; ``torch.nn``: module classes; ``onnx``: schema op types, other domains as
    ``domain::Op``; ``tf``: raw ops; ``tflite``: builtin operators; ``keras``: exported layer names). A namespace
    whose package is not installed is absent."""
    return dict(_vocabulary())
