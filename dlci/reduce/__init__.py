"""Reduction of a failing instance: the smallest, simplest instance that still fails **the same way**.

"The same way" is the finding's dedup key: a candidate counts only when it fails and
``dlci.findings.signature(outcome, target.modules)`` equals the signature being reduced, so a reduction never
drifts from one bug to another (a crash elsewhere, an invalid call or a pass are all "not the same failure").
Candidates run in the sandboxed workers through a caller-supplied ``run(candidates) -> [Outcome dict]``
(:func:`engine_runner` builds one over a :class:`dlci.exec.Engine`); a batch runs in parallel there.

Passes, in order, each bounded by the budget (when it is spent the best instance so far is returned):

0. **graph** (models with more than one operator) — delta debugging over the nodes, each candidate a valid model
   whose cut values are fed the data the whole model computed there (:mod:`dlci.reduce.graph`); a user's torch
   model (``torch_program``) is cut to its culprit operator alone instead (:mod:`dlci.reduce.program`), and for
   both, the parameters pass comes next (what a graph finding says about its culprit);
1. **shapes** — all inputs at once first (every dimension to 1, to a quarter, to a half: bisection on the whole
   instance), then each dimension (dimensions of equal size at the same right-aligned position across inputs
   shrink together, so broadcasting stays valid) by a parallel bisection toward 1, then leading axes of size 1
   dropped (rank reduction; whether the op tolerates it is the predicate's call). Inputs are sliced, keeping their
   first elements, so index-like values stay valid when only outer dimensions shrink;
2. **values** — each input (then each float weight) replaced by zeros, ones, minus ones, its signs, or small
   integers (dtype kept), simplest first; arrays with NaN/Inf also try the same with the special values kept;
3. **parameters** — each parameter reset to its default alone (Audee-style localisation): torch keyword arguments
   removed (trailing positional arguments with a default are first passed by name so that each can be reset
   alone; without a readable signature the trailing ones are dropped), ONNX node attributes removed (required
   ones are not tried), keras config keys set to the class's default config. A parameter whose reset gives a
   valid test that no longer fails the same way is in ``params_that_matter``; one whose reset makes the call
   itself invalid is in ``params_required``;
4. **inputs** — optional tensor arguments (trailing positional ones, keyword ones, trailing ONNX node inputs)
   dropped.

The result is re-run once more (``confirmed``). ``reduce_instance`` never raises for an odd recipe or a broken
run: it returns what it has (at worst the original) with ``notes`` saying why.
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from dlci import findings as F
from dlci.instance import Instance
from dlci.instance.recipe import has_tensor
from dlci.outcome import INVALID, Outcome
import dlci.reduce.edit as E
import dlci.reduce.graph as G
from dlci.reduce.program import program_pass

__all__ = ["Reduction", "reduce_instance", "engine_runner", "same_failure", "parameters_that_matter"]

RunFn = Callable[[list[Instance]], list[dict]]
_INTROSPECT_CACHE: dict[str, dict] = {}


@dataclass
class Reduction:
    original: Instance
    reduced: Instance
    signature: str
    target: str
    steps: list[dict] = field(default_factory=list)  # accepted edits {"kind", "what"}; graph|shape|values|param|input
    tried: int = 0              # candidate instances run (the initial check and the confirmation included)
    seconds: float = 0.0
    confirmed: bool = False     # the reduced instance, re-run once more, failed with the same signature
    params_that_matter: list[str] = field(default_factory=list)  # reset -> valid test without this failure
    before: dict = field(default_factory=dict)  # {"elements", "inputs", "params", "rank_max", "operators"}
    after: dict = field(default_factory=dict)
    params_required: list[str] = field(default_factory=list)     # reset -> the call itself is invalid
    inputs_that_matter: list[str] = field(default_factory=list)  # optional inputs whose removal loses the failure
    outcome: dict | None = None  # the confirming run's Outcome dict (message, distance of the reduced failure)
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.reduced is not self.original

    def to_dict(self) -> dict:
        """JSON form (instances by id)."""
        return {"original": self.original.id, "reduced": self.reduced.id, "signature": self.signature,
                "target": self.target, "steps": self.steps, "tried": self.tried, "seconds": round(self.seconds, 2),
                "confirmed": self.confirmed, "params_that_matter": self.params_that_matter,
                "params_required": self.params_required, "inputs_that_matter": self.inputs_that_matter,
                "before": self.before, "after": self.after, "notes": self.notes}


def same_failure(outcome: dict | None, signature: str, modules: tuple[str, ...] = ()) -> bool:
    """The predicate: the outcome is a failure with exactly this signature."""
    if not isinstance(outcome, dict):
        return False
    try:
        o = Outcome.from_dict(outcome)
        return F.is_failure(o) and F.signature(o, tuple(modules)) == signature
    except Exception:  # noqa: BLE001 - a malformed outcome is not the same failure
        return False


# -- running candidates ------------------------------------------------------------------------------------

def engine_runner(engine, target: str, timeout: float | None = None,
                  func: str = "dlci.testcase:execute_job") -> RunFn:
    """``run(candidates)`` over a :class:`dlci.exec.Engine`: each candidate is a test job (the target's
    ``job_func``) on ``target``; they run in parallel on the engine's workers; Outcome dicts come back in order (an
    interrupted run gives INVALID "interrupted" outcomes and sets ``run.interrupted``)."""
    from dlci.exec import Job
    seq = itertools.count(1)

    def run(candidates: list[Instance]) -> list[dict]:
        jobs = [Job(id=f"reduce{next(seq)}:{c.id}@{target}", func=func, args=(c, target),
                    instance_id=c.id, op=c.op, target=target, timeout=timeout, affinity=f"reduce:{c.id}")
                for c in candidates]
        results: dict[str, dict] = {}
        info = engine.run(jobs, lambda job, r: results.__setitem__(job.id, r))
        if getattr(info, "interrupted", False) and getattr(info, "reason", "") in ("SIGTERM", "SIGINT"):
            run.interrupted = True
        return [results.get(j.id) or Outcome(j.instance_id, j.op, target, status=INVALID, stage="harness",
                                             symptom="interrupted", message="no result").to_dict() for j in jobs]

    def introspect(request: dict) -> dict | None:
        job = Job(id=f"reduce{next(seq)}:introspect", func="dlci.reduce._introspect:job", args=(request,),
                  timeout=max(60.0, timeout or 0.0), affinity="reduce:introspect")
        results: list[dict] = []
        engine.run([job], lambda _j, r: results.append(r))
        return results[0] if results and results[0].get("ok") else None

    run.parallel = engine.workers  # type: ignore[attr-defined]
    run.interrupted = False  # type: ignore[attr-defined]
    run.introspect = introspect  # type: ignore[attr-defined]
    return run


def _introspect_subprocess(request: dict, timeout: float) -> dict | None:
    from dlci.exec import cancel, interp
    from dlci.exec.engine import worker_env
    from dlci.reduce._introspect import MARKER
    try:   # cancel.run: a process the converter's code leaves behind does not hold the answer up
        proc = cancel.run(interp.command("dlci.reduce._introspect"), input=json.dumps(request),
                          timeout=max(5.0, timeout), env=interp.env(worker_env()), cwd=interp.neutral_dir())
    except (subprocess.TimeoutExpired, OSError):
        return None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except ValueError:
                return None
    return None


# -- the search --------------------------------------------------------------------------------------------

class _Search:
    def __init__(self, original: Instance, target: str, signature: str, run: RunFn, modules: tuple[str, ...],
                 budget: float, t0: float):
        self.original, self.target, self.signature = original, target, signature
        self.run_fn, self.modules = run, tuple(modules)
        self.t0, self.deadline = t0, t0 + max(0.0, float(budget))
        self.parallel = max(1, int(getattr(run, "parallel", 2) or 1))
        self.current = original
        self.steps: list[dict] = []
        self.notes: list[str] = []
        self.tried = 0
        self.verdict: dict[str, bool] = {}   # candidate id -> failed the same way
        self.status: dict[str, str] = {}     # candidate id -> outcome status
        self.outcome: dict[str, dict] = {}
        self.batch_seconds = 0.0             # the slowest batch so far: what one more batch may cost
        self.broken = False
        self.matter: list[str] = []
        self.required: list[str] = []
        self.inputs_matter: list[str] = []
        self.accept_resets = True  # False: every reset is tried on the instance as given, none is kept
        self.irrelevant: list[str] = []  # resets that still fail the same way (when none is kept)

    # time
    def can_run(self) -> bool:
        if self.broken or getattr(self.run_fn, "interrupted", False):
            return False
        # one more batch, then the confirmation run, must still fit
        return time.monotonic() + 2 * self.batch_seconds <= self.deadline

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # running
    def execute(self, cands: list[Instance]) -> list[dict | None]:
        t = time.monotonic()
        try:
            outs = list(self.run_fn(list(cands)))
        except Exception as e:  # noqa: BLE001 - a broken runner ends the search, not the caller
            self.broken = True
            self.note(f"run failed: {type(e).__name__}: {e}")
            return [None] * len(cands)
        self.batch_seconds = max(self.batch_seconds, time.monotonic() - t)
        self.tried += len(cands)
        outs += [None] * (len(cands) - len(outs))
        return outs[:len(cands)]

    def evaluate(self, cands: Sequence[Instance | None]) -> list[bool | None]:
        """Same failure? for each candidate (None: not run, out of time); cached by content id."""
        todo: list[Instance] = []
        for c in cands:
            if c is not None and c.id not in self.verdict and all(c.id != t.id for t in todo):
                todo.append(c)
        if todo:
            if not self.can_run():
                return [self.verdict.get(c.id) if c is not None else False for c in cands]
            for c, out in zip(todo, self.execute(todo)):
                if not isinstance(out, dict):
                    continue  # no result (interrupted): not cached, may be tried again
                self.verdict[c.id] = same_failure(out, self.signature, self.modules)
                self.status[c.id] = str(out.get("status", ""))
                self.outcome[c.id] = out
        return [False if c is None else self.verdict.get(c.id) for c in cands]

    def first(self, labelled: list[tuple[str, Instance | None]]) -> tuple[str, Instance] | None:
        """The first candidate (in preference order) that fails the same way; batches of ``parallel``."""
        labelled = [(label, c) for label, c in labelled if c is not None and c.id != self.current.id]
        for k in range(0, len(labelled), self.parallel):
            chunk = labelled[k:k + self.parallel]
            res = self.evaluate([c for _, c in chunk])
            for (label, c), ok in zip(chunk, res):
                if ok:
                    return label, c
            if any(r is None for r in res):
                return None
        return None

    def accept(self, kind: str, what: str, cand: Instance) -> None:
        self.current = cand
        self.steps.append({"kind": kind, "what": what})

    def build(self, fn, *args) -> Instance | None:
        """A candidate from the current instance, or None (the edit does not apply, or changes nothing)."""
        try:
            cand = fn(self.original, self.current, *args)
            return None if cand is None or cand.id == self.current.id else cand
        except Exception as e:  # noqa: BLE001 - an edit this recipe cannot take: skipped
            self.note(f"{getattr(fn, '__name__', 'edit')} skipped: {type(e).__name__}: {e}")
            return None

    # introspection (where the framework is importable)
    def introspect(self, request: dict, libs: tuple[str, ...]) -> dict | None:
        key = json.dumps(request, sort_keys=True, default=str)
        if key in _INTROSPECT_CACHE:
            return _INTROSPECT_CACHE[key]
        answer = None
        try:
            if all(lib in sys.modules for lib in libs):
                from dlci.reduce._introspect import answer as local
                answer = local(request)
            elif hasattr(self.run_fn, "introspect"):
                answer = self.run_fn.introspect(request)
            elif self.can_run():
                answer = _introspect_subprocess(request, min(180.0, self.deadline - time.monotonic()))
        except Exception as e:  # noqa: BLE001
            self.note(f"introspection failed: {type(e).__name__}: {e}")
        if answer is None:
            self.note("parameter names/defaults unavailable: positional parameters only dropped from the end")
            return None
        _INTROSPECT_CACHE[key] = answer
        return answer

    # -- localisation: one reset at a time ---------------------------------------------------------------------
    def localize(self, kind: str, names: list[str], build: Callable[[str], Instance | None],
                 what: Callable[[str], str], matter: list[str], required: list[str] | None) -> None:
        pending = list(names)
        while pending and self.can_run():
            chunk = pending[:self.parallel]
            cands = [build(n) for n in chunk]
            res = self.evaluate(cands)
            first_ok = next((k for k, r in enumerate(res) if r), None) if self.accept_resets else None
            for k, (name, cand, ok) in enumerate(zip(chunk, cands, res)):
                if first_ok is not None and k > first_ok:
                    break  # tested against the instance before the accepted reset: tried again on the new one
                if ok is None and cand is not None:
                    return  # out of time
                pending.remove(name)
                if cand is None:
                    continue
                if ok and not self.accept_resets:
                    self.irrelevant.append(name)
                elif ok:
                    self.accept(kind, what(name), cand)
                elif required is not None and self.status.get(cand.id) == INVALID:
                    required.append(name)
                else:
                    matter.append(name)


# -- passes ------------------------------------------------------------------------------------------------

def _shape_pass(s: _Search) -> None:
    # 1. the whole instance at once: every dimension to 1, to a quarter, to a half (repeated while it works)
    while s.can_run():
        shapes = [sp.shape for sp in s.current.inputs]
        cands = []
        for label, f in (("1", lambda d: 1), ("1/4", lambda d: max(1, d // 4)), ("1/2", lambda d: max(1, d // 2))):
            sizes = {(i, a): f(d) for i, shape in enumerate(shapes) for a, d in enumerate(shape) if d > 1}
            if sizes:
                cands.append((label, s.build(E.resize, sizes)))
        before = E.describe_shape(s.current)
        hit = s.first(cands)
        if hit is None:
            break
        s.accept("shape", f"every dimension to {hit[0]}: {before} -> {E.describe_shape(hit[1])}", hit[1])

    # 2. each dimension group, bisected toward 1 (probes in parallel)
    done: set[frozenset] = set()
    while s.can_run():
        groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for i, sp in enumerate(s.current.inputs):
            for a, d in enumerate(sp.shape):
                if d > 1:
                    groups.setdefault((len(sp.shape) - a, d), []).append((i, a))
        todo = sorted(((size, members) for (_, size), members in groups.items() if frozenset(members) not in done),
                      key=lambda g: -g[0])
        if not todo:
            break
        size, members = todo[0]
        done.add(frozenset(members))
        _bisect(s, members, size)

    # 3. rank: leading axes of size 1 dropped
    while s.can_run():
        ones = [i for i, sp in enumerate(s.current.inputs) if sp.shape and sp.shape[0] == 1]
        if not ones:
            break
        cands = [("every input", s.build(E.squeeze_leading, ones))] if len(ones) > 1 else []
        cands += [(f"in:{i}", s.build(E.squeeze_leading, [i])) for i in ones]
        before = E.describe_shape(s.current)
        hit = s.first(cands)
        if hit is None:
            break
        s.accept("shape", f"leading axis of size 1 dropped ({hit[0]}): {before} -> {E.describe_shape(hit[1])}",
                 hit[1])


def _bisect(s: _Search, members: list[tuple[int, int]], size: int) -> None:
    lo, hi = 1, size  # hi fails the same way (the current instance)
    nprobe = max(2, s.parallel)
    where = ", ".join(f"in:{i} axis {a}" for i, a in members)
    while lo < hi and s.can_run():
        probes = sorted({lo} | {lo + (hi - lo) * k // nprobe for k in range(1, nprobe)})
        probes = [p for p in probes if p < hi]
        cands = [s.build(E.resize, {m: p for m in members}) for p in probes]
        before = E.describe_shape(s.current)
        res = s.evaluate(cands)
        ok = [p for p, r in zip(probes, res) if r]
        if ok:
            m = min(ok)
            cand = cands[probes.index(m)]
            s.accept("shape", f"{where}: {hi} -> {m}: {before} -> {E.describe_shape(cand)}", cand)
            below = [p for p, r in zip(probes, res) if p < m and r is False]
            lo, hi = (max(below) + 1 if below else lo), m
        elif any(r is None for r in res):
            return
        else:
            lo = max(probes) + 1


def _values_pass(s: _Search) -> None:
    names = [f"in:{i}" for i in range(len(s.current.inputs))]
    names += sorted(k for k, v in s.current.arrays.items()
                    if k.startswith(E.WEIGHT_PREFIXES) and np.asarray(v).dtype.kind == "f")
    for name in names:
        if not s.can_run():
            return
        if name not in s.current.arrays:
            continue
        options = E.simpler_values(s.current.arrays[name])
        hit = s.first([(label, s.build(E.with_array, name, v)) for label, v in options])
        if hit is not None:
            s.accept("values", f"{name} -> {hit[0]}", hit[1])


def _value_text(v: Any) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _params_pass(s: _Search) -> None:
    kind = s.current.call.get("kind")
    if kind in ("torch_fn", "torch_module"):
        _torch_params(s, kind)
    elif kind == "onnx_model":
        attrs = E.onnx_attribute_names(s.current)
        was = dict(s.current.params)
        names = [n for n, required in attrs if not required]
        s.localize("param", names, lambda n: s.build(E.onnx_drop_attribute, n),
                   lambda n: f"attribute {n} removed (was {_value_text(was.get(n))})", s.matter, s.required)
    elif kind == "keras_layer":
        call = s.current.call
        info = s.introspect({"keras": [[call["cls"], call.get("config", {})]]}, ("keras",))
        from dlci.reduce._introspect import keras_key
        entry = (info or {}).get("keras", {}).get(keras_key(call["cls"], call.get("config", {})))
        if not entry:
            s.note("keras defaults unavailable: config not reset")
            return
        defaults, required = entry["defaults"], set(entry["required"])
        config = call.get("config", {})
        names = [k for k in config if k not in ("name", "trainable", "dtype") and k not in required
                 and k in defaults and config[k] != defaults[k]]
        s.localize("param", names, lambda n: s.build(E.keras_reset, n, defaults[n]),
                   lambda n: f"config {n} reset to {_value_text(defaults[n])} (was {_value_text(config[n])})",
                   s.matter, s.required)
    else:
        s.note(f"recipe kind {kind!r}: no parameter pass")


def _torch_params(s: _Search, kind: str) -> None:
    # which callable's signature names the positional arguments, and from which index they may move
    # (torch_fn: the function, from the second argument on; torch_module: the constructor's arguments)
    path = s.current.call.get("fn" if kind == "torch_fn" else "cls", "")
    args_key, kwargs_key, first = "args", "kwargs", (1 if kind == "torch_fn" else 0)
    args = s.current.call.get(args_key, [])
    info = None
    if len(args) > first and any(not has_tensor(a) for a in args[first:]):
        answer = s.introspect({kind: [path]}, ("torch",))
        info = (answer or {}).get(kind, {}).get(path)
    if info:
        named = E.name_positionals(s.current.call, args_key, kwargs_key, info, first)
        if named is not None and s.can_run():
            new_call, moved = named
            try:
                cand = E.derive(s.original, s.current, call=new_call)
            except Exception as e:  # noqa: BLE001
                s.note(f"naming positional arguments failed: {type(e).__name__}: {e}")
                cand = None
            if cand is not None:
                ok = s.evaluate([cand])[0]
                if ok:
                    s.accept("param", "positional arguments passed by name: " + ", ".join(moved), cand)
                else:
                    s.note("passing positional arguments by name changed the outcome: kept positional")
    defaults = {p["name"]: p["has_default"] for p in info} if info else {}
    call = s.current.call
    was = dict(call.get(kwargs_key, {}))
    names = [k for k, v in was.items() if not has_tensor(v) and defaults.get(k, True)]
    s.localize("param", names, lambda n: s.build(E.drop_kwarg, kwargs_key, n),
               lambda n: f"{n} reset to its default (was {_value_text(was[n])})", s.matter, s.required)
    if kind == "torch_module":
        fwas = dict(s.current.call.get("forward_kwargs", {}))
        fnames = [k for k, v in fwas.items() if not has_tensor(v)]
        s.localize("param", [f"forward.{k}" for k in fnames],
                   lambda n: s.build(E.drop_kwarg, "forward_kwargs", n.split(".", 1)[1]),
                   lambda n: f"{n} reset to its default (was {_value_text(fwas[n.split('.', 1)[1]])})",
                   s.matter, s.required)
    # trailing positional arguments that could not be passed by name: dropped from the end while that works
    while s.can_run():
        args = s.current.call.get(args_key, [])
        idx = len(args) - 1
        if idx < first or has_tensor(args[idx]):
            break
        if info and (idx >= len(info) or not info[idx]["has_default"]):
            break
        name = f"arg{idx}"
        value = args[idx]
        cand = s.build(E.drop_last_positional, args_key, first)
        if cand is None:
            break
        ok = s.evaluate([cand])[0]
        if ok is None:
            break
        if ok and not s.accept_resets:
            s.irrelevant.append(name)
            break  # the next one back would be tried with this one reset: not alone any more
        if ok:
            s.accept("param", f"{name} reset to its default (was {_value_text(value)})", cand)
            continue
        (s.required if s.status.get(cand.id) == INVALID else s.matter).append(name)
        break


def _inputs_pass(s: _Search) -> None:
    def build(label: str) -> Instance | None:
        for lab, where, key in E.droppable_inputs(s.current):
            if lab == label:
                return s.build(E.drop_input, where, key)
        return None

    tried: set[str] = set()
    while s.can_run():
        labels = [lab for lab, _, _ in E.droppable_inputs(s.current) if lab not in tried]
        if not labels:
            return
        label = labels[0]
        tried.add(label)  # after a drop the others are renumbered: new labels, tried in turn
        s.localize("input", [label], build, lambda n: f"optional input {n} dropped", s.inputs_matter, None)


# -- entry point -------------------------------------------------------------------------------------------

def reduce_instance(instance: Instance, target: str, signature: str, *, run: RunFn,
                    modules: tuple[str, ...] = (), budget: float = 60.0) -> Reduction:
    """Reduce ``instance`` while it still fails on ``target`` with ``signature``; see the module docstring.

    ``run(candidates)`` runs a batch of instances on ``target`` and returns their Outcome dicts in order
    (:func:`engine_runner`; its ``parallel`` attribute, default 2, sets the batch size). ``modules``: the target's
    packages, as for :func:`dlci.findings.signature`. ``budget``: seconds for the search (the confirmation run is
    kept inside it when earlier runs say how long one takes). Never raises for a bad recipe or a failing runner.
    """
    t0 = time.monotonic()
    try:
        before = _metrics(instance)
    except Exception:  # noqa: BLE001
        before = {}
    red = Reduction(original=instance, reduced=instance, signature=signature, target=target, before=before,
                    after=dict(before))
    s = None
    try:
        s = _Search(instance, target, signature, run, modules, budget, t0)
        first = s.execute([instance])[0]
        red.outcome = first
        if not same_failure(first, signature, s.modules):
            got = "no result" if first is None else \
                f"{first.get('status')} ({F.signature(Outcome.from_dict(first), s.modules)})"
            s.note(f"the instance does not fail with this signature (got {got}): not reduced")
            return _finish(red, s, t0, confirmed=False)
        s.verdict[instance.id] = True
        # a graph cut to the operator its failure is localised to names the parameters that matter first (what a
        # graph finding says about its culprit, while the budget is fresh); single operators shrink first
        params_first = before.get("operators", 1) > 1
        for name, fn in (("graph", G.graph_pass), ("program", program_pass),
                         *((("parameters", _params_pass),) if params_first else ()),
                         ("shapes", _shape_pass), ("values", _values_pass),
                         *((("parameters", _params_pass),) if not params_first else ()), ("inputs", _inputs_pass)):
            if not s.can_run():
                s.note(f"budget spent before the {name} pass")
                break
            _run_pass(s, name, fn)
        # simpler values or fewer parameters often let the shapes shrink further: one more shape pass
        if any(st["kind"] not in ("shape", "graph") for st in s.steps) and s.can_run():
            _run_pass(s, "shapes", _shape_pass)
        # confirmation: one more run of the result
        confirmed = False
        if not s.broken and not getattr(run, "interrupted", False):
            out = s.execute([s.current])[0]
            confirmed = same_failure(out, signature, s.modules)
            red.outcome = out if out is not None else red.outcome
            if not confirmed:
                s.note("the reduced instance did not fail the same way when re-run: use the original")
        return _finish(red, s, t0, confirmed=confirmed)
    except Exception as e:  # noqa: BLE001 - never raise to the campaign
        red.notes.append(f"reduction failed: {type(e).__name__}: {e}")
        if s is not None:
            return _finish(red, s, t0, confirmed=False, keep_current=False)
        red.seconds = time.monotonic() - t0
        return red


def parameters_that_matter(instance: Instance, target: str, signature: str, *, run: RunFn,
                           modules: tuple[str, ...] = (), budget: float = 30.0) -> dict:
    """Audee's parameter localisation: each parameter of a failing single-operator instance reset to its default
    on its own, every other parameter as the instance has it (the parameters pass, with no reset kept); {"matter":
    those whose reset gives a valid test without this failure, "required": those whose reset makes the call invalid,
    "irrelevant": those whose reset still fails the same way}. dlci.localise runs it in the worker on a
    graph's culprit, fed from the reference."""
    s = _Search(instance, target, signature, run, modules, budget, time.monotonic())
    s.verdict[instance.id] = True
    s.accept_resets = False
    _run_pass(s, "parameters", _params_pass)
    return {"matter": list(dict.fromkeys(s.matter)), "required": list(dict.fromkeys(s.required)),
            "irrelevant": list(dict.fromkeys(s.irrelevant))}


def _metrics(inst: Instance) -> dict:
    if inst.call.get("kind") == "torch_program":
        from dlci.models.fx import operators
        return {**E.metrics(inst), "operators": operators(inst)}
    return {**E.metrics(inst), "operators": G.operators(inst)}


def _run_pass(s: _Search, name: str, fn) -> None:
    try:
        fn(s)
    except Exception as e:  # noqa: BLE001 - an odd recipe: keep what the other passes achieve
        s.note(f"{name} pass stopped: {type(e).__name__}: {e}")


def _finish(red: Reduction, s: _Search, t0: float, *, confirmed: bool, keep_current: bool = True) -> Reduction:
    if keep_current and s.current is not s.original:
        red.reduced = s.current
        red.steps = list(s.steps)
    red.tried = s.tried
    red.confirmed = confirmed
    red.params_that_matter = list(dict.fromkeys(s.matter))
    red.params_required = list(dict.fromkeys(s.required))
    red.inputs_that_matter = list(dict.fromkeys(s.inputs_matter))
    red.notes = list(dict.fromkeys(red.notes + s.notes))
    try:
        red.after = _metrics(red.reduced)
    except Exception:  # noqa: BLE001
        red.after = dict(red.before)
    red.seconds = time.monotonic() - t0
    return red
