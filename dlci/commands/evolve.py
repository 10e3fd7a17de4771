"""`dlci evolve`: genetic search over inputs and weights for inconsistencies (the Audee paper), with causal
localisation of the operator and the parameters that cause them.

A subcommand of its own rather than ``dlci fuzz --strategy ga``: the graph fuzzer varies structure and its
``random`` baseline draws random networks, while this search keeps each seed graph fixed and varies the numbers in
it, from seeds the fuzzer never takes (a user's ONNX and PyTorch models, migrated modules); its ``random`` baseline
samples inputs and weights. One flag meaning two things would mislead; the fuzzer's networks are one kind of seed
here (``--networks``)."""
from __future__ import annotations

from dlci.commands.common import RunOptionsGroup, exit_code, say
from dlci.errors import UsageError

NAME = "evolve"
HELP = "genetic search over inputs and weights for inconsistencies, localised to an operator and its parameters"
DESCRIPTION = ("Starts from seed graphs (--model: ONNX files and PyTorch FILE.py:FUNCTION models; --networks: the "
               "graph fuzzer's networks; --modules: migrated multi-layer modules) and evolves their inputs and weights "
               "(--strategy ga; random: the same sampler without evolution) toward an inconsistency with the float64 "
               "reference, between targets, or NaN/Inf. Every candidate is an ordinary dlci test: a failure is "
               "localised to the operator causing it (first divergent output, that operator alone on the reference's "
               "inputs, its parameters that matter, its share of the final error), confirmed, deduplicated by the "
               "culprit, reduced and written as a standalone reproducer.")
RUN = RunOptionsGroup(budget=300.0, fail_on="any")
DEFAULT_TARGETS = "tvm.from_onnx,openvino.onnx,onnxruntime"


def add_arguments(parser) -> None:
    from dlci.evolve import STRATEGIES
    parser.add_argument("--model", action="append", default=[],
                        help="a seed model: an ONNX file or a PyTorch FILE.py:FUNCTION (repeatable)")
    parser.add_argument("--networks", type=int, default=0, help="also this many networks of the graph fuzzer as seeds")
    parser.add_argument("--modules", action="store_true",
                        help="also the migrated multi-layer torch.nn modules (module_db: attention, transformer and "
                             "recurrent layers) as seeds")
    parser.add_argument("--targets", default=None,
                        help=f"comma-separated targets (default: {DEFAULT_TARGETS}, plus the torch targets for "
                             "PyTorch seeds: tvm.from_exported_program,tvm.from_fx,openvino.pytorch)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="ga",
                        help="ga (default): Audee's genetic algorithm; random: the same sampling without evolution")
    parser.add_argument("--seed", type=int, default=0, help="seed of the search and of the fuzzer's networks")
    parser.add_argument("--population", type=int, default=8, help="candidates a seed's population keeps (n)")
    RUN.add_to(parser)


def run(args) -> int:
    import dataclasses
    from dlci import evolve, targets
    from dlci.evolve import seeds as S
    options = dataclasses.replace(RUN.parse(args), batch=False, schedule="plan")
    if args.networks < 0 or args.population < 2:
        raise UsageError("--networks must be at least 0 and --population at least 2")
    found = S.from_models(args.model, args.seed)
    if args.networks:
        found += S.from_fuzzer(args.networks, args.seed)
    if args.modules:
        found += S.from_modules(progress=say)
    if not found:
        raise UsageError("no seed: give --model FILE (ONNX or FILE.py:FUNCTION), --networks N or --modules")
    names = args.targets or DEFAULT_TARGETS + (",tvm.from_exported_program,tvm.from_fx,openvino.pytorch"
                                               if any(i.framework == "torch" for i in found) else "")
    chosen = targets.select(names)
    idle = [i.origin.test for i in found if not any(i.framework in t.frameworks for t in chosen.values())]
    if idle:
        raise UsageError(f"no selected target takes the seed(s) {', '.join(idle[:3])} "
                         f"(targets: {', '.join(chosen)})")
    settings = evolve.Settings(size=args.population, survivors=max(2, args.population // 2))
    say(f"evolving inputs and weights of {len(found)} seed(s) with {args.strategy}; targets: {', '.join(chosen)}; "
        f"budget {options.budget:.0f} s; seed {args.seed}; output {options.out}")
    report = evolve.run(evolve.EvolveRequest(chosen, options, found, strategy=args.strategy, seed=args.seed,
                                             settings=settings))
    return exit_code(report, options)
