"""dlci.sources against the real libraries: OpInfo, ModuleInfo, ONNX node tests and the pytest harvester."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from dlci.instance import Instance, Origin, TensorSpec
from dlci.sources import SOURCES, Source, load, load_with_stats, stable_seed, summary

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "fixtures" / "harvest_suite"
# einsum and embedding: OpInfo calls them through a lambda that swaps the first two arguments
OPINFO_OPS = ["nn.functional.elu", "add", "cat", "nn.functional.conv2d", "linalg.vector_norm", "bernoulli", "einsum",
              "nn.functional.embedding"]


def _np(x):
    return [t.detach().numpy() for t in x] if isinstance(x, (list, tuple)) else [x.detach().numpy()]


@pytest.fixture(scope="module")
def opinfo_harvest(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    instances, stats = load_with_stats("opinfo", cache_dir=cache, limit_per_op=8, ops=OPINFO_OPS)
    return instances, stats, cache


# -- registry and cache ------------------------------------------------------------------------------------

def test_registry_lists_the_builtin_sources():
    from dlci.sources import _import_builtin_sources
    _import_builtin_sources()
    assert {"opinfo", "module_db", "onnx_node", "keras_tests"} <= set(SOURCES)
    assert {SOURCES[n].framework for n in ("opinfo", "module_db", "onnx_node")} == {"torch", "onnx"}


class _Counting(Source):
    """A real (tiny) source, to watch when the cache harvests and when it reads."""
    name = "counting"
    framework = "torch"
    runs = 0

    def library_versions(self):
        return {"fake": "1.0"}

    def harvest(self, limit_per_op=None):
        type(self).runs += 1
        for i in range(3):
            a = np.arange(6, dtype=np.float32).reshape(2, 3) * i
            yield Instance(op="aten::relu", framework="torch",
                           call={"kind": "torch_fn", "fn": "torch.relu", "args": [{"$t": 0}], "kwargs": {}},
                           inputs=[TensorSpec.of(a)], params={}, origin=Origin("counting", f"t#{i}"),
                           arrays={"in:0": a})
        self.skip("unencodable-arg", 2)


def test_cache_round_trip_and_corrupt_cache_is_reharvested(tmp_path):
    _Counting.runs = 0
    first, stats = load_with_stats(_Counting(), cache_dir=tmp_path)
    assert stats["skipped"] == {"unencodable-arg": 2} and stats["instances"] == 3
    again = load(_Counting(), cache_dir=tmp_path)
    assert _Counting.runs == 1  # second load came from disk
    assert [i.id for i in again] == [i.id for i in first]
    for a, b in zip(first, again):
        assert a.to_meta() == b.to_meta()
        np.testing.assert_array_equal(a.arrays["in:0"], b.arrays["in:0"])
    npz = next(tmp_path.glob("counting-*.npz"))
    npz.write_bytes(npz.read_bytes()[:40])  # a torn write
    with pytest.warns(RuntimeWarning, match="re-harvesting"):
        healed = load(_Counting(), cache_dir=tmp_path)
    assert _Counting.runs == 2 and [i.id for i in healed] == [i.id for i in first]
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind
    # other limits are other cache entries; refresh forces a harvest
    load(_Counting(), cache_dir=tmp_path, refresh=True)
    assert _Counting.runs == 3
    assert summary(healed) == {"instances": 3, "ops": 1, "per_op": {"aten::relu": 3}, "per_framework": {"torch": 3}}


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("DLCI_CACHE_DIR", str(tmp_path / "envcache"))
    load(_Counting())
    assert list((tmp_path / "envcache").glob("counting-*.jsonl"))


# -- opinfo ------------------------------------------------------------------------------------------------

def test_opinfo_instances_reproduce_the_opinfo_call(opinfo_harvest):
    import torch
    from dlci.torch_testing import op_db
    from dlci.models.rebuild import torch_call
    instances, stats, _ = opinfo_harvest
    ops = {i.op for i in instances}
    assert {"aten::elu", "aten::add", "aten::cat", "aten::conv2d", "aten::linalg_vector_norm", "aten::einsum",
            "aten::embedding"} <= ops
    assert "aten::bernoulli" not in ops and stats["skipped"].get("op:random", 0) >= 1
    assert all(i.call["kind"] == "torch_fn" and i.origin.source == "opinfo" for i in instances)
    assert {i.call["fn"] for i in instances if i.op == "aten::elu"} == {"torch.nn.functional.elu"}
    by_name = {(o.name, o.variant_test_name): o for o in op_db()}
    checked = 0
    for inst in instances:
        if not inst.origin.test.endswith(" sample"):
            continue  # plain float32 samples are regenerated below from the recorded seed alone
        name, rest = inst.origin.test[len("op_db:"):].split("[", 1)
        variant, k = rest.split("]#")[0], int(rest.split("#")[1].split()[0])
        op = by_name[(name, variant)]
        torch.manual_seed(inst.seed); random.seed(inst.seed); np.random.seed(inst.seed)
        for j, sample in enumerate(op.sample_inputs("cpu", torch.float32, requires_grad=False)):
            if j == k:
                break
        expected = op.op(sample.input, *sample.args, **sample.kwargs)
        module, xs = torch_call(inst)
        got = module(*xs)
        for e, g in zip(_np(expected), _np(got)):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6, equal_nan=True)
        checked += 1
    assert checked >= 5
    assert {i.call["fn"] for i in instances if i.op == "aten::einsum"} == {"torch.einsum"}
    # dtype partitions beyond float32 where the OpInfo supports them
    assert any(i.inputs[0].dtype == "int64" for i in instances if i.op == "aten::add")


def test_opinfo_ids_are_stable_across_harvests(opinfo_harvest):
    from dlci.sources.opinfo import OpInfoSource
    instances, _, _ = opinfo_harvest
    again = list(OpInfoSource(ops=OPINFO_OPS).harvest(8))
    assert [i.id for i in again] == [i.id for i in instances]
    assert len({i.id for i in instances}) == len(instances)
    assert all(i.seed == stable_seed("opinfo", i.origin.test.split(":")[1].split("[")[0],
                                     i.origin.test.split("[")[1].split("]")[0]) for i in instances)


def test_instances_rebuild_in_a_fresh_process(opinfo_harvest, tmp_path):
    """Workers only get the cache: rebuild there and compare with the in-process outputs."""
    import torch
    from dlci.models.rebuild import torch_call
    instances, _, cache = opinfo_harvest
    script = f"""
