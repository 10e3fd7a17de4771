"""The standalone source of rule functions, for reproducers that must not import dlci.

:func:`standalone_source` takes functions (or classes) defined at module level and returns their source plus the
source of every module-level name they use, followed through ``from module import name`` into the modules that
define them, transitively. Names that come from dlci, or from the package a given function lives in, are pasted as
source; the frameworks and the standard library stay imports. Only source text is read (no module is imported
for it beyond what locating a file needs), so rendering a torch rule's reproducer does not import torch.

What the rules' modules must look like for this (see dlci.rules.base): every pasted name is bound at module level by
exactly one statement (a def, a class, an assignment or an import), and no other module-level statement touches it.
Anything else is refused with an error naming the place, never pasted half right.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import symtable
import sys
from dataclasses import dataclass, field
from pathlib import Path


class SourceError(Exception):
    """A rule function whose source cannot be made standalone (the message says where and why)."""


@dataclass
class _Module:
    name: str
    path: str
    lines: list[str]
    binders: dict[str, list[ast.stmt]]  # name -> module-level statements binding it
    touched: set[str]                    # names used or changed by other module-level statements (loops, calls)
    is_package: bool


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        return [] if stmt.module == "__future__" else [a.asname or a.name for a in stmt.names]
    targets = stmt.targets if isinstance(stmt, ast.Assign) else \
        [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
    names = []
    for t in targets:
        for node in ([t] if isinstance(t, ast.Name) else t.elts if isinstance(t, (ast.Tuple, ast.List)) else [None]):
            if not isinstance(node, ast.Name):
                return []  # subscript / attribute targets change something, they bind nothing
            names.append(node.id)
    return names


@functools.lru_cache(maxsize=None)
def _module(name: str) -> _Module:
    loaded = getattr(sys.modules.get(name), "__file__", None)
    spec = None if loaded else importlib.util.find_spec(name)
    path = loaded or (spec.origin if spec else None)
    if not path or not path.endswith(".py"):
        raise SourceError(f"{name}: no Python source to paste")
    text = Path(path).read_text(encoding="utf-8")
    tree = ast.parse(text, path)
    binders: dict[str, list[ast.stmt]] = {}
    touched: set[str] = set()
    for stmt in tree.body:
        names = _bound_names(stmt)
        for n in names:
            binders.setdefault(n, []).append(stmt)
        if not names and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)) \
                and not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            touched |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return _Module(name, path, text.splitlines(), binders, touched, is_package=Path(path).name == "__init__.py")


def _absolute(mod: _Module, stmt: ast.ImportFrom) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = mod.name.split(".")
    parts = parts if mod.is_package else parts[:-1]
    parts = parts[:len(parts) - (stmt.level - 1)]
    return ".".join(parts + ([stmt.module] if stmt.module else []))


def _text(mod: _Module, stmt: ast.stmt) -> str:
    """The statement's lines, with its decorators and the comment lines right above it."""
    start = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])]) - 1
    while start > 0 and mod.lines[start - 1].lstrip().startswith("#") and not mod.lines[start - 1].startswith(" "):
        start -= 1
    return "\n".join(mod.lines[start:stmt.end_lineno])


def _globals_used(text: str) -> set[str]:
    """Global names a module-level statement reads (annotations excepted: the reproducer does not evaluate them)."""
    table = symtable.symtable("from __future__ import annotations\n" + text, "<rule>", "exec")
    out, stack = set(), [table]
    while stack:
        t = stack.pop()
        out |= {s.get_name() for s in t.get_symbols() if s.is_global() and s.is_referenced()}
        stack.extend(t.get_children())
    return out


@dataclass
class Bundle:
    imports: list[str] = field(default_factory=list)  # import lines, each once
    code: str = ""                                    # the pasted definitions, dependencies first
    modules: list[str] = field(default_factory=list)  # the modules it pastes from, in order


def _location(obj) -> tuple[str, str]:
    if isinstance(obj, str):
        module, _, name = obj.partition(":")
        return module, name
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    if not module or "." in name or "<" in name:
        raise SourceError(f"{obj!r}: rule functions must be module-level defs")
    return module, name


