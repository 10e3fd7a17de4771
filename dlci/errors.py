"""Errors that end a command, and the exit codes they map to (a contract: README, action.yml, docs/action.md).

0 clean, 1 findings the --fail-on policy counts, 2 usage or configuration error, 3 internal or infrastructure error
(also an interrupted run; its partial report is still written).
"""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    CLEAN = 0
    FINDINGS = 1
    USAGE = 2
    INTERNAL = 3


class UsageError(Exception):
    """Bad input from the user (arguments, files, .dlci.yml, revisions): reported clearly, exit 2."""


class InfrastructureError(Exception):
    """The run could not be carried out (a checkout that does not build, workers that do not start): exit 3."""
