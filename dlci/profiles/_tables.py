"""Shared helpers for profiles that read a repository's own operator tables.

* C++ text: comments and string contents blanked with offsets and lines kept, balanced-bracket and top-level-comma
  scanning, brace-initialiser tables (``{"aten::elu", op::translate_elu},``), macro invocations
  (``ONNX_OP("Elu", OPSET_SINCE(1), ai_onnx::opset_1::elu);``) and function-like ``#define`` expansion.
* Python text: decorated definitions (``@torch_op("aten::elu")``, ``@tf_op(["Relu6"])``) and call references, by ast.
  Changed Python code is mapped to top-level defs with ast on both revisions (:func:`py_changed`): a def is the
  same def at base and head by name, or, for names defined many times (onnx2torch's ``def _``), by name and the
  operators it registers, so deleting one of them reports that one and not its neighbour.
* Selection: :class:`Entry` (one table row: an operator, where it is declared, what converter code it names) and
  :class:`Selector`, which turns a PR's changed regions into :class:`~dlci.profiles.base.Touch` records: a changed
  table row selects itself; a changed function selects the rows that name it; a changed helper selects the rows
  whose converters call it (callers found by ``git grep -w`` at the same revision, up to a few levels); what
  reaches no row is reported as unmapped.
"""
from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from dlci.diff.regions import blank_cpp as _blank_cpp
from dlci.profiles.base import SMOKE, ProfileResult, Touch

IDENT = re.compile(r"[A-Za-z_]\w*")

# ---------------------------------------------------------------------------------------------------------------
# C++ text
# ---------------------------------------------------------------------------------------------------------------

def blank_cpp(text: str, strings: bool = False) -> str:
    """``text`` with comments (and, if ``strings``, the contents of string/char literals) replaced by spaces
    (dlci.diff.regions.blank_cpp; preprocessor lines kept: ``#define`` bodies are read apart)."""
    return _blank_cpp(text, strings="contents" if strings else "keep")


_PAIRS = {"(": ")", "[": "]", "{": "}"}


def matching(text: str, i: int) -> int:
    """Index of the bracket closing ``text[i]`` (one of ``([{``) in comment/string-blanked ``text``; -1 if none."""
    stack = [_PAIRS[text[i]]]
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c in _PAIRS:
            stack.append(_PAIRS[c])
        elif c in ")]}":
            if c != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
        j += 1
    return -1


