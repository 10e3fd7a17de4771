"""tf_ops: TensorFlow raw-op instances derived from the registered OpDefs, validated in sandboxed workers (real
TensorFlow, real worker processes, real aborts; no mocks)."""
from __future__ import annotations

import inspect
import json
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from dlci.instance import decode_value  # noqa: E402
from dlci.sources import load_with_stats, registry  # noqa: E402
from dlci.sources.tf_ops import TfOpsSource, harvest_job  # noqa: E402

NAMED = ["StridedSlice", "Unpack", "SquaredDifference", "MaxPool", "Pack", "Xdivy", "ResizeBilinear", "TopKV2"]
# TensorFlow 2.21 with its oneDNN kernels CHECK-fails (abort) on ConjugateTranspose(x=<a scalar>, perm=[]): a
# candidate the generator makes. oneDNN is on by default only on some CPUs, so that test's harvest turns it on.
ABORTING = "ConjugateTranspose"
KILL_AT = "Xdivy#2"  # the candidate on which killing_job takes its worker down


def killing_job(payload: dict, *, stage_hook=None) -> dict:
    """harvest_job whose worker dies (SIGABRT) when it reaches candidate KILL_AT, unless told to skip it."""
    def hook(stage: str) -> None:
        stage_hook(stage)
        if stage == f"candidate {KILL_AT}":
            os.abort()
    return harvest_job(payload, stage_hook=hook)


@pytest.fixture(scope="module")
def harvest(tmp_path_factory):
    src = TfOpsSource(ops=NAMED + [ABORTING])
    insts, stats = load_with_stats(src, cache_dir=tmp_path_factory.mktemp("tf_ops"), refresh=True)
    return src, insts, stats


def _raw(inst) -> str:
    return inst.call["fn"].rsplit(".", 1)[1]


