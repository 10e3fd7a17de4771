"""Real regressions: upstream fixes reverted as pull requests, and real refactors, scanned by `dlci scan`.

    .venv/bin/python benchmarks/real_regressions.py [--cases ID,...] [--json PATH] [--work DIR] [--upstream DIR]
                                                    [--budget SECONDS] [--refresh-groundtruth] [--no-scan]
                                                    [--arms default,no-divergence,no-repo-tests,no-directed]
                                                    [--caught PATH | --no-ratchet] [--no-suite] [--as-fix]

The corpus is benchmarks/regressions/cases.yaml: real fixes from TVM's Relax frontends (merged before 2025-09-01),
each reverted on the installed apache-tvm's Python sources (a regression PR), and real behaviour-preserving
refactor commits of the same code applied as PRs. For every case the runner
  1. builds the repository (benchmarks/regressions/build.py: the installed sources with the case's files materialised
     from the upstream cache, see benchmarks/regressions/materialise.py; base and head as recorded), and, unless
     --no-suite, commits the repository's own frontend test suite as it stood at the fix's parent under the PR
     (benchmarks/regressions/suite.py: the independent check scans repositories with their tests);
  2. checks the ground truth (benchmarks/regressions/groundtruth.py, cached): the fix's own upstream test fails on
     head and passes on base, or the case is excluded with the reason;
  3. runs `python -m dlci scan --repo R --base main --head pr/<case> --fail-on never` with dlci's defaults (no
     --budget unless given here), in a fresh process, timing its wall clock;
  4. reads the scan's documented outputs (ops.json, findings.json, report.md; results.jsonl for counts) and says
     whether the regression was caught (a finding new in the PR whose operator is one of the case's operators or a
     canonical equivalent) or missed, with the reason; for a refactor, the findings new in the PR are false alarms.
  5. with --arms, scans each case again in the other configurations, side by side (`no-divergence`: `dlci scan
     --no-divergence`; `no-repo-tests`: `--no-repo-tests`, skipped with a note where `dlci scan --help` does not list
     it; `no-directed`: `--no-directed`, as --without-directed), and sums each arm per frontend family (TVM onnx, TVM
     torch, onnxscript torchlib): caught, changed statements reached, divergences per minute, scan walls, refactors
     with a finding new in the PR.
  6. with --as-fix, scans each case the other way round instead of 3-5: base pr/<case>, head fix/<case> (main's tree
     on top of it, build.fix_branch), i.e. the upstream fix itself as the pull request (the ratchet is off: no
     regression is judged). A fix is shown as fixed when the report's `pr.fixed` names one of the case's operators; any
     finding new in that PR is counted (a fix PR scanned as it is: a "new in this PR" there is a false alarm unless
     the fix itself breaks something, which the row's findings let a reader judge).
Prints one JSON line per case, then a table, the per-family table and the summary; --json writes everything to a
file. The upstream cache (the upstream repositories the cases' files are materialised from) must be there first:
without it the script exits saying how to get it (benchmarks/regressions/materialise.py fetch).

The ratchet: benchmarks/results/caught.json (--caught) holds every case the default arm has caught, with the dlci
commit and date it was first caught. A case of the file that this run selected and did not catch is a drop: a line
`RATCHET: ... dropped` names it and the exit status is 1. A case this run did not select (--cases) is not a drop;
with --no-scan the ratchet is off. A case caught for the first time is added to the file (written by the run).
"""
from __future__ import annotations

import sys
from pathlib import Path

# this script's folder must not shadow the standard library (benchmarks/bisect.py would stand in for `bisect`)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "regressions"))

from build import BuildError, build, fix_branch, load_cases  # noqa: E402
from groundtruth import check  # noqa: E402
import materialise  # noqa: E402
from store import StoreError  # noqa: E402
import suite  # noqa: E402


CAUGHT = ROOT / "benchmarks" / "results" / "caught.json"
# the configurations one run can scan each case in: arm -> the `dlci scan` flags (the default arm has none)
ARMS = {"default": (), "no-divergence": ("--no-divergence",), "no-repo-tests": ("--no-repo-tests",),
        "no-directed": ("--no-directed",)}
