"""Bisection inside ``scan`` and release-regression runs (``dlci test --against``): the functions the commands call.

All take and annotate findings as they are in ``findings.json`` (dicts; ``repro`` relative to the output folder).

**scan, a finding new in a multi-commit PR** — :func:`introducing_commits`::

    introducing_commits(doc, out, repo, base_sha, head_sha, config, budget_s=None, say=...) -> list[str]

For each finding with ``new_in_pr`` true and a reproducer that failed on head (``repro_checked``) and passed on base
(``repro_passes_on_base``), when ``base..head`` has at least two commits: the first bad commit, run in worktrees with
the same .dlci.yml environment. Sets ``f["introduced_by"] = {"commit", "subject", "last_good", "complete", "runs",
"report"}``. Commits are prepared once for all findings. Returns one report line per finding bisected.

**scan, a finding already on base** (``.dlci.yml`` ``bisect: releases``) — :func:`since_releases`::

    since_releases(doc, out, budget_s=None, say=..., package_of=None, **options) -> list[str]

For each finding with ``new_in_pr`` false and a reproducer: the first bad release of its target's package
(``package_of(finding)``, default the target's declared package) up to the installed one, run without the
checkout's environment (the caller passes only findings whose target code is the installed release's);
``options`` go to :func:`dlci.bisect.releases.bisect_releases` (``index_url``, ``python``, ``timeout``).
Sets ``f["since"] = {"package", "first_bad", "last_good", "complete", "installs", "cached", "report"}``.

**dlci test --against PACKAGE==VERSION** — :func:`against_environment` checks the spec and returns the environment
under which the same instances run (``Engine(env=...)``); :func:`classify_against` then attributes each finding
from the older run's results, by signature, as scan's base attribution does::

    against_environment("openvino==2026.3.1") -> (package, version, env)          # UsageError on bad input
    classify_against(findings, older_results, package, version) -> summary
        older_results: [{"instance_id", "target", "status", "signature"}] of the older run (signature None when
        the test passed); sets f["new_in_release"] (True: new in the installed release, False: already in the
        older one, None: not run there) and f["against"] = {"package", "version", "status", "same_failure",
        "instances"}; summary = {"new": [ids], "already": [ids], "not_run": [ids], "line": str}

:func:`attribute_against` is the same classification from each finding's reproducer run under the older release
(exit 1: already there, 0: new, anything else: not decided), for runs that did not keep the engine's results.
"""
from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

from dlci.bisect.oracle import BAD, GOOD, run_script
from dlci.bisect.search import BisectInputError
from dlci.errors import UsageError

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


# -- scan: commits ---------------------------------------------------------------------------------------------------

def introducing_commits(doc: dict, out: Path, repo, base: str, head: str, config, budget_s: float | None = None,
                        say: Callable[[str], None] = lambda s: None) -> list[str]:
    from dlci.bisect.commits import CommitPool, commit_range, first_bad_commit, runtime_defaults
    from dlci.diff import GitRepo
    findings = [f for f in doc.get("findings", []) if f.get("new_in_pr") and f.get("repro")
                and f.get("repro_checked") and f.get("repro_passes_on_base")]
    if not findings:
        return []
    commits, _ = commit_range(Path(repo), base, head)
    if len(commits) < 3:  # base and one commit: that commit is the answer, nothing to bisect
        return []
    deadline = time.monotonic() + (budget_s or DEFAULT_BUDGET)
    repo_obj = GitRepo(repo, base, head)
    try:
        pool = CommitPool(repo_obj.path, config, runtime_defaults(repo_obj, config), say=say)
    finally:
        repo_obj.close()
    lines = []
    try:
        for f in findings:
            left = deadline - time.monotonic()
            if left <= 0:
                _set(f, "introduced_by", {"complete": False, "report": "not bisected: bisect budget spent"})
                continue
            res = first_bad_commit(repo, base, head, Path(out) / f["repro"], config, known_good=True,
                                   known_bad=True, pool=pool, budget_s=left, log_dir=Path(out) / "logs" / "bisect",
                                   say=say)
            r = res.result
            line = f"{f['id']}: {res.report_line()}"
            f["introduced_by"] = {"commit": r.first_new, "subject": res.subjects.get(r.first_new, ""),
                                  "last_good": r.last_old, "complete": r.complete,
                                  "candidates": r.skipped_between + [r.first_new] if r.skipped_between else None,
                                  "runs": r.runs(), "report": res.report_line()}
            lines.append(line)
            say(line)
    finally:
        pool.close()
    return lines


# -- scan: releases --------------------------------------------------------------------------------------------------

def _target_package(f) -> str | None:
    from dlci.targets import TARGETS
    t = TARGETS.get(_get(f, "target", ""))
    return getattr(t, "package", None) if t is not None else None


