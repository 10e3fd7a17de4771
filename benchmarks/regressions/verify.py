"""Verify the corpus's materialisation: every case's repository and test files against their recorded hashes.

    python benchmarks/regressions/verify.py [--upstream DIR] [--no-build] [CASE ...]

Needs the upstream cache (materialise.py fetch). For each case of cases.yaml (default: all):

1. sources: build.py builds the case's repository from the installed release and the upstream cache -- each edited
   file's installed version must have the recorded sha256, the recorded edits must give the recorded sha256, and the
   repository's base and head must have the recorded git tree ids (so every file of both revisions is checked);
2. tests: store.py extracts the case's upstream test files with the tool that wrote them (screen.py's extract for
   the cases it added, else extract_tests.py or extract_opinfo_tests.py) from the upstream file at the case's pinned
   commit (tags the tools read: at the commits pinned in materialise.yaml `pins`), with the tools' renames and the
   case's recorded `edits`; the names must be the recorded ones and each file's sha256 the recorded one;
3. suite: suite.py reads the case repository's own frontend test suite at the fix's parent, with its renames; its
   digest (each file's path and sha256) must be the one recorded (`suite`).

Each case is reported OK or MISMATCH (the first reason) or UNCHECKED (a commit is not in the cache); exit status 1 on
any mismatch, 2 if no mismatch but some case could not be checked, 0 when every case was checked and all is OK.

What OK proves: the case's repository and test files are, byte for byte, those the corpus was recorded with (the
ground truth of groundtruth.py was established on them): what today's code makes of the installed release and the
pinned upstream text, with the recorded renames, edits and literal lines. It does not prove that a rename or an edit
keeps what a test checks (the ground truth's job), and it does not cover upstream/_torch_numeric.py (dlci's own
code, in the tree).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import build  # noqa: E402
import materialise  # noqa: E402
import store  # noqa: E402
import suite  # noqa: E402


def tool_of(case: dict) -> str:
    if case.get("screen"):
        return "screen.py"
    kinds = {"extract_opinfo_tests.py" if i.get("opinfo_entries") else "extract_tests.py"
             for i in case.get("upstream_test") or []}
    return "+".join(sorted(kinds)) or "no upstream test"


def verify_case(case: dict, doc: dict, do_build: bool = True) -> tuple[str, list[str]]:
    """(OK / MISMATCH / UNCHECKED, detail lines)"""
    entry = doc["cases"].get(case["id"])
    if not entry:
        return "MISMATCH", ["no entry in materialise.yaml"]
    rows, status = [], "OK"
    if do_build:
        with tempfile.TemporaryDirectory(prefix="verify-") as tmp:
            try:
                build.build(case, Path(tmp) / "repo", entry=entry)
                sides = entry["sources"] + entry.get("base_sources", [])   # base_sources: a transplant's base
                lit = sum(materialise.literal_lines(f.get("edits", [])) for f in sides)
                rows.append(f"sources  {len(sides)} file(s) sha256 OK, trees base "
                            f"{entry['tree']['base'][:12]} head {entry['tree']['head'][:12]} OK"
                            + (f" ({lit} literal line(s))" if lit else ""))
            except materialise.UpstreamMissing as e:
                return "UNCHECKED", [str(e).split("\n")[0]]
            except build.BuildError as e:
                status = "MISMATCH"
                rows.append(f"sources  {e}")
    want = store.recorded(case["id"], doc)
    if case.get("upstream_test") and not want:
        return "MISMATCH", rows + ["tests    upstream_test in cases.yaml, no test files recorded"]
    if want:
        try:
            got = store.files(case["id"], doc)
            rows += [f"tests    {name} sha256 {want[name][:16]} OK" for name, _ in got]
        except materialise.UpstreamMissing as e:
            return "UNCHECKED", rows + [str(e).split("\n")[0]]
        except store.StoreError as e:
            status = "MISMATCH"
            rows.append(f"tests    {e}")
    recorded = entry.get("suite") or {}
    try:
        rev, found = suite.files(case)
    except materialise.UpstreamMissing as e:
        return "UNCHECKED", rows + [str(e).split("\n")[0]]
    got = suite.digest(found)
    if recorded.get("sha256") == got and recorded.get("commit") == rev:
        rows.append(f"suite    {len(found)} file(s) at {rev[:12]} sha256 {got[:16]} OK")
    else:
        status = "MISMATCH"
        rows.append(f"suite    {len(found)} file(s) at {rev[:12]} hash to {got[:16]}, materialise.yaml records "
                    f"{str(recorded.get('sha256'))[:16]} at {str(recorded.get('commit'))[:12]}")
    return status, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", help="the upstream cache folder (materialise.py)")
    ap.add_argument("--no-build", action="store_true", help="test files only")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    cases = materialise.cases_for(args.cases, args.upstream)
    doc = materialise.load()
    all_cases = build.load_cases()["cases"]
    counts = {"OK": 0, "MISMATCH": 0, "UNCHECKED": 0}
    files = 0
    if not args.cases:
        for cid in sorted(set(doc["cases"]) - {c["id"] for c in all_cases}):
            print(f"MISMATCH  {cid}  in materialise.yaml, not a case of cases.yaml")
            counts["MISMATCH"] += 1
    for case in cases:
        status, rows = verify_case(case, doc, not args.no_build)
        counts[status] += 1
        files += sum(1 for r in rows if r.startswith("tests ") and r.endswith(" OK"))
        print(f"{status:9} {case['id']}  [{case['kind']}; {case['repo']}@{case['commit'][:10]}; {tool_of(case)}]")
        for r in rows:
            print(f"  {r}")
    print(f"cases: {counts['OK']} verified, {counts['MISMATCH']} with a mismatch, {counts['UNCHECKED']} not checked; "
          f"test files: {files} OK")
    if counts["MISMATCH"]:
        return 1
    return 2 if counts["UNCHECKED"] else 0


if __name__ == "__main__":
    sys.exit(main())
