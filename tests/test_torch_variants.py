"""torch_variants: OpInfo calls re-spelled (by name, by position, defaults left out) reach converter code the
samples as written never do."""
from __future__ import annotations

import collections

import pytest

from dlci import models
from dlci.models.references import reference
from dlci.findings.repro import render
from dlci.outcome import CRASH
from dlci.sources import load, load_with_stats
from dlci.testcase import execute


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    return load_with_stats("torch_variants", ops=["conv_transpose2d", "split"])


def test_keyword_and_positional_spellings_compute_the_same(variants):
    insts, stats = variants
    kinds = collections.Counter(i.origin.test.split(" [")[1].split(":")[0] for i in insts)
    assert {"keywords", "positional"} <= set(kinds), kinds
    base = {i.origin.test: i for i in load("opinfo") if i.op in {v.op for v in insts}}
    respelled = [v for v in insts if v.origin.test.split(" [")[1].split(":")[0] in ("keywords", "positional")]
    for v in respelled[:10]:  # the dynamic and dtype kinds keep the spelling
        b = base[v.origin.test.split(" [")[0]]
        assert (v.call["args"], v.call["kwargs"]) != (b.call["args"], b.call["kwargs"])
        for x, y in zip(reference(v)[0], reference(b)[0]):
            assert x.shape == y.shape and (x == y).all()


def test_a_spelling_takes_another_converter_path_than_the_sample_as_written(variants):
    """TVM's FX importer reads conv_transpose2d's settings from node.args: the OpInfo sample (settings by keyword)
    gets wrong values, the same call by position passes, and weight/bias by name crash it (tuple index)."""
    pytest.importorskip("tvm")
    insts, _ = variants
    base = {i.origin.test: i for i in load("opinfo") if i.op == "aten::conv_transpose2d"}
    verdicts = set()
    for v in (v for v in insts if v.op == "aten::conv_transpose2d"):
        b = base[v.origin.test.split(" [")[0]]
        o = execute(v, "tvm.from_fx")
        verdicts.add((execute(b, "tvm.from_fx").status, o.status, o.symptom))
        if len({(x, y) for x, y, _ in verdicts if x != y}) >= 2:
            break
    assert any(x != y for x, y, _ in verdicts), verdicts
    assert any(y == CRASH and s == "IndexError" for _, y, s in verdicts), verdicts


def test_a_dynamic_variant_exports_symbolic_dims_and_its_reproducer_does_too(tmp_path):
    """dynamic_batch: torch.export with Dim.AUTO on the float inputs' leading dim; the exported program carries a
    SymInt, TVM's translator converts it, and a reproducer of that instance exports it the same way."""
    pytest.importorskip("tvm")
    import numpy as np

    from dlci.instance import Instance, Origin, TensorSpec
    from tests.test_repro import finding_of, run_alone
    from dlci.targets import get
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    inst = Instance(op="aten::softmax", framework="torch", origin=Origin("test", "hand"), arrays={"in:0": x},
                    call={"kind": "torch_fn", "fn": "torch.nn.functional.softmax", "args": [{"$t": 0}],
                          "kwargs": {"dim": -1}, "dynamic": "batch"}, inputs=[TensorSpec.of(x)], params={})
    ep = models.build(inst, "exported_program")
    assert ep.range_constraints, "no symbolic dim in the exported program"
    assert models.dynamic_shapes_code(inst) == ", dynamic_shapes=({0: torch.export.Dim.AUTO},)"
    outcome = execute(inst, "tvm.from_exported_program")
    assert outcome.status == "pass", outcome.message
    path = render(get("tvm.from_exported_program"), finding_of(inst, "tvm.from_exported_program",
                                                                    outcome=outcome), inst, tmp_path)
    assert "dynamic_shapes=({0: torch.export.Dim.AUTO},)" in path.read_text()
    code, out, err = run_alone(path)
    assert code == 0, (out, err[-2000:])


def test_dtype_variants_cast_the_float_inputs_and_keep_what_eager_runs(variants):
    insts, stats = variants
    cast = [v for v in insts if "[dtype:" in v.origin.test]
    assert {t.dtype for v in cast for t in v.inputs} >= {"bfloat16", "float16"}
    for v in cast[:6]:
        assert "float32" not in {t.dtype for t in v.inputs}
        out = reference(v)[0]  # eager runs it (bfloat16 arrays through ml_dtypes)
        assert out and all(o.size for o in out)


def test_a_scalar_operand_takes_the_scalar_overload_and_its_type_promotion():
    """A rank-0 tensor argument passed as a Python number selects add.Tensor with a scalar (pow.Tensor_Scalar…) and
    promotes another way: an int64 tensor plus a float number is float32 in PyTorch. TVM's exported-program importer
    keeps int64 there, which the sample as written (a float32 rank-0 tensor) never shows."""
    pytest.importorskip("tvm")
    from dlci.outcome import INCONSISTENT, PASS
    insts, stats = load_with_stats("torch_variants", ops=["add"])
    scalar = [v for v in insts if "[scalar_operand:" in v.origin.test]
    assert scalar and stats["kinds"].get("scalar_operand") == len(scalar)
    mixed = next(v for v in scalar if "an int64 tensor with a float scalar" in v.origin.test)
    assert isinstance(mixed.call["args"][1], float) and [t.dtype for t in mixed.inputs] == ["int64"]
    assert reference(mixed)[0][0].dtype.name == "float32"
    base = next(i for i in load("opinfo") if i.origin.test == mixed.origin.test.split(" [")[0])
    assert execute(base, "tvm.from_exported_program").status == PASS
    o = execute(mixed, "tvm.from_exported_program")
    assert o.status == INCONSISTENT and "int64" in o.message, (o.status, o.message)
