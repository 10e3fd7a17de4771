"""onnx_variants: the ways real models present an operator to a converter (constants, older opsets, defaults)."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest

from dlci.findings.repro import render
from dlci.outcome import PASS, UNSUPPORTED
from dlci.sources import load_with_stats
from dlci.sources.onnx_variants import KINDS
from dlci.testcase import execute


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    insts, stats = load_with_stats("onnx_variants", cache_dir=tmp_path_factory.mktemp("cache"),
                                   ops=["onnx::ReduceMax", "onnx::Clip", "onnx::LayerNormalization"])
    return insts, stats


def _model(inst):
    return onnx.load_from_string(inst.arrays["model"].tobytes())


def test_each_kind_is_derived_and_valid(variants):
    insts, stats = variants
    kinds = collections.Counter(i.call["variant"] for i in insts)
    assert {"initializer", "constant_node", "all_initializers", "opset", "optional_absent",
            "attribute_default", "symbolic_batch", "symbolic_dims"} <= set(kinds), kinds
    assert set(kinds) <= set(KINDS)
    for inst in insts:
        model = _model(inst)
        onnx.checker.check_model(model, full_check=True)
        assert inst.origin.source == "onnx_variants" and f"[{inst.call['variant']}:" in inst.origin.test
        assert len(inst.inputs) == len([i for i in model.graph.input
                                        if i.name not in {t.name for t in model.graph.initializer}])
        assert inst.expected_arrays() is not None


def test_constant_inputs_keep_the_outputs_and_move_the_input_out_of_the_graph_inputs(variants):
    insts, _ = variants
    v = next(i for i in insts if i.op == "onnx::ReduceMax" and i.call["variant"] == "initializer")
    model = _model(v)
    assert len(model.graph.input) == 1 and model.graph.initializer[0].data_type == onnx.TensorProto.INT64
    c = next(i for i in insts if i.op == "onnx::ReduceMax" and i.call["variant"] == "constant_node")
    assert [n.op_type for n in _model(c).graph.node] == ["Constant", "ReduceMax"]


def test_older_opsets_are_declared(variants):
    insts, _ = variants
    clip = {i.call["opset"]["ai.onnx"] for i in insts if i.op == "onnx::Clip" and i.call["variant"] == "opset"}
    assert clip and max(clip) < 13
    assert 6 in clip  # min/max as attributes: the form TVM's Clip._impl_v1 converts


def test_the_variants_pass_the_reference_runtime(variants):
    insts, _ = variants
    for inst in insts[::3]:
        o = execute(inst, "onnxruntime")
        assert o.status == PASS, (inst.origin.test, o.status, o.message)


def test_a_constant_input_takes_the_converter_path_the_graph_input_never_reaches(variants):
    """TVM's ReduceMax-18 converts only constant axes: the backend case (axes fed at run time) is unsupported, its
    initializer variant is converted, compiled and compared."""
    pytest.importorskip("tvm")
    insts, _ = variants
    from dlci.sources import load
    v = next(i for i in insts if i.op == "onnx::ReduceMax" and i.call["variant"] == "initializer")
    base_test = v.origin.test.split(" [")[0]
    base = next(i for i in load("onnx_node") if i.origin.test == base_test)
    assert execute(base, "tvm.from_onnx").status == UNSUPPORTED
    assert execute(v, "tvm.from_onnx").status == PASS


def test_bare_framework_spellings_select_their_operators():
    from dlci import operators
    from dlci.sources import load
    insts = load("onnx_node")
    assert {i.op for i in operators.select(insts, ["ReduceMax"])} >= {"onnx::ReduceMax"}
    assert np.all([i.op != "onnx::ReduceMax" for i in operators.select(insts, ["relu"])])


def test_symbolic_dims_are_declared_and_reach_the_converter_as_shape_variables(variants):
    """A dynamic-batch model: the float input's leading dim is a dim_param, outputs keep their rank only; TVM imports it
    with a shape variable (not pinned by the harness) and still computes the case's expected outputs."""
    insts, _ = variants
    v = next(i for i in insts if i.op == "onnx::Clip" and i.call["variant"] == "symbolic_batch")
    model = _model(v)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and all(d.HasField("dim_value") for d in dims[1:])
    assert not any(d.HasField("dim_value") for d in model.graph.output[0].type.tensor_type.shape.dim)
    pytest.importorskip("tvm")
    from dlci.targets import get
    mod = get("tvm.from_onnx").convert(model, v.input_arrays())
    assert dims[0].dim_param in mod.script()  # the target keeps the symbolic dim the model declares
    assert execute(v, "tvm.from_onnx").status == PASS


