"""Base attribution in PR mode: is a confirmed finding new in the PR, or already on the base revision?

The same per-instance attribution compares the installed release of a package with an older one
(``dlci test --against``, :mod:`dlci.bisect.attribution`): :class:`Comparison` says where a finding keeps the answer.
"""
from __future__ import annotations

import json
import time
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from dlci import findings as F
from dlci.campaign import Campaign, RunOptions
from dlci.campaign.execution import open_engine
from dlci.exec import Job
from dlci.findings import Finding
from dlci.outcome import CRASH, UNSUPPORTED, Outcome, same_digest

BASE_RERUNS = 8  # instances of one finding re-run on the base revision, each attributed on its own
BASE_FORMS = 32  # and at least one of each of its first forms (operator, how the model is written): see _form
BASE_SEEN_PASSING = 4  # and first of all, those the divergence search saw pass on base (Campaign.passed_on_base)
SUPPORT_PROBES = 32  # per (target, operator): the first of each kind said unsupported on head before any second
HEAD_AGAIN = 2  # head re-runs of a wrong result whose numbers differ on base (are they stable at all?)
BASE_AGAIN = 2  # and base re-runs: uninitialised memory often reads the same twice in a row on one side
SUPPORT_GROUPS = 40  # (target, operator) pairs probed at most


@dataclass(frozen=True)
class Comparison:
    """What the same instances are re-run on, and where a finding keeps the answer."""
    new_field: str = "new_in_pr"   # True: new where the tests ran; False: the same failure on the other side
    info_field: str = "base"       # what the same instances did on the other side
    suffix: str = F.NEW_PART       # signature suffix of the new part of a split finding
    log: str = "base"              # the re-runs' worker logs: logs/<log>/
    info: dict = field(default_factory=dict)  # said in every info dict (the package and release compared with)

    def mark(self, finding: Finding, new: bool | None, info: dict) -> None:
        setattr(finding, self.new_field, new)
        setattr(finding, self.info_field, {**self.info, **info})


BASE = Comparison()  # PR mode: the base revision


# the engines open for the re-runs of one scan, by revision environment (None: each re-run starts its own)
_SHARED: ContextVar[tuple[ExitStack, dict] | None] = ContextVar("dlci_attribution_engines", default=None)


@contextmanager
def shared_engines() -> Iterator[None]:
    """While open, the re-runs on one revision (base, head) share one engine: a worker importing TVM takes seconds
    to start, and a scan re-runs on base five times (findings, support, fixes and their confirmations)."""
    with ExitStack() as stack:
        token = _SHARED.set((stack, {}))
        try:
            yield
        finally:
            _SHARED.reset(token)


@contextmanager
def engine_for(options: RunOptions, targets: dict, env: dict | None, log: str) -> Iterator[object]:
    """The shared engine of ``env``'s revision (see shared_engines), else a fresh one closed after use."""
    shared = _SHARED.get()
    if shared is None:
        with open_engine(options, targets, env=env, log_dir=Path(options.out) / "logs" / log) as engine:
            yield engine
        return
    stack, engines = shared
    key = json.dumps(env or {}, sort_keys=True)
    if key not in engines:
        engines[key] = stack.enter_context(open_engine(options, targets, env=env,
                                                       log_dir=Path(options.out) / "logs" / log))
    yield engines[key]


def _run(jobs: list[Job], campaign: Campaign, options: RunOptions, env: dict, log: str,
         deadline: float) -> dict[str, Outcome]:
    """Run jobs in an engine with ``env``; job id -> outcome (jobs cut by the deadline are missing)."""
    results: dict[str, Outcome] = {}
    if not jobs:
        return results
    with engine_for(options, campaign.targets, env, log) as engine:
        engine.run(jobs, lambda job, r: results.__setitem__(job.id, Outcome.from_dict(r)), deadline=deadline)
    return results


def _job(prefix: str, campaign: Campaign, iid: str, target: str) -> Job:
    return Job(id=f"{prefix}:{iid}@{target}", func=campaign.targets[target].job_func,
               args=(campaign.instances[iid], target), instance_id=iid, op=campaign.instances[iid].op,
               target=target, affinity=iid)


