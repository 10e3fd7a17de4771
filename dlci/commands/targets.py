"""`dlci targets`: the frontend entry points found here, with versions (JSON)."""
from __future__ import annotations

import json

from dlci.errors import ExitCode

NAME = "targets"
HELP = "list targets (frontend entry points) with versions"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    from dlci.targets import registry
    rows = [{"name": n, "available": t.available(), "version": t.version(), "frameworks": list(t.frameworks),
             "form": t.form, "device": t.device} for n, t in sorted(registry().items())]
    print(json.dumps(rows, indent=2))
    return ExitCode.CLEAN
