"""`dlci scan`: one pull request, end to end.

diff (merge base..head) -> profiles map changed code to operators and converters -> the migrated instances of those
operators, each sent only to the targets that reach the changed converter -> run on the head revision's own code
(every failure re-run before it counts; converter lines traced while converting) -> each confirmed finding re-run on
the base revision (new in the PR, or already on base) -> reproducers checked on head (must fail) and base (should
pass) -> findings.json / report.md with the touched operators, the file:line that selected each, and the changed
lines no instance reached.
"""
from __future__ import annotations

import ast
import fnmatch
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dlci.config import CONFIG_FILE, Config, ConfigError


@dataclass
class ScanRequest:
    repo: Path
    base: str
    head: str
    out: Path
    budget: float | None = None        # None: .dlci.yml's budget, else DEFAULT_BUDGET
    targets: list[str] | None = None   # explicit --targets (intersected with what the diff reaches)
    sources: list[str] | None = None
    limit_per_op: int | None = None
    workers: int = 2
    timeout: float = 120.0
    memory_mb: int = 3000
    check_repros: bool = True
    reduce: bool = True
    reduce_seconds: float | None = None
    progress: Callable[[str], None] = field(default=lambda msg: None)


DEFAULT_BUDGET = 300.0
BASE_RERUNS = 2  # instances of a finding re-run on the base revision


def _canonical_targets(analysis, chosen: dict) -> dict[str, set[str]]:
    """canonical operator -> targets that reach a changed converter for it (all chosen when a touch names none)."""
    from dlci import operators
    want: dict[str, set[str]] = {}
    for t in analysis.touches:
        reach = {x for x in t.targets if x in chosen} if t.targets else set(chosen)
        for canon in operators.canonical(t.operator, t.namespace):
            want.setdefault(canon, set()).update(reach)
    return {c: ts for c, ts in want.items() if ts}


