"""Genetic search over a model's inputs and weights for inconsistencies (the Audee paper): where the graph fuzzer
(dlci.fuzz) varies structure, this varies the numbers flowing through a fixed graph, to widen the gap between a
target and the float64 reference until the oracle sees it; dlci.localise then says which operator, which of
its parameters, and how much of the final error it accounts for.

The data flow: ``seeds`` (a user's models — ONNX files and ``FILE.py:FUNCTION`` PyTorch models —, networks from the
graph fuzzer's generator, migrated multi-layer modules) -> ``genome`` (the float inputs and weights of each seed, their
value domains, candidates and their validity) -> ``search`` (GA or random sampling) -> ``stream`` (the campaign's
test source: candidates as tests, outcomes back) -> fitness (dlci.oracles.fitness: measured in the worker, scored in
the parent). Every candidate is an ordinary dlci test: sandboxed workers, fp64 reference, localisation, confirmation,
dedup by the culprit's signature, reduction, reproducers.

:func:`run` is ``dlci evolve``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dlci.campaign import Campaign, RunOptions
from dlci.evolve.search import STRATEGIES, Settings
from dlci.instance import Instance
from dlci.report.document import Report

__all__ = ["EvolveRequest", "STRATEGIES", "Settings", "run"]


@dataclass
class EvolveRequest:
    targets: dict                  # name -> Target
    options: RunOptions
    seeds: list[Instance]
    strategy: str = "ga"
    seed: int = 0
    settings: Settings = field(default_factory=Settings)


def run(req: EvolveRequest) -> Report:
    """Search within the budget and write the report (findings.json with the search in ``stats.evolve``)."""
    from dlci.campaign import run_tests
    from dlci.evolve.stream import EvolveStream
    campaign = Campaign({}, dict(req.targets))
    stream = EvolveStream(campaign, req.targets, req.seeds, req.strategy, np.random.default_rng(req.seed),
                          req.settings, req.options.progress)
    campaign.extra_stats["evolve"] = stream.stats
    return run_tests(campaign, stream, req.options)