def _form(campaign: Campaign, iid: str) -> tuple:
    """What base re-runs must each see at least once among a finding's instances: one signature can span operators,
    ways of writing the model (a shared converter frame) and input ranks (an operator dispatches by rank: interpolate
    to upsample_{1,2,3}d, each converted on its own), and base may fail on some of them and pass on others."""
    inst = campaign.instances.get(iid)
    if inst is None:
        return (iid,)
    # generated graphs (graph::<name>) are one form per source: each is an operator id of its own
    op = "graph" if inst.op.startswith("graph::") else inst.op
    return (op, inst.framework, inst.origin.source, tuple(len(s.shape) for s in inst.inputs))


def _base_sample(f: Finding, campaign: Campaign) -> list[str]:
    """The instances of ``f`` re-run on base, in order: its representative, those the divergence search saw pass on
    base (up to BASE_SEEN_PASSING), then the best of each other form (up to BASE_FORMS), then the next best up to
    BASE_RERUNS in all."""
    spread = campaign.spread(f.instances)
    ranked = [f.instance_id] + sorted((i for i in f.instances if i != f.instance_id),
                                      key=lambda i: campaign.face(i, spread))
    seen_passing = [i for i in ranked[1:] if (i, f.target) in campaign.passed_on_base][:BASE_SEEN_PASSING]
    firsts: dict[tuple, str] = {}
    for i in ranked:
        firsts.setdefault(_form(campaign, i), i)
    chosen = list(dict.fromkeys([ranked[0], *seen_passing, *list(firsts.values())[:BASE_FORMS]]))
    rest = [i for i in ranked if i not in set(chosen)]
    return chosen + rest[:max(0, BASE_RERUNS - len(chosen))]


def attribute(findings: list[Finding], campaign: Campaign, options: RunOptions, base_env: dict,
              deadline: float, head_env: dict | None = None, compare: Comparison = BASE) -> list[Finding]:
    """Re-run each finding's instances on the base revision (``compare``: or another side, e.g. an older release),
    each judged on its own: an instance that fails the same way there (same signature and, for wrong results, the
    very same wrong numbers) is old; one that crashes or computes a wrong result there too, but otherwise, is changed
    (neither revision is right: not new in the PR, nor the same failure); one that passes, or that base does not
    support, is new. A finding with several is split, so a new failure is never hidden in an old or changed one.
    Returns the findings, split ones included."""
    per_finding = [[_job(f"base{f.id}", campaign, iid, f.target) for iid in _base_sample(f, campaign)]
                   for f in findings]
    # round robin: every finding's representative first, so a deadline leaves as few findings unattributed as it can
    jobs = [js[k] for k in range(max(map(len, per_finding), default=0)) for js in per_finding if k < len(js)]
    results = _run(jobs, campaign, options, base_env, compare.log, deadline)
    unsteady = _unsteady_values(findings, jobs, results, campaign, options, head_env, deadline, base_env)
    heads = _head_numbers(findings, jobs, results, campaign, options, head_env, deadline)
    out = []
    for f in findings:
        base = {j.instance_id: results[j.id] for j in jobs if j.id.startswith(f"base{f.id}:") and j.id in results}
        if not base:
            compare.mark(f, None, {"status": "not run", "note": f"{compare.log} re-run did not complete"})
            out.append(f)
            continue
        head = {**heads.get(f.id, {}), **{o.instance_id: o for o in campaign.failures.get(f.signature, [])}}
        old = [i for i, o in base.items() if F.is_failure(o) and (
            campaign.signature(o) == f.signature and (i not in head or same_digest(o.digest, head[i].digest)
                                                      or i in unsteady)) or _never_worked(o, f)]
        changed = [i for i in base if i not in old and F.is_failure(base[i])]
        new = [i for i in base if i not in old and i not in changed]
        unattributed = [i for i in f.instances if i not in base]
        # an instance not re-run goes with the re-runs of its own form: where base passed every one of them, it is
        # new too (a signature shared by two operators, one failing so on base, must not hide the other)
        new_forms = {_form(campaign, i) for i in new} - {_form(campaign, i) for i in old + changed}
        new += [i for i in unattributed if _form(campaign, i) in new_forms]
        unattributed = [i for i in unattributed if i not in new]
        # one signature, several stories: each reported apart (the instances not re-run with the old part, else with
        # the changed one: never counted new without a re-run that says so)
        parts = [(ids, kind) for ids, kind in ((old, OLD), (changed, CHANGED), (new, NEW)) if ids]
        if len(parts) == 1:
            out.append(_part(f, f.instances, parts[0][1], base, campaign, compare))
            continue
        first = True
        for ids, kind in parts:
            out.append(_part(f, ids + (unattributed if first else []), kind, base, campaign, compare,
                             suffix="" if first else compare.suffix if kind == NEW else F.CHANGED_PART))
            first = False
    return out


