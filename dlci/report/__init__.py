"""report.md: a run's findings document (dlci.report.document.Report, the findings.json contract) for people."""
from __future__ import annotations

from pathlib import Path

from dlci.findings import attribution


def verdict(doc: dict) -> str:
    known = sum(1 for f in doc["findings"] if attribution(f) == "known")
    n = len(doc["findings"]) - known
    st = doc["stats"]
    tail = " (interrupted: partial results)" if st.get("interrupted") else ""
    tail = (f" ({known} more match known issues)" if known else "") + tail
    if n == 0 and not st.get("tests_run") and st.get("targets_not_on_runner"):
        return (f"Nothing ran on this runner: {', '.join(st['targets_not_on_runner'])} need a device it does not "
                f"have{tail}.")
    if n == 0:
        return f"No confirmed findings in {st['tests_valid']} valid tests{tail}."
    return f"{n} confirmed finding{'s' if n != 1 else ''} in {st['tests_valid']} valid tests{tail}."


def _new_in_pr(f: dict) -> str:
    if f.get("new_in_pr") is None:
        return "n/a"
    base = f.get("base") or {}
    if not f["new_in_pr"]:
        return "no: the same failure is already on the base revision"
    status, symptom = base.get("status", "?"), base.get("symptom")
    if status == "pass":
        return "**yes** (the same instances pass on the base revision)"
    if symptom == f.get("symptom") and status == f.get("oracle"):
        return f"**yes** (on base the same instances fail otherwise: {symptom}, with other values)"
    return f"**yes** (on base the same instances fail otherwise: {status}" + (f", {symptom})" if symptom else ")")


_GROUPS = (("new", "New in this PR"), ("on_base", "Already on the base revision"), ("known", "Known issues"),
           ("unattributed", "Not attributed"))


def _release_groups(against: dict) -> tuple:
    return (("new", f"New in {against['package']} {against['installed']}"),
            ("on_base", f"Already in {against['package']} {against['version']}"), ("known", "Known issues"),
            ("unattributed", "Not compared"))


def _new_in_release(f: dict) -> str:
    a = f.get("against") or {}
    if f.get("new_in_release") is None:
        return f"not compared ({a.get('note') or a.get('status') or 'no re-run'})"
    older = f"{a.get('package')} {a.get('version')}"
    if not f["new_in_release"]:
        text = f"no: the same failure in {older}"
    elif a.get("status") == "pass":
        text = f"**yes** (the same instances pass on {older})"
    else:
        text = f"**yes** (on {older} the same instances fail otherwise: {a.get('status')}" + (
            f", {a['symptom']})" if a.get("symptom") else ")")
    rep = a.get("reproducer")
    if rep:
        said = {"good": "passes", "bad": "reproduces"}.get(rep["verdict"], f"neither ({rep.get('reason')})")
        text += f"; its reproducer under {a.get('version')}: {said} (`{rep['command']}`)"
    return text


def _bisected(f: dict) -> list[str]:
    """Since when: the PR's commit that introduced the finding, the release that did (dlci.bisect.attribution)."""
    lines = []
    if f.get("introduced_by"):
        lines.append(f"- introduced by commit: {f['introduced_by']['report']}")
    if f.get("since"):
        lines.append(f"- since release: {f['since']['report']}")
    return lines


def _findings_table(findings: list, pr: bool, groups: tuple = _GROUPS) -> list[str]:
    """One table of findings; in PR mode (and against an older release) one per attribution, new ones first, so none
    hides among old ones."""
    header = ["| id | oracle | operator | target | stage | symptom | instances | reproducer |",
              "|---|---|---|---|---|---|---|---|"]

    def row(f):
        return (f"| {f['id']} | {f['oracle']} | `{f['operator']}` | {f['target']} {f['target_version']} | "
                f"{f['stage']} | {f['symptom']} | {len(f['instances'])} | `{f['repro']}` |")
    if not pr:
        return header + [row(f) for f in findings] + [""]
    lines = []
    for key, title in groups:
        group = [f for f in findings if attribution(f) == key]
        if group:
            lines += [f"### {title} ({len(group)})", "", *header, *(row(f) for f in group), ""]
    return lines


