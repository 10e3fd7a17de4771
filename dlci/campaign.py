"""One test campaign: instances × targets within a budget, to confirmed findings with reproducers.

Data flow: plan (diversity order) -> engine (sandboxed workers, results streamed to results.jsonl) -> every failure
re-run once before it counts (confirm) -> dedup by signature -> reproducer rendered and run alone -> report.
Whatever happens (budget, SIGTERM, dead workers), what was gathered is written out.
"""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

from dlci import findings as F
from dlci.instance import Instance
from dlci.outcome import CRASH, INCONSISTENT, STATUSES, Outcome

CONFIRM_TRIES = 2  # instances tried per signature before a failure is called flaky


@dataclass
class Options:
    out_dir: Path
    budget: float = 600.0
    workers: int = 2
    timeout: float = 120.0
    memory_mb: int = 3000
    check_repros: bool = True
    touched: Sequence[str] = ()
    progress: Callable[[str], None] | None = None
    # PR mode (dlci scan): the revision's environment, which targets reach each instance's converter, the converter
    # files to trace while converting, a planner, and a hook that classifies confirmed findings against the base
    env: dict | None = None
    targets_for: Callable[[Instance], Iterable[str]] | None = None
    trace_files: tuple[str, ...] = ()
    planner: Callable[[Sequence[Instance]], list[Instance]] | None = None
    classify: Callable[[list, "Campaign"], None] | None = None
    report_extra: Callable[["Campaign"], dict] | None = None  # more top-level keys for findings.json
    reduce: bool = True                  # shrink each finding's instance before its reproducer is written
    reduce_seconds: float | None = None  # per finding (default: a share of the budget, 10 to 60 s)


@dataclass
class Campaign:
    """The state of a run; written to disk as it grows so nothing is lost."""
    options: Options
    instances: dict[str, Instance]
    targets: dict[str, object]
    started: float = field(default_factory=time.time)
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    stage_seconds: Counter = field(default_factory=Counter)
    test_seconds: float = 0.0
    failures: dict[str, list[Outcome]] = field(default_factory=lambda: defaultdict(list))  # signature -> outcomes
    confirm_state: dict[str, str] = field(default_factory=dict)  # signature -> pending|confirmed|flaky
    confirm_tries: Counter = field(default_factory=Counter)
    flaky: list[dict] = field(default_factory=list)
    interrupted: bool = False
    engine_info: dict = field(default_factory=dict)
    coverage: dict[tuple[str, str], dict] = field(default_factory=dict)  # (instance id, target) -> file -> lines
    first_confirmed_at: float | None = None  # epoch seconds: when the first failure was confirmed
    reductions: dict[str, object] = field(default_factory=dict)  # signature -> dlci.reduce.Reduction
    confirmed_at: dict[str, float] = field(default_factory=dict)  # signature -> epoch seconds of its confirmation

    # -- results --------------------------------------------------------------------------------------
    def record(self, outcome: Outcome, confirming: str | None) -> str | None:
        """Account one outcome; returns a signature that needs a confirmation run, if any."""
        if confirming is not None:
            return self._confirmed(confirming, outcome)
        self.counts[outcome.target][outcome.status] += 1
        if outcome.coverage:
            self.coverage[(outcome.instance_id, outcome.target)] = outcome.coverage
        self.test_seconds += outcome.seconds
        for stage, secs in (outcome.timings or {}).items():
            self.stage_seconds[stage] += secs
        if not F.is_failure(outcome):
            return None
        target = self.targets.get(outcome.target)
        sig = F.signature(outcome, target.modules)
        self.failures[sig].append(outcome)
        if sig not in self.confirm_state:
            self.confirm_state[sig] = "pending"
            self.confirm_tries[sig] += 1
            return sig
        return None

    def _confirmed(self, sig: str, rerun: Outcome) -> str | None:
        target = self.targets.get(rerun.target)
        if F.is_failure(rerun) and F.signature(rerun, target.modules) == sig:
            self.confirm_state[sig] = "confirmed"
            self.confirmed_at[sig] = time.time()
            self.first_confirmed_at = self.first_confirmed_at or self.confirmed_at[sig]
            return None
        # did not fail the same way: try another instance with this signature, else call it flaky
        self.flaky.append({"signature": sig, "instance_id": rerun.instance_id, "rerun_status": rerun.status,
                           "rerun_symptom": rerun.symptom})
        tried = {o.instance_id for o in self.failures[sig][:self.confirm_tries[sig]]}
        others = [o for o in self.failures[sig] if o.instance_id not in tried]
        if others and self.confirm_tries[sig] < CONFIRM_TRIES:
            self.confirm_tries[sig] += 1
            return sig
        self.confirm_state[sig] = "flaky"
        return None

    def next_confirm_outcome(self, sig: str) -> Outcome:
        return self.failures[sig][self.confirm_tries[sig] - 1]

    # -- summary --------------------------------------------------------------------------------------
    def stats(self) -> dict:
        per_target = {t: {s: c.get(s, 0) for s in STATUSES} for t, c in sorted(self.counts.items())}
        run = sum(sum(c.values()) for c in self.counts.values())
        valid = sum(c.get("pass", 0) + c.get(CRASH, 0) + c.get(INCONSISTENT, 0) for c in self.counts.values())
        inside = sum(self.stage_seconds.get(s, 0.0) for s in ("convert", "compile", "run"))
        return {
            "tests_run": run,
            "tests_valid": valid,
            "seconds": round(time.time() - self.started, 2),
            "per_target": per_target,
            "operators": len({i.op for i in self.instances.values()}),
            "instances": len(self.instances),
            "stage_seconds": {k: round(v, 3) for k, v in sorted(self.stage_seconds.items())},
            "share_in_targets": round(inside / self.test_seconds, 3) if self.test_seconds else None,
            "signatures": dict(Counter(self.confirm_state.values())),
            "flaky": self.flaky,
            "interrupted": self.interrupted,
            "first_confirmed_at": self.first_confirmed_at,
            "confirmed_at": dict(self.confirmed_at),
            "engine": self.engine_info,
        }


