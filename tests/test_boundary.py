"""dlci.sources.boundary on real OpInfo / ModuleInfo instances and a real keras layer: every variant is validated
by the eager reference, respects the OpInfo domain and moves one thing to a boundary."""
from __future__ import annotations

import numpy as np
import pytest

from dlci import sources as S
from dlci.instance import Instance, Origin, TensorSpec
from dlci.models.references import reference
from dlci.sources.boundary import KINDS, NONFINITE_KINDS, BoundarySource, widen

OPINFO_OPS = ["aten::log", "aten::acosh", "aten::avg_pool2d", "aten::gelu", "aten::add"]
# avg_pool2d's positional parameters after the input
AVG_POOL2D = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"]


@pytest.fixture(scope="module")
def base():
    S.registry()
    return (S.load("opinfo", limit_per_op=4, ops=OPINFO_OPS)
            + S.load("module_db", limit_per_op=2, ops=["nn::Conv2d"]))


@pytest.fixture(scope="module")
def widened(base):
    stats: dict = {}
    # per_instance this large tries every candidate of every instance
    variants = widen(base, per_instance=40, stats=stats)
    return variants, stats


def of(variants, op, kind=None):
    return [v for v in variants if v.op == op and (kind is None or v.params["boundary"] == kind)]


def float_inputs(inst):
    return [a for a in inst.input_arrays() if a.dtype.kind == "f"]


def avg_pool2d_settings(inst) -> dict:
    args, kwargs = inst.call["args"], inst.call["kwargs"]
    named = {"ceil_mode": False, "count_include_pad": True, "divisor_override": None}
    named.update({name: v for name, v in zip(AVG_POOL2D, args[1:])})
    named.update(kwargs)
    return named


def test_variants_are_new_labelled_and_their_reference_runs(base, widened):
    variants, stats = widened
    assert len(variants) == stats["variants"] > 100
    base_ids = {i.id for i in base}
    assert len({v.id for v in variants}) == len(variants) and not base_ids & {v.id for v in variants}
    checked = set()
    for v in variants:
        assert v.params["boundary"] in KINDS
        assert v.origin.source == "boundary" and " | " in v.origin.test
        assert not [k for k in v.arrays if k.startswith("expected:")]
        assert [s.shape for s in v.inputs] == [list(a.shape) for a in v.input_arrays()]
        assert [s.dtype for s in v.inputs] == [str(a.dtype) for a in v.input_arrays()]
        if (v.op, v.params["boundary"]) not in checked:  # one per operator and kind keeps this test quick
            checked.add((v.op, v.params["boundary"]))
            ref, _ = reference(v)  # raises ReferenceError_ if the framework rejects the variant
            assert ref
    # every boundary kind that applies to these operators was produced
    assert set(stats["kinds"]) == set(KINDS)


def test_small_values_respect_the_domain(widened):
    variants, stats = widened
    for kind in ("tiny", "subnormal"):
        logs = of(variants, "aten::log", kind)
        assert logs
        for v in logs:  # log's domain is (0, inf): small means tiny positive values
            x = v.input_arrays()[0]
            assert (x[np.isfinite(x)] > 0).all(), v.origin.test
        assert not of(variants, "aten::acosh", kind)  # acosh's domain starts at 1: no small values
    assert any(((x := v.input_arrays()[0]) > 0).all() and (x < np.finfo(np.float32).tiny).any()
               for v in of(variants, "aten::log", "subnormal"))
    edges = of(variants, "aten::acosh", "edge")
    assert edges and all((v.input_arrays()[0] >= 1).all() for v in edges)
    assert all((v.input_arrays()[0] >= 0).all() for v in of(variants, "aten::log", "large"))
    assert stats["inapplicable"]["tiny:domain-excludes-small"] > 0


def test_signed_zeros_and_marked_non_finite_values(base, widened):
    variants, _ = widened
    signed = of(variants, "aten::add", "signed_zero") + of(variants, "aten::log", "signed_zero")
    assert any(((x == 0) & np.signbit(x)).any() and ((x == 0) & ~np.signbit(x)).any()
               for v in signed for x in float_inputs(v))
    originals = {i.origin.test: i for i in base}
    for v in variants:
        orig = originals[v.origin.test.split(" | ")[0]]
        had = any(not np.isfinite(x).all() for x in float_inputs(orig))
        has_nan = any(np.isnan(x).any() for x in float_inputs(v))
        has_inf = any(np.isinf(x).any() for x in float_inputs(v))
        if v.params["boundary"] in NONFINITE_KINDS:
            assert "non-finite" in v.origin.test
            assert has_nan if v.params["boundary"] == "nan" else has_inf
        elif not had:
            assert not (has_nan or has_inf), v.origin.test
    huge = of(variants, "aten::gelu", "huge")
    assert huge and all(np.abs(v.input_arrays()[0]).max() > 1e37 for v in huge)


