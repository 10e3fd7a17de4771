"""`dlci targets`: the frontend entry points found here, with versions and devices (JSON)."""
from __future__ import annotations

import json

from dlci.errors import ExitCode

NAME = "targets"
HELP = "list targets (frontend entry points) with versions and the devices they run on here"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    from dlci.targets import registry, runner_kind
    rows = []
    for n, t in sorted(registry().items()):
        found = t.presence()
        row = {"name": n, "available": found.present, "version": t.version(), "frameworks": list(t.frameworks),
               "form": t.form, "device": t.device, "runner_kind": runner_kind(t)}
        if t.probe:  # a device target: which devices it found here, or why it is not on this runner
            row.update({"probe": t.probe, "devices": list(found.devices)} if found.present else
                       {"probe": t.probe, "not_on_this_runner": found.reason})
        elif not found.present:
            row["reason"] = found.reason
        rows.append(row)
    print(json.dumps(rows, indent=2))
    return ExitCode.CLEAN
