"""The directed search's parts: goals from changed code, distances in the call graph and control flow, the
mutation operators on real instances."""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from dlci.directed import distance as D
from dlci.directed import goals as G

CONVERTER = textwrap.dedent('''\
    def _helper(x, axis):
        if axis < 0:
            axis = axis + 3
        return axis


    class Importer:
        def _reduce(self, node):
            axis = node.kwargs.get("dim", 0)
            if isinstance(axis, (list, tuple)):
                axes = [self._norm(a) for a in axis]
            else:
                axes = [_helper(node, axis)]
            for a in axes:
                if a == 0:
                    continue
            try:
                keep = node.kwargs["keepdim"]
            except KeyError:
                keep = False
            return axes, keep

        def _norm(self, a):
            return _helper(None, a)
    ''')


def _trace(func, *args) -> tuple[dict, dict]:
    """Lines and arcs of ``func``'s file while it runs, the way the worker's tracer records them."""
    from dlci.testcase import _line_tracer
    hits, arcs = {}, {}
    path = func.__code__.co_filename
    sys.settrace(_line_tracer(frozenset([path]), hits, arcs))
    try:
        func(*args)
    finally:
        sys.settrace(None)
    return {k: sorted(v) for k, v in hits.items()}, {k: sorted(v) for k, v in arcs.items()}


def test_goals_are_the_changed_statements_and_the_branch_outcomes_of_changed_functions():
    fg = G.file_goals("conv.py", CONVERTER, {13})  # `axes = [_helper(node, axis)]` in Importer._reduce
    statements = [g for g in fg.goals if g.kind == "statement"]
    assert [(g.line, g.function) for g in statements] == [(13, "Importer._reduce")]
    outcomes = {(g.span[0], g.outcome) for g in fg.goals if g.kind == "branch"}
    assert outcomes == {(10, "true"), (10, "false"), (14, "enter"), (14, "skip"), (15, "true"), (15, "false"),
                        (17, "except")}
    assert all(g.function == "Importer._reduce" for g in fg.goals)  # _helper was not changed: not a goal
    false_branch = next(g for g in fg.goals if g.span[0] == 15 and g.outcome == "false")
    assert false_branch.to[0] == 14  # the loop goes on


def test_arcs_from_a_real_trace_say_which_branch_outcomes_ran(tmp_path):
    path = tmp_path / "conv.py"
    path.write_text(CONVERTER)
    ns: dict = {}
    exec(compile(CONVERTER, str(path), "exec"), ns)

    class Node:
        kwargs = {"dim": [0, 1]}
    lines, arcs = _trace(ns["Importer"]()._reduce, Node())
    key = str(path.resolve())
    fg = G.file_goals("conv.py", CONVERTER, {13})
    got = {(g.span[0], g.outcome) for g in fg.goals if G.reached(g, {key: lines[key]}, {key: arcs[key]}, tmp_path)}
    # a list of dims: the tuple branch, the loop with a 0 (continue) and a 1, keepdim absent (KeyError)
    assert got == {(10, "true"), (14, "enter"), (14, "skip"), (15, "true"), (15, "false"), (17, "except")}


def test_the_tracer_records_the_values_changed_statements_compute_on(tmp_path):
    from dlci.testcase import _line_tracer, value_class
    path = tmp_path / "conv.py"
    path.write_text(CONVERTER)
    ns: dict = {}
    exec(compile(CONVERTER, str(path), "exec"), ns)
    key = str(path.resolve())

    def values_of(dim):
        class Node:
            kwargs = {"dim": dim}
        hits, arcs, values = {}, {}, {}
        sys.settrace(_line_tracer(frozenset([key]), hits, arcs, values, ((key, 3, 3), (key, 9, 9), (key, 13, 13))))
        try:
            ns["Importer"]()._reduce(Node())
        finally:
            sys.settrace(None)
        return values.get(key, {})

    scalar = values_of(-1)
    # the helper's normalisation: axis before (-1) and after (2); the scalar path: the dim and the list it makes
    assert {"axis=-1", "axis=> 1"} <= set(scalar["3"])
    assert {"axis=-1", "axes=list of 1"} <= set(scalar["13"])
    assert "node=Node" in scalar["9"]
    listed = values_of([0, -2])
    assert "13" not in listed  # the list path never runs the scalar one; its -2 reaches the helper through _norm
    assert set(listed["3"]) == {"axis=< -1", "axis=1"}
    assert "axis=list of many with negatives" in listed["9"]

    assert [value_class(v) for v in (None, 0, 7, -5, 0.0, float("nan"), (), [None], "float32", {})] == [
        "None", "0", "> 1", "< -1", "0.0", "nan", "tuple of 0", "list of 1 with None", "'float32'", "dict of 0"]
    # objects by type, with the dtype and rank they carry; numpy scalars as the numbers they are
    assert [value_class(v) for v in (np.zeros((2, 0), np.float32), np.int64(-1), np.float32(2.5))] == [
        "ndarray float32 rank 2", "-1", "> 0.0"]

    # a statement standing for deleted code also records the names that code used (a 4th item and on)
    class Node:
        kwargs = {"dim": 2}
    hits, arcs, values = {}, {}, {}
    sys.settrace(_line_tracer(frozenset([key]), hits, arcs, values, ((key, 4, 4, "x"),)))
    try:
        ns["Importer"]()._reduce(Node())
    finally:
        sys.settrace(None)
    assert {"axis=> 1", "x=Node"} <= set(values[key]["4"])


