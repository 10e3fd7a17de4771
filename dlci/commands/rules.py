"""`dlci rules`: the equivalence rules registry, or the rules run on explicit operators."""
from __future__ import annotations

import json

from dlci.commands.common import RunOptionsGroup, exit_code, say, split
from dlci.errors import ExitCode, UsageError

NAME = "rules"
HELP = "equivalence rules: list them, or run them on explicit operators"
DESCRIPTION = ("Pairs of graphs that must agree (eager vs compiled, formula vs API, save/load, ...), built from the "
               "operators' migrated instances and their boundary variants.")
RUN = RunOptionsGroup(budget=300.0, fail_on="any")


def add_arguments(parser) -> None:
    parser.add_argument("--list", action="store_true", help="print the rule registry as JSON and exit")
    parser.add_argument("--ops", default="all", help="comma-separated operators (conv2d, nn::Conv2d, keras::Conv2D) or all")
    parser.add_argument("--rules", default="all", help="comma-separated rule names (see --list) or all")
    parser.add_argument("--library", choices=("torch", "tensorflow"), help="only the rules of this library")
    parser.add_argument("--no-widen", action="store_true", help="only the migrated instances, no boundary variants")
    parser.add_argument("--harvest", action="append", help="also harvest operator calls from this pytest suite path")
    RUN.add_to(parser)


def run(args) -> int:
    from dlci import campaign
    from dlci import rules as R
    from dlci.rules.material import material, router
    if args.list:
        print(json.dumps([R.describe(r) for r in R.all_rules().values()], indent=2))
        return ExitCode.CLEAN
    options = RUN.parse(args)
    try:
        targets = R.rule_targets(split(args.rules) if args.rules and args.rules != "all" else None,
                                 library=args.library)
    except KeyError as e:
        raise UsageError(str(e).strip("'\"")) from None
    if not targets:
        raise UsageError("no equivalence rule available here for that selection (`dlci rules --list`)")
    instances = material(targets, split(args.ops), sources=options.sources, limit_per_op=options.limit_per_op,
                           harvest_paths=args.harvest or [], widen=not args.no_widen, progress=say)
    if not instances:
        raise UsageError(f"no instance of the operators {args.ops!r} for these rules (see `dlci sources --verbose`)")
    say(f"{len(instances)} instances of {len({i.op for i in instances})} operators; {len(targets)} rules; "
        f"budget {options.budget:.0f} s; output {options.out}")
    report = campaign.run(instances, targets, options, route=router(targets))
    return exit_code(report, options)
