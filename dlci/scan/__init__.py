"""`dlci scan`: one pull request, end to end. ``_scan`` reads as its stages:

1. read_pull_request   the diff (merge base..head), .dlci.yml of both revisions (policy from base), the profiles'
                       map of changed code to operators and converters (ops.json);
2. select_tests        the targets the touched converters reach, the operators' instances routed to them, the
                       fuzz share; or why there is nothing to test;
3. check_imports       each changed converter file imported at head (and base where it fails): one that no longer
                       imports is a finding for every operator it maps (dlci.scan.imports);
4. repo_tests          the models the repository's own tests hand the frontend, recorded on head (seeds);
5. test_head           the operators' own tests on head (changed lines traced), the directed search while changed
                       code is unreached and then where head and base diverge (dlci.directed), the fuzz share;
6. attribute_on_base   each confirmed finding re-run on base: new in the PR, already on base, support removed,
                       fixed by the PR;
7. reduce_findings     what the PR broke first, shrunk;
8. write_report        reproducers checked alone on head (and base), findings.json / report.md, bisection.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dlci.campaign import Campaign, Clock, RunOptions, publish, stages
from dlci.campaign.state import add_phase
from dlci.campaign.execution import execute, open_engine
from dlci.campaign.reproduction import MIN_CHECK_SECONDS, FollowUp, reproducers_owed
from dlci.config import CONFIG_FILE, Config, ConfigError
from dlci.findings import attribution as attribution_of, is_new
from dlci.findings.repro import test_env
from dlci.findings.warm import WarmPool
from dlci.report.document import Report
from dlci import directed
from dlci.directed import Search
from dlci.errors import InfrastructureError
from dlci.scan import attribution, coverage, imports, repo_tests, selection

DEFAULT_BUDGET = 170.0  # a scan of a pull request ends within three minutes on two cores (its wall ends near it)
# a test still running this long after its phase ended is stopped without an outcome: a hang (a mutant TVM runs for
# minutes) must not hold the search, the re-runs on base and the reproducers to its 120 s timeout
STRAGGLER_SECONDS = 15.0


@dataclass
class ScanRequest:
    repo: Path
    base: str
    head: str
    options: RunOptions                # options.budget None: .dlci.yml's budget, else DEFAULT_BUDGET
    targets: list[str] | None = None   # explicit --targets (intersected with what the diff reaches)
    fuzz_share: float | None = None    # --fuzz-share: overrides .dlci.yml fuzz.share
    directed: bool = True              # --no-directed: no directed search (the benchmarks' other side)
    divergence: bool = True            # --no-divergence: the directed search runs nothing on the base revision
    repo_tests: bool = True            # --no-repo-tests: the repository's own tests are not read for seeds
    # since when (.dlci.yml ``bisect``): dlci.bisect.attribution.in_scan, which the caller passes (bisect builds on
    # scan); None: no bisection
    bisect: Callable | None = None


def scan(req: ScanRequest) -> Report:
    """Run the scan and write its report into ``req.options.out``. It runs the pull request's code: what it caches
    is kept apart from what trusted runs read (dlci.cache)."""
    from dlci import cache
    with cache.untrusted_run():
        return _scan(req)


def _scan(req: ScanRequest) -> Report:
    """The scan's stages, in order; each reads what the earlier ones left in ``pull`` (the pull request as read)
    and returns what the later ones need."""
    pull = read_pull_request(req)                         # diff, policy from base, profiles -> touched operators
    chosen = select_tests(pull)                           # targets and the operators' instances, or why none
    if chosen.nothing is not None and not selection.converter_files(pull.analysis):
        return report_nothing_to_test(pull, chosen)
    with Revisions(pull) as revisions:
        broken = check_imports(pull, chosen, revisions)  # changed converter files imported at head (and base)
        if chosen.nothing is None:  # the head's proof runs from now on, beside the repository's tests and the first
            revisions.checkout_head(_converter_files(pull, revisions))  # of the operators'
        if pull.req.repo_tests:  # the models the repository's own tests hand the frontend, recorded on head
            repo_tests.add_to_selection(pull, chosen, revisions)
        if chosen.nothing is not None:
            return report_nothing_to_test(pull, chosen, revisions, broken)
        tested = test_head(pull, chosen, revisions)       # operators' tests, directed search, fuzz share on head
        findings = None
        try:
            with attribution.shared_engines():  # one engine per revision for the re-runs and the reduction
                t0 = time.monotonic()
                findings = attribute_on_base(pull, tested, revisions)  # new in the PR, already on base, fixed by it
                add_phase(tested.campaign, "on_base", t0)
                t0 = time.monotonic()
                reduce_findings(pull, tested, findings, revisions)     # smallest failing instances
                add_phase(tested.campaign, "reduce", t0)
            return write_report(pull, tested, findings, revisions, broken)  # reproducers, report, since when
        except BaseException:
            # budget, cancellation or an internal error: what was gathered is written before anything else
            tested.campaign.interrupted = True
            stages.report(tested.campaign, findings or stages.collect(tested.campaign), pr=pull.pr).write(pull.out)
            raise


# -- what the stages pass on ----------------------------------------------------------------------------------------

@dataclass
class PullRequest:
    """The pull request as read: its diff, the policy that applies, what the profiles made of it, the run's options
    and clock, and the ``pr`` section of the report that every stage adds to."""
    req: ScanRequest
    repo: object                  # dlci.diff.GitRepo
    config: Config                # the base revision's policy with the head revision's build keys
    base_config: Config
    options: RunOptions
    clock: Clock
    analysis: object              # dlci.profiles.Analysis
    pr: dict
    started: float

    @property
    def out(self) -> Path:
        return self.options.out

    @property
    def say(self) -> Callable[[str], None]:
        return self.options.progress


@dataclass
class Selection:
    """What to test: targets, per canonical operator the targets its instances go to, the instances, the fuzz
    share; or ``nothing``: why there is nothing to test."""
    chosen: dict = dataclasses.field(default_factory=dict)
    want: dict = dataclasses.field(default_factory=dict)
    instances: list = dataclasses.field(default_factory=list)
    fuzz: object = None
    nothing: str | None = None
    untested_change: bool = False  # ``nothing`` while the touched operators are left untested: never a clean run

    def route(self, inst) -> set[str]:
        from dlci import operators
        return {x for c in operators.instance_ops(inst.op) & self.want.keys() for x in self.want[c]}

    def reaches(self, inst) -> bool:
        """Whether a chosen target it is routed to can test it (an nn.Module reaches torch.onnx, never torchlib)."""
        return any(stages.takes(self.chosen[t], inst) for t in self.route(inst) & self.chosen.keys())


@dataclass
class HeadRun:
    """What testing the head revision left: the campaign, the converter files traced, the directed search."""
    campaign: Campaign
    chosen: Selection
    converter_files: list
    search: object                # dlci.directed.Search or None
    coverage_cache: object


# -- 1. the pull request ---------------------------------------------------------------------------------------------

def read_pull_request(req: ScanRequest) -> PullRequest:
    """Diff (merge base..head), the configuration of both revisions, the profiles' analysis (ops.json)."""
    from dlci import profiles
    from dlci.diff import GitRepo
    started = time.time()
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
    return PullRequest(req, repo, config, base_config, options, clock, analysis, pr, started)


