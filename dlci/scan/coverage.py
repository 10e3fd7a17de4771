"""Converter-line coverage in PR mode: which changed statements the tests ran, which instances run the lines a PR
edits (they go first), and which changed lines no test reached (a gap the maintainer should hear about)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from dlci.diff.regions import python_statement_spans
from dlci.instance import variant_kind
from dlci.operators import instance_ops
from dlci.plan import balanced


def changed_statement_spans(text: str, added: set[int]) -> set[tuple[int, int]]:
    """The innermost statements holding an added line (blank lines, comments and docstrings hold none)."""
    spans = python_statement_spans(text)
    out = set()
    for line in added:
        inside = [s for s in spans if s[0] <= line <= s[1]]
        if inside:
            out.add(min(inside, key=lambda s: s[1] - s[0]))
    return out


class CoverageCache:
    """Converter-line coverage per instance, keyed by the git blob of the traced file: a file unchanged between
    revisions keeps its coverage, and the base revision's blob of a changed file tells which instances ran the lines
    a later PR edits (they go first)."""

    def __init__(self):
        from dlci import cache
        self.dir = cache.root() / "coverage"

    def load(self, blob: str) -> dict[str, list[int]]:
        try:
            return json.loads((self.dir / f"{blob}.json").read_text())
        except (OSError, ValueError):
            return {}

    def merge(self, blob: str, runs: dict[str, list[int]]) -> None:
        if not runs:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        data = self.load(blob)
        data.update(runs)
        tmp = self.dir / f"{blob}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.dir / f"{blob}.json")


def changed_statements(repo, converter_files) -> dict[str, set[tuple[int, int]]]:
    """Per converter file, the head statements a PR changed; where it only deleted lines, the statement right after
    the deletion point (a test that runs it ran where the deleted code used to run: a removed ``elif`` branch)."""
    by_path = {f.path: f for f in repo.last_diff.files}
    out = {}
    for rel in converter_files:
        if rel not in by_path:
            continue
        ch = by_path[rel]
        text = repo.text(rel, "head") or ""
        spans = changed_statement_spans(text, set(ch.added))
        for point in ch.deletion_points(text):  # (keys: the head lines)
            spans |= changed_statement_spans(text, {point}) or changed_statement_spans(text, {point - 1})
        out[rel] = spans
    return out


def _ran(span: tuple[int, int], lines) -> bool:
    return any(span[0] <= ln <= span[1] for ln in lines)


def reaches(coverages: list[dict], head_root: Path, converter_files, repo) -> bool:
    """Did any of these coverage records run a changed statement?"""
    test = reach_test(head_root, converter_files, repo)
    return any(test(cov) for cov in coverages)


def reach_test(head_root: Path, converter_files, repo) -> Callable[[dict], bool]:
    """A test of one coverage record: did it run a changed statement? (The spans are computed once.)"""
    ran = statements_run(head_root, converter_files, repo)
    return lambda cov: bool(ran(cov))


def statements_run(head_root: Path, converter_files, repo) -> Callable[[dict], frozenset]:
    """The changed statements one coverage record ran, as (file, span) pairs: its way through the changed code.
    (The spans are computed once.)"""
    changed = {str((head_root / rel).resolve()): spans
               for rel, spans in changed_statements(repo, converter_files).items()}

    def ran(cov: dict) -> frozenset:
        return frozenset((path, sp) for path, spans in changed.items() for sp in spans
                         if _ran(sp, cov.get(path, ())))
    return ran


def blob(repo, rev: str, rel: str) -> str | None:
    from dlci.diff import git
    proc = git.run(repo.path, "rev-parse", f"{rev}:{rel}", timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else None


def summary(campaign, head_root: Path, converter_files, repo, cache: CoverageCache) -> dict:
    """Which changed statements the instances ran, and which none did; the runs are cached for later PRs."""
    changed = changed_statements(repo, converter_files)
    reached: dict[str, set[tuple[int, int]]] = {rel: set() for rel in changed}
    reaching = set()
    per_blob: dict[str, dict[str, list[int]]] = {}
    for (iid, target), cov in campaign.coverage.items():
        for rel in changed:
            lines = cov.get(str((head_root / rel).resolve()))
            if not lines:
                continue
            per_blob.setdefault(rel, {})[f"{iid}@{target}"] = lines
            hit = {sp for sp in changed[rel] if _ran(sp, lines)}
            if hit:
                reached[rel] |= hit
                reaching.add(iid)
    for rel, runs in per_blob.items():
        b = blob(repo, repo.head, rel)
        if b:
            cache.merge(b, runs)
    from dlci.diff.regions import innermost, regions
    gaps = []
    for rel, lines in changed.items():
        regs = regions(rel, repo.text(rel, "head") or "")
        for first, _last in sorted(lines - reached[rel]):
            r = innermost(regs, first)
            gaps.append({"file": rel, "line": first, "region": r.name if r else None})
    return {"traced_files": converter_files, "changed_statements": sum(len(v) for v in changed.values()),
            "reached_statements": sum(len(v) for v in reached.values()), "instances_reaching": len(reaching),
            "unreached": gaps}


COLD_DIRECT_EARLY = 2  # instances of each directly touched operator that none of the hot ones stands for, brought up


def edited_lines_first(repo, converter_files, cache: CoverageCache, first_ops: frozenset[str] = frozenset()):
    """An order for the diff-selected instances: OPERA's diversity order, those known (from cached coverage of the
    base revision's files) to run the changed lines first, then those of ``first_ops`` (the operators whose own
    converter or map entry the diff changed, ahead of those only reached through a changed helper): see
    :func:`hot_first`."""
    hot: set[str] = set()
    by_path = {f.path: f for f in repo.last_diff.files}
    for rel in converter_files:
        ch = by_path.get(rel)
        if ch is None or not ch.old_path:
            continue
        b = blob(repo, repo.base, ch.old_path)
        runs = cache.load(b) if b else {}
        edited = set(ch.removed) | {h.old_start for h in ch.hunks} | {h.old_start + 1 for h in ch.hunks}
        hot |= {key.split("@", 1)[0] for key, lines in runs.items() if edited & set(lines)}
    return lambda instances: hot_first(instances, hot, first_ops)


def hot_first(instances, hot: set[str], first_ops: frozenset[str] = frozenset()) -> list:
    """The instances in OPERA's diversity order, ``hot`` ones (ids known to run the edited lines) first, then those of
    ``first_ops``, then one of each variant kind, then the rest.

    A directly touched operator none of the hot instances stands for gets its first COLD_DIRECT_EARLY instances
    among the hot ones, one after each hot instance: a PR that edits a helper many operators run and one operator's
    own registration warms the cache with the many, and their hot instances had filled a short budget before the
    one operator's first test (a reverted bucketize fix, missed with a warm cache)."""
    ranked = balanced(list(instances))
    # one case of each variant kind early: the way of presenting an operator that reaches the change is not
    # known before one of its cases runs (then dlci.campaign.execution.Steered follows it)
    kinds, first = set(), set()
    for inst in ranked:
        kind = (inst.origin.source, variant_kind(inst))
        if kind[1] and kind not in kinds:
            kinds.add(kind)
            first.add(inst.id)
    hot_list = [i for i in ranked if i.id in hot]
    warm_ops = {op for i in hot_list for op in instance_ops(i.op)}
    direct = [i for i in ranked if i.id not in hot and instance_ops(i.op) & first_ops]
    direct_ids = {i.id for i in direct}
    early, taken = [], {}
    for i in direct:
        if not instance_ops(i.op) & warm_ops and taken.get(i.op, 0) < COLD_DIRECT_EARLY:
            taken[i.op] = taken.get(i.op, 0) + 1
            early.append(i)
    head = []
    for k, i in enumerate(hot_list):
        head.append(i)
        if k < len(early):
            head.append(early[k])
    head += early[len(hot_list):]
    placed = {i.id for i in head}
    rest = [i for i in ranked if i.id not in placed and i.id not in hot]
    return (head + [i for i in direct if i.id not in placed]
            + [i for i in rest if i.id in first and i.id not in direct_ids]
            + [i for i in rest if i.id not in first and i.id not in direct_ids])
