"""Reproducers in the style of the target repositories' own tests, on real findings of today's stack (no mocks).

Each finding is made the way dlci makes it: dlci.testcase.execute on a known-buggy instance, then a Finding as
dlci.campaign.finish builds one. The rendered test must fail the expected way while the bug is present
(check_test True) and pass where the target is right (check_test False): the same instance with the parameter at a
value the converter handles, or an instance that passes.
"""
from __future__ import annotations

import ast
import copy
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from dlci.findings import Finding, signature
from dlci.findings.test_style import (PASTE_INTO, STYLES, check_test, expectation, onnx_model_code, paste_block,
                                      read_expectation, render_test, reproduces)
from dlci.instance import Instance, Origin, TensorSpec
from dlci.outcome import CRASH, INCONSISTENT
from dlci.targets import TARGETS, get
from dlci.testcase import execute

# the operator filter of tests/test_operators.py: the same list hits the same on-disk OpInfo cache
OPINFO_OPS = ["aten::add", "aten::addmm", "aten::addcmul", "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
              "aten::max_pool2d", "aten::conv1d", "aten::conv2d", "aten::relu6", "aten::hardtanh",
              "aten::batch_norm", "aten::softplus", "aten::elu", "aten::linear"]


@pytest.fixture(scope="module")
def instances():
    from dlci import sources as S
    S.registry()
    return {"opinfo": S.load("opinfo", limit_per_op=2, ops=OPINFO_OPS), "module_db": S.load("module_db"),
            "onnx_node": S.load("onnx_node")}


def _smallest(insts, pred):
    hits = [i for i in insts if pred(i)]
    assert hits, "no instance of the kind this test needs"
    return min(hits, key=lambda i: sum(int(np.prod(s.shape)) for s in i.inputs))


def with_call(inst: Instance, **changes) -> Instance:
    """The same instance with some recipe values changed (a new id)."""
    call = copy.deepcopy(inst.call)
    for key, value in changes.items():
        if key == "args":
            for pos, v in value.items():
                call["args"][pos] = v
        else:
            call[key] = {**call.get(key, {}), **value}
    return Instance(op=inst.op, framework=inst.framework, call=call, inputs=inst.inputs, params=inst.params,
                    origin=inst.origin, seed=inst.seed, arrays=dict(inst.arrays))


def make_finding(inst: Instance, target: str, fid: str) -> Finding:
    """Run the test in-process and build the Finding the way dlci.campaign.finish does."""
    o = execute(inst, target)
    assert o.status in (CRASH, INCONSISTENT), (target, inst.id, o.status, o.stage, o.message)
    t = get(target)
    return Finding(
        id=fid, oracle=t.oracle_of(o), operator=o.op, target=target, target_version=t.version(), symptom=o.symptom,
        stage=o.stage, signature=signature(o, t.modules), message=o.message[:2000], instance_id=inst.id,
        origin=inst.origin.__dict__, distance=o.distance, traceback=o.traceback[-4000:], log=o.log[-2000:],
        instances=[inst.id], operators=[o.op], confirmed=True)


def dense_instance() -> Instance:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    return Instance(op="keras::Dense", framework="keras",
                    call={"kind": "keras_layer", "cls": "keras.layers.Dense", "config": {"units": 4,
                                                                                         "activation": "tanh"}},
                    inputs=[TensorSpec.of(x)], params={}, origin=Origin("test", "hand"),
                    arrays={"in:0": x, "weight:0": rng.standard_normal((5, 4)).astype(np.float32),
                            "weight:1": rng.standard_normal(4).astype(np.float32)})


