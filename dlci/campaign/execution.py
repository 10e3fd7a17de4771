"""The execute stage of a campaign: its tests run in sandboxed workers (:func:`open_engine`) until the budget ends,
every outcome streamed to results.jsonl and every failure re-run once before it counts (confirmation), in the
plan's order, a cost-aware schedule's, a self-scheduling source's or, in PR mode, steered by coverage
(:class:`Steered`); tests of one target packed into batches where the target can.
"""
from __future__ import annotations

import json
import time
from collections import Counter, deque
from pathlib import Path
from typing import Callable, Iterator, Sequence

from dlci.campaign.options import RunOptions
from dlci.campaign.reproduction import CHECK_SHARE, reproducers_owed
from dlci.campaign.schedule import BatchFiller, CostAware
from dlci.campaign.stages import Test
from dlci.campaign.state import Campaign, add_phase
from dlci.exec import Engine, Job
from dlci.instance import Instance, family
from dlci.outcome import INVALID, PASS, Outcome

BATCH_JOB = "dlci.testcase.batch:execute_batch_job"  # many tests of one target, packed (dlci.testcase.batch)


def open_engine(options: RunOptions, targets: dict, *, env: dict | None = None, log_dir: Path | None = None,
                twin: bool = False) -> Engine:
    """The sandboxed workers a campaign runs in (``env``: the revision's environment in PR mode; ``twin``: one more
    worker slot for the twin tests of a divergence search, whose environment, the other revision's, is given later
    with Engine.set_twin_env)."""
    warm = sorted({m for t in targets.values() for m in t.warm_imports})
    gpus, gpu_memory = [], None
    probes = {t.probe for t in targets.values() if getattr(t, "probe", None)}
    if probes:  # device targets: the workers share the runner's GPUs and their memory (dlci.devices)
        from dlci.devices import worker_gpus
        gpus, gpu_memory = worker_gpus(probes)
    return Engine(workers=options.workers, timeout=options.timeout, memory_mb=options.memory_mb, warm_imports=warm,
                  env=env, log_dir=str(log_dir or options.out / "logs"), gpus=gpus, gpu_memory_mb=gpu_memory,
                  twin_workers=1 if twin else 0)


