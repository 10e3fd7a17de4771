"""report.md: a run's findings document (dlci.report.document.Report, the findings.json contract) for people.

It is the job summary too: every value of the document (the PR's names and messages, a fork's artifact) goes through
:mod:`dlci.report.escape` (``C`` a code span, ``P`` prose, ``fence``); only the words and numbers formatted here are
written as they are.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from dlci.findings import attribution
from dlci.report.escape import code as C, fence, prose as P


def _cell(value, limit: int = 200) -> str:
    """A code span inside a table row."""
    return C(value, limit, cell=True)


def verdict(doc: dict, name=str) -> str:
    """One sentence; ``name`` renders the targets it names (escape.prose in markdown, as they are on a console)."""
    known = sum(1 for f in doc["findings"] if attribution(f) == "known")
    n = len(doc["findings"]) - known
    st = doc["stats"]
    tail = " (interrupted: partial results)" if st.get("interrupted") else ""
    tail = (f" ({known} more match known issues)" if known else "") + tail
    if n == 0 and not st.get("tests_run") and st.get("targets_not_on_runner"):
        return (f"Nothing ran on this runner: {', '.join(name(t) for t in st['targets_not_on_runner'])} need a "
                f"device it does not have{tail}.")
    if n == 0 and (doc.get("pr") or {}).get("test_gap"):
        return f"Test gap: {name((doc.get('pr') or {})['test_gap'])}; nothing was tested{tail}."
    if n == 0:
        return f"No confirmed findings in {name(st['tests_valid'])} valid tests{tail}."
    return f"{n} confirmed finding{'s' if n != 1 else ''} in {name(st['tests_valid'])} valid tests{tail}."


def _new_in_pr(f: dict) -> str:
    if f.get("new_in_pr") is None:
        return "n/a"
    base = f.get("base") or {}
    if not f["new_in_pr"]:
        if base.get("changed"):
            return (f"no: **changed by this PR** (on base the same instances fail too, otherwise: "
                    f"{P(base.get('status', '?'), 80)}" + (f", {P(base['symptom'])})" if base.get("symptom") else ")"))
        return "no: the same failure is already on the base revision"
    if base.get("status") == "pass":
        return "**yes** (the same instances pass on the base revision)"
    status, symptom = P(base.get("status", "?"), 80), (P(base["symptom"]) if base.get("symptom") else None)
    if base.get("symptom") == f.get("symptom") and base.get("status") == f.get("oracle"):
        return f"**yes** (on base the same instances fail otherwise: {symptom}, with other values)"
    return f"**yes** (on base the same instances fail otherwise: {status}" + (f", {symptom})" if symptom else ")")


_GROUPS = (("new", "New in this PR"), ("changed", "Changed by this PR (failing on base too, otherwise)"),
           ("on_base", "Already on the base revision"), ("known", "Known issues"), ("unattributed", "Not attributed"))


def _release_groups(against: dict) -> tuple:
    return (("new", f"New in {P(against['package'], 80)} {P(against['installed'], 80)}"),
            ("changed", f"Changed in {P(against['package'], 80)} {P(against['installed'], 80)} (failing in "
                        f"{P(against['version'], 80)} too, otherwise)"),
            ("on_base", f"Already in {P(against['package'], 80)} {P(against['version'], 80)}"),
            ("known", "Known issues"), ("unattributed", "Not compared"))


def _new_in_release(f: dict) -> str:
    a = f.get("against") or {}
    if f.get("new_in_release") is None:
        return f"not compared ({P(a.get('note') or a.get('status') or 'no re-run')})"
    older = f"{P(a.get('package'), 80)} {P(a.get('version'), 80)}"
    if not f["new_in_release"]:
        text = (f"no: changed (in {older} the same instances fail too, otherwise: {P(a.get('status'), 80)}"
                + (f", {P(a['symptom'])})" if a.get("symptom") else ")")) if a.get("changed") else \
            f"no: the same failure in {older}"
    elif a.get("status") == "pass":
        text = f"**yes** (the same instances pass on {older})"
    else:
        text = f"**yes** (on {older} the same instances fail otherwise: {P(a.get('status'), 80)}" + (
            f", {P(a['symptom'])})" if a.get("symptom") else ")")
    rep = a.get("reproducer")
    if rep:
        said = {"good": "passes", "bad": "reproduces"}.get(rep["verdict"], f"neither ({P(rep.get('reason'))})")
        text += f"; its reproducer under {P(a.get('version'), 80)}: {said} ({C(rep['command'], 500)})"
    return text


def _bisected(f: dict) -> list[str]:
    """Since when: the PR's commit that introduced the finding, the release that did (dlci.bisect.attribution)."""
    lines = []
    if f.get("introduced_by"):
        lines.append(f"- introduced by commit: {P(f['introduced_by']['report'], 500)}")  # a commit subject in it
    if f.get("since"):
        lines.append(f"- since release: {P(f['since']['report'], 500)}")
    return lines


