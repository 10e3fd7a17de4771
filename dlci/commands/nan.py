"""`dlci nan`: NaN/Inf gradient search over programs (dlci.nan)."""
from __future__ import annotations

NAME = "nan"
HELP = "NaN/Inf gradient search: drive a program's inputs and weights toward numerical failure"
DESCRIPTION = ("FUNCTION (no arguments) builds a model and runs a step; dlci intercepts the framework's calls, finds "
               "the vulnerable operations and searches by back-propagation for inputs that make one produce NaN/Inf. "
               "Without --program, runs the bundled example programs.")


def add_arguments(parser) -> None:
    from dlci.nan.command import add_arguments as nan_arguments
    nan_arguments(parser)


def run(args) -> int:
    from dlci.errors import UsageError
    from dlci.nan import command
    if args.budget is not None and args.budget < 1:
        raise UsageError(f"--budget must be at least 1, got {args.budget}")
    return command.main(args)
