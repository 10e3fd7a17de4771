"""Every git command dlci runs, built one way: a pull request controls the tree it checks out, so nothing in it may
make git run code.

- ``core.hooksPath=/dev/null``: no hook runs (a repository whose config points hooksPath into the tree would run
  the PR's ``post-checkout`` on ``git worktree add``);
- ``core.fsmonitor=false``: no file-system monitor command;
- ``protocol.ext.allow=never``, ``core.sshCommand``/``core.askPass`` neutral: no transport runs a program;
- no system or global config, an empty HOME (no ``~/.gitconfig``), no pager, no prompts, the C locale; every
  ``GIT_*`` variable of the caller dropped (``GIT_DIR``, ``GIT_CONFIG_PARAMETERS``, ``GIT_EXTERNAL_DIFF``...);
- the user's ``safe.directory`` entries alone carried over (a checkout owned by the runner's user stays readable);
- a timeout on every call.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

TIMEOUT_S = 900.0  # a worktree of a large repository on a slow disk; nothing of dlci's should wait longer

HARDENING = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "protocol.ext.allow=never",
             "core.sshCommand=false", "core.askPass=", "credential.helper=", "core.pager=cat",
             "core.quotepath=off", "color.ui=never", "advice.detachedHead=false")

_home_lock = threading.Lock()
_home: str | None = None
_trusted: tuple[str, ...] | None = None


class GitTimeout(RuntimeError):
    """A git command ran past its timeout (killed)."""


def _empty_home() -> str:
    """One empty HOME per process, so no ~/.gitconfig or XDG config is read; removed at exit."""
    global _home
    with _home_lock:
        if _home is None:
            _home = tempfile.mkdtemp(prefix="dlci-git-home-")
            atexit.register(shutil.rmtree, _home, True)
        return _home


def env(**extra: str) -> dict[str, str]:
    """The environment of a git command (``extra``: e.g. an author identity for dlci's own sample commits)."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    home = _empty_home()
    out.update(HOME=home, XDG_CONFIG_HOME=home, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat", LC_ALL="C", LANG="C", LANGUAGE="C",
               GIT_OPTIONAL_LOCKS="0", GIT_ASKPASS="", SSH_ASKPASS="")
    out.update(extra)
    return out


def _trusted_dirs() -> tuple[str, ...]:
    """The user's ``safe.directory`` entries. Dropping the global config must not make git refuse a checkout
    that the user (or actions/checkout) marked as trusted, so these alone are carried over as ``-c``."""
    global _trusted
    if _trusted is None:
        try:
            r = subprocess.run(["git", "config", "--get-all", "safe.directory"], capture_output=True, cwd="/",
                               env={k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
                               stdin=subprocess.DEVNULL, timeout=30)
            _trusted = tuple(line for line in r.stdout.decode("utf-8", "surrogateescape").splitlines() if line)
        except (OSError, subprocess.TimeoutExpired):
            _trusted = ()
    return _trusted


def command(args, *, config: tuple[str, ...] = ()) -> list[str]:
    """``git`` with the hardening above, ``config`` (more ``name=value`` settings), then ``args``."""
    cmd = ["git", "--no-pager"]
    for kv in (*HARDENING, *config):
        cmd += ["-c", kv]
    for d in _trusted_dirs():
        cmd += ["-c", f"safe.directory={d}"]
    return cmd + [str(a) for a in args]


def run(repo: str | Path | None, *args: str, text: bool = True, timeout: float = TIMEOUT_S,
        config: tuple[str, ...] = (), extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """Run git (in ``repo`` when given) and return the completed process; raises :class:`GitTimeout` when it ran
    past ``timeout`` (the process is killed) and FileNotFoundError when git is not installed."""
    cmd = command((["-C", str(repo)] if repo is not None else []) + list(args), config=config)
    try:
        return subprocess.run(cmd, capture_output=True, text=text, env=env(**(extra_env or {})),
                              stdin=subprocess.DEVNULL, timeout=timeout,
                              **({"encoding": "utf-8", "errors": "surrogateescape"} if text else {}))
    except subprocess.TimeoutExpired:
        raise GitTimeout(f"git {' '.join(map(str, args[:2]))} ran past {timeout:.0f} s in {repo or '.'}") from None
