"""A search directed by what the pull request changed: its goals are the changed converter statements and the
branch outcomes of the functions it changed (dlci.directed.goals); while any is unreached after the operators' own
tests, part of the budget goes to mutating the instances that came closest (dlci.directed.distance,
dlci.directed.mutations, dlci.directed.stream). What stays unreached is reported with the closest instance, the
branch condition it did not satisfy and a test skeleton to complete."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dlci.directed.distance import INF, Distances
from dlci.directed.goals import FileGoals, Goal, from_diff, reached
from dlci.directed.stream import DirectedStream, finite

VALUES_SHOWN = 24  # value classes listed per reached statement in findings.json

SHARE = 0.4  # of a PR scan's testing time, when goals are left after the operators' own tests have run


@dataclass
class Search:
    files: list[FileGoals]
    goals: list[Goal]
    distances: Distances
    root: Path
    code: dict[Goal, str]
    stream: DirectedStream | None = None
    # the operators whose converters the diff touched directly, and the code it changed on both sides (what it
    # added on head, what it deleted from base): with no goal on head (an overload deleted, a decorator's flag
    # changed, a function removed whole) the search has no line to reach and varies these operators' tests for
    # inputs on which the revisions differ
    touched: frozenset = frozenset()
    changed_text: str = ""
    removed: frozenset = frozenset()  # of those, the ones whose registration or table entry the diff deleted

    @classmethod
    def of(cls, repo, converter_files: list[str], touches, head_root: Path) -> "Search | None":
        """The goals of a scan, or None when its diff changed no traced converter code and touched no operator."""
        from dlci import operators
        files = from_diff(repo, converter_files)
        goals = [g for f in files for g in f.goals]
        touched = frozenset(c for t in touches if not t.indirect and t.file in converter_files
                            for c in operators.canonical(t.operator, t.namespace))
        if not goals and not touched:
            return None
        removed = frozenset(c for t in touches if not t.indirect and t.file in converter_files and "removed" in t.why
                            for c in operators.canonical(t.operator, t.namespace))
        # which operators a table sends to each changed function: the touches that selected it
        dispatch: dict[tuple[str, str], set[str]] = {}
        for t in touches:
            for f in files:
                if f.rel != t.file:
                    continue
                inside = [(name, span) for name, span in f.functions.items() if span[0] <= t.line <= span[1]]
                if inside:
                    name = max(inside, key=lambda ns: ns[1][0])[0]
                    dispatch.setdefault((f.rel, name), set()).update(operators.canonical(t.operator, t.namespace))
        code = {}
        for f in files:
            lines = f.text.splitlines()
            for g in f.goals:
                lo, hi = g.span
                code[g] = "\n".join(lines[max(0, lo - 1):hi + 1]) + (f"\n{g.condition}" if g.condition else "")
                if g.kind == "statement" and lo in f.deleted_code:
                    code[g] += "\n" + f.deleted_code[lo]  # what used to run here (a deletion's goal)
        return cls(files, goals, Distances(files, head_root, dispatch), Path(head_root), code, touched=touched,
                   changed_text=changed_text(repo, converter_files), removed=removed)

    def watch(self) -> tuple[tuple, ...]:
        """The changed statements whose values the workers record: (resolved path, first line, last line, the
        names a deletion there used, if any)."""
        deleted = {(f.rel, line): names for f in self.files for line, names in f.deleted_names.items()}
        return tuple((str((Path(self.root) / g.file).resolve()), g.span[0], g.span[1],
                      *deleted.get((g.file, g.span[0]), ()))
                     for g in self.goals if g.kind == "statement")

    def stream_for(self, campaign, route: Callable, until: float, progress, pair: bool = False) -> DirectedStream:
        """The search's test source; ``pair``: the engine runs the base revision on twin workers, and what reaches
        changed code is compared across the revisions (dlci.directed.divergence)."""
        from dlci import operators
        self.stream = DirectedStream(campaign, self.goals, self.distances, route, self.root,
                                     lambda inst: set(operators.instance_ops(inst.op)), self.code,
                                     progress=progress, until=until, pair=pair, touched=set(self.touched),
                                     changed_text=self.changed_text, removed=set(self.removed))
        self.stream.take_in([(campaign.instances[iid], target, cov, campaign.arcs.get((iid, target), {}),
                              campaign.values.get((iid, target), {}))
                             for (iid, target), cov in campaign.coverage.items() if iid in campaign.instances])
        return self.stream

    def unreached(self, campaign) -> list[Goal]:
        return [g for g in self.goals if not any(reached(g, cov, campaign.arcs.get(key, {}), self.root)
                                                 for key, cov in campaign.coverage.items())]

    def summary(self, campaign, skeleton: Callable[[object, str, Goal], str | None] | None = None) -> dict:
        """Per goal: reached or not; the unreached ones with the closest test, the condition it did not satisfy
        and a skeleton of a test that would reach it (``skeleton(instance, target, goal)``)."""
        from dlci import operators
        left = set(self.unreached(campaign))
        out = {"goals": len(self.goals), "statements": sum(g.kind == "statement" for g in self.goals),
               "branches": sum(g.kind == "branch" for g in self.goals),
               "reached": len(self.goals) - len(left),
               "statements_reached": sum(g.kind == "statement" and g not in left for g in self.goals),
               "unreached": []}
        if self.stream is not None:
            out["search"] = self.stream.describe()
        failed = {(o.instance_id, o.target) for outs in campaign.failures.values() for o in outs}
        out["reached_goals"] = []
        for g in self.goals:
            if g in left:
                continue
            keys = [key for key, cov in campaign.coverage.items()
                    if reached(g, cov, campaign.arcs.get(key, {}), self.root)]
            entry = {**g.to_dict(), "where": g.where, "tests": len(keys),
                     "failing": sum(1 for k in keys if k in failed)}
            if g.kind == "statement":  # the values the tests gave it (what a test that still passes did not try)
                path = str((Path(self.root) / g.file).resolve())
                seen = sorted({v for k in keys
                               for v in campaign.values.get(k, {}).get(path, {}).get(str(g.span[0]), ())})
                if seen:
                    entry["values"] = seen[:VALUES_SHOWN]
            out["reached_goals"].append(entry)
        for g in sorted(left, key=lambda g: (g.file, g.span[0], g.outcome)):
            best, best_key = INF, None
            for key, cov in campaign.coverage.items():
                inst = campaign.instances.get(key[0])
                if inst is None:
                    continue
                d = self.distances.to_goal(g, cov, set(operators.instance_ops(inst.op)))
                if d < best:
                    best, best_key = d, key
            entry = {**g.to_dict(), "where": g.where, "distance": finite(best)}
            if best_key is not None:
                inst = campaign.instances[best_key[0]]
                entry["closest"] = {"instance": inst.id, "test": inst.origin.test, "target": best_key[1]}
                if skeleton is not None:
                    try:
                        entry["skeleton"] = skeleton(inst, best_key[1], g)
                    except Exception as e:  # noqa: BLE001 - the report does without a skeleton
                        entry["skeleton_error"] = f"{type(e).__name__}: {e}"[:200]
            out["unreached"].append(entry)
        return out


CHANGED_TEXT_MAX = 20000  # characters of changed code the mutations' words are looked up in


def changed_text(repo, converter_files: list[str]) -> str:
    """The lines the diff added to the converter files (head) and deleted from them (base), comments dropped."""
    out: list[str] = []
    for ch in repo.last_diff.files:
        if ch.path not in converter_files:
            continue
        for side, rel, numbers in (("head", ch.path, ch.added), ("base", ch.old_path or ch.path, ch.removed)):
            rows = (repo.text(rel, side) or "").splitlines()
            out += [rows[n - 1].split("#", 1)[0] for n in numbers if 0 < n <= len(rows)]
    return "\n".join(r for r in out if r.strip())[:CHANGED_TEXT_MAX]
