"""Bisection inside ``scan``, and release-regression runs (``dlci test --against``).

**scan** — :func:`in_scan` runs what ``.dlci.yml`` ``bisect`` asks for, within ``bisect_budget`` seconds, after the
findings are attributed and their reproducers checked:

- ``commits`` (the default): a finding new in a PR of several commits, whose reproducer failed on head and passed on
  base, names the commit that introduced it (:func:`introducing_commits`; ``introduced_by``), bisected in worktrees
  prepared with the same ``.dlci.yml`` environment as head and base;
- ``releases``: a finding already on base is bisected over the releases of its target's package up to the installed
  one (:func:`since_releases`; ``since``). The reproducer runs without the checkout's environment, so only a bug of
  the installed release gets an answer: a reproducer that passes on the installed release (the bug is in the
  checkout's code) is said so, and not bisected.

**dlci test --against PACKAGE==VERSION** — :class:`ReleaseComparison`: the spec is checked and the older release's
layer built before any test runs (bad input: exit 2); the findings of the targets that run that package are
attributed as PR mode attributes head against base (:func:`dlci.scan.attribution.attribute`: each finding's
instances re-run in workers under the older release, each judged on its own, a finding with both kinds split), into
``new_in_release`` (True: new in the installed release; False: the same failure in the older one; None: not
compared) and ``against``; then each compared finding's reproducer runs under the older release too.
"""
from __future__ import annotations

import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dlci.bisect.oracle import run_command, run_script
from dlci.errors import InfrastructureError, UsageError
from dlci.findings import attribution

DEFAULT_BUDGET = 600.0
_SPEC = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)\s*$")


def wants(config, what: str) -> bool:
    """Does .dlci.yml's ``bisect`` ask for ``what`` (commits by default, releases only when named)?"""
    chosen = config.bisect if config is not None and config.bisect is not None else ["commits"]
    return "none" not in chosen and what in chosen


def _get(f, key, default=None):
    return f.get(key, default) if isinstance(f, dict) else getattr(f, key, default)


def _set(f, key, value) -> None:
    if isinstance(f, dict):
        f[key] = value
    else:
        setattr(f, key, value)


def target_package(target: str) -> str | None:
    """The package of a target (an equivalence rule's library for rule.<name>)."""
    from dlci.targets import registry
    found = registry().get(target)
    if found is None and target.startswith("rule."):
        from dlci.rules import rule_targets
        try:
            found = next(iter(rule_targets([target]).values()), None)
        except KeyError:
            found = None
    return getattr(found, "package", None) if found is not None else None


# -- scan ------------------------------------------------------------------------------------------------------------

def in_scan(findings: list, out: Path, repo, base: str, head: str, config, *, profiles=None, defaults=None,
            say: Callable[[str], None] = lambda s: None) -> dict | None:
    """The bisections ``config`` asks for, sharing its ``bisect_budget``; the summary for ``pr["bisect"]`` (None
    when nothing was asked or there was nothing to bisect)."""
    budget = (config.bisect_budget if config is not None else None) or DEFAULT_BUDGET
    t0 = time.monotonic()
    deadline = t0 + budget
    lines: list[str] = []
    asked = [w for w in ("commits", "releases") if wants(config, w)]
    if "commits" in asked:
        lines += introducing_commits(findings, out, repo, base, head, config, budget_s=budget, say=say,
                                     profiles=profiles, defaults=defaults)
    if "releases" in asked:
        lines += since_releases(findings, out, budget_s=deadline - time.monotonic(), say=say)
    if not lines:
        return None
    return {"asked": asked, "budget_s": budget, "seconds": round(time.monotonic() - t0, 1), "lines": lines}