def standalone_source(*objs) -> Bundle:
    """The standalone source of module-level functions/classes (or ``"module:name"`` paths) and of what they use."""
    starts = [_location(o) for o in objs]
    roots = {"dlci"} | {m.split(".")[0] for m, _ in starts}
    chosen: dict[tuple[str, int], ast.stmt] = {}   # (module, line) -> statement to paste
    imports: dict[str, str] = {}                    # bound name -> import line
    owner: dict[str, str] = {}                      # bound name -> the statement or import binding it (clashes)
    deps: dict[str, set[str]] = {}                  # module -> modules its pasted statements use

    def claim(name: str, what) -> None:
        if owner.setdefault(name, what) != what:
            raise SourceError(f"name clash in the reproducer: {name!r} is bound by {owner[name]} and by {what}")

    def need(module: str, name: str, user: str) -> str | None:
        """Paste (or import) what ``name`` is in ``module``; the module it comes from when pasted."""
        mod = _module(module)
        stmts = mod.binders.get(name, [])
        if not stmts:
            if hasattr(builtins, name):
                return None
            raise SourceError(f"{module}: {user} uses {name!r}, which the module does not define")
        if all(isinstance(s, ast.Import) for s in stmts):
            aliases = [a for s in stmts for a in s.names if (a.asname or a.name.split(".")[0]) == name]
            if any(a.name.split(".")[0] in roots for a in aliases):
                raise SourceError(f"{module}: 'import {aliases[0].name}': use 'from ... import <name>' so that the "
                                  "reproducer can paste the name")
            if len(aliases) == 1 and aliases[0].asname:
                line = f"import {aliases[0].name} as {name}"
                imports[name] = line
                claim(name, line)
            else:  # `import torch` and `import torch._dynamo` both bind `torch`: keep each
                if any(a.asname for a in aliases):
                    raise SourceError(f"{module}: {name!r} is bound by several imports")
                imports.update({f"{name}:{a.name}": f"import {a.name}" for a in aliases})
                claim(name, f"import {name}")
            return None
        if len(stmts) > 1 or name in mod.touched:
            raise SourceError(f"{module}: {name!r} (used by {user}) is bound or changed by more than one "
                              "module-level statement; define it in one")
        stmt = stmts[0]
        if isinstance(stmt, ast.ImportFrom):
            source = _absolute(mod, stmt)
            alias = next(a for a in stmt.names if (a.asname or a.name) == name)
            if source.split(".")[0] in roots:
                if alias.asname and alias.asname != alias.name:
                    raise SourceError(f"{module}: 'from {source} import {alias.name} as {alias.asname}': import "
                                      "pasted names under their own name")
                return need(source, alias.name, user)
            line = f"from {source} import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
            imports[name] = line
            claim(name, line)
            return None
        key = (module, stmt.lineno)
        for bound in _bound_names(stmt):
            claim(bound, f"{module}:{stmt.lineno}")
        if key not in chosen:
            chosen[key] = stmt
            for used in sorted(_globals_used(_text(mod, stmt)) - set(_bound_names(stmt))):
                origin = need(module, used, name)
                if origin and origin != module:
                    deps.setdefault(module, set()).add(origin)
        return module

    for module, name in starts:
        need(module, name, f"{module}:{name}")

    order: list[str] = []

    def visit(module: str, path: tuple[str, ...] = ()) -> None:
        if module in order or module in path:
            return
        for d in sorted(deps.get(module, ())):
            visit(d, path + (module,))
        order.append(module)

    for module in dict.fromkeys(m for m, _ in chosen):
        visit(module)
    pieces = []
    order = [m for m in order if any(m == c for c, _ in chosen)]
    for module in order:
        mod = _module(module)
        stmts = sorted((s for (m, _), s in chosen.items() if m == module), key=lambda s: s.lineno)
        block = f"# -- {module}\n"
        for i, stmt in enumerate(stmts):
            spaced = isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or \
                (i and isinstance(stmts[i - 1], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
            block += ("\n\n" if i and spaced else "") + _text(mod, stmt) + "\n"
        pieces.append(block)
    lines = sorted(set(imports.values()), key=lambda ln: (ln.startswith("from "), ln))
    return Bundle(imports=lines, code="\n\n".join(pieces), modules=order)
