"""One test campaign: instances × targets within a budget, to confirmed findings with reproducers.

:func:`run` composes the stages (:mod:`dlci.campaign.stages`, :mod:`~dlci.campaign.execution`,
:mod:`~dlci.campaign.reproduction`) for an explicit run (``dlci test``, ``dlci rules``);
``dlci.scan`` composes the same stages for a pull request. Whatever happens (budget, SIGTERM, dead workers, an
internal error), what was gathered is written out: findings.json, report.md, results.jsonl and repro/.
"""
from __future__ import annotations

from typing import Sequence

from dlci.campaign import stages
from dlci.campaign.execution import execute, open_engine
from dlci.campaign.clock import Clock
from dlci.campaign.options import FAIL_ON, RunOptions
from dlci.campaign.reproduction import FollowUp, reproduce
from dlci.campaign.state import Campaign
from dlci.campaign.stages import Route, Test
from dlci.instance import Instance
from dlci.report.document import Report


def run(instances: Sequence[Instance], targets: dict, options: RunOptions, *, route: stages.Route | None = None,
        not_on_runner: dict[str, str] | None = None, against=None) -> Report:
    """Run a campaign and write its report into ``options.out``. ``route``: the targets each instance goes to
    (default: every target that accepts its framework); ``not_on_runner``: device targets named that cannot run
    here, with the reason (reported, never failures). ``against``: a
    :class:`dlci.bisect.attribution.ReleaseComparison` that attributes the findings to the installed release or an
    older one (``dlci test --against``)."""
    campaign = Campaign({i.id: i for i in instances}, dict(targets), not_on_runner=dict(not_on_runner or {}))
    return run_tests(campaign, stages.plan(instances, campaign.targets, route=route), options, against=against)


def run_tests(campaign: Campaign, tests, options: RunOptions, *, against=None) -> Report:
    """The stages on given tests: a plan, or a source that makes its tests as it goes (``self_scheduling``: the
    graph fuzzer, which adds its instances to ``campaign.instances`` as it makes them)."""
    out = options.out
    (out / "repro").mkdir(parents=True, exist_ok=True)
    clock = Clock(options.budget or 0.0)
    findings: list = []
    try:
        with open_engine(options, campaign.targets) as engine:
            execute(campaign, tests, engine, options, until=clock.tests_until, hard_until=clock.hard)
            findings = stages.collect(campaign)
            if options.reduce and not campaign.interrupted and against is None:
                stages.reduce(findings, campaign, engine, options, until=clock.post(0.6),
                              hard_until=clock.hard)
        if against is not None:
            return _against(against, campaign, findings, options, clock)
        return publish(campaign, findings, options, until=clock.post(0.9), hard_until=clock.hard)
    except BaseException:
        # an internal error must not lose what was gathered: write the partial report, then fail loudly
        campaign.interrupted = True
        stages.report(campaign, findings or stages.collect(campaign)).write(out)
        raise


def _against(against, campaign: Campaign, findings: list, options: RunOptions, clock: Clock) -> Report:
    """Release attribution (its workers under the older release; the test workers are gone by then), reduction
    of what the installed release broke first, the reproducers, each compared one run under the older release too."""
    if findings and not campaign.interrupted:
        findings = against.classify(findings, campaign, options, deadline=clock.post(0.25))
        if options.reduce:
            with open_engine(options, campaign.targets) as engine:
                stages.reduce(findings, campaign, engine, options, until=clock.post(0.45), hard_until=clock.hard)
    # the reproducers run twice, on the installed release then on the older one: each gets its share (no check
    # starts after 0.7 of the window, none runs past 0.85: the older release's verdicts come before more
    # test-style checks)
    report = publish(campaign, findings, options, until=clock.post(0.7), hard_until=clock.post(0.85))
    if options.check_repros and not campaign.interrupted:
        against.check_reproducers(report.findings, options.out, options.workers, until=clock.hard)
    report.extra["against"] = against.summary(report.findings)
    report.write(options.out)
    return report


def nothing_here(not_on_runner: dict[str, str], options: RunOptions) -> Report:
    """The report of a run whose every target is a device target absent from this runner: nothing ran, nothing
    failed (exit 0), and the report says which targets and why."""
    (options.out / "repro").mkdir(parents=True, exist_ok=True)
    report = stages.report(Campaign({}, {}, not_on_runner=dict(not_on_runner)), [])
    report.write(options.out)
    return report


def publish(campaign: Campaign, findings: list, options: RunOptions, *, env: dict | None = None,
            pr: dict | None = None, until: float | None = None, hard_until: float | None = None,
            follow_up: FollowUp | None = None) -> Report:
    """Write the findings, then their reproducers (run alone when asked, none started after ``until``, some followed
    up: :class:`FollowUp`), then the final report with the known issues marked. The first write means a crash while
    reproducing loses nothing."""
    stages.report(campaign, findings, pr=pr).write(options.out)
    reported, unreproduced = reproduce(findings, campaign, options, env=env, until=until, hard_until=hard_until,
                                       follow_up=follow_up)
    report = stages.report(campaign, reported, unreproduced=unreproduced, pr=pr)
    unchecked = [f.id for f in reported if f.repro and f.repro_checked is None and options.check_repros]
    if unchecked:  # reported, reproducer rendered, but the budget ended before it could run alone
        report.stats["not_reproduced_in_budget"] = unchecked
    report.mark_known(options.known)
    report.write(options.out)
    return report


__all__ = ["Campaign", "Clock", "FAIL_ON", "Report", "Route", "RunOptions", "Test", "nothing_here", "publish", "run",
           "run_tests", "stages"]
