"""One test: one instance through one target, in-process, classified into an Outcome.

Stages: reference (cached per instance), model (form, cached), convert, compile, run (each timed and announced to
``stage_hook`` first so that a sandbox can attribute a segfault to its stage), compare.
"""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dlci import models
from dlci.errors import chain
from dlci.instance import Instance
from dlci.localise import localise, wants_localisation, witness
from dlci.outcome import CRASH, INCONSISTENT, INVALID, PASS, UNSUPPORTED, Outcome, digest
from dlci.targets import get
from dlci.targets._common import format_exc

MESSAGE_LINES = 8


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# location boilerplate of OpenVINO's C++ exceptions: the informative lines come after it
_BOILERPLATE = re.compile(r"^(Exception from src/|Check '.*' failed at |FrontEnd API failed with |"
                          r"Model wasn't fully converted|Summary:\s*$)")


def first_lines(text: str, n: int = MESSAGE_LINES) -> str:
    text = _ANSI.sub("", text)
    if "## Exception summary" in text:  # torch.onnx: the summary names the failing op; the preamble is generic
        text = text.split("## Exception summary", 1)[1]
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not _BOILERPLATE.match(ln.strip())]
    return "\n".join(lines[:n])


def _as_output_array(x, like: np.ndarray | None) -> np.ndarray:
    """A target output as a numpy array (0-d for scalars): never a Python scalar or a foreign tensor."""
    a = np.asarray(x)
    if like is not None and a.dtype == object:
        a = a.astype(like.dtype)
    return a


def _invalid(out: Outcome, stage: str, e: BaseException) -> None:
    """The test itself could not be built (reference or model form): not the target's fault."""
    out.status, out.stage, out.symptom = INVALID, stage, type(e.__cause__ or e).__name__
    out.message, out.traceback = first_lines(str(e)), format_exc(e)


def _line_tracer(files: frozenset[str], hits: dict[str, set[int]], arcs: dict[str, set] | None = None):
    """A sys.settrace function recording the lines run in ``files`` (resolved paths) only, and with ``arcs`` the
    transitions between them within each frame ((-1: leaving the function), which tell the branch outcomes that
    ran: dlci.directed.goals); other frames are not traced. Code imported through a symlinked path (a checkout's
    package linked into place) counts as its file."""
    real: dict[str, str] = {}
    last: dict[int, int] = {}  # id(frame) -> its last line

    def local(frame, event, arg):
        if event == "line":
            path = real[frame.f_code.co_filename]
            hits[path].add(frame.f_lineno)
            if arcs is not None:
                prev = last.get(id(frame))
                if prev is not None:
                    arcs.setdefault(path, set()).add((prev, frame.f_lineno))
                last[id(frame)] = frame.f_lineno
        elif event == "return" and arcs is not None:
            prev = last.pop(id(frame), None)
            if prev is not None:
                arcs.setdefault(real[frame.f_code.co_filename], set()).add((prev, -1))
        return local

    def call(frame, event, arg):
        name = frame.f_code.co_filename
        path = real.get(name)
        if path is None:
            path = real[name] = os.path.realpath(name) if name in files or name.startswith(("/", ".")) else name
        if path in files:
            hits.setdefault(path, set()).add(frame.f_lineno)
            return local
        return None
    return call


class _Prepared:
    """A test up to the target: its references, its model form, its inputs."""

    def __init__(self, instance: Instance, ref, ref64, model, inputs):
        self.instance, self.ref, self.ref64, self.model, self.inputs = instance, ref, ref64, model, inputs


