"""The directed search's mutation operators: one registry, each operator small and declarative.

A mutation takes any instance (a migrated one, a variant, an earlier mutant) and gives new instances that present
the operator another way the operator's schema allows. Two kinds:

- the variant sources' rewrites (dlci.sources.{torch,onnx,tflite}_variants: arguments by name or by position,
  defaults left out or written, dynamic dims, inputs as initializers or Constant nodes, older opsets, optional
  inputs absent, low-precision dtypes...), applied here to whatever instance comes, so that they compose;
- rewrites that change what is computed, checked by the framework's own reference (the call must run eagerly):
  negative dims, a per-axis tuple of distinct values for a scalar setting and back, size-1 and size-0 dims, rank
  0, every dtype the operator runs in, one input in another dtype than the others;
- an ONNX model's integer input (a shape, axes, pads) computed in the graph by Shape/Gather/Concat from another
  input, the way exporters write it: the same values, which the converter can no longer read off the model.

``reads``: the words in a converter's changed code that make a mutation a first choice (code that reads ``axis``
asks for negative dims; code that reads ``dtype`` for other dtypes; ``opset``/``_impl_v`` for older versions).
"""
from __future__ import annotations

import copy
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec


@dataclass(frozen=True)
class Mutation:
    name: str
    framework: str
    reads: tuple[str, ...]
    candidates: Callable[[Instance], Iterator[Any]]   # payloads, before validation
    build: Callable[[Instance, Any], Instance]        # the mutant; ValueError when it is not a valid case

    def apply(self, inst: Instance, limit: int = 4, *, rng=None, skip=frozenset(), prefer: str = "") \
            -> list[Instance]:
        """Up to ``limit`` valid mutants of ``inst``, in the candidates' order, or with ``rng`` in a random order
        with the payloads that name a word of ``prefer`` first (``int64`` where the changed code says ``TInt``); a
        mutant whose id is in ``skip`` (already run) does not count."""
        out = []
        try:
            payloads = list(self.candidates(inst))
        except Exception:  # noqa: BLE001 - an instance this mutation cannot read
            return []
        if rng is not None and payloads:
            payloads = [payloads[i] for i in rng.permutation(len(payloads))]
            if prefer:
                said, typed = set(re.findall(r"[a-z]+", prefer.lower())) - _PLAIN, dtype_hints(prefer)

                def score(payload) -> int:
                    words = set(re.findall(r"[a-z]+", str(payload).lower()))
                    return 2 * len(words & typed) + len(words & said)
                payloads.sort(key=lambda p: -score(p))
        for payload in payloads:
            if len(out) >= limit:
                break
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = self.build(inst, payload)
            except Exception:  # noqa: BLE001 - not a valid case of the operator: the schema said no
                continue
            if m is not None and m.id != inst.id and m.id not in skip:
                out.append(m)
        return out


# what a converter's signature says of the element types it is for: a function registered for complex inputs,
# one typed for ints (torchlib's TInt), for floats, for booleans
_DTYPE_HINTS = ((re.compile(r"complex\s*=\s*True|\bcomplex\d*\b"), "complex"), (re.compile(r"\bT(Int|Real)\w*"), "int"),
                (re.compile(r"\bTFloat\w*"), "float"), (re.compile(r"\bT?Bool\w*|\bBOOL\b"), "bool"))


def dtype_hints(code: str) -> set[str]:
    """The element-type families ``code`` declares a function for (``complex=True`` -> complex, ``TInt`` -> int)."""
    return {family for pattern, family in _DTYPE_HINTS if pattern.search(code)}


# words of a payload too common in code to say anything about it
_PLAIN = frozenset({"all", "one", "the", "in", "as", "input", "inputs", "none", "true", "false", "dim", "self"})


MUTATIONS: dict[str, Mutation] = {}


def register(m: Mutation) -> Mutation:
    MUTATIONS[m.name] = m
    return m


def for_instance(inst: Instance) -> list[Mutation]:
    return [m for m in MUTATIONS.values() if m.framework == inst.framework]


def _mutant(inst: Instance, kind: str, detail: str, *, call: dict | None = None, arrays: dict | None = None,
            inputs: list | None = None, same_values: bool = False) -> Instance:
    """A mutant of ``inst`` named after what changed (its origin keeps the whole chain); ``same_values``: it
    computes what ``inst`` computes, so what ``inst`` expected still holds."""
    arrays = dict(inst.arrays if arrays is None else arrays)
    for k in [k for k in arrays if k.startswith("expected:") and not same_values]:
        arrays.pop(k)  # what the base expected no longer holds: the reference computes it again
    return Instance(op=inst.op, framework=inst.framework, call=copy.deepcopy(call if call is not None else inst.call),
                    inputs=list(inputs if inputs is not None else inst.inputs), params=dict(inst.params),
                    seed=inst.seed, arrays=arrays,
                    origin=Origin(inst.origin.source, f"{inst.origin.test} [{kind}: {detail}]", inst.origin.library))