def _findings_table(findings: list, pr: bool, groups: tuple = _GROUPS) -> list[str]:
    """One table of findings; in PR mode (and against an older release) one per attribution, new ones first, so none
    hides among old ones."""
    header = ["| id | oracle | operator | target | stage | symptom | instances | reproducer |",
              "|---|---|---|---|---|---|---|---|"]

    def row(f):
        return (f"| {P(f['id'], 20)} | {P(f['oracle'], 40)} | {_cell(f['operator'])} | {P(f['target'], 100)} "
                f"{P(f['target_version'], 40)} | {P(f['stage'], 80)} | {P(f['symptom'])} | {len(f['instances'])} | "
                f"{_cell(f['repro'])} |")
    if not pr:
        return header + [row(f) for f in findings] + [""]
    lines = []
    for key, title in groups:
        group = [f for f in findings if attribution(f) == key]
        if group:
            lines += [f"### {title} ({len(group)})", "", *header, *(row(f) for f in group), ""]
    return lines


def policy_note(pr: dict) -> str | None:
    """Said when the PR edits .dlci.yml's policy: the base revision's was applied (dlci.config.Config.BUILD_KEYS)."""
    keys = [k for k in pr.get("policy_changed") or [] if isinstance(k, str)]
    if not keys:
        return None
    return (f"This PR changes the policy in `.dlci.yml` ({', '.join(C(k, 40) for k in keys[:12])}); the base "
            "revision's policy was applied. A pull request's own `.dlci.yml` decides only how its code is built and "
            "imported (`python_path`, `env`, `install`); the change takes effect once merged.")


