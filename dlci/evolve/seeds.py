"""Where the search starts: seed instances, each a fixed graph whose inputs and weights the search varies.

- a user's models (``--model``): ONNX files and ``FILE.py:FUNCTION`` PyTorch models, read as ``dlci test --model``
  reads them (dlci.sources.model_file), bad input a usage error;
- networks of the graph fuzzer (``--networks N``): drawn by its generator from its block corpus with random block
  choices, validated as the fuzzer validates them (dlci.fuzz: shape inference, values finite and moderate, a second
  reading of ONNX), so the search starts from graphs the fuzzer would run;
- migrated multi-layer modules (``--modules``): PyTorch's own module tests (the module_db source) of the modules made
  of several layers — attention, transformer layers, recurrent layers — with their weights.
"""
from __future__ import annotations

import numpy as np

from dlci.instance import Instance

MULTI_LAYER_MODULES = ("nn::TransformerEncoderLayer", "nn::TransformerDecoderLayer", "nn::MultiheadAttention",
                       "nn::LSTM", "nn::GRU", "nn::RNN")
NETWORK_ATTEMPTS = 50  # generator draws per network wanted before giving up


def from_models(paths: list[str], seed: int = 0) -> list[Instance]:
    from dlci.sources.model_file import model_instance
    return [model_instance(path, None, seed) for path in paths]


def from_fuzzer(n: int, seed: int = 0, max_blocks: int = 3) -> list[Instance]:
    """``n`` networks of the graph fuzzer's generator (random blocks and mutations), each a localised graph."""
    from dlci.fuzz.corpus import load_corpus
    from dlci.fuzz.coverage import Coverage
    from dlci.fuzz.generate import generate
    from dlci.fuzz.search import RandomStrategy
    from dlci.fuzz.stream import _witness
    from dlci.models.graph import GraphError, graph_instance
    corpus = load_corpus()
    rng = np.random.default_rng(seed)
    chooser = RandomStrategy(corpus, Coverage(corpus), rng, max_blocks=max_blocks)
    out: list[Instance] = []
    for k in range(n * NETWORK_ATTEMPTS):
        if len(out) >= n:
            break
        choice = chooser.choose()
        try:
            gen = generate(corpus, choice.blocks, choice.mutations, rng, name=f"seed{len(out) + 1}")
            _witness(gen)
        except GraphError:
            continue
        if not any(a.dtype.kind == "f" for a in gen.inputs):
            continue
        out.append(graph_instance(gen.graph, gen.inputs, source="evolve", seed=seed,
                                  test=f"fuzzer network {len(out) + 1}: " + " | ".join(gen.blocks)))
    return out


def from_modules(limit_per_op: int = 1, progress=lambda msg: None) -> list[Instance]:
    from dlci.sources.selection import gather
    return [i for i in gather(["module_db"], list(MULTI_LAYER_MODULES), limit_per_op=limit_per_op, progress=progress)
            if any(k.startswith("state:") for k in i.arrays)]
