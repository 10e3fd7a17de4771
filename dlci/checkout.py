"""A revision of the target repository checked out on its own, and the environment that makes it importable.

Head and base each get a detached ``git worktree`` (the user's working tree and index are never touched). The test
workers and reproducers then run with the revision's ``python_path`` entries first on PYTHONPATH, its ``env``, and,
when ``.dlci.yml`` names an ``install`` command, whatever that command installed under the revision's prefix.
"""
from __future__ import annotations

from dlci.errors import InfrastructureError

import os
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

from dlci.config import Config
from dlci.exec import cancel

INSTALL_TIMEOUT = 1800


class CheckoutError(InfrastructureError):
    """The revision could not be checked out or prepared (git failure, install command failed): exit 3."""


OWNER_FILE = ".dlci-owner"  # in a scan's work folder: the pid (and its start time) of the process that made it


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    from dlci.diff import git
    try:
        return git.run(repo, *args)
    except git.GitTimeout as e:
        raise CheckoutError(str(e)) from None


def _process_start(pid: int) -> str | None:
    """The start time of a live process (field 22 of /proc/<pid>/stat), to tell a pid reused by another process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def claim(workdir: Path) -> None:
    """Mark ``workdir`` as this process's: a later run removes the worktrees of a work folder whose owner died
    (a SIGKILL leaves them registered in the repository)."""
    Path(workdir).mkdir(parents=True, exist_ok=True)
    (Path(workdir) / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid()) or ''}\n")


def _owner_alive(workdir: Path) -> bool:
    try:
        pid, _, start = (Path(workdir) / OWNER_FILE).read_text().strip().partition(" ")
        return _process_start(int(pid)) == (start or None)
    except (OSError, ValueError):
        return False


def remove_stale(repo: Path) -> list[str]:
    """Remove the worktrees that an earlier run left in ``repo`` when it was killed: those inside a work folder
    (one holding :data:`OWNER_FILE`) whose owner is no longer running, and those whose folder is gone."""
    listed = _git(repo, "worktree", "list", "--porcelain")
    removed = []
    for line in listed.stdout.splitlines() if listed.returncode == 0 else []:
        if not line.startswith("worktree "):
            continue
        path = Path(line[len("worktree "):])
        workdir = path.parent
        if not (workdir / OWNER_FILE).is_file() or _owner_alive(workdir):
            continue
        _git(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(workdir, ignore_errors=True)
        removed.append(str(path))
    _git(repo, "worktree", "prune")
    return removed


class Checkout:
    def __init__(self, repo: Path, sha: str, path: Path, label: str):
        self.repo, self.sha, self.path, self.label = Path(repo), sha, Path(path), label
        self.prefix = self.path.parent / f"{label}-prefix"
        self.install_log = ""

    @classmethod
    def create(cls, repo: Path, sha: str, workdir: Path, label: str) -> "Checkout":
        path = Path(workdir) / label
        if path.exists():
            shutil.rmtree(path)
        if not (Path(workdir) / OWNER_FILE).is_file():
            remove_stale(repo)
            claim(workdir)
        proc = _git(repo, "worktree", "add", "--detach", "--force", str(path), sha)
        if proc.returncode != 0:
            raise CheckoutError(f"git worktree add for {label} ({sha[:12]}) failed: {proc.stderr.strip()}")
        return cls(repo, sha, path, label)

    def remove(self) -> None:
        _git(self.repo, "worktree", "remove", "--force", str(self.path))
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.rmtree(self.prefix, ignore_errors=True)
        _git(self.repo, "worktree", "prune")

    def _expand(self, value: str) -> str:
        return value.format(checkout=str(self.path), prefix=str(self.prefix),
                            site_packages=sysconfig.get_paths()["purelib"])

    def prepare(self, config: Config, profiles=()) -> None:
        """Give the checkout what its profiles say it needs (e.g. TVM's headers), then run the configured install
        command in it (its output kept for the report)."""
        for profile in profiles:
            profile.prepare_checkout(self.path)
        if not config.install:
            return
        self.prefix.mkdir(parents=True, exist_ok=True)
        from dlci.findings.repro import scrubbed_env
        cmd = self._expand(config.install)
        try:
            # the PR's own install command: untrusted code, so it never sees tokens or runner secrets
            proc = cancel.run(cmd, shell=True, cwd=str(self.path),
                              timeout=INSTALL_TIMEOUT, env=scrubbed_env(self.env(config, ())))
        except subprocess.TimeoutExpired:
            raise CheckoutError(f"install command for {self.label} timed out after {INSTALL_TIMEOUT} s: {cmd}")
        self.install_log = (proc.stdout + proc.stderr)[-20000:]
        if proc.returncode != 0:
            raise CheckoutError(f"install command for {self.label} exited {proc.returncode}: {cmd}\n"
                                + "\n".join(self.install_log.splitlines()[-20:]))

    def env(self, config: Config, default_python_path=("",), default_env: dict | None = None) -> dict:
        """Environment overrides for tests of this revision (merged over the worker's environment)."""
        configured = config.python_path is not None
        entries = config.python_path if configured else list(default_python_path)
        paths = []
        if config.install:
            paths.append(str(self.prefix))
        found = [str((self.path / p).resolve()) for p in entries]
        for p in found:
            if configured and not Path(p).is_dir():
                raise CheckoutError(f"python_path entry {p} does not exist in the {self.label} checkout")
        # a profile's defaults name the places its kind of repository may keep its package: those it lacks are not
        # an error (OpenVINO's Python package: src/bindings/python/src in its repository, the root elsewhere)
        paths += [p for p in found if Path(p).is_dir()]
        env = {k: self._expand(v) for k, v in {**(default_env or {}), **(config.env or {})}.items()}
        inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths + inherited))
        return env

    def run_hint(self, env: dict) -> list[str]:
        """How to run a reproducer against this revision after the scan (its worktree is gone by then): the
        commands that check the revision out again and the environment, with paths that will exist."""
        where = f"/tmp/dlci-{self.label}-{self.sha[:12]}"
        mine = str(self.path.resolve())

        def moved(value: str) -> str:
            return value.replace(mine, where).replace(str(self.prefix), f"{where}-prefix")
        keys = [k for k in env if k != "PYTHONPATH"]
        parts = [f"PYTHONPATH={shlex.quote(moved(env['PYTHONPATH']))}"] if env.get("PYTHONPATH") else []
        parts += [f"{k}={shlex.quote(moved(env[k]))}" for k in keys]
        return [f"git -C {shlex.quote(str(self.repo))} worktree add --detach {where} {self.sha}",
                " ".join(parts)]
