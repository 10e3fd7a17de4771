"""Graph reduction (dlci.reduce.graph): multi-operator ONNX models around real bugs of the pinned stack, reduced to
the operators the failure needs, with the same signature, through real targets."""
import time

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

from dlci.findings import signature
from dlci.instance import Instance, Origin, TensorSpec
from dlci.models.onnx_io import instance_from_model, load_onnx
from dlci.outcome import Outcome
from dlci.reduce import _Search, engine_runner, reduce_instance, same_failure
from dlci.reduce import edit as E
from dlci.reduce import graph as G
from dlci.targets import get
from dlci.testcase import execute_job


def const(name, value):
    return h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(value), name + "_value"))


def unpool_chain():
    """11 operators around ONNX Runtime's MaxUnpool, which puts the values at the wrong places when an
    output_shape larger than the default is given (indices are positions in the pooled input's grid)."""
    nodes = [h.make_node("Relu", ["x"], ["a"]),
             h.make_node("MaxPool", ["a"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             const("two", np.float32(2.0)),
             h.make_node("Mul", ["p", "two"], ["q"]),
             h.make_node("Shape", ["z"], ["s"]),
             h.make_node("MaxUnpool", ["q", "i", "s"], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Sigmoid", ["u"], ["v"]),
             h.make_node("Add", ["v", "z"], ["w"]),
             h.make_node("Identity", ["w"], ["w2"]),
             const("flat", np.array([1, 25], np.int64)),
             h.make_node("Reshape", ["w2", "flat"], ["out"])]
    g = h.make_graph(nodes, "unpool_chain", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4]),
                                             h.make_tensor_value_info("z", T.FLOAT, [1, 1, 5, 5])],
                     [h.make_tensor_value_info("out", T.FLOAT, [1, 25])])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    z = rng.standard_normal((1, 1, 5, 5)).astype(np.float32)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), [x, z]


def unpool_shape_graph(middle):
    """TVM's MaxUnpool converter reading an output_shape that ``Shape`` computes (``middle``: nodes from ``s`` to
    the value MaxUnpool reads), inside 8-10 operators."""
    shape_value = middle[-1].output[0] if middle else "s"
    nodes = [h.make_node("Abs", ["p"], ["pa"]), h.make_node("Neg", ["pa"], ["pn"]),
             h.make_node("Shape", ["z"], ["s"]), *middle,
             h.make_node("MaxUnpool", ["pn", "i", shape_value], ["u"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Relu", ["z"], ["zr"]), h.make_node("Add", ["u", "zr"], ["w"]),
             h.make_node("Identity", ["w"], ["w2"]), h.make_node("Tanh", ["w2"], ["out"])]
    g = h.make_graph(nodes, "unpool_shape", [h.make_tensor_value_info("p", T.FLOAT, [1, 1, 2, 2]),
                                             h.make_tensor_value_info("i", T.INT64, [1, 1, 2, 2]),
                                             h.make_tensor_value_info("z", T.FLOAT, [1, 1, 5, 5])],
                     [h.make_tensor_value_info("out", T.FLOAT, [1, 1, 5, 5])])
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((1, 1, 2, 2)).astype(np.float32),
              np.array([5, 7, 13, 15], np.int64).reshape(1, 1, 2, 2),
              rng.standard_normal((1, 1, 5, 5)).astype(np.float32)]
    return h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), arrays


def in_process(target, log=None):
    """run(candidates): each candidate through the real target here (dlci.testcase.execute_job); every model that
    reaches the target is logged with its node count and its validity under onnx.checker + strict inference."""
    def run(cands):
        outs = []
        for c in cands:
            if log is not None:
                m = load_onnx(c.arrays)
                log.append((len(m.graph.node), G.valid(m)))
            outs.append(execute_job(c, target))
        return outs
    run.parallel = 2
    return run


def sig_of(run, inst, target):
    out = run([inst])[0]
    return out, signature(Outcome.from_dict(out), get(target).modules)


def node_types(inst):
    return [n.op_type for n in load_onnx(inst.arrays).graph.node]


@pytest.fixture(scope="module")
def ort_engine():
    from dlci.exec import Engine
    with Engine(workers=2, timeout=120, memory_mb=3000, warm_imports=("onnx", "onnxruntime", "dlci.testcase")) as eng:
        yield eng