import json, sys, numpy as np, torch
from dlci.sources import load
from dlci.models.rebuild import torch_call
insts = load("opinfo", cache_dir={str(cache)!r}, limit_per_op=8, ops={OPINFO_OPS!r})
out = {{}}
for inst in insts:
    m, xs = torch_call(inst)
    r = m(*xs)
    for j, t in enumerate(r if isinstance(r, (list, tuple)) else [r]):
        out[f"{{inst.id}}|{{j}}"] = t.detach().numpy()
np.savez(sys.argv[1], **out)
print(len(insts))
"""
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out.npz")], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert int(res.stdout.split()[-1]) == len(instances)
    with np.load(tmp_path / "out.npz") as fresh:
        for inst in instances:
            module, xs = torch_call(inst)
            with torch.no_grad():
                for j, t in enumerate(_np(module(*xs))):
                    np.testing.assert_array_equal(fresh[f"{inst.id}|{j}"], t)


# -- module_db ---------------------------------------------------------------------------------------------

def test_module_db_instances_rebuild_with_their_weights():
    import torch
    from dlci.torch_testing import module_db
    from dlci.sources.modules import ModuleDbSource
    from dlci.models.rebuild import torch_call
    src = ModuleDbSource(ops=["nn::Conv2d", "nn::LSTM", "nn::BatchNorm2d", "nn::FractionalMaxPool2d"])
    instances = list(src.harvest(2))
    assert {i.op for i in instances} == {"nn::Conv2d", "nn::LSTM", "nn::BatchNorm2d"}
    assert src.stats["skipped"]["module:random"] == 1
    infos = {m.name: m for m in module_db()}
    for inst in instances:
        assert inst.call["kind"] == "torch_module" and any(k.startswith("state:") for k in inst.arrays)
        name, k = inst.origin.test[len("module_db:"):].split()[0].split("#")
        info = infos[name]
        torch.manual_seed(inst.seed)
        mi = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=False,
                                     training=False)[int(k)]
        torch.manual_seed(inst.seed)
        ref_module = info.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).eval()
        module, xs = torch_call(inst)
        with torch.no_grad():
            expected = ref_module(*mi.forward_input.args, **mi.forward_input.kwargs)
            got = module(*xs)
        flat = lambda o: [t for t in (o if isinstance(o, (list, tuple)) else [o])  # noqa: E731
                          for t in (t if isinstance(t, (list, tuple)) else [t])]
        for e, g in zip(flat(expected), flat(got)):
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)


# -- onnx_node ---------------------------------------------------------------------------------------------

def test_onnx_node_expected_outputs_match_onnxruntime():
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator
    from dlci.sources.onnx_node import OnnxNodeSource
    from dlci.models.rebuild import onnx_call
    src = OnnxNodeSource(ops=["onnx::Relu", "onnx::Conv", "Gemm", "Softmax", "MaxPool", "Elu", "Gelu"])
    instances = list(src.harvest())
    assert {i.op for i in instances} == {"onnx::Relu", "onnx::Conv", "onnx::Gemm", "onnx::Softmax",
                                         "onnx::MaxPool", "onnx::Elu", "onnx::Gelu"}
    assert src.stats["skipped"]["function-expansion"] > 0  # e.g. test_elu_expanded
    assert not any("_expanded" in i.origin.test for i in instances)
    conv = next(i for i in instances if i.origin.test.endswith("test_basic_conv_with_padding#0"))
    assert conv.params == {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    for inst in instances:
        model, feeds = onnx_call(inst)
        try:
            sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            got = sess.run(None, feeds)
        except Exception:  # an opset onnxruntime lacks: ONNX's own reference evaluator is the oracle then
            got = ReferenceEvaluator(model).run(None, feeds)
        for g, e in zip(got, inst.expected_arrays()):
            np.testing.assert_allclose(g, e, rtol=inst.call["rtol"] * 10, atol=1e-5)


# -- the pytest harvester ------------------------------------------------------------------------------------

def test_harvest_records_exactly_the_fixture_suites_calls(tmp_path):
    import torch
    from dlci.sources.harvest import Harvest
    from dlci.models.rebuild import keras_call, onnx_call, torch_call
    src = Harvest(paths=[SUITE / "suite_ops.py"], name="fixture")
    instances, stats = load_with_stats(src, cache_dir=tmp_path)
    assert stats["suite_returncode"] == 0, stats["suite_tail"]
    ops = [i.op for i in instances]
    assert sorted(set(ops)) == ["aten::add", "aten::conv2d", "aten::gelu", "aten::relu", "keras::Dense",
                                "nn::Conv2d", "nn::Linear", "onnx::LeakyRelu"]
    assert ops.count("aten::relu") == 2 and stats["skipped"]["duplicate"] == 2  # 3 identical calls -> 1
    assert stats["calls"]["nn::Conv2d"] == 1 and stats["calls"]["aten::conv2d"] == 1  # not nested in Conv2d
    assert stats["calls"]["onnx::LeakyRelu (make_node)"] == 1
    by_op = {i.op: i for i in instances}
    add = by_op["aten::add"]
    assert add.call == {"kind": "torch_fn", "fn": "torch.add", "args": [{"$t": 0}, 1.5], "kwargs": {"alpha": 2}}
    assert add.origin.test == "suite_ops.py::test_functional" and add.origin.source == "fixture"
    for inst in instances:
        if inst.framework == "torch":
            module, xs = torch_call(inst)
            with torch.no_grad():
                module(*xs)
    conv = by_op["nn::Conv2d"]
    assert conv.call["args"] == [3, 2] and conv.call["kwargs"] == {"kernel_size": 3, "stride": 2}
    module, xs = torch_call(conv)
    np.testing.assert_array_equal(module.weight.detach().numpy(), conv.arrays["state:weight"])
    # keras layer rebuilt from config + weights gives the same function
    dense = by_op["keras::Dense"]
    assert dense.call["cls"] == "keras.layers.Dense" and dense.params["units"] == 3
    layer, (x,) = keras_call(dense)
    w, b = dense.arrays["weight:0"], dense.arrays["weight:1"]
    np.testing.assert_allclose(np.asarray(layer(x)), np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-6)
    # the single-node onnx model runs, with inputs generated for its typed graph input; it is stored with the
    # minimal IR version of its opsets (make_model stamps onnx 1.23's IR 14, which onnxruntime 1.31 refuses)
    import onnxruntime as ort
    leaky = by_op["onnx::LeakyRelu"]
    assert leaky.params == {"alpha": 0.2} and leaky.inputs[0].shape == [2, 3]
    model, feeds = onnx_call(leaky)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, feeds)
    x = feeds["X"]
    np.testing.assert_allclose(y, np.where(x > 0, x, 0.2 * x), rtol=1e-6)


def test_harvest_keeps_what_a_crashing_suite_recorded(tmp_path):
    from dlci.sources.harvest import Harvest
    src = Harvest(paths=[SUITE / "suite_crash.py"], name="crashing", frameworks=["torch"])
    with pytest.warns(RuntimeWarning, match="signal 11"):
        instances, stats = load_with_stats(src, cache_dir=tmp_path)
    assert stats["suite_returncode"] == -11
    assert [i.op for i in instances] == ["aten::elu", "aten::tanh", "aten::softplus"]


def test_harvest_regenerates_large_tensors_from_a_seed(tmp_path):
    from dlci.sources.harvest import load_harvest
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the suite's SIGSEGV
        (inst,) = load_harvest([SUITE / "suite_crash.py"], name="small-limit", cache_dir=tmp_path,
                               ops=["aten::elu"], frameworks=["torch"], max_elements=5)
    x = inst.arrays["in:0"]
    assert x.shape == (3, 4) and x.dtype == np.float32
    assert -2 <= x.min() and x.max() <= 2 and not np.allclose(x, np.linspace(-2, 2, 12).reshape(3, 4))


def test_attention_samples_without_dropout_are_harvested(tmp_path):
    """scaled_dot_product_attention is tagged nondeterministic for its dropout_p: its samples with dropout_p=0 are
    deterministic and kept (a reverted TVM attention-layout fix went untested without them)."""
    from dlci.sources import load_with_stats
    insts, stats = load_with_stats("opinfo", cache_dir=tmp_path, ops=["aten::scaled_dot_product_attention"])
    assert insts and stats["skipped"].get("random-argument")
    assert all(not i.call["kwargs"].get("dropout_p") for i in insts)
    assert {i.call["fn"] for i in insts} == {"torch.nn.functional.scaled_dot_product_attention"}


def test_opinfo_samples_are_the_same_without_torchs_test_tracking(monkeypatch):
    """The harvest takes OpInfo's samples without their iterators' search for a running unittest TestCase
    (inspect.stack per iterator) and without torch.manual_seed's queue of seedings for absent devices: the same
    samples, value for value, and torch's own functions back in place afterwards."""
    torch = pytest.importorskip("torch")
    import inspect
    from dlci.sources.opinfo import _untracked_samples
    from dlci.torch_testing import op_db
    op = next(o for o in op_db() if o.name == "addcmul")  # op_db first: it makes torch's test modules importable
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core
    walks = []
    real_stack = inspect.stack
    monkeypatch.setattr(inspect, "stack", lambda *a, **k: walks.append(1) or real_stack(*a, **k))

    def samples():
        torch.manual_seed(7)
        return [(s.input.clone(), [a.clone() if isinstance(a, torch.Tensor) else a for a in s.args])
                for s in op.sample_inputs("cpu", torch.float32)]
    before = (torch.manual_seed, common_utils.extract_test_fn, core.extract_test_fn)
    tracked = samples()
    assert walks  # torch's iterator walks the stack
    walks.clear()
    with _untracked_samples():
        untracked = samples()
    assert not walks
    assert (torch.manual_seed, common_utils.extract_test_fn, core.extract_test_fn) == before
    assert len(tracked) == len(untracked) > 1
    for (x, xs), (y, ys) in zip(tracked, untracked):
        assert torch.equal(x, y) and len(xs) == len(ys)
        assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(xs, ys))


def test_factories_call_tensorless_aten_operators_from_their_schemas():
    """aten::hann_window has no OpInfo at the ATen level: its instances come from its two overloads' schemas, are
    asked for by name only, and rebuild to what torch computes."""
    import torch
    from dlci.models.rebuild import torch_call
    from dlci.sources.factories import FactorySource
    assert list(FactorySource().harvest()) == []  # no operator list: nothing worth enumerating
    insts = list(FactorySource(ops=["hann_window", "aten::randn"]).harvest(limit_per_op=8))
    assert {i.op for i in insts} == {"aten::hann_window"} and len(insts) == 8  # random operators left out
    assert {i.origin.test.split("#")[0] for i in insts} == {"schema:aten::hann_window.default",
                                                             "schema:aten::hann_window.periodic"}
    for inst in insts:
        module, tensors = torch_call(inst)
        dtype = getattr(torch, inst.call["kwargs"]["dtype"]["$dtype"])
        assert tensors == [] and torch.equal(module(), torch.hann_window(*inst.call["args"], dtype=dtype))
