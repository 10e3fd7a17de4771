"""Reduction of failing instances (dlci.reduce): real bugs of the pinned stack reduced in real sandboxed workers,
and the search itself checked against deterministic pure-Python predicates."""
import copy
import json

import numpy as np
import pytest

from dlci.findings import signature
from dlci.instance import Instance, Origin, TensorSpec, features
from dlci.models.onnx_io import load_onnx
from dlci.outcome import CRASH, INCONSISTENT, INVALID, PASS, Outcome
from dlci.reduce import Reduction, engine_runner, reduce_instance, same_failure
from dlci.reduce import edit as E
from dlci.targets import get


# -- real bugs, real workers -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine():
    from dlci.exec import Engine
    with Engine(workers=2, timeout=120, memory_mb=3000,
                warm_imports=("torch", "tvm", "onnx", "onnxruntime", "dlci.testcase")) as eng:
        yield eng


@pytest.fixture(scope="module")
def loaded():
    from dlci import sources as S
    S.registry()
    # narrowed to the operators used here: a cold cache harvests them in seconds
    return {"opinfo": S.load("opinfo", ops=["aten::avg_pool2d"]), "module_db": S.load("module_db", ops=["nn::ELU"]),
            "onnx_node": S.load("onnx_node", ops=["onnx::MaxUnpool"])}


def snapshot(inst: Instance):
    return (inst.id, json.dumps(inst.call, sort_keys=True), json.dumps(inst.params, sort_keys=True, default=str),
            [(k, v.shape, v.tobytes()) for k, v in sorted(inst.arrays.items())])


def failing(run, inst, target_name):
    """Run the instance once; its outcome and signature (the finding's dedup key)."""
    out = run([inst])[0]
    return out, signature(Outcome.from_dict(out), get(target_name).modules)


def test_tvm_ignores_avg_pool2d_divisor_override(engine, loaded):
    # TVM 0.27's exported-program importer drops avg_pool2d's divisor_override: a real wrong result
    target = "tvm.from_exported_program"
    inst = next(i for i in loaded["opinfo"] if i.op == "aten::avg_pool2d" and i.inputs[0].dtype == "float32"
                and i.inputs[0].shape == [1, 3, 9, 9] and len(i.call["args"]) == 7 and i.call["args"][-1] == 2)
    before = snapshot(inst)
    run = engine_runner(engine, target)
    out, sig = failing(run, inst, target)
    assert out["status"] == INCONSISTENT, out
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=60)
    assert isinstance(red, Reduction) and red.confirmed, red.notes
    assert snapshot(inst) == before  # the original is never mutated
    r = red.reduced
    assert r is not inst and r.id.startswith(inst.id + "-r") and r.id != inst.id
    # the reduced instance fails with the very same signature, run again here on its own
    again = run([r])[0]
    assert same_failure(again, sig, get(target).modules), again
    assert red.after["elements"] < red.before["elements"] == 243
    assert red.after["params"] < red.before["params"]
    # the parameter that carries the bug is localised; the unrelated ones were reset to their defaults
    assert red.params_that_matter == ["divisor_override"]
    assert r.call["kwargs"].get("divisor_override") == 2
    for name in ("stride", "padding", "count_include_pad"):
        assert name not in r.call["kwargs"] and name not in r.params, r.call
    assert r.call["args"][1:] == [3]  # the required kernel_size stays
    assert {s["kind"] for s in red.steps} >= {"shape", "values", "param"}
    # the reduced instance is a consistent instance: specs from its arrays, features for the planner
    assert [s.shape for s in r.inputs] == [list(a.shape) for a in r.input_arrays()]
    assert "divisor_override=int:2" in features(r)
    assert red.to_dict()["reduced"] == r.id


def test_tvm_fx_ignores_elu_alpha(engine, loaded):
    # TVM's FX importer builds nn.ELU without its alpha
    target = "tvm.from_fx"
    inst = next(i for i in loaded["module_db"] if i.op == "nn::ELU" and i.call["kwargs"].get("alpha") == 2.0
                and len(i.inputs[0].shape) >= 3)
    run = engine_runner(engine, target)
    out, sig = failing(run, inst, target)
    assert out["status"] == INCONSISTENT
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=60)
    assert red.confirmed and red.params_that_matter == ["alpha"]
    r = red.reduced
    assert red.after["elements"] < red.before["elements"]
    assert red.after["elements"] == 1  # one negative element shows the bug
    assert float(r.input_arrays()[0].reshape(-1)[0]) < 0
    assert r.call["kwargs"] == {"alpha": 2.0} and r.arrays.keys() == {"in:0"}
    assert same_failure(run([r])[0], sig, get(target).modules)