@pytest.fixture(scope="module")
def tvm_loaded():
    pytest.importorskip("tvm")
    import tvm.relax.frontend.onnx  # noqa: F401 - imported once here, not inside the first timed reduction
    return True


# -- cutting: what every candidate model is -------------------------------------------------------------------

def test_cut_feeds_the_values_the_whole_model_computed():
    model, xs = unpool_chain()
    inst = instance_from_model(model, xs, op="onnx::MaxUnpool")
    assert G.operators(inst) == 11 and G.is_multi_operator(inst) and inst.op == "onnx::MaxUnpool"
    full = ReferenceEvaluator(load_onnx(inst.arrays)).run(None, {"x": xs[0], "z": xs[1]}, intermediate=True)
    base = G._Base(inst)
    names = [n.op_type for n in base.nodes]

    # MaxUnpool alone: its three inputs are cut and fed exactly what MaxPool, Mul and Shape computed
    m, arrays = G.cut_model(base, {names.index("MaxUnpool")})
    assert [n.op_type for n in m.graph.node] == ["MaxUnpool"] and G.valid(m) is None
    assert [i.name for i in m.graph.input] == ["q", "i", "s"] and [o.name for o in m.graph.output] == ["u"]
    for k, name in enumerate(["q", "i", "s"]):
        np.testing.assert_array_equal(arrays[f"in:{k}"], full[name])
        assert arrays[f"in:{k}"].dtype == full[name].dtype
    assert not any(k.startswith("expected:") for k in arrays) and not m.graph.initializer
    assert m.opset_import == model.opset_import

    # MaxPool alone: both outputs were read by removed nodes, so both are observed; the original x is kept
    m, arrays = G.cut_model(base, {names.index("MaxPool")})
    assert [o.name for o in m.graph.output] == ["p", "i"] and list(arrays) == ["in:0"]
    np.testing.assert_array_equal(arrays["in:0"], full["a"])

    # a value computed from constants only becomes an initializer, not a runtime input
    m, arrays = G.cut_model(base, {names.index("Mul"), names.index("Reshape")})
    assert [t.name for t in m.graph.initializer] == ["two", "flat"]
    assert [i.name for i in m.graph.input] == ["p", "w2"] and G.valid(m) is None
    assert [o.name for o in m.graph.output] == ["out", "q"]  # the original output first, then the frontier
    # the cut model computes what the whole one did at those values
    got = ReferenceEvaluator(m).run(None, {"p": arrays["in:0"], "w2": arrays["in:1"]})
    np.testing.assert_array_equal(got[0], full["out"])
    np.testing.assert_array_equal(got[1], full["q"])

    # an unused output is never exposed: MaxPool's Indices when only the values are read
    g = h.make_graph([h.make_node("MaxPool", ["x"], ["p", "unused"], kernel_shape=[2, 2]),
                      h.make_node("Neg", ["p"], ["n"]), h.make_node("Relu", ["n"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    small = instance_from_model(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), [xs[0]])
    m, _ = G.cut_model(G._Base(small), {0, 1})
    assert [o.name for o in m.graph.output] == ["n"]


def test_single_operator_instances_are_left_alone():
    _, xs = unpool_chain()
    single = instance_from_model(h.make_model(h.make_graph(
        [h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 4])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 4, 4])]), opset_imports=[h.make_opsetid("", 13)]), xs[:1])
    assert G.operators(single) == 1 and not G.is_multi_operator(single)
    x = xs[0]
    torch_inst = Instance(op="aten::relu", framework="torch", inputs=[TensorSpec.of(x)], params={},
                          call={"kind": "torch_fn", "fn": "torch.relu", "args": [{"$t": 0}], "kwargs": {}},
                          origin=Origin("test", "relu"), arrays={"in:0": x})
    assert G.operators(torch_inst) == 1
    # the metric every reduction reports
    red = reduce_instance(single, "onnxruntime", "onnxruntime|compare|onnx::Relu|value mismatch",
                          run=in_process("onnxruntime"), budget=5)
    assert red.before["operators"] == red.after["operators"] == 1 and red.tried == 1  # it passes: not reduced


# -- real bugs, real targets --------------------------------------------------------------------------------