def test_a_deletion_point_carries_the_deleted_code_and_its_names(tmp_path):
    """onnxscript's unfold fix reverted: `if dimension < 0: dimension += rank` deleted, a blank line after it. The
    goal is the next statement; its code for the mutations is the deleted code too, its watched names those it used."""
    import subprocess
    from dlci.diff import GitRepo
    base = "def unfold(x, dimension, rank):\n    if rank:\n        if dimension < 0:\n" \
           "            dimension = dimension + rank\n\n        y = x.shape\n    return y\n"
    head = base.replace("        if dimension < 0:\n            dimension = dimension + rank\n", "")
    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)  # noqa: E731
    git("init", "-q", "-b", "main")
    (tmp_path / "conv.py").write_text(base)
    git("add", "."), git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    git("checkout", "-qb", "pr")
    (tmp_path / "conv.py").write_text(head)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "head")
    repo = GitRepo(tmp_path, "main", "pr")
    repo.last_diff = repo.diff()
    fg = G.from_diff(repo, ["conv.py"])[0]
    statement = next(g for g in fg.goals if g.kind == "statement")
    assert statement.line == 4 and head.splitlines()[3].strip() == "y = x.shape"
    assert fg.deleted_names == {4: ("dimension", "rank")} and "dimension < 0" in fg.deleted_code[4]


def test_distance_falls_with_the_control_flow_and_the_call_graph(tmp_path):
    path = tmp_path / "conv.py"
    path.write_text(CONVERTER)
    ns: dict = {}
    exec(compile(CONVERTER, str(path), "exec"), ns)
    fg = G.file_goals("conv.py", CONVERTER, {13})
    dist = D.Distances([fg], tmp_path, dispatch={("conv.py", "Importer._reduce"): {"aten::sum"}})
    goal = next(g for g in fg.goals if g.kind == "statement")  # the scalar-dim path

    class ListDims:
        kwargs = {"dim": [0]}
    lines, _ = _trace(ns["Importer"]()._reduce, ListDims())
    key = str(path.resolve())
    inside = dist.to_goal(goal, {key: set(lines[key])})
    assert 0 < inside < D.CALL_HOP  # the function ran; the else branch is a few edges away
    # a trace that only ran _norm/_helper (callees, not callers) is no nearer than a dispatch guess
    only_helper = {key: {2, 3, 4}}
    assert dist.to_goal(goal, only_helper) == D.INF
    assert dist.to_goal(goal, only_helper, {"aten::sum"}) >= D.DISPATCH
    assert dist.to_goal(goal, {key: set(lines[key]) | {13}}) == 0


@pytest.fixture(scope="module")
def opinfo():
    pytest.importorskip("torch")
    from dlci.sources import load
    return load("opinfo")


def _first(instances, op, pred=lambda i: True):
    return next(i for i in instances if i.op == op and i.call.get("kind") == "torch_fn" and pred(i))


