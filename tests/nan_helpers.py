"""Helpers shared by the dlci nan tests: program files written from source strings, their `# BUG` lines, one torch
thread while tiny programs run, and running a reproducer with dlci not importable."""
from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path


def bug_line(path: Path, function: str | None = None) -> int:
    """The 1-based line ending with `# BUG` in `function` (or the file's first one)."""
    lines = path.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"def {function}(")) if function else 0
    return next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("# BUG")) + 1


def write_program(tmp_path_factory, folder: str, name: str, source: str) -> Path:
    p = tmp_path_factory.mktemp(folder) / name
    p.write_text(source)
    return p


@contextlib.contextmanager
def one_torch_thread():
    """Tiny programs on a shared machine: more threads only add contention."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# runs a script as __main__ with every dlci import refused (the package is installed in this environment)
_NO_DLCI = """
import importlib.abc, runpy, sys
class NoDlci(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "dlci" or name.startswith("dlci."):
            raise ImportError("dlci is not importable in a reproducer")
sys.meta_path.insert(0, NoDlci())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_without_dlci(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _NO_DLCI, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=str(script.parent))
