"""A changed converter file that no longer imports (dlci.scan.imports): every way an import can fail is told apart in a
real interpreter; what a file maps at base is what deleting it would select; a scan of a pull request that leaves
an `exit()` at module level of a converter file reports it as new in the PR for the file's operators, never
"nothing to test"."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlci.scan import imports

ROOT = Path(__file__).resolve().parent.parent


def _package(tmp_path: Path, body: str) -> dict:
    pkg = tmp_path / "pkgroot" / "convpkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(body)
    return {"PYTHONPATH": str(tmp_path / "pkgroot")}


@pytest.mark.parametrize("body, state, detail", [
    ("def elu(x):\n    return x\n", "ok", ""),
    ("def elu(x)\n    return x\n", "raises", "SyntaxError"),
    ("import sys\nsys.exit(0)\n", "exits", "exit code 0"),
    ("raise RuntimeError('converter table broken')\n", "raises", "RuntimeError: converter table broken"),
    ("import time\ntime.sleep(60)\n", "hangs", "no return within 3 s"),
    ("import torchvision_like_missing_dep\n", "raises", "ModuleNotFoundError"),
])
def test_each_way_an_import_fails_is_told_apart(tmp_path, body, state, detail):
    env = _package(tmp_path, body)
    got = imports.import_once("convpkg.ops", "convpkg/ops.py", env, timeout=3,
                              path=str(tmp_path / "pkgroot" / "convpkg" / "ops.py"))
    assert got.state == state and detail in got.detail, got


def test_check_confirms_a_failure_and_names_modules_by_python_path(tmp_path):
    env = _package(tmp_path, "import os\nos._exit(3)\n")
    results = imports.check(tmp_path, ["pkgroot/convpkg/ops.py", "docs/x.md"], ["pkgroot"], env)
    assert list(results) == ["pkgroot/convpkg/ops.py"]
    assert results["pkgroot/convpkg/ops.py"].state == "exits" and "exit code 3" in results["pkgroot/convpkg/ops.py"].detail


def test_what_a_file_maps_at_base_is_what_deleting_it_selects(tmp_path):
    pytest.importorskip("tvm")
    from dlci import operators, profiles, samples
    from dlci.diff import GitRepo
    repo, base, head = samples.build("tvm-elu-minimum", tmp_path / "repo")
    r = GitRepo(repo, base, head)
    file = "python/tvm/relax/frontend/torch/base_fx_graph_translator.py"
    touches = profiles.mapped_by(r, file, ["tvm"])
    canon = {c for t in touches for c in operators.canonical(t.operator, t.namespace)}
    assert "elu" in canon and len(canon) > 50, sorted(canon)[:20]
    assert {x for t in touches for x in t.targets} >= {"tvm.from_fx", "tvm.from_exported_program"}


@pytest.mark.slow
def test_a_pull_request_that_exits_at_import_is_a_new_finding_for_the_files_operators(tmp_path):
    pytest.importorskip("tvm")
    from dlci import samples
    from dlci.diff import git
    repo, base, _ = samples.build("tvm-elu-minimum", tmp_path / "repo")
    git.run(repo, "checkout", "-q", "-b", "exit-at-import", base)
    conv = repo / "python/tvm/relax/frontend/torch/base_fx_graph_translator.py"
    text = conv.read_text()
    anchor = "\nclass BaseFXGraphImporter"
    assert text.count(anchor) == 1
    conv.write_text(text.replace(anchor, "\nimport sys\nsys.exit(0)  # left from a local test\n" + anchor))
    who = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x.invalid", "GIT_COMMITTER_NAME": "x",
           "GIT_COMMITTER_EMAIL": "x@x.invalid"}
    assert git.run(repo, "commit", "-q", "-am", "debug left in", extra_env=who).returncode == 0
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "dlci", "scan", "--repo", str(repo), "--base", base, "--head",
                           "exit-at-import", "--out", str(out), "--budget", "150"], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=900)
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    doc = json.loads((out / "findings.json").read_text())
    assert not doc["pr"].get("nothing_to_test")
    found = [f for f in doc["findings"] if f.get("stage") == "import"]
    assert len(found) == 1, doc["findings"]
    f = found[0]
    assert f["new_in_pr"] is True and "ends the process" in f["symptom"] and {"elu", "elu.default"} & set(f["operators"])
    assert f["repro_checked"] is True and f["repro_passes_on_base"] is True
    assert (out / f["repro"]).read_text().count("importlib.import_module") == 1


def test_an_optional_dependency_that_does_not_import_is_no_failure_but_a_syntax_error_still_is(tmp_path):
    """onnx2torch's package imports torchvision, which cannot load over the CPU torch here: the profile names it in
    DLCI_OPTIONAL_IMPORTS, so its converter files import, and a syntax error in one is still seen (compiled first)."""
    env = {**_package(tmp_path, "import optdep_missing\n"), "DLCI_OPTIONAL_IMPORTS": "optdep_missing"}
    path = str(tmp_path / "pkgroot" / "convpkg" / "ops.py")
    assert imports.import_once("convpkg.ops", "convpkg/ops.py", env, timeout=20, path=path).ok
    (tmp_path / "pkgroot" / "convpkg" / "ops.py").write_text("import optdep_missing\ndef f(:\n")
    got = imports.import_once("convpkg.ops", "convpkg/ops.py", env, timeout=20, path=path)
    assert got.state == "raises" and "SyntaxError" in got.detail, got


def test_only_a_change_that_runs_at_import_starts_an_interpreter():
    text = ("import os\n"                  # 1
            "TABLE = {}\n"                 # 2
            "\n"
            "def register(f):\n"           # 4
            "    TABLE[f.__name__] = f\n"  # 5
            "    return f\n"               # 6
            "\n"
            "@register\n"                  # 8
            "def elu(x, alpha=1.0):\n"     # 9
            "    return x if x > 0 else alpha * (os.sys.float_info.epsilon + x)\n"  # 10
            "\n"
            "class Conv:\n"                # 12
            "    kind = 'conv'\n"          # 13
            "    def run(self):\n"         # 14
            "        return 1\n")          # 15
    assert not imports.runs_at_import(text, {5, 6, 10, 15})  # function bodies only
    for line in (2, 8, 9, 13):  # module level, a decorator, a signature and its default, a class body
        assert imports.runs_at_import(text, {line}), line
    assert imports.runs_at_import("def f(:\n    pass\n", {2})  # no longer parses