OLD, CHANGED, NEW = "old", "changed", "new"  # how an instance fails on the other side: the same way, otherwise, not


def _head_numbers(findings: list[Finding], jobs: list[Job], results: dict[str, Outcome], campaign: Campaign,
                  options: RunOptions, head_env: dict | None, deadline: float) -> dict[str, dict[str, Outcome]]:
    """Per finding, the head's outcomes of instances that fail on base with its signature but whose head numbers
    the campaign did not keep (a reduced or representative instance): run on head, so that wrong numbers that
    differ between the revisions are told apart ("changed by this PR"), never taken for the same failure."""
    if head_env is None:
        return {}
    todo = []
    for f in findings:
        held = {o.instance_id for o in campaign.failures.get(f.signature, [])}
        todo += [(f.id, _job(f"headnum{f.id}", campaign, j.instance_id, f.target)) for j in jobs
                 if j.id.startswith(f"base{f.id}:") and j.id in results and j.instance_id not in held
                 and F.is_failure(results[j.id]) and campaign.signature(results[j.id]) == f.signature]
    got = _run([j for _, j in todo], campaign, options, head_env, "head-numbers", deadline)
    out: dict[str, dict[str, Outcome]] = {}
    for fid, j in todo:
        if j.id in got:
            out.setdefault(fid, {})[j.instance_id] = got[j.id]
    return out


def _unsteady_values(findings: list[Finding], jobs: list[Job], results: dict[str, Outcome], campaign: Campaign,
                     options: RunOptions, head_env: dict | None, deadline: float,
                     base_env: dict | None = None) -> set[str]:
    """Instances whose wrong numbers differ between head and base although both fail the same way: run again on
    head and on base; those whose numbers change from run to run on either side (reads of uninitialised memory) are
    not told apart by their numbers, and count as failing the same way on both revisions."""
    if head_env is None:
        return set()
    again, base_again = [], []
    for f in findings:
        head = {o.instance_id: o for o in campaign.failures.get(f.signature, [])}
        for j in jobs:
            o = results.get(j.id)
            if (j.id.startswith(f"base{f.id}:") and o is not None and F.is_failure(o) and j.instance_id in head
                    and campaign.signature(o) == f.signature and not same_digest(o.digest, head[j.instance_id].digest)):
                again += [(_job(f"again{n}{f.id}", campaign, j.instance_id, f.target), head[j.instance_id])
                          for n in range(HEAD_AGAIN)]
                base_again += [(_job(f"baseagain{n}{f.id}", campaign, j.instance_id, f.target), o)
                               for n in range(BASE_AGAIN if base_env is not None else 0)]
    rerun = _run([j for j, _ in again], campaign, options, head_env, "head-again", deadline)
    rerun_base = _run([j for j, _ in base_again], campaign, options, base_env or {}, "base-again", deadline)
    return {j.instance_id for j, first in again
            if j.id in rerun and not same_digest(rerun[j.id].digest, first.digest)} | {
        j.instance_id for j, first in base_again
        if j.id in rerun_base and not same_digest(rerun_base[j.id].digest, first.digest)}


STAGE_ORDER = {"convert": 0, "compile": 1, "run": 2}


def _never_worked(base: Outcome, f: Finding) -> bool:
    """A crash whose input the base revision could not take either: a crash with the same exception, only worded
    otherwise or raised at another stage (a refactor that routes a call elsewhere changes the message, or moves to
    compile time the rejection of an input the base rejected while converting), or any crash or "unsupported" at
    the same stage or before it (a refactor turned a TypeError into a ValueError on an ord='nuc' that neither
    handles). The input never worked: not the PR's doing. (A base that got further is not: the PR broke that.)"""
    if f.oracle != "crash" or base.status not in (CRASH, UNSUPPORTED):
        return False
    if base.status == CRASH and base.symptom == f.symptom:
        return True
    return STAGE_ORDER.get(base.stage or "", 9) <= STAGE_ORDER.get(f.stage or "", -1)


