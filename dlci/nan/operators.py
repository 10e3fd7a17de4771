"""Operator instances at the edge of their operator's domain, for compiler and library PRs.

:func:`boundary_instances` takes ``torch_fn`` instances (PyTorch OpInfo samples, harvested calls) and ``tf_fn``
instances (TensorFlow raw-op calls from ``tf_ops``: ``Log`` reaches the table's ``tf.math.log``) whose operator is
in the vulnerable-operation table and moves elements of the vulnerable operand to values the domain still allows
but that sit at its edge: the operand of log at the smallest subnormal and the smallest normal, a divisor at the
smallest magnitude that keeps the quotient finite, an exp argument one ulp below overflow, acos at the last float
inside [-1, 1], lgamma next to a pole, softmax logits spread to the underflow limit, ...

The values are found with the search's own machinery: the table's distance map is differentiated with autograd and
each selected element is moved by a first-order solve (the distance map is framework-neutral: a TensorFlow call's
operand is differentiated as a torch tensor) toward the edge value (exact in one step for operands that are
inputs; the loop stops when the element sits at the edge). Every emitted instance is re-run as a standalone call and
kept only when it is deterministic and all its outputs are finite (the point is *inside* the domain), so the
campaign's oracle, which compares NaN/Inf masks against the float32 and float64 references, judges the compilers on
inputs the framework computes cleanly. Origin source: the calling source's name (``nan_search``,
``nan_search_tf``).
"""
from __future__ import annotations

import math
import re
import time

import numpy as np

import dlci.nan.table as T
from dlci.instance import Instance, Origin, TensorSpec

MAX_VARIANTS = 6  # per input instance


def _entry_for(fn: str):
    tab = T.table()
    hit = tab.torch(fn)
    if hit is None:
        from dlci.instance.recipe import try_resolve
        from dlci.nan.torch_trace import name_of
        obj = try_resolve(fn)
        if obj is not None:
            hit = tab.torch(name_of(obj))
    return hit


def _tf_entry_for(fn: str):
    """(table name, (entry, position)) of a raw op: ``tf.raw_ops.Log1p`` -> ``tf.math.log1p``, ``LogSoftmax`` ->
    ``tf.nn.log_softmax``, ``Div`` -> ``tf.math.divide``; None when the table has none."""
    raw = fn.rsplit(".", 1)[-1]
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", raw).lower()
    tab = T.table()
    for name in (f"tf.math.{raw.lower()}", f"tf.math.{snake}", f"tf.nn.{snake}", _TF_RAW_ALIASES.get(raw)):
        hit = tab.tf(name) if name else None
        if hit is not None:
            return name, hit
    return None


_TF_RAW_ALIASES = {"Div": "tf.math.divide", "Inv": "tf.math.reciprocal"}


def _operand_slot(call: dict, pos: list) -> int | None:
    """The input index holding the operand in an encoded call, or None (a constant operand)."""
    i, kw = pos
    args, kwargs = call.get("args", []), call.get("kwargs", {})
    enc = kwargs.get(kw) if kw in kwargs else (args[i] if i < len(args) else None)
    if isinstance(enc, dict) and "$t" in enc:
        return int(enc["$t"])
    return None


def _edge_targets(entry: dict, dtype, x: np.ndarray, others: list) -> list[tuple[str, float]]:
    """(label, target distance) pairs: how far inside the domain the moved elements end up."""
    fi = np.finfo(dtype)
    sub = float(fi.smallest_subnormal)
    tiny = float(fi.smallest_normal)
    root = float(np.sqrt(fi.eps))
    check = entry["check"]
    if check == "domain":
        out = []
        for bound in (entry.get("low"), entry.get("high")):
            if bound is None:
                continue
            b = np.array(bound, dtype=dtype)
            inside = np.nextafter(b, np.array(np.inf if bound == entry.get("low") else -np.inf, dtype=dtype))
            ulp = abs(float(inside) - float(b))
            out += [("ulp", ulp), ("near", root * max(1.0, abs(float(bound))))]
            if bound == 0:
                out.insert(-1, ("normal", tiny))
        return list(dict.fromkeys(out))
    if check == "nonzero":
        num = max([float(np.max(np.abs(o))) for o in others if o.size] + [1.0])
        floor = 2.0 * num / float(fi.max)  # below it the quotient overflows: outside what we want
        return [("tiny", max(sub, floor)), ("normal", max(tiny, floor)), ("near", max(root, floor))]
    if check == "overflow":
        return [("ulp", 1e-3 if dtype == np.float32 else 1e-2), ("near", 0.5)]
    if check == "poles":
        return [("near", root), ("close", 1e-3)]
    if check == "softmax":
        return [("underflow", 1.0), ("near", 8.0)]
    if check == "pow":
        return [("tiny", tiny), ("near", root)]
    return []


def _variants(inst: Instance, entry: dict, name: str, pos: list, slot: int, budget_end: float, rng,
              source: str, tf_outputs=None) -> list[Instance]:
    arrays = inst.input_arrays()
    x0 = arrays[slot]
    if x0.dtype.kind != "f" or x0.size == 0 or x0.dtype not in (np.float32, np.float64, np.float16):
        return []
    framework = "tf" if inst.call.get("kind") == "tf_fn" else "torch"
    others = [a for j, a in enumerate(arrays) if j != slot and a.dtype.kind == "f"]
    out = []
    for label, target in _edge_targets(entry, x0.dtype, x0, others):
        for mode in ("one", "several"):
            if time.monotonic() > budget_end or len(out) >= MAX_VARIANTS:
                return out
            moved = _drive(inst, entry, name, pos, slot, arrays, target, mode, rng, framework)
            if moved is None:
                continue
            new_arrays = [moved if j == slot else a for j, a in enumerate(arrays)]
            cand = Instance(op=inst.op, framework=inst.framework, call=inst.call,
                            inputs=[TensorSpec.of(a) for a in new_arrays], params=dict(inst.params),
                            origin=Origin(source, f"{inst.origin.test} edge:{entry['name']}:{label}:{mode}",
                                          inst.origin.library),
                            seed=inst.seed, arrays={f"in:{j}": a for j, a in enumerate(new_arrays)})
            expected = _tf_outputs(cand, tf_outputs) if framework == "tf" else ([] if _valid(cand) else None)
            if expected is not None:
                cand.arrays.update({f"expected:{j}": e for j, e in enumerate(expected)})
                out.append(cand)
    return out


