"""Audee's causal steps on a multi-operator graph whose output is wrong, run in the worker by dlci.localise on a
graph view (an ONNX graph, or a user's torch model as its FX graph):

- :func:`trace` — where the divergence starts. The target runs the graph with every intermediate value exposed as an
  output; each is compared with the float64 reference of the whole graph, in units of what the value oracle allows
  (dlci.oracles.error.ratio). A node **diverges** when the oracle fails its value; its **change rate** is Audee's:
  how much its error grew over the largest error among the values it read, (e - e_in) / (e_in + eps). The first
  diverging node whose error at least doubles its inputs' is where the divergence starts. Exposing values changes
  what a compiler sees (a fused value must now be materialised), so the trace is used only when the exposed graph's
  own outputs come out as the plain graph's did (the same error on the failing output, within SAME_OUTPUT); otherwise
  it is set aside and said so. It only orders the suspects: the verdict on each is the operator run alone on inputs
  taken from the reference (Audee's causal substitution, dlci.localise), so error accumulated upstream never names a
  node.
- :func:`share` — how much of the final error the culprit accounts for: the graph is run again with the culprit's
  output fed from the reference (Audee's "fix the layer"), and the error on the failing output that goes away is the
  culprit's: share = 1 - error(fixed) / error(whole), on the count of wrong NaN/Inf classes when there are any, else
  on the RMS distance to the float64 reference.
"""
from __future__ import annotations

import time

import numpy as np

from dlci.oracles.error import error, ratio

CHANGE = 2.0  # a node whose error is at least this many times the largest of its inputs' starts a divergence
EPS = 1e-7  # Audee's epsilon in the change rate
SAME_OUTPUT = 0.05  # relative difference of the failing output's error, exposed vs plain, beyond which the trace is
# not trusted


def _failing_index(out, n: int) -> int:
    i = (out.distance or {}).get("output", 0)
    return i if isinstance(i, int) and 0 <= i < n else 0


def trace(view, target_name: str, out, got: list, ref: list, ref64: list | None, target_outputs) -> dict:
    """The target's intermediate values against the reference: {"used", "why" (when not), "first_divergent",
    "divergent", "error_ratio" (per node label), "order" (node indices to check alone first), "seconds"}.
    ``target_outputs(instance, target)``: the target's own outputs on an instance (dlci.testcase.target_outputs)."""
    from dlci.oracles.compare import compare_one
    t0 = time.perf_counter()
    i = _failing_index(out, len(ref))
    try:
        inst, names = view.exposed(list(range(len(view))))
    except Exception as e:  # noqa: BLE001 - a graph whose values cannot be exposed
        return {"used": False, "why": f"values cannot be exposed ({type(e).__name__}: {str(e)[:120]})"}
    if inst is None or not names:
        return {"used": False, "why": "no intermediate value to expose"}
    outs, o = target_outputs(inst, target_name)
    if outs is None:
        return {"used": False, "why": f"the target does not run the graph with its values exposed ({o.status}: "
                                      f"{o.symptom} at {o.stage})"}
    n = len(got)
    if len(outs) != n + len(names) or i >= n:
        return {"used": False, "why": f"the exposed graph gave {len(outs)} outputs for {n} + {len(names)}"}
    r64 = ref64[i] if ref64 is not None and i < len(ref64) else None
    plain, exposed = error(got[i], ref[i], r64), error(outs[i], ref[i], r64)
    if plain[0] != exposed[0] or abs(plain[1] - exposed[1]) > SAME_OUTPUT * max(plain[1], 1e-30):
        return {"used": False,
                "why": (f"exposing the intermediate values changed what the target computes (output {i}: error "
                        f"{exposed[1]:.4g} and {exposed[0]} wrong NaN/Inf classes exposed, {plain[1]:.4g} and "
                        f"{plain[0]} plain): suspects checked in topological order")}
    seen = {name: outs[n + j] for j, name in enumerate(names)}
    for j, name in enumerate(view.output_nodes()):
        if name is not None and j < n:
            seen.setdefault(name, got[j])
    ratios: dict[int, float] = {}
    diverges: dict[int, bool] = {}
    for k in range(len(view)):
        for name, r, v64 in view.values_of(k):
            g = seen.get(name)
            if g is None or np.shape(g) != np.shape(r):
                continue
            g = np.asarray(g)
            ratios[k] = max(ratios.get(k, 0.0), ratio(g, r, v64))
            diverges[k] = diverges.get(k, False) or compare_one(g.astype(r.dtype) if r.dtype.kind == "f" else g,
                                                                r, v64) is not None
    start = []
    for k in sorted(ratios):
        if not diverges.get(k):
            continue
        before = max([ratios.get(p, 0.0) for p in view.inputs_of(k)] or [0.0])
        if (ratios[k] - before) / (before + EPS) >= CHANGE - 1:
            start.append(k)
    rest = [k for k in sorted(ratios) if diverges.get(k) and k not in start]
    return {"used": True, "first_divergent": view.label(start[0]) if start else (view.label(rest[0]) if rest else ""),
            "divergent": [view.label(k) for k in start + rest],
            "error_ratio": {view.label(k): _round(ratios[k]) for k in sorted(ratios)},
            "order": start + rest, "seconds": round(time.perf_counter() - t0, 3)}


def _round(x: float) -> float | str:
    return "inf" if x == float("inf") else float(f"{x:.4g}")


def share(view, culprit: int, target_name: str, out, got: list, ref: list, ref64: list | None,
          target_outputs) -> dict | None:
    """{"share", "error", "error_with_culprit_fixed", "how"}: the part of the failing output's error that goes away
    when the culprit's output is fed from the reference; None when it cannot be measured. ``target_outputs``:
    as :func:`trace`'s."""
    i = _failing_index(out, len(ref))
    if i >= len(got):
        return None
    r64 = ref64[i] if ref64 is not None and i < len(ref64) else None
    whole = error(got[i], ref[i], r64)
    outputs = view.output_nodes()
    if i < len(outputs) and view.producer_of(outputs[i]) == culprit:
        return {"share": 1.0, "how": "the culprit computes the failing output itself"}
    try:
        fixed = view.fixed(culprit)
    except Exception:  # noqa: BLE001
        fixed = None
    if fixed is None:
        return None
    outs, _ = target_outputs(fixed, target_name)
    if outs is None or i >= len(outs):
        return None
    rest = error(outs[i], ref[i], r64)
    if whole[0]:
        value, how = 1.0 - rest[0] / whole[0], "wrong NaN/Inf classes"
    elif whole[1] > 0 and np.isfinite(whole[1]):
        value, how = 1.0 - rest[1] / whole[1], "RMS distance to the float64 reference"
    else:
        return None
    return {"share": round(float(min(1.0, max(0.0, value))), 3), "how": f"{how} that go away with the culprit's "
            "output fed from the reference", "error": _round(whole[1]), "error_with_culprit_fixed": _round(rest[1]),
            **({"wrong_classes": whole[0], "wrong_classes_with_culprit_fixed": rest[0]} if whole[0] else {})}
