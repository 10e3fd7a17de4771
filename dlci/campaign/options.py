"""The run options shared by every command that runs tests (test, rules, scan, fuzz).

One argument group (dlci.commands.run_options) maps the command line onto :class:`RunOptions`; the domain reads
nothing else, so a setting exists once and means the same thing everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dlci.errors import UsageError

FAIL_ON = ("any", "new", "never")  # which findings make a run exit 1 (dlci.findings.counted)
SCHEDULES = ("cost", "plan")  # cost: budget shared by arm (dlci.campaign.schedule); plan: instance by instance


def _quiet(msg: str) -> None:
    pass


@dataclass
class RunOptions:
    out: Path
    budget: float | None = None          # seconds of testing; None: the command's default (.dlci.yml for scan)
    workers: int = 2
    timeout: float = 120.0               # seconds per test before it counts as a hang
    memory_mb: int = 3000                # per worker before a test counts as OOM
    sources: list[str] | None = None     # migration sources (None: the defaults)
    limit_per_op: int | None = None      # instances per operator per source
    check_repros: bool = True            # run each reproducer alone before its finding is reported
    reduce: bool = True                  # shrink each finding's instance before its reproducer is written
    reduce_seconds: float | None = None  # per finding (None: a share of the budget, 10 to 60 s)
    fail_on: str = "any"
    known: list = field(default_factory=list)  # dlci.findings.known.KnownIssue entries (--known / .dlci.yml)
    batch: bool = True                   # pack tests where the target can (Target.batch_size); off: one per model
    schedule: str = "cost"               # SCHEDULES: the order tests run in an explicit run
    progress: Callable[[str], None] = _quiet

    def __post_init__(self):
        self.out = Path(self.out)
        for name, value, low in (("workers", self.workers, 1), ("budget", self.budget, 1), ("timeout", self.timeout, 1),
                                 ("memory-mb", self.memory_mb, 256), ("limit-per-op", self.limit_per_op, 1)):
            if value is not None and value < low:
                raise UsageError(f"--{name} must be at least {low}, got {value}")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"--schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.fail_on not in FAIL_ON:
            raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}, got {self.fail_on!r}")

    def seconds_to_reduce(self, budget: float) -> float:
        """Time to shrink one finding."""
        return self.reduce_seconds or min(60.0, max(10.0, 0.1 * budget))
