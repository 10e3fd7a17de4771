"""The graph model, the block corpus, the generator and the coverage criteria of the graph fuzzer (no target run)."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnx")

from dlci.fuzz.corpus import Corpus, load_corpus  # noqa: E402
from dlci.fuzz.coverage import Coverage  # noqa: E402
from dlci.fuzz.generate import MUTATIONS, NodeFeature, generate, rn_graph, ws_graph  # noqa: E402
from dlci.fuzz.search import MCTSStrategy, RandomStrategy  # noqa: E402
from dlci.models.graph import Graph, GraphError, Node, Value, graph_instance, graph_of  # noqa: E402


def _conv_graph() -> Graph:
    rng = np.random.default_rng(0)
    return Graph([Value("x", (1, 3, 6, 6))],
                 [Node("Conv", ["x", "W"], ["c"], {"pads": [1, 1, 1, 1]}), Node("Add", ["c", "b"], ["a"]),
                  Node("Relu", ["a"], ["y"]), Node("ReduceMean", ["y", "axes"], ["m"], {"keepdims": 1})],
                 ["m"], {"W": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
                         "b": rng.standard_normal((1, 4, 1, 1)).astype(np.float32), "axes": np.array([2, 3])})


def test_coverage_criteria_are_the_papers_table_ii():
    """The paper's worked example (Table II): BC = Conv2d {1}, Relu {1}, Add {2}, out-degrees {0, 1, 2},
    n_maxspc = 10; a test set where Conv2d has out-degrees {1, 2}, two shape/parameter vectors and one successor
    type, Relu out-degree {1}, one vector, one successor, Add out-degrees {0, 1}, three vectors, one successor."""
    corpus = Corpus([], {}, {"Conv2d": {1}, "Relu": {1}, "Add": {2}})
    cov = Coverage(corpus)
    cov.add([NodeFeature("Conv2d", 1, 1, ("Relu",), "c1"), NodeFeature("Relu", 1, 1, ("Add",), "r1"),
             NodeFeature("Add", 2, 0, (), "a1")])
    cov.add([NodeFeature("Conv2d", 1, 2, ("Relu",), "c2"), NodeFeature("Add", 2, 1, ("Conv2d",), "a2")])
    cov.add([NodeFeature("Add", 2, 0, (), "a3"), NodeFeature("Conv2d", 1, 1, ("Relu",), "c1")])
    per = cov.per_operator()
    assert per["Conv2d"] == {"OTC": 1.0, "IDC": 1.0, "ODC": 0.6667, "SEC": 0.3333, "SPC": 0.2, "OLC": 0.64}
    assert per["Relu"] == {"OTC": 1.0, "IDC": 1.0, "ODC": 0.3333, "SEC": 0.3333, "SPC": 0.1, "OLC": 0.5533}
    assert per["Add"] == {"OTC": 1.0, "IDC": 1.0, "ODC": 0.6667, "SEC": 0.3333, "SPC": 0.3, "OLC": 0.66}
    figs = {k: round(v, 3) for k, v in cov.figures().items()}
    assert figs == {"OTC": 1.0, "IDC": 1.0, "ODC": 0.556, "SEC": 0.333, "SPC": 0.2, "OLC": 0.618}
    # a graph with nothing new adds no coverage; one new vector does
    assert not cov.adds([NodeFeature("Relu", 1, 1, ("Add",), "r1")])
    assert cov.adds([NodeFeature("Relu", 1, 1, ("Add",), "r2")])
    # weights: the paper's note that ODC's weight is 0 when every out-degree is 1
    assert Coverage(corpus, weights={"OTC": 1, "IDC": 1, "ODC": 0, "SEC": 1, "SPC": 1}).olc_op("Conv2d") == 0.0


def test_graph_model_validates_materialises_and_serves_audee():
    g = _conv_graph()
    types = g.check()
    assert types["y"] == ((1, 4, 6, 6), "float32") and types["m"] == ((1, 4, 1, 1), "float32")
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    out32, out64 = g.evaluate([x])[0], g.evaluate([x], float64=True)[0]
    assert out64.dtype == np.float64 and np.allclose(out32, out64, atol=1e-5)
    # the spec round trip (constants travel as arrays), the ONNX round trip
    again = Graph.from_spec(json.dumps(g.to_spec()), g.arrays())
    assert np.array_equal(again.evaluate([x])[0], out32)
    assert Graph.from_onnx(g.to_onnx()).operators() == ["Conv", "Add", "Relu", "ReduceMean"]
    # Audee: intermediate values exposed, a node fed from elsewhere, weights changed with the structure kept
    values = g.evaluate([x], intermediate=True)
    wide = g.with_outputs(["a"])
    assert np.allclose(wide.evaluate([x])[1], values["a"])
    alone = g.cut([2])
    assert [v.name for v in alone.inputs] == ["a"] and alone.operators() == ["Relu"]
    assert np.allclose(alone.evaluate([values["a"]])[0], values["y"])
    zero = g.with_constants({"W": np.zeros((4, 3, 3, 3), np.float32)})
    assert zero.operators() == g.operators() and not np.allclose(zero.evaluate([x])[0], out32)
    with pytest.raises(GraphError, match="does not replace"):
        g.with_constants({"W": np.zeros((1,), np.float32)})
    # as an instance, and back
    inst = graph_instance(g, [x], source="test")
    assert inst.call["kind"] == "onnx_model" and inst.call["localise"] is True
    assert graph_of(inst).operators() == g.operators()


@pytest.mark.parametrize("spec, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "must be an object"),
    ('{"inputs": [], "nodes": [], "outputs": []}', "no node"),
    ('{"inputs": [{"name": "x", "shape": [2]}], "nodes": [{"op": "NoSuchOp", "inputs": ["x"], "outputs": ["y"]}],'
     ' "outputs": ["y"]}', "no operator NoSuchOp"),
    ('{"inputs": [{"name": "x", "shape": [2]}], "nodes": [{"op": "Relu", "inputs": ["z"], "outputs": ["y"]}],'
     ' "outputs": ["y"]}', "which no earlier node"),
    ('{"inputs": [{"name": "x", "shape": [2]}], "nodes": [{"op": "Relu", "inputs": ["x"], "outputs": ["y"],'
     ' "attrs": {"alpha": 1}}], "outputs": ["y"]}', "no attribute 'alpha'"),
    ('{"inputs": [{"name": "x", "shape": [2, "a"]}], "nodes": [], "outputs": []}', "non-negative integers"),
    ('{"inputs": [{"name": "x", "shape": [2, 3]}], "nodes": [{"op": "MatMul", "inputs": ["x", "x"], '
     '"outputs": ["y"]}], "outputs": ["y"]}', "ONNX rejects the graph"),
    ('{"inputs": [{"name": "x", "shape": [2]}], "nodes": [{"op": "Relu", "inputs": ["x"], "outputs": ["y"]}],'
     ' "outputs": ["x"]}', "not computed by any node"),
])
def test_a_malformed_graph_spec_is_a_clear_error(spec, message):
    with pytest.raises(GraphError, match=message):
        Graph.from_spec(spec).check()


def test_random_graph_models():
    rng = np.random.default_rng(0)
    for g in (rn_graph(3, 0.6, 8, rng), ws_graph(4, 0.3, 8, rng)):
        assert g.n == 8 and all(i < j for i, j in g.edges)  # acyclic: edges go forward
    line = rn_graph(2, 0.0, 5, rng)
    assert line.edges == {(0, 1), (1, 2), (2, 3), (3, 4)}  # p = 0: the line alone


def test_generated_networks_are_valid_and_agree_with_a_second_reading_of_onnx():
    from dlci.fuzz.stream import _witness
    corpus = load_corpus()
    assert len(corpus.ops) > 80 and any(b.kind == "subgraph" for b in corpus.blocks)
    assert "Hardmax" in corpus.skipped  # left out, with why
    rng = np.random.default_rng(7)
    made = 0
    for k in range(25):
        blocks = [corpus.blocks[int(i)] for i in rng.integers(len(corpus.blocks), size=3)]
        try:
            gen = generate(corpus, blocks, [m for m in MUTATIONS if rng.random() < 0.4], rng)
            _witness(gen)  # ONNX Runtime without optimisations must agree with the reference, else no network
        except GraphError:
            continue
        made += 1
        gen.graph.check()
        assert gen.features and all(f.in_degree >= 1 for f in gen.features)
        assert all(v.dtype == "float32" for v in gen.graph.inputs)
    assert made >= 15


def test_mcts_expands_by_expected_gain_and_learns_from_rewards():
    corpus = load_corpus()
    cov = Coverage(corpus)
    rng = np.random.default_rng(0)
    mcts = MCTSStrategy(corpus, cov, rng, max_blocks=3)
    first = mcts.choose()
    assert first.blocks and first.handle.block in {b.name for b in corpus.blocks}
    top = first.handle.path()[0]  # the tree's first block (the network's own order is the placement order)
    mcts.feedback(first, 1.0)
    for _ in range(40):
        c = mcts.choose()
        mcts.feedback(c, 1.0 if c.handle.path()[0] == top else 0.0)
    assert mcts.stats()["best_first_blocks"][0]["block"] == top
    rnd = RandomStrategy(corpus, cov, np.random.default_rng(0), must={"Resize"})
    assert all(any("Resize" in b.ops for b in rnd.choose().blocks) for _ in range(10))


def test_mcts_prefers_an_uncovered_operator_pair_and_drops_an_operator_that_gains_nothing():
    """The steering on the real coverage tracker: Abs and Neg are covered alike, but Relu -> Abs is already an
    edge of the test set and Relu -> Neg is not, so next to Relu the Neg block is worth more (SEC); and an operator
    chosen again and again without gaining anything (a block that never places) sinks below the others."""
    corpus = load_corpus()
    cov = Coverage(corpus)
    cov.add([NodeFeature("Relu", 1, 1, ("Abs",), "r"), NodeFeature("Abs", 1, 0, (), "v"),
             NodeFeature("Neg", 1, 0, (), "v")])
    assert cov.op_metrics("Abs") == cov.op_metrics("Neg")
    # a typical gain is worth about one, whichever criterion it is in; the edge-only gain is not nothing
    assert cov.balanced(cov.last_gains) > 0.5 and cov.balanced({"SEC": cov.last_gains["SEC"]}) > 0
    mcts = MCTSStrategy(corpus, cov, np.random.default_rng(0))
    blocks = corpus.by_name()
    assert mcts.block_score(blocks["Neg"], ["Relu"]) > mcts.block_score(blocks["Abs"], ["Relu"])
    assert mcts.block_score(blocks["Neg"], []) == mcts.block_score(blocks["Abs"], [])
    fresh = mcts.op_scores()["Neg"]
    for _ in range(5):
        mcts.credit(type(mcts.choose())([blocks["Neg"]], []), {})
    scores = mcts.op_scores()
    assert scores["Neg"] < fresh / 3 and scores["Neg"] < float(np.median(list(scores.values())))
    # an operator a target named as unsupported costs more than the one beside it (it voided that target's test)
    pair = type(mcts.choose())([blocks["Abs"], blocks["Relu"]], [])
    mcts.charge(pair, 1.0, blame={"Abs"})
    assert mcts.cost("Abs") > mcts.cost("Relu")


def test_the_torch_form_computes_what_the_onnx_reference_does_and_says_what_it_cannot_express():
    torch = pytest.importorskip("torch")
    from dlci.models.graph_torch import build_module, check_torch, torch_graph_instance, torch_source
    g = _conv_graph()
    x = np.random.default_rng(2).standard_normal((1, 3, 6, 6)).astype(np.float32)
    check_torch(g)  # meta tensors: the shapes and dtypes ONNX inference gives
    with torch.no_grad():
        got = build_module(g)(torch.from_numpy(x))[0].numpy()
    assert np.allclose(got, g.evaluate([x])[0], rtol=1e-4, atol=1e-5)
    src, arrays = torch_source(g)
    assert "torch.nn.functional.conv2d(" in src and "self.c_W" in src and set(arrays) >= {"c_W", "c_b"}
    inst = torch_graph_instance(g, [x], source="test")
    assert inst.call["kind"] == "torch_graph" and graph_of(inst).operators() == g.operators()
    lstm = Graph([Value("x", (2, 1, 3))], [Node("LSTM", ["x", "W", "R"], ["y"], {"hidden_size": 2})], ["y"],
                 {"W": np.zeros((1, 8, 3), np.float32), "R": np.zeros((1, 8, 2), np.float32)})
    with pytest.raises(GraphError, match="no torch form for LSTM"):
        build_module(lstm)


def test_mcts_networks_hold_tc1_blocks_and_failures_steer_the_operators():
    """A new failure signature draws the search to the operator it was localised to (to every operator of the graph
    when it needs several); a failure already found voids that target's test, and its culprit is charged for it."""
    from types import SimpleNamespace as NS

    from dlci.fuzz.stream import FuzzStream, _culprits, _Pending
    corpus = load_corpus()
    cov = Coverage(corpus)
    mcts = MCTSStrategy(corpus, cov, np.random.default_rng(0), max_blocks=3)
    assert all(len(mcts.choose().blocks) == 3 for _ in range(10))
    stream = FuzzStream(None, {}, corpus, cov, mcts, np.random.default_rng(0), witness=False)
    blocks = corpus.by_name()

    def network(key, *names):
        stream.pending[key] = _Pending(type(mcts.choose())([blocks[n] for n in names], []), 0.0, {}, 2)
        return NS(instance=NS(id=key))

    def outcome(status, **localised):
        return NS(status=status, seconds=1.0, message="", log="", localised=localised)

    assert mcts.op_scores()["Abs"] == mcts.op_scores()["Neg"]
    first = network("a", "Abs", "Neg")
    stream.observe(first, outcome("pass"), False)
    stream.observe(first, outcome("crash", operator="onnx::Abs"), True)
    assert mcts.op_scores()["Abs"] > mcts.op_scores()["Neg"]
    again = network("b", "Relu", "Neg")
    stream.observe(again, outcome("inconsistency", operator="onnx::Relu"), False)
    stream.observe(again, outcome("pass"), False)
    assert mcts.cost("Relu") > mcts.cost("Neg")
    both = {"multi_operator": True, "alone": {"0:Slice": "pass", "1:GatherElements": "pass"}}
    assert _culprits(both, {"Slice", "GatherElements", "Relu"}) == {"Slice", "GatherElements"}
    assert _culprits({"operator": "onnx::Relu"}, {"Relu", "Neg"}) == {"Relu"}


