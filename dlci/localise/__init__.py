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
   shape inference across nodes) and ``multi_operator`` is set. A wrong output must first survive the
   **conditioning check**: the whole graph's float64 reference, evaluated again with its inputs, weights and every
   intermediate value moved by a float32 rounding step or so (relative 2**-20), must stay within the oracle's
   tolerance; when a legitimately perturbed computation would fail the oracle too, the output is ill-conditioned at
   these inputs (a sign flip before a discontinuity, an amplified cancellation, a long sum into a cosine) and the
   test is not judged (invalid: "ill-conditioned"), never reported. The operator named is then the earliest whose
   output is already wrong when the graph is cut after it (else the one whose output is wrong; for a crash, the
   node the message names), so one bug followed by different operators is one finding.

A crash in a graph of more than MAX_NODES operators gets one check: the node its message names, alone; when the
message names none, the graph is not localised (its reduction, cut to what the failure needs, is).

Small graphs (a reduced finding) get every operator checked alone, so a finding can say that each operator alone
passes. The result is ``Outcome.localised``: {"operator", "node", "multi_operator", "alone": {node: status},
"checked", "nodes"}.

Audee's steps on a wrong output (dlci.localise.causal): before step 1, a **trace** — the target runs the graph with
every intermediate value exposed as an output, each compared with the float64 reference; the first operator whose
output diverges (the oracle fails it and its error jumps over its inputs') is checked alone first, so a deep graph
needs a few runs instead of one per operator. The trace only orders the suspects: exposing values can change what a
compiler fuses, so it is used only when the exposed graph's own outputs come out as the plain graph's did, and the
verdict is always the operator alone fed from the reference (Audee's causal substitution). After step 1, the
culprit's **share** of the final error: the graph run again with the culprit's output fed from the reference; the
error that goes away is the culprit's. ``localised`` then also has "trace" and "share".

Two graph views: an ONNX graph (onnx_model, or a generated torch graph in its ONNX form, cut by dlci.reduce.graph)
and a user's PyTorch model (torch_program: its torch.fx graph, dlci.models.fx), localised at the torch level.
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
MAX_NODES = 40  # larger graphs are not localised without a trace (each node alone is a target run)
TRACED_MAX_NODES = 1000  # ... with one, up to this many: only the first divergent operators are run alone
TRACED_CHECKS = 12  # how many of them
PREFIX_CHECKS = 8  # a multi-operator failure: graphs cut after earlier operators run to find the first wrong value
PARAMETER_SECONDS = 30.0  # the culprit's parameters reset one at a time, at most this long


def wants_localisation(instance, out: Outcome) -> bool:
    return bool(instance.call.get("localise")) and out.status in (CRASH, INCONSISTENT)


def localise(instance, target_name: str, out: Outcome, ref, ref64, execute: Callable,
             hook: Callable[[str], None] = lambda s: None, got: list | None = None,
             target_outputs: Callable | None = None) -> None:
    """Localise ``out`` (the whole graph's failure on ``target_name``) in place; ``execute(instance, target)`` runs
    one single-operator test (dlci.testcase.execute, without localisation); ``got``: the target's outputs on the
    whole graph (a wrong output: what the trace and the share are measured against); ``target_outputs(instance,
    target)``: the target's own outputs on an instance, nothing judged (dlci.testcase.target_outputs), which the trace
    and the share run (None: neither is measured)."""
    from dlci.localise import causal
    t0 = time.perf_counter()
    try:
        view = _view(instance)
    except Exception as e:  # noqa: BLE001 - a graph the cut cannot handle: judged whole, not localised
        out.localised = {"error": f"not localised: {type(e).__name__}: {str(e)[:160]}"}
        return
    n = len(view)
    if n == 1:  # one operator: the failure is its own
        out.localised = {"nodes": 1, "checked": 1, "alone": {view.label(0): _status(out)},
                         "operator": view.op(0), "node": view.label(0), "multi_operator": False,
                         **({"message": anonymised(out.message, view)} if out.status == CRASH else {})}
        out.op = view.op(0)
        return
    traceable = out.status == INCONSISTENT and got is not None and target_outputs is not None
    limit = TRACED_MAX_NODES if traceable else MAX_NODES
    # a crash in a graph too large to run each operator alone: the node its message names is the one suspect
    named_crash = _named_in_message(out.message, view) if out.status == CRASH and n > limit else None
    if n > limit and named_crash is None:
        why = "" if traceable else ", and no trace: only a wrong value is traced"
        out.localised = {"nodes": n, "note": f"not localised (more than {limit} operators{why})",
                         # the graph's own names out of the signature: a cut of it still fails the same way
                         **({"message": anonymised(out.message, view)} if out.status == CRASH else {})}
        return
    output = None
    if out.status == INCONSISTENT:
        output = _failing_output(out, view)
        suspects = sorted(view.ancestors(output)) if output else list(range(n))
    else:
        suspects = list(range(n)) if named_crash is None else [named_crash]
    check_all = n <= ALL_ALONE_UP_TO
    order = list(range(n)) if check_all else suspects
    trace = None
    if traceable:
        hook("localise")
        trace = causal.trace(view, target_name, out, got, ref, ref64, target_outputs)
        if trace.get("used"):  # the first divergent operators first; the verdict stays each one alone
            first = [k for k in trace["order"] if k in order]
            order = first + [k for k in order if k not in first]
    if n > MAX_NODES and named_crash is None:  # a large graph: its first divergent operators alone, or nothing
        if not (trace or {}).get("used"):
            out.localised = {"nodes": n, "trace": trace,
                             "note": f"not localised (more than {MAX_NODES} operators, and no trace)"}
            return
        order = [k for k in trace["order"] if k in suspects][:TRACED_CHECKS]
    alone: dict[str, str] = {}
    culprit = culprit_alone = None
    for k in order:
        hook("localise")
        cand = view.alone(k)
        if cand is None:
            alone[view.label(k)] = "not expressible"
            continue
        o = _alone_outcome(cand, target_name, execute)
        alone[view.label(k)] = _status(o)
        if culprit is None and k in suspects and _same_way(out, o):
            culprit, culprit_alone = k, (cand, o)
            if not check_all:
                break
    info = {"nodes": n, "checked": len(alone), "alone": alone, "seconds": 0.0}
    if trace is not None:
        info["trace"] = {key: v for key, v in trace.items() if key != "order"}
    if culprit is not None:
        info.update(operator=view.op(culprit), node=view.label(culprit), multi_operator=False)
        hook("localise")
        info["parameters"] = _parameters(*culprit_alone, target_name, execute)
        if out.status == INCONSISTENT and got is not None and target_outputs is not None:
            hook("localise")
            share = causal.share(view, culprit, target_name, out, got, ref, ref64, target_outputs)
            if share is not None:
                info["share"] = share
    else:
        named = view.producer_of(output) if output else _named_in_message(out.message, view)
        if out.status == INCONSISTENT:
            why = _ill_conditioned(instance, out, ref, ref64, view)
            if why:
                out.status, out.stage, out.symptom = INVALID, "compare", "ill-conditioned"
                out.message = why
            elif named is not None:
                hook("localise")
                earlier, tried = _earliest_wrong(view, named, target_name, execute, instance.seed)
                if tried:
                    info["cut_after"] = {"tried": tried, "wrong": view.label(earlier) if earlier is not None else ""}
                named = earlier if earlier is not None else named
        info.update(operator=view.op(named) if named is not None else instance.op,
                    node=view.label(named) if named is not None else "", multi_operator=True)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    if out.status == CRASH:
        # a culprit's crash is what it says alone (its own view: its inputs are inputs): a converter that goes on
        # after a failed node and fails again downstream (OpenVINO lists both) is then the culprit's one finding,
        # and the reduction's first candidate, the culprit alone, keeps the signature
        info["message"] = (_own_message(*culprit_alone) if culprit_alone is not None else None) \
            or anonymised(out.message, view)
    out.localised = info
    if out.status in (CRASH, INCONSISTENT):
        out.op = info["operator"]


def _own_message(cand, alone: Outcome) -> str | None:
    try:
        return anonymised(alone.message, _view(cand))
    except Exception:  # noqa: BLE001 - the whole graph's message stands
        return None


def _earliest_wrong(view, end: int, target_name: str, execute: Callable, seed: int) -> tuple[int | None, int]:
    """(the earliest operator whose output is already wrong when the graph ends after it, how many cuts were run).

    A multi-operator failure shows at the output, but the operator whose value first goes wrong may sit earlier:
    a float16 round trip a compiler drops is the same bug followed by a LayerNormalization or by nothing. Naming that
    operator (the failing output of the cut after it, which must pass the conditioning check too) makes the two
    graphs one finding, and lets the reduction drop what follows it. Cuts of one operator are the operator alone,
    which passed; the cuts run in topological order, at most PREFIX_CHECKS of them."""
    if not hasattr(view, "prefix"):
        return None, 0
    outs = [x for x in view.names(end) if view.producer_of(x) == end]
    earlier = sorted(view.ancestors(outs[0]) - {end}) if outs else []
    tried = 0
    for k in earlier:
        if tried >= PREFIX_CHECKS:
            break
        if not view.inputs_of(k):
            continue
        cut = view.prefix(k)
        if cut is None:
            continue
        cand, outputs = cut
        tried += 1
        o = _alone_outcome(cand, target_name, execute)
        i = (o.distance or {}).get("output", 0) or 0
        if o.status != INCONSISTENT or not 0 <= i < len(outputs):
            continue
        r, r64 = view.reference_of(outputs[i])
        if r is None or ill_conditioned(cand, i, r, r64, seed + 11) != "":
            continue
        return view.producer_of(outputs[i]), tried
    return None, tried


def _parameters(cand, alone: Outcome, target_name: str, execute: Callable) -> dict:
    """Which parameters of the culprit matter: each reset alone on the culprit fed from the reference
    (dlci.reduce.parameters_that_matter, run here in the worker)."""
    from dlci import findings as F
    from dlci.reduce import parameters_that_matter
    from dlci.targets import get
    modules = get(target_name).modules

    def run(cands):
        return [_alone_outcome(c, target_name, execute).to_dict() for c in cands]
    run.parallel = 1
    try:
        return parameters_that_matter(cand, target_name, F.signature(alone, modules), run=run, modules=modules,
                                      budget=PARAMETER_SECONDS)
    except Exception as e:  # noqa: BLE001 - the culprit stays named without its parameters
        return {"error": f"{type(e).__name__}: {str(e)[:120]}"}


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
    reference, as an instance of the same recipe; the graph exposing intermediate values, and with a node's outputs
    fed from the reference. Values are keyed by name; a node's outputs are its ONNX outputs. The torch view of a
    user's model (dlci.models.fx.FxView) answers the same questions."""

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
        self.nodes = self.base.nodes
        self._v64: dict | None = None

    def __len__(self) -> int:
        return len(self.nodes)

    def op(self, k: int) -> str:
        return _op(self.nodes[k])

    def op_type(self, k: int) -> str:
        return self.nodes[k].op_type

    def label(self, k: int) -> str:
        return _label(self.nodes, k)

    def names(self, k: int) -> list[str]:
        return [x for x in [self.nodes[k].name, *self.nodes[k].output] if x]

    def input_names(self) -> list[str]:
        return list(self.base.feeds)

    def output_nodes(self) -> list[str]:
        return list(self.base.outputs)

    def producer_of(self, value: str | None) -> int | None:
        return self.base.producer.get(value) if value else None

    def ancestors(self, value: str | None) -> set[int]:
        k = self.base.producer.get(value) if value else None
        return self.base.upstream(k) if k is not None else set()

    def inputs_of(self, k: int) -> list[int]:
        return sorted({self.base.producer[x] for x in self.base.reads[k] if x in self.base.producer})

    def values_of(self, k: int) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
        """(name, float32 reference, float64 reference) of node k's numeric outputs."""
        if self._v64 is None:
            self._v64 = _values64(self.base)
        out = []
        for x in self.nodes[k].output:
            v = self.base.values().get(x) if x else None
            if isinstance(v, np.ndarray) and v.dtype.kind in "biufc":
                out.append((x, v, self._v64.get(x)))
        return out

    def _instance(self, model, arrays: dict, op: str | None = None):
        from dlci.reduce.edit import derive
        if self.graph is None:
            call = dict(self.instance.call, localise=False)
            cand = derive(self.instance, self.instance, call=call, arrays=arrays, onnx_model=model)
            cand.op = op or self.instance.op
            return cand
        from dlci.models.graph import Graph, GraphError
        from dlci.models.graph_torch import torch_graph_instance
        try:
            g = Graph.from_onnx(model)
            inputs = [arrays[f"in:{i}"] for i in range(len(g.inputs))]
            return torch_graph_instance(g, inputs, op=op or self.instance.op, source=self.instance.origin.source,
                                        localise=False, seed=self.instance.seed)
        except GraphError:
            return None

    def alone(self, k: int):
        from dlci.reduce.graph import _Unbuildable, cut_model
        try:
            model, arrays = cut_model(self.base, {k})
        except _Unbuildable:
            return None
        return self._instance(model, arrays, op=self.op(k))

    def prefix(self, k: int):
        """The graph cut after node k — k and every node it depends on, with k's outputs (and what the rest of the
        graph reads from the kept nodes) as outputs: (instance, its output value names), or None."""
        from dlci.reduce.graph import _Unbuildable, cut_model
        outs = [x for x in self.nodes[k].output if x]
        if not outs:
            return None
        try:
            model, arrays = cut_model(self.base, self.base.upstream(k))
        except _Unbuildable:
            return None
        cand = self._instance(model, arrays, op=self.op(k))
        return None if cand is None else (cand, [o.name for o in model.graph.output])

    def reference_of(self, value: str) -> tuple:
        """(float32, float64) reference of one value of the graph (either None when unknown)."""
        if self._v64 is None:
            self._v64 = _values64(self.base)
        return self.base.values().get(value), self._v64.get(value)

    def exposed(self, ks: list[int]):
        """(the graph with node ks' numeric outputs after its own, the value name of each added output)."""
        import copy
        from onnx import helper
        from dlci.models.onnx_io import store_onnx
        model = copy.deepcopy(self.base.model)
        shown, added = set(self.base.outputs), []
        for k in ks:
            for x, v, _ in self.values_of(k):
                if x not in shown:
                    model.graph.output.append(helper.make_tensor_value_info(
                        x, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
                    shown.add(x)
                    added.append(x)
        arrays = {key: v for key, v in self.onnx.arrays.items() if not key.startswith("expected:")}
        arrays["model"] = store_onnx(model)
        return self._instance(model, arrays), added

    def fixed(self, k: int):
        """The graph without node k, its outputs fed from the float32 reference; None when node k computes a graph
        output itself (then fixing it fixes that output whole)."""
        from dlci.reduce.graph import _Unbuildable, cut_model
        if any(x in self.base.outputs for x in self.nodes[k].output):
            return None
        try:
            model, arrays = cut_model(self.base, set(range(len(self.nodes))) - {k})
        except _Unbuildable:
            return None
        if [o.name for o in model.graph.output][:len(self.base.outputs)] != self.base.outputs:
            return None
        return self._instance(model, arrays)

    def perturbed(self, i: int, members: int, rel: float, rng) -> list[np.ndarray]:
        return _perturbed(self.instance, i, members, rel, rng)


def _view(instance):
    if instance.call.get("kind") == "torch_program":
        from dlci.models.fx import FxView
        return FxView(instance)
    return _View(instance)


def _values64(base) -> dict:
    """Every value of the base model in float64 (its float32 tensors widened; {} when it cannot be)."""
    from onnx.reference import ReferenceEvaluator
    from dlci.models.onnx_io import widen_to_float64
    wide = widen_to_float64(base.model)
    if wide is None:
        return {}
    feed = {name: (a.astype(np.float64) if a.dtype == np.float32 else a)
            for name, a in zip(base.feeds, base.inst.input_arrays())}
    try:
        with np.errstate(all="ignore"):
            return dict(ReferenceEvaluator(wide).run(None, feed, intermediate=True))
    except Exception:  # noqa: BLE001 - no float64 kernel somewhere: compared without it
        return {}


def _op(node) -> str:
    from dlci.instance.recipe import op_id
    return op_id(node)


def _status(o: Outcome) -> str:
    return o.status if o.status != INCONSISTENT else f"{o.status} ({o.symptom})"


def _label(nodes, k: int) -> str:
    return f"{k}:{nodes[k].op_type}"


def _failing_output(out: Outcome, view) -> str | None:
    outputs = view.output_nodes()
    i = (out.distance or {}).get("output")
    if not isinstance(i, int) or not 0 <= i < len(outputs):
        return outputs[0] if len(outputs) == 1 else None
    return outputs[i]


_WRONG_VALUES = ("value mismatch", "nan mismatch")  # wrong numbers: one family, whichever the inputs show


def _same_way(whole: Outcome, alone: Outcome) -> bool:
    if whole.status == INCONSISTENT:
        # a shape or dtype mismatch alone is another failure than the graph's wrong values (TVM gives a shape-valued
        # output of a lone Shape node back otherwise on both revisions: it must not take the blame)
        return alone.status == INCONSISTENT and (alone.symptom == whole.symptom or (
            alone.symptom in _WRONG_VALUES and whole.symptom in _WRONG_VALUES))
    if alone.status != CRASH:
        return False
    from dlci.findings import normalize_message
    return alone.symptom == whole.symptom and (normalize_message(alone.message) == normalize_message(whole.message)
                                               or alone.stage == whole.stage)


def _named_in_message(message: str, view) -> int | None:
    """A node the target's error message names (ONNX Runtime and TVM by its name, OpenVINO by its output's friendly
    name)."""
    first: dict[int, int] = {}  # node -> where the message first names it: the node it is about comes first
    for k in range(len(view)):
        for name in view.names(k):
            m = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w.])", message) if name else None
            if m:
                first[k] = min(first.get(k, m.start()), m.start())
    return min(first, key=first.get) if first else None


def anonymised(message: str, view) -> str:
    """The message with the graph's own node and value names replaced by the operator they belong to (``<Resize>``:
    a target names a node by its own name or by its output's, as it likes), and its inputs' by ``<input>``: two
    networks failing the same way say the same thing (the dedup signature reads this)."""
    names = {x: "<input>" for x in view.input_names()}
    for k in range(len(view)):
        for x in view.names(k):
            names[x] = f"<{view.op_type(k)}>"
    for name in sorted(names, key=len, reverse=True):
        message = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w.])", names[name], message)
    return message


