"""Reports of a campaign: findings.json (the contract) and report.md (for people)."""
from __future__ import annotations

import json
import os
from pathlib import Path


def write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)  # readers never see a half-written file


def write_reports(out: Path, doc: dict, campaign=None) -> None:
    write_json_atomic(out / "findings.json", doc)
    (out / "report.md").write_text(render_markdown(doc), encoding="utf-8")


def verdict(doc: dict) -> str:
    n = len(doc["findings"])
    st = doc["stats"]
    tail = " (interrupted: partial results)" if st.get("interrupted") else ""
    if n == 0:
        return f"No confirmed findings in {st['tests_valid']} valid tests{tail}."
    return f"{n} confirmed finding{'s' if n != 1 else ''} in {st['tests_valid']} valid tests{tail}."


def render_markdown(doc: dict) -> str:
    st = doc["stats"]
    lines = [f"# dlci report", "", f"**{verdict(doc)}**", "",
             f"{st['tests_run']} tests run ({st['tests_valid']} valid) on {st.get('operators', '?')} operators, "
             f"{st.get('instances', '?')} instances, in {st['seconds']:.0f} s.", ""]
    if doc["findings"]:
        lines += ["| id | oracle | operator | target | stage | symptom | instances | reproducer |",
                  "|---|---|---|---|---|---|---|---|"]
        for f in doc["findings"]:
            lines.append(f"| {f['id']} | {f['oracle']} | `{f['operator']}` | {f['target']} {f['target_version']} | "
                         f"{f['stage']} | {f['symptom']} | {len(f['instances'])} | `{f['repro']}` |")
        lines.append("")
        for f in doc["findings"]:
            lines += [f"## {f['id']}: {f['target']} — {f['symptom']} on `{f['operator']}`", "",
                      f"- stage: {f['stage']}; origin: {f['origin'].get('source')} `{f['origin'].get('test')}`",
                      f"- signature: `{f['signature']}`",
                      *([f"- the same failure also shows through: {', '.join(f['also_in'])}"] if f.get("also_in") else []),
                      f"- new in PR: {'n/a' if f['new_in_pr'] is None else f['new_in_pr']}",
                      f"- reproducer: `{f['repro']}` (run it alone: exits 1 while the bug reproduces)", "",
                      "<details><summary>message</summary>", "", "```", f["message"][:1500], "```", "", "</details>",
                      ""]
    lines += ["## Per target", "", "| target | pass | unsupported | invalid | crash | inconsistency |",
              "|---|---|---|---|---|---|"]
    for t, c in st["per_target"].items():
        lines.append(f"| {t} | {c['pass']} | {c['unsupported']} | {c['invalid']} | {c['crash']} | "
                     f"{c['inconsistency']} |")
    if st.get("flaky"):
        lines += ["", f"## Flaky ({len(st['flaky'])})", "", "Failures that did not reproduce on a re-run "
                  "(not reported as bugs):", ""]
        lines += [f"- `{f['signature']}`" for f in st["flaky"][:50]]
    if st.get("unreproduced"):
        lines += ["", "## Confirmed in dlci but not reproduced by the standalone script", ""]
        lines += [f"- `{f['signature']}`" for f in st["unreproduced"][:50]]
    return "\n".join(lines) + "\n"
