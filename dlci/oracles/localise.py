"""Which operator of a multi-operator graph a failure belongs to, and whether it needs the others.

A graph test is judged whole first (its fp64 reference is the whole graph's, dlci.models). When it fails, the
worker localises the failure on the same target (:func:`localise`):

1. every operator the failure can come from (for a wrong output: the nodes it depends on; for a crash: every node)
   is run **alone**, in topological order, with its inputs taken from the reference (the value the reference
   computed there, dlci.reduce.graph's cut), and judged by the ordinary single-operator oracle against its own
   reference and fp64 recomputation. The first one that fails the same way (an inconsistency; the same exception)
   is the culprit: the finding names it, and an error that grew across many operators never counts, because the
   culprit's own error is measured from exact inputs;
2. when no operator fails alone, the failure needs several of them (fusion, layout propagation, constant folding,
   shape inference across nodes): ``multi_operator`` is set and the operator named is the one whose output is wrong.
   Such a wrong output must first survive the **conditioning check**: the whole graph's float64 reference, evaluated
   again with its inputs and weights moved by a few float32 rounding steps (relative 2**-20), must stay within the
   oracle's tolerance; when a legitimately perturbed computation would fail the oracle too, the output is
   ill-conditioned at these inputs (a sign flip before a discontinuity, an amplified cancellation) and the test is
   not judged (invalid: "ill-conditioned"), never reported.

Small graphs (a reduced finding) get every operator checked alone, so a finding can say that each operator alone
passes. The result is ``Outcome.localised``: {"operator", "node", "multi_operator", "alone": {node: status},
"checked", "nodes"}.
"""
from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import Callable

import numpy as np

from dlci.outcome import CRASH, INCONSISTENT, INVALID, Outcome

ALL_ALONE_UP_TO = 6  # graphs this small get every node checked alone (a reduced finding's operators)
PERTURBATION = 2.0 ** -20  # relative; float32 rounding is 2**-24 per operation
ENSEMBLE = 4  # perturbed float64 evaluations in the conditioning check
MAX_NODES = 40  # larger graphs are not localised (each node alone is a target run)


def wants_localisation(instance, out: Outcome) -> bool:
    return bool(instance.call.get("localise")) and out.status in (CRASH, INCONSISTENT)


def localise(instance, target_name: str, out: Outcome, ref, ref64, execute: Callable,
             hook: Callable[[str], None] = lambda s: None) -> None:
    """Localise ``out`` (the whole graph's failure on ``target_name``) in place; ``execute(instance, target)`` runs
    one single-operator test (dlci.testcase.execute, without localisation)."""
    t0 = time.perf_counter()
    try:
        view = _view(instance)
    except Exception as e:  # noqa: BLE001 - a graph the cut cannot handle: judged whole, not localised
        out.localised = {"error": f"not localised: {type(e).__name__}: {str(e)[:160]}"}
        return
    base, nodes = view.base, view.base.nodes
    if len(nodes) == 1:  # one operator: the failure is its own
        out.localised = {"nodes": 1, "checked": 1, "alone": {_label(nodes, 0): _status(out)},
                         "operator": _op(nodes[0]), "node": _label(nodes, 0), "multi_operator": False,
                         **({"message": anonymised(out.message, nodes)} if out.status == CRASH else {})}
        out.op = _op(nodes[0])
        return
    if len(nodes) > MAX_NODES:
        out.localised = {"nodes": len(nodes), "note": f"not localised (more than {MAX_NODES} operators)"}
        return
    if out.status == INCONSISTENT:
        output = _failing_output(out, base)
        suspects = sorted(_ancestors(base, output)) if output else list(range(len(nodes)))
    else:
        output = None
        suspects = list(range(len(nodes)))
    check_all = len(nodes) <= ALL_ALONE_UP_TO
    order = list(range(len(nodes))) if check_all else suspects
    alone: dict[str, str] = {}
    culprit = None
    for k in order:
        hook("localise")
        cand = view.alone(k)
        if cand is None:
            alone[_label(nodes, k)] = "not expressible"
            continue
        o = _alone_outcome(cand, target_name, execute)
        alone[_label(nodes, k)] = _status(o)
        if culprit is None and k in suspects and _same_way(out, o):
            culprit = k
            if not check_all:
                break
    info = {"nodes": len(nodes), "checked": len(alone), "alone": alone, "seconds": 0.0}
    if culprit is not None:
        info.update(operator=_op(nodes[culprit]), node=_label(nodes, culprit), multi_operator=False)
    else:
        named = base.producer.get(output) if output else _named_in_message(out.message, nodes)
        info.update(operator=_op(nodes[named]) if named is not None else instance.op,
                    node=_label(nodes, named) if named is not None else "", multi_operator=True)
        if out.status == INCONSISTENT:
            why = _ill_conditioned(instance, out, ref, ref64)
            if why:
                out.status, out.stage, out.symptom = INVALID, "compare", "ill-conditioned"
                out.message = why
    info["seconds"] = round(time.perf_counter() - t0, 3)
    if out.status == CRASH:
        info["message"] = anonymised(out.message, nodes)
    out.localised = info
    if out.status in (CRASH, INCONSISTENT):
        out.op = info["operator"]


