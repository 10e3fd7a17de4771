"""Verdicts a maintainer can trust: each test pins one defect seen in real PR-mode scans and fails without its fix
(real workers, real converters; the sample-PR scans that need a TVM checkout are in test_scan.py)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dlci.models.outputs import shape_only_outputs
from dlci.models.references import reference
from dlci.errors import ExitCode
from dlci.oracles.compare import compare_outputs
from dlci.outcome import INCONSISTENT, INVALID, PASS, UNSUPPORTED
from dlci.targets import get
from dlci.testcase import execute

sys.path.insert(0, str(Path(__file__).parent))
from test_models_targets import onnx_node, torch_fn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
X = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)


# -- 1. oracle gaps ------------------------------------------------------------------------------------------------

def test_int32_where_the_onnx_model_declares_int64_indices_is_a_dtype_mismatch():
    inst = onnx_node("ArgMax", [X], attrs={"axis": 1, "keepdims": 0}, expected=None)
    ref, ref64 = reference(inst)
    assert ref[0].dtype == np.int64
    assert compare_outputs([ref[0].astype(np.int32)], ref, ref64)["symptom"] == "dtype mismatch"
    assert compare_outputs([ref[0].copy()], ref, ref64) is None


@pytest.fixture(scope="module")
def undefined_values(tmp_path_factory):
    from dlci.sources import load
    return load("opinfo", cache_dir=tmp_path_factory.mktemp("cache"), limit_per_op=3,
                ops=["empty", "empty_like", "new_empty", "empty_strided"])


def test_operators_with_undefined_values_are_harvested(undefined_values):
    ops = {i.op.split(".")[0] for i in undefined_values}
    assert {"aten::empty", "aten::empty_like", "aten::new_empty", "aten::empty_strided"} <= ops


def test_operators_with_undefined_values_are_judged_by_shape_dtype_and_crash_only(undefined_values):
    inst = next(i for i in undefined_values if i.op.startswith("aten::empty_like") and i.inputs[0].shape)
    ref, ref64 = reference(inst)
    assert shape_only_outputs(inst, len(ref)) == {0}
    other_values = [np.full_like(ref[0], 7)]
    assert compare_outputs(other_values, ref, ref64, skip_values={0}) is None
    assert compare_outputs([ref[0].reshape(-1)[:-1]], ref, ref64, skip_values={0})["symptom"] == "shape mismatch"
    wrong_dtype = ref[0].astype(np.float64 if ref[0].dtype != np.float64 else np.float32)
    assert compare_outputs([wrong_dtype], ref, ref64, skip_values={0})["symptom"] == "dtype mismatch"
    assert execute(inst, "tvm.from_fx").status == PASS  # a valid test now, where it had none


# -- 5. exporter bugs are not charged to an ONNX frontend -----------------------------------------------------------

def test_onnx_frontend_is_judged_by_the_exported_model_not_by_torch_eager():
    """torch.onnx drops avg_pool2d's divisor_override: the ONNX model computes a plain average, TVM's ONNX frontend
    computes exactly that (a pass), and the exporter carries the mismatch."""
    inst = torch_fn("torch.nn.functional.avg_pool2d", [X], args=[{"$t": 0}, 2], kwargs={"divisor_override": 3},
                    op="aten::avg_pool2d")
    onnx_frontend = execute(inst, "tvm.from_onnx")
    assert onnx_frontend.status == PASS, onnx_frontend.message
    exporter = execute(inst, "torch.onnx")
    assert exporter.status == INCONSISTENT and exporter.symptom == "value mismatch"


# -- 5. harness artefacts and statements of a limitation -----------------------------------------------------------

def test_missing_tvm_headers_are_a_harness_failure_not_a_finding(monkeypatch):
    target = get("tvm.from_fx")
    message = "Cannot find TVM include path. Please set TVM_HOME or install tvm"
    assert target.is_harness_failure(RuntimeError(message))
    assert not target.is_harness_failure(RuntimeError("Check failed: lhs.dtype == rhs.dtype"))

    def broken_compile(mod):
        raise RuntimeError(message)
    monkeypatch.setattr(type(target), "compile", lambda self, mod: broken_compile(mod))
    o = execute(torch_fn("torch.nn.functional.elu", [X]), "tvm.from_fx")
    assert o.status == INVALID and o.stage == "harness"


def test_a_tvm_checkout_over_the_installed_wheel_gets_the_wheel_headers(tmp_path):
    pytest.importorskip("tvm")
    from dlci.profiles import registry
    (tmp_path / "python" / "tvm").mkdir(parents=True)
    registry()["tvm"].prepare_checkout(tmp_path)
    assert (tmp_path / "python" / "tvm" / "include" / "tvm" / "runtime").is_dir()


def test_a_converters_statement_of_a_limitation_is_unsupported():
    """TVM's ONNX frontend states its limits ("Only constant axes currently supported", "TopK k must be a constant"):
    axes and k fed as graph inputs are a limitation, not a crash."""
    axes = np.array([1], dtype=np.int64)
    reduce_max = execute(onnx_node("ReduceMax", [X, axes], opset=18), "tvm.from_onnx")
    assert reduce_max.status == UNSUPPORTED, reduce_max.message
    assert "constant" in reduce_max.message


@pytest.mark.parametrize("statement", ["Only constant axes currently supported", "TopK k must be a constant",
                                       "Only constant depth currently supported",
                                       "Dynamic shapes are not supported yet for this op"])
def test_limitation_statements_read_as_unsupported(statement):
    from dlci.targets._common import NOT_SUPPORTED
    assert NOT_SUPPORTED.search(statement)


@pytest.mark.parametrize("message", ["Check failed: (axis < ndim) is false", "index 3 is out of bounds",
                                     "Constant folding produced a wrong shape"])
def test_a_converter_crash_is_not_read_as_a_limitation(message):
    from dlci.targets._common import NOT_SUPPORTED
    assert not NOT_SUPPORTED.search(message)


# -- 7. the budget bounds the whole run, and a cancellation is honoured ---------------------------------------------

def _dlci(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dlci", "test", "--out", str(out), "--workers", "2", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


RUN = ["--ops", "elu,softplus,avg_pool2d,hardtanh,leaky_relu,celu", "--targets",
       "tvm.from_fx,tvm.from_onnx,openvino.pytorch,tvm.from_exported_program", "--limit-per-op", "8"]


@pytest.mark.slow
def test_sigterm_after_the_tests_ends_the_run_within_seconds_with_its_partial_report(tmp_path):
    """A cancellation while reproducers run alone (the engine's own handling covers the test phase:
    test_campaign.py) is honoured too: the child processes are killed and the partial report written."""
    out = tmp_path / "out"
    proc = _dlci(out, *RUN, "--budget", "60")
    seen = []
    for line in proc.stdout:  # the progress lines, as they come
        seen.append(line)
        if line.startswith("dlci: reproducer"):  # the first reproducer has run alone: more are running
            break
    assert proc.poll() is None, "".join(seen)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    log = "".join(seen) + rest
    assert time.monotonic() - t0 < 20, log
    assert proc.returncode == ExitCode.INTERNAL, log
    doc = json.loads((out / "findings.json").read_text())
    assert doc["stats"]["tests_run"] > 0 and doc["stats"].get("interrupted"), doc["stats"]
    assert "partial" in (out / "report.md").read_text()


@pytest.mark.slow
def test_the_budget_bounds_the_whole_run_confirmation_reduction_and_reproducers_included(tmp_path):
    out = tmp_path / "out"
    budget = 45
    t0 = time.monotonic()
    proc = _dlci(out, *RUN, "--budget", str(budget))
    log, _ = proc.communicate(timeout=budget + 300)
    wall = time.monotonic() - t0
    assert proc.returncode in (ExitCode.CLEAN, ExitCode.FINDINGS), log
    assert wall < budget + 20, (wall, log)  # interpreter start and imports, then the budget, then the report
    doc = json.loads((out / "findings.json").read_text())
    assert doc["stats"]["tests_run"] > 0


def test_a_crash_on_an_input_the_base_never_took_is_old():
    """A real refactor (TVM's Split via relax.op.split) moved the rejection of zero-size splits from convert to
    compile, with another message; another (a real refactor of the FX norm converter) turned the TypeError of
    ord='nuc', which the target calls unsupported, into a ValueError. The input never worked: the PR did not break
    it. A base that got further than head (it converted, then failed at run) is the PR's doing."""
    from dlci.findings import Finding
    from dlci.outcome import CRASH, UNSUPPORTED, Outcome
    from dlci.scan.attribution import _never_worked
    f = Finding(id="F001", oracle="crash", operator="onnx::Split", target="tvm.from_onnx", target_version="",
                symptom="InternalError", stage="compile", signature="s", message="split_indices must be sorted",
                instance_id="i", origin={}, instances=["i"], operators=["onnx::Split"])
    base = Outcome("i", "onnx::Split", "tvm.from_onnx", CRASH, "convert", "InternalError", "Check failed: sections")
    assert _never_worked(base, f)
    assert _never_worked(Outcome("i", "onnx::Split", "tvm.from_onnx", CRASH, "convert", "ValueError", "x"), f)
    assert not _never_worked(Outcome("i", "onnx::Split", "tvm.from_onnx", CRASH, "run", "ValueError", "x"), f)
    assert not _never_worked(Outcome("i", "onnx::Split", "tvm.from_onnx", PASS), f)
    nuc = Finding(id="F002", oracle="crash", operator="aten::norm", target="tvm.from_fx", target_version="",
                  symptom="ValueError", stage="convert", signature="s2", message="could not convert string to float",
                  instance_id="j", origin={}, instances=["j"], operators=["aten::norm"])
    assert _never_worked(Outcome("j", "aten::norm", "tvm.from_fx", UNSUPPORTED, "convert", "TypeError", "/ str"), nuc)
    wrong = Finding.from_dict({**nuc.to_dict(), "oracle": "inconsistency", "symptom": "value mismatch"})
    assert not _never_worked(Outcome("j", "aten::norm", "tvm.from_fx", CRASH, "convert", "TypeError", "x"), wrong)