def _part(f: Finding, instances: list[str], kind: str, base: dict[str, Outcome], campaign: Campaign,
          compare: Comparison = BASE, suffix: str = "") -> Finding:
    """The finding restricted to ``instances``, attributed ``kind`` (OLD, CHANGED or NEW); represented by the
    instance that fails on head and passes on base when new (its reproducer then fails on head and passes on
    base)."""
    new = kind == NEW
    part = Finding.from_dict(f.to_dict())
    part.signature = f.signature + suffix
    part.instances = sorted(instances)
    part.operators = sorted({campaign.instances[i].op for i in instances if i in campaign.instances})
    mine = {i: o for i, o in base.items() if i in instances}
    passing = [i for i, o in mine.items() if o.status == "pass"]
    spread = campaign.spread(instances)
    # a new part is shown on an instance that passes on base (its reproducer then passes there), an old one on one
    # that base re-ran; either on the one that stands best for it (Campaign.face)
    candidates = passing if new and passing else (list(mine) or list(instances))
    pick = min(candidates, key=lambda i: campaign.face(i, spread))
    if part.instance_id not in candidates or campaign.face(pick, spread) < campaign.face(part.instance_id, spread):
        head = next((o for o in campaign.failures.get(f.signature, []) if o.instance_id == pick), None)
        part.instance_id = pick
        part.operator, part.origin = campaign.instances[pick].op, campaign.instances[pick].origin.__dict__
        part.reduction = None  # the reduced instance belongs to the other part
        if head is not None:
            part.message, part.distance, part.traceback = head.message[:2000], head.distance, head.traceback[-4000:]
    o = mine.get(part.instance_id) or next(iter(mine.values()), None)
    compare.mark(part, new, {"status": o.status if o else "not run", "symptom": o.symptom if o else "",
                             "stage": o.stage if o else None, "same_failure": kind == OLD,
                             **({"changed": True} if kind == CHANGED else {}),
                             "instances": sorted(mine), "not_run": sorted(set(instances) - set(mine))})
    return part


def support_removed(campaign: Campaign, options: RunOptions, base_env: dict, head_env: dict,
                    deadline: float, base_passed: set | frozenset = frozenset()) -> list[Finding]:
    """Tests the head revision says it does not support (or crashes on saying "not implemented") that pass on the
    base revision: support the PR removed. Each is confirmed by a second head run before it counts.
    ``base_passed``: (instance id, target) the base revision already ran during the search (not asked again)."""
    groups = list(campaign.unsupported.items())[:SUPPORT_GROUPS]
    # round robin: every (target, operator)'s first reason before any second one, while the deadline lasts
    # (the first of each kind before a second of any kind)
    ranked = sorted(((within, rank, n, o) for n, (_key, outs) in enumerate(groups)
                     for rank, (within, o) in enumerate(zip(campaign.unsupported_rank(outs[:SUPPORT_PROBES]),
                                                            outs[:SUPPORT_PROBES]))),
                    key=lambda t: t[:3])
    probes = [_job(f"support{i}", campaign, o.instance_id, o.target) for i, (*_, o) in enumerate(ranked)]
    known = [j for j in probes if (j.instance_id, j.target) in base_passed]
    # an integer input with negative values has a twin with them made non-negative, asked in the same run: a base
    # that rounds a negative quotient the other way (trunc for floor) is wrong there, and only the twin shows that
    # it supported what head refuses
    twins = {}
    for n, j in enumerate(probes):
        twin = _non_negative(campaign.instances[j.instance_id]) if (j.instance_id, j.target) not in base_passed \
            else None
        if twin is not None:
            campaign.instances.setdefault(twin.id, twin)
            twins[j.id] = _job(f"supporttwin{n}", campaign, twin.id, j.target)
    on_base = _run([j for j in probes if (j.instance_id, j.target) not in base_passed] + list(twins.values()),
                   campaign, options, base_env, "support", deadline)
    passed = known + [j for j in probes if j.id in on_base and on_base[j.id].status == "pass"]
    passed += [twins[j.id] for j in probes if j.id in twins and j.id in on_base and on_base[j.id].status != "pass"
               and on_base.get(twins[j.id].id) is not None and on_base[twins[j.id].id].status == "pass"]
    confirm = {j.id: _job(f"head{n}", campaign, j.instance_id, j.target) for n, j in enumerate(passed)}
    again = _run(list(confirm.values()), campaign, options, head_env, "support-confirm", deadline)
    found: dict[tuple[str, str], Finding] = {}
    for j in passed:
        head = again.get(confirm[j.id].id)
        if head is None or head.status != "unsupported":
            continue
        key = (j.target, j.op)
        if key in found:
            found[key].instances.append(j.instance_id)
            continue
        target = campaign.targets[j.target]
        inst = campaign.instances[j.instance_id]
        found[key] = Finding(
            id=f"S{len(found) + 1:03d}", oracle="support", operator=j.op, target=j.target,
            target_version=target.version(), symptom="support removed", stage=head.stage,
            signature=f"{j.target}|support|{j.op}|support removed", message=head.message[:2000],
            instance_id=j.instance_id, origin=inst.origin.__dict__, traceback=head.traceback[-4000:],
            instances=[j.instance_id], operators=[j.op], new_in_pr=True, confirmed=True,
            base={"status": "pass", "same_failure": False, "instances": [j.instance_id]},
            extra={"exception": head.symptom})
    return list(found.values())