def _checked_torch(m: Instance) -> Instance:
    """``m`` if eager PyTorch runs it with a result that is not all NaN/Inf (the framework's own reference says the
    schema allows it), else ValueError. The call runs in a worker of its own: a mutant whose kernel kills its
    process (a division by zero in a size-0 case) or hangs is an invalid case, not the end of the scan."""
    verdict = _reference_checker().check(m)
    if verdict != "ok":
        raise ValueError(verdict)
    return m


def runs_eagerly(inst: Instance, stage_hook=None) -> dict:
    """In a worker: ``{"verdict": "ok"}`` if the framework's reference computes ``inst`` with a finite output, else
    why not."""
    from dlci.models.references import reference
    try:
        got = reference(inst)[0]
    except Exception as e:  # noqa: BLE001 - the schema said no
        return {"verdict": f"reference: {type(e).__name__}: {e}"[:500]}
    if got and all(g.dtype.kind in "fc" and g.size and not np.isfinite(g).any() for g in got):
        return {"verdict": "no finite output"}
    return {"verdict": "ok"}


class _ReferenceChecker:
    """One warm worker (dlci.exec) that runs the mutants' eager checks, started on the first and closed at exit."""
    def __init__(self, timeout_s: float = 15.0):
        self.timeout_s = timeout_s  # an eager call of a small case takes milliseconds
        self.engine = None
        self.count = 0

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def check(self, inst: Instance) -> str:
        from dlci.exec import Engine, Job
        if self.engine is None:
            import atexit
            self.engine = Engine(workers=1, timeout=self.timeout_s, warm_imports=("torch", "dlci.models.references"))
            atexit.register(self.close)
        self.count += 1
        results: list[dict] = []
        self.engine.run([Job(f"mutant-check-{self.count}", "dlci.directed.mutations:runs_eagerly", (inst,),
                             instance_id=inst.id, op=inst.op)], lambda _job, r: results.append(r))
        if not results:
            return "not checked (interrupted)"
        if "verdict" in results[0]:
            return results[0]["verdict"]
        # the worker died or timed out on it: the engine's crash outcome says how
        return f"the eager call {results[0].get('status', 'failed')}: {results[0].get('symptom', '')}"[:500]


_CHECKER: _ReferenceChecker | None = None


def _reference_checker() -> _ReferenceChecker:
    global _CHECKER
    if _CHECKER is None:
        _CHECKER = _ReferenceChecker()
    return _CHECKER


# -- the variant sources' rewrites, as mutations ------------------------------------------------------------------

_VARIANT_READS = {
    "keywords": ("kwargs", "args[", "node.args", "get(", "kwargs.get"),
    "positional": ("args[", "node.args", "len(node.args", "len(args"),
    "defaults_omitted": ("None", "default", "get(", "is None", "len(node.args", "kwargs.get"),
    "defaults_explicit": ("None", "default", "overload", "kwargs"),
    "dynamic_batch": ("SymInt", "sym", "dynamic", "tir.Var", "shape_var", "ShapeExpr", "PrimExpr", "Any"),
    "dynamic_dims": ("SymInt", "sym", "dynamic", "tir.Var", "shape_var", "ShapeExpr", "PrimExpr", "Any"),
    "scalar_operand": ("scalar", "Scalar", "isinstance", "float", "int", "const", "promote"),
    "dtype": ("dtype", "float16", "bfloat16", "astype", "cast", "Cast"),
    "initializer": ("Constant", "const", "get_constant", "GenericConst", "initializer", "params", "numpy()"),
    "constant_node": ("Constant", "const", "get_constant", "GenericConst"),
    "all_initializers": ("Constant", "const", "fold", "get_constant"),
    "exported_params": ("keep_params", "params", "Var", "initializer"),
    "opset": ("opset", "_impl_v", "version", "since"),
    "symbolic_batch": ("dim_param", "symbolic", "tir.Var", "shape_var", "Any", "dynamic"),
    "symbolic_dims": ("dim_param", "symbolic", "tir.Var", "shape_var", "Any", "dynamic"),
    "optional_absent": ("None", "len(inputs", "optional", "is None", "inputs["),
    "attribute_default": ("attr", "get(", "default", "None"),
    "rank": ("ndim", "rank", "len(", "shape", "axes"),
}


def _variant_mutations() -> None:
    from dlci import sources
    from dlci.sources.variant_base import VariantSource
    sources._import_builtin_sources()
    for cls in list(sources.SOURCES.values()):
        if not (isinstance(cls, type) and issubclass(cls, VariantSource)):
            continue
        src = cls()
        for kind in cls.kinds:
            def candidates(inst, src=src, kind=kind):
                if not src.accepts(inst):
                    return
                for k, payload in src.candidates(inst):
                    if k == kind:
                        yield payload

            def build(inst, payload, src=src, kind=kind):
                v = src.build(inst, kind, payload)
                # a variant source names its variants as its own; a mutant keeps its base's source and chain
                return Instance(op=v.op, framework=v.framework, call=v.call, inputs=v.inputs, params=v.params,
                                seed=v.seed, arrays=v.arrays, origin=Origin(
                                    inst.origin.source, inst.origin.test + v.origin.test[v.origin.test.rfind(" ["):],
                                    inst.origin.library))
            register(Mutation(f"{cls.framework}.{kind}", cls.framework, _VARIANT_READS.get(kind, ()), candidates,
                              build))