def _prepare(instance: Instance, target, out: Outcome, hook, form: str | None = None) -> _Prepared | None:
    """Reference, model form, the exporter's reference and the dtype check; None when ``out`` is already decided.
    ``form``: build the instance in this form instead of the target's (a batch member, packed later: the exporter's
    reference then comes from the packed model)."""
    if instance.framework not in target.frameworks:
        out.status, out.stage, out.symptom = INVALID, "model", "framework"
        out.message = f"{target.name} does not accept {instance.framework} instances"
        return None

    # reference
    hook("reference")
    t = time.perf_counter()
    try:
        ref, ref64 = models.reference(instance)
        why = witness.spec_violation(instance)
    except Exception as e:
        _invalid(out, "reference", e)
        return None
    finally:
        out.timings["reference"] = time.perf_counter() - t
    if why:  # a generated graph outside the specification tests no target (dlci.localise.witness)
        out.status, out.stage, out.symptom, out.message = INVALID, "reference", "outside the specification", why
        return None

    # model form
    hook("model")
    t = time.perf_counter()
    try:
        model = models.build(instance, form or target.form)
    except Exception as e:
        _invalid(out, "model", e)
        return None
    finally:
        out.timings["model"] = time.perf_counter() - t
    exported_later = instance.framework in target.exporters and (form or target.form) != target.form
    if instance.framework in target.exporters and not exported_later:
        # the instance reaches this target through an exporter: the target is judged against what the exported
        # model means (its own semantics), so an exporter's bug is charged to the exporter, not to this frontend
        ref, ref64 = models.exported_reference(instance, target.form, ref, ref64)

    # (a packed member's exported outputs are checked once the packed model is: dlci.testcase._run_group)
    outputs = [] if exported_later else ref
    lacking = sorted({a.dtype.name for a in [*instance.input_arrays(), *outputs]} & set(target.unsupported_dtypes))
    if lacking:
        out.status, out.stage, out.symptom = UNSUPPORTED, "convert", "dtype"
        out.message = f"{target.name} has no {', '.join(lacking)} tensors"
        return None
    inputs = [np.array(a, copy=True) for a in instance.input_arrays()]  # a target may write into its inputs
    return _Prepared(instance, ref, ref64, model, inputs)


def _target_stages(target, model, inputs, seed: int, out: Outcome, hook, trace_files=(),
                   keep: list | None = None, errors: list | None = None) -> list | None:
    """convert / compile / run: the target under test. The outputs, or None with the failure in ``out``.
    ``keep``: receives the compiled model (the device oracle runs it again); ``errors``: the exception raised
    (a packed group's failure is traced to a member from its frames)."""
    value = model
    for stage in ("convert", "compile", "run"):
        hook(stage)
        models.seed_all(seed)
        t = time.perf_counter()
        hits: dict[str, set[int]] = {}
        arcs: dict[str, set] = {}
        tracing = stage == "convert" and bool(trace_files)
        try:
            with models.quiet():
                if tracing:
                    sys.settrace(_line_tracer(frozenset(trace_files), hits, arcs))
                if stage == "convert":
                    value = target.convert(value, inputs)
                elif stage == "compile":
                    value = target.compile(value)
                    if keep is not None:
                        keep.append(value)
                else:
                    value = target.run(value, [np.array(x, copy=True) for x in inputs])
        except Exception as e:
            out.stage = stage
            out.symptom = type(e).__name__
            out.message, out.traceback = first_lines(str(e)), format_exc(e)
            try:
                unsupported = target.is_unsupported(e, stage)
                harness = target.is_harness_failure(e)
            except Exception:  # a broken classifier must not hide the crash
                unsupported = harness = False
            out.status = INVALID if harness else UNSUPPORTED if unsupported else CRASH
            if errors is not None:
                errors.append(e)
            if harness:
                out.stage = "harness"
            if target.on_accelerator:
                _device_failure(target, e, out)
            return None
        finally:
            if tracing:
                sys.settrace(None)
                out.coverage = {f: sorted(lines) for f, lines in hits.items()}
                out.arcs = {f: sorted(pairs) for f, pairs in arcs.items()}
            out.timings[stage] = time.perf_counter() - t
    return list(value)


def _verdict(prep: _Prepared, target, value: list, widen=None) -> tuple[list, dict | None]:
    """(the target's outputs as arrays in the reference's order, the oracle's verdict or None)."""
    instance, ref, ref64 = prep.instance, prep.ref, prep.ref64
    if target.tflite_outputs and len(ref) > 1:
        try:
            order = models.keras_output_order(instance)
        except Exception:  # noqa: BLE001 - the form converted above; an unreadable signature keeps the order
            order = None
        if order is not None and len(value) == len(order):
            value = [value[k] for k in order]
    from dlci.oracles.compare import compare_outputs
    got = [_as_output_array(g, ref[i] if i < len(ref) else None) for i, g in enumerate(value)]
    return got, compare_outputs(got, ref, ref64, skip_values=models.shape_only_outputs(instance, len(ref)),
                                ignore=models.uncompared_outputs(instance),
                                quantized=models.quantized_outputs(instance, ref), widen=widen)