FAMILIES = ("TVM onnx", "TVM torch", "onnxscript torchlib")
CAUGHT_ABOUT = ("The ratchet of benchmarks/real_regressions.py: every case its default arm has caught (a finding new in "
                "the PR on one of the case's operators), with the dlci commit and date it was first caught and the "
                "result file. A run that selects one of these cases and does not catch it fails (exit 1). Written "
                "by the benchmark when it catches a case for the first time; seeded from benchmarks/results/"
                "real_regressions*.json.")


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
         sources: str | None = None, extra: tuple[str, ...] = (), base_ref: str = "main") -> dict:
    cmd = [sys.executable, "-m", "dlci", "scan", "--repo", str(repo), "--base", base_ref, "--head", head_ref,
           "--out", str(out), "--fail-on", "never", *extra]
    if budget:
        cmd += ["--budget", str(budget)]
    if sources:
        cmd += ["--sources", sources]
    t0 = time.time()
    # the scan's progress, each line stamped with the seconds since it started, kept beside its output
    # (OUT.log): where a scan's wall went
    lines: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            for line in proc.stderr:
                lines.append(f"{time.time() - t0:7.1f} {line.rstrip()}")
        finally:
            timer.cancel()
        rc = proc.wait()
        if rc < 0 and time.time() - t0 >= timeout:
            rc = "timeout"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_name(out.name + ".log").write_text("\n".join(lines) + "\n")
    err = "\n".join(line[8:] for line in lines)[-3000:]
    return {"exit": rc, "wall_seconds": round(time.time() - t0, 1), "stderr_tail": err, "command": " ".join(cmd)}


def _reproducer_checks(new: list[dict]) -> dict:
    """Of the new findings' reproducers: how many were checked failing alone on head, passing on base, and how many
    were left unchecked on either (the budget)."""
    return {"new": len(new),
            "fail_on_head": sum(f.get("repro_checked") is True for f in new),
            "pass_on_base": sum(f.get("repro_passes_on_base") is True for f in new),
            "fail_on_base": sum(f.get("repro_passes_on_base") is False for f in new),
            "unchecked_on_head": sum(f.get("repro_checked") is None for f in new),
            "unchecked_on_base": sum(f.get("repro_passes_on_base") is None for f in new)}


def _new_in_pr(doc: dict) -> list[dict]:
    """the report's findings new in the PR (a known one is no verdict)"""
    return [f for f in doc.get("findings", []) if f.get("new_in_pr") and not f.get("known")]