# a node alone, fed from the reference, is the same test in every graph cut from the same one (the candidates of a
# reduction): its outcome is kept per worker, by the test's content, so a reduction pays for each node once
_ALONE: "OrderedDict[tuple[str, str], Outcome]" = OrderedDict()
_ALONE_KEPT = 512


def _alone_outcome(cand, target_name: str, execute: Callable) -> Outcome:
    key = (target_name, cand.compute_id())
    if key in _ALONE:
        _ALONE.move_to_end(key)
        return _ALONE[key]
    o = execute(cand, target_name)
    _ALONE[key] = o
    while len(_ALONE) > _ALONE_KEPT:
        _ALONE.popitem(last=False)
    return o


# -- the graph as the cut sees it ---------------------------------------------------------------------------------

class _View:
    """A graph instance (onnx_model or torch_graph) as dlci.reduce.graph cuts it: one node alone, fed from the
    reference, as an instance of the same recipe."""

    def __init__(self, instance):
        from dlci.reduce.graph import _Base
        self.instance = instance
        if instance.call.get("kind") == "torch_graph":
            from dlci.models.graph import graph_instance, graph_of
            self.graph = graph_of(instance)
            self.onnx = graph_instance(self.graph, instance.input_arrays(), op=instance.op,
                                       source=instance.origin.source, localise=False)
        else:
            self.graph, self.onnx = None, instance
        self.base = _Base(self.onnx)
        self.base.values()

    def alone(self, k: int):
        from dlci.reduce.edit import derive
        from dlci.reduce.graph import _Unbuildable, cut_model
        try:
            model, arrays = cut_model(self.base, {k})
        except _Unbuildable:
            return None
        if self.graph is None:
            call = dict(self.instance.call, localise=False)
            cand = derive(self.instance, self.instance, call=call, arrays=arrays, onnx_model=model)
            cand.op = _op(self.base.nodes[k])
            return cand
        from dlci.models.graph import Graph, GraphError, graph_instance
        try:
            g = Graph.from_onnx(model)
            inputs = [arrays[f"in:{i}"] for i in range(len(g.inputs))]
            return graph_instance(g, inputs, op=_op(self.base.nodes[k]), source=self.instance.origin.source,
                                  framework="torch", localise=False, seed=self.instance.seed)
        except GraphError:
            return None


def _view(instance) -> _View:
    return _View(instance)


def _op(node) -> str:
    from dlci.instance.recipe import op_id
    return op_id(node)


def _status(o: Outcome) -> str:
    return o.status if o.status != INCONSISTENT else f"{o.status} ({o.symptom})"


def _label(nodes, k: int) -> str:
    return f"{k}:{nodes[k].op_type}"


def _failing_output(out: Outcome, base) -> str | None:
    i = (out.distance or {}).get("output")
    if not isinstance(i, int) or not 0 <= i < len(base.outputs):
        return base.outputs[0] if len(base.outputs) == 1 else None
    return base.outputs[i]


