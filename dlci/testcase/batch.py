"""Many tests of one target in one worker job, converted and compiled together where the target can pack them
(``Target.packer``, :mod:`dlci.models.pack`): :func:`execute_batch`. What is reported is exactly what
:func:`dlci.testcase.execute` reports alone: a packed group that fails as a whole is bisected down to single tests
(group testing, in the packed model where the target can stand in for members' nodes), and only runs alone decide a
failure.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from dlci import models
from dlci.errors import chain
from dlci.instance import Instance
from dlci.models.references import evaluate_onnx, exported_outputs
from dlci.outcome import INVALID, PASS, UNSUPPORTED, Outcome
from dlci.targets import get
from dlci.targets._common import format_exc
from dlci.testcase import _first_use, _judge, _prepare, _Prepared, _target_stages, execute, first_lines


def execute_batch(instances: list[Instance], target_name: str, *,
                  stage_hook: Callable[[str], None] | None = None) -> list[Outcome]:
    """Run many tests of one target, converting and compiling them together where the target can pack them
    (``Target.packer``). What is reported is exactly what :func:`execute` would report alone: a packed group that
    fails as a whole is bisected down to single tests run alone (group testing), and every member that does not
    pass inside its group is run again alone, whose outcome is the one that counts. What comes from a group: passes,
    and members invalid because their own code or nodes failed the packed model's export (:func:`_form_failed`)."""
    target = get(target_name)
    packer = target.packer()
    if packer is None:
        return [execute(i, target_name, stage_hook=stage_hook) for i in instances]
    cold = _first_use(target_name)
    hook = stage_hook or (lambda stage: None)
    results: dict[int, Outcome] = {}
    groups: dict = {}
    for k, inst in enumerate(instances):
        t0 = time.perf_counter()
        out = Outcome(instance_id=inst.id, op=inst.op, target=target_name, status=PASS)
        prep = _prepare(inst, target, out, hook, form=packer.member_form(inst))
        if prep is None:
            out.seconds = time.perf_counter() - t0
            results[k] = out
            continue
        key = packer.key(inst, prep.model)
        groups.setdefault(key if key is not None else ("alone", k), []).append((k, prep, out, time.perf_counter() - t0))
    for group in groups.values():
        _run_group(group, target, packer, hook, results)
    for out in results.values():
        out.cold = out.cold or cold
    return [results[k] for k in range(len(instances))]


# (target, operator) pairs that did not pass alone in this worker, or whose member failed a packed export itself
# (_form_failed): their other tests run alone, not packed (a packed group holding one would fail and be split
# again); the campaign keeps the same across workers
_FAILED_ALONE: set[tuple[str, str]] = set()


def _alone(item, target, hook, results: dict) -> None:
    k, prep, _, _ = item
    out = execute(prep.instance, target.name, stage_hook=hook)
    if out.status != PASS:
        _FAILED_ALONE.add((target.name, prep.instance.op))
    results[k] = out


def _run_group(group: list, target, packer, hook, results: dict) -> None:
    known = [item for item in group if (target.name, item[1].instance.op) in _FAILED_ALONE]
    for item in known:
        _alone(item, target, hook, results)
    group = [item for item in group if item not in known]
    if len(group) <= 1:
        for item in group:
            _alone(item, target, hook, results)
        return
    t0 = time.perf_counter()
    probe = Outcome(instance_id=group[0][1].instance.id, op="", target=target.name, status=PASS)
    preps = [prep for _, prep, _, _ in group]
    try:
        with models.quiet():
            packed, n_in, n_out = packer.pack([p.instance for p in preps], [p.model for p in preps],
                                              [len(p.ref) for p in preps])
            exported = _exported_references(preps, target, packed, n_out)
    except Exception as e:  # noqa: BLE001 - the members cannot share a model (a member the packing form cannot
        # hold, an exporter failing on one of them): the members it names are taken out, or the group is bisected
        # dlci.models.pack.PackFailed: the members whose own code or graph nodes failed it
        raised_by = [group[k] for k in getattr(e, "members", ()) if 0 <= k < len(group)]
        text = "\n".join(str(x) for x in chain(e))
        if not raised_by:
            _split(group, target, packer, hook, results, text)
            return
        for item in raised_by:  # what each does alone: its model form fails to build (dlci.models.pack.culprits)
            _form_failed(item, e, text, len(group), results)
        # the others of their operators run alone (they most often fail the same way, and each would cost another
        # failed packed export to find; alone, each says what it does); the rest is packed again
        ops = {item[1].instance.op for item in raised_by}
        for item in group:
            if item not in raised_by and item[1].instance.op in ops:
                _alone(item, target, hook, results)
        _run_group([item for item in group if item[1].instance.op not in ops], target, packer, hook, results)
        return
    from dlci.models.pack import lone_members
    lone = lone_members(packed, n_out)
    if lone:  # a member whose output reads no input returns it alone as its whole model: it is judged so
        for k in sorted(lone):
            _alone(group[k], target, hook, results)
        _run_group([item for k, item in enumerate(group) if k not in lone], target, packer, hook, results)
        return
    packed_s = time.perf_counter() - t0
    inputs = [x for p in preps for x in p.inputs]
    errors: list = []
    value = _target_stages(target, packed, inputs, preps[0].instance.seed, probe, hook, errors=errors)
    batch = _Batch(group, packed, inputs, n_in, n_out, exported, t0, packed_s)
    if value is None or len(value) != sum(n_out):
        if not _take_out_owners(batch, target, packer, hook, results, probe) \
                and not _take_out_converting(batch, target, packer, hook, results, probe, errors):
            _split(group, target, packer, hook, results, probe.message, probe, batch)
        return
    _judge_members(batch, value, probe, target, hook, results)