def test_onnxruntime_maxunpool_is_found_among_eleven_operators(ort_engine):
    target = "onnxruntime"
    model, xs = unpool_chain()
    inst = instance_from_model(model, xs, op="onnx::MaxUnpool")
    run = engine_runner(ort_engine, target)
    out, sig = sig_of(run, inst, target)
    assert out["status"] == "inconsistency" and sig == "onnxruntime|compare|onnx::MaxUnpool|value mismatch"
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=60)
    assert red.confirmed, red.notes
    assert node_types(red.reduced) == ["MaxUnpool"]
    assert red.before["operators"] == 11 and red.after["operators"] == 1
    assert red.steps[0]["kind"] == "graph" and "11 -> 1 operators" in red.steps[0]["what"]
    assert red.after["elements"] < red.before["elements"]
    assert len(red.reduced.inputs) == 3  # the output_shape input, which carries the bug, stays
    assert same_failure(run([red.reduced])[0], sig, get(target).modules)


def test_the_bisection_comes_first_and_the_failure_that_needs_two_operators_keeps_both(tvm_loaded):
    # TVM's MaxUnpool converter gets a ShapeExpr when output_shape comes from Shape: a ValueError. Fed from a
    # graph input (the cut) the same converter fails in another way ('Var' has no tolist): the failure needs
    # Shape as well.
    target = "tvm.from_onnx"
    model, xs = unpool_shape_graph([])
    inst = instance_from_model(model, xs, op="onnx::MaxUnpool")
    log = []
    run = in_process(target, log)
    out, sig = sig_of(run, inst, target)
    assert out["status"] == "crash" and "cannot handle ShapeExpr inputs" in sig, sig
    log.clear()
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=60)
    assert red.confirmed, red.notes
    assert node_types(red.reduced) == ["Shape", "MaxUnpool"]
    assert red.before["operators"] == 8 and red.after["operators"] == 2
    graph_steps = [s["what"] for s in red.steps if s["kind"] == "graph"]
    assert graph_steps[0].startswith("kept 1/2: 8 -> 4")
    # halves, then quarters, then single operators: six graphs for eight operators (after the initial check);
    # the later runs are the other passes on the two-operator graph
    sizes = [n for n, _ in log]
    assert sizes[:7] == [8, 4, 4, 2, 2, 1, 1] and set(sizes[7:]) == {2}, sizes
    # MaxUnpool alone (output_shape cut into a graph input) was tried: another signature, so not accepted
    alone = run([inst_cut(inst, ["MaxUnpool"])])[0]
    assert alone["status"] == "crash" and not same_failure(alone, sig, get(target).modules)


def inst_cut(inst, keep_types):
    base = G._Base(inst)
    m, arrays = G.cut_model(base, {k for k, n in enumerate(base.nodes) if n.op_type in keep_types})
    return E.derive(inst, inst, arrays=arrays, onnx_model=m)


def test_invalid_cuts_never_reach_the_target(tvm_loaded):
    # Shape -> Cast(float) -> Cast(int64) -> MaxUnpool: TVM folds the casts into a constant that its MaxUnpool
    # converter cannot read ('GenericConst' has no tolist). Bypassing the second Cast would hand MaxUnpool a
    # float output_shape: the checker rejects that cut, and it is never run.
    target = "tvm.from_onnx"
    model, xs = unpool_shape_graph([h.make_node("Cast", ["s"], ["sf"], to=T.FLOAT),
                                    h.make_node("Cast", ["sf"], ["s2"], to=T.INT64)])
    inst = instance_from_model(model, xs, op="onnx::MaxUnpool")
    log = []
    run = in_process(target, log)
    out, sig = sig_of(run, inst, target)
    assert out["status"] == "crash" and "GenericConst" in sig, sig
    log.clear()
    s = _Search(inst, target, sig, run, get(target).modules, 60, time.monotonic())
    s.verdict[inst.id] = True
    G.graph_pass(s)
    assert log and all(why is None for _, why in log), log  # every model that ran passes the checks
    assert any("rejected by the ONNX checks" in n and " 0 rejected" not in n for n in s.notes), s.notes
    assert node_types(s.current) == ["Shape", "Cast", "MaxUnpool"]
    assert load_onnx(s.current.arrays).graph.node[1].attribute[0].i == T.INT64  # the float Cast was bypassed
    assert same_failure(run([s.current])[0], sig, get(target).modules)