def _directed_lines(pr: dict) -> list[str]:
    """The directed search: the goals (changed statements, branch outcomes of the changed functions), what it
    reached, and per goal left the closest test, the condition it did not satisfy and a skeleton to complete."""
    d = pr.get("directed") or {}
    if not d.get("goals"):
        return []
    search = d.get("search") or {}
    lines = [f"Directed search: {P(d['reached'], 20)} of {P(d['goals'], 20)} goals reached "
             f"({P(d['statements_reached'], 20)} of {P(d['statements'], 20)} changed statements, the rest branch "
             f"outcomes of the changed functions)"
             + (f"; {P(search.get('reached_by_search', 0), 20)} of them by {P(search.get('mutants', 0), 20)} "
                f"mutants in {P(search.get('seconds', 0), 20)} s" if search else "") + "."]
    if search.get("reaching_mutation"):
        lines += ["", "Reached by mutation: " + "; ".join(
            f"{P(goal, 200)} ({C(m, 60)})" for goal, m in list(search["reaching_mutation"].items())[:10]) + "."]
    changes = _fold_said_alike((search.get("divergence") or {}).get("graph_changes") or [])
    if changes:  # where the change acts: the nodes head and base emit differently for the same input
        lines += ["", "Where head and base convert the same input to different graphs (the nodes that differ):", ""]
        lines += [f"- {C(c['target'], 60)}, {P(c['inputs'], 20)} input(s), e.g. {C(c['instance'], 80)}: "
                  + ("; ".join(C(x, 240) for x in c["differences"][:4]) if c.get("differences") else
                     "head " + (", ".join(C(x, 120) for x in c["head_only"][:4]) or "nothing more") + "; base "
                     + (", ".join(C(x, 120) for x in c["base_only"][:4]) or "nothing more")) for c in changes]
    if d.get("unreached"):
        lines += ["", f"**Test gap** — {P(len(d['unreached']), 20)} goal(s) neither the tests nor the directed search "
                  "reached:", "", "| not reached | condition | closest test | distance | test to complete |", "|---|---|---|---|---|"]
        for g in d["unreached"][:40]:
            closest = g.get("closest") or {}
            lines.append(f"| {_where({'file': g['file'], 'line': g['span'][0] if g['kind'] == 'branch' else g['line']}, cell=True)} "
                         f"| {_cell(g.get('condition') or 'statement', 100)} {P(g.get('outcome') or '', 20)} "
                         f"| {_cell(closest.get('test') or '-', 120)} {P(closest.get('target') or '', 60)} "
                         f"| {P(g.get('distance') if g.get('distance') is not None else '-', 20)} "
                         f"| {_cell(g.get('skeleton') or '-', 120)} |")
        if len(d["unreached"]) > 40:
            lines.append(f"| … {len(d['unreached']) - 40} more in findings.json | | | | |")
    passing = [g for g in d.get("reached_goals") or [] if g.get("tests") and not g.get("failing")]
    if passing:
        lines += ["", f"Reached and passing ({len(passing)}): " + ", ".join(
            f"{_where({'file': g['file'], 'line': g['span'][0] if g['kind'] == 'branch' else g['line']})}"
            + (f" {P(g.get('outcome'), 20)}" if g['kind'] == 'branch' else "") + f" ({P(g['tests'], 20)} tests)"
            for g in passing[:30]) + "."]
        valued = [g for g in passing if g.get("values")]
        if valued:  # what the passing tests computed on: the boundary values no test tried are what is missing
            lines += ["", "Values the passing tests gave the changed statements:"]
            lines += [f"- {_where({'file': g['file'], 'line': g['line']})}: "
                      + ", ".join(C(v, 40) for v in g["values"][:12])
                      + (f" and {P(len(g['values']) - 12, 20)} more" if len(g["values"]) > 12 else "")
                      for g in valued[:10]]
    return lines + [""]


def _fold_said_alike(changes: list) -> list:
    """Kinds of graph difference that read the same (the same attribute set otherwise, at other attribute values
    the difference leaves alone) as one line, their inputs added up."""
    folded: dict = {}
    for c in changes:
        key = (c.get("target"), tuple(c["differences"])) if c.get("differences") else id(c)
        if key in folded:
            folded[key] = {**folded[key], "inputs": folded[key]["inputs"] + c["inputs"]}
        else:
            folded[key] = c
    return list(folded.values())


def _fixed_lines(pr: dict) -> list[str]:
    fixed = pr.get("fixed") or []
    if not fixed:
        return []
    lines = [f"### Fixed in this PR ({len(fixed)})", "",
             "Tests that run the changed code, pass here and fail on the base revision:", ""]
    lines += [f"- {C(f['operator'])} through {P(f['target'], 100)}: on base {P(f['status_on_base'], 40)} "
              f"({P(f['symptom'], 100)}), {P(len(f.get('instances') or []), 10)} instance(s), e.g. "
              f"{C(f.get('test') or f['instance'], 160)}" for f in fixed[:20]]
    if pr.get("still_failing"):
        lines += ["", "Still failing on this PR where it changed code (an incomplete fix?): " + ", ".join(
            f"{C(f['operator'])} through {P(f['target'], 100)} ({P(f['symptom'], 100)})"
            for f in pr["still_failing"][:10]) + "."]
    return lines + [""]