# -- torch: rewrites that change what is computed ------------------------------------------------------------------

_DIM_NAMES = {"dim", "dims", "dimension", "axis", "axes", "start_dim", "end_dim", "dim0", "dim1", "source", "destination"}
_PER_AXIS = {"stride", "padding", "dilation", "kernel_size", "output_padding", "output_size", "size",
             "scale_factor", "shifts"}
_DTYPES = ("float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool", "complex64")


def _torch_params(inst: Instance) -> list[dict]:
    from dlci.reduce._introspect import torch_fn_params
    try:
        return torch_fn_params(inst.call["fn"], list(inst.call.get("args", []))) or []
    except Exception:  # noqa: BLE001
        return []


def _named_args(inst: Instance) -> list[tuple[str, Any, str]]:
    """(parameter name, value, where: "arg<i>" | "kw:<name>") of a torch_fn call's non-tensor arguments."""
    params = _torch_params(inst)
    out = []
    for i, v in enumerate(inst.call.get("args", [])):
        if i and not (isinstance(v, dict) and "$t" in v):
            out.append((params[i]["name"] if i < len(params) else f"arg{i}", v, f"arg{i}"))
    for k, v in inst.call.get("kwargs", {}).items():
        if not (isinstance(v, dict) and "$t" in v):
            out.append((k, v, f"kw:{k}"))
    return out


def _with_value(call: dict, where: str, value) -> dict:
    call = copy.deepcopy(call)
    if where.startswith("arg"):
        call["args"][int(where[3:])] = value
    else:
        call.setdefault("kwargs", {})[where[3:]] = value
    return call


def _first_rank(inst: Instance) -> int:
    return len(inst.inputs[0].shape) if inst.inputs else 0


def _torch_fn(inst: Instance) -> bool:
    return inst.call.get("kind") == "torch_fn"


def _negative_dims(inst: Instance):
    if not _torch_fn(inst):
        return
    rank = _first_rank(inst)
    for name, v, where in _named_args(inst):
        if name not in _DIM_NAMES or not rank:
            continue
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < rank:
            yield where, v - rank
        elif isinstance(v, list) and v and all(isinstance(x, int) and 0 <= x < rank for x in v):
            yield where, [x - rank for x in v]


def _per_axis(inst: Instance):
    if not _torch_fn(inst):
        return
    spatial = max(1, _first_rank(inst) - 2)
    for name, v, where in _named_args(inst):
        if name not in _PER_AXIS:
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            yield where, [v + i for i in range(spatial)] if spatial > 1 else [v]  # distinct values per axis
            if spatial > 1:
                yield where, [v] * spatial
        elif isinstance(v, list) and v and len(set(map(str, v))) == 1 and isinstance(v[0], int):
            yield where, v[0]  # the uniform tuple as the scalar it stands for
        elif isinstance(v, list) and len(v) > 1 and all(isinstance(x, int) for x in v):
            yield where, list(reversed(v)) if len(set(v)) > 1 else [v[0] + i for i in range(len(v))]


def _set_value(inst: Instance, payload) -> Instance:
    where, value = payload
    return _checked_torch(_mutant(inst, "value", f"{where[3:] if where.startswith('kw:') else where}={value!r}",
                                  call=_with_value(inst.call, where, value)))


def _non_defaults(inst: Instance):
    """Keyword arguments set to something else than their parameter's default: each left out (the default then
    applies: ``max_pool2d(ceil_mode=True)`` becomes plain ``max_pool2d``, the path most callers take)."""
    if not _torch_fn(inst):
        return
    from dlci.sources.torch_variants import _defaults
    defaults = _defaults(inst.call["fn"]) or _schema_defaults(inst.op)
    for name, value in inst.call.get("kwargs", {}).items():
        if name in defaults and not (isinstance(value, dict) and "$t" in value) and value != defaults[name]:
            yield name


def _schema_defaults(op: str) -> dict:
    """Plain defaults of the ATen operator's overloads (F.max_pool2d is a dispatch wrapper without a signature):
    a name whose overloads disagree on its default has none."""
    import torch
    out: dict = {}
    try:
        schemas = torch._C._jit_get_schemas_for_operator(op) if op.startswith("aten::") else []
    except RuntimeError:
        return {}
    for schema in schemas:
        for a in schema.arguments:
            if a.has_default_value() and isinstance(a.default_value, (bool, int, float, type(None))):
                out[a.name] = a.default_value if out.get(a.name, a.default_value) == a.default_value else ...
    return {k: v for k, v in out.items() if v is not ...}