def _judge(prep: _Prepared, target, value: list, out: Outcome, hook, compiled=None) -> None:
    """Compare the target's outputs with the references (a device target's mismatch: dlci.oracles.device)."""
    hook("compare")
    t = time.perf_counter()
    try:
        widen = None
        got, verdict = _verdict(prep, target, value)
        if verdict is not None and target.on_accelerator:
            # what the target's project allows on its device (read only for a mismatch: OpInfo takes seconds)
            widen = _device_tolerances(target, prep.instance)
            if widen:
                got, verdict = _verdict(prep, target, value, widen)
    except Exception as e:  # an oracle failure is ours, not the target's: the test is invalid
        out.status, out.stage, out.symptom = INVALID, "compare", type(e).__name__
        out.message, out.traceback = first_lines(str(e)), format_exc(e)
        return
    finally:
        out.timings["compare"] = time.perf_counter() - t
    if verdict is None and prep.instance.call.get("search"):  # a searched candidate: how close it came (dlci.evolve)
        from dlci.oracles.fitness import measure
        try:
            out.fitness = measure(got, prep.ref, prep.ref64, prep.instance.seed)
        except Exception:  # noqa: BLE001 - a candidate without a fitness is ranked last, never an error
            out.fitness = {}
    if verdict is not None:
        out.digest = digest(got)
        out.status, out.stage = INCONSISTENT, "compare"
        out.symptom = verdict.get("symptom", "value mismatch")
        out.message = verdict.get("message", "")
        out.distance = verdict.get("distance")
        if target.on_accelerator and compiled is not None:
            _device_rejudge(prep, target, compiled, value, out, widen)


def _device_tolerances(target, instance) -> dict:
    try:
        return target.tolerances(instance)
    except Exception:  # noqa: BLE001 - the project's metadata unreadable: dlci's own tolerances stand
        return {}


def _device_rejudge(prep: _Prepared, target, compiled, value: list, out: Outcome, widen) -> None:
    """A device target's mismatch before it counts: the project's expectation, repeated runs, deterministic mode."""
    from dlci.oracles import device

    def rerun() -> list:
        with models.quiet():
            return list(target.run(compiled, [np.array(x, copy=True) for x in prep.inputs]))

    def deterministic():
        with models.quiet():
            return target.deterministic_run(compiled, [np.array(x, copy=True) for x in prep.inputs])

    t = time.perf_counter()
    try:
        device.rejudge(out, value, rerun, lambda v: _verdict(prep, target, v, widen)[1],
                       expected_to_differ=target.expected_to_differ(prep.instance), deterministic=deterministic)
    except Exception as e:  # a run that fails only when repeated is the device's failure: a crash of stage run
        out.status, out.stage, out.symptom = CRASH, "run", type(e).__name__
        out.message, out.traceback = first_lines(str(e)), format_exc(e)
        _device_failure(target, e, out)
    finally:
        out.timings["device_rejudge"] = time.perf_counter() - t


def _device_failure(target, e: BaseException, out: Outcome) -> None:
    """A device error that poisons the worker's process (CUDA's sticky errors) names itself and retires the worker;
    running out of the worker's share of device memory is an OOM, as on the CPU."""
    try:
        poison = target.device_error(e)
    except Exception:  # noqa: BLE001 - a broken classifier must not hide the crash
        poison = None
    if poison:
        out.status, out.symptom, out.retire_worker = CRASH, poison, poison
    elif out.status == CRASH and (type(e).__name__ == "OutOfMemoryError" or "out of memory" in str(e).lower()):
        out.symptom = "oom"
        share = os.environ.get("DLCI_GPU_MEMORY_MB", "none")
        out.message = f"device out of memory (the worker's share: DLCI_GPU_MEMORY_MB={share})\n" + out.message


