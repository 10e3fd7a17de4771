"""Network generation (the paper's input mutator): a random digraph, the model-level mutations on it, blocks placed
on its nodes by in-degree, shapes and parameters computed block by block, the source-level mutations, and the
frameworks' own validation before anything runs.

Digraphs come from two random graph models: Watts-Strogatz (a ring lattice with rewiring, oriented from lower to
higher index so it is acyclic) and the paper's residual-network model RN(k, p, n). The mutations, with ``r`` their
probability parameter and E(g) the node count:

- GEA (graph edges addition) adds ceil(E(g)*r) edges; GER (graph edges removal) deletes floor(E(g)*r) edges;
- BNA (block nodes addition) duplicates nodes with probability r — a node of the digraph (its block again, same
  inputs), and an operator inside a subgraph block (applied twice where it keeps its shape);
- BNR (block nodes removal) removes nodes with probability r — a node of the digraph, and an operator inside a
  subgraph block (its readers read its input: a structure one step away from what a fusion pattern matches);
- TSM (tensor shape mutation) draws another input shape (rank 1 to 5, odd and unit sizes) instead of the default;
- PM (parameter mutation) changes one parameter of each block beyond its drawn setting (an attribute value next to
  the ones the node tests use, another template choice).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from dlci.fuzz.build import VALUE_LIMIT, Builder
from dlci.fuzz.block import Block
from dlci.fuzz.corpus import OUT_DEGREES, Corpus, params_key
from dlci.models.graph import Graph, GraphError, Value

MUTATIONS = ("GEA", "GER", "BNA", "BNR", "TSM", "PM")
MODEL_LEVEL = ("GEA", "GER", "BNA", "BNR")
DEFAULT_SHAPE = (1, 4, 8, 8)
MAX_IN = 3
CONSTANT_SOURCE = 0.25  # a node without inputs reads a constant instead of the network input this often


@dataclass
class NodeFeature:
    """What the coverage criteria read from one node of a generated graph."""
    op: str
    in_degree: int
    out_degree: int
    successors: tuple[str, ...]  # operator types its outputs flow to
    vector: str  # input shapes and parameters (SPC)


@dataclass
class Generated:
    graph: Graph
    inputs: list[np.ndarray]
    blocks: list[str]
    mutations: list[str]
    features: list[NodeFeature]
    placed: int = 0
    dropped: int = 0  # digraph nodes whose block could not be placed (their input passes through)
    note: str = ""


@dataclass
class Digraph:
    n: int
    edges: set[tuple[int, int]] = field(default_factory=set)

    def preds(self, j: int) -> list[int]:
        return sorted(i for i, k in self.edges if k == j)

    def succs(self, i: int) -> list[int]:
        return sorted(k for j, k in self.edges if j == i)


# -- random graph models -----------------------------------------------------------------------------------------

def rn_graph(k: int, p: float, n: int, rng: np.random.Generator) -> Digraph:
    """RN(k, p, n): nodes 0..n-1 in a line; each node i with fewer than k neighbours gets, k - k_i times, an edge
    to a later node j that has fewer than k neighbours, with probability p (residual connections)."""
    g = Digraph(n, {(i, i + 1) for i in range(n - 1)})
    deg = [0] * n
    for i, j in g.edges:
        deg[i] += 1
        deg[j] += 1
    for i in range(n):
        for _ in range(max(0, k - deg[i])):
            later = [j for j in range(i + 2, n) if deg[j] < k and (i, j) not in g.edges]
            if later and rng.random() < p:
                j = later[int(rng.integers(len(later)))]
                g.edges.add((i, j))
                deg[i] += 1
                deg[j] += 1
    return g


def ws_graph(k: int, p: float, n: int, rng: np.random.Generator) -> Digraph:
    """Watts-Strogatz: a ring lattice of n nodes, each joined to its k//2 nearest on either side, each edge
    rewired with probability p; oriented from the lower index to the higher (acyclic)."""
    half = max(1, k // 2)
    und: set[tuple[int, int]] = set()
    for i in range(n):
        for s in range(1, half + 1):
            j = (i + s) % n
            if i != j:
                und.add((min(i, j), max(i, j)))
    out: set[tuple[int, int]] = set()
    for i, j in sorted(und):
        if rng.random() < p and n > 2:
            choices = [m for m in range(n) if m != i and (min(i, m), max(i, m)) not in out]
            if choices:
                j = choices[int(rng.integers(len(choices)))]
        out.add((min(i, j), max(i, j)))
    return Digraph(n, out)


# -- model-level mutations on the digraph -------------------------------------------------------------------------

def gea(g: Digraph, r: float, rng) -> int:
    added = 0
    for _ in range(math.ceil(g.n * r)):
        cands = [(i, j) for i in range(g.n) for j in range(i + 1, g.n) if (i, j) not in g.edges
                 and len(g.succs(i)) < max(OUT_DEGREES) and len(g.preds(j)) < MAX_IN]
        if not cands:
            break
        g.edges.add(cands[int(rng.integers(len(cands)))])
        added += 1
    return added


def ger(g: Digraph, r: float, rng) -> int:
    removed = 0
    for _ in range(math.floor(g.n * r)):
        if not g.edges:
            break
        e = sorted(g.edges)[int(rng.integers(len(g.edges)))]
        g.edges.discard(e)
        removed += 1
    return removed


def bna(g: Digraph, blocks: list[int], r: float, rng) -> None:
    """Duplicate each node with probability r: the copy (same block) right after it, with the same inputs."""
    i = 0
    while i < g.n:
        if rng.random() < r and g.n < 16:
            # shift every index after i by one, insert i+1 as a copy of i
            g.edges = {(a + (a > i), b + (b > i)) for a, b in g.edges}
            g.edges |= {(a, i + 1) for a, b in list(g.edges) if b == i}
            g.edges |= {(i + 1, b) for a, b in list(g.edges) if a == i and b > i + 1}
            blocks.insert(i + 1, blocks[i])
            g.n += 1
            i += 1
        i += 1


def bnr(g: Digraph, blocks: list[int], r: float, rng) -> None:
    """Remove each node with probability r (at least one stays), with its edges; its inputs flow on to its
    outputs' readers, so the graph stays connected."""
    i = 0
    while i < g.n and g.n > 1:
        if rng.random() < r:
            preds, succs = g.preds(i), g.succs(i)
            g.edges = {(a, b) for a, b in g.edges if i not in (a, b)}
            g.edges |= {(a, b) for a in preds for b in succs}
            g.edges = {(a - (a > i), b - (b > i)) for a, b in g.edges}
            del blocks[i]
            g.n -= 1
            continue
        i += 1