def introducing_commits(findings: list, out: Path, repo, base: str, head: str, config, budget_s: float | None = None,
                        say: Callable[[str], None] = lambda s: None, profiles=None, defaults=None) -> list[str]:
    """Each finding new in the PR whose reproducer was not seen to pass on head nor to fail on base (a run the scan's
    budget left out is the bisection's first), when ``base..head`` has at least two commits: ``introduced_by`` =
    {commit, subject, last_good, complete, candidates, commits, runs, report}. Commits are prepared once for all
    findings. Returns one line per finding."""
    from dlci.bisect.commits import CommitPool, commit_range, first_bad_commit, profiles_for
    from dlci.diff import GitRepo
    from dlci.scan.selection import runtime_defaults
    chosen = [f for f in findings if _get(f, "new_in_pr") and _get(f, "repro") and _get(f, "repro_checked")
              is not False and _get(f, "repro_passes_on_base") is not False]
    if not chosen:
        return []
    commits, _ = commit_range(Path(repo), base, head)
    if len(commits) < 3:  # base and one commit: that commit is the answer, nothing to bisect
        return []
    deadline = time.monotonic() + (DEFAULT_BUDGET if budget_s is None else budget_s)
    if profiles is None or defaults is None:
        repo_obj = GitRepo(repo, base, head)
        try:
            found = profiles_for(repo_obj, config)
        finally:
            repo_obj.close()
        profiles = found if profiles is None else profiles
        defaults = runtime_defaults([p.name for p in found]) if defaults is None else defaults
    pool = CommitPool(Path(repo), config, defaults, profiles=tuple(profiles), say=say)
    lines = []
    try:
        for f in chosen:
            left = deadline - time.monotonic()
            if left <= 0:
                _set(f, "introduced_by", {"complete": False, "report": "not bisected: bisect budget spent"})
                lines.append(f"{_get(f, 'id')}: not bisected over the PR's commits: bisect budget spent")
                continue
            try:
                res = first_bad_commit(repo, base, head, Path(out) / _get(f, "repro"), config,
                                       known_good=bool(_get(f, "repro_passes_on_base")),
                                       known_bad=bool(_get(f, "repro_checked")), pool=pool, budget_s=left,
                                       log_dir=Path(out) / "logs" / "bisect", say=say)
            except UsageError as e:  # its reproducer passes on head, or cannot run on base: said, the others go on
                _set(f, "introduced_by", {"complete": False, "report": f"not bisected: {e}"})
                lines.append(f"{_get(f, 'id')}: not bisected over the PR's commits: {e}")
                say(lines[-1])
                continue
            r = res.result
            _set(f, "introduced_by", {
                "commit": r.first_new, "subject": res.subjects.get(r.first_new, ""), "last_good": r.last_old,
                "complete": r.complete, "candidates": r.skipped_between + [r.first_new] if r.skipped_between else None,
                "commits": len(commits) - 1, "runs": r.runs(), "report": res.report_line()})
            lines.append(f"{_get(f, 'id')}: {res.report_line()}")
            say(lines[-1])
    finally:
        pool.close()
    return lines