# -- 2. what to test -------------------------------------------------------------------------------------------------

def select_tests(pull: PullRequest) -> Selection:
    """The targets the touched converters reach, the operators' instances routed to them, the fuzz share; or why
    there is nothing to test (a touched operator without material is a test gap, said as such)."""
    from dlci import operators, sources
    from dlci.sources.selection import gather
    analysis, config, req, pr = pull.analysis, pull.config, pull.req, pull.pr
    fuzz = selection.fuzz_share(analysis, config, req.targets, share=req.fuzz_share)
    if fuzz is not None:
        pr["fuzz"] = fuzz.describe()
    if not analysis.touches and fuzz is None:
        return Selection(nothing="the diff touches no operator converter that a profile recognises")
    chosen, want = _targets(analysis, config, req, pr) if analysis.touches else ({}, {})
    if not chosen and fuzz is None and pr.get("targets_not_on_runner"):
        return Selection(nothing=f"the touched code is reached by target(s) "
                                 f"{', '.join(sorted(pr['targets_not_on_runner']))}, which need a device this runner "
                                 "does not have (a runner pool's gpu shard tests them)")
    if not chosen and fuzz is None:
        return Selection(nothing=f"the touched converters are reached by target(s) "
                                 f"{', '.join(sorted({x for t in analysis.touches for x in t.targets})) or '-'}, "
                                 "none of which is installed or selected here")
    pr["operators"] = sorted(want)
    sel = Selection(chosen=chosen, want=want, fuzz=fuzz)
    frameworks = {f for t in chosen.values() for f in t.frameworks}
    instances = gather(pull.options.sources or sources.PR_SOURCES, sorted(want),
                       limit_per_op=pull.options.limit_per_op, frameworks=frameworks, progress=pull.say,
                       canonical=True) if want else []
    # only what reaches a chosen target (a source's instances of related operators go nowhere): the plan's order,
    # its diversity and the first case of each variant kind are then about the tests that run
    sel.instances = _smoke_only_few([i for i in instances if sel.reaches(i)], analysis.touches)
    pr["instances_selected"] = len(sel.instances)
    # a touched operator no instance stands for is a gap in the test material, said as such (a neutral check),
    # never "nothing to test"
    covered = {c for i in sel.instances for c in operators.instance_ops(i.op)}
    without = sorted(c for c in want if c not in covered)
    if without:
        pr["operators_without_material"] = without
    if not sel.instances and want:
        pr["test_gap"] = (f"no migrated instance exists for the touched operator(s) {', '.join(without[:20])}"
                          + (f" and {len(without) - 20} more" if len(without) > 20 else ""))
    if not sel.instances and fuzz is None:
        sel.nothing = pr["test_gap"] if want else "no migrated instance of the touched operators"
        sel.untested_change = True
    return sel


SMOKE_INSTANCES = 2  # instances per operator that only a module-level change of its file selected


def _smoke_only_few(instances: list, touches) -> list:
    """A module-level change selects every operator its file registers (a smoke test: dlci.profiles.base.SMOKE);
    those no other change selected keep their first few instances, so the operators the PR edited keep the budget."""
    from dlci import operators
    smoke = {c for t in touches if t.smoke for c in operators.canonical(t.operator, t.namespace)}
    smoke -= {c for t in touches if not t.smoke for c in operators.canonical(t.operator, t.namespace)}
    if not smoke:
        return instances
    kept, count = [], {}
    for inst in instances:
        ops = operators.instance_ops(inst.op)
        if ops and ops <= smoke:
            key = min(ops)
            count[key] = count.get(key, 0) + 1
            if count[key] > SMOKE_INSTANCES:
                continue
        kept.append(inst)
    return kept


def report_nothing_to_test(pull: PullRequest, chosen: Selection, revisions: "Revisions | None" = None,
                           broken: list | None = None) -> Report:
    """The report of a scan that ran no operator test: clean when nothing was touched, a test gap (never clean)
    when the touched operators have no material; with the changed converter files that no longer import
    (``broken``), which is never "nothing to test"."""
    pr, reason = pull.pr, chosen.nothing or "every operator the change selected is in a file that does not import"
    pr["nothing_to_test"] = None if chosen.untested_change or broken else reason
    stats = {"tests_run": 0, "tests_valid": 0, "seconds": round(time.time() - pull.started, 2), "per_target": {},
             "operators": 0, "instances": 0,
             **({"targets_not_on_runner": pr["targets_not_on_runner"]} if pr.get("targets_not_on_runner") else {})}
    report = Report(findings=[], stats=stats, pr=pr)
    if broken:
        _add_import_findings(report, broken, pull, revisions)
    report.write(pull.out)
    pull.say(f"nothing to test: {reason}" if not broken else f"{len(broken)} changed file(s) do not import")
    return report