# -- the generator -------------------------------------------------------------------------------------------------

def input_shape(mutated: bool, rng) -> tuple[int, ...]:
    if not mutated:
        return DEFAULT_SHAPE
    sizes = (1, 2, 3, 4, 5, 7, 8, 12, 16)
    while True:
        r = int(rng.choice([1, 2, 3, 3, 4, 4, 4, 5]))
        dims = tuple(int(rng.choice(sizes)) for _ in range(r))
        if 4 <= math.prod(dims) <= 2048:
            return dims


def generate(corpus: Corpus, chosen: list[Block], mutations: list[str], rng: np.random.Generator, *,
             r: float | None = None, name: str = "fuzz", must: set[str] | None = None) -> Generated:
    """One network from the blocks ``chosen`` (at least one; the MCTS path or a random draw) under the mutations
    ``mutations``. ``must``: operators every graph has to contain (a PR's touched operators; a graph without one is
    a GraphError). Raises GraphError when no valid network comes out."""
    if not chosen:
        raise GraphError("no block chosen")
    r = float(rng.uniform(0.1, 0.5)) if r is None else r
    n = max(len(chosen), int(rng.integers(len(chosen), len(chosen) + 3)))
    k = int(rng.choice([2, 3, 4]))
    dg = rn_graph(k, float(rng.uniform(0.2, 0.8)), n, rng) if rng.random() < 0.5 else \
        ws_graph(k, float(rng.uniform(0.1, 0.5)), n, rng)
    order = [i % len(chosen) for i in range(n)]
    if "GEA" in mutations:
        gea(dg, r, rng)
    if "GER" in mutations:
        ger(dg, r, rng)
    if "BNA" in mutations:
        bna(dg, order, r, rng)
    if "BNR" in mutations:
        bnr(dg, order, r, rng)
    blocks = [chosen[i] for i in order]
    x = Value("x", input_shape("TSM" in mutations, rng))
    b = Builder([x], values=[np.random.default_rng(int(rng.integers(2**31))).standard_normal(x.shape)
                             .astype(np.float32)])
    outs: list[str | None] = [None] * dg.n
    placed = dropped = 0
    used: list[str] = []
    for i in range(dg.n):
        block = blocks[i]
        preds = dg.preds(i)
        if len(preds) > max(block.in_degrees):  # too many in-edges for the block: the latest ones go
            for a in preds[max(block.in_degrees):]:
                dg.edges.discard((a, i))
            preds = preds[:max(block.in_degrees)]
        source = "x"
        if not preds and i > 0 and rng.random() < CONSTANT_SOURCE:  # a subgraph of constants: constant folding
            source = b.const(rng.standard_normal(x.shape).astype(np.float32), "src")
        xs = [outs[a] for a in preds if outs[a] is not None] or [source]
        while len(xs) < min(block.in_degrees):
            xs.append("x" if xs[-1] != "x" else xs[0])
        out = _place(b, block, xs, rng, "PM" in mutations)
        if out is None:
            dropped += 1
            out = xs[0] if xs[0] != "x" else None
        else:
            placed += 1
            used.append(block.name)
        outs[i] = out
    if not placed:
        raise GraphError("no block could be placed")
    if {"BNA", "BNR"} & set(mutations):
        _mutate_inside(b, "BNA" in mutations, "BNR" in mutations, r, rng)
    graph = _finish(b, name)
    if must and not must & set(graph.operators()):
        raise GraphError(f"the graph lost every one of {', '.join(sorted(must))}")
    inputs = b.input_values()
    _check_values(graph, inputs)
    return Generated(graph, inputs, used, sorted(mutations), features(graph), placed, dropped)


