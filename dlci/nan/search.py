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
3. snap rounds (:mod:`dlci.nan.snap`) where the continuous steps stall near a boundary they can only approach (a
   variance, a norm, a squared distance at 0; a cosine at 1): the externals that feed the driven element jump to
   the exact values where it collapses (a weight column at 0, rows of a batch equal, two inputs equal, vectors at
   a basis direction), and the move that brings ``d`` lowest is kept. A NaN/Inf that a move produces is held for a
   while if sites ranked before its own are still searched (a jump may break another operation first; a failure
   found meanwhile at a site ranked earlier wins);
4. after ``patience`` failed proposals, batch replacement: the ``switch_rate`` share of externals with the lowest
   importance (|gradient| x scale) is redrawn from a fresh seed while the rest keep their values; after
   ``max_replacements`` of those, a full restart from a fresh seed; a site is exhausted when its distance reached
   the boundary without an event, or after ``max_restarts`` restarts;
5. once every site is exhausted, a new round: a fresh survey (which may reach sites the earlier draws did not) and
   every site re-armed with fresh draws; the search ends at the first NaN/Inf event (any intercepted operation, not
   only the target) or at the budget, which bounds the whole search in wall-clock time (minimisation included;
   a program run in progress is not interrupted).

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
from dlci.models.program import Program, ProgramError, load_program
from dlci.nan.core import Event, RunConfig, RunRecord


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
    rounds: int = 0  # fresh rounds after every site was exhausted
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
            "iterations": self.iterations, "rounds": self.rounds,
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
    snap_kind: str | None = None  # which snap moves fit the site's boundary (dlci.nan.snap.family); None: no snaps
    snap_d: float | None = None  # the distance at the last snap round, or at the state's first record
    slow: int = 0  # accepted steps in a row that did not cut the distance tenfold
    rounds_here: int = 0  # snap rounds from this state (since the last redraw)
    snapped: int = 0  # snap rounds in all
    barren: float = float("inf")  # the lowest distance a snap round found nothing from (a guard's floor, say)
    done: bool = False
    why_done: str = ""

    def rearm(self, run_seed: int) -> None:
        """A fresh start from new draws (a new round once every site was exhausted)."""
        self.run_seed, self.subst, self.rec, self.focus = run_seed, {}, None, None
        self.factor, self.alpha, self.mode, self.stall, self.slow, self.rounds_here = 2.0, 0.1, 0, 0, 0, 0
        self.replacements, self.restarts, self.snap_d, self.done, self.why_done = 0, 0, None, False, ""


class _Found(Exception):
    def __init__(self, rec: RunRecord, cfg: RunConfig):
        self.rec, self.cfg = rec, cfg