def check_imports(pull: PullRequest, chosen: Selection, revisions: "Revisions") -> list:
    """Each changed converter file imported at head, and where that fails (twice the same way) at base: what fails
    at head and imports at base is a finding new in the PR for every operator the file maps at base
    (dlci.scan.imports). Their operators' own tests are left out: they cannot tell more."""
    from dlci import operators, profiles
    by_path = {ch.path: ch for ch in pull.analysis.diff.files}
    files = [f for f in selection.converter_files(pull.analysis)
             if imports.runs_at_import(pull.repo.text(f, "head") or "", by_path[f].touched_head_lines())]
    if not files:
        return []
    head = revisions.prepare_head()
    failing = {r.file: r for r in imports.check(head.path, files, revisions.python_path(pull.config),
                                                revisions.head_env).values() if not r.ok}
    if not failing:
        return []
    base_files = [f for f in failing if pull.repo.exists(f, "base")]
    base_env = revisions.prepare_base()
    at_base = imports.check(revisions.checkouts["base"].path, base_files, revisions.python_path(revisions.base_build),
                            base_env, confirm=False)
    broken = [r for f, r in failing.items() if f not in at_base or at_base[f].ok]
    if not broken:
        return []  # fails the same on both revisions: the environment (proving the checkout says what to set)
    mapped = {r.file: profiles.mapped_by(pull.repo, r.file, pull.analysis.profiles) for r in broken}
    found = imports.findings(broken, mapped, sorted(chosen.chosen) or sorted({x for t in pull.analysis.touches
                                                                              for x in t.targets}))
    pull.say(f"{len(found)} changed converter file(s) do not import at head and do at base: "
             + ", ".join(f"{r.file} ({r.state})" for r in broken))
    gone = {r.file for r in broken}
    revisions.skip_files = gone
    kept = {c for t in pull.analysis.touches if t.file not in gone for c in operators.canonical(t.operator, t.namespace)}
    lost = {c for t in pull.analysis.touches if t.file in gone for c in operators.canonical(t.operator, t.namespace)}
    chosen.instances = [i for i in chosen.instances if operators.instance_ops(i.op) & kept
                        or not operators.instance_ops(i.op) & lost]
    if not chosen.instances and chosen.fuzz is None:
        chosen.nothing = chosen.nothing or "every operator the change selected is in a file that does not import"
    return found


def _add_import_findings(report: Report, found: list, pull: PullRequest, revisions: "Revisions") -> None:
    """The import findings first, numbered after the others, with their reproducers checked."""
    start = len(report.findings)
    for n, f in enumerate(found, start=start + 1):
        f.id = f"F{n:03d}"
    imports.write_reproducers(found, pull.out, revisions.head_env, revisions.base_env)
    report.findings = list(found) + list(report.findings)


# -- the revisions' checkouts ----------------------------------------------------------------------------------------

class Revisions:
    """The head revision's worktree, prepared, importable and proven to be what the tests import; the base
    revision's, made on first use. Both removed at the end."""

    def __init__(self, pull: PullRequest):
        from dlci import profiles
        self.pull = pull
        self.profiles = [profiles.PROFILES[n] for n in pull.analysis.profiles]
        self.defaults = selection.runtime_defaults(pull.analysis.profiles)
        self.workdir = Path(tempfile.mkdtemp(prefix="dlci-scan-"))
        self.checkouts: dict = {}
        self.head_env: dict = {}
        self.base_env: dict | None = None
        self.base_build = pull.config.with_build_of(pull.base_config)  # the base builds as its own file says
        self.skip_files: set[str] = set()  # changed files that do not import at head: not traced, not proven
        # proving a checkout imports its frontend in a fresh interpreter, and the base may have a build to run:
        # seconds each, done beside the head's first tests (head_proof, base_ready)
        self._background = ThreadPoolExecutor(2, thread_name_prefix="dlci-revisions")
        self._base_lock = threading.Lock()
        self.head_proof: Future | None = None
        self._base_ready: Future | None = None
        # a fresh interpreter of the base environment importing the changed converters (its proof): what a
        # reproducer checked alone on base pays before its test (None: not measured)
        self.base_import_seconds: float | None = None

    def __enter__(self) -> "Revisions":
        return self

    def __exit__(self, *exc) -> None:
        self._background.shutdown(wait=True)  # nothing is removed under a proof or a build still running
        for c in self.checkouts.values():
            c.remove()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def python_path(self, config: Config) -> list[str]:
        return config.python_path if config.python_path is not None else list(self.defaults[0])

    def prepare_head(self):
        """The head revision's worktree, prepared (its install command run), and its environment."""
        from dlci.checkout import Checkout
        if "head" in self.checkouts:
            return self.checkouts["head"]
        pull = self.pull
        pull.say(f"checking out head {pull.repo.head[:12]} (git worktree)")
        head = self.checkouts["head"] = Checkout.create(pull.repo.path, pull.repo.head, self.workdir, "head")
        head.prepare(pull.config, self.profiles)
        self.head_env = head.env(pull.config, *self.defaults)
        return head

    def checkout_head(self, converter_files: list[str]):
        """The head revision, whose proof that it is what the tests import starts now, beside them
        (:attr:`head_proof`; :meth:`head_proven` waits for it)."""
        head = self.prepare_head()
        if self.head_proof is None:
            self.head_proof = self._background.submit(prove_checkout, head, converter_files,
                                                      self.python_path(self.pull.config), self.head_env, ".dlci.yml")
        return head

    def head_proven(self) -> None:
        """Wait for the head's proof; its InfrastructureError (exit 3: the tests import other code) is raised."""
        if self.head_proof is not None:
            self.head_proof.result()

    def head_disproven(self) -> bool:
        return self.head_proof is not None and self.head_proof.done() and self.head_proof.exception() is not None

    @property
    def head(self):
        return self.checkouts["head"]

    def prepare_base(self) -> dict:
        """The base revision's worktree, built as its own .dlci.yml says; its environment."""
        from dlci.checkout import Checkout
        with self._base_lock:
            if self.base_env is None:
                pull = self.pull
                base = Checkout.create(pull.repo.path, pull.repo.base, self.workdir, "base")
                self.checkouts["base"] = base
                base.prepare(self.base_build, self.profiles)
                self.base_env = base.env(self.base_build, *self.defaults)
            return self.base_env

    def base_in_background(self, converter_files: list[str]) -> None:
        """Check out, build and prove the base revision beside the head's tests: the divergence search and the
        re-runs on base find it ready. Its errors come from :meth:`checkout_base`, where they always did."""
        if self._base_ready is None:
            self._base_ready = self._background.submit(self._checkout_base, converter_files)

    def checkout_base(self, converter_files: list[str]) -> dict:
        """The base revision, proven to be what its tests import; its environment."""
        if self._base_ready is not None:
            return self._base_ready.result()
        return self._checkout_base(converter_files)

    def _checkout_base(self, converter_files: list[str]) -> dict:
        env = self.prepare_base()
        base = self.checkouts["base"]
        with self._base_lock:
            if not getattr(base, "proven", False):
                files = [f for f in converter_files if (base.path / f).is_file()]
                t0 = time.monotonic()
                prove_checkout(base, files, self.python_path(self.base_build), env,
                               f"{CONFIG_FILE} of the base revision")
                if files:
                    self.base_import_seconds = time.monotonic() - t0
                base.proven = True
        return env


