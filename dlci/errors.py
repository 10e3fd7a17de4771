"""Errors that end a command, and the exit codes they map to (a contract: README, action.yml, docs/action.md).

0 clean, 1 findings the --fail-on policy counts, 2 usage or configuration error, 3 internal or infrastructure error
(also an interrupted run; its partial report is still written). :func:`chain` walks an exception's causes, for
whatever classifies a failure by what is behind it.
"""
from __future__ import annotations

import enum
from typing import Iterator


class ExitCode(enum.IntEnum):
    CLEAN = 0
    FINDINGS = 1
    USAGE = 2
    INTERNAL = 3


class UsageError(Exception):
    """Bad input from the user (arguments, files, .dlci.yml, revisions): reported clearly, exit 2."""


class InfrastructureError(Exception):
    """The run could not be carried out (a checkout that does not build, workers that do not start): exit 3."""


def chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception and its causes/contexts."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