def _without_kwarg(inst: Instance, name: str) -> Instance:
    from dlci.instance.recipe import params_of
    call = copy.deepcopy(inst.call)
    call["kwargs"].pop(name)
    m = _mutant(inst, "value", f"{name} left to its default", call=call)
    m.params = params_of(call.get("args", []), call["kwargs"])
    m.id = m.compute_id()
    return _checked_torch(m)


def _shaped(inst: Instance, fn: Callable[[np.ndarray], np.ndarray | None], kind: str, detail: str,
            only: int | None = None) -> Instance:
    """The mutant whose inputs are ``fn`` of the instance's (None: that input unchanged; ``only``: input ``only``
    alone), checked by eager PyTorch."""
    arrays, inputs = dict(inst.arrays), []
    changed = False
    for i, a in enumerate(inst.input_arrays()):
        b = fn(a) if only is None or i == only else None
        if b is not None:
            arrays[f"in:{i}"], changed = np.ascontiguousarray(b), True
        inputs.append(TensorSpec.of(arrays[f"in:{i}"]))
    if not changed:
        raise ValueError("nothing to reshape")
    return _checked_torch(_mutant(inst, kind, detail, arrays=arrays, inputs=inputs))


def _dims_to_cut(inst: Instance):
    if not (_torch_fn(inst) or inst.framework == "torch") or not inst.inputs:
        return
    shape = inst.inputs[0].shape
    for d, n in enumerate(shape):
        if n > 1:
            yield d


def _cut(size: int):
    def build(inst: Instance, d: int) -> Instance:
        first = tuple(inst.inputs[0].shape)

        def fn(a):  # every input shaped like the first is cut the same way (elementwise partners stay aligned)
            return a.take(range(size), axis=d) if a.ndim > d and tuple(a.shape) == first else None
        return _shaped(inst, fn, f"size_{size}", f"dim {d} of the inputs shaped {list(first)} cut to {size}")
    return build


def _rank_zero_candidates(inst: Instance):
    if inst.framework == "torch" and inst.inputs and any(s.shape for s in inst.inputs):
        yield 0


def _rank_zero(inst: Instance, _payload) -> Instance:
    return _shaped(inst, lambda a: np.asarray(a.reshape(-1)[0] if a.size else np.zeros((), a.dtype)) if a.ndim
                   else None, "rank_0", "every input as a rank-0 tensor of its first element")


def _broadcasting(inst: Instance):
    """(input, dim) whose size set to 1 makes that input broadcast against another input of the same rank (a mask
    or a weight shaped like the data but for one dim)."""
    if inst.framework != "torch" or len(inst.inputs) < 2:
        return
    for i, spec in enumerate(inst.inputs):
        partners = [s for j, s in enumerate(inst.inputs) if j != i and len(s.shape) == len(spec.shape)]
        for d, n in enumerate(spec.shape):
            if n > 1 and any(p.shape[d] == n for p in partners):
                yield i, d


def _broadcast(inst: Instance, payload) -> Instance:
    i, d = payload
    return _shaped(inst, lambda a: a.take([0], axis=d), "broadcast", f"input {i}'s dim {d} as 1 (it broadcasts)",
                   only=i)


def _batch_candidates(inst: Instance):
    if inst.framework == "torch" and inst.inputs and len(inst.inputs[0].shape) >= 2:
        yield "drop"
    if inst.framework == "torch" and inst.inputs and inst.inputs[0].shape:
        yield "add"


def _batch(inst: Instance, how: str) -> Instance:
    """The inputs shaped like the first without their leading (batch) dim, or with one more of size 1 in front:
    an unbatched input (pooling and convolutions take one), or a batch the samples never had."""
    first = tuple(inst.inputs[0].shape)

    def fn(a):
        if tuple(a.shape) != first:
            return None
        return a[0] if how == "drop" else a[None]
    return _shaped(inst, fn, "unbatched" if how == "drop" else "batched",
                   f"the inputs shaped {list(first)} {'without their leading dim' if how == 'drop' else 'with a '}"
                   + ("" if how == "drop" else "leading dim of 1"))


def _index_inputs(inst: Instance):
    """Integer inputs of rank 1 or more after the first: an index, which a 0-d tensor can also be."""
    if inst.framework != "torch":
        return
    for i, spec in enumerate(inst.inputs):
        if i and spec.shape and spec.dtype.startswith(("int", "uint")):
            yield i


def _index_rank_0(inst: Instance, i: int) -> Instance:
    return _shaped(inst, lambda a: np.asarray(a.reshape(-1)[0]), "rank_0_index", f"input {i} as a 0-d index",
                   only=i)


def _mask_candidates(inst: Instance):
    if inst.framework != "torch":
        return
    for i, spec in enumerate(inst.inputs):
        if spec.dtype == "bool" and spec.shape and all(n > 0 for n in spec.shape):
            yield i, "all True"
            yield i, "all False"
            if len(spec.shape) >= 2:
                yield i, "a row all False"


def _mask(inst: Instance, payload) -> Instance:
    i, how = payload

    def fn(a):
        if how == "all True":
            return np.ones_like(a)
        if how == "all False":
            return np.zeros_like(a)
        b = a.copy()
        b[0] = False
        return b
    return _shaped(inst, fn, "mask", f"input {i} {how}", only=i)


