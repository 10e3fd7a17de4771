"""Does each changed converter file still import? Code at module level runs before any converter does: a file that
no longer parses, raises while it is imported, ends the process (an ``exit()`` left in) or never returns from its
import breaks every operator it registers, whatever the operators' tests would have said. (One real torchlib pull
request left a test call and ``exit(0)`` at the top of its core file: every export then silently ended the process.)

Each changed converter file is imported in a fresh interpreter started as the test workers are, once and, where it
fails, once more (confirmation); a file that fails at head is then imported at base. What fails at head and imports
at base is a finding new in the pull request for every operator the file maps at base, with a standalone reproducer
that imports the module.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from dlci.findings import Finding

IMPORT_TIMEOUT = 45.0  # seconds an import may take before it counts as never returning (torch + tvm: ~5 s)


@dataclass(frozen=True)
class ImportResult:
    file: str
    module: str
    state: str      # ok | raises | exits | hangs
    detail: str     # what went wrong, in one line
    log: str = ""   # the interpreter's output, last part

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def symptom(self) -> str:
        return {"raises": f"importing {self.module} raises {self.detail}",
                "exits": f"importing {self.module} ends the process ({self.detail})",
                "hangs": f"importing {self.module} does not return ({self.detail})"}.get(self.state, "imports")


def import_once(module: str, file: str, env: dict, timeout: float = IMPORT_TIMEOUT, path: str | None = None) -> ImportResult:
    """Import ``module`` (its file compiled first: ``path``, else ``file``) in a fresh interpreter started as the
    test workers are, with the revision's environment ``env`` (dlci.exec.origins.import_module)."""
    from dlci.exec import cancel, interp
    from dlci.exec.engine import worker_env
    from dlci.exec.origins import IMPORTED
    try:   # cancel.run: a process the imported code leaves behind does not hold the result up
        proc = cancel.run(interp.command("dlci.exec.origins", "--import", module, path or file),
                          timeout=timeout, env=interp.env(worker_env(env)), cwd=interp.neutral_dir(),
                          stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return ImportResult(file, module, "hangs", f"no return within {timeout:.0f} s",
                            ((e.output or "") + (e.stderr or ""))[-4000:])
    text = proc.stdout + proc.stderr
    if proc.returncode == 0 and f"{IMPORTED}{module}" in text:
        return ImportResult(file, module, "ok", "")
    if proc.returncode == 0 or "Traceback (most recent call last)" not in text:
        return ImportResult(file, module, "exits", f"exit code {proc.returncode} during the import", text[-4000:])
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    return ImportResult(file, module, "raises", last[:300], text[-4000:])


def runs_at_import(text: str, changed: set[int]) -> bool:
    """Whether a changed line of a Python file's head ``text`` runs when the file is imported: anything outside a
    function's body (module level, class bodies, decorators, signatures and their defaults), or a file that no longer
    parses. A change inside function bodies only cannot break the import: no interpreter is started for it."""
    import ast
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return True
    bodies = [(n.body[0].lineno, n.end_lineno or n.body[0].lineno) for n in ast.walk(tree)
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and isinstance(n.body, list)
              and n.body]
    return any(not any(lo <= line <= hi for lo, hi in bodies) for line in changed)


def check(root: Path, files: list[str], python_path: list[str], env: dict,
          confirm: bool = True) -> dict[str, ImportResult]:
    """Per changed file of the checkout at ``root``, the module it is imported as (files no python_path entry holds
    are left out): its result, a failure confirmed by a second import that fails the same way (else the file counts
    as importing)."""
    from dlci.exec.origins import module_for
    results = {}
    for rel in files:
        module = module_for(rel, python_path)
        if module is None:
            continue
        path = str(Path(root) / rel)
        first = import_once(module, rel, env, path=path)
        if not first.ok and confirm:
            again = import_once(module, rel, env, path=path)
            if (again.state, again.detail) != (first.state, first.detail):
                first = ImportResult(rel, module, "ok", "")
        results[rel] = first
    return results


REPRO = '''#!/usr/bin/env python3
"""dlci reproducer {id}: {symptom} ({file}) on the pull request's head revision; on the base revision it imports.

Run it with the revision's package first on PYTHONPATH (report.md says how for each revision). Exits 1 while the
import does not return normally, 0 once it does; prints what it saw."""
import subprocess
import sys

MODULE = "{module}"
TIMEOUT = {timeout}
PROBE = "import importlib, sys; importlib.import_module(sys.argv[1]); print('imported ' + sys.argv[1], flush=True)"
try:
    proc = subprocess.run([sys.executable, "-c", PROBE, MODULE], capture_output=True, text=True, timeout=TIMEOUT)
except subprocess.TimeoutExpired:
    print(f"import {{MODULE}}: no return within {{TIMEOUT}} s")
    sys.exit(1)
returned = proc.returncode == 0 and f"imported {{MODULE}}" in proc.stdout
print(f"import {{MODULE}}: exit code {{proc.returncode}}, " + ("returned" if returned else "did not return normally"))
if not returned:
    print((proc.stdout + proc.stderr)[-3000:])
sys.exit(0 if returned else 1)
'''


def findings(broken: list[ImportResult], mapped: dict[str, list], targets: list[str]) -> list[Finding]:
    """One finding per broken file, new in the pull request, for every operator the file maps at base
    (``mapped``: file -> dlci.profiles Touch list); ``targets``: the targets of this scan, the first one the
    file's operators reach is the finding's target, the others are listed."""
    out = []
    for r in broken:
        touches = mapped.get(r.file) or []
        reached = [t for t in dict.fromkeys(x for t in touches for x in t.targets)]
        mine = [t for t in reached if t in targets] or reached or targets or ["python"]
        operators = sorted({t.operator for t in touches}) or [r.module]
        out.append(Finding(
            id="", oracle="crash", operator=operators[0], target=mine[0], target_version="", symptom=r.symptom(),
            stage="import", signature=f"import:{r.module}:{r.state}", message=f"{r.symptom()}\n{r.log}".strip(),
            instance_id="", origin={"source": "import", "file": r.file, "module": r.module},
            operators=operators, also_in=mine[1:], new_in_pr=True,
            base={"status": "pass", "symptom": f"{r.module} imports on the base revision"}, confirmed=True,
            extra={"import": {"file": r.file, "module": r.module, "state": r.state, "detail": r.detail}}))
    return out


def write_reproducers(found: list[Finding], out: Path, head_env: dict, base_env: dict | None) -> None:
    """Each import finding's reproducer, checked alone against head (must fail) and base (should pass)."""
    from dlci.exec import cancel, interp
    from dlci.exec.engine import worker_env
    (out / "repro").mkdir(parents=True, exist_ok=True)
    for f in found:
        info = f.extra["import"]
        rel = f"repro/{f.id}_import_{info['module'].replace('.', '_')}.py"
        (out / rel).write_text(REPRO.format(id=f.id, symptom=f.symptom, file=info["file"], module=info["module"],
                                            timeout=int(IMPORT_TIMEOUT)), encoding="utf-8")
        f.repro = rel

        def exit_code(env: dict) -> int | None:
            try:
                return cancel.run([sys.executable, str((out / rel).resolve())], env=interp.env(worker_env(env)),
                                  cwd=interp.neutral_dir(), timeout=IMPORT_TIMEOUT + 30).returncode
            except subprocess.TimeoutExpired:
                return None
        f.repro_checked = exit_code(head_env) == 1
        if base_env is not None:
            f.repro_passes_on_base = exit_code(base_env) == 0
