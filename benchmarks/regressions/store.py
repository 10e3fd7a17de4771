"""The cases' upstream test files: extracted at run time from the upstream cache, checked against recorded sha256.

    python benchmarks/regressions/store.py [--upstream DIR] CASE DEST   # write the case's test files into DEST
    python benchmarks/regressions/store.py --stats                      # cases and files recorded
    python benchmarks/regressions/store.py --record CASE ...            # re-extract with the case's tool, record sha256

The tree keeps no upstream test file. materialise.yaml records, per case with an `upstream_test` in cases.yaml, the
names (<case>__<module>.py) and sha256 of its test files as the extraction tools write them: screen.py's extract for
the cases it added (`screen:`), else extract_tests.py (imports, module helpers and the listed test functions of the
upstream test file at the case's commit, with the tools' renames and the case's recorded `edits`) or
extract_opinfo_tests.py (torchlib's OpInfo harness modules at the commit, restricted to the fix's entries). files()
runs that tool again on the upstream repository in the cache (materialise.py: the cases' commits, and the tags the
tools read at the commits pinned in materialise.yaml `pins`) and returns the files only if their names and sha256 are
the recorded ones, so the files are byte for byte those the ground truth was established with. put() records what a
tool wrote (extract_tests.py, extract_opinfo_tests.py, screen.py --emit).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import io
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import yaml  # noqa: E402

import materialise  # noqa: E402

UPSTREAM = HERE / "upstream"   # dlci's own _torch_numeric.py (the numerical verify_model of the torch tests)


class StoreError(Exception):
    pass


def stem(case_id: str) -> str:
    return case_id.replace("-", "_")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _cases() -> dict:
    return {c["id"]: c for c in yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]}


def recorded(case_id: str, doc: dict | None = None) -> dict[str, str]:
    """{file name: sha256} of the case's test files, in name order ({} for a case without an upstream test)"""
    entry = (doc or materialise.load())["cases"].get(case_id) or {}
    return dict(sorted((entry.get("tests") or {}).items()))


def extract(case: dict, dest: Path, git_dir: str | None = None, pins: dict[str, str] | None = None) -> None:
    """write the case's test files into dest as the tool that wrote them does (loose files), reading the upstream
    repository at git_dir (default: its clone in the upstream cache); pins: {tag: commit} read in the tag's place"""
    import extract_opinfo_tests as eo
    import extract_tests as et
    import screen
    if git_dir is None:
        git_dir = str(materialise.git_dir(case["repo"]))
    if pins is None:
        pins = (materialise.load().get("pins") or {}).get(case["repo"], {})
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
                    eo.write_case(case["id"], case["commit"], set(item["opinfo_entries"]), item.get("edits", []))
                else:
                    src = subprocess.run(["git", "--git-dir", git_dir, "show", f"{case['commit']}:{item['file']}"],
                                         capture_output=True, text=True, check=True).stdout
                    (dest / et.test_file_name(case["id"], item["file"])).write_text(et.render(case, item, src))
    finally:
        eo.show, eo.GIT, eo.OUT, screen.show = saved


_FILES: dict[str, list[tuple[str, bytes]]] = {}


def files(case_id: str, doc: dict | None = None) -> list[tuple[str, bytes]]:
    """[(name, content)] of the case's test files in name order, extracted from the upstream cache and checked
    against the recorded names and sha256 (StoreError otherwise; materialise.UpstreamMissing without the cache)"""
    want = recorded(case_id, doc)
    if not want:
        return []
    key = f"{materialise.root()}|{case_id}|{sorted(want.items())}"
    if key in _FILES:
        return _FILES[key]
    case = _cases().get(case_id)
    if case is None:
        raise StoreError(f"{case_id}: not a case of cases.yaml")
    pins = ((doc or materialise.load()).get("pins") or {}).get(case["repo"], {})
    materialise.require([case["repo"]], {case["repo"]: [case["commit"], *pins.values()]})
    with tempfile.TemporaryDirectory(prefix="store-") as tmp:
        try:
            extract(case, Path(tmp), pins=pins)
        except materialise.UpstreamMissing:
            raise
        except subprocess.CalledProcessError as e:
            if not materialise.has_commit(case["repo"], case["commit"]):
                raise materialise.missing(f"commit {case['commit'][:12]} of {case['repo']} is not in the upstream "
                                           f"cache") from None
            raise StoreError(f"{case_id}: extraction failed: {e.stderr.strip()[:300] if e.stderr else e}") from None
        except (SystemExit, Exception) as e:  # noqa: BLE001  (the tools exit with a message)
            raise StoreError(f"{case_id}: extraction failed: {str(e)[:300]}") from None
        got = {f.name: f.read_bytes() for f in sorted(Path(tmp).glob("*.py"))}
    if set(got) != set(want):
        raise StoreError(f"{case_id}: the tools write {sorted(got)}, materialise.yaml records {sorted(want)}")
    for name, data in got.items():
        if sha256(data) != want[name]:
            raise StoreError(f"{case_id}: {name} is extracted with sha256 {sha256(data)[:16]}, materialise.yaml "
                             f"records {want[name][:16]} (the upstream text, a tool or an edit changed)")
    _FILES[key] = [(n, got[n]) for n in sorted(got)]
    return _FILES[key]


