"""One test: one instance through one target, in-process, classified into an Outcome.

Stages: reference (cached per instance), model (form, cached), convert, compile, run (each timed and announced to
``stage_hook`` first so that a sandbox can attribute a segfault to its stage), compare. Many tests of one target
packed into one model: :mod:`dlci.testcase.batch`.
"""
from __future__ import annotations

import keyword
import linecache
import os
import re
import sys
import time
from typing import Callable

import numpy as np

from dlci import models
from dlci.models.outputs import quantized_outputs, shape_only_outputs, uncompared_outputs
from dlci.models.references import exported_reference, reference
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
    """A target output as a numpy array (0-d for scalars): never a Python scalar or a foreign tensor. A complex
    reference given back as (real, imaginary) pairs (torch.onnx's way to write complex tensors) is read as complex."""
    a = np.asarray(x)
    if like is not None and a.dtype == object:
        a = a.astype(like.dtype)
    if like is not None and like.dtype.kind == "c" and a.dtype.kind == "f" and a.shape == (*like.shape, 2):
        a = (a[..., 0] + 1j * a[..., 1]).astype(like.dtype)
    return a


def _invalid(out: Outcome, stage: str, e: BaseException) -> None:
    """The test itself could not be built (reference or model form): not the target's fault."""
    out.status, out.stage, out.symptom = INVALID, stage, type(e.__cause__ or e).__name__
    out.message, out.traceback = first_lines(str(e)), format_exc(e)


_VALUES_PER_LINE = 64   # value classes kept per watched line and test
_KEYWORDS = frozenset(keyword.kwlist) | {"self", "cls", "True", "False", "None"}


def value_class(v) -> str:
    """What a value at a changed line is, as boundary classes (the values the directed search steers toward): None,
    booleans, -1/0/1 and the signs beyond, empty/one/many sequences and whether they hold None or negatives, short
    strings as written (dtype names, modes), other objects by type (a relax Var or a Constant, a dtype)."""
    if isinstance(v, np.generic) and v.dtype.kind in "biuf":  # a numpy scalar counts as the number it is
        v = v.item()
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return repr(v) if -1 <= v <= 1 else "< -1" if v < 0 else "> 1"
    if isinstance(v, float):
        return "nan" if v != v else "inf" if v in (float("inf"), float("-inf")) else "0.0" if v == 0 else \
            "< 0.0" if v < 0 else "> 0.0"
    if isinstance(v, (list, tuple)):
        n = len(v)
        cls = f"{type(v).__name__} of {n if n < 2 else 'many'}"
        head = v[:16]
        if any(x is None for x in head):
            cls += " with None"
        if any(isinstance(x, int) and not isinstance(x, bool) and x < 0 for x in head):
            cls += " with negatives"
        return cls
    if isinstance(v, str):
        return repr(v) if len(v) <= 24 else "str"
    if isinstance(v, dict):
        return f"dict of {len(v) if len(v) < 2 else 'many'}"
    return _typed(v)


def _attr(v, name: str):
    try:
        return getattr(v, name, None)
    except Exception:  # noqa: BLE001 - a property that raises (an FFI object without it)
        return None


def _typed(v) -> str:
    """An object by type, with the dtype and rank it carries or its type annotation does (a tensor; a relax
    expression's ``ty``/``struct_info``): "Var float32 rank 0", "Tensor torch.bfloat16 rank 2"."""
    dtype = ndim = None
    for holder in (v, _attr(v, "ty"), _attr(v, "struct_info")):
        if holder is None or isinstance(holder, (str, bytes)):
            continue
        if dtype is None:
            d = _attr(holder, "dtype")
            if d is not None and not callable(d) and len(str(d)) <= 24:
                dtype = str(d)
        if ndim is None:
            n = _attr(holder, "ndim")
            if isinstance(n, int) and not isinstance(n, bool):
                ndim = n
    out = type(v).__name__
    if dtype:
        out += f" {dtype}"
    if ndim is not None:
        out += f" rank {ndim}" if ndim >= 0 else " rank ?"
    return out


def _watch_names(path: str, lo: int, hi: int) -> tuple[str, ...]:
    """The identifiers a watched statement's lines hold (those bound in the frame are the values it computes on)."""
    text = "".join(linecache.getline(path, ln) for ln in range(lo, hi + 1))
    text = text.split("#", 1)[0] if lo == hi else text
    return tuple(dict.fromkeys(n for n in re.findall(r"[A-Za-z_]\w*", text) if n not in _KEYWORDS))


