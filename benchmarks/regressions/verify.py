"""Verify the stored upstream test files: re-extract them from the pinned upstream commits and compare their hashes.

    python benchmarks/regressions/verify.py --git-dir apache-tvm.git --git-dir onnxscript.git [CASE ...]

Needs local git directories of apache/tvm and microsoft/onnxscript (any clones holding the cases' commits; a case
whose commit is in none of them is reported as not checked). For each case of cases.yaml with an `upstream_test`:

1. the store: each of the case's files in upstream/manifest.json materialises (upstream/files/ body + header) to the
   sha256 the manifest records (store.py);
2. re-extraction: the tool that wrote the case's files runs again, into a temporary folder, on the upstream test
   files at the case's pinned commit (cases.yaml `commit`) -- screen.py's extract for the cases it added (`screen:`),
   else extract_tests.py (one file per test module: imports, helpers, the listed test functions) or
   extract_opinfo_tests.py (the OpInfo harness modules) -- with the tools' renames and the case's recorded `edits`.
   Tags the tools read besides the commit (onnxscript's v0.7.1 release tests) are read at the commit pinned in the
   manifest (`pins`), whatever the tag names now. The set of file names must be the manifest's and each file's
   sha256 the recorded one.

Each file is reported OK or MISMATCH (with the reason: not stored, stored but not produced, sha256 and the first
differing line) or ERROR (the extraction failed); exit status 1 on any, 2 if no mismatch but some case could not be
checked (no git directory has its commit), 0 when every case was checked and all its files are OK.

What OK proves: the stored file is, byte for byte, what today's extraction code makes of the upstream file at the
pinned commit -- its header (source URL, licence, renames applied), the upstream text kept, the mechanical renames of
the tools (listed in each header) and the case-specific edits recorded in cases.yaml (`upstream_test[].edits`,
described by `test_adaptation`). It does not prove that a rename or an edit preserves what the test checks (that is
the ground truth's job: groundtruth.py), and it does not cover upstream/_torch_numeric.py (dlci's own code).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import io
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import yaml  # noqa: E402

import extract_opinfo_tests as eo  # noqa: E402
import extract_tests as et  # noqa: E402
import screen  # noqa: E402
import store  # noqa: E402


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def has_commit(git_dir: str, commit: str) -> bool:
    return subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode == 0


def tool_of(case: dict) -> str:
    if case.get("screen"):
        return "screen.py"
    kinds = {"extract_opinfo_tests.py" if i.get("opinfo_entries") else "extract_tests.py"
             for i in case.get("upstream_test") or []}
    return "+".join(sorted(kinds))


def adaptations(case: dict) -> str:
    """what the tools apply besides verbatim extraction, for the report"""
    out = []
    for item in case.get("upstream_test") or []:
        name = Path(item["file"]).name
        if item.get("opinfo_entries"):
            out.append(f"{name}: OpInfo harness, entries {', '.join(item['opinfo_entries'])}")
        if item.get("harness"):
            out.append(f"ops_test.py, ops_test_common.py from the release tests {item['harness']}")
        if item.get("numeric"):
            out.append(f"{name}: verify_model -> {item['numeric']}")
        if item.get("edits"):
            out.append(f"{name}: {len(item['edits'])} recorded edit(s)")
    return "; ".join(out) or "renames only"


def reextract(case: dict, git_dir: str, dest: Path, pins: dict[str, str]) -> None:
    """write the case's test files into dest as the tool that wrote them does (loose files)"""
    case = copy.deepcopy(case)   # screen.extract records the harness in the items
    saved = eo.show, eo.GIT, eo.OUT, screen.show
    # a pinned tag is read at its commit (screen.extract replaces eo.show with its own, which reads screen.show)
    eo.show = lambda commit, path: saved[0](pins.get(commit, commit), path)
    screen.show = lambda gitdir, rev, path: saved[3](gitdir, pins.get(rev, rev), path)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            if case.get("screen"):
                proj = next(p for p in screen.PROJECTS.values() if p["repo"] == case["repo"])
                screen.extract(proj, case, git_dir, dest)
                return
            for item in case.get("upstream_test") or []:
                if item.get("opinfo_entries"):
                    eo.GIT, eo.OUT = git_dir, dest
                    eo.write_case(case["id"], case["commit"], set(item["opinfo_entries"]),
                                  [("ops_test_data", e["old"], e["new"]) for e in item.get("edits", [])])
                else:
                    src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{case['commit']}:{item['file']}"],
                                         capture_output=True, text=True, check=True).stdout
                    (dest / et.test_file_name(case["id"], item["file"])).write_text(et.render(case, item, src))
    finally:
        eo.show, eo.GIT, eo.OUT, screen.show = saved


def source_of(text: str) -> str:
    m = re.search(r"^# ---- from https://github\.com/[^/]+/[^/]+/blob/([^/]+)/(\S+)", text, re.M)
    return f"{m.group(1)[:10]}:{m.group(2)}" if m else "?"


