"""Real regressions: upstream fixes reverted as pull requests, and real refactors, scanned by `dlci scan`.

    .venv/bin/python benchmarks/real_regressions.py [--cases ID,...] [--json PATH] [--work DIR] [--upstream DIR]
                                                    [--budget SECONDS] [--refresh-groundtruth] [--no-scan]

The corpus is benchmarks/regressions/cases.yaml: real fixes from TVM's Relax frontends (merged before 2025-09-01),
each reverted on the installed apache-tvm's Python sources (a regression PR), and real behaviour-preserving
refactor commits of the same code applied as PRs. For every case the runner
  1. builds the repository (benchmarks/regressions/build.py: the installed sources with the case's files materialised
     from the upstream cache, see benchmarks/regressions/materialise.py; base and head as recorded);
  2. checks the ground truth (benchmarks/regressions/groundtruth.py, cached): the fix's own upstream test fails on
     head and passes on base, or the case is excluded with the reason;
  3. runs `python -m dlci scan --repo R --base main --head pr/<case> --fail-on never` with dlci's defaults (no
     --budget unless given here), in a fresh process, timing its wall clock;
  4. reads the scan's documented outputs (ops.json, findings.json, report.md; results.jsonl for counts) and says
     whether the regression was caught (a finding new in the PR whose operator is one of the case's operators or a
     canonical equivalent) or missed, with the reason; for a refactor, the findings new in the PR are false alarms.
Prints one JSON line per case, then a table and the summary; --json writes everything to a file. The upstream
cache (the upstream repositories the cases' files are materialised from) must be there first: without it the script
exits saying how to get it (benchmarks/regressions/materialise.py fetch).
"""
from __future__ import annotations

import sys
from pathlib import Path

# this script's folder must not shadow the standard library (benchmarks/bisect.py would stand in for `bisect`)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "regressions"))

from build import BuildError, build, load_cases  # noqa: E402
from groundtruth import check  # noqa: E402
import materialise  # noqa: E402
from store import StoreError  # noqa: E402


def _canon(name: str) -> set[str]:
    """Canonical identities of an operator name (dlci.operators when importable, else the bare lowercase name)."""
    try:
        from dlci.operators import canonical, instance_ops
        out = set(canonical(name))
        try:
            out |= set(instance_ops(name))
        except Exception:  # noqa: BLE001
            pass
        if out:
            return out
    except Exception:  # noqa: BLE001
        pass
    return {name.split("::")[-1].split(".")[0].lower()}


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _results(path: Path) -> list[dict]:
    rows = []
    try:
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    except OSError:
        pass
    return rows


def scan(repo: Path, head_ref: str, out: Path, budget: float | None, timeout: float,
         sources: str | None = None, extra: tuple[str, ...] = ()) -> dict:
    cmd = [sys.executable, "-m", "dlci", "scan", "--repo", str(repo), "--base", "main", "--head", head_ref,
           "--out", str(out), "--fail-on", "never", *extra]
    if budget:
        cmd += ["--budget", str(budget)]
    if sources:
        cmd += ["--sources", sources]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        rc, err = proc.returncode, (proc.stderr or "")[-3000:]
    except subprocess.TimeoutExpired as e:
        rc, err = "timeout", str(e)[-2000:]
    return {"exit": rc, "wall_seconds": round(time.time() - t0, 1), "stderr_tail": err, "command": " ".join(cmd)}


