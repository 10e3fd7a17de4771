"""The search as a campaign's test source: each seed's candidates are made when a worker is free, so that the
fitness of the last candidates steers the next (Audee's Algorithm 1, one population per seed):

    draw the next candidate's genes (GA or random) -> a valid test? (dlci.evolve.genome) -> its tests, one per
    target still open on this seed -> outcomes -> fitness (dlci.oracles.fitness) -> back into the population

Seeds take turns. A target that fails on a seed's candidate (an inconsistency or a crash: the campaign confirms it,
localises it to its operator and deduplicates it by the culprit) is done for that seed, so the search goes on for the
targets that have not failed there yet; a target that cannot run the seed itself (unsupported, invalid) is dropped for
it. A seed with no target left is done; when every seed is, testing stops before the budget does.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from dlci.campaign.stages import Test
from dlci.oracles.fitness import score
from dlci.evolve.genome import Genome
from dlci.evolve.search import Population, Settings
from dlci.instance import Instance
from dlci.outcome import CRASH, INCONSISTENT, PASS

DRAWS = 20  # rejected draws in a row before a seed is set aside (no valid candidate comes of it)


@dataclass
class _Seed:
    instance: Instance
    population: Population
    open: set[str]
    found: dict[str, dict] = field(default_factory=dict)   # target -> when and on which candidate it failed
    dropped: dict[str, str] = field(default_factory=dict)  # target -> why it cannot run this seed
    rejected: Counter = field(default_factory=Counter)
    candidates: int = 0
    stuck: bool = False


@dataclass
class _Pending:
    seed: _Seed
    values: dict
    number: int
    left: set[str]
    measures: dict[str, dict] = field(default_factory=dict)
    failed: bool = False


class EvolveStream:
    """Iterate it for tests; the campaign calls :meth:`observe` with each outcome."""

    self_scheduling = True  # dlci.campaign.execution.execute takes the tests in this order, as they come

    def __init__(self, campaign, targets: dict, seeds: list[Instance], strategy: str, rng: np.random.Generator,
                 settings: Settings | None = None, progress=lambda msg: None):
        self.campaign, self.targets, self.strategy, self.progress = campaign, targets, strategy, progress
        self.t0 = time.monotonic()
        self.seeds = []
        for inst in seeds:
            open_ = {name for name, t in targets.items() if inst.framework in t.frameworks}
            pop = Population(Genome(inst), strategy, rng, settings or Settings())
            self.seeds.append(_Seed(inst, pop, open_))
        self.pending: dict[str, _Pending] = {}
        self.turn = 0
        self.timeline: list[dict] = []

    def __iter__(self):
        while True:
            active = [s for s in self.seeds if s.open and not s.stuck]
            if not active:
                return
            s = active[self.turn % len(active)]
            self.turn += 1
            drawn = self._draw(s)
            if drawn is None:
                continue
            inst, values = drawn
            self.campaign.instances[inst.id] = inst
            targets = sorted(s.open)
            self.pending[inst.id] = _Pending(s, values, s.candidates, set(targets))
            for name in targets:
                yield Test(inst, name)

    def _draw(self, s: _Seed):
        for retry in range(DRAWS):
            values = s.population.next_values(retry)
            inst = s.population.genome.candidate(values, f"{self.strategy} candidate {s.candidates + 1}")
            if inst.id in self.campaign.instances:
                s.rejected["the same as an earlier candidate"] += 1
                continue
            why = s.population.genome.check(inst)
            if why:
                s.rejected[why] += 1
                continue
            s.candidates += 1
            return inst, values
        s.stuck = True
        self.progress(f"evolve: no valid candidate of {s.instance.origin.test} in {DRAWS} draws "
                      f"({', '.join(r for r, _ in s.rejected.most_common(2))})")
        return None

    def observe(self, test: Test, outcome, new_signature: bool) -> None:
        p = self.pending.get(test.instance.id)
        if p is None:
            return
        s, target = p.seed, test.target
        p.left.discard(target)
        if outcome.status in (CRASH, INCONSISTENT):
            p.failed = True
            if target not in s.found:
                s.found[target] = {"seconds": round(time.monotonic() - self.t0, 1), "candidate": p.number,
                                   "operator": outcome.op, "symptom": outcome.symptom}
                self.progress(f"evolve: {target} fails on candidate {p.number} of {s.instance.origin.test} "
                              f"({outcome.op}: {outcome.symptom})")
            s.open.discard(target)
        elif outcome.status == PASS:
            p.measures[target] = outcome.fitness or {}
        elif p.number == 1:  # the target cannot run the seed itself: nothing to search for there
            s.dropped[target] = f"{outcome.status}: {outcome.symptom}"
            s.open.discard(target)
        if p.left:
            return
        del self.pending[test.instance.id]
        if not p.failed:
            s.population.add(p.values, score(p.measures))
            self.timeline.append({"t": round(time.monotonic() - self.t0, 1), "seed": self.seeds.index(s),
                                  "best": round(s.population.top or 0.0, 4)})

    def stats(self) -> dict:
        settings = self.seeds[0].population.settings.__dict__ if self.seeds else {}
        return {"strategy": self.strategy, "settings": dict(settings), "seeds": [_seed_stats(s) for s in self.seeds],
                "first_failure_seconds": min((f["seconds"] for s in self.seeds for f in s.found.values()),
                                             default=None),
                "timeline": self.timeline[-200:]}


def _seed_stats(s: _Seed) -> dict:
    genes = s.population.genome.genes
    return {"seed": s.instance.origin.test, "operator": s.instance.op, "genes": len(genes),
            "gene_elements": int(sum(g.base.size for g in genes)), "candidates": s.candidates,
            "scored": s.population.scored,
            "best_fitness": None if s.population.top is None else round(s.population.top, 4),
            "found": s.found, "open": sorted(s.open), "dropped": s.dropped,
            "rejected": dict(s.rejected.most_common(6)), **({"stuck": True} if s.stuck else {})}
