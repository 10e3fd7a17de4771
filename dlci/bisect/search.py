"""Bisection over an ordered list of candidates (releases or commits) with skips, as ``git bisect`` does.

``candidates`` run oldest first. In ``regression`` mode the old state is *good* and the search finds the first *bad*
candidate; in ``fixed`` mode the old state is *bad* and it finds the first *good* one. The newest endpoint is tested
first (it checks the reproducer at all), then the oldest, then midpoints. A skipped midpoint is replaced by the
untested candidate nearest the middle; when every candidate between the two bounds is skipped, the answer is the
range (``skipped_between``), as git's "the first bad commit could be any of". An endpoint the user named that is
skipped, or that shows the wrong state, is bad input (:class:`BisectInputError`, exit 2); a default endpoint that is
skipped moves inwards.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from dlci.bisect.oracle import BAD, GOOD, SKIP, Verdict
from dlci.errors import UsageError

REGRESSION, FIXED = "regression", "fixed"


class BisectInputError(UsageError):
    """Bad input to a bisection (unknown package or version, empty range, a reproducer that does not fail on the
    bad endpoint): exit 2, nothing cached half-written."""


@dataclass
class SearchResult:
    mode: str
    candidates: list[str]
    tried: list[Verdict] = field(default_factory=list)
    last_old: str | None = None     # last good (regression) / last bad (fixed)
    first_new: str | None = None    # first bad (regression) / first good (fixed)
    skipped_between: list[str] = field(default_factory=list)
    complete: bool = False
    note: str = ""                  # why the search ended where it did

    @property
    def states(self) -> tuple[str, str]:
        return (GOOD, BAD) if self.mode == REGRESSION else (BAD, GOOD)

    def runs(self) -> int:
        """Reproducer runs (candidates that did not install, or whose verdict was known, are not counted)."""
        return sum(1 for v in self.tried if v.ran)

    def to_dict(self) -> dict:
        d = {"mode": self.mode, "candidates": len(self.candidates), "range": [self.candidates[0], self.candidates[-1]]
             if self.candidates else [], "complete": self.complete, "note": self.note,
             "skipped_between": self.skipped_between, "reproducer_runs": self.runs(),
             "log2_candidates": math.ceil(math.log2(len(self.candidates))) if len(self.candidates) > 1 else 0,
             "tried": [v.to_dict() for v in self.tried]}
        if self.mode == REGRESSION:
            d.update(first_bad=self.first_new, last_good=self.last_old)
        else:
            d.update(first_fixed=self.first_new, last_bad=self.last_old)
        return d


def bisect(candidates: list[str], test: Callable[[str], Verdict], mode: str = REGRESSION, *,
           pinned_old: bool = False, pinned_new: bool = False, budget_s: float | None = None,
           labels: tuple[str, str] = ("--good", "--bad"), max_skips: int = 8,
           say: Callable[[str], None] = lambda s: None) -> SearchResult:
    """Find the transition in ``candidates`` (oldest first). ``test(candidate)`` returns a :class:`Verdict`.
    ``pinned_old``/``pinned_new``: the endpoints were named by the user (then they must test as expected).
    ``labels``: how the user names the old and new endpoints, for messages. ``max_skips``: stop (incomplete) after
    that many skipped candidates, as a range of releases that all fail to install could otherwise cost N installs."""
    if mode not in (REGRESSION, FIXED):
        raise ValueError(mode)
    if len(candidates) < 2:
        raise BisectInputError(f"empty range: {len(candidates)} candidate(s) ({', '.join(candidates) or 'none'}); "
                               "bisection needs an older and a newer one")
    old_state, new_state = (GOOD, BAD) if mode == REGRESSION else (BAD, GOOD)
    res = SearchResult(mode=mode, candidates=list(candidates))
    deadline = None if budget_s is None else time.monotonic() + budget_s
    seen: dict[int, Verdict] = {}

    def run(i: int) -> Verdict:
        v = test(candidates[i])
        seen[i] = v
        res.tried.append(v)
        say(f"{candidates[i]}: {v.verdict}" + (f" ({v.reason})" if v.reason and v.verdict == SKIP else ""))
        return v

    def out_of_time() -> bool:
        if deadline is not None and time.monotonic() > deadline:
            res.note = f"budget of {budget_s:.0f} s spent"
            return True
        return False

    new_label, old_label = labels[1], labels[0]
    # the newest endpoint: the reproducer must show the new state there
    hi = len(candidates) - 1
    while True:
        v = run(hi)
        if v.verdict == new_state:
            break
        if v.verdict == old_state:
            what = "fail" if mode == REGRESSION else "pass"
            raise BisectInputError(f"the reproducer does not {what} on {new_label} {candidates[hi]} (it is {v.verdict} "
                                   f"there: {v.reason or 'exit ' + str(v.exit_code)}); nothing to bisect")
        if pinned_new:
            raise BisectInputError(f"{new_label} {candidates[hi]} cannot be tested: {v.reason}")
        hi -= 1
        if hi < 0 or out_of_time() or len(res.tried) >= max_skips:
            raise BisectInputError("no candidate could be tested: " + "; ".join(
                f"{x.candidate}: {x.reason}" for x in res.tried[-5:]))
    res.first_new = candidates[hi]
    # the oldest endpoint; when a default one is skipped the search goes on from a virtual good below it (lo = -1)
    # rather than walking inwards one candidate at a time through old releases that all lack some API
    lo = -1
    if hi > 0 and not out_of_time():
        v = run(0)
        if v.verdict == old_state:
            lo = 0
        elif v.verdict == new_state:
            hi = 0
        elif pinned_old:
            raise BisectInputError(f"{old_label} {candidates[0]} cannot be tested: {v.reason}")
    # midpoints
    while hi - lo > 1:
        if out_of_time():
            break
        skips = sum(1 for x in seen.values() if x.verdict == SKIP)
        if skips >= max_skips:
            res.note = f"{skips} candidates skipped (limit {max_skips}): stopped with the range narrowed"
            break
        open_ = [i for i in range(lo + 1, hi) if i not in seen]
        if not open_:
            res.skipped_between = candidates[lo + 1:hi]
            res.note = (f"every candidate between {candidates[lo] if lo >= 0 else 'the oldest'} and {candidates[hi]} "
                        f"was skipped: the transition is at one of {', '.join(res.skipped_between + [candidates[hi]])}")
            break
        mid = (lo + hi) / 2
        i = min(open_, key=lambda j: (abs(j - mid), j))
        v = run(i)
        if v.verdict == old_state:
            lo = i
        elif v.verdict == new_state:
            hi = i
    else:
        res.complete = True
    res.last_old, res.first_new = (candidates[lo] if lo >= 0 else None), candidates[hi]
    if res.skipped_between:
        res.complete = True
    if res.last_old is None and res.complete and not res.skipped_between:
        # no old state anywhere: the caller reports it (exit 2) with what was tried
        res.note = (f"{old_label} {candidates[0]} is {new_state} too" if pinned_old else
                    f"{new_state} down to the oldest candidate, {candidates[0]}")
    return res