# -- 3. testing the head revision ------------------------------------------------------------------------------------

def _converter_files(pull: PullRequest, revisions: Revisions) -> list[str]:
    """The changed converter files the head's tests trace: those that import at head."""
    return [f for f in selection.converter_files(pull.analysis) if f not in revisions.skip_files]


def test_head(pull: PullRequest, chosen: Selection, revisions: Revisions) -> HeadRun:
    """The operators' own tests (edited lines first), then the directed search while changed code is left
    unreached, then the fuzz share's generated graphs, all on the head revision's code with its converter files
    traced."""
    from dlci import operators
    analysis, options, clock, say = pull.analysis, pull.options, pull.clock, pull.say
    converter_files = _converter_files(pull, revisions)
    head = revisions.checkout_head(converter_files)
    trace = tuple(str((head.path / f).resolve()) for f in converter_files)
    search = Search.of(pull.repo, converter_files, analysis.touches, head.path) \
        if converter_files and pull.req.directed else None
    cache = coverage.CoverageCache()
    instances = chosen.instances
    say(f"{len(instances)} instances of {len({i.op for i in instances})} operators -> "
        f"{', '.join(chosen.chosen)}; budget {options.budget:.0f} s")
    fuzz = chosen.fuzz
    campaign = Campaign({i.id: i for i in instances}, {**chosen.chosen, **(fuzz.targets if fuzz else {})},
                        not_on_runner=dict(pull.pr.get("targets_not_on_runner") or {}),
                        preferred_ops=list(dict.fromkeys(c for t in analysis.touches
                                                         for c in operators.canonical(t.operator, t.namespace))))
    run = HeadRun(campaign, chosen, converter_files, search, cache)
    tests = stages.plan(instances, campaign.targets, route=chosen.route,
                        order=coverage.edited_lines_first(pull.repo, converter_files, cache,
                                                          first_ops=_direct_ops(analysis.touches)))
    (pull.out / "repro").mkdir(parents=True, exist_ok=True)
    # the divergence search runs what reached changed code on the base revision as well, on a twin worker (the
    # base is checked out when the search starts: a scan that never gets there does not pay for it)
    pair = search is not None and pull.req.divergence
    try:
        clock.testing_starts(tested=float((pull.pr.get("repo_tests") or {}).get("seconds") or 0.0))
        with open_engine(options, campaign.targets, env=revisions.head_env, twin=pair) as engine:
            # the head's proof runs beside the first tests: if the tests import other code, they stop at once
            revisions.head_proof.add_done_callback(
                lambda proof: proof.exception() is not None and engine.stop("the head checkout is not imported"))
            revisions.base_in_background(converter_files)  # ready when the search or the re-runs on base need it
            # the operators' own tests first; the directed search while changed code is left unreached; the fuzz
            # share's graphs after them, in what is left
            end = clock.tests_until if fuzz is None else \
                time.monotonic() + (1 - fuzz.share) * (clock.tests_until - time.monotonic())
            traced = dict(trace_files=trace, hard_until=clock.hard, watch=search.watch() if search else (),
                          reaches_change=coverage.reach_test(head.path, converter_files, pull.repo), fingerprint=pair,
                          grace=STRAGGLER_SECONDS)
            if tests:
                until = end if search is None else time.monotonic() + (1 - directed.SHARE) * (end - time.monotonic())
                execute(campaign, tests, engine, options, until=until, **traced)
            revisions.head_proven()
            if search is not None and not campaign.interrupted and time.monotonic() < end - 5:
                if pair:
                    engine.set_twin_env(revisions.checkout_base(converter_files))
                _directed(campaign, search, engine, options, trace, end, clock, chosen.route, chosen.chosen, say,
                          pair)
            if fuzz is not None and not campaign.interrupted:
                _fuzz(campaign, fuzz, engine, options, clock, say)
            if tests and not campaign.interrupted and not campaign.ended_early:
                _overtime(campaign, tests, engine, options, clock, say, traced, _removed_ops(analysis.touches))
            revisions.head_proven()
    except BaseException:
        campaign.interrupted = True
        if not revisions.head_disproven():  # results of other code than the PR's are no report
            stages.report(campaign, stages.collect(campaign), pr=pull.pr).write(pull.out)
        raise
    return run


