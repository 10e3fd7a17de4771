"""The PR comment: one per pull request, verdict first, findings grouped by what the maintainer must do about them.

Rendered from ``dlci/templates/comment.md.j2``. Every value that comes from the findings document (the PR's names
and messages; a fork's artifact for a ``workflow_run`` poster) goes through :mod:`dlci.report.escape` (in the template
as its filters ``code``, ``prose``, ``fence``, ``html``, ``plain``).

GitHub rejects comment bodies over 65,536 characters, so the body is rendered with everything, then with reproducers
shortened, then dropped, then with fewer findings listed, until it fits; what was left out is said at the end with a
pointer to the job summary and the artifact.
"""
from __future__ import annotations

import functools
import re

from dlci.findings import attribution
from dlci.report import policy_note
from dlci.report.escape import code, fence, html, plain, prose

MARKER = "<!-- dlci:sticky-comment -->"
COMMENT_LIMIT = 65_536
REPRO_INLINE_LIMIT = 6_000  # characters of one reproducer shown inline at most


@functools.lru_cache(maxsize=None)
def _env():
    """One environment per process: its templates are read once (the action reads them before any scan runs)."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.PackageLoader("dlci", "templates"), autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters.update(code=code, prose=prose, fence=fence, html=html, plain=plain)
    return env


def _selected_by(finding: dict, touched: list[dict]) -> str | None:
    """The changed converter line that selected this finding's operator (first match)."""
    from dlci import operators
    mine = operators.instance_ops(finding["operator"])
    for t in touched:
        if operators.canonical(t["operator"], t["namespace"]) & mine and (
                not t.get("targets") or finding["target"] in t["targets"]
                or set(finding.get("also_in") or ()) & set(t["targets"])):
            return f"{t['file']}:{t['line']}"
    return None


GROUP_MIN = 3  # findings of one kind below this many are listed one by one


def _grouped(findings: list[dict]) -> list[dict]:
    """Operators whose support the PR removed through one target, selected by one changed line (a shared helper
    broke: TVM's ONNX importer lost 15 operators to one initializer lookup), listed as one entry naming them all,
    at the place of the first; each keeps its finding and its reproducer in findings.json and the artifact."""
    def key(f: dict) -> tuple:  # members share every note the entry shows once (base, bisection, known issue)
        known = f.get("known") or {}
        return (attribution(f), f["target"], f["symptom"], f.get("selected_by"), f.get("base_note"),
                f.get("bisect_note"), f.get("graph_note"), known.get("link"), known.get("note"))

    groups: dict[tuple, list[dict]] = {}
    for f in findings:
        if f.get("oracle") == "support" and f.get("selected_by"):
            groups.setdefault(key(f), []).append(f)
    grouped, placed = [], set()
    for f in findings:
        members = groups.get(key(f)) if f.get("oracle") == "support" else None
        if not members or len(members) < GROUP_MIN:
            grouped.append(f)
        elif key(f) not in placed:
            placed.add(key(f))
            grouped.append({**f, "id": f"{members[0]['id']} … {members[-1]['id']}", "group": members,
                            "full_repro": None,
                            "repro_checked": all(m.get("repro_checked") for m in members),
                            "repro_passes_on_base": all(m.get("repro_passes_on_base") for m in members)})
    return grouped


def _base_note(f: dict) -> str | None:
    base = f.get("base") or {}
    if (f.get("new_in_pr") or base.get("changed")) and base.get("status") not in (None, "pass"):
        return (f"On base the same instances also fail, differently ({prose(base.get('status'), 80)}: "
                f"{prose(base.get('symptom'))}).")
    return None


def _graph_note(f: dict) -> str | None:
    """The generated graphs whose new failures this finding explains (dlci.scan folds them into it)."""
    graphs = (f.get("extra") or {}).get("explains_graph_findings")
    if not isinstance(graphs, list) or not graphs:
        return None
    return (f"It also breaks {len(graphs)} generated graph(s) it is part of (new failures there, "
            "shown in the report under this finding).")


def _bisect_note(f: dict) -> str | None:
    """Since when (dlci.bisect.attribution): the PR's commit, or the release, that introduced the finding."""
    said = []
    # a commit subject is the PR author's text: escaped like any other
    if (f.get("introduced_by") or {}).get("report"):
        said.append(f"Introduced by commit {prose(f['introduced_by']['report'], 500)}.")
    if (f.get("since") or {}).get("report"):
        said.append(f"Since release: {prose(f['since']['report'], 500)}.")
    return " ".join(said) or None


