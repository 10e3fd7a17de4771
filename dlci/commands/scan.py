"""`dlci scan`: one pull request, end to end (dlci.scan): of the repository the user stands in (or --repo), or of a
bundled sample PR (--sample)."""
from __future__ import annotations


from dlci.commands.common import RunOptionsGroup, exit_code, repository, say, split

NAME = "scan"
HELP = "test a pull request: diff -> operators -> head run -> base attribution"
DESCRIPTION = ("Scans the git repository it is run in (or --repo) from --base to --head. --sample NAME scans a "
               "bundled sample PR instead (a repository built from an installed frontend with one realistic converter "
               "edit).")
RUN = RunOptionsGroup(budget=None, fail_on="new", budget_help="seconds for the whole scan (default: .dlci.yml or 170)")


def add_arguments(parser) -> None:
    from dlci.samples import SAMPLES
    parser.add_argument("--repo", default=None,
                        help="git repository of the project under test (default: the one the command is run in)")
    parser.add_argument("--base", default="HEAD~1", help="base revision; the merge base with --head is used")
    parser.add_argument("--head", default="HEAD", help="head revision (the PR)")
    parser.add_argument("--sample", default=None, choices=sorted(SAMPLES),
                        help="scan a bundled sample PR instead of a repository")
    parser.add_argument("--targets", help="comma-separated targets (default: those the touched converters reach)")
    parser.add_argument("--fuzz-share", type=float, default=None, metavar="FRACTION",
                        help="share of the testing budget for graph fuzzing around the touched operators (overrides "
                             ".dlci.yml fuzz.share; default 0.3 for TVM, OpenVINO and ONNX Runtime; 0: off, the scan "
                             "ends when the operators' own tests do)")
    parser.add_argument("--no-repo-tests", action="store_true",
                        help="do not read the repository's own tests for seeds (for comparisons)")
    parser.add_argument("--no-divergence", action="store_true",
                        help="the directed search runs nothing on the base revision: no comparison of the revisions' "
                             "results on what reached changed code (for comparisons)")
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
    if args.sample and args.repo:
        from dlci.errors import UsageError
        raise UsageError("give --repo or --sample, not both")
    if args.sample:  # a bundled sample PR: a repository built from an installed frontend, one realistic edit
        from dlci import samples
        repo, base, head = samples.build(args.sample, options.out / "sample-pr")
        say(f"sample PR {args.sample!r}: {samples.SAMPLES[args.sample].title} (repo {repo}, base {base[:12]}, "
            f"head {head[:12]})")
    else:
        repo, base, head = repository(args.repo), args.base, args.head
    report = scan.scan(scan.ScanRequest(repo=repo, base=base, head=head,
                                        targets=split(args.targets) if args.targets else None, options=options,
                                        fuzz_share=args.fuzz_share, bisect=in_scan,
                                        directed=not args.no_directed, divergence=not args.no_divergence,
                                        repo_tests=not args.no_repo_tests))
    return exit_code(report, options)
