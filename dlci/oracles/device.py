"""The device-differential oracle: a target on an accelerator judged against the CPU reference.

The first comparison is dlci's usual one (dlci.oracles.compare: per-dtype tolerances against the float32 CPU
reference, fp64 arbitration, NaN/Inf masks compared), widened per dtype by what the target's own project allows on
that device (``Target.tolerances``: PyTorch's OpInfo ``toleranceOverride`` for CUDA). The device targets switch off
TF32 and reduced-precision reductions before they run (a test that asks for them says so). A mismatch is then not a
finding before it survives, in order:

1. the project's own expectation: a result the target's project does not expect to equal the CPU's
   (``Target.expected_to_differ``: a skip or xfail of PyTorch's own CPU-vs-CUDA test for that operator) is
   unsupported, with that reason;
2. repeated runs: the compiled model runs REPEATS more times on the device. Runs that disagree with each other
   (bitwise) show a nondeterministic kernel (atomics, unordered reductions): the test fails only when every run
   does; otherwise it passes with a note saying how many runs differed;
3. the framework's deterministic mode, where it has one (``Target.deterministic_run``:
   ``torch.use_deterministic_algorithms``): torch's own statement that the computation has no deterministic
   implementation (what ``index_add``, ``scatter`` and friends raise on CUDA) makes the result unspecified where
   writes collide: unsupported, with torch's message. A deterministic run that matches the reference means the
   default kernel differs from the CPU only by its nondeterminism: a pass, with a note. One that does not match
   confirms the bug, which is reported with what the deterministic run gave.

What this cannot tell apart (documented, not hidden): an accumulating kernel (atomics) that is wrong beyond rounding
in every run while its deterministic twin is right passes step 3 with a note, listed in ``stats.device_notes``.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED, Outcome

REPEATS = 3  # runs after the first: a nondeterministic kernel shows within a few (PyTorch's own tests rerun twice)

Verdict = Callable[[list], dict | None]  # outputs -> the oracle's verdict (None: consistent)


def same_bits(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> bool:
    """Two runs gave bit-identical outputs (NaNs in the same places count as equal)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.dtype.kind in "fc" or x.dtype.name == "bfloat16":
            xf, yf = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), \
                y.astype(np.complex128 if y.dtype.kind == "c" else np.float64)
            if not np.array_equal(xf, yf, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def rejudge(out: Outcome, first: list, rerun: Callable[[], list], verdict: Verdict, *,
            expected_to_differ: str | None = None,
            deterministic: Callable[[], list | str | None] | None = None, repeats: int = REPEATS) -> None:
    """Steps 1-3 above on an outcome the first comparison found INCONSISTENT (``first``: its outputs; ``rerun``:
    runs the compiled model once more; ``verdict``: the comparison). Updates ``out`` in place."""
    if out.status != INCONSISTENT:
        return
    if expected_to_differ:
        out.status, out.symptom = UNSUPPORTED, "expected to differ"
        out.device_note = f"expected to differ from the CPU: {expected_to_differ}"
        out.message = f"{expected_to_differ}\n(first comparison: {out.message})"
        return
    runs = [first]
    for _ in range(repeats):
        runs.append(rerun())
    varies = any(not same_bits(first, r) for r in runs[1:])
    failing = [verdict(r) is not None for r in runs]
    if varies and not all(failing):
        out.status, out.stage, out.symptom = PASS, None, ""
        out.device_note = (f"nondeterministic: {sum(failing)} of {len(runs)} runs differ from the reference, the "
                           "others agree (run-to-run variation is not a bug)")
        return
    note = f"{len(runs)} runs" + (" (outputs vary from run to run)" if varies else ", identical") + \
        ", every one differs from the reference"
    if deterministic is not None:
        det = deterministic()
        if isinstance(det, str):
            out.status, out.symptom = UNSUPPORTED, "nondeterministic"
            out.device_note = f"nondeterministic: {det}"
            out.message = f"the result is unspecified where writes collide ({det})\n(first comparison: {out.message})"
            return
        if det is not None:
            if verdict(det) is None:
                out.status, out.stage, out.symptom = PASS, None, ""
                out.device_note = ("nondeterministic: the default kernel differs from the reference, its deterministic "
                                   "implementation (torch.use_deterministic_algorithms) matches it")
                return
            note += "; the deterministic implementation differs too"
    out.message = f"{out.message}\n({note})"
