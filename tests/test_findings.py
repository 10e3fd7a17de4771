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
