"""OPERA prioritization and APFD."""
import numpy as np

from dlci.instance import Instance, Origin, TensorSpec, features
from dlci.plan import apfd, balanced, coverage, prioritize


def inst(op, shape, alpha, dtype="float32"):
    x = np.zeros(shape, dtype)
    return Instance(op=op, framework="torch", call={"kind": "torch_fn", "fn": "f", "args": [{"$t": 0}]},
                    inputs=[TensorSpec.of(x)], params={"alpha": alpha}, origin=Origin("t", "t"),
                    arrays={"in:0": x})


def test_partitions_follow_opera():
    f = features(inst("aten::elu", (2, 3), -1))
    assert "alpha=int:-1" in f and "in0:float32×r2" in f
    assert "alpha=float:+(0,1)" in features(inst("aten::elu", (2,), 0.5))
    assert "in0:float32×r0" in features(inst("aten::elu", (), 7))
    assert "alpha=int:large" in features(inst("aten::elu", (), 7))


def test_diverse_instances_first_and_operators_interleaved():
    same = [inst("aten::a", (2, 3), 1.0) for _ in range(3)]
    for i, s in enumerate(same):
        s.params["k"] = i  # distinct ids
        s.id = s.compute_id()
    novel = inst("aten::a", (2, 3, 4, 5), -1, "int64")
    other = [inst("aten::b", (3,), 2) for _ in range(1)]
    order = prioritize(same + [novel] + other)
    ops = [i.op for i in order]
    # the second operator is reached before the first one is exhausted
    assert ops.index("aten::b") < 3
    # the novel instance of aten::a comes before its look-alikes' repeats
    a_order = [i for i in order if i.op == "aten::a"]
    assert novel in a_order[:2]


def test_touched_operators_come_first():
    insts = [inst("aten::a", (2,), 1.0), inst("aten::b", (2,), 1.0)]
    assert prioritize(insts, touched={"aten::b"})[0].op == "aten::b"


def test_apfd():
    faults = {"t1": {"f1"}, "t3": {"f2"}}
    assert apfd(["t1", "t3", "t2"], faults) > apfd(["t2", "t3", "t1"], faults)
    assert abs(apfd(["t1", "t3", "t2"], faults) - (1 - (1 + 2) / 6 + 1 / 6)) < 1e-9


def test_coverage_counts_partitions():
    cov = coverage([inst("aten::a", (2,), 1.0), inst("aten::a", (2, 2), 1.0)])
    assert cov["aten::a"] == len(features(inst("aten::a", (2,), 1.0)) | features(inst("aten::a", (2, 2), 1.0)))


def test_sources_take_turns():
    many = []
    for k in range(6):
        i = inst("aten::a", (2,), float(k))
        many.append(i)
    few = inst("onnx::Relu", (3,), 1.0)
    few.origin = Origin("onnx_node", "t")
    order = balanced(many + [few])
    assert order.index(few) <= 1  # not after every OpInfo instance
    assert balanced(many + [few], touched={"aten::a"})[0].op == "aten::a"


def test_operators_whose_own_converter_changed_go_before_those_a_changed_helper_reaches():
    from types import SimpleNamespace
    from dlci.profiles.base import Touch
    from dlci.scan import _direct_ops
    from dlci.scan.coverage import CoverageCache, edited_lines_first
    touches = [Touch("fmod", "aten", "self._fmod", "a.py", 1, "convert-map entry removed (base line)")] + [
        Touch(op, "aten", f"self._{op}", "b.py", 2, "helper BaseFXGraphImporter._binary changed (reached from x)")
        for op in ("elu", "celu", "selu")]
    first = _direct_ops(touches)
    assert "fmod" in first and "elu" not in first
    assert _direct_ops(touches[1:]) == frozenset()  # nothing to put first when every touch is indirect
    instances = [inst(f"aten::{op}", (k + 2,), 1.0) for k in range(6) for op in ("elu", "celu", "selu")]
    instances += [inst("aten::fmod", (k + 2,), 1.0) for k in range(3)]
    repo = SimpleNamespace(last_diff=SimpleNamespace(files=[]))
    order = edited_lines_first(repo, [], CoverageCache(), first_ops=first)(instances)
    assert [i.op for i in order[:3]] == ["aten::fmod"] * 3
    assert sorted(i.id for i in order) == sorted(i.id for i in instances)


def test_a_directly_touched_operator_no_hot_instance_stands_for_runs_among_the_hot_ones():
    """A PR edits a helper conv2d and add run, and bucketize's own registration: with the coverage cache warm, the
    hot instances (known to run the edited lines) come first; bucketize's first two come one after each of the first
    two hot ones, not after all of them (a short budget ran 51-94 hot tests and never reached bucketize)."""
    from dlci.scan.coverage import COLD_DIRECT_EARLY, hot_first
    hot_ops = [inst(f"aten::{op}", (k + 2,), 1.0) for k in range(20) for op in ("conv2d", "add")]
    cold = [inst("aten::bucketize", (k + 2,), 1.0) for k in range(5)]
    other = [inst("aten::sub", (k + 2,), 1.0) for k in range(3)]
    hot = {i.id for i in hot_ops}
    order = hot_first(hot_ops + cold + other, hot, first_ops=frozenset({"bucketize", "add"}))
    assert sorted(i.id for i in order) == sorted(i.id for i in hot_ops + cold + other)
    ops = [i.op for i in order]
    assert ops[1] == ops[3] == "aten::bucketize" and ops.count("aten::bucketize") == 5 and COLD_DIRECT_EARLY == 2
    assert {i.id for i in order[:2 * COLD_DIRECT_EARLY]} - {i.id for i in cold} <= hot
    # then the rest of the hot ones, then the rest of bucketize's, then what only a helper reaches
    assert all(i.id in hot for i in order[4:len(hot_ops) + 2])
    assert ops[len(hot_ops) + 2:] == ["aten::bucketize"] * 3 + ["aten::sub"] * 3
    # add is directly touched too, but its hot instances stand for it: nothing of it is brought up
    warm = hot_first(hot_ops + cold, hot, first_ops=frozenset({"add"}))
    assert [i.op for i in warm][:len(hot_ops)] == [i.op for i in hot_first(hot_ops, hot)]
