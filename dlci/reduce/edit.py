"""Building reduction candidates: new, self-consistent :class:`~dlci.instance.Instance` objects derived from an
instance by one edit (smaller inputs, simpler values, a parameter reset, an input dropped).

Every builder returns a fresh Instance (the one it starts from is never mutated) or None when the edit cannot be
expressed consistently for that recipe. What an edit keeps consistent:

- ``inputs`` specs and ``params`` are recomputed from the arrays and the recipe, so ``features()`` holds;
- ONNX models: graph input shapes follow the arrays, output shapes are re-inferred, and the node test's
  ``expected:*`` outputs are dropped (they belong to the original inputs; the reference is then recomputed by
  ``onnx.reference``);
- weights (``state:*``, ``weight:*``) are never resized: an edit they no longer fit is invalid, which the predicate
  reports as "not the same failure".
"""
from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.instance.recipe import has_tensor
from dlci.models.onnx_io import feed_names, load_onnx, main_node, store_onnx

WEIGHT_PREFIXES = ("state:", "weight:")


# -- measuring ---------------------------------------------------------------------------------------------

def n_inputs(inst: Instance) -> int:
    return len(inst.inputs)


def elements(inst: Instance) -> int:
    total = 0
    for spec in inst.inputs:
        n = 1
        for d in spec.shape:
            n *= int(d)
        total += n
    return total


def metrics(inst: Instance) -> dict:
    return {"elements": elements(inst), "inputs": len(inst.inputs), "params": len(inst.params),
            "rank_max": max((len(s.shape) for s in inst.inputs), default=0)}


# -- recipe helpers ----------------------------------------------------------------------------------------

def tensor_refs(v: Any) -> list[int]:
    if isinstance(v, dict):
        if "$t" in v:
            return [int(v["$t"])]
        return [i for x in v.values() for i in tensor_refs(x)]
    if isinstance(v, list):
        return [i for x in v for i in tensor_refs(x)]
    return []


def renumber(v: Any, removed: int) -> Any:
    """Encoded value with tensor slot ``removed`` gone: later slots move down by one."""
    if isinstance(v, dict):
        if "$t" in v:
            j = int(v["$t"])
            return {"$t": j - 1 if j > removed else j}
        return {k: renumber(x, removed) for k, x in v.items()}
    if isinstance(v, list):
        return [renumber(x, removed) for x in v]
    return v


def call_refs(call: dict) -> list[int]:
    """Every tensor slot the recipe refers to (torch: args/kwargs or forward args; keras: args)."""
    keys = ("forward_args", "forward_kwargs") if call.get("kind") == "torch_module" else ("args", "kwargs")
    return tensor_refs([call.get(k, [] if k.endswith("args") else {}) for k in keys])


from dlci.instance.recipe import keras_params as _keras_params  # noqa: E402


def params_for(inst_framework: str, call: dict, arrays: dict) -> dict:
    """The instance ``params`` of a recipe, computed as the sources compute them."""
    from dlci.instance.recipe import params_of
    kind = call.get("kind")
    if kind == "torch_fn":
        return params_of(call.get("args", []), call.get("kwargs", {}))
    if kind == "torch_module":
        params = params_of(call.get("args", []), call.get("kwargs", {}))
        params.update({f"forward.{n}": v for n, v in params_of(call.get("forward_args", []),
                                                               call.get("forward_kwargs", {})).items()})
        return params
    if kind == "keras_layer":
        return _keras_params(call.get("config", {}))
    if kind == "tf_fn":
        return {k: v for k, v in call.get("kwargs", {}).items() if not has_tensor(v)}
    if kind == "torch_graph":
        return {"operators": len(call.get("graph", {}).get("nodes", []))}
    if kind == "onnx_model":
        from dlci.instance.recipe import attribute_value
        model = load_onnx(arrays)
        node = main_node(model, None)
        return {a.name: attribute_value(a) for a in node.attribute} if node is not None else {}
    raise ValueError(f"unknown recipe kind {kind!r}")


# -- ONNX -------------------------------------------------------------------------------------------------