def split_top(s: str) -> list[str]:
    """Split ``s`` at commas outside brackets, template angle brackets and string literals."""
    parts, depth, angle, cur = [], 0, 0, []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in "\"'":
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            cur.append(s[i:j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<" and i > 0 and (s[i - 1].isalnum() or s[i - 1] in "_>: ") and s[i - 1:i + 1] != "<<":
            prev = s[:i].rstrip()
            if prev and (prev[-1].isalnum() or prev[-1] == "_"):
                angle += 1
        elif c == ">" and angle and s[i - 1] != "-":
            angle -= 1
        if c == "," and depth == 0 and angle == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    tail = "".join(cur).strip()
    if tail or parts:
        parts.append(tail)
    return parts


def line_starts(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())
    return starts


def line_of(starts: list[int], offset: int) -> int:
    """1-based line of ``offset`` given :func:`line_starts`."""
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def unquote(s: str) -> str | None:
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] == '"':
        return s[1:-1]
    return None


@dataclass(frozen=True)
class Call:
    """A macro or function invocation ``NAME(args)`` found in C++ text."""
    name: str
    args: tuple[str, ...]   # top-level arguments, comments removed, strings kept
    start: int              # offset of NAME
    end: int                # offset just past ")"
    line: int
    end_line: int


def calls(text: str, names: Iterable[str], *, blanked: str | None = None, skip_defines: bool = True) -> list[Call]:
    """Invocations of any of ``names`` (word-bounded) outside comments and strings; ``#define`` bodies skipped
    unless ``skip_defines`` is False."""
    names = sorted(set(names), key=len, reverse=True)
    if not names:
        return []
    code = blank_cpp(text) if blanked is None else blanked
    masked = blank_cpp(code, strings=True)
    if skip_defines:
        masked = _blank_defines(masked)
    starts = line_starts(text)
    pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\s*\(")
    out = []
    for m in pat.finditer(masked):
        open_at = m.end() - 1
        close = matching(masked, open_at)
        if close < 0:
            continue
        args = tuple(split_top(code[open_at + 1:close]))
        out.append(Call(m.group(1), args, m.start(), close + 1, line_of(starts, m.start()), line_of(starts, close)))
    return out


def _blank_defines(masked: str) -> str:
    out = list(masked)
    for m in re.finditer(r"(?m)^[ \t]*#[ \t]*define\b", masked):
        j = m.start()
        while j < len(masked):
            k = masked.find("\n", j)
            k = len(masked) if k < 0 else k
            seg_end = k
            for p in range(j, seg_end):
                out[p] = " "
            if masked[j:k].rstrip().endswith("\\") and k < len(masked):
                j = k + 1
                continue
            break
    return "".join(out)


@dataclass(frozen=True)
class Define:
    name: str
    params: tuple[str, ...]
    body: str
    line: int       # first line of the #define
    end: int        # last line (continuations included)


def defines(text: str) -> dict[str, Define]:
    """Function-like ``#define NAME(params) body`` macros of ``text`` (continuation lines joined)."""
    code = blank_cpp(text)
    out = {}
    lines = code.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)\(([^)]*)\)(.*)", lines[i])
        if not m:
            i += 1
            continue
        start = i + 1
        body = [m.group(3)]
        while body[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            body[-1] = body[-1].rstrip()[:-1]
            i += 1
            body.append(lines[i])
        if body[-1].rstrip().endswith("\\"):
            body[-1] = body[-1].rstrip()[:-1]
        params = tuple(p.strip() for p in m.group(2).split(",") if p.strip())
        out[m.group(1)] = Define(m.group(1), params, " ".join(b.strip() for b in body), start, i + 1)
        i += 1
    return out


def expand(define: Define, args: tuple[str, ...]) -> str:
    """Substitute ``args`` for ``define``'s parameters (``#x`` stringifies, ``a##b`` pastes)."""
    body = define.body
    mapping = dict(zip(define.params, args))
    if "__VA_ARGS__" not in mapping and define.params and define.params[-1] == "...":
        mapping["__VA_ARGS__"] = ", ".join(args[len(define.params) - 1:])

    def sub(m):
        word = m.group(2)
        if word in mapping:
            return f'"{mapping[word]}"' if m.group(1) else mapping[word]
        return m.group(0)
    body = re.sub(r"(#)?\b([A-Za-z_]\w*)\b", lambda m: sub(m) if m.group(1) is None or m.group(2) in mapping
                  else m.group(0), body)
    return re.sub(r"\s*##\s*", "", body)


def brace_entries(text: str, function: str) -> list[tuple[str, str, int, int]]:
    """Rows ``{"key", expr}`` of the brace-initialised table returned by C++ function ``function`` (e.g.
    ``get_supported_ops_ts``): (key, expr, first line, last line). Rows commented out are not rows."""
    code = blank_cpp(text)
    masked = blank_cpp(code, strings=True)
    m = re.search(r"\b" + re.escape(function) + r"\s*\([^)]*\)\s*(?:const\s*)?\{", masked)
    if not m:
        return []
    body_open = m.end() - 1
    body_close = matching(masked, body_open)
    if body_close < 0:
        return []
    starts = line_starts(text)
    out = []
    # the table: the first brace list after `return` (or the body itself when written as `= {`)
    r = re.search(r"\breturn\s*\{|=\s*\{", masked[body_open:body_close])
    if not r:
        return []
    t_open = body_open + r.end() - 1
    t_close = matching(masked, t_open)
    i = t_open + 1
    while 0 <= i < t_close:
        j = masked.find("{", i, t_close)
        if j < 0:
            break
        k = matching(masked, j)
        if k < 0:
            break
        parts = split_top(code[j + 1:k])
        if len(parts) >= 2:
            key = unquote(parts[0])
            if key is not None:
                out.append((key, ", ".join(parts[1:]), line_of(starts, j), line_of(starts, k)))
        i = k + 1
    return out


_NAMESPACES = frozenset({"ov", "frontend", "pytorch", "tensorflow", "tensorflow_lite", "tflite", "onnx", "op", "std",
                         "common_translators", "CreatorFunction", "ai_onnx", "com_microsoft", "detail", "ngraph",
                         "onnx_import", "OutputVector", "NodeContext", "const", "auto", "return", "true", "false",
                         "float", "double", "int", "bool", "int32_t", "int64_t", "uint8_t", "int8_t"})


def cpp_refs(expr: str) -> frozenset[str]:
    """Identifiers in a table expression that may name converter code (namespaces and opset qualifiers dropped)."""
    return frozenset(w for w in IDENT.findall(blank_cpp(expr, strings=True))
                     if w not in _NAMESPACES and not re.fullmatch(r"(opset|set_|opset_|v)\d+", w))


def compact(expr: str) -> str:
    """A table expression as a reader names the converter: namespace qualifiers of the frontend dropped."""
    s = re.sub(r"\b(?:ov|frontend|pytorch|tensorflow|tensorflow_lite|op|common_translators)::", "", expr)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"^CreatorFunction\((.*)\)$", r"\1", s)
    return s[:160]


