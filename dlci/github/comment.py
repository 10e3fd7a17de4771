"""The PR comment: one per pull request, verdict first, findings grouped by what the maintainer must do about them.

Rendered from ``dlci/templates/comment.md.j2``. GitHub rejects comment bodies over 65,536 characters, so the body is
rendered with everything, then with reproducers shortened, then dropped, then with fewer findings listed, until it
fits; what was left out is said at the end with a pointer to the job summary and the artifact.
"""
from __future__ import annotations

import re
from pathlib import Path

from dlci.findings import attribution

MARKER = "<!-- dlci:sticky-comment -->"
COMMENT_LIMIT = 65_536
REPRO_INLINE_LIMIT = 6_000  # characters of one reproducer shown inline at most


def _env():
    import jinja2
    return jinja2.Environment(loader=jinja2.PackageLoader("dlci", "templates"), autoescape=False,
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)


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


def _base_note(f: dict) -> str | None:
    base = f.get("base") or {}
    if f.get("new_in_pr") and base.get("status") not in (None, "pass"):
        return f"On base the same instances also fail, differently ({base.get('status')}: {base.get('symptom')})."
    return None


def _bisect_note(f: dict) -> str | None:
    """Since when (dlci.bisect.attribution): the PR's commit, or the release, that introduced the finding."""
    said = []
    if (f.get("introduced_by") or {}).get("report"):
        said.append(f"Introduced by commit {f['introduced_by']['report']}.")
    if (f.get("since") or {}).get("report"):
        said.append(f"Since release: {f['since']['report']}.")
    # a commit subject is the PR author's text: it must not close a code span or open markup
    return " ".join(said).replace("`", "'").replace("<", "&lt;")[:600] or None


def verdict_line(doc: dict) -> str:
    findings = [f for f in doc["findings"] if attribution(f) != "known"]
    new = sum(1 for f in findings if attribution(f) == "new")
    old = sum(1 for f in findings if attribution(f) == "on_base")
    pr = doc.get("pr") or {}
    if pr.get("nothing_to_test"):
        return ":white_check_mark: dlci: nothing to test in this PR"
    if new:
        return f":x: dlci: {new} new bug{'s' if new != 1 else ''} in this PR" + (
            f" ({old} already on base)" if old else "")
    if old:
        return f":warning: dlci: no new bug; {old} already on the base revision"
    if any(attribution(f) == "unattributed" for f in findings):
        return f":x: dlci: {len(findings)} finding(s)"
    return ":white_check_mark: dlci: no bug found in the operators this PR touches"


def render(doc: dict, out_dir: Path, *, details_url: str | None = None, version: str = "") -> str:
    """The comment body for a findings document (reproducers read from ``out_dir``), within GitHub's limit."""
    pr = doc.get("pr") or {}
    stats = doc["stats"]
    touched = pr.get("touched") or []
    findings = []
    for f in doc["findings"]:
        text = None
        if f.get("repro") and (Path(out_dir) / f["repro"]).is_file():
            text = (Path(out_dir) / f["repro"]).read_text(encoding="utf-8", errors="replace")
        findings.append({**f, "selected_by": _selected_by(f, touched), "base_note": _base_note(f),
                         "bisect_note": _bisect_note(f), "full_repro": text})
    skipped = []
    for target, counts in (stats.get("per_target") or {}).items():
        if counts.get("unsupported"):
            skipped.append(f"{target}: {counts['unsupported']} test(s) of unsupported operators/forms")
    for gap in ((pr.get("coverage") or {}).get("unreached") or [])[:20]:
        skipped.append(f"test gap: `{gap['file']}:{gap['line']}` ({gap['region'] or 'module level'}) changed, "
                       "but no instance ran it")
    if pr.get("targets_not_installed"):
        skipped.append("targets reached by the diff but not installed on this runner: "
                       + ", ".join(pr["targets_not_installed"]))
    flaky = sorted({f["signature"] for f in stats.get("flaky") or []})

    # progressively smaller renderings until the body fits
    for repro_limit, max_findings in ((REPRO_INLINE_LIMIT, None), (1500, None), (0, None), (0, 30), (0, 10), (0, 3)):
        body = _render_once(doc, findings, flaky, skipped, repro_limit, max_findings, details_url, version)
        if len(body) <= COMMENT_LIMIT:
            return body
    return body[:COMMENT_LIMIT - 200] + "\n\n_(cut to fit GitHub's comment limit; see the job summary)_\n"


def _render_once(doc, findings, flaky, skipped, repro_limit, max_findings, details_url, version) -> str:
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
        # results may come from a fork's run (untrusted): no value can close its code span or fence early
        g["fence"] = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", g["repro_text"] or "")), default=0))
        for key in ("operator", "target", "symptom", "oracle", "stage", "repro", "selected_by"):
            if isinstance(g.get(key), str):
                g[key] = g[key].replace("`", "'").replace("\n", " ").replace("<", "&lt;")[:200]
        g["also_in"] = [str(x).replace("`", "'")[:80] for x in g.get("also_in") or []]
        shown.append(g)
    if repro_limit == 0 and any(f["full_repro"] for f in findings):
        notes.append("Reproducers are not inlined (the comment would exceed GitHub's size limit)")
    if max_findings and len(findings) > max_findings:
        notes.append(f"{len(findings) - max_findings} more finding(s) are not listed here")
    sections = [
        {"title": "NEW IN THIS PR", "blurb": "These fail on this PR's code and not on the base revision.",
         "findings": [f for f in shown if attribution(f) == "new"]},
        {"title": "ALREADY ON BASE", "blurb": "The same failure happens on the base revision: not caused by this PR.",
         "findings": [f for f in shown if attribution(f) == "on_base"]},
        {"title": "FINDINGS", "blurb": "Not classified against a base revision.",
         "findings": [f for f in shown if attribution(f) == "unattributed"]},
        {"title": "KNOWN ISSUES", "blurb": "Matched by `known_issues` in `.dlci.yml`: tracked elsewhere, never fail "
                                           "the job.",
         "findings": [dict(f, base_note=f"Known: {f['known'].get('link') or ''} {f['known'].get('note') or ''}"
                           .strip()) for f in shown if attribution(f) == "known"]},
    ]
    truncated = ("; ".join(notes) + ": see the job summary and the `dlci-out` artifact.") if notes else ""
    ops = pr.get("operators") or sorted({t["operator"] for t in pr.get("touched") or []})
    summary_line = (f"{len(ops)} operator(s) touched by this PR"
                    + (f" ({', '.join(f'`{o}`' for o in ops[:12])}{' …' if len(ops) > 12 else ''})" if ops else "")
                    + f"; {stats.get('tests_run', 0)} tests through "
                    + (", ".join(sorted(stats.get("per_target") or {})) or "no target") + ".")
    return _env().get_template("comment.md.j2").render(
        marker=MARKER, headline=verdict_line(doc), summary_line=summary_line,
        nothing_to_test=pr.get("nothing_to_test"), sections=sections, flaky=flaky[:20], skipped=skipped,
        truncated=truncated, version=version, tests_run=stats.get("tests_run", 0),
        tests_valid=stats.get("tests_valid", 0), seconds=round(stats.get("seconds", 0)),
        base=(pr.get("base") or "")[:12], head=(pr.get("head") or "")[:12], details_url=details_url)