def _pr_section(pr: dict, findings: list) -> list[str]:
    """What the diff touched and why, base attribution, and the changed lines no test reached."""
    lines = [f"## Pull request {P(pr['base'][:12])}..{P(pr['head'][:12])}", ""]
    if pr.get("nothing_to_test"):
        lines += [f"**Nothing to test:** {P(pr['nothing_to_test'])}.", ""]
    if policy_note(pr):
        lines += [f"**Policy:** {policy_note(pr)}", ""]
    new = sum(1 for f in findings if attribution(f) == "new")
    old = sum(1 for f in findings if attribution(f) == "on_base")
    changed = sum(1 for f in findings if attribution(f) == "changed")
    if findings:
        lines += [f"{new} finding(s) new in this PR, "
                  + (f"{changed} changed by it (failing on base too, otherwise), " if changed else "")
                  + f"{old} already on the base revision.", ""]
    touched = pr.get("touched") or []
    if touched:
        # one row per operator, the changed places that reach it inside the row (four changed helpers are not
        # twenty rows for five operators)
        rows: dict[str, list[dict]] = {}
        for t in touched:
            rows.setdefault(t["operator"], []).append(t)
        lines += [f"Profiles: {', '.join(P(x, 80) for x in pr.get('profiles') or [])}. Touched operators "
                  f"({len(rows)}):", "",
                  "| operator | converter | changed places that reach it | targets |", "|---|---|---|---|"]
        for op, ts in list(rows.items())[:100]:
            converters = list(dict.fromkeys(t["converter"] for t in ts if t.get("converter")))
            places = list(dict.fromkeys(f"{_where(t, cell=True)} {P(t['why'], 120)}" for t in ts))
            targets = list(dict.fromkeys(x for t in ts for x in t["targets"]))
            lines.append(f"| {_cell(op)} | {', '.join(_cell(c, 60) for c in converters[:3]) or '-'} | "
                         + "; ".join(places[:4]) + (f"; and {len(places) - 4} more" if len(places) > 4 else "")
                         + f" | {', '.join(P(x, 100) for x in targets) or '-'} |")
        if len(rows) > 100:
            lines.append(f"| … {len(rows) - 100} more in ops.json | | | |")
        lines.append("")
    bisect = pr.get("bisect") or {}
    if bisect.get("lines") or bisect.get("error"):
        lines += [f"Bisection (`.dlci.yml` bisect: {', '.join(P(x, 40) for x in bisect.get('asked') or ['commits'])}; "
                  f"{bisect.get('seconds', 0):.0f} s of {bisect.get('budget_s', 0):.0f} s):", ""]
        lines += [f"- {P(line, 500)}" for line in bisect.get("lines") or []]
        lines += [f"- failed: {P(bisect['error'], 500)}"] if bisect.get("error") else []
        lines.append("")
    cov = pr.get("coverage") or {}
    # one count of changed statements per report: the directed search's when it ran (the same statements, with
    # their branch outcomes), else the coverage's
    if cov.get("changed_statements") and not (pr.get("directed") or {}).get("goals"):
        lines += [f"Changed converter statements run by the tests: {P(cov['reached_statements'], 20)} of "
                  f"{P(cov['changed_statements'], 20)} ({P(cov['instances_reaching'], 20)} instances reached them)."]
        if cov.get("unreached"):
            lines += ["", "**Test gap** — changed lines no instance reached:", ""]
            lines += [f"- {_where(g)} ({P(g['region']) or 'module level'})" for g in cov["unreached"][:30]]
        lines.append("")
    lines += _directed_lines(pr)
    lines += _fixed_lines(pr)
    if pr.get("operators_without_material"):
        ops = pr["operators_without_material"]
        lines += [f"**Test gap** — touched operators with no test material: "
                  f"{', '.join(C(o, 80) for o in ops[:30])}{' …' if len(ops) > 30 else ''}.", ""]
    fz = pr.get("fuzz")
    if fz:
        lines += [f"Graph fuzzing share ({fz['share']:.0%} of the testing budget, "
                  f"{', '.join(P(x, 100) for x in fz['targets'])}): {P(fz['why'])}."]
        if pr.get("fuzz_already_on_base"):
            met: dict = {}  # (operator, target) -> the symptoms, one line per pair however many signatures
            for f in pr["fuzz_already_on_base"]:
                met.setdefault((f.get("operator"), f.get("target")), []).append(f.get("symptom") or "?")
            lines += [f"It also met {len(pr['fuzz_already_on_base'])} failure(s) the base revision shows the same "
                      "way (not the PR's, not listed): " + ", ".join(
                          f"{C(op)} on {P(target, 100)} ({', '.join(P(x, 60) for x in dict.fromkeys(symptoms))}"
                          + (f"; {len(symptoms)} signatures)" if len(symptoms) > 1 else ")")
                          for (op, target), symptoms in list(met.items())[:10]) + "."]
        lines.append("")
    if pr.get("graph_level"):
        lines += ["Graph-level code changed (tested with generated multi-operator graphs):", ""]
        lines += [f"- {_where(g)} — {P(g['why'])}" for g in pr["graph_level"][:20]]
        lines.append("")
    if pr.get("unmapped"):
        lines += ["Changed code that maps to no operator:", ""]
        lines += [f"- {_where(u)} {P(u.get('region'))} — {P(u['why'])}" for u in pr["unmapped"][:30]]
        lines.append("")
    hint = pr.get("head_run")
    if hint and findings:
        checkout, env = hint if isinstance(hint, list) else ("", hint)
        example = next((f for f in findings if attribution(f) == "new" and f.get("repro")), findings[0])
        script = Path(pr.get("out") or ".") / (example.get("repro") or "repro/F001.py")
        lines += ["Run a reproducer against the PR's code (a fresh checkout of the head revision):", ""]
        lines += [fence((f"{checkout}\n" if checkout else "") + f"{env} python {script}", "sh"), ""]
    return lines


