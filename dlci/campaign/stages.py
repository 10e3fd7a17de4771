"""The stages of a campaign, each a function with typed input and output:

plan -> execute (every failure re-run once before it counts: confirm) -> reduce -> collect (confirmed signatures
become findings) -> [attribute: PR mode, dlci.scan] -> reproduce (reproducers rendered and run alone) -> report.

``dlci.campaign.run`` composes them for an explicit run; ``dlci.scan`` composes them with its own planner, the
head revision's environment and base attribution.
"""
from __future__ import annotations

import json
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from dlci.campaign.options import RunOptions
from dlci.campaign.schedule import BatchFiller, CostAware
from dlci.campaign.state import Campaign
from dlci.exec import Engine, Job
from dlci.findings import Finding
from dlci.instance import Instance, family
from dlci.outcome import INCONSISTENT, PASS, Outcome
from dlci.plan import balanced
from dlci.report.document import Report

BATCH_JOB = "dlci.testcase:execute_batch_job"  # many tests of one target, packed (dlci.testcase.execute_batch)

Route = Callable[[Instance], Iterable[str]]  # instance -> the targets it goes to


@dataclass(frozen=True)
class Test:
    instance: Instance
    target: str


def plan(instances: Sequence[Instance], targets: dict, *, order: Callable[[Sequence[Instance]], list] | None = None,
         route: Route | None = None) -> list[Test]:
    """The tests to run, most valuable first: the instances in OPERA's diversity order (or ``order``'s), each on the
    targets that accept its framework (and, with ``route``, that it is sent to)."""
    tests = []
    for inst in (order or balanced)(list(instances)):
        wanted = set(route(inst)) if route else None
        for name, target in targets.items():
            if inst.framework in target.frameworks and (wanted is None or name in wanted):
                tests.append(Test(inst, name))
    return tests


def open_engine(options: RunOptions, targets: dict, *, env: dict | None = None, log_dir: Path | None = None) -> Engine:
    """The sandboxed workers a campaign runs in (``env``: the revision's environment in PR mode)."""
    warm = sorted({m for t in targets.values() for m in t.warm_imports})
    gpus, gpu_memory = [], None
    probes = {t.probe for t in targets.values() if getattr(t, "probe", None)}
    if probes:  # device targets: the workers share the runner's GPUs and their memory (dlci.devices)
        from dlci.devices import worker_gpus
        gpus, gpu_memory = worker_gpus(probes)
    return Engine(workers=options.workers, timeout=options.timeout, memory_mb=options.memory_mb, warm_imports=warm,
                  env=env, log_dir=str(log_dir or options.out / "logs"), gpus=gpus, gpu_memory_mb=gpu_memory)


class Steered:
    """The tests in plan order, until one of them runs a changed line (PR mode): from then on, every other test comes
    from the families (``dlci.instance.family``) that did, in turn, so the way of presenting an operator that reaches
    the change is tried on the other touched operators before the budget runs out, while the plan order goes on.
    Tests that would only repeat what passed already (the same family, operator and target ran the very same
    converter lines, passing, SATURATED times) wait until everything else has run."""

    SATURATED = 2  # passing runs with one converter-line trace before more of the same wait

    def __init__(self, tests: Sequence[Test]):
        self.tests = list(tests)
        self.taken = [False] * len(self.tests)
        self.pending: dict[tuple, deque] = {}
        for n, t in enumerate(self.tests):
            self.pending.setdefault(family(t.instance), deque()).append(n)
        self.hot: list[tuple] = []
        self.pos = 0
        self.turn = 0
        self.traces: dict[tuple, Counter] = {}  # (family, operator, target) -> passing traces seen
        self.deferred: deque = deque()

    def heat(self, inst: Instance) -> None:
        fam = family(inst)
        if fam not in self.hot:
            self.hot.append(fam)

    @staticmethod
    def _key(test: Test) -> tuple:
        return family(test.instance), test.instance.op, test.target

    def observe(self, test: Test, coverage: dict, passed: bool) -> None:
        """A test's converter-line trace: passing runs of one trace saturate their (family, operator, target)."""
        if passed and coverage:
            trace = hash(tuple(sorted((f, tuple(lines)) for f, lines in coverage.items())))
            self.traces.setdefault(self._key(test), Counter())[trace] += 1

    def _saturated(self, test: Test) -> bool:
        seen = self.traces.get(self._key(test))
        return bool(seen) and max(seen.values()) >= self.SATURATED

    def _from_hot(self) -> int | None:
        # round robin over the hot families: when the changed code is reached from many of them (a converter every
        # test runs), steering keeps the plan's diversity instead of draining one family first
        for _ in range(len(self.hot)):
            fam = self.hot.pop(0)
            self.hot.append(fam)
            queue = self.pending[fam]
            while queue and self.taken[queue[0]]:
                queue.popleft()
            if queue:
                return queue.popleft()
        return None

    def _from_plan(self) -> int | None:
        while self.pos < len(self.tests):
            n = self.pos
            self.pos += 1
            if self.taken[n]:
                continue
            if self._saturated(self.tests[n]):
                self.deferred.append(n)
                continue
            return n
        return None

    def __iter__(self) -> Iterator[Test]:
        while True:
            self.turn += 1
            n = self._from_hot() if self.turn % 2 == 0 else None
            if n is None:
                n = self._from_plan()
            if n is None:
                n = self._from_hot()
            while n is None and self.deferred:
                n = self.deferred.popleft()
                n = None if self.taken[n] else n
            if n is None:
                return
            self.taken[n] = True
            yield self.tests[n]