def _brief(findings: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """the first six findings, each by these fields and its source"""
    return [{k: f.get(k) for k in keys} | {"source": (f.get("origin") or {}).get("source")} for f in findings][:6]


def _failed(run: dict) -> str:
    return f"scan failed (exit {run['exit']}): {run['stderr_tail'].strip().splitlines()[-1:] or ''}"


def _walls(walls: list) -> dict:
    return {"median": _median(walls), "max": max(walls, default=None)}


def _in_family_order(out: dict) -> dict:
    order = {f: i for i, f in enumerate(FAMILIES)}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))


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
    new = _new_in_pr(doc)
    new_on_op = [f for f in new if f in on_op]
    cov = pr.get("coverage") or {}
    rows = _results(out / "results.jsonl")
    directed = pr.get("directed") or {}
    search = directed.get("search") or {}
    div = search.get("divergence") or {}
    res.update(
        frontend=_frontend(case), family=family(case),
        directed={k: directed.get(k) for k in ("goals", "reached", "statements", "statements_reached")}
        | {k: search.get(k) for k in ("reached_by_search", "statements_reached_before", "mutants", "seconds",
                                      "ended")} if directed else None,
        touched_operators=sorted(touched), mapped=bool(touched & case_ops),
        findings=len(findings), new_in_pr=len(new), new_in_pr_on_operator=len(new_on_op),
        on_operator_but_base=sum(1 for f in on_op if not f.get("new_in_pr")),
        # failing on base too, otherwise: "changed by this PR", not new (counted apart, never as caught)
        changed_on_operator=sum(1 for f in on_op if not f.get("new_in_pr") and (f.get("base") or {}).get("changed")),
        new_findings=_brief(new, ("operator", "target", "symptom", "stage", "oracle", "reaches_change",
                                  "repro_checked", "repro_passes_on_base")),
        # what the seeds from the repository's own tests gave (unless --no-suite the case repository has tests to read)
        repo_tests=_repo_tests_summary(pr.get("repo_tests")),
        # the check the issue names: each new finding's reproducer fails on head and passes on base (None: not run)
        reproducers=_reproducer_checks(new),
        tests_run=(doc.get("stats") or {}).get("tests_run"), instances_selected=pr.get("instances_selected"),
        changed_statements=cov.get("changed_statements"), reached_statements=cov.get("reached_statements"),
        instances_reaching=cov.get("instances_reaching"),
        divergence={"per_minute": div.get("per_minute"), "diverged": sum((div.get("diverged") or {}).values()),
                    "paired": div.get("paired"), "search_seconds": search.get("seconds")} if div else None,
        statuses={s: sum(1 for r in rows if r.get("status") == s and not r.get("confirming"))
                  for s in sorted({r.get("status") for r in rows if r.get("status")})})
    timed_out = run["exit"] == "timeout"
    partial = " (scan killed at --timeout: partial results)" if timed_out else ""
    if run["exit"] not in (0, 1, "timeout"):
        # dlci itself failed (an internal error, a signal): what it wrote before is no verdict a maintainer gets, and
        # a refactor whose scan died is not "clean"
        res["outcome"] = "error"
        res["reason"] = _failed(run)
        return res
    if case["kind"] == "refactor":
        # a change judged by hand to alter behaviour (cases.yaml `behaviour_change`): findings on its operators are
        # the scan right, not a false alarm; any other finding still is one
        changed = set().union(*(_canon(o) for o in (case.get("behaviour_change") or {}).get("operators", [])))
        if new and changed and all(_canon(f.get("operator", "")) & changed for f in new):
            res["outcome"] = "behaviour_change"
            res["reason"] = (f"{len(new)} finding(s) new in PR, on the operators whose behaviour the change altered "
                             f"(checked by hand: {case['behaviour_change'].get('why', '')}){partial}")
            return res
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


def judge_fix(case: dict, out: Path, run: dict) -> dict:
    """The case the other way round (the upstream fix as the pull request): is it shown as fixed on the case's
    operators, and what does the report call new in the PR?"""
    case_ops = set().union(*(_canon(o) for o in case["operators"]))
    doc = _load(out / "findings.json")
    res: dict = {"wall_seconds": run["wall_seconds"], "exit": run["exit"]}
    if doc is None or run["exit"] not in (0, 1):
        return res | {"outcome": "error", "reason": _failed(run)}
    fixed = (doc.get("pr") or {}).get("fixed") or []
    on_op = [f for f in fixed if _canon(f.get("operator", "")) & case_ops]
    new = _new_in_pr(doc)
    res.update(fixed=len(fixed), fixed_on_operator=len(on_op),
               fixed_entries=[{k: f.get(k) for k in ("operator", "target", "symptom", "status_on_base")}
                              for f in fixed][:6],
               new_in_pr=len(new),
               changed_in_pr=sum(1 for f in doc.get("findings", []) if f.get("new_in_pr") is False
                                 and (f.get("base") or {}).get("changed")),
               new_findings=_brief(new, ("operator", "target", "symptom", "oracle", "repro_checked",
                                         "repro_passes_on_base")))
    if case["kind"] == "refactor":
        res["outcome"] = "false_alarm" if new else "clean"
        res["reason"] = f"{len(new)} finding(s) new in PR on the reversed refactor" if new else "no finding new in PR"
    elif on_op:
        f = on_op[0]
        res["outcome"] = "shown_fixed"
        res["reason"] = f"fixed in PR: {f.get('operator')} via {f.get('target')} ({f.get('symptom')} on base)"
    else:
        res["outcome"] = "not_shown"
        res["reason"] = (f"fixed only on other operators: {', '.join(sorted({str(f.get('operator')) for f in fixed}))}"
                         if fixed else "nothing shown as fixed")
    return res