def _where(g: dict, cell: bool = False) -> str:
    """A changed line, ``file:line``, as a code span."""
    return C(f"{g['file']}:{g['line']}", cell=cell)


def _other_operators(f: dict) -> list[str]:
    """A failure that spans operators (one root cause: a dtype table, a shared helper) says which."""
    others = [op for op in f.get("operators") or [] if op != f["operator"]]
    if not others:
        return []
    shown = ", ".join(C(op) for op in others[:8]) + (f" and {len(others) - 8} more" if len(others) > 8 else "")
    return [f"- the same failure on {len(others)} other operator{'s' if len(others) > 1 else ''}: {shown}"]


def _ops_part(red: dict) -> str:
    """"11 to 1 operators, " when the graph pass removed operators (multi-operator instances)."""
    before, after = red["before"].get("operators"), red["after"].get("operators")
    return f"{P(before, 20)} to {P(after, 20)} operators, " if before and after and before != after else ""


def _graph_lines(f: dict) -> list[str]:
    """A graph finding: the operator it is localised to, the graph's operators, each one alone."""
    g = f.get("graph")
    if not g:
        return []
    ops = " -> ".join(P(t, 80) for t in (g.get("node_types") or [])[:100]) or "?"
    if g.get("multi_operator") and g.get("node") and f.get("oracle") == "inconsistency":
        cut = g.get("cut_after") or {}
        where = (f"no operator alone fails this way; the first wrong value is {C(g['localised_to'])}'s (node "
                 f"{P(g['node'], 40)}"
                 + (": the graph cut after it already fails)" if cut.get("wrong") == g["node"] else
                    ": the failing output)"))
    elif g.get("multi_operator") and g.get("node"):
        where = f"no operator alone fails this way; the error names {C(g['localised_to'])} (node {P(g['node'], 40)})"
    else:
        where = (f"localised to {C(g['localised_to'])} (node {P(g.get('node'), 40)})" if g.get("node") else
                 "no single operator fails this way (and no node is named by the error)")
    lines = [f"- {where}; the graph: {ops}"]
    alone = g.get("each_operator_alone") or {}
    if alone:
        lines.append("- each operator alone on this target, inputs from the reference: "
                     + ", ".join(f"{P(k, 80)} {P(v, 80)}" for k, v in alone.items()))
    if g.get("multi_operator_only"):
        lines.append(f"- **multi-operator only**: every one of the {P(g.get('operators'), 20)} operators passes "
                     "alone; the failure needs them together")
    lines += _culprit_lines(g)
    return lines


def _explained_graphs(f: dict) -> list[str]:
    """The generated graphs whose new failures this operator's own failure explains (folded into it by the scan)."""
    graphs = (f.get("extra") or {}).get("explains_graph_findings") or []
    if not isinstance(graphs, list) or not graphs:
        return []
    kinds = Counter(f"{P(g.get('symptom'), 80)} at {P(g.get('stage'), 20)}" for g in graphs if isinstance(g, dict))
    return [f"- it also breaks {len(graphs)} generated graph(s) it is part of, which fail there and pass on base: "
            + ", ".join(f"{n}× {k}" for k, n in kinds.most_common(6))
            + (f", e.g. {C(graphs[0].get('instance'), 100)}" if isinstance(graphs[0], dict) else "")]