def test_onnxruntime_maxunpool_output_shape(engine, loaded):
    # ONNX Runtime's MaxUnpool gives wrong values with the optional output_shape input: that input matters
    target = "onnxruntime"
    inst = next(i for i in loaded["onnx_node"] if i.op == "onnx::MaxUnpool" and len(i.inputs) == 3)
    run = engine_runner(engine, target)
    out, sig = failing(run, inst, target)
    assert out["status"] == INCONSISTENT
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=30)
    assert red.confirmed
    r = red.reduced
    assert red.after["elements"] < red.before["elements"]
    assert red.inputs_that_matter == ["output_shape"] and len(r.inputs) == 3
    # the model follows the reduced arrays; the node test's expected outputs no longer apply and are gone
    assert not any(k.startswith("expected:") for k in r.arrays)
    model = load_onnx(r.arrays)
    dims = [[d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input]
    assert dims == [list(a.shape) for a in r.input_arrays()]
    assert same_failure(run([r])[0], sig, get(target).modules)


def test_a_passing_instance_or_another_failure_is_never_reduced(engine, loaded):
    target = "tvm.from_fx"
    run = engine_runner(engine, target)
    elu_sig = f"{target}|compare|nn::ELU|value mismatch"
    plain = next(i for i in loaded["module_db"] if i.op == "nn::ELU" and not i.call["kwargs"] and i.inputs[0].shape)
    red = reduce_instance(plain, target, elu_sig, run=run, modules=get(target).modules, budget=30)
    assert red.reduced is plain and not red.confirmed and red.tried == 1 and red.steps == []
    assert red.outcome["status"] == PASS and "does not fail with this signature" in red.notes[0]
    # a failing instance, but of another signature: a reduction never drifts to "any failure"
    alpha = next(i for i in loaded["module_db"] if i.op == "nn::ELU" and i.call["kwargs"].get("alpha") == 2.0)
    other = reduce_instance(alpha, target, f"{target}|convert|nn::ELU|TypeError: N", run=run, budget=30)
    assert other.reduced is alpha and not other.confirmed and other.tried == 1


# -- the search, on deterministic pure-Python predicates ---------------------------------------------------------

def make(arrays, call=None, op="aten::fake"):
    call = call or {"kind": "torch_fn", "fn": "torch.nn.functional.elu", "args": [{"$t": 0}], "kwargs": {}}
    from dlci.instance.recipe import params_of
    return Instance(op=op, framework="torch", call=call, inputs=[TensorSpec.of(a) for a in arrays],
                    params=params_of(call["args"], call["kwargs"]), origin=Origin("test", "pure"),
                    arrays={f"in:{i}": a for i, a in enumerate(arrays)})


def fake_run(rule, log=None, parallel=2):
    """run(candidates) over a plain function: rule(instance) -> pass | invalid | mismatch | crash:<message>."""
    def run(cands):
        assert len(cands) <= parallel
        if log is not None:
            log.append([c.id for c in cands])
        outs = []
        for c in cands:
            verdict = rule(c)
            o = Outcome(c.id, c.op, "fake", status=PASS)
            if verdict == "invalid":
                o.status, o.stage, o.symptom = INVALID, "reference", "RuntimeError"
            elif verdict == "mismatch":
                o.status, o.stage, o.symptom = INCONSISTENT, "compare", "value mismatch"
            elif verdict.startswith("crash"):
                o.status, o.stage, o.symptom, o.message = CRASH, "convert", "ValueError", verdict.split(":", 1)[1]
            outs.append(o.to_dict())
        return outs
    run.parallel = parallel
    return run


SIG = "fake|compare|aten::fake|value mismatch"


def test_shapes_bisect_toward_one_and_keep_what_matters():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (1, 3, 9, 9)).astype(np.float32)
    inst = make([x])
    log = []
    # fails iff some dimension is at least 3 and some value is at least 0.5 in magnitude
    rule = lambda c: "mismatch" if max(c.inputs[0].shape, default=0) >= 3 and \
        np.abs(c.input_arrays()[0]).max(initial=0) >= 0.5 else "pass"
    red = reduce_instance(inst, "fake", SIG, run=fake_run(rule, log), budget=30)
    r = red.reduced
    assert red.confirmed and red.after["elements"] == 3 and max(r.inputs[0].shape) == 3
    assert r.inputs[0].dtype == "float32" and r.input_arrays()[0].dtype == np.float32
    np.testing.assert_array_equal(r.input_arrays()[0], np.ones_like(r.input_arrays()[0]))  # zeros lose it
    assert red.tried == sum(len(b) for b in log) and red.tried < 40
    assert x.shape == (1, 3, 9, 9) and inst.arrays["in:0"] is x  # the original is untouched


def test_bisection_is_logarithmic():
    inst = make([np.arange(1000, dtype=np.float32) + 1])
    red = reduce_instance(inst, "fake", SIG, run=fake_run(
        lambda c: "mismatch" if c.inputs[0].shape and c.inputs[0].shape[0] >= 377 else "pass"), budget=30)
    assert red.reduced.inputs[0].shape == [377] and red.reduced.input_arrays()[0].shape == (377,)
    # two bisections (before and after the values pass made the data zeros), not a linear walk of 623 sizes
    assert red.tried <= 35, (red.tried, red.steps)


def test_same_signature_only_not_any_failure():
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    inst = make([x])
    # at size 1 the target crashes instead: another bug, never an acceptable reduction of this one
    rule = lambda c: "crash:boom" if 1 in c.inputs[0].shape else "mismatch"
    red = reduce_instance(inst, "fake", SIG, run=fake_run(rule), budget=30)
    assert red.confirmed and red.reduced.inputs[0].shape == [2, 2]


