"""The fuzzer as a campaign's test source: an endless stream of tests, each network generated when a worker is
free, so that what the targets did to the last networks steers the next (Algorithm 1 of the paper):

    choose blocks and mutations (MCTS or random) -> generate a network -> validate it -> keep it only when it adds
    operator-level coverage -> its tests (one per target) -> outcomes -> reward back to the strategy

Validation before any target sees a network: the ONNX checker and strict shape inference (dlci.models.graph), the
reference computing every value finite and moderate in float32 and float64 as the network grows (dlci.fuzz.build),
and a second reading of the specification agreeing with the reference (dlci.localise.witness: ONNX Runtime with its
optimisations off). Every test of a network checks the last again in the worker, so a reduced graph stays within the
specification too.
"""
from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from dlci.campaign.stages import Test
from dlci.fuzz.corpus import Corpus
from dlci.fuzz.coverage import Coverage
from dlci.fuzz.generate import Generated, generate
from dlci.fuzz.search import Choice, Strategy
from dlci.models.graph import GraphError, graph_instance
from dlci.models.graph_torch import torch_graph_instance
from dlci.localise.witness import available as spec_witness_available
from dlci.outcome import CRASH, INCONSISTENT, PASS, UNSUPPORTED

# a new failure signature is worth this much (on the reward's scale, and to the operators it was localised to on the
# balanced coverage scale); one that needs several operators (what this fuzzer is for) twice as much
FOUND, FOUND_MULTI = 1.0, 2.0
STALE = 40  # networks in a row that add no coverage before one is run anyway (the criteria saturate)
ATTEMPTS = 200  # generation attempts for one network before the stream gives up (a corpus nothing valid comes of)


@dataclass
class _Pending:
    choice: Choice
    gain: float
    gains: dict
    tests: int
    statuses: list[str] = field(default_factory=list)
    bonus: float = 0.0
    seconds: float = 0.0  # the workers' time on its tests: what the network cost
    void: int = 0  # its tests that tested nothing else of it: turned down (unsupported) or a failure already found
    blame: set = field(default_factory=set)  # the chosen operators named as the reason (unsupported, the culprit)
    found: set = field(default_factory=set)  # the chosen operators a new failure signature was localised to