@dataclass
class _Batch:
    """A packed group as :func:`_run_group` built it: its members, the packed model and what locates a member's
    inputs and outputs in it."""
    group: list
    packed: Any
    inputs: list
    n_in: list[int]
    n_out: list[int]
    exported: list      # per member, (ref, ref64) from the packed export, or None
    t0: float           # when packing began
    packed_s: float     # seconds packing took


def _judge_members(batch: _Batch, value: list, probe: Outcome, target, hook, results: dict,
                   skip: frozenset = frozenset()) -> None:
    """Each member's outputs of a packed run judged on their own (``skip``: members already decided); one that does
    not pass is run again alone, whose outcome counts."""
    group, n_out, packed_s = batch.group, batch.n_out, batch.packed_s
    judged = len(group) - len(skip)
    share = (time.perf_counter() - batch.t0) / len(group)
    pos = 0
    for index, ((k, prep, out, prepared_s), n, ref) in enumerate(zip(group, n_out, batch.exported)):
        member = value[pos:pos + n]
        pos += n
        if index in skip:
            continue
        out.timings["model"] = out.timings.get("model", 0.0) + packed_s / len(group)
        for stage in ("convert", "compile", "run"):
            out.timings[stage] = probe.timings.get(stage, 0.0) / judged
        out.batch = len(group)
        if ref is not None:
            prep.ref, prep.ref64 = ref
            if {a.dtype.name for a in prep.ref} & set(target.unsupported_dtypes):  # as _prepare says alone
                _alone((k, prep, out, prepared_s), target, hook, results)
                continue
        _judge(prep, target, member, out, hook)
        if out.status != PASS:  # judged alone: a batch never decides a failure
            _alone((k, prep, out, prepared_s), target, hook, results)
            continue
        out.seconds = prepared_s + share
        results[k] = out


def _take_out_owners(batch: _Batch, target, packer, hook, results: dict, probe: Outcome) -> bool:
    """The target called the packed model unsupported and listed what it cannot convert: the members whose own
    graph holds one of those nodes (``Packer.owners``: 'linalg_lu_solve.default' is aten::lu_solve's, which no
    operator name in the message says) are unsupported as they are alone. The others run in the same packed model
    with those nodes stood in for (:func:`_others_standing_in`). False where the form or the message cannot tell,
    or the owners are none."""
    group = batch.group
    names = target.unsupported_nodes(probe.message or "") if probe.status == UNSUPPORTED else set()
    owned = _owners(batch, packer, names)
    if not owned:
        return False
    for k in sorted(owned):
        _unsupported_member(group[k], probe, len(group), results)
    if len(owned) < len(group):
        _others_standing_in(batch, owned, frozenset(names), frozenset(), target, packer, hook, results)
    return True


def _owners(batch: _Batch, packer, names: set[str]) -> frozenset[int]:
    if not names or packer.owners is None:
        return frozenset()
    try:
        return frozenset(packer.owners(batch.packed, batch.n_in, names))
    except Exception:  # noqa: BLE001 - a program the owners' search cannot read: group testing decides
        return frozenset()