def _tensor_lists(inst: Instance):
    """Positions of list arguments holding two or more tensors (cat, stack, einsum's operands...)."""
    if not _torch_fn(inst):
        return
    for pos, arg in enumerate(inst.call.get("args", [])):
        if isinstance(arg, list) and sum(isinstance(x, dict) and "$t" in x for x in arg) >= 1:
            for at in ("front", "end"):
                yield pos, at


def _empty_among(inst: Instance, payload) -> Instance:
    """A (0,)-shaped tensor put among the list's tensors (torch.cat skips it, as legacy code relies on)."""
    pos, at = payload
    arrays, inputs = dict(inst.arrays), list(inst.inputs)
    first = next(x["$t"] for x in inst.call["args"][pos] if isinstance(x, dict) and "$t" in x)
    n = len(inputs)
    arrays[f"in:{n}"] = np.zeros((0,), dtype=inst.input_arrays()[first].dtype)
    inputs.append(TensorSpec.of(arrays[f"in:{n}"]))
    call = copy.deepcopy(inst.call)
    lst = call["args"][pos]
    lst.insert(0 if at == "front" else len(lst), {"$t": n})
    return _checked_torch(_mutant(inst, "empty_among", f"a (0,) tensor at the {at} of argument {pos}", call=call,
                                  arrays=arrays, inputs=inputs))