def make_jobs(plan: Iterable[Instance], targets: dict, confirm_queue: deque, campaign: Campaign):
    """Planned jobs, with confirmation re-runs jumping the queue as soon as a failure is seen."""
    from dlci.exec import Job
    seq = 0

    def confirm_jobs():
        nonlocal seq
        while confirm_queue:
            sig = confirm_queue.popleft()
            o = campaign.next_confirm_outcome(sig)
            seq += 1
            target = targets[o.target]
            yield Job(id=f"confirm{seq}:{o.instance_id}@{o.target}", func=target.job_func,
                      args=(campaign.instances[o.instance_id], o.target), instance_id=o.instance_id, op=o.op,
                      target=o.target, affinity=f"confirm:{o.instance_id}", timeout=target.timeout), sig

    options = campaign.options
    for inst in plan:
        wanted = set(options.targets_for(inst)) if options.targets_for else None
        for name, target in targets.items():
            if inst.framework not in target.frameworks or (wanted is not None and name not in wanted):
                continue
            yield from confirm_jobs()
            seq += 1
            yield Job(id=f"t{seq}:{inst.id}@{name}", func=target.job_func,
                      args=(inst, name, tuple(options.trace_files)), instance_id=inst.id, op=inst.op,
                      target=name, affinity=inst.id, timeout=target.timeout), None
    yield from confirm_jobs()