def execute(instance: Instance, target_name: str, *, stage_hook: Callable[[str], None] | None = None,
            trace_files: tuple[str, ...] = ()) -> Outcome:
    """Run one test. ``trace_files``: converter source files whose executed lines are recorded while converting
    (``Outcome.coverage``), so a PR scan knows which instances reach the lines it changed."""
    target = get(target_name)
    chosen = (instance.call.get("options") or {}).get(target_name)
    if chosen:  # the entry point's own options, as the instance names them (dlci.targets.base.Target.options)
        target = target.with_options(chosen)
    out = Outcome(instance_id=instance.id, op=instance.op, target=target_name, status=PASS,
                  cold=_first_use(target_name))
    hook = stage_hook or (lambda stage: None)
    t_start = time.perf_counter()
    prep = _prepare(instance, target, out, hook)
    if prep is not None:
        keep: list = []
        value = _target_stages(target, prep.model, prep.inputs, instance.seed, out, hook, trace_files,
                               keep=keep if target.on_accelerator else None)
        if target.on_accelerator:
            try:
                out.device = target.device_name()
            except Exception:  # noqa: BLE001 - a poisoned context cannot even name its device
                out.device = target.device
        if value is not None:
            _judge(prep, target, value, out, hook, compiled=keep[0] if keep else None)
        if wants_localisation(instance, out):  # a graph's failure: which operator, and does it need the others
            localise(instance, target_name, out, prep.ref, prep.ref64,
                     lambda inst, name: execute(inst, name, stage_hook=hook), hook,
                     got=None if value is None else [_as_output_array(g, None) for g in value],
                     target_outputs=target_outputs)
    out.seconds = time.perf_counter() - t_start
    return out


def target_outputs(instance: Instance, target_name: str) -> tuple[list[np.ndarray] | None, Outcome]:
    """The target's own outputs on an instance (its model form converted, compiled and run; nothing judged): what
    dlci.localise.causal measures. None, with the reason in the Outcome, when a stage fails."""
    target = get(target_name)
    out = Outcome(instance_id=instance.id, op=instance.op, target=target_name, status=PASS)
    prep = _prepare(instance, target, out, lambda stage: None)
    if prep is None:
        return None, out
    value = _target_stages(target, prep.model, prep.inputs, instance.seed, out, lambda stage: None)
    return (None if value is None else [_as_output_array(g, None) for g in value]), out


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


_USED_TARGETS: set[str] = set()  # the targets this process has run a test of


def _first_use(target_name: str) -> bool:
    """Whether this is the process's first test of the target (Outcome.cold)."""
    first = target_name not in _USED_TARGETS
    _USED_TARGETS.add(target_name)
    return first


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
    instances exported once, packed, to ONNX), as :func:`dlci.models.exported_reference` makes it of a member's own
    export; None where the member's own reference stands."""
    if not any(p.instance.framework in target.exporters for p in preps) or target.form != "onnx":
        return [None] * len(preps)
    got, got64 = models.evaluate_onnx(packed, [x for p in preps for x in p.inputs])
    out, pos = [], 0
    for p, n in zip(preps, n_out):
        mine64 = got64[pos:pos + n] if got64 is not None else None
        out.append(models.exported_outputs(p.ref, p.ref64, got[pos:pos + n], mine64))
        pos += n
    return out


def execute_job(instance: Instance, target_name: str, trace_files: tuple[str, ...] = (), *,
                stage_hook: Callable[[str], None] | None = None) -> dict:
    """Entry point for the sandboxed workers (dlci.exec): the Outcome as plain data."""
    return execute(instance, target_name, stage_hook=stage_hook, trace_files=trace_files).to_dict()


def execute_batch_job(instances: list[Instance], target_name: str, *,
                      stage_hook: Callable[[str], None] | None = None) -> dict:
    """Entry point for a batch in the sandboxed workers: the Outcomes, in order, as plain data."""
    return {"batch_outcomes": [o.to_dict() for o in execute_batch(instances, target_name, stage_hook=stage_hook)]}