def execute(campaign: Campaign, tests: Sequence[Test], engine: Engine, options: RunOptions, *,
            trace_files: tuple[str, ...] = (), until: float | None = None, hard_until: float | None = None,
            reaches_change: Callable[[dict], bool] | None = None) -> None:
    """Run the tests until ``until`` (monotonic; default: the budget from now), streaming every outcome to
    results.jsonl; a failure is re-run once (another instance of its signature if that flakes) before it counts, its
    confirmation jumping the queue. Confirmations still owed then get a short grace, at most a quarter of what is left before ``hard_until``.
    ``trace_files``: converter files whose lines are recorded while converting (PR mode); ``reaches_change``: whether
    a test's coverage ran a changed statement, which steers the order (:class:`Steered`)."""
    say = options.progress
    confirm_queue: deque = deque()
    pending_confirm: dict[str, str] = {}  # job id -> signature
    seq = 0

    def confirm_jobs() -> Iterator[Job]:
        nonlocal seq
        while confirm_queue:
            sig = confirm_queue.popleft()
            o = campaign.next_confirm_outcome(sig)
            target = campaign.targets[o.target]
            seq += 1
            job = Job(id=f"confirm{seq}:{o.instance_id}@{o.target}", func=target.job_func,
                      args=(campaign.instances[o.instance_id], o.target), instance_id=o.instance_id, op=o.op,
                      target=o.target, affinity=f"confirm:{o.instance_id}", timeout=target.timeout)
            pending_confirm[job.id] = sig
            yield job

    steered = Steered(tests) if reaches_change else None
    # a source that makes its tests as it goes (the graph fuzzer) is taken in its own order and told every outcome
    source = tests if getattr(tests, "self_scheduling", False) else None
    # an explicit run shares the budget between (target, source) arms by measured cost and yield; a PR scan keeps
    # the plan's order (touched operators first) and steers by coverage instead
    scheduler = CostAware(tests) if steered is None and source is None and options.schedule == "cost" else None
    # batches (Target.batch_size) only where no test needs its own coverage (a PR scan steers by it) and no
    # source waits for one test's outcome to make the next
    batching = options.batch and not trace_files and steered is None and source is None
    filling = BatchFiller()
    # (target, operator) that did not pass: its other tests run alone, as a packed group it would fail and be bisected
    unpackable: set[tuple[str, str]] = set()
    retry: deque = deque()  # members of a batch whose worker died: run one by one
    batch_members: dict[str, list[Test]] = {}  # batch job id -> its tests

    def single(test: Test) -> Job:
        nonlocal seq
        target = campaign.targets[test.target]
        seq += 1
        return Job(id=f"t{seq}:{test.instance.id}@{test.target}", func=target.job_func,
                   args=(test.instance, test.target, tuple(trace_files)), instance_id=test.instance.id,
                   op=test.instance.op, target=test.target, affinity=test.instance.id, timeout=target.timeout)

    def batch(name: str, members: list[Test]) -> Job:
        nonlocal seq
        if len(members) == 1:
            return single(members[0])
        seq += 1
        job = Job(id=f"b{seq}:{len(members)}@{name}", func=BATCH_JOB, args=([t.instance for t in members], name),
                  instance_id=members[0].instance.id, op=members[0].instance.op, target=name,
                  affinity=f"batch:{name}", timeout=(campaign.targets[name].timeout or options.timeout) * 4)
        batch_members[job.id] = members
        return job

    def checks_owed() -> float:
        return reproducers_owed(campaign, [s for s, state in campaign.confirm_state.items() if state != "flaky"],
                                options.workers)

    def jobs() -> Iterator[Job]:
        for test in steered or scheduler or tests:
            if hard_until is not None and options.check_repros and \
                    checks_owed() > CHECK_SHARE * (hard_until - time.monotonic()):
                # a finding whose reproducer cannot be checked within the budget is worth less than the tests
                # that would find it: stop drawing tests while the ones found can all be checked
                campaign.ended_early = (f"testing ended early: the reproducers of the {len(campaign.confirm_state)}"
                                        f" failure signatures found need the rest of the budget")
                say(campaign.ended_early)
                break
            yield from confirm_jobs()
            while retry:
                yield single(retry.popleft())
            for name in filling.overdue():
                yield batch(name, filling.take(name))
            size = campaign.targets[test.target].batch_size if batching else 1
            if size <= 1 or (test.target, test.instance.op) in unpackable:
                yield single(test)
                continue
            full = filling.add(test.target, test, size)
            if full:
                yield batch(test.target, full)
        for name in filling.waiting():
            yield batch(name, filling.take(name))
        while retry:
            yield single(retry.popleft())
        yield from confirm_jobs()

    last_progress = [0.0]
    with open(options.out / "results.jsonl", "a", encoding="utf-8") as results:
        def on_result(job: Job, result: dict) -> None:
            members = batch_members.pop(job.id, None)
            if members is not None:
                if "batch_outcomes" not in result:  # the worker died under the batch: every member runs alone
                    retry.extend(members)
                    return
                for member in result["batch_outcomes"]:
                    on_outcome(job, member)
                return
            on_outcome(job, result)

        def on_outcome(job: Job, result: dict) -> None:
            outcome = Outcome.from_dict(result)
            sig = pending_confirm.pop(job.id, None)
            results.write(json.dumps({"job": job.id, "confirming": sig, **outcome.to_dict()}, default=str) + "\n")
            results.flush()
            if steered and sig is None:
                test = Test(campaign.instances[outcome.instance_id], outcome.target)
                steered.observe(test, outcome.coverage, outcome.status == PASS)
                if outcome.coverage and reaches_change(outcome.coverage):
                    steered.heat(test.instance)
            if outcome.status != PASS:
                unpackable.add((outcome.target, outcome.op))
            need = campaign.record(outcome, sig)
            if need is not None:
                confirm_queue.append(need)
            if scheduler is not None and sig is None:
                scheduler.observe(Test(campaign.instances[outcome.instance_id], outcome.target), outcome.seconds,
                                  outcome.status, new_signature=need is not None, cold=outcome.cold)
            if source is not None and sig is None:
                source.observe(Test(campaign.instances[outcome.instance_id], outcome.target), outcome,
                               need is not None)
            now = time.monotonic()
            if now - last_progress[0] > 5:
                last_progress[0] = now
                st = campaign.stats()
                say(f"[{st['seconds']:.0f}s] {st['tests_run']} tests, {st['tests_valid']} valid, "
                    f"{len(campaign.failures)} failure signatures, {len(campaign.confirmed())} confirmed")

        budget = options.budget or 0.0
        started = time.monotonic()
        deadline = until if until is not None else time.monotonic() + budget
        info = engine.run(jobs(), on_result, deadline=deadline)
        campaign.interrupted = _cancelled(info)
        if retry and not campaign.interrupted and time.monotonic() < deadline:  # a batch died after the last pull
            more = engine.run((single(retry.popleft()) for _ in range(len(retry))), on_result, deadline=deadline)
            campaign.interrupted = _cancelled(more)
        # confirmation jobs the engine pulled but never dispatched (deadline) are owed again
        confirm_queue.extend(pending_confirm.values())
        pending_confirm.clear()
        if confirm_queue and not campaign.interrupted:
            say(f"confirming {len(confirm_queue)} failure signature(s) after the budget")
            now = time.monotonic()
            grace = now + max(60.0, 0.1 * budget)
            if hard_until is not None:  # a quarter of what is left: reduction and reproducers need the rest
                grace = min(grace, now + 0.25 * max(0.0, hard_until - now))
            more = engine.run(confirm_jobs(), on_result, deadline=grace)
            campaign.interrupted = _cancelled(more)
        campaign.engine_info = _info_dict(info)
        _add_phase(campaign, "testing", started)
        if scheduler is not None:
            campaign.arms = scheduler.stats()