def run(instances: Sequence[Instance], targets: dict, options: Options) -> dict:
    """Run a campaign and write findings.json, report.md, results.jsonl and repro/ into options.out_dir."""
    from dlci.exec import Engine
    from dlci.plan import balanced

    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro").mkdir(exist_ok=True)
    say = options.progress or (lambda msg: None)
    campaign = Campaign(options, {i.id: i for i in instances}, dict(targets))
    plan = options.planner(instances) if options.planner else balanced(list(instances), touched=options.touched)
    confirm_queue: deque = deque()
    pending_confirm: dict[str, str] = {}  # job id -> signature
    results_path = out / "results.jsonl"
    deadline = time.monotonic() + options.budget
    warm = sorted({m for t in targets.values() for m in t.warm_imports})

    def jobs():
        for job, sig in make_jobs(plan, campaign.targets, confirm_queue, campaign):
            if sig is not None:
                pending_confirm[job.id] = sig
            yield job

    last_progress = [0.0]

    with open(results_path, "a", encoding="utf-8") as results, \
            Engine(workers=options.workers, timeout=options.timeout, memory_mb=options.memory_mb,
                   warm_imports=warm, env=options.env, log_dir=str(out / "logs")) as engine:
        def on_result(job, result: dict):
            outcome = Outcome.from_dict(result)
            sig = pending_confirm.pop(job.id, None)
            results.write(json.dumps({"job": job.id, "confirming": sig, **outcome.to_dict()}, default=str) + "\n")
            results.flush()
            need = campaign.record(outcome, sig)
            if need is not None:
                confirm_queue.append(need)
            now = time.monotonic()
            if now - last_progress[0] > 5:
                last_progress[0] = now
                st = campaign.stats()
                say(f"[{st['seconds']:.0f}s] {st['tests_run']} tests, {st['tests_valid']} valid, "
                    f"{len(campaign.failures)} failure signatures, "
                    f"{sum(1 for v in campaign.confirm_state.values() if v == 'confirmed')} confirmed")

        try:
            info = engine.run(jobs(), on_result, deadline=deadline)
            campaign.interrupted = getattr(info, "reason", None) in ("SIGTERM", "SIGINT")
            # confirmations still owed after the budget: a short grace so found bugs are not dropped unconfirmed
            # confirmation jobs the engine pulled but never dispatched (deadline) are owed again
            confirm_queue.extend(pending_confirm.values())
            pending_confirm.clear()
            if confirm_queue and not campaign.interrupted:
                say(f"confirming {len(confirm_queue)} failure signature(s) after the budget")
                more = engine.run(jobs(), on_result, deadline=time.monotonic() + max(60.0, 0.1 * options.budget))
                campaign.interrupted = getattr(more, "reason", None) in ("SIGTERM", "SIGINT")
            campaign.engine_info = _info_dict(info)
            if options.reduce and not campaign.interrupted:
                reduce_findings(campaign, engine)
        except BaseException:
            # an internal error must not lose what was gathered: write the partial report, then fail loudly
            campaign.interrupted = True
            finish(campaign)
            raise

    return finish(campaign)


def representative(campaign: "Campaign", sig: str) -> Outcome:
    """The smallest instance that hit this signature (and did not flake) makes the most readable reproducer."""
    flaky_ids = {f["instance_id"] for f in campaign.flaky if f["signature"] == sig}
    outcomes = [o for o in campaign.failures[sig] if o.instance_id not in flaky_ids] or campaign.failures[sig]
    return min(outcomes, key=lambda o: _size(campaign.instances[o.instance_id]))


def reduce_findings(campaign: "Campaign", engine) -> None:
    """Shrink each confirmed signature's representative while it still fails the same way (same signature), in
    the campaign's own workers; a reduced instance that fails again on its confirmation run replaces it."""
    from dlci.reduce import engine_runner, reduce_instance
    options = campaign.options
    per = options.reduce_seconds or min(60.0, max(10.0, 0.1 * options.budget))
    for sig, state in campaign.confirm_state.items():
        if state != "confirmed" or campaign.interrupted:
            continue
        rep = representative(campaign, sig)
        target = campaign.targets[rep.target]
        red = reduce_instance(campaign.instances[rep.instance_id], rep.target, sig,
                              run=engine_runner(engine, rep.target, options.timeout, func=target.job_func),
                              modules=target.modules, budget=per)
        campaign.reductions[sig] = red
        if red.confirmed and red.changed and red.outcome:
            campaign.instances[red.reduced.id] = red.reduced
            campaign.failures[sig].append(Outcome.from_dict(red.outcome))
            if options.progress:
                ops = (f"{red.before['operators']} -> {red.after.get('operators')} operators, "
                       if red.before.get("operators", 1) != red.after.get("operators", 1) else "")
                options.progress(f"reduced {rep.op} on {rep.target}: {ops}{red.before.get('elements')} -> "
                                 f"{red.after.get('elements')} elements in {red.seconds:.0f} s"
                                 + (f"; parameters that matter: {', '.join(red.params_that_matter)}"
                                    if red.params_that_matter else ""))


