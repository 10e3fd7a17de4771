"""The directed search as a campaign's test source (dlci.campaign.execution.execute takes its tests as they come and
tells it every outcome): while a goal is unreached, mutate the instances whose traces came closest to one, and keep
a mutant as a seed when it comes closer than any test before it or reaches a goal.

Seeds are chosen by their distance (dlci.directed.distance) to the unreached goals: the closest get the most
mutants, as AFLGo's power schedule gives the most energy to the seeds nearest the target; among a seed's mutations,
those whose words the goal's code reads come first (dlci.directed.mutations.preference), the others after, in a
seeded random order. A mutant runs on every target its operator's tests reach the changed converter through.
"""
from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dlci.campaign.stages import Test, takes
from dlci.directed import divergence
from dlci.directed import mutations as M
from dlci.directed.distance import INF, Distances
from dlci.directed.goals import Goal, reached
from dlci.instance import Instance
from dlci.outcome import CRASH, INCONSISTENT, INVALID, PASS, UNSUPPORTED

MAX_DEPTH = 3        # mutations stacked on one migrated instance
PER_PICK = 2         # mutants of one (seed, mutation) pick
POOL = 64            # seeds kept (the closest)
# the search ends when this long, and this many mutants, brought no goal and no trace closer to one: what is left is
# reported with its closest test (goals no input of the operator can reach, such as a branch for an argument type the
# framework never passes, must not cost the scan its budget)
STALL_SECONDS = 25.0
STALL_MIN = 8.0
STALL_MUTANTS = 30
PAIR_REACHERS = 16   # the operators' own tests that reached changed code, run on base too when the second phase starts
MAX_GRAPH_CHANGES = 5  # kinds of graph difference named in the summary and the report
# what a mutant that reached changed code and came back unsupported is tried again as: a form that runs (a dtype the
# target's signature takes, the default of a setting, the entry point's own options)
REPAIRS = ("torch.dtype_any", "onnx.input_types", "torch.default", "torch.target_option", "onnx.target_option")


@dataclass
class _Seed:
    inst: Instance
    targets: set[str]
    distance: float
    depth: int = 0
    tried: Counter = field(default_factory=Counter)  # mutation name -> times applied


