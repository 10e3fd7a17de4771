"""How far a test came from a goal, as directed greybox fuzzers measure it (AFLGo: distance in the call graph
between functions, in the control-flow graph within one): per traced converter file, a statement-level control-flow
graph of each function and the calls between the functions of the traced files.

- A test that entered the goal's function: the fewest control-flow edges from a statement it ran to the goal (a
  branch outcome: to the branch's header, plus one: the other way must be taken).
- One that entered only a function from which the goal's function is called: ``CALL_HOP`` per call on the way,
  plus the edges from that function's entry.
- One that entered none of them: the goal's function is reached through a table (TVM's convert maps, OpenVINO's
  op tables), which no call graph shows; a test of an operator whose touched converter it is stands at
  ``DISPATCH`` (its instances are the ones the dispatch sends there), any other at infinity.
"""
from __future__ import annotations

import ast
import math
from collections import deque
from pathlib import Path

from dlci.directed.goals import EXIT, FileGoals, Goal, _functions, _own_span

CALL_HOP = 10.0
DISPATCH = 60.0
INF = math.inf

Span = tuple[int, int]


def _cfg(func: ast.AST) -> tuple[dict[Span, set[Span]], Span | None]:
    """Successor edges between the statements of ``func``'s own body (nested definitions excluded), and its
    entry statement."""
    succ: dict[Span, set[Span]] = {}
    exit_node: Span = (EXIT, EXIT)

    def edge(a: Span, b: Span) -> None:
        succ.setdefault(a, set()).add(b)

    def block(stmts: list, follow: Span, loop_head: Span | None) -> Span | None:
        """Wire ``stmts`` (falling through to ``follow``); return the block's first statement."""
        stmts = [s for s in stmts if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        for i, node in enumerate(stmts):
            me = _own_span(node)
            nxt = _own_span(stmts[i + 1]) if i + 1 < len(stmts) else follow
            succ.setdefault(me, set())
            if isinstance(node, ast.If):
                edge(me, block(node.body, nxt, loop_head) or nxt)
                edge(me, block(node.orelse, nxt, loop_head) or nxt)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                edge(me, block(node.body, me, me) or me)
                edge(me, block(node.orelse, nxt, loop_head) or nxt)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                after_body = block(node.orelse, nxt, loop_head) or nxt if node.orelse else nxt
                first = block(node.body, after_body, loop_head)
                edge(me, first or after_body)
                for h in node.handlers:  # any statement of the body may raise into a handler: from the try itself
                    edge(me, block(h.body, nxt, loop_head) or nxt)
                if node.finalbody:
                    block(node.finalbody, nxt, loop_head)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                edge(me, block(node.body, nxt, loop_head) or nxt)
            elif type(node).__name__ == "Match":
                for case in node.cases:
                    edge(me, block(case.body, nxt, loop_head) or nxt)
            elif isinstance(node, (ast.Return, ast.Raise)):
                edge(me, exit_node)
            elif isinstance(node, ast.Continue) and loop_head:
                edge(me, loop_head)
            elif isinstance(node, ast.Break):
                edge(me, follow)
            else:
                edge(me, nxt)
        return _own_span(stmts[0]) if stmts else None
    entry = block(func.body, exit_node, None)
    return succ, entry


def _called_names(func: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                names.add(f.id)
            elif isinstance(f, ast.Attribute):
                names.add(f.attr)
    return names


class Distances:
    """The graphs of the traced files, and distances from a trace to a goal."""

    def __init__(self, files: list[FileGoals], root: Path | str, dispatch: dict[tuple[str, str], set[str]]
                 | None = None):
        """``dispatch``: (file, function) -> the canonical operators whose touched converter it is."""
        self.root = Path(root)
        self.dispatch = dispatch or {}
        self.cfgs: dict[tuple[str, str], tuple[dict, Span | None, tuple[int, int]]] = {}
        callers: dict[str, set[tuple[str, str]]] = {}  # bare name called -> (file, function) calling it
        self.by_bare: dict[str, set[tuple[str, str]]] = {}
        for fg in files:
            try:
                tree = ast.parse(fg.text)
            except SyntaxError:
                continue
            for name, func in _functions(tree):
                key = (fg.rel, name)
                succ, entry = _cfg(func)
                self.cfgs[key] = (succ, entry, (func.lineno, func.end_lineno or func.lineno))
                self.by_bare.setdefault(name.rsplit(".", 1)[-1], set()).add(key)
                for called in _called_names(func):
                    callers.setdefault(called, set()).add(key)
        # reverse call graph over functions: who calls F (by F's bare name: methods reached through self.<name>)
        self.callers_of = {key: callers.get(key[1].rsplit(".", 1)[-1], set()) - {key} for key in self.cfgs}
        self._to_target: dict[tuple, dict[Span, int]] = {}

    def operators(self) -> set[str]:
        """Every operator a table sends to a changed function."""
        return set().union(*self.dispatch.values()) if self.dispatch else set()

    def _reverse_bfs(self, key: tuple[str, str], target: Span) -> dict[Span, int]:
        cached = self._to_target.get((key, target))
        if cached is not None:
            return cached
        succ = self.cfgs[key][0]
        pred: dict[Span, set[Span]] = {}
        for a, bs in succ.items():
            for b in bs:
                pred.setdefault(b, set()).add(a)
        dist = {target: 0}
        queue = deque([target])
        while queue:
            node = queue.popleft()
            for p in pred.get(node, ()):
                if p not in dist:
                    dist[p] = dist[node] + 1
                    queue.append(p)
        self._to_target[(key, target)] = dist
        return dist

    def _ran_in(self, key: tuple[str, str], lines: dict) -> list[Span]:
        succ, _, (lo, hi) = self.cfgs[key]
        ran = set(lines.get(str((self.root / key[0]).resolve()), ()))
        if not ran or not any(lo <= ln <= hi for ln in ran):
            return []
        return [sp for sp in succ if sp[0] != EXIT and any(sp[0] <= ln <= sp[1] for ln in ran)]

    def within(self, key: tuple[str, str], target: Span, lines: dict) -> float:
        """Control-flow edges from the statements of ``key`` that ran to ``target`` (INF: the function did not
        run, or no path leads there)."""
        ran = self._ran_in(key, lines)
        if not ran:
            return INF
        dist = self._reverse_bfs(key, target)
        return float(min((dist[s] for s in ran if s in dist), default=INF))

    def to_goal(self, goal: Goal, lines: dict, operators: set[str] = frozenset()) -> float:
        """The distance of one trace (``lines``: resolved path -> lines run) from ``goal``; ``operators``: the
        canonical operators of the test's instance."""
        key = (goal.file, goal.function)
        if key not in self.cfgs:
            return INF
        target = goal.span if goal.kind == "branch" else goal.span
        extra = 1.0 if goal.kind == "branch" else 0.0
        inside = self.within(key, target, lines)
        if inside < INF:
            return inside + extra
        _, entry, _ = self.cfgs[key]
        from_entry = self._reverse_bfs(key, target).get(entry, 0) if entry else 0
        best = INF
        seen, queue = {key}, deque([(key, 0)])
        while queue:  # the callers of the goal's function, nearest first
            f, hops = queue.popleft()
            for caller in self.callers_of.get(f, ()):
                if caller in seen:
                    continue
                seen.add(caller)
                if self._ran_in(caller, lines):
                    best = min(best, CALL_HOP * (hops + 1) + from_entry + extra)
                queue.append((caller, hops + 1))
        if best < INF:
            return best
        if operators & self.dispatch.get(key, set()):
            return DISPATCH + from_entry + extra
        return INF
