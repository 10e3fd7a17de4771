"""Batched tests: members packed into one ONNX model, converted and compiled once by a real TVM, reported exactly
as each member alone would be (group failures bisected, non-passing members re-run alone)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("tvm")
onnxruntime = pytest.importorskip("onnxruntime")

from dlci import models, sources  # noqa: E402
from dlci.models.pack import onnx_pack_key, pack_onnx  # noqa: E402
from dlci.models.references import reference  # noqa: E402
from dlci.outcome import CRASH, INVALID, PASS, UNSUPPORTED  # noqa: E402
from dlci.targets import get  # noqa: E402
from dlci.testcase import execute  # noqa: E402
from dlci.testcase.batch import execute_batch  # noqa: E402

TARGET = "tvm.from_onnx"


@pytest.fixture(scope="module")
def node_instances():
    insts = sources.load("onnx_node", limit_per_op=1)
    by_op = {i.op: i for i in insts}
    # three that share opset 22 and pass alone, one TVM does not support (unsupported), and a crash on this TVM
    # (BatchNormalization in training mode), each of another opset or the same
    picked = [by_op[o] for o in ("onnx::Relu", "onnx::Add", "onnx::Sigmoid", "onnx::Abs", "onnx::Neg", "onnx::Exp")
              if o in by_op]
    assert len(picked) >= 4
    return picked, insts


def test_a_packed_model_computes_every_member(node_instances):
    picked, _ = node_instances
    members = [models.build(i, "onnx") for i in picked]
    keyed = [(i, m) for i, m in zip(picked, members) if onnx_pack_key(m) == onnx_pack_key(members[0])]
    assert len(keyed) >= 2
    packed, n_in, n_out = pack_onnx([m for _, m in keyed])
    sess = onnxruntime.InferenceSession(packed.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = dict(zip([x.name for x in sess.get_inputs()], [a for i, _ in keyed for a in i.input_arrays()]))
    outs = sess.run(None, feed)
    assert len(outs) == sum(n_out) and n_in == [len(i.input_arrays()) for i, _ in keyed]
    pos = 0
    for (inst, m), n in zip(keyed, n_out):
        alone = onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        want = alone.run(None, dict(zip([x.name for x in alone.get_inputs()], inst.input_arrays())))
        for got, exp in zip(outs[pos:pos + n], want):
            np.testing.assert_array_equal(got, exp)
        pos += n


def test_a_batch_reports_what_each_test_alone_reports(node_instances):
    _, insts = node_instances
    assert get(TARGET).batch_size > 1
    # a varied slice: passes, unsupported operators, crashes and inconsistencies of this TVM, several opsets
    chosen = insts[::6][:24]
    batched = execute_batch(chosen, TARGET)
    alone = [execute(i, TARGET) for i in chosen]
    assert [o.instance_id for o in batched] == [i.id for i in chosen]
    assert [(o.status, o.stage, o.symptom) for o in batched] == [(o.status, o.stage, o.symptom) for o in alone]
    shared = [o for o in batched if o.batch > 1]
    assert shared and all(o.status == PASS for o in shared)  # only passes come from a packed model
    assert {o.status for o in alone} - {PASS}  # the slice has failures too: bisection ran


def test_models_that_cannot_share_a_header_run_alone(node_instances):
    picked, _ = node_instances
    m = models.build(picked[0], "onnx")
    other = type(m)()
    other.CopyFrom(m)
    other.opset_import[0].version = m.opset_import[0].version - 1
    assert onnx_pack_key(other) != onnx_pack_key(m)
    other.metadata_props.add(key=models.KEEP_PARAMS_KEY, value="true")
    assert onnx_pack_key(other) is None


@pytest.mark.slow
def test_a_batched_campaign_reports_what_an_unbatched_one_does(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    ops = "Abs,Relu,Add,Sigmoid,Neg,Exp,Floor,Ceil,NonMaxSuppression,ReduceL2"
    docs, rows = {}, {}
    for mode in ("batch", "no-batch"):
        out = tmp_path / mode
        args = [sys.executable, "-m", "dlci", "test", "--sources", "onnx_node", "--targets", TARGET, "--ops", ops,
                "--budget", "60", "--no-reduce", "--out", str(out)] + (["--no-batch"] if mode == "no-batch" else [])
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=root)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        docs[mode] = json.loads((out / "findings.json").read_text())
        rows[mode] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    first = {m: {r["instance_id"]: r["status"] for r in rows[m] if not r["confirming"]} for m in rows}
    assert first["batch"] == first["no-batch"]  # every test ran, with the same status
    assert any(r["batch"] > 1 for r in rows["batch"])  # and some shared a packed model
    assert all(r["batch"] == 1 for r in rows["no-batch"])
    sigs = {m: sorted(f["signature"] for f in docs[m]["findings"]) for m in docs}
    assert sigs["batch"] == sigs["no-batch"] and sigs["batch"]  # NonMaxSuppression: a real TVM inconsistency


@pytest.fixture(scope="module")
def opinfo_instances():
    torch = pytest.importorskip("torch")  # noqa: F841
    insts = sources.load("opinfo", ops=["aten::abs", "aten::add", "aten::max_pool2d", "aten::conv2d",
                                        "aten::interpolate", "aten::cumsum", "aten::sort", "aten::erfinv"],
                         limit_per_op=2)
    assert len({i.op for i in insts}) >= 6
    return insts


@pytest.mark.parametrize("form", ["exported_program", "onnx", "torch_module"])
def test_packed_torch_members_compute_what_each_member_computes(opinfo_instances, form):
    import torch
    from dlci.models.pack import PACKERS
    picked = [i for i in opinfo_instances if i.op in ("aten::abs", "aten::add", "aten::cumsum")][:6]
    packer = PACKERS[form]
    assert {packer.member_form(i) for i in picked} == {"torch_module"}
    mods = [models.build(i, "torch_module") for i in picked]
    n_out = [len(reference(i)[0]) for i in picked]
    packed, n_in, got_n_out = packer.pack(picked, mods, n_out)
    assert n_in == [len(i.input_arrays()) for i in picked] and got_n_out == n_out
    args = [a for i in picked for a in i.input_arrays()]
    if form == "onnx":
        sess = onnxruntime.InferenceSession(packed.SerializeToString(), providers=["CPUExecutionProvider"])
        outs = sess.run(None, dict(zip([x.name for x in sess.get_inputs()], args)))
    else:
        module = packed.module() if form == "exported_program" else packed
        outs = [o.numpy() for o in module(*[models.np_to_torch(a) for a in args])]
    assert len(outs) == sum(n_out)
    pos = 0
    for inst, n in zip(picked, n_out):
        want = reference(inst)[0]
        for got, exp in zip(outs[pos:pos + n], want):
            np.testing.assert_allclose(got, exp, rtol=1e-6, atol=1e-6)
        pos += n


def test_a_member_exported_with_dynamic_dims_runs_alone(opinfo_instances):
    from dlci.models.pack import PACKERS
    inst = opinfo_instances[0]
    dynamic = dataclasses.replace(inst, call={**inst.call, "dynamic": "batch"})
    for form in ("exported_program", "onnx", "torch_module"):
        assert PACKERS[form].key(inst, None) is not None
        assert PACKERS[form].key(dynamic, None) is None


# the packers: exported_program, torch -> onnx (with the exporter's reference from the packed model), torch_module
# (OpenVINO's unsupported-operator list), torch.compile (a few: each alone compiles for seconds)
@pytest.mark.parametrize("target,count", [("tvm.from_exported_program", 16), ("tvm.from_onnx", 16),
                                          ("openvino.pytorch", 16), ("torch.compile", 5)])
@pytest.mark.slow
def test_a_batch_of_torch_tests_reports_what_each_test_alone_reports(opinfo_instances, target, count):
    if target.startswith("openvino"):
        pytest.importorskip("openvino")
    assert get(target).batch_size > 1
    chosen = opinfo_instances[::max(1, len(opinfo_instances) // count)][:count]
    batched = execute_batch(chosen, target)
    models.clear_cache()
    alone = [execute(i, target) for i in chosen]
    assert [(o.status, o.stage, o.symptom) for o in batched] == [(o.status, o.stage, o.symptom) for o in alone]
    assert any(o.batch > 1 for o in batched)
    # a packed model gives passes, unsupported where the target's message lists the member's operator, and invalid
    # where the member's own nodes failed the packed export
    assert all(o.status in (PASS, UNSUPPORTED) or (o.status, o.stage) == (INVALID, "model")
               for o in batched if o.batch > 1)


def test_members_whose_own_code_or_nodes_fail_the_packed_export_are_invalid_without_exports_of_their_own(
        monkeypatch):
    """aten::corrcoef's own code fails torch.export (data-dependent output: the exporter's first step) and
    aten::cdist has no ONNX function in torch.onnx's registry (its last step): exported packed with others, the
    exporter names each member (its frame, its graph node). Their tests are invalid as they are alone (same stage
    and symptom) and neither is exported again alone; the others pass from the group exported without them."""
    pytest.importorskip("torch")
    monkeypatch.setenv("DLCI_FORM_STORE", "off")
    bad = ("aten::corrcoef", "aten::cdist")
    insts = sources.load("opinfo", ops=["aten::abs", "aten::add", *bad, "aten::neg"], limit_per_op=1)
    assert len(insts) == 5
    exported = []
    real = models.export_onnx

    def counted(module, tensors):
        exported.append(len(getattr(module, "members", [module])))
        return real(module, tensors)
    monkeypatch.setattr(models, "export_onnx", counted)
    models.clear_cache()
    batched = {o.op: o for o in execute_batch(insts, TARGET)}
    assert all(batched[op].status == PASS and batched[op].batch == 3 for op in batched if op not in bad)
    assert exported == [5, 4, 3]  # one failure at a time (the exporter stops at the first), none alone
    for op in bad:
        assert (batched[op].status, batched[op].stage) == (INVALID, "model") and batched[op].batch > 1
        models.clear_cache()
        alone = execute(next(i for i in insts if i.op == op), TARGET)
        assert (alone.status, alone.stage, alone.symptom) == (INVALID, "model", batched[op].symptom)


def test_a_failed_group_takes_out_the_members_its_message_names():
    from dlci.testcase.batch import _names_operator
    msg = "Unsupported function types ['erfinv.default', 'special_bessel_j0']"
    assert _names_operator(msg, "aten::erfinv") and _names_operator(msg, "aten::special_bessel_j0")
    assert not _names_operator(msg, "aten::erf") and not _names_operator(msg, "aten::abs")
    assert get("tvm.from_exported_program").unsupported_operators(msg) == {"erfinv", "special_bessel_j0"}
    assert get("tvm.from_exported_program").unsupported_operators("Unsupported function types ['add.Scalar']") \
        == set()  # another overload than the default: the member runs alone
    ov = "-- No conversion rule found for operations: aten::histc, aten::special_bessel_j0\n-- aten::cross with"
    assert get("openvino.pytorch").unsupported_operators(ov) == {"histc", "special_bessel_j0"}


def test_a_member_holding_a_node_the_target_lists_as_unsupported_is_taken_out_by_its_graph(monkeypatch):
    """TVM lists the functions aten::lu_solve decomposes into ('linalg_lu_solve.default'), which no operator name
    says: the packed program's own nodes say whose they are, so that member is unsupported from the group (as it is
    alone) and the others pass from the group, without bisecting it by halves. A converter raising on one member's
    node (conv_transpose3d: "Unsupported transposed convolution dimensionality") takes that member out to run
    alone, and its nodes are stood in for too: the others run in the program exported once."""
    pytest.importorskip("torch")
    target = "tvm.from_exported_program"
    ops = ["aten::abs", "aten::add", "aten::lu_solve", "aten::neg", "aten::conv_transpose3d", "aten::relu"]
    insts = sources.load("opinfo", ops=ops, limit_per_op=1)
    assert len(insts) == len(ops)
    exports = _packed_exports(monkeypatch)
    models.clear_cache()
    batched = {o.op: o for o in execute_batch(insts, target)}
    assert len(exports) == 1  # before: again for the five others, again for the four after conv_transpose3d
    models.clear_cache()
    alone = {i.op: execute(i, target) for i in insts}
    assert {op: (o.status, o.stage, o.symptom) for op, o in batched.items()} \
        == {op: (o.status, o.stage, o.symptom) for op, o in alone.items()}
    assert batched["aten::lu_solve"].status == UNSUPPORTED and batched["aten::lu_solve"].batch == 6
    assert batched["aten::conv_transpose3d"].status != PASS and batched["aten::conv_transpose3d"].batch == 1
    assert all(batched[op].status == PASS and batched[op].batch == 6 for op in ("aten::abs", "aten::add",
                                                                              "aten::neg", "aten::relu"))


def test_the_others_run_in_the_same_packed_program_with_the_unsupported_node_stood_in(monkeypatch):
    """After the member holding a node TVM cannot convert is taken out (aten::lu_solve's linalg_lu_solve), the
    others run in the program already exported, that node converted to zeros of its shape: no second export, and
    each member reported as alone. Members share no node, so the stand-in reaches no other member's output."""
    pytest.importorskip("torch")
    target = "tvm.from_exported_program"
    ops = ["aten::abs", "aten::add", "aten::lu_solve", "aten::neg", "aten::relu"]
    insts = sources.load("opinfo", ops=ops, limit_per_op=1)
    assert len(insts) == len(ops)
    exports = _packed_exports(monkeypatch)
    models.clear_cache()
    batched = {o.op: o for o in execute_batch(insts, target)}
    assert len(exports) == 1  # before: a second export of the four others
    models.clear_cache()
    alone = {i.op: execute(i, target) for i in insts}
    assert {op: (o.status, o.stage, o.symptom) for op, o in batched.items()} \
        == {op: (o.status, o.stage, o.symptom) for op, o in alone.items()}
    assert batched["aten::lu_solve"].status == UNSUPPORTED and batched["aten::lu_solve"].batch == 5
    assert all(batched[op].status == PASS and batched[op].batch == 5 for op in ("aten::abs", "aten::add",
                                                                              "aten::neg", "aten::relu"))
    # the stand-in is zeros of the node's shape: a graph made of it alone converts and runs
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    class Erfinv(torch.nn.Module):
        def forward(self, x):
            return torch.erfinv(x) + 1

    ep = torch.export.export(Erfinv(), (torch.zeros(3, 2),))
    with pytest.raises(Exception, match="Unsupported function types"):
        from_exported_program(ep)
    stood = get(target).standing_in({"erfinv.default"})
    x = np.full((3, 2), 0.5, np.float32)
    out = stood.run(stood.compile(stood.convert(ep, [x])), [x])
    assert np.array_equal(out[0], np.ones((3, 2), np.float32))
    # one node of a function stood in (a member whose node crashed the converter), its other nodes as TVM converts
    class TwoRelus(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x) + 1, torch.relu(y) * 2

    ep = torch.export.export(TwoRelus(), (torch.zeros(3, 2), torch.zeros(3, 2)))
    relus = [n for n in ep.graph.nodes if n.op == "call_function" and n.target.__name__ == "relu.default"]
    assert len(relus) == 2
    stood = get(target).standing_in(set(), frozenset({("relu.default", relus[0].name)}))
    y = np.array([[-1, 2], [3, -4], [5, 6]], np.float32)
    out = stood.run(stood.compile(stood.convert(ep, [x, y])), [x, y])
    assert np.array_equal(out[0], np.ones((3, 2), np.float32)) and np.array_equal(out[1], np.maximum(y, 0) * 2)


def test_a_group_failing_at_compile_with_no_member_named_is_halved_inside_the_program_it_packed(monkeypatch):
    """aten::isclose on integers fails TVM's compile (a float check in a TIR pass) with a message that names no
    operator and no graph node: the group is halved in the program already exported and decomposed, the nodes
    of the members outside a half stood in, instead of each half exported again. Each member reports what it
    reports alone; the one that fails ran alone."""
    pytest.importorskip("torch")
    from dlci.testcase import batch
    target = "tvm.from_exported_program"
    others = sources.load("opinfo", ops=["aten::abs", "aten::add", "aten::neg", "aten::relu"], limit_per_op=1)
    models.clear_cache()
    iscloses = [(i, execute(i, target)) for i in sources.load("opinfo", ops=["aten::isclose"], limit_per_op=12)]
    failing = next(i for i, o in iscloses if (o.status, o.stage) == (CRASH, "compile"))
    passing = next(i for i, o in iscloses if o.status == PASS)
    insts = [others[0], others[1], failing, others[2], passing, others[3]]
    monkeypatch.setattr(batch, "_FAILED_ALONE", set())  # isclose has not failed alone in this worker yet
    exports = _packed_exports(monkeypatch)
    models.clear_cache()
    batched = {o.instance_id: o for o in execute_batch(insts, target)}
    assert len(exports) == 1  # before: each half exported again, down to the failing member
    models.clear_cache()
    alone = {i.id: execute(i, target) for i in insts}
    assert {k: (o.status, o.stage, o.symptom) for k, o in batched.items()} \
        == {k: (o.status, o.stage, o.symptom) for k, o in alone.items()}
    assert batched[failing.id].status == CRASH and batched[failing.id].batch == 1
    assert all(batched[i.id].status == PASS and batched[i.id].batch == 6 for i in insts if i is not failing)


def test_a_members_nodes_include_the_constants_only_it_uses():
    """What stands in for a member: its calls on its own inputs, and the constants made in the graph that only
    its calls read (torch.ones here); a call reading two members' inputs is neither's."""
    torch = pytest.importorskip("torch")
    from dlci.models.pack import member_nodes, packed_module

    class Shifted(torch.nn.Module):
        def forward(self, x):
            return x + torch.ones(3) * 2

    class Negated(torch.nn.Module):
        def forward(self, x):
            return -x

    module = packed_module([Shifted(), Negated()], [1, 1])
    graph = torch.export.export(module, (torch.zeros(3), torch.zeros(3))).run_decompositions().graph
    first, second = member_nodes(graph, [1, 1], {0}), member_nodes(graph, [1, 1], {1})
    functions = lambda nodes: sorted(f.split(".")[0] for f, _ in nodes)  # noqa: E731
    assert functions(first) == ["add", "full", "mul"] and functions(second) == ["neg"]
    assert member_nodes(graph, [1, 1], {0, 1}) == first | second


def test_owners_found_in_one_pass_agree_with_each_nodes_own_walk():
    """nodes_by_member finds every node's owner in one pass over the graph; it agrees with the walk over each
    node's ancestors (_node_member) on members with parameters (Linear), several inputs and a shared-shape
    output."""
    torch = pytest.importorskip("torch")
    from dlci.models.pack import _node_member, nodes_by_member, packed_module

    class Two(torch.nn.Module):
        def forward(self, a, b):
            return torch.where(a > b, a - b, b * 3)

    members = [torch.nn.Linear(4, 2), Two(), torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())]
    n_in = [1, 2, 1]
    module = packed_module(members, n_in)
    args = tuple(torch.randn(2, 4) for _ in range(sum(n_in)))
    graph = torch.export.export(module, args).run_decompositions().graph
    by_member = nodes_by_member(graph, n_in)
    walked: dict = {}
    for node in graph.nodes:
        if node.op == "call_function" and _node_member(node, n_in) is not None:
            walked.setdefault(_node_member(node, n_in), set()).add((node.target.__name__, node.name))
    assert set(by_member) == {0, 1, 2} and all(len(nodes) >= 2 for nodes in by_member.values())
    assert by_member == {k: frozenset(v) for k, v in walked.items()}  # no graph-made constants here