def since_releases(findings: list, out: Path, budget_s: float | None = None,
                   say: Callable[[str], None] = lambda s: None, package_of: Callable | None = None,
                   **options) -> list[str]:
    """Each finding already on base with a reproducer that failed alone: the first bad release of its target's
    package (``package_of(finding)``, default :func:`target_package`) up to the installed one, run without the
    checkout's environment. ``options`` go to :func:`dlci.bisect.releases.bisect_releases` (``index_url``,
    ``python``, ``timeout``). Sets ``since`` = {package, first_bad, last_good, complete, installs, cached, report}.
    Returns one line per finding."""
    from dlci.bisect.releases import bisect_releases
    deadline = time.monotonic() + (DEFAULT_BUDGET if budget_s is None else budget_s)
    lines = []
    for f in findings:
        # the same failure on base only: a changed one's reproducer shows head's failure, which base does not have
        if attribution(f) != "on_base" or _get(f, "new_in_pr") is not False or not _get(f, "repro") \
                or _get(f, "repro_checked") is False:
            continue
        package = (package_of or (lambda x: target_package(_get(x, "target", ""))))(f)
        if not package:
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            _set(f, "since", {"package": package, "complete": False, "report": "not bisected: bisect budget spent"})
            lines.append(f"{_get(f, 'id')}: not bisected over {package} releases: bisect budget spent")
            continue
        try:
            res = bisect_releases(Path(out) / _get(f, "repro"), package, budget_s=left,
                                  log_dir=Path(out) / "logs" / "bisect", say=say, **options)
        except (UsageError, InfrastructureError) as e:
            # a reproducer that passes on the installed release (the bug is the checkout's), an index that cannot be
            # reached: said, and the scan goes on
            _set(f, "since", {"package": package, "complete": False, "report": f"not bisected: {e}"})
            lines.append(f"{_get(f, 'id')}: not bisected over {package} releases: {e}")
            say(lines[-1])
            continue
        r = res.result
        _set(f, "since", {"package": package, "first_bad": r.first_new, "last_good": r.last_old,
                          "complete": r.complete, "skipped_between": r.skipped_between, "runs": r.runs(),
                          "installs": res.envs.installs + res.envs.cached, "cached": res.envs.cached,
                          "report": res.report_line()})
        lines.append(f"{_get(f, 'id')}: {res.report_line()}")
        say(lines[-1])
    return lines


# -- dlci test --against ---------------------------------------------------------------------------------------------

def parse_against(spec: str) -> tuple[str, str]:
    m = _SPEC.match(spec or "")
    if not m:
        raise UsageError(f"--against {spec!r}: expected PACKAGE==VERSION (e.g. openvino==2026.3.1)")
    return m.group(1), m.group(2)