def test_the_witness_keeps_a_graph_onnx_runtime_changes_even_unoptimised_and_drops_a_node_outside_the_spec():
    """Cast to float16, Neg, Cast back: ONNX Runtime with its optimisations off drops the float16 rounding (the
    casts it inserts around a float16 Neg are removed in pairs with the graph's own), while each node alone agrees
    with the reference: the graph is a valid test, and the ONNX Runtime target fails it as a multi-operator
    inconsistency. A pooling whose pads exceed its kernel (outside the specification, which the reference accepts)
    is still not a test."""
    from onnx import TensorProto, helper
    from dlci.localise.witness import outside_spec
    from dlci.models.onnx_io import instance_from_model
    from dlci.testcase import execute

    def model(nodes, x_shape, y_shape):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m

    x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
    casts = model([helper.make_node("Cast", ["x"], ["a"], to=TensorProto.FLOAT16), helper.make_node("Neg", ["a"], ["b"]),
                   helper.make_node("Cast", ["b"], ["y"], to=TensorProto.FLOAT)], [64], [64])
    ref = [(-x.astype(np.float16)).astype(np.float32)]
    assert outside_spec(casts, [x], ref, [ref[0].astype(np.float64)]) is None
    inst = instance_from_model(casts, [x])
    inst.call["localise"] = True
    out = execute(inst, "onnxruntime")
    assert out.status == "inconsistency", out.message
    assert out.localised["multi_operator"] and set(out.localised["alone"].values()) == {"pass"}

    import onnx.parser
    from onnx.reference import ReferenceEvaluator
    from dlci.models.onnx_io import widen_to_float64
    # two LRNs: ONNX Runtime is 1e-4 off at the end, but so is each node of it run after the other on its own
    # values (its rounding accumulating, not a graph change): not a test
    lrns = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 18]>
        g (float[1,3,1,1] x) => (float[1,3,1,1] b, float[1,3,1,1] a) {
            a = LRN <size: int = 3> (x)
            b = LRN <alpha: float = 0.00039317453, beta: float = 0.5, bias: float = 2, size: int = 3> (a)
        }""")
    ones = np.ones((1, 3, 1, 1), np.float32)
    lref = ReferenceEvaluator(lrns).run(None, {"x": ones})
    lref64 = ReferenceEvaluator(widen_to_float64(lrns)).run(None, {"x": ones.astype(np.float64)})
    assert "disagree" in outside_spec(lrns, [ones], lref, lref64)

    pool = model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], pads=[2, 2], count_include_pad=1)],
                 [1, 1, 4], [1, 1, 7])
    xs = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    pref = ReferenceEvaluator(pool).run(None, {"x": xs})  # the reference computes it
    assert "rejects" in outside_spec(pool, [xs], pref, None)


def test_a_multi_operator_bug_followed_by_other_operators_is_named_by_its_first_wrong_value():
    """ONNX Runtime drops the float16 rounding of Cast-Neg-Cast whether a LayerNormalization or a Relu follows or
    nothing does: all three graphs name the second Cast (the earliest operator whose output is wrong when the graph
    ends after it), so they make one finding — named by the output's operator they were three."""
    from onnx import TensorProto, helper, numpy_helper
    from dlci.findings import signature
    from dlci.models.onnx_io import instance_from_model
    from dlci.testcase import execute

    x = np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)
    trip = [helper.make_node("Cast", ["x"], ["a"], to=TensorProto.FLOAT16), helper.make_node("Neg", ["a"], ["b"]),
            helper.make_node("Cast", ["b"], ["c"], to=TensorProto.FLOAT)]
    after = {"nothing": [helper.make_node("Identity", ["c"], ["y"])],
             "LayerNormalization": [helper.make_node("LayerNormalization", ["c", "scale", "bias"], ["y"], axis=-1)],
             "Relu": [helper.make_node("Relu", ["c"], ["y"])]}
    signatures, named = set(), set()
    for then, nodes in after.items():
        nodes = trip + nodes if then != "nothing" else trip[:2] + [helper.make_node("Cast", ["b"], ["y"],
                                                                                    to=TensorProto.FLOAT)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                              [numpy_helper.from_array(np.ones(16, np.float32), "scale"),
                               numpy_helper.from_array(np.zeros(16, np.float32), "bias")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        inst = instance_from_model(m, [x])
        inst.call["localise"] = True
        out = execute(inst, "onnxruntime")
        assert out.status == "inconsistency" and out.localised["multi_operator"], (then, out.message)
        signatures.add(signature(out))
        named.add(out.localised["node"])
    assert named == {"2:Cast"} and len(signatures) == 1, (named, signatures)


def test_a_long_float32_sum_feeding_a_cosine_is_ill_conditioned_and_a_plain_graph_is_not():
    """The conditioning check moves every intermediate value by a rounding's worth, not only the inputs: the
    cosine of a sum of 504 terms (~400) differs by 1e-4 between summation orders, which input jitter alone missed
    (a TVM 'finding' of the fuzz benchmark); a Relu after a small sum stays judgeable."""
    from onnx import TensorProto, helper
    from dlci.localise import _ill_conditioned, _view
    from dlci.outcome import Outcome
    from dlci.models.onnx_io import instance_from_model

    def judged(then):
        nodes = [helper.make_node("ReduceL1", ["x"], ["s"], keepdims=1), helper.make_node(then, ["s"], ["y"])]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [504])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 8
        x = np.random.default_rng(3).standard_normal(504).astype(np.float32) * (1.0 if then == "Cos" else 1e-3)
        inst = instance_from_model(m, [x])
        s64 = np.abs(x.astype(np.float64)).sum(keepdims=True)
        r64 = np.cos(s64) if then == "Cos" else np.maximum(s64, 0)
        out = Outcome(inst.id, "onnx::" + then, "t", "inconsistency", distance={"output": 0})
        return _ill_conditioned(inst, out, [r64.astype(np.float32)], [r64], _view(inst))

    assert "ill-conditioned" in judged("Cos")
    assert judged("Relu") == ""


def test_a_crash_localised_to_one_operator_is_what_that_operator_says_alone():
    """OpenVINO's ONNX frontend goes on after a LayerNormalization it cannot convert (a scale of the input's whole
    shape) and fails again on the Conv that reads it, listing the Conv first: the graph's failure is localised to
    the LayerNormalization and takes its message alone, so it is one finding with the LayerNormalization's own
    test, and the reduction's first candidate (the operator alone) keeps the signature."""
    pytest.importorskip("openvino")
    from onnx import TensorProto, helper, numpy_helper
    from dlci.findings import signature
    from dlci.models.onnx_io import instance_from_model
    from dlci.targets import get
    from dlci.testcase import execute
    rng = np.random.default_rng(0)

    def model(conv: bool):
        nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["n"], axis=-1, epsilon=0.1)]
        inits = [numpy_helper.from_array(rng.standard_normal((1, 4, 8, 8)).astype(np.float32), name)
                 for name in ("s", "b")]
        out = "n"
        if conv:
            nodes.append(helper.make_node("Conv", ["n", "W"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
            inits.append(numpy_helper.from_array(rng.standard_normal((2, 4, 3, 3)).astype(np.float32), "W"))
            out = "y"
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 2 if conv else 4, 8, 8])],
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 8
        return m

    x = rng.standard_normal((1, 4, 8, 8)).astype(np.float32)
    outs = []
    for conv in (False, True):
        inst = instance_from_model(model(conv), [x])
        inst.call["localise"] = True
        outs.append(execute(inst, "openvino.onnx"))
    alone, graph = outs
    assert alone.status == graph.status == "crash" and graph.op == "onnx::LayerNormalization"
    assert graph.message.lstrip("- ").startswith("Conv"), graph.message[:80]  # what the converter says first
    modules = get("openvino.onnx").modules
    assert signature(graph, modules) == signature(alone, modules)


def test_a_small_integer_constant_two_nodes_take_is_one_initializer_and_weights_stay_apart():
    """Exporters write a shape or axes list that several nodes take as one initializer; an importer that consumes
    an initializer at its first use (TVM's ONNX frontend before #17350) fails at the second. Weights stay apart:
    the input search varies each on its own."""
    from dlci.fuzz.build import Builder
    b = Builder([Value("x", (2, 6)), Value("y", (2, 6))])
    r1 = b.one("Reshape", ["x", b.const([3, 4], dtype="int64")])
    r2 = b.one("Reshape", ["y", b.const([3, 4], dtype="int64")])
    w1, w2 = b.const(np.ones((4, 4), np.float32)), b.const(np.ones((4, 4), np.float32))
    out = b.one("Add", [b.one("MatMul", [r1, w1]), b.one("MatMul", [r2, w2])])
    model = b.graph([out]).to_onnx()
    inits = {i.name for i in model.graph.initializer}
    shape_inputs = [n.input[1] for n in model.graph.node if n.op_type == "Reshape"]
    assert len(shape_inputs) == 2 and shape_inputs[0] == shape_inputs[1] and shape_inputs[0] in inits
    assert w1 != w2 and {w1, w2} <= inits
