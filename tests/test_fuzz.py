"""Graph fuzzing end to end on the pinned stack: a real multi-operator bug localised, reduced and reproduced; the
`dlci fuzz` output contract; bad input; the fuzz share of a PR scan catching a graph-level regression."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from dlci.cli import main  # noqa: E402
from dlci.errors import ExitCode  # noqa: E402
from dlci.models.graph import Graph, Node, Value, graph_instance  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures"


def _slice_gather_network() -> tuple[Graph, list[np.ndarray]]:
    """A network holding OpenVINO 2026.4's Slice -> GatherElements bug (the converted model reads the unsliced
    tensor, and shape inference then rejects it) among operators that are fine: each operator alone passes."""
    idx = np.array([[1, 2, 0], [2, 0, 0]], np.int64)
    g = Graph([Value("x", (7, 4))],
              [Node("Relu", ["x"], ["r"]),
               Node("Slice", ["r", "starts", "ends", "axes"], ["s"]),
               Node("GatherElements", ["s", "idx"], ["g"], {"axis": 0}),
               Node("Tanh", ["g"], ["y"]),
               Node("Exp", ["x"], ["e"])],
              ["y", "e"], {"starts": np.array([0, 0]), "ends": np.array([3, 3]), "axes": np.array([0, 1]), "idx": idx})
    return g, [np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32)]


def test_a_multi_operator_bug_is_localised_reduced_to_its_operators_and_reproduced_alone(tmp_path):
    pytest.importorskip("openvino")
    from dlci import targets
    from dlci.campaign import Campaign, RunOptions, run_tests, stages
    g, xs = _slice_gather_network()
    inst = graph_instance(g, xs, source="test", test="slice-gather network")
    chosen = targets.select("openvino.onnx,onnxruntime")
    campaign = Campaign({inst.id: inst}, chosen)
    options = RunOptions(out=tmp_path, budget=120, workers=2, batch=False, schedule="plan", reduce_seconds=60)
    report = run_tests(campaign, stages.plan([inst], chosen), options)
    assert [f.target for f in report.findings] == ["openvino.onnx"], report.stats  # ORT runs it right
    f = report.findings[0]
    graph = f.extra["graph"]
    # localised in the worker: every operator alone (inputs from the reference) passes; the reduced graph keeps the
    # two it needs, each checked alone again
    assert graph["node_types"] == ["Slice", "GatherElements"], graph
    assert graph["multi_operator_only"] is True and graph["every_operator_checked"] is True
    assert set(graph["each_operator_alone"].values()) == {"pass"}
    assert f.reduction["before"]["operators"] == 5 and f.reduction["after"]["operators"] == 2
    assert f.repro_checked is True
    script = tmp_path / f.repro
    assert "Slice" in script.read_text() and "GatherElements" in script.read_text()
    assert subprocess.run([sys.executable, str(script)], capture_output=True).returncode == 1
    report_md = (tmp_path / "report.md").read_text()
    assert "multi-operator only" in report_md
    assert "no operator alone fails this way; the error names `onnx::GatherElements`" in report_md


@pytest.mark.slow
def test_dlci_fuzz_writes_findings_with_coverage_and_a_rejecting_target_is_unsupported(tmp_path, monkeypatch):
    monkeypatch.setenv("DLCI_TARGET_MODULES", "rejecting_target")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FIXTURES / "targets"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(str(FIXTURES / "targets"))
    out = tmp_path / "out"
    code = main(["fuzz", "--targets", "test.rejects_everything,onnxruntime", "--budget", "30", "--seed", "1",
                 "--out", str(out)])
    assert code in (ExitCode.CLEAN, ExitCode.FINDINGS)
    doc = json.loads((out / "findings.json").read_text())
    fz = doc["stats"]["fuzz"]
    assert set(fz["coverage"]) == {"OTC", "IDC", "ODC", "SEC", "SPC", "OLC"}
    assert all(0 < v <= 1 for k, v in fz["coverage"].items() if k != "SEC")
    assert fz["networks"]["kept"] >= 3 and fz["timeline"] and fz["strategy"]["strategy"] == "mcts"
    rejecting = doc["stats"]["per_target"]["test.rejects_everything"]
    assert rejecting["unsupported"] >= 3 and rejecting["crash"] == 0 and rejecting["inconsistency"] == 0
    assert not [f for f in doc["findings"] if f["target"] == "test.rejects_everything"]
    assert "## Graph fuzzing" in (out / "report.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["--blocks", "NoSuchBlock"], "no block NoSuchBlock"),
    (["--targets", "tf.lite"], "makes ONNX and torch networks"),
    (["--ops", "NoSuchOp"], "in no block"),
    (["--max-blocks", "0"], "at least 1"),
])
def test_dlci_fuzz_bad_input_is_a_usage_error(tmp_path, capsys, args, message):
    assert main(["fuzz", "--out", str(tmp_path / "o"), *args]) == ExitCode.USAGE
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_the_fuzz_share_of_a_scan_catches_a_graph_level_regression_no_single_operator_test_sees(tmp_path):
    """The sample reverts TVM's fix #18209: the importer's node loop again refuses a Resize whose sizes are computed
    from Shape. The single-operator Resize tests pass (constant sizes); networks built around the touched operators
    find it, new in the PR."""
    pytest.importorskip("tvm")
    out = tmp_path / "out"
    # the directed search is not what this tests: its time goes to the networks
    code = main(["scan", "--sample", "tvm-onnx-resize-shapeexpr", "--budget", "120", "--sources", "onnx_node",
                 "--limit-per-op", "1", "--workers", "2", "--no-directed", "--fuzz-share", "0.7", "--out", str(out)])
    assert code == ExitCode.FINDINGS
    doc = json.loads((out / "findings.json").read_text())
    assert doc["pr"]["fuzz"]["targets"] == ["tvm.from_onnx"] and "Resize" in doc["pr"]["fuzz"]["built_around"]
    assert any(g["component"] == "tvm:frontend.onnx" for g in json.loads((out / "ops.json").read_text())["graph_level"])
    caught = [f for f in doc["findings"] if f["new_in_pr"] and "cannot handle ShapeExpr" in f["message"]]
    assert caught and all(f["origin"]["source"] == "fuzz" for f in caught), doc["findings"]
    assert caught[0]["operator"] == "onnx::Resize" and "Shape" in caught[0]["graph"]["node_types"]
    # no operator-level test saw it
    assert not [f for f in doc["findings"] if f["new_in_pr"] and f["origin"]["source"] != "fuzz"]