class DirectedStream:
    self_scheduling = True

    def __init__(self, campaign, goals: list[Goal], distances: Distances, route: Callable[[Instance], set[str]],
                 root, operators_of: Callable[[Instance], set[str]], code: dict[Goal, str], *, seed: int = 0,
                 progress=lambda msg: None, until: float | None = None, pair: bool = False,
                 touched: set[str] | None = None, changed_text: str = "", removed: set[str] | None = None):
        self.campaign, self.goals, self.dist, self.route, self.root = campaign, goals, distances, route, root
        # the operators the diff touched, and what it changed; with no statement to reach (code deleted on head, a
        # decorator changed), every test of those operators stands where the change acts
        self.touched = set(touched or ()) | distances.operators()
        self.changed_text = changed_text
        self.anywhere = not any(g.kind == "statement" for g in goals)
        self.removed = set(removed or ()) & self.touched  # operators whose registration the diff deleted
        # (instance id, target) the head calls unsupported and the base revision ran: support the PR removed, as
        # far as the base is concerned (dlci.scan.attribution.support_removed asks the head again only)
        self.support_on_base: set[tuple[str, str]] = set()
        self.operators_of, self.code, self.progress, self.until = operators_of, code, progress, until
        self.rng = np.random.default_rng(seed)
        self.unreached: set[Goal] = set(goals)
        self.reached_by: dict[Goal, str] = {}
        self.best: dict[Goal, float] = {g: INF for g in goals}
        self.seeds: dict[str, _Seed] = {}
        self.depth: dict[str, int] = {}
        self.seen: set[str] = set()
        self.stats = Counter()
        self.per_mutation = Counter()
        self.reaching_mutation: dict[str, str] = {}  # goal -> the mutation whose mutant first reached it
        self._mutation_of: dict[str, str] = {}
        self.t0 = time.monotonic()
        # a short window stalls sooner: a fifth of it, within [STALL_MIN, STALL_SECONDS]
        self.stall_seconds = STALL_SECONDS if until is None else min(STALL_SECONDS, max(
            STALL_MIN, 0.2 * (until - self.t0)))
        self.progress_at = (self.t0, 0)  # (when, mutants made then): the last goal reached or trace come closer
        self.statements_before = 0
        # the second phase: what reached changed code, and the operator's own instances to carry a reaching
        # presentation to (a call that names dim reaches the branch; which of the instances shows the bug is
        # another matter)
        self.reachers: dict[str, tuple[Instance, set[str]]] = {}
        self.bases: dict[str, tuple[Instance, set[str]]] = {}
        self.transferred: set[tuple[str, str]] = set()  # (mutation, base instance) already carried over
        self.found_at = (self.t0, 0)  # the last new failure signature, or new values at a changed statement
        # (file, line) -> "name=class" seen there (dlci.testcase.value_class): a reacher that shows a changed
        # statement a value class no test gave it before is varied first, as new coverage is in a greybox fuzzer
        self.values: dict[tuple[str, str], set[str]] = {}
        self.novel: dict[str, tuple[Instance, set[str]]] = {}
        self.drawn = Counter()  # operator -> phase-2 draws of its instances (each operator gets its turn)
        # the divergence search (dlci.directed.divergence): in the second phase, what reached changed code runs on
        # the base revision too (``pair``: the engine has twin workers); where the revisions differ is varied first
        self.pair, self.phase = pair, 1
        self.twins: deque[Test] = deque()
        self.paired: Counter = Counter()  # (instance id, target) -> twin runs asked
        self.divergent: dict[str, tuple[Instance, set[str]]] = {}
        self.diverging = Counter()  # mutation -> inputs it made that diverge
        # (kind, target, the head's signature or "pass", mutation): a divergence of a class not seen before is
        # progress; the same bug showing on one more input is not (the search would never stall on a regression)
        self.divergence_classes: set[tuple] = set()
        # a kind of graph difference (divergence.delta_kind) -> [inputs showing it, the first delta, its instance]
        self.graph_changes: dict[tuple, list] = {}
        # what those differences are about (divergence.delta_words: an attribute set otherwise, allowzero, an
        # operator only one side emits): the mutations that read these words are drawn as if the diff said them
        self.graph_words: set[str] = set()
        self.fixed_first: dict[tuple[str, str], object] = {}  # a base failure where head passes, awaiting its second
        self.fixed: dict[tuple, dict] = {}
        self.repairs: deque[Test] = deque()  # mutants of one that reached changed code and came back unsupported
        self.unsupported_here: dict[tuple[str, str], object] = {}  # (instance id, target) -> the head's outcome

    # -- what the plan's tests already did ------------------------------------------------------------------------
    def take_in(self, outcomes: list[tuple]) -> None:
        """The traces of the tests that ran before the search ((instance, target, lines, arcs[, values])): goals
        they reached are done, the closest of them are the first seeds, and the values they showed the changed
        statements are the ones already seen."""
        for inst, target, lines, arcs, *rest in outcomes:
            self.seen.add(inst.id)
            self._account(inst, target, lines, arcs, depth=0)
            self._new_values(rest[0] if rest else {})
            if self.operators_of(inst) & self.touched:
                held = self.bases.setdefault(inst.id, (inst, set()))
                held[1].add(target)
        self.statements_before = sum(1 for g in self.goals if g.kind == "statement" and g not in self.unreached)
        if self.anywhere:
            # with no line to reach, a test stands where the change acts by its operator alone, traced or not (a
            # torchlib function compiled at import runs no line of its file while a model converts)
            for (iid, target), seen in self.campaign.observed.items():
                inst = self.campaign.instances.get(iid)
                if inst is not None and seen.get("status") != INVALID and self.operators_of(inst) & self.touched:
                    self.seen.add(iid)
                    self.reachers.setdefault(iid, (inst, set()))[1].add(target)
                    self.bases.setdefault(iid, (inst, set()))[1].add(target)

    def _account(self, inst: Instance, target: str, lines: dict, arcs: dict, depth: int) -> bool:
        """Goals reached and distances of one trace; True when it came closer to some unreached goal than any trace
        before it (a seed worth keeping)."""
        for g in list(self.unreached):
            if reached(g, lines, arcs, self.root):
                self.unreached.discard(g)
                self.reached_by[g] = inst.id
                if inst.id in self._mutation_of:
                    self.reaching_mutation[g.describe()] = self._mutation_of[inst.id]
        if (self.anywhere and self.operators_of(inst) & self.touched) or \
                any(reached(g, lines, arcs, self.root) for g in self.goals if g.kind == "statement"):
            held = self.reachers.setdefault(inst.id, (inst, set()))
            held[1].add(target)
        if not self.unreached:
            return False
        ops = self.operators_of(inst)
        closest, closer = INF, False
        for g in self.unreached:
            d = self.dist.to_goal(g, lines, ops)
            closest = min(closest, d)
            if d < self.best[g]:
                self.best[g] = d
                closer = True
        if closest < INF:
            seed = self.seeds.get(inst.id)
            if seed is None:
                self.seeds[inst.id] = _Seed(inst, {target}, closest, depth)
            else:
                seed.targets.add(target)
                seed.distance = min(seed.distance, closest)
            if len(self.seeds) > POOL:
                worst = max(self.seeds.values(), key=lambda s: (s.distance, -s.depth))
                self.seeds.pop(worst.inst.id)
        return closer

    # -- the stream ---------------------------------------------------------------------------------------------
    def _time_left(self) -> bool:
        return self.until is None or time.monotonic() < self.until

    def _stalled(self, since: tuple[float, int]) -> bool:
        """Nothing came of the last ``stall_seconds`` and STALL_MUTANTS (``since``: when, and the mutants made
        then)."""
        when, made_then = since
        return time.monotonic() - when > self.stall_seconds and self.stats["mutants"] - made_then >= STALL_MUTANTS

    def __iter__(self):
        # phase 1: reach the goals
        yield from self._phase(lambda: bool(self.unreached), lambda: self.progress_at, self._next, "stalled",
                               idle_limit=lambda: 3 * max(1, len(self.seeds)))
        # phase 2: the changed statements run, with values their tests have not shown yet: the presentations that
        # reached them carried over to the operator's other instances, and what reached them mutated further,
        # until that stalls too (no new failure signature, no new value class at a changed statement)
        self.found_at = (time.monotonic(), self.stats["mutants"])
        self.phase = 2
        if self.pair:  # the operators' own tests that reached changed code: where the revisions already differ
            reachers = sorted(self.reachers.values(), key=lambda r: not self.operators_of(r[0]) & self.removed)
            for inst, targets in reachers[:PAIR_REACHERS]:
                for t in sorted(targets):
                    self._pair(inst, t)
            if self.anywhere:  # and those the head called unsupported, before them: the deleted registration's
                said = [o for (_t, op), outs in self.campaign.unsupported.items() if op in self.touched for o in outs]
                said.sort(key=lambda o: o.op in self.removed)  # (each goes to the front: the removed ones last)
                for o in said[-PAIR_REACHERS:]:
                    if o.instance_id in self.campaign.instances:
                        self._pair(self.campaign.instances[o.instance_id], o.target, first=True)
        yield from self._phase(lambda: bool(self.reachers), lambda: self.found_at, self._vary, "varied_stalled",
                               idle_limit=lambda: 20)
        while self.twins and self._time_left():  # what was asked of the base revision is still compared
            yield self.twins.popleft()

    def _phase(self, wanted, since, make, stall_stat: str, idle_limit):
        """Tests from ``make`` while ``wanted()`` and time is left, until ``since()`` says nothing came of the last
        while (STALL_SECONDS and STALL_MUTANTS) or ``make`` has nothing more ``idle_limit()`` times in a row."""
        idle = 0
        twin_turn = True
        while wanted() and self._time_left():
            # the base's runs and the head's tests in turn: the base's verdicts steer what is varied next, and the
            # head's workers do not wait while the twin worker catches up (the engine looks a few jobs ahead only)
            if self.twins and twin_turn:
                twin_turn = False
                yield self.twins.popleft()
                continue
            twin_turn = True
            if self.repairs:
                yield self.repairs.popleft()
                continue
            if self._stalled(since()):
                self.stats[stall_stat] += 1
                return
            made = make()
            if made:
                idle = 0
                yield from made
                continue
            if self.twins:  # nothing to make now: the base's runs go on
                continue
            idle += 1
            if idle > idle_limit():
                self.stats["exhausted"] += 1
                return

    def _pick_seed(self) -> _Seed | None:
        live = [s for s in self.seeds.values() if s.depth < MAX_DEPTH]
        if not live:
            return None
        # power schedule: weight 1 / (1 + distance), the unexplored first among equals
        w = np.array([1.0 / (1.0 + s.distance) / (1.0 + 0.2 * sum(s.tried.values())) for s in live])
        return live[int(self.rng.choice(len(live), p=w / w.sum()))]

    def _goal_code(self, seed: _Seed) -> str:
        near = sorted(self.unreached, key=lambda g: self.dist.to_goal(
            g, self.campaign.coverage.get((seed.inst.id, next(iter(seed.targets))), {}), self.operators_of(seed.inst)))
        return "\n".join(self.code.get(g, "") for g in near[:3])

    def _next(self) -> list[Test]:
        seed = self._pick_seed()
        if seed is None:
            return []
        muts = M.for_instance(seed.inst)
        if not muts:
            seed.depth = MAX_DEPTH
            return []
        code = self._goal_code(seed)
        # the mutations the goal's code asks for first, each tried less often the more it was on this seed
        score = np.array([M.preference(m, code) + 1.0 for m in muts]) / (1.0 + np.array(
            [seed.tried[m.name] for m in muts]))
        order = [muts[i] for i in np.argsort(-(score + self.rng.random(len(muts)) * 0.5))]
        for m in order[:3]:
            seed.tried[m.name] += 1
            mutants = [x for x in m.apply(seed.inst, limit=PER_PICK * 2) if x.id not in self.seen]
            self.stats["mutants_tried"] += 1
            if not mutants:
                continue
            picks = [mutants[i] for i in self.rng.permutation(len(mutants))[:PER_PICK]]
            tests = []
            for inst in picks:
                self.seen.add(inst.id)
                self.campaign.instances[inst.id] = inst
                self.depth[inst.id] = seed.depth + 1
                self._mutation_of[inst.id] = m.name
                self.per_mutation[m.name] += 1
                tests += [Test(inst, t) for t in sorted(self._targets(inst, seed.targets))]
            if tests:
                self.stats["mutants"] += len(picks)
                return tests
        return []

    def _emit(self, inst: Instance, mutation: str, depth: int, targets: set[str]) -> list[Test]:
        self.seen.add(inst.id)
        self.campaign.instances[inst.id] = inst
        self.depth[inst.id] = depth
        self._mutation_of[inst.id] = mutation
        self.per_mutation[mutation] += 1
        self.stats["mutants"] += 1
        return [Test(inst, t) for t in sorted(self._targets(inst, targets))]

    def _targets(self, inst: Instance, prefer: set[str]) -> set[str]:
        """Where a mutant runs: the targets its operator's changed converter is reached through, those its seed ran
        on first; a mutant carrying a target's own options, on that target only."""
        targets = self.campaign.targets
        reach = {t for t in self.route(inst) if t not in targets or takes(targets[t], inst)}
        chosen = set((inst.call.get("options") or {}))
        if chosen:
            return reach & chosen
        return reach & prefer or reach

    def _new_values(self, values: dict) -> int:
        """How many (changed statement, value class) pairs of a trace no test showed before; they are seen now."""
        new = 0
        for path, per_line in (values or {}).items():
            for line, classes in per_line.items():
                seen = self.values.setdefault((path, str(line)), set())
                fresh = set(classes) - seen
                new += len(fresh)
                seen |= fresh
        return new

    def _vary(self) -> list[Test]:
        """A reaching presentation carried over to one more of the operator's instances, else a further mutation
        of something that reached changed code (one that showed a changed statement new values first)."""
        # (with no statement to reach, every mutant of a touched operator "reaches": nothing to carry over)
        reaching = [] if self.anywhere else \
            [m for m in dict.fromkeys(self._mutation_of[i] for i in self.reachers if i in self._mutation_of)]
        for name in reaching:
            mutation = M.MUTATIONS.get(name)
            if mutation is None:
                continue
            order = self.rng.permutation(len(self.bases))
            bases = list(self.bases.values())
            for k in order:
                inst, targets = bases[k]
                if (name, inst.id) in self.transferred:
                    continue
                self.transferred.add((name, inst.id))
                made = [x for x in mutation.apply(inst, limit=1) if x.id not in self.seen]
                if made:
                    self.stats["transferred"] += 1
                    return self._emit(made[0], name, 1, targets)
        draw = self.rng.random()
        pool = self.divergent if self.divergent and draw < 0.5 else \
            self.novel if self.novel and draw < 0.8 else self.reachers
        reachers = list(pool.values())
        if self.anywhere and self.removed and self.rng.random() < 0.75:
            # what the deleted registration served first: its operator's tests
            reachers = [r for r in reachers if self.operators_of(r[0]) & self.removed] or reachers
        inst, targets = self._by_operator(reachers)
        if self.depth.get(inst.id, 0) >= MAX_DEPTH:
            return []
        muts = M.for_instance(inst)
        # the mutations that made inputs diverge before are drawn more often, and those the changed code's words
        # ask for: with no goal to steer by they are all the search has, and code that declares a function for
        # some element types (a deleted complex or ``TInt`` overload) is about those types above all
        said = 2.0 if self.anywhere else 0.5
        typed = 6.0 if self.anywhere and M.dtype_hints(self.changed_text) else 0.0
        # what the emitted graphs differ in speaks as loudly as the diff: a Reshape whose allowzero differs between
        # head and base everywhere computes the same until a size list holds a 0
        graph = " ".join(sorted(self.graph_words))
        weight = np.array([1.0 + 2.0 * self.diverging[m.name] + said * M.preference(m, self.changed_text)
                           + 4.0 * M.preference(m, graph) + (typed if m.name.endswith("dtype_any") else 0.0)
                           for m in muts])
        order = self.rng.choice(len(muts), size=len(muts), replace=False, p=weight / weight.sum()) if muts else []
        for k in list(order)[:3]:
            made = muts[k].apply(inst, limit=1, rng=self.rng, skip=self.seen,
                                 prefer=f"{self.changed_text}\n{graph}" if graph else self.changed_text)
            if made:
                return self._emit(made[0], muts[k].name, self.depth.get(inst.id, 0) + 1, targets)
        return []

    def _by_operator(self, entries: list[tuple[Instance, set[str]]]) -> tuple[Instance, set[str]]:
        """One of ``entries``, of the operator drawn least so far (ties at random), then any of its instances: an
        operator with many reaching or diverging tests does not take the draws of the others (a group_norm whose
        graphs diverged everywhere left unflatten, where the bug shows, a few mutants)."""
        groups: dict[str, list] = {}
        for entry in entries:
            groups.setdefault(entry[0].op, []).append(entry)
        least = min(self.drawn[op] for op in groups)
        ops = sorted(op for op in groups if self.drawn[op] == least)
        op = ops[int(self.rng.integers(len(ops)))]
        self.drawn[op] += 1
        group = groups[op]
        return group[int(self.rng.integers(len(group)))]

    def observe(self, test: Test, outcome, new_signature: bool) -> None:
        self.stats["tests"] += 1
        if outcome.status == INVALID:
            self.stats["invalid"] += 1
            return
        before = len(self.unreached)
        closer = self._account(test.instance, test.target, outcome.coverage or {}, getattr(outcome, "arcs", {}) or {},
                               self.depth.get(test.instance.id, 1))
        if len(self.unreached) < before:
            self.stats["goals_reached"] += before - len(self.unreached)
            self.progress(f"directed search: {before - len(self.unreached)} more goal(s) reached by "
                          f"{self._mutation_of.get(test.instance.id, 'a mutant')} "
                          f"({len(self.unreached)} left)")
        if closer or len(self.unreached) < before:  # phase 1 goes on while it comes closer
            self.stats["closer"] += closer
            self.progress_at = (time.monotonic(), self.stats["mutants"])
        if new_signature and test.instance.id in self.reachers:
            # phase 2 goes on while the changed code fails in new ways: a mutant's new failure elsewhere (an old
            # bug of another converter, a dtype the target never had) is no reason to go on
            self.stats["new_signatures"] += 1
            self.found_at = (time.monotonic(), self.stats["mutants"])
        if self.phase == 2 and test.instance.id in self.reachers and outcome.status != INVALID:
            # (where a registration was deleted, what its operator's head refuses is the base's question first)
            self._pair(test.instance, test.target, first=self.anywhere and outcome.status == UNSUPPORTED
                       and bool(self.operators_of(test.instance) & self.removed))
        if test.instance.id in self.reachers and outcome.status == UNSUPPORTED:
            self._repair(test.instance, test.target)
            self.unsupported_here[(test.instance.id, test.target)] = outcome
        fresh = self._new_values(getattr(outcome, "values", {}) or {})
        if fresh and test.instance.id in self.reachers:
            # ... or computes on values the changed statements have not seen (an index at -1, an empty list, None)
            self.stats["new_values"] += fresh
            self.novel[test.instance.id] = self.reachers[test.instance.id]
            self.found_at = (time.monotonic(), self.stats["mutants"])

    def _repair(self, inst: Instance, target: str) -> None:
        """A mutant ran changed code, then the target called it unsupported (a dtype outside a function's signature,
        a setting the entry point refuses): what it reached must still be judged, so it is tried again in forms that
        run, first."""
        if self.depth.get(inst.id, 0) >= MAX_DEPTH:
            return
        for name in REPAIRS:
            mutation = M.MUTATIONS.get(name)
            if mutation is None or mutation.framework != inst.framework:
                continue
            made = [x for x in mutation.apply(inst, limit=2) if x.id not in self.seen][:1]
            for x in made:
                self.stats["repaired"] += 1
                self.repairs.extend(t for t in self._emit(x, name, self.depth.get(inst.id, 0) + 1, {target})
                                    if t.target == target)

    def _pair(self, inst: Instance, target: str, again: bool = False, first: bool = False) -> None:
        """Ask the base revision for ``inst`` on ``target`` (once; ``again``: a second time, to confirm a fix;
        ``first``: before what was asked already)."""
        key = (inst.id, target)
        if not self.pair or self.paired[key] >= (2 if again else 1) or key not in self.campaign.observed:
            return
        self.paired[key] += 1
        (self.twins.appendleft if first else self.twins.append)(Test(inst, target, twin=True))

    def observe_twin(self, test: Test, outcome) -> None:
        """The base revision's run of a test the head ran: where they differ is where the change acts."""
        key = (test.instance.id, test.target)
        head = self.campaign.observed.get(key)
        if head is None:
            return
        self.stats["pairs"] += 1
        kind = divergence.compare(head, outcome)
        if kind is not None:
            self.stats[f"diverged_{kind}"] += 1
            held = self.divergent.setdefault(test.instance.id, (test.instance, set()))
            held[1].add(test.target)
            mutation = self._mutation_of.get(test.instance.id)
            if mutation:
                self.diverging[mutation] += 1
            cls = (kind, test.target, head.get("signature") or head["status"], mutation or "")
            if kind != "graph" and cls not in self.divergence_classes:
                # the revisions compute something different here, in a way not seen before: the search goes on
                self.found_at = (time.monotonic(), self.stats["mutants"])
            self.divergence_classes.add(cls)
        delta = divergence.node_delta(head, outcome) if head.get("model") != outcome.model_digest else ((), ())
        if delta[0] or delta[1]:
            change = (test.target, divergence.delta_kind(delta))
            if change not in self.graph_changes:
                # the change makes other nodes here than anywhere before: a new place where it acts, worth varying
                self.graph_changes[change] = [0, delta, test.instance.id]
                self.graph_words |= divergence.delta_words(delta)
                if kind == "graph":
                    self.found_at = (time.monotonic(), self.stats["mutants"])
            self.graph_changes[change][0] += 1
        if head["status"] in (CRASH, INCONSISTENT) and outcome.status == PASS:
            self.campaign.passed_on_base.add(key)
        if head["status"] == UNSUPPORTED and outcome.status == PASS:
            # head calls unsupported what base runs: the first of its operator's unsupported tests the base
            # revision is asked about after the search (support removed), whatever was kept before it
            kept = self.campaign.unsupported.setdefault((test.target, test.instance.op), [])
            mine = [self.unsupported_here[key]] if key in self.unsupported_here else \
                [o for o in kept if o.instance_id == test.instance.id][:1]
            kept[:] = mine + [o for o in kept if o.instance_id != test.instance.id]
            self.support_on_base.add(key)
        if divergence.fixed(head, outcome):
            first = self.fixed_first.get(key)
            if first is None:
                self.fixed_first[key] = outcome
                self._pair(test.instance, test.target, again=True)
            elif self.campaign.signature(first) == self.campaign.signature(outcome):
                sig = self.campaign.signature(outcome)
                entry = self.fixed.setdefault((test.target, test.instance.op, sig), {
                    "operator": test.instance.op, "target": test.target, "status_on_base": outcome.status,
                    "symptom": outcome.symptom, "stage": outcome.stage, "message": (outcome.message or "")[:500],
                    "instance": test.instance.id, "test": test.instance.origin.test, "instances": []})
                entry["instances"].append(test.instance.id)

    def divergence_summary(self) -> dict:
        """Pairs run, divergences per kind and per minute, the mutations that made them, and the kinds of graph
        difference found (the nodes only head, only base emits; the most frequent first)."""
        minutes = max(1e-9, (time.monotonic() - self.t0) / 60)
        diverged = {k: self.stats[f"diverged_{k}"] for k in divergence.KINDS}
        return {"paired": self.stats["pairs"], "diverged": diverged, "inputs_diverging": len(self.divergent),
                "per_minute": round(sum(diverged.values()) / minutes, 2),
                "diverging_mutations": dict(self.diverging.most_common()), "fixed": len(self.fixed),
                "graph_words": sorted(self.graph_words),
                "graph_changes": [{"target": target, "inputs": n, "head_only": list(delta[0][:8]),
                                   "base_only": list(delta[1][:8]), "instance": iid,
                                   "differences": divergence.describe_delta(delta[0], delta[1])[:8]}
                                  for (target, _), (n, delta, iid) in sorted(
                                      self.graph_changes.items(), key=lambda kv: -kv[1][0])[:MAX_GRAPH_CHANGES]]}

    def _ended(self) -> str:
        """Why the search stopped: its second phase's reason if it got there, else its first's."""
        for stat, said in (("varied_stalled", "stalled after reaching"), ("stalled", "stalled"),
                           ("exhausted", "exhausted")):
            if self.stats[stat]:
                return said
        return "budget"

    def describe(self) -> dict:
        return {"goals": len(self.goals), "reached_before": len(self.goals) - len(self.unreached)
                - self.stats["goals_reached"], "reached_by_search": self.stats["goals_reached"],
                "unreached": len(self.unreached), "mutants": self.stats["mutants"],
                "transferred": self.stats["transferred"], "new_signatures": self.stats["new_signatures"],
                "new_values": self.stats["new_values"], "retried_unsupported": self.stats["repaired"],
                "statements_reached_before": self.statements_before,
                "tests": self.stats["tests"], "invalid": self.stats["invalid"],
                "seconds": round(time.monotonic() - self.t0, 1), "ended": self._ended(),
                "per_mutation": dict(self.per_mutation.most_common()),
                "reaching_mutation": self.reaching_mutation,
                **({"divergence": self.divergence_summary()} if self.pair else {})}


def finite(x: float) -> float | None:
    return None if math.isinf(x) else x
