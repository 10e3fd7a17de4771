"""A run's budget is wall-clock for everything: a CI job has a time limit, and a report that comes after it is lost."""
from __future__ import annotations

import time

TEST_SHARE = 0.6  # of the budget for running tests; the rest confirms, attributes, reduces and reproduces
MIN_TEST_SHARE = 0.3  # what testing gets at least when preparation (a cold harvest, checkouts) ran long


class Clock:
    """Testing gets the first TEST_SHARE of the budget, the post-processing (attribution, reduction, reproducers;
    what the PR broke first) the rest, each step by a fraction of what is left when testing ends."""

    def __init__(self, budget: float):
        self.start = time.monotonic()
        self.budget = budget
        self.setup_seconds = 0.0
        self.hard = self.start + budget
        self.tests_until = self.start + TEST_SHARE * budget
        self._post_start: float | None = None

    def testing_starts(self, tested: float = 0.0) -> None:
        """Preparation is over. With warm caches it is a few seconds and nothing changes; a cold harvest of a
        source can take minutes, and testing still gets MIN_TEST_SHARE of the budget, the rest its share after
        it: the run then overruns by what the preparation took beyond its slack. ``tested``: seconds of it that
        were testing already (the repository's own tests, which spend their share of the budget, not extend it)."""
        now = time.monotonic()
        self.setup_seconds = now - self.start
        floor = now - max(0.0, tested) + MIN_TEST_SHARE * self.budget
        if floor > self.tests_until:
            self.tests_until = floor
            self.hard = max(self.hard, floor + (1 - TEST_SHARE) * self.budget)

    def post_window(self) -> float:
        """The post-processing's regular share of the budget."""
        return (1 - TEST_SHARE) * self.budget

    def post(self, fraction: float) -> float:
        """The moment ``fraction`` of the way through the post-processing window."""
        if self._post_start is None:
            self._post_start = min(time.monotonic(), self.hard)
        return self._post_start + fraction * (self.hard - self._post_start)