def _add_phase(campaign: Campaign, phase: str, since: float) -> None:
    """Wall seconds of a phase since ``since``, added to what earlier calls of it took (a scan tests twice)."""
    campaign.phase_seconds[phase] = campaign.phase_seconds.get(phase, 0.0) + time.monotonic() - since


def _cancelled(info) -> bool:
    return getattr(info, "reason", None) in ("SIGTERM", "SIGINT")


def _info_dict(info) -> dict:
    d = getattr(info, "__dict__", {}) or {}
    return {k: v for k, v in d.items() if isinstance(v, (int, float, bool, str, list, dict))}


MULTI_OPERATOR_SHARE = 3.0  # a multi-operator finding's reduction time, in shares of a single operator's


def reduce(findings: list[Finding], campaign: Campaign, engine: Engine, options: RunOptions, *,
           until: float | None = None, hard_until: float | None = None) -> None:
    """Shrink each finding's representative, in the order given, while it still fails the same way (the finding's
    signature), in the campaign's own workers; a reduced instance that failed again on its confirmation run becomes
    the finding's representative. ``until``: no reduction starts after it, and each gets a fair share of what is
    left; ``hard_until``: the reproducer checks of all findings keep their time before it."""
    from dlci.reduce import engine_runner, reduce_instance
    if hard_until is not None and options.check_repros and until is not None:
        owed = reproducers_owed(campaign, [campaign.base_signature(f.signature) for f in findings], options.workers)
        until = min(until, hard_until - 1.2 * owed)
    # a failure that needs several operators first: the hardest to cut down by hand, and what no single-operator
    # test finds; a single operator's failure in a graph is cut to that operator in one step — so the first get
    # MULTI_OPERATOR_SHARE times the time of the others
    def weight(f: Finding) -> float:
        return MULTI_OPERATOR_SHARE if (f.extra.get("graph") or {}).get("multi_operator") else 1.0
    findings = sorted(findings, key=lambda f: -weight(f))
    for n, f in enumerate(findings):
        seconds = options.seconds_to_reduce(options.budget or 0.0) * (1.0 if options.reduce_seconds else weight(f))
        if until is not None:
            seconds = min(seconds, (until - time.monotonic()) * weight(f) / sum(map(weight, findings[n:])))
        if campaign.interrupted or seconds < 2:
            return
        target = campaign.targets[f.target]
        sig = campaign.base_signature(f.signature)
        red = reduce_instance(campaign.instances[f.instance_id], f.target, sig,
                              run=engine_runner(engine, f.target, options.timeout, func=target.job_func),
                              modules=target.modules, budget=seconds)
        f.reduction = _reduction_summary(red)
        if red.confirmed and red.changed and red.outcome:
            out = Outcome.from_dict(red.outcome)
            campaign.instances[red.reduced.id] = red.reduced
            campaign.failures[sig].append(out)
            f.extra.setdefault("unreduced_instance", f.instance_id)
            f.instance_id = out.instance_id
            f.message, f.distance, f.traceback = out.message[:2000], out.distance, out.traceback[-4000:]
            f.instances = sorted(set(f.instances) | {out.instance_id})
            if out.localised:  # the reduced graph's own localisation: each of its operators checked alone
                whole = f.extra.get("graph") or {}
                f.extra["graph"] = graph_details(out, red.reduced)
                for key in WHOLE_GRAPH_KEYS:  # what was measured on the whole graph stays
                    if key in whole:
                        f.extra["graph"][key] = whole[key]
            if "graph" in f.extra and red.params_that_matter:  # the reduced instance's word is the last one
                f.extra["graph"]["parameters_that_matter"] = list(red.params_that_matter)
            ops = (f"{red.before['operators']} -> {red.after.get('operators')} operators, "
                   if red.before.get("operators", 1) != red.after.get("operators", 1) else "")
            options.progress(f"reduced {f.operator} on {f.target}: {ops}{red.before.get('elements')} -> "
                             f"{red.after.get('elements')} elements in {red.seconds:.0f} s"
                             + (f"; parameters that matter: {', '.join(red.params_that_matter)}"
                                if red.params_that_matter else ""))