class Searcher:
    def __init__(self, program: Program, *, budget: float, seed: int, slice_iters: int = 12, patience: int = 6,
                 switch_rate: float = 0.5, max_replacements: int = 2, max_restarts: int = 6,
                 minimize_seconds: float | None = None, snaps: bool = True, snap_ratio: float = 0.1,
                 log=None):
        self.program = program
        self.framework = program.framework()
        self.engine = engine_for(self.framework)
        self.table = T.table()
        self.budget, self.seed = float(budget), int(seed)
        self.slice_iters, self.patience, self.switch_rate = slice_iters, patience, switch_rate
        self.max_replacements, self.max_restarts = max_replacements, max_restarts
        # snap rounds (dlci.nan.snap) where continuous steps stall near a boundary; one round spends at most
        # snap_share of the budget
        self.snaps, self.snap_ratio, self.snap_share, self.hold_share = snaps, snap_ratio, 0.15, 0.2
        # a NaN/Inf that a snap move produced, held while sites ranked before its own still deserve their turn:
        # (record, config, rank of its site, since when)
        self.held: tuple[RunRecord, RunConfig, int, float] | None = None
        self.order: list[tuple] = []  # the sites in the order they are worked on (closest first)
        self.rounds = 0  # fresh rounds after every site was exhausted
        self.sites_seen = 0
        self.cands: dict[tuple, _Cand] = {}
        self.minimize_seconds = minimize_seconds if minimize_seconds is not None else min(20.0, max(3.0, budget / 2))
        self.log = log or (lambda msg: None)
        self.runs = 0
        self.draw_grads = True
        self.runs_failed = 0
        self.iterations = 0
        self.t0 = time.monotonic()
        self.first_seen: dict[tuple, float] = {}  # event key -> seconds into the search when a run first met it
        self._seeds = np.random.default_rng([self.seed, 0x6e616e])

    # -- plumbing ---------------------------------------------------------------------------------------
    def exec(self, cfg: RunConfig) -> RunRecord:
        self.runs += 1
        rec = self.engine.run(self.program, cfg, self.table)
        if rec.error:
            self.runs_failed += 1
        if rec.event is not None:
            self.first_seen.setdefault(rec.event.key(), time.monotonic() - self.t0)
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
                self._release()
            if strategy == "gradient" and not self.sites_seen:
                res.note = f"no vulnerable operation was reached in {self.runs} program runs"
            else:
                res.note = res.note or "no NaN/Inf within the budget"
        except _Found as f:
            self._finish(res, f.rec, f.cfg)
        res.runs, res.runs_failed, res.iterations = self.runs, self.runs_failed, self.iterations
        res.rounds = self.rounds
        res.seconds = time.monotonic() - self.t0
        return res

    # -- random baseline ------------------------------------------------------------------------------------
    def _random(self) -> None:
        while self.left() > 0:
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
        cands: dict[tuple, _Cand] = {}
        self.cands = cands
        self._add_sites(cands, rec0, self.seed)
        while self.left() > 0:
            active = [c for c in cands.values() if not c.done]
            if not active:
                self._new_round(cands)
                continue
            for c in active:
                self._maybe_release()
                self._work(c)
                if self.left() <= 0:
                    return

    def _add_sites(self, cands: dict, rec: RunRecord, run_seed: int) -> None:
        from dlci.nan.snap import family
        for s in self._order(rec.sites):
            if s.key() not in cands:
                kind = family(self.table.by_name(s.entry) or {}) if self.snaps else None
                cands[s.key()] = _Cand(key=s.key(), run_seed=run_seed, snap_kind=kind)
        self.sites_seen = len(cands)
        self.order = list(cands)

    def _new_round(self, cands: dict) -> None:
        """Every site exhausted (or none reached yet): start over from fresh draws, until the budget ends. The new
        survey may reach sites that the earlier draws did not (a branch, a shape that depends on the data)."""
        self._release()
        self.rounds += 1
        seed = self.fresh_seed()
        cfg = RunConfig(run_seed=seed, survey=True)
        rec = self.exec(cfg)
        self.iterations += 1
        if rec.event is not None and self._confirmed(cfg, rec.event):
            raise _Found(rec, cfg)
        self._add_sites(cands, rec, seed)
        for c in cands.values():
            if c.done:
                c.rearm(self.fresh_seed())
        self.log(f"round {self.rounds}: {len(cands)} site(s) re-armed from fresh draws")

    def _cfg(self, c: _Cand, subst=None, focus=-1) -> RunConfig:
        return RunConfig(run_seed=c.run_seed, subst=c.subst if subst is None else subst, target=c.key,
                         differentiable=True, focus=c.focus if focus == -1 else focus, draw_grads=self.draw_grads)

    def _evaluate(self, c: _Cand, subst: dict, focus=-1, snap: bool = False) -> RunRecord:
        """One differentiable run toward ``c``'s site; a confirmed NaN/Inf ends the search, unless a snap move
        (``snap``) produced it: then it is held (:meth:`_hold`)."""
        cfg = self._cfg(c, subst, focus)
        rec = self.exec(cfg)
        self.iterations += 1
        if rec.error and not subst and self.draw_grads:
            # the program as drawn fails only with differentiable draws (x.numpy(), x.requires_grad_() on a
            # non-leaf...): go on with gradients for the weights alone
            self.draw_grads = False
            cfg = self._cfg(c, subst, focus)
            rec = self.exec(cfg)
        if rec.event is not None and self._confirmed(cfg, rec.event):
            if not snap:
                raise _Found(rec, cfg)
            self._hold(c, rec, cfg)
        return rec

    def _hold(self, c: _Cand, rec: RunRecord, cfg: RunConfig) -> None:
        """A snap move's NaN/Inf. Snaps are jumps: the failure they find first need not be the one the program meets
        (a zero vector breaks a division by its norm before the cosine it feeds reaches 1), so it waits while a site
        ranked before its own (closer to its boundary) is still searched, for ``hold_share`` of the budget at most;
        one at another site than the move's target waits for all sites. A failure found meanwhile is reported
        instead (a held one from a site ranked earlier replaces it). Released at a new round or the budget's end."""
        on_target = (rec.event.file, rec.event.line) == c.key[1:]
        pos = self.order.index(c.key) if on_target else len(self.order)
        if self.held is not None and self.held[2] <= pos:
            return  # the one held already belongs to a site ranked no later
        self.log(f"held: {rec.event.op}@{rec.event.line} from a snap toward {c.key[0]}@{c.key[2]}")
        self.held = (rec, cfg, pos, time.monotonic())

    def _maybe_release(self) -> None:
        if self.held is None:
            return
        rec, cfg, pos, since = self.held
        waiting = [k for k in self.order[:pos] if not self.cands[k].done]
        if not waiting or time.monotonic() - since > self.hold_share * self.budget:
            raise _Found(rec, cfg)

    def _release(self) -> None:
        """A held NaN/Inf is the finding once the search has nothing better (a new round, or the budget's end)."""
        if self.held is not None:
            raise _Found(*self.held[:2])

    def _work(self, c: _Cand) -> None:
        for _ in range(self.slice_iters):
            if self.left() <= 0 or c.done:
                return
            if c.rec is None:
                rec = self._evaluate(c, c.subst)
                if rec.target_d is None or rec.error:
                    c.stall = self.patience  # the site is not reached (or the program fails) this way: redraw
                else:
                    c.rec, c.focus, c.snap_d = rec, rec.focus, rec.target_d
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
                        self._accept(c, proposal, rec, f"step (mode {c.mode})")
                        c.factor, c.alpha = min(c.factor * 2.0, 1e6), min(c.alpha * 1.5, 1.0)
                        if c.done:
                            return
                    else:
                        # the two groups can pull against each other: the next proposals move one group at a time
                        c.mode = (c.mode + 1) % 3
                        if c.mode == 0:
                            c.factor, c.alpha = max(c.factor / 4.0, 1e-3), max(c.alpha / 2.0, 1e-4)
                        c.stall += 1
            if self._snap_due(c):
                self._snap(c)
                if c.done:
                    return
            if c.stall >= self.patience:
                self._replace(c)

    def _accept(self, c: _Cand, subst: dict, rec: RunRecord, how: str) -> None:
        self.log(f"{c.key[0]}@{c.key[2]} d {c.rec.target_d:.3e} -> {rec.target_d:.3e} by {how}")
        c.slow = c.slow + 1 if rec.target_d > self.snap_ratio * c.rec.target_d else 0
        c.subst, c.rec, c.focus, c.stall = subst, rec, rec.focus, 0
        if rec.target_d <= 0:
            self._exhaust(c, "the operand reached its boundary without a NaN/Inf")

    def _snap_due(self, c: _Cand) -> bool:
        """A snap round is due where continuous steps stall near the boundary: no progress for ``patience``
        proposals, or three accepted steps in a row that did not cut the distance by ``1 / snap_ratio`` (steps that
        converge on a limit they cannot pass, such as rounding noise above an exact 0). Not again from the same
        state before the distance fell below ``snap_ratio`` times its value at the last round, nor from above a
        distance where a round found nothing before."""
        if c.snap_kind is None or c.rec is None or c.done or c.snap_d is None:
            return False
        d = c.rec.target_d
        if d >= self.snap_ratio * c.barren:
            return False  # rounds from this close found nothing before: a floor (a clamp, an eps) keeps it there
        stalled = c.stall >= self.patience or c.slow >= 3
        return stalled and (c.rounds_here == 0 or d < self.snap_ratio * c.snap_d)

    def _snap(self, c: _Cand) -> None:
        """Try the snap moves of the current state (:mod:`dlci.nan.snap`); keep the one that brought the target's
        distance lowest, if it did. A NaN/Inf on the way is held (:meth:`_hold`)."""
        from dlci.nan.snap import snaps
        rec = c.rec
        c.rounds_here += 1
        c.snapped += 1
        if not any(np.any(g) for g in rec.grads.values()):
            # flat: the operand is clamped (a guard) or cut off here; a jump would not collapse it
            c.snap_d = rec.target_d
            c.barren = min(c.barren, rec.target_d)
            return
        values = {e.index: np.asarray(c.subst.get(e.index, e.orig)) for e in rec.externals}
        best = None
        until = time.monotonic() + max(1.0, self.snap_share * self.budget)
        moves = snaps(rec.externals, values, rec.grads, c.snap_kind)
        self.log(f"{c.key[0]}@{c.key[2]} snap round at d={rec.target_d:.3e}: {len(moves)} move(s)")
        for move in moves:
            if self.left() <= 0 or time.monotonic() > until:
                break
            proposal = {**c.subst, **move.values}
            # the whole distance map counts: a move may collapse another element than the one being driven
            new = self._evaluate(c, proposal, focus=None, snap=True)
            if self.held is not None and self.held[2] == self.order.index(c.key):
                break  # this site's own failure: the rest of the round cannot do better
            lowest = rec if best is None else best[2]
            if new.target_d is not None and not new.error and new.target_d < lowest.target_d:
                best = (move, proposal, new)
        if best is not None:
            self._accept(c, best[1], best[2], f"snap {best[0].label}")
        else:
            c.barren = min(c.barren, rec.target_d)
        c.snap_d, c.slow = c.rec.target_d, 0
        self._maybe_release()

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
        self.log(f"{c.key[0]}@{c.key[2]} stalled at d={None if rec is None else rec.target_d}: "
                 f"replace #{c.replacements} restart #{c.restarts}")
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
        c.snap_d, c.slow, c.rounds_here = None, 0, 0

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
        # the budget is a wall-clock bound on the whole search: minimisation gets what is left of it
        deadline = min(time.monotonic() + self.minimize_seconds, self.t0 + self.budget)
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
        first = self.first_seen.get(ev.key())
        res.seconds_to_first = round(first, 3) if first is not None else None
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


def search(prog: Program | str, strategy: str = "gradient", budget: float = 30.0, seed: int = 0,
           **options) -> SearchResult:
    """Search ``prog`` (a :class:`Program` or a ``FILE:FUNCTION`` spec) for a NaN/Inf-producing input.

    Raises :class:`ProgramError` when the spec is bad or the program raises on its own."""
    if isinstance(prog, str):
        prog = load_program(prog)
    return Searcher(prog, budget=budget, seed=seed, **options).search(strategy)
