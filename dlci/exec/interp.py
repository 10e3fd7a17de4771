"""How dlci starts a Python interpreter of its own (test workers, warm reproducer pools, device probes, the reducer's
introspection): ``command("dlci.exec.worker", ...)`` instead of ``python -m dlci.exec.worker``.

Such an interpreter runs with a pull request's paths on PYTHONPATH (its checkout's ``python/``, or the checkout's
root itself), and ``python -m`` also puts the working directory first. A PR that adds a top-level ``dlci/`` would
then replace dlci's own modules. So the interpreter starts from a fixed bootstrap: dlci is imported from the folder
this file belongs to, with that folder on ``sys.path`` only while it is imported (a dlci installed in site-packages
must not move site-packages ahead of the checkout: the PR's ``tvm`` must win over the installed one), and
``PYTHONSAFEPATH=1`` keeps the working directory off the path.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_BOOT = (
    "import sys\n"
    "root = sys.argv[1]\n"
    "sys.path.insert(0, root)\n"
    "import dlci\n"
    "sys.path.remove(root)\n"
    "if getattr(dlci, '__file__', '') and not dlci.__file__.startswith(root):\n"
    "    raise SystemExit(f'dlci bootstrap: imported {dlci.__file__}, expected one under {root}')\n"
    "sys.argv = sys.argv[2:]\n"
    "import runpy\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")


def command(module: str, *args: str, python: str | None = None) -> list[str]:
    """The command line that runs dlci's ``module`` as ``__main__`` with ``args``."""
    return [python or sys.executable, "-c", _BOOT, ROOT, module, *map(str, args)]


def env(base: dict | None = None) -> dict:
    """``base`` (default: this process's environment) with the working directory kept off ``sys.path``."""
    out = dict(os.environ if base is None else base)
    out["PYTHONSAFEPATH"] = "1"
    return out


_neutral: str | None = None


def neutral_dir() -> str:
    """An empty folder of this process's own, as the working directory of helper interpreters and commands that
    must not pick up whatever lies in the caller's working directory (in the action: the pull request's
    checkout); removed at exit."""
    global _neutral
    if _neutral is None or not os.path.isdir(_neutral):
        import atexit
        import shutil
        import tempfile
        _neutral = tempfile.mkdtemp(prefix="dlci-cwd-")
        atexit.register(shutil.rmtree, _neutral, True)
    return _neutral