def _size_lists(inst: Instance):
    """(where, index, input dim): a size list argument (view's size, reshape's shape, unflatten's sizes...) whose
    entry ``index`` becomes 0 while the first input's dim ``input dim`` is emptied, another position, so that a
    0 read as "keep the input's dim" (ONNX Reshape without allowzero) gives another shape than torch's empty one."""
    if not _torch_fn(inst) or not inst.inputs:
        return
    shape = inst.inputs[0].shape
    for _name, v, where in _named_args(inst):
        if not (isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            continue
        for i, x in enumerate(v):
            if x in (0, -1):
                continue
            for d, n in enumerate(shape):
                if n > 1 and d != i:
                    yield where, i, d
                    break


def _zero_in_size(inst: Instance, payload) -> Instance:
    from dlci.instance.recipe import params_of
    where, i, d = payload
    call = inst.call
    sizes = list(call["args"][int(where[3:])] if where.startswith("arg") else call["kwargs"][where[3:]])
    sizes = [1 if x == -1 else x for x in sizes]  # -1 cannot be inferred from 0 elements
    sizes[i] = 0
    arrays, inputs = dict(inst.arrays), list(inst.inputs)
    arrays["in:0"] = np.ascontiguousarray(inst.input_arrays()[0].take(range(0), axis=d))
    inputs[0] = TensorSpec.of(arrays["in:0"])
    call = _with_value(call, where, sizes)
    m = _mutant(inst, "zero_in_size", f"input 0 emptied along dim {d}, {sizes} for {where}", call=call,
                arrays=arrays, inputs=inputs)
    m.params = params_of(call.get("args", []), call.get("kwargs", {}))
    m.id = m.compute_id()
    return _checked_torch(m)


def _later_tensor_args(inst: Instance):
    """Positional tensor arguments after the first (the second operand of a binary op)."""
    if not _torch_fn(inst):
        return
    for pos, arg in enumerate(inst.call.get("args", [])):
        if pos and isinstance(arg, dict) and "$t" in arg and len(arg) == 1 and inst.inputs[arg["$t"]].dtype in (
                "float32", "float64", "int64", "int32", "bool"):
            yield pos


def _as_python_number(inst: Instance, pos: int) -> Instance:
    """The tensor argument at ``pos`` passed as a Python number (its first element) instead: a scalar operand
    where the samples always pass a tensor."""
    from dlci.sources.torch_variants import _renumber, _without_input
    j = inst.call["args"][pos]["$t"]
    a = inst.input_arrays()[j]
    value = a.reshape(-1)[0].item() if a.size else 0
    args = [_renumber(x, j) for x in inst.call["args"]]
    args[pos] = value
    call = {**inst.call, "args": args, "kwargs": _renumber(dict(inst.call.get("kwargs", {})), j)}
    arrays, inputs = _without_input(inst, j, None, -1)
    return _checked_torch(_mutant(inst, "python_scalar", f"argument {pos} as the Python number {value!r}",
                                  call=call, arrays=arrays, inputs=inputs))


def _absent_options(inst: Instance):
    """Optional parameters of the operator's schema the call leaves out, with values other than their default: a
    keyword the samples never pass (a dtype, keepdim, a flag)."""
    if not _torch_fn(inst) or not inst.op.startswith("aten::"):
        return
    import torch
    given = set(inst.call.get("kwargs", {})) | {p["name"] for p in _torch_params(inst)[:len(inst.call.get("args",
                                                                                                        []))]}
    try:
        schemas = torch._C._jit_get_schemas_for_operator(inst.op)
    except RuntimeError:
        return
    seen = set()
    for schema in schemas:
        for a in schema.arguments:
            if a.name in given or a.name in seen or not a.has_default_value():
                continue
            seen.add(a.name)
            kind, default = str(a.type), a.default_value
            if kind == "bool":
                yield a.name, not default
            elif a.name == "dtype":
                for dt in ("float64", "float32", "int64"):
                    yield a.name, {"$dtype": dt}
            elif kind in ("int", "int?") and a.name in _DIM_NAMES:
                for v in (0, -1):
                    if v != default:
                        yield a.name, v


def _with_option_value(inst: Instance, payload) -> Instance:
    from dlci.instance.recipe import params_of
    name, value = payload
    call = copy.deepcopy(inst.call)
    call.setdefault("kwargs", {})[name] = value
    m = _mutant(inst, "keyword", f"{name}={value!r}", call=call)
    m.params = params_of(call.get("args", []), call["kwargs"])
    m.id = m.compute_id()
    return _checked_torch(m)


def _np_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(name)


def _cast(a: np.ndarray, name: str) -> np.ndarray:
    t = _np_dtype(name)
    if name == "bool":
        return a != 0
    if name.startswith(("int", "uint")):
        info = np.iinfo(t)
        return np.clip(np.round(np.nan_to_num(a.astype(np.float64))), info.min, info.max).astype(t)
    return a.astype(t)


def _dtype_candidates(inst: Instance):
    if inst.framework != "torch" or not inst.inputs:
        return
    have = {s.dtype for s in inst.inputs}
    for name in _DTYPES:
        if name not in have:
            yield ("all", name)
    if len(inst.inputs) > 1:  # mixed precision: the second tensor alone in another dtype (promotion in converters)
        for name in ("float16", "float64", "int64", "bool"):
            if inst.inputs[1].dtype != name:
                yield ("one", name)


def _dtype(inst: Instance, payload) -> Instance:
    which, name = payload
    arrays, inputs = dict(inst.arrays), []
    for i, a in enumerate(inst.input_arrays()):
        if which == "all" or i == 1:
            arrays[f"in:{i}"] = _cast(a, name)
        inputs.append(TensorSpec.of(arrays[f"in:{i}"]))
    detail = f"every input as {name}" if which == "all" else f"input 1 as {name}, the others as they were"
    return _checked_torch(_mutant(inst, "dtype_any", detail, arrays=arrays, inputs=inputs))


# -- ONNX: every type a schema's type constraint allows ---------------------------------------------------------------

_ONNX_NUMPY = {"float": "float32", "double": "float64", "float16": "float16", "bfloat16": "bfloat16",
               "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
               "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool"}


def _onnx_main(inst: Instance):
    """(model, the node the instance is about) of an ONNX model instance; (None, None) for any other."""
    if inst.call.get("kind") != "onnx_model":
        return None, None
    from dlci.models.onnx_io import load_onnx, main_node
    model = load_onnx(inst.arrays)
    return model, main_node(model, inst.op.split("::", 1)[-1].split(".")[0])


def _onnx_types(inst: Instance):
    """(type parameter, numpy dtype) pairs: each constraint of the main node's schema moved to another type it
    allows, for the graph inputs bound to it."""
    import onnx.defs
    model, node = _onnx_main(inst)
    if node is None:
        return
    try:
        schema = onnx.defs.get_schema(node.op_type, max(o.version for o in model.opset_import
                                                        if o.domain in ("", "ai.onnx")), node.domain)
    except Exception:  # noqa: BLE001 - a node of another domain
        return
    graph_inputs = {vi.name for vi in model.graph.input}
    for tc in schema.type_constraints:
        bound = [k for k, f in enumerate(schema.inputs) if f.type_str == tc.type_param_str]
        if not any(k < len(node.input) and node.input[k] in graph_inputs for k in bound):
            continue
        current = {inst.inputs[i].dtype for i, vi in enumerate(model.graph.input) if i < len(inst.inputs)}
        for t in tc.allowed_type_strs:
            name = _ONNX_NUMPY.get(t[len("tensor("):-1]) if t.startswith("tensor(") else None
            if name and name not in current:
                yield tc.type_param_str, name


def _onnx_retyped(inst: Instance, payload) -> Instance:
    import onnx
    import onnx.defs
    from dlci.models.onnx_io import load_onnx, main_node
    from dlci.sources.onnx_variants import validate, variant_instance
    param, name = payload
    model = load_onnx(inst.arrays)
    node = main_node(model, inst.op.split("::", 1)[-1].split(".")[0])
    schema = onnx.defs.get_schema(node.op_type, max(o.version for o in model.opset_import
                                                    if o.domain in ("", "ai.onnx")), node.domain)
    names = {node.input[k] for k, f in enumerate(schema.inputs) if f.type_str == param and k < len(node.input)}
    outs = {node.output[k] for k, f in enumerate(schema.outputs) if f.type_str == param and k < len(node.output)}
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(name)) if name != "bfloat16" else onnx.TensorProto.BFLOAT16
    arrays = inst.input_arrays()
    runtime = [vi for vi in model.graph.input if vi.name not in {t.name for t in model.graph.initializer}]
    new_arrays = []
    for vi, a in zip(runtime, arrays):
        if vi.name in names:
            vi.type.tensor_type.elem_type = elem
            a = _cast(a, name)
        new_arrays.append(a)
    for vi in model.graph.output:
        if vi.name in outs:
            vi.type.tensor_type.elem_type = elem
    expected = validate(inst, "input_types", model, new_arrays)
    v = variant_instance(inst, "input_types", f"{param} as {name}", model, new_arrays, expected)
    return Instance(op=v.op, framework=v.framework, call={**v.call, "variant": inst.call.get("variant")},
                    inputs=v.inputs, params=v.params, seed=v.seed, arrays=v.arrays,
                    origin=Origin(inst.origin.source, f"{inst.origin.test} [input_types: {param} as {name}]",
                                  inst.origin.library))