def _drive(inst, entry, name, pos, slot, arrays, target, mode, rng, framework="torch") -> np.ndarray | None:
    """Move the selected elements of the operand until their distance equals ``target`` (first-order solves)."""
    import torch
    from dlci.instance import decode_value
    from dlci.nan.torch_trace import TorchAdapter
    xp = TorchAdapter()
    call = inst.call
    base = [torch.from_numpy(np.array(a, copy=True)) for a in arrays]
    x = base[slot].clone().requires_grad_(True)

    def dmap(xv):
        tensors = list(base)
        tensors[slot] = xv
        args = decode_value(call.get("args", []), tensors)
        kwargs = {k: decode_value(v, tensors) for k, v in call.get("kwargs", {}).items()}
        return T.call_distance(entry, name, tuple(args), kwargs, pos, xp, framework)

    try:
        m = dmap(x)
    except Exception:  # noqa: BLE001 - an argument pattern the distance does not cover
        return None
    if m is None or m.numel() == 0:
        return None
    flat = m.detach().reshape(-1)
    order = torch.argsort(flat).tolist()
    if mode == "one":
        picks = order[:1]
    else:  # the few nearest plus one drawn at random: several edge values in one tensor
        picks = list(dict.fromkeys(order[:3] + [int(rng.integers(0, flat.numel()))]))
    val = x.detach().to(torch.float64).clone()
    for _ in range(40):
        done = True
        for i in picks:
            xv = val.to(x.dtype).detach().requires_grad_(True)  # a float64 operand: .to is val itself
            mi = dmap(xv).reshape(-1)[i]
            cur = float(mi.detach())
            err = cur - target
            if abs(err) <= 1e-12 * abs(target) or not math.isfinite(err):
                continue
            done = False
            # at most four decades per step: x - (x - 1e-40) would cancel to 0 in one
            step_to = max(target, cur * 1e-4) if 0 < target < cur else target
            (g,) = torch.autograd.grad(mi, xv, allow_unused=True)
            if g is None:
                return None
            g = g.to(torch.float64)
            nrm2 = float((g * g).sum())
            if nrm2 == 0:
                return None
            new = val - (cur - step_to) * g / nrm2
            if torch.equal(new.to(x.dtype), val.to(x.dtype)):
                continue  # as close as the dtype gets
            val = new
        if done:
            break
    res = val.detach().to(x.dtype).numpy()
    if not np.all(np.isfinite(res)) or np.array_equal(res, arrays[slot]):
        return None
    return res


def _valid(inst: Instance) -> bool:
    """Standalone, deterministic, and every output finite (the edge is still inside the domain)."""
    import torch
    from dlci.instance.recipe import tensor_leaves
    from dlci.models.rebuild import check_torch_instance, torch_call
    if check_torch_instance(inst) is not None:
        return False
    module, xs = torch_call(inst)
    with torch.no_grad():
        leaves = tensor_leaves(module(*xs)) or []
    return all(not t.is_floating_point() or bool(torch.isfinite(t).all()) for t in leaves)


def _tf_outputs(inst: Instance, instance_outputs) -> list[np.ndarray] | None:
    """The raw op's outputs, run eagerly twice as tf_ops validates (``instance_outputs``); None unless deterministic
    and all finite."""
    outs = instance_outputs(inst)
    if outs is None or not all(a.dtype.kind not in "fc" or bool(np.isfinite(a).all()) for a in outs):
        return None
    return outs


def boundary_instances(instances, *, budget: float, seed: int = 0, source: str = "nan_search",
                       tf_outputs=None) -> list[Instance]:
    """New instances (origin source ``source``) of the given ``torch_fn`` / ``tf_fn`` instances whose operator is
    in the table, with operand elements moved to the edge of the operator's domain. ``budget``: seconds in all.
    ``tf_outputs(instance)``: a ``tf_fn`` instance's outputs as its source validates them, or None
    (dlci.sources.tf_ops.check.instance_outputs); without it, ``tf_fn`` instances are left alone."""
    end = time.monotonic() + float(budget)
    rng = np.random.default_rng(seed)
    out: list[Instance] = []
    seen: set[str] = set()
    for inst in instances:
        if time.monotonic() > end:
            break
        kind, fn = inst.call.get("kind"), inst.call.get("fn", "")
        if kind == "torch_fn" and inst.framework == "torch":
            hit = _entry_for(fn)
            name = fn
        elif kind == "tf_fn" and tf_outputs is not None:
            found = _tf_entry_for(fn)
            name, hit = found if found is not None else (fn, None)
        else:
            continue
        if hit is None:
            continue
        entry, pos = hit
        slot = _operand_slot(inst.call, pos)
        if slot is None:
            continue
        for cand in _variants(inst, entry, name, pos, slot, end, rng, source, tf_outputs):
            if cand.id not in seen:
                seen.add(cand.id)
                out.append(cand)
    return out
