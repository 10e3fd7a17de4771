"""Base attribution in PR mode: is a confirmed finding new in the PR, or already on the base revision?"""
from __future__ import annotations

import time
from pathlib import Path

from dlci import findings as F
from dlci.campaign import Campaign, RunOptions
from dlci.campaign.stages import open_engine
from dlci.exec import Job
from dlci.findings import Finding
from dlci.outcome import Outcome, same_digest

BASE_RERUNS = 2  # instances of a finding re-run on the base revision


def attribute(findings: list[Finding], campaign: Campaign, options: RunOptions, base_env: dict) -> None:
    """Re-run each finding's instances on the base revision: the same failure there means it is not new."""
    jobs, owner = [], {}
    for f in findings:
        for iid in ([f.instance_id] + [i for i in f.instances if i != f.instance_id])[:BASE_RERUNS]:
            job = Job(id=f"base:{f.id}:{iid}", func=campaign.targets[f.target].job_func,
                      args=(campaign.instances[iid], f.target), instance_id=iid,
                      op=campaign.instances[iid].op, target=f.target, affinity=iid)
            jobs.append(job)
            owner[job.id] = f
    results: dict[str, list[Outcome]] = {}

    def on_result(job, result):
        results.setdefault(owner[job.id].id, []).append(Outcome.from_dict(result))

    with open_engine(options, campaign.targets, env=base_env, log_dir=Path(options.out) / "logs" / "base") as engine:
        engine.run(jobs, on_result, deadline=time.monotonic() + max(120.0, 0.25 * (options.budget or 0.0)))
    for f in findings:
        outs = results.get(f.id, [])
        if not outs:
            f.new_in_pr, f.base = None, {"status": "not run", "note": "base re-run did not complete"}
            continue
        head_outs = {o.instance_id: o for o in campaign.failures.get(f.signature, [])}
        # the same failure: same signature and, for wrong results, the very same wrong numbers (a PR that changes
        # how wrong a result is has changed behaviour)
        same = [o for o in outs if F.is_failure(o) and campaign.signature(o) == f.signature
                and (o.instance_id not in head_outs or same_digest(o.digest, head_outs[o.instance_id].digest))]
        f.new_in_pr = not same
        o = same[0] if same else outs[0]
        f.base = {"status": o.status, "symptom": o.symptom, "stage": o.stage, "same_failure": bool(same),
                  "instances": [x.instance_id for x in outs]}
        passing = [x.instance_id for x in outs if x.status == "pass"]
        if f.new_in_pr and passing and f.instance_id not in passing:
            f.instance_id = passing[0]  # the reproducer then fails on head and passes on base


def fold(findings: list[Finding]) -> list[Finding]:
    """One finding per root cause in PR mode: the same operator failing the same way through several entry points
    (or as a function and as a module) is one changed converter misbehaving, reported once with ``also_in``."""
    from dlci import operators
    groups: dict[tuple, list] = {}
    for f in findings:
        key = (f.new_in_pr, f.oracle, f.stage, f.symptom, operators.instance_ops(f.operator))
        groups.setdefault(key, []).append(f)
    kept = []
    for group in groups.values():
        head, rest = group[0], group[1:]
        for other in rest:
            head.also_in = sorted((set(head.also_in) | {other.target} | set(other.also_in)) - {head.target})
            head.operators = sorted(set(head.operators) | set(other.operators))
            head.instances = sorted(set(head.instances) | set(other.instances))
        kept.append(head)
    return kept


def check_on_base(findings: list[Finding], options: RunOptions, base_env: dict) -> None:
    """Run each reproducer against the base revision: a new bug's must pass there (exit 0)."""
    from concurrent.futures import ThreadPoolExecutor
    from dlci.findings.repro import check_repro

    def on_base(f: Finding) -> None:
        f.repro_passes_on_base = not check_repro(options.out / f.repro, env=base_env, log_suffix=".base.log")
    with ThreadPoolExecutor(max(1, options.workers)) as pool:
        list(pool.map(on_base, [f for f in findings if f.repro]))