register(Mutation("onnx.input_types", "onnx", ("dtype", "elem_type", "astype", "cast", "Cast", "int", "bool",
                                               "float16", "tensor_type", "type"), _onnx_types, _onnx_retyped))


# -- ONNX: an integer input computed in the graph --------------------------------------------------------------------

def _computable(inst: Instance):
    """Names of the main node's small 1-D int64 inputs (shapes, axes, pads, repeats, sizes), fed at run time or as
    initializers, when another fed input has a shape that a ``Shape`` node can read."""
    from dlci.models.onnx_io import feed_names
    model, node = _onnx_main(inst)
    if node is None:
        return
    fed = dict(zip(feed_names(model), inst.input_arrays()))
    inits = {t.name: t for t in model.graph.initializer}
    for name in dict.fromkeys(node.input):
        a = fed.get(name)
        if a is None and name in inits:
            from onnx import numpy_helper
            a = numpy_helper.to_array(inits[name])
        if a is not None and a.dtype == np.int64 and a.ndim == 1 and 0 < a.size <= 8 and any(
                n != name and b.ndim >= 1 for n, b in fed.items()):
            yield name


def _computed(inst: Instance, name: str) -> Instance:
    """The mutant whose input ``name`` is no longer a value the converter can read off the model: a ``Concat`` of
    ``Gather``s from ``Shape`` of another fed input (for entries equal to one of its dims) and ``Constant``s, the
    way exporters write a reshape's target shape. Same values, so the base's expected outputs still hold."""
    from onnx import helper, numpy_helper
    from dlci.models.onnx_io import feed_names, load_onnx
    from dlci.sources.onnx_variants import validate, variant_instance
    model = load_onnx(inst.arrays)
    g = model.graph
    names = feed_names(model)
    fed = dict(zip(names, inst.input_arrays()))
    inits = {t.name: t for t in g.initializer}
    values = fed[name] if name in fed else numpy_helper.to_array(inits[name])
    src = next(n for n, b in fed.items() if n != name and b.ndim >= 1)
    dims = list(fed[src].shape)
    shape_out = f"{name}__shape"
    made = [helper.make_node("Shape", [src], [shape_out])]
    pieces, gathered = [], 0
    for j, v in enumerate(values.tolist()):
        piece = f"{name}__{j}"
        if v in dims:
            idx = f"{piece}__at"
            made.append(helper.make_node("Constant", [], [idx], value=numpy_helper.from_array(
                np.array([dims.index(v)], np.int64))))
            made.append(helper.make_node("Gather", [shape_out, idx], [piece], axis=0))
            gathered += 1
        else:
            made.append(helper.make_node("Constant", [], [piece], value=numpy_helper.from_array(
                np.array([v], np.int64))))
        pieces.append(piece)
    if not gathered:
        raise ValueError("no entry is a dim of another input")
    made.append(helper.make_node("Concat", pieces, [name], axis=0))
    if name in fed:
        g.input.remove(next(vi for vi in g.input if vi.name == name))
    else:
        g.initializer.remove(inits[name])
        for vi in [vi for vi in g.input if vi.name == name]:
            g.input.remove(vi)
    for n in reversed(made):
        g.node.insert(0, n)
    arrays = [a for n, a in fed.items() if n != name]
    expected = validate(inst, "computed", model, arrays)
    base_expected = inst.expected_arrays()
    if base_expected is not None:  # the same values: the outputs must not move
        if len(expected) != len(base_expected) or any(
                e.shape != b.shape or (b.dtype.kind in "biufc" and not np.allclose(e, b, equal_nan=True))
                for e, b in zip(expected, base_expected)):
            raise ValueError("computed:changed-outputs")
        expected = base_expected
    detail = f"{name} = Concat of Shape({src})[...] and constants"
    v = variant_instance(inst, "computed", detail, model, arrays, expected)
    return Instance(op=v.op, framework=v.framework, call={**v.call, "variant": inst.call.get("variant")},
                    inputs=v.inputs, params=dict(inst.params), seed=v.seed, arrays=v.arrays,
                    origin=Origin(inst.origin.source, f"{inst.origin.test} [computed: {detail}]",
                                  inst.origin.library))