def region_names(name: str) -> list[str]:
    """Identifiers a region name can be referenced by, innermost first: ``Cls::method`` / ``Cls.method`` -> method,
    Cls; ``foo<T>`` -> foo; ``operator()`` is skipped (its class stands for it)."""
    plain = re.sub(r"<[^<>]*>", "", re.sub(r"<[^<>]*>", "", name))
    parts = [p for p in re.split(r"::|\.", plain) if p]
    out = []
    for p in reversed(parts):
        if IDENT.fullmatch(p.strip()) and not p.startswith("operator") and p not in out:
            out.append(p)
    return out


_CPP_MACRO_DEF = re.compile(r"([A-Z][A-Z0-9_]*)\(\s*([A-Za-z_]\w*)")


def cpp_names(region, text: str | None = None) -> list[str]:
    """Names a C++ region (from :func:`dlci.diff.regions.regions`) is referenced by, innermost first:
    ``translate_elu``; ``Elu::Compute`` -> Compute, Elu; ``Elu::operator()`` -> Elu. A macro-defined function
    (``TEST(A, B)``) is named by the macro's first argument. Table rows and macro statements (kind ``entry``) are
    not code: no names."""
    if region.kind == "entry":
        return []
    last = region.name.split("::")[-1]
    m = _CPP_MACRO_DEF.match(last) if "(" in last and not last.startswith("operator") else None
    if m:
        return [m.group(2)]
    return region_names(region.name)


# ---------------------------------------------------------------------------------------------------------------
# git grep (callers at one revision)
# ---------------------------------------------------------------------------------------------------------------

def rev_sha(repo, rev: str) -> str:
    return {"head": repo.head, "base": repo.base}.get(rev, rev)


