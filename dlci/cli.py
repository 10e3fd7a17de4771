"""Command line: `dlci targets`, `dlci sources`, `dlci test`, `dlci rules`, `dlci nan`, `dlci ops`, `dlci scan`,
`dlci triage`.

Exit codes (contract): 0 clean, 1 findings the --fail-on policy counts, 2 usage or configuration error,
3 internal or infrastructure error. A run that is interrupted still writes its partial report.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from dlci.errors import ExitCode, UsageError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = ExitCode.CLEAN, ExitCode.FINDINGS, ExitCode.USAGE, ExitCode.INTERNAL
DEFAULT_SOURCES = ("opinfo", "module_db", "onnx_node", "keras_tests")


def _say(msg: str) -> None:
    print(f"dlci: {msg}", file=sys.stderr, flush=True)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def select_targets(spec: str) -> dict:
    from dlci.targets import select
    return select(spec)


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
    # derived sources (boundary variants of other sources) only when named: a cold harvest of them takes minutes
    names = _split(args.sources) if args.sources else sorted(n for n in S.SOURCES if not getattr(S.SOURCES[n],
                                                                                                 "bases", ()))
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
    budget = args.budget if args.budget is not None else 1
    for name, value, low in (("--workers", args.workers, 1), ("--budget", budget, 1), ("--timeout", args.timeout, 1),
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
    if args.model:  # whole models: a failure is reduced to the operators it needs (graph delta debugging)
        instances = [model_instance(path, args.inputs, args.seed) for path in args.model]
        if args.ops != "all":
            instances += load_instances(source_names, ops, args.limit_per_op, args.harvest or [])
    else:
        instances = load_instances(source_names, ops, args.limit_per_op, args.harvest or [])
    if not instances:
        raise UsageError(f"no instance of the operators {args.ops!r} in sources {', '.join(source_names)} "
                         "(see `dlci sources --verbose`)")
    _say(f"{len(instances)} instances of {len({i.op for i in instances})} operators; targets: "
         f"{', '.join(targets)}; budget {args.budget:.0f} s; output {args.out}")
    opts = campaign.Options(out_dir=Path(args.out), budget=args.budget, workers=args.workers, timeout=args.timeout,
                            memory_mb=args.memory_mb, check_repros=not args.no_repro_check, progress=_say,
                            reduce=not args.no_reduce, reduce_seconds=args.reduce_seconds)
    _known_from(args.known)  # a malformed file is a usage error before anything runs
    doc = campaign.run(instances, targets, opts)
    return _finish_run(args, doc)


RULE_SOURCES = {"torch": ("opinfo", "module_db"), "keras": ("keras_tests",)}


def cmd_rules(args) -> int:
    """Equivalence rules: `--list` prints the registry; otherwise run the rules on explicit operators."""
    from dlci import rules as R
    if args.list:
        print(json.dumps([R.describe(r) for r in R.all_rules().values()], indent=2))
        return EXIT_CLEAN
    from dlci import campaign
    check_numbers(args)
    try:
        targets = R.rule_targets(_split(args.rules) if args.rules and args.rules != "all" else None,
                                 library=args.library)
    except KeyError as e:
        raise UsageError(str(e).strip("'\"")) from None
    if not targets:
        raise UsageError("no equivalence rule available here for that selection (`dlci rules --list`)")
    ops = {o.lower() for o in _split(args.ops)}
    frameworks = {f for t in targets.values() for f in t.frameworks}
    source_names = _split(args.sources) if args.sources else [s for f in sorted(frameworks) for s in RULE_SOURCES[f]]
    instances = load_instances(source_names, ops, args.limit_per_op, args.harvest or [])
    instances = [i for i in instances if i.framework in frameworks]
    if not instances:
        raise UsageError(f"no instance of the operators {args.ops!r} in sources {', '.join(source_names)} "
                         "(see `dlci sources --verbose`)")
    if not args.no_widen:
        # the constraint-aware generator's variants of the same operators (validated in sandboxed workers: a
        # boundary value can crash the framework itself; cached like every source)
        from dlci import sources as S
        before = len(instances)
        for framework, name in (("torch", "boundary"), ("keras", "keras_boundary")):
            ops_here = sorted({i.op for i in instances if i.framework == framework})
            if ops_here:
                _say(f"loading source {name} for {len(ops_here)} operators (cached after the first run)")
                instances += S.load(name, ops=ops_here, limit_per_op=args.limit_per_op)
        _say(f"constraint-aware generator: {len(instances) - before} boundary variants of {before} instances")

    def targets_for(inst):
        # applicability is decided from metadata before anything runs: not-applicable pairs are never scheduled
        chosen = []
        for name, t in targets.items():
            if inst.framework not in t.frameworks:
                continue
            try:
                if t.rule.applies(inst):
                    continue
            except Exception:  # a broken check is the worker's to report (invalid), not a reason to skip
                pass
            chosen.append(name)
        return chosen

    _say(f"{len(instances)} instances of {len({i.op for i in instances})} operators; {len(targets)} rules; "
         f"budget {args.budget:.0f} s; output {args.out}")
    opts = campaign.Options(out_dir=Path(args.out), budget=args.budget, workers=args.workers, timeout=args.timeout,
                            memory_mb=args.memory_mb, check_repros=not args.no_repro_check, progress=_say,
                            reduce=not args.no_reduce, reduce_seconds=args.reduce_seconds,
                            targets_for=targets_for)
    doc = campaign.run(instances, targets, opts)
    return _finish_run(args, doc)


def cmd_nan(args) -> int:
    """NaN/Inf gradient search over programs (`--program FILE:FUNCTION`; default: the bundled programs)."""
    from dlci.nan import command
    if args.budget is not None and args.budget < 1:
        raise UsageError(f"--budget must be at least 1, got {args.budget}")
    return command.main(args)


def _finish_run(args, doc: dict) -> int:
    """Known issues, verdict line and exit code of an explicit run (`dlci test`, `dlci rules`)."""
    known = _known_from(getattr(args, "known", None))
    if known:
        from dlci.findings.known import apply
        from dlci.report import write_reports
        apply(doc, known)
        write_reports(Path(args.out), doc)
    from dlci.report import verdict
    _say(verdict(doc) + f" Report: {Path(args.out) / 'report.md'}")
    if doc["stats"].get("interrupted"):
        return EXIT_INTERNAL
    if doc["stats"]["tests_run"] == 0:
        _say("error: no test ran (no selected target accepts these instances, or every worker failed to start)")
        return EXIT_INTERNAL
    return EXIT_FINDINGS if counted(doc, args.fail_on) else EXIT_CLEAN


def model_instance(path: str, inputs_path: str | None, seed: int):
    """An ONNX model file as one instance: inputs from ``--inputs`` (.npz keyed by graph input name) or drawn from
    the declared shapes and dtypes (seeded). Bad files, dynamic shapes without --inputs: usage errors."""
    import numpy as np
    import onnx
    from dlci.reduce.graph import instance_from_model
    from dlci.reduce.edit import feed_names
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as e:
        raise UsageError(f"--model {path}: not a valid ONNX model ({type(e).__name__}: {str(e)[:300]})") from None
    names = feed_names(model)
    declared = {i.name: i.type.tensor_type for i in model.graph.input}
    arrays = []
    given = {}
    if inputs_path:
        try:
            given = dict(np.load(inputs_path))
        except Exception as e:
            raise UsageError(f"--inputs {inputs_path}: cannot read it as .npz ({e})") from None
    rng = np.random.default_rng(seed)
    for name in names:
        if name in given:
            arrays.append(given[name])
            continue
        tt = declared[name]
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if any(d is None for d in dims):
            raise UsageError(f"--model {path}: input {name!r} has a dynamic shape; give its values with --inputs "
                             "FILE.npz")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(dims).astype(dtype))
        elif dtype.kind in "iu":
            arrays.append(rng.integers(0, 4, dims).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(dims) < 0.5)
        else:
            raise UsageError(f"--model {path}: input {name!r} of type {dtype} needs --inputs FILE.npz")
    # the model is named as a whole: the signature stays the same while the graph pass cuts it down
    stem = Path(path).stem.replace("::", "_") or "model"
    return instance_from_model(model, arrays, op=f"model::{stem}", source="model", test=str(path), seed=seed)


def counted(doc: dict, policy: str) -> int:
    """How many findings the --fail-on policy counts: never | new | any."""
    if policy == "never":
        return 0
    live = [f for f in doc["findings"] if not f.get("known")]  # known issues never fail a run
    if policy == "new":
        return sum(1 for f in live if f.get("new_in_pr") is not False)
    return len(live)


def _known_from(path: str | None) -> list:
    """Known issues from a .dlci.yml-style file (``--known``)."""
    if not path:
        return []
    from dlci.config import Config, ConfigError
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"--known: cannot read {path}: {e}") from None
    try:
        return Config.parse(text, path).known()
    except ConfigError as e:
        raise UsageError(str(e)) from None


def cmd_triage(args) -> int:
    """Findings of a finished run with their signatures, and known_issues entries ready to paste."""
    import yaml
    from dlci.findings.known import apply, suggestion
    path = Path(args.dir) / "findings.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        findings = doc["findings"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path} is not a dlci findings.json: {e}") from None
    known = _known_from(args.known)
    if known:
        apply(doc, known)
    if args.json:
        print(json.dumps([{k: f.get(k) for k in ("id", "signature", "operator", "target", "symptom", "oracle",
                                                   "new_in_pr", "known", "repro")} for f in findings], indent=2))
        return EXIT_CLEAN
    for f in findings:
        state = ("known: " + (f["known"].get("link") or f["known"].get("note"))) if f.get("known") else \
            {True: "new in PR", False: "already on base", None: "-"}[f.get("new_in_pr")]
        print(f"{f['id']}  {f['target']}  {f['operator']}  {f['symptom']}  [{state}]\n    signature: "
              f"{f['signature']}\n    reproducer: {f.get('repro') or '-'}")
    fresh = [suggestion(f) for f in findings if not f.get("known")]
    if fresh:
        print("\n# known_issues entries for .dlci.yml (fill in the link; widen a pattern with * where the same "
              "bug shows on more operators or targets):")
        print(yaml.safe_dump({"known_issues": fresh}, sort_keys=False, width=120).rstrip())
    return EXIT_CLEAN


def _open_repo(args):
    from dlci.diff import DiffError, GitRepo
    try:
        return GitRepo(args.repo, args.base, args.head)
    except DiffError as e:
        raise UsageError(str(e)) from None


def cmd_ops(args) -> int:
    """The operators and converters a diff touches, with the file:line that selected each (JSON)."""
    from dlci import operators, profiles
    repo = _open_repo(args)
    try:
        analysis = profiles.analyse(repo, only=_split(args.profiles) if args.profiles else None)
    except KeyError as e:
        raise UsageError(str(e).strip("'\"")) from None
    doc = analysis.to_dict()
    for touch in doc["touches"]:
        touch["canonical"] = sorted(operators.canonical(touch["operator"], touch["namespace"]))
    doc["canonical_operators"] = sorted({c for t in doc["touches"] for c in t["canonical"]})
    print(json.dumps(doc, indent=2))
    return EXIT_CLEAN


def cmd_scan(args) -> int:
    from dlci import scan as S
    from dlci.checkout import CheckoutError
    from dlci.config import ConfigError
    from dlci.diff import DiffError
    check_numbers(args)
    out = Path(args.out)
    if args.repo is None:  # the bundled sample PR: a TVM-shaped repo with one realistic converter edit
        from dlci import samples
        try:
            repo, base, head = samples.build(args.sample, out / "sample-pr")
        except samples.SampleError as e:
            raise UsageError(str(e)) from None
        _say(f"sample PR {args.sample!r}: {samples.SAMPLES[args.sample].title} (repo {repo}, base {base[:12]}, "
             f"head {head[:12]})")
    else:
        repo, base, head = Path(args.repo), args.base, args.head
    req = S.ScanRequest(repo=repo, base=base, head=head, out=out, budget=args.budget,
                        targets=_split(args.targets) if args.targets else None,
                        sources=_split(args.sources) if args.sources else None, limit_per_op=args.limit_per_op,
                        workers=args.workers, timeout=args.timeout, memory_mb=args.memory_mb,
                        check_repros=not args.no_repro_check, reduce=not args.no_reduce,
                        reduce_seconds=args.reduce_seconds, progress=_say)
    try:
        doc, _new = S.scan(req)
    except (DiffError, ConfigError) as e:
        raise UsageError(str(e)) from None
    except CheckoutError as e:
        _say(f"error: {e}")
        return EXIT_INTERNAL
    from dlci.report import verdict
    _say(verdict(doc) + f" Report: {out / 'report.md'}")
    if doc["stats"].get("interrupted"):
        return EXIT_INTERNAL
    return EXIT_FINDINGS if counted(doc, args.fail_on) else EXIT_CLEAN


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sources", help=f"comma-separated sources (default: {','.join(DEFAULT_SOURCES)})")
    p.add_argument("--limit-per-op", type=int, default=None, help="instances per operator per source")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per test before it counts as a hang")
    p.add_argument("--memory-mb", type=int, default=3000, help="memory per worker before a test counts as OOM")
    p.add_argument("--no-repro-check", action="store_true", help="do not run each reproducer alone to verify it")
    p.add_argument("--no-reduce", action="store_true", help="keep each finding's instance as found (no shrinking)")
    p.add_argument("--reduce-seconds", type=float, default=None,
                   help="time to shrink each finding (default: 10%% of the budget, 10 to 60 s)")


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
    t.add_argument("--harvest", action="append", help="also harvest operator calls from this pytest suite path")
    t.add_argument("--model", action="append", help="an ONNX model file to test whole (repeatable); a failure is "
                                                    "reduced to the operators it needs")
    t.add_argument("--inputs", help="with --model: input values as .npz keyed by graph input name")
    t.add_argument("--seed", type=int, default=0, help="with --model: seed of the drawn input values")
    t.add_argument("--fail-on", choices=("any", "new", "never"), default="any")
    t.add_argument("--known", help="a .dlci.yml whose known_issues mark matching findings as known")
    _add_run_options(t)
    t.set_defaults(func=cmd_test)

    r = sub.add_parser("rules", help="equivalence rules: list them, or run them on explicit operators",
                       description="Pairs of graphs that must agree (eager vs compiled, formula vs API, save/load, "
                                   "...), built from the operators' migrated instances and their boundary variants.")
    r.add_argument("--list", action="store_true", help="print the rule registry as JSON and exit")
    r.add_argument("--ops", default="all", help="comma-separated operators (conv2d, nn::Conv2d, keras::Conv2D) or all")
    r.add_argument("--rules", default="all", help="comma-separated rule names (see --list) or all")
    r.add_argument("--library", choices=("torch", "tensorflow"), help="only the rules of this library")
    r.add_argument("--budget", type=float, default=300.0, help="seconds of testing (confirmation gets a grace)")
    r.add_argument("--out", default="dlci-out", help="output directory (findings.json, report.md, repro/)")
    r.add_argument("--no-widen", action="store_true", help="only the migrated instances, no boundary variants")
    r.add_argument("--harvest", action="append", help="also harvest operator calls from this pytest suite path")
    r.add_argument("--fail-on", choices=("any", "new", "never"), default="any")
    r.add_argument("--known", help="a .dlci.yml whose known_issues mark matching findings as known")
    _add_run_options(r)
    r.set_defaults(func=cmd_rules)

    n = sub.add_parser("nan", help="NaN/Inf gradient search: drive a program's inputs and weights toward numerical "
                                   "failure",
                       description="FUNCTION (no arguments) builds a model and runs a step; dlci intercepts the "
                                   "framework's calls, finds the vulnerable operations and searches by "
                                   "back-propagation for inputs that make one produce NaN/Inf. Without --program, "
                                   "runs the bundled example programs.")
    from dlci.nan.command import add_arguments as nan_arguments
    nan_arguments(n)
    n.set_defaults(func=cmd_nan)

    tr = sub.add_parser("triage", help="findings of a run with their signatures, and known_issues entries to paste")
    tr.add_argument("dir", nargs="?", default="dlci-out", help="output directory of a dlci test/scan run")
    tr.add_argument("--known", help="a .dlci.yml whose known_issues are applied first")
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=cmd_triage)

    o = sub.add_parser("ops", help="operators and converters a diff touches (JSON, with the file:line of each)")
    o.add_argument("--repo", default=".", help="git repository (default: .)")
    o.add_argument("--base", default="HEAD~1", help="base revision; the merge base with --head is used")
    o.add_argument("--head", default="HEAD", help="head revision")
    o.add_argument("--profiles", help="comma-separated profiles (default: every profile that recognises the repo)")
    o.set_defaults(func=cmd_ops)

    from dlci.samples import DEFAULT as SAMPLE, SAMPLES
    sc = sub.add_parser("scan", help="test a pull request: diff -> operators -> head run -> base attribution",
                        description="Without --repo, scans a bundled sample PR (a TVM-shaped repository built from "
                                    "the installed TVM with one realistic converter edit).")
    sc.add_argument("--repo", default=None, help="git repository of the project under test")
    sc.add_argument("--base", default="HEAD~1", help="base revision; the merge base with --head is used")
    sc.add_argument("--head", default="HEAD", help="head revision (the PR)")
    sc.add_argument("--sample", default=SAMPLE, choices=sorted(SAMPLES), help="bundled sample PR when no --repo")
    sc.add_argument("--out", default="dlci-out", help="output directory (findings.json, report.md, repro/)")
    sc.add_argument("--budget", type=float, default=None, help="seconds of testing (default: .dlci.yml or 300)")
    sc.add_argument("--targets", help="comma-separated targets (default: those the touched converters reach)")
    sc.add_argument("--fail-on", choices=("any", "new", "never"), default="new")
    _add_run_options(sc)
    sc.set_defaults(func=cmd_scan)
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
