"""The search for inputs that make a program produce NaN/Inf (GRIST's idea: let the framework's own gradients push
the operand of a vulnerable operation toward its invalid values).

``strategy="gradient"``:
1. a survey run (the program as written, seeded with ``seed``) lists the vulnerable call sites it reaches and how far
   each operand is from its invalid set (the table's distance ``d``);
2. one call site at a time (closest first, round-robin in slices of iterations): run the program with the external
   values made differentiable, take ``d`` at the site (its smallest value in the run) and its gradient ``g`` with
   respect to every external, and propose new externals:
   - non-iterative ones (data drawn by the program) by a first-order solve toward the invalid value,
     ``delta = (target - d) * g / ||g||^2`` with ``target = -(f - 1) * d`` (``f`` grows while steps succeed and
     shrinks when they do not);
   - iterative ones (weights, which a training loop keeps changing) by gradient-sign steps ``-alpha*scale*sign(g)``;
   every value clipped to its generator's legal range (``rand`` stays in [0, 1), a ``uniform_(-b, b)`` weight in
   [-b, b], normal draws within ``NORMAL_SIGMAS`` standard deviations); a proposal is kept when ``d`` decreased;
3. after ``patience`` failed proposals, batch replacement: the ``switch_rate`` share of externals with the lowest
   importance (|gradient| x scale) is redrawn from a fresh seed while the rest keep their values; after
   ``max_replacements`` of those, a full restart from a fresh seed;
4. termination: the first NaN/Inf event (any intercepted operation, not only the target), the budget, or every
   call site exhausted (its distance reached the boundary without an event, or ``max_restarts`` restarts).

``strategy="random"``: the same interception and budget, the original program re-run with fresh seeds.

A finding is confirmed by a plain (non-differentiable) re-run with the found values, then minimised: externals are
reset to the values the seed draws, one at a time, while the same event persists; within the ones that matter,
elements are reset in halves (smallest changes first) while it persists.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

import dlci.nan.table as T
from dlci.nan.core import Event, Program, ProgramError, RunConfig, RunRecord, load_program


@dataclass
class SearchResult:
    program: str
    function: str
    file_program: str
    framework: str
    strategy: str
    seed: int
    budget: float
    found: bool = False
    kind: str | None = None  # nan | inf
    op: str | None = None
    entry: str | None = None  # the table entry the op reaches (None: an op outside the table went NaN/Inf)
    phase: str | None = None  # forward | backward
    file: str | None = None
    line: int | None = None
    code: str | None = None
    seconds_to_first: float | None = None
    seconds: float = 0.0
    runs: int = 0
    runs_failed: int = 0  # program executions that raised (a proposal the program rejects)
    iterations: int = 0
    run_seed: int | None = None
    externals: dict[str, np.ndarray] = field(default_factory=dict)  # the failure-inducing values that matter
    substitutions: dict[int, np.ndarray] = field(default_factory=dict)  # draw index -> value (for reproducers)
    external_info: list[dict] = field(default_factory=list)  # every external of the finding run
    changed_elements: dict[str, int] = field(default_factory=dict)
    candidates: list[dict] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict:
        return {
            "program": self.program, "function": self.function, "framework": self.framework,
            "strategy": self.strategy, "seed": self.seed, "budget": self.budget, "found": self.found,
            "kind": self.kind, "op": self.op, "entry": self.entry, "phase": self.phase, "file": self.file,
            "line": self.line, "code": self.code, "seconds_to_first": self.seconds_to_first,
            "seconds": round(self.seconds, 3), "runs": self.runs, "runs_failed": self.runs_failed,
            "iterations": self.iterations,
            "run_seed": self.run_seed,
            "externals": {k: {"shape": list(v.shape), "dtype": str(v.dtype),
                              "values": v.tolist() if v.size <= 16 else None,
                              "changed_elements": self.changed_elements.get(k)}
                          for k, v in self.externals.items()},
            "candidates": self.candidates, "note": self.note,
        }


def engine_for(framework: str):
    # imported by their module path: a `from dlci.nan import` would make the package and its modules a cycle
    if framework == "torch":
        import dlci.nan.torch_trace as torch_trace
        return torch_trace
    import dlci.nan.tf_trace as tf_trace
    return tf_trace


@dataclass
class _Cand:
    """Search state for one vulnerable call site."""
    key: tuple
    run_seed: int
    subst: dict[int, np.ndarray] = field(default_factory=dict)
    rec: RunRecord | None = None
    focus: int | None = None  # the distance-map element being driven (kept while it improves)
    factor: float = 2.0  # linear-solve factor f: target = -(f - 1) * d
    alpha: float = 0.1  # sign-step size, in units of each weight's scale
    mode: int = 0  # which externals a proposal moves: 0 both groups, 1 data only, 2 weights only (cycled on failure)
    stall: int = 0
    replacements: int = 0
    restarts: int = 0
    done: bool = False
    why_done: str = ""


class _Found(Exception):
    def __init__(self, rec: RunRecord, cfg: RunConfig):
        self.rec, self.cfg = rec, cfg


class Searcher:
    def __init__(self, program: Program, *, budget: float, seed: int, slice_iters: int = 12, patience: int = 6,
                 switch_rate: float = 0.5, max_replacements: int = 2, max_restarts: int = 6,
                 minimize_seconds: float | None = None, log=None):
        self.program = program
        self.framework = program.framework()
        self.engine = engine_for(self.framework)
        self.table = T.table()
        self.budget, self.seed = float(budget), int(seed)
        self.slice_iters, self.patience, self.switch_rate = slice_iters, patience, switch_rate
        self.max_replacements, self.max_restarts = max_replacements, max_restarts
        self.minimize_seconds = minimize_seconds if minimize_seconds is not None else min(20.0, max(3.0, budget / 2))
        self.log = log or (lambda msg: None)
        self.runs = 0
        self.draw_grads = True
        self.runs_failed = 0
        self.iterations = 0
        self.t0 = time.monotonic()
        self.first_at: float | None = None
        self._seeds = np.random.default_rng([self.seed, 0x6e616e])

    # -- plumbing ---------------------------------------------------------------------------------------
    def exec(self, cfg: RunConfig) -> RunRecord:
        self.runs += 1
        rec = self.engine.run(self.program, cfg, self.table)
        if rec.error:
            self.runs_failed += 1
        if rec.event is not None and self.first_at is None:
            self.first_at = time.monotonic() - self.t0
        return rec

    def fresh_seed(self) -> int:
        return int(self._seeds.integers(1, 2 ** 31 - 1))

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.t0)

    def result(self, strategy: str) -> SearchResult:
        return SearchResult(program=self.program.spec, function=self.program.function,
                            file_program=self.program.file, framework=self.framework, strategy=strategy,
                            seed=self.seed, budget=self.budget)

    # -- entry --------------------------------------------------------------------------------------------
    def search(self, strategy: str) -> SearchResult:
        if strategy not in ("gradient", "random"):
            raise ValueError(f"unknown strategy {strategy!r} (gradient | random)")
        res = self.result(strategy)
        cfg0 = RunConfig(run_seed=self.seed, survey=True)
        rec0 = self.exec(cfg0)
        if rec0.event is None and rec0.error:
            last = rec0.error.strip().splitlines()[-1] if rec0.error.strip() else rec0.error_type
            raise ProgramError(f"{self.program.spec} raised on its own before any search: {last}")
        res.candidates = [{"op": s.op, "entry": s.entry, "file": s.file, "line": s.line, "code": s.code,
                           "calls": s.calls, "distance": s.best} for s in self._order(rec0.sites)]
        try:
            if rec0.event is not None:
                raise _Found(rec0, cfg0)
            if strategy == "random":
                self._random()
            else:
                self._gradient(rec0)
            res.note = res.note or "no NaN/Inf within the budget"
        except _Found as f:
            self._finish(res, f.rec, f.cfg)
        res.runs, res.runs_failed, res.iterations = self.runs, self.runs_failed, self.iterations
        res.seconds = time.monotonic() - self.t0
        return res

    # -- random baseline ------------------------------------------------------------------------------------
    def _random(self) -> None:
        i = 0
        while self.left() > 0:
            i += 1
            cfg = RunConfig(run_seed=self.fresh_seed())
            rec = self.exec(cfg)
            self.iterations += 1
            if rec.event is not None and self._confirmed(cfg, rec.event):
                raise _Found(rec, cfg)

    # -- gradient search -------------------------------------------------------------------------------------
    def _order(self, sites: dict) -> list:
        def rank(s):
            entry = self.table.by_name(s.entry) or {"check": ""}
            return (s.precursor, T.scale_of(entry, s.best))
        return sorted(sites.values(), key=rank)

    def _gradient(self, rec0: RunRecord) -> None:
        sites = self._order(rec0.sites)
        if not sites:
            raise _NoCandidates()
        cands = [_Cand(key=s.key(), run_seed=self.seed) for s in sites]
        while self.left() > 0:
            active = [c for c in cands if not c.done]
            if not active:
                return
            for c in active:
                self._work(c)
                if self.left() <= 0:
                    return

    def _cfg(self, c: _Cand, subst=None) -> RunConfig:
        return RunConfig(run_seed=c.run_seed, subst=c.subst if subst is None else subst, target=c.key,
                         differentiable=True, focus=c.focus, draw_grads=self.draw_grads)

    def _evaluate(self, c: _Cand, subst: dict) -> RunRecord:
        cfg = self._cfg(c, subst)
        rec = self.exec(cfg)
        self.iterations += 1
        if rec.error and not subst and self.draw_grads:
            # the program as drawn fails only with differentiable draws (x.numpy(), x.requires_grad_() on a
            # non-leaf...): go on with gradients for the weights alone
            self.draw_grads = False
            cfg = self._cfg(c, subst)
            rec = self.exec(cfg)
        if rec.event is not None and self._confirmed(cfg, rec.event):
            raise _Found(rec, cfg)
        return rec

    def _work(self, c: _Cand) -> None:
        for _ in range(self.slice_iters):
            if self.left() <= 0 or c.done:
                return
            if c.rec is None:
                rec = self._evaluate(c, c.subst)
                if rec.target_d is None or rec.error:
                    c.stall = self.patience  # the site is not reached (or the program fails) this way: redraw
                else:
                    c.rec, c.focus = rec, rec.focus
                    if rec.target_d <= 0:
                        self._exhaust(c, "the operand reached its boundary without a NaN/Inf")
                        return
            else:
                proposal = self._propose(c)
                if proposal is None:
                    c.stall = self.patience
                else:
                    rec = self._evaluate(c, proposal)
                    if rec.target_d is not None and not rec.error and rec.target_d < c.rec.target_d:
                        c.subst, c.rec, c.stall = proposal, rec, 0
                        c.factor, c.alpha = min(c.factor * 2.0, 1e6), min(c.alpha * 1.5, 1.0)
                        if rec.target_d <= 0:
                            self._exhaust(c, "the operand reached its boundary without a NaN/Inf")
                            return
                    else:
                        # the two groups can pull against each other: the next proposals move one group at a time
                        c.mode = (c.mode + 1) % 3
                        if c.mode == 0:
                            c.factor, c.alpha = max(c.factor / 4.0, 1e-3), max(c.alpha / 2.0, 1e-4)
                        c.stall += 1
            if c.stall >= self.patience:
                self._replace(c)

    def _exhaust(self, c: _Cand, why: str) -> None:
        c.done, c.why_done = True, why

    def _propose(self, c: _Cand) -> dict | None:
        rec = c.rec
        d = rec.target_d
        exts = {e.index: e for e in rec.externals}
        new = dict(c.subst)
        data, weights = {}, {}
        for k, g in rec.grads.items():
            e = exts.get(k)
            if e is None or e.kind != "real" or g.shape != e.shape or not np.all(np.isfinite(g)):
                continue
            cur = np.asarray(c.subst.get(k, e.orig), dtype=np.float64)
            # projected: a component that would push a value already at its bound further out does not count
            low, high = e.bounds()
            g = np.where(((cur >= high) & (g < 0)) | ((cur <= low) & (g > 0)), 0.0, g)
            if not np.any(g):
                continue
            (weights if e.iterative else data)[k] = (cur, g, e)
        if c.mode == 1 and data:
            weights = {}
        elif c.mode == 2 and weights:
            data = {}
        if not data and not weights:
            return None
        nrm2 = sum(float(np.sum(g * g)) for _, g, _ in data.values())
        if data and nrm2 > 0:
            step = c.factor * max(d, 1e-300) / nrm2
            for k, (cur, g, e) in data.items():
                new[k] = e.clip(cur - step * g).astype(e.orig.dtype)
        for k, (cur, g, e) in weights.items():
            new[k] = e.clip(cur - c.alpha * e.scale * np.sign(g)).astype(e.orig.dtype)
        if all(k in c.subst and np.array_equal(new[k], c.subst[k]) for k in new):
            return None
        return new

    def _replace(self, c: _Cand) -> None:
        """Batch replacement (redraw the least important externals), or a full restart after enough of them."""
        rec = c.rec
        if rec is not None and c.replacements < self.max_replacements and rec.externals:
            imp = {}
            for e in rec.externals:
                g = rec.grads.get(e.index)
                imp[e.index] = float(np.sum(np.abs(g))) * e.scale if g is not None and e.kind == "real" else 0.0
            order = sorted(imp, key=lambda k: (imp[k], self._seeds.random()))
            n_switch = max(1, int(round(self.switch_rate * len(order))))
            switch = set(order[:n_switch])
            keep = {e.index: np.asarray(c.subst.get(e.index, e.orig)) for e in rec.externals if e.index not in switch}
            c.subst, c.replacements = keep, c.replacements + 1
        else:
            c.subst, c.replacements, c.restarts = {}, 0, c.restarts + 1
            if c.restarts > self.max_restarts:
                self._exhaust(c, f"{self.max_restarts} restarts without getting closer")
        c.run_seed = self.fresh_seed()
        c.rec, c.focus, c.stall, c.factor, c.alpha, c.mode = None, None, 0, 2.0, 0.1, 0

    # -- confirmation and minimisation ---------------------------------------------------------------------
    def _confirmed(self, cfg: RunConfig, event: Event) -> bool:
        rec = self.exec(RunConfig(run_seed=cfg.run_seed, subst=cfg.subst))
        return rec.event is not None and rec.event.key() == event.key()

    def _finish(self, res: SearchResult, rec: RunRecord, cfg: RunConfig) -> None:
        ev = rec.event
        if not self._confirmed(cfg, ev):
            res.note = "a NaN/Inf appeared but did not reproduce on a re-run (nondeterministic program?)"
            return
        subst = {k: np.asarray(v) for k, v in cfg.subst.items()}
        exts = {e.index: e for e in rec.externals}
        # drop substitutions equal to what the seed draws anyway
        subst = {k: v for k, v in subst.items() if k not in exts or not np.array_equal(v, exts[k].orig)}
        deadline = time.monotonic() + self.minimize_seconds
        for k in sorted(subst, key=lambda k: -k):
            if time.monotonic() > deadline:
                break
            trial = {j: v for j, v in subst.items() if j != k}
            if self._confirmed(RunConfig(run_seed=cfg.run_seed, subst=trial), ev):
                subst = trial
        changed = {}
        for k in sorted(subst):
            e = exts.get(k)
            if e is None or e.kind != "real" or e.orig.shape != subst[k].shape:
                continue
            cur = subst[k].copy()
            for _ in range(8):
                if time.monotonic() > deadline:
                    break
                diff = np.abs(cur.astype(np.float64) - e.orig.astype(np.float64))
                moved = np.flatnonzero(diff.ravel() > 0)
                if moved.size <= 1:
                    break
                small = moved[np.argsort(diff.ravel()[moved], kind="stable")[: moved.size // 2]]
                trial_v = cur.copy().reshape(-1)
                trial_v[small] = e.orig.reshape(-1)[small]
                trial_v = trial_v.reshape(cur.shape)
                if self._confirmed(RunConfig(run_seed=cfg.run_seed, subst={**subst, k: trial_v}), ev):
                    cur = trial_v
                else:
                    break
            subst[k] = cur
            changed[k] = int(np.count_nonzero(cur != e.orig))
        res.found = True
        res.kind, res.op, res.entry, res.phase = ev.kind, ev.op, ev.entry, ev.phase
        res.file, res.line, res.code = ev.file, ev.line, ev.code
        res.seconds_to_first = round(self.first_at, 3) if self.first_at is not None else None
        res.run_seed = cfg.run_seed
        res.substitutions = subst
        res.external_info = [{"index": e.index, "name": e.name, "gen": e.gen, "shape": list(e.shape),
                              "dtype": e.dtype, "file": e.file, "line": e.line, "matters": e.index in subst}
                             for e in rec.externals]
        if subst:
            res.externals = {exts[k].name if k in exts else f"e{k}": v for k, v in subst.items()}
            res.changed_elements = {exts[k].name if k in exts else f"e{k}": n for k, n in changed.items()}
            res.note = ("the values that matter: " + ", ".join(res.externals) +
                        "; every other external keeps what the seed draws")
        else:
            res.externals = {e.name: e.orig for e in rec.externals}
            res.note = f"the program as written fails under seed {cfg.run_seed}"


class _NoCandidates(Exception):
    pass


def search(prog: Program | str, strategy: str = "gradient", budget: float = 30.0, seed: int = 0,
           **options) -> SearchResult:
    """Search ``prog`` (a :class:`Program` or a ``FILE:FUNCTION`` spec) for a NaN/Inf-producing input.

    Raises :class:`ProgramError` when the spec is bad or the program raises on its own."""
    if isinstance(prog, str):
        prog = load_program(prog)
    s = Searcher(prog, budget=budget, seed=seed, **options)
    try:
        return s.search(strategy)
    except _NoCandidates:
        res = s.result(strategy)
        res.runs, res.runs_failed, res.iterations = s.runs, s.runs_failed, s.iterations
        res.seconds = time.monotonic() - s.t0
        res.note = "no vulnerable operation was reached"
        return res