def as_fix_summary(rows: list[dict]) -> dict:
    """per family: regressions whose fix, scanned as the PR, is shown fixed on the case's operator; fix PRs (and
    reversed refactors) with a finding new in the PR"""
    out: dict = {}
    for r in rows:
        a = r.get("as_fix")
        if not a or a.get("outcome") is None:
            continue
        s = out.setdefault(r.get("family") or "other", {"fixes": 0, "shown_fixed": 0, "fixes_with_new_in_pr": 0,
                                                        "fixes_with_changed_in_pr": 0, "refactors": 0,
                                                        "refactors_with_new_in_pr": 0, "errors": 0, "_walls": []})
        if a["outcome"] == "error":
            s["errors"] += 1
        elif r["kind"] == "regression":
            s["fixes"] += 1
            s["shown_fixed"] += a["outcome"] == "shown_fixed"
            s["fixes_with_new_in_pr"] += bool(a.get("new_in_pr"))
            s["fixes_with_changed_in_pr"] += bool(a.get("changed_in_pr"))
        else:
            s["refactors"] += 1
            s["refactors_with_new_in_pr"] += bool(a.get("new_in_pr"))
        s["_walls"].append(a["wall_seconds"])
    for s in out.values():
        s["scan_wall_seconds"] = _walls(s.pop("_walls"))
    return _in_family_order(out)


def _repo_tests_summary(rt: dict | None) -> dict | None:
    if not rt:
        return None
    py = rt.get("pytest") or {}
    return {"files": len(rt.get("files") or []), "chosen": len((rt.get("tests") or {}).get("chosen") or []),
            "opinfo_kept": sum(o.get("kept", 0) for o in rt.get("opinfo") or []), "records": py.get("records"),
            "dropped": py.get("dropped"), "instances": rt.get("instances"), "routed": rt.get("routed"),
            "operators": rt.get("operators"), "seconds": rt.get("seconds")}


def family(case: dict) -> str:
    """The frontend family of a case (the per-family figures): TVM onnx, TVM torch (exported program and FX),
    onnxscript torchlib (or TVM tflite / other)."""
    f = _frontend(case)
    return {"TVM ONNX": "TVM onnx", "TVM exported program": "TVM torch", "TVM FX": "TVM torch",
            "TVM torch": "TVM torch", "TVM TFLite": "TVM tflite"}.get(f, f)


