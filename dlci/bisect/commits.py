"""Bisection over the commits of a target repository: the first bad commit of a multi-commit PR or of any range.

Each commit tested gets a detached ``git worktree`` (:class:`dlci.checkout.Checkout`, the user's working tree is
never touched), prepared with the ``.dlci.yml`` environment that ``dlci scan`` uses: the config is read from the bad
revision as scan reads it from the PR's head, ``install`` runs in the commit's checkout, and the reproducer runs with
the commit's ``python_path`` first on PYTHONPATH and its ``env`` (the detected profiles' defaults when .dlci.yml says
nothing, e.g. a TVM checkout's ``python/`` over the installed native library). A commit whose install command fails
is skipped, as ``git bisect skip`` would.

The candidates are the commits on the ancestry path from good to bad (``git rev-list --ancestry-path``), oldest
first in topological order: exact for a linear history such as a PR's commits; for merges it is a linearisation.

Contract for ``scan`` (item: a finding new in a multi-commit PR names the commit that introduced it)::

    first_bad_commit(repo, good, bad, reproducer, config=None, *, known_good=True, known_bad=True) -> CommitBisection

``known_good``/``known_bad`` say the reproducer was already seen to pass on ``good`` (scan's base) and to fail on
``bad`` (the head): those two runs are not repeated. ``CommitPool`` keeps each prepared commit for the bisection of
every finding of the same scan (one install per commit, not per finding).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dlci.bisect.oracle import BAD, GOOD, SKIP, Verdict, run_command, run_script
from dlci.bisect.search import FIXED, REGRESSION, BisectInputError, SearchResult, bisect
from dlci.config import CONFIG_FILE, Config


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    from dlci.diff import git
    return git.run(repo, *args)


def profiles_for(repo, config: Config) -> list:
    """The profiles that recognise the repository (or those .dlci.yml names)."""
    from dlci.profiles import FALLBACK, PROFILES, registry
    registry()
    names = config.profiles or [n for n in PROFILES if n != FALLBACK and PROFILES[n].detect(repo)]
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise BisectInputError(f"{config.source}: unknown profile {unknown[0]!r}; known: {', '.join(sorted(PROFILES))}")
    return [PROFILES[n] for n in names]


def commit_range(repo_path: Path, good: str, bad: str) -> tuple[list[str], dict[str, str]]:
    """([good, ..., bad] oldest first, {sha: subject}). Bad input (unknown revision, good not an ancestor of bad,
    good == bad) raises BisectInputError."""
    shas = {}
    for flag, rev in (("--good", good), ("--bad", bad)):
        if not rev or rev.startswith("-"):
            raise BisectInputError(f"{flag}: bad revision {rev!r}")
        p = _git(repo_path, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if p.returncode != 0:
            raise BisectInputError(f"{flag} {rev}: unknown revision in {repo_path}")
        shas[flag] = p.stdout.strip()
    g, b = shas["--good"], shas["--bad"]
    if g == b:
        raise BisectInputError(f"empty range: --good {good} and --bad {bad} are the same commit")
    if _git(repo_path, "merge-base", "--is-ancestor", g, b).returncode != 0:
        raise BisectInputError(f"--good {good} is not an ancestor of --bad {bad}: no range of history between them")
    p = _git(repo_path, "rev-list", "--reverse", "--topo-order", "--ancestry-path", f"{g}..{b}")
    if p.returncode != 0:
        raise BisectInputError(f"git rev-list {good}..{bad} failed: {p.stderr.strip()}")
    commits = [g] + p.stdout.split()
    log = _git(repo_path, "log", "--no-walk=unsorted", "--format=%H %s", *commits)
    subjects = dict(line.split(" ", 1) if " " in line else (line, "") for line in log.stdout.splitlines())
    return commits, subjects


@dataclass
class CommitPool:
    """Prepared checkouts of commits (worktree, what the profiles need, install), kept until :meth:`close`."""
    repo: Path
    config: Config
    defaults: tuple
    profiles: tuple = ()
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dlci-bisect-")))
    say: Callable[[str], None] = lambda s: None
    _ready: dict = field(default_factory=dict)
    prepared: int = 0

    def get(self, sha: str):
        """(checkout, env) of ``sha``, or raises CandidateSkip-like BisectSkip when its install fails."""
        from dlci.checkout import Checkout, CheckoutError
        if sha not in self._ready:
            co = Checkout.create(self.repo, sha, self.workdir, sha[:12])
            try:
                co.prepare(self.config, self.profiles)
                self._ready[sha] = (co, co.env(self.config, *self.defaults), None)
            except CheckoutError as e:
                self._ready[sha] = (co, None, str(e).splitlines()[0][:400])
            self.prepared += 1
        return self._ready[sha]

    def close(self) -> None:
        for co, _, _ in self._ready.values():
            co.remove()
        self._ready.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)


@dataclass
class CommitBisection:
    repo: Path
    script: Path
    result: SearchResult
    subjects: dict
    prepared: int
    seconds: float

    def _c(self, sha: str | None) -> str:
        return f"{sha[:12]} \"{self.subjects.get(sha, '')[:60]}\"" if sha else "-"

    def report_line(self) -> str:
        r = self.result
        n = len(r.candidates) - 1
        tail = f"{r.runs()} reproducer runs over {n} commit{'s' if n != 1 else ''}"
        if r.last_old is None:
            return f"{r.states[1]} from the oldest commit tested on ({r.note}); {tail}"
        verb = "introduced" if r.mode == REGRESSION else "fixed"
        if not r.complete:
            return f"{verb} after {self._c(r.last_old)} and by {self._c(r.first_new)} ({r.note}); {tail}"
        if r.skipped_between:
            return (f"{verb} by one of {', '.join(self._c(s) for s in r.skipped_between + [r.first_new])} "
                    f"(untestable between); {tail}")
        return f"{verb} by {self._c(r.first_new)}; parent {r.last_old[:12]} {r.states[0]}; {tail}"

    def to_dict(self) -> dict:
        d = {"kind": "commits", "repo": str(self.repo), "script": str(self.script), **self.result.to_dict(),
             "worktrees_prepared": self.prepared, "seconds": round(self.seconds, 1), "report": self.report_line()}
        d["subjects"] = {s: self.subjects.get(s, "") for s in self.result.candidates}
        return d


def first_bad_commit(repo: str | Path, good: str, bad: str, reproducer: str | Path, config: Config | None = None,
                     *, mode: str = REGRESSION, known_good: bool = False, known_bad: bool = False,
                     pool: CommitPool | None = None, budget_s: float | None = None, timeout: float = 600,
                     log_dir: Path | None = None, say: Callable[[str], None] = lambda s: None) -> CommitBisection:
    """Bisect ``reproducer`` (exit 0 good, 1 bad) over the commits from ``good`` to ``bad`` of ``repo``.

    ``config``: the .dlci.yml to use (default: the one at ``bad``, as scan reads head's). In ``fixed`` mode ``good``
    is the newer end and ``bad`` the older. ``pool``: reuse prepared commits across calls (caller closes it)."""
    from dlci.diff import GitRepo
    t0 = time.monotonic()
    script = Path(reproducer).resolve()
    if not script.is_file():
        raise BisectInputError(f"no reproducer script at {script}")
    old, new = (good, bad) if mode == REGRESSION else (bad, good)
    repo_obj = GitRepo(repo, old, new)
    try:
        commits, subjects = commit_range(repo_obj.path, old, new)
        if config is None:
            config = Config.parse(repo_obj.text(CONFIG_FILE, "head"), f"{CONFIG_FILE} at {commits[-1][:12]}")
        profiles = profiles_for(repo_obj, config) if pool is None else None
    finally:
        repo_obj.close()
    own_pool = pool is None
    if own_pool:
        from dlci.scan.selection import runtime_defaults as defaults_of
        pool = CommitPool(repo_obj.path, config, defaults_of([p.name for p in profiles]), tuple(profiles), say=say)
    known = {commits[0]: known_good if mode == REGRESSION else known_bad,
             commits[-1]: known_bad if mode == REGRESSION else known_good}
    states = {commits[0]: GOOD if mode == REGRESSION else BAD, commits[-1]: BAD if mode == REGRESSION else GOOD}
    say(f"{len(commits) - 1} commit(s) from {commits[0][:12]} to {commits[-1][:12]}")

    def test(sha: str) -> Verdict:
        if known.get(sha):
            return Verdict(sha, states[sha], "known from the scan", None, detail={"known": True})
        co, env, failure = pool.get(sha)
        if env is None:
            return Verdict(sha, SKIP, f"does not prepare: {failure}", None)
        log = log_dir / f"{sha[:12]}.log" if log_dir else None
        v = run_script(script, env, sha, None, timeout, log)
        v.commands = [f"git -C {repo_obj.path} worktree add --detach {co.path} {sha}"]
        if config.install:
            v.commands.append(f"cd {co.path} && {co._expand(config.install)}")
        v.commands.append(run_command(env, script))
        v.detail = {"subject": subjects.get(sha, "")}
        return v

    try:
        result = bisect(commits, test, mode, pinned_old=True, pinned_new=True, budget_s=budget_s,
                        labels=("--good", "--bad") if mode == REGRESSION else ("--bad", "--good"), say=say)
    finally:
        if own_pool:
            pool.close()
    return CommitBisection(repo_obj.path, script, result, subjects, pool.prepared, time.monotonic() - t0)


__all__ = ["first_bad_commit", "commit_range", "CommitPool", "CommitBisection", "profiles_for", "FIXED"]