def collect(campaign: Campaign) -> list[Finding]:
    """One finding per confirmed signature, represented by its smallest instance; failures an exporter shows
    identically are the exporter's (see attribute_to_exporter)."""
    findings: list[Finding] = []
    for sig in campaign.confirmed():
        outcomes = campaign.steady_outcomes(sig)
        rep = campaign.representative(sig)
        inst = campaign.instances[rep.instance_id]
        target = campaign.targets[rep.target]
        findings.append(Finding(
            id=f"F{len(findings) + 1:03d}", oracle=target.oracle_of(rep), operator=rep.op, target=rep.target,
            target_version=target.version(), symptom=rep.symptom, stage=rep.stage, signature=sig,
            message=rep.message[:2000], instance_id=rep.instance_id, origin=inst.origin.__dict__,
            distance=rep.distance, traceback=rep.traceback[-4000:], log=rep.log[-2000:],
            instances=sorted({o.instance_id for o in outcomes}), operators=sorted({o.op for o in outcomes}),
            confirmed=True, **target.finding_details()))
        if rep.device:  # a device target's finding names the device (findings.json, the reproducer)
            findings[-1].extra["device"] = rep.device
        if rep.localised:
            findings[-1].extra["graph"] = graph_details(rep, inst)
    return attribute_to_exporter(findings, campaign)


