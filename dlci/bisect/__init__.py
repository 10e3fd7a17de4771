"""Bisection: since when does a finding reproduce, and which release or commit fixed it.

- :mod:`dlci.bisect.oracle` — one reproducer run → good / bad / skip (exit 0 / 1 / anything else, with refinements).
- :mod:`dlci.bisect.search` — bisection over ordered candidates with skips, budget and git-bisect-like answers.
- :mod:`dlci.bisect.releases` — releases from the package index, cached layered environments (only what a release
  changes is installed, shared dependencies stay in the base), :func:`~dlci.bisect.releases.bisect_releases`.
- :mod:`dlci.bisect.commits` — worktrees with the ``.dlci.yml`` environment,
  :func:`~dlci.bisect.commits.first_bad_commit`.
- :mod:`dlci.bisect.attribution` — what ``scan`` (:func:`~dlci.bisect.attribution.in_scan`) and ``dlci test
  --against`` (:class:`~dlci.bisect.attribution.ReleaseComparison`) call.

The command is ``dlci bisect`` (:mod:`dlci.commands.bisect`).
"""
