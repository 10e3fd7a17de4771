"""How the next candidate of a seed is made: Audee's genetic algorithm, or random sampling (the baseline).

**ga** (Algorithm 1 of the paper, steady-state so that workers never wait for a generation to finish): the
population starts from the seed and copies of it with Cauchy noise added (Audee's initial population); once two
candidates are scored, each new one is bred from two parents drawn from the best ``survivors`` — gene-wise crossover
(each element from the first parent with probability ``crossover``), then, with probability ``mutation``, Cauchy
noise on a share of its elements — and the population keeps its ``size`` fittest. **random** draws every candidate
as the initial population is drawn (the seed plus the same Cauchy noise), with no selection and no crossover: the
same sampler without the evolution, so a difference between the two is the GA's.

Cauchy noise (heavy tails: now and then a large step, as the paper's "unrestricted mutation") is scaled per element
by its own magnitude, never below the seed gene's spread (dlci.evolve.genome.Gene.scale), and clipped to the gene's
value domain.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dlci.evolve.genome import Genome

STRATEGIES = ("ga", "random")


@dataclass
class Settings:
    size: int = 8            # n: candidates kept
    survivors: int = 4       # m: the fittest, from which parents are drawn
    crossover: float = 0.5   # r1: per element, the first parent's value
    mutation: float = 0.8    # r2: a child is mutated with this probability
    noise: float = 1.0       # Cauchy scale, relative to each element (never below its gene's spread)
    share: float = 0.3       # elements of a gene a mutation touches


@dataclass
class Member:
    values: dict[str, np.ndarray]
    fitness: float


@dataclass
class Population:
    """One seed's search state."""
    genome: Genome
    strategy: str
    rng: np.random.Generator
    settings: Settings = field(default_factory=Settings)
    members: list[Member] = field(default_factory=list)
    drawn: int = 0
    scored: int = 0
    top: float | None = None  # the best fitness scored so far (either strategy)

    def next_values(self, retry: int = 0) -> dict[str, np.ndarray]:
        """The genes of the next candidate (``retry``: how many draws were rejected since the last accepted one;
        each halves the noise)."""
        self.drawn += 1
        seed = self.genome.values()
        if self.drawn == 1:
            return dict(seed)  # the seed itself is the first candidate
        damp = 0.5 ** retry
        if self.strategy == "random" or len(self.members) < 2:
            return self.mutate(seed, damp, always=True)
        best = sorted(self.members, key=lambda m: -m.fitness)[:self.settings.survivors]
        i, j = self.rng.choice(len(best), size=2, replace=len(best) < 2)
        child = self.cross(best[i].values, best[j].values)
        mutate = self.rng.random() < self.settings.mutation or i == j
        return self.mutate(child, damp, always=True) if mutate else child

    def cross(self, a: dict, b: dict) -> dict:
        out = {}
        for key in a:
            mask = self.rng.random(np.shape(a[key])) < self.settings.crossover
            out[key] = np.where(mask, a[key], b[key]).astype(a[key].dtype)
        return out

    def mutate(self, values: dict, damp: float = 1.0, always: bool = False) -> dict:
        out = dict(values)
        genes = self.genome.genes
        if not genes:
            return out
        touched = [g for g in genes if self.rng.random() < 0.5] or [genes[int(self.rng.integers(len(genes)))]]
        for g in touched:
            a = np.asarray(out[g.key], dtype=np.float64)
            where = self.rng.random(a.shape) < self.settings.share
            if not where.any() and a.size:
                where.flat[int(self.rng.integers(a.size))] = True
            # relative to each element's own size (never below the seed's spread): a value can grow by a factor
            # per generation, so the edges of a domain (overflow, an operator's singularity) are within reach
            step = self.settings.noise * damp * np.maximum(np.abs(a), g.scale)
            noise = self.rng.standard_cauchy(a.shape) * step
            out[g.key] = g.clip(np.where(where, a + noise, a))
        return out

    def add(self, values: dict, fitness: float) -> None:
        """A scored candidate joins the population; the least fit beyond ``size`` leave it."""
        self.scored += 1
        self.top = fitness if self.top is None else max(self.top, fitness)
        if self.strategy == "random":
            return
        self.members.append(Member(values, fitness))
        self.members.sort(key=lambda m: -m.fitness)
        del self.members[self.settings.size:]

