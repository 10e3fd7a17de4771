"""`dlci test --model FILE.onnx`: a whole model is one instance; a failure in it is reduced by graph delta debugging
to the operators it needs, and its reproducer fails alone."""
from __future__ import annotations

import pytest

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as h

ROOT = Path(__file__).resolve().parent.parent


def dlci(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "dlci", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))


def _model(path: Path, dynamic: bool = False) -> Path:
    # eight operators; TVM 0.27's ONNX frontend cannot feed a Shape output to Identity ("cannot handle ShapeExpr")
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Sigmoid", ["r"], ["sg"]),
             h.make_node("Mul", ["sg", "x"], ["m"]), h.make_node("Shape", ["m"], ["s"]),
             h.make_node("Identity", ["s"], ["si"]), h.make_node("Cast", ["si"], ["sf"], to=1),
             h.make_node("ReduceSum", ["m"], ["rs"], keepdims=0), h.make_node("Add", ["rs", "sf"], ["y"])]
    shape = ["n", 3] if dynamic else [2, 3]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", 1, shape)], [h.make_tensor_value_info("y", 1, [2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, path)
    return path


@pytest.mark.slow
def test_a_whole_model_failure_is_cut_down_to_the_operators_it_needs(tmp_path):
    model = _model(tmp_path / "shape_model.onnx")
    out = tmp_path / "out"
    proc = dlci("test", "--model", str(model), "--targets", "tvm.from_onnx", "--budget", "120", "--out", str(out),
                "--reduce-seconds", "120")
    assert proc.returncode == 1, proc.stderr[-3000:]
    [f] = json.loads((out / "findings.json").read_text())["findings"]
    # no operator fails alone (each is checked, fed from the reference): the model stays named as a whole, and the
    # reduced graph's two operators are each checked alone
    assert f["operator"] == "model::shape_model" and f["symptom"] == "ValueError"
    assert f["graph"]["multi_operator"] and set(f["graph"]["each_operator_alone"]) == {"0:Shape", "1:Identity"}
    assert f["reduction"]["before"]["operators"] == 8 and f["reduction"]["after"]["operators"] == 2
    assert f["reduction"]["confirmed"] and f["repro_checked"]
    assert "8 to 2 operators" in (out / "report.md").read_text()


def test_bad_model_inputs_are_usage_errors(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    proc = dlci("test", "--model", str(junk), "--out", str(tmp_path / "o1"))
    assert proc.returncode == 2 and "not a valid ONNX model" in proc.stderr
    dyn = _model(tmp_path / "dyn.onnx", dynamic=True)
    proc = dlci("test", "--model", str(dyn), "--out", str(tmp_path / "o2"), "--targets", "onnxruntime")
    assert proc.returncode == 2 and "dynamic shape" in proc.stderr and "--inputs" in proc.stderr
    # with its values given, the dynamic model runs (ONNX Runtime computes it correctly: exit 0)
    np.savez(tmp_path / "x.npz", x=np.ones((2, 3), np.float32))
    proc = dlci("test", "--model", str(dyn), "--inputs", str(tmp_path / "x.npz"), "--out", str(tmp_path / "o3"),
                "--targets", "onnxruntime", "--budget", "30")
    assert proc.returncode == 0, proc.stderr[-2000:]
