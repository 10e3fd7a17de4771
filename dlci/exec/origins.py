"""Where a worker imports a module from: a PR scan proves, in the very environment its tests run in, that the
converter files it traces are the checkout's files and not an installed copy (a scan of code that never ran is no
scan).

``module_for(rel, python_path)`` names the module a repository file is imported as under a revision's
``python_path``; ``where_from`` (a worker job) answers, per module, the file it resolves to or why it does not.

A package whose ``__init__`` fails because an *optional* dependency does not import (named in
``$DLCI_OPTIONAL_IMPORTS``, which a profile sets when its target loads the package without the modules that need it:
onnx2torch without torchvision) still has its files where they are: they are then located without running the
package's code.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import posixpath
import os

OPTIONAL_ENV = "DLCI_OPTIONAL_IMPORTS"  # comma-separated top-level modules whose import failure is tolerated


def optional_imports(always: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``always`` and the modules $DLCI_OPTIONAL_IMPORTS names."""
    named = [m.strip() for m in os.environ.get(OPTIONAL_ENV, "").split(",") if m.strip()]
    return tuple(dict.fromkeys([*always, *named]))


def failed_optional(exc: BaseException, optional: tuple[str, ...]) -> str | None:
    """The module of ``optional`` (a top-level name) whose import failure ``exc`` is, else None: an ImportError
    naming it, or an error raised while its code ran (a frame of it in a traceback of the exception's chain)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        names = [getattr(e, "name", None) or ""] if isinstance(e, ImportError) else []
        tb = e.__traceback__
        while tb is not None:
            names.append(tb.tb_frame.f_globals.get("__name__", "") or "")
            tb = tb.tb_next
        hit = next((n.split(".")[0] for n in names if n.split(".")[0] in optional), None)
        if hit:
            return hit
        e = e.__cause__ or e.__context__
    return None


def _located(name: str):
    """The spec of module ``name`` found along sys.path without importing any of its packages, or None."""
    parts = name.split(".")
    path, spec = None, None
    for i in range(len(parts)):
        if i and path is None:
            return None  # a parent that is not a package
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), path)
        if spec is None:
            return None
        path = spec.submodule_search_locations
    return spec


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
            spec = _located(name) if failed_optional(e, optional_imports()) else None
            if spec is None:
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


IMPORTED = "dlci: imported "  # what import_module prints once the import returned


def import_module(name: str, path: str) -> None:
    """Compile the file (a syntax error is said whatever its package does first), then import the module as the
    tests do, tolerating what an optional dependency's import breaks (``$DLCI_OPTIONAL_IMPORTS``); print
    :data:`IMPORTED` once the import returned. (dlci.scan.imports runs this in a fresh interpreter.)"""
    with open(path, "rb") as f:
        compile(f.read(), path, "exec")
    try:
        importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - the answer is the exception
        if not failed_optional(e, optional_imports()):
            raise
    print(IMPORTED + name, flush=True)


if __name__ == "__main__":
    import json
    import sys
    if sys.argv[1] == "--import":
        import_module(sys.argv[2], sys.argv[3])
    else:
        print(json.dumps(where_from(json.loads(sys.argv[1]))))