# what localisation measured on the graph as found (dlci.localise), kept when the reduced graph is localised
WHOLE_GRAPH_KEYS = ("first_divergent", "trace", "share", "graph_operators", "parameters_that_matter", "parameters")


def graph_details(outcome: Outcome, inst: Instance) -> dict:
    """What a graph finding says about its operators (dlci.localise): the operator it is localised to, the
    graph's operators, each one's single-operator test on the same target, and whether the failure needs several;
    for a wrong output, where the divergence starts (the trace) and the culprit's share of the final error."""
    from dlci.reduce.graph import operators
    loc = outcome.localised or {}
    alone = loc.get("alone") or {}
    every = bool(alone) and len(alone) == loc.get("nodes")
    trace, share = loc.get("trace") or {}, loc.get("share") or {}
    params = loc.get("parameters") or {}
    audee = {**({"first_divergent": trace.get("first_divergent", "")} if trace.get("used") else {}),
             **({"trace": trace} if trace else {}), **({"share": share} if share else {}),
             **({"parameters_that_matter": params.get("matter", []), "parameters": params} if params else {}),
             **({"cut_after": loc["cut_after"]} if loc.get("cut_after") else {})}
    types = _node_types(inst)
    count = len(types) if inst.call.get("kind") == "torch_program" else operators(inst)
    return {"localised_to": loc.get("operator", outcome.op), "node": loc.get("node", ""),
            "multi_operator": bool(loc.get("multi_operator")), **audee,
            "graph_operators": loc.get("nodes", count),
            "operators": count, "node_types": types,
            "multi_operator_only": bool(loc.get("multi_operator")) and every and
            all(s == "pass" for s in alone.values()),
            "each_operator_alone": alone, "every_operator_checked": every,
            **({"note": loc["note"]} if loc.get("note") else {}), **({"error": loc["error"]} if loc.get("error") else {})}


def _node_types(inst: Instance) -> list[str]:
    if inst.call.get("kind") == "torch_program":
        from dlci.models.fx import FxView
        try:
            view = FxView(inst)
            return [view.op_type(k) for k in range(len(view))]
        except Exception:  # noqa: BLE001 - the report does without
            return []
    from dlci.models.graph import graph_of
    g = graph_of(inst)
    return g.operators() if g is not None else []


def _same_failure(a: Outcome, b: Outcome) -> bool:
    if a.status != b.status or a.symptom != b.symptom:
        return False
    if a.status == INCONSISTENT:  # the very same wrong numbers, not just the same kind of mismatch
        da, db = a.distance or {}, b.distance or {}
        return da.get("output") == db.get("output") and abs(da.get("max_abs", 0) - db.get("max_abs", 0)) <= \
            1e-6 * max(1.0, abs(da.get("max_abs", 0)))
    return True