def judge(case: dict, out: Path, run: dict) -> dict:
    """caught / missed (+reason) for a regression; false alarms for a refactor."""
    case_ops = set().union(*(_canon(o) for o in case["operators"]))
    ops = _load(out / "ops.json") or {}
    doc = _load(out / "findings.json")
    res: dict = {"case_operators": sorted(case_ops)}
    if doc is None:
        res.update(outcome="error", reason=f"scan wrote no findings.json (exit {run['exit']}): "
                                           f"{run['stderr_tail'].strip().splitlines()[-1:] or ''}")
        return res
    pr = doc.get("pr", {})
    findings = doc.get("findings", [])
    touched = set(ops.get("canonical_operators") or [])
    for t in ops.get("touches", []) or pr.get("touched", []):
        touched |= set(t.get("canonical") or _canon(t.get("operator", "")))
    on_op = [f for f in findings if _canon(f.get("operator", "")) & case_ops]
    new = [f for f in findings if f.get("new_in_pr") and not f.get("known")]
    new_on_op = [f for f in new if f in on_op]
    cov = pr.get("coverage") or {}
    rows = _results(out / "results.jsonl")
    directed = pr.get("directed") or {}
    search = directed.get("search") or {}
    res.update(
        frontend=_frontend(case),
        directed={k: directed.get(k) for k in ("goals", "reached", "statements", "statements_reached")}
        | {k: search.get(k) for k in ("reached_by_search", "statements_reached_before", "mutants", "seconds",
                                      "ended")} if directed else None,
        touched_operators=sorted(touched), mapped=bool(touched & case_ops),
        findings=len(findings), new_in_pr=len(new), new_in_pr_on_operator=len(new_on_op),
        on_operator_but_base=sum(1 for f in on_op if not f.get("new_in_pr")),
        new_findings=[{k: f.get(k) for k in ("operator", "target", "symptom", "stage", "oracle", "reaches_change")}
                      for f in new][:6],
        tests_run=(doc.get("stats") or {}).get("tests_run"), instances_selected=pr.get("instances_selected"),
        changed_statements=cov.get("changed_statements"), reached_statements=cov.get("reached_statements"),
        instances_reaching=cov.get("instances_reaching"),
        statuses={s: sum(1 for r in rows if r.get("status") == s and not r.get("confirming"))
                  for s in sorted({r.get("status") for r in rows if r.get("status")})})
    timed_out = run["exit"] == "timeout"
    partial = " (scan killed at --timeout: partial results)" if timed_out else ""
    if case["kind"] == "refactor":
        res["outcome"] = "false_alarm" if new else "timeout" if timed_out else "clean"
        res["reason"] = (f"{len(new)} finding(s) new in PR on a behaviour-preserving change{partial}" if new
                         else f"no finding new in PR{partial}")
        return res
    if new_on_op:
        res["outcome"] = "caught"
        f = new_on_op[0]
        res["reason"] = f"new in PR: {f.get('operator')} via {f.get('target')} ({f.get('symptom')})"
        return res
    res["outcome"] = "missed"
    op_rows = [r for r in rows if not r.get("confirming") and _canon(str(r.get("op", ""))) & case_ops]
    op_status = {s: sum(1 for r in op_rows if r.get("status") == s) for s in sorted({r.get("status") for r in op_rows})}
    res["operator_tests"] = op_status
    valid_on_op = sum(n for s, n in op_status.items() if s not in ("unsupported", "skipped", "invalid"))
    changed, reached = cov.get("changed_statements"), cov.get("reached_statements")
    cov_note = (f"{reached}/{changed} changed statements reached" if changed else
                "no changed statement on head to trace (the change only deletes lines)" if cov else "no coverage")
    if timed_out:
        res["reason"] = f"scan did not finish within --timeout ({res['tests_run']} tests run)"
    elif run["exit"] not in (0, 1):
        res["reason"] = f"scan failed (exit {run['exit']}): {run['stderr_tail'].strip().splitlines()[-1:] or ''}"
    elif not res["mapped"]:
        res["reason"] = (f"operator not mapped by the profile (touched: {', '.join(sorted(touched)) or 'none'}; "
                         f"unmapped changes: {len(ops.get('unmapped') or pr.get('unmapped') or [])})")
    elif pr.get("nothing_to_test"):
        res["reason"] = f"nothing tested: {pr['nothing_to_test']}"
    elif rows and not valid_on_op:
        res["reason"] = (f"no valid test of the operator ran ({len(op_rows)} tests of it: "
                         f"{', '.join(f'{n} {s}' for s, n in op_status.items()) or 'none'})")
    elif changed and not reached:
        res["reason"] = f"no instance reached the changed lines (0/{changed} changed statements ran)"
    elif on_op:
        reach = [f.get("reaches_change") for f in on_op]
        res["reason"] = (f"found but attributed to base ({len(on_op)} finding(s) on the operator, all failing the "
                         f"same way on base; reaching the change: {sum(1 for x in reach if x)}/{len(reach)}; "
                         f"{cov_note})")
    elif new:
        res["reason"] = (f"new finding(s) only on other operators: "
                         f"{', '.join(sorted({str(f.get('operator')) for f in new}))}")
    else:
        res["reason"] = (f"ran but passed ({valid_on_op} valid tests of the operator: "
                         f"{', '.join(f'{n} {s}' for s, n in op_status.items())}; {cov_note})")
    return res


