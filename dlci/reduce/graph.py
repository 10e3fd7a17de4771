"""Graph reduction: the smallest set of operators of a multi-operator model that still fails the same way.

The pass runs first in :func:`dlci.reduce.reduce_instance` for ``onnx_model`` instances with more than one node.
It is delta debugging (ddmin) over the node set: halves, then quarters, ... (each chunk kept alone, then each
chunk removed), down to one node at a time; the predicate is the campaign's (the same signature). Every candidate
is a valid model of its own, cut out of the graph the pass started from (the *base*):

- the kept nodes, in the base's (topological) order;
- a value the kept nodes consume but none of them produces is **cut**: it becomes a graph input whose array is the
  value the base computed there (``onnx.reference.ReferenceEvaluator`` on the base model and inputs), so the
  failing operator sees exactly the data it saw in the whole model. A cut value computed from constants only
  (``Constant`` nodes, initializers) becomes an initializer instead: converters treat constants and runtime
  inputs differently (a ``Reshape`` shape, a ``MaxUnpool`` output shape), and a cut must not change which;
- graph outputs: the kept values the base outputs, those a removed node consumed (the cut's frontier), and, for a
  kept node nothing else observes, its first output; values nobody read in the base (an unused ``Indices``
  output) stay unexposed, so no comparison appears that the base never made;
- initializers only where used; opset imports, model-local functions and the IR version kept; the node test's
  ``expected:*`` arrays dropped (the reference is recomputed on the candidate);
- ``onnx.checker`` (and strict shape inference, when the base passes it) before it is run: an invalid cut never
  reaches the target.

When the signature names only the operator (every value mismatch: ``target|compare|onnx::Op|symptom``), a
candidate must keep a node of that operator: otherwise a mismatch in another node would pass for this one.

A last step bypasses single pass-through-like nodes that the cut could not remove (``Identity``, ``Cast``,
``Reshape`` chains between two kept nodes): their consumers read the node's input instead.

torch instances are single-operator recipes (one call or one module): :func:`operators` counts them as 1 and the
pass leaves them alone.
"""
from __future__ import annotations

import copy
import hashlib
from typing import Any, Iterable

import numpy as np

from dlci.instance import Instance
import dlci.reduce.edit as E
from dlci.models.onnx_io import feed_names, load_onnx, store_onnx
from dlci.findings import LOCALISED_IN_GRAPH

__all__ = ["operators", "is_multi_operator", "graph_pass", "cut_model", "PASS_THROUGH"]

PASS_THROUGH = frozenset({"Identity", "Cast", "CastLike", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Dropout",
                          "Expand"})
_RANDOM = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
                     "Multinomial"})


# -- measuring ---------------------------------------------------------------------------------------------

def operators(inst: Instance) -> int:
    """Number of operators of an instance: the nodes of an ONNX model's main graph or of a torch graph; 1 for every
    other recipe."""
    if inst.call.get("kind") == "torch_graph":
        return len(inst.call.get("graph", {}).get("nodes", [])) or 1
    if inst.call.get("kind") != "onnx_model" or "model" not in inst.arrays:
        return 1
    try:
        return len(load_onnx(inst.arrays).graph.node)
    except Exception:  # noqa: BLE001 - an unreadable model is measured as one operator
        return 1


def is_multi_operator(inst: Instance) -> bool:
    return operators(inst) > 1


# -- the graph the pass starts from ------------------------------------------------------------------------