def _known_note(known: dict) -> str:
    """A known issue's link and note come from .dlci.yml in the PR's tree: the link is shown, not followed."""
    link, note = known.get("link"), known.get("note")
    return " ".join(["Known:", *([code(link)] if link else []), *([prose(note)] if note else [])])


def verdict_line(doc: dict) -> str:
    findings = [f for f in doc["findings"] if attribution(f) != "known"]
    new = sum(1 for f in findings if attribution(f) == "new")
    old = sum(1 for f in findings if attribution(f) == "on_base")
    changed = sum(1 for f in findings if attribution(f) == "changed")
    pr = doc.get("pr") or {}
    if pr.get("nothing_to_test"):
        return ":white_check_mark: dlci: nothing to test in this PR"
    besides = ", ".join([*([f"{changed} changed by it, failing on base too"] if changed else []),
                         *([f"{old} already on base"] if old else [])])
    if new:
        return f":x: dlci: {new} new bug{'s' if new != 1 else ''} in this PR" + (f" ({besides})" if besides else "")
    if besides:
        return f":warning: dlci: no new bug; {besides}"
    if any(attribution(f) == "unattributed" for f in findings):
        return f":x: dlci: {len(findings)} finding(s)"
    if pr.get("test_gap"):  # changed code dlci has no material for: not a clean run
        return ":grey_question: dlci: no test material for the operators this PR touches (test gap)"
    return ":white_check_mark: dlci: no bug found in the operators this PR touches"


def render(doc: dict, scripts: dict[str, bytes] | None = None, *, details_url: str | None = None,
           version: str = "") -> str:
    """The comment body for a findings document, within GitHub's limit. ``scripts``: the reproducers' bytes by the
    path the findings name, as :mod:`dlci.report.intake` returned them (never read again from a folder)."""
    pr = doc.get("pr") or {}
    stats = doc["stats"]
    touched = pr.get("touched") or []
    findings = []
    for f in doc["findings"]:
        data = (scripts or {}).get(f.get("repro") or "")
        text = data.decode("utf-8", errors="replace") if data is not None else None
        findings.append({**f, "selected_by": _selected_by(f, touched), "base_note": _base_note(f),
                         "bisect_note": _bisect_note(f), "graph_note": _graph_note(f), "full_repro": text})
    findings = _grouped(findings)
    skipped = []
    for target, counts in (stats.get("per_target") or {}).items():
        if counts.get("unsupported"):
            skipped.append(f"{prose(target, 100)}: {prose(counts['unsupported'], 20)} test(s) of unsupported "
                           "operators/forms")
    reach: list[str] = []  # changed code no test ran (directed search's leftovers)
    fixes: list[str] = []
    unreached = ((pr.get("directed") or {}).get("unreached") or [])
    if unreached:  # the directed search's goals left: each with the closest test and a skeleton in the artifact
        for g in unreached[:12]:
            where = code(f"{g['file']}:{g['span'][0] if g['kind'] == 'branch' else g['line']}")
            what = f"{code(g.get('condition'), 100)} {prose(g.get('outcome'), 20)}" if g["kind"] == "branch" \
                else "changed statement"
            closest = (g.get("closest") or {}).get("test")
            reach.append(f"{where} {what}" + (f"; closest test {code(closest, 120)}" if closest else "")
                           + (f"; a test to complete: {code(g['skeleton'], 120)} in the artifact"
                              if g.get("skeleton") else ""))
        if len(unreached) > 12:
            reach.append(f"{len(unreached) - 12} more changed statements or branch outcomes (report.md)")
    else:
        for gap in ((pr.get("coverage") or {}).get("unreached") or [])[:20]:
            where = code(f"{gap['file']}:{gap['line']}")
            skipped.append(f"test gap: {where} ({prose(gap.get('region')) or 'module level'}) changed, but no "
                           "instance ran it")
    if pr.get("operators_without_material"):
        ops = pr["operators_without_material"]
        skipped.append("test gap: no test material for the touched operator(s) "
                       + ", ".join(code(o, 80) for o in ops[:20]) + (" …" if len(ops) > 20 else ""))
    for f in (pr.get("fixed") or [])[:10]:
        fixes.append(f"{code(f['operator'], 80)} through {prose(f['target'], 100)} failed on "
                       f"base ({prose(f['symptom'], 100)}) and passes here")
    for f in (pr.get("still_failing") or [])[:10]:
        fixes.append(f"still failing where this PR changed code: {code(f['operator'], 80)} through "
                       f"{prose(f['target'], 100)} ({prose(f['symptom'], 100)})")
    if pr.get("targets_not_installed"):
        skipped.append("targets reached by the diff but not installed on this runner: "
                       + ", ".join(prose(t, 100) for t in pr["targets_not_installed"]))
    flaky = sorted({f["signature"] for f in stats.get("flaky") or []})

    # progressively smaller renderings until the body fits
    for repro_limit, max_findings in ((REPRO_INLINE_LIMIT, None), (1500, None), (0, None), (0, 30), (0, 10), (0, 3)):
        body = _render_once(doc, findings, flaky, skipped, repro_limit, max_findings, details_url, version,
                            reach, fixes)
        if len(body) <= COMMENT_LIMIT:
            return body
    return cut(body, COMMENT_LIMIT - 200) + "\n\n_(cut to fit GitHub's comment limit; see the job summary)_\n"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def cut(markdown: str, limit: int) -> str:
    """``markdown`` cut to at most ``limit`` characters at the end of a paragraph outside any fenced block: a code
    span cannot run over a blank line, so nothing is left open that would turn escaped text (a mention inside code)
    live."""
    if len(markdown) <= limit:
        return markdown
    best, size, fence = 0, 0, None
    for line in markdown.splitlines(keepends=True):
        if size + len(line) > limit:
            break
        size += len(line)
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not line.strip().strip(fence[0]):
            fence = None
            best = size
        elif fence is None and not line.strip():
            best = size
    return markdown[:best].rstrip("\n") + "\n"


