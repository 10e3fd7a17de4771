"""The real-regressions corpus (benchmarks/regressions): the tree keeps facts and edits, no upstream text, and the
edits materialise byte for byte.

Without the upstream cache (benchmarks/regressions/materialise.py fetch): the data's shape, the installed files the
edits were recorded against, a case whose edits need no upstream line built end to end, the edit language on a small
upstream repository made here from the installed release (record, then materialise, then build), and the entry
points' message when the cache is missing. With the cache, two real cases (TVM, onnxscript) build and extract their
test files; without it those tests skip saying why. verify.py checks every case (minutes): not run here."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "benchmarks" / "regressions"
sys.path.insert(0, str(REGRESSIONS))

import build  # noqa: E402
import materialise  # noqa: E402
import store  # noqa: E402

HEX40, HEX64 = re.compile(r"^[0-9a-f]{40}$"), re.compile(r"^[0-9a-f]{64}$")
LITERAL_LINES_MAX = 8   # hand-written lines of the ported reverts (the README gives the count)


@pytest.fixture(scope="module")
def cases():
    return yaml.safe_load((REGRESSIONS / "cases.yaml").read_text())["cases"]


@pytest.fixture(scope="module")
def doc():
    return materialise.load()


@pytest.fixture
def no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DLCI_UPSTREAM", str(tmp_path / "no-upstream-cache"))
    materialise.set_root(None)
    yield tmp_path / "no-upstream-cache"
    materialise.set_root(None)


def _cache_present(repos=("apache/tvm", "microsoft/onnxscript")) -> bool:
    materialise.set_root(None)
    try:
        materialise.require(list(repos))
        return True
    except materialise.UpstreamMissing:
        return False


needs_cache = pytest.mark.skipif(not _cache_present(), reason="the upstream cache is absent (run "
                                 "benchmarks/regressions/materialise.py fetch; DLCI_UPSTREAM names another folder)")


def test_the_tree_holds_no_upstream_text():
    # the licence headers of the upstream files (split so that this file does not hold them whole)
    licences = ("Licensed to the Apache " + "Software Foundation", "Copyright (c) " + "Microsoft Corporation")
    for path in REGRESSIONS.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            text = path.read_text(errors="replace")
            assert not any(l in text for l in licences), path
            assert path.suffix not in (".diff", ".patch"), path
    assert sorted(p.name for p in (REGRESSIONS / "upstream").iterdir() if p.name != "__pycache__") == \
        ["_torch_numeric.py"]


def test_every_case_is_recorded(cases, doc):
    ids = {c["id"] for c in cases}
    assert set(doc["cases"]) == ids
    literal = 0
    for case in cases:
        assert "patch" not in case, case["id"]
        entry = doc["cases"][case["id"]]
        assert HEX40.match(entry["tree"]["base"]) and HEX40.match(entry["tree"]["head"]), case["id"]
        assert entry["sources"] and sorted(f["path"] for f in entry["sources"]) == [f["path"] for f in entry["sources"]]
        assert not entry.get("base_sources") or case["revert"].startswith("transplant:"), case["id"]
        for f in entry["sources"] + entry.get("base_sources", []):
            assert f["path"].startswith(build.LAYOUT[build.package_of(case)][0] + "/")
            moved = "base_sources" in entry   # a transplant: a file of the upstream package may be absent on a side
            if moved and (f["installed"] is None or f["result"] is None):
                assert f["installed"] is not None or f["result"] is not None, f
            else:
                assert HEX64.match(f["installed"]) and HEX64.match(f["result"]) and f["edits"]
            end = 0
            for e in f.get("edits", []):
                a, b = e["lines"]
                assert end < a and a - 1 <= b, (case["id"], f["path"], e["lines"])   # in order, apart, valid
                end = b
                for seg in e.get("new", []):
                    assert set(seg) <= {"rev", "path", "lines", "sub", "indent", "text"}, seg
                    if "text" in seg:
                        assert set(seg) == {"text"} and seg["text"].endswith("\n")
                        literal += len(materialise.lines_of(seg["text"]))
                    else:
                        assert seg["lines"][0] <= seg["lines"][1]
                        assert ("rev" in seg) == ("path" in seg) and (not seg.get("rev") or HEX40.match(seg["rev"]))
        # the repository's own test suite at the fix's parent (suite.py): a commit and a digest, no text
        assert set(entry["suite"]) == {"commit", "files", "sha256"} and HEX40.match(entry["suite"]["commit"]) \
            and HEX64.match(entry["suite"]["sha256"]) and entry["suite"]["files"] > 0, case["id"]
        tests = store.recorded(case["id"], doc)
        assert bool(tests) == bool(case.get("upstream_test")), case["id"]
        assert all(n.startswith(f"{store.stem(case['id'])}__") and n.endswith(".py") and HEX64.match(h)
                   for n, h in tests.items())
    assert 0 < literal <= LITERAL_LINES_MAX


def test_installed_files_are_the_recorded_ones(cases, doc):
    seen = {}
    for case in cases:
        for f in doc["cases"][case["id"]]["sources"]:
            seen[(build.package_of(case), f["path"])] = f["installed"]
    for (package, path), digest in seen.items():
        assert materialise.sha256(build.source_path(package, path).read_bytes()) == digest, path


def test_a_case_without_upstream_lines_builds_without_the_cache(cases, doc, tmp_path, no_cache):
    entry = doc["cases"]["onnx-cumsum-reverse"]
    assert not [s for f in entry["sources"] for e in f["edits"] for s in e.get("new", []) if "rev" in s]
    case = next(c for c in cases if c["id"] == "onnx-cumsum-reverse")
    repo, base, head = build.build(case, tmp_path / "repo")   # checks every sha256 and both tree ids
    tree = subprocess.run(["git", "-C", str(repo), "rev-parse", f"{head}^{{tree}}"], capture_output=True, text=True)
    assert tree.stdout.strip() == entry["tree"]["head"]
    with pytest.raises(build.BuildError, match="tree"):
        build.build(case, tmp_path / "repo2", entry={**entry, "tree": {**entry["tree"], "base": "0" * 40}})


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True,
                          env=env).stdout.strip()


def test_edits_round_trip_through_a_small_upstream_repository(tmp_path, monkeypatch):
    """An upstream repository made here from the installed release: its 'parent' commit holds a block of the
    installed file in the old API (.struct_info) at another indentation, its 'fix' commit the installed file. The
    target (the fix reverted, ported by hand) takes that block back, deletes lines and adds one hand-written line:
    record describes it with the installed lines, the upstream block (renamed, re-indented) and one literal line,
    and materialise and build give the target byte for byte."""
    path = "python/tvm/relax/frontend/common.py"
    installed = build.source_path("tvm", path).read_text()
    lines = materialise.lines_of(installed)
    new_block = ["        x = inputs[0].ty.shape\n", "\n", "        n = len(x)  # the rank\n"]
    old_block = ["  " + l.replace(".ty", ".struct_info") if l.strip() else l for l in new_block]
    parent = lines[:5] + ["def _old_helper(inputs):\n", *old_block, "\n"] + lines[5:]
    up = tmp_path / "work"
    (up / Path(path).parent).mkdir(parents=True)
    _git(up, "init", "-q", "-b", "main")
    (up / path).write_text("".join(parent))
    _git(up, "add", "-A")
    _git(up, "commit", "-q", "-m", "parent")
    (up / path).write_text(installed)
    _git(up, "commit", "-q", "-am", "fix")
    fix = _git(up, "rev-parse", "HEAD")
    cache = tmp_path / "cache"
    subprocess.run(["git", "clone", "-q", "--bare", str(up), str(cache / "apache+tvm.git")], check=True)
    monkeypatch.setenv("DLCI_UPSTREAM", str(cache))
    materialise.set_root(None)
    k = len(lines) // 2
    target_text = "".join(lines[:k] + new_block + ["        # dlci: a hand-written line\n"] + lines[k + 4:])
    renames = [(r"\.struct_info\b", ".ty")]
    entry = materialise.record_file("apache/tvm", fix, path, installed, target_text, renames)
    assert entry["installed"] == materialise.sha256(installed) and entry["result"] == materialise.sha256(target_text)
    segs = [s for e in entry["edits"] for s in e.get("new", [])]
    up_seg = [s for s in segs if "rev" in s]
    assert up_seg and up_seg[0]["path"] == path and up_seg[0]["rev"] != fix and up_seg[0]["indent"] == -2
    assert up_seg[0]["sub"] == [[r"\.struct_info\b", ".ty"]]
    assert materialise.literal_lines(entry["edits"]) == 1
    with pytest.raises(materialise.UpstreamMissing, match="fetch again"):
        materialise.require(["apache/tvm"], {"apache/tvm": [fix, "0" * 40]})
    assert materialise.materialise_file(entry, installed, "apache/tvm") == target_text
    with pytest.raises(materialise.MaterialiseError, match="installed file"):
        materialise.materialise_file(entry, installed + "\n", "apache/tvm")
    case = {"id": "test-round-trip", "kind": "regression", "repo": "apache/tvm", "commit": fix, "title": "t",
            "url": "https://example.invalid/t"}
    repo, base, head = build.build(case, tmp_path / "repo", entry={"sources": [entry]})
    assert subprocess.run(["git", "-C", str(repo), "show", f"{head}:{path}"], capture_output=True).stdout == \
        target_text.encode()
    assert subprocess.run(["git", "-C", str(repo), "show", f"{base}:{path}"], capture_output=True).stdout == \
        installed.encode()
    refactor = {**case, "kind": "refactor"}
    repo, base, head = build.build(refactor, tmp_path / "repo2", entry={"sources": [entry]})
    assert subprocess.run(["git", "-C", str(repo), "show", f"{base}:{path}"], capture_output=True).stdout == \
        target_text.encode()
    assert not _git(repo, "status", "--porcelain")
    materialise.set_root(None)



def test_a_transplant_takes_the_frontend_package_whole_at_the_fix_and_its_parent(tmp_path, monkeypatch):
    """Where a fix's reverse diff does not apply to the release, the screen takes the touched frontend package whole
    (here TVM's onnx/ folder): at the fix commit for the base, at its parent for the head (the renames applied),
    over the release's other modules. Head and base then differ by exactly the fix; both sides are recorded as edits
    of the installed files and rebuilt byte for byte."""
    import screen
    folder = "python/tvm/relax/frontend/onnx/"
    path = folder + "onnx_frontend.py"
    installed = build.source_path("tvm", path).read_text()
    lines = materialise.lines_of(installed)
    # upstream, in the old API: the fix changes one line; neither side is the installed file
    fixed = lines[:4] + ["x = y.struct_info  # the fixed line\n"] + lines[4:-3]
    broken = lines[:4] + ["x = y.struct_info + 1  # the line before the fix\n"] + lines[4:-3]
    up = tmp_path / "work"
    (up / folder).mkdir(parents=True)
    _git(up, "init", "-q", "-b", "main")
    (up / folder / "__init__.py").write_bytes(build.source_path("tvm", folder + "__init__.py").read_bytes())
    for text, msg in ((broken, "parent"), (fixed, "fix")):
        (up / path).write_text("".join(text))
        _git(up, "add", "-A")
        _git(up, "commit", "-q", "-m", msg)
    fix, parent = _git(up, "rev-parse", "HEAD"), _git(up, "rev-parse", "HEAD^")
    cache = tmp_path / "cache"
    subprocess.run(["git", "clone", "-q", "--bare", str(up), str(cache / "apache+tvm.git")], check=True)
    monkeypatch.setenv("DLCI_UPSTREAM", str(cache))
    materialise.set_root(None)
    proj = screen.PROJECTS["tvm"]
    ok, how, base_patch, head_patch = screen.transplant(proj, str(cache / "apache+tvm.git"),
                                                        {"commit": fix, "parent": parent}, [("M", path)])
    assert ok and folder in how, how
    (tmp_path / "c.base.diff").write_text(base_patch)
    (tmp_path / "c.diff").write_text(head_patch)
    assert "+x = y.ty + 1" in head_patch and "-x = y.ty  #" in head_patch   # the fix, reversed, renamed
    case = {"id": "c", "kind": "regression", "repo": "apache/tvm", "commit": fix, "title": "t",
            "url": "https://example.invalid/t"}
    repo, base, head = build.build(screen.candidate(case, tmp_path), tmp_path / "repo")
    want_base = screen.rename_text("".join(fixed), proj["renames"], path)
    want_head = screen.rename_text("".join(broken), proj["renames"], path)
    assert _git(repo, "show", f"{base}:{path}") + "\n" == want_base
    assert _git(repo, "show", f"{head}:{path}") + "\n" == want_head
    assert build._differs_from_installed(repo, base, "tvm") == [path]   # the package's other module as installed
    # recorded as edits of the installed file (upstream lines at the fix and its parent), rebuilt the same
    renames = [(pat, repl) for pat, repl, _ in proj["renames"]]
    entry = {"sources": [materialise.record_file("apache/tvm", fix, path, installed, want_head, renames)],
             "base_sources": [materialise.record_file("apache/tvm", fix, path, installed, want_base, renames)]}
    assert all(materialise.literal_lines(f["edits"]) == 0 for k in entry for f in entry[k])
    repo2, base2, head2 = build.build(case, tmp_path / "repo2", entry=entry)
    for a, b in ((base, base2), (head, head2)):
        assert _git(repo, "rev-parse", f"{a}^{{tree}}") == _git(repo2, "rev-parse", f"{b}^{{tree}}")
    materialise.set_root(None)

def test_the_edit_language_checks_its_inputs():
    base = materialise.lines_of("a\nb\x0cc\nd\n")   # split on '\n' only
    assert base == ["a\n", "b\x0cc\n", "d\n"]
    assert materialise.apply(base, [{"lines": [2, 1], "new": [{"text": "x\n"}]}]) == ["a\n", "x\n", "b\x0cc\n", "d\n"]
    assert materialise.apply(base, [{"lines": [1, 1]}, {"lines": [3, 3], "new": [{"lines": [1, 1], "indent": 2}]}]) \
        == ["b\x0cc\n", "  a\n"]
    with pytest.raises(materialise.MaterialiseError, match="out of order"):
        materialise.apply(base, [{"lines": [3, 3]}, {"lines": [1, 1]}])
    with pytest.raises(materialise.MaterialiseError, match="recorded"):
        materialise.apply(base, [{"lines": [1, 1], "sha256": materialise.sha256("b\n")}])
    with pytest.raises(materialise.MaterialiseError, match="dedent"):
        materialise.apply(base, [{"lines": [1, 1], "new": [{"lines": [1, 1], "indent": -2}]}])


def test_store_records_names_and_hashes_only(tmp_path, monkeypatch):
    data = tmp_path / "materialise.yaml"
    data.write_text(materialise.DATA.read_text())
    monkeypatch.setattr(materialise, "DATA", data)
    text = "# flake8: noqa\nx = 1\n"
    store.put("onnx-cumsum-reverse", {"onnx_cumsum_reverse__test_extra.py": text})
    got = store.recorded("onnx-cumsum-reverse")
    assert got["onnx_cumsum_reverse__test_extra.py"] == materialise.sha256(text) and len(got) == 2
    assert "x = 1" not in data.read_text()
    with pytest.raises(store.StoreError):
        store.put("onnx-cumsum-reverse", {"other_case__test.py": text})


@pytest.mark.parametrize("script,args", [
    ("benchmarks/regressions/build.py", ["torch-selu-formula", "{tmp}/repo"]),
    ("benchmarks/regressions/store.py", ["torch-selu-formula", "{tmp}/tests"]),
    ("benchmarks/regressions/groundtruth.py", ["torch-selu-formula"]),
    ("benchmarks/regressions/verify.py", ["torch-selu-formula"]),
    ("benchmarks/real_regressions.py", ["--cases", "torch-selu-formula", "--no-scan", "--work", "{tmp}/work"]),
])
def test_entry_points_say_what_to_run_without_the_cache(script, args, tmp_path, no_cache):
    proc = subprocess.run([sys.executable, str(ROOT / script), *[a.format(tmp=tmp_path) for a in args]],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "DLCI_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode != 0
    assert "materialise.py fetch" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "repo").exists()


@needs_cache
@pytest.mark.parametrize("case_id", ["torch-selu-formula", "onnxscript-implement-softplus"])
def test_real_cases_materialise_from_the_cache(case_id, cases, doc, tmp_path):
    import suite
    case = next(c for c in cases if c["id"] == case_id)
    repo, base, head = build.build(case, tmp_path / "repo")   # every recorded sha256 and tree id
    got = store.files(case_id, doc)
    assert [n for n, _ in got] == list(store.recorded(case_id, doc))
    # the repository's own frontend tests, committed under the PR: both revisions hold them, the PR's diff is the same
    diff = subprocess.run(["git", "-C", str(repo), "diff", base, head], capture_output=True, text=True).stdout
    base2, head2, added = suite.add(case, repo, doc["cases"][case_id])
    assert added["commit"] == doc["cases"][case_id]["suite"]["commit"] and added["files"] > 3
    assert subprocess.run(["git", "-C", str(repo), "diff", base2, head2], capture_output=True, text=True).stdout == diff
    in_base = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", base2, "tests"],
                             capture_output=True, text=True).stdout.split()
    assert len(in_base) == added["files"] and any(p.endswith(("test_frontend_from_fx.py", "ops_test_data.py"))
                                                  for p in in_base)
    tampered = {**doc["cases"][case_id], "suite": {**doc["cases"][case_id]["suite"], "sha256": "0" * 64}}
    with pytest.raises(build.BuildError, match="hashes to"):
        suite.add(case, repo, tampered)


@needs_cache
def test_groundtruth_keys_extracted_and_loose_files_alike(cases, tmp_path, monkeypatch):
    import groundtruth as gt
    case = next(c for c in cases if c["id"] == "onnxscript-implement-softplus")
    key = gt.cache_key(case)
    store.materialise_files(case["id"], tmp_path)
    monkeypatch.setattr(gt, "UPSTREAM", tmp_path)
    assert [n for n, _ in gt.test_files(case)] == [n for n, _ in store.files(case["id"])]
    assert gt.cache_key(case) == key


def _real_regressions():
    import importlib.util
    spec = importlib.util.spec_from_file_location("real_regressions_bench", ROOT / "benchmarks" / "real_regressions.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_caught_record_names_cases_of_the_corpus(cases):
    import json
    rec = json.loads((ROOT / "benchmarks" / "results" / "caught.json").read_text())
    ids = {c["id"] for c in cases if c["kind"] == "regression"}
    assert rec["cases"] and set(rec["cases"]) <= ids
    assert all(v["dlci_commit"] and v["date"] for v in rec["cases"].values())


def test_the_ratchet_fails_on_a_drop_and_records_a_first_catch():
    rr = _real_regressions()
    caught = {"cases": {"a": {"dlci_commit": "c0", "date": "2026-01-01"},
                        "b": {"dlci_commit": "c0", "date": "2026-01-01"},
                        "c": {"dlci_commit": "c0", "date": "2026-01-01"}}}
    rows = [{"case": "a", "outcome": "caught"}, {"case": "b", "outcome": "missed", "reason": "ran but passed"},
            {"case": "d", "outcome": "caught", "reason": "new in PR"}, {"case": "e", "outcome": "missed"}]
    drops, new = rr.ratchet(rows, caught, "c1", "run.json")   # c: not in this run, not a drop
    assert [d["case"] for d in drops] == ["b"] and drops[0]["first_caught"]["dlci_commit"] == "c0"
    assert new == ["d"] and caught["cases"]["d"]["dlci_commit"] == "c1" and "e" not in caught["cases"]
    drops, _ = rr.ratchet([{"case": "a", "outcome": "not_scanned"}], caught, "c1", None)
    assert not drops   # --no-scan judges nothing


def test_a_scan_that_died_is_an_error_not_a_clean_refactor_or_a_catch(tmp_path):
    """A refactor's scan killed by SIGFPE after writing a findings.json with no new finding was counted "clean": the
    judge now calls any exit but 0 and 1 (and --timeout's partial results) an error, whatever was written before."""
    import json
    rr = _real_regressions()
    (tmp_path / "findings.json").write_text(json.dumps({"findings": [
        {"operator": "aten::add", "new_in_pr": True, "target": "t"}], "stats": {}, "pr": {}}))
    for kind in ("refactor", "regression"):
        case = {"id": "x", "kind": kind, "operators": ["aten::add"], "repo": "apache/tvm", "files": []}
        got = rr.judge(case, tmp_path, {"exit": -8, "stderr_tail": "", "wall_seconds": 1.0})
        assert got["outcome"] == "error" and "exit -8" in got["reason"]
        assert rr.judge(case, tmp_path, {"exit": 0, "stderr_tail": "", "wall_seconds": 1.0})["outcome"] \
            == {"refactor": "false_alarm", "regression": "caught"}[kind]


def test_a_refactor_whose_change_was_judged_by_hand_to_alter_behaviour_is_no_false_alarm_on_those_operators(tmp_path):
    import json
    rr = _real_regressions()
    ok = {"exit": 0, "stderr_tail": "", "wall_seconds": 1.0}
    case = {"id": "x", "kind": "refactor", "operators": ["aten::prelu"], "repo": "microsoft/onnxscript", "files": [],
            "behaviour_change": {"operators": ["aten::prelu"], "why": "PRelu has no double kernel"}}
    (tmp_path / "findings.json").write_text(json.dumps({"findings": [
        {"operator": "aten::prelu", "new_in_pr": True, "target": "torch.onnx"}], "stats": {}, "pr": {}}))
    got = rr.judge(case, tmp_path, ok)
    assert got["outcome"] == "behaviour_change" and "PRelu has no double kernel" in got["reason"]
    (tmp_path / "findings.json").write_text(json.dumps({"findings": [
        {"operator": "aten::prelu", "new_in_pr": True, "target": "torch.onnx"},
        {"operator": "aten::relu", "new_in_pr": True, "target": "torch.onnx"}], "stats": {}, "pr": {}}))
    assert rr.judge(case, tmp_path, ok)["outcome"] == "false_alarm"   # another operator: still a false alarm
    assert rr.judge({**case, "behaviour_change": None}, tmp_path, ok)["outcome"] == "false_alarm"


def test_arms_are_summed_per_family():
    rr = _real_regressions()
    arm = {"outcome": "caught", "wall_seconds": 10.0, "changed_statements": 4, "reached_statements": 3,
           "directed": {"statements": 4, "statements_reached": 2},
           "divergence": {"per_minute": 2.0, "diverged": 2, "search_seconds": 60}}
    rows = [{"case": "x", "kind": "regression", "family": "TVM onnx", "scan": {"wall_seconds": 10.0},
             "arms": {"default": arm, "no-divergence": {**arm, "outcome": "missed", "divergence": None}}},
            {"case": "y", "kind": "refactor", "family": "TVM onnx",
             "arms": {"default": {"outcome": "false_alarm", "wall_seconds": 30.0}}}]
    s = rr.arms_summary(rows, ["default", "no-divergence"])["TVM onnx"]
    assert s["default"]["caught"] == 1 and s["no-divergence"]["caught"] == 0
    assert s["default"]["refactors_with_new_finding"] == 1 and s["default"]["scan_wall_seconds"]["max"] == 30.0
    assert s["default"]["changed_statements_reached"] == 3 and s["default"]["directed_statements_reached"] == 2
    assert s["default"]["divergences_per_minute"] == {"median": 2.0, "pooled": 2.0, "cases": 1}
    assert s["no-divergence"]["divergences_per_minute"]["median"] is None


def test_the_loose_revert_finds_reformatted_and_moved_code(tmp_path):
    import screen
    assert screen._code("    x = f(a,  b)  # why\n") == "x=f(a,b)" and screen._code("s = '#'  # c\n") == "s='#'"
    folder = tmp_path / "pkg"
    folder.mkdir()
    # installed: the fixed function, reformatted (comments, spacing) and moved to another module of the folder
    (folder / "a.py").write_text("def other():\n    return 0\n")
    (folder / "b.py").write_text("def f(x):\n    # the fix\n    y = x + 1  # plus one\n\n    return y\n")
    diff = ("diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,3 +1,4 @@\n def f(x):\n"
            "-    return x\n+    y = x+1\n+    return y\n")
    ok, how = screen.loose_revert(diff, tmp_path, ["pkg"])
    assert ok and "another module" in how, how
    code = [screen._code(l) for l in (folder / "b.py").read_text().splitlines()]
    assert [c for c in code if c] == ["deff(x):", "returnx"]   # the file's comment lines stay
    (folder / "b.py").write_text("def f(x):\n    y = x + 1\n    return y\ndef f(x):\n    y = x + 1\n    return y\n")
    ok, how = screen.loose_revert(diff, tmp_path, ["pkg"])   # two places: no guess
    assert not ok


def test_the_refactor_screen_takes_behaviour_preserving_subjects_and_no_fix(tmp_path):
    """screen.py --kind refactor: a commit with a refactor's subject that is no fix and changes frontend code
    qualifies once its reverse diff applies; a fix, a feature or a keyword that merely contains a rule word do not."""
    import re
    import types
    import screen
    said = {"[torchlib] Simplify aten_trunc implementation (#2057)": True, "[Relax] Refactor norm op (#17857)": True,
            "[torchlib] Make matmul trace_only (#2055)": True, "Use ir methods to replace onnx helper (#2091)": True,
            "[torchlib] Add memory_format to ones_like (#2049)": False, "Support aten::scatter.src (#2490)": False,
            "[torchlib] Unregister aten::max.other (#2377)": False}
    assert {s: bool(re.search(screen.REFACTOR_RULE, s)) for s in said} == said
    args = types.SimpleNamespace(git_dir="unused")
    for fix, front, stage in ((True, [("M", "f.py")], "fix_by_rule"), (False, [], "no_frontend_change")):
        row = {"subject": "[torchlib] Simplify aten_trunc implementation (#2057)"}
        screen.refactor_row(screen.PROJECTS["onnxscript"], args, row, front, fix, set(), tmp_path)
        assert row["stage"] == stage
    row = {"subject": "[torchlib] Add memory_format to ones_like (#2049)"}
    screen.refactor_row(screen.PROJECTS["onnxscript"], args, row, [("M", "f.py")], False, set(), tmp_path)
    assert row["stage"] == "not_refactor_by_rule"
    # a revert that restores an attribute the installed release never names would break its base at run time
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-    dtype = A.checked_type.dtype  # .gone\n+    dtype = A.ty.dtype\n"
    assert screen.unknown_attributes(screen.PROJECTS["tvm"], diff) == ["checked_type"]
    assert screen.unknown_attributes(screen.PROJECTS["tvm"], diff.replace("checked_type", "ty")) == []
    # names the restored lines define are no API of the release's (torch-selu-formula brings back _selu and
    # calls self._selu; a restored self.zz_cache = ... defines zz_cache)
    selu = ("--- a/x.py\n+++ b/x.py\n@@ -1,4 +1 @@\n-    def _zz_selu(self, node):\n"
            "-        self.zz_cache = {}\n-        return self._zz_selu(node) or self.zz_cache\n-x = self.zz_gone\n"
            "+    pass\n")
    assert screen.unknown_attributes(screen.PROJECTS["tvm"], selu) == ["zz_gone"]


def test_an_arm_whose_flag_dlci_lacks_is_skipped():
    rr = _real_regressions()
    arms, skipped = rr.available_arms(["default", "no-divergence", "no-repo-tests"],
                                      "  --no-divergence  the directed search ...\n  --no-directed ...")
    assert arms == ["default", "no-divergence"] and "--no-repo-tests" in skipped["no-repo-tests"]