class Steered:
    """The tests in plan order, until one of them runs a changed line (PR mode): from then on, every other test comes
    from the families (``dlci.instance.family``) that did, in turn, so the way of presenting an operator that reaches
    the change is tried on the other touched operators before the budget runs out, while the plan order goes on.
    Tests that would only repeat what passed already (the same family, operator and target ran the very same
    converter lines, passing, SATURATED times) wait until everything else has run."""

    SATURATED = 2  # passing runs with one converter-line trace before more of the same wait
    # tests of one (operator, target) brought forward, at most, after tests whose model form the target could not
    # build (each costs milliseconds: the form fails before any conversion)
    PROMOTED = 32

    def __init__(self, tests: Sequence[Test]):
        self.tests = list(tests)
        self.taken = [False] * len(self.tests)
        self.pending: dict[tuple, deque] = {}
        self.of_operator: dict[tuple, deque] = {}  # (operator, target) -> its tests, in plan order
        for n, t in enumerate(self.tests):
            self.pending.setdefault(family(t.instance), deque()).append(n)
            self.of_operator.setdefault((t.instance.op, t.target), deque()).append(n)
        self.promoted: deque = deque()
        self.promotions: Counter = Counter()
        self.forward: set[int] = set()  # id() of the tests brought forward, once yielded: their jobs go first
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

    def unbuildable(self, test: Test) -> None:
        """The target could not build its model form from this instance, which only trying tells (a
        ``Tensor.__getitem__`` is one ``aten::index`` for a tensor index, several calls for slices): the operator's
        next test on that target comes next, so the instances the target can take are not left behind the ones it
        cannot (onnxscript's boolean-index regression: 2 of 19 ``__getitem__`` instances are one ATen call; a slower
        runner ran 9 of the others and missed it)."""
        key = (test.instance.op, test.target)
        queue = self.of_operator.get(key) or deque()
        while queue and self.taken[queue[0]]:
            queue.popleft()
        if queue and self.promotions[key] < self.PROMOTED:
            self.promotions[key] += 1
            self.promoted.append(queue.popleft())

    def brought_forward(self, test: Test) -> bool:
        """Whether ``test`` came out ahead of the plan (unbuildable): its job goes ahead of those looked ahead too."""
        return id(test) in self.forward

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
            while self.promoted and self.taken[self.promoted[0]]:
                self.promoted.popleft()
            if self.promoted:
                n = self.promoted.popleft()
                self.taken[n] = True
                self.forward.add(id(self.tests[n]))
                yield self.tests[n]
                continue
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
            reaches_change: Callable[[dict], bool] | None = None, watch: tuple = (), fingerprint: bool = False,
            grace: float | None = None, keep: Callable[[], bool] | None = None) -> None:
    """Run the tests until ``until`` (monotonic; default: the budget from now), streaming every outcome to
    results.jsonl; a failure is re-run once (another instance of its signature if that flakes) before it counts, its
    confirmation jumping the queue. Confirmations still owed then get a short grace, at most a quarter of what is
    left before ``hard_until``. ``trace_files``: converter files whose lines are recorded while converting (PR mode),
    ``watch``: the changed statements whose values are recorded too (dlci.testcase.execute); ``reaches_change``:
    whether a test's coverage ran a changed statement, which steers the order (:class:`Steered`); ``fingerprint``:
    each test's converted model is fingerprinted (Outcome.model_digest). A source's ``twin`` tests run on the
    engine's twin workers (the other revision) and go back to the source alone (``observe_twin``), never into the
    campaign. ``grace``: a test still running that long after ``until`` is stopped without an outcome (Engine.run).
    ``keep``: asked before each test is drawn; once it says no, no more are.
    """
    run = _Execution(campaign, tests, options, trace_files, watch, reaches_change, fingerprint, hard_until, keep)
    started = time.monotonic()
    deadline = until if until is not None else started + (options.budget or 0.0)
    with open(options.out / "results.jsonl", "a", encoding="utf-8") as run.results:
        # the tests; failures confirmed as they come
        info = engine.run(run.jobs(), run.on_result, deadline=deadline, grace=grace)
        campaign.interrupted = _cancelled(info)
        run.retry_batch_members(engine, deadline)  # the members of a batch whose worker died after the last pull
        run.confirm_after_the_budget(engine)       # confirmations still owed: a short grace
    campaign.engine_info = _info_dict(info)
    add_phase(campaign, "testing", started)
    if run.scheduler is not None:
        campaign.arms = run.scheduler.stats()


