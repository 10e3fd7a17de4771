"""Signatures group one bug's instances and keep different bugs apart."""
from dlci.findings import converter_frame, normalize_message, signature
from dlci.outcome import CRASH, INCONSISTENT, Outcome

TB = '''Traceback (most recent call last):
  File "/venv/site-packages/dlci/testcase.py", line 80, in execute
  File "/venv/site-packages/tvm/relax/frontend/torch/base_fx_graph_translator.py", line 512, in _conv2d
  File "/venv/site-packages/tvm/ffi/error.py", line 10, in raise_error
'''


def test_converter_frame_skips_plumbing():
    assert converter_frame(TB, ("tvm",)) == "tvm/relax/frontend/torch/base_fx_graph_translator.py:_conv2d"
    assert converter_frame(TB, ("openvino",)) == ""


def test_message_normalization_drops_instance_details():
    a = normalize_message("Check failed: dim 3 != 4 at 0x7ffd1234 in /src/tvm/x.cc:120\nmore")
    b = normalize_message("Check failed: dim 5 != 7 at 0x7ffd9999 in /other/tvm/x.cc:99")
    assert a == b


def test_signature_groups_per_converter_and_symptom():
    c1 = Outcome("i1", "aten::conv2d", "tvm.from_fx", CRASH, "convert", "TVMError", "shape 3 bad", TB)
    c2 = Outcome("i2", "aten::conv2d", "tvm.from_fx", CRASH, "convert", "TVMError", "shape 7 bad", TB)
    c3 = Outcome("i3", "aten::conv2d", "tvm.from_fx", CRASH, "compile", "TVMError", "shape 7 bad", TB)
    assert signature(c1, ("tvm",)) == signature(c2, ("tvm",)) != signature(c3, ("tvm",))
    i1 = Outcome("i1", "aten::elu", "openvino.onnx", INCONSISTENT, "compare", "value mismatch", "3 differ")
    i2 = Outcome("i2", "aten::elu", "openvino.onnx", INCONSISTENT, "compare", "value mismatch", "9 differ")
    i3 = Outcome("i2", "aten::selu", "openvino.onnx", INCONSISTENT, "compare", "value mismatch", "9 differ")
    assert signature(i1) == signature(i2) != signature(i3)


def test_signature_of_a_graph_crash_survives_growing_and_reducing_the_graph():
    """TVM names an operand by the graph input's name or by the Relax var it numbers as it builds (lv2, lv9):
    the same Pow bug behind 0 or 3 other operators is one finding, and a reducer keeping its signature can cut
    the graph down to the Pow alone."""
    import numpy as np
    import pytest
    pytest.importorskip("tvm")
    from onnx import TensorProto, helper, numpy_helper
    from dlci.models.onnx_io import instance_from_model
    from dlci.targets import get
    from dlci.testcase import execute

    def pow_after(ops):
        nodes, x = [], "x"
        for k, op in enumerate(ops):
            nodes.append(helper.make_node(op, [x], [f"t{k}"]))
            x = f"t{k}"
        nodes.append(helper.make_node("Pow", [x, "e"], ["y"]))  # float base, int32 exponent: TVM rejects the mix
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                              initializer=[numpy_helper.from_array(np.array([2, 3, 1], np.int32), "e")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    sigs = []
    for ops in ([], ["Relu", "Neg", "Abs"]):
        inst = instance_from_model(pow_after(ops), [np.array([1.0, 2.0, 3.0], np.float32)])
        inst.call["localise"] = True
        out = execute(inst, "tvm.from_onnx")
        assert out.status == CRASH, out.message
        sigs.append(signature(out, get("tvm.from_onnx").modules))
    assert sigs[0] == sigs[1] and "R.power(%v," in sigs[0]
    assert normalize_message("alloc12 failed at Pow_3") == normalize_message("alloc4 failed at Pow_17")