def _take_out_converting(batch: _Batch, target, packer, hook, results: dict, probe: Outcome, errors: list) -> bool:
    """The target's converter raised while translating a graph node of one member (dlci.models.pack.
    converting_node): that member runs alone, and the others run in the same packed model with that member's
    nodes stood in for (:func:`_others_standing_in`). False when no member is known."""
    from dlci.models.pack import converting_node
    found = converting_node(errors[0], batch.n_in) if errors and probe.stage == "convert" else None
    if found is None or not 0 <= found[0] < len(batch.group) or len(batch.group) < 2:
        return False
    k, node = found
    _alone(batch.group[k], target, hook, results)
    _others_standing_in(batch, frozenset({k}), frozenset(), _crashed_member_nodes(batch, target, k, node), target,
                        packer, hook, results)
    return True


def _crashed_member_nodes(batch: _Batch, target, k: int, node) -> frozenset:
    """Member k's nodes in the graph the target stands in on (``Target.stand_in_graph``, the one the group
    testing reads too); the graph of the node that crashed the converter where the target names none."""
    from dlci.models.pack import member_nodes
    graph = target.stand_in_graph(batch.packed)
    return member_nodes(node.graph if graph is None else graph, batch.n_in, {k})


def _others_standing_in(batch: _Batch, owned: frozenset, names: frozenset, nodes: frozenset, target, packer,
                        hook, results: dict) -> None:
    """The members not in ``owned`` (decided already) run in the packed model converted again with the nodes the
    target cannot convert (``names``: every node of those functions) and the nodes of members whose node crashed
    the converter (``nodes``) replaced by stand-ins of their shape and type (``Target.standing_in``): no second
    export. The stood-in nodes and everything computed from them belong to ``owned`` (members share no node),
    whose outputs are not read. A conversion that fails again on another member's node decides that member the
    same way and stands it in too; where the target has no stand-ins, or the model fails in a way no member
    explains (a stand-in's consumer may not accept it), the undecided members are packed again."""
    group = batch.group
    from dlci.models.pack import converting_node
    while len(owned) < len(group):
        stand_in = target.standing_in(set(names), nodes)
        if stand_in is None:
            break
        probe = Outcome(instance_id=group[0][1].instance.id, op="", target=target.name, status=PASS)
        errors: list = []
        value = _target_stages(stand_in, batch.packed, batch.inputs, group[0][1].instance.seed, probe, hook,
                               errors=errors)
        if value is not None and len(value) == sum(batch.n_out):
            _judge_members(batch, value, probe, target, hook, results, skip=owned)
            return
        more_names = set(target.unsupported_nodes(probe.message or "")) - names \
            if probe.status == UNSUPPORTED else set()
        more = _owners(batch, packer, more_names) - owned
        if more:
            for k in sorted(more):
                _unsupported_member(group[k], probe, len(group), results)
            owned, names = owned | more, names | more_names
            continue
        found = converting_node(errors[0], batch.n_in) if errors and probe.stage == "convert" else None
        if found is None or found[0] in owned or not 0 <= found[0] < len(group) or len(owned) + 1 >= len(group):
            break
        k, node = found
        _alone(group[k], target, hook, results)
        owned, nodes = owned | {k}, nodes | _crashed_member_nodes(batch, target, k, node)
    _run_group([item for k, item in enumerate(group) if k not in owned], target, packer, hook, results)


def _split(group: list, target, packer, hook, results: dict, failure: str, probe: Outcome | None = None,
           batch: _Batch | None = None) -> None:
    """A packed group failed as a whole. The members whose operator the failure names ("No conversion rule found
    for aten::erfinv", "Unsupported function types ['erfinv.default']") are taken out and the others are packed
    again; when it names none (or all), the group is split in halves (group testing): in the model already
    packed, where the target stands in for a member's nodes (:func:`_halves_standing_in`), else each half packed
    again. A member taken out runs alone, except where the target called the failure "unsupported" and lists the
    member's operator among those it cannot convert (``Target.unsupported_operators``): that is what it says
    alone. Only runs alone decide a failure."""
    named = [item for item in group if _names_operator(failure, item[1].instance.op)]
    if named and len(named) < len(group):
        rest = [item for item in group if item not in named]
        unsupported = target.unsupported_operators(failure) if probe is not None and probe.status == UNSUPPORTED \
            else set()
        for item in named:
            if item[1].instance.op.split("::")[-1] in unsupported:
                _unsupported_member(item, probe, len(group), results)
            else:
                _alone(item, target, hook, results)
        _run_group(rest, target, packer, hook, results)
        return
    if batch is not None and _halves_standing_in(batch, target, hook, results):
        return
    half = len(group) // 2
    _run_group(group[:half], target, packer, hook, results)
    _run_group(group[half:], target, packer, hook, results)