def test_mutations_give_valid_instances_the_reference_accepts(opinfo):
    from dlci.models.references import reference
    from dlci.directed import mutations as M
    base = _first(opinfo, "aten::sum", lambda i: any(k == "dim" for k in i.call.get("kwargs", {}))
                  and isinstance(i.call["kwargs"]["dim"], (int, list)) and i.inputs[0].shape)
    made = {}
    for name in ("torch.negative_dim", "torch.size_1", "torch.rank_0", "torch.dtype_any", "torch.keywords",
                 "torch.defaults_explicit"):
        got = M.MUTATIONS[name].apply(base, limit=3)
        made[name] = got
        for m in got:
            assert m.id != base.id and m.origin.test.startswith(base.origin.test) and " [" in m.origin.test
            reference(m)  # runs eagerly
    assert made["torch.negative_dim"] and made["torch.dtype_any"] and made["torch.size_1"]
    neg = made["torch.negative_dim"][0].call["kwargs"]["dim"]
    assert (neg < 0) if isinstance(neg, int) else all(d < 0 for d in neg)
    # a mutant of a mutant: the chain is kept
    again = M.MUTATIONS["torch.dtype_any"].apply(made["torch.negative_dim"][0], limit=1)
    assert again and again[0].origin.test.count(" [") == 2


def test_a_mutant_whose_eager_call_does_not_come_back_is_invalid_and_the_checks_go_on(opinfo):
    """The mutants' eager checks run in a worker of dlci.exec: a call that hangs (or kills its process) costs that
    mutant, not the scan, and the next check gets a fresh worker."""
    from dlci.directed import mutations as M
    base = _first(opinfo, "aten::matmul", lambda i: len(i.inputs) == 2 and i.inputs[0].dtype == "float32"
                  and i.inputs[0].rank == 2 and i.inputs[1].rank == 2)
    rng = np.random.default_rng(0)
    # seconds of work on any CPU (460 GFLOP), against a limit the first small call of a fresh worker on a loaded
    # 2-core machine stays well within (0.3 s did not: the check after the respawn timed out in a CI run)
    big = [rng.standard_normal((6144, 6144), dtype=np.float32) for _ in range(2)]
    slow = M._mutant(base, "size", "6144 x 6144", inputs=[M.TensorSpec.of(a) for a in big],
                     arrays={f"in:{i}": a for i, a in enumerate(big)})
    checker = M._ReferenceChecker(timeout_s=1.5)
    try:
        assert checker.check(slow).startswith("the eager call"), "a call past its time is no valid mutant"
        assert checker.check(base) == "ok"
        with pytest.raises(ValueError, match="no finite output"):  # the verdict a mutation's build sees
            nan = M._mutant(base, "value", "nan", arrays={f"in:{i}": np.full(t.shape, np.nan, np.float32)
                                                           for i, t in enumerate(base.inputs)})
            M._checked_torch(nan)
    finally:
        checker.close()


def _onnx_case(op_type, x, ints, out_shape):
    from onnx import TensorProto, helper
    from dlci.models.onnx_io import instance_from_model
    node = helper.make_node(op_type, ["x", "v"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                                            helper.make_tensor_value_info("v", TensorProto.INT64, [len(ints)])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return instance_from_model(model, [x, np.array(ints, np.int64)], op=f"onnx::{op_type}")


@pytest.mark.parametrize("op_type, ints, out_shape", [("Reshape", [4, 3, 2], [4, 3, 2]), ("Tile", [2, 1, 3], [4, 3, 12]),
                                                     ("Expand", [5, 2, 3, 4], [5, 2, 3, 4])])
def test_an_onnx_integer_input_computed_in_the_graph_keeps_the_outputs(op_type, ints, out_shape):
    import onnxruntime as ort
    from dlci.directed import mutations as M
    from dlci.models.onnx_io import feed_names, load_onnx
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    base = _onnx_case(op_type, x, ints, out_shape)
    got = M.MUTATIONS["onnx.computed_input"].apply(base)
    assert len(got) == 1
    m = got[0]
    model = load_onnx(m.arrays)
    assert feed_names(model) == ["x"]  # the integer input is no longer one the converter can read off the model
    assert {"Shape", "Gather", "Concat"} <= {n.op_type for n in model.graph.node}
    assert "[computed: v = Concat of Shape(x)" in m.origin.test and m.id != base.id
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"x": x})[0]
    assert np.array_equal(want, m.expected_arrays()[0])
    # a value no dim of another input holds stays a Constant piece; with none at all there is nothing to compute
    assert not M.MUTATIONS["onnx.computed_input"].apply(_onnx_case("Reshape", x, [1, 24], [1, 24]))


def test_mutation_preference_reads_the_goals_code():
    from dlci.directed import mutations as M
    code = "if axis < 0:\n    axis += x.ndim"
    ranked = sorted(M.MUTATIONS.values(), key=lambda m: -M.preference(m, code))
    assert ranked[0].name in ("torch.negative_dim", "torch.rank_0", "onnx.rank")