def first_difference(stored: str, fresh: str) -> str:
    for i, (a, b) in enumerate(zip(stored.splitlines(), fresh.splitlines()), 1):
        if a != b:
            col = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            lo = max(0, col - 20)
            return (f"first difference line {i} col {col + 1}: stored {a[lo:col + 40]!r}, "
                    f"re-extracted {b[lo:col + 40]!r}")
    n, m = len(stored.splitlines()), len(fresh.splitlines())
    return f"stored {n} lines, re-extracted {m} lines" if n != m else "line endings"


def verify_case(case: dict, git_dir: str, manifest: dict, pins: dict[str, str]) -> list[tuple[str, str, str]]:
    """[(status, file name, detail)]"""
    rows = []
    stored = {}
    for e in store.entries(case["id"], manifest):
        try:
            stored[e["name"]] = store.files(case["id"], {"cases": {case["id"]: [e]}})[0][1]
        except store.StoreError as err:
            rows.append(("MISMATCH", e["name"], f"store: {err}"))
    recorded = {e["name"]: e["sha256"] for e in store.entries(case["id"], manifest)}
    with tempfile.TemporaryDirectory(prefix="verify-") as tmp:
        try:
            reextract(case, git_dir, Path(tmp), pins)
        except (SystemExit, Exception) as err:  # noqa: BLE001  (the tools exit with a message)
            return rows + [("ERROR", "-", f"extraction failed: {str(err)[:300]}")]
        fresh = {f.name: f.read_bytes() for f in sorted(Path(tmp).glob("*.py"))}
    for name in sorted(set(fresh) | set(recorded)):
        if name not in recorded:
            rows.append(("MISMATCH", name, "produced by the tool, not in the manifest"))
        elif name not in fresh:
            rows.append(("MISMATCH", name, "in the manifest, not produced by the tool"))
        elif sha256(fresh[name]) != recorded[name]:
            why = (f"; {first_difference(stored[name].decode(), fresh[name].decode())}" if name in stored else "")
            rows.append(("MISMATCH", name, f"sha256 {sha256(fresh[name])[:16]} re-extracted, {recorded[name][:16]} "
                                           f"recorded{why}"))
        elif name in stored:
            rows.append(("OK", name, f"{source_of(fresh[name].decode())} sha256 {recorded[name][:16]}"))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", action="append", default=[], help="a local git directory of apache/tvm or "
                    "microsoft/onnxscript (repeat for both)")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    doc = yaml.safe_load((HERE / "cases.yaml").read_text())
    manifest = store.load()
    cases = [c for c in doc["cases"] if c.get("upstream_test") and (not args.cases or c["id"] in args.cases)]
    unknown = set(args.cases) - {c["id"] for c in doc["cases"]}
    if unknown:
        raise SystemExit(f"unknown cases: {', '.join(sorted(unknown))}")
    counts = {"verified": 0, "mismatch": 0, "unchecked": 0}
    files = {"OK": 0, "MISMATCH": 0, "ERROR": 0}
    if not args.cases:   # stored files no case names
        for cid in sorted(set(manifest["cases"]) - {c["id"] for c in cases}):
            for e in manifest["cases"][cid]:
                print(f"MISMATCH  {cid}  {e['name']}  stored for a case with no upstream_test in cases.yaml")
                files["MISMATCH"] += 1
    for case in cases:
        git_dir = next((g for g in args.git_dir if has_commit(g, case["commit"])), None)
        if git_dir is None:
            print(f"UNCHECKED {case['id']}  {case['repo']}@{case['commit'][:10]} is in none of the git directories")
            counts["unchecked"] += 1
            continue
        pins = {}
        for tag, sha in manifest.get("pins", {}).get(case["repo"], {}).items():
            now = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "-q", "--verify", f"{tag}^{{commit}}"],
                                 capture_output=True, text=True).stdout.strip()
            if now != sha:
                print(f"NOTE      {case['repo']} tag {tag} is {now[:10] or 'absent'} here; read at the pinned "
                      f"{sha[:10]}", file=sys.stderr)
            pins[tag] = sha
        rows = verify_case(case, git_dir, manifest, pins)
        ok = bool(rows) and all(s == "OK" for s, _, _ in rows)
        counts["verified" if ok else "mismatch"] += 1
        print(f"{'OK' if ok else 'MISMATCH':9} {case['id']}  [{tool_of(case)} at {case['commit'][:10]}; "
              f"{adaptations(case)}]")
        for status, name, detail in rows:
            files[status] += 1
            print(f"  {status:8} {name}  {detail}")
    print(f"cases: {counts['verified']} verified (every file re-extracted byte for byte), {counts['mismatch']} with a "
          f"mismatch or error, {counts['unchecked']} not checked; files: {files['OK']} OK, {files['MISMATCH']} "
          f"MISMATCH, {files['ERROR']} ERROR")
    if counts["mismatch"] or files["MISMATCH"] or files["ERROR"]:
        return 1
    return 2 if counts["unchecked"] else 0


if __name__ == "__main__":
    sys.exit(main())