def _info_dict(info) -> dict:
    if info is None:
        return {}
    d = getattr(info, "__dict__", {}) or {}
    return {k: v for k, v in d.items() if isinstance(v, (int, float, bool, str, list, dict))}


def finish(campaign: Campaign) -> dict:
    """Build findings from confirmed signatures, render and check reproducers, write the reports."""
    from dlci.findings.repro import check_repro
    from dlci.report import write_reports

    options = campaign.options
    out = options.out_dir
    findings: list[F.Finding] = []
    for sig, state in campaign.confirm_state.items():
        if state != "confirmed":
            continue
        flaky_ids = {f["instance_id"] for f in campaign.flaky if f["signature"] == sig}
        outcomes = [o for o in campaign.failures[sig] if o.instance_id not in flaky_ids] or campaign.failures[sig]
        red = campaign.reductions.get(sig)
        if red is not None and red.confirmed and red.changed and red.outcome:
            rep = Outcome.from_dict(red.outcome)  # the reduced instance, with the message it failed with
        else:
            rep = representative(campaign, sig)
        inst = campaign.instances[rep.instance_id]
        target = campaign.targets[rep.target]
        n = len(findings) + 1
        finding = F.Finding(
            id=f"F{n:03d}", oracle=target.oracle_of(rep), operator=rep.op, target=rep.target,
            target_version=target.version(), symptom=rep.symptom, stage=rep.stage, signature=sig,
            message=rep.message[:2000], instance_id=rep.instance_id, origin=inst.origin.__dict__,
            distance=rep.distance, traceback=rep.traceback[-4000:], log=rep.log[-2000:],
            instances=sorted({o.instance_id for o in outcomes}), operators=sorted({o.op for o in outcomes}),
            confirmed=True, reduction=_reduction_summary(red), **target.finding_details())
        findings.append(finding)

    findings = attribute_to_exporter(findings, campaign)
    if options.classify is not None and findings and not campaign.interrupted:
        options.classify(findings, campaign)  # PR mode: new in the PR, or already on the base revision
    stats = campaign.stats()
    # written before reproducers are rendered and checked: whatever happens next, the findings are on disk
    extra = options.report_extra(campaign) if options.report_extra else {}
    write_reports(out, {"version": 1, "findings": [f.to_dict() for f in findings], "stats": stats, **extra},
                  campaign)
    paths = {}
    for f in findings:
        try:
            paths[f.id] = _render(f, campaign, out)
            f.repro = str(paths[f.id].relative_to(out))
        except Exception as e:  # a recipe the renderer cannot express: reported, never fatal
            f.repro, f.repro_checked = "", False
            f.message += f"\n(dlci could not render a reproducer: {type(e).__name__}: {e})"
        _render_test_style(f, campaign, out)
    unreproduced = []
    if options.check_repros and not campaign.interrupted:
        def check(finding):
            if finding.id not in paths:
                return
            finding.repro_checked = check_repro(paths[finding.id], env=options.env)
            if finding.test_style_repro:
                from dlci.findings.test_style import check_test, pytest_available
                if pytest_available():  # the standalone script alone decides whether a finding is reported
                    finding.test_style_checked = check_test(out / finding.test_style_repro, env=options.env)
            if options.progress:
                options.progress(f"reproducer {finding.repro}: "
                                 f"{'reproduces' if finding.repro_checked else 'does NOT reproduce alone'}")

        # each reproducer runs alone in a fresh interpreter; as many at once as there were workers
        with ThreadPoolExecutor(max(1, options.workers)) as pool:
            list(pool.map(check, findings))
        # a finding whose reproducer does not reproduce alone is not reported (it goes to stats for triage)
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
    for n, finding in enumerate(findings, start=1):
        old_id, finding.id = finding.id, f"F{n:03d}"
        if finding.repro and old_id != finding.id:  # re-render so that the script names its final id
            old_path = out / finding.repro
            new_path = _render(finding, campaign, out)
            old_path.unlink()
            if old_path.with_suffix(".log").exists():
                old_path.with_suffix(".log").rename(new_path.with_suffix(".log"))
            finding.repro = str(new_path.relative_to(out))
            if finding.test_style_repro:  # its file and test names carry the id too
                old_test = out / finding.test_style_repro
                _render_test_style(finding, campaign, out)
                if old_test.exists() and out / finding.test_style_repro != old_test:
                    old_test.unlink()
                    if old_test.with_suffix(".log").exists():
                        old_test.with_suffix(".log").rename((out / finding.test_style_repro).with_suffix(".log"))

    stats["unreproduced"] = [{k: f[k] for k in ("operator", "target", "symptom", "signature", "repro")}
                             for f in unreproduced]
    extra = options.report_extra(campaign) if options.report_extra else {}
    doc = {"version": 1, "findings": [f.to_dict() for f in findings], "stats": stats, **extra}
    write_reports(out, doc, campaign)
    return doc