@pytest.mark.slow
def test_a_scan_reaches_a_branch_no_migrated_instance_takes_and_finds_the_bug_there(tmp_path):
    """The bundled PR reads a keyword dim under the wrong name; OpInfo passes dim by position, so the operator's own
    tests never take that branch. The directed search names dim (torch.keywords), reaches it, carries that
    presentation to the other instances and finds the wrong values, new in the PR."""
    pytest.importorskip("tvm")
    import json
    import subprocess
    from dlci.sources import load
    # OpInfo harvested before the scan, as a runner's cache holds it: a cold harvest inside the scan's budget leaves
    # the search its floor share only, and the test is about the search
    load("opinfo")
    proc = subprocess.run([sys.executable, "-m", "dlci", "scan", "--sample", "tvm-log-softmax-keyword-dim",
                           "--sources", "opinfo", "--out", str(tmp_path / "out"), "--budget", "240",
                           "--fail-on", "never", "--no-repro-check"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "findings.json").read_text())
    search = doc["pr"]["directed"]["search"]
    assert search["reached_by_search"] >= 1 and "torch.keywords" in search["reaching_mutation"].values(), search
    new = [f for f in doc["findings"] if f["new_in_pr"] and f["operator"] == "aten::log_softmax"]
    assert any("[keywords: dim by name]" in f["origin"]["test"] for f in new), ([
        (f["operator"], f["new_in_pr"], f["origin"]["test"]) for f in doc["findings"]], search, proc.stderr[-3000:])


def test_an_argument_set_away_from_its_default_is_left_to_it():
    """TVM's FX max_pool2d converter removed: every OpInfo sample sets ceil_mode=True, which TVM 0.27 gets wrong on
    base too; the mutant without it is plain max_pool2d, which base runs: support removed is then visible."""
    from dlci.directed import mutations as M
    from tests.test_models_targets import torch_fn
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 6), dtype=np.float32)
    inst = torch_fn("torch.nn.functional.max_pool2d", [x], args=[{"$t": 0}],
                    kwargs={"kernel_size": 3, "stride": 2, "ceil_mode": True, "padding": 0, "return_indices": False})
    assert list(M._non_defaults(inst)) == ["ceil_mode"]  # stride/padding/return_indices equal theirs or have none
    m = M._without_kwarg(inst, "ceil_mode")
    assert "ceil_mode" not in m.call["kwargs"] and "ceil_mode" not in m.params and m.id != inst.id
    assert "[value: ceil_mode left to its default]" in m.origin.test and not m.expected_arrays()


def test_divergence_tells_status_outputs_and_graph_apart_and_fingerprints_ignore_names():
    from dlci.directed import divergence
    from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED, Outcome, digest
    import numpy as np
    same = digest([np.arange(6, dtype=np.float32)])
    other = digest([np.arange(6, dtype=np.float32) * 2])
    head = {"status": PASS, "digest": same, "model": "aaaa"}

    def base(status=PASS, d=same, model="aaaa"):
        return Outcome("i", "op", "t", status=status, digest=d, model_digest=model)
    assert divergence.compare(head, base()) is None
    assert divergence.compare(head, base(model="bbbb")) == "graph"
    assert divergence.compare(head, base(d=other, model="bbbb")) == "outputs"
    assert divergence.compare(head, base(status=UNSUPPORTED)) == "status"
    assert divergence.compare(head, base(status=INCONSISTENT)) == "status" and divergence.fixed(head, base(
        status=INCONSISTENT))
    assert not divergence.fixed({**head, "status": INCONSISTENT}, base())

    import onnx
    from onnx import helper, TensorProto
    from dlci.targets._common import onnx_fingerprint

    def model(names, op="Relu"):
        x = helper.make_tensor_value_info(names[0], TensorProto.FLOAT, [2])
        y = helper.make_tensor_value_info(names[2], TensorProto.FLOAT, [2])
        nodes = [helper.make_node(op, [names[0]], [names[1]], name=names[3]),
                 helper.make_node("Neg", [names[1]], [names[2]])]
        return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    a, b = model(["x", "t", "y", "n1"]), model(["input", "val_3", "out", "node_7"])
    assert onnx_fingerprint(a) == onnx_fingerprint(b)
    assert onnx_fingerprint(a) != onnx_fingerprint(model(["x", "t", "y", "n1"], op="Sigmoid"))


