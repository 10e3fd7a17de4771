"""`dlci scan`: one pull request, end to end.

diff (merge base..head) -> profiles map changed code to operators and converters -> the migrated instances of those
operators, each sent only to the targets that reach the changed converter -> run on the head revision's own code
(every failure re-run before it counts; converter lines traced while converting) -> each confirmed finding re-run on
the base revision (new in the PR, or already on base) -> reproducers checked on head (must fail) and base (should
pass) -> findings.json / report.md with the touched operators, the file:line that selected each, and the changed
lines no instance reached.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dlci.campaign import Campaign, Clock, RunOptions, publish, stages
from dlci.config import CONFIG_FILE, Config, ConfigError
from dlci.findings import is_new
from dlci.report.document import Report
from dlci.scan import attribution, coverage, selection

DEFAULT_BUDGET = 300.0
@dataclass
class ScanRequest:
    repo: Path
    base: str
    head: str
    options: RunOptions                # options.budget None: .dlci.yml's budget, else DEFAULT_BUDGET
    targets: list[str] | None = None   # explicit --targets (intersected with what the diff reaches)
    fuzz_share: float | None = None    # --fuzz-share: overrides .dlci.yml fuzz.share
    # since when (.dlci.yml ``bisect``): dlci.bisect.attribution.in_scan, which the caller passes (bisect builds on
    # scan); None: no bisection
    bisect: Callable | None = None


def scan(req: ScanRequest) -> Report:
    """Run the scan and write its report into ``req.options.out``."""
    from dlci import operators, profiles
    from dlci.checkout import Checkout
    from dlci.diff import GitRepo

    t0 = time.time()
    say = req.options.progress
    out = req.options.out
    out.mkdir(parents=True, exist_ok=True)
    repo = GitRepo(req.repo, req.base, req.head)
    # policy from the base revision (the PR cannot narrow its own testing or silence its findings); what each
    # revision needs to build and import itself from that revision (dlci.config.Config.BUILD_KEYS)
    head_config = Config.parse(repo.text(CONFIG_FILE, "head"), f"{CONFIG_FILE} at {repo.head[:12]}")
    base_config = Config.parse(repo.text(CONFIG_FILE, repo.base_tip), f"{CONFIG_FILE} at {repo.base_tip[:12]}")
    config = base_config.with_build_of(head_config)
    policy_changed = base_config.policy_changes(head_config)
    # the run options, completed from .dlci.yml where the command line left them open
    options = dataclasses.replace(req.options, budget=req.options.budget or config.budget or DEFAULT_BUDGET,
                                  sources=req.options.sources or config.sources or None,
                                  limit_per_op=req.options.limit_per_op or config.limit_per_op,
                                  known=list(req.options.known) + config.known())
    clock = Clock(options.budget)
    try:
        analysis = profiles.analyse(repo, only=config.profiles or None)
    except KeyError as e:
        raise ConfigError(str(e).strip("'\"")) from None
    repo.last_diff = analysis.diff  # computed once; later steps read it from here
    ops_doc = analysis.to_dict()
    (out / "ops.json").write_text(json.dumps(ops_doc, indent=2) + "\n")
    say(f"diff {repo.base[:12]}..{repo.head[:12]}: {ops_doc['files_changed']} files, {ops_doc['lines_changed']} "
        f"lines; profiles {', '.join(analysis.profiles) or '-'}; {len(ops_doc['operators'])} operators touched "
        f"({analysis.seconds:.2f} s)")
    pr = {"repo": str(repo.path), "out": str(out.resolve()), "base": repo.base, "base_ref": req.base,
          "head": repo.head, "config": config.source, "profiles": analysis.profiles, "touched": ops_doc["touches"],
          "unmapped": ops_doc["unmapped"], "graph_level": ops_doc["graph_level"], "diff_notes": ops_doc["notes"],
          "nothing_to_test": None}
    if policy_changed:
        pr["policy_changed"] = policy_changed
        say(f"this PR changes {CONFIG_FILE}'s policy ({', '.join(policy_changed)}): the base revision's is used")

    def nothing_to_test(reason: str) -> Report:
        pr["nothing_to_test"] = reason
        stats = {"tests_run": 0, "tests_valid": 0, "seconds": round(time.time() - t0, 2), "per_target": {},
                 "operators": 0, "instances": 0,
                 **({"targets_not_on_runner": pr["targets_not_on_runner"]} if pr.get("targets_not_on_runner") else {})}
        report = Report(findings=[], stats=stats, pr=pr)
        report.write(out)
        say(f"nothing to test: {reason}")
        return report

    fuzz = selection.fuzz_share(analysis, config, req.targets, share=req.fuzz_share)
    if fuzz is not None:
        pr["fuzz"] = fuzz.describe()
    if not analysis.touches and fuzz is None:
        return nothing_to_test("the diff touches no operator converter that a profile recognises")

    chosen, want = _targets(analysis, config, req, pr) if analysis.touches else ({}, {})
    if not chosen and fuzz is None and pr.get("targets_not_on_runner"):
        return nothing_to_test(f"the touched code is reached by target(s) "
                               f"{', '.join(sorted(pr['targets_not_on_runner']))}, which need a device this runner "
                               "does not have (a runner pool's gpu shard tests them)")
    if not chosen and fuzz is None:
        return nothing_to_test(f"the touched converters are reached by target(s) "
                               f"{', '.join(sorted({x for t in analysis.touches for x in t.targets})) or '-'}, "
                               "none of which is installed or selected here")
    pr["operators"] = sorted(want)
    from dlci import sources
    from dlci.sources.selection import gather
    frameworks = {f for t in chosen.values() for f in t.frameworks}
    instances = gather(options.sources or sources.PR_SOURCES, sorted(want), limit_per_op=options.limit_per_op,
                       frameworks=frameworks, progress=say, canonical=True) if want else []

    def route(inst):
        return {x for c in operators.instance_ops(inst.op) & want.keys() for x in want[c]}

    # only what reaches a chosen target (a source's instances of related operators go nowhere): the plan's order,
    # its diversity and the first case of each variant kind are then about the tests that run
    instances = [i for i in instances if any(i.framework in chosen[t].frameworks for t in route(i) & chosen.keys())]
    pr["instances_selected"] = len(instances)
    if not instances and want:
        pr["test_gap"] = "no migrated instance exists for the touched operators"
    if not instances and fuzz is None:
        return nothing_to_test(f"no migrated instance of the touched operators ({', '.join(sorted(want))})")

    profiles_here = [profiles.PROFILES[n] for n in analysis.profiles]
    workdir = Path(tempfile.mkdtemp(prefix="dlci-scan-"))
    checkouts: dict[str, Checkout] = {}
    try:
        say(f"checking out head {repo.head[:12]} (git worktree)")
        head = checkouts["head"] = Checkout.create(repo.path, repo.head, workdir, "head")
        head.prepare(config, profiles_here)
        defaults = selection.runtime_defaults(analysis.profiles)
        head_env = head.env(config, *defaults)
        converter_files = selection.converter_files(analysis)
        trace = tuple(str((head.path / f).resolve()) for f in converter_files)
        cache = coverage.CoverageCache()
        say(f"{len(instances)} instances of {len({i.op for i in instances})} operators -> "
            f"{', '.join(chosen)}; budget {options.budget:.0f} s")

        campaign = Campaign({i.id: i for i in instances}, {**chosen, **(fuzz.targets if fuzz else {})},
                            not_on_runner=dict(pr.get("targets_not_on_runner") or {}),
                            preferred_ops=list(dict.fromkeys(c for t in analysis.touches
                                                             for c in operators.canonical(t.operator, t.namespace))))
        tests = stages.plan(instances, campaign.targets, route=route,
                            order=coverage.edited_lines_first(repo, converter_files, cache))
        (out / "repro").mkdir(parents=True, exist_ok=True)
        findings: list = []
        base_env = None
        try:
            clock.testing_starts()
            with stages.open_engine(options, campaign.targets, env=head_env) as engine:
                if tests:
                    # the operators' own tests first; the fuzz share's graphs after them, in what is left
                    until = clock.tests_until if fuzz is None else \
                        time.monotonic() + (1 - fuzz.share) * (clock.tests_until - time.monotonic())
                    stages.execute(campaign, tests, engine, options, trace_files=trace,
                                   until=until, hard_until=clock.hard,
                                   reaches_change=coverage.reach_test(head.path, converter_files, repo))
                if fuzz is not None and not campaign.interrupted:
                    _fuzz(campaign, fuzz, engine, options, clock, say)
            findings = _fold_graph_duplicates(stages.collect(campaign))
            if (findings or campaign.unsupported) and not campaign.interrupted:
                say(f"re-running {len(findings)} finding(s) and {len(campaign.unsupported)} unsupported "
                    f"operator(s) on the base revision {repo.base[:12]}")
                base = checkouts["base"] = Checkout.create(repo.path, repo.base, workdir, "base")
                base_build = config.with_build_of(base_config)  # the base builds and imports as its own file says
                base.prepare(base_build, profiles_here)
                base_env = base.env(base_build, *defaults)
                findings = attribution.attribute(findings, campaign, options, base_env, clock.post(0.45), head_env)
                attribution.relabel_support_crashes(findings)
                findings += attribution.support_removed(campaign, options, base_env, head_env, clock.post(0.55))
                findings = attribution.fold(findings)
                findings = _without_old_graph_findings(findings, pr)
                for f in findings:
                    cov = [campaign.coverage.get((iid, f.target), {}) for iid in f.instances]
                    f.reaches_change = coverage.reaches(cov, head.path, converter_files, repo) \
                        if converter_files else None
            findings.sort(key=lambda f: not is_new(f))  # what the PR broke first: reduced and reproduced first
            if options.reduce and findings and not campaign.interrupted:
                with stages.open_engine(options, campaign.targets, env=head_env) as engine:
                    stages.reduce(findings, campaign, engine, options, until=clock.post(0.75),
                                  hard_until=clock.hard)
            pr["coverage"] = coverage.summary(campaign, head.path, converter_files, repo, cache)
            pr["head_run"] = head.run_hint(head_env)
            if base_env is not None:
                pr["base_run"] = checkouts["base"].run_hint(base_env)
            report = publish(campaign, findings, options, env=head_env, pr=pr, until=clock.post(0.85),
                             hard_until=clock.hard)
            if options.check_repros and base_env is not None:
                attribution.check_on_base([f for f in report.findings if is_new(f)], options, base_env,
                                          until=clock.hard)
            if report.findings and not campaign.interrupted:
                report.write(out)  # the scan's results are safe before bisection (its own budget) starts
                bisected = _bisect(req.bisect, report.findings, repo, config, profiles_here, defaults, out, say)
                if bisected:
                    pr["bisect"] = bisected
        except BaseException:
            # budget, cancellation or an internal error: what was gathered is written before anything else
            campaign.interrupted = True
            stages.report(campaign, findings or stages.collect(campaign), pr=pr).write(out)
            raise
        pr["known_issues_matched"] = sum(1 for f in report.findings if f.known)
        report.stats["setup_seconds"] = round(clock.setup_seconds, 1)  # diff, sources, checkouts: before testing
        report.stats["seconds"] = round(time.time() - t0, 2)
        report.write(out)
        return report
    finally:
        for c in checkouts.values():
            c.remove()
        shutil.rmtree(workdir, ignore_errors=True)


def _bisect(in_scan: Callable | None, findings: list, repo, config: Config, profiles_here: list, defaults: tuple,
            out: Path, say) -> dict | None:
    """Since when (.dlci.yml ``bisect``): the commit of the PR that introduced each new finding, the release that
    introduced each one already on base (``in_scan``: dlci.bisect.attribution.in_scan). A bisection that cannot run
    is said; it never costs the scan its report."""
    from dlci.errors import InfrastructureError, UsageError
    if in_scan is None:
        return None
    try:
        return in_scan(findings, out, repo.path, repo.base, repo.head, config, profiles=profiles_here,
                       defaults=defaults, say=say)
    except (UsageError, InfrastructureError) as e:
        say(f"bisection failed: {e}")
        return {"error": str(e)}


def _fold_graph_duplicates(findings: list) -> list:
    """A generated graph's failure localised to one operator that the operator's own tests also show on the same
    target, the same way, is that finding again: folded into it before anything re-runs it on base."""
    from dlci import operators
    own = {(f.target, f.oracle, f.stage, f.symptom, operators.instance_ops(f.operator)): f
           for f in findings if f.origin.get("source") != "fuzz"}
    kept = []
    for f in findings:
        g = f.extra.get("graph") or {}
        head = own.get((f.target, f.oracle, f.stage, f.symptom, operators.instance_ops(f.operator))) \
            if f.origin.get("source") == "fuzz" and g and not g.get("multi_operator") else None
        if head is None:
            kept.append(f)
            continue
        head.extra["also_in_generated_graphs"] = head.extra.get("also_in_generated_graphs", 0) + len(f.instances)
    return kept


def _without_old_graph_findings(findings: list, pr: dict) -> list:
    """The fuzz share's failures that the base revision shows the same way are not the PR's and, unlike an old
    failure of a touched operator, have nothing to do with what it changed: counted in the report, not reduced,
    reproduced or listed as findings."""
    old = [f for f in findings if f.origin.get("source") == "fuzz" and f.new_in_pr is False]
    if old:
        pr["fuzz_already_on_base"] = [{"operator": f.operator, "target": f.target, "symptom": f.symptom,
                                       "signature": f.signature} for f in old]
    return [f for f in findings if f not in old]


def _fuzz(campaign: Campaign, share, engine, options: RunOptions, clock: Clock, say) -> None:
    """The fuzz share: generated networks around the touched operators (or over the whole corpus for graph-level
    changes) on the head revision, until testing time is up."""
    from dlci.fuzz import FuzzRequest, fuzz_stream
    say(f"fuzz share: {share.why}; targets {', '.join(share.targets)}; "
        f"{max(0.0, clock.tests_until - time.monotonic()):.0f} s")
    req = FuzzRequest(share.targets, options, strategy=share.strategy, seed=share.seed, max_blocks=share.max_blocks,
                      must=share.must)
    stream = fuzz_stream(campaign, req, say)
    campaign.extra_stats["fuzz"] = stream.stats
    stages.execute(campaign, stream, engine, options, until=clock.tests_until, hard_until=clock.hard)


def _targets(analysis, config: Config, req: ScanRequest, pr: dict) -> tuple[dict, dict[str, set[str]]]:
    """The targets to run (reaching the touched converters, narrowed by --targets / .dlci.yml) and, per canonical
    operator, the targets its instances go to."""
    from dlci import operators, targets
    wanted = req.targets or config.targets or None
    plain = [t for t in wanted or [] if not t.startswith("rule.")]  # rule.<name>: selection.rule_targets
    reached = sorted({x for t in analysis.touches for x in t.targets})
    absent: dict[str, str] = {}  # device targets whose device is not here
    chosen = targets.select(plain, absent) if plain else {} if wanted else targets.select("all", absent)
    if reached:
        registry = targets.registry()
        missing = [x for x in reached if x not in registry or registry[x].probe is None
                   and not registry[x].available()]
        if missing:
            pr["targets_not_installed"] = missing
        chosen = {n: t for n, t in chosen.items() if n in reached}
        absent = {n: why for n, why in absent.items() if n in reached or n in plain}
    if absent:
        pr["targets_not_on_runner"] = absent
        req.options.progress(targets.not_on_runner_note(absent))
    want = selection.canonical_targets(analysis, chosen)
    rules = selection.rule_targets(analysis, config, req.targets)
    if rules:  # a library's own PR: its equivalence rules run on the operators it touched
        chosen.update(rules)
        for t in analysis.touches:
            if t.profile in selection.RULE_LIBRARIES and not selection.device_only(t):
                for canon in operators.canonical(t.operator, t.namespace):
                    want.setdefault(canon, set()).update(
                        n for n, r in rules.items() if r.rule.library == selection.RULE_LIBRARIES[t.profile])
        pr["rules"] = sorted(rules)
    return chosen, want