def scan_flags() -> str:
    """`dlci scan --help`, to see which arms' flags this dlci has"""
    try:
        return subprocess.run([sys.executable, "-m", "dlci", "scan", "--help"], capture_output=True, text=True,
                              timeout=300, cwd=ROOT).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def available_arms(arms: list[str], helptext: str) -> tuple[list[str], dict[str, str]]:
    """(the arms this dlci can run, {arm: why not} for those whose flag `dlci scan --help` does not list)"""
    skipped = {}
    for a in arms:
        missing = [f for f in ARMS[a] if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", helptext)]
        if missing:
            skipped[a] = f"`dlci scan --help` does not list {', '.join(missing)}: arm {a} not run"
    return [a for a in arms if a not in skipped], skipped


def arm_row(judged: dict, run: dict) -> dict:
    """what the summary needs of one arm's scan of a case"""
    return {"outcome": judged.get("outcome"), "reason": judged.get("reason"), "exit": run["exit"],
            "wall_seconds": run["wall_seconds"], "new_in_pr": judged.get("new_in_pr"),
            "changed_statements": judged.get("changed_statements"),
            "reached_statements": judged.get("reached_statements"),
            "directed": {k: (judged.get("directed") or {}).get(k) for k in ("statements", "statements_reached",
                                                                             "goals", "reached")}
            if judged.get("directed") else None,
            "divergence": judged.get("divergence")}


def _median(xs: list) -> float | None:
    return round(statistics.median(xs), 1) if xs else None


def arms_summary(rows: list[dict], arms: list[str]) -> dict:
    """per family, per arm: regressions caught, changed statements reached (coverage, and the directed goals'
    statements), divergences per minute, scan walls, refactors with a finding new in the PR"""
    out: dict = {}
    for r in rows:
        fam = r.get("family") or "other"
        for arm in arms:
            a = (r.get("arms") or {}).get(arm)
            if a is None and arm == "no-directed":
                a = r.get("without_directed")   # a row of an older run (--resume)
            if a is None and arm == "default" and "scan" in r:
                a = {"outcome": r.get("outcome"), "wall_seconds": r["scan"]["wall_seconds"],
                     "changed_statements": r.get("changed_statements"),
                     "reached_statements": r.get("reached_statements"), "directed": r.get("directed"),
                     "divergence": r.get("divergence"), "new_in_pr": r.get("new_in_pr")}
            if a is None:
                continue
            s = out.setdefault(fam, {}).setdefault(arm, {
                "regressions": 0, "caught": 0, "refactors": 0, "refactors_with_new_finding": 0,
                "changed_statements": 0, "changed_statements_reached": 0, "directed_statements": 0,
                "directed_statements_reached": 0, "_walls": [], "_per_minute": [], "_diverged": 0, "_minutes": 0.0})
            if r["kind"] == "regression" and a.get("outcome") in ("caught", "missed", "error"):
                s["regressions"] += 1
                s["caught"] += a["outcome"] == "caught"
            elif r["kind"] == "refactor" and a.get("outcome") in ("clean", "false_alarm", "error", "timeout",
                                                                  "behaviour_change"):
                s["refactors"] += 1
                s["refactors_with_new_finding"] += a["outcome"] == "false_alarm"
            else:
                continue
            s["changed_statements"] += a.get("changed_statements") or 0
            s["changed_statements_reached"] += a.get("reached_statements") or 0
            d = a.get("directed") or {}
            s["directed_statements"] += d.get("statements") or 0
            s["directed_statements_reached"] += d.get("statements_reached") or 0
            if a.get("wall_seconds") is not None:
                s["_walls"].append(a["wall_seconds"])
            div = a.get("divergence") or {}
            if div.get("per_minute") is not None:
                s["_per_minute"].append(div["per_minute"])
                s["_diverged"] += div.get("diverged") or 0
                s["_minutes"] += (div.get("search_seconds") or 0) / 60
    for fam in out.values():
        for s in fam.values():
            walls, pm = s.pop("_walls"), s.pop("_per_minute")
            diverged, minutes = s.pop("_diverged"), s.pop("_minutes")
            s["scan_wall_seconds"] = _walls(walls) | {"n": len(walls)}
            s["divergences_per_minute"] = {"median": round(statistics.median(pm), 2) if pm else None,
                                           "pooled": round(diverged / minutes, 2) if minutes else None,
                                           "cases": len(pm)}
    return _in_family_order(out)


def _git_head() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, timeout=30).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def load_caught(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {"about": "", "cases": {}}
    doc.setdefault("cases", {})
    return doc


def ratchet(rows: list[dict], caught: dict, dlci_commit: str, source: str | None) -> tuple[list[dict], list[str]]:
    """(drops, newly caught): a case caught before (caught.json) that this run selected and did not catch is a drop
    (whatever the reason: missed, error, ground truth no longer holding, not materialised); a case not in this run
    is not; a case caught now and not before is added to `caught` (in place)"""
    drops, new = [], []
    for r in rows:
        before = caught["cases"].get(r["case"])
        if r.get("outcome") == "caught":
            if before is None:
                caught["cases"][r["case"]] = {
                    "dlci_commit": r.get("dlci_commit") or ("unknown (a resumed row)" if r.get("resumed")
                                                            else dlci_commit),
                    "date": r.get("date") or dt.datetime.now(dt.timezone.utc).date().isoformat(),
                    "result": source, "reason": r.get("reason")}
                new.append(r["case"])
        elif before is not None and r.get("outcome") not in ("not_scanned",):
            drops.append({"case": r["case"], "outcome": r.get("outcome"), "reason": r.get("reason"),
                          "first_caught": before})
    caught["cases"] = dict(sorted(caught["cases"].items()))
    return drops, new


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
                         "search, in the same run); the same as adding no-directed to --arms")
    ap.add_argument("--arms", default="default",
                    help=f"comma-separated configurations to scan each case in, side by side ({', '.join(ARMS)}); "
                         "the default arm always runs; an arm whose flag `dlci scan --help` does not list is skipped "
                         "with a note")
    ap.add_argument("--caught", type=Path, default=CAUGHT,
                    help="the ratchet's record of the cases caught before (default: benchmarks/results/caught.json)")
    ap.add_argument("--no-ratchet", action="store_true", help="neither check nor update the caught record")
    ap.add_argument("--refresh-groundtruth", action="store_true")
    ap.add_argument("--upstream", default=None, help="the upstream cache folder (default: $DLCI_UPSTREAM, else "
                    "$DLCI_CACHE_DIR/upstream; benchmarks/regressions/materialise.py fetch fills it)")
    ap.add_argument("--no-scan", action="store_true", help="build and check ground truth only")
    ap.add_argument("--no-suite", dest="suite", action="store_false",
                    help="the case repositories without their own frontend test suite (by default each holds it as "
                         "it stood at the fix's parent, on both revisions: benchmarks/regressions/suite.py)")
    ap.add_argument("--as-fix", action="store_true",
                    help="scan each case the other way round instead (base pr/<case>, head fix/<case>: the upstream fix as "
                         "the pull request): is it shown as fixed, and is anything called new in it? (no ratchet: "
                         "nothing is judged as a regression)")
    ap.add_argument("--resume", type=Path, default=None,
                    help="a previous run's --json file or printed JSON lines: its cases are not run again and count "
                         "in the summary (same dlci and stack assumed)")
    args = ap.parse_args()
    arms = ["default"] + [a for a in dict.fromkeys(x.strip() for x in args.arms.split(",")) if a and a != "default"]
    if args.without_directed and "no-directed" not in arms:
        arms.append("no-directed")
    bad = [a for a in arms if a not in ARMS]
    if bad:
        ap.error(f"--arms: unknown {', '.join(bad)} (known: {', '.join(ARMS)})")
    arms_skipped = {}
    if len(arms) > 1 and not args.no_scan:
        arms, arms_skipped = available_arms(arms, scan_flags())
        for why in arms_skipped.values():
            print(f"note: {why}", file=sys.stderr, flush=True)
    dlci_commit = _git_head()
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
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
            rows.append({"family": family(case), **previous[case["id"]], "resumed": True})
            continue
        row = {"case": case["id"], "kind": case["kind"], "commit": case["commit"][:10], "url": case["url"],
               "operators": case["operators"], "family": family(case), "dlci_commit": dlci_commit, "date": today}
        try:
            repo, base, head = build(case, work / case["id"] / "repo")
            gt = check(case, repo, base, head, refresh=args.refresh_groundtruth)
            if args.suite and gt["valid"] and not args.no_scan:   # after the ground truth: its cache keys the sources
                base, head, row["suite"] = suite.add(case, repo)
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
        elif args.as_fix:
            out_f = work / case["id"] / "scan-as-fix"
            run_f = scan(repo, fix_branch(repo, case["id"]), out_f, args.budget, args.timeout,
                         base_ref=f"pr/{case['id']}")
            row["as_fix"] = judge_fix(case, out_f, run_f) | {"command": run_f["command"]}
            row.update(outcome="as_fix", reason=row["as_fix"]["reason"])
        else:
            out = work / case["id"] / "scan"
            run = scan(repo, f"pr/{case['id']}", out, args.budget, args.timeout)
            row["scan"] = {k: run[k] for k in ("exit", "wall_seconds", "command")}
            judged = judge(case, out, run)
            row.update(judged)
            row["arms"] = {"default": arm_row(judged, run)}
            for arm in arms[1:]:
                if arm == "no-directed" and args.without_directed:
                    continue   # below, as before
                out_a = work / case["id"] / f"scan-{arm}"
                run_a = scan(repo, f"pr/{case['id']}", out_a, args.budget, args.timeout, extra=ARMS[arm])
                row["arms"][arm] = arm_row(judge(case, out_a, run_a), run_a)
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
                row["arms"]["no-directed"] = arm_row(judged, run_n)
        rows.append(row)
        print(json.dumps(row), flush=True)

    reg = [r for r in rows if r["kind"] == "regression" and r.get("outcome") in ("caught", "missed", "error")]
    ref = [r for r in rows if r["kind"] == "refactor" and r.get("outcome") in ("clean", "false_alarm", "error",
                                                                                "timeout", "behaviour_change")]
    walls = [r["scan"]["wall_seconds"] for r in rows if "scan" in r]
    summary = {
        "benchmark": "real_regressions", "cpu_count": os.cpu_count(), "budget": args.budget or "dlci default",
        "dlci_commit": dlci_commit, "arms": arms, "suite": args.suite,
        **({"arms_skipped": arms_skipped} if arms_skipped else {}),
        "regressions_valid": len(reg), "caught": sum(r["outcome"] == "caught" for r in reg),
        "catch_rate": round(sum(r["outcome"] == "caught" for r in reg) / len(reg), 3) if reg else None,
        "excluded": [{"case": r["case"], "reason": r["reason"]} for r in rows if r.get("outcome") in
                     ("excluded", "skipped")],
        "refactors": len(ref),
        "refactor_false_alarms": sum(r.get("new_in_pr", 0) for r in ref if r["outcome"] == "false_alarm"),
        "refactors_with_false_alarm": sum(r["outcome"] == "false_alarm" for r in ref),
        "refactors_with_behaviour_change": sum(r["outcome"] == "behaviour_change" for r in ref),
        "scan_wall_seconds": {"median": round(statistics.median(walls), 1) if walls else None,
                              "max": max(walls) if walls else None, "n": len(walls)},
        "total_seconds": round(time.time() - t_all, 1),
        "reproducers_of_new_findings": {k: sum((r.get("reproducers") or {}).get(k, 0) for r in rows)
                                        for k in ("new", "fail_on_head", "pass_on_base", "fail_on_base",
                                                  "unchecked_on_head", "unchecked_on_base")},
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
    summary["per_family"] = arms_summary(rows, arms)
    if args.as_fix:
        summary["as_fix"] = as_fix_summary(rows)
    drops, newly = [], []
    ratchet_on = not (args.no_ratchet or args.no_scan or args.as_fix)   # neither judges a regression
    if ratchet_on:
        caught = load_caught(args.caught)
        drops, newly = ratchet(rows, caught, dlci_commit, str(args.json) if args.json else None)
        summary["ratchet"] = {"record": str(args.caught), "caught_before": len(caught["cases"]) - len(newly),
                              "caught_before_in_run": sum(1 for r in rows if r["case"] in caught["cases"]
                                                          and r["case"] not in newly),
                              "dropped": drops, "newly_caught": newly}
        if newly:
            caught["about"] = caught.get("about") or CAUGHT_ABOUT
            args.caught.parent.mkdir(parents=True, exist_ok=True)
            args.caught.write_text(json.dumps(caught, indent=1) + "\n")
    print()
    print(f"{'case':34} {'kind':10} {'outcome':11} {'wall s':>7}  reason")
    for r in rows:
        wall = r.get("scan", {}).get("wall_seconds", "")
        base = f" [baseline: {r['baseline']['outcome']}]" if r.get("baseline") else ""
        base += f" [without directed: {r['without_directed']['outcome']}]" if r.get("without_directed") else ""
        base += f" [as fix: {r['as_fix']['outcome']}, {r['as_fix'].get('new_in_pr', 0)} new]" if r.get("as_fix") else ""
        print(f"{r['case']:34} {r['kind']:10} {r.get('outcome', ''):11} {wall!s:>7}  {r.get('reason', '')[:150]}{base}")
    print()
    if not args.as_fix:  # nothing was judged as a regression
        print(f"caught {summary['caught']}/{summary['regressions_valid']} regressions "
              f"({(summary['catch_rate'] or 0) * 100:.0f} %); refactors: {summary['refactors_with_false_alarm']}/"
              f"{summary['refactors']} with findings new in PR; scan wall median "
              f"{summary['scan_wall_seconds']['median']} s, max {summary['scan_wall_seconds']['max']} s "
              f"({os.cpu_count()} cores); total {summary['total_seconds']} s")
        rc = summary["reproducers_of_new_findings"]
        print(f"reproducers of {rc['new']} new findings: {rc['fail_on_head']} fail alone on head "
              f"({rc['unchecked_on_head']} unchecked), {rc['pass_on_base']} pass on base "
              f"({rc['fail_on_base']} fail there, {rc['unchecked_on_base']} unchecked)")
        print_arms(summary["per_family"], arms, arms_skipped)
    for fam, s in (summary.get("as_fix") or {}).items():
        print(f"as fix: {fam:20} shown fixed {s['shown_fixed']}/{s['fixes']}, fix PRs with a finding new in the PR "
              f"{s['fixes_with_new_in_pr']}/{s['fixes']} (with one changed by it {s['fixes_with_changed_in_pr']}), "
              f"reversed refactors with a new one {s['refactors_with_new_in_pr']}/"
              f"{s['refactors']}, errors {s['errors']}; wall median {s['scan_wall_seconds']['median']} s, max "
              f"{s['scan_wall_seconds']['max']} s")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "cases": rows}, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "excluded_upstream_fixes"}))
    if ratchet_on:
        for c in newly:
            print(f"RATCHET: {c} caught for the first time: added to {args.caught}")
        for d in drops:
            first = d["first_caught"]
            print(f"RATCHET: {d['case']} dropped: caught before (first at dlci {first.get('dlci_commit')}, "
                  f"{first.get('date')}), {d['outcome']} now: {(d.get('reason') or '')[:200]}")
        if drops:
            print(f"RATCHET FAILED: {len(drops)} case(s) caught before and not caught now: "
                  f"{', '.join(d['case'] for d in drops)}")
            sys.exit(1)
        print(f"ratchet: OK ({summary['ratchet']['caught_before_in_run']} case(s) caught before were in this run, "
              f"none dropped)")


def print_arms(per_family: dict, arms: list[str], skipped: dict) -> None:
    print()
    print(f"{'family':20} {'arm':14} {'caught':>9} {'reached/changed':>16} {'directed':>9} {'div/min':>8} "
          f"{'wall med':>8} {'wall max':>8} {'refactors w/ new':>16}")
    for fam, per_arm in per_family.items():
        for arm in arms:
            s = per_arm.get(arm)
            if not s:
                continue
            dpm = s["divergences_per_minute"]["median"]
            print(f"{fam:20} {arm:14} {s['caught']:>4}/{s['regressions']:<4} "
                  f"{s['changed_statements_reached']:>7}/{s['changed_statements']:<8} "
                  f"{s['directed_statements_reached']:>4}/{s['directed_statements']:<4} "
                  f"{'-' if dpm is None else dpm:>8} {s['scan_wall_seconds']['median'] or '-':>8} "
                  f"{s['scan_wall_seconds']['max'] or '-':>8} "
                  f"{s['refactors_with_new_finding']:>7}/{s['refactors']:<8}")
    for arm, why in skipped.items():
        print(f"{'':20} {arm:14} skipped: {why}")


if __name__ == "__main__":
    main()
