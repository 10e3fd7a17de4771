"""`dlci sources`: operators and instances per migration source (JSON; harvests are cached)."""
from __future__ import annotations

import json
import time

from dlci.commands.common import split
from dlci.errors import ExitCode, UsageError

NAME = "sources"
HELP = "operators and instances per migration source"


def add_arguments(parser) -> None:
    parser.add_argument("--sources", help="comma-separated source names (default: all but the derived ones)")
    parser.add_argument("--limit-per-op", type=int, default=None)
    parser.add_argument("--verbose", action="store_true", help="include per-operator instance counts")


def run(args) -> int:
    from dlci import sources as S
    registry = S.registry()
    # derived sources (boundary variants of other sources) only when named: a cold harvest of them takes minutes
    names = split(args.sources) if args.sources else sorted(n for n, s in registry.items() if not s.bases)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise UsageError(f"unknown source(s) {', '.join(unknown)}; known: {', '.join(sorted(registry))}")
    report = {}
    for name in names:
        if name == "harvest":
            continue  # needs a suite path: `dlci test --harvest PATH`
        t0 = time.time()
        summary = S.summary(S.load(name, limit_per_op=args.limit_per_op))
        report[name] = {"framework": registry[name].framework, "operators": summary["ops"],
                        "instances": summary["instances"], "seconds": round(time.time() - t0, 1)}
        if args.verbose:
            report[name]["per_operator"] = summary["per_op"]
    print(json.dumps(report, indent=2))
    return ExitCode.CLEAN