def _culprit_lines(g: dict) -> list[str]:
    """Audee's answers for a wrong output: where the divergence starts, the culprit's parameters that matter and
    its share of the final error."""
    lines = []
    trace = g.get("trace") or {}
    if trace.get("used") and trace.get("first_divergent"):
        lines.append(f"- first operator whose output diverges from the float64 reference (intermediate values "
                     f"exposed): {P(trace['first_divergent'])}")
    elif trace.get("why"):
        lines.append(f"- no trace of intermediate values: {P(trace['why'])}")
    if g.get("parameters_that_matter"):
        lines.append("- parameters of the culprit that matter (reset alone, the failure goes away): "
                     + ", ".join(C(p) for p in g["parameters_that_matter"]))
    share = g.get("share") or {}
    if "share" in share:
        lines.append(f"- share of the final error the culprit accounts for: {share['share']:.0%} "
                     f"({P(share.get('how'))})")
    return lines


def _fuzz_section(fz: dict) -> list[str]:
    cov = fz.get("coverage") or {}
    nets = fz.get("networks") or {}
    lines = ["## Graph fuzzing", "",
             f"Strategy {P((fz.get('strategy') or {}).get('strategy', '?'), 80)}: {P(nets.get('kept', 0), 20)} "
             f"networks run ({P(nets.get('generated', 0), 20)} generated: {P(nets.get('rejected', 0), 20)} rejected "
             f"by validation, {P(nets.get('no_new_coverage', 0), 20)} added no coverage), "
             f"{P(nets.get('mean_operators', 0), 20)} operators on average; corpus "
             f"{P((fz.get('corpus') or {}).get('blocks', '?'), 20)} blocks over "
             f"{P((fz.get('corpus') or {}).get('operators', '?'), 20)} operators.", "",
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
             f"Strategy {P(ev.get('strategy', '?'), 80)}; first failure after "
             + (f"{ev['first_failure_seconds']:.0f} s." if ev.get("first_failure_seconds") is not None else "—."), "",
             "| seed | genes | candidates | best fitness | failed on |", "|---|---|---|---|---|"]
    for s in ev.get("seeds") or []:
        found = ", ".join(f"{P(t, 100)} (candidate {P(x['candidate'], 20)}, {x['seconds']:.0f} s, "
                          f"{_cell(x['operator'])})" for t, x in (s.get("found") or {}).items()) or "—"
        lines.append(f"| {P(s['seed'], 100)} | {P(s['genes'], 20)} ({P(s['gene_elements'], 20)} values) | "
                     f"{P(s['candidates'], 20)} | "
                     f"{P(s['best_fitness'], 40) if s['best_fitness'] is not None else '—'} | {found} |")
    return lines + [""]