def _pr_section(pr: dict, findings: list) -> list[str]:
    """What the diff touched and why, base attribution, and the changed lines no test reached."""
    lines = [f"## Pull request {pr['base'][:12]}..{pr['head'][:12]}", ""]
    if pr.get("nothing_to_test"):
        lines += [f"**Nothing to test:** {pr['nothing_to_test']}.", ""]
    new = sum(1 for f in findings if attribution(f) == "new")
    old = sum(1 for f in findings if attribution(f) == "on_base")
    if findings:
        lines += [f"{new} finding(s) new in this PR, {old} already on the base revision.", ""]
    touched = pr.get("touched") or []
    if touched:
        lines += [f"Profiles: {', '.join(pr.get('profiles') or [])}. Touched operators "
                  f"({len({t['operator'] for t in touched})}):", "",
                  "| operator | converter | selected by | why | targets |", "|---|---|---|---|---|"]
        for t in touched[:100]:
            lines.append(f"| `{t['operator']}` | `{t['converter'][:60]}` | `{t['file']}:{t['line']}` | {t['why']} | "
                         f"{', '.join(t['targets']) or '-'} |")
        if len(touched) > 100:
            lines.append(f"| … {len(touched) - 100} more in ops.json | | | | |")
        lines.append("")
    bisect = pr.get("bisect") or {}
    if bisect.get("lines") or bisect.get("error"):
        lines += [f"Bisection (`.dlci.yml` bisect: {', '.join(bisect.get('asked') or ['commits'])}; "
                  f"{bisect.get('seconds', 0):.0f} s of {bisect.get('budget_s', 0):.0f} s):", ""]
        lines += [f"- {line}" for line in bisect.get("lines") or []]
        lines += [f"- failed: {bisect['error']}"] if bisect.get("error") else []
        lines.append("")
    cov = pr.get("coverage") or {}
    if cov.get("changed_statements"):
        lines += [f"Changed converter statements run by the tests: {cov['reached_statements']} of "
                  f"{cov['changed_statements']} ({cov['instances_reaching']} instances reached them)."]
        if cov.get("unreached"):
            lines += ["", "**Test gap** — changed lines no instance reached:", ""]
            lines += [f"- `{g['file']}:{g['line']}` ({g['region'] or 'module level'})" for g in cov["unreached"][:30]]
        lines.append("")
    fz = pr.get("fuzz")
    if fz:
        lines += [f"Graph fuzzing share ({fz['share']:.0%} of the testing budget, {', '.join(fz['targets'])}): "
                  f"{fz['why']}."]
        if pr.get("fuzz_already_on_base"):
            lines += [f"It also met {len(pr['fuzz_already_on_base'])} failure(s) the base revision shows the same "
                      "way (not the PR's, not listed): " + ", ".join(f"`{f['operator']}` on {f['target']}"
                                                                     for f in pr["fuzz_already_on_base"][:10]) + "."]
        lines.append("")
    if pr.get("graph_level"):
        lines += ["Graph-level code changed (tested with generated multi-operator graphs):", ""]
        lines += [f"- `{g['file']}:{g['line']}` — {g['why']}" for g in pr["graph_level"][:20]]
        lines.append("")
    if pr.get("unmapped"):
        lines += ["Changed code that maps to no operator:", ""]
        lines += [f"- `{u['file']}:{u['line']}` {u.get('region') or ''} — {u['why']}" for u in pr["unmapped"][:30]]
        lines.append("")
    hint = pr.get("head_run")
    if hint and findings:
        checkout, env = hint if isinstance(hint, list) else ("", hint)
        script = Path(pr.get("out") or ".") / (findings[0].get("repro") or "repro/F001.py")
        lines += ["Run a reproducer against the PR's code (a fresh checkout of the head revision):", ""]
        lines += [f"    {checkout}"] if checkout else []
        lines += [f"    {env} python {script}", ""]
    return lines


