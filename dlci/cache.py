"""Where dlci keeps what it computed once: harvested instances, derived operator tables, exported forms, converter
coverage, NaN-search domains, bisection environments. The one place that says where caches live.

The root is ``$DLCI_CACHE_DIR``, else ``~/.cache/dlci``. A run that executes code a pull request controls
(``dlci scan``, a bisection over a PR's commits) is *untrusted*: it writes under ``<root>/untrusted/`` only and
reads the trusted entries beside its own, so what it leaves behind is never what a trusted run (``dlci test`` on
the installed packages, a run on main) reads and executes. The mark is an environment variable, so the workers,
install commands and reproducer checks such a run starts are untrusted too. The action's sandboxed scan
(dlci.github.sandbox) writes into a folder of its own, ``$DLCI_UNTRUSTED_CACHE_DIR``, and cannot write the root.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

ENV = "DLCI_CACHE_DIR"
UNTRUSTED_ENV = "DLCI_UNTRUSTED"  # set (to 1) in a run, and its children, that executes a pull request's code
UNTRUSTED_DIR_ENV = "DLCI_UNTRUSTED_CACHE_DIR"  # where an untrusted run writes (default <root>/untrusted)


def base() -> Path:
    """The trusted root."""
    env = os.environ.get(ENV)
    return Path(env) if env else Path.home() / ".cache" / "dlci"


def untrusted() -> bool:
    return os.environ.get(UNTRUSTED_ENV, "") not in ("", "0")


@contextlib.contextmanager
def untrusted_run():
    """While it lasts, this process and the children it starts run a pull request's code: their caches are kept
    apart (the mark is restored after, so the same process can run trusted work again)."""
    before = os.environ.get(UNTRUSTED_ENV)
    os.environ[UNTRUSTED_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(UNTRUSTED_ENV, None)
        else:
            os.environ[UNTRUSTED_ENV] = before


def root() -> Path:
    """Where this process writes (and first reads) its cache entries."""
    if not untrusted():
        return base()
    own = os.environ.get(UNTRUSTED_DIR_ENV)
    return Path(own) if own else base() / "untrusted"


def roots() -> list[Path]:
    """Where this process may read entries, in order: its own root, then (for an untrusted run) the trusted one."""
    return [root(), base()] if untrusted() else [base()]


def find(relative: str | os.PathLike) -> Path | None:
    """The first existing ``<root>/<relative>`` among :func:`roots`, else None."""
    for r in roots():
        path = r / relative
        if path.exists():
            return path
    return None
