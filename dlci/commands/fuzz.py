"""`dlci fuzz`: graph-based fuzzing (MCTS over a block corpus, operator-level coverage) through explicit targets."""
from __future__ import annotations

from dlci.commands.common import RunOptionsGroup, exit_code, say, split
from dlci.errors import UsageError

NAME = "fuzz"
HELP = "graph fuzzing: multi-operator networks steered by MCTS toward operator-level coverage"
DESCRIPTION = ("Generates networks from a block corpus (every ONNX node test's operator as a parameterised block, plus "
               "subgraph blocks: conv-norm-activation, residual add, attention, reshape/transpose chains, "
               "split/concat, decomposed LayerNorm/GELU/softmax/HardSwish), steered by Monte Carlo tree search "
               "(--strategy random: the baseline) toward operator-level coverage (OTC, IDC, ODC, SEC, SPC, OLC), and "
               "runs each through the targets like any dlci test: a failure is localised to its operator, confirmed, "
               "reduced to the operators it needs and written as a standalone reproducer.")
RUN = RunOptionsGroup(budget=300.0, fail_on="any")
DEFAULT_TARGETS = "tvm.from_onnx,openvino.onnx,onnxruntime"


def add_arguments(parser) -> None:
    from dlci.fuzz.search import STRATEGIES
    parser.add_argument("--targets", default=DEFAULT_TARGETS,
                        help=f"comma-separated targets taking ONNX or torch models (default: {DEFAULT_TARGETS}); a "
                             "torch target gets each network as an nn.Module")
    parser.add_argument("--strategy", choices=STRATEGIES, default="mcts",
                        help="mcts (default): blocks chosen by Monte Carlo tree search; random: the baseline")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generator and the search")
    parser.add_argument("--blocks", help="comma-separated corpus blocks to use (default: all; see --list-blocks)")
    parser.add_argument("--ops", help="comma-separated operators every network must contain (onnx::Conv or Conv)")
    parser.add_argument("--max-blocks", type=int, default=4, help="blocks per network at most (the tree's depth)")
    parser.add_argument("--list-blocks", action="store_true", help="print the block corpus as JSON and exit")
    RUN.add_to(parser)


def run(args) -> int:
    import dataclasses
    import json
    from dlci import fuzz, targets
    from dlci.fuzz.corpus import load_corpus
    from dlci.models.graph import GraphError
    try:
        corpus = load_corpus(only=split(args.blocks) if args.blocks else None)
    except GraphError as e:
        raise UsageError(f"--blocks: {e}") from None
    if args.list_blocks:
        print(json.dumps({**corpus.describe(), "block_list": [b.describe() for b in corpus.blocks]}, indent=1))
        return 0
    if args.max_blocks < 1:
        raise UsageError(f"--max-blocks must be at least 1, got {args.max_blocks}")
    options = dataclasses.replace(RUN.parse(args), batch=False, schedule="plan")
    chosen = targets.select(args.targets)
    wrong = [n for n, t in chosen.items() if not {"onnx", "torch"} & set(t.frameworks)]
    if wrong:
        raise UsageError(f"dlci fuzz makes ONNX and torch networks; {', '.join(wrong)} take(s) other models "
                         f"(targets for them: {', '.join(n for n, t in targets.registry().items() if {'onnx', 'torch'} & set(t.frameworks))})")
    must = {op.split("::")[-1] for op in split(args.ops)} if args.ops else set()
    unknown = sorted(must - set(corpus.ops))
    if unknown:
        raise UsageError(f"--ops: {', '.join(unknown)} in no block of the corpus (see --list-blocks)")
    say(f"fuzzing with {args.strategy} over {len(corpus.blocks)} blocks ({len(corpus.ops)} operators); targets: "
        f"{', '.join(chosen)}; budget {options.budget:.0f} s; seed {args.seed}; output {options.out}")
    report = fuzz.run(fuzz.FuzzRequest(chosen, options, strategy=args.strategy, seed=args.seed,
                                       blocks=split(args.blocks) if args.blocks else None,
                                       max_blocks=args.max_blocks, must=must))
    cov = (report.stats.get("fuzz") or {}).get("coverage") or {}
    if cov:
        say("coverage: " + ", ".join(f"{k} {v:.1%}" for k, v in cov.items()))
    return exit_code(report, options)
