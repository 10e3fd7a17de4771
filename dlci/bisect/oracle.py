"""The bisection oracle: one run of a reproducer script in a given environment, turned into a verdict.

Exit 0 is *good*, exit 1 is *bad*, anything else skips the candidate with its reason (as ``git bisect run`` does with
125). Two refinements keep an environment problem from passing for the bug:

- a dlci reproducer (its source prints ``REPRODUCED``) is *bad* only when it exits 1 **and** printed that word; an exit
  1 without it is the script dying before its check (an import error, a missing API) and skips;
- a dlci crash reproducer that exits 0 because it met *a different error* skips: that release is broken otherwise,
  which is not the same as free of the bug;
- any script that dies of an uncaught ``ImportError``/``ModuleNotFoundError``/``SyntaxError`` (or an
  ``AttributeError`` on a module) skips: the candidate lacks something the script needs or does not even parse
  (a broken commit), which says nothing about the bug.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

GOOD, BAD, SKIP = "good", "bad", "skip"
SKIP_EXIT = 125  # git bisect run's "cannot test this one"
_ENV_TRACEBACK = re.compile(r"^(ImportError|ModuleNotFoundError|SyntaxError|IndentationError|"
                            r"AttributeError: module '[^']+' has no attribute)"
                            r"[^\n]*$", re.M)


@dataclass
class Verdict:
    candidate: str          # a version or a commit
    verdict: str            # good / bad / skip
    reason: str = ""        # why skipped, or the reproducer's last line
    exit_code: int | None = None
    seconds: float = 0.0
    commands: list[str] = field(default_factory=list)  # shell commands that reproduce this verdict by hand
    detail: dict = field(default_factory=dict)          # installs, environment, ...
    ran: bool = False                                    # the reproducer ran (not skipped before, not known)
    modules: list[str] | None = None                     # top-level modules the run imported (trace_imports)

    def to_dict(self) -> dict:
        return {"candidate": self.candidate, "verdict": self.verdict, "reason": self.reason,
                "exit_code": self.exit_code, "seconds": round(self.seconds, 2), "commands": self.commands,
                **self.detail}


def is_dlci_reproducer(script: Path) -> bool:
    try:
        return "REPRODUCED" in Path(script).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _first_line(text: str) -> str:
    return next((ln.strip()[:300] for ln in text.splitlines() if ln.strip()), "")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def classify(returncode: int, stdout: str, stderr: str, marker: bool) -> tuple[str, str]:
    """(verdict, reason) of one finished run; ``marker``: the script is a dlci reproducer."""
    if returncode == 0:
        if marker and "a different error" in stdout:
            # a crash reproducer that met another crash: the candidate is broken otherwise, not free of the bug
            return SKIP, f"fails differently: {_first_line(stdout)}"
        return GOOD, _last_line(stdout) or "exit 0"
    if returncode < 0:
        return SKIP, f"the reproducer died with signal {-returncode}"
    if returncode == 1:
        env_problem = _ENV_TRACEBACK.search(stderr[-4000:])
        if env_problem:
            return SKIP, f"the script cannot run here: {env_problem.group(0)[:300]}"
        if marker and "REPRODUCED" not in stdout:
            return SKIP, f"exit 1 before the reproducer's check: {_last_line(stderr) or _last_line(stdout)}"
        return BAD, _last_line(stdout) or _last_line(stderr) or "exit 1"
    return SKIP, f"exit {returncode}: {_last_line(stderr) or _last_line(stdout)}"


def _imports(stderr: str) -> tuple[str, list[str]]:
    """stderr without ``-X importtime``'s lines, and the top-level modules those lines name."""
    kept, modules = [], set()
    for line in stderr.splitlines(keepends=True):
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[-1].strip()
            if name and name != "imported package":
                modules.add(name.split(".")[0])
        else:
            kept.append(line)
    return "".join(kept), sorted(modules)


def run_script(script: Path, env: dict | None, candidate: str, python: str | None = None,
               timeout: float = 600, log: Path | None = None, trace_imports: bool = False) -> Verdict:
    """Run ``script`` alone (from its own folder, secrets scrubbed) with ``env`` merged over this environment.
    ``trace_imports``: note every module the run imported (``Verdict.modules``; python -X importtime, whose lines
    are taken out of stderr), so that a fresh venv can be given everything the script needed, optional companions
    it reaches only through another package included (onnxscript under torch.onnx.export)."""
    from dlci.exec import cancel
    from dlci.findings.repro import scrubbed_env
    script = Path(script).resolve()
    python = python or sys.executable
    t0 = time.monotonic()
    try:
        proc = cancel.run([python] + (["-X", "importtime"] if trace_imports else []) + [str(script)],
                          timeout=timeout, cwd=str(script.parent), env=scrubbed_env(env), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Verdict(candidate, SKIP, f"timed out after {timeout:.0f} s", None, time.monotonic() - t0, ran=True)
    stderr, modules = _imports(proc.stderr) if trace_imports else (proc.stderr, None)
    verdict, reason = classify(proc.returncode, proc.stdout, stderr, is_dlci_reproducer(script))
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-20000:]}\n--- stderr\n"
                       f"{stderr[-20000:]}", encoding="utf-8")
    return Verdict(candidate, verdict, reason, proc.returncode, time.monotonic() - t0, ran=True, modules=modules)


def run_command(env: dict | None, script: Path, python: str | None = None) -> str:
    """The shell line that runs ``script`` as :func:`run_script` does (only the variables dlci set)."""
    script = Path(script).resolve()
    parts = [f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items()]
    return f"cd {shlex.quote(str(script.parent))} && " + " ".join(
        parts + [shlex.quote(python or sys.executable), shlex.quote(str(script))])


def inherited(var: str) -> list[str]:
    return [p for p in os.environ.get(var, "").split(os.pathsep) if p]
