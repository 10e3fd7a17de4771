"""`dlci test`: explicit operators (or whole models) through explicit targets, no diff."""
from __future__ import annotations

from dlci.commands.common import RunOptionsGroup, exit_code, say, split
from dlci.errors import UsageError

NAME = "test"
HELP = "run explicit operators through targets (no diff)"
RUN = RunOptionsGroup(budget=300.0, fail_on="any")


def add_arguments(parser) -> None:
    parser.add_argument("--ops", default="all", help="comma-separated operators (aten::elu, elu, onnx::Relu, ...) or all")
    parser.add_argument("--targets", default="all", help="comma-separated target names or all")
    parser.add_argument("--harvest", action="append", help="also harvest operator calls from this pytest suite path")
    parser.add_argument("--model", action="append",
                        help="a model to test whole (repeatable): an ONNX file, or a PyTorch model as FILE.py:FUNCTION "
                             "(FUNCTION returns the module in eval mode and a tuple of example inputs); a failure is "
                             "localised to the operator causing it (and its parameters that matter) and reduced to it")
    parser.add_argument("--inputs", help="with --model: input values as .npz keyed by graph input name")
    parser.add_argument("--seed", type=int, default=0, help="with --model: seed of the drawn input values")
    parser.add_argument("--against", metavar="PACKAGE==VERSION",
                        help="also run each finding's instances under this older release of a target's package (a "
                             "cached layer over this environment): each finding is new in the installed release or "
                             "already in that one")
    parser.add_argument("--index-url", help="with --against: the package index (default: pip's configuration)")
    RUN.add_to(parser)


def run(args) -> int:
    from dlci import campaign, sources, targets
    from dlci.sources.model_file import model_instance
    from dlci.sources.selection import gather
    options = RUN.parse(args)
    if args.index_url and not args.against:
        raise UsageError("--index-url goes with --against")
    absent: dict[str, str] = {}
    chosen = targets.select(args.targets, absent)
    if absent:
        say(targets.not_on_runner_note(absent))
    if not chosen:  # only device targets were named, and their devices are not here: nothing to test, no failure
        return exit_code(campaign.nothing_here(absent, options), options)
    against = None
    if args.against:  # bad input ends the run before any test, and the older release's layer is ready
        from dlci.bisect.attribution import ReleaseComparison
        against = ReleaseComparison.prepare(args.against, chosen, index_url=args.index_url, say=say)
    frameworks = {f for t in chosen.values() for f in t.frameworks}
    names = options.sources or list(sources.DEFAULT_SOURCES)
    instances = [model_instance(path, args.inputs, args.seed) for path in args.model or []]
    if not args.model or args.ops != "all":
        instances += gather(names, split(args.ops), limit_per_op=options.limit_per_op,
                            harvest_paths=_existing(args.harvest or []), frameworks=frameworks, progress=say)
    if not instances:
        raise UsageError(f"no instance of the operators {args.ops!r} in sources {', '.join(names)} "
                         "(see `dlci sources --verbose`)")
    say(f"{len(instances)} instances of {len({i.op for i in instances})} operators; targets: {', '.join(chosen)}; "
        f"budget {options.budget:.0f} s; output {options.out}")
    report = campaign.run(instances, chosen, options, not_on_runner=absent, against=against)
    if against is not None:
        say(report.extra["against"]["line"])
    return exit_code(report, options)


def _existing(paths: list[str]) -> list[str]:
    from pathlib import Path
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise UsageError(f"--harvest path does not exist: {', '.join(missing)}")
    return paths