# What the post-processing needs at least, and per failure signature found: the base re-runs, a reduction, the
# reproducers' checks on head and base (measured on 2 cores with cold caches: 18 s for one finding already on base,
# 50-70 s for a few new ones). Testing goes on into the post-processing's window while that leaves it enough.
POST_SECONDS = 30.0
POST_SECONDS_PER_SIGNATURE = 15.0
OVERTIME_MIN_SECONDS = 10.0


def _post_need(campaign: Campaign, clock: Clock, removed: frozenset[str] = frozenset()) -> float:
    """What the post-processing needs for what was found: the confirmed signatures, and each (target, operator)
    head called unsupported whose registration the PR deleted (``removed``: the support-removed findings the base
    re-runs will most likely make, each owing its reproducer's checks)."""
    from dlci.operators import instance_ops
    found = sum(1 for state in campaign.confirm_state.values() if state != "flaky")
    found += sum(1 for _target, op in campaign.unsupported if instance_ops(op) & removed)
    return min(clock.post_window(), POST_SECONDS + POST_SECONDS_PER_SIGNATURE * found)


def _overtime(campaign: Campaign, tests: list, engine, options: RunOptions, clock: Clock, say, traced: dict,
              removed: frozenset[str] = frozenset()) -> None:
    """The operators' tests the testing window left unrun, in the part of the post-processing's window that what
    was found does not need. A long preparation (cold caches, a repository's own tests) shortens testing and leaves
    a scan with few findings idle at its end; a failure found now shrinks the time left to test. ``removed``: the
    operators whose registration the PR deleted (see _post_need)."""
    left = [t for t in tests if (t.instance.id, t.target) not in campaign.tried]
    end = clock.hard - _post_need(campaign, clock, removed)
    if not left or end - time.monotonic() < OVERTIME_MIN_SECONDS:
        return
    say(f"testing goes on for up to {end - time.monotonic():.0f} s: {len(left)} of the operators' tests left, and "
        f"the failures found so far do not need the whole post-processing window")
    execute(campaign, left, engine, options, until=end,
            keep=lambda: clock.hard - time.monotonic() > _post_need(campaign, clock, removed), **traced)
    campaign.extra_stats["overtime"] = {"tests_left": len(left), "ran": len(
        [t for t in left if (t.instance.id, t.target) in campaign.tried])}


# -- 4. attribution on the base revision -----------------------------------------------------------------------------

# a reproducer run alone on base, unmeasured: a fresh interpreter importing the framework and compiler (TVM's torch
# frontend: 4-11 s here)
BASE_CHECK_SECONDS = 15.0
# beyond the base's measured import time (its proof, which ran beside the tests: already on the slow side) and the
# test's time in a warm worker: what a reproducer imports besides the converter and its first export (onnxscript:
# import 2.7 s, check 4.7 s; TVM's torch frontend: 4.9 s and 5.2 s, on a loaded machine)
FRESH_START_SECONDS = 2.0


def attribute_on_base(pull: PullRequest, tested: HeadRun, revisions: Revisions) -> list:
    """Every confirmed finding, unsupported operator and (a few) passing tests of the changed code re-run on the
    base revision: new in the PR or already on base, support removed, fixed by the PR."""
    campaign, options, clock, pr, repo = tested.campaign, pull.options, pull.clock, pull.pr, pull.repo
    findings = _fold_graph_duplicates(stages.collect(campaign))
    head = revisions.head
    ran = coverage.statements_run(head.path, tested.converter_files, repo)
    reaching = _by_way([(key, ran(cov)) for key, cov in campaign.coverage.items()], campaign)
    if not (findings or campaign.unsupported or reaching) or campaign.interrupted:
        return findings
    pull.say(f"re-running {len(findings)} finding(s), {len(campaign.unsupported)} unsupported operator(s) and "
             f"{min(len(reaching), attribution.FIXED_PROBES)} passing test(s) of the changed code on the base "
             f"revision {repo.base[:12]}")
    base_env = revisions.checkout_base(tested.converter_files)
    head_env = revisions.head_env
    findings = attribution.attribute(findings, campaign, options, base_env, clock.post(0.45), head_env) \
        if findings else []
    attribution.relabel_support_crashes(findings)
    stream = getattr(tested.search, "stream", None)
    # what the new findings already known owe their checks is not the support probes' to spend
    findings += attribution.support_removed(
        campaign, options, base_env, head_env,
        min(clock.post(0.55), clock.hard - _new_checks_owed(campaign, findings, options, revisions, on_head=True)),
        base_passed=stream.support_on_base if stream is not None else set())
    findings = attribution.fold(findings)
    findings = _without_old_graph_findings(findings, pr)
    findings = _fold_explained_graph_findings(findings)
    _no_environment_failure(campaign, findings)
    # what the PR broke is the report's point: the reproducers of its new findings, checked alone on head and on
    # base, keep their time before the probes for what it fixed start
    owed = _new_checks_owed(campaign, findings, options, revisions, on_head=True)
    fixed = attribution.fixed_in_pr(campaign, options, base_env, reaching, min(clock.post(0.6), clock.hard - owed))
    if stream is not None and stream.fixed:  # the divergence search's pairs that pass here and fail on base
        known = {(f["target"], f["operator"], f["symptom"]) for f in fixed}
        fixed += [f for f in stream.fixed.values() if (f["target"], f["operator"], f["symptom"]) not in known]
    if fixed:
        pr["fixed"] = fixed
    for f in findings:
        cov = [campaign.coverage.get((iid, f.target), {}) for iid in f.instances]
        f.reaches_change = coverage.reaches(cov, head.path, tested.converter_files, repo) \
            if tested.converter_files else None
    if fixed:  # a fix that left failures of the code it changed: listed beside what it fixed
        pr["still_failing"] = [{"operator": f.operator, "target": f.target, "symptom": f.symptom,
                                "signature": f.signature} for f in findings
                               if f.new_in_pr is False and f.reaches_change]
    return findings