def _ancestors(base, value: str) -> set[int]:
    seen: set[int] = set()
    todo = [base.producer[value]] if value in base.producer else []
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        todo += [base.producer[x] for x in base.reads[k] if x in base.producer]
    return seen


def _same_way(whole: Outcome, alone: Outcome) -> bool:
    if whole.status == INCONSISTENT:
        return alone.status == INCONSISTENT
    if alone.status != CRASH:
        return False
    from dlci.findings import normalize_message
    return alone.symptom == whole.symptom and (normalize_message(alone.message) == normalize_message(whole.message)
                                               or alone.stage == whole.stage)


def _named_in_message(message: str, nodes) -> int | None:
    """A node the target's error message names (ONNX Runtime and TVM by its name, OpenVINO by its output's friendly
    name)."""
    first: dict[int, int] = {}  # node -> where the message first names it: the node it is about comes first
    for k, n in enumerate(nodes):
        for name in [n.name, *n.output]:
            m = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", message) if name else None
            if m:
                first[k] = min(first.get(k, m.start()), m.start())
    return min(first, key=first.get) if first else None


def anonymised(message: str, nodes) -> str:
    """The message with the graph's own node and value names replaced by the operator they belong to (``<Resize>``:
    a target names a node by its own name or by its output's, as it likes): two networks failing the same way say
    the same thing (the dedup signature reads this)."""
    names = {}
    for n in nodes:
        for x in [n.name, *n.output]:
            if x:
                names[x] = f"<{n.op_type}>"
    for name in sorted(names, key=len, reverse=True):
        message = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", names[name], message)
    return message


# -- the conditioning check -----------------------------------------------------------------------------------------

def _ill_conditioned(instance, out: Outcome, ref, ref64) -> str:
    """Why the failing output cannot be judged at these inputs ("" when it can): a float64 evaluation of the whole
    graph with inputs and weights moved by PERTURBATION fails the oracle as well."""
    from dlci.oracles.compare import compare_one
    i = (out.distance or {}).get("output", 0) or 0
    if ref64 is None or i >= len(ref):
        return ""
    try:
        members = _perturbed(instance, i)
    except Exception:  # noqa: BLE001 - no float64 evaluation: the whole-graph oracle already ran without it
        return ""
    r, r64 = np.asarray(ref[i]), np.asarray(ref64[i])
    for m in members:
        got = np.asarray(m).astype(r.dtype) if r.dtype.kind == "f" else np.asarray(m)
        if compare_one(got, r, r64) is not None:
            return (f"output {i} is ill-conditioned at these inputs: the float64 reference with inputs and weights "
                    f"moved by {PERTURBATION:.1e} (relative) fails the oracle as well, so the target's difference "
                    "cannot be told from rounding")
    return ""


def _perturbed(instance, i: int) -> list[np.ndarray]:
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    import dlci.reduce.edit as E
    from dlci.models import widen_to_float64
    if instance.call.get("kind") == "torch_graph":
        from dlci.models.graph import graph_of
        model = graph_of(instance).to_onnx()
    else:
        model = E.load_onnx(instance.arrays)
    wide = widen_to_float64(model)
    if wide is None:
        return []
    rng = np.random.default_rng(instance.seed + 7)
    names = E.feed_names(wide)
    inits = [(j, numpy_helper.to_array(t)) for j, t in enumerate(wide.graph.initializer)]
    out = []
    for _ in range(ENSEMBLE):
        feed = {}
        for name, a in zip(names, instance.input_arrays()):
            a = np.asarray(a)
            feed[name] = _jitter(a.astype(np.float64), rng) if a.dtype.kind == "f" else a
        for j, a in inits:
            if a.dtype == np.float64:
                wide.graph.initializer[j].CopyFrom(numpy_helper.from_array(_jitter(a, rng),
                                                                           wide.graph.initializer[j].name))
        with np.errstate(all="ignore"):
            got = ReferenceEvaluator(wide).run(None, feed)
        out.append(np.asarray(got[i]))
    return out


def _jitter(a: np.ndarray, rng) -> np.ndarray:
    return a * (1.0 + PERTURBATION * rng.uniform(-1.0, 1.0, a.shape))
