"""The subcommands of `dlci`, one module each: ``NAME``, ``HELP`` (and optionally ``DESCRIPTION``),
``add_arguments(parser)`` and ``run(args) -> exit code``. A command parses its arguments into a typed request,
calls the domain, and returns the exit code; the domain lives elsewhere."""
from __future__ import annotations

import importlib

# in the order `dlci --help` lists them
MODULES = ("scan", "ops", "test", "fuzz", "evolve", "rules", "nan", "bisect", "triage", "targets", "sources")


def commands() -> list:
    """The command modules that exist here (a command whose module is not in the tree is simply not offered)."""
    out = []
    for name in MODULES:
        try:
            out.append(importlib.import_module(f"dlci.commands.{name}"))
        except ModuleNotFoundError as e:
            if e.name != f"dlci.commands.{name}":
                raise
    return out
