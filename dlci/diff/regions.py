"""Named regions of source files (functions, classes, table entries) and the regions a change touches.

Line numbers are 1-based and count ``\\n`` only, as git does; every scanner here keeps that numbering (text is
blanked or normalised in place, never re-flowed), so a region's lines line up with a :class:`FileChange`'s.

* Python: ``ast`` (nested definitions get dotted names, decorators belong to the span); a file that does not
  parse (PRs do contain syntax errors) falls back to an indentation scan.
* C/C++/CUDA: comments, literals and preprocessor lines are blanked out, then the namespace/class level is
  tokenised and each ``{`` is classified by the statement in front of it. Function bodies are skipped by brace
  matching, so lambdas and nested blocks belong to their function.
* YAML: a line scan (keeps exact line numbers and survives broken files): top-level list entries named by their
  ``func:``/``name:`` key (``native_functions.yaml``, ``derivatives.yaml``), or top-level keys of a mapping.
"""
from __future__ import annotations

import ast
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # the diff package imports nothing from here; keep the import one-way at runtime too
    from dlci.diff import FileChange

__all__ = ["Region", "TouchedRegion", "language", "regions", "innermost", "touched", "line_count"]


@dataclass(frozen=True)
class Region:
    name: str       # qualified: "Cls.method", "Class::method", "translate_elu", "softplus.out"
    kind: str       # "function" | "class" | "entry" | "module"
    start: int      # 1-based inclusive
    end: int
    parent: str | None = None


@dataclass(frozen=True)
class TouchedRegion:
    region: Region | None   # None: the line is at module level / outside any definition
    line: int               # first touched line inside it
    side: str               # "head" or "base" (base for regions that exist only in the base text)


_LANG = {".py": "python", ".pyi": "python", ".pyw": "python",
         ".yaml": "yaml", ".yml": "yaml"}
_LANG.update(dict.fromkeys((".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hpp", ".hh", ".hxx", ".h++", ".cu",
                            ".cuh", ".inc", ".ipp", ".inl", ".tcc"), "cpp"))


def language(path: str) -> str | None:
    """"python" | "cpp" | "yaml" | None, from the file name."""
    return _LANG.get(PurePosixPath(path).suffix.lower())


def regions(path: str, text: str) -> list[Region]:
    """The named regions of a file, sorted by start line (enclosing regions before the regions inside them)."""
    lang = language(path)
    if lang is None or not text:
        return []
    return list(_regions_cached(lang, text))


@lru_cache(maxsize=128)
def _regions_cached(lang: str, text: str) -> tuple[Region, ...]:
    # several profiles ask for the same file; the text itself is the key
    found = {"python": _python, "cpp": _cpp, "yaml": _yaml}[lang](text)
    return tuple(sorted(found, key=lambda r: (r.start, -r.end)))


def innermost(regions: list[Region], line: int) -> Region | None:
    """The smallest region containing ``line`` (the one starting last; ties go to the shorter one)."""
    best = None
    for r in regions:
        if r.start <= line <= r.end and (best is None or (r.start, -r.end) > (best.start, -best.end)):
            best = r
    return best


def line_count(text: str) -> int:
    """Lines as git counts them (a last line without ``\\n`` still counts)."""
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


class _LineIndex:
    """innermost() for many lines of one file: paint each region's lines, outer regions first."""

    def __init__(self, regions: list[Region], n_lines: int):
        self.at: list[Region | None] = [None] * (n_lines + 2)
        for r in sorted(regions, key=lambda r: (r.start, -r.end)):
            lo, hi = max(r.start, 1), min(r.end, n_lines + 1)
            if hi >= lo:
                self.at[lo:hi + 1] = [r] * (hi - lo + 1)

    def __call__(self, line: int) -> Region | None:
        return self.at[line] if 0 <= line < len(self.at) else None