@pytest.fixture(scope="module")
def cases(instances, tmp_path_factory):
    """name -> (finding, instance, rendered path, check_test verdict, expected verdict)."""
    out = tmp_path_factory.mktemp("style")
    opinfo, modules, onnx_node = instances["opinfo"], instances["module_db"], instances["onnx_node"]
    # TVM 0.27's ExportedProgram importer ignores avg_pool2d(divisor_override=...)
    pool = _smallest(opinfo, lambda i: i.op == "aten::avg_pool2d" and i.inputs[0].dtype == "float32"
                     and len(i.call["args"]) == 7 and i.call["args"][6] not in (None, 0))
    pool_ok = with_call(pool, args={6: None})
    # TVM's FX importer ignores nn.ELU(alpha=...)
    elu = _smallest(modules, lambda i: i.op == "nn::ELU" and i.call["kwargs"].get("alpha", 1.0) != 1.0
                    and i.inputs[0].shape)
    elu_ok = with_call(elu, kwargs={"alpha": 1.0})
    # OpenVINO's PyTorch frontend ignores softplus beta/threshold
    softplus = _smallest(opinfo, lambda i: i.op == "aten::softplus" and i.call["kwargs"].get("beta", 1) != 1
                         and 0 not in i.inputs[0].shape and i.inputs[0].shape)
    softplus_ok = with_call(softplus, kwargs={"beta": 1, "threshold": 20})
    # ONNX Runtime's MaxUnpool with output_shape disagrees with the output the ONNX test expects (and TVM's ONNX
    # importer crashes on it); without output_shape both are right
    unpool = _smallest(onnx_node, lambda i: i.op == "onnx::MaxUnpool" and len(i.inputs) == 3)
    unpool_ok = _smallest(onnx_node, lambda i: i.op == "onnx::MaxUnpool" and len(i.inputs) == 2)

    # each check is a fresh interpreter: they start as soon as their test is rendered, while the next finding is made
    pool_ = ThreadPoolExecutor(3)
    started = {}

    def add(name, finding, inst, want):
        target = get(finding.target)
        path = render_test(finding, inst, out / name, style=target.test_style, form=target.form)
        assert path == out / name / f"test_{finding.id}_{finding.target.replace('.', '_')}.py"
        started[name] = (finding, inst, path, pool_.submit(check_test, path, timeout=300), want)

    try:
        f = make_finding(pool, "tvm.from_exported_program", "F001")
        add("tvm_ep", f, pool, True)
        add("tvm_ep_fixed", f, pool_ok, False)
        f = make_finding(elu, "tvm.from_fx", "F002")
        add("tvm_fx", f, elu, True)
        add("tvm_fx_fixed", f, elu_ok, False)
        f = make_finding(softplus, "openvino.pytorch", "F003")
        add("ov", f, softplus, True)
        add("ov_fixed", f, softplus_ok, False)
        f = make_finding(unpool, "onnxruntime", "F004")
        add("ort", f, unpool, True)
        add("ort_fixed", f, unpool_ok, False)
        # the same failing test, claimed to crash: a wrong kind of failure is no reproduction
        wrong = copy.deepcopy(f)
        wrong.oracle, wrong.symptom, wrong.message = "crash", "RuntimeError", "[ONNXRuntimeError] : 6 : FAIL"
        add("ort_wrong_claim", wrong, unpool, False)
        f = make_finding(unpool, "tvm.from_onnx", "F005")
        assert f.oracle == "crash", f
        add("tvm_onnx_crash", f, unpool, True)
        f = make_finding(pool, "torch.onnx", "F006")
        add("torch_onnx", f, pool, True)
        # no TensorFlow bug at hand: the style must at least pass where the target is right
        dense = dense_instance()
        f = Finding(id="F007", oracle="inconsistency", operator=dense.op, target="tf.lite", target_version="",
                    symptom="value mismatch", stage="compare", signature="", message="", instance_id=dense.id,
                    origin=dense.origin.__dict__)
        add("tflite_right", f, dense, False)
        return {name: (finding, inst, path, future.result(), want)
                for name, (finding, inst, path, future, want) in started.items()}
    finally:
        pool_.shutdown(wait=True)


CASES = ["tvm_ep", "tvm_ep_fixed", "tvm_fx", "tvm_fx_fixed", "ov", "ov_fixed", "ort", "ort_fixed", "ort_wrong_claim",
         "tvm_onnx_crash", "torch_onnx", "tflite_right"]


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_rendered_test_fails_with_the_bug_and_passes_without(cases, name):
    finding, inst, path, got, want = cases[name]
    log = path.with_suffix(".log")
    assert log.exists()
    text = log.read_text()
    assert got is want, f"{name}: check_test {got}, expected {want}\n{text[-3000:]}"
    if want:
        assert "1 failed" in text
    elif name != "ort_wrong_claim":
        assert "1 passed" in text and "failed" not in text.split("--- stdout")[1].splitlines()[-1]