def test_members_holding_nodes_tvm_lists_are_unsupported_from_the_group_with_effect_tokens_no_ones(monkeypatch):
    """A group whose every member holds a node TVM lists as unsupported is unsupported from its one conversion,
    as each is alone, without halving. An effect token (torch.linalg.inv's error check after decomposition) is
    threaded from one member's call to the next: it makes neither member's nodes the other's, so the members that
    bring one are unsupported from the group (TVM takes no token input) and the others are packed once more, not
    halved down to singles. torch.empty_strided's whole graph reads no input: that member is judged alone."""
    torch = pytest.importorskip("torch")
    from dlci.testcase import batch
    from dlci.models.pack import nodes_by_member, packed_module

    class Inverse(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.inv(x)

    module = packed_module([Inverse(), Inverse()], [1, 1])
    graph = torch.export.export(module, (torch.eye(3), torch.eye(3))).run_decompositions().graph
    by_member = nodes_by_member(graph, [1, 1])
    effects = {k: {name for f, name in nodes if f == "with_effects"} for k, nodes in by_member.items()}
    assert len(effects[0]) == len(effects[1]) == 1 and effects[0] != effects[1]

    target = "tvm.from_exported_program"
    monkeypatch.setattr(batch, "_FAILED_ALONE", set())
    exports = _packed_exports(monkeypatch)
    for ops, unsupported, packed in ((["aten::fft_rfft", "aten::special_i1", "aten::fft_ifft"], 3, 1),
                                     (["aten::abs", "aten::linalg_inv", "aten::neg", "aten::linalg_solve"], 2, 2),
                                     (["aten::abs", "aten::empty_strided", "aten::neg", "aten::relu"], 0, 2)):
        insts = sources.load("opinfo", ops=ops, limit_per_op=1)
        assert len(insts) == len(ops)
        exports.clear()
        models.clear_cache()
        batched = {o.op: o for o in execute_batch(insts, target)}
        assert len(exports) == packed
        models.clear_cache()
        alone = {i.op: execute(i, target) for i in insts}
        assert {op: (o.status, o.stage, o.symptom) for op, o in batched.items()} \
            == {op: (o.status, o.stage, o.symptom) for op, o in alone.items()}
        assert sum(o.status == UNSUPPORTED and o.batch == len(ops) for o in batched.values()) == unsupported
        assert all(o.status == PASS for o in batched.values() if o.status != UNSUPPORTED)
    assert batched["aten::empty_strided"].status == UNSUPPORTED and batched["aten::empty_strided"].batch in (None, 1)


def test_a_member_whose_output_reads_no_input_is_judged_alone():
    """torch.fill of an empty tensor exports to ONNX as an initializer returned as it is. Alone, that constant is
    the model's whole result, and TVM fails to compile it ("Invalid DLTensor file format"); as one element of a
    packed model's tuple it compiled. Such a member (an output that reads no input, or is an input as it came) is
    judged alone, so the batch reports the crash that the test alone reports."""
    torch = pytest.importorskip("torch")
    from onnx import TensorProto, helper, numpy_helper

    from dlci.models.pack import lone_members, packed_module
    graph = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["a"]), helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(
            np.ones(2, np.float32)))], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("x", "y", "z")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a", "k", "y", "c")],
        [numpy_helper.from_array(np.zeros(2, np.float32), "k")])
    assert lone_members(helper.make_model(graph), [1, 1, 1, 1]) == {1, 2, 3}
    assert lone_members(helper.make_model(graph), [2, 2]) == {0, 1}

    class Made(torch.nn.Module):
        def forward(self, x):
            return torch.full((2,), 3.0)

    class Same(torch.nn.Module):
        def forward(self, x):
            return x

    ep = torch.export.export(packed_module([torch.nn.ReLU(), Made(), Same(), torch.nn.Linear(2, 2)], [1, 1, 1, 1]),
                             tuple(torch.zeros(2) for _ in range(4)))
    assert lone_members(ep, [1, 1, 1, 1]) == {1, 2}

    target = "tvm.from_onnx"
    fills = [i for i in sources.load("opinfo", ops=["aten::fill"], limit_per_op=40)
             if any(0 in a.shape for a in i.input_arrays())]
    assert fills, "an OpInfo sample of aten::fill on an empty tensor"
    insts = [*sources.load("opinfo", ops=["aten::abs", "aten::neg"], limit_per_op=1), fills[0]]
    models.clear_cache()
    batched = {o.instance_id: o for o in execute_batch(insts, target)}
    models.clear_cache()
    alone = {i.id: execute(i, target) for i in insts}
    assert {k: (o.status, o.stage, o.symptom) for k, o in batched.items()} \
        == {k: (o.status, o.stage, o.symptom) for k, o in alone.items()}
    assert batched[fills[0].id].batch in (None, 1)


def _packed_exports(monkeypatch) -> list:
    """A list that gets an item for each packed exported program made from now on in this test."""
    from dlci.models import pack
    exports: list = []
    real = pack.pack_exported_program
    monkeypatch.setitem(pack.PACKERS, "exported_program", dataclasses.replace(
        pack.PACKERS["exported_program"], pack=lambda *a: exports.append(1) or real(*a)))
    return exports