@dataclass
class ReleaseComparison:
    """The installed release of ``package`` against ``version``, for the findings of ``targets``."""
    package: str
    version: str
    installed: str
    targets: list[str]
    envs: object          # dlci.bisect.releases.ReleaseEnvs
    layer: object         # dlci.bisect.releases.ReleaseEnv of the older release
    prepare_seconds: float = 0.0

    @classmethod
    def prepare(cls, spec: str, targets: dict, index_url: str | None = None,
                say: Callable[[str], None] = lambda s: None) -> "ReleaseComparison":
        """Check ``spec`` against the selected ``targets`` and build (or take from the cache) the older release's
        layer. Bad input raises UsageError (exit 2): a malformed spec, a package no selected target runs, one that
        is not installed, an unknown version, the installed release itself, a release that does not install or
        import here. An unreachable index: InfrastructureError (exit 3)."""
        from dlci.bisect.releases import CandidateSkip, ReleaseEnvs, _same_version, canonical, list_releases
        from dlci.bisect.search import BisectInputError
        t0 = time.monotonic()
        package, version = parse_against(spec)
        packages = {name: target_package(name) for name in targets}
        mine = [name for name, p in packages.items() if p and canonical(p) == canonical(package)]
        if not mine:
            runs = ", ".join(f"{n} runs {p or '?'}" for n, p in packages.items())
            raise UsageError(f"--against {spec}: no selected target runs {package} ({runs})")
        envs = ReleaseEnvs(python=sys.executable, index_url=index_url, say=say)
        installed = envs.base_version(package)
        if installed is None:
            raise UsageError(f"--against {spec}: {package} is not installed here; nothing to compare with")
        releases = list_releases(package, index_url, python=envs.python)
        if not any(_same_version(v, version) for v in releases):
            raise BisectInputError(f"--against {spec}: {package} has no release {version} installable here "
                                   f"(newest: {', '.join(releases[-6:])})")
        if _same_version(installed, version):
            raise UsageError(f"--against {spec}: {version} is the installed release; name an older one")
        try:
            layer = envs.get(package, version)
        except CandidateSkip as e:
            raise UsageError(f"--against {spec}: {e}") from None
        say(f"against {package} {version}: {layer.describe()}")
        return cls(package, version, installed, mine, envs, layer, time.monotonic() - t0)

    @property
    def comparison(self):
        from dlci.bisect.releases import canonical
        from dlci.findings import NEW_IN_RELEASE_PART
        from dlci.scan.attribution import Comparison
        return Comparison(new_field="new_in_release", info_field="against", suffix=NEW_IN_RELEASE_PART,
                          log=f"against-{canonical(self.package)}-{self.version}",
                          info={"package": self.package, "version": self.version, "installed": self.installed})

    def classify(self, findings: list, campaign, options, deadline: float) -> list:
        """Attribute the findings of the compared targets against the older release (the others: not compared);
        the new ones first."""
        from dlci.exec import WorkerStartError
        from dlci.findings import is_new
        from dlci.scan.attribution import attribute
        compared = [f for f in findings if f.target in self.targets]
        for f in findings:
            if f.target not in self.targets:
                f.new_in_release = None
                f.against = {"package": self.package, "version": self.version, "status": "not compared",
                             "note": f"{f.target} does not run {self.package}"}
        options.progress(f"re-running {len(compared)} finding(s) under {self.package} {self.version}")
        try:
            out = attribute(compared, campaign, options, self.layer.env, deadline, head_env={},
                            compare=self.comparison)
        except WorkerStartError as e:  # dlci's workers cannot live under that release: said, nothing is lost
            for f in compared:
                self.comparison.mark(f, None, {"status": "not compared", "note": f"no worker started under "
                                               f"{self.package} {self.version}: {e}"})
            out = compared
        out += [f for f in findings if f.target not in self.targets]
        out.sort(key=lambda f: not is_new(f))
        return out

    def check_reproducers(self, findings: list, out: Path, workers: int = 2, until: float | None = None) -> None:
        """Run each compared finding's reproducer under the older release: ``against["reproducer"]`` = {verdict
        (good: passes there, bad: reproduces there, skip: neither, with its reason), exit_code, command, fresh_venv}."""
        from dlci.bisect.releases import _fresh_venv_command

        def check(f) -> None:
            limit = 600.0 if until is None else min(600.0, until - time.monotonic())
            if limit < 10 or not f.repro or f.repro_checked is False or f.new_in_release is None:
                return
            script = (Path(out) / f.repro).resolve()
            v = run_script(script, self.layer.env, self.version, timeout=limit, trace_imports=True,
                           log=script.with_suffix(f".{self.package}-{self.version}.log"))
            f.against["reproducer"] = {
                "verdict": v.verdict, "exit_code": v.exit_code, "reason": v.reason,
                "command": run_command({"PYTHONPATH": str(self.layer.path)}, script),
                "fresh_venv": _fresh_venv_command(self.envs, script, self.package, self.version, self.layer.delta,
                                                  v.modules)}

        with ThreadPoolExecutor(max(1, workers)) as pool:
            list(pool.map(check, findings))

    def summary(self, findings: list) -> dict:
        new = [f.id for f in findings if f.new_in_release is True]
        already = [f.id for f in findings if attribution(f) == "on_base"]
        changed = [f.id for f in findings if attribution(f) == "changed"]
        undecided = [f.id for f in findings if f.new_in_release is None]
        line = (f"against {self.package} {self.version} (installed {self.installed}): {len(new)} finding(s) new in "
                f"{self.installed}, {len(already)} already in {self.version}"
                + (f", {len(changed)} failing in {self.version} too, otherwise" if changed else "")
                + (f", {len(undecided)} not compared" if undecided else ""))
        return {"package": self.package, "version": self.version, "installed": self.installed,
                "targets": self.targets, "new": new, "already": already, "changed": changed,
                "not_compared": undecided, "line": line,
                "layer": str(self.layer.path), "delta": self.layer.delta,
                "layer_from_cache": self.layer.cached, "prepare_seconds": round(self.prepare_seconds, 1),
                "install_command": self.layer.install_command}


__all__ = ["DEFAULT_BUDGET", "ReleaseComparison", "in_scan", "introducing_commits", "parse_against",
           "since_releases", "target_package", "wants"]