# -- the conditioning check -----------------------------------------------------------------------------------------

def _ill_conditioned(instance, out: Outcome, ref, ref64, view) -> str:
    """Why the whole graph's failing output cannot be judged at these inputs ("" when it can)."""
    i = (out.distance or {}).get("output", 0) or 0
    if ref64 is None or i >= len(ref):
        return ""
    return ill_conditioned(instance, i, ref[i], ref64[i], instance.seed + 7, view) or ""


def ill_conditioned(instance, i: int, r, r64, seed: int, view=None) -> str | None:
    """The conditioning check of output ``i`` (float32 reference ``r``, float64 ``r64``): why it cannot be judged
    at these inputs — a float64 evaluation of the graph with inputs, weights and every intermediate value moved by
    PERTURBATION fails the oracle as well — or "" when it can; None when there is no float64 evaluation to tell
    (the caller decides what that means). ``view``: a graph view with its own ``perturbed`` (a user's model)."""
    from dlci.oracles.compare import compare_one
    if r64 is None:
        return None
    rng = np.random.default_rng(seed)
    try:
        members = (view.perturbed(i, ENSEMBLE, PERTURBATION, rng) if view is not None
                   else _perturbed(instance, i, ENSEMBLE, PERTURBATION, rng))
    except Exception:  # noqa: BLE001 - no float64 evaluation
        return None
    if not members:
        return None
    r, r64 = np.asarray(r), np.asarray(r64)
    for m in members:
        got = np.asarray(m).astype(r.dtype) if r.dtype.kind == "f" else np.asarray(m)
        if compare_one(got, r, r64) is not None:
            return (f"output {i} is ill-conditioned at these inputs: the float64 reference with inputs, weights and "
                    f"every intermediate value moved by {PERTURBATION:.1e} (relative) fails the oracle as well, "
                    "so the target's difference cannot be told from rounding")
    return ""