def _new_checks_owed(campaign: Campaign, findings: list, options: RunOptions, revisions: Revisions,
                     on_head: bool) -> float:
    """Seconds the reproducers of the new findings owe: their checks alone on base (a fresh interpreter each, as
    many at once as there are workers) and, ``on_head``, on head (a warm one)."""
    new = [campaign.base_signature(f.signature) for f in findings if is_new(f)] if options.check_repros else []
    if not new:
        return 0.0
    # a check does not start with less than MIN_CHECK_SECONDS left before its deadline
    head = max(MIN_CHECK_SECONDS, reproducers_owed(campaign, new, options.workers)) if on_head else 0.0
    rounds = sorted((base_check_seconds(campaign, sig, revisions.base_import_seconds) for sig in new), reverse=True)
    return head + max(MIN_CHECK_SECONDS, sum(rounds[::max(1, options.workers)]))


def base_check_seconds(campaign: Campaign, signature: str, import_seconds: float | None) -> float:
    """One reproducer run alone on base: the base's imports, measured by its proof in the same kind of fresh
    interpreter, then its test; BASE_CHECK_SECONDS unmeasured."""
    if import_seconds is None:
        return BASE_CHECK_SECONDS
    return min(BASE_CHECK_SECONDS,
               import_seconds + FRESH_START_SECONDS + campaign.test_seconds_alone.get(signature, 0.0))


# -- 5. reduction ----------------------------------------------------------------------------------------------------

OLD_REDUCTION_MIN_SECONDS = 20.0  # left of the reduction's window before a finding already on base is reduced


def reduce_findings(pull: PullRequest, tested: HeadRun, findings: list, revisions: Revisions) -> None:
    """What the PR broke first, shrunk to its smallest failing instance on the head revision."""
    findings.sort(key=lambda f: not is_new(f))  # what the PR broke first: reduced and reproduced first
    campaign, options, clock = tested.campaign, pull.options, pull.clock
    if options.reduce and findings and not campaign.interrupted:
        with attribution.engine_for(options, campaign.targets, revisions.head_env, "reduce") as engine:
            # the head's checks are reserved by reduce itself, the base's here
            hard = clock.hard - _new_checks_owed(campaign, findings, options, revisions, on_head=False)
            new = [f for f in findings if is_new(f)]
            old = [f for f in findings if not is_new(f)]
            # the new findings get the window; those already on base what is left of it, if a reduction fits
            # (one that starts short of time overruns it, and the reproducers' checks pay)
            for group in (new, old):
                until = clock.post(0.75)
                if group and (group is new or until - time.monotonic() >= OLD_REDUCTION_MIN_SECONDS):
                    stages.reduce(group, campaign, engine, options, until=until, hard_until=hard,
                                  checks_for=findings)


# -- 6. the report ---------------------------------------------------------------------------------------------------

def write_report(pull: PullRequest, tested: HeadRun, findings: list, revisions: Revisions,
                 broken: list | None = None) -> Report:
    """Coverage of the changed code, the directed search's leftovers, reproducers checked alone on head (and the
    new ones on base), findings.json and report.md; then, with its own budget, since when (bisection)."""
    campaign, options, clock, pr, out = tested.campaign, pull.options, pull.clock, pull.pr, pull.out
    head = revisions.head
    pr["coverage"] = coverage.summary(campaign, head.path, tested.converter_files, pull.repo, tested.coverage_cache)
    if tested.search is not None:
        pr["directed"] = tested.search.summary(campaign, _skeleton_writer(out))
    pr["head_run"] = head.run_hint(revisions.head_env)
    if revisions.base_env is not None:
        pr["base_run"] = revisions.checkouts["base"].run_hint(revisions.base_env)
    # each new finding's reproducer is checked on head and then, by the same worker, on base: the new findings first,
    # against the scan's one deadline; those already on base with what is left before 0.85 of the window
    follow_up, on_base_seconds = None, []
    with contextlib.ExitStack() as stack:
        if options.check_repros and revisions.base_env is not None:
            # the base's checks from warm interpreters too (started on the first, in the base's environment): a
            # fresh one imports torch and the target again for each (TVM: ~3 s of a ~4 s check)
            base_warm = stack.enter_context(WarmPool(test_env(revisions.base_env), max(1, options.workers)))

            def on_base(finding) -> None:
                t0 = time.monotonic()
                attribution.check_one_on_base(finding, options, revisions.base_env, until=clock.hard, warm=base_warm)
                on_base_seconds.append(time.monotonic() - t0)
            follow_up = FollowUp(wants=is_new, run=on_base, until=clock.hard)
        report = publish(campaign, findings, options, env=revisions.head_env, pr=pr, until=clock.post(0.85),
                         hard_until=clock.hard, follow_up=follow_up)
    if follow_up is not None:  # worker seconds: checks on base run beside each other and beside the head's
        report.stats.setdefault("phase_seconds", {})["check_on_base"] = round(sum(on_base_seconds), 1)
    if broken:
        _add_import_findings(report, broken, pull, revisions)
    if report.findings and not campaign.interrupted:
        report.write(out)  # the scan's results are safe before bisection (its own budget) starts
        bisected = _bisect(pull.req.bisect, report.findings, pull.repo, pull.config, revisions.profiles,
                           revisions.defaults, out, pull.say)
        if bisected:
            pr["bisect"] = bisected
    pr["known_issues_matched"] = sum(1 for f in report.findings if f.known)
    report.stats["setup_seconds"] = round(clock.setup_seconds, 1)  # diff, sources, checkouts: before testing
    if revisions.base_import_seconds is not None:  # what the checks on base were reserved by
        report.stats["base_import_seconds"] = round(revisions.base_import_seconds, 1)
    report.stats["seconds"] = round(time.time() - pull.started, 2)
    report.write(out)
    return report


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


