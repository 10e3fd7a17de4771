"""Standalone reproducers judge exactly as the campaign did, and stay short (real frameworks, no mocks).

Each case runs dlci's own test (dlci.testcase.execute) in-process, renders the finding's reproducer as the campaign
does and runs it where dlci cannot be imported: it must exit 1 exactly when dlci's oracle said inconsistent. The cases
are chosen so that a reproducer judging any other way (another reference, np.allclose, no fp64 arbitration)
disagrees with the campaign.
"""
from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest
from onnx import TensorProto, helper

from dlci.findings import Finding, signature
from dlci.findings.repro import render, render_repro
from dlci.findings.test_style import expectation, read_expectation, render_test
from dlci.instance import Instance, Origin, TensorSpec
from dlci.oracles import compare
from dlci.outcome import CRASH, INCONSISTENT, PASS
from dlci.targets import get
from dlci.testcase import execute
from tests.standalone import run_without_dlci

MEDIAN_LINES = 40  # the bound on a single-operator reproducer


def elu(alpha: float) -> Instance:
    """nn.ELU on negative inputs only: TVM's FX importer ignores alpha there, so its output is off by a relative
    (alpha - 1) / alpha everywhere, which the tests tune against the oracle's tolerance and fp64 arbitration."""
    x = -np.linspace(0.5, 3.0, 12, dtype=np.float32).reshape(3, 4)
    return Instance(op="nn::ELU", framework="torch",
                    call={"kind": "torch_module", "cls": "torch.nn.ELU", "args": [], "kwargs": {"alpha": alpha},
                          "forward_args": [{"$t": 0}], "forward_kwargs": {}},
                    inputs=[TensorSpec.of(x)], params={"alpha": alpha}, origin=Origin("test", "hand"),
                    arrays={"in:0": x})


def avg_pool_divisor() -> Instance:
    """avg_pool2d(divisor_override=2): the torch.onnx exporter drops the divisor, so eager PyTorch and the exported
    model disagree; TVM's ONNX importer computes what the exported model says."""
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    return Instance(op="aten::avg_pool2d", framework="torch",
                    call={"kind": "torch_fn", "fn": "torch.nn.functional.avg_pool2d",
                          "args": [{"$t": 0}, 3, 1, 1, True, False, 2], "kwargs": {}},
                    inputs=[TensorSpec.of(x)], params={}, origin=Origin("test", "hand"), arrays={"in:0": x})