def _statement_spans(text: str) -> list[tuple[int, int]]:
    """(first, last) line of each statement's own lines: a compound statement owns its header only."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    spans = []
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt):
            body = getattr(n, "body", None)
            end = body[0].lineno - 1 if isinstance(body, list) and body and isinstance(body[0], ast.stmt) \
                else n.end_lineno
            spans.append((n.lineno, max(n.lineno, end)))
    return spans


def _changed_statement_spans(text: str, added: set[int]) -> set[tuple[int, int]]:
    """The innermost statements holding an added line (blank lines and comments hold none)."""
    spans = _statement_spans(text)
    out = set()
    for line in added:
        inside = [s for s in spans if s[0] <= line <= s[1]]
        if inside:
            out.add(min(inside, key=lambda s: s[1] - s[0]))
    return out


class CoverageCache:
    """Converter-line coverage per instance, keyed by the git blob of the traced file: a file unchanged between
    revisions keeps its coverage, and the base revision's blob of a changed file tells which instances ran the lines
    a later PR edits (they go first)."""

    def __init__(self):
        root = os.environ.get("DLCI_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dlci")
        self.dir = Path(root) / "coverage"

    def load(self, blob: str) -> dict[str, list[int]]:
        try:
            return json.loads((self.dir / f"{blob}.json").read_text())
        except (OSError, ValueError):
            return {}

    def merge(self, blob: str, runs: dict[str, list[int]]) -> None:
        if not runs:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        data = self.load(blob)
        data.update(runs)
        tmp = self.dir / f"{blob}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.dir / f"{blob}.json")


def scan(req: ScanRequest) -> tuple[dict, int]:
    """Run the scan; returns (findings document, number of findings new in the PR)."""
    from dlci import operators, profiles
    from dlci.checkout import Checkout
    from dlci.diff import GitRepo
    from dlci.report import write_reports

    t0 = time.time()
    say = req.progress
    out = Path(req.out)
    out.mkdir(parents=True, exist_ok=True)
    repo = GitRepo(req.repo, req.base, req.head)
    config = Config.parse(repo.text(CONFIG_FILE, "head"), f"{CONFIG_FILE} at {repo.head[:12]}")
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
    pr = {"repo": str(repo.path), "base": repo.base, "base_ref": req.base, "head": repo.head,
          "config": config.source, "profiles": analysis.profiles, "touched": ops_doc["touches"],
          "unmapped": ops_doc["unmapped"], "diff_notes": ops_doc["notes"], "nothing_to_test": None}

    def finish_early(reason: str) -> tuple[dict, int]:
        pr["nothing_to_test"] = reason
        stats = {"tests_run": 0, "tests_valid": 0, "seconds": round(time.time() - t0, 2), "per_target": {},
                 "operators": 0, "instances": 0}
        doc = {"version": 1, "findings": [], "stats": stats, "pr": pr}
        write_reports(out, doc)
        say(f"nothing to test: {reason}")
        return doc, 0

    if not analysis.touches:
        return finish_early("the diff touches no operator converter that a profile recognises")

    from dlci.cli import UsageError, select_targets
    from dlci.targets import TARGETS
    wanted_targets = req.targets or config.targets or None
    plain = [t for t in wanted_targets or [] if not t.startswith("rule.")]  # rule.<name>: see _rule_targets
    reached = sorted({x for t in analysis.touches for x in t.targets})
    try:
        chosen = select_targets(",".join(plain)) if plain else {} if wanted_targets else select_targets("all")
    except UsageError as e:
        raise ConfigError(str(e)) from None
    if reached:
        missing = [x for x in reached if x not in TARGETS or not TARGETS[x].available()]
        if missing:
            pr["targets_not_installed"] = missing
        chosen = {n: t for n, t in chosen.items() if n in reached}
    rules = _rule_targets(analysis, config, req)
    if not chosen and not rules:
        return finish_early(f"the touched converters are reached by target(s) {', '.join(reached) or '-'}, none of "
                            "which is installed or selected here")
    want = _canonical_targets(analysis, chosen)
    if rules:  # a library's own PR: its equivalence rules run on the operators it touched
        chosen.update(rules)
        for t in analysis.touches:
            if t.profile in RULE_LIBRARIES:
                for canon in operators.canonical(t.operator, t.namespace):
                    want.setdefault(canon, set()).update(
                        n for n, r in rules.items() if r.rule.library == RULE_LIBRARIES[t.profile])
        pr["rules"] = sorted(rules)
    pr["operators"] = sorted(want)

    instances = _instances(req, config, chosen, set(want), say)
    pr["instances_selected"] = len(instances)
    if not instances:
        pr["test_gap"] = "no migrated instance exists for the touched operators"
        return finish_early(f"no migrated instance of the touched operators ({', '.join(sorted(want))})")

    def targets_for(inst):
        return {x for c in operators.instance_ops(inst.op) & want.keys() for x in want[c]}

    workdir = Path(tempfile.mkdtemp(prefix="dlci-scan-"))
    checkouts: dict[str, Checkout] = {}
    try:
        say(f"checking out head {repo.head[:12]} (git worktree)")
        head = checkouts["head"] = Checkout.create(repo.path, repo.head, workdir, "head")
        head.prepare(config)
        profile_defaults = _runtime_defaults(analysis.profiles)
        head_env = head.env(config, *profile_defaults)
        converter_files = _converter_files(analysis, repo)
        trace = tuple(str((head.path / f).resolve()) for f in converter_files)
        cache = CoverageCache()
        planner = _planner(repo, converter_files, cache)

        def classify(findings, campaign):
            say(f"re-running {len(findings)} finding(s) on the base revision {repo.base[:12]}")
            base = checkouts.get("base") or Checkout.create(repo.path, repo.base, workdir, "base")
            checkouts["base"] = base
            base.prepare(config)
            _attribute(findings, campaign, base.env(config, *profile_defaults), req)
            findings[:] = fold(findings)
            for f in findings:
                cov = [campaign.coverage.get((iid, f.target), {}) for iid in f.instances]
                f.reaches_change = _reaches(cov, head.path, converter_files, repo) if converter_files else None

        def report_extra(campaign):
            pr["coverage"] = _coverage_summary(campaign, head.path, converter_files, repo, cache)
            pr["head_run"] = head.run_hint(head_env)
            if "base" in checkouts:
                pr["base_run"] = checkouts["base"].run_hint(checkouts["base"].env(config, *profile_defaults))
            return {"pr": pr}

        from dlci import campaign as C
        budget = req.budget or config.budget or DEFAULT_BUDGET
        say(f"{len(instances)} instances of {len({i.op for i in instances})} operators -> "
            f"{', '.join(chosen)}; budget {budget:.0f} s")
        opts = C.Options(out_dir=out, budget=budget, workers=req.workers, timeout=req.timeout,
                         memory_mb=req.memory_mb, check_repros=req.check_repros, progress=say, env=head_env,
                         targets_for=targets_for, trace_files=trace, planner=planner, classify=classify,
                         report_extra=report_extra, reduce=req.reduce,
                         reduce_seconds=req.reduce_seconds)
        doc = C.run(instances, chosen, opts)
        if req.check_repros and "base" in checkouts and doc["findings"]:
            from dlci.findings.repro import check_repro
            base_env = checkouts["base"].env(config, *profile_defaults)
            from concurrent.futures import ThreadPoolExecutor

            def on_base(f):
                # on base a reproducer of a new bug must pass: exit 0 (1 means the bug is on base too)
                f["repro_passes_on_base"] = not check_repro(out / f["repro"], env=base_env, log_suffix=".base.log")
            with ThreadPoolExecutor(max(1, req.workers)) as pool:
                list(pool.map(on_base, [f for f in doc["findings"] if f.get("repro")]))
            write_reports(out, doc)
        from dlci.findings.known import apply
        pr["known_issues_matched"] = apply(doc, config.known())
        doc["stats"]["seconds"] = round(time.time() - t0, 2)
        write_reports(out, doc)
        new = sum(1 for f in doc["findings"] if f.get("new_in_pr") and not f.get("known"))
        return doc, new
    finally:
        for c in checkouts.values():
            c.remove()
        shutil.rmtree(workdir, ignore_errors=True)


# profiles whose repository is the library an equivalence rule exercises
RULE_LIBRARIES = {"pytorch": "torch"}


def _rule_targets(analysis, config: Config, req: ScanRequest) -> dict:
    """Equivalence rules for the touched library (all of its rules unless .dlci.yml `rules` names some or says
    [none]); explicit --targets naming rule.<name> targets are honoured as well."""
    from dlci.rules import rule_targets
    libraries = {RULE_LIBRARIES[p] for p in analysis.profiles if p in RULE_LIBRARIES}
    named = [t for t in (req.targets or []) if t.startswith("rule.")]
    if config.rules is not None and [r.lower() for r in config.rules] == ["none"]:
        return rule_targets(named) if named else {}
    try:
        chosen = rule_targets(config.rules or None) if config.rules else {}
        if not config.rules:
            for lib in libraries:
                chosen.update(rule_targets(library=lib))
        if named:
            chosen.update(rule_targets(named))
    except KeyError as e:
        raise ConfigError(f"rules: {str(e).strip(chr(34) + chr(39))}") from None
    if req.targets and not named:
        return {}  # explicit --targets without rule targets: the user narrowed the run
    return chosen


def _instances(req: ScanRequest, config: Config, chosen: dict, canon: set[str], say) -> list:
    from dlci import operators
    from dlci import sources as S
    from dlci.cli import DEFAULT_SOURCES
    S.registry()
    frameworks = {f for t in chosen.values() for f in t.frameworks}
    names = req.sources or config.sources or list(DEFAULT_SOURCES)
    unknown = [n for n in names if n not in S.SOURCES]
    if unknown:
        raise ConfigError(f"unknown source(s) {', '.join(unknown)}; known: {', '.join(sorted(S.SOURCES))}")
    limit = req.limit_per_op or config.limit_per_op
    picked = []
    for name in names:
        if name == "harvest" or S.SOURCES[name].framework not in frameworks:
            continue
        say(f"loading source {name} (cached after the first harvest)")
        # derived sources (boundary, nan_search) work per operator: only the touched ones are derived
        ops = sorted(canon) if getattr(S.SOURCES[name], "bases", ()) else None
        picked += operators.select(S.load(name, limit_per_op=limit, ops=ops), canon)
    return picked


def _runtime_defaults(profile_names: list[str]) -> tuple[tuple[str, ...], dict]:
    """python_path and env that the detected profiles need by default (a .dlci.yml overrides them)."""
    from dlci.profiles import PROFILES
    paths: list[str] = []
    env: dict = {}
    for name in profile_names:
        p = PROFILES[name]
        paths += [x for x in getattr(p, "python_path", ()) if x not in paths]
        env.update(getattr(p, "env", {}) or {})
    return tuple(paths), env


def _converter_files(analysis, repo) -> list[str]:
    """Changed Python files that hold converters of a detected profile: their lines are traced while converting."""
    from dlci.profiles import PROFILES
    patterns = [pat for name in analysis.profiles for pat in getattr(PROFILES[name], "python_converter_files", ())]
    return sorted({f.path for f in analysis.diff.files if f.status != "deleted" and f.path.endswith(".py")
                   and any(fnmatch.fnmatch(f.path, p) for p in patterns)})


def _changed_statements(repo, converter_files) -> dict[str, set[tuple[int, int]]]:
    by_path = {f.path: f for f in repo.last_diff.files}
    return {rel: _changed_statement_spans(repo.text(rel, "head") or "", set(by_path[rel].added))
            for rel in converter_files if rel in by_path}


def _ran(span: tuple[int, int], lines) -> bool:
    return any(span[0] <= ln <= span[1] for ln in lines)


def _reaches(coverages: list[dict], head_root: Path, converter_files, repo) -> bool:
    changed = _changed_statements(repo, converter_files)
    for cov in coverages:
        for rel, spans in changed.items():
            ran = cov.get(str((head_root / rel).resolve()), ())
            if any(_ran(sp, ran) for sp in spans):
                return True
    return False


def _blob(repo, rev: str, rel: str) -> str | None:
    import subprocess
    proc = subprocess.run(["git", "-C", str(repo.path), "rev-parse", f"{rev}:{rel}"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _coverage_summary(campaign, head_root: Path, converter_files, repo, cache: CoverageCache) -> dict:
    """Which changed statements the instances ran, and which none did (a gap the maintainer should hear about)."""
    changed = _changed_statements(repo, converter_files)
    reached: dict[str, set[tuple[int, int]]] = {rel: set() for rel in changed}
    reaching = set()
    per_blob: dict[str, dict[str, list[int]]] = {}
    for (iid, target), cov in campaign.coverage.items():
        for rel in changed:
            lines = cov.get(str((head_root / rel).resolve()))
            if not lines:
                continue
            per_blob.setdefault(rel, {})[f"{iid}@{target}"] = lines
            hit = {sp for sp in changed[rel] if _ran(sp, lines)}
            if hit:
                reached[rel] |= hit
                reaching.add(iid)
    for rel, runs in per_blob.items():
        blob = _blob(repo, repo.head, rel)
        if blob:
            cache.merge(blob, runs)
    from dlci.diff.regions import innermost, regions
    gaps = []
    for rel, lines in changed.items():
        regs = regions(rel, repo.text(rel, "head") or "")
        for first, _last in sorted(lines - reached[rel]):
            r = innermost(regs, first)
            gaps.append({"file": rel, "line": first, "region": r.name if r else None})
    return {"traced_files": converter_files, "changed_statements": sum(len(v) for v in changed.values()),
            "reached_statements": sum(len(v) for v in reached.values()), "instances_reaching": len(reaching),
            "unreached": gaps}


def _planner(repo, converter_files, cache: CoverageCache):
    """Diff-selected instances in OPERA diversity order, those known (from cached coverage of the base revision's
    files) to run the changed lines first."""
    from dlci.plan import balanced
    hot: set[str] = set()
    by_path = {f.path: f for f in repo.last_diff.files}
    for rel in converter_files:
        ch = by_path.get(rel)
        if ch is None or not ch.old_path:
            continue
        blob = _blob(repo, repo.base, ch.old_path)
        runs = cache.load(blob) if blob else {}
        edited = set(ch.removed) | {h.old_start for h in ch.hunks} | {h.old_start + 1 for h in ch.hunks}
        hot |= {key.split("@", 1)[0] for key, lines in runs.items() if edited & set(lines)}

    def plan(instances):
        order = balanced(list(instances))
        return [i for i in order if i.id in hot] + [i for i in order if i.id not in hot]
    return plan


def fold(findings: list) -> list:
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


def _attribute(findings, campaign, base_env: dict, req: ScanRequest) -> None:
    """Re-run each finding's instances on the base revision: the same failure there means it is not new."""
    from dlci import findings as F
    from dlci.exec import Engine, Job
    from dlci.outcome import Outcome, same_digest
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

    warm = sorted({m for t in campaign.targets.values() for m in t.warm_imports})
    with Engine(workers=req.workers, timeout=req.timeout, memory_mb=req.memory_mb, warm_imports=warm, env=base_env,
                log_dir=str(Path(req.out) / "logs" / "base")) as engine:
        engine.run(jobs, on_result, deadline=time.monotonic() + max(120.0, 0.25 * (req.budget or DEFAULT_BUDGET)))
    for f in findings:
        outs = results.get(f.id, [])
        if not outs:
            f.new_in_pr, f.base = None, {"status": "not run", "note": "base re-run did not complete"}
            continue
        target = campaign.targets[f.target]
        head_outs = {o.instance_id: o for o in campaign.failures.get(f.signature, [])}
        # the same failure: same signature and, for wrong results, the very same wrong numbers (a PR that changes
        # how wrong a result is has changed behaviour)
        same = [o for o in outs if F.is_failure(o) and F.signature(o, target.modules) == f.signature
                and (o.instance_id not in head_outs or same_digest(o.digest, head_outs[o.instance_id].digest))]
        f.new_in_pr = not same
        o = same[0] if same else outs[0]
        f.base = {"status": o.status, "symptom": o.symptom, "stage": o.stage, "same_failure": bool(same),
                  "instances": [x.instance_id for x in outs]}
        passing = [x.instance_id for x in outs if x.status == "pass"]
        if f.new_in_pr and passing and f.instance_id not in passing:
            f.instance_id = passing[0]  # the reproducer then fails on head and passes on base