def touched(change: FileChange, head_text: str | None, base_text: str | None) -> list[TouchedRegion]:
    """Innermost regions containing touched head lines; plus base-side regions that contain removed base lines
    and no longer exist at head (by qualified name). One entry per region and side, head entries first."""
    out: list[TouchedRegion] = []
    head_regions: list[Region] = []
    gone = head_text is None or change.status == "deleted"
    head_lines = change.touched_head_lines()
    if not head_lines and not change.removed:   # pure rename, mode change, binary: nothing to parse
        return out
    if not gone:
        head_regions = regions(change.path, head_text)
        n = line_count(head_text)
        at = _LineIndex(head_regions, n)
        seen: set[Region | None] = set()
        blank = _blank_lines(head_text, change.added)
        for line in sorted(head_lines):
            if not 1 <= line <= max(n, 1):   # the "after" side of a deletion at the end of the file
                continue
            if line in blank:  # an added blank line after a new method would otherwise "change" the whole class
                continue
            r = at(line)
            if r not in seen:
                seen.add(r)
                out.append(TouchedRegion(r, line, "head"))
    if base_text is not None and change.removed:
        base_regions = regions(change.old_path or change.path, base_text)
        alive = {r.name for r in head_regions}
        at = _LineIndex(base_regions, line_count(base_text))
        seen = set()
        blank = _blank_lines(base_text, change.removed)
        for line in change.removed:
            if line in blank:
                continue
            r = at(line)
            if r in seen or (r is None and not gone) or (r is not None and r.name in alive):
                continue   # module level of a file that still exists is reported on the head side
            seen.add(r)
            out.append(TouchedRegion(r, line, "base"))
    return out


def _blank_lines(text: str, lines) -> set[int]:
    """Of ``lines``, the empty ones in ``text`` (a comment may still say what changed; an empty line never does)."""
    src = text.splitlines()
    return {ln for ln in lines if not (src[ln - 1].strip() if 1 <= ln <= len(src) else "")}


# ==============================================================================================================
# Python

def _python(text: str) -> list[Region]:
    # git counts "\n" only; compile() would also break lines at a lone "\r"
    src = text.replace("\r\n", "\n").replace("\r", " ")
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _python_fallback(src)
    out: list[Region] = []
    stack: list[tuple[list, str | None]] = [(tree.body, None)]
    while stack:
        body, prefix = stack.pop()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{node.name}" if prefix else node.name
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                out.append(Region(name, kind, start, node.end_lineno or node.lineno, prefix))
                stack.append((node.body, name))
                continue
            # definitions inside if/try/with/for/match blocks keep the enclosing qualified name
            for attr in ("body", "orelse", "finalbody", "handlers", "cases"):
                sub = getattr(node, attr, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.AST):
                    if isinstance(sub[0], (ast.ExceptHandler, ast.match_case)):
                        for h in sub:
                            stack.append((h.body, prefix))
                    else:
                        stack.append((sub, prefix))
    return out


