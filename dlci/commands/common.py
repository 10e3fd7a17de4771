"""What the commands share: progress on stderr, the argument group of the run options (test, rules, scan, fuzz) that
maps the command line onto :class:`dlci.campaign.RunOptions` in one place, and the verdict and exit code of a
finished run."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlci.campaign.options import FAIL_ON, SCHEDULES, RunOptions
from dlci.errors import ExitCode, UsageError
from dlci.report.document import Report
from dlci.sources import DEFAULT_SOURCES, PR_SOURCES


def say(msg: str) -> None:
    print(f"dlci: {msg}", file=sys.stderr, flush=True)


class RunOptionsGroup:
    """``add_to(parser)`` declares the options; ``parse(args)`` gives the typed RunOptions."""

    def __init__(self, *, budget: float | None = 300.0, fail_on: str = "any", budget_help: str = ""):
        self.budget, self.fail_on = budget, fail_on
        self.budget_help = budget_help or "wall-clock seconds for the whole run: 60%% testing, the rest confirms, reduces and checks reproducers"

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        g = parser.add_argument_group("run options")
        g.add_argument("--out", default="dlci-out", help="output directory (findings.json, report.md, repro/)")
        g.add_argument("--budget", type=float, default=self.budget, help=self.budget_help)
        g.add_argument("--fail-on", choices=FAIL_ON, default=self.fail_on,
                       help="which findings make the exit code 1 (known issues never do)")
        g.add_argument("--known", help="a .dlci.yml whose known_issues mark matching findings as known")
        g.add_argument("--sources", help=f"comma-separated sources (default: {','.join(DEFAULT_SOURCES)}; "
                       f"scan: {','.join(PR_SOURCES)})")
        g.add_argument("--limit-per-op", type=int, default=None, help="instances per operator per source")
        g.add_argument("--workers", type=int, default=2)
        g.add_argument("--timeout", type=float, default=120.0, help="seconds per test before it counts as a hang")
        g.add_argument("--memory-mb", type=int, default=3000, help="memory per worker before a test counts as OOM")
        g.add_argument("--no-repro-check", action="store_true", help="do not run each reproducer alone to verify it")
        g.add_argument("--no-reduce", action="store_true", help="keep each finding's instance as found (no shrinking)")
        g.add_argument("--reduce-seconds", type=float, default=None,
                       help="time to shrink each finding (default: 10%% of the budget, 10 to 60 s)")
        g.add_argument("--no-batch", action="store_true",
                       help="one model per test (default: targets that pack tests convert and compile a batch once)")
        g.add_argument("--schedule", choices=SCHEDULES, default="cost",
                       help="cost (default): every target x source gets a share of the budget by measured cost "
                            "and yield; plan: instance by instance on every target, in the plan's order (a scan always "
                            "steers by coverage)")

    @staticmethod
    def parse(args: argparse.Namespace, progress=say) -> RunOptions:
        return RunOptions(out=Path(args.out), budget=args.budget, workers=args.workers, timeout=args.timeout,
                          memory_mb=args.memory_mb, sources=split(args.sources) if args.sources else None,
                          limit_per_op=args.limit_per_op, check_repros=not args.no_repro_check,
                          reduce=not args.no_reduce, reduce_seconds=args.reduce_seconds, fail_on=args.fail_on,
                          known=known_from(args.known), batch=not args.no_batch, schedule=args.schedule,
                          progress=progress)


def repository(path: str | None) -> Path:
    """The repository a command works on: ``--repo`` when given, else the git repository the user stands in (as git,
    pre-commit or pytest do); outside one, a usage error that says what to give (exit 2)."""
    from dlci.diff import git
    where = Path(path) if path else Path.cwd()
    r = git.run(where, "rev-parse", "--show-toplevel", timeout=60) if where.is_dir() else None
    if r is None or r.returncode != 0 or not r.stdout.strip():
        if path:
            raise UsageError(f"--repo {path} is not a git repository")
        raise UsageError(f"{where} is not inside a git repository: run dlci in the repository to test, give --repo "
                         "PATH, or --sample NAME for a bundled sample pull request (dlci scan --help lists them)")
    return Path(r.stdout.strip()) if not path else where


def split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def known_from(path: str | None) -> list:
    """Known issues from a .dlci.yml-style file (``--known``); a malformed file is a usage error before anything
    runs."""
    if not path:
        return []
    from dlci.config import Config
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--known: cannot read {path}: {e}") from None
    return Config.parse(text, path).known()


def exit_code(report: Report, options: RunOptions) -> int:
    """The verdict line, and the exit code of a finished run (interrupted or nothing run: 3; findings the
    --fail-on policy counts: 1)."""
    from dlci.report import verdict
    doc = report.to_dict()
    say(verdict(doc) + f" Report: {options.out / 'report.md'}")
    if report.interrupted:
        return ExitCode.INTERNAL
    if report.stats.get("tests_run", 0) == 0 and report.stats.get("targets_not_on_runner") and not \
            report.stats.get("per_target"):
        say("nothing ran: every target this run needs is a device target this runner lacks (see above); not a failure")
        return ExitCode.CLEAN
    pr = report.pr or {}
    # no test ran, and nothing says why (nothing to test, a test gap, changed files that do not even import)
    if report.stats.get("tests_run", 0) == 0 and not (pr.get("nothing_to_test") or pr.get("test_gap")
                                                       or report.findings):
        say("error: no test ran (no selected target accepts these instances, or every worker failed to start)")
        return ExitCode.INTERNAL
    return ExitCode.FINDINGS if report.counted(options.fail_on) else ExitCode.CLEAN