def grep_words(repo, rev: str, words: Iterable[str], pathspecs: Iterable[str]) -> dict[str, list[int]]:
    """Files (at ``rev``) under ``pathspecs`` mentioning any of ``words`` as a whole word: path -> line numbers.
    Uses ``git grep`` on the tree (no checkout needed); falls back to reading files through ``repo``."""
    words = sorted(set(w for w in words if w))
    pathspecs = list(pathspecs)
    if not words or not pathspecs:
        return {}
    sha = rev_sha(repo, rev)
    from dlci.diff import git
    cmd = git.command(["-C", str(repo.path), "grep", "-z", "-n", "-I", "-w", "-F", "--no-color"],
                      config=("grep.column=false", "grep.fullName=false", "grep.patternType=fixed"))
    for w in words:
        cmd += ["-e", w]
    cmd += [sha, "--", *pathspecs]
    try:
        proc = subprocess.run(cmd, capture_output=True, env=git.env(), timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        proc = None
    out: dict[str, list[int]] = {}
    if proc is not None and proc.returncode in (0, 1):
        prefix = sha + ":"
        for rec in proc.stdout.decode("utf-8", "replace").split("\n"):
            bits = rec.split("\0")
            if len(bits) < 3:
                continue
            path = bits[0][len(prefix):] if bits[0].startswith(prefix) else bits[0]
            try:
                out.setdefault(path, []).append(int(bits[1]))
            except ValueError:
                continue
        return out
    # fallback: scan through the repo object
    import fnmatch
    pat = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b")
    for path in repo.files(rev):
        if not any(fnmatch.fnmatch(path, p if any(ch in p for ch in "*?[") else p.rstrip("/") + "/*")
                   for p in pathspecs):
            continue
        text = repo.text(path, rev)
        if text is None:
            continue
        lines = [i + 1 for i, ln in enumerate(text.split("\n")) if pat.search(ln)]
        if lines:
            out[path] = lines
    return out


# ---------------------------------------------------------------------------------------------------------------
# Python text
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class PyDef:
    """A top-level function or class (methods of a class are folded into it), or a method when ``parent`` is set."""
    name: str
    kind: str                  # "function" | "class"
    start: int                 # first decorator line
    end: int
    node: ast.AST
    parent: str | None = None
    decorators: list = field(default_factory=list)
    refs: set = field(default_factory=set)   # names and attribute names used in the body (not the decorators)
    key: str = ""              # the name, or "name@line" when the file defines the name more than once (``def _``)


def py_defs(text: str, methods: bool = False) -> list[PyDef] | None:
    """Top-level ``def``/``class`` (plus their methods when ``methods``) of a Python file; None if it does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    out = []
    for node in _toplevel(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            d = PyDef(node.name, "class" if isinstance(node, ast.ClassDef) else "function",
                      min([node.lineno] + [x.lineno for x in node.decorator_list]), node.end_lineno, node,
                      decorators=list(node.decorator_list), refs=body_refs(node))
            out.append(d)
            if methods and isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.append(PyDef(item.name, "function",
                                         min([item.lineno] + [x.lineno for x in item.decorator_list]),
                                         item.end_lineno, item, parent=node.name,
                                         decorators=list(item.decorator_list), refs=body_refs(item)))
    counts: dict[str, int] = {}
    for d in out:
        if d.parent is None:
            counts[d.name] = counts.get(d.name, 0) + 1
    for d in out:
        d.key = d.name if d.parent is not None or counts[d.name] == 1 else f"{d.name}@{d.start}"
    return out


def _toplevel(body):
    """Module-level statements, looking inside ``if``/``try``/``with`` blocks (``if TYPE_CHECKING``, guarded defs)."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _toplevel(node.body)
            yield from _toplevel(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _toplevel(node.body)
            for h in node.handlers:
                yield from _toplevel(h.body)
            yield from _toplevel(node.orelse)
            yield from _toplevel(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _toplevel(node.body)
        else:
            yield node


def module_statements(text: str) -> list[ast.stmt] | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    return [n for n in _toplevel(tree.body)
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))]


def body_refs(node: ast.AST) -> set[str]:
    """What a def/class body (and a class's bases) references, decorators excluded: bare names, ``self.x`` /
    ``cls.x`` / ``super().x`` attributes as ``x``, and ``mod.x`` attributes on a bare name as ``"mod.x"`` (so a
    call to ``torch.nn.functional.softplus`` is not a call to a local ``softplus``)."""
    refs = set()
    body = getattr(node, "body", [])
    extra = list(getattr(node, "bases", []))
    for part in list(body) + extra:
        for sub in ast.walk(part):
            if isinstance(sub, ast.Name):
                refs.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                base = sub.value
                if isinstance(base, ast.Name):
                    refs.add(sub.attr if base.id in ("self", "cls") else f"{base.id}.{sub.attr}")
                elif isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
                    refs.add(sub.attr)
    return refs


def directly_in(folder: str) -> Callable[[str], bool]:
    """Predicate: a .py file directly inside ``folder`` (not in a subfolder): where a project keeps its converters."""
    def test(path: str) -> bool:
        return path.startswith(folder + "/") and path.endswith(".py") and "/" not in path[len(folder) + 1:]
    return test


def module_stem(path: str) -> str:
    """How other modules refer to ``path``: ``tf2onnx/onnx_opset/common.py`` -> common; a package's
    ``__init__.py`` -> the package name."""
    parts = path.rsplit("/", 2)
    stem = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
    return parts[-2] if stem == "__init__" and len(parts) >= 2 else stem


def call_name(node: ast.AST) -> str | None:
    """``torch_op`` for ``@torch_op(...)``, ``@x.torch_op(...)``; ``py_impl`` for ``@aten.x.default.py_impl(...)``."""
    f = node.func if isinstance(node, ast.Call) else node
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def strings_in(node: ast.AST) -> list[str]:
    """String constants of ``node`` when it is a string or a list/tuple/set of them (in order)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [s for e in node.elts for s in strings_in(e)]
    return []


def dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def torch_ops_in(node: ast.AST) -> list[tuple[str, str]]:
    """Operator overloads named in ``node``: ``aten.softplus`` -> ("softplus", "aten"), ``aten.add.Tensor`` ->
    ("add.Tensor", "aten"), ``torch.ops.aten.x.default`` -> ("x.default", "aten"), ``prims.abs`` -> ("abs", "prims");
    lists and tuples of those. Other expressions yield nothing."""
    out = []
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        for e in node.elts:
            out += torch_ops_in(e)
        return out
    if isinstance(node, ast.Starred):
        return torch_ops_in(node.value)
    d = dotted(node)
    if not d:
        return out
    parts = d.split(".")
    if parts[:2] == ["torch", "ops"] and len(parts) >= 4:
        ns, rest = parts[2], parts[3:]
    elif parts[0] in ("aten", "prims", "quantized", "inductor_prims") and len(parts) >= 2:
        ns, rest = parts[0], parts[1:]
    else:
        return out
    if rest and rest[-1] in ("py_impl", "default_overload") and len(rest) > 1:
        rest = rest[:-1]
    if 1 <= len(rest) <= 2:
        out.append((".".join(rest), "aten" if ns == "aten" else ns))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One row of a repository's operator table."""
    operator: str                 # as the table names it
    namespace: str
    file: str                     # where the row is declared
    start: int
    end: int
    refs: frozenset               # identifiers of the converter code the row names
    converter: str                # readable converter ("translate_elu", "inplace_op<translate_elu>")
    targets: tuple[str, ...] = ()
    table: str = "table entry"    # how a changed row is described ("op table entry", "kernel registration")

    def covers(self, file: str, line: int) -> bool:
        return file == self.file and self.start <= line <= self.end


@dataclass
class Changed:
    """A changed piece of converter code on one side: a region (function/class) or a loose line."""
    file: str
    line: int                     # first changed line inside it (side coordinates)
    names: list[str]              # identifiers it can be called by (empty for a loose line)
    label: str                    # region name for reports ("translate_elu", "<module>")
    side: str                     # "head" | "base"


def changed_regions(repo, change, side: str, *, skip: Callable[[int], bool] = lambda ln: False,
                    names_of: Callable | None = None) -> list[Changed]:
    """The changed regions of ``change`` on ``side`` (via :func:`dlci.diff.regions.touched`), each with the names
    it is referenced by. ``skip(line)`` drops lines that a table row accounts for; a region all of whose changed
    lines are skipped is dropped."""
    from dlci.diff.regions import touched
    head_text = repo.text(change.path, "head") if change.status != "deleted" else None
    base_text = repo.text(change.old_path, "base") if change.old_path else None
    text = head_text if side == "head" else base_text
    file = change.path if side == "head" else (change.old_path or change.path)
    lines = sorted(change.touched_head_lines()) if side == "head" else list(change.removed)
    # a changed line that is only a comment or blank does not change behaviour (deletion points still count)
    real = set(change.added) if side == "head" else set(change.removed)
    lines = [ln for ln in lines if ln not in real or _meaningful(text, ln, loose=False)]
    out = []
    for tr in touched(change, head_text, base_text):
        if tr.side != side:
            continue
        if tr.region is None:
            if not skip(tr.line) and _meaningful(text, tr.line):
                out.append(Changed(file, tr.line, [], "<module>", side))
            continue
        rest = [ln for ln in lines if tr.region.start <= ln <= tr.region.end and not skip(ln)]
        if side == "base" and not rest and not any(tr.region.start <= ln <= tr.region.end for ln in lines):
            rest = [tr.line]
        if not rest:
            continue
        names = names_of(tr.region, text) if names_of else region_names(tr.region.name)
        out.append(Changed(file, rest[0], names, tr.region.name, side))
    return out


def _meaningful(text: str | None, line: int, loose: bool = True) -> bool:
    """A changed line worth reporting: not blank, not a comment; for a loose line (outside any definition) also not
    an include/import or a lone brace."""
    if text is None:
        return True
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return False
    s = lines[line - 1].strip()
    if not s or s.startswith(("//", "/*", "* ", "*/", "# ")) or s in ("#", "*"):
        return False
    return not loose or not s.startswith(("#include", "import ", "from ", "}", "{", "#pragma"))


@dataclass
class Selector:
    """Accumulates touches and unmapped changes for one profile run."""
    profile: str
    result: ProfileResult = field(default_factory=ProfileResult)
    _seen: set = field(default_factory=set)

    def touch(self, entry: Entry, file: str, line: int, why: str, converter: str | None = None,
              targets: tuple[str, ...] | None = None) -> None:
        t = Touch(operator=entry.operator, namespace=entry.namespace, converter=converter or entry.converter,
                  file=file, line=line, why=why, targets=entry.targets if targets is None else targets,
                  profile=self.profile)
        key = (t.operator, t.namespace, t.converter, t.file, t.line, t.targets)
        if key not in self._seen:
            self._seen.add(key)
            self.result.touches.append(t)

    def unmapped(self, file: str, line: int, region: str | None, why: str) -> None:
        key = ("unmapped", file, region, line)
        if key not in self._seen:
            self._seen.add(key)
            self.result.unmapped.append({"file": file, "line": line, "region": region, "why": why})


def _row_key(e: Entry) -> tuple:
    return e.operator, e.table, e.targets


def table_rows_changed(sel: Selector, change, side: str, entries: list[Entry], removed_keys: set | None = None,
                       why: str | None = None, key: Callable[[Entry], tuple] = _row_key) -> set[int]:
    """Touch every row of ``entries`` (declared in ``change``'s file on ``side``) that a changed line falls in.
    Head side: added lines, and deletions made inside a row (both neighbours of the deletion point in one row).
    Base side: removed lines, only for rows whose (operator, table, targets) are in ``removed_keys`` (rows gone
    at head) when that is given. Returns every line the file's rows cover on that side: changes there are the
    rows' business, not the enclosing function's."""
    file = change.path if side == "head" else (change.old_path or change.path)
    rows = [e for e in entries if e.file == file]
    covered = {ln for e in rows for ln in range(e.start, e.end + 1)}
    if side == "head":
        lines = list(change.added)
        for h in change.hunks:
            if h.new_count == 0 and h.old_count > 0:
                a, b = h.new_start, h.new_start + 1
                lines += [a for e in rows if e.start <= a and b <= e.end]
    else:
        lines = list(change.removed)
    for e in rows:
        hit = sorted(ln for ln in lines if e.start <= ln <= e.end)
        if not hit:
            continue
        if side == "base":
            if removed_keys is not None and key(e) not in removed_keys:
                continue
            sel.touch(e, file, e.start, why or f"{e.table} removed (base line)")
        else:
            sel.touch(e, file, hit[0], why or f"{e.table} changed")
    return covered


def reach(start: Changed, direct: Callable[[str, str], list[Entry]], callers: Callable[[str, str], list[Changed]],
          max_depth: int = 4, max_nodes: int = 400) -> list[tuple[Entry, list[str]]]:
    """Rows reached from a changed region: rows naming it (``direct(name, file)``), then rows naming its callers
    (``callers(name, file)`` -> the regions that reference ``name``), breadth first. A region is followed by its
    own name first; its enclosing names (the class of a method) only when that reaches nothing. Returns (row,
    names from the changed region to the converter the row names)."""
    for names in (start.names[:1], start.names[1:]):
        hits = _reach(names, start.file, direct, callers, max_depth, max_nodes)
        if hits:
            return hits
    return []


def _reach(names, file, direct, callers, max_depth, max_nodes):
    hits: dict[tuple, tuple[Entry, list[str]]] = {}
    frontier = [(n, file, [n]) for n in names]
    seen = set()
    depth = 0
    while frontier and depth <= max_depth and len(seen) < max_nodes:
        nxt = []
        for name, f, path in frontier:
            if (name, f) in seen:
                continue
            seen.add((name, f))
            for e in direct(name, f):
                key = (e.operator, e.namespace, e.file, e.start, e.targets)
                if key not in hits:
                    hits[key] = (e, path)
            if depth < max_depth:
                for c in callers(name, f):
                    for cn in c.names[:1]:
                        if (cn, c.file) not in seen:
                            nxt.append((cn, c.file, path + [cn]))
        frontier = nxt
        depth += 1
    return list(hits.values())


def why_for(path: list[str], entry: Entry, what: str = "converter") -> str:
    if len(path) == 1:
        return f"{what} {path[0]} changed"
    return f"helper {path[0]} changed (reached from {path[-1]})"


# ---------------------------------------------------------------------------------------------------------------
# Python tables: decorated converters and registration statements
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class PyFile:
    """What a profile reads from one Python file at one revision."""
    path: str
    defs: list[PyDef]                 # top-level defs and classes
    rows: list[Entry]                 # rows declared by decorated defs (refs = {def name})
    statements: list[Entry] = field(default_factory=list)   # rows declared by module-level statements

    def toplevel_at(self, line: int) -> PyDef | None:
        for d in self.defs:
            if d.start <= line <= d.end:
                return d
        return None


PyReader = Callable[[str, str], "PyFile | None"]   # (path, text) -> PyFile


def registrations(path: str, text: str, rows_of) -> "PyFile | None":
    """A Python file whose converters register themselves with decorators (onnxscript's ``@torch_op``, onnx2torch's
    ``@add_converter``, tf2onnx's ``@tf_op``): ``rows_of(definition, decorator)`` gives the table rows one decorated
    definition registers (none for other decorators)."""
    defs = py_defs(text)
    if defs is None:
        return None
    rows = [row for d in defs for dec in d.decorators for row in rows_of(d, dec)]
    return PyFile(path, defs, rows)


class PyTables:
    """Cached :class:`PyFile` per (path, side) for one profile run."""

    def __init__(self, repo, read: PyReader):
        self.repo, self.read = repo, read
        self._cache: dict[tuple[str, str], PyFile | None] = {}

    def get(self, path: str, side: str) -> PyFile | None:
        key = (path, side)
        if key not in self._cache:
            text = self.repo.text(path, side)
            self._cache[key] = self.read(path, text) if text is not None else None
        return self._cache[key]


def _identity(pf: PyFile, d: PyDef) -> tuple:
    """What makes a def the same def at both revisions: its name, and for a name the file defines several times
    (onnx2torch's ``def _``) also the operators it registers."""
    if "@" not in d.key:
        return (d.name, d.kind)
    return (d.name, d.kind, tuple(sorted({e.operator for e in pf.rows if d.key in e.refs})))


def py_changed(ch, side: str, head: PyFile | None, base: PyFile | None, text: str | None,
               skip: set[int] = frozenset()) -> list[Changed]:
    """The top-level defs/classes of a Python file a change touches on ``side`` (by ast, both revisions).

    Head: defs containing added lines (comment-only lines ignored), and defs that lost lines (a deletion inside a
    def that survives). Base: defs that lost lines and no longer exist at head. A def is the same at both
    revisions by :func:`_identity`, so deleting one of several ``def _`` converters reports the deleted one, not
    its neighbour. Lines in ``skip`` (table rows) and outside any def give one loose ``<module>`` entry."""
    out: list[Changed] = []
    head_ids: dict[tuple, PyDef] = {}
    if head is not None:
        for d in head.defs:
            head_ids.setdefault(_identity(head, d), d)
    if side == "head":
        if head is None:
            return out
        lines = [ln for ln in ch.added if ln not in skip and _meaningful(text, ln, loose=False)]
        base_rows = {ln for e in (base.rows + base.statements) for ln in range(e.start, e.end + 1)} if base else set()
        for h in ch.hunks:
            if h.new_count == 0 and h.old_count > 0 and base is not None and not all(
                    ln in base_rows for ln in range(h.old_start, h.old_start + h.old_count)):
                bd = base.toplevel_at(h.old_start)
                hd = head_ids.get(_identity(base, bd)) if bd else None
                if hd is not None:
                    lines.append(h.new_start if hd.start <= h.new_start <= hd.end else
                                 h.new_start + 1 if hd.start <= h.new_start + 1 <= hd.end else hd.start)
        seen: dict[str, Changed] = {}
        loose = None
        for ln in sorted(set(lines)):
            d = head.toplevel_at(ln)
            if d is None:
                if loose is None and _meaningful(text, ln):
                    loose = Changed(head.path, ln, [], "<module>", side)
            elif d.key not in seen:
                seen[d.key] = Changed(head.path, ln, [d.key], d.name, side)
        return list(seen.values()) + ([loose] if loose else [])
    if base is None:
        return out
    seen = {}
    for ln in ch.removed:
        if ln in skip:
            continue
        d = base.toplevel_at(ln)
        if d is None or d.key in seen or (head is not None and _identity(base, d) in head_ids):
            continue
        seen[d.key] = Changed(base.path, ln, [d.key], d.name, side)
    return list(seen.values())


def _py_key(e: Entry) -> tuple:
    return e.operator, e.namespace, e.table, e.targets, e.converter


def analyse_python(sel: Selector, repo, diff, tables: PyTables, match: Callable[[str], bool],
                   peers: Callable[[str, str], list[str]] | None = None, what: str = "converter",
                   unmapped_why: str = "changed converter code that no registered operator reaches") -> set:
    """Rows selected by the Python files of ``diff`` that ``match``: changed registration statements, changed
    decorated converters, and helpers reached through their callers (same file, plus ``peers(path, side)`` files).
    Returns the set of paths analysed."""
    done = set()
    for ch in diff.files:
        if ch.binary or not (match(ch.path) or (ch.old_path and match(ch.old_path))):
            continue
        done.add(ch.path)
        for side in ("head", "base"):
            if (side == "head" and ch.status == "deleted") or (side == "base" and ch.status == "added"):
                continue
            path = ch.path if side == "head" else (ch.old_path or ch.path)
            pf = tables.get(path, side)
            if pf is None:
                if repo.text(path, side) is not None:
                    sel.unmapped(path, 0, None, f"does not parse at {side}: converters in it not mapped")
                continue
            other = tables.get(ch.old_path or ch.path, "base") if side == "head" else tables.get(ch.path, "head")
            other_keys = {_py_key(e) for e in (other.rows + other.statements)} if other else set()
            removed = {_py_key(e) for e in pf.rows + pf.statements} - other_keys
            # registration statements, and decorators (rows span their decorator): a changed decorator selects
            # what it registers; on the base side, registrations gone at head
            used = table_rows_changed(sel, ch, side, pf.statements + pf.rows,
                                      removed if side == "base" else None, key=_py_key)
            # a def whose every registration is gone was deleted: its removed rows already say so
            gone = set()
            if side == "base":
                by_def: dict[str, list[Entry]] = {}
                for e in pf.rows:
                    for k in e.refs:
                        by_def.setdefault(k, []).append(e)
                gone = {k for k, rows in by_def.items() if all(_py_key(e) in removed for e in rows)}

            def direct(name: str, file: str, side=side) -> list[Entry]:
                f = tables.get(file, side)
                return [e for e in f.rows if name in e.refs] if f else []

            def callers(name: str, file: str, side=side) -> list[Changed]:
                files = [file] + ([p for p in peers(file, side) if p != file] if peers else [])
                out = []
                for p in files:
                    f = tables.get(p, side)
                    if f is None:
                        continue
                    qualified = f"{module_stem(file)}.{name}"
                    for d in f.defs:
                        if p == file and d.key == name:
                            continue   # the definition itself
                        if name in d.refs if p == file else (name in d.refs or qualified in d.refs):
                            out.append(Changed(p, d.start, [d.key], d.name, side))
                return out

            head_pf = pf if side == "head" else other
            base_pf = pf if side == "base" else other
            for c in py_changed(ch, side, head_pf, base_pf, repo.text(path, side), skip=used):
                if not c.names:
                    # module-level code runs when the file is imported, before any of its converters: a smoke test
                    # of what the file registers (the scan also imports the file at both revisions)
                    rows = pf.rows if side == "head" else []
                    if not rows:
                        sel.unmapped(c.file, c.line, None, "module-level change that no registration covers")
                    for entry in rows:
                        sel.touch(entry, c.file, c.line, f"{SMOKE} at line {c.line} (smoke test of what "
                                                         f"{Path(path).name} registers)")
                    continue
                if c.names[0] in gone:
                    continue
                hits = reach(c, direct, callers)
                for entry, chain in hits:
                    chain = [n.split("@")[0] for n in chain]
                    why = why_for(chain, entry, what) + (" (base line: code removed)" if side == "base" else "")
                    sel.touch(entry, c.file, c.line, why, converter=entry.converter)
                if not hits:
                    sel.unmapped(c.file, c.line, c.label, unmapped_why)
    return done


def analyse_folder(profile: str, repo, diff, read, in_folder: Callable[[str], bool], **options) -> ProfileResult:
    """The common case of a Python project whose converters are decorated functions/classes in one folder: the
    changed files there, their peers (for helpers shared across files) read at each revision."""
    sel = Selector(profile)
    analyse_python(sel, repo, diff, PyTables(repo, read), in_folder,
                   peers=lambda path, side: [p for p in repo.files(side) if in_folder(p)], **options)
    return sel.result