def render_markdown(doc: dict) -> str:
    st = doc["stats"]
    lines = ["# dlci report", "", f"**{verdict(doc, P)}**", "",
             f"{P(st['tests_run'], 20)} tests run ({P(st['tests_valid'], 20)} valid) on "
             f"{P(st.get('operators', '?'), 20)} operators, {P(st.get('instances', '?'), 20)} instances, in "
             f"{st['seconds']:.0f} s.", ""]
    if doc.get("pr"):
        lines += _pr_section(doc["pr"], doc["findings"])
    against = doc.get("against")
    if against:
        lines += [f"**Release regression:** {P(against['line'], 500)}. Each finding's instances ran again under "
                  f"{P(against['package'], 80)} {P(against['version'], 80)} (a layer over this environment: "
                  f"{', '.join(P(x, 200) for x in against['delta'])}).", ""]
    if doc["findings"]:
        lines += _findings_table(doc["findings"], bool(doc.get("pr") or against),
                                 _release_groups(against) if against else _GROUPS)
        for f in doc["findings"]:
            lines += _finding_section(f, against)
    if st.get("fuzz"):
        lines += _fuzz_section(st["fuzz"])
    if st.get("evolve"):
        lines += _evolve_section(st["evolve"])
    lines += ["## Per target", "", "| target | pass | unsupported | invalid | crash | inconsistency |",
              "|---|---|---|---|---|---|"]
    for t, c in (st.get("per_target") or {}).items():
        lines.append(f"| {P(t, 100)} | " + " | ".join(P(c[k], 20) for k in ("pass", "unsupported", "invalid",
                                                                             "crash", "inconsistency")) + " |")
    if st.get("devices"):
        lines += ["", "Devices: " + "; ".join(f"{P(t, 100)} on {P(d, 200)}" for t, d in st["devices"].items()) + "."]
    if st.get("device_notes"):
        lines += ["", "Device oracle (not reported as bugs): " + "; ".join(
            f"{P(k, 100)} ({P(n)})" for k, n in st["device_notes"].items()) + "."]
    if st.get("targets_not_on_runner"):
        lines += ["", "## Not on this runner", "", "Device targets that were asked for but cannot run here "
                  "(not failures: a runner with the device tests them):", ""]
        lines += [f"- {C(t)}: {P(why)}" for t, why in st["targets_not_on_runner"].items()]
    if st.get("not_reproduced_in_budget"):
        lines += ["", f"Reproducers the budget left no time to run alone (rendered, confirmed in dlci's workers): "
                  f"{', '.join(P(x, 100) for x in st['not_reproduced_in_budget'])}."]
    if st.get("flaky"):
        lines += ["", f"## Flaky ({len(st['flaky'])})", "", "Failures that did not reproduce on a re-run "
                  "(not reported as bugs):", ""]
        lines += [f"- {C(f['signature'])}" for f in st["flaky"][:50]]
    if st.get("unreproduced"):
        lines += ["", "## Confirmed in dlci but not reproduced by the standalone script", ""]
        lines += [f"- {C(f['signature'])}" + (f": {P(f['not_reproduced_because'], 300)}"
                                              if f.get("not_reproduced_because") else "")
                  for f in st["unreproduced"][:50]]
    return "\n".join(lines) + "\n"


def _finding_section(f: dict, against: dict | None) -> list[str]:
    """One finding: where, what, since when, its reproducer and its message."""
    known = ""
    if f.get("known"):  # .dlci.yml is in the PR's tree: its link is shown as code, never followed
        link, note = f["known"].get("link"), f["known"].get("note")
        known = " — known issue " + (C(link) if link else P(note))
    rule = f.get("rule")
    red = f.get("reduction") or {}
    return [f"## {P(f['id'], 20)}: {P(f['target'], 100)} — {P(f['symptom'])} on {C(f['operator'])}{known}", "",
            f"- stage: {P(f['stage'], 80)}; origin: {P(f['origin'].get('source'), 80)} "
            f"{C(f['origin'].get('test'))}",
            *_other_operators(f),
            f"- signature: {C(f['signature'], 500)}",
            *([f"- equivalence rule {C(rule['name'])} ({P(rule['category_title'], 100)}): {P(rule['summary'], 500)}",
               f"  - graph A: {P(rule['graph_a'], 500)}", f"  - graph B: {P(rule['graph_b'], 500)}"] if rule else []),
            *([f"- reduced from {_ops_part(red)}{P(red['before'].get('elements'), 20)} to "
               f"{P(red['after'].get('elements'), 20)} input elements"
               + (f"; the parameters that matter: {', '.join(C(x) for x in red['params_that_matter'])}"
                  if red.get('params_that_matter') else "")]
              if red.get("changed") and red.get("confirmed") else []),
            *_graph_lines(f),
            *([f"- the same failure also shows through: {', '.join(P(x, 100) for x in f['also_in'])}"]
              if f.get("also_in") else []),
            *_explained_graphs(f),
            *([f"- new in {P(against['package'], 80)} {P(against['installed'], 80)}: {_new_in_release(f)}"]
              if against else [f"- new in PR: {_new_in_pr(f)}"]),
            *_bisected(f),
            f"- reproducer: {C(f['repro'])} (run it alone: exits 1 while the bug reproduces)", "",
            "<details><summary>message</summary>", "", fence(f["message"][:1500]), "", "</details>", ""]