def _subgraph_refs(graph) -> set[str]:
    """Names a subgraph reads from enclosing scopes."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    used: set[str] = set()
    for n in graph.node:
        used.update(x for x in n.input if x)
        used.update(_implicit(n))
        defined.update(x for x in n.output if x)
    return used - defined


def _implicit(node) -> set[str]:
    import onnx
    out: set[str] = set()
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out |= _subgraph_refs(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            for g in a.graphs:
                out |= _subgraph_refs(g)
    return out


class _Base:
    """The model the pass cuts from, with what every candidate needs: each node's reads, who reads each value,
    the values the base computes (lazily) and which of them are constants."""

    def __init__(self, inst: Instance):
        import onnx
        self.inst = inst
        self.model = load_onnx(inst.arrays)
        g = self.model.graph
        self.nodes = list(g.node)
        self.implicit = [sorted(_implicit(n) - set(n.input)) for n in self.nodes]  # outer values subgraphs read
        self.reads = [[x for x in n.input if x] + imp for n, imp in zip(self.nodes, self.implicit)]
        self.producer = {x: k for k, n in enumerate(self.nodes) for x in n.output if x}
        self.feeds = feed_names(self.model)
        self.inits = {t.name: t for t in g.initializer}
        self.input_vi = {vi.name: vi for vi in g.input}
        self.outputs = [o.name for o in g.output]
        self.output_vi = {o.name: o for o in g.output}
        self.readers: dict[str, set[int]] = {}
        for k, names in enumerate(self.reads):
            for x in names:
                self.readers.setdefault(x, set()).add(k)
        # constants: initializers and what nodes compute from constants alone (random nodes are not constant)
        self.const = set(self.inits) - set(self.feeds)
        for k, n in enumerate(self.nodes):
            if n.op_type not in _RANDOM and all(x in self.const for x in self.reads[k]):
                self.const.update(x for x in n.output if x)
        self.types: dict[str, Any] = {}
        try:
            inferred = onnx.shape_inference.infer_shapes(self.model)
            for vi in list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input):
                if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                    self.types[vi.name] = vi.type.tensor_type.elem_type
        except Exception:  # noqa: BLE001 - types then come from the computed values only
            pass
        self.checks = _checks_passed(self.model)
        self._values: dict[str, Any] | None = None

    def values(self) -> dict[str, Any]:
        """Every value of the base model on its inputs (the reference evaluator's intermediate results)."""
        if self._values is None:
            from onnx.reference import ReferenceEvaluator
            feed = dict(zip(self.feeds, self.inst.input_arrays()))
            self._values = dict(ReferenceEvaluator(self.model).run(None, feed, intermediate=True))
        return self._values

    def upstream(self, k: int) -> set[int]:
        """Node k and every node it depends on."""
        seen, todo = set(), [k]
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo += [self.producer[x] for x in self.reads[j] if x in self.producer]
        return seen

    def anchors(self, op: str) -> set[int]:
        domain, _, op_type = op.rpartition("::")
        domain = "" if domain in ("onnx", "ai.onnx") else domain
        return {k for k, n in enumerate(self.nodes) if n.op_type == op_type and (n.domain or "") == domain}


def _checks_passed(model) -> tuple[str, ...]:
    """Which validity checks the base model passes: candidates are held to the same ones."""
    import onnx
    passed = []
    try:
        onnx.checker.check_model(model)
        passed.append("checker")
    except Exception:  # noqa: BLE001
        return ()
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        passed.append("strict_inference")
    except Exception:  # noqa: BLE001
        pass
    return tuple(passed)


def valid(model, checks: Iterable[str] = ("checker", "strict_inference")) -> str | None:
    """None when the model passes the checks, else why not."""
    import onnx
    checks = tuple(checks)
    try:
        if "checker" in checks:
            onnx.checker.check_model(model)
        if "strict_inference" in checks:
            onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    return None


# -- cutting -----------------------------------------------------------------------------------------------

class _Unbuildable(Exception):
    pass


def _tensor_vi(name: str, elem_type: int, shape=None):
    from onnx import helper
    return helper.make_tensor_value_info(name, elem_type, None if shape is None else list(shape))


def cut_model(base: _Base, keep: Iterable[int], rename: dict[str, str] | None = None) -> tuple[Any, dict]:
    """The model of the nodes ``keep`` (indices into the base's nodes) and its arrays (``in:<i>`` per fed input,
    plus the base's other non-input arrays, without ``expected:*``). ``rename``: values whose readers read another
    value instead (a bypassed node's output -> its input). Raises :class:`_Unbuildable` when the cut cannot be
    expressed (a sequence or string value to cut, no output left)."""
    import onnx
    from onnx import helper, numpy_helper
    rename = dict(rename or {})
    keep = sorted(set(keep))
    if not keep:
        raise _Unbuildable("no node kept")
    kept = set(keep)
    nodes = [copy.deepcopy(base.nodes[k]) for k in keep]
    for n in nodes:
        for j, x in enumerate(n.input):
            if x in rename:
                n.input[j] = rename[x]
    produced = {x for n in nodes for x in n.output if x}
    if any(y in base.implicit[k] for k in keep for y in rename):
        raise _Unbuildable("a subgraph reads a bypassed value")
    reads: list[str] = []
    for k, n in zip(keep, nodes):
        for x in [x for x in n.input if x] + base.implicit[k]:
            if x not in reads:
                reads.append(x)
    feeds, new_inputs, inits, cut_inits = [], [], [], []
    for x in reads:
        if x in produced:
            continue
        if x in base.feeds:
            feeds.append(x)
        elif x in base.inits:
            inits.append(base.inits[x])
        else:
            v = base.values().get(x)
            if not isinstance(v, np.ndarray) or v.dtype.kind not in "biufc":
                raise _Unbuildable(f"value {x!r} is not a numeric tensor ({type(v).__name__})")
            if x in base.const:
                cut_inits.append(numpy_helper.from_array(np.require(v, requirements="C"), x))
            else:
                new_inputs.append((x, np.require(v, requirements="C")))
    # outputs: what the base outputs, what a removed node read (the cut's frontier), and one output of a kept
    # node that nothing else observes; a bypassed node's observable output is observed at its input instead
    gone_nodes = {base.producer[y] for y in rename if y in base.producer}
    inside = kept | gone_nodes

    def observable(x: str) -> bool:
        return x in base.outputs or bool(base.readers.get(x, set()) - inside)

    wanted: list[str] = []
    for k in keep:
        outs = [x for x in base.nodes[k].output if x]
        shown = [x for x in outs if observable(x)]
        if outs and not shown and not any(base.readers.get(x, set()) & inside for x in outs):
            shown = [outs[0]]
        wanted += shown
    wanted += [y for y in rename if observable(y)]
    outputs: list[str] = []
    for x in wanted:
        x = rename.get(x, x)
        if x in outputs:
            continue
        if x not in produced:
            raise _Unbuildable(f"output {x!r} would be a graph input")
        outputs.append(x)
    outputs = [x for x in base.outputs if x in outputs] + [x for x in outputs if x not in base.outputs]
    if not outputs:
        raise _Unbuildable("no output left")
    # output types (and, while every value is the base's own, shapes) from what the base computed
    out_vis = []
    for x in outputs:
        if x in base.output_vi and not rename:
            out_vis.append(copy.deepcopy(base.output_vi[x]))
            continue
        v = base.values().get(x)
        if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
            out_vis.append(_tensor_vi(x, helper.np_dtype_to_tensor_dtype(v.dtype), None if rename else v.shape))
        elif x in base.types:
            out_vis.append(_tensor_vi(x, base.types[x]))
        else:
            raise _Unbuildable(f"no type for output {x!r}")
    model = onnx.ModelProto()
    model.CopyFrom(base.model)
    g = model.graph
    del g.node[:], g.input[:], g.output[:], g.initializer[:], g.value_info[:]
    g.node.extend(nodes)
    feed_set = set(feeds)
    old_to_new: dict[int, int] = {}
    for name in base.feeds:
        if name in feed_set:
            old_to_new[base.feeds.index(name)] = len(g.input)
            g.input.append(copy.deepcopy(base.input_vi[name]))
    for name, a in new_inputs:
        g.input.append(_tensor_vi(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    # initializers that are also listed as graph inputs (overridable) keep their input entry
    for t in inits:
        if t.name in base.input_vi:
            g.input.append(copy.deepcopy(base.input_vi[t.name]))
    g.initializer.extend(copy.deepcopy(t) for t in inits)
    g.initializer.extend(cut_inits)
    if model.ir_version < 4:  # old IR: every initializer must also be a graph input
        for t in cut_inits:
            g.input.append(_tensor_vi(t.name, t.data_type, t.dims))
    g.output.extend(out_vis)
    arrays = {k: v for k, v in base.inst.arrays.items()
              if not k.startswith(("in:", "expected:")) and k != "model"}
    base_inputs = base.inst.input_arrays()
    n = 0
    for old in sorted(old_to_new):
        arrays[f"in:{n}"] = base_inputs[old]
        n += 1
    for _name, a in new_inputs:
        arrays[f"in:{n}"] = a
        n += 1
    return model, arrays


# -- the pass ----------------------------------------------------------------------------------------------

class _Cutter:
    """Builds (and caches) the candidate for a set of kept nodes; counts cuts rejected by the checks."""

    def __init__(self, s, base: _Base, anchors: set[int], torch: bool = False):
        self.s, self.base, self.anchors = s, base, anchors
        self.torch = torch  # the instance is a torch graph: candidates are cut in its ONNX form, built back in torch
        self.cache: dict[tuple, Instance | None] = {}
        self.built = 0
        self.rejected = 0
        self.unbuildable = 0

    def build(self, keep: frozenset[int], rename: dict[str, str] | None = None) -> Instance | None:
        key = (keep, tuple(sorted((rename or {}).items())))
        if key in self.cache:
            return self.cache[key]
        cand = None
        if not self.anchors or keep & self.anchors:
            try:
                model, arrays = cut_model(self.base, keep, rename)
                self.built += 1
                cand = E.derive(self.s.original, self.base.inst, arrays=arrays, onnx_model=model)
                # types first (a bypass may hand an operator a type it does not take), before anything
                # evaluates the candidate; then the whole check on the model as it will run
                why = valid(load_onnx(cand.arrays), [c for c in self.base.checks if c != "checker"])
                if why is None:
                    cand = _shaped_outputs(self.s.original, cand, self.base, bool(rename))
                    why = valid(load_onnx(cand.arrays), self.base.checks)
                if why is not None:
                    self.rejected += 1
                    self.s.note(f"graph: a cut failed the ONNX checks and was not run ({why[:120]})")
                    cand = None
                elif self.torch:
                    cand = _torch_twin(cand, self.s.original)
            except _Unbuildable:
                self.unbuildable += 1
                cand = None
            except Exception as e:  # noqa: BLE001 - an odd graph: this cut is skipped
                self.unbuildable += 1
                self.s.note(f"graph: a cut could not be built ({type(e).__name__}: {str(e)[:120]})")
                cand = None
        self.cache[key] = cand
        return cand

    def first(self, options: list[tuple[frozenset[int], dict | None]]) -> tuple | None:
        """The first option (in preference order) whose candidate fails the same way; built lazily, run in
        batches of the runner's parallelism. None also when time ran out."""
        s = self.s
        pending = list(options)
        while pending:
            batch: list[tuple[tuple, Instance]] = []
            while pending and len(batch) < s.parallel:
                opt = pending.pop(0)
                cand = self.build(*opt)
                if cand is not None and cand.id != s.current.id:
                    batch.append((opt, cand))
            if not batch:
                return None
            res = s.evaluate([c for _, c in batch])
            for (opt, cand), ok in zip(batch, res):
                if ok:
                    return opt, cand
            if any(r is None for r in res):
                return None
        return None


def _torch_twin(cand: Instance, original: Instance) -> Instance | None:
    """The torch graph of a cut (made in the ONNX form of a torch graph); None when torch cannot express it."""
    from dlci.models.graph import Graph, GraphError
    from dlci.models.graph_torch import torch_graph_instance
    try:
        g = Graph.from_onnx(load_onnx(cand.arrays))
        twin = torch_graph_instance(g, cand.input_arrays(), op=original.op, source=original.origin.source,
                                    test=cand.origin.test, seed=original.seed,
                                    localise=bool(original.call.get("localise")))
    except GraphError:
        return None
    twin.id = f"{original.id}-r{hashlib.sha1(twin.compute_id().encode()).hexdigest()[:8]}"
    return twin


def _shaped_outputs(original: Instance, cand: Instance, base: _Base, changed: bool) -> Instance:
    """Graph outputs whose shape inference cannot tell (``MaxUnpool`` with a runtime output shape) get the shape
    they have on the candidate's inputs: the checker requires one. Without a bypass every value is the base's
    own; after one, the candidate is evaluated."""
    m = load_onnx(cand.arrays)
    missing = [o for o in m.graph.output
               if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape")]
    if not missing:
        return cand
    if changed:
        from onnx.reference import ReferenceEvaluator
        got = ReferenceEvaluator(m).run(None, dict(zip(feed_names(m), cand.input_arrays())))
        values = {o.name: v for o, v in zip(m.graph.output, got)}
    else:
        values = base.values()
    for o in missing:
        v = values.get(o.name)
        if not isinstance(v, np.ndarray):
            continue
        shape = o.type.tensor_type.shape
        for d in v.shape:
            shape.dim.add().dim_value = int(d)
    cand.arrays["model"] = store_onnx(m)
    # the content changed: a fresh id, derived as dlci.reduce.edit.derive derives it
    cand.id = f"{original.id}-r{hashlib.sha1(cand.compute_id().encode()).hexdigest()[:8]}"
    return cand


def _split(items: list[int], n: int) -> list[list[int]]:
    n = min(n, len(items))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for j in range(n):
        end = start + size + (1 if j < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def _describe(base: _Base, keep: Iterable[int]) -> str:
    names = [base.nodes[k].op_type for k in sorted(keep)]
    return ", ".join(names) if len(names) <= 6 else ", ".join(names[:6]) + f", ... ({len(names)})"


def graph_pass(s) -> None:
    """The graph pass of :func:`dlci.reduce.reduce_instance` (``s`` is its search state)."""
    inst = s.current
    if inst.call.get("kind") not in ("onnx_model", "torch_graph") or operators(inst) < 2:
        return
    torch = inst.call.get("kind") == "torch_graph"
    if torch:  # cut in its ONNX form (the same graph), each candidate built back as a torch graph
        from dlci.models.graph import graph_instance, graph_of
        inst = graph_instance(graph_of(inst), inst.input_arrays(), op=inst.op, source=inst.origin.source,
                              seed=inst.seed, localise=bool(inst.call.get("localise")))
    base = _Base(inst)
    if "checker" not in base.checks:
        s.note("graph: the model fails onnx.checker: candidates could not be validated, nodes not reduced")
        return
    try:
        base.values()
    except Exception as e:  # noqa: BLE001
        s.note(f"graph: the reference evaluator cannot run the model ({type(e).__name__}: {str(e)[:120]}): "
               "nodes not reduced")
        return
    parts = s.signature.split("|")
    anchors = base.anchors(inst.op) if len(parts) >= 3 and parts[2] == inst.op else set()
    if not anchors and len(parts) >= 3 and inst.call.get("localise"):
        # a localised graph failure names the operator it belongs to (dlci.localise): keep one of those
        anchors = base.anchors(parts[2].removesuffix(LOCALISED_IN_GRAPH))
    cut = _Cutter(s, base, anchors, torch)
    total = len(base.nodes)
    keep = list(range(total))

    def take(new_keep, cand, how: str) -> None:
        s.accept("graph", f"{how}: {len(keep)} -> {len(new_keep)} operators (kept {_describe(base, new_keep)})",
                 cand)

    # the operator the signature names, alone: the usual answer, one batch — but not for a failure localisation
    # found needs several operators (each alone passed there)
    multi = len(parts) >= 3 and parts[2].endswith(LOCALISED_IN_GRAPH)
    if anchors and not multi and s.can_run():
        hit = cut.first([(frozenset({k}), None) for k in sorted(anchors)])
        if hit is not None:
            take(sorted(hit[0][0]), hit[1], "the named operator alone")
            keep = sorted(hit[0][0])
    # a failure that needs several operators: the named operator with everything it depends on (the cut that
    # localisation found already wrong when it named it), before ddmin cuts further
    if anchors and len(keep) > 2 and s.can_run():
        upstream = sorted({frozenset(base.upstream(k)) for k in anchors if k in keep}, key=len)
        hit = cut.first([(u, None) for u in upstream if 1 < len(u) < len(keep)])
        if hit is not None:
            take(sorted(hit[0][0]), hit[1], "the named operator with what it depends on")
            keep = sorted(hit[0][0])
    # ddmin: each chunk kept alone, then each chunk removed; granularity doubles up to one node at a time
    n = 2
    while len(keep) >= 2 and s.can_run():
        chunks = _split(keep, n)
        options = [(frozenset(c), None) for c in chunks]
        if len(chunks) > 2:
            options += [(frozenset(keep) - frozenset(c), None) for c in chunks]
        hit = cut.first(options)
        if hit is not None:
            new_keep = sorted(hit[0][0])
            alone = any(frozenset(c) == hit[0][0] for c in chunks)
            take(new_keep, hit[1], f"kept 1/{len(chunks)}" if alone else f"removed 1/{len(chunks)}")
            n = 2 if alone else max(n - 1, 2)
            keep = new_keep
            continue
        if not s.can_run() or n >= len(keep):
            break
        n = min(2 * n, len(keep))
    # pass-through nodes the cut could not remove: bypassed (their readers read their input)
    renames: dict[str, str] = {}
    tried: set[int] = set()
    while len(keep) >= 2 and s.can_run():
        options = []
        for k in keep:
            node = base.nodes[k]
            outs = [x for x in node.output if x]
            if k in tried or node.op_type not in PASS_THROUGH or not node.input or not node.input[0] \
                    or len(outs) != 1:
                continue
            if anchors and not (set(keep) - {k}) & anchors:
                continue
            src = renames.get(node.input[0], node.input[0])
            options.append((frozenset(keep) - {k}, {**{y: (src if x == outs[0] else x) for y, x in renames.items()},
                                                     outs[0]: src}))
            tried.add(k)
        if not options:
            break
        hit = cut.first(options)
        if hit is None:
            continue
        (new_keep, new_renames), cand = hit
        gone = (set(keep) - set(new_keep)).pop()
        s.accept("graph", f"{base.nodes[gone].op_type} bypassed: {len(keep)} -> {len(new_keep)} operators "
                          f"(kept {_describe(base, new_keep)})", cand)
        keep, renames = sorted(new_keep), dict(new_renames)
    if cut.rejected or cut.unbuildable:
        s.note(f"graph: {cut.built} cuts built, {cut.rejected} rejected by the ONNX checks, "
               f"{cut.unbuildable} not expressible (never run)")
    if len(keep) == total:
        s.note(f"graph: every one of the {total} operators is needed")