register(Mutation("onnx.computed_input", "onnx", ("get_constant", "GenericConst", "Constant", "const", "numpy()",
                                                  "ShapeExpr", "shape", "dynamic", "isinstance", "Var", "PrimValue",
                                                  "int("), _computable, _computed))


# -- the targets' own entry-point options (dlci.targets.base.Target.options) ------------------------------------------

def _option_candidates(inst: Instance):
    from dlci.targets import registry
    have = inst.call.get("options") or {}
    for name, target in sorted(registry().items()):
        if inst.framework not in target.frameworks or not target.options or target.on_accelerator:
            continue
        for option, values in target.options.items():
            for value in values:
                if (have.get(name) or {}).get(option, object()) != value:
                    yield name, option, value


def _with_option(inst: Instance, payload) -> Instance:
    name, option, value = payload
    call = copy.deepcopy(inst.call)
    call.setdefault("options", {}).setdefault(name, {})[option] = value
    return _mutant(inst, "option", f"{name} with {option}={value!r}", call=call, same_values=True)


_OPTION_READS = ("decompos", "run_ep_decomposition", "keep_params", "params", "detach_params", "dynamic", "reshape",
                 "static", "PartialShape", "is_dynamic", "sym", "tir.Var", "Var", "initializer")
for _fw in ("torch", "onnx"):
    register(Mutation(f"{_fw}.target_option", _fw, _OPTION_READS, _option_candidates, _with_option))

register(Mutation("torch.negative_dim", "torch", ("dim", "axis", "axes", "< 0", "+ len", "ndim", "rank", "%"),
                  _negative_dims, _set_value))
register(Mutation("torch.default", "torch", ("default", "None", ".get(", "kwargs", "in node", "ceil_mode",
                                             "return_indices", "keepdim"), _non_defaults, _without_kwarg))
register(Mutation("torch.per_axis", "torch", ("stride", "padding", "dilation", "kernel", "ceil_mode", "isinstance",
                                              "tuple", "list", "len(", "[0]", "[1]"), _per_axis, _set_value))
register(Mutation("torch.size_1", "torch", ("== 1", "squeeze", "broadcast", "shape", "expand", "1)"),
                  _dims_to_cut, _cut(1)))
register(Mutation("torch.size_0", "torch", ("== 0", "empty", "numel", "size", "shape", "len("),
                  _dims_to_cut, _cut(0)))
register(Mutation("torch.rank_0", "torch", ("ndim", "rank", "len(", "shape", "scalar", "== 0", "[-1]"),
                  _rank_zero_candidates, _rank_zero))
register(Mutation("torch.dtype_any", "torch", ("dtype", "int", "bool", "float", "astype", "cast", "promote",
                                               "is_floating", "uint", "complex", "TInt", "TReal", "TFloat", "TBool"),
                  _dtype_candidates, _dtype))
# what a graph-building function's changed code decides on from shapes and values the samples seldom have
register(Mutation("torch.broadcast", "torch", ("broadcast", "expand", "shape", "== 1", "mask", "where", "rank",
                                               "len(", "Expand"), _broadcasting, _broadcast))
register(Mutation("torch.unbatched", "torch", ("batch", "unsqueeze", "squeeze", "len(", "rank", "ndim", "dim()",
                                               "== 3", "== 2", "Unsqueeze"), _batch_candidates, _batch))
register(Mutation("torch.rank_0_index", "torch", ("index", "indices", "rank", "len(", "shape", "== 0", "scalar",
                                                  "Gather", "ndim"), _index_inputs, _index_rank_0))
register(Mutation("torch.mask", "torch", ("mask", "where", "bool", "masked", "fill", "-inf", "Where", "all", "any"),
                  _mask_candidates, _mask))
register(Mutation("torch.empty_among", "torch", ("cat", "concat", "Concat", "empty", "numel", "size", "== 0",
                                                 "tensors", "for t in"), _tensor_lists, _empty_among))
register(Mutation("torch.zero_in_size", "torch", ("Reshape", "reshape", "view", "allowzero", "size", "shape", "sizes",
                                                  "== 0", "numel"), _size_lists, _zero_in_size))
register(Mutation("torch.python_scalar", "torch", ("scalar", "Scalar", "isinstance", "float", "int", "const",
                                                   "promote", "other"), _later_tensor_args, _as_python_number))
register(Mutation("torch.keyword", "torch", ("dtype", "keepdim", "kwargs", "None", "default", "if ", "is not None",
                                             "optional"), _absent_options, _with_option_value))
_variant_mutations()


def preference(mutation: Mutation, code: str) -> int:
    """How many of the mutation's words the (unreached, changed) code holds: its priority for that code."""
    return sum(1 for word in mutation.reads if word in code) + (2 if re.search(
        r"\b" + re.escape(mutation.name.split(".", 1)[1]) + r"\b", code) else 0)