def _non_negative(inst):
    """The instance with its integer inputs' negative values made non-negative (|x|, the type's minimum to 0); None
    when it has none."""
    import numpy as np
    from dlci.reduce.edit import derive
    arrays, changed = dict(inst.arrays), False
    for key, a in inst.arrays.items():
        if key.startswith("in:") and isinstance(a, np.ndarray) and a.dtype.kind == "i" and (a < 0).any():
            arrays[key] = np.where(a < 0, np.abs(a), a).clip(0)
            changed = True
    if not changed:
        return None
    try:
        twin = derive(inst, inst, arrays=arrays)
    except ValueError:  # inputs not in the numbered form a twin is built from
        return None
    twin.origin.test = inst.origin.test + " (negative values made non-negative)"
    return twin


def relabel_support_crashes(findings: list[Finding]) -> None:
    """A new crash whose message says "not implemented"/"unsupported" where base passed is support removed too."""
    from dlci.targets._common import NOT_SUPPORTED
    for f in findings:
        if f.new_in_pr and f.oracle == "crash" and (f.base or {}).get("status") == "pass" \
                and NOT_SUPPORTED.search(f.message or ""):
            f.extra["exception"] = f.symptom
            f.symptom, f.oracle = "support removed", "support"


def fold(findings: list[Finding]) -> list[Finding]:
    """One finding per root cause in PR mode: the same operator failing the same way through several entry points
    (or as a function and as a module) is one changed converter misbehaving, reported once with ``also_in``."""
    from dlci import operators
    groups: dict[tuple, list] = {}
    for f in findings:
        # a graph failure that needs several operators is never the same root cause as one operator's own
        needs_graph = bool((f.extra.get("graph") or {}).get("multi_operator"))
        key = (F.attribution(f), f.oracle, f.stage, f.symptom, operators.instance_ops(f.operator), needs_graph)
        groups.setdefault(key, []).append(f)
    kept = []
    for group in groups.values():
        # the operator's own test stands for the group (its reproducer is the smallest), a generated graph's after
        group.sort(key=lambda f: f.origin.get("source") == "fuzz")
        head, rest = group[0], group[1:]
        for other in rest:
            head.also_in = sorted((set(head.also_in) | {other.target} | set(other.also_in)) - {head.target})
            head.operators = sorted(set(head.operators) | set(other.operators))
            head.instances = sorted(set(head.instances) | set(other.instances))
        kept.append(head)
    return kept


