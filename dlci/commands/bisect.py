"""`dlci bisect`: the first bad (or first fixed) release of a package, or commit of a repository, for a reproducer.

    dlci bisect (SCRIPT | --from DIR --id F003) [--package openvino] [--good V] [--bad V] [--fixed] [--json]
    dlci bisect --repo PATH --good REV --bad REV (SCRIPT | --from DIR --id F003) [--fixed] [--json]

The reproducer's exit code is the oracle (0 good, 1 bad, anything else skips the candidate; see dlci/bisect/oracle).
Exit codes: 0 the transition was found (or, with --budget, narrowed: ``complete`` false), 2 bad input (unknown
package, version or revision, empty range, a reproducer that does not fail on --bad, or that fails on every release
tested: the JSON is still printed), 3 infrastructure (index unreachable, git failure).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dlci.errors import ExitCode, UsageError

NAME = "bisect"
HELP = "first bad (or --fixed) release of a package, or commit of a repository, for a finding's reproducer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", nargs="?", help="a reproducer script (exit 0 good, 1 bad); or --from/--id")
    parser.add_argument("--from", dest="from_dir", metavar="DIR", help="a dlci output folder (findings.json)")
    parser.add_argument("--id", dest="finding_id", metavar="F003", help="the finding in --from whose reproducer runs")
    parser.add_argument("--package", help="the package whose releases are bisected (default: the finding's target's)")
    parser.add_argument("--repo", help="bisect the commits of this git repository instead of releases")
    parser.add_argument("--good", metavar="V|REV", help="a release/commit known good (default: the oldest release)")
    parser.add_argument("--bad", metavar="V|REV", help="a release/commit known bad (default: the installed release)")
    parser.add_argument("--fixed", action="store_true", help="find the first release/commit where it is fixed")
    parser.add_argument("--pre", action="store_true", help="include pre-releases")
    parser.add_argument("--index-url", help="package index (default: pip's configuration)")
    parser.add_argument("--python", help="interpreter of the base environment (default: this one)")
    parser.add_argument("--budget", type=float, help="stop after this many seconds with the range narrowed so far")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per reproducer run (default 600)")
    parser.add_argument("--out", help="write bisect.json and each run's log here")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _say(msg: str) -> None:
    print(f"dlci bisect: {msg}", file=sys.stderr, flush=True)


def _from_finding(from_dir: str, finding_id: str) -> tuple[Path, str | None]:
    """(reproducer path, the package of the finding's target)."""
    from dlci.report import intake
    # a folder from elsewhere (an artifact): validated, its reproducer a plain file inside it, never a link
    findings = intake.read_results(Path(from_dir)).report.findings
    f = next((x for x in findings if x.id == finding_id), None)
    if f is None:
        raise UsageError(f"--id {finding_id}: no such finding in {Path(from_dir) / 'findings.json'} "
                         f"(ids: {', '.join(x.id for x in findings) or 'none'})")
    if not f.repro:
        raise UsageError(f"--id {finding_id}: the finding has no reproducer (it did not reproduce alone)")
    from dlci.bisect.attribution import target_package
    return Path(from_dir) / f.repro, target_package(f.target)


def run(args) -> int:
    from dlci.bisect.search import FIXED, REGRESSION
    if bool(args.from_dir) != bool(args.finding_id):
        raise UsageError("--from and --id go together (a dlci output folder and a finding id in it)")
    if args.from_dir and args.script:
        raise UsageError("give either a reproducer script or --from/--id, not both")
    if not args.from_dir and not args.script:
        raise UsageError("nothing to bisect: give a reproducer script or --from DIR --id F00N")
    for name in ("budget", "timeout"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise UsageError(f"--{name} must be positive, got {value}")
    package = args.package
    if args.from_dir:
        script, target_package = _from_finding(args.from_dir, args.finding_id)
        package = package or target_package
    else:
        script = Path(args.script)
    if not script.is_file():
        raise UsageError(f"no reproducer script at {script}")
    mode = FIXED if args.fixed else REGRESSION
    out = Path(args.out) if args.out else None
    log_dir = out / "logs" if out else None
    if args.repo:
        if not args.good or not args.bad:
            raise UsageError("--repo needs --good REV and --bad REV")
        if args.package or args.index_url or args.pre:
            raise UsageError("--package/--index-url/--pre bisect releases; they do not go with --repo")
        from dlci.bisect.commits import first_bad_commit
        res = first_bad_commit(args.repo, args.good, args.bad, script, mode=mode, budget_s=args.budget,
                               timeout=args.timeout, log_dir=log_dir, say=_say)
    else:
        if not package:
            raise UsageError("--package is needed: the reproducer names no dlci target whose package is known")
        from dlci.bisect.releases import bisect_releases
        res = bisect_releases(script, package, good=args.good, bad=args.bad, mode=mode, index_url=args.index_url,
                              pre=args.pre, python=args.python, budget_s=args.budget, timeout=args.timeout,
                              log_dir=log_dir, say=_say)
    doc = res.to_dict()
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "bisect.json").write_text(json.dumps(doc, indent=2) + "\n")
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(doc["report"])
        for v in res.result.tried:
            if v.candidate in (res.result.last_old, res.result.first_new):
                print(f"  {v.candidate}: {v.verdict}")
                for c in v.commands:
                    print(f"    {c}")
    if res.result.last_old is None:
        _say(f"no {res.result.states[0]} candidate: {res.result.note}")
        return ExitCode.USAGE
    return ExitCode.CLEAN
