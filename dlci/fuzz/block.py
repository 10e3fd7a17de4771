"""A block of the block corpus (dlci.fuzz.corpus): what a generated network is made of, an operator block or a
subgraph block (dlci.fuzz.templates), with its allowed in-degrees and inner edges.
"""
from __future__ import annotations

import numpy as np

from dlci.fuzz.build import Builder


class Block:
    """A corpus entry. ``draw`` picks parameters, ``mutate`` changes one (the paper's parameter mutation),
    ``build`` adds the block's nodes for the given data inputs and returns its output value."""
    name: str
    ops: tuple[str, ...]
    in_degrees: tuple[int, ...]
    inner_edges: tuple[tuple[int, int], ...] = ()
    kind = "operator"

    def draw(self, rng: np.random.Generator) -> dict:
        raise NotImplementedError

    def mutate(self, params: dict, rng: np.random.Generator) -> dict:
        raise NotImplementedError

    def build(self, b: Builder, xs: list[str], params: dict, rng: np.random.Generator) -> str:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind, "ops": list(self.ops), "in_degrees": list(self.in_degrees),
                "inner_edges": [list(e) for e in self.inner_edges]}
