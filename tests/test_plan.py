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