def _fold_explained_graph_findings(findings: list) -> list:
    """A generated graph's new failure that needs several operators, where one of its operators fails alone on the
    same target (localisation's each-operator test) and has a finding new in the PR of its own, is that operator's
    change showing downstream (a reduction's wrong shape that a later Slice trips on): folded into that finding,
    which says so, instead of one more entry per graph. A graph whose lone failing operator has no new finding,
    or none fails alone, stays a finding of its own."""
    from dlci import operators
    own = {}
    for f in findings:
        if f.new_in_pr and f.origin.get("source") != "fuzz":
            own.setdefault((f.target, operators.instance_ops(f.operator)), f)
    kept = []
    for f in findings:
        g = f.extra.get("graph") or {}
        head = next((own[key] for key in _failing_alone(f) if key in own), None) \
            if f.new_in_pr and f.origin.get("source") == "fuzz" and g.get("multi_operator") else None
        if head is None:
            kept.append(f)
            continue
        head.extra.setdefault("explains_graph_findings", []).append(
            {"operator": f.operator, "symptom": f.symptom, "stage": f.stage, "instances": len(f.instances),
             "instance": f.instance_id, "signature": f.signature})
    return kept


def _failing_alone(f) -> list[tuple]:
    """(target, operator) of the nodes of a graph finding that fail alone on its target (dlci.localise's "alone":
    node label "k:Type" -> status), in graph order."""
    from dlci import operators
    out = []
    for node, status in ((f.extra.get("graph") or {}).get("each_operator_alone") or {}).items():
        if not status.startswith(("inconsistency", "crash")):
            continue
        kind = node.split(":", 1)[-1]
        namespace = "aten" if (f.extra.get("graph") or {}).get("framework") == "torch" else "onnx"
        out.append((f.target, operators.instance_ops(kind if "::" in kind else f"{namespace}::{kind}")))
    return out


def _without_old_graph_findings(findings: list, pr: dict) -> list:
    """The fuzz share's failures that the base revision shows the same way are not the PR's and, unlike an old
    failure of a touched operator, have nothing to do with what it changed: counted in the report, not reduced,
    reproduced or listed as findings."""
    old = [f for f in findings if f.origin.get("source") == "fuzz" and attribution_of(f) == "on_base"]
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
    execute(campaign, stream, engine, options, until=clock.tests_until, hard_until=clock.hard)


def _targets(analysis, config: Config, req: ScanRequest, pr: dict) -> tuple[dict, dict[str, set[str]]]:
    """The targets to run (reaching the touched converters, narrowed by --targets / .dlci.yml) and, per canonical
    operator, the targets its instances go to."""
    from dlci import operators, targets
    wanted = req.targets or config.targets or None
    plain = [t for t in wanted or [] if not t.startswith("rule.")]  # rule.<name>: selection.rule_targets
    reached = sorted({x for t in analysis.touches for x in t.targets})
    absent: dict[str, str] = {}  # device targets whose device is not here
    registry = targets.registry()
    missing = [x for x in reached if x not in registry or registry[x].probe is None and not registry[x].available()]
    if plain:
        chosen = targets.select(plain, absent)
    elif wanted:
        chosen = {}
    elif reached:  # only the targets the change reaches are probed (a device probe can take seconds)
        chosen = targets.select([x for x in reached if x not in missing], absent) \
            if len(missing) < len(reached) else {}
    else:
        chosen = targets.select("all", absent)
    if reached:
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


def prove_checkout(checkout, converter_files: list[str], python_path: list[str], env: dict, config_name: str) -> None:
    """The converter files a scan traces must be what its tests import: the revision's own files (or, where its
    install command built the package, copies of them). Asked of an interpreter started as the test workers are
    (dlci.exec.origins); anything else is an environment problem (exit 3) naming the file and what to set."""
    from dlci.exec import origins
    from dlci.exec.engine import worker_env
    wanted = {rel: origins.module_for(rel, python_path) for rel in converter_files}
    modules = sorted({m for m in wanted.values() if m})
    answers = origins.ask(modules, worker_env(env)) if modules else {}
    for rel, module in wanted.items():
        mine = (checkout.path / rel).resolve()
        if module is None:
            raise InfrastructureError(
                f"{rel} of the {checkout.label} revision is not importable with python_path {python_path or '[]'}: "
                f"no entry holds it, so the tests would run an installed copy instead of the pull request's code. "
                f"Set python_path in {config_name} to the folder that holds its package (or install: to build it)")
        got = answers.get(module, "error: not asked")
        if got.startswith("error:"):
            raise InfrastructureError(
                f"the tests of the {checkout.label} revision cannot import {module} ({rel}): {got[7:]}. Set "
                f"python_path/env in {config_name} (or install: a matching build) so that the checkout imports")
        same = Path(got) == mine
        if not same:
            try:
                same = Path(got).read_bytes() == mine.read_bytes() and not Path(got).is_relative_to(
                    Path(__import__("sysconfig").get_paths()["purelib"]))
            except (OSError, ValueError):
                same = False
        if not same:
            raise InfrastructureError(
                f"the tests of the {checkout.label} revision import {module} from {got}, not from the checkout's "
                f"{rel}: the pull request's code would never run. Set python_path in {config_name} to the folder "
                f"that holds the package (it goes first on PYTHONPATH), or install: to build it into the prefix")