def attribute_to_exporter(findings: list[Finding], campaign: Campaign) -> list[Finding]:
    """A failure that a target shows on instances it received through an exporter (torch -> torch.onnx ->
    tvm.from_onnx), and that the exporter target shows identically on the same instances, is the exporter's: fold
    it into the exporter's finding."""
    failed: dict[tuple[str, str], Outcome] = {}  # (target, instance id) -> its failure
    for outcomes in campaign.failures.values():
        for o in outcomes:
            failed[(o.target, o.instance_id)] = o
    by_sig = {f.signature: f for f in findings}
    kept = []
    for f in findings:
        exporter = campaign.targets[f.target].exporters.get(campaign.instances[f.instance_id].framework)
        if exporter in campaign.targets:
            mine = campaign.failures[f.signature]
            theirs = [failed.get((exporter, o.instance_id)) for o in mine]
            if all(t is not None and _same_failure(o, t) for o, t in zip(mine, theirs)):
                owner = by_sig.get(campaign.signature(theirs[0]))
                if owner is not None:
                    owner.also_in = sorted(set(owner.also_in) | {f.target})
                    continue
        kept.append(f)
    return kept


def _reduction_summary(red) -> dict | None:
    if red is None:
        return None
    return {"confirmed": red.confirmed, "changed": red.changed, "from_instance": red.original.id,
            "before": red.before, "after": red.after, "params_that_matter": list(red.params_that_matter),
            "steps": len(red.steps), "tried": red.tried, "seconds": round(red.seconds, 1)}


# -- reproduce --------------------------------------------------------------------------------------------------

# a reproducer run alone in a child of a warm interpreter (dlci.findings.warm) costs what its test costs alone plus
# this much (the fork, the script's inputs and fp64 reference, its log): 133 checks of a broad run took 0.5 worker
# seconds each beyond their tests' 0.1 (a fresh interpreter importing torch and the target: 4-12 s,
# benchmarks/repro_checks.py)
REPRO_CHECK_OVERHEAD = 0.45
FRESH_CHECK_SECONDS = 8.0  # a reproducer checked in a fresh interpreter (a device target's)
RENDER_SECONDS = 0.1  # rendering one reproducer (and its test in the repository's style), in dlci's own process
CHECK_SHARE = 0.7  # of the time left before the hard deadline that owed reproducer checks may take before testing
# stops (the rest: confirmations, reduction, the report)
FALLBACKS = 2  # larger instances a finding's reproducer falls back to before the finding is dropped
REPRO_TIMEOUT = 600.0  # seconds a reproducer may run alone
MIN_CHECK_SECONDS = 10.0  # a check that cannot get this long before the deadline is not started


def reproducers_owed(campaign: Campaign, signatures: Iterable[str], workers: int) -> float:
    """Wall seconds rendering and checking the reproducers of these signatures will take, the checks as many at once
    as there are workers: each check costs what its test took alone (``Campaign.test_seconds_alone``) plus a warm
    interpreter's overhead: a TVM test that compiles for 2 s owes more than an ONNX Runtime one of 10 ms."""
    signatures = list(signatures)

    def check(sig: str) -> float:
        target = campaign.targets.get(sig.split("|", 1)[0])
        # a device target's reproducer runs in a fresh interpreter, one at a time after the others
        fresh = FRESH_CHECK_SECONDS * max(1, workers) if getattr(target, "on_accelerator", False) else 0.0
        return REPRO_CHECK_OVERHEAD + fresh + campaign.test_seconds_alone.get(sig, 0.0)
    return len(signatures) * RENDER_SECONDS + sum(map(check, signatures)) / max(1, workers)