_PY_DEF = re.compile(r"[ \t]*(?:async[ \t]+)?(def|class)[ \t]+([A-Za-z_]\w*)")
_PY_DEF_LINE = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w+.*:[ \t]*(?:#.*)?$")


def _python_statement_starts(lines: list[str]) -> list[bool]:
    """Which lines begin a statement: not inside brackets, a triple-quoted string or a backslash continuation.
    Approximate by design (the file is broken); a line that looks exactly like a def/class header resyncs."""
    starts, depth, triple, cont = [], 0, None, False
    for line in lines:
        start = depth == 0 and triple is None and not cont
        if not start and triple is None and _PY_DEF_LINE.match(line):
            start, depth = True, 0
        starts.append(start)
        cont, i, n = False, 0, len(line)
        while i < n:
            c = line[i]
            if triple:
                j = line.find(triple, i)
                if j < 0:
                    break
                triple, i = None, j + 3
                continue
            if c == "#":
                break
            if c in "\"'":
                if line.startswith(c * 3, i):
                    triple, i = c * 3, i + 3
                    continue
                j = i + 1
                while j < n and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(depth - 1, 0)
            elif c == "\\" and i == n - 1:
                cont = True
            i += 1
    return starts


def _python_fallback(src: str) -> list[Region]:
    lines = src.split("\n")
    starts = _python_statement_starts(lines)
    out: list[Region] = []
    stack: list[tuple[int, str, str, int, str | None]] = []   # (indent, qualified name, kind, start, parent)
    last_code = 0
    decorator_start: tuple[int, int] | None = None   # (indent, line) of a run of decorators

    def close(upto_indent: int) -> None:
        while stack and stack[-1][0] >= upto_indent:
            indent, name, kind, start, parent = stack.pop()
            out.append(Region(name, kind, start, max(last_code, start), parent))

    for no, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if starts[no - 1]:
            indent = len(line) - len(line.lstrip(" \t"))
            close(indent)
            if stripped.startswith("@"):
                if decorator_start is None or decorator_start[0] != indent:
                    decorator_start = (indent, no)
            else:
                m = _PY_DEF.match(line)
                if m:
                    parent = stack[-1][1] if stack else None
                    name = f"{parent}.{m[2]}" if parent else m[2]
                    start = decorator_start[1] if decorator_start and decorator_start[0] == indent else no
                    stack.append((indent, name, "class" if m[1] == "class" else "function", start, parent))
                decorator_start = None
        last_code = no
    close(0)
    return out


# ==============================================================================================================
# C / C++ / CUDA

_CPP_LITERALS = r"""
      (?P<raw>(?<![\w])(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\((?P<rawbody>.*?)\)(?P=delim)")  # R"x(...)x"
    | (?P<line>//(?:[^\n\\]|\\.)*)                                             # line comment (\-continued too)
    | (?P<block>/\*.*?(?:\*/|\Z))                                               # block comment
    | (?P<str>"(?P<strbody>(?:[^"\\\n]|\\.)*)"?)                                 # string literal
    | (?P<chr>(?<![\w])(?:u8|[uUL])?'(?P<chrbody>(?:[^'\\\n]|\\.){1,10})')       # char literal (not 1'000)
"""
_CPP_NOISE = re.compile(_CPP_LITERALS, re.S | re.M | re.X)
_CPP_NOISE_PRE = re.compile(_CPP_LITERALS + r"""
    | (?P<pre>^[ \t]*\#(?:[^\n\\]|\\.)*)                                        # preprocessor, continuations
""", re.S | re.M | re.X)


def blank_cpp(text: str, strings: str = "keep", preprocessor: bool = False) -> str:
    """C/C++ ``text`` with comments replaced by spaces, offsets and newlines unchanged (line numbers computed on the
    result hold for the original). ``strings``: string and char literals kept (``keep``), their contents blanked
    (``contents``: the quotes stay) or blanked whole (``whole``); ``preprocessor``: directives blanked too."""
    def sub(m: re.Match) -> str:
        kind = m.lastgroup
        if kind in ("line", "block", "pre"):
            return _blank(m.group(0))
        if strings == "keep":
            return m.group(0)
        if strings == "whole":
            return _blank(m.group(0))
        whole = m.group(0)
        for body in ("rawbody", "strbody", "chrbody"):
            b = m.group(body)
            if b is not None:
                a = m.start(body) - m.start()
                return whole[:a] + _blank(b) + whole[a + len(b):]
        return whole
    return (_CPP_NOISE_PRE if preprocessor else _CPP_NOISE).sub(sub, text)


_CPP_TOKEN = re.compile(r"[A-Za-z_$][\w$]*|\d[\w.']*|::|->|\S")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_MACRO = re.compile(r"[A-Z][A-Z0-9_]*[A-Z0-9]")
_NOT_A_NAME = frozenset("""
    if for while switch return sizeof alignof decltype typeid static_assert alignas noexcept throw new delete catch
    requires __attribute__ __declspec __asm__ asm void int char bool float double long short unsigned signed auto
    const volatile typename class struct union enum do else case default co_await co_return co_yield using
    namespace template operator typedef extern static inline virtual explicit constexpr consteval friend
    """.split())
_TRAILER_WORDS = frozenset(("const", "volatile", "&", "override", "final", "mutable", "try", "constexpr"))
_CLASS_PREFIX = frozenset(("typedef", "export", "friend", "static", "inline", "const", "volatile", "constexpr"))
_ACCESS = frozenset(("public", "private", "protected", "signals", "slots", "Q_SIGNALS", "Q_SLOTS"))


def _blank(s: str) -> str:
    """Spaces for everything but newlines: offsets and line numbers survive."""
    if "\n" not in s:
        return " " * len(s)
    return "\n".join(" " * len(part) for part in s.split("\n"))


def _cpp(text: str) -> list[Region]:
    return _CppScanner(text).run()


class _CppScanner:
    """Namespace/class-level scan. ``stmt`` collects the tokens since the last ``;``/``{...}``; parenthesised
    groups are single ``()`` tokens, so parameter lists, default arguments and macro arguments (braces and
    lambdas included) never disturb the classification of the ``{`` that follows."""

    def __init__(self, text: str):
        self.text = text
        self.clean = blank_cpp(text, strings="whole", preprocessor=True)
        self.close: dict[int, int] = {}
        opens: dict[str, list[int]] = {"(": [], "{": []}
        pair = {")": "(", "}": "{"}
        for m in re.finditer(r"[(){}]", self.clean):
            c, p = m.group(), m.start()
            if c in opens:
                opens[c].append(p)
            elif opens[pair[c]]:
                self.close[opens[pair[c]].pop()] = p
        for p in opens["{"]:   # an unclosed body runs to the end of the file
            self.close[p] = len(self.clean)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.out: list[Region] = []

    def line(self, pos: int) -> int:
        return bisect_right(self.line_starts, pos)

    def run(self) -> list[Region]:
        self.scan(0, len(self.clean), [], False)
        return self.out

    # -- the statement loop -------------------------------------------------------------------------------------
    def scan(self, pos: int, end: int, chain: list[str], in_class: bool) -> None:
        clean, stmt = self.clean, []
        while True:
            m = _CPP_TOKEN.search(clean, pos, end)
            if m is None:
                break
            tok, s = m.group(), m.start()
            pos = m.end()
            if tok == "(":
                c = self.close.get(s)
                if c is None or c >= end:
                    stmt.append(("(", s, pos))
                    continue
                stmt.append(("()", s, c + 1))
                pos = c + 1
                if not in_class and self._macro_ends_here(stmt, pos, end):
                    self._macro_entry(stmt, chain, stmt[-1][2] - 1)
                    stmt = []
                continue
            if tok == ";":
                if not in_class and len(stmt) >= 2 and stmt[1][0] == "()" and _is_name(stmt[0][0]):
                    self._macro_entry(stmt, chain, s)
                stmt = []
                continue
            if tok == "}":   # stray (unbalanced) closer: start afresh
                stmt = []
                continue
            if tok == "{":
                c = min(self.close.get(s, len(clean)), end)
                stmt = self.brace(stmt, s, c, chain, in_class)
                pos = c + 1
                continue
            if tok == ":" and in_class and len(stmt) == 1 and stmt[0][0] in _ACCESS:
                stmt = []
                continue
            stmt.append((tok, s, pos))

    def _macro_ends_here(self, stmt: list, pos: int, end: int) -> bool:
        """``MACRO(args)`` at namespace scope followed by neither ``;``, ``{`` nor a ``.``/``->`` chain: a
        statement-like macro call written without a semicolon (X-macro lists, kernel registrations)."""
        if len(stmt) != 2 or not _MACRO.fullmatch(stmt[0][0]):
            return False
        nxt = _CPP_TOKEN.search(self.clean, pos, end)
        return nxt is None or nxt.group() not in ("{", ";", ".", "->", "(", "[", ":", "=", "<", "&", "*", ",")

    def _macro_entry(self, stmt: list, chain: list[str], end_pos: int) -> None:
        if stmt[0][0] in _NOT_A_NAME:
            return
        name = self._macro_name(stmt[0][0], stmt[1])
        self.out.append(Region(self._qualify(chain, name), "entry", self.line(stmt[0][1]), self.line(end_pos),
                               "::".join(chain) or None))

    def _macro_name(self, macro: str, group: tuple[str, int, int]) -> str:
        """``MACRO(first, second`` from the original text (literals were blanked in ``clean``); closed with ``)``
        when those are all the arguments."""
        args = _split_args(self.clean, self.text, group[1] + 1, group[2] - 1)
        shown = [a if len(a) <= 60 else a[:57] + "..." for a in args[:2]]
        return f"{macro}({', '.join(shown)}{')' if len(args) <= 2 else ''}"

    # -- what a "{" opens ---------------------------------------------------------------------------------------
    def brace(self, stmt: list, s: int, c: int, chain: list[str], in_class: bool) -> list:
        """Handle the block ``{`` at ``s`` .. ``}`` at ``c``; return the statement tokens to carry on with."""
        body = ("{}", s, c + 1)
        toks = _strip_decorations(stmt)
        words = [t[0] for t in toks]
        if not words:
            return []
        if words[0] == "namespace" or words[:2] == ["inline", "namespace"]:
            self.scan(s + 1, c, chain, False)
            return []
        if words == ["extern"]:   # extern "C" { ... }: the literal was blanked
            self.scan(s + 1, c, chain, in_class)
            return []
        fn = _function_declarator(toks)
        if fn is not None:
            j, name_at = fn
            after = words[j + 1:]
            if ":" in after and words[-1] != "()" and (_is_name(words[-1]) or words[-1] == ">") \
                    and len(after) > after.index(":") + 1:
                return stmt + [body]   # a member initialiser "x_{...}" of a constructor's init list
            self._function(toks, j, name_at, stmt[0][1], c, chain, in_class)
            return []
        if "enum" in words:
            return stmt + [body]
        for k, w in enumerate(words):
            if w in ("class", "struct", "union") and all(x in _CLASS_PREFIX or _MACRO.fullmatch(x)
                                                         for x in words[:k]):
                self._class(toks, k, stmt[0][1], s, c, chain)
                return stmt + [body]
        if "=" in words or _is_name(words[-1]):
            # a brace-initialised variable; a multi-line one is a table: "const std::map<...> kOps = {...};"
            k = words.index("=") - 1 if "=" in words else len(words) - 1
            while k > 0 and (words[k] in ("[", "]") or words[k][:1].isdigit()):
                k -= 1
            if k >= 0 and _is_name(words[k]) and self.line(s) != self.line(c):
                name = _qualified(words, k)
                self.out.append(Region(self._qualify(chain, name), "entry", self.line(stmt[0][1]), self.line(c),
                                       "::".join(chain) or None))
            return stmt + [body]
        return []   # some other block (asm, an unrecognised macro form): no region

    def _function(self, toks: list, j: int, name_at: int, start: int, c: int, chain: list[str],
                  in_class: bool) -> None:
        """A function body ``{`` .. ``c``; the region starts at the statement's first token (template line)."""
        words = [t[0] for t in toks]
        if _MACRO.fullmatch(words[name_at]) and words[name_at + 1] == "()" and \
                (name_at + 1 < j or (not in_class and name_at == 0)):
            # TEST(Suite, Name) { ... }, TORCH_IMPL_FUNC(elu_out) (...) { ... }: the macro call names it
            name = self._macro_name(words[name_at], toks[name_at + 1])
        else:
            name = _qualified(words, name_at, j)
        # a function-try-block's handlers belong to the function
        end = c
        while True:
            m = _CPP_TOKEN.search(self.clean, end + 1)
            if m is None or m.group() != "catch":
                break
            g = _CPP_TOKEN.search(self.clean, m.end())
            if g is None or g.group() != "(" or g.start() not in self.close:
                break
            b = _CPP_TOKEN.search(self.clean, self.close[g.start()] + 1)
            if b is None or b.group() != "{":
                break
            end = self.close.get(b.start(), len(self.clean))
        full = self._qualify(chain, name)
        parent = "::".join(chain) if chain else (full.rsplit("::", 1)[0] if "::" in name.split("(")[0] else None)
        self.out.append(Region(full, "function", self.line(start), self.line(end), parent))

    def _class(self, toks: list, k: int, start: int, s: int, c: int, chain: list[str]) -> None:
        words = [t[0] for t in toks]
        name_words = []
        for w in words[k + 1:]:
            if w in (":", "final", "<", "{"):
                break
            name_words.append(w)
        # "class TVM_DLL Foo", "struct ns::Bar": the last name (with its qualification) is the class
        name = ""
        for i in range(len(name_words) - 1, -1, -1):
            if _is_name(name_words[i]):
                name = _qualified(name_words, i)
                break
        if not name:   # anonymous: its members belong to the enclosing scope
            self.scan(s + 1, c, chain, True)
            return
        full = self._qualify(chain, name)
        self.out.append(Region(full, "class", self.line(start), self.line(c), "::".join(chain) or None))
        self.scan(s + 1, c, full.split("::"), True)

    @staticmethod
    def _qualify(chain: list[str], name: str) -> str:
        return "::".join(chain + [name]) if chain else name


def _is_name(tok: str) -> bool:
    return bool(_IDENT.fullmatch(tok)) and tok not in _NOT_A_NAME


def _strip_decorations(stmt: list) -> list:
    """Drop ``template<...>`` heads, ``[[attributes]]`` and ``__attribute__((...))``-like annotations, which
    carry parentheses and words that would otherwise look like declarators."""
    out, i, n = [], 0, len(stmt)
    while i < n:
        t = stmt[i][0]
        if t == "template" and i + 1 < n and stmt[i + 1][0] == "<":
            depth, i = 0, i + 1
            while i < n:
                depth += {"<": 1, ">": -1}.get(stmt[i][0], 0)
                i += 1
                if depth == 0:
                    break
            continue
        if t == "[" and i + 1 < n and stmt[i + 1][0] == "[":
            depth = 0
            while i < n:
                depth += {"[": 1, "]": -1}.get(stmt[i][0], 0)
                i += 1
                if depth == 0:
                    break
            continue
        if t in ("__attribute__", "__declspec", "alignas") and i + 1 < n and stmt[i + 1][0] == "()":
            i += 2
            continue
        out.append(stmt[i])
        i += 1
    return out


def _function_declarator(toks: list) -> tuple[int, int] | None:
    """(index of the parameter group, index where the function's name starts) when ``toks`` (the tokens before
    a ``{``) read as a function definition header, else None."""
    words = [t[0] for t in toks]
    for j, w in enumerate(words):
        if w != "()" or j == 0:
            continue
        name_at = _declarator_name(words, j)
        if name_at is not None and _valid_trailer(words[j + 1:]):
            return j, name_at
    return None


def _declarator_name(words: list[str], j: int) -> int | None:
    """Where the name before the group ``words[j]`` starts: an identifier, ``~Dtor`` or ``operator<sym>``."""
    # operator overloads: "operator ==", "operator ()", "operator bool", "operator new []"
    for i in range(j - 1, max(j - 5, -1), -1):
        if words[i] == "operator":
            return _qualified_start(words, i)
        if words[i] == "()" and i != j - 1:
            break
    prev = words[j - 1]
    if prev == "()" and j >= 2 and _MACRO.fullmatch(words[j - 2]):
        return j - 2   # TORCH_IMPL_FUNC(softplus_out) (const Tensor& self, ...) {
    if not _is_name(prev):
        return None
    i = j - 1
    if i > 0 and words[i - 1] == "~":
        i -= 1
    return _qualified_start(words, i)


def _qualified_start(words: list[str], i: int) -> int:
    """Walk back over ``A<T>::B::`` in front of the name at ``i``."""
    while i >= 2 and words[i - 1] == "::":
        k = i - 2
        if words[k] == ">":
            depth = 0
            while k >= 0:
                depth += {">": 1, "<": -1}.get(words[k], 0)
                if depth == 0:
                    break
                k -= 1
            k -= 1
        if k >= 0 and _is_name(words[k]):
            i = k
        else:
            break
    return i


def _qualified(words: list[str], i: int, stop: int | None = None) -> str:
    """The name written around ``words[i]`` (up to ``stop``), template arguments dropped:
    "Elu<T>::Compute" -> "Elu::Compute", "Foo::~Foo", "Vec::operator+=", "operator bool"."""
    k, end, parts = _qualified_start(words, i), len(words) if stop is None else stop, []
    while k < end:
        w = words[k]
        if w == "operator":
            sym = "".join(f" {x}" if x[:1].isalnum() or x[:1] == "_" else x for x in words[k + 1:end])
            parts.append("operator" + sym)
            break
        if w == "~" and k + 1 < end:
            parts.append("~" + words[k + 1])
            k += 2
        elif _IDENT.fullmatch(w):
            parts.append(w)
            k += 1
        else:
            break
        if k < end and words[k] == "<":   # template arguments
            depth = 0
            while k < end:
                depth += {"<": 1, ">": -1}.get(words[k], 0)
                k += 1
                if depth == 0:
                    break
        if k < end and words[k] == "::":
            k += 1
            continue
        break
    return "::".join(parts)


def _valid_trailer(after: list[str]) -> bool:
    """What may follow a function's parameter list before its body: cv/ref qualifiers, noexcept(...),
    override/final, annotation macros (``TF_LOCKS_EXCLUDED(mu)``), then optionally ``-> T``, ``: inits``,
    ``requires ...``."""
    i = 0
    while i < len(after):
        w = after[i]
        if w in ("->", ":", "requires"):
            return True
        if w in _TRAILER_WORDS:
            i += 1
        elif w in ("noexcept", "throw") or _MACRO.fullmatch(w):
            i += 2 if i + 1 < len(after) and after[i + 1] == "()" else 1
        else:
            return False
    return True


def _split_args(clean: str, text: str, lo: int, hi: int) -> list[str]:
    """Top-level comma-separated arguments of ``clean[lo:hi]``, read back from ``text`` with comments removed
    and whitespace collapsed. ``<...>`` after a name counts as nesting (``EluOp<CPUDevice, float>``)."""
    args, depth, angle, start = [], 0, 0, lo
    for i in range(lo, hi):
        ch = clean[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and i > lo and (clean[i - 1].isalnum() or clean[i - 1] == "_"):
            angle += 1
        elif ch == ">" and angle:
            angle -= 1
        elif ch == "," and depth == 0 and angle == 0:
            args.append((start, i))
            start = i + 1
    args.append((start, hi))
    out = []
    for a, b in args:
        piece = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text[a:b], flags=re.S)
        piece = " ".join(piece.split())
        if piece or len(args) > 1:
            out.append(piece)
    return out


# ==============================================================================================================
# YAML

# a mapping key: quoted, or plain up to the first ": " (plain keys may contain "::", as in "aten::elu: ...")
_YAML_KEY = re.compile(r"""(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'|([^\s#'"?\-\[{][^#]*?|-[^\s#][^#]*?))"""
                       r"""[ \t]*:(?:[ \t]|$)""")
_YAML_ITEM = re.compile(r"([ \t]*)-(?:[ \t]+|$)")


def _yaml(text: str) -> list[Region]:
    lines = text.replace("\r\n", "\n").split("\n")
    content = [i for i, ln in enumerate(lines) if _yaml_content(ln)]
    if not content:
        return []
    out: list[Region] = []
    first = lines[content[0]]
    if _YAML_ITEM.match(first) and not first[0].isspace():
        for lo, hi in _yaml_blocks(lines, content, lambda ln: bool(_YAML_ITEM.match(ln)) and not ln[0].isspace()):
            out.append(Region(_yaml_item_name(lines, lo, hi) or _yaml_fallback_name(lines[lo]), "entry",
                              lo + 1, hi + 1))
        return out
    top_key = lambda ln: not ln[0].isspace() and bool(_YAML_KEY.match(ln))   # noqa: E731
    for lo, hi in _yaml_blocks(lines, content, top_key):
        key = _yaml_key(lines[lo])
        if key is None:
            continue
        out.append(Region(key, "entry", lo + 1, hi + 1))
        out.extend(_yaml_child_items(lines, lo + 1, hi, key))
    return out


def _yaml_content(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith("#") and s not in ("---", "...") and not s.startswith("%")


def _yaml_blocks(lines: list[str], content: list[int], is_start) -> list[tuple[int, int]]:
    """(first, last) 0-based line of each block that begins at a line accepted by ``is_start`` and runs to the
    last content line before the next one."""
    starts = [i for i in content if is_start(lines[i])]
    blocks = []
    for n, lo in enumerate(starts):
        limit = starts[n + 1] if n + 1 < len(starts) else len(lines)
        hi = lo
        for i in content[bisect_right(content, lo):]:
            if i >= limit:
                break
            hi = i
        blocks.append((lo, hi))
    return blocks


def _yaml_key(line: str, indent: int = 0) -> str | None:
    m = _YAML_KEY.match(line, indent)
    if not m:
        return None
    if m[1] is not None:
        return m[1]
    if m[2] is not None:
        return m[2].replace("''", "'")
    return m[3].strip()


def _yaml_value(line: str, indent: int) -> str:
    m = _YAML_KEY.match(line, indent)
    value = line[m.end():].strip() if m else ""
    if value[:1] in ("'", '"') and value[-1:] == value[:1]:
        value = value[1:-1]
    return value


def _yaml_item_name(lines: list[str], lo: int, hi: int) -> str | None:
    """The operator a list entry declares: ``func: softplus.out(Tensor self, ...)`` -> ``softplus.out``."""
    m = _YAML_ITEM.match(lines[lo])
    indent = m.end()
    found: dict[str, str] = {}
    for i in range(lo, hi + 1):
        ln = lines[i]
        at = indent if i == lo else len(ln) - len(ln.lstrip(" "))
        if at != indent or not ln.strip():
            continue
        key = _yaml_key(ln, at)
        if key in ("func", "name") and key not in found:
            found[key] = _yaml_value(ln, at)
    value = found.get("func") or found.get("name")
    if not value:
        return None
    return value.split("(", 1)[0].strip() or None


def _yaml_fallback_name(line: str) -> str:
    s = _YAML_ITEM.sub("", line, count=1).strip()
    return s if len(s) <= 80 else s[:77] + "..."


def _yaml_child_items(lines: list[str], lo: int, hi: int, parent: str) -> list[Region]:
    """Named list entries under a top-level key (``ops: [- name: elu, ...]``)."""
    items = [i for i in range(lo, hi + 1) if _YAML_ITEM.match(lines[i])]
    if not items:
        return []
    indent = min(len(_YAML_ITEM.match(lines[i])[1]) for i in items)
    content = [i for i in range(lo, hi + 1) if _yaml_content(lines[i])]
    at_indent = lambda ln: bool(_YAML_ITEM.match(ln)) and len(_YAML_ITEM.match(ln)[1]) == indent   # noqa: E731
    out = []
    for a, b in _yaml_blocks(lines, content, at_indent):
        name = _yaml_item_name(lines, a, b)
        if name:
            out.append(Region(name, "entry", a + 1, b + 1, parent))
    return out


def _is_docstring(node: ast.stmt) -> bool:
    """A bare string statement (a docstring, or a string left as a comment): it computes nothing, so a change to it
    is no changed statement (no goal of the directed search, no line a test must run)."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


@lru_cache(maxsize=16)
def python_statement_spans(text: str) -> tuple[tuple[int, int], ...]:
    """(first, last) line of each statement's own lines in Python ``text`` (a compound statement owns its header
    only), docstrings left out; () when it does not parse. The one definition of a changed statement: what the scan
    counts as run and what the directed search aims at. Cached: a frontend file is thousands of lines."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ()
    spans = []
    for n in ast.walk(tree):
        if isinstance(n, ast.stmt) and not _is_docstring(n):
            body = getattr(n, "body", None)
            end = body[0].lineno - 1 if isinstance(body, list) and body and isinstance(body[0], ast.stmt) \
                else n.end_lineno
            spans.append((n.lineno, max(n.lineno, end or n.lineno)))
    return tuple(spans)