def _place(b: Builder, block: Block, xs: list[str], rng, mutate: bool) -> str | None:
    """The block's output, placed with drawn (and, under PM, mutated) parameters; a few draws before giving up."""
    for attempt in range(3):
        params = block.draw(rng)
        if mutate:
            params = block.mutate(params, rng)
        mark = b.mark()
        b.block = block.name
        try:
            return block.build(b, list(xs), params, rng)
        except GraphError:
            b.rollback(mark)
        except (ValueError, IndexError, ZeroDivisionError):  # a template meeting a shape it cannot use
            b.rollback(mark)
        finally:
            b.block = ""
    return None


def _mutate_inside(b: Builder, add: bool, remove: bool, r: float, rng) -> None:
    """BNA/BNR inside subgraph blocks: an operator whose output keeps its first input's shape applied twice, or
    removed (its readers read its input)."""
    cons: dict[str, int] = {}
    for n in b.nodes:
        for x in n.inputs:
            cons[x] = cons.get(x, 0) + 1
    k = 0
    while k < len(b.nodes):
        n = b.nodes[k]
        inner = n.block not in ("", "adapter") and "+" in n.block
        data = [x for x in n.inputs if x and x not in b.constants]
        keeps_shape = len(n.outputs) == 1 and data and b.types.get(data[0]) == b.types.get(n.outputs[0])
        if inner and keeps_shape and rng.random() < r:
            if remove and (not add or rng.random() < 0.5):
                y, src = n.outputs[0], data[0]
                for m in b.nodes[k + 1:]:
                    m.inputs = [src if v == y else v for v in m.inputs]
                del b.nodes[k]
                continue
            if add and len(n.inputs) >= 1 and n.inputs[0] == data[0]:
                copy_out = b.fresh(n.op.lower())
                twin = type(n)(n.op, [n.outputs[0]] + list(n.inputs[1:]), [copy_out], dict(n.attrs), n.domain,
                               "", n.block)
                for m in b.nodes[k + 1:]:
                    m.inputs = [copy_out if v == n.outputs[0] else v for v in m.inputs]
                b.types[copy_out] = b.types[n.outputs[0]]
                b.nodes.insert(k + 1, twin)
                k += 2
                continue
        k += 1


def _finish(b: Builder, name: str) -> Graph:
    """The graph: nodes nobody reads are outputs (sinks), nodes that feed nothing observable are dropped."""
    read = {x for n in b.nodes for x in n.inputs if x}
    outputs = [n.outputs[0] for n in b.nodes if n.outputs and n.outputs[0] and n.outputs[0] not in read
               and b.types.get(n.outputs[0], ((), ""))[1] == "float32"]
    g = b.graph(outputs, name)
    live = g.ancestors(outputs)
    g.nodes = [n for k, n in enumerate(g.nodes) if k in live]
    used = {x for n in g.nodes for x in n.inputs} | {v["$array"] for n in g.nodes for v in n.attrs.values()
                                                      if isinstance(v, dict) and "$array" in v}
    g.constants = {k: v for k, v in g.constants.items() if k in used}
    g.check()
    return g


def _check_values(graph: Graph, inputs: list[np.ndarray]) -> None:
    """The reference must compute every value finite and moderate, in float32 and in float64 (the oracle's fp64
    arbitration); else the graph tests overflow or an undefined value, not the compiler."""
    try:
        values = graph.evaluate(inputs, intermediate=True)
        graph.evaluate(inputs, float64=True)
    except GraphError:
        raise
    except Exception as e:  # noqa: BLE001 - onnx.reference has no kernel, or the op rejects the values
        raise GraphError(f"the reference cannot evaluate it: {type(e).__name__}: {str(e)[:120]}") from None
    types = graph.value_types()
    for name, v in values.items():
        if name in types and tuple(v.shape) != types[name][0]:
            # ONNX's shape inference and its reference implementation disagree: the graph means two things
            raise GraphError(f"value {name!r}: inferred shape {list(types[name][0])}, computed {list(v.shape)}")
        if v.dtype.kind == "f" and v.size and (not np.all(np.isfinite(v)) or np.max(np.abs(v)) > VALUE_LIMIT):
            raise GraphError(f"value {name!r} is not finite or exceeds {VALUE_LIMIT:g}")


def features(graph: Graph) -> list[NodeFeature]:
    """Per node: operator, in-degree (data inputs), out-degree (edges to readers), the operators it feeds and its
    shapes-and-parameters vector."""
    types = graph.value_types()
    cons = graph.consumers()
    out = []
    for k, n in enumerate(graph.nodes):
        data = graph.data_inputs(k)
        readers = [m for x in n.outputs if x for m in cons.get(x, [])]
        vector = params_key({"in": [list(types[x][0]) for x in n.inputs if x and x in types], "attrs": n.attrs})
        out.append(NodeFeature(n.op, max(1, len(data)), len(readers),
                               tuple(sorted({graph.nodes[m].op for m in readers})), vector))
    return out