def check_one_on_base(f: Finding, options: RunOptions, base_env: dict, until: float | None = None,
                      warm=None) -> None:
    """Run a new finding's reproducer against the base revision, where it must pass, i.e. exit 0 (a timeout, or
    another error than the one reported, is not passing). It does not start after ``until`` or run past it. The scan
    calls it as the follow-up of the finding's check on head (dlci.campaign.reproduction.FollowUp). ``warm``: a
    dlci.findings.warm.WarmPool in the base's environment, whose child's pass is taken (as a warm "reproduces" is
    on head: the verdict expected, without the base's imports again); anything else is decided in a fresh one."""
    import subprocess
    import sys
    from dlci.exec import cancel
    from dlci.findings.repro import test_env
    limit = 600.0 if until is None else until - time.monotonic()
    if limit < 10:
        options.progress(f"reproducer {f.repro} on base: not run (budget)")
        return
    path = (options.out / f.repro).resolve()
    got = warm.run(path, min(limit, 120.0)) if warm is not None else None
    if got is not None and got.returncode == 0 and "REPRODUCED" not in got.stdout:
        path.with_suffix(".base.log").write_text(f"exit 0 (a child of a warm interpreter)\n--- stdout\n{got.stdout}\n"
                                                 f"--- stderr\n{got.stderr[-20000:]}")
        f.repro_passes_on_base = True
        options.progress(f"reproducer {f.repro} on base: passes")
        return
    limit = 600.0 if until is None else until - time.monotonic()
    if limit < 1:
        options.progress(f"reproducer {f.repro} on base: not run (budget)")
        return
    try:
        proc = cancel.run([sys.executable, str(path)], timeout=limit, cwd=str(path.parent), env=test_env(base_env))
    except subprocess.TimeoutExpired:
        path.with_suffix(".base.log").write_text(f"timed out after {limit:.0f} s\n")
        return
    path.with_suffix(".base.log").write_text(f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n"
                                             f"{proc.stderr[-20000:]}")
    f.repro_passes_on_base = proc.returncode == 0 and "REPRODUCED" not in proc.stdout
    options.progress(f"reproducer {f.repro} on base: {'passes' if f.repro_passes_on_base else 'fails'}")
    if proc.returncode == 1 and "REPRODUCED" in proc.stdout and f.new_in_pr:
        # the base re-run in a worker passed, the reproducer (what a maintainer will run) fails there as it does
        # on the PR: the bug is already on base, and calling it new would fail the PR for it. Another exit
        # (an error of the base environment, a timeout) proves nothing and leaves the finding new.
        f.new_in_pr = False
        f.base = {**(f.base or {}), "reproducer_fails_on_base": True,
                  "note": "the campaign's re-run passed on the base revision, but the standalone reproducer "
                          "fails there the same way: already on base"}


FIXED_PROBES = 24  # head-passing tests that ran changed code, re-run on base to find what the PR fixed


def fixed_in_pr(campaign: Campaign, options: RunOptions, base_env: dict, reaching: list[tuple[str, str]],
                deadline: float) -> list[dict]:
    """What the pull request fixed: tests that ran changed code and passed on head, re-run on the base revision,
    where they fail or are not supported (twice, the same way: a PR that adds a function fixes what base refused).
    One entry per (target, operator, failure)."""
    failed = {(o.instance_id, o.target) for outs in campaign.failures.values() for o in outs}
    failed |= {(o.instance_id, o.target) for outs in campaign.unsupported.values() for o in outs}
    passing = [(iid, t) for iid, t in reaching if iid in campaign.instances and (iid, t) not in failed][:FIXED_PROBES]
    jobs = [_job(f"fixed{n}", campaign, iid, t) for n, (iid, t) in enumerate(passing)]
    first = _run(jobs, campaign, options, base_env, "fixed", deadline)
    failing = [j for j in jobs if j.id in first and (F.is_failure(first[j.id]) or first[j.id].status == UNSUPPORTED)]
    again = _run([_job(f"fixed-again{n}", campaign, j.instance_id, j.target) for n, j in enumerate(failing)],
                 campaign, options, base_env, "fixed-confirm", deadline)
    found: dict[tuple, dict] = {}
    for n, j in enumerate(failing):
        o, o2 = first[j.id], again.get(f"fixed-again{n}:{j.instance_id}@{j.target}")
        if o2 is None or campaign.signature(o2) != campaign.signature(o):
            continue
        key = (j.target, j.op, campaign.signature(o))
        if key in found:
            found[key]["instances"].append(j.instance_id)
            continue
        inst = campaign.instances[j.instance_id]
        found[key] = {"operator": j.op, "target": j.target, "status_on_base": o.status, "symptom": o.symptom,
                      "stage": o.stage, "message": (o.message or "")[:500], "instance": j.instance_id,
                      "test": inst.origin.test, "instances": [j.instance_id]}
    return list(found.values())