def max_unpool() -> Instance:
    """ONNX MaxUnpool with output_shape (the ONNX test's own case): TVM's ONNX importer raises AttributeError."""
    node = helper.make_node("MaxUnpool", ["xT", "xI", "output_shape"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph(
        [node], "test_maxunpool",
        [helper.make_tensor_value_info("xT", TensorProto.FLOAT, [1, 1, 2, 2]),
         helper.make_tensor_value_info("xI", TensorProto.INT64, [1, 1, 2, 2]),
         helper.make_tensor_value_info("output_shape", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 5, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)
    xs = [np.array([5, 6, 7, 8], np.float32).reshape(1, 1, 2, 2), np.array([5, 7, 13, 15]).reshape(1, 1, 2, 2),
          np.array([1, 1, 5, 5])]
    return Instance(op="onnx::MaxUnpool", framework="onnx", call={"kind": "onnx_model"},
                    inputs=[TensorSpec.of(x) for x in xs], params={}, origin=Origin("test", "hand"),
                    arrays={"model": np.frombuffer(model.SerializeToString(), np.uint8),
                            **{f"in:{i}": x for i, x in enumerate(xs)}})


def finding_of(inst: Instance, target: str, fid: str = "F001", outcome=None) -> Finding:
    """The finding dlci.campaign.stages.collect builds from this test's outcome; a passing test gives the finding
    an earlier run of the same instance reported (a value mismatch of output 0)."""
    o = outcome or execute(inst, target)
    t = get(target)
    failed = o.status in (CRASH, INCONSISTENT)
    return Finding(id=fid, oracle=t.oracle_of(o) if failed else "inconsistency", operator=inst.op, target=target,
                   target_version=t.version(), symptom=o.symptom if failed else "value mismatch",
                   stage=o.stage or "compare", signature=signature(o, t.modules), message=o.message[:2000],
                   instance_id=inst.id, origin=inst.origin.__dict__,
                   distance=o.distance if failed else {"output": 0}, traceback=o.traceback[-4000:],
                   instances=[inst.id], operators=[inst.op], confirmed=True)


def run_alone(path):
    proc = run_without_dlci(path, path.parent)
    return proc.returncode, proc.stdout, proc.stderr


# (instance, target, what dlci's oracle must say): the verdicts hinge on the reference and on fp64 arbitration
JUDGED = {
    # off by 8e-4 relative: beyond the fp64 floor (1e-4), inside np.allclose(rtol=1e-3) (ONNX-style tolerances)
    "beyond_arbitration": (lambda: elu(1.0008), "tvm.from_fx", INCONSISTENT),
    # off by 2e-5 relative: beyond float32's rtol and np.allclose's default, inside fp64 arbitration
    "within_arbitration": (lambda: elu(1.00002), "tvm.from_fx", PASS),
    # right by the exported model's meaning (the campaign's reference), wrong by eager PyTorch's
    "exported_reference": (avg_pool_divisor, "tvm.from_onnx", PASS),
    # wrong by both
    "plain_bug": (lambda: elu(2.0), "tvm.from_fx", INCONSISTENT),
}


@pytest.mark.parametrize("name", sorted(JUDGED))
def test_reproducer_exits_1_exactly_when_the_oracle_says_inconsistent(name, tmp_path):
    make, target, want = JUDGED[name]
    inst = make()
    outcome = execute(inst, target)
    assert outcome.status == want, (outcome.status, outcome.message)
    path = render(get(target), finding_of(inst, target, outcome=outcome), inst, tmp_path)
    code, out, err = run_alone(path)
    assert code == (1 if want == INCONSISTENT else 0), (code, out, err[-3000:])
    assert ("REPRODUCED" in out) == (want == INCONSISTENT), out
    # the comparison is the oracle's own function, pasted; the reference is embedded, not recomputed
    src = path.read_text()
    assert inspect.getsource(compare.values_differ) in src and "EXPECTED64 = np.array(" in src
    assert "np.allclose" not in src and "import dlci" not in src and "from dlci" not in src


def test_naive_comparisons_disagree_with_the_oracle_on_these_cases():
    """The cases above would be judged otherwise by a plain np.allclose or by eager PyTorch as the reference: they
    test the reproducer's judgement, not just the target."""
    import torch
    for name, rtol in (("beyond_arbitration", 1e-3), ("within_arbitration", 1e-5)):
        inst = JUDGED[name][0]()
        x = torch.from_numpy(inst.input_arrays()[0])
        eager = torch.nn.ELU(alpha=inst.call["kwargs"]["alpha"])(x).numpy()
        ignored = torch.nn.ELU()(x).numpy()  # what the target computes
        assert np.allclose(ignored, eager, rtol=rtol) == (JUDGED[name][2] == INCONSISTENT)
    inst = avg_pool_divisor()
    eager = torch.nn.functional.avg_pool2d(torch.from_numpy(inst.input_arrays()[0]), 3, 1, 1, True, False, 2).numpy()
    got = execute(inst, "torch.onnx")  # the exported model run by ONNX Runtime differs from eager PyTorch
    assert got.status == INCONSISTENT and eager.size


def test_crash_reproducer_expects_the_exception_a_support_finding_records(tmp_path):
    inst = max_unpool()
    f = finding_of(inst, "tvm.from_onnx")
    assert f.oracle == "crash" and f.symptom == "AttributeError", f
    # PR mode's "support removed": the symptom is no exception name; the exception is recorded apart
    f.extra["exception"], f.symptom, f.oracle = f.symptom, "support removed", "support"
    path = render(get(f.target), f, inst, tmp_path)
    code, out, err = run_alone(path)
    assert code == 1 and "REPRODUCED" in out, (out, err[-2000:])
    assert expectation(f)["failure"] == "AttributeError"
    # another exception than the recorded one is not this bug
    f.extra["exception"] = "OpNotImplemented"
    path = render(get(f.target), f, inst, tmp_path)
    code, out, _ = run_alone(path)
    assert code == 0 and "a different error" in out and "REPRODUCED" not in out
    test = render_test(f, inst, tmp_path / "tests", style="tvm", form="onnx")
    assert read_expectation(test)["failure"] == "OpNotImplemented"


def test_a_wrong_result_reproducer_tells_a_target_that_gives_no_outputs_from_its_own_mistake(tmp_path):
    """On a revision whose target refuses the model, a wrong-result reproducer exits 0 ("a different error": bisection
    skips it, as a crash reproducer's); a NameError in the script's own lines is no such answer: it exits 1 without
    REPRODUCED, neither reproduced nor fixed."""
    from dlci.bisect.oracle import BAD, SKIP, classify
    inst = elu(2.0)
    f = finding_of(inst, "tvm.from_fx")
    assert f.oracle == "inconsistency", f
    src = render(get(f.target), f, inst, tmp_path).read_text()
    head, sep, rest = src.partition("try:\n")
    assert sep and "except Exception" in rest
    for name, line, expected in (("refused", "raise RuntimeError('this revision refuses the model')", (0, SKIP)),
                                 ("mistake", "outputs = [undefined_in_this_script]", (1, SKIP)),
                                 ("plain", "pass", (1, BAD))):
        path = tmp_path / f"{name}.py"
        path.write_text(head + sep + f"    {line}\n" + rest)
        code, out, err = run_alone(path)
        assert (code, classify(code, out, err, marker=True)[0]) == expected, (name, out, err[-2000:])
        assert ("REPRODUCED" in out) == (name == "plain"), (name, out)
        assert ("NameError: name 'undefined_in_this_script'" in err) == (name == "mistake"), (name, err[-2000:])


def test_onnx_reproducer_arbitrates_with_the_campaign_fp64_graph(tmp_path):
    """An ONNX test ships its expected output; the campaign also evaluates the graph in float64 and arbitrates with
    float32's tolerances. The reproducer embeds that fp64 result and those tolerances, not looser ones."""
    inst = max_unpool()
    f = finding_of(inst, "onnxruntime")  # ORT's MaxUnpool with output_shape disagrees with the ONNX test
    assert f.oracle == "inconsistency", f
    src = render_repro(f, inst, tmp_path).read_text()
    rtol, atol = compare.tolerance("float32", arbitrated=True)
    assert f"TOLERANCE = dict(rtol={rtol!r}, atol={atol!r}" in src and "EXPECTED64 = np.array(" in src
    code, out, _ = run_alone(render_repro(f, inst, tmp_path))
    assert code == 1 and "REPRODUCED value mismatch" in out


def test_hard_crash_reproducer_runs_the_target_in_a_child(tmp_path):
    """A signal kills the process: the script watches a child. This target runs fine, so the child exits 0."""
    inst = elu(1.0)
    f = finding_of(inst, "tvm.from_fx")
    f.oracle, f.symptom, f.stage = "crash", "SIGSEGV", "run"
    path = render(get(f.target), f, inst, tmp_path)
    src = path.read_text()
    assert '"--child" in sys.argv' in src and "== -11" in src
    code, out, err = run_alone(path)
    assert code == 0 and "ran to completion" in out, (out, err[-2000:])


def test_single_operator_reproducers_are_short(tmp_path):
    lengths = {}
    for name, (make, target, _) in JUDGED.items():
        inst = make()
        path = render(get(target), finding_of(inst, target, fid=f"F{len(lengths) + 1:03d}"), inst, tmp_path)
        lengths[name] = len(path.read_text().splitlines())
        ast.parse(path.read_text())
    inst = max_unpool()
    path = render(get("tvm.from_onnx"), finding_of(inst, "tvm.from_onnx", fid="F009"), inst, tmp_path)
    lengths["crash"] = len(path.read_text().splitlines())
    assert "values_differ" not in path.read_text()  # a crash needs no comparison
    assert sorted(lengths.values())[len(lengths) // 2] <= MEDIAN_LINES, lengths
    # (the longest exports a reference of its own; every wrong-result reproducer guards that the target gave outputs,
    # and lets its own NameError through)
    assert max(lengths.values()) <= MEDIAN_LINES + 9, lengths


def test_nan_and_dtype_findings_paste_only_their_check(tmp_path):
    inst = elu(2.0)
    f = finding_of(inst, "tvm.from_fx")
    f.symptom = "nan mismatch"
    src = render_repro(f, inst, tmp_path).read_text()
    assert inspect.getsource(compare.classes_differ) in src and "values_differ" not in src
    f.symptom = "dtype mismatch"
    src = render_repro(f, inst, tmp_path).read_text()
    assert 'dtype.name != "float32"' in src and "def " not in src.split('"""', 2)[2]


def test_findings_that_share_an_id_and_a_script_name_keep_a_script_each(tmp_path):
    """The two parts of a split finding carry one id (and the same target and operator): each must get its own
    script, and renumbering (F009 -> F006 while another finding still holds F006's name) must not overwrite or
    delete another finding's script (a real scan died there with FileNotFoundError)."""
    from dlci.campaign import RunOptions
    from dlci.campaign.reproduction import reproduce
    from dlci.campaign.state import Campaign
    target = "tvm.from_fx"
    a, b = elu(2.0), elu(3.0)
    campaign = Campaign(instances={a.id: a, b.id: b}, targets={target: get(target)})
    first, second = finding_of(a, target, "F006"), finding_of(b, target, "F009")
    second_part = finding_of(b, target, "F009")
    second_part.message = "the part new in the PR"
    options = RunOptions(out=tmp_path, check_repros=False)
    kept, _ = reproduce([second, second_part, first], campaign, options)
    assert [f.id for f in kept] == ["F001", "F002", "F003"]
    paths = [tmp_path / f.repro for f in kept]
    assert len(set(paths)) == 3 and all(p.exists() for p in paths)
    assert ("2.0" in paths[2].read_text()) and ("3.0" in paths[0].read_text())
    assert not list((tmp_path / "repro").glob(".renumber-*"))


def test_a_bfloat16_case_reproduces_standalone(tmp_path):
    """numpy cannot save ml_dtypes' bfloat16 (np.save writes raw void) and torch.tensor cannot read it: a reproducer
    carries bf16 values as float32 (exact) cast back, and feeds torch through float32. TVM's exported-program SELU
    in bf16 is ~5 % off (reproduces); ReLU is right (runs to the end, exit 0)."""
    pytest.importorskip("tvm")
    import ml_dtypes
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6).astype(ml_dtypes.bfloat16)
    verdicts = {}
    for fn in ("selu", "relu"):
        inst = Instance(op=f"aten::{fn}", framework="torch", origin=Origin("test", "hand"), arrays={"in:0": x},
                        params={}, inputs=[TensorSpec.of(x)],
                        call={"kind": "torch_fn", "fn": f"torch.nn.functional.{fn}", "args": [{"$t": 0}], "kwargs": {}})
        o = execute(inst, "tvm.from_exported_program")
        path = render(get("tvm.from_exported_program"), finding_of(inst, "tvm.from_exported_program", outcome=o),
                                                             inst, tmp_path)
        assert "ml_dtypes.bfloat16" in path.read_text()
        code, out, err = run_alone(path)
        verdicts[fn] = (o.status, code, "REPRODUCED" in out)
    assert verdicts == {"selu": (INCONSISTENT, 1, True), "relu": (PASS, 0, False)}, verdicts


@pytest.mark.parametrize("target", ["torch.onnx", "onnxscript.torchlib"])
def test_a_bfloat16_case_runs_through_onnx_runtime_standalone(tmp_path, target):
    """ONNX Runtime's Python binding refuses numpy bfloat16 (ml_dtypes): a reproducer of an ORT-run target feeds it
    as dlci's workers do (OrtValues of the bit patterns), so a case that passes in the campaign runs to the end
    alone (exit 0), never 'confirmed but not reproduced' because of the script's own input handling."""
    import ml_dtypes
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6).astype(ml_dtypes.bfloat16)
    inst = Instance(op="aten::transpose", framework="torch", origin=Origin("test", "hand"), arrays={"in:0": x},
                    params={}, inputs=[TensorSpec.of(x)],
                    call={"kind": "torch_fn", "fn": "torch.transpose", "args": [{"$t": 0}, 0, 1], "kwargs": {}})
    o = execute(inst, target)  # (ORT's CPU kernels of most arithmetic have no bfloat16: a layout op has)
    assert o.status == PASS, (o.symptom, o.message)
    path = render(get(target), finding_of(inst, target, outcome=o), inst, tmp_path)
    assert "def run_session" in path.read_text()
    code, out, err = run_alone(path)
    assert code == 0 and "REPRODUCED" not in out, (out, err[-2000:])


def test_an_unreproduced_finding_says_why():
    from dlci.findings.repro import why_not_reproduced
    assert why_not_reproduced("timed out after 60 s\n") == "timed out after 60 s"
    ran = "exit 0\n--- stdout\nmodel built\nconsistent with the reference ([1. 2.]): the bug no longer reproduces\n" \
          "--- stderr\n"
    assert why_not_reproduced(ran).startswith("ran to the end without the failure: consistent with the reference")
    broke = ("exit 1\n--- stdout\n\n--- stderr\nTraceback (most recent call last):\n  File \"F001.py\", line 3\n"
             "TypeError: Numpy_type 256 can't be converted\n")
    assert why_not_reproduced(broke) == "the script failed (exit 1): TypeError: Numpy_type 256 can't be converted"


def test_an_invalid_model_reproducer_runs_the_strict_check_the_campaign_ran(tmp_path):
    """torch.onnx and torchlib findings that the strict ONNX check raised (InvalidModel) reproduce as that: the
    reproducer runs the same check, with the same message, before ONNX Runtime (whose own refusal of the same model
    reads differently, and was taken for another error: 'confirmed but not reproduced')."""
    import onnx
    from dlci.findings.repro import template_env
    from dlci.models.onnx_io import InvalidModel, check_strict
    floor = helper.make_graph([helper.make_node("Floor", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    bad = helper.make_model(floor, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    with pytest.raises(InvalidModel) as campaign:
        check_strict(bad)
    scope = {"onnx": onnx}
    exec(template_env().get_template("targets/_onnx_strict.j2").render(), scope)  # noqa: S102 - our own template
    with pytest.raises(Exception) as alone:
        scope["check_strict"](bad)
    assert type(alone.value).__name__ == "InvalidModel" and str(alone.value) == str(campaign.value)
    scope["check_strict"](helper.make_model(helper.make_graph(
        [helper.make_node("Floor", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 18)],
        ir_version=8))  # a valid model passes
    x = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    inst = Instance(op="aten::floor_divide", framework="torch",
                    call={"kind": "torch_fn", "fn": "torch.floor_divide", "args": [{"$t": 0}, {"$t": 1}], "kwargs": {}},
                    inputs=[TensorSpec.of(x), TensorSpec.of(x)], params={}, origin=Origin("test", "hand"),
                    arrays={"in:0": x, "in:1": x})
    for target in ("torch.onnx", "onnxscript.torchlib"):
        f = Finding(id="F001", oracle="crash", operator=inst.op, target=target, target_version="x",
                    symptom="InvalidModel", stage="convert", signature="s", message=str(campaign.value),
                    instance_id=inst.id, origin=inst.origin.__dict__, distance={}, traceback="",
                    instances=[inst.id], operators=[inst.op], confirmed=True)
        (tmp_path / target).mkdir()
        text = render(get(target), f, inst, tmp_path / target).read_text()
        assert text.index("check_strict(") < text.index("InferenceSession("), target
        ast.parse(text)


def test_the_findings_a_follow_up_wants_are_checked_first_and_followed_up_by_the_same_worker(tmp_path):
    """A scan checks each new finding's reproducer on head and then on base. Reserving the base's checks apart left
    seven new findings of a real scan unchecked on head (the reservation ~52 s, the checks took 19 s): now the
    worker that saw a new finding reproduce follows it up at once, the new findings go before the others and may
    start up to their own (later) deadline. Near the deadline a new finding is still checked on head (a real scan
    left 4 new findings unchecked for want of room for both checks, and checked 7 old ones after them): its
    follow-up bounds itself."""
    import time

    from dlci.campaign import RunOptions
    from dlci.campaign.reproduction import MIN_CHECK_SECONDS, FollowUp, reproduce
    from dlci.campaign.state import Campaign
    target = "tvm.from_fx"
    a, b, c = elu(2.0), elu(3.0), elu(4.0)
    campaign = Campaign(instances={i.id: i for i in (a, b, c)}, targets={target: get(target)})
    old, new1, new2 = finding_of(a, target, "F001"), finding_of(b, target, "F002"), finding_of(c, target, "F003")
    events = []
    options = RunOptions(out=tmp_path, workers=1, progress=lambda line: events.append(("head", line)))
    follow_up = FollowUp(wants=lambda f: f in (new1, new2), run=lambda f: events.append(("base", f.extra["mark"])),
                         until=time.monotonic() + 600)
    for f, mark in ((old, "old"), (new1, "new1"), (new2, "new2")):
        f.extra["mark"] = mark
    # the others' window has closed already: only the followed findings are checked, both of them, in their order
    kept, _ = reproduce([old, new1, new2], campaign, options, until=time.monotonic() - 1,
                        hard_until=time.monotonic() + 600, follow_up=follow_up)
    assert [e for e in events if e[0] == "base"] == [("base", "new1"), ("base", "new2")]
    heads = [n for n, e in enumerate(events) if e[0] == "head" and "reproduces" in e[1]]
    bases = [n for n, e in enumerate(events) if e[0] == "base"]
    assert len(heads) == 2 and heads[0] < bases[0] < heads[1] < bases[1]  # each followed up before the next starts
    assert old.repro_checked is None and new1.repro_checked is True and new2.repro_checked is True
    # with room for one check, the new finding still gets its check on head, before an old one
    events.clear()
    for f in (old, new1, new2):
        f.repro_checked = None
    reproduce([old, new1], campaign, options, hard_until=time.monotonic() + 1.5 * MIN_CHECK_SECONDS,
              follow_up=follow_up)
    assert new1.repro_checked is True
    checked = [e[1] for e in events if e[0] == "head" and "reproduces" in e[1]]
    assert "F002" in checked[0]
    # with less than one check's room, none starts
    events.clear()
    new1.repro_checked = None
    reproduce([new1], campaign, options, hard_until=time.monotonic() + 0.5 * MIN_CHECK_SECONDS,
              follow_up=follow_up)
    assert new1.repro_checked is None and not [e for e in events if e[0] == "base"]


def test_a_finding_whose_model_killed_the_worker_gets_no_in_process_test_style_rendering(tmp_path):
    """The test in the repository's style is rendered in dlci's own process, reference and export included. A real
    scan died (SIGFPE) there: ONNX Runtime divides by zero on torch.onnx's export of an attention over zero rows, the
    very death the finding reports at its model stage. Such a finding keeps its standalone reproducer (its target
    runs in a child) and gets no test-style one; the scan lives."""
    import subprocess
    import sys
    script = '''
import numpy as np
from dlci.campaign import RunOptions
from dlci.campaign.reproduction import _render_test_style
from dlci.campaign.state import Campaign
from dlci.findings import Finding
from dlci.instance import Instance, Origin, TensorSpec
from dlci.targets import get
x = np.zeros((0, 3), np.float32)
inst = Instance(op="nn::MultiheadAttention", framework="torch", params={}, origin=Origin("test", "hand"),
                call={"kind": "torch_module", "cls": "torch.nn.MultiheadAttention", "args": [],
                      "kwargs": {"embed_dim": 3, "num_heads": 3, "bias": False},
                      "forward_args": [{"$t": 0}, {"$t": 1}, {"$t": 2}], "forward_kwargs": {}},
                inputs=[TensorSpec.of(x)] * 3,
                arrays={"in:0": x, "in:1": x, "in:2": x, "state:in_proj_weight": np.zeros((9, 3), np.float32),
                        "state:out_proj.weight": np.zeros((3, 3), np.float32)})
campaign = Campaign(instances={inst.id: inst}, targets={"tvm.from_onnx": get("tvm.from_onnx")})
f = Finding(id="F001", oracle="crash", operator=inst.op, target="tvm.from_onnx", symptom="SIGFPE", stage="model",
            signature="s", message="", instance_id=inst.id, target_version="0", origin={})
said = []
_render_test_style(f, campaign, RunOptions(out=__import__("pathlib").Path(OUT), progress=said.append))
print("ALIVE", repr(f.test_style_repro), said)
'''.replace("OUT", repr(str(tmp_path)))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-3000:])  # -8 without the guard
    assert "ALIVE ''" in proc.stdout and "no test-style reproducer for F001: it would build" in proc.stdout