def materialise_files(case_id: str, dest: Path) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, data in files(case_id):
        (dest / name).write_bytes(data)
        out.append(dest / name)
    return out


def put(case_id: str, new: dict[str, str]) -> None:
    """record the given files of a case ({name: text}, as a tool wrote them): their names and sha256, replacing the
    records of the same names"""
    doc = materialise.load()
    for name in new:
        if not name.startswith(f"{stem(case_id)}__"):
            raise StoreError(f"{name} is not a file of {case_id} (<case>__<module>.py)")
    entry = doc["cases"].setdefault(case_id, {})
    tests = dict(entry.get("tests") or {})
    tests.update({name: sha256(text.encode()) for name, text in new.items()})
    entry["tests"] = dict(sorted(tests.items()))
    materialise.save(doc)
    _FILES.clear()


def record(case_id: str) -> dict[str, tuple[str, str]]:
    """extract the case's test files again with the tool that wrote them (extract()) and record their sha256 (after a
    change of a tool: its renames, its guards); the names must be the recorded ones. Returns {name: (old, new)}"""
    case = _cases().get(case_id)
    if case is None:
        raise StoreError(f"{case_id}: not a case of cases.yaml")
    want = recorded(case_id)
    pins = (materialise.load().get("pins") or {}).get(case["repo"], {})
    materialise.require([case["repo"]], {case["repo"]: [case["commit"], *pins.values()]})
    with tempfile.TemporaryDirectory(prefix="store-") as tmp:
        extract(case, Path(tmp), pins=pins)
        got = {f.name: f.read_text() for f in sorted(Path(tmp).glob("*.py"))}
    if want and set(got) != set(want):
        raise StoreError(f"{case_id}: the tools write {sorted(got)}, materialise.yaml records {sorted(want)}")
    put(case_id, got)
    return {name: (want.get(name, ""), sha256(text.encode())) for name, text in got.items()}


def stats(doc: dict | None = None) -> dict:
    doc = doc or materialise.load()
    tests = {cid: e.get("tests") or {} for cid, e in doc["cases"].items()}
    return {"cases_with_tests": sum(1 for t in tests.values() if t), "files": sum(len(t) for t in tests.values()),
            "distinct_files": len({h for t in tests.values() for h in t.values()})}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", help="the upstream cache folder (materialise.py)")
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--record", nargs="+", metavar="CASE",
                    help="extract these cases' test files again with their tool and record the names and sha256")
    ap.add_argument("case", nargs="?")
    ap.add_argument("dest", nargs="?", type=Path)
    args = ap.parse_args()
    if args.stats:
        print(yaml.safe_dump(stats(), sort_keys=False), end="")
        return
    if args.record:
        materialise.set_root(args.upstream)
        for cid in args.record:
            try:
                for name, (old, new) in record(cid).items():
                    print(f"{name}: sha256 {new[:16]} " + ("unchanged" if old == new else
                                                             f"recorded (was {old[:16] or 'not recorded'})"))
            except materialise.UpstreamMissing as e:
                raise SystemExit(str(e))
            except StoreError as e:
                raise SystemExit(f"store.py: {e}")
        return
    if not args.case or not args.dest:
        ap.error("CASE and DEST are required")
    if not recorded(args.case):
        raise SystemExit(f"{args.case}: no upstream test files recorded in materialise.yaml")
    materialise.set_root(args.upstream)
    try:
        for path in materialise_files(args.case, args.dest):
            print(path)
    except materialise.UpstreamMissing as e:
        raise SystemExit(str(e))
    except StoreError as e:
        raise SystemExit(f"store.py: {e}")


if __name__ == "__main__":
    main()
