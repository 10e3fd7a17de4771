"""What the directed search aims at: the statements a pull request changed in the converter code it traces, and the
outcomes of the branches inside the functions it changed (as coverage.py's branch mode sees them: an ``if`` taken
or not, a loop entered or not, an ``except`` handler run), each with its file and line.

A test's trace (dlci.testcase: the lines run while converting, and the transitions between them in each frame)
says which goals it reached: a statement when one of its lines ran, a branch outcome when control went from the
branch's header to the line the outcome leads to.
"""
from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

from dlci.diff.regions import python_statement_spans

EXIT = -1  # where control goes when it leaves the function (the tracer's arc to the return)


@dataclass(frozen=True)
class Goal:
    file: str                 # repo-relative path
    line: int                 # a statement's first line; a branch outcome's target line (EXIT: leaving)
    kind: str                 # "statement" | "branch"
    function: str = ""        # the enclosing function ("" at module level)
    span: tuple[int, int] = (0, 0)   # a statement's own lines; a branch outcome's header (the condition)
    to: tuple[int, int] = (0, 0)     # a branch outcome: the lines of the statement it leads to ((EXIT, EXIT))
    outcome: str = ""         # true | false | enter | skip | except (branch outcomes)
    condition: str = ""       # the branch's header as written (for the report)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.span[0] if self.kind == 'branch' else self.line}"

    def describe(self) -> str:
        if self.kind == "statement":
            return f"{self.where} (statement in {self.function or 'module level'})"
        return f"{self.where} `{self.condition}` {self.outcome} (in {self.function or 'module level'})"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "kind": self.kind, "function": self.function,
                "span": list(self.span), "to": list(self.to), "outcome": self.outcome, "condition": self.condition}


@dataclass
class FileGoals:
    """A traced file's goals and what the distance needs of it."""
    rel: str
    text: str
    goals: list[Goal] = field(default_factory=list)
    functions: dict[str, tuple[int, int]] = field(default_factory=dict)  # qualified name -> (first, last) line
    # a statement standing for deleted code (its first line) -> the names that code used: their values at that
    # statement are what the deleted code decided on (`dimension` of a removed `if dimension < 0:`)
    deleted_names: dict[int, tuple[str, ...]] = field(default_factory=dict)
    deleted_code: dict[int, str] = field(default_factory=dict)  # and that code (what the mutations read)


def _own_span(node: ast.stmt) -> tuple[int, int]:
    """The lines a statement owns: a compound statement's header only."""
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        return node.lineno, max(node.lineno, body[0].lineno - 1)
    return node.lineno, node.end_lineno or node.lineno


def _header(node: ast.stmt) -> tuple[int, int]:
    test = getattr(node, "test", None) or getattr(node, "iter", None)
    end = test.end_lineno if test is not None and test.end_lineno else node.lineno
    return node.lineno, max(node.lineno, end)


def _functions(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                out.append((name, child))
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
    walk(tree, "")
    return out


def branch_outcomes(func: ast.AST, qualname: str, rel: str, source: str) -> list[Goal]:
    """Every branch outcome of ``func``'s own body (nested functions are theirs)."""
    goals: list[Goal] = []

    def text(node) -> str:
        seg = ast.get_source_segment(source, node) or ""
        return " ".join(seg.split("\n")[0].split())[:160]

    def after(block: list, i: int, follow: tuple[int, int]) -> tuple[int, int]:
        return _own_span(block[i + 1]) if i + 1 < len(block) else follow

    def visit(block: list, follow: tuple[int, int], loop: tuple[int, int] | None):
        for i, node in enumerate(block):
            nxt = after(block, i, follow)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.If):
                head = _header(node)
                cond = text(node.test)
                goals.append(Goal(rel, node.body[0].lineno, "branch", qualname, head, _own_span(node.body[0]),
                                  "true", f"if {cond}"))
                false_to = _own_span(node.orelse[0]) if node.orelse else nxt
                goals.append(Goal(rel, false_to[0], "branch", qualname, head, false_to, "false", f"if {cond}"))
                visit(node.body, nxt, loop)
                visit(node.orelse, nxt, loop)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                head = _header(node)
                cond = f"while {text(node.test)}" if isinstance(node, ast.While) else \
                    f"for {text(node.target)} in {text(node.iter)}"
                goals.append(Goal(rel, node.body[0].lineno, "branch", qualname, head, _own_span(node.body[0]),
                                  "enter", cond))
                leave = _own_span(node.orelse[0]) if node.orelse else nxt
                goals.append(Goal(rel, leave[0], "branch", qualname, head, leave, "skip", cond))
                visit(node.body, head, head)
                visit(node.orelse, nxt, loop)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                visit(node.body, _own_span(node.orelse[0]) if node.orelse else nxt, loop)
                for handler in node.handlers:
                    what = text(handler.type) if handler.type is not None else "any exception"
                    goals.append(Goal(rel, handler.body[0].lineno, "branch", qualname, _own_span(node),
                                      _own_span(handler.body[0]), "except", f"except {what}"))
                    visit(handler.body, nxt, loop)
                visit(node.orelse, nxt, loop)
                visit(node.finalbody, nxt, loop)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                visit(node.body, nxt, loop)
            elif type(node).__name__ == "Match":
                for case in node.cases:
                    goals.append(Goal(rel, case.body[0].lineno, "branch", qualname, _header(node),
                                      _own_span(case.body[0]), "case", f"case {text(case.pattern)}"))
                    visit(case.body, nxt, loop)
    visit(func.body, (EXIT, EXIT), None)
    return goals