def _frontend(case: dict) -> str:
    """Which frontend a case's files belong to (the issue's per-frontend figures)."""
    files = " ".join(case.get("files") or [])
    if "torch_lib" in files or case.get("package") == "onnxscript":
        return "onnxscript torchlib"
    for key, name in (("frontend/onnx", "TVM ONNX"), ("exported_program", "TVM exported program"),
                      ("fx_translator", "TVM FX"), ("frontend/tflite", "TVM TFLite"), ("frontend/torch", "TVM torch")):
        if key in files:
            return name
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", help="comma-separated case ids (default: all)")
    ap.add_argument("--json", type=Path, default=None, help="write the full results here")
    ap.add_argument("--work", type=Path, default=None, help="keep repositories and scan outputs here")
    ap.add_argument("--budget", type=float, default=None, help="pass --budget to dlci scan (default: dlci's)")
    ap.add_argument("--timeout", type=float, default=1800, help="kill a scan after this many seconds")
    ap.add_argument("--baseline-sources", default=None,
                    help="also scan each case with these --sources (e.g. the defaults of dlci test, without the "
                         "scan's variants), side by side")
    ap.add_argument("--without-directed", action="store_true",
                    help="also scan each case with --no-directed, side by side (caught with and without the directed "
                         "search, in the same run)")
    ap.add_argument("--refresh-groundtruth", action="store_true")
    ap.add_argument("--upstream", default=None, help="the upstream cache folder (default: $DLCI_UPSTREAM, else "
                    "$DLCI_CACHE_DIR/upstream; benchmarks/regressions/materialise.py fetch fills it)")
    ap.add_argument("--no-scan", action="store_true", help="build and check ground truth only")
    ap.add_argument("--resume", type=Path, default=None,
                    help="a previous run's --json file or printed JSON lines: its cases are not run again and count "
                         "in the summary (same dlci and stack assumed)")
    args = ap.parse_args()
    doc = load_cases()
    cases = materialise.cases_for(args.cases.split(",") if args.cases else None, args.upstream)   # in the order given
    previous = {}
    if args.resume:
        text = args.resume.read_text()
        try:
            rows_before = json.loads(text)["cases"]
        except (ValueError, KeyError, TypeError):
            rows_before = [json.loads(line) for line in text.splitlines() if line.startswith('{"case"')]
        previous = {r["case"]: r for r in rows_before}
    work = args.work or Path(tempfile.mkdtemp(prefix="dlci-real-regressions-"))
    work.mkdir(parents=True, exist_ok=True)
    t_all = time.time()
    rows = []
    for case in cases:
        if case["id"] in previous:
            rows.append({**previous[case["id"]], "resumed": True})
            continue
        row = {"case": case["id"], "kind": case["kind"], "commit": case["commit"][:10], "url": case["url"],
               "operators": case["operators"]}
        try:
            repo, base, head = build(case, work / case["id"] / "repo")
            gt = check(case, repo, base, head, refresh=args.refresh_groundtruth)
        except materialise.UpstreamMissing as e:
            raise SystemExit(str(e))
        except (BuildError, StoreError) as e:
            row.update(outcome="skipped", reason=f"not materialised on the installed release: {e}")
            rows.append(row)
            print(json.dumps(row), flush=True)
            continue
        row["ground_truth"] = {"valid": gt["valid"], "reason": gt["reason"], "cached": gt.get("cached"),
                               **{k: {x: gt[k].get(x) for x in ("status", "summary", "failed")}
                                  for k in ("head", "base") if k in gt}}
        if not gt["valid"]:
            row.update(outcome="excluded", reason=gt["reason"])
        elif args.no_scan:
            row.update(outcome="not_scanned", reason="--no-scan")
        else:
            out = work / case["id"] / "scan"
            run = scan(repo, f"pr/{case['id']}", out, args.budget, args.timeout)
            row["scan"] = {k: run[k] for k in ("exit", "wall_seconds", "command")}
            row.update(judge(case, out, run))
            if args.baseline_sources:
                out_b = work / case["id"] / "scan-baseline"
                run_b = scan(repo, f"pr/{case['id']}", out_b, args.budget, args.timeout, args.baseline_sources)
                judged = judge(case, out_b, run_b)
                row["baseline"] = {"sources": args.baseline_sources, "outcome": judged.get("outcome"),
                                   "reason": judged.get("reason"), "wall_seconds": run_b["wall_seconds"]}
            if args.without_directed:
                out_n = work / case["id"] / "scan-no-directed"
                run_n = scan(repo, f"pr/{case['id']}", out_n, args.budget, args.timeout, extra=("--no-directed",))
                judged = judge(case, out_n, run_n)
                row["without_directed"] = {"outcome": judged.get("outcome"), "reason": judged.get("reason"),
                                           "wall_seconds": run_n["wall_seconds"],
                                           "reached_statements": judged.get("reached_statements"),
                                           "changed_statements": judged.get("changed_statements")}
        rows.append(row)
        print(json.dumps(row), flush=True)

    reg = [r for r in rows if r["kind"] == "regression" and r.get("outcome") in ("caught", "missed", "error")]
    ref = [r for r in rows if r["kind"] == "refactor" and r.get("outcome") in ("clean", "false_alarm", "error",
                                                                                "timeout")]
    walls = [r["scan"]["wall_seconds"] for r in rows if "scan" in r]
    summary = {
        "benchmark": "real_regressions", "cpu_count": os.cpu_count(), "budget": args.budget or "dlci default",
        "regressions_valid": len(reg), "caught": sum(r["outcome"] == "caught" for r in reg),
        "catch_rate": round(sum(r["outcome"] == "caught" for r in reg) / len(reg), 3) if reg else None,
        "excluded": [{"case": r["case"], "reason": r["reason"]} for r in rows if r.get("outcome") in
                     ("excluded", "skipped")],
        "refactors": len(ref), "refactor_false_alarms": sum(r.get("new_in_pr", 0) for r in ref),
        "refactors_with_false_alarm": sum(r["outcome"] == "false_alarm" for r in ref),
        "scan_wall_seconds": {"median": round(statistics.median(walls), 1) if walls else None,
                              "max": max(walls) if walls else None, "n": len(walls)},
        "total_seconds": round(time.time() - t_all, 1),
        **({"baseline_sources": args.baseline_sources,
            "baseline_caught": sum((r.get("baseline") or {}).get("outcome") == "caught" for r in reg),
            "baseline_refactors_with_false_alarm": sum((r.get("baseline") or {}).get("outcome") == "false_alarm"
                                                       for r in ref)} if args.baseline_sources else {}),
        "excluded_upstream_fixes": doc.get("excluded", []),
    }
    per_frontend: dict = {}
    for r in reg:
        f = per_frontend.setdefault(r.get("frontend") or "other", {"cases": 0, "caught": 0})
        f["cases"] += 1
        f["caught"] += r["outcome"] == "caught"
        if args.without_directed:
            f["caught_without_directed"] = f.get("caught_without_directed", 0) + (
                (r.get("without_directed") or {}).get("outcome") == "caught")
    summary["per_frontend"] = per_frontend
    if args.without_directed:
        summary["caught_without_directed"] = sum((r.get("without_directed") or {}).get("outcome") == "caught"
                                                 for r in reg)
        summary["refactors_with_false_alarm_without_directed"] = sum(
            (r.get("without_directed") or {}).get("outcome") == "false_alarm" for r in ref)
        walls_n = [r["without_directed"]["wall_seconds"] for r in rows if r.get("without_directed")]
        summary["scan_wall_seconds_without_directed"] = {
            "median": round(statistics.median(walls_n), 1) if walls_n else None, "max": max(walls_n, default=None)}
        summary["changed_statements_reached"] = {
            "with_directed": sum(r.get("reached_statements") or 0 for r in rows if "scan" in r),
            "without_directed": sum((r.get("without_directed") or {}).get("reached_statements") or 0 for r in rows),
            "changed": sum(r.get("changed_statements") or 0 for r in rows if "scan" in r)}
    print()
    print(f"{'case':34} {'kind':10} {'outcome':11} {'wall s':>7}  reason")
    for r in rows:
        wall = r.get("scan", {}).get("wall_seconds", "")
        base = f" [baseline: {r['baseline']['outcome']}]" if r.get("baseline") else ""
        base += f" [without directed: {r['without_directed']['outcome']}]" if r.get("without_directed") else ""
        print(f"{r['case']:34} {r['kind']:10} {r.get('outcome', ''):11} {wall!s:>7}  {r.get('reason', '')[:150]}{base}")
    print()
    print(f"caught {summary['caught']}/{summary['regressions_valid']} regressions "
          f"({(summary['catch_rate'] or 0) * 100:.0f} %); refactors: {summary['refactors_with_false_alarm']}/"
          f"{summary['refactors']} with findings new in PR; scan wall median {summary['scan_wall_seconds']['median']}"
          f" s, max {summary['scan_wall_seconds']['max']} s ({os.cpu_count()} cores); total "
          f"{summary['total_seconds']} s")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "cases": rows}, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "excluded_upstream_fixes"}))


if __name__ == "__main__":
    main()
