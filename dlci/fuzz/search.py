"""Which blocks and mutations the next network is made of: Monte Carlo tree search (the paper's block chooser) or
uniform random choice (the baseline), both feeding the same generator.

MCTS: each tree node is a block, a path from the root a set of blocks for one network.
- Selection: from the root, children by UCT, potential = v/n + e*sqrt(ln N / n) (v the node's summed reward, n its
  visits, N its parent's), down to a leaf; a node visited tc2 times (3; the paper's is 1) is exhausted (not selected
  again) and the tree goes no deeper than tc1 blocks. A node widens (gets a new child) while it has fewer than
  1 + sqrt(n) children.
- Expansion: the paper takes the lowest-coverage operator not on the path. That operator is often one whose block
  rarely places or has no shapes and parameters left, and it was taken again and again; here the new child is the
  best of a tournament of blocks (10 drawn uniformly) on their expected gain: per operator the discounted mean of
  what networks holding it gained for it (per criterion on one scale, weighted by what is left of the criterion:
  Coverage.balanced), from its room left as an optimistic prior, per relative cost of those networks; plus the
  worth of the edges (operator pairs, SEC) it would form with the path's blocks that no network had yet. Every third
  expansion takes a subgraph block (the least expanded, by the same tournament): they hold operators covered early,
  so their structure would rarely be reached otherwise.
- Simulation: the network is the path's blocks, completed to tc1 blocks by the default policy (the same
  tournament, against the blocks chosen so far), ordered for the out-degrees their output operators lack (the
  generator's first blocks feed most others, its last are sinks), and run on the targets; edge addition and
  removal are added when the network's operator with the fewest out-degrees lacks 2 or 0, the other mutations
  drawn by the bandit.
- Backpropagation: the reward goes to every node on the path: the success ratio of the network's tests (those that
  ran and passed: the paper's success, which keeps one exception from being found again and again) and its
  coverage gain (balanced, per relative cost: the budget is time), plus one for a failure signature seen for the
  first time (two when the failure needs several operators). Visits count when a network is chosen (a virtual loss:
  several networks are in flight at once). Per operator, what the network gained for it, what it cost and a new
  failure signature localised to it go to the operator's estimate (credit, charge, found); an operator failing
  again as already found is charged as a void test (that target tested nothing else of the network).
Mutations: each of the six is a two-armed bandit (with / without), drawn by Thompson sampling on the same reward.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from dlci.fuzz.block import Block
from dlci.fuzz.corpus import Corpus
from dlci.fuzz.coverage import Coverage
from dlci.fuzz.generate import MUTATIONS

STRATEGIES = ("mcts", "random")
TOURNAMENT = 10  # candidates per block choice of the MCTS (tournament selection on the blocks' expected gain)
# tc2, the visits after which a node is not selected again: few (the paper's is 1), so that the tree keeps expanding
# new blocks; at 24 a handful of blocks filled most networks, whose out-degrees and edges were soon all covered
MAX_VISITS = 3
VOID_COST = 3.0  # the relative cost charged to an operator that voided a target's test (unsupported, a known failure)
DECAY = 0.85  # per network an operator is chosen into, the weight its past gains keep (its yield drifts down)


@dataclass
class Choice:
    blocks: list[Block]
    mutations: list[str]
    handle: object = None  # the strategy's own record of the choice (the MCTS path)


class Strategy:
    name = ""

    def __init__(self, corpus: Corpus, coverage: Coverage, rng: np.random.Generator, *, max_blocks: int = 4,
                 must: set[str] | None = None):
        self.corpus, self.coverage, self.rng, self.max_blocks = corpus, coverage, rng, max_blocks
        self.must = must or set()
        self._turn = 0
        self.choices = 0
        self.rewards = 0.0

    def choose(self) -> Choice:
        raise NotImplementedError

    def feedback(self, choice: Choice, reward: float) -> None:
        self.rewards += reward

    def credit(self, choice: Choice, op_gains: dict[str, float]) -> None:
        """What the choice's network gained per operator (balanced scale, :meth:`Coverage.balanced`); empty when
        the network was rejected or added nothing. The baseline ignores it."""

    def charge(self, choice: Choice, cost: float, blame=()) -> None:
        """What the choice's network cost, relative to the mean network (its size, its tests' worker seconds);
        ``blame``: its operators that voided a target's test (turned down for them, or failing as already found).
        The baseline ignores it."""

    def found(self, choice: Choice, ops: set[str], worth: float) -> None:
        """The choice's network brought a new failure signature, localised to ``ops`` (all of the network's when it
        needs several operators), worth ``worth`` on the balanced scale. The baseline ignores it."""

    def _with_must(self, blocks: list[Block]) -> list[Block]:
        """A PR's touched operators: every network holds a block of one of them, the operators taking turns, each
        block holding it taking turns too (its producers and consumers vary with the rest of the choice)."""
        if not self.must:
            return blocks
        ops = sorted(self.must)
        op = ops[self._turn % len(ops)]
        self._turn += 1
        if any(op in b.ops for b in blocks):
            return blocks
        holders = [b for b in self.corpus.blocks if op in b.ops]
        if not holders:
            return blocks
        pick = holders[int(self.rng.integers(len(holders)))]
        return [pick] + blocks[: self.max_blocks - 1]

    def stats(self) -> dict:
        return {"strategy": self.name, "choices": self.choices,
                "mean_reward": round(self.rewards / self.choices, 4) if self.choices else None}


class RandomStrategy(Strategy):
    """The baseline: 1 to max_blocks blocks uniformly at random, each mutation with probability one half."""
    name = "random"

    def choose(self) -> Choice:
        self.choices += 1
        k = int(self.rng.integers(1, self.max_blocks + 1))
        blocks = [self.corpus.blocks[int(i)] for i in self.rng.integers(len(self.corpus.blocks), size=k)]
        muts = [m for m in MUTATIONS if self.rng.random() < 0.5]
        return Choice(self._with_must(blocks), muts)


class _Node:
    __slots__ = ("block", "parent", "children", "n", "v")

    def __init__(self, block: str | None, parent: "_Node | None"):
        self.block, self.parent = block, parent
        self.children: dict[str, _Node] = {}
        self.n = 0
        self.v = 0.0

    def path(self) -> list[str]:
        out, node = [], self
        while node is not None and node.block is not None:
            out.append(node.block)
            node = node.parent
        return out[::-1]


@dataclass
class _Arm:
    wins: float = 1.0
    losses: float = 1.0

    def draw(self, rng) -> float:
        return float(rng.beta(self.wins, self.losses))


class MCTSStrategy(Strategy):
    name = "mcts"

    def __init__(self, corpus, coverage, rng, *, max_blocks: int = 4, max_visits: int = MAX_VISITS,
                 exploration: float = 1.0, must=None, tournament: int = TOURNAMENT, decay: float = DECAY):
        super().__init__(corpus, coverage, rng, max_blocks=max_blocks, must=must)
        self.tc1, self.tc2, self.e = max_blocks, max_visits, exploration
        self.tournament, self.decay = tournament, decay
        self.root = _Node(None, None)
        self.blocks = corpus.by_name()
        self.arms = {m: (_Arm(), _Arm()) for m in MUTATIONS}  # (with, without)
        self.resets = 0
        self.expansions = 0
        self.uses: Counter = Counter()  # subgraph block -> times expanded
        self.yield_n: dict[str, float] = {}  # operator -> discounted count of networks it was chosen into
        self.yield_s: dict[str, float] = {}  # operator -> discounted sum of what those networks gained for it
        self.cost_n: dict[str, float] = {}  # operator -> discounted count of networks with it that were charged
        self.cost_s: dict[str, float] = {}  # operator -> discounted sum of their relative costs
        self._scores: dict[str, float] | None = None
        self._pair = 0.0

    def _uct(self, child: _Node, parent: _Node) -> float:
        if child.n == 0:
            return math.inf
        return child.v / child.n + self.e * math.sqrt(math.log(max(1, parent.n)) / child.n)

    # -- what an operator, a block, an edge is expected to add ---------------------------------------------------
    def op_scores(self) -> dict[str, float]:
        """Per operator, the expected gain (balanced scale) of choosing it into the next network: the discounted
        mean of what it gained when chosen, starting from its room as one optimistic pseudo-observation. An
        operator whose block does not place, or whose shapes and parameters are used up, sinks after a few tries
        (the lowest-coverage rule picked such operators again and again); one with room left stays on top."""
        if self._scores is None:
            weights = self.coverage.left_weights()
            rooms = self.coverage.rooms(weights)
            self._scores = {c: (self.yield_s.get(c, 0.0) + rooms[c]) / (self.yield_n.get(c, 0.0) + 1.0)
                            / self.cost(c) for c in self.coverage.ops}
            # a new edge c -> d is 1/n_t of SEC_op(c): its worth on the same scale, for the pair novelty below
            self._pair = self.coverage.balanced({"SEC": 1.0 / self.coverage.n_t}, per_op=True, weights=weights)
        return self._scores

    def cost(self, op: str) -> float:
        """The relative cost of the networks ``op`` was in (1 = the mean network, one pseudo-observation of it;
        clamped, as a network's cost is shared by all its operators): the score is a gain per second."""
        return min(3.0, max(0.5, (self.cost_s.get(op, 0.0) + 1.0) / (self.cost_n.get(op, 0.0) + 1.0)))

    def block_score(self, block: Block, others: list[str]) -> float:
        """A block's expected gain next to the blocks ``others``: the mean score of its operators, plus the worth
        of the edges between it and them that no network had yet (SEC: the generator wires the chosen blocks to
        one another in both directions, so each pair may become an edge either way)."""
        scores = self.op_scores()
        ops = [o for o in dict.fromkeys(block.ops) if o in scores]
        base = sum(scores[o] for o in ops) / len(ops) if ops else 0.0
        if not others or not ops:
            return base
        head, tail = ops[0], ops[-1]
        new = 0
        for name in others:
            other = [o for o in self.blocks[name].ops if o in scores]
            if not other:
                continue
            new += other[-1] not in self.coverage.edges or head not in self.coverage.edges[other[-1]]
            new += tail not in self.coverage.edges or other[0] not in self.coverage.edges[tail]
        return base + self._pair * new / len(others)

    def _best(self, candidates: list[Block], others: list[str]) -> Block:
        """Tournament: the best of ``tournament`` candidates drawn uniformly (not the best overall: networks in
        flight at once must differ, and a sure pick would repeat one block until its score drops)."""
        draw = [candidates[int(i)] for i in self.rng.integers(len(candidates), size=min(self.tournament,
                                                                                         len(candidates)))]
        return max(draw, key=lambda b: (self.block_score(b, others), self.rng.random()))

    def _expand(self, node: _Node) -> _Node | None:
        on_path = node.path()
        exclude = set(on_path) | set(node.children)
        self.expansions += 1
        if self.expansions % 3 == 0:
            # every third expansion a subgraph block: they hold operators covered early (conv, add, pad), so an
            # operator's score would rarely pick one, and their structure is what random wiring does not produce
            # (the paper's reason for subgraph blocks); the least expanded, best scored of a tournament first
            subgraphs = [b for b in self.corpus.blocks if b.kind == "subgraph" and b.name not in exclude]
            if subgraphs:
                least = min(self.uses[b.name] for b in subgraphs)
                pick = self._best([b for b in subgraphs if self.uses[b.name] == least], on_path)
                self.uses[pick.name] += 1
                child = node.children[pick.name] = _Node(pick.name, node)
                return child
        # the paper's expansion takes the lowest-coverage operator not on the path; here the operator expected to
        # add most (its room, corrected by what choosing it actually added), its block or a subgraph holding it
        candidates = [b for b in self.corpus.blocks if b.name not in exclude]
        if not candidates:
            return None
        pick = self._best(candidates, on_path)
        child = node.children[pick.name] = _Node(pick.name, node)
        return child

    def _rollout(self, have: list[str], n: int) -> list[str]:
        """The simulation's default policy: ``n`` more blocks, each the best of a tournament of blocks drawn
        uniformly (the baseline's draw, steered by the operators' scores and the novelty of the edges it adds to
        the blocks already chosen)."""
        out: list[str] = []
        for _ in range(n):
            out.append(self._best(self.corpus.blocks, have + out).name)
        return out

    def choose(self) -> Choice:
        self.choices += 1
        node = self.root
        depth = 0
        while True:
            live = [c for c in node.children.values() if c.n < self.tc2]
            can_widen = depth < self.tc1 and len(node.children) < 1 + math.isqrt(max(0, node.n))
            if can_widen or (not live and depth < self.tc1):
                child = self._expand(node)
                if child is not None:
                    node = child
                    break
            if not live:
                break
            node = max(live, key=lambda c: (self._uct(c, node), -c.n))
            depth += 1
            if depth >= self.tc1:
                break
        if node is self.root:  # every branch exhausted: a fresh tree (coverage has moved on meanwhile)
            self.root = _Node(None, None)
            self.resets += 1
            node = self._expand(self.root) or self.root
        path = node.path()
        walk = node
        while walk is not None:  # a virtual loss until the reward comes back
            walk.n += 1
            walk = walk.parent
        # the network: the path's blocks completed by the simulation's default policy to tc1 blocks (the paper's
        # simulation runs to the terminal depth). Not the baseline's 1 to tc1: a network pays a test's overhead once
        # for all its operators and its distinct block pairs (SEC, ODC) grow as the square of its blocks; offline,
        # per operator generated, SEC, ODC and SPC all came out ahead of 1 to tc1 (and far ahead per network)
        names = path + self._rollout(path, self.tc1 - len(path))
        muts = [m for m, (w, wo) in self.arms.items() if w.draw(self.rng) > wo.draw(self.rng)]
        blocks = [self.blocks[n] for n in names] or [self.corpus.blocks[int(self.rng.integers(len(self.corpus.blocks)))]]
        blocks = self._order(blocks)
        self._aim(blocks, muts)
        return Choice(self._with_must(blocks), muts, node)

    def _order(self, blocks: list[Block]) -> list[Block]:
        """The chosen blocks in the order the generator places them (block i on digraph nodes i, i+k, ...): the
        early nodes feed most of the rest (out-degree 2), the last ones are the sinks (out-degree 0), so a block
        whose output operator never fed two operators goes first and one that was never a sink goes last."""
        def key(b: Block):
            tail = b.ops[-1]
            seen = self.coverage.out_degrees.get(tail, set())
            return (0 if 2 not in seen else 2 if 0 not in seen else 1, self.rng.random())
        return sorted(blocks, key=key)

    def _aim(self, blocks: list[Block], muts: list[str]) -> None:
        """The mutation choice aimed at what the network's least covered operator lacks: edge addition when it has
        never fed two operators, edge removal when it has never been a sink (the out-degrees ODC counts): the
        network's operator with the fewest out-degrees so far."""
        ops = [op for b in blocks for op in b.ops if op in self.coverage.corpus.op_in_degrees]
        if not ops:
            return
        target = min(ops, key=lambda o: (len(self.coverage.out_degrees.get(o, ())), self.rng.random()))
        seen = self.coverage.out_degrees.get(target, set())
        for degree, mutation in ((2, "GEA"), (0, "GER")):
            if degree not in seen and mutation not in muts:
                muts.append(mutation)

    def feedback(self, choice: Choice, reward: float) -> None:
        super().feedback(choice, reward)
        walk = choice.handle
        while isinstance(walk, _Node):
            walk.v += reward
            walk = walk.parent
        r = min(1.0, max(0.0, reward))
        for m, (w, wo) in self.arms.items():
            arm = w if m in choice.mutations else wo
            arm.wins += r
            arm.losses += 1.0 - r

    def credit(self, choice: Choice, op_gains: dict[str, float]) -> None:
        for op in {o for b in choice.blocks for o in b.ops}:
            self.yield_n[op] = self.decay * self.yield_n.get(op, 0.0) + 1.0
            self.yield_s[op] = self.decay * self.yield_s.get(op, 0.0) + op_gains.get(op, 0.0)
        self._scores = None

    def charge(self, choice: Choice, cost: float, blame=()) -> None:
        for op in {o for b in choice.blocks for o in b.ops}:
            self.cost_n[op] = self.decay * self.cost_n.get(op, 0.0) + 1.0
            # an operator a target does not support, or that fails there as already found, voids that target's test of
            # every operator beside it
            self.cost_s[op] = self.decay * self.cost_s.get(op, 0.0) + (VOID_COST if op in blame else cost)
        self._scores = None

    def found(self, choice: Choice, ops: set[str], worth: float) -> None:
        # on top of what the network gained for them: an operator that fails in a new way has more behaviours near
        # it (other shapes, parameters, neighbours, targets), which its score now draws the search to; failing again
        # the same way, it is charged as a void test instead (:meth:`charge`)
        for op in ops:
            self.yield_s[op] = self.yield_s.get(op, 0.0) + worth
        self._scores = None

    def stats(self) -> dict:
        best = sorted(self.root.children.values(), key=lambda c: -c.v / max(1, c.n))[:5]
        return {**super().stats(), "tree_resets": self.resets,
                "best_first_blocks": [{"block": c.block, "visits": c.n, "mean_reward": round(c.v / max(1, c.n), 3)}
                                      for c in best],
                "mutation_rates": {m: round(w.wins / (w.wins + w.losses), 3) for m, (w, _) in self.arms.items()}}


def make_strategy(name: str, corpus: Corpus, coverage: Coverage, rng, **kw) -> Strategy:
    if name == "mcts":
        return MCTSStrategy(corpus, coverage, rng, **kw)
    if name == "random":
        return RandomStrategy(corpus, coverage, rng, **kw)
    raise ValueError(f"unknown strategy {name!r} (one of {', '.join(STRATEGIES)})")