def reproduce(findings: list[Finding], campaign: Campaign, options: RunOptions, *, env: dict | None = None,
              until: float | None = None, hard_until: float | None = None) -> tuple[list[Finding], list[dict]]:
    """Render each finding's standalone reproducer (and its test in the target repository's style) and, unless
    told not to, run it alone in a fresh interpreter (``env``: the revision's environment), in the order given. A
    reproducer that does not reproduce falls back to the unreduced instance, then to other instances of the finding,
    before the finding is dropped (it then comes back in the second list, for triage, its scripts moved to
    repro/unreproduced/). A check that would start after ``until``, or that ``hard_until`` cuts short, leaves the
    finding unchecked (``repro_checked`` None): it stays. The reported findings are renumbered F001... and their
    scripts re-rendered."""
    from dlci.findings.repro import check_repro, test_env
    from dlci.findings.warm import WarmPool
    out = options.out
    (out / "repro").mkdir(parents=True, exist_ok=True)
    paths = {}
    seen: set[str] = set()
    t0 = time.monotonic()
    for f in findings:
        while f.id in seen:  # the two parts of a split finding: each needs a script of its own
            f.id += "b"
        seen.add(f.id)
        try:
            paths[f.id] = _render(f, campaign, out)
            f.repro = str(paths[f.id].relative_to(out))
        except Exception as e:  # a recipe the renderer cannot express: reported, never fatal
            f.repro, f.repro_checked = "", False
            f.message += f"\n(dlci could not render a reproducer: {type(e).__name__}: {e})"
        _render_test_style(f, campaign, options)
    _add_phase(campaign, "render", t0)
    unreproduced: list[dict] = []
    if options.check_repros and not campaign.interrupted:
        def run_alone(path: Path) -> bool | None:
            """check_repro within the budget: None when the budget, not the reproducer, ended the run."""
            limit = REPRO_TIMEOUT if hard_until is None else min(REPRO_TIMEOUT, hard_until - time.monotonic())
            if limit < MIN_CHECK_SECONDS:
                return None
            t0 = time.monotonic()
            ok = check_repro(path, env=env, timeout=limit, warm=warm)
            return None if not ok and limit < REPRO_TIMEOUT and time.monotonic() - t0 >= limit - 1 else ok

        def check(finding: Finding) -> None:
            if finding.id not in paths or (until is not None and time.monotonic() > until):
                return
            finding.repro_checked = run_alone(paths[finding.id])
            for alternative in _alternatives(finding, campaign)[:FALLBACKS]:
                if finding.repro_checked is not False or (until is not None and time.monotonic() > until):
                    break
                options.progress(f"reproducer {finding.repro} does not reproduce alone: trying instance "
                                 f"{alternative}")
                tried = finding.instance_id
                finding.instance_id = alternative
                old = paths[finding.id]
                paths[finding.id] = _render(finding, campaign, out)
                if old != paths[finding.id]:
                    old.unlink(missing_ok=True)
                finding.repro = str(paths[finding.id].relative_to(out))
                _render_test_style(finding, campaign, options)
                finding.repro_checked = run_alone(paths[finding.id])
                finding.extra["reproducer_fallback"] = (f"the reproducer of instance {tried} did not reproduce alone; "
                                                        f"this one uses instance {alternative}")
            state = {True: "reproduces", False: "does NOT reproduce alone", None: "not run (budget)"}
            options.progress(f"reproducer {finding.repro}: {state[finding.repro_checked]}")

        def check_test_style(finding: Finding) -> None:
            from dlci.findings.test_style import check_test
            if finding.test_style_repro and finding.repro_checked is not None and \
                    (until is None or time.monotonic() < until):
                finding.test_style_checked = check_test(out / finding.test_style_repro, env=env)

        # as many at once as there were workers; a device target's reproducers one at a time, after the others: alone
        # on the device, no other test's memory or timing beside them
        on_device = {id(f) for f in findings if getattr(campaign.targets.get(f.target), "on_accelerator", False)}
        t0 = time.monotonic()
        with WarmPool(test_env(env), max(1, options.workers)) as warm, \
                ThreadPoolExecutor(max(1, options.workers)) as pool:
            list(pool.map(check, [f for f in findings if id(f) not in on_device]))
        warm = None  # a device's reproducer runs in a fresh interpreter: nothing of the warm ones on the device
        for f in findings:
            if id(f) in on_device:
                check(f)
        _add_phase(campaign, "check", t0)
        t0 = time.monotonic()
        with ThreadPoolExecutor(max(1, options.workers)) as pool:
            # the standalone script alone decides whether a finding is reported: every finding's is checked first,
            # the tests in the repository's style with the time that is left
            from dlci.findings.test_style import pytest_available
            if pytest_available():
                list(pool.map(check_test_style, findings))
        _add_phase(campaign, "check_test_style", t0)
        unreproduced = [f.to_dict() for f in findings if f.repro_checked is False]
        findings = [f for f in findings if f.repro_checked is not False]
    for f in unreproduced:  # their scripts (and test-style tests) stay for triage, under a name that says so
        for key in ("repro", "test_style_repro"):
            if f[key] and (out / f[key]).exists():
                src = out / f[key]
                dest = out / "repro" / "unreproduced" / src.name
                dest.parent.mkdir(exist_ok=True)
                src.rename(dest)
                if src.with_suffix(".log").exists():
                    src.with_suffix(".log").rename(dest.with_suffix(".log"))
                f[key] = str(dest.relative_to(out))
    # scripts are named by id: set every old one aside first, so that a new name never lands on a script (or log)
    # another finding has not been renumbered from yet
    # (a finding that keeps its id keeps its scripts: rendering again costs an export per torch-origin finding)
    moving = [(finding, f"F{n:03d}") for n, finding in enumerate(findings, start=1) if finding.id != f"F{n:03d}"]
    aside = [_set_aside(finding, out) for finding, _ in moving]
    for (finding, new_id), old in zip(moving, aside):
        _renumber(finding, new_id, campaign, options, old)
    return findings, unreproduced