def test_the_nodes_two_revisions_emit_differently_are_named_and_a_new_kind_of_difference_is_told_apart():
    """aten::pow.Tensor_Scalar before and after onnxscript#2335: an int tensor ** 0.5 as Pow(int64, float) against
    Cast then Pow(float, float). The nodes that differ are named without value names, and the same difference at
    another shape is the same kind."""
    from onnx import TensorProto, helper
    from dlci.directed import divergence
    from dlci.outcome import PASS, Outcome
    from dlci.targets._common import onnx_nodes

    def pow_model(shape, cast: bool, names=("x", "c", "y", "t")):
        x = helper.make_tensor_value_info(names[0], TensorProto.INT64, shape)
        out_type = TensorProto.FLOAT if cast else TensorProto.INT64
        y = helper.make_tensor_value_info(names[2], out_type, shape)
        c = helper.make_node("Constant", [], [names[1]], value=helper.make_tensor("v", TensorProto.FLOAT, [], [0.5]))
        nodes = [c]
        if cast:
            nodes.append(helper.make_node("Cast", [names[0]], [names[3]], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Pow", [names[3] if cast else names[0], names[1]], [names[2]]))
        return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    head, base = onnx_nodes(pow_model([2, 3], cast=False)), onnx_nodes(pow_model([2, 3], cast=True))
    assert onnx_nodes(pow_model([2, 3], False, names=("input", "val_1", "out", "val_2"))) == head  # names aside
    assert "Pow(int64[2,3],float[])->int64[2,3]" in head and "Constant()->float[] {value=float[]=[0.5]}" in head

    def delta(shape):
        return divergence.node_delta({"status": PASS, "nodes": onnx_nodes(pow_model(shape, False))},
                                     Outcome("i", "op", "t", status=PASS,
                                             model_nodes=onnx_nodes(pow_model(shape, True))))
    only_head, only_base = delta([2, 3])
    assert only_head == ("Pow(int64[2,3],float[])->int64[2,3]",)
    assert sorted(only_base) == ["Cast(int64[2,3])->float[2,3] {to=1}", "Pow(float[2,3],float[])->float[2,3]"]
    assert divergence.delta_kind(delta([2, 3])) == divergence.delta_kind(delta([5]))  # another shape, same kind
    assert divergence.node_delta({"nodes": head}, Outcome("i", "op", "t", status=PASS, model_nodes=list(head))) == ((), ())


def test_relax_modules_are_described_call_by_call_without_variable_names():
    import torch
    from tvm.relax.frontend.torch import from_exported_program
    from dlci.directed import divergence
    from dlci.targets._common import tvm_nodes

    class Select(torch.nn.Module):
        def forward(self, x, idx):
            return torch.nn.functional.elu(x)[:, idx].sum(dim=1, keepdim=True)
    lines = tvm_nodes(from_exported_program(torch.export.export(Select(), (torch.randn(2, 3), torch.tensor([0, 2])))))
    assert 'R.take(%, %, axis=1, mode="fast") -> R.Tensor((2, 2), dtype="float32")' in lines
    assert 'R.sum(%, axis=[1], keepdims=True) -> R.Tensor((2, 1), dtype="float32")' in lines
    assert not any("lv" in line or "idx" in line for line in lines)
    assert divergence.delta_kind(((lines[-1],), ())) == divergence.delta_kind(
        (('R.sum(%, axis=[1], keepdims=True) -> R.Tensor((7, 1), dtype="float32")',), ()))


def test_a_zero_in_a_size_list_is_paired_with_an_input_emptied_elsewhere():
    """onnxscript#2346's class: ONNX Reshape without allowzero reads a 0 in the target shape as "keep the input's
    dim". torch's view(0, 3) of a (3, 0) tensor is empty; a 0 at the position where the input is empty would hide
    the difference, so the emptied dim is another one. Each mutant is one eager torch accepts."""
    from dlci.directed import mutations as M
    from tests.test_models_targets import torch_fn
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = torch_fn("torch.Tensor.view", [x], args=[{"$t": 0}, [4, 3]], kwargs={})
    made = M.MUTATIONS["torch.zero_in_size"].apply(view, limit=4)
    assert [(m.call["args"][1], m.inputs[0].shape) for m in made] == [([0, 3], [3, 0]), ([4, 0], [0, 4])]
    assert all(m.id != view.id and "[zero_in_size:" in m.origin.test for m in made)
    x = np.arange(24, dtype=np.float32).reshape(2, 12)
    unflatten = torch_fn("torch.unflatten", [x], args=[{"$t": 0}, 1, [3, 4]], kwargs={})
    # emptying dim 0 leaves dim 1 at 12, which [0, 4] cannot unflatten: eager torch refuses, no mutant
    assert [(m.call["args"][2], m.inputs[0].shape) for m in M.MUTATIONS["torch.zero_in_size"].apply(unflatten)] == [
        ([0, 4], [2, 0])]


def test_a_docstring_is_no_changed_statement_and_both_counts_agree():
    """A changed docstring is no goal of the directed search and no statement the coverage counts: one definition
    (dlci.diff.regions.python_statement_spans) serves both."""
    from dlci.directed.goals import file_goals
    from dlci.scan.coverage import changed_statement_spans
    text = 'def f(x):\n    """Now documented better."""\n    if x < 0:\n        return -x\n    return x\n'
    assert file_goals("m.py", text, {2}).goals == [] and changed_statement_spans(text, {2}) == set()
    goals = file_goals("m.py", text, {3, 4})
    statements = {g.span for g in goals.goals if g.kind == "statement"}
    assert statements == changed_statement_spans(text, {3, 4}) == {(3, 3), (4, 4)}


def test_with_nothing_on_head_to_reach_the_touched_operators_tests_are_varied_and_paired_with_base(tmp_path):
    """A PR that deletes an overload (torchlib's int ``floor_divide``) leaves no changed statement on head: every
    test of the touched operator stands where the change acts. The second phase asks the base revision for them and
    varies them, the mutation the deleted code's words ask for (``TInt``: another dtype) drawn, with int payloads
    before the others."""
    from dlci.campaign.state import Campaign
    from dlci.directed import mutations as M
    from dlci.directed.stream import DirectedStream
    from tests.test_models_targets import torch_fn
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(1, 5, (2, 3)).astype(np.float32) for _ in range(2))
    inst = torch_fn("torch.floor_divide", [a, b])
    other = torch_fn("torch.add", [a, b])
    campaign = Campaign({inst.id: inst, other.id: other}, {})
    for i in (inst, other):
        campaign.observed[(i.id, "torch.onnx")] = {"status": "pass"}
    deleted = "def aten_floor_divide_int(self: TInt, other: TInt) -> TInt:\n    return op.Div(self, other)"
    stream = DirectedStream(campaign, [], D.Distances([], tmp_path, {}), lambda i: {"torch.onnx"}, tmp_path,
                            lambda i: {i.op}, {}, pair=True, touched={"aten::floor_divide"}, changed_text=deleted,
                            removed={"aten::floor_divide"})
    stream.take_in([(other, "torch.onnx", {}, {})])  # traced or not: the touched operator's tests all count
    assert stream.anywhere and set(stream.reachers) == {inst.id}  # add is not the touched operator
    tests = []
    for t in stream:
        tests.append(t)
        if len(tests) >= 12:
            break
    assert tests[0].twin and tests[0].instance.id == inst.id  # the base revision is asked first
    mutants = [t.instance for t in tests if not t.twin]
    assert mutants and all(m.op == "aten::floor_divide" for m in mutants)
    dtyped = [m for m in mutants if "[dtype_any:" in m.origin.test]
    assert dtyped and "int" in dtyped[0].origin.test, [m.origin.test for m in mutants]
    # the payload order: with the changed code's words, int dtypes come before the rest; a function registered
    # for complex inputs asks for complex ones, though it takes an int too
    first = M.MUTATIONS["torch.dtype_any"].apply(inst, limit=1, rng=np.random.default_rng(1), prefer=deleted)
    assert "int" in first[0].origin.test, first[0].origin.test
    complex_fn = '@torch_op("aten::slice.Tensor", trace_only=True, complex=True)\ndef f(self: TTensor, dim: int = 0):'
    assert M.dtype_hints(complex_fn) == {"complex"} and M.dtype_hints(deleted) == {"int"}
    for seed in range(3):
        got = M.MUTATIONS["torch.dtype_any"].apply(other, limit=1, rng=np.random.default_rng(seed), prefer=complex_fn)
        assert "complex64" in got[0].origin.test, got[0].origin.test
    # a mutant head calls unsupported and base runs is the first its operator's support check asks base about
    from dlci.campaign.stages import Test
    from dlci.outcome import Outcome
    m = dtyped[0]
    campaign.unsupported[("torch.onnx", m.op)] = [Outcome(inst.id, m.op, "torch.onnx", "unsupported",
                                                          message="an older reason")]
    campaign.observed[(m.id, "torch.onnx")] = {"status": "unsupported"}
    stream.observe(Test(m, "torch.onnx"), Outcome(m.id, m.op, "torch.onnx", "unsupported", message="no int"),
                   False)
    stream.observe_twin(Test(m, "torch.onnx", twin=True), Outcome(m.id, m.op, "torch.onnx", "pass"))
    assert [o.instance_id for o in campaign.unsupported[("torch.onnx", m.op)]] == [m.id, inst.id]
    assert stream.support_on_base == {(m.id, "torch.onnx")}  # the support check asks the head again only
    # a test failing on head that base passes is one its finding's base re-runs take first (scan.attribution)
    campaign.observed[(inst.id, "torch.onnx")] = {"status": "crash", "signature": "s"}
    stream.observe_twin(Test(inst, "torch.onnx", twin=True), Outcome(inst.id, inst.op, "torch.onnx", "pass"))
    assert campaign.passed_on_base == {(inst.id, "torch.onnx")}


def test_the_second_phase_gives_each_operator_its_turn_however_many_tests_another_has(tmp_path):
    """Phase 2 draws the operator first, the one drawn least: ten diverging group_norm tests do not take the draws
    of the one unflatten test where the bug shows (onnxscript-reshape-allowzero: 24 size_0 mutants, none on
    unflatten)."""
    from dlci.campaign.state import Campaign
    from dlci.directed.stream import DirectedStream
    from tests.test_models_targets import torch_fn
    rng = np.random.default_rng(0)
    many = [torch_fn("torch.add", [rng.uniform(1, 5, (2, k)).astype(np.float32),
                                   rng.uniform(1, 5, (2, k)).astype(np.float32)]) for k in range(2, 12)]
    one = torch_fn("torch.flatten", [rng.uniform(1, 5, (2, 3, 4)).astype(np.float32)])
    campaign = Campaign({i.id: i for i in [*many, one]}, {})
    stream = DirectedStream(campaign, [], D.Distances([], tmp_path, {}), lambda i: {"torch.onnx"}, tmp_path,
                            lambda i: {i.op}, {}, touched={"aten::add", "aten::flatten"})
    entries = [(i, {"torch.onnx"}) for i in [*many, one]]
    drawn = [stream._by_operator(entries)[0].op for _ in range(8)]
    assert drawn.count("aten::flatten") == 4 and drawn.count("aten::add") == 4
    # in turn: at no point has one operator had two draws more than the other
    assert all(abs(drawn[:n].count("aten::add") - drawn[:n].count("aten::flatten")) <= 1 for n in range(9))


def test_an_attribute_the_revisions_graphs_differ_in_draws_the_mutations_that_make_it_matter(tmp_path):
    """Head's Reshape says allowzero=1 where base's says nothing: every input diverges in graph, none in values,
    until a size list holds a 0. The attribute is what the difference is about, so the mutations that read it
    (zero_in_size) are drawn more often, as if the diff had said it (onnxscript-reshape-allowzero: 21 graphs
    differed in allowzero and 24 size_0 mutants went elsewhere)."""
    from dlci.campaign.stages import Test
    from dlci.campaign.state import Campaign
    from dlci.directed import divergence
    from dlci.directed.stream import DirectedStream
    from dlci.outcome import Outcome
    from tests.test_models_targets import torch_fn
    x = np.random.default_rng(0).uniform(1, 5, (2, 6, 4)).astype(np.float32)
    inst = torch_fn("torch.unflatten", [x], args=[{"$t": 0}, 1, [2, 3]])
    head_line = "Reshape(float32[2,6,4],int64[4]=[2 2 3 4])->float32[2,2,3,4] {allowzero=1}"
    base_line = "Reshape(float32[2,6,4],int64[4]=[2 2 3 4])->float32[2,2,3,4]"
    assert divergence.delta_words(((head_line,), (base_line,))) == {"allowzero"}
    relax = ("R.nn.max_pool2d(%, pool_size=[2, 2], ceil_mode=True) -> R.Tensor((1, 1, 3, 3), dtype=\"float32\")",
             "R.nn.max_pool2d(%, pool_size=[2, 2], ceil_mode=False) -> R.Tensor((1, 1, 2, 2), dtype=\"float32\")")
    assert divergence.delta_words(((relax[0],), (relax[1], "Cast(float32[2])->int64[2] {to=7}"))) \
        == {"ceil_mode", "Cast"}

    def draws(graph_differs: bool) -> int:
        campaign = Campaign({inst.id: inst}, {})
        campaign.observed[(inst.id, "torch.onnx")] = {"status": "pass", "model": "h", "nodes": [head_line]}
        stream = DirectedStream(campaign, [], D.Distances([], tmp_path, {}), lambda i: {"torch.onnx"}, tmp_path,
                                lambda i: {i.op}, {}, pair=True, touched={"aten::unflatten"})
        stream.reachers[inst.id] = (inst, {"torch.onnx"})
        if graph_differs:
            base = Outcome(inst.id, inst.op, "torch.onnx", "pass")
            base.model_digest, base.model_nodes = "b", [base_line]
            stream.observe_twin(Test(inst, "torch.onnx", twin=True), base)
            assert stream.graph_words == {"allowzero"}
            assert stream.divergence_summary()["graph_words"] == ["allowzero"]
        n = 0
        for seed in range(40):
            stream.rng, stream.seen = np.random.default_rng(seed), set()
            made = stream._vary()
            n += bool(made) and "[zero_in_size:" in made[0].instance.origin.test
        return n

    without, with_words = draws(False), draws(True)
    assert with_words >= 2 * without + 4, (without, with_words)  # 14 of 40 against 4 here


def test_a_graph_difference_is_said_by_what_differs_not_cut_at_a_width():
    """Head and base nodes of one operator share most of their text (onnxscript-refactor-upsample-2d: two Resize
    lines alike for 150 characters, base's ending in nearest_mode='floor'): the report says the attribute, or both
    lines from where they part, and a node only one side has whole."""
    from dlci.directed import divergence
    from dlci.report import _directed_lines
    resize = "Resize(float16[2,3,4,4],-,-,int64[4]=[2 3 3 3])->float16[2,3,3,3] {coordinate_transformation_mode=" \
             "'pytorch_half_pixel' mode='cubic'"
    head, base = (resize + "}",), (resize + " nearest_mode='floor'}",)
    assert divergence.describe_delta(head, base) == ["Resize: nearest_mode head unset, base 'floor'"]
    reshape = "Reshape(float32[2,6,4],int64[4]=[2 2 3 4])->float32[2,2,3,4]"
    assert divergence.describe_delta((reshape + " {allowzero=1}",), (reshape,)) == \
        ["Reshape: allowzero head 1, base unset"]
    pool = "R.nn.max_pool2d(%, pool_size=[2, 2], ceil_mode={}) -> R.Tensor((1, 1, {n}, {n}), dtype=\"float32\")"
    said = divergence.describe_delta((pool.format("True", n=3),), (pool.format("False", n=2),
                                                                    "Cast(float32[2])->int64[2] {to=7}"))
    assert said[0] == "base only: Cast(float32[2])->int64[2] {to=7}"
    # more than an attribute differs (the output's shape): both lines from where they part, the common start elided
    assert said[1].startswith("R.nn.max_pool2d: head R.nn.max_pool2d(…") and "ceil_mode=True) -> R.Tensor((1, 1, 3, 3)" \
        in said[1] and "; base R.nn.max_pool2d(…" in said[1] and "ceil_mode=False) -> R.Tensor((1, 1, 2, 2)" in said[1]
    pr = {"directed": {"goals": 2, "reached": 2, "statements": 1, "statements_reached": 1,
                       "search": {"divergence": {"graph_changes": [
                           {"target": "torch.onnx", "inputs": 6, "head_only": list(head), "base_only": list(base),
                            "instance": "aten-interpolate-b38d4c49b3",
                            "differences": divergence.describe_delta(head, base)}]}}}}
    # another kind of difference that reads the same (other coordinate_transformation_mode on both sides): one line
    aligned = tuple(line.replace("pytorch_half_pixel", "align_corners") for line in head + base)
    pr["directed"]["search"]["divergence"]["graph_changes"].append(
        {"target": "torch.onnx", "inputs": 3, "head_only": [aligned[0]], "base_only": [aligned[1]],
         "instance": "aten-interpolate-3e4b6a8dd6", "differences": divergence.describe_delta(aligned[:1], aligned[1:])})
    lines = [line for line in _directed_lines(pr) if line.startswith("- ")]
    assert lines == ["- `torch.onnx`, 9 input(s), e.g. `aten-interpolate-b38d4c49b3`: "
                     "`Resize: nearest_mode head unset, base 'floor'`"]
