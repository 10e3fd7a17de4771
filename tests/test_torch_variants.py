"""torch_variants: OpInfo calls re-spelled (by name, by position, defaults left out) reach converter code the
samples as written never do."""
from __future__ import annotations

import collections

import pytest

from dlci import models
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
    for v in insts[:10]:
        b = base[v.origin.test.split(" [")[0]]
        assert (v.call["args"], v.call["kwargs"]) != (b.call["args"], b.call["kwargs"])
        for x, y in zip(models.reference(v)[0], models.reference(b)[0]):
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
