"""Operator-level coverage (the paper's section III-B), over the block corpus BC and the test set I (the graphs
kept so far). With n_t the number of operator types in BC:

- OTC(I) = sum_c OTC_op(c, I) / n_t, OTC_op = 1 when operator c occurs in I;
- IDC(I) = sum_c IDC_op(c, I) / n_t, IDC_op = (distinct input degrees of c in I) / n_id_c, n_id_c the input degrees
  BC allows c;
- ODC(I) = sum_c ODC_op(c, I) / n_t, ODC_op = (distinct output degrees of c in I among those BC allows, {0, 1, 2})
  / n_od_c;
- SEC(I) = sum_c SEC_op(c, I) / n_t, SEC_op = (distinct operators c has an edge to in I) / n_t;
- SPC(I) = sum_c SPC_op(c, I) / n_t, SPC_op = min(1, distinct (input shapes, parameters) vectors of c in I /
  n_maxspc);
- OLC_op(c) and OLC(I): weighted means of the five (weights non-negative, default all 1).

The in-degree of a node is the number of its data inputs (constants are parameters, not data flows); its
out-degree the number of edges from its outputs to other nodes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from dlci.fuzz.corpus import OUT_DEGREES, Corpus
from dlci.fuzz.generate import NodeFeature

CRITERIA = ("OTC", "IDC", "ODC", "SEC", "SPC")
N_MAX_SPC = 10  # the paper's example value of n_maxspc


@dataclass
class Coverage:
    corpus: Corpus
    weights: dict[str, float] = field(default_factory=lambda: {c: 1.0 for c in CRITERIA})
    n_max_spc: int = N_MAX_SPC
    in_degrees: dict[str, set[int]] = field(default_factory=dict)
    out_degrees: dict[str, set[int]] = field(default_factory=dict)
    edges: dict[str, set[str]] = field(default_factory=dict)
    vectors: dict[str, set[str]] = field(default_factory=dict)
    tests: int = 0
    # what the last graph added, per criterion (test set) and per operator and criterion (its OLC_op terms)
    last_gains: dict[str, float] = field(default_factory=dict)
    last_op_gains: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self):
        self.ops = self.corpus.ops
        self.n_t = len(self.ops)
        self._known = set(self.ops)
        # running sums of the gains, per criterion: the scale a gain is measured on (a new edge is worth 1/n_t^2 of
        # SEC, a new operator 1/n_t of OTC; on one scale the search would chase OTC and IDC and starve SEC and SPC)
        self._net_sum = {k: 0.0 for k in CRITERIA}
        self._op_sum = {k: 0.0 for k in CRITERIA}
        self._op_n = 0
        if any(w < 0 for w in self.weights.values()) or not any(self.weights.values()):
            raise ValueError("coverage weights must be non-negative and not all zero")

    # -- per operator ------------------------------------------------------------------------------------------
    def op_metrics(self, c: str) -> dict[str, float]:
        n_id = len(self.corpus.op_in_degrees.get(c, {1})) or 1
        seen = c in self.vectors
        return {
            "OTC": 1.0 if seen else 0.0,
            "IDC": len(self.in_degrees.get(c, set()) & self.corpus.op_in_degrees.get(c, {1})) / n_id,
            "ODC": len(self.out_degrees.get(c, set()) & set(OUT_DEGREES)) / len(OUT_DEGREES),
            "SEC": len(self.edges.get(c, set())) / self.n_t,
            "SPC": min(1.0, len(self.vectors.get(c, set())) / self.n_max_spc),
        }

    def olc_op(self, c: str) -> float:
        m = self.op_metrics(c)
        return sum(self.weights[k] * m[k] for k in CRITERIA) / sum(self.weights.values())

    # -- the test set --------------------------------------------------------------------------------------------
    def figures(self) -> dict[str, float]:
        """OTC, IDC, ODC, SEC, SPC and OLC of the test set, each in [0, 1]."""
        totals = {k: 0.0 for k in CRITERIA}
        for c in self.ops:
            for k, v in self.op_metrics(c).items():
                totals[k] += v
        out = {k: totals[k] / self.n_t for k in CRITERIA}
        out["OLC"] = sum(self.weights[k] * out[k] for k in CRITERIA) / sum(self.weights.values())
        return out

    def adds(self, feats: list[NodeFeature]) -> bool:
        """Would this graph add coverage (any criterion of any operator)?"""
        for f in feats:
            if f.op not in self._known:
                continue
            if f.vector not in self.vectors.get(f.op, set()) and len(self.vectors.get(f.op, ())) < self.n_max_spc:
                return True
            if f.in_degree not in self.in_degrees.get(f.op, set()) and \
                    f.in_degree in self.corpus.op_in_degrees.get(f.op, ()):
                return True
            if f.out_degree in OUT_DEGREES and f.out_degree not in self.out_degrees.get(f.op, set()):
                return True
            if any(s in self._known and s not in self.edges.get(f.op, set()) for s in f.successors):
                return True
        return False

    def add(self, feats: list[NodeFeature]) -> float:
        """Add a graph to the test set; returns the OLC gained (per criterion and operator: ``last_gains``,
        ``last_op_gains``)."""
        before = self.figures()
        touched = sorted({f.op for f in feats if f.op in self._known})
        op_before = {c: self.op_metrics(c) for c in touched}
        for f in feats:
            if f.op not in self._known:
                continue
            self.in_degrees.setdefault(f.op, set()).add(f.in_degree)
            self.out_degrees.setdefault(f.op, set()).add(f.out_degree)
            self.edges.setdefault(f.op, set()).update(s for s in f.successors if s in self._known)
            self.vectors.setdefault(f.op, set()).add(f.vector)
        self.tests += 1
        after = self.figures()
        self.last_gains = {k: after[k] - before[k] for k in CRITERIA}
        self.last_op_gains = {}
        for c in touched:
            now = self.op_metrics(c)
            self.last_op_gains[c] = {k: now[k] - op_before[c][k] for k in CRITERIA}
        for k in CRITERIA:
            self._net_sum[k] += self.last_gains[k]
            self._op_sum[k] += sum(g[k] for g in self.last_op_gains.values())
        self._op_n += len(touched)
        return after["OLC"] - before["OLC"]

    # -- gains on one scale, weighted by what is left ------------------------------------------------------------
    def left_weights(self) -> dict[str, float]:
        """Per criterion: its weight times the square root of what is left of it to cover, so that a criterion
        near saturation (OTC, IDC) stops pulling and the late ones (ODC, SEC, SPC) pull harder; normalised."""
        fig = self.figures()
        w = {k: self.weights[k] * math.sqrt(max(0.0, 1.0 - fig[k])) for k in CRITERIA}
        total = sum(w.values())
        return {k: v / total for k, v in w.items()} if total > 0 else {k: 0.0 for k in CRITERIA}

    def balanced(self, gains: dict[str, float], per_op: bool = False, weights: dict[str, float] | None = None,
                 cap: float = 3.0) -> float:
        """A gain (a graph's ``last_gains``, or one operator's entry of ``last_op_gains`` with ``per_op``) on one
        scale: each criterion's gain over its mean gain so far (1 = a typical gain in that criterion, capped), then
        weighted by :meth:`left_weights`. Before anything was gained every criterion counts its gain as typical."""
        weights = weights or self.left_weights()
        n = self._op_n if per_op else self.tests
        sums = self._op_sum if per_op else self._net_sum
        out = 0.0
        for k in CRITERIA:
            g = gains.get(k, 0.0)
            if g <= 0:
                continue
            mean = sums[k] / n if n and sums[k] > 0 else g
            out += weights[k] * min(cap, g / mean)
        return out

    def rooms(self, weights: dict[str, float] | None = None, cap: float = 3.0) -> dict[str, float]:
        """What each operator has left to cover, on the scale of :meth:`balanced`: per criterion its room over the
        mean room of all operators (1 = as much as the average operator), weighted by :meth:`left_weights`. An
        optimistic first estimate of what a graph holding the operator gains for it."""
        weights = weights or self.left_weights()
        metrics = {c: self.op_metrics(c) for c in self.ops}
        left = {k: 1.0 - sum(m[k] for m in metrics.values()) / self.n_t for k in CRITERIA}
        return {c: sum(weights[k] * min(cap, (1.0 - m[k]) / left[k]) for k in CRITERIA if left[k] > 0)
                for c, m in metrics.items()}

    def lowest(self, among: list[str] | None = None) -> list[str]:
        """Operators by OLC_op, lowest first (ties in corpus order)."""
        ops = among if among is not None else self.ops
        return sorted(ops, key=lambda c: (self.olc_op(c), ops.index(c)))

    def per_operator(self) -> dict[str, dict[str, float]]:
        return {c: {**{k: round(v, 4) for k, v in self.op_metrics(c).items()}, "OLC": round(self.olc_op(c), 4)}
                for c in self.ops}