def _perturbed(instance, i: int, members: int, rel: float, rng) -> list[np.ndarray]:
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    from dlci.models.onnx_io import feed_names, load_onnx, widen_to_float64
    if instance.call.get("kind") == "torch_graph":
        from dlci.models.graph import graph_of
        model = graph_of(instance).to_onnx()
    else:
        model = load_onnx(instance.arrays)
    wide = widen_to_float64(model)
    if wide is None:
        return []
    names = feed_names(wide)
    _scale_every_value(wide)
    inits = [(j, numpy_helper.to_array(t)) for j, t in enumerate(wide.graph.initializer)]
    out = []
    for _ in range(members):
        feed = {}
        for name, a in zip(names, instance.input_arrays()):
            a = np.asarray(a)
            feed[name] = _jitter(a.astype(np.float64), rng, rel) if a.dtype.kind == "f" else a
        for j, a in inits:
            if a.dtype == np.float64:
                wide.graph.initializer[j].CopyFrom(numpy_helper.from_array(_jitter(a, rng, rel),
                                                                           wide.graph.initializer[j].name))
        with np.errstate(all="ignore"):
            got = ReferenceEvaluator(wide).run(None, feed)
        out.append(np.asarray(got[i]))
    return out


def _scale_every_value(wide) -> None:
    """Each float64 value a node computes goes through a Mul by a scalar 1.0 (an initializer the ensemble jitters
    like the weights): a member moves every intermediate value by a rounding's worth too, not just the inputs, so
    a long float32 sum feeding a function steep at its value (a cosine of a sum of 500 terms) shows as
    ill-conditioned, as its rounding in any order makes it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    try:
        inferred = onnx.shape_inference.infer_shapes(wide)
    except Exception:  # noqa: BLE001 - types unknown: only inputs and weights are moved
        return
    doubles = {vi.name for vi in [*inferred.graph.value_info, *inferred.graph.output]
               if vi.type.tensor_type.elem_type == TensorProto.DOUBLE}
    nodes = []
    for k, node in enumerate(wide.graph.node):
        scaled = []
        for j, y in enumerate(node.output):
            if y in doubles:
                node.output[j] = raw = f"{y}__dlci_raw"
                scale = f"{y}__dlci_scale"
                wide.graph.initializer.append(numpy_helper.from_array(np.array(1.0), scale))
                scaled.append(helper.make_node("Mul", [raw, scale], [y], name=f"{node.name or k}__dlci_scale"))
        kept = onnx.NodeProto()
        kept.CopyFrom(node)
        nodes += [kept, *scaled]
    del wide.graph.node[:]
    wide.graph.node.extend(nodes)


def _jitter(a: np.ndarray, rng, rel: float = PERTURBATION) -> np.ndarray:
    return a * (1.0 + rel * rng.uniform(-1.0, 1.0, a.shape))
