"""`dlci scan` and `dlci ops` end to end on the bundled sample PRs (real TVM, real git, real workers)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from dlci import samples  # noqa: E402
from dlci.cli import main  # noqa: E402
from dlci.errors import ExitCode  # noqa: E402

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = ExitCode.CLEAN, ExitCode.FINDINGS, ExitCode.USAGE


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def scan(tmp_path, *args) -> tuple[int, dict]:
    out = tmp_path / "out"
    code = main(["scan", "--out", str(out), "--workers", "2", *args])
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    return code, doc


# The sample bug's scan (tvm-elu-minimum: new in the PR, reproducer failing on head only) is checked on the scan the
# action runs: tests/test_entrypoint.py, test_the_sample_bug_is_new_in_the_pr_with_a_reproducer_that_fails_on_head_only


def test_docs_only_pr_has_nothing_to_test(tmp_path):
    code, doc = scan(tmp_path, "--sample", "tvm-docs-only")
    assert code == EXIT_CLEAN
    assert doc["findings"] == [] and doc["stats"]["tests_run"] == 0
    assert "no operator converter" in doc["pr"]["nothing_to_test"]
    assert "Nothing to test" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_refactor_pr_is_tested_and_produces_no_finding(tmp_path):
    code, doc = scan(tmp_path, "--sample", "tvm-elu-refactor", "--budget", "90", "--limit-per-op", "3")
    assert code == EXIT_CLEAN, doc.get("findings")
    # nothing new; TVM 0.27's FX importer ignores nn.ELU's alpha, which a run may show as already on base
    assert [f for f in doc["findings"] if f["new_in_pr"] is not False] == []
    assert all(f["base"]["same_failure"] for f in doc["findings"])
    assert doc["stats"]["tests_valid"] > 0
    cov = doc["pr"]["coverage"]
    assert 0 < cov["reached_statements"] < cov["changed_statements"]
    # the edited branch for a non-constant alpha is run by no instance: reported as a test gap
    assert [g["region"] for g in cov["unreached"]] == ["BaseFXGraphImporter._elu"]
    assert "Test gap" in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.slow
def test_bug_already_on_base_is_not_new(tmp_path):
    repo, _base, broken = samples.build("tvm-elu-minimum", tmp_path / "repo")
    rel = "python/tvm/relax/frontend/torch/base_fx_graph_translator.py"
    path = repo / rel
    # known issues are policy: the base revision's .dlci.yml says them (a PR's own cannot)
    (repo / ".dlci.yml").write_text(samples.DLCI_YML + "known_issues:\n  - target: tvm.from_exported_program\n"
                                    "    operator: '*ELU*'\n    link: https://example.invalid/issues/1\n")
    git(repo, "commit", "-qam", "known issue")
    broken = git(repo, "rev-parse", "HEAD").strip()
    path.write_text(path.read_text().replace("        # alpha * min(0, exp(x) - 1) + max(0, x)\n",
                                             "        # alpha * min(0, exp(x) - 1) + max(0, x), elementwise\n"))
    git(repo, "commit", "-qam", "comment")
    code, doc = scan(tmp_path, "--repo", str(repo), "--base", broken, "--head", "HEAD", "--budget", "120",
                     "--limit-per-op", "4", "--targets", "tvm.from_exported_program")
    assert doc["findings"], doc["stats"]
    assert all(f["new_in_pr"] is False and f["base"]["same_failure"] for f in doc["findings"])
    # the base's .dlci.yml marks the nn::ELU finding (if that instance is the representative) as known
    for f in doc["findings"]:
        assert bool(f.get("known")) == ("ELU" in f["operator"])
    assert code == EXIT_CLEAN  # --fail-on new (the default for scan) does not count old bugs


def test_ops_lists_touched_operators_with_file_and_line(tmp_path, capsys):
    repo, base, head = samples.build("tvm-avgpool-padding", tmp_path / "repo")
    assert main(["ops", "--repo", str(repo), "--base", base, "--head", head]) == EXIT_CLEAN
    doc = json.loads(capsys.readouterr().out)
    assert "avg_pool2d" in doc["canonical_operators"]
    assert all(t["file"].endswith("base_fx_graph_translator.py") and t["line"] > 0 for t in doc["touches"])


def test_the_tests_reprobed_for_fixes_take_every_way_through_the_changed_code_first():
    """A fix changes one branch few tests take (CumSum's reverse flag): of the many passing tests that ran changed
    code, one per distinct set of changed statements comes before any second of a set, so the few re-run on base to
    show what the PR fixed include the branch's test."""
    from types import SimpleNamespace
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.scan import _by_way

    def inst(n):
        return Instance(op="onnx::CumSum", framework="onnx", call={"kind": "onnx_node"},
                        inputs=[TensorSpec([n + 1], "float32")], params={}, origin=Origin("onnx_node", f"t{n}"),
                        id=f"i{n}")
    campaign = SimpleNamespace(instances={f"i{n}": inst(n) for n in range(40)})
    common, reverse = frozenset({("f.py", (10, 10))}), frozenset({("f.py", (10, 10)), ("f.py", (12, 14))})
    keyed = [((f"i{n}", "tvm.from_onnx"), common) for n in range(38)] + [(("i38", "tvm.from_onnx"), reverse),
                                                                         (("i39", "tvm.from_onnx"), frozenset())]
    order = _by_way(keyed, campaign)
    assert order[:2] == [("i0", "tvm.from_onnx"), ("i38", "tvm.from_onnx")]
    assert ("i39", "tvm.from_onnx") not in order and len(order) == 39  # ran no changed statement: never a probe


def test_bad_input_is_a_usage_error(tmp_path, capsys):
    assert main(["ops", "--repo", str(tmp_path)]) == EXIT_USAGE  # not a git repository
    assert "git" in capsys.readouterr().err
    assert main(["scan", "--fuzz-share", "1.5", "--out", str(tmp_path / "o")]) == EXIT_USAGE
    assert "--fuzz-share" in capsys.readouterr().err
    repo, base, head = samples.build("tvm-docs-only", tmp_path / "repo")
    assert main(["ops", "--repo", str(repo), "--base", "no-such-rev"]) == EXIT_USAGE
    (repo / ".dlci.yml").write_text("budget: [1, 2]\n")
    git(repo, "commit", "-qam", "bad config")
    code, _ = scan(tmp_path, "--repo", str(repo), "--base", head, "--head", "HEAD")
    assert code == EXIT_USAGE
    assert "budget must be" in capsys.readouterr().err


@pytest.mark.slow
def test_a_new_failure_is_never_folded_into_an_old_one(tmp_path):
    """The sample swaps avg_pool2d's ceil_mode and count_include_pad, while the base revision already gets
    avg_pool2d wrong the same way (value mismatch) on other instances: the new failures are reported new, apart."""
    code, doc = scan(tmp_path, "--sample", "tvm-avgpool-arg-order", "--budget", "100", "--fuzz-share", "0")
    assert code == EXIT_FINDINGS
    pool = [f for f in doc["findings"] if f["operator"] in ("aten::avg_pool2d", "nn::AvgPool2d")]
    new = [f for f in pool if f["new_in_pr"] is True and f["oracle"] == "inconsistency"]
    old = [f for f in pool if f["new_in_pr"] is False]
    assert new and old, [(f["id"], f["signature"], f["new_in_pr"]) for f in doc["findings"]]
    in_new = {i for f in new for i in f["base"]["instances"]}
    in_old = {i for f in old for i in f["base"]["instances"]}
    assert not in_new & in_old  # each instance attributed on its own, and folded only with its like
    assert all(f["repro_checked"] is not False for f in doc["findings"])
    # where the wall went: testing, the base re-runs, the reduction, the reproducers' checks on head and base
    assert {"testing", "on_base", "reduce", "check", "check_on_base"} <= set(doc["stats"]["phase_seconds"])
    report = (tmp_path / "out" / "report.md").read_text()
    section = report.split("### New in this PR", 1)[1].split("###", 1)[0]
    assert all(f"| {f['id']} |" in section for f in new)
    assert not any(f"| {f['id']} |" in section for f in old)


@pytest.mark.slow
def test_support_the_pr_removes_is_a_new_finding(tmp_path):
    """The sample drops FX's softplus function entry: base converts F.softplus, head says it does not support it."""
    code, doc = scan(tmp_path, "--sample", "tvm-fx-softplus-removed", "--budget", "150", "--fuzz-share", "0")
    assert code == EXIT_FINDINGS
    removed = [f for f in doc["findings"] if f["symptom"] == "support removed"]
    assert removed, [(f["id"], f["signature"]) for f in doc["findings"]]
    f = removed[0]
    assert f["operator"] == "aten::softplus" and f["target"] == "tvm.from_fx" and f["new_in_pr"] is True
    assert f["base"]["status"] == "pass" and f["repro_checked"] is True and f["repro_passes_on_base"] is True


@pytest.mark.slow
def test_a_quantized_tflite_regression_is_caught_through_the_quantized_variants(tmp_path):
    """The sample pools quantized tensors in int8 (TVM's TFLite frontend summed them in int32): only quantized TFLite
    models take that branch, so the catch comes from tflite_variants, new in the PR, with a reproducer that fails on
    head and passes on base."""
    code, doc = scan(tmp_path, "--sample", "tvm-tflite-quantized-avgpool", "--budget", "150", "--fuzz-share", "0")
    assert code == EXIT_FINDINGS, doc.get("stats")
    new = [f for f in doc["findings"] if f["new_in_pr"] is True]
    assert new, [(f["id"], f["signature"], f["new_in_pr"]) for f in doc["findings"]]
    f = new[0]
    assert f["target"] == "tvm.from_tflite" and f["origin"]["source"] == "tflite_variants"
    assert "avg_pool2d" in samples.SAMPLES["tvm-tflite-quantized-avgpool"].expect_operators
    assert f["repro_checked"] is True and f["repro_passes_on_base"] is True


@pytest.mark.slow
def test_an_openvino_python_side_regression_runs_the_prs_python_over_the_installed_libraries(tmp_path):
    """The sample drops torch.bfloat16 from the PyTorch decoders' type table (OpenVINO's Python package): no
    .dlci.yml, the profile's defaults run the checkout's Python over the wheel's native libraries, and the bfloat16
    variants of the operators every graph has find it new in the PR."""
    pytest.importorskip("openvino")
    code, doc = scan(tmp_path, "--sample", "openvino-py-bfloat16-table", "--budget", "150", "--limit-per-op", "2",
                     "--targets", "openvino.pytorch,openvino.exported_program")
    assert code == EXIT_FINDINGS, doc.get("stats")
    new = [f for f in doc["findings"] if f["new_in_pr"] is True]
    assert new, [(f["id"], f["signature"], f["new_in_pr"]) for f in doc["findings"]]
    assert all(f["target"].startswith("openvino.") for f in new)
    assert any("bfloat16" in f["origin"]["test"] for f in new)


def test_a_new_finding_whose_reproducer_fails_on_base_too_is_already_on_base(tmp_path):
    """check_one_on_base runs a new finding's reproducer against the base revision's environment: one that fails
    there as on the PR moves the finding to "already on base"; one that passes there, or errs otherwise, leaves it
    new."""
    from dlci.campaign.options import RunOptions
    from dlci.findings import Finding, is_new
    from dlci.scan.attribution import check_one_on_base
    (tmp_path / "repro").mkdir()
    script = ("import os, sys\nbroken = os.environ.get('DLCI_BASE_MARK') in {marks}\n"
              "print('REPRODUCED' if broken else 'ok')\nsys.exit(1 if broken else 0)\n")
    findings = []
    for name, marks in (("both", "('head', 'base')"), ("head_only", "('head',)")):
        (tmp_path / "repro" / f"{name}.py").write_text(script.format(marks=marks))
        findings.append(Finding(id=name, oracle="inconsistency", operator="aten::elu", target="tvm.from_fx",
                                symptom="value mismatch", stage="compare", signature=name, message="",
                                instance_id="i", target_version="0", origin={}, new_in_pr=True,
                                repro=f"repro/{name}.py",
                                base={"status": "pass"}))
    (tmp_path / "repro" / "crashes.py").write_text("raise SystemExit(3)\n")
    findings.append(Finding(id="crashes", oracle="crash", operator="aten::elu", target="tvm.from_fx",
                            symptom="RuntimeError", stage="convert", signature="c", message="", instance_id="i",
                            target_version="0", origin={},
                            new_in_pr=True, repro="repro/crashes.py", base={"status": "pass"}))
    for f in findings:
        check_one_on_base(f, RunOptions(out=tmp_path, workers=2), {"DLCI_BASE_MARK": "base"})
    both, head_only, crashes = findings
    assert both.new_in_pr is False and both.base["reproducer_fails_on_base"] and not is_new(both)
    assert head_only.new_in_pr is True and head_only.repro_passes_on_base is True
    assert crashes.new_in_pr is True and crashes.repro_passes_on_base is False
    # the same from a warm interpreter in the base's environment: its pass is taken, the rest decided fresh
    from dlci.findings.repro import test_env
    from dlci.findings.warm import WarmPool
    for f in findings:
        f.new_in_pr, f.repro_passes_on_base, f.base = True, None, {"status": "pass"}
    with WarmPool(test_env({"DLCI_BASE_MARK": "base"}), 1, preload=()) as warm:
        for f in findings:
            check_one_on_base(f, RunOptions(out=tmp_path, workers=2), {"DLCI_BASE_MARK": "base"}, warm=warm)
    assert both.new_in_pr is False and both.base["reproducer_fails_on_base"]
    assert head_only.repro_passes_on_base is True
    assert "warm" in (tmp_path / "repro" / "head_only.base.log").read_text()
    assert "warm" not in (tmp_path / "repro" / "both.base.log").read_text()
    assert crashes.new_in_pr is True and crashes.repro_passes_on_base is False


def test_scan_works_on_the_repository_it_is_run_in_and_refuses_outside_one(tmp_path, monkeypatch):
    """`dlci scan --base main --head pr` inside a repository scans that repository (here a docs-only change: nothing
    to test, and the report names its revisions); outside any repository, exit 2 with what to give."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("hello\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "pr")
    (repo / "README.md").write_text("hello again\n")
    git(repo, "commit", "-q", "-am", "docs")
    head = git(repo, "rev-parse", "HEAD")
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    code, doc = scan(tmp_path, "--base", "main", "--head", "pr")
    assert code == 0 and doc["pr"]["head"] == head and doc["pr"]["nothing_to_test"], doc.get("pr")
    assert Path(doc["pr"]["repo"]).resolve() == repo.resolve()
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    monkeypatch.chdir(outside)
    assert main(["scan", "--base", "main", "--head", "pr", "--out", str(tmp_path / "o2")]) == EXIT_USAGE
    assert main(["ops", "--base", "main", "--head", "pr"]) == EXIT_USAGE


@pytest.mark.parametrize("yml, says", [
    ("python_path: [src]\n", "is not importable with python_path"),
    ("python_path: [python]\nenv:\n  TVM_LIBRARY_PATH: /nonexistent/lib\n", "cannot import"),
])
def test_a_head_checkout_the_tests_do_not_import_stops_the_scan_with_exit_3_and_no_report(tmp_path, capsys, yml,
                                                                                           says):
    """The proof that the tests import the checkout runs beside the first tests: when it fails they stop, the scan
    exits 3 naming what to set, and no report of other code than the PR's is written."""
    import time as _time
    repo, base, head = samples.build("tvm-elu-minimum", tmp_path / "repo")
    git(repo, "checkout", "-q", head)
    (repo / ".dlci.yml").write_text(yml)  # how the head builds and imports itself is the head's to say
    (repo / "src").mkdir()
    (repo / "src" / "README").write_text("an entry that holds none of the converter files\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    t0 = _time.monotonic()
    code, doc = scan(tmp_path, "--repo", str(repo), "--base", base, "--head", "HEAD", "--budget", "120",
                     "--targets", "tvm.from_exported_program")
    assert code == ExitCode.INTERNAL
    assert says in capsys.readouterr().err
    assert doc == {}  # no findings.json
    assert _time.monotonic() - t0 < 90
