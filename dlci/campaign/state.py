"""What a campaign has gathered so far: counts, failures by signature, confirmations, coverage."""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from dlci import findings as F
from dlci.instance import Instance
from dlci.outcome import CRASH, INCONSISTENT, STATUSES, UNSUPPORTED, Outcome

CONFIRM_TRIES = 2  # instances tried per signature before a failure is called flaky
UNSUPPORTED_KEPT = 32  # unsupported outcomes kept per (target, operator): distinct kinds first
UNSUPPORTED_PER_KIND = 8  # of one kind, each a distinct call (input shapes, settings)
SPREAD_OPERATORS = 3  # a failure on this many operators is shown on the most basic one


@dataclass
class Campaign:
    instances: dict[str, Instance]
    targets: dict[str, object]  # name -> dlci.targets.base.Target
    started: float = field(default_factory=time.time)
    counts: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    stage_seconds: Counter = field(default_factory=Counter)
    test_seconds: float = 0.0
    failures: dict[str, list[Outcome]] = field(default_factory=lambda: defaultdict(list))  # signature -> outcomes
    confirm_state: dict[str, str] = field(default_factory=dict)  # signature -> pending|confirmed|flaky
    confirm_tries: Counter = field(default_factory=Counter)
    # signature -> seconds one of its tests took alone (its confirmation run; until then the test that found it):
    # what checking its reproducer will cost beyond a warm interpreter's fixed overhead
    test_seconds_alone: dict[str, float] = field(default_factory=dict)
    phase_seconds: dict[str, float] = field(default_factory=dict)  # wall seconds per phase: testing, render, checks
    flaky: list[dict] = field(default_factory=list)
    interrupted: bool = False
    engine_info: dict = field(default_factory=dict)
    arms: dict = field(default_factory=dict)  # "target × source" -> what the cost-aware scheduler gave it
    ended_early: str = ""  # why testing stopped before its share of the budget ran out, if it did
    coverage: dict[tuple[str, str], dict] = field(default_factory=dict)  # (instance id, target) -> file -> lines
    arcs: dict[tuple[str, str], dict] = field(default_factory=dict)  # (instance id, target) -> file -> [from, to]
    # (instance id, target) -> file -> changed statement's line -> "name=class" (dlci.testcase.value_class)
    values: dict[tuple[str, str], dict] = field(default_factory=dict)
    # (instance id, target) -> what a fingerprinted test gave (status, signature, output digest, model fingerprint):
    # what the other revision's run of it is compared with (dlci.directed.divergence)
    observed: dict[tuple[str, str], dict] = field(default_factory=dict)
    first_confirmed_at: float | None = None  # epoch seconds: when the first failure was confirmed
    confirmed_at: dict[str, float] = field(default_factory=dict)  # signature -> epoch seconds of its confirmation
    # (instance id, target) failing on head that the divergence search saw pass on the base revision: a finding's
    # base re-runs take them first (its new part may be a few inputs among many that fail alike on both)
    passed_on_base: set[tuple[str, str]] = field(default_factory=set)
    tried: set[tuple[str, str]] = field(default_factory=set)  # (instance id, target) of every test with an outcome
    # (target, operator) -> a few outcomes the target called unsupported (PR mode asks the base revision about them)
    unsupported: dict[tuple[str, str], list[Outcome]] = field(default_factory=dict)
    # canonical operators in the order a PR touched them (most directly first): a finding whose failure spans
    # several operators is shown on the one the PR touched most directly
    preferred_ops: list[str] = field(default_factory=list)
    # device targets named or reached that cannot run on this runner: name -> why (never a failure)
    not_on_runner: dict[str, str] = field(default_factory=dict)
    # what the device-differential oracle let pass or set aside, per (target, note kind): nondeterministic kernels,
    # results torch's own tests do not expect to match the CPU (dlci.oracles.device)
    device_notes: Counter = field(default_factory=Counter)
    devices: dict[str, str] = field(default_factory=dict)  # target -> the device its tests ran on, as named there
    extra_stats: dict = field(default_factory=dict)  # a source's own figures (the graph fuzzer's coverage)

    def face(self, instance_id: str, spread: bool = False) -> tuple[int, int, int]:
        """How well an instance stands for a finding (smaller is better): of the operator the PR touched most
        directly, then smallest (the most readable reproducer). ``spread``: the failure spans many operators (a dtype
        table, the importer's own path): then the most basic operator shows it best (BASIC_OPERATORS: "add fails")."""
        from dlci.operators import BASIC_OPERATORS, instance_ops
        inst = self.instances[instance_id]
        ops = instance_ops(inst.op)
        basic = min((k for k, c in enumerate(BASIC_OPERATORS) if c in ops), default=len(BASIC_OPERATORS)) \
            if spread else 0
        rank = min((k for k, c in enumerate(self.preferred_ops) if c in ops), default=len(self.preferred_ops))
        return basic, rank, inst.size()

    def spread(self, instance_ids) -> bool:
        """Does a failure on these instances span many operators (one root cause under all of them)?"""
        return len({self.instances[i].op for i in instance_ids if i in self.instances}) >= SPREAD_OPERATORS

    def signature(self, outcome: Outcome) -> str:
        return F.signature(outcome, self.targets[outcome.target].modules)

    @staticmethod
    def base_signature(signature: str) -> str:
        """The signature the outcomes were grouped by (a finding split by base attribution has a suffix)."""
        return F.base_signature(signature)

    # -- results ------------------------------------------------------------------------------------------------
    def record(self, outcome: Outcome, confirming: str | None) -> str | None:
        """Account one outcome; returns a signature that needs a confirmation run, if any."""
        if confirming is not None:
            return self._confirmed(confirming, outcome)
        self.counts[outcome.target][outcome.status] += 1
        self.tried.add((outcome.instance_id, outcome.target))
        if outcome.device:
            self.devices.setdefault(outcome.target, outcome.device)
        if outcome.device_note:
            self.device_notes[f"{outcome.target}: {outcome.device_note.split(':', 1)[0]}"] += 1
        if outcome.coverage:
            self.coverage[(outcome.instance_id, outcome.target)] = outcome.coverage
        if outcome.arcs:
            self.arcs[(outcome.instance_id, outcome.target)] = outcome.arcs
        if outcome.values:
            self.values[(outcome.instance_id, outcome.target)] = outcome.values
        # (a test the target refused or crashed on before any traced line ran has neither, and is where a PR that
        # dropped an overload shows: the divergence search asks the base revision about it too)
        if outcome.model_digest or outcome.coverage or outcome.status in (UNSUPPORTED, CRASH):
            self.observed[(outcome.instance_id, outcome.target)] = {
                "status": outcome.status, "signature": self.signature(outcome) if F.is_failure(outcome) else "",
                "digest": outcome.digest, "model": outcome.model_digest, "nodes": outcome.model_nodes,
                "symptom": outcome.symptom}
        self.test_seconds += outcome.seconds
        for stage, secs in (outcome.timings or {}).items():
            self.stage_seconds[stage] += secs
        if outcome.status == UNSUPPORTED and not outcome.op.startswith("graph::"):
            # distinct reasons first: the one the PR introduced is often not the first one met (a generated graph's
            # are not kept: a PR scan asks the base revision about its operators' own unsupported tests)
            # one per kind: where the instance came from, how it was presented (variant), what the target said
            # and a few more of a kind, each another call: the first may fail on base for a reason of its own (an
            # empty batch, a ceil_mode base gets wrong) while base ran the others
            kept = self.unsupported.setdefault((outcome.target, outcome.op), [])
            kind = self._unsupported_kind(outcome)
            same = [o for o in kept if self._unsupported_kind(o) == kind]
            if len(kept) < UNSUPPORTED_KEPT and len(same) < UNSUPPORTED_PER_KIND and \
                    all(self._input_signature(o) != self._input_signature(outcome) for o in same):
                kept.append(outcome)
        if not F.is_failure(outcome):
            return None
        sig = self.signature(outcome)
        self.failures[sig].append(outcome)
        if sig not in self.confirm_state:
            self.test_seconds_alone[sig] = outcome.seconds
            self.confirm_state[sig] = "pending"
            self.confirm_tries[sig] += 1
            return sig
        return None

    def _input_signature(self, outcome: Outcome) -> tuple:
        inst = self.instances.get(outcome.instance_id)
        if inst is None:
            return ()
        # the tensors' shapes and the call's settings (hann_window(5) has no tensor; max_pool2d's samples share one)
        return tuple(tuple(t.shape) for t in inst.inputs), json.dumps(inst.params, sort_keys=True, default=str)

    def unsupported_rank(self, outcomes: list[Outcome]) -> list[int]:
        """Each kept unsupported outcome's rank within its kind (0: the first of its kind)."""
        seen: dict[tuple, int] = {}
        ranks = []
        for o in outcomes:
            kind = self._unsupported_kind(o)
            ranks.append(seen.get(kind, 0))
            seen[kind] = ranks[-1] + 1
        return ranks

    def _unsupported_kind(self, outcome: Outcome) -> tuple:
        inst = self.instances.get(outcome.instance_id)
        from dlci.instance import variant_kind
        return (inst.origin.source if inst else "", variant_kind(inst) if inst else None,
                F.normalize_message(outcome.message))

    def _confirmed(self, sig: str, rerun: Outcome) -> str | None:
        if F.is_failure(rerun) and self.signature(rerun) == sig:
            self.test_seconds_alone[sig] = rerun.seconds  # a confirmation runs alone, never in a batch
            self.confirm_state[sig] = "confirmed"
            self.confirmed_at[sig] = time.time()
            self.first_confirmed_at = self.first_confirmed_at or self.confirmed_at[sig]
            return None
        # did not fail the same way: try another instance with this signature, else call it flaky
        self.flaky.append({"signature": sig, "instance_id": rerun.instance_id, "rerun_status": rerun.status,
                           "rerun_symptom": rerun.symptom})
        tried = {o.instance_id for o in self.failures[sig][:self.confirm_tries[sig]]}
        others = [o for o in self.failures[sig] if o.instance_id not in tried]
        if others and self.confirm_tries[sig] < CONFIRM_TRIES:
            self.confirm_tries[sig] += 1
            return sig
        self.confirm_state[sig] = "flaky"
        return None

    def next_confirm_outcome(self, sig: str) -> Outcome:
        return self.failures[sig][self.confirm_tries[sig] - 1]

    def confirmed(self) -> list[str]:
        return [sig for sig, state in self.confirm_state.items() if state == "confirmed"]

    def steady_outcomes(self, sig: str) -> list[Outcome]:
        """The outcomes of a signature whose instances did not flake (all of them when every one did)."""
        flaky_ids = {f["instance_id"] for f in self.flaky if f["signature"] == sig}
        return [o for o in self.failures[sig] if o.instance_id not in flaky_ids] or self.failures[sig]

    def representative(self, sig: str) -> Outcome:
        """The instance that stands best for this signature (:meth:`face`) among those that did not flake."""
        outcomes = self.steady_outcomes(sig)
        spread = self.spread(o.instance_id for o in outcomes)
        return min(outcomes, key=lambda o: self.face(o.instance_id, spread))

    # -- summary ------------------------------------------------------------------------------------------------
    def stats(self) -> dict:
        per_target = {t: {s: c.get(s, 0) for s in STATUSES} for t, c in sorted(self.counts.items())}
        run = sum(sum(c.values()) for c in self.counts.values())
        valid = sum(c.get("pass", 0) + c.get(CRASH, 0) + c.get(INCONSISTENT, 0) for c in self.counts.values())
        inside = sum(self.stage_seconds.get(s, 0.0) for s in ("convert", "compile", "run"))
        return {
            "tests_run": run,
            "tests_valid": valid,
            "seconds": round(time.time() - self.started, 2),
            "per_target": per_target,
            "operators": len({i.op for i in self.instances.values()}),
            "instances": len(self.instances),
            "stage_seconds": {k: round(v, 3) for k, v in sorted(self.stage_seconds.items())},
            "share_in_targets": round(inside / self.test_seconds, 3) if self.test_seconds else None,
            "signatures": dict(Counter(self.confirm_state.values())),
            "flaky": self.flaky,
            "interrupted": self.interrupted,
            "first_confirmed_at": self.first_confirmed_at,
            "confirmed_at": dict(self.confirmed_at),
            "engine": self.engine_info,
            **({"arms": self.arms} if self.arms else {}),
            **({"ended_early": self.ended_early} if self.ended_early else {}),
            **({"phase_seconds": {k: round(v, 1) for k, v in self.phase_seconds.items()}}
               if self.phase_seconds else {}),
            **({"targets_not_on_runner": dict(sorted(self.not_on_runner.items()))} if self.not_on_runner else {}),
            **({"devices": dict(sorted(self.devices.items()))} if self.devices else {}),
            **({"device_notes": dict(sorted(self.device_notes.items()))} if self.device_notes else {}),
            **{k: (v() if callable(v) else v) for k, v in self.extra_stats.items()},
        }


def add_phase(campaign: Campaign, phase: str, since: float) -> None:
    """Wall seconds of a phase since ``since``, added to what earlier calls of it took (a scan tests twice)."""
    campaign.phase_seconds[phase] = campaign.phase_seconds.get(phase, 0.0) + time.monotonic() - since