def _flatten(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    return [out]


def eager(inst) -> list[np.ndarray]:
    """A fresh run of the instance's call: tf.raw_ops.<op>(**kwargs) with its stored inputs as tensors."""
    xs = [tf.constant(a) for a in inst.input_arrays()]  # runtime inputs are tensors, as a model's are
    kwargs = {k: decode_value(v, xs) for k, v in inst.call["kwargs"].items()}
    return [np.asarray(t.numpy()) for t in _flatten(getattr(tf.raw_ops, _raw(inst))(**kwargs))]


def test_registered_as_a_keras_side_source():
    cls = registry()["tf_ops"]
    assert cls is TfOpsSource and cls.framework == "keras" and not cls.bases and cls.per_op


def test_named_ops_give_valid_instances_in_the_tf_fn_format(harvest):
    _src, insts, _stats = harvest
    by_op: dict[str, list] = {}
    for inst in insts:
        by_op.setdefault(inst.op, []).append(inst)
    for name in NAMED:
        group = by_op.get(f"tf::{name}", [])
        assert 3 <= len(group) <= TfOpsSource.variants_per_op, (name, len(group))
        # diverse: more than one input dtype or rank, or attribute setting, among an operator's instances
        assert len({json.dumps([[s.dtype, s.rank] for s in i.inputs] + [i.params], sort_keys=True)
                    for i in group}) == len(group)
    for inst in insts:
        name = _raw(inst)
        assert inst.framework == "keras" and inst.op == f"tf::{name}"
        assert inst.call["kind"] == "tf_fn" and inst.call["fn"] == f"tf.raw_ops.{name}"
        assert inst.origin.source == "tf_ops" and inst.origin.test.startswith(f"{name}#")
        assert inst.origin.library == f"tensorflow {tf.__version__}"
        kwargs = inst.call["kwargs"]
        json.dumps(kwargs)  # plain JSON
        accepted = set(inspect.signature(getattr(tf.raw_ops, name)).parameters) - {"name"}
        assert set(kwargs) <= accepted, (name, set(kwargs) - accepted)
        assert not {"T", "N", "Tidx", "Tperm"} & set(kwargs)  # inferred attrs are never passed
        slots = [v["$t"] for v in kwargs.values() if isinstance(v, dict)]
        slots += [x["$t"] for v in kwargs.values() if isinstance(v, list) for x in v if isinstance(x, dict)]
        assert sorted(slots) == list(range(len(inst.inputs))) and slots
        for i, spec in enumerate(inst.inputs):
            a = inst.arrays[f"in:{i}"]
            assert list(a.shape) == spec.shape and str(a.dtype) == spec.dtype
        assert set(inst.params) <= set(kwargs) and "$t" not in json.dumps(inst.params)
        assert inst.expected_arrays() and all(a.dtype.kind in "biufc" for a in inst.expected_arrays())
    pack = by_op["tf::Pack"][0].call["kwargs"]["values"]
    assert isinstance(pack, list) and len(pack) >= 2 and all(set(v) == {"$t"} for v in pack)
    for inst in by_op["tf::Unpack"]:  # list outputs flattened
        assert len(inst.expected_arrays()) == inst.call["kwargs"]["num"]
    assert all(len(i.expected_arrays()) == 2 for i in by_op["tf::TopKV2"])  # values, indices
    # index arguments are graph constants (plain lists) ...
    assert any(isinstance(i.call["kwargs"]["begin"], list) and isinstance(i.call["kwargs"]["strides"], list)
               for i in by_op["tf::StridedSlice"])
    # ... and in some instances a runtime int tensor instead, said so in the origin
    runtime = [i for i in insts if " runtime:" in i.origin.test]
    assert runtime
    for inst in runtime:
        arg = inst.origin.test.rsplit(" runtime:", 1)[1].split()[0]
        v = inst.call["kwargs"][arg]
        assert isinstance(v, dict) and "$t" in v, inst.origin.test
    # float32 first, other dtypes and boundary value classes too
    dtypes = {s.dtype for i in insts for s in i.inputs}
    assert {"float32", "float16", "int32"} <= dtypes
    assert any(any(k in i.origin.test for k in (" zeros", " signed_zero", " large", " huge", " tiny", " subnormal",
                                                    " nan", " inf")) for i in insts)
    assert by_op["tf::MaxPool"][0].call["kwargs"]["padding"] in ("VALID", "SAME", "EXPLICIT")


def test_expected_outputs_equal_a_fresh_eager_run(harvest):
    _src, insts, _stats = harvest
    for inst in insts:
        got, want = eager(inst), inst.expected_arrays()
        assert len(got) == len(want), inst.origin.test
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, inst.origin.test
            np.testing.assert_array_equal(g, w, err_msg=inst.origin.test)


def test_wanted_operators_only(harvest):
    src, insts, stats = harvest
    ops = {i.op.split("::", 1)[1] for i in insts}
    assert set(NAMED) | {ABORTING} <= ops
    assert all(src.wants(op) for op in ops)
    assert not ops & {"Add", "AddV2", "Conv2D", "MatMul", "Relu", "Sum"}
    assert stats["ops_considered"] < 40  # the filter applies before any operator is harvested
    # the spellings a converter change uses: raw op, tf:: id, canonical, TFLite builtin, python API name
    for spelling in ("StridedSlice", "tf::StridedSlice", "strided_slice", "STRIDED_SLICE", "tf.raw_ops.StridedSlice"):
        assert TfOpsSource(ops=[spelling]).wants("StridedSlice"), spelling
    assert TfOpsSource(ops=["TOPK_V2"]).wants("TopKV2") and TfOpsSource(ops=["UNPACK"]).wants("Unpack")
    assert TfOpsSource(ops=["tf.math.xdivy"]).wants("Xdivy") and TfOpsSource(ops=["MAX_POOL_2D"]).wants("MaxPool")
    assert not TfOpsSource(ops=["STRIDED_SLICE"]).wants("Conv2D")
    assert not TfOpsSource(ops=["xdivy"]).wants("Xlogy")


def test_a_tensorflow_abort_is_survived(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")  # the workers inherit it
    insts, stats = load_with_stats(TfOpsSource(ops=[ABORTING]), cache_dir=tmp_path, refresh=True)
    crashed = [c for c in stats["crashes"] if c["op"] == ABORTING]
    assert crashed and all(c["symptom"] == "SIGABRT" for c in crashed)
    assert stats["skipped"]["crashed:SIGABRT"] >= len(crashed)
    kept = [i for i in insts if i.op == f"tf::{ABORTING}"]
    assert kept  # harvested again without the candidates that killed the worker
    dead = {c["candidate"] for c in crashed}
    assert not any(i.origin.test.split()[0] in dead for i in kept)
    assert not any(i.inputs[0].rank == 0 and i.call["kwargs"].get("perm") == [] for i in kept)


def test_drops_are_counted_by_reason(harvest):
    _src, _insts, stats = harvest
    skipped = stats["skipped"]
    assert any(k.startswith("rejected-static:") for k in skipped)  # shape functions reject before any kernel runs
    assert any(k.startswith("rejected:") for k in skipped)  # kernels that raise
    validation = ("rejected", "all-nan-output", "nondeterministic", "empty-output", "non-numeric-output",
                  "output-too-large", "no-output")
    dropped = sum(n for k, n in skipped.items() if k.split(":")[0].startswith(validation))
    assert stats["candidates"]["tried"] == stats["candidates"]["valid"] + dropped
    assert stats["modules"]["array"]["harvested_ops"] >= 3 and stats["modules"]["nn"]["instances"] > 0


def test_a_worker_killed_mid_operator_is_recovered(tmp_path):
    src = TfOpsSource(ops=["Xdivy"])
    src.job_func = f"{__name__}:killing_job"
    insts, stats = load_with_stats(src, cache_dir=tmp_path)
    assert [c["candidate"] for c in stats["crashes"]] == [KILL_AT]
    assert stats["skipped"]["crashed:SIGABRT"] == 1
    assert insts and all(i.op == "tf::Xdivy" for i in insts)
    assert not any(i.origin.test.startswith(f"{KILL_AT} ") for i in insts)
