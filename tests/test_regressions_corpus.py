"""The real-regressions corpus's upstream test files (benchmarks/regressions/store.py): each case's files materialise
to the bytes the manifest records, every stored body is used, the store round-trips a file and shares a body between
cases, and ground truth keys a case the same from the store as from the same files loose (screen.py's candidates).
Re-extraction from the upstream repositories (verify.py) needs their git directories: not run here."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

REGRESSIONS = Path(__file__).resolve().parent.parent / "benchmarks" / "regressions"
sys.path.insert(0, str(REGRESSIONS))

import store  # noqa: E402


@pytest.fixture(scope="module")
def cases():
    return yaml.safe_load((REGRESSIONS / "cases.yaml").read_text())["cases"]


def test_every_case_materialises_as_recorded(cases):
    manifest = store.load()
    with_tests = {c["id"] for c in cases if c.get("upstream_test")}
    assert set(manifest["cases"]) == with_tests
    for cid in with_tests:
        got = store.files(cid, manifest)   # raises StoreError on a missing body or another sha256
        assert got and all(name.startswith(f"{store.stem(cid)}__") and name.endswith(".py") for name, _ in got)
        assert [n for n, _ in got] == sorted(n for n, _ in got)
    used = {e["body"] for es in manifest["cases"].values() for e in es}
    assert used == {p.name for p in store.FILES.glob("*.py")}


def test_put_round_trips_and_shares_bodies(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "UPSTREAM", tmp_path)
    monkeypatch.setattr(store, "FILES", tmp_path / "files")
    monkeypatch.setattr(store, "MANIFEST", tmp_path / "manifest.json")
    body = "import {}__ops_test_common as ops_test_common\n\nx = 1\n"
    texts = {cid: (f"# flake8: noqa\n# ---- from https://github.com/o/r/blob/{sha}/ops_test.py\n"
                   f"# Renames for the installed release: none\n" + body.format(store.stem(cid)))
             for cid, sha in (("case-a", "1" * 40), ("case-b", "2" * 40))}
    for cid, text in texts.items():
        store.put(cid, {f"{store.stem(cid)}__ops_test.py": text})
    assert len(list((tmp_path / "files").glob("*.py"))) == 1
    for cid, text in texts.items():
        assert store.files(cid) == [(f"{store.stem(cid)}__ops_test.py", text.encode())]
    store.put("case-a", {"case_a__ops_test.py": texts["case-a"].replace("x = 1", "x = 2")})
    assert len(list((tmp_path / "files").glob("*.py"))) == 2
    store.put("case-b", {"case_b__ops_test.py": texts["case-b"].replace("x = 1", "x = 2")})
    assert len(list((tmp_path / "files").glob("*.py"))) == 1   # the body no case uses is dropped
    with pytest.raises(store.StoreError):
        store.put("case-a", {"case_b__ops_test.py": texts["case-b"]})


def test_groundtruth_keys_stored_and_loose_files_alike(cases, tmp_path, monkeypatch):
    import groundtruth as gt
    case = next(c for c in cases if c["id"] == "onnxscript-implement-softplus")
    key = gt.cache_key(case)
    store.materialise(case["id"], tmp_path)
    shutil.copy(store.UPSTREAM / "_torch_numeric.py", tmp_path / "_torch_numeric.py")
    monkeypatch.setattr(gt, "UPSTREAM", tmp_path)
    assert [n for n, _ in gt.test_files(case)] == [n for n, _ in store.files(case["id"])]
    assert gt.cache_key(case) == key