def _halves_standing_in(batch: _Batch, target, hook, results: dict) -> bool:
    """Group testing inside the packed model that failed: a half of the members is converted, compiled and run
    with the nodes of all the others stood in (``Target.standing_in``), and a half that fails is halved again, so
    that no part is exported again. A half that runs has its members judged from that run; a single member
    that fails so runs alone. Members share no node, so a member's failure stays with its own nodes. False,
    with nothing decided, where the target cannot stand in for the members' nodes or the model fails with all of
    them stood in (the failure is in no member's own nodes, or in a stand-in)."""
    from dlci.models.pack import nodes_by_member
    graph = target.stand_in_graph(batch.packed)
    group = batch.group
    if graph is None or target.standing_in(set()) is None or len(group) < 2:
        return False
    by_member = nodes_by_member(graph, batch.n_in)
    nodes = [by_member.get(k, frozenset()) for k in range(len(group))]
    everyone = frozenset(range(len(group)))

    def run(live: frozenset):
        stood = frozenset().union(*(nodes[k] for k in everyone - live))
        probe = Outcome(instance_id=group[0][1].instance.id, op="", target=target.name, status=PASS)
        value = _target_stages(target.standing_in(set(), stood), batch.packed, batch.inputs,
                               group[0][1].instance.seed, probe, hook)
        return (value if value is not None and len(value) == sum(batch.n_out) else None), probe

    if run(frozenset())[0] is None:
        return False

    def test(live: list[int]) -> None:
        value, probe = run(frozenset(live))
        if value is not None:
            _judge_members(batch, value, probe, target, hook, results, skip=everyone - set(live))
        elif len(live) == 1:
            _alone(group[live[0]], target, hook, results)
        else:
            test(live[:len(live) // 2])
            test(live[len(live) // 2:])

    members = list(range(len(group)))  # the whole failed already: its halves first
    test(members[:len(members) // 2])
    test(members[len(members) // 2:])
    return True


def _form_failed(item, exc: BaseException, text: str, size: int, results: dict) -> None:
    """A member whose own code or graph nodes failed the export (or trace) of the packed module its model form
    was part of: exporting it alone fails on the same code or node, so its test is invalid as it would be alone,
    at the model stage, with the exporter's exception as the symptom (``PackFailed.symptom``), without a second
    export of its own. Not a finding: an invalid test is not reported, and a target's failure is still only
    decided alone."""
    k, prep, out, prepared_s = item
    out.status, out.stage = INVALID, "model"
    out.symptom = getattr(exc, "symptom", None) or type(exc).__name__
    out.message = first_lines(f"exporting it packed with {size - 1} other tests: {text}")
    out.traceback, out.batch = format_exc(exc), size
    out.seconds = prepared_s
    _FAILED_ALONE.add((out.target, prep.instance.op))
    results[k] = out


def _unsupported_member(item, probe: Outcome, size: int, results: dict) -> None:
    k, _, out, prepared_s = item
    out.status, out.stage, out.symptom = UNSUPPORTED, probe.stage, probe.symptom
    out.message, out.traceback, out.batch = probe.message, probe.traceback, size
    for stage, seconds in probe.timings.items():
        out.timings[stage] = seconds / size
    out.seconds = prepared_s + sum(probe.timings.values()) / size
    results[k] = out


def _names_operator(text: str, op: str) -> bool:
    """Whether an error text names the operator (aten::erfinv as erfinv, aten.erfinv.default, 'erfinv')."""
    name = op.split("::")[-1].split(".")[0]
    return len(name) > 1 and re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


def _exported_references(preps: list[_Prepared], target, packed, n_out: list[int]) -> list:
    """Per member, (ref, ref64) from the packed model where the members reached it through an exporter (torch
    instances exported once, packed, to ONNX), as :func:`dlci.models.references.exported_reference` makes it of a
    member's own export; None where the member's own reference stands."""
    if not any(p.instance.framework in target.exporters for p in preps) or target.form != "onnx":
        return [None] * len(preps)
    got, got64 = evaluate_onnx(packed, [x for p in preps for x in p.inputs])
    out, pos = [], 0
    for p, n in zip(preps, n_out):
        mine64 = got64[pos:pos + n] if got64 is not None else None
        out.append(exported_outputs(p.ref, p.ref64, got[pos:pos + n], mine64))
        pos += n
    return out


def execute_batch_job(instances: list[Instance], target_name: str, *,
                      stage_hook: Callable[[str], None] | None = None) -> dict:
    """Entry point for a batch in the sandboxed workers: the Outcomes, in order, as plain data."""
    return {"batch_outcomes": [o.to_dict() for o in execute_batch(instances, target_name, stage_hook=stage_hook)]}