@pytest.mark.parametrize("name", CASES)
def test_rendered_test_reads_like_the_target_suite(cases, name):
    finding, inst, path, _, _ = cases[name]
    src = path.read_text()
    tree = ast.parse(src)
    style = STYLES[get(finding.target).test_style]
    for marker in style.markers:
        assert marker in src, (name, marker)
    funcs = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    assert len(funcs) == 1 and funcs[0].endswith("_" + finding.id), funcs
    assert read_expectation(path) == expectation(finding)
    assert ast.get_docstring(tree).startswith(f"{finding.target} ")
    assert "def reference():" not in src  # dlci's fp64 arbitration stays out of a plain test
    # the block a maintainer pastes: a few lines calling the repository's own helper where its file has one
    paste = paste_block(path)
    where, helper = PASTE_INTO[finding.target]
    assert "# --- paste into " + where.split(',')[0].split('{')[0] in src
    assert len(paste.splitlines()) <= 25, paste
    if helper:
        assert helper in paste, (helper, paste)
    assert "dlci" not in paste
    if style.name == "tvm":
        assert 'if __name__ == "__main__":\n    tvm.testing.main()' in src
        assert {"tvm.from_exported_program": "verify_model_numerically(AvgPool2d(), example_args, rtol=",
                "tvm.from_fx": "mod = from_fx(fx.symbolic_trace(model), ",
                "tvm.from_onnx": "check_correctness(model, inputs, ir_version="}[finding.target] in paste
    if style.name == "openvino":
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        assert classes[-1].name.startswith("Test") and classes[-1].bases[0].id == "PytorchLayerTest"
        assert "from pytorch_layer_test_class import PytorchLayerTest" in src  # the real harness when present
        assert "@pytest.mark.nightly" in paste and "@pytest.mark.precommit" in paste
        assert 'return aten_softplus(), "aten::softplus"' in paste  # (model, kind), as OpenVINO's tests return
    if style.name == "onnxruntime" or finding.target == "tvm.from_onnx":
        assert 'helper.make_node("MaxUnpool"' in paste and 'helper.make_opsetid(""' in paste
    if style.name == "onnxruntime":
        assert "output_expected = np.array([" in paste  # the ONNX test's own expected output, embedded
    if style.name == "pytorch":
        assert "class DynamoExporterTest" in src and "onnx_testing.assert_onnx_program(onnx_program)" in paste
    if style.name == "tensorflow":
        assert "tf.lite.Interpreter(" in src and "(tf.test.TestCase)" in src


def test_crash_tests_expect_the_very_exception(cases):
    finding, _, path, _, _ = cases["tvm_onnx_crash"]
    expect = read_expectation(path)
    assert expect["failure"] == finding.symptom == "AttributeError"
    assert expect["message"] and expect["message"] in finding.message
    assert "check_correctness(model, inputs" in path.read_text()  # once it converts, it must also be right


def test_unserved_targets_render_nothing(tmp_path):
    inst = dense_instance()
    f = Finding(id="F001", oracle="crash", operator=inst.op, target="no.such.target", target_version="",
                symptom="X", stage="convert", signature="", message="", instance_id=inst.id, origin={})
    assert render_test(f, inst, tmp_path, style=None) is None and not list(tmp_path.iterdir())
    assert render_test(f, inst, tmp_path, style="no.such.style") is None and not list(tmp_path.iterdir())