def _line_tracer(files: frozenset[str], hits: dict[str, set[int]], arcs: dict[str, set] | None = None,
                 values: dict[str, dict[str, set[str]]] | None = None, watch: tuple = ()):
    """A sys.settrace function recording the lines run in ``files`` (resolved paths) only, and with ``arcs`` the
    transitions between them within each frame ((-1: leaving the function), which tell the branch outcomes that
    ran: dlci.directed.goals); other frames are not traced. Code imported through a symlinked path (a checkout's
    package linked into place) counts as its file. ``watch``: (path, first line, last line, *more names)
    statements whose values are recorded into ``values`` (path -> first line -> "name=class", :func:`value_class`) when they start
    and again on the frame's next event (what they computed)."""
    real: dict[str, str] = {}
    last: dict[int, int] = {}  # id(frame) -> its last line
    spans: dict[str, list[tuple[int, int]]] = {}
    extra: dict[tuple[str, int], tuple[str, ...]] = {}  # names a deletion at that statement used
    for path, lo, hi, *deleted in watch:
        spans.setdefault(path, []).append((int(lo), int(hi)))
        extra[(path, int(lo))] = tuple(deleted)
    names: dict[tuple[str, int], tuple[str, ...]] = {}
    after: dict[int, tuple[str, int]] = {}  # id(frame) -> the watched statement it just started

    def note(frame, path: str, lo: int) -> None:
        key = (path, lo)
        if key not in names:
            hi = next(h for a, h in spans[path] if a == lo)
            names[key] = tuple(dict.fromkeys(_watch_names(path, lo, hi) + extra.get(key, ())))
        seen = values.setdefault(path, {}).setdefault(str(lo), set())
        f_locals = frame.f_locals
        for name in names[key]:
            if name in f_locals and len(seen) < _VALUES_PER_LINE:
                try:
                    seen.add(f"{name}={value_class(f_locals[name])}")
                except Exception:  # noqa: BLE001 - a value whose len or compare raises
                    pass

    def local(frame, event, arg):
        if event == "line":
            path = real[frame.f_code.co_filename]
            hits[path].add(frame.f_lineno)
            if arcs is not None:
                prev = last.get(id(frame))
                if prev is not None:
                    arcs.setdefault(path, set()).add((prev, frame.f_lineno))
                last[id(frame)] = frame.f_lineno
            if values is not None and path in spans:
                done = after.pop(id(frame), None)
                if done is not None:
                    note(frame, *done)
                lo = next((a for a, h in spans[path] if a == frame.f_lineno), None)
                if lo is not None:
                    note(frame, path, lo)
                    after[id(frame)] = (path, lo)
        elif event == "return":
            if values is not None:
                done = after.pop(id(frame), None)
                if done is not None:
                    note(frame, *done)
            if arcs is not None:
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
        ref, ref64 = reference(instance)
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
        ref, ref64 = exported_reference(instance, target.form, ref, ref64)

    # (a packed member's exported outputs are checked once the packed model is: dlci.testcase.batch._run_group)
    outputs = [] if exported_later else ref
    lacking = sorted({a.dtype.name for a in [*instance.input_arrays(), *outputs]} & set(target.unsupported_dtypes))
    if lacking:
        out.status, out.stage, out.symptom = UNSUPPORTED, "convert", "dtype"
        out.message = f"{target.name} has no {', '.join(lacking)} tensors"
        return None
    inputs = [np.array(a, copy=True) for a in instance.input_arrays()]  # a target may write into its inputs
    return _Prepared(instance, ref, ref64, model, inputs)


def _target_stages(target, model, inputs, seed: int, out: Outcome, hook, trace_files=(),
                   keep: list | None = None, errors: list | None = None, watch: tuple = (),
                   fingerprint: bool = False) -> list | None:
    """convert / compile / run: the target under test. The outputs, or None with the failure in ``out``.
    ``keep``: receives the compiled model (the device oracle runs it again); ``errors``: the exception raised
    (a packed group's failure is traced to a member from its frames); ``fingerprint``: the converted model's
    fingerprint goes into ``out.model_digest`` (a PR scan compares the revisions' models)."""
    value = model
    for stage in ("convert", "compile", "run"):
        hook(stage)
        models.seed_all(seed)
        t = time.perf_counter()
        hits: dict[str, set[int]] = {}
        arcs: dict[str, set] = {}
        values: dict[str, dict[str, set[str]]] = {}
        tracing = stage == "convert" and bool(trace_files)
        try:
            with models.quiet():
                if tracing:
                    sys.settrace(_line_tracer(frozenset(trace_files), hits, arcs, values, watch))
                if stage == "convert":
                    value = target.convert(value, inputs)
                    if fingerprint:
                        try:
                            out.model_digest = target.fingerprint(value) or ""
                            out.model_nodes = target.graph_nodes(value) or []
                        except Exception:  # noqa: BLE001 - no fingerprint is no comparison, never a failure
                            out.model_digest, out.model_nodes = "", []
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
                out.values = {f: {ln: sorted(v) for ln, v in per.items()} for f, per in values.items()}
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
    return got, compare_outputs(got, ref, ref64, skip_values=shape_only_outputs(instance, len(ref)),
                                ignore=uncompared_outputs(instance),
                                quantized=quantized_outputs(instance, ref), widen=widen)


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
    out.digest = digest(got)  # what the target gave, pass or not: the revisions' outputs are compared by it
    if verdict is not None:
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
            trace_files: tuple[str, ...] = (), watch: tuple = (), fingerprint: bool = False) -> Outcome:
    """Run one test. ``trace_files``: converter source files whose executed lines are recorded while converting
    (``Outcome.coverage``), so a PR scan knows which instances reach the lines it changed; ``watch``: changed
    statements (path, first line, last line) whose values are recorded (``Outcome.values``)."""
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
                               keep=keep if target.on_accelerator else None, watch=watch, fingerprint=fingerprint)
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


_USED_TARGETS: set[str] = set()  # the targets this process has run a test of


def _first_use(target_name: str) -> bool:
    """Whether this is the process's first test of the target (Outcome.cold)."""
    first = target_name not in _USED_TARGETS
    _USED_TARGETS.add(target_name)
    return first


def execute_job(instance: Instance, target_name: str, trace_files: tuple[str, ...] = (), watch: tuple = (),
                fingerprint: bool = False, *, stage_hook: Callable[[str], None] | None = None) -> dict:
    """Entry point for the sandboxed workers (dlci.exec): the Outcome as plain data."""
    return execute(instance, target_name, stage_hook=stage_hook, trace_files=trace_files, watch=watch,
                   fingerprint=fingerprint).to_dict()