def _other_operators(f: dict) -> list[str]:
    """A failure that spans operators (one root cause: a dtype table, a shared helper) says which."""
    others = [op for op in f.get("operators") or [] if op != f["operator"]]
    if not others:
        return []
    shown = ", ".join(f"`{op}`" for op in others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    return [f"- the same failure on {len(others)} other operator{'s' if len(others) > 1 else ''}: {shown}"]


def _ops_part(red: dict) -> str:
    """"11 to 1 operators, " when the graph pass removed operators (multi-operator instances)."""
    before, after = red["before"].get("operators"), red["after"].get("operators")
    return f"{before} to {after} operators, " if before and after and before != after else ""


def _graph_lines(f: dict) -> list[str]:
    """A graph finding: the operator it is localised to, the graph's operators, each one alone."""
    g = f.get("graph")
    if not g:
        return []
    ops = " -> ".join(g.get("node_types") or []) or "?"
    if g.get("multi_operator") and g.get("node") and f.get("oracle") == "inconsistency":
        cut = g.get("cut_after") or {}
        where = (f"no operator alone fails this way; the first wrong value is `{g['localised_to']}`'s (node {g['node']}"
                 + (": the graph cut after it already fails)" if cut.get("wrong") == g["node"] else
                    ": the failing output)"))
    elif g.get("multi_operator") and g.get("node"):
        where = f"no operator alone fails this way; the error names `{g['localised_to']}` (node {g['node']})"
    else:
        where = (f"localised to `{g['localised_to']}` (node {g.get('node')})" if g.get("node") else
                 "no single operator fails this way (and no node is named by the error)")
    lines = [f"- {where}; the graph: {ops}"]
    alone = g.get("each_operator_alone") or {}
    if alone:
        lines.append("- each operator alone on this target, inputs from the reference: "
                     + ", ".join(f"{k} {v}" for k, v in alone.items()))
    if g.get("multi_operator_only"):
        lines.append(f"- **multi-operator only**: every one of the {g.get('operators')} operators passes alone; the "
                     "failure needs them together")
    lines += _culprit_lines(g)
    return lines


def _culprit_lines(g: dict) -> list[str]:
    """Audee's answers for a wrong output: where the divergence starts, the culprit's parameters that matter and
    its share of the final error."""
    lines = []
    trace = g.get("trace") or {}
    if trace.get("used") and trace.get("first_divergent"):
        lines.append(f"- first operator whose output diverges from the float64 reference (intermediate values "
                     f"exposed): {trace['first_divergent']}")
    elif trace.get("why"):
        lines.append(f"- no trace of intermediate values: {trace['why']}")
    if g.get("parameters_that_matter"):
        lines.append("- parameters of the culprit that matter (reset alone, the failure goes away): "
                     + ", ".join(f"`{p}`" for p in g["parameters_that_matter"]))
    share = g.get("share") or {}
    if "share" in share:
        lines.append(f"- share of the final error the culprit accounts for: {share['share']:.0%} ({share.get('how')})")
    return lines


def _fuzz_section(fz: dict) -> list[str]:
    cov = fz.get("coverage") or {}
    nets = fz.get("networks") or {}
    lines = ["## Graph fuzzing", "",
             f"Strategy {(fz.get('strategy') or {}).get('strategy', '?')}: {nets.get('kept', 0)} networks run "
             f"({nets.get('generated', 0)} generated: {nets.get('rejected', 0)} rejected by validation, "
             f"{nets.get('no_new_coverage', 0)} added no coverage), {nets.get('mean_operators', 0)} operators on "
             f"average; corpus {(fz.get('corpus') or {}).get('blocks', '?')} blocks over "
             f"{(fz.get('corpus') or {}).get('operators', '?')} operators.", "",
             "| OTC | IDC | ODC | SEC | SPC | OLC |", "|---|---|---|---|---|---|",
             "| " + " | ".join(f"{cov.get(k, 0):.1%}" for k in ("OTC", "IDC", "ODC", "SEC", "SPC", "OLC")) + " |", ""]
    tl = fz.get("timeline") or []
    if len(tl) > 2:
        marks = [tl[int(i * (len(tl) - 1) / 4)] for i in range(5)]
        lines += ["Over time (seconds of testing: OLC):  " + ", ".join(f"{p['t']:.0f} s: {p['OLC']:.1%}"
                                                                    for p in marks), ""]
    return lines


def _evolve_section(ev: dict) -> list[str]:
    """dlci evolve: each seed's search, what failed on which candidate."""
    lines = ["## Input and weight search", "",
             f"Strategy {ev.get('strategy', '?')}; first failure after "
             + (f"{ev['first_failure_seconds']:.0f} s." if ev.get("first_failure_seconds") is not None else "—."), "",
             "| seed | genes | candidates | best fitness | failed on |", "|---|---|---|---|---|"]
    for s in ev.get("seeds") or []:
        found = ", ".join(f"{t} (candidate {x['candidate']}, {x['seconds']:.0f} s, `{x['operator']}`)"
                          for t, x in (s.get("found") or {}).items()) or "—"
        lines.append(f"| {s['seed']} | {s['genes']} ({s['gene_elements']} values) | {s['candidates']} | "
                     f"{s['best_fitness'] if s['best_fitness'] is not None else '—'} | {found} |")
    return lines + [""]


def render_markdown(doc: dict) -> str:
    st = doc["stats"]
    lines = ["# dlci report", "", f"**{verdict(doc)}**", "",
             f"{st['tests_run']} tests run ({st['tests_valid']} valid) on {st.get('operators', '?')} operators, "
             f"{st.get('instances', '?')} instances, in {st['seconds']:.0f} s.", ""]
    if doc.get("pr"):
        lines += _pr_section(doc["pr"], doc["findings"])
    against = doc.get("against")
    if against:
        lines += [f"**Release regression:** {against['line']}. Each finding's instances ran again under "
                  f"{against['package']} {against['version']} (a layer over this environment: "
                  f"{', '.join(against['delta'])}).", ""]
    if doc["findings"]:
        lines += _findings_table(doc["findings"], bool(doc.get("pr") or against),
                                 _release_groups(against) if against else _GROUPS)
        for f in doc["findings"]:
            known = f" — known issue {f['known'].get('link') or f['known'].get('note')}" if f.get("known") else ""
            lines += [f"## {f['id']}: {f['target']} — {f['symptom']} on `{f['operator']}`{known}", "",
                      f"- stage: {f['stage']}; origin: {f['origin'].get('source')} `{f['origin'].get('test')}`",
                      *_other_operators(f),
                      f"- signature: `{f['signature']}`",
                      *([f"- equivalence rule `{f['rule']['name']}` ({f['rule']['category_title']}): "
                         f"{f['rule']['summary']}", f"  - graph A: {f['rule']['graph_a']}",
                         f"  - graph B: {f['rule']['graph_b']}"] if f.get("rule") else []),
                      *([f"- reduced from {_ops_part(f['reduction'])}{f['reduction']['before'].get('elements')} to "
                         f"{f['reduction']['after'].get('elements')} input elements"
                         + (f"; the parameters that matter: {', '.join(f['reduction']['params_that_matter'])}"
                            if f['reduction'].get('params_that_matter') else "")]
                        if (f.get("reduction") or {}).get("changed") and f["reduction"].get("confirmed") else []),
                      *_graph_lines(f),
                      *([f"- the same failure also shows through: {', '.join(f['also_in'])}"] if f.get("also_in") else []),
                      *([f"- new in {against['package']} {against['installed']}: {_new_in_release(f)}"]
                        if against else [f"- new in PR: {_new_in_pr(f)}"]),
                      *_bisected(f),
                      f"- reproducer: `{f['repro']}` (run it alone: exits 1 while the bug reproduces)", "",
                      "<details><summary>message</summary>", "", "```", f["message"][:1500], "```", "", "</details>",
                      ""]
    if st.get("fuzz"):
        lines += _fuzz_section(st["fuzz"])
    if st.get("evolve"):
        lines += _evolve_section(st["evolve"])
    lines += ["## Per target", "", "| target | pass | unsupported | invalid | crash | inconsistency |",
              "|---|---|---|---|---|---|"]
    for t, c in (st.get("per_target") or {}).items():
        lines.append(f"| {t} | {c['pass']} | {c['unsupported']} | {c['invalid']} | {c['crash']} | "
                     f"{c['inconsistency']} |")
    if st.get("devices"):
        lines += ["", "Devices: " + "; ".join(f"{t} on {d}" for t, d in st["devices"].items()) + "."]
    if st.get("device_notes"):
        lines += ["", "Device oracle (not reported as bugs): " + "; ".join(
            f"{k} ({n})" for k, n in st["device_notes"].items()) + "."]
    if st.get("targets_not_on_runner"):
        lines += ["", "## Not on this runner", "", "Device targets that were asked for but cannot run here "
                  "(not failures: a runner with the device tests them):", ""]
        lines += [f"- `{t}`: {why}" for t, why in st["targets_not_on_runner"].items()]
    if st.get("not_reproduced_in_budget"):
        lines += ["", f"Reproducers the budget left no time to run alone (rendered, confirmed in dlci's workers): "
                  f"{', '.join(st['not_reproduced_in_budget'])}."]
    if st.get("flaky"):
        lines += ["", f"## Flaky ({len(st['flaky'])})", "", "Failures that did not reproduce on a re-run "
                  "(not reported as bugs):", ""]
        lines += [f"- `{f['signature']}`" for f in st["flaky"][:50]]
    if st.get("unreproduced"):
        lines += ["", "## Confirmed in dlci but not reproduced by the standalone script", ""]
        lines += [f"- `{f['signature']}`" for f in st["unreproduced"][:50]]
    return "\n".join(lines) + "\n"