def test_every_declared_style_exists_and_every_flavour_renders(instances, tmp_path):
    styled = [n for n, t in TARGETS.items() if t.test_style is not None]
    assert {TARGETS[n].test_style for n in styled} <= set(STYLES), {n: TARGETS[n].test_style for n in styled}
    assert {TARGETS[n].test_style for n in styled} == set(STYLES)  # every style serves some target
    torch_inst = instances["opinfo"][0]
    onnx_inst = _smallest(instances["onnx_node"], lambda i: i.op == "onnx::Relu")
    for target in styled:
        for inst in (torch_inst, onnx_inst, dense_instance()):
            if inst.framework not in get(target).frameworks:
                continue
            f = Finding(id="F042", oracle="inconsistency", operator=inst.op, target=target, target_version="1",
                        symptom="value mismatch", stage="compare", signature="", message='3 differ """ \\ ',
                        instance_id=inst.id, origin=inst.origin.__dict__)
            path = render_test(f, inst, tmp_path / f"{target}-{inst.framework}", style=get(target).test_style,
                               form=get(target).form)
            src = path.read_text()
            ast.parse(src)
            for marker in STYLES[get(target).test_style].markers:
                assert marker in src, (target, inst.framework, marker)


def test_onnx_node_models_become_helper_code(instances):
    """Nearly every ONNX node test is rebuilt with onnx.helper (checked to give the same graph); the few with
    subgraphs or optional types keep the standalone reproducer's textual form."""
    built = [onnx_model_code(i)[1] for i in instances["onnx_node"]]
    assert sum(built) >= 0.95 * len(built), (sum(built), len(built))
    scan = _smallest(instances["onnx_node"], lambda i: i.op == "onnx::Scan")
    code, helper_built = onnx_model_code(scan)
    assert not helper_built and code.startswith('model = onnx.parser.parse_model("""')


def _junit(*cases):
    body = "".join(f'<testcase name="t{i}">{c}</testcase>' for i, c in enumerate(cases))
    return f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>'


ASSERT_FAIL = '<failure message="AssertionError: &#10;Not equal">x\nt.py:9: AssertionError</failure>'
CRASH_FAIL = ("<failure message=\"AttributeError: 'Var' object has no attribute 'tolist'\">"
              "E   AttributeError: 'Var' object has no attribute 'tolist'\nonnx_frontend.py:12: AttributeError"
              "</failure>")


def test_reproduces_reads_the_failure_kind():
    inconsistent = {"failure": "AssertionError"}
    crash = {"failure": "AttributeError", "message": "'Var' object has no attribute"}
    assert reproduces(inconsistent, 1, _junit(ASSERT_FAIL))
    assert not reproduces(inconsistent, 0, _junit(""))  # passes: fixed
    assert not reproduces(inconsistent, 1, _junit(CRASH_FAIL))  # another failure than the bug's
    assert not reproduces(inconsistent, 1, _junit('<error message="fixture \'ie_device\' not found">e</error>'))
    assert not reproduces(inconsistent, 2, None)  # collection error / usage error
    assert reproduces(crash, 1, _junit(CRASH_FAIL))
    assert not reproduces({**crash, "message": "another message"}, 1, _junit(CRASH_FAIL))
    assert not reproduces(crash, 1, _junit(ASSERT_FAIL))
    assert reproduces({"crash": "SIGSEGV"}, -11, None) and not reproduces({"crash": "SIGSEGV"}, -6, None)
    assert reproduces({"crash": "timeout"}, None, None) and not reproduces(inconsistent, None, None)
    assert reproduces({"crash": "exit 3"}, 3, None) and not reproduces({"crash": "exit 3"}, 1, _junit(ASSERT_FAIL))
    assert reproduces({"crash": "oom"}, -9, None)
    assert not reproduces(None, 1, _junit(ASSERT_FAIL))


def test_expectations_per_oracle():
    base = dict(operator="aten::x", target="tvm.from_fx", target_version="", stage="convert", signature="",
                instance_id="i", origin={})
    assert expectation(Finding(id="F1", oracle="inconsistency", symptom="nan mismatch", message="2 of 4",
                               **base))["failure"] == "AssertionError"
    assert expectation(Finding(id="F1", oracle="crash", symptom="SIGSEGV", message="", **base)) == {"crash": "SIGSEGV"}
    e = expectation(Finding(id="F1", oracle="crash", symptom="TVMError", message="Check failed: (x) is false: "
                            "bad dim at 0x7ffd1234\nmore", **base))
    assert e["failure"] == "TVMError" and "0x7ffd" not in e["message"] and e["message"].startswith("Check failed")
    assert json.loads(json.dumps(e)) == e