def file_goals(rel: str, text: str, changed_lines: set[int]) -> FileGoals:
    """The goals of one file: its changed statements (the innermost statement holding each changed line) and every
    branch outcome of the functions holding one."""
    out = FileGoals(rel, text)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    funcs = _functions(tree)
    out.functions = {name: (f.lineno, f.end_lineno or f.lineno) for name, f in funcs}
    spans = python_statement_spans(text)

    def enclosing(line: int) -> tuple[str, ast.AST | None]:
        inside = [(name, f) for name, f in funcs if f.lineno <= line <= (f.end_lineno or f.lineno)]
        return max(inside, key=lambda nf: nf[1].lineno) if inside else ("", None)

    seen, changed_funcs = set(), {}
    for line in sorted(changed_lines):
        holding = [s for s in spans if s[0] <= line <= s[1]]
        if not holding:
            continue
        span = min(holding, key=lambda s: s[1] - s[0])
        name, func = enclosing(span[0])
        if func is not None and span[0] == func.lineno:
            continue  # a changed `def` line is its function's: its branches below say more
        if span not in seen:
            seen.add(span)
            out.goals.append(Goal(rel, span[0], "statement", name, span))
        if func is not None:
            changed_funcs[name] = func
    for name, func in changed_funcs.items():
        out.goals += branch_outcomes(func, name, rel, text)
    return out


def from_diff(repo, converter_files) -> list[FileGoals]:
    """Per traced converter file the diff changed, its goals at the head revision; where the diff only deleted
    lines, the statement right after the deletion point stands for them (a test that runs it ran where they were)."""
    by_path = {f.path: f for f in repo.last_diff.files}
    out = []
    for rel in converter_files:
        ch = by_path.get(rel)
        if ch is None:
            continue
        text = repo.text(rel, "head") or ""
        points = ch.deletion_points(text)
        goals = file_goals(rel, text, set(ch.added) | set(points))
        base_rows = (repo.text(ch.old_path or rel, "base") or "").splitlines()
        for point, h in points.items():
            deleted = [r.split("#", 1)[0] for r in base_rows[h.old_start - 1:h.old_start - 1 + h.old_count]]
            names = tuple(dict.fromkeys(n for n in re.findall(r"[A-Za-z_]\w*", "\n".join(deleted))
                                        if not keyword.iskeyword(n)))
            for g in goals.goals:
                if g.kind == "statement" and g.span[0] <= point <= g.span[1] and names:
                    goals.deleted_names[g.span[0]] = tuple(dict.fromkeys(goals.deleted_names.get(g.span[0], ())
                                                                         + names))
                    goals.deleted_code[g.span[0]] = "\n".join(
                        filter(None, [goals.deleted_code.get(g.span[0], ""), *deleted]))
        out.append(goals)
    return out


def reached(goal: Goal, lines: dict, arcs: dict, root: Path | str) -> bool:
    """Whether a trace reached ``goal``: ``lines``/``arcs`` are keyed by the resolved path of the file in the
    checkout ``root`` (as the tracer records them)."""
    path = str((Path(root) / goal.file).resolve())
    if goal.kind == "statement":
        return any(goal.span[0] <= ln <= goal.span[1] for ln in lines.get(path, ()))
    lo, hi = goal.span
    to_lo, to_hi = goal.to
    if goal.outcome in ("except", "case"):  # entered from wherever the exception or the match came: its lines ran
        return any(to_lo <= ln <= to_hi for ln in lines.get(path, ()))
    for a, b in arcs.get(path, ()):
        if lo <= a <= hi and (to_lo <= b <= to_hi if to_lo != EXIT else b == EXIT):
            return True
    return False