def since_releases(doc: dict, out: Path, budget_s: float | None = None, say: Callable[[str], None] = lambda s: None,
                   package_of: Callable | None = None, **options) -> list[str]:
    from dlci.bisect.releases import bisect_releases
    from dlci.errors import InfrastructureError
    deadline = time.monotonic() + (budget_s or DEFAULT_BUDGET)
    lines = []
    for f in doc.get("findings", []):
        if f.get("new_in_pr") is not False or not f.get("repro"):
            continue
        package = (package_of or _target_package)(f)
        if not package:
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            f["since"] = {"package": package, "complete": False, "report": "not bisected: bisect budget spent"}
            continue
        try:
            res = bisect_releases(Path(out) / f["repro"], package, budget_s=left, log_dir=Path(out) / "logs" /
                                  "bisect", say=say, **options)
        except (UsageError, InfrastructureError) as e:
            # a reproducer that does not fail on the installed release, an index that cannot be reached: said, and
            # the scan goes on
            f["since"] = {"package": package, "complete": False, "report": f"not bisected: {e}"}
            lines.append(f"{f['id']}: not bisected over {package} releases: {e}")
            continue
        r = res.result
        f["since"] = {"package": package, "first_bad": r.first_new, "last_good": r.last_old, "complete": r.complete,
                      "installs": res.envs.installs + res.envs.cached, "cached": res.envs.cached,
                      "report": res.report_line()}
        lines.append(f"{f['id']}: {res.report_line()}")
        say(lines[-1])
    return lines


# -- dlci test --against ---------------------------------------------------------------------------------------------

def parse_against(spec: str) -> tuple[str, str]:
    m = _SPEC.match(spec or "")
    if not m:
        raise UsageError(f"--against {spec!r}: expected PACKAGE==VERSION (e.g. openvino==2026.3.1)")
    return m.group(1), m.group(2)


def against_environment(spec: str, index_url: str | None = None, python: str | None = None,
                        say: Callable[[str], None] = lambda s: None) -> tuple[str, str, dict]:
    """(package, version, env overrides) for ``spec``; UsageError for an unknown package or version, for the
    installed release itself, or for a release that does not install or import here."""
    from dlci.bisect.releases import CandidateSkip, ReleaseEnvs, _same_version, list_releases
    package, version = parse_against(spec)
    envs = ReleaseEnvs(python=python or sys.executable, index_url=index_url, say=say)
    releases = list_releases(package, index_url, python=envs.python)
    if not any(_same_version(v, version) for v in releases):
        raise BisectInputError(f"--against {spec}: {package} has no release {version} installable here "
                               f"(newest: {', '.join(releases[-6:])})")
    if _same_version(envs.base_version(package), version):
        raise UsageError(f"--against {spec}: that is the installed release; name another one")
    try:
        env = envs.get(package, version)
    except CandidateSkip as e:
        raise UsageError(f"--against {spec}: {e}") from None
    return package, version, env.env


def _summary(findings, package: str, version: str, installed: str | None) -> dict:
    new = [_get(f, "id") for f in findings if _get(f, "new_in_release") is True]
    already = [_get(f, "id") for f in findings if _get(f, "new_in_release") is False]
    not_run = [_get(f, "id") for f in findings if _get(f, "new_in_release") is None]
    line = (f"against {package} {version}: {len(new)} new in {installed or 'the installed release'}, "
            f"{len(already)} already in {version}" + (f", {len(not_run)} not decided" if not_run else ""))
    return {"package": package, "version": version, "installed": installed, "new": new, "already": already,
            "not_run": not_run, "line": line}


def classify_against(findings: list, older_results: Iterable[dict], package: str, version: str,
                     installed: str | None = None) -> dict:
    by_key: dict[tuple, list[dict]] = {}
    for r in older_results:
        by_key.setdefault((r.get("instance_id"), r.get("target")), []).append(r)
    for f in findings:
        target = _get(f, "target")
        ids = list(dict.fromkeys([_get(f, "instance_id")] + list(_get(f, "instances", []) or [])))
        ran = [r for iid in ids for r in by_key.get((iid, target), [])]
        same = [r for r in ran if r.get("signature") and r.get("signature") == _get(f, "signature")]
        if not ran:
            status, new = "not run", None
        else:
            new = not same
            status = f"new in {installed or 'the installed release'}" if new else f"already in {version}"
        _set(f, "new_in_release", new)
        _set(f, "against", {"package": package, "version": version, "status": status, "same_failure": bool(same),
                            "instances": sorted({r.get("instance_id") for r in ran})})
    return _summary(findings, package, version, installed)


def attribute_against(doc: dict, out: Path, package: str, version: str, env: dict, timeout: float = 600,
                      say: Callable[[str], None] = lambda s: None) -> dict:
    """Classify ``doc``'s findings by running each reproducer under ``env`` (from :func:`against_environment`)."""
    import importlib.metadata
    try:
        installed = importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    findings = doc.get("findings", [])
    for f in findings:
        if not f.get("repro"):
            f["new_in_release"] = None
            f["against"] = {"package": package, "version": version, "status": "not run", "note": "no reproducer"}
            continue
        v = run_script(Path(out) / f["repro"], env, version, timeout=timeout,
                       log=(Path(out) / f["repro"]).with_suffix(f".{package}-{version}.log"))
        f["new_in_release"] = {BAD: False, GOOD: True}.get(v.verdict)
        status = {BAD: f"already in {version}", GOOD: f"new in {installed or 'the installed release'}"}.get(
            v.verdict, f"not decided: {v.reason}")
        f["against"] = {"package": package, "version": version, "status": status, "same_failure": v.verdict == BAD,
                        "exit_code": v.exit_code, "reason": v.reason}
        say(f"{f['id']} ({f.get('operator')} on {f.get('target')}): {status}")
    summary = _summary(findings, package, version, installed)
    doc["against"] = summary
    return summary
