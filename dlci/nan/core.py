"""Shared pieces of the NaN/Inf search: external values, run configurations and records (the programs themselves:
dlci.models.program)."""
from __future__ import annotations

import linecache
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlci.models.program import Program
from dlci.nan.standalone import user_frame

NORMAL_SIGMAS = 100.0  # normal draws stay within this many standard deviations of their mean
# Weights are trained: a search may move an initial weight past its initializer's support, up to this many times
# the initializer's bound (what training could reach), while data draws stay inside their generator's support.
WEIGHT_RANGE = 10.0


@dataclass
class External:
    """One value that enters the program from outside its code: a random draw (or numpy data)."""
    index: int
    gen: str  # the generator's public name, e.g. torch.randn, torch.nn.init.kaiming_uniform_, tf.random.normal
    file: str
    line: int
    shape: tuple
    dtype: str
    orig: np.ndarray  # the value drawn in this run (before any substitution)
    kind: str = "real"  # real | int (discrete draws are only ever redrawn, never moved)
    low: float = -np.inf  # legal range of the generator (inclusive, already nudged inside a half-open bound)
    high: float = np.inf
    scale: float = 1.0  # the generator's spread: std, or half the uniform width
    differentiable: bool = False
    iterative: bool = False  # a weight (a leaf the program trains), moved by gradient-sign steps

    @property
    def name(self) -> str:
        where = f"{Path(self.file).name}:{self.line}" if self.file else "lib"
        return f"e{self.index}_{self.gen}@{where}"

    def bounds(self) -> tuple[float, float]:
        if not self.iterative:
            return self.low, self.high
        reach = WEIGHT_RANGE * self.scale
        return min(self.low, -reach), max(self.high, reach)

    def clip(self, v: np.ndarray) -> np.ndarray:
        low, high = self.bounds()
        return np.clip(v, low, high).astype(v.dtype, copy=False)


@dataclass
class Event:
    """The first intercepted operation with all inputs finite and a NaN/Inf output (or gradient)."""
    op: str
    file: str
    line: int
    code: str
    kind: str  # nan | inf
    phase: str = "forward"  # forward | backward (the operation's gradient went non-finite)
    entry: str | None = None  # table entry name when the op is in the table

    def key(self) -> tuple:
        return (self.op, self.file, self.line, self.phase)


@dataclass
class Site:
    """A call site of a vulnerable operation, found by intercepting a run."""
    op: str
    entry: str
    file: str
    line: int
    code: str
    calls: int = 0
    best: float = float("inf")  # smallest distance to the invalid set seen
    precursor: bool = False

    def key(self) -> tuple:
        return (self.op, self.file, self.line)


@dataclass
class RunConfig:
    run_seed: int
    subst: dict[int, np.ndarray] = field(default_factory=dict)
    target: tuple | None = None  # Site.key() whose distance to minimise (gradients wanted)
    differentiable: bool = False
    survey: bool = False  # record every vulnerable call site with its distance
    focus: int | None = None  # the element of the target's distance map to drive (None: the minimum)
    draw_grads: bool = True  # return differentiable draws (off when the program cannot take them, e.g. .numpy())


@dataclass
class RunRecord:
    externals: list[External] = field(default_factory=list)
    event: Event | None = None
    error: str | None = None  # traceback text when the program raised
    error_type: str | None = None
    sites: dict[tuple, Site] = field(default_factory=dict)
    target_d: float | None = None
    focus: int | None = None  # the element of the distance map target_d was taken at
    grads: dict[int, np.ndarray] = field(default_factory=dict)
    seconds: float = 0.0


def source_line(path: str, line: int) -> str:
    return linecache.getline(path, line).strip()


# library code whose vulnerable calls are not the model's: optimizers' eps-guarded arithmetic on their own state
_OPTIMIZER_DIRS = ("/torch/optim/", "/keras/src/optimizers/", "/keras/optimizers/", "/tensorflow/python/training/",
                   "/tf_keras/src/optimizers/")


def inside_optimizer(frame, path: str) -> bool:
    """Is the call at ``frame`` made by optimizer code (between it and the user's file ``path``)?"""
    f = frame
    while f is not None and f.f_code.co_filename != path:
        fn = f.f_code.co_filename.replace("\\", "/")
        if any(d in fn for d in _OPTIMIZER_DIRS):
            return True
        f = f.f_back
    return False


class Stop(BaseException):
    """Ends a run at its first event (BaseException: a program's ``except Exception`` does not swallow it)."""


class RunState:
    """What both tracers keep about one intercepted run (the framework-specific parts live in their subclasses)."""

    def __init__(self, program: Program, cfg: RunConfig, tab, adapter):
        self.program, self.cfg, self.table = program, cfg, tab
        self.path = program.file
        self.rec = RunRecord()
        self.diff = cfg.differentiable
        self.best = float("inf")  # the target's smallest distance in this run
        self.own_grad = False  # the search is taking its own gradient: the program's probes stay quiet
        self.adapter = adapter

    def site(self) -> tuple[str, int, str]:
        """(file, line, code) of the innermost frame in the program's file, or ("", 0, "")."""
        uf = user_frame(self.path, sys._getframe(1))
        if uf is None:
            return "", 0, ""
        return self.path, uf[0], source_line(self.path, uf[0])

    def backward_event(self, name: str, entry: str | None, file: str, line: int, code: str):
        """The callback of a backward probe: records the first NaN/Inf gradient (not during the search's own)."""
        def on_bad(kind):
            if self.own_grad or self.rec.event is not None:
                return
            self.rec.event = Event(op=name, file=file, line=line, code=code, kind=kind, phase="backward",
                                   entry=entry)
        return on_bad

    def survey(self, key: tuple, name: str, entry: dict, file: str, line: int, code: str, dmin: float) -> None:
        s = self.rec.sites.get(key)
        if s is None:
            s = self.rec.sites[key] = Site(op=name, entry=entry["name"], file=file, line=line, code=code,
                                           precursor=bool(entry.get("precursor")))
        s.calls += 1
        s.best = min(s.best, dmin)

    def execute(self, within) -> None:
        """Run the program inside the context ``within`` (the tracer's interception); an event's :class:`Stop` ends
        it quietly, the program's own exception is recorded."""
        try:
            with within:
                self.program.fn()
        except Stop:
            pass
        except Exception as e:  # noqa: BLE001 - the program's own failure is data for the caller
            self.failed(e)

    def failed(self, e: BaseException) -> None:
        """The program's own exception: data for the caller (unless an event ended the run first)."""
        if self.rec.event is None:
            self.rec.error = "".join(traceback.format_exception(type(e), e, e.__traceback__))[-4000:]
            self.rec.error_type = type(e).__name__