def _render_once(doc, findings, flaky, skipped, repro_limit, max_findings, details_url, version, reach=(),
                 fixes=()) -> str:
    pr = doc.get("pr") or {}
    stats = doc["stats"]
    notes = []
    shown = []
    for f in findings[:max_findings] if max_findings else findings:
        g = dict(f)
        text = f["full_repro"]
        if text is None or repro_limit == 0:
            g["repro_text"] = None
        elif len(text) > repro_limit:
            g["repro_text"] = text[:repro_limit] + "\n# ... (shortened: the full script is in the job's artifact)"
        else:
            g["repro_text"] = text
        shown.append(g)  # its values are escaped in the template (results may come from a fork's run)
    if repro_limit == 0 and any(f["full_repro"] for f in findings):
        notes.append("Reproducers are not inlined (the comment would exceed GitHub's size limit)")
    if max_findings and len(findings) > max_findings:
        notes.append(f"{len(findings) - max_findings} more finding(s) are not listed here")
    sections = [
        {"title": "NEW IN THIS PR", "blurb": "These fail on this PR's code and not on the base revision.",
         "findings": [f for f in shown if attribution(f) == "new"]},
        {"title": "CHANGED BY THIS PR", "blurb": "These fail on the base revision too, otherwise: this PR changed how "
                                                 "(neither revision gets them right).",
         "findings": [f for f in shown if attribution(f) == "changed"]},
        {"title": "ALREADY ON BASE", "blurb": "The same failure happens on the base revision: not caused by this PR.",
         "findings": [f for f in shown if attribution(f) == "on_base"]},
        {"title": "FINDINGS", "blurb": "Not classified against a base revision.",
         "findings": [f for f in shown if attribution(f) == "unattributed"]},
        {"title": "KNOWN ISSUES", "blurb": "Matched by `known_issues` in `.dlci.yml`: tracked elsewhere, never fail "
                                           "the job.",
         "findings": [dict(f, base_note=_known_note(f["known"])) for f in shown if attribution(f) == "known"]},
    ]
    for section in sections:  # a group counts its findings
        section["count"] = sum(len(f.get("group") or [f]) for f in section["findings"])
    truncated = ("; ".join(notes) + ": see the job summary and the `dlci-out` artifact.") if notes else ""
    ops = pr.get("operators") or sorted({t["operator"] for t in pr.get("touched") or []})
    summary_line = (f"{len(ops)} operator(s) touched by this PR"
                    + (f" ({', '.join(code(o, 80) for o in ops[:12])}{' …' if len(ops) > 12 else ''})" if ops else "")
                    + f"; {prose(stats.get('tests_run', 0), 20)} tests through "
                    + (", ".join(prose(t, 100) for t in sorted(stats.get("per_target") or {})) or "no target") + ".")
    return _env().get_template("comment.md.j2").render(
        marker=MARKER, headline=verdict_line(doc), summary_line=summary_line,
        nothing_to_test=pr.get("nothing_to_test"), policy_note=policy_note(pr), sections=sections,
        flaky=flaky[:20], skipped=skipped, reach=list(reach), fixes=list(fixes),
        truncated=truncated, version=version, tests_run=stats.get("tests_run", 0),
        tests_valid=stats.get("tests_valid", 0), seconds=round(stats.get("seconds", 0)),
        base=(pr.get("base") or "")[:12], head=(pr.get("head") or "")[:12], details_url=details_url)