def test_empty_and_rank0_where_valid_dropped_where_rejected(base, widened):
    variants, _ = widened
    assert any(0 in v.input_arrays()[0].shape for v in of(variants, "aten::log", "empty"))
    assert any(v.input_arrays()[0].ndim == 0 for v in of(variants, "aten::log", "rank0"))
    conv = of(variants, "nn::Conv2d", "empty")
    assert conv and all(v.input_arrays()[0].shape[0] == 0 for v in conv)
    # avg_pool2d rejects a 0-d input: those variants are dropped and counted, never emitted
    stats: dict = {}
    pools = widen([i for i in base if i.op == "aten::avg_pool2d"], per_instance=40, stats=stats)
    assert pools and not [v for v in pools if v.params["boundary"] == "rank0"]
    assert sum(n for reason, n in stats["dropped"].items() if reason.startswith("rank0:rejected:")) >= 1
    assert not [v for v in of(variants, "aten::avg_pool2d") if v.input_arrays()[0].ndim < 3]


def test_avg_pool2d_count_include_pad_without_divisor_override(base):
    originals = [i for i in base if i.op == "aten::avg_pool2d" and i.inputs[0].dtype == "float32"]
    variants = widen(originals)  # the default per_instance
    alone = [v for v in variants if avg_pool2d_settings(v)["count_include_pad"] is False
             and avg_pool2d_settings(v)["divisor_override"] is None]
    assert alone
    for v in alone:
        assert v.params["boundary"] in ("flag", "default")
        assert "count_include_pad" in v.origin.test or "divisor_override" in v.origin.test
        reference(v)
    flipped = [v for v in variants if v.params["boundary"] == "flag"
               and avg_pool2d_settings(v)["ceil_mode"] != avg_pool2d_settings(
                   next(o for o in originals if o.origin.test == v.origin.test.split(" | ")[0]))["ceil_mode"]]
    assert flipped  # ceil_mode flipped too


def test_string_options_enumerated(widened):
    variants, _ = widened
    tanh = [v for v in of(variants, "aten::gelu", "enum") if v.call["kwargs"].get("approximate") == "tanh"]
    assert tanh and all("was 'none'" in v.origin.test for v in tanh)
    assert tanh[0].params["approximate"] == "tanh"  # OPERA sees the new value


def test_complex_only_where_opinfo_lists_it(widened):
    variants, _ = widened
    cplx = of(variants, "aten::add", "complex")
    assert cplx and all(a.dtype == np.complex64 for v in cplx for a in v.input_arrays())
    assert not of(variants, "aten::avg_pool2d", "complex") and not of(variants, "aten::gelu", "complex")


def test_same_seed_same_variants(base):
    some = [i for i in base if i.op in ("aten::log", "aten::avg_pool2d")]
    first = [v.id for v in widen(some, seed=0)]
    assert first == [v.id for v in widen(some, seed=0)]
    assert set(first) != {v.id for v in widen(some, seed=1)}


def test_keras_layer_parameters_and_weights():
    import keras
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    keras.utils.set_random_seed(0)
    layer = keras.layers.Dense(3, activation="relu")
    layer(x)
    arrays = {"in:0": x, **{f"weight:{i}": np.asarray(w) for i, w in enumerate(layer.get_weights())}}
    inst = Instance(op="keras::Dense", framework="keras",
                    call={"kind": "keras_layer", "cls": "keras.layers.Dense", "config": layer.get_config(),
                          "args": [{"$t": 0}]},
                    inputs=[TensorSpec.of(x)], params={}, origin=Origin("keras_tests", "dense#0"), arrays=arrays)
    stats: dict = {}
    variants = widen([inst], per_instance=40, stats=stats)
    no_bias = [v for v in variants if v.call["config"]["use_bias"] is False]
    assert no_bias and sorted(k for k in no_bias[0].arrays if k.startswith("weight:")) == ["weight:0"]
    assert any(v.call["config"]["activation"] != "relu" for v in variants if v.params["boundary"] == "enum")
    assert any(v.input_arrays()[0].shape == (0, 5) for v in variants if v.params["boundary"] == "empty")
    assert not [v for v in variants if v.input_arrays()[0].ndim == 0]  # Dense needs a rank >= 2 input
    assert any(r.startswith("rank0:rejected:") for r in stats["dropped"])
    for v in variants:
        reference(v)


def test_registered_source_widens_and_caches(tmp_path):
    assert "boundary" in S.SOURCES and S.SOURCES["boundary"] is BoundarySource
    src = BoundarySource(ops=["nn::GELU"])
    src.workers = 1  # one sandboxed worker widens each operator
    insts, stats = S.load_with_stats(src, cache_dir=tmp_path, limit_per_op=3)
    assert 0 < len(insts) <= 3 and stats["instances"] == len(insts)
    assert {i.origin.source for i in insts} == {"boundary"} and {i.op for i in insts} == {"nn::GELU"}
    assert sum(stats["kinds"].values()) == len(insts) and not stats["crashes"]
    for v in insts:
        reference(v)
    again = S.load(BoundarySource(ops=["nn::GELU"]), cache_dir=tmp_path, limit_per_op=3)
    assert [i.id for i in again] == [i.id for i in insts]
