"""Graph-based fuzzing of compilers and runtimes (the graph-fuzzing paper): networks of many operators generated
from a block corpus, steered by Monte Carlo tree search toward operator-level coverage, each network a test like any
other (sandboxed workers, fp64 reference, confirmation, dedup, graph reduction, reproducers, known issues).

The data flow: ``corpus`` (blocks from the ONNX node tests and subgraph templates) -> ``search`` (MCTS or random:
which blocks and mutations) -> ``generate`` (digraph, mutations, shapes and parameters, validation; ``build`` holds
the graph as it grows) -> ``coverage`` (OTC, IDC, ODC, SEC, SPC, OLC) -> ``stream`` (the campaign's test source,
rewards back to the search). The graph model itself is dlci.models.graph; a failing network is localised to its
operator in the worker (dlci.localise).

:func:`run` is ``dlci fuzz``; :func:`scan_share` is the fuzz share of ``dlci scan``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dlci.campaign import Campaign, RunOptions
from dlci.report.document import Report

__all__ = ["FuzzRequest", "run", "fuzz_stream"]


@dataclass
class FuzzRequest:
    targets: dict                      # name -> Target
    options: RunOptions
    strategy: str = "mcts"
    seed: int = 0
    blocks: list[str] | None = None    # corpus blocks to use (None: the whole corpus)
    max_blocks: int = 4                # tc1: blocks per network at most (the tree's depth)
    must: set[str] = field(default_factory=set)  # operator types every network contains (a PR's touched ones)
    weights: dict[str, float] | None = None      # OLC weights per criterion


def fuzz_stream(campaign: Campaign, req: FuzzRequest, progress=lambda msg: None):
    """The fuzzer over ``campaign`` (its instances dict receives each network as it is made)."""
    from dlci.fuzz.corpus import load_corpus
    from dlci.fuzz.coverage import Coverage
    from dlci.fuzz.search import make_strategy
    from dlci.fuzz.stream import FuzzStream
    corpus = load_corpus(only=req.blocks)
    coverage = Coverage(corpus, **({"weights": req.weights} if req.weights else {}))
    rng = np.random.default_rng(req.seed)
    use = corpus.restrict(req.must) if req.must else corpus
    strategy = make_strategy(req.strategy, use, coverage, rng, max_blocks=req.max_blocks, must=req.must or None)
    return FuzzStream(campaign, req.targets, use, coverage, strategy, rng, must=req.must or None, progress=progress)


def run(req: FuzzRequest) -> Report:
    """Fuzz within the budget and write the report (findings.json with the coverage in ``stats.fuzz``)."""
    from dlci.campaign import run_tests
    campaign = Campaign({}, dict(req.targets))
    stream = fuzz_stream(campaign, req, req.options.progress)
    campaign.extra_stats["fuzz"] = stream.stats
    return run_tests(campaign, stream, req.options)
