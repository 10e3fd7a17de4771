"""Which test runs next in an explicit run: a cost-aware share of the budget per arm, OPERA's order within each.

An arm is a target and a source of instances (``tvm.from_fx`` × ``module_db``): what one test costs and how often it
fails in a new way differ by orders of magnitude between arms (an ONNX Runtime session: 10 ms; OpenVINO through a
SavedModel: 3 s), so the plan's instance-major order lets the expensive arms starve the cheap ones, and a broad run
ends having tried a few dozen instances. Here each arm is charged the worker seconds its tests took (the running ones
at the arm's mean cost so far) and the next test comes from the arm with the least charge per unit of weight (stride
scheduling), so every arm gets its share of time and the cheap ones run many more tests within it. The weight grows
with what an arm yields (distinct failure signatures per minute of its own time, with a prior of one signature over
a minute that fades as the arm spends time) and with the share of its tests that are valid, up to MAX_WEIGHT, so the
budget drifts to where bugs are found without starving the rest: an arm that has found nothing keeps about 2 shares
against the best arms' 16 (at 8, the broad runs gave the twenty barren arms half of the testing time, and the TVM
from_fx × opinfo arm, 53 signatures in 20 s, as much as ONNX Runtime's, 5 in 19 s).
Within an arm the tests keep the plan's order (OPERA's diversity order)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from dlci.outcome import CRASH, INCONSISTENT, PASS

PRIOR_SECONDS = 1.0  # what a test of an arm that has not reported yet is charged while it runs
PRIOR_TESTS = 2      # pseudo-tests of the prior in an arm's mean cost (a first outlier cannot rule)
# valid pseudo-tests in an arm's valid share: a dozen unsupported modules first (Transformer, LSTM, ...) are not yet
# an arm of unsupported tests
VALID_PRIOR_TESTS = 16
YIELD_WEIGHT = 1.0   # weight added per failure signature found per minute of the arm's own time
# signatures an arm is credited with before it finds any: an arm that has found nothing yet is not known to be barren
# (a broad run's TVM from_fx × module_db arm began with a dozen unsupported Transformer/RNN modules, had weight 0.36
# against 8, and was never picked again: the BatchNorm2d bug behind them went unfound)
PRIOR_SIGNATURES = 1.0
PRIOR_MINUTES = 1.0  # ... over this much time: an arm's yield is (signatures + 1) / (its minutes + 1)
MAX_WEIGHT = 16.0    # no arm gets more than this many shares, however well it yields (simulated on a broad run's
# arms, 32 and more starved arms that yield only after an unlucky start)
INVALID_FLOOR = 0.25  # weight of an arm none of whose tests is valid (it may still become valid: keep a share)
# worker seconds of a target's cold tests (Outcome.cold: its first in a worker, which pays the target's imports and
# first calls) left uncharged per target: about one start per worker. A barren arm's share is a few seconds, and
# charged its starts, a TVM or torch.compile arm ran one partial batch (broad13: tvm.from_exported_program x opinfo,
# 7 tests in 6.4 s); bounded, so that a target that kills its worker on every test is still charged its time
WARMUP_SECONDS = 8.0
# a partial batch goes out after this long: the scheduler charges a waiting test as running, so an arm whose batch
# never fills (cheap arms keep winning the charge) would otherwise never run at all
BATCH_WAIT_SECONDS = 5.0


@dataclass
class Arm:
    key: tuple[str, str]  # (target, source)
    queue: list = field(default_factory=list)  # tests, in plan order
    pos: int = 0
    seconds: float = 0.0   # worker seconds of its tests that reported
    tests: int = 0
    valid: int = 0
    running: int = 0
    signatures: int = 0    # new failure signatures its tests found

    def mean_cost(self) -> float:
        return (self.seconds + PRIOR_TESTS * PRIOR_SECONDS) / (self.tests + PRIOR_TESTS)

    def charge(self) -> float:
        return self.seconds + self.running * self.mean_cost()

    def weight(self) -> float:
        valid_share = (self.valid + VALID_PRIOR_TESTS) / (self.tests + VALID_PRIOR_TESTS)
        base = INVALID_FLOOR + (1.0 - INVALID_FLOOR) * valid_share
        # the prior fades as the arm's own time grows: a signature in its first seconds is not a rate yet, and an
        # arm that stays barren for minutes is worth less than one that has not been tried
        rate = (self.signatures + PRIOR_SIGNATURES) / (self.seconds / 60.0 + PRIOR_MINUTES)
        return min(MAX_WEIGHT, base * (1.0 + YIELD_WEIGHT * rate))

    def as_dict(self) -> dict:
        return {"tests": self.tests, "valid": self.valid, "seconds": round(self.seconds, 2),
                "signatures": self.signatures, "left": len(self.queue) - self.pos,
                "weight": round(self.weight(), 3)}


class CostAware:
    """Iterates the tests (``dlci.campaign.stages.Test``) arm by arm as described above; ``observe`` each outcome
    (with whether it found a new failure signature) as it comes back."""

    def __init__(self, tests: Sequence, arm_of=None):
        self.arm_of = arm_of or (lambda t: (t.target, t.instance.origin.source))
        self.arms: dict[tuple[str, str], Arm] = {}
        for t in tests:
            key = self.arm_of(t)
            self.arms.setdefault(key, Arm(key)).queue.append(t)
        self._order = list(self.arms)  # ties go to the arm whose first test came first in the plan
        self.warmup_left: dict[str, float] = {}  # per target: cold seconds not charged yet (WARMUP_SECONDS)

    def _next_arm(self) -> Arm | None:
        best, best_key = None, None
        for rank, key in enumerate(self._order):
            arm = self.arms[key]
            if arm.pos >= len(arm.queue):
                continue
            k = (arm.charge() / arm.weight(), rank)
            if best_key is None or k < best_key:
                best, best_key = arm, k
        return best

    def __iter__(self) -> Iterator:
        while True:
            arm = self._next_arm()
            if arm is None:
                return
            test = arm.queue[arm.pos]
            arm.pos += 1
            arm.running += 1
            yield test

    def observe(self, test, seconds: float, status: str, new_signature: bool, cold: bool = False) -> None:
        arm = self.arms.get(self.arm_of(test))
        if arm is None:
            return
        seconds = max(0.0, seconds)
        if cold:  # the target's start in a worker: not what the arm's tests cost (up to WARMUP_SECONDS a target)
            left = self.warmup_left.get(test.target, WARMUP_SECONDS)
            exempt = min(seconds, left)
            self.warmup_left[test.target] = left - exempt
            seconds -= exempt
        arm.running = max(0, arm.running - 1)
        arm.seconds += seconds
        arm.tests += 1
        arm.valid += status in (PASS, CRASH, INCONSISTENT)
        arm.signatures += bool(new_signature)

    def stats(self) -> dict:
        return {f"{t} × {s}": arm.as_dict() for (t, s), arm in sorted(self.arms.items()) if arm.tests or arm.running}


class BatchFiller:
    """Tests waiting, per target, for a batch of that target's size; a batch goes out when full or when its first
    test has waited ``wait`` seconds."""

    def __init__(self, wait: float = BATCH_WAIT_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.wait, self.clock = wait, clock
        self._waiting: dict[str, list] = {}
        self._since: dict[str, float] = {}

    def add(self, target: str, test, size: int) -> list | None:
        """Queue ``test``; its target's batch when this filled it."""
        self._waiting.setdefault(target, []).append(test)
        self._since.setdefault(target, self.clock())
        return self.take(target) if len(self._waiting[target]) >= size else None

    def take(self, target: str) -> list:
        self._since.pop(target, None)
        return self._waiting.pop(target)

    def overdue(self) -> list[str]:
        now = self.clock()
        return [t for t, since in self._since.items() if now - since > self.wait]

    def waiting(self) -> list[str]:
        return list(self._waiting)