def _set_aside(finding: Finding, out: Path) -> dict[str, Path]:
    """The finding's scripts and their logs renamed out of the way: key ("repro" / "test_style_repro") -> old path."""
    moved = {}
    for key in ("repro", "test_style_repro"):
        rel = getattr(finding, key)
        if rel and (out / rel).exists():
            for path in (out / rel, (out / rel).with_suffix(".log")):
                if path.exists():
                    path.rename(path.with_name(f".renumber-{finding.id}-{path.name}"))
            moved[key] = out / rel
    return moved


def _alternatives(finding: Finding, campaign: Campaign) -> list[str]:
    """Instances a finding's reproducer may fall back to: the one it was reduced from, then its other instances
    (smallest first)."""
    first = [finding.extra["unreduced_instance"]] if finding.extra.get("unreduced_instance") else []
    rest = sorted((i for i in finding.instances if i not in first and i != finding.instance_id),
                  key=lambda i: campaign.instances[i].size())
    return [i for i in first + rest if i != finding.instance_id and i in campaign.instances]


def _renumber(finding: Finding, new_id: str, campaign: Campaign, options: RunOptions,
              old: dict[str, Path]) -> None:
    """Give a finding its final id; its scripts name the id, so they are rendered again under the new name (their
    old files, set aside by _set_aside, are dropped; their logs follow)."""
    out = options.out
    old_id, finding.id = finding.id, new_id

    def settle(key: str, new_path: Path) -> None:
        if key not in old:
            return
        was = old[key]
        aside = was.with_name(f".renumber-{old_id}-{was.name}")
        if new_path.exists():
            aside.unlink(missing_ok=True)
        elif aside.exists():  # not rendered again (a renderer that gave up): the old script stays
            aside.rename(new_path)
        log = was.with_suffix(".log")
        log = log.with_name(f".renumber-{old_id}-{log.name}")
        if log.exists():
            log.rename(new_path.with_suffix(".log"))

    if finding.repro:
        new_path = _render(finding, campaign, out)
        settle("repro", new_path)
        finding.repro = str(new_path.relative_to(out))
    if finding.test_style_repro:
        _render_test_style(finding, campaign, options)
        settle("test_style_repro", out / finding.test_style_repro)


def _render(finding: Finding, campaign: Campaign, out: Path) -> Path:
    from dlci.findings.repro import render
    return render(campaign.targets[finding.target], finding, campaign.instances[finding.instance_id], out / "repro")


def _render_test_style(finding: Finding, campaign: Campaign, options: RunOptions) -> None:
    """The reproducer again, as a test in the target repository's own style (never fatal: the script is what
    counts)."""
    from dlci.findings.test_style import render_test
    target = campaign.targets[finding.target]
    try:
        path = render_test(finding, campaign.instances[finding.instance_id], options.out / "repro" / "tests",
                           style=target.test_style, form=target.form)
    except Exception as e:
        finding.test_style_repro, finding.test_style_checked = "", None
        options.progress(f"no test-style reproducer for {finding.id}: {type(e).__name__}: {e}")
        return
    if path is not None:
        finding.test_style = target.test_style
        finding.test_style_repro = str(path.relative_to(options.out))


# -- report -----------------------------------------------------------------------------------------------------

def report(campaign: Campaign, findings: list[Finding], *, unreproduced: list[dict] | None = None,
           pr: dict | None = None) -> Report:
    """The findings document of the campaign as it stands."""
    stats = campaign.stats()
    if unreproduced is not None:
        stats["unreproduced"] = [{k: f[k] for k in ("operator", "target", "symptom", "signature", "repro")}
                                 for f in unreproduced]
    return Report(findings=list(findings), stats=stats, pr=pr)
