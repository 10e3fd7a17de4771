"""``dlci nan``: search programs for NaN/Inf-producing inputs; confirmed findings with standalone reproducers.

``main(args)`` takes an argparse-style namespace: ``program`` (list of FILE:FUNCTION; empty = every bundled program
of :mod:`dlci.nan.programs`), ``budget`` (seconds per program), ``strategy`` (gradient | random), ``seed``, ``out``
(directory), ``fail_on`` (any | never). It writes ``out/findings.json`` (a :class:`dlci.report.document.Report`),
``out/report.md`` and ``out/repro/<id>_nan_<op>.py``; a finding is reported only when its
search confirmed it and its reproducer, run alone, exits 1.

Exit codes: 0 no finding, 1 findings (``--fail-on any``), 2 a bad program spec/file/function or a program that
raises on its own (named in the message), 3 internal error. Results gathered so far are always written.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from dlci.errors import ExitCode
from dlci.findings import Finding
from dlci.report.document import Report

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = ExitCode.CLEAN, ExitCode.FINDINGS, ExitCode.USAGE, ExitCode.INTERNAL


def _say(msg: str) -> None:
    print(f"[dlci nan] {msg}", file=sys.stderr, flush=True)


def _opt(args, name, default):
    v = getattr(args, name, None)
    return default if v is None else v


def _rel(path: str | None) -> str | None:
    if not path:
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _target(framework: str) -> tuple[str, str]:
    if framework == "torch":
        import torch
        version = torch.__version__
    else:
        import tensorflow as tf
        version = tf.__version__
    # the target names the release ("torch 2.13.0 eager"); the local build tag (+cpu) stays in target_version
    return f"{framework} {str(version).split('+')[0]} eager", str(version)


def _bundled() -> list[str]:
    from dlci.nan.programs import PROGRAMS
    return [getattr(p, "spec", None) or f"{p.path}:{p.function}" for p in PROGRAMS]


def _finding(fid: str, res, target: str, version: str, repro_rel: str) -> dict:
    sym = ("NaN" if res.kind == "nan" else "Inf") + (" gradient" if res.phase == "backward" else "")
    file = _rel(res.file)
    prog = _rel(res.file_program) + ":" + res.function
    matters = [e["name"] for e in res.external_info if e["matters"]]
    msg = (f"{sym} in {res.op} at {file}:{res.line}: {res.code}\n"
           f"first NaN/Inf-producing operation with finite inputs"
           f"{' (its gradient)' if res.phase == 'backward' else ''}; found by {res.strategy} search in "
           f"{res.seconds_to_first} s, {res.runs} program runs; run seed {res.run_seed}; "
           + (f"values that matter: {', '.join(matters)}" if matters else "the seed alone reproduces it"))
    return {
        "id": fid, "oracle": "nan", "operator": res.op, "target": target, "target_version": version,
        "stage": "backward" if res.phase == "backward" else "run", "symptom": f"{sym} in {res.op}",
        "signature": f"{prog}|{res.op}|{file}:{res.line}", "message": msg, "new_in_pr": None,
        "repro": repro_rel, "file": file, "line": res.line, "code": res.code, "program": prog,
        "kind": res.kind, "phase": res.phase, "entry": res.entry, "framework": res.framework,
        "origin": {"source": "nan_search", "test": prog}, "instances": [], "instance_id": "",
        "externals": {name: {"shape": list(v.shape), "dtype": str(v.dtype),
                             "changed_elements": res.changed_elements.get(name)}
                      for name, v in res.externals.items()} if matters else {},
        "search": {"strategy": res.strategy, "seed": res.seed, "run_seed": res.run_seed, "runs": res.runs,
                   "iterations": res.iterations, "seconds_to_first": res.seconds_to_first,
                   "seconds": round(res.seconds, 2)},
    }


def render_report(doc: dict) -> str:
    st = doc["stats"]
    n = len(doc["findings"])
    lines = ["# dlci nan report", "",
             f"**{n} confirmed NaN/Inf finding{'s' if n != 1 else ''}** in {len(st['programs'])} program(s), "
             f"{st['tests_run']} program runs ({st['tests_valid']} valid), {st['seconds']:.0f} s, "
             f"strategy `{st['strategy']}`, budget {st['budget']:.0f} s per program.", ""]
    if doc["findings"]:
        lines += ["| id | program | operation | line | symptom | reproducer |", "|---|---|---|---|---|---|"]
        for f in doc["findings"]:
            lines.append(f"| {f['id']} | `{f['program']}` | `{f['operator']}` | `{f['file']}:{f['line']}` | "
                         f"{f['symptom']} | `{f['repro']}` |")
        lines.append("")
        for f in doc["findings"]:
            s = f["search"]
            lines += [f"## {f['id']}: {f['symptom']} at `{f['file']}:{f['line']}`", "", "```python",
                      f["code"] or "", "```", "",
                      f"- target: {f['target']}; signature: `{f['signature']}`",
                      f"- found by {s['strategy']} search after {s['seconds_to_first']} s "
                      f"({s['runs']} program runs, {s['iterations']} search iterations, run seed {s['run_seed']})"]
            if f["externals"]:
                lines.append("- failure-inducing values (every other random draw keeps what the seed gives):")
                for name, e in f["externals"].items():
                    n = e.get("changed_elements")
                    ch = f", {n} element(s) changed" if n is not None else ""
                    lines.append(f"  - `{name}` shape {e['shape']} {e['dtype']}{ch}")
            else:
                lines.append("- the program as written fails under the run seed (no value changed)")
            lines += [f"- reproducer: `{f['repro']}` (run it alone: exits 1 while the bug reproduces, 0 once fixed)",
                      ""]
    lines += ["## Programs", "", "| program | framework | result | runs | seconds | first NaN/Inf after |",
              "|---|---|---|---|---|---|"]
    for p in st["programs"]:
        first = p.get("seconds_to_first")
        lines.append(f"| `{p['program']}` | {p.get('framework') or '-'} | {p['result']} | {p.get('runs', 0)} | "
                     f"{p.get('seconds', 0):.1f} | {first if first is not None else '-'} |")
    if st.get("unreproduced"):
        lines += ["", "## Confirmed by the search but not reproduced by the standalone script", ""]
        lines += [f"- `{u['signature']}`: reproducer exit {u['exit']}" for u in st["unreproduced"]]
    return "\n".join(lines) + "\n"


def _write(out: Path, report: Report) -> None:
    report.write(out, markdown=render_report)


def main(args) -> int:
    from dlci.nan import repro
    from dlci.models.program import ProgramError, load_program
    from dlci.nan.search import search

    out = Path(_opt(args, "out", "dlci-out"))
    budget = float(_opt(args, "budget", 60.0))
    strategy = _opt(args, "strategy", "gradient")
    seed = int(_opt(args, "seed", 0))
    fail_on = _opt(args, "fail_on", "any")
    if strategy not in ("gradient", "random"):
        _say(f"error: unknown strategy {strategy!r} (gradient | random)")
        return EXIT_USAGE
    if budget <= 0:
        _say(f"error: --budget must be positive, got {budget}")
        return EXIT_USAGE
    specs = list(_opt(args, "program", []) or [])
    try:
        specs = specs or _bundled()
    except Exception as e:  # noqa: BLE001 - the bundled programs' manifest is missing or broken
        _say(f"error: no program given and the bundled programs cannot be listed: {type(e).__name__}: {e}")
        return EXIT_INTERNAL
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro").mkdir(exist_ok=True)
    t0 = time.monotonic()
    findings: list[Finding] = []
    stats = {"tests_run": 0, "tests_valid": 0, "seconds": 0.0, "per_target": {}, "programs": [],
             "strategy": strategy, "budget": budget, "seed": seed, "unreproduced": [], "interrupted": False}
    report = Report(findings=findings, stats=stats)
    usage = internal = False
    seen: set[str] = set()

    def flush():
        stats["seconds"] = round(time.monotonic() - t0, 2)
        _write(out, report)

    try:
        for spec in specs:
            row = {"program": spec, "framework": None, "result": "", "runs": 0, "seconds": 0.0}
            stats["programs"].append(row)
            try:
                prog = load_program(spec)
                row["program"] = f"{_rel(prog.file)}:{prog.function}"
                fw = prog.framework()
                row["framework"] = fw
                target, version = _target(fw)
                _say(f"{row['program']}: {strategy} search, {budget:.0f} s ({target})")
                res = search(prog, strategy=strategy, budget=budget, seed=seed)
            except ProgramError as e:
                _say(f"error: {e}")
                row["result"] = f"error: {e}"
                usage = True
                flush()
                continue
            except Exception as e:  # noqa: BLE001 - a dlci bug on one program: the others still run
                _say(f"internal error on {spec}: {type(e).__name__}: {e}")
                row["result"] = f"internal error: {type(e).__name__}: {e}"
                row["traceback"] = traceback.format_exc()[-3000:]
                internal = True
                flush()
                continue
            row.update(runs=res.runs, seconds=round(res.seconds, 2), seconds_to_first=res.seconds_to_first,
                       found=res.found, note=res.note)
            c = stats["per_target"].setdefault(target, {"pass": 0, "unsupported": 0, "invalid": 0, "crash": 0,
                                                        "inconsistency": 0, "nan": 0})
            stats["tests_run"] += res.runs
            stats["tests_valid"] += res.runs - res.runs_failed
            c["invalid"] += res.runs_failed
            if not res.found:
                c["pass"] += res.runs - res.runs_failed
                row["result"] = "no finding" + (f" ({res.note})" if res.note else "")
                flush()
                continue
            c["pass"] += max(0, res.runs - res.runs_failed - 1)
            fid = f"F{len(findings) + len(stats['unreproduced']) + 1:03d}"
            path = out / "repro" / repro.file_name(fid, res.op)
            repro.write(res, path, title=f"Program {row['program']}; run seed {res.run_seed}.")
            rc, tail = repro.check(path)
            f = _finding(fid, res, target, version, str(path.relative_to(out)))
            if rc != 1:
                _say(f"{row['program']}: {f['symptom']} at line {res.line} not reproduced by {path.name} "
                     f"(exit {rc}); not reported")
                stats["unreproduced"].append({"signature": f["signature"], "exit": rc, "repro": f["repro"],
                                              "output": tail[-500:]})
                row["result"] = "found but not reproduced alone"
            elif f["signature"] in seen:
                row["result"] = f"duplicate of an earlier finding ({f['signature']})"
            else:
                seen.add(f["signature"])
                findings.append(Finding.from_dict(f))
                c["nan"] += 1
                row["result"] = f"{fid}: {f['symptom']} at line {res.line}"
                _say(f"{row['program']}: {fid} {f['symptom']} at {f['file']}:{res.line} "
                     f"(after {res.seconds_to_first} s); reproducer {f['repro']}")
            flush()
    except KeyboardInterrupt:
        stats["interrupted"] = True
        flush()
        _say("interrupted: partial results written")
        return EXIT_INTERNAL
    flush()
    _say(f"{len(findings)} finding(s); report: {out / 'report.md'}")
    if internal:
        return EXIT_INTERNAL
    if usage:
        return EXIT_USAGE
    return EXIT_FINDINGS if report.counted(fail_on) else EXIT_CLEAN


def add_arguments(p) -> None:
    """The ``dlci nan`` options (for the integrator's subparser)."""
    p.add_argument("--program", action="append", default=[], metavar="FILE:FUNCTION",
                   help="program to search (repeatable); default: every bundled program")
    p.add_argument("--budget", type=float, default=60.0, help="seconds of search per program")
    p.add_argument("--strategy", choices=("gradient", "random"), default="gradient")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="dlci-out", help="output directory (findings.json, report.md, repro/)")
    p.add_argument("--fail-on", dest="fail_on", choices=("any", "never"), default="any")


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(prog="dlci nan")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