def test_tied_dimensions_shrink_together():
    a = np.ones((6, 4), np.float32)
    inst = make([a, 2 * a], {"kind": "torch_fn", "fn": "torch.add", "args": [{"$t": 0}, {"$t": 1}], "kwargs": {}})
    # inputs must keep the same shape (else the call is invalid); fails while there are at least 2 rows
    rule = lambda c: "invalid" if c.inputs[0].shape != c.inputs[1].shape else \
        ("mismatch" if c.inputs[0].shape[:1] and c.inputs[0].shape[0] >= 2 else "pass")
    red = reduce_instance(inst, "fake", SIG, run=fake_run(rule), budget=30)
    assert [s.shape for s in red.reduced.inputs] == [[2, 1], [2, 1]]


def test_parameters_and_optional_inputs():
    x = np.full((2, 2), -1.5, np.float32)
    w = np.ones((2, 2), np.float32)
    call = {"kind": "torch_fn", "fn": "torch.nn.functional.fake", "args": [{"$t": 0}, {"$t": 1}],
            "kwargs": {"alpha": 0.5, "beta": 3, "gamma": "x", "weight": {"$t": 2}}}
    inst = make([x, w, w], call)

    def rule(c):
        kw = c.call["kwargs"]
        if "gamma" not in kw:
            return "invalid"  # a parameter the call cannot do without
        return "mismatch" if kw.get("alpha") == 0.5 and len(c.call["args"]) == 2 else "pass"
    red = reduce_instance(inst, "fake", SIG, run=fake_run(rule), budget=30)
    r = red.reduced
    assert red.confirmed
    assert red.params_that_matter == ["alpha"] and red.params_required == ["gamma"]
    assert r.call["kwargs"] == {"alpha": 0.5, "gamma": "x"} and "beta" not in r.params
    # the keyword tensor went, the trailing positional one stays (the failure needs it)
    assert red.inputs_that_matter == ["arg1"] and len(r.inputs) == 2 and r.call["args"] == [{"$t": 0}, {"$t": 1}]
    assert sorted(k for k in r.arrays) == ["in:0", "in:1"]
    assert any(s["kind"] == "input" and "weight" in s["what"] for s in red.steps)


def test_special_values_are_kept_when_they_matter():
    x = np.array([0.3, np.nan, -2.0, np.inf], np.float32)
    inst = make([x])
    rule = lambda c: "mismatch" if np.isnan(c.input_arrays()[0]).any() else "pass"
    red = reduce_instance(inst, "fake", SIG, run=fake_run(rule), budget=30)
    got = red.reduced.input_arrays()[0]
    # shrunk to the first two elements (the NaN is the second), then zeros with the NaN kept in place
    assert got.shape == (2,) and got[0] == 0 and np.isnan(got[1])
    assert red.steps[-1] == {"kind": "values", "what": "in:0 -> zeros, NaN/Inf kept"}


def test_budget_odd_recipes_and_broken_runners_never_raise():
    inst = make([np.ones((4, 4), np.float32)])
    always = fake_run(lambda c: "mismatch")
    # no budget: the instance is checked and confirmed, nothing else
    red = reduce_instance(inst, "fake", SIG, run=always, budget=0)
    assert red.reduced is inst and red.confirmed and red.tried == 2
    # a recipe kind nobody knows: the shape pass cannot build candidates; no exception escapes
    odd = copy.copy(inst)
    odd.call = {"kind": "martian"}
    red = reduce_instance(odd, "fake", SIG, run=always, budget=10)
    assert red.reduced is odd and any("martian" in n or "skipped" in n for n in red.notes)

    def broken(cands):
        raise RuntimeError("engine gone")
    red = reduce_instance(inst, "fake", SIG, run=broken, budget=10)
    assert red.reduced is inst and not red.confirmed and "engine gone" in " ".join(red.notes)


def test_keras_config_keys_reset_to_the_class_defaults():
    # keras defaults come from the layer class itself (read in a fresh interpreter: dlci never imports keras)
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(2, 6)
    config = {"name": "re_lu", "trainable": True, "max_value": 6.0, "negative_slope": 0.1, "threshold": 0.5}
    inst = Instance(op="keras::ReLU", framework="keras",
                    call={"kind": "keras_layer", "cls": "keras.layers.ReLU", "config": config, "args": [{"$t": 0}]},
                    inputs=[TensorSpec.of(x)], params=E._keras_params(config), origin=Origin("test", "pure"),
                    arrays={"in:0": x})
    rule = lambda c: "mismatch" if c.call["config"]["negative_slope"] != 0 else "pass"
    red = reduce_instance(inst, "fake", "fake|compare|keras::ReLU|value mismatch", run=fake_run(rule), budget=60)
    cfg = red.reduced.call["config"]
    assert red.confirmed and red.params_that_matter == ["negative_slope"]
    assert cfg["max_value"] is None and cfg["threshold"] == 0.0 and cfg["negative_slope"] == 0.1
    assert red.reduced.params["max_value"] is None and config["max_value"] == 6.0  # original config untouched
