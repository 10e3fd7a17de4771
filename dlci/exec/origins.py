"""Where a worker imports a module from: a PR scan proves, in the very environment its tests run in, that the
converter files it traces are the checkout's files and not an installed copy (a scan of code that never ran is no
scan).

``module_for(rel, python_path)`` names the module a repository file is imported as under a revision's
``python_path``; ``where_from`` (a worker job) answers, per module, the file it resolves to or why it does not.
"""
from __future__ import annotations

import importlib.util
import posixpath
import os


def module_for(rel: str, python_path: list[str]) -> str | None:
    """The module ``rel`` (a repository-relative ``.py`` path) is imported as with ``python_path`` entries
    (repository-relative; "" is the root) first on the path; None when no entry holds it."""
    if not rel.endswith(".py"):
        return None
    for entry in sorted(python_path, key=len, reverse=True):
        entry = posixpath.normpath(entry.strip("/") or ".")  # ".", "./", "" are the root; "./python" is "python"
        prefix = "" if entry == "." else entry + "/"
        if rel.startswith(prefix):
            parts = rel[len(prefix):-3].split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts and all(p.isidentifier() for p in parts):
                return ".".join(parts)
    return None


def where_from(modules: list[str]) -> dict[str, str]:
    """Per module: the resolved path of the file it is imported from, or "error: ..."."""
    out = {}
    for name in modules:
        try:
            spec = importlib.util.find_spec(name)
        except Exception as e:  # noqa: BLE001 - a parent package that fails to import is the answer
            out[name] = f"error: {type(e).__name__}: {str(e)[:300]}"
            continue
        if spec is None or not spec.origin:
            out[name] = "error: not found"
        else:
            out[name] = os.path.realpath(spec.origin)
    return out


def ask(modules: list[str], env: dict, timeout: float = 300.0) -> dict[str, str]:
    """:func:`where_from` in a fresh interpreter started exactly as dlci's test workers are (``env``: the worker
    environment, dlci.exec.engine.worker_env), so the answer is the tests' own."""
    import json
    import subprocess

    from dlci.exec import interp
    proc = subprocess.run(interp.command("dlci.exec.origins", json.dumps(modules)), capture_output=True, text=True,
                          env=interp.env(env), cwd=interp.neutral_dir(), timeout=timeout, stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        return {m: f"error: the interpreter exited {proc.returncode}: {tail}" for m in modules}
    return json.loads(lines[-1])


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(where_from(json.loads(sys.argv[1]))))