class FuzzStream:
    """Iterate it for tests; the campaign calls :meth:`observe` with each outcome."""

    self_scheduling = True  # dlci.campaign.execution.execute takes the tests in this order, as they come

    def __init__(self, campaign, targets: dict, corpus: Corpus, coverage: Coverage, strategy: Strategy,
                 rng: np.random.Generator, *, must: set[str] | None = None, progress=lambda msg: None,
                 witness: bool = True):
        self.campaign, self.targets, self.corpus, self.coverage = campaign, targets, corpus, coverage
        self.strategy, self.rng, self.must, self.progress = strategy, rng, must, progress
        self.pending: dict[str, _Pending] = {}
        self.t0 = time.monotonic()
        self.generated = self.accepted = self.discarded = 0
        self.rejected: Counter = Counter()
        self.no_torch_form: Counter = Counter()
        self.blocks_used: Counter = Counter()
        self.nodes: list[int] = []
        self.timeline: list[dict] = []
        self.stale = 0
        self.gains: list[float] = []
        self.exhausted = ""
        self.witness = witness and spec_witness_available()
        self.frameworks = {f for t in targets.values() for f in t.frameworks}
        self._last_point = -1.0
        self.cost_sum = 0.0
        self.cost_n = 0

    # -- generation ----------------------------------------------------------------------------------------------
    def __iter__(self):
        while True:
            got = self._next()
            if got is None:
                return
            for inst in got:
                self.campaign.instances[inst.id] = inst
                for name in self._route(inst):
                    yield Test(inst, name)

    def _route(self, inst) -> list[str]:
        """The targets a network goes to: its ONNX form to the targets that take ONNX, its torch form to those that
        take torch models only (an ONNX target would otherwise get it again through torch.onnx)."""
        if inst.framework == "onnx":
            return [n for n, t in self.targets.items() if "onnx" in t.frameworks]
        return [n for n, t in self.targets.items() if inst.framework in t.frameworks and "onnx" not in t.frameworks]

    def _next(self):
        for _ in range(ATTEMPTS):
            choice = self.strategy.choose()
            self.generated += 1
            try:
                gen = generate(self.corpus, choice.blocks, choice.mutations, self.rng,
                               name=f"fuzz{self.generated}", must=self.must)
                if self.witness:
                    _witness(gen)
            except GraphError as e:
                self.rejected[_reason(str(e))] += 1
                self.strategy.credit(choice, {})
                self.strategy.feedback(choice, 0.0)
                continue
            if not self.coverage.adds(gen.features) and self.stale < STALE:
                self.stale += 1
                self.discarded += 1
                self.strategy.credit(choice, {})
                self.strategy.feedback(choice, 0.0)
                continue
            self.stale = 0
            gain = self.coverage.add(gen.features)
            gains = dict(self.coverage.last_gains)
            self.strategy.credit(choice, {op: self.coverage.balanced(g, per_op=True)
                                          for op, g in self.coverage.last_op_gains.items()})
            self.gains.append(gain)
            self.accepted += 1
            self.blocks_used.update(gen.blocks)
            self.nodes.append(len(gen.graph.nodes))
            # its size relative to the mean network, charged at once: a first, load-free estimate of its cost (the
            # workers' seconds follow when its tests are done; they see what size does not, a slow compile, and
            # the machine's load, which size does not)
            self.strategy.charge(choice, len(gen.graph.nodes) / float(np.mean(self.nodes)))
            self._point()
            instances = self._instances(gen)
            if not instances:
                self.strategy.feedback(choice, 0.0)
                continue
            shared = _Pending(choice, gain, gains, sum(len(self._route(i)) for i in instances))
            for inst in instances:
                self.pending[inst.id] = shared  # one reward for the network, over all its forms' tests
            return instances
        self.exhausted = (f"no valid network in {ATTEMPTS} attempts (last rejections: "
                          f"{', '.join(r for r, _ in self.rejected.most_common(3))})")
        self.progress(f"fuzz: {self.exhausted}")
        return None

    def _instances(self, gen: Generated) -> list:
        test = f"{self.strategy.name} network {self.accepted}: " + " | ".join(gen.blocks) + \
            (f" (mutations {','.join(gen.mutations)})" if gen.mutations else "")
        out = []
        if any("onnx" in t.frameworks for t in self.targets.values()):
            out.append(graph_instance(gen.graph, gen.inputs, source="fuzz", test=test))
        if any("torch" in t.frameworks and "onnx" not in t.frameworks for t in self.targets.values()):
            try:
                out.append(torch_graph_instance(gen.graph, gen.inputs, source="fuzz", test=test))
            except GraphError as e:  # an operator torch has no faithful call for: the ONNX form still runs
                self.no_torch_form[str(e).split(":")[0]] += 1
        return out

    def _point(self) -> None:
        t = time.monotonic() - self.t0
        if t - self._last_point < 1.0 and self.timeline:
            self.timeline[-1] = {"t": round(t, 1), "networks": self.accepted,
                                 **{k: round(v, 4) for k, v in self.coverage.figures().items()}}
            return
        self._last_point = t
        self.timeline.append({"t": round(t, 1), "networks": self.accepted,
                              **{k: round(v, 4) for k, v in self.coverage.figures().items()}})

    # -- feedback ------------------------------------------------------------------------------------------------
    def observe(self, test: Test, outcome, new_signature: bool) -> None:
        p = self.pending.get(test.instance.id)
        if p is None:
            return
        p.statuses.append(outcome.status)
        p.seconds += float(getattr(outcome, "seconds", 0.0) or 0.0)
        chosen = {op for b in p.choice.blocks for op in b.ops}
        if outcome.status == UNSUPPORTED:
            p.void += 1
            said = f"{outcome.message} {outcome.log}"
            p.blame.update(op for op in chosen if re.search(rf"\b{re.escape(op)}\b", said))
        elif outcome.status in (CRASH, INCONSISTENT):
            culprits = _culprits(outcome.localised or {}, chosen)
            if new_signature:
                p.bonus = max(p.bonus, FOUND_MULTI if (outcome.localised or {}).get("multi_operator") else FOUND)
                p.found |= culprits
            else:  # found before: that target tested nothing else of the network, and its culprit will do it again
                p.void += 1
                p.blame |= culprits
        if len(p.statuses) < p.tests:
            return
        for key in [k for k, v in self.pending.items() if v is p]:
            del self.pending[key]
        success = sum(1 for s in p.statuses if s == PASS) / len(p.statuses)
        # its cost: the workers' seconds, relative to the mean network
        self.cost_sum += p.seconds
        self.cost_n += 1
        mean = self.cost_sum / self.cost_n
        rel = max(0.25, p.seconds / mean) if mean > 0 else 1.0
        # a test that tested nothing else of the network (turned down, or a failure already found) is time spent on
        # nothing: the network cost that much more per test that did (and no operator of it was tested there, the
        # reason a rare operator one target lacks must not crowd the networks); the operators named carry it alone
        useful = max(1, len(p.statuses) - p.void) / len(p.statuses)
        self.strategy.charge(p.choice, rel / useful if not p.blame else rel, blame=p.blame)
        if p.found:
            self.strategy.found(p.choice, p.found, p.bonus)
        # the coverage gain on one scale per criterion, weighted by what is left of each (Coverage.balanced): a
        # typical gain is about one, so late edges, degrees and shape vectors count as much as early operator
        # types; per relative cost, as the budget is time (a network twice as costly must gain twice as much)
        gain = min(1.0, self.coverage.balanced(p.gains) / (2 * rel))
        self.strategy.feedback(p.choice, 0.5 * success + 0.5 * gain + p.bonus)

    # -- the report ----------------------------------------------------------------------------------------------
    def stats(self) -> dict:
        figures = {k: round(v, 4) for k, v in self.coverage.figures().items()}
        return {
            "strategy": self.strategy.stats(), "coverage": figures, "timeline": self.timeline,
            "networks": {"generated": self.generated, "kept": self.accepted,
                         "no_new_coverage": self.discarded, "rejected": sum(self.rejected.values()),
                         "mean_operators": round(float(np.mean(self.nodes)), 1) if self.nodes else 0},
            "rejected_because": dict(self.rejected.most_common(12)),
            "corpus": self.corpus.describe(), "blocks_used": dict(self.blocks_used.most_common(20)),
            "coverage_per_operator": self.coverage.per_operator(),
            "spec_witness": "onnxruntime (graph optimisations off)" if self.witness else None,
            **({"no_torch_form": dict(self.no_torch_form.most_common(12))} if self.no_torch_form else {}),
            **({"exhausted": self.exhausted} if self.exhausted else {}),
        }


def _culprits(localised: dict, chosen: set[str]) -> set[str]:
    """The chosen operators a failure was localised to: its operator, or, when it needs several, every operator of
    the graph (each alone passes: the combination is the cause)."""
    if localised.get("multi_operator"):
        named = {str(node).split(":", 1)[-1] for node in localised.get("alone") or {}}
    else:
        named = {str(localised.get("operator") or "").split("::")[-1]}
    return named & chosen


def _reason(message: str) -> str:
    """A rejection's kind (what the report counts), without the value names."""
    import re
    m = re.sub(r"'[^']*'", "'…'", message)
    m = re.sub(r"\[[^\]]*\]", "[…]", m)
    return m[:90]


def _witness(gen: Generated) -> None:
    """A second reading of ONNX must agree on the network (GraphError if not): dlci.localise.witness."""
    from dlci.localise.witness import outside_spec
    why = outside_spec(gen.graph.to_onnx(), gen.inputs, gen.graph.evaluate(gen.inputs),
                       gen.graph.evaluate(gen.inputs, float64=True))
    if why:
        raise GraphError(why)