def test_a_symbolic_dim_finding_reproduces_standalone(tmp_path):
    """TVM's Expand with a symbolic input dim keeps the target shape's 1 instead of broadcasting the input's dim
    (shape [2, 1, 6] for [2, 3, 6]): found by symbolic_batch only, and its reproducer declares the dim the same way."""
    pytest.importorskip("tvm")
    from dlci.outcome import INCONSISTENT
    from dlci.targets import get
    from tests.test_repro import finding_of, run_alone
    insts, _ = load_with_stats("onnx_variants", cache_dir=tmp_path / "cache", ops=["onnx::Expand"])
    found = [v for v in insts if v.call["variant"] == "symbolic_batch"
             and execute(v, "tvm.from_onnx").status == INCONSISTENT]
    assert found, "no symbolic Expand variant shows the wrong shape"
    v = found[0]
    path = render(get("tvm.from_onnx"), finding_of(v, "tvm.from_onnx"), v, tmp_path)
    code, out, err = run_alone(path)
    assert code == 1 and "REPRODUCED" in out, (code, out, err[-2000:])


def _reverted_params_names(monkeypatch):
    """TVM's fix f52143e reverted in the installed frontend: with keep_params_in_input the kept initializers are keyed
    by their ONNX name, not by the variable's (an exporter's ``onnx::`` prefix removed), so converters that need a
    constant (Reshape's shape) no longer find it."""
    from tvm.relax.frontend.onnx import onnx_frontend
    parse = onnx_frontend.ONNXGraphImporter._parse_graph_initializers

    def reverted(self, graph):
        parse(self, graph)
        if self._keep_params_in_input:
            self._params = {t.name: self._params[t.name.removeprefix("onnx::")] for t in graph.initializer}
    monkeypatch.setattr(onnx_frontend.ONNXGraphImporter, "_parse_graph_initializers", reverted)


def test_exported_params_find_a_reverted_fix_the_initializer_form_misses(tmp_path, monkeypatch):
    """Initializers as torch.onnx names and shares them, imported as parameters the way TVM's own tests import: the
    variant passes on the released frontend and crashes on it with the params-name fix reverted, which the plain
    initializer form (imported as constants) never notices."""
    pytest.importorskip("tvm")
    import tvm
    from dlci.models import onnx_keeps_params
    from dlci.targets import get
    insts, _ = load_with_stats("onnx_variants", cache_dir=tmp_path / "cache", ops=["onnx::Reshape"])
    v = next(i for i in insts if i.call["variant"] == "exported_params")
    plain = next(i for i in insts if i.call["variant"] == "initializer")
    model = _model(v)
    shape_input = model.graph.node[0].input[1]
    assert shape_input.startswith("onnx::Reshape_") and onnx_keeps_params(model)
    assert [n.input[1] for n in model.graph.node] == [shape_input, shape_input]  # one initializer, two nodes
    assert len(model.graph.output) == 2 and not onnx_keeps_params(_model(plain))
    mod, params = get("tvm.from_onnx").convert(model, v.input_arrays())
    assert len(params) == 1 and isinstance(mod, tvm.IRModule)  # the shape is a kept parameter
    assert execute(v, "tvm.from_onnx").status == PASS and execute(plain, "tvm.from_onnx").status == PASS
    _reverted_params_names(monkeypatch)
    assert execute(plain, "tvm.from_onnx").status == PASS
    o = execute(v, "tvm.from_onnx")
    assert o.status != PASS and o.stage == "convert", (o.status, o.message)


def test_an_exported_params_reproducer_imports_with_kept_params(tmp_path):
    """The reproducer of a kept-params case imports as the campaign did (initializers as inputs, passed after the
    graph inputs): on the released frontend it runs to the end and says the case passes."""
    pytest.importorskip("tvm")
    from dlci.targets import get
    from tests.test_repro import finding_of, run_alone
    insts, _ = load_with_stats("onnx_variants", cache_dir=tmp_path / "cache", ops=["onnx::Reshape"])
    v = next(i for i in insts if i.call["variant"] == "exported_params")
    plain = next(i for i in insts if i.call["variant"] == "initializer")
    assert "keep_params" not in render(get("tvm.from_onnx"), finding_of(plain, "tvm.from_onnx"), plain,
                                                                  tmp_path).read_text()
    path = render(get("tvm.from_onnx"), finding_of(v, "tvm.from_onnx"), v, tmp_path)
    assert "keep_params_in_input=True" in path.read_text()
    code, out, err = run_alone(path)
    assert code == 0, (code, out, err[-2000:])


def test_rank_variants_give_any_rank_operators_the_other_ranks(tmp_path):
    """GlobalAveragePool's node tests are all 4-D, while its schema takes any rank: the rank variants give it 3-D and
    5-D inputs (a TVM converter that lowered it to a 2-D pool crashed on those only); a pooling op whose
    kernel_shape fixes the rank gets none."""
    insts, stats = load_with_stats("onnx_variants", cache_dir=tmp_path / "cache",
                                   ops=["onnx::GlobalAveragePool", "onnx::MaxPool"])
    ranks = collections.defaultdict(set)
    for inst in insts:
        if inst.call["variant"] == "rank":
            ranks[inst.op].add(len(inst.inputs[0].shape))
            got = execute(inst, "tvm.from_onnx")
            assert got.status == PASS, (inst.origin.test, got.status, got.message)
    assert ranks["onnx::GlobalAveragePool"] == {3, 5}, dict(ranks)
    assert "onnx::MaxPool" not in ranks
