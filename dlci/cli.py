"""Command line: `dlci targets`, `dlci sources`, `dlci test`.

Exit codes (contract): 0 clean, 1 findings the --fail-on policy counts, 2 usage or configuration error,
3 internal or infrastructure error. A run that is interrupted still writes its partial report.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
DEFAULT_SOURCES = ("opinfo", "module_db", "onnx_node", "keras_tests")


class UsageError(Exception):
    """Bad input from the user: reported clearly, exit 2."""


def _say(msg: str) -> None:
    print(f"dlci: {msg}", file=sys.stderr, flush=True)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def select_targets(spec: str) -> dict:
    from dlci.targets import TARGETS
    names = _split(spec)
    if names == ["all"]:
        chosen = {n: t for n, t in TARGETS.items() if t.available()}
    else:
        unknown = [n for n in names if n not in TARGETS]
        if unknown:
            raise UsageError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(TARGETS))}")
        chosen = {n: TARGETS[n] for n in names}
        missing = [n for n, t in chosen.items() if not t.available()]
        if missing:
            raise UsageError(f"target(s) not installed here: {', '.join(missing)} (pip install 'dlci[all]')")
    if not chosen:
        raise UsageError("no target available: install the frameworks (pip install 'dlci[all]')")
    return chosen


def op_matches(op: str, wanted: set[str]) -> bool:
    if not wanted or "all" in wanted:
        return True
    low = op.lower()
    return low in wanted or low.split("::", 1)[-1] in wanted


def source_registry() -> dict:
    from dlci import sources as S
    return S.registry()


def load_instances(source_names: list[str], ops: set[str], limit_per_op: int | None, harvest_paths: list[str]):
    from dlci import sources as S
    source_registry()
    instances = []
    for name in source_names:
        if name not in S.SOURCES:
            raise UsageError(f"unknown source {name!r}; known: {', '.join(sorted(S.SOURCES))}")
        _say(f"loading source {name} (cached after the first harvest)")
        instances += [i for i in S.load(name, limit_per_op=limit_per_op) if op_matches(i.op, ops)]
    for path in harvest_paths:
        if not Path(path).exists():
            raise UsageError(f"--harvest path does not exist: {path}")
        _say(f"harvesting operator calls from pytest suite {path}")
        instances += [i for i in S.load_harvest([path], limit_per_op=limit_per_op) if op_matches(i.op, ops)]
    return instances


def cmd_targets(args) -> int:
    from dlci.targets import TARGETS
    rows = [{"name": n, "available": t.available(), "version": t.version(), "frameworks": list(t.frameworks),
             "form": t.form} for n, t in sorted(TARGETS.items())]
    print(json.dumps(rows, indent=2))
    return EXIT_CLEAN


def cmd_sources(args) -> int:
    from dlci import sources as S
    source_registry()
    names = _split(args.sources) if args.sources else sorted(S.SOURCES)
    report = {}
    for name in names:
        if name not in S.SOURCES:
            raise UsageError(f"unknown source {name!r}; known: {', '.join(sorted(S.SOURCES))}")
        if name == "harvest":
            continue  # needs a suite path: `dlci test --harvest PATH`
        t0 = time.time()
        insts = S.load(name, limit_per_op=args.limit_per_op)
        summary = S.summary(insts)
        report[name] = {"framework": S.SOURCES[name].framework, "operators": summary["ops"],
                        "instances": summary["instances"], "seconds": round(time.time() - t0, 1)}
        if args.verbose:
            report[name]["per_operator"] = summary["per_op"]
    print(json.dumps(report, indent=2))
    return EXIT_CLEAN


def check_numbers(args) -> None:
    for name, value, low in (("--workers", args.workers, 1), ("--budget", args.budget, 1), ("--timeout", args.timeout, 1),
                             ("--memory-mb", args.memory_mb, 256), ("--limit-per-op", args.limit_per_op or 1, 1)):
        if value < low:
            raise UsageError(f"{name} must be at least {low}, got {value}")


def cmd_test(args) -> int:
    from dlci import campaign
    check_numbers(args)
    targets = select_targets(args.targets)
    ops = {o.lower() for o in _split(args.ops)}
    frameworks = {f for t in targets.values() for f in t.frameworks}
    from dlci import sources as S
    source_registry()
    source_names = [s for s in (_split(args.sources) if args.sources else DEFAULT_SOURCES)
                    if s not in S.SOURCES or S.SOURCES[s].framework in frameworks]
    instances = load_instances(source_names, ops, args.limit_per_op, args.harvest or [])
    if not instances:
        raise UsageError(f"no instance of the operators {args.ops!r} in sources {', '.join(source_names)} "
                         "(see `dlci sources --verbose`)")
    _say(f"{len(instances)} instances of {len({i.op for i in instances})} operators; targets: "
         f"{', '.join(targets)}; budget {args.budget:.0f} s; output {args.out}")
    opts = campaign.Options(out_dir=Path(args.out), budget=args.budget, workers=args.workers, timeout=args.timeout,
                            memory_mb=args.memory_mb, check_repros=not args.no_repro_check, progress=_say)
    doc = campaign.run(instances, targets, opts)
    from dlci.report import verdict
    _say(verdict(doc) + f" Report: {Path(args.out) / 'report.md'}")
    if doc["stats"].get("interrupted"):
        return EXIT_INTERNAL
    if doc["stats"]["tests_run"] == 0:
        _say("error: no test ran (no selected target accepts these instances, or every worker failed to start)")
        return EXIT_INTERNAL
    return EXIT_FINDINGS if counted(doc, args.fail_on) else EXIT_CLEAN


def counted(doc: dict, policy: str) -> int:
    """How many findings the --fail-on policy counts: never | new | any."""
    if policy == "never":
        return 0
    if policy == "new":
        return sum(1 for f in doc["findings"] if f.get("new_in_pr") is not False)
    return len(doc["findings"])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dlci", description="Operator-level CI for deep-learning compilers and converters.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("targets", help="list targets (frontend entry points) with versions").set_defaults(func=cmd_targets)
    s = sub.add_parser("sources", help="operators and instances per migration source")
    s.add_argument("--sources", help="comma-separated source names (default: all)")
    s.add_argument("--limit-per-op", type=int, default=None)
    s.add_argument("--verbose", action="store_true", help="include per-operator instance counts")
    s.set_defaults(func=cmd_sources)
    t = sub.add_parser("test", help="run explicit operators through targets (no diff)")
    t.add_argument("--ops", default="all", help="comma-separated operators (aten::elu, elu, onnx::Relu, ...) or all")
    t.add_argument("--targets", default="all", help="comma-separated target names or all")
    t.add_argument("--budget", type=float, default=300.0, help="seconds of testing (confirmation gets a grace)")
    t.add_argument("--out", default="dlci-out", help="output directory (findings.json, report.md, repro/)")
    t.add_argument("--sources", help=f"comma-separated sources (default: {','.join(DEFAULT_SOURCES)})")
    t.add_argument("--harvest", action="append", help="also harvest operator calls from this pytest suite path")
    t.add_argument("--limit-per-op", type=int, default=None, help="instances per operator per source")
    t.add_argument("--workers", type=int, default=2)
    t.add_argument("--timeout", type=float, default=120.0, help="seconds per test before it counts as a hang")
    t.add_argument("--memory-mb", type=int, default=3000, help="memory per worker before a test counts as OOM")
    t.add_argument("--fail-on", choices=("any", "new", "never"), default="any")
    t.add_argument("--no-repro-check", action="store_true", help="do not run each reproducer alone to verify it")
    t.set_defaults(func=cmd_test)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    try:
        return args.func(args)
    except UsageError as e:
        _say(f"error: {e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERNAL
    except Exception:
        _say("internal error:\n" + traceback.format_exc())
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
