"""Command line: `dlci <command>` (also `python -m dlci`). Each command is a module of dlci.commands.

Exit codes (contract, dlci.errors.ExitCode): 0 clean, 1 findings the --fail-on policy counts, 2 usage or
configuration error, 3 internal or infrastructure error. A run that is interrupted still writes its partial report.
"""
from __future__ import annotations

import argparse
import sys
import traceback

from dlci.commands import commands
from dlci.commands.common import say
from dlci.errors import ExitCode, InfrastructureError, UsageError
from dlci.exec import cancel


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dlci",
                                     description="Operator-level CI for deep-learning compilers and converters.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in commands():
        p = sub.add_parser(command.NAME, help=command.HELP, description=getattr(command, "DESCRIPTION", None))
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    cancel.install()  # SIGTERM/SIGINT in any phase: the partial report is written, exit 3
    try:
        return int(args.run(args))
    except UsageError as e:
        say(f"error: {e}")
        return ExitCode.USAGE
    except InfrastructureError as e:
        say(f"error: {e}")
        return ExitCode.INTERNAL
    except (cancel.Cancelled, KeyboardInterrupt) as e:
        say(f"interrupted ({e or 'SIGINT'}): partial results written")
        return ExitCode.INTERNAL
    except Exception:
        say("internal error:\n" + traceback.format_exc())
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(main())