def _same_failure(a: Outcome, b: Outcome) -> bool:
    if a.status != b.status or a.symptom != b.symptom:
        return False
    if a.status == INCONSISTENT:  # the very same wrong numbers, not just the same kind of mismatch
        da, db = a.distance or {}, b.distance or {}
        return da.get("output") == db.get("output") and abs(da.get("max_abs", 0) - db.get("max_abs", 0)) <= \
            1e-6 * max(1.0, abs(da.get("max_abs", 0)))
    return True


def attribute_to_exporter(findings: list, campaign: Campaign) -> list:
    """A failure that an ONNX frontend shows on a torch instance, and that torch.onnx (exporter + ONNX Runtime)
    shows identically on the same instances, is the exporter's: fold it into the torch.onnx finding."""
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
                sig = F.signature(theirs[0], campaign.targets[exporter].modules)
                owner = by_sig.get(sig)
                if owner is not None:
                    owner.also_in = sorted(set(owner.also_in) | {f.target})
                    continue
        kept.append(f)
    return kept


def _render(finding, campaign: "Campaign", out: Path) -> Path:
    """The standalone reproducer: a target with its own renderer (an equivalence rule) writes it, else the
    generic single-operator template does."""
    return campaign.targets[finding.target].render_repro(finding, campaign.instances[finding.instance_id],
                                                         out / "repro")


def _render_test_style(finding, campaign: "Campaign", out: Path) -> None:
    """The reproducer again, as a test in the target repository's own style (never fatal: the script is what
    counts)."""
    try:
        from dlci.findings.test_style import render_test, style_for
        path = render_test(finding, campaign.instances[finding.instance_id], out / "repro" / "tests")
    except Exception as e:
        finding.test_style_repro, finding.test_style_checked = "", None
        if campaign.options.progress:
            campaign.options.progress(f"no test-style reproducer for {finding.id}: {type(e).__name__}: {e}")
        return
    if path is not None:
        finding.test_style = style_for(finding.target) or ""
        finding.test_style_repro = str(path.relative_to(out))


def _reduction_summary(red) -> dict | None:
    if red is None:
        return None
    return {"confirmed": red.confirmed, "changed": red.changed, "from_instance": red.original.id,
            "before": red.before, "after": red.after, "params_that_matter": list(red.params_that_matter),
            "steps": len(red.steps), "tried": red.tried, "seconds": round(red.seconds, 1)}


def _size(inst: Instance) -> int:
    total = 0
    for spec in inst.inputs:
        n = 1
        for d in spec.shape:
            n *= d
        total += n
    return total