# (nearly) every test failing the same way, on both revisions: the environment, not the code
ENVIRONMENT_SHARE = 0.9
ENVIRONMENT_MIN_TESTS = 8


def _no_environment_failure(campaign, findings: list) -> None:
    """Raise (exit 3) when nearly every test of the head revision failed with one and the same message that the
    base revision shows too: an import-level error of the checkout over the installed libraries, never a clean run
    nor a list of findings."""
    from collections import Counter

    from dlci.findings import normalize_message
    outcomes = [o for outs in campaign.failures.values() for o in outs[:1]]
    st = campaign.stats()
    total = st["tests_run"]
    if total < ENVIRONMENT_MIN_TESTS:
        return
    per_message = Counter()
    for sig, outs in campaign.failures.items():
        per_message[normalize_message(outs[0].message)] += sum(1 for _ in outs)
    if not per_message:
        return
    message, count = per_message.most_common(1)[0]
    if count < ENVIRONMENT_SHARE * total:
        return
    same = [f for f in findings if normalize_message(f.message) == message]
    if same and all(attribution_of(f) == "on_base" for f in same):
        example = next((o for o in outcomes if normalize_message(o.message) == message), None)
        raise InfrastructureError(
            f"{count} of {total} tests failed the same way on both revisions: an environment problem, not a finding "
            f"({example.symptom if example else ''}: {(example.message if example else message)[:400]}). The "
            "checkout's Python does not run over the installed libraries: set install: in .dlci.yml to a matching "
            "build (or python_path/env to one), as dlci's docs say for this repository")


def _removed_ops(touches) -> frozenset[str]:
    """The operators whose registration or map entry the diff deleted."""
    from dlci import operators
    return frozenset(c for t in touches if t.entry_removed for c in operators.canonical(t.operator, t.namespace))


def _direct_ops(touches) -> frozenset[str]:
    """The operators whose own converter or map entry the diff changed, when others are reached only through a
    changed helper (nothing to put first otherwise)."""
    from dlci import operators
    if not any(t.indirect for t in touches):
        return frozenset()
    return frozenset(c for t in touches if not t.indirect for c in operators.canonical(t.operator, t.namespace))


def _directed(campaign, search: Search, engine, options, trace, end: float, clock, route, chosen, say,
              pair: bool = False) -> None:
    """The directed search while changed code is left unreached, then on what reached it, compared with the base
    revision where ``pair`` (dlci.directed)."""
    reach = {name for name in chosen}
    stream = search.stream_for(campaign, lambda inst: route(inst) & reach, until=end, progress=say, pair=pair)
    left = len(stream.unreached)
    if not left and not stream.reachers:
        return
    if left:
        say(f"directed search: {left} of {len(search.goals)} changed statements and branch outcomes unreached; "
            f"{len(stream.seeds)} seeds, {max(0.0, end - time.monotonic()):.0f} s")
    elif stream.anywhere:  # nothing on head to reach (code deleted, a decorator changed): the touched operators
        say(f"directed search: the change leaves no statement on head to reach; varying the "
            f"{len(stream.reachers)} tests of {', '.join(sorted(search.touched)[:6])}"
            f"{' and the base revision' if pair else ''}, {max(0.0, end - time.monotonic()):.0f} s")
    else:  # reached but passing: the second phase varies what reached the changed code (values it has not seen)
        say(f"directed search: every changed statement and branch outcome reached; varying the "
            f"{len(stream.reachers)} tests that reached them, {max(0.0, end - time.monotonic()):.0f} s")
    execute(campaign, stream, engine, options, trace_files=trace, until=end, hard_until=clock.hard,
            watch=search.watch(), fingerprint=pair, grace=STRAGGLER_SECONDS)
    said = stream.divergence_summary() if pair else None
    say(f"directed search: {len(stream.unreached)} left unreached after {stream.stats['mutants']} mutants"
        + (f", {stream.stats['new_values']} new values at changed statements" if stream.stats["new_values"] else "")
        + (f"; {said['paired']} paired with base, {said['inputs_diverging']} inputs diverge "
           f"({', '.join(f'{n} {k}' for k, n in said['diverged'].items() if n) or 'none'})" if said else ""))


def _skeleton_writer(out: Path):
    """Writes the test skeleton of an unreached goal under ``out/skeletons`` and returns its relative path."""
    from dlci.findings.repro import render_skeleton

    def write(inst, target: str, goal) -> str:
        folder = out / "skeletons"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"test_{Path(goal.file).stem}_{goal.span[0]}_{goal.outcome or 'line'}.py".replace("-", "_")
        (folder / name).write_text(render_skeleton(inst, target, goal.describe()), encoding="utf-8")
        return f"skeletons/{name}"
    return write


def _by_way(keyed: list[tuple[tuple[str, str], frozenset]], campaign) -> list[tuple[str, str]]:
    """The (instance, target) pairs that ran changed statements: the first of each way through the changed code (the
    set of changed statements it ran) first, then the rest, each part in _diverse's order. What a fix changed is
    often one branch few tests take (a reverse flag, an empty input): its tests must be among the few re-run on
    base, not behind many that take the common way."""
    firsts, seen = [], set()
    for key, way in keyed:
        if way and way not in seen:
            seen.add(way)
            firsts.append(key)
    chosen = set(firsts)
    return _diverse(firsts, campaign) + _diverse([k for k, way in keyed if way and k not in chosen], campaign)


def _diverse(keys: list[tuple[str, str]], campaign) -> list[tuple[str, str]]:
    """(instance, target) pairs, one per (target, operator, family) first, then the rest: a few re-runs see many
    ways in."""
    from dlci.instance import family
    first, rest, seen = [], [], set()
    for iid, t in keys:
        inst = campaign.instances.get(iid)
        if inst is None:
            continue
        k = (t, inst.op, family(inst))
        (rest if k in seen else first).append((iid, t))
        seen.add(k)
    return first + rest