def test_budget_is_respected(ort_engine):
    target = "onnxruntime"
    model, xs = unpool_chain()
    inst = instance_from_model(model, xs, op="onnx::MaxUnpool")
    run = engine_runner(ort_engine, target)
    _, sig = sig_of(run, inst, target)
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=0)
    assert red.reduced is inst and red.tried == 2 and red.confirmed  # the check and the confirmation only
    assert any("before the graph pass" in n for n in red.notes)
    assert red.before["operators"] == red.after["operators"] == 11


def test_a_multi_operator_failure_is_cut_to_its_named_operator_with_what_it_depends_on():
    """ONNX Runtime drops the float16 rounding of Cast-Neg-Cast (each alone passes); behind it a LayerNormalization
    and a Relu, beside it a branch joined by an Add. Localisation names the second Cast (its first wrong value), and
    the first graph step keeps the Cast with what it depends on: the three operators of the bug."""
    target = "onnxruntime"
    nodes = [h.make_node("Cast", ["x"], ["a"], to=T.FLOAT16), h.make_node("Neg", ["a"], ["b"]),
             h.make_node("Cast", ["b"], ["c"], to=T.FLOAT), h.make_node("Abs", ["x"], ["d"]),
             h.make_node("Add", ["c", "d"], ["e"]),
             h.make_node("LayerNormalization", ["e", "scale", "bias"], ["f"], axis=-1),
             h.make_node("Relu", ["f"], ["y"])]
    g = h.make_graph(nodes, "trip", [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4, 16])],
                     [nh.from_array(np.ones(16, np.float32), "scale"), nh.from_array(np.zeros(16, np.float32), "bias")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    inst = instance_from_model(model, [np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)])
    inst.call["localise"] = True
    log = []
    run = in_process(target, log)
    out, sig = sig_of(run, inst, target)
    assert sig == "onnxruntime|compare|onnx::Cast (in a graph)|value mismatch", sig
    log.clear()
    red = reduce_instance(inst, target, sig, run=run, modules=get(target).modules, budget=60)
    assert red.confirmed, red.notes
    assert node_types(red.reduced) == ["Cast", "Neg", "Cast"]
    assert red.steps[0]["what"].startswith("the named operator with what it depends on: 7 -> 3"), red.steps
    # after the whole graph's check, no Cast alone (each passed alone in localisation): the cut comes first
    assert [n for n, _ in log[:2]] == [7, 3], log


def test_a_crash_in_a_graph_too_large_to_localise_is_named_and_reduced(tmp_path, tvm_loaded):
    """A crash in a graph of more than dlci.localise.MAX_NODES operators gets no check of each operator alone (no
    trace for a crash: one target run per operator would be too many). When TVM's message names the node, that node
    is the one suspect, checked alone, and the finding names its operator (a TVM fuzz finding had stayed
    ``graph::fuzz103``); the signature then holds no name of the graph's own, so the reduction can cut it: with the
    graph's names in it, no cut failed "the same way" and the 48 operators stayed."""
    import json

    import onnx

    from dlci.cli import main
    from dlci.errors import ExitCode
    from dlci.localise import MAX_NODES
    model, _ = unpool_shape_graph([])
    nodes = list(model.graph.node)
    for k, node in enumerate(nodes):  # named, as the fuzzer's are: TVM's message names the node
        node.name = f"n{k}_{node.op_type}"
    relu = next(n for n in nodes if n.op_type == "Relu")
    chain = [h.make_node("Sigmoid" if k % 2 else "Tanh", [f"c{k}" if k else "z"], [f"c{k + 1}"], name=f"c{k}")
             for k in range(MAX_NODES)]
    relu.input[0] = chain[-1].output[0]
    del model.graph.node[:]
    model.graph.node.extend(chain + nodes)
    onnx.checker.check_model(model)
    assert len(model.graph.node) > MAX_NODES
    path = tmp_path / "deep.onnx"
    onnx.save(model, path)
    out = tmp_path / "out"
    code = main(["test", "--model", str(path), "--targets", "tvm.from_onnx", "--budget", "90",
                 "--out", str(out)])
    assert code == ExitCode.FINDINGS
    [f] = json.loads((out / "findings.json").read_text())["findings"]
    assert "cannot handle ShapeExpr" in f["message"]
    assert f["reduction"]["after"]["operators"] < f["reduction"]["before"]["operators"] == len(model.graph.node)
    assert f["operator"] == f["graph"]["localised_to"] == "onnx::MaxUnpool", (f["operator"], f["graph"])