class _Execution:
    """The state of one :func:`execute`: where the tests come from (the plan, a steered plan, a cost-aware schedule
    or a self-scheduling source), the jobs made of them (single tests, packed batches, confirmations), and what each
    result does (results.jsonl, the campaign's record, the source's and scheduler's feedback)."""

    def __init__(self, campaign: Campaign, tests: Sequence[Test], options: RunOptions, trace_files: tuple[str, ...],
                 watch: tuple, reaches_change: Callable[[dict], bool] | None, fingerprint: bool,
                 hard_until: float | None, keep: Callable[[], bool] | None = None):
        self.campaign, self.tests, self.options, self.keep = campaign, tests, options, keep
        self.trace_files, self.watch, self.reaches_change = tuple(trace_files), tuple(watch), reaches_change
        self.fingerprint, self.hard_until = fingerprint, hard_until
        self.results = None  # results.jsonl, open while the engine runs
        self.confirm_queue: deque = deque()
        self.pending_confirm: dict[str, str] = {}  # job id -> signature
        self.seq = 0
        self.steered = Steered(tests) if reaches_change else None
        # a source that makes its tests as it goes (the graph fuzzer) is taken in its own order and told every outcome
        self.source = tests if getattr(tests, "self_scheduling", False) else None
        # an explicit run shares the budget between (target, source) arms by measured cost and yield; a PR scan keeps
        # the plan's order (touched operators first) and steers by coverage instead
        self.scheduler = CostAware(tests) if self.steered is None and self.source is None and \
            options.schedule == "cost" else None
        # batches (Target.batch_size) only where no test needs its own coverage (a PR scan steers by it) and no
        # source waits for one test's outcome to make the next
        self.batching = options.batch and not trace_files and self.steered is None and self.source is None
        self.filling = BatchFiller()
        # (target, operator) that did not pass: its other tests run alone, as a packed group it would fail and be
        # bisected
        self.unpackable: set[tuple[str, str]] = set()
        self.retry: deque = deque()  # members of a batch whose worker died: run one by one
        self.batch_members: dict[str, list[Test]] = {}  # batch job id -> its tests
        self.last_progress = 0.0

    # -- jobs ---------------------------------------------------------------------------------------------------
    def confirm_jobs(self) -> Iterator[Job]:
        campaign = self.campaign
        while self.confirm_queue:
            sig = self.confirm_queue.popleft()
            o = campaign.next_confirm_outcome(sig)
            target = campaign.targets[o.target]
            self.seq += 1
            job = Job(id=f"confirm{self.seq}:{o.instance_id}@{o.target}", func=target.job_func,
                      args=(campaign.instances[o.instance_id], o.target), instance_id=o.instance_id, op=o.op,
                      target=o.target, affinity=f"confirm:{o.instance_id}", timeout=target.timeout)
            self.pending_confirm[job.id] = sig
            yield job

    def single(self, test: Test) -> Job:
        target = self.campaign.targets[test.target]
        self.seq += 1
        if test.twin:  # the other revision: nothing traced there, its model fingerprinted for the comparison
            return Job(id=f"twin{self.seq}:{test.instance.id}@{test.target}", func=target.job_func,
                       args=(test.instance, test.target, (), (), True), instance_id=test.instance.id,
                       op=test.instance.op, target=test.target, affinity=f"twin:{test.instance.id}",
                       timeout=target.timeout, twin=True)
        return Job(id=f"t{self.seq}:{test.instance.id}@{test.target}", func=target.job_func,
                   args=(test.instance, test.target, self.trace_files, self.watch, self.fingerprint),
                   instance_id=test.instance.id, op=test.instance.op, target=test.target,
                   affinity=test.instance.id, timeout=target.timeout)

    def batch(self, name: str, members: list[Test]) -> Job:
        if len(members) == 1:
            return self.single(members[0])
        self.seq += 1
        job = Job(id=f"b{self.seq}:{len(members)}@{name}", func=BATCH_JOB, args=([t.instance for t in members], name),
                  instance_id=members[0].instance.id, op=members[0].instance.op, target=name,
                  affinity=f"batch:{name}", timeout=(self.campaign.targets[name].timeout or self.options.timeout) * 4)
        self.batch_members[job.id] = members
        return job

    def checks_owed(self) -> float:
        return reproducers_owed(self.campaign, [s for s, state in self.campaign.confirm_state.items()
                                                if state != "flaky"], self.options.workers)

    def jobs(self) -> Iterator[Job]:
        campaign, options = self.campaign, self.options
        for test in self.steered or self.scheduler or self.tests:
            if self.hard_until is not None and options.check_repros and \
                    self.checks_owed() > CHECK_SHARE * (self.hard_until - time.monotonic()):
                # a finding whose reproducer cannot be checked within the budget is worth less than the tests
                # that would find it: stop drawing tests while the ones found can all be checked
                campaign.ended_early = (f"testing ended early: the reproducers of the {len(campaign.confirm_state)}"
                                        f" failure signatures found need the rest of the budget")
                options.progress(campaign.ended_early)
                break
            if self.keep is not None and not self.keep():
                break
            yield from self.confirm_jobs()
            while self.retry:
                yield self.single(self.retry.popleft())
            for name in self.filling.overdue():
                yield self.batch(name, self.filling.take(name))
            size = campaign.targets[test.target].batch_size if self.batching else 1
            if size <= 1 or (test.target, test.instance.op) in self.unpackable:
                job = self.single(test)
                job.first = self.steered is not None and self.steered.brought_forward(test)
                yield job
                continue
            full = self.filling.add(test.target, test, size)
            if full:
                yield self.batch(test.target, full)
        for name in self.filling.waiting():
            yield self.batch(name, self.filling.take(name))
        while self.retry:
            yield self.single(self.retry.popleft())
        yield from self.confirm_jobs()

    # -- results ------------------------------------------------------------------------------------------------
    def on_result(self, job: Job, result: dict) -> None:
        members = self.batch_members.pop(job.id, None)
        if members is not None:
            if "batch_outcomes" not in result:  # the worker died under the batch: every member runs alone
                self.retry.extend(members)
                return
            for member in result["batch_outcomes"]:
                self.on_outcome(job, member)
            return
        self.on_outcome(job, result)

    def on_outcome(self, job: Job, result: dict) -> None:
        campaign, outcome = self.campaign, Outcome.from_dict(result)
        if job.twin:
            self.results.write(json.dumps({"job": job.id, "twin": True, **outcome.to_dict()}, default=str) + "\n")
            if self.source is not None and hasattr(self.source, "observe_twin"):
                self.source.observe_twin(Test(campaign.instances[outcome.instance_id], outcome.target, twin=True),
                                         outcome)
            return
        sig = self.pending_confirm.pop(job.id, None)
        self.results.write(json.dumps({"job": job.id, "confirming": sig, **outcome.to_dict()}, default=str) + "\n")
        self.results.flush()
        test = Test(campaign.instances[outcome.instance_id], outcome.target)
        if self.steered and sig is None:
            self.steered.observe(test, outcome.coverage, outcome.status == PASS)
            if outcome.status == INVALID and outcome.stage == "model":
                self.steered.unbuildable(test)
            if outcome.coverage and self.reaches_change(outcome.coverage):
                self.steered.heat(test.instance)
        if outcome.status != PASS:
            self.unpackable.add((outcome.target, outcome.op))
        need = campaign.record(outcome, sig)
        if need is not None:
            self.confirm_queue.append(need)
        if self.scheduler is not None and sig is None:
            self.scheduler.observe(test, outcome.seconds, outcome.status, new_signature=need is not None,
                                   cold=outcome.cold)
        if self.source is not None and sig is None:
            self.source.observe(test, outcome, need is not None)
        now = time.monotonic()
        if now - self.last_progress > 5:
            self.last_progress = now
            st = campaign.stats()
            self.options.progress(f"[{st['seconds']:.0f}s] {st['tests_run']} tests, {st['tests_valid']} valid, "
                                  f"{len(campaign.failures)} failure signatures, {len(campaign.confirmed())} confirmed")

    # -- after the deadline ---------------------------------------------------------------------------------------
    def retry_batch_members(self, engine: Engine, deadline: float) -> None:
        if self.retry and not self.campaign.interrupted and time.monotonic() < deadline:
            more = engine.run((self.single(self.retry.popleft()) for _ in range(len(self.retry))), self.on_result,
                              deadline=deadline)
            self.campaign.interrupted = _cancelled(more)

    def confirm_after_the_budget(self, engine: Engine) -> None:
        """Confirmations the engine pulled but never dispatched (the deadline) are owed again: a short grace, at most
        a quarter of what is left before hard_until (reduction and reproducers need the rest)."""
        self.confirm_queue.extend(self.pending_confirm.values())
        self.pending_confirm.clear()
        if not self.confirm_queue or self.campaign.interrupted:
            return
        self.options.progress(f"confirming {len(self.confirm_queue)} failure signature(s) after the budget")
        now = time.monotonic()
        grace = now + max(60.0, 0.1 * (self.options.budget or 0.0))
        if self.hard_until is not None:
            grace = min(grace, now + 0.25 * max(0.0, self.hard_until - now))
        more = engine.run(self.confirm_jobs(), self.on_result, deadline=grace)
        self.campaign.interrupted = _cancelled(more)


def _cancelled(info) -> bool:
    return getattr(info, "reason", None) in ("SIGTERM", "SIGINT")


def _info_dict(info) -> dict:
    d = getattr(info, "__dict__", {}) or {}
    return {k: v for k, v in d.items() if isinstance(v, (int, float, bool, str, list, dict))}
