"""Which instances run first: OPERA's diversity order, with the operators a PR touched in front.

Operator level: an operator's score is the number of its instances in the library tests divided by the number in the
target's own tests (when known), so operators the target tests least relative to how much material exists come
first; each pick of an operator divides its score, which interleaves operators instead of exhausting one.
Instance level: an instance is worth the value-space partitions (single and pairwise) it adds to what its operator
already covers. A lazy max-heap keeps selection O(n log n) in practice.
"""
from __future__ import annotations

import heapq
import itertools
from collections import Counter, defaultdict
from typing import Iterable, Sequence

from dlci.instance import Instance, features


def instance_features(inst: Instance) -> frozenset[str]:
    single = features(inst)
    pairs = {f"{a}&{b}" for a, b in itertools.combinations(sorted(single), 2)}
    return single | pairs


def operator_scores(instances: Sequence[Instance], target_counts: dict[str, int] | None = None) -> dict[str, float]:
    counts = Counter(i.op for i in instances)
    target_counts = target_counts or {}
    return {op: n / max(1, target_counts.get(op, 0)) for op, n in counts.items()}


def prioritize(instances: Sequence[Instance], *, touched: Iterable[str] = (),
               target_counts: dict[str, int] | None = None) -> list[Instance]:
    """All instances, most valuable first. ``touched`` operators (from a PR diff) always come first."""
    touched = set(touched)
    scores = operator_scores(instances, target_counts)
    top = max(scores.values(), default=1.0)
    covered: dict[str, set[str]] = defaultdict(set)
    picks: Counter = Counter()
    feats = [instance_features(i) for i in instances]

    def key(idx: int) -> tuple:
        inst = instances[idx]
        novelty = len(feats[idx] - covered[inst.op])
        # log-free normalisation keeps the operator score in (0, 1]; +1 so a zero-novelty instance still runs
        value = (scores[inst.op] / top) * (novelty + 1) / (1 + picks[inst.op])
        return (0 if inst.op in touched else 1, -value, idx)

    heap = [key(i) for i in range(len(instances))]
    heapq.heapify(heap)
    order: list[Instance] = []
    while heap:
        stale = heapq.heappop(heap)
        fresh = key(stale[2])
        if heap and fresh > heap[0]:
            heapq.heappush(heap, fresh)  # its value dropped since it was pushed: re-queue and look again
            continue
        inst = instances[stale[2]]
        order.append(inst)
        covered[inst.op] |= feats[stale[2]]
        picks[inst.op] += 1
    return order


def balanced(instances: Sequence[Instance], *, touched: Iterable[str] = (),
             target_counts: dict[str, int] | None = None) -> list[Instance]:
    """OPERA order within each source, sources taken in turn: operator scores are counts of test material, so
    without this the source with the most instances per operator (OpInfo) would starve the others within a
    budget. Touched operators still come first overall."""
    touched = set(touched)
    groups: dict[str, list[Instance]] = defaultdict(list)
    for inst in instances:
        groups[inst.origin.source].append(inst)
    queues = [prioritize(g, touched=touched, target_counts=target_counts) for _, g in sorted(groups.items())]
    first = [i for q in queues for i in q if i.op in touched]
    queues = [[i for i in q if i.op not in touched] for q in queues]
    merged = list(first)
    for row in itertools.zip_longest(*queues):
        merged.extend(i for i in row if i is not None)
    return merged


def coverage(instances: Iterable[Instance]) -> dict[str, int]:
    """How many distinct value-space partitions the instances cover, per operator (diversity measure)."""
    cov: dict[str, set[str]] = defaultdict(set)
    for inst in instances:
        cov[inst.op] |= features(inst)
    return {op: len(f) for op, f in cov.items()}


def apfd(order: Sequence[str], faults: dict[str, set[str]]) -> float:
    """Average Percentage of Faults Detected for a test order.

    ``order``: test ids in execution order; ``faults``: test id -> the faults it detects. Faults no test detects are
    ignored. 1.0 is ideal; a random order of many tests scores about 0.5.
    """
    n = len(order)
    all_faults = set().union(*faults.values()) if faults else set()
    m = len(all_faults)
    if n == 0 or m == 0:
        return 0.0
    first: dict[str, int] = {}
    for pos, test in enumerate(order, start=1):
        for fault in faults.get(test, ()):
            first.setdefault(fault, pos)
    return 1.0 - sum(first.get(f, n) for f in all_faults) / (n * m) + 1.0 / (2 * n)
