"""`dlci scan`: one pull request, end to end (dlci.scan); without --repo, a bundled sample PR."""
from __future__ import annotations

from pathlib import Path

from dlci.commands.common import RunOptionsGroup, exit_code, say, split

NAME = "scan"
HELP = "test a pull request: diff -> operators -> head run -> base attribution"
DESCRIPTION = ("Without --repo, scans a bundled sample PR (a TVM-shaped repository built from the installed TVM with "
               "one realistic converter edit).")
RUN = RunOptionsGroup(budget=None, fail_on="new", budget_help="seconds for the whole scan (default: .dlci.yml or 240)")


def add_arguments(parser) -> None:
    from dlci.samples import DEFAULT, SAMPLES
    parser.add_argument("--repo", default=None, help="git repository of the project under test")
    parser.add_argument("--base", default="HEAD~1", help="base revision; the merge base with --head is used")
    parser.add_argument("--head", default="HEAD", help="head revision (the PR)")
    parser.add_argument("--sample", default=DEFAULT, choices=sorted(SAMPLES), help="bundled sample PR when no --repo")
    parser.add_argument("--targets", help="comma-separated targets (default: those the touched converters reach)")
    parser.add_argument("--fuzz-share", type=float, default=None, metavar="FRACTION",
                        help="share of the testing budget for graph fuzzing around the touched operators (overrides "
                             ".dlci.yml fuzz.share; default 0.3 for TVM, OpenVINO and ONNX Runtime; 0: off, the scan "
                             "ends when the operators' own tests do)")
    parser.add_argument("--no-directed", action="store_true",
                        help="no directed search: when the operators' own tests leave changed code unreached, do not "
                             "mutate the closest instances toward it (for comparisons)")
    RUN.add_to(parser)


def run(args) -> int:
    from dlci import scan
    from dlci.bisect.attribution import in_scan
    options = RUN.parse(args)
    if args.fuzz_share is not None and not 0 <= args.fuzz_share < 1:
        from dlci.errors import UsageError
        raise UsageError(f"--fuzz-share must be at least 0 and below 1, got {args.fuzz_share}")
    if args.repo is None:  # the bundled sample PR: a TVM-shaped repo with one realistic converter edit
        from dlci import samples
        repo, base, head = samples.build(args.sample, options.out / "sample-pr")
        say(f"sample PR {args.sample!r}: {samples.SAMPLES[args.sample].title} (repo {repo}, base {base[:12]}, "
            f"head {head[:12]})")
    else:
        repo, base, head = Path(args.repo), args.base, args.head
    report = scan.scan(scan.ScanRequest(repo=repo, base=base, head=head,
                                        targets=split(args.targets) if args.targets else None, options=options,
                                        fuzz_share=args.fuzz_share, bisect=in_scan,
                                        directed=not args.no_directed))
    return exit_code(report, options)