def _sync_onnx(arrays: dict, model=None) -> dict:
    """Graph input shapes from the input arrays, output shapes re-inferred, the stale expected outputs dropped."""
    import onnx
    model = load_onnx(arrays) if model is None else model
    inits = {i.name for i in model.graph.initializer}
    feeds = [vi for vi in model.graph.input if vi.name not in inits]
    for k, vi in enumerate(feeds):
        a = arrays.get(f"in:{k}")
        if a is None or not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        shape.ClearField("dim")
        for d in a.shape:
            shape.dim.add().dim_value = int(d)
    for out in model.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    del model.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        for out, inf in zip(model.graph.output, inferred.graph.output):
            if inf.type.HasField("tensor_type") and inf.type.tensor_type.HasField("shape"):
                out.type.tensor_type.shape.CopyFrom(inf.type.tensor_type.shape)
    except Exception:  # noqa: BLE001 - outputs stay without shape: every consumer infers them itself
        pass
    out = {k: v for k, v in arrays.items() if not k.startswith("expected:")}
    out["model"] = store_onnx(model)
    return out


# -- building a candidate -----------------------------------------------------------------------------------

def derive(original: Instance, base: Instance, *, call: dict | None = None, arrays: dict | None = None,
           onnx_model=None) -> Instance:
    """A new instance: ``base`` with a new recipe and/or arrays, specs and params recomputed, a fresh id derived
    from the original's (``<original id>-r<content hash>``)."""
    call = copy.deepcopy(base.call if call is None else call)
    arrays = dict(base.arrays if arrays is None else arrays)
    n = 0
    while f"in:{n}" in arrays:
        n += 1
    if any(k.startswith("in:") and not k[3:].isdigit() for k in arrays) or \
            sum(1 for k in arrays if k.startswith("in:")) != n:
        raise ValueError("input arrays are not numbered in:0..n-1")
    if base.framework == "onnx":
        arrays = _sync_onnx(arrays, onnx_model)
    arrays = {k: np.require(v, requirements="C") for k, v in arrays.items()}  # 0-d arrays stay 0-d
    inputs = [TensorSpec.of(arrays[f"in:{i}"]) for i in range(n)]
    params = params_for(base.framework, call, arrays)
    test = original.origin.test if original.origin.test.endswith(" (reduced)") else original.origin.test + " (reduced)"
    cand = Instance(op=base.op, framework=base.framework, call=call, inputs=inputs, params=params,
                    origin=Origin(original.origin.source, test, original.origin.library), seed=base.seed,
                    arrays=arrays, id="pending")
    content = cand.compute_id()
    cand.id = f"{original.id}-r{hashlib.sha1(content.encode()).hexdigest()[:8]}"
    return cand


def same_content(a: Instance, b: Instance) -> bool:
    return a.compute_id() == b.compute_id()


# -- shapes -------------------------------------------------------------------------------------------------

def resize(original: Instance, base: Instance, sizes: dict[tuple[int, int], int]) -> Instance | None:
    """Inputs sliced to new sizes ``{(input, axis): size}`` (the first elements are kept)."""
    arrays = dict(base.arrays)
    changed = False
    for (i, axis), size in sizes.items():
        a = arrays[f"in:{i}"]
        if axis >= a.ndim or size < 1 or size > a.shape[axis]:
            return None
        if size == a.shape[axis]:
            continue
        index = tuple(slice(None) if ax != axis else slice(0, size) for ax in range(a.ndim))
        arrays[f"in:{i}"] = a[index]
        changed = True
    if not changed:
        return None
    return derive(original, base, arrays=arrays)


def squeeze_leading(original: Instance, base: Instance, which: list[int]) -> Instance | None:
    """Inputs ``which`` with their leading axis of size 1 removed (one rank less)."""
    arrays = dict(base.arrays)
    for i in which:
        a = arrays[f"in:{i}"]
        if a.ndim == 0 or a.shape[0] != 1:
            return None
        arrays[f"in:{i}"] = a[0, ...]  # an array, 0-d when a was 1-d
    return derive(original, base, arrays=arrays)


# -- values -------------------------------------------------------------------------------------------------

def simpler_values(a: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Simpler replacements for an array, simplest first, same dtype and shape; then, when the array holds NaN or
    Inf, the same replacements with those special values kept in place."""
    a = np.asarray(a)
    kind = a.dtype.kind
    if a.size == 0 or kind not in "biuf":
        return []
    out: list[tuple[str, np.ndarray]] = []
    if kind == "b":
        out = [("all False", np.zeros_like(a)), ("all True", np.ones_like(a))]
    elif kind in "iu":
        out = [("zeros", np.zeros_like(a)), ("ones", np.ones_like(a))]
        if kind == "i":
            out.append(("signs", np.sign(a).astype(a.dtype)))
            out.append(("small integers", np.clip(a, -3, 3).astype(a.dtype)))
    else:
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(a)
            clean = np.where(finite, a, 0).astype(a.dtype)
            simple = [("zeros", np.zeros_like(a)), ("ones", np.ones_like(a)), ("minus ones", -np.ones_like(a)),
                      ("signs", np.sign(clean).astype(a.dtype)),
                      ("small integers", np.clip(np.round(clean), -3, 3).astype(a.dtype))]
        out = list(simple)
        if not finite.all():
            out += [(f"{name}, NaN/Inf kept", np.where(finite, v, a).astype(a.dtype)) for name, v in simple]
    seen: list[np.ndarray] = []
    result = []
    for name, v in out:
        if np.array_equal(v, a, equal_nan=kind == "f") or any(np.array_equal(v, s, equal_nan=kind == "f")
                                                              for s in seen):
            continue
        seen.append(v)
        result.append((name, v))
    return result


def with_array(original: Instance, base: Instance, name: str, value: np.ndarray) -> Instance:
    arrays = dict(base.arrays)
    arrays[name] = value
    return derive(original, base, arrays=arrays)


# -- parameters ---------------------------------------------------------------------------------------------

def name_positionals(call: dict, args_key: str, kwargs_key: str, params: list[dict] | None,
                     first: int) -> tuple[dict, list[str]] | None:
    """Move trailing positional arguments that have a default into keyword arguments (same call, but each can now
    be reset alone). Only non-tensor arguments at index >= ``first`` move. Returns (call, moved names) or None."""
    if not params:
        return None
    args = list(call.get(args_key, []))
    kwargs = dict(call.get(kwargs_key, {}))
    if any(p.get("var") for p in params[:len(args)]) or len(args) > len([p for p in params if not p.get("kwonly")]):
        return None  # *args, or more positional arguments than the signature we read: do not guess
    moved = []
    j = len(args) - 1
    while j >= first:
        p = params[j]
        if has_tensor(args[j]) or not p["has_default"] or not p["keyword"] or p["name"] in kwargs:
            break
        moved.append(p["name"])
        j -= 1
    if not moved:
        return None
    named = {p["name"]: args[k] for k, p in zip(range(j + 1, len(args)), params[j + 1:len(args)])}
    new = copy.deepcopy(call)
    new[args_key] = args[:j + 1]
    new[kwargs_key] = {**named, **kwargs}
    return new, list(reversed(moved))


def drop_kwarg(original: Instance, base: Instance, key: str, name: str) -> Instance | None:
    call = copy.deepcopy(base.call)
    if name not in call.get(key, {}) or has_tensor(call[key][name]):
        return None
    del call[key][name]
    return derive(original, base, call=call)


def drop_last_positional(original: Instance, base: Instance, key: str, first: int) -> Instance | None:
    call = copy.deepcopy(base.call)
    args = call.get(key, [])
    if len(args) <= first or has_tensor(args[-1]):
        return None
    call[key] = args[:-1]
    return derive(original, base, call=call)


def keras_reset(original: Instance, base: Instance, name: str, default: Any) -> Instance | None:
    call = copy.deepcopy(base.call)
    config = call.get("config", {})
    if name not in config or config[name] == default:
        return None
    config[name] = copy.deepcopy(default)
    return derive(original, base, call=call)


def onnx_attribute_names(inst: Instance) -> list[tuple[str, bool]]:
    """(attribute, required) of the main node, in the model's order."""
    model = load_onnx(inst.arrays)
    node = main_node(model, inst.op)
    if node is None:
        return []
    required: set[str] = set()
    try:
        import onnx.defs
        opset = {o.domain or "": o.version for o in model.opset_import}
        schema = onnx.defs.get_schema(node.op_type, opset.get(node.domain or "", 1), node.domain or "")
        required = {n for n, a in schema.attributes.items() if a.required}
    except Exception:  # noqa: BLE001 - unknown schema: every attribute is tried
        pass
    return [(a.name, a.name in required) for a in node.attribute]


def onnx_drop_attribute(original: Instance, base: Instance, name: str) -> Instance | None:
    model = load_onnx(base.arrays)
    node = main_node(model, base.op)
    if node is None:
        return None
    keep = [a for a in node.attribute if a.name != name]
    if len(keep) == len(node.attribute):
        return None
    del node.attribute[:]
    node.attribute.extend(keep)
    return derive(original, base, onnx_model=model)


# -- inputs -------------------------------------------------------------------------------------------------

def _drop_slot(arrays: dict, k: int, n: int) -> dict:
    out = {key: v for key, v in arrays.items() if not key.startswith("in:")}
    j = 0
    for i in range(n):
        if i != k:
            out[f"in:{j}"] = arrays[f"in:{i}"]
            j += 1
    return out


def droppable_inputs(inst: Instance) -> list[tuple[str, str, Any]]:
    """Optional tensor arguments that could be left out: (label, where, key) with where in
    kwargs | forward_kwargs | args | forward_args | onnx; trailing positional ones only."""
    call = inst.call
    kind = call.get("kind")
    out: list[tuple[str, str, Any]] = []
    if kind in ("torch_fn", "torch_module"):
        akey, kkey = ("args", "kwargs") if kind == "torch_fn" else ("forward_args", "forward_kwargs")
        refs = call_refs(call)
        for name, v in call.get(kkey, {}).items():
            r = tensor_refs(v)
            if r and all(refs.count(i) == 1 for i in r) and len(r) == 1:
                out.append((name if kind == "torch_fn" else f"forward.{name}", kkey, name))
        args = call.get(akey, [])
        if len(args) > 1:
            r = tensor_refs(args[-1])
            if len(r) == 1 and refs.count(r[0]) == 1:
                out.append((f"{'forward.' if kind == 'torch_module' else ''}arg{len(args) - 1}", akey, len(args) - 1))
    elif kind == "onnx_model":
        model = load_onnx(inst.arrays)
        node = main_node(model, inst.op)
        feeds = feed_names(model)
        if node is not None and len(model.graph.node) == 1 and len(node.input) > 1 and node.input[-1] in feeds \
                and list(node.input).count(node.input[-1]) == 1:
            out.append((node.input[-1], "onnx", feeds.index(node.input[-1])))
    return out


def drop_input(original: Instance, base: Instance, where: str, key: Any) -> Instance | None:
    n = len(base.inputs)
    if where == "onnx":
        k = int(key)
        model = load_onnx(base.arrays)
        node = main_node(model, base.op)
        name = feed_names(model)[k]
        if node is None or node.input[-1] != name:
            return None
        node.input.pop()
        vis = [vi for vi in model.graph.input if vi.name != name]
        del model.graph.input[:]
        model.graph.input.extend(vis)
        return derive(original, base, arrays=_drop_slot(base.arrays, k, n), onnx_model=model)
    call = copy.deepcopy(base.call)
    if where.endswith("kwargs"):
        value = call[where].pop(key)
    else:
        if int(key) != len(call[where]) - 1:
            return None
        value = call[where].pop()
    refs = tensor_refs(value)
    if len(refs) != 1:
        return None
    k = refs[0]
    for field in ("args", "kwargs", "forward_args", "forward_kwargs"):
        if field in call and (base.call.get("kind") != "torch_module" or field.startswith("forward")):
            call[field] = renumber(call[field], k)
    return derive(original, base, call=call, arrays=_drop_slot(base.arrays, k, n))


def describe_shape(inst: Instance) -> str:
    return json.dumps([s.shape for s in inst.inputs]).replace(" ", "")
