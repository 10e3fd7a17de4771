"""The repository's own tests as a scan's seeds (dlci.scan.repo_tests, dlci.sources.repo_tests, dlci.models.recorded).

Fast tests: the test selection over dlci's own TVM-style fixture tests, the .dlci.yml key, the recorded recipes (an
exported program and an FX graph recorded and rebuilt, every way a recording may hold code refused), the records'
checks, the reproducers. Slow ones: a TVM-shaped repository (the installed TVM's Python sources with dlci's fixture
tests under tests/python/relax/) whose head breaks three converter paths that the operator material does not reach
(an FX interpolation by one scale factor, an exported upsample by one factor per dim, an ONNX Reshape of a computed
shape), and an onnxscript-shaped one whose head breaks im2col, sampled from the repository's own OpInfo file: the
seeds are recorded on head, run through the real targets with the changed converter files traced, reach the changed
lines, and the numeric oracle fails them on head and passes them on base. (The torchlib case's function has PyTorch
OpInfo material too, through F.unfold; the test is that the repository's own OpInfo file is found, imported without
its missing imports, drawn from and routed: what an operator without PyTorch OpInfo coverage depends on.)
"""
from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlci.config import Config, ConfigError
from dlci.instance import Instance, Origin, TensorSpec, Unencodable
from dlci.profiles.base import Touch
from dlci.sources import repo_tests as rt

FIXTURES = Path(__file__).parent / "fixtures" / "repo_tests"
RELAX_TESTS = "tests/python/relax"
TORCHLIB_TESTS = "tests/function_libs/torch_lib"


def touch(operator: str, namespace: str, converter: str, targets: tuple[str, ...], profile: str = "tvm") -> Touch:
    return Touch(operator, namespace, converter, "python/x.py", 1, "converter changed", targets, profile)


FX_INTERPOLATE = touch("interpolate", "aten", "self._interpolate", ("tvm.from_fx",))
EP_UPSAMPLE = touch("upsample_nearest2d.vec", "aten", "self._upsample_nearest2d", ("tvm.from_exported_program",))
ONNX_RESHAPE = touch("Reshape", "onnx", "Reshape", ("tvm.from_onnx",))


def fixture_repo(tmp_path: Path) -> Path:
    """dlci's TVM-style fixture tests laid out as in TVM's repository (no TVM sources: selection only)."""
    tests = tmp_path / "repo" / RELAX_TESTS
    tests.mkdir(parents=True)
    for f in FIXTURES.glob("test_*.py"):
        shutil.copy(f, tests / f.name)
    shutil.copy(FIXTURES / "conftest_of_another_release.py", tests / "conftest.py")
    return tmp_path / "repo"


# -- choosing the tests -----------------------------------------------------------------------------------------------

def test_the_tests_chosen_are_those_whose_code_names_a_touched_operator(tmp_path):
    repo = fixture_repo(tmp_path)
    wanted = rt.Wanted.of([FX_INTERPOLATE, EP_UPSAMPLE])
    files = rt.test_files(repo, rt.LAYOUTS["tvm"], (), wanted)
    # the ONNX frontend's tests are not read for converters only the torch importers reach
    assert files == [f"{RELAX_TESTS}/test_frontend_from_exported_program_interpolate.py",
                     f"{RELAX_TESTS}/test_frontend_from_fx_interpolate.py"]
    chosen, stats = rt.choose_tests(repo, files, wanted, max_tests=10)
    assert [c.name for c in chosen] == ["test_interpolate_scale_factor", "test_upsample_scale_per_dim"]
    assert stats["tests_seen"] == 3  # test_relu_untouched names no touched operator: not run
    only_fx = rt.Wanted.of([FX_INTERPOLATE])
    assert rt.test_files(repo, rt.LAYOUTS["tvm"], (), only_fx) == [
        f"{RELAX_TESTS}/test_frontend_from_fx_interpolate.py"]
    first = chosen[0]
    assert first.score == 3 and "names interpolate" in first.why and "interpolate" in first.ops  # name and code
    assert chosen[1].score == 2 and "upsample_nearest2d" in chosen[1].ops  # F.interpolate in a module-level class


def test_an_onnx_op_type_given_to_make_node_chooses_the_onnx_test(tmp_path):
    repo = fixture_repo(tmp_path)
    wanted = rt.Wanted.of([ONNX_RESHAPE])
    files = rt.test_files(repo, rt.LAYOUTS["tvm"], (), wanted)
    assert files == [f"{RELAX_TESTS}/test_frontend_onnx_shape_ways.py"]
    chosen, _ = rt.choose_tests(repo, files, wanted, max_tests=10)
    assert [c.name for c in chosen] == ["test_reshape_of_a_shape"]
    assert rt.choose_tests(repo, files, wanted, max_tests=0)[0] == []  # the cap holds
    # an op type handed to the test's own helper (verify_unary("Softsign", ...)) counts as one given to make_node
    softsign = rt.Wanted.of([touch("Softsign", "onnx", "Softsign", ("tvm.from_onnx",))])
    assert [c.name for c in rt.choose_tests(repo, files, softsign, max_tests=10)[0]] == ["test_activations"]


def test_configured_paths_are_read_whatever_their_names(tmp_path):
    repo = fixture_repo(tmp_path)
    wanted = rt.Wanted.of([ONNX_RESHAPE])
    files = rt.test_files(repo, rt.Layout(), ["tests/**/test_*fx_interpolate*.py"], wanted)
    assert files == [f"{RELAX_TESTS}/test_frontend_from_fx_interpolate.py"]


def test_opinfos_are_mapped_to_the_touched_torchlib_function_by_the_test_data(tmp_path):
    (tmp_path / TORCHLIB_TESTS).mkdir(parents=True)
    shutil.copy(FIXTURES / "onnxscript" / "ops_test_data.py", tmp_path / TORCHLIB_TESTS / "ops_test_data.py")
    got = rt.mapped_opinfos(tmp_path, [f"{TORCHLIB_TESTS}/ops_test_data.py"], {"aten_im2col"})
    assert got == {"ops.aten.im2col": "aten_im2col"}
    wanted = rt.Wanted.of([touch("aten::im2col", "aten", "aten_im2col", ("onnxscript.torchlib",), "onnxscript")])
    assert wanted.by_converter == {"aten_im2col": "aten::im2col"} and "im2col" in wanted.canonical


def test_a_test_data_file_naming_a_missing_package_at_import_still_loads(tmp_path, monkeypatch):
    from dlci.sources import repo_opinfo
    monkeypatch.setattr(repo_opinfo, "STAND_IN", ("dlci_no_such_vision_pkg",))
    data = tmp_path / "extra_opinfo.py"
    data.write_text("import dlci_no_such_vision_pkg\n"
                    "from dlci_no_such_vision_pkg import transforms\n"
                    "NMS = dlci_no_such_vision_pkg.ops.nms  # named at import, as an OpInfo's op= names it\n"
                    "OP_DB = [NMS, transforms.resize]\n")
    try:
        module = repo_opinfo.load_file(data, 0)
        assert module.NMS.__name__ == "nms" and len(module.OP_DB) == 2
        with pytest.raises(ModuleNotFoundError, match="not installed here"):
            module.NMS(1, 2)  # only a sample that calls it fails
        assert not hasattr(module.NMS, "__wrapped__")  # dunders are not made up (inspect, copy, pickle probe them)
    finally:
        for name in ("dlci_no_such_vision_pkg", "dlci_repo_opinfo_0"):
            sys.modules.pop(name, None)


def test_a_run_whose_tests_errored_in_setup_is_told_from_one_whose_tests_ran():
    assert rt.setup_broken({"returncode": 1, "tail": ["EEE      [100%]", "3 errors in 0.53s"]})
    assert rt.setup_broken({"returncode": 1, "tail": ["1 failed, 2 errors in 4.1s"]})
    assert not rt.setup_broken({"returncode": 1, "tail": ["2 failed, 1 passed in 3.0s"]})
    assert not rt.setup_broken({"returncode": 0, "tail": ["3 passed in 2.0s"]})
    assert not rt.setup_broken({"returncode": "timeout", "tail": ["1 error"]})  # killed: what it had is kept


# -- .dlci.yml --------------------------------------------------------------------------------------------------------

def test_repo_tests_key_is_policy_and_checked():
    from dlci.scan.repo_tests import budget_for, settings
    base = Config.parse("repo_tests: {share: 0.25, max_tests: 5, paths: [tests/fe/test_*.py], "
                        "entries: {\"mypkg.frontend:load_model\": onnx}}")
    head = Config.parse("repo_tests: {share: 0}\npython_path: [src]")
    merged = base.with_build_of(head)
    assert merged.repo_tests == base.repo_tests and merged.python_path == ["src"]  # policy from base
    assert "repo_tests" in base.policy_changes(head)
    conf = settings(merged)
    assert (conf.share, conf.max_tests, conf.paths) == (0.25, 5, ("tests/fe/test_*.py",))
    assert conf.entries == (rt.Entry("mypkg.frontend", "load_model", "onnx", "mypkg.frontend.load_model"),)
    assert budget_for(merged, 240) == pytest.approx(60.0)
    assert budget_for(Config(), 170) == pytest.approx(34.0) and budget_for(Config(), 10_000) == 90.0
    assert budget_for(head, 240) == 0.0  # switched off
    for bad in ("repo_tests: {share: 0.8}", "repo_tests: {shares: 0.1}", "repo_tests: {max_tests: 0}",
                "repo_tests: {paths: [../../etc/*.py]}", "repo_tests: {entries: {\"nomodule\": onnx}}",
                "repo_tests: {entries: {\"a.b:c\": keras}}", "repo_tests: [tests]", "repo_tests: {share: true}"):
        with pytest.raises(ConfigError):
            Config.parse(bad)


# -- recorded programs ------------------------------------------------------------------------------------------------

def _interpolating_module():
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 3, 3, padding=1)
            self.register_buffer("offset", torch.arange(3.0).reshape(1, 3, 1, 1))

        def forward(self, x):
            y = self.conv(x) + self.offset
            y = torch.nn.functional.interpolate(y, scale_factor=(2.0, 3.0), mode="nearest")
            return y[:, None, 1:].view(y.shape[0], -1)
    torch.manual_seed(0)
    return Net().eval()


def _recorded_exported(dynamic: bool = False) -> Instance:
    import torch
    from dlci.models import recorded
    shapes = ({0: torch.export.Dim("batch", max=8)},) if dynamic else None
    ep = torch.export.export(_interpolating_module(), (torch.randn(2, 2, 4, 5),), dynamic_shapes=shapes)
    call, arrays = recorded.exported_record(ep)
    n = sum(1 for k in arrays if k.startswith("in:"))
    return Instance("aten::upsample_nearest2d", "torch", call, [TensorSpec.of(arrays[f"in:{i}"]) for i in range(n)],
                    {}, Origin("repo_tests", "t"), 0, arrays)


def test_an_exported_program_is_recorded_and_rebuilt_without_unpickling(tmp_path):
    import torch
    from dlci.models import recorded
    inst = _recorded_exported(dynamic=True)
    assert inst.call["kind"] == "torch_exported" and inst.call["dynamic"] == "recorded"
    assert set(inst.call["parameters"]) == {"conv.weight", "conv.bias"} and "state:offset" in inst.arrays
    assert "upsample_nearest2d.vec" in recorded.exported_targets(recorded.program_json(inst))
    ep = recorded.exported_program(inst)
    assert any("sym_size" in str(n.target) for n in ep.graph.nodes)  # the symbolic batch is kept
    x = torch.from_numpy(inst.arrays["in:0"])
    want = _interpolating_module()(x)
    got = recorded.recorded_module(inst).eval()(x)  # eval() works (torch's stand-in raises)
    assert torch.equal(got, want)
    assert torch.equal(recorded.eager(ep)(torch.ones(5, 2, 4, 5)), _interpolating_module()(torch.ones(5, 2, 4, 5)))


def _tampered(inst: Instance, edit) -> Instance:
    program = json.loads(np.asarray(inst.arrays["program"]).tobytes().decode())
    edit(program)
    arrays = dict(inst.arrays, program=np.frombuffer(json.dumps(program).encode(), dtype=np.uint8).copy())
    return Instance(inst.op, inst.framework, inst.call, inst.inputs, {}, inst.origin, 0, arrays)


def _nodes(program: dict) -> list:
    return program["graph_module"]["graph"]["nodes"]


def test_a_recorded_program_that_holds_code_is_refused():
    from dlci.models import recorded
    inst = _recorded_exported(dynamic=True)

    def os_call(p):
        _nodes(p)[0]["target"] = "torch.os.system"

    def builtin(p):
        _nodes(p)[0]["target"] = "builtins.eval"

    def sympy_code(p):
        for node in _nodes(p):
            for out in node["outputs"]:
                if "as_sym_int" in out:
                    p["graph_module"]["graph"]["sym_int_values"][out["as_sym_int"]["as_name"]] = \
                        {"as_expr": {"expr_str": "__import__('os').system('true')", "hint": None}}
                    return
        raise AssertionError("no symbolic int in the program")

    def custom_object(p):
        _nodes(p)[0]["inputs"][0]["arg"] = {"as_custom_obj": {"name": "obj0", "class_fqn": "x"}}

    def attribute_access(p):
        p["range_constraints"]["s0.__class__"] = {"min_val": 1, "max_val": 2}

    for edit in (os_call, builtin, sympy_code, custom_object, attribute_access):
        with pytest.raises(recorded.UntrustedProgram):
            recorded.exported_program(_tampered(inst, edit))
    # what is dropped, not refused: guard code (compiled into ep.module()) and metadata that resolves names
    cleaned = recorded.check_program(json.loads(np.asarray(_tampered(inst, lambda p: p.update(
        guards_code=["__import__('os').system('true')"])).arrays["program"]).tobytes().decode()))
    assert cleaned["guards_code"] == []
    assert all(set(n.get("metadata", {})) <= {"stack_trace", "nn_module_stack", "torch_fn"} for n in _nodes(cleaned))
    recorded.check_expression("Mul(Integer(2), Symbol('s77', positive=True, integer=True))")
    recorded.check_expression("FloorDiv(s0 + 1, 2)")


def _traced():
    import torch
    import torch.fx

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Upsample(scale_factor=2.0, mode="nearest")
            self.norm = torch.nn.BatchNorm2d(3)

        def forward(self, x):
            y = torch.nn.functional.interpolate(self.norm(x), scale_factor=2.0, mode="bilinear")
            idx = torch.tensor([0, 2])
            return self.up(y)[:, None, 0, ..., :3] + y.shape[0], y[:, idx].mean(dim=-1)

    from dlci.sources.repo_plugin import _capture_constructors, _constructor
    _capture_constructors()  # as the plugin does before the tests build their modules
    torch.manual_seed(0)
    net = Net().eval()
    net.norm.running_mean.uniform_()
    return torch.fx.symbolic_trace(net), _constructor


def test_an_fx_graph_is_recorded_and_rebuilt_node_for_node():
    import torch
    from dlci.models import recorded
    gm, constructor = _traced()
    call, arrays, inputs = recorded.fx_record(gm, [([1, 3, 4, 6], "float32")], constructor)
    assert call["kind"] == "torch_fx" and set(call["modules"]) == {"up", "norm"}
    assert call["modules"]["up"] == {"cls": "torch.nn.Upsample", "args": [],
                                     "kwargs": {"scale_factor": 2.0, "mode": "nearest"}}
    assert [a.shape for a in inputs] == [(1, 3, 4, 6)] and "state:norm.running_mean" in arrays
    arrays = {**arrays, "in:0": inputs[0]}
    inst = Instance("aten::interpolate", "torch", call, [TensorSpec.of(inputs[0])], {}, Origin("repo_tests", "t"), 0,
                    arrays)
    rebuilt = recorded.fx_module(inst)
    assert [n.op for n in rebuilt.graph.nodes] == [n.op for n in gm.graph.nodes]
    x = torch.from_numpy(inputs[0])
    for got, want in zip(rebuilt(x), gm(x)):
        assert torch.equal(got, want)
    targets = recorded.call_targets(inst)
    assert "torch.nn.functional.interpolate" in targets and "torch.nn.Upsample" in targets and "mean" in targets


def test_a_recorded_fx_graph_that_names_anything_but_torch_is_refused():
    from dlci.models import recorded
    gm, constructor = _traced()
    call, _, _ = recorded.fx_record(gm, [([1, 3, 4, 6], "float32")], constructor)
    first = next(i for i, n in enumerate(call["graph"]) if n["op"] == "call_function")
    bad = []
    for field, value in (("target", "torch.os.system"), ("target", "builtins.exec"), ("target", "torch.load"),
                         ("target", "torch.hub.load"), ("target", "torch.nn.modules.module.Module")):
        graph = [dict(n) for n in call["graph"]]
        graph[first] = {**graph[first], field: value}
        bad.append({**call, "graph": graph})
    method = next(i for i, n in enumerate(call["graph"]) if n["op"] == "call_method")
    graph = [dict(n) for n in call["graph"]]
    graph[method] = {**graph[method], "target": "register_hook"}
    bad.append({**call, "graph": graph})
    bad.append({**call, "modules": {**call["modules"], "up": {"cls": "os.system", "args": [], "kwargs": {}}}})
    bad.append({**call, "graph": [*call["graph"][:-1], {"op": "call_function", "name": "g",
                                                         "target": "builtins.getattr",
                                                         "args": [{"$node": "x"}, "__class__"], "kwargs": {}},
                                  call["graph"][-1]]})
    for c in bad:
        with pytest.raises(recorded.UntrustedProgram):
            recorded.check_fx(c)
    with pytest.raises(Unencodable):  # a graph whose leaf module was built before the constructors were captured
        recorded.fx_record(gm, [([1, 3, 4, 6], "float32")], lambda module: None)


def test_a_module_handed_to_an_exporter_is_recorded_as_the_program_torch_export_makes_of_it():
    import torch
    from dlci.models import recorded
    from dlci.sources.repo_plugin import _build
    record, arrays = _build("module", "torch.onnx", {"args": (torch.randn(2, 2, 4, 5),)}, _interpolating_module())
    assert record["call"]["kind"] == "torch_exported" and record["call"]["entry"] == "torch.onnx"
    assert record["framework"] == "torch" and [s["shape"] for s in record["inputs"]] == [[2, 2, 4, 5]]
    inst = Instance("aten::upsample_nearest2d", "torch", record["call"], [TensorSpec.of(arrays["in:0"])], {},
                    Origin("repo_tests", "t"), 0, arrays)
    assert "upsample_nearest2d.vec" in recorded.exported_targets(recorded.program_json(inst))
    x = torch.from_numpy(arrays["in:0"])
    assert torch.equal(recorded.recorded_module(inst)(x), _interpolating_module()(x))
    with pytest.raises(Unencodable):
        _build("module", "torch.onnx", {"args": ()}, object())


def test_records_are_checked_and_named_after_the_touched_operator_they_hold():
    import onnx
    from dlci.models import recorded
    inst = _recorded_exported()
    wanted = rt.Wanted.of([EP_UPSAMPLE])
    record = {"call": dict(inst.call), "arrays": dict(inst.arrays), "seed": 7,
              "test": "/x/tests/python/relax/test_a.py::test_up[case0] (call)"}
    tampered = _tampered(inst, lambda p: _nodes(p)[0].update(target="torch.os.system"))
    hostile = {**record, "arrays": dict(tampered.arrays)}
    foreign = {**record, "call": {"kind": "torch_fn", "fn": "os.system"}}
    model = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 3])]))
    unrelated = {"call": {"kind": "onnx_model", "shape_dict": {}}, "seed": 1, "test": "t",
                 "arrays": {"model": np.frombuffer(model.SerializeToString(), dtype=np.uint8)}}
    cand = rt.Candidate("tests/python/relax/test_a.py", "tests/python/relax/test_a.py::test_up", "test_up", 1, 2, [],
                        "")
    got, dropped = rt.record_instances([record, record, hostile, foreign, unrelated], wanted, {cand.nodeid: cand})
    assert dropped == {"duplicate": 1, "untrusted": 2, "touches-nothing": 1}
    (seed,) = got
    assert seed.op == "aten::upsample_nearest2d" and seed.origin.source == "repo_tests"
    assert seed.origin.test == "tests/python/relax/test_a.py::test_up[case0] (call)".split(" ")[0] + " (call)"
    assert seed.call["nodes"] == len(recorded.exported_targets(recorded.program_json(seed)))
    # an ONNX model's symbolic dims are drawn at 2 where the test gave no shape
    arrays = rt._onnx_inputs(model, {}, 3)
    assert [a.shape for a in arrays] == [(2, 3)] and arrays[0].dtype == np.float32


def test_an_onnx_model_the_checker_refuses_but_the_frontend_takes_is_kept_unless_it_reads_files():
    import onnx
    from onnx import TensorProto, helper
    wanted = rt.Wanted.of([touch("LayerNormalization", "onnx", "LayerNormalization", ("tvm.from_onnx",))])

    def record(node, inits=(), opset=14):
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8])],
                                  [helper.make_tensor_value_info("d", TensorProto.FLOAT, [4, 8])], list(inits))
        model = helper.make_model(graph)
        model.ir_version, model.opset_import[0].version = 8, opset  # as TVM's ONNX tests set every model
        return {"call": {"kind": "onnx_model", "shape_dict": {}}, "seed": 1, "test": "t",
                "arrays": {"model": np.frombuffer(model.SerializeToString(), dtype=np.uint8)}}
    scale = helper.make_tensor("b", TensorProto.FLOAT, [8], [1.0] * 8)
    # LayerNormalization is an opset 17 operator: the checker refuses it under opset 14, TVM and ONNX Runtime run it
    kept = record(helper.make_node("LayerNormalization", ["a", "b"], ["d"], epsilon=1e-5), [scale])
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(onnx.load_model_from_string(kept["arrays"]["model"].tobytes()))
    on_disk = helper.make_tensor("b", TensorProto.FLOAT, [8], np.ones(8, np.float32).tobytes(), raw=True)
    onnx.external_data_helper.set_external_data(on_disk, location="../../etc/passwd")
    on_disk.data_location = TensorProto.EXTERNAL
    on_disk.ClearField("raw_data")
    reads_a_file = record(helper.make_node("LayerNormalization", ["a", "b"], ["d"]), [on_disk])
    made_up = record(helper.make_node("LayerNormalization", ["a", "b"], ["d"], domain="my.ops"), [scale])
    valid_but_reads_a_file = record(helper.make_node("LayerNormalization", ["a", "b"], ["d"]), [on_disk], opset=17)
    got, dropped = rt.record_instances([kept, reads_a_file, made_up, valid_but_reads_a_file], wanted, {})
    assert [i.op for i in got] == ["onnx::LayerNormalization"]
    assert dropped == {"invalid:ValidationError": 1, "external-data": 2}


def test_the_reproducers_of_recorded_programs_rebuild_the_same_model():
    import torch
    from dlci.findings.repro.model_code import MODEL_CODE
    from dlci.models import recorded
    gm, constructor = _traced()
    call, arrays, inputs = recorded.fx_record(gm, [([1, 3, 4, 6], "float32")], constructor)
    fx_inst = Instance("aten::interpolate", "torch", call, [TensorSpec.of(inputs[0])], {}, Origin("r", "t"), 0,
                       {**arrays, "in:0": inputs[0]})
    for inst in (_recorded_exported(dynamic=True), fx_inst):
        code, expr = MODEL_CODE[inst.call["kind"]](inst)
        scope = {"torch": torch, "np": np, "base64": __import__("base64"), "INPUTS": inst.input_arrays()}
        exec(compile(code, "<repro>", "exec"), scope)  # noqa: S102 - code dlci wrote, as the reproducer runs it
        model = eval(expr, scope)  # noqa: S307
        x = torch.from_numpy(inst.input_arrays()[0])
        want = recorded.recorded_module(inst)(x)
        got = model(x)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            assert torch.equal(g, w)


# -- on a repository's head (slow: real pytest runs, real targets) ----------------------------------------------------

def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: the snippet to break is not there once (another release?)"
    path.write_text(text.replace(old, new))


def build_repo(dest: Path, lay_out, edits) -> tuple[Path, str, str]:
    dest.mkdir(parents=True)
    lay_out(dest)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "base")
    base = git(dest, "rev-parse", "HEAD")
    git(dest, "checkout", "-qb", "pr")
    for rel, old, new in edits:
        edit(dest / rel, old, new)
    git(dest, "commit", "-qam", "the pull request")
    return dest, base, git(dest, "rev-parse", "HEAD")


FX = "python/tvm/relax/frontend/torch/fx_translator.py"
EP = "python/tvm/relax/frontend/torch/exported_program_translator.py"
ONNX = "python/tvm/relax/frontend/onnx/onnx_frontend.py"
TVM_EDITS = (
    # the FX importer's interpolation by one scale factor scales every spatial dim by the first one's size
    (FX, """                size = tuple(
                    int(shape[i].value * scale_factor) for i in range(spatial_start, spatial_end)
                )
""", """                scaled = int(shape[spatial_start].value * scale_factor)
                size = tuple(scaled for _ in range(spatial_start, spatial_end))
"""),
    # the exported-program importer takes the per-dim scale factors in the wrong order
    (EP, "int(shape[i].value * scale_factor[i - 2]) for i in range(2, len(shape))",
     "int(shape[i].value * scale_factor[len(shape) - 1 - i]) for i in range(2, len(shape))"),
    # the ONNX importer's Reshape of a computed shape keeps the shape whatever the constant target
    (ONNX, """            if isinstance(new_shape, tvm.ir.GenericConst):
                new_shape_values = new_shape.value.numpy().tolist()
                if new_shape_values == [-1]:
                    return data
""", """            if isinstance(new_shape, tvm.ir.GenericConst):
                # a shape value stays one whatever the constant target: it is 1-D either way
                return data
"""),
)


def _tvm_layout(dest: Path) -> None:
    from dlci import samples
    samples.copy_tvm_python(dest)
    (dest / ".dlci.yml").write_text(samples.DLCI_YML)
    tests = dest / RELAX_TESTS
    tests.mkdir(parents=True)
    for f in FIXTURES.glob("test_*.py"):
        shutil.copy(f, tests / f.name)
    shutil.copy(FIXTURES / "conftest_of_another_release.py", tests / "conftest.py")


def _onnxscript_layout(dest: Path) -> None:
    from dlci import samples
    shutil.copytree(samples.installed_package("onnxscript", "onnxscript", "onnxscript"), dest / "onnxscript",
                    ignore=shutil.ignore_patterns("__pycache__"))
    tests = dest / TORCHLIB_TESTS
    tests.mkdir(parents=True)
    for f in ("extra_opinfo.py", "ops_test_data.py", "e2e_ops_tests.py"):
        shutil.copy(FIXTURES / "onnxscript" / f, tests / f)


def _revisions(repo: Path, base: str, head: str, work: Path):
    """(analysis, config, {label: (checkout, env)}, converter files)."""
    from dlci import profiles
    from dlci.checkout import Checkout
    from dlci.config import CONFIG_FILE
    from dlci.diff import GitRepo
    from dlci.scan import selection
    g = GitRepo(repo, base, head)
    analysis = profiles.analyse(g)
    g.last_diff = analysis.diff
    config = Config.parse(g.text(CONFIG_FILE, "head"))
    checkouts = {}
    for label, sha in (("head", head), ("base", base)):
        co = Checkout.create(repo, sha, work, label)
        co.prepare(config, [profiles.PROFILES[n] for n in analysis.profiles])
        checkouts[label] = (co, co.env(config, *selection.runtime_defaults(analysis.profiles)))
    return g, analysis, config, checkouts, selection.converter_files(analysis)


def _run(pairs, env: dict, trace: tuple[str, ...], log_dir: Path) -> dict:
    """Each (instance, target) through the real target in dlci's sandboxed workers, the converter files traced."""
    from dlci.exec import Job
    from dlci.exec.engine import Engine
    got = {}
    with Engine(workers=2, timeout=180, env=env, log_dir=str(log_dir)) as engine:
        jobs = [Job(id=f"{i.id}|{t}", func="dlci.testcase:execute_job", args=(i, t, trace), op=i.op, instance_id=i.id,
                    target=t) for i, t in pairs]
        engine.run(jobs, lambda job, res: got.__setitem__((job.instance_id, job.target), res))
    return got


@pytest.mark.slow
def test_tvm_repository_tests_seed_the_paths_operator_material_misses_and_the_oracle_catches_them(tmp_path,
                                                                                                    monkeypatch):
    pytest.importorskip("tvm")
    monkeypatch.setenv("DLCI_CACHE_DIR", str(tmp_path / "cache"))  # no earlier scan's word on the conftest.py
    from dlci.scan import coverage
    from dlci.scan.repo_tests import repo_test_seeds
    repo, base, head = build_repo(tmp_path / "repo", _tvm_layout, TVM_EDITS)
    g, analysis, config, revs, converter_files = _revisions(repo, base, head, tmp_path / "work")
    assert {t.operator for t in analysis.touches} >= {"interpolate", "upsample_nearest2d.vec", "Reshape"}
    head_co, head_env = revs["head"]
    report: dict = {}
    seeds = repo_test_seeds(head_co.path, analysis.touches, config, head_env, 120.0, report=report)
    assert report["seconds"] < 120
    chosen = {c["test"].split("::")[-1] for c in report["tests"]["chosen"]}
    assert chosen == {"test_interpolate_scale_factor", "test_upsample_scale_per_dim", "test_reshape_of_a_shape"}
    # the repository's conftest.py errors every test in setup (another release's API): run again without it
    assert rt.setup_broken(report["pytest"]["with_conftest"]), report["pytest"]
    # and the next scan of the same tests, with the same conftest.py files, goes without them at once
    again: dict = {}
    assert len(repo_test_seeds(head_co.path, analysis.touches, config, head_env, 120.0, report=again)) == len(seeds)
    assert again["pytest"].get("conftest_known_broken") and "with_conftest" not in again["pytest"], again["pytest"]
    by_kind = {s.call["kind"]: s for s in seeds}
    assert set(by_kind) == {"torch_fx", "torch_exported", "onnx_model"}, [(s.op, s.call["kind"]) for s in seeds]
    fx, ep, onnx_seed = by_kind["torch_fx"], by_kind["torch_exported"], by_kind["onnx_model"]
    assert fx.op == "aten::interpolate" and fx.inputs[0].shape == [1, 3, 8, 6]
    assert ep.op == "aten::upsample_nearest2d"
    assert ep.call["options"] == {"tvm.from_exported_program": {"run_ep_decomposition": False}}  # as the test did
    assert onnx_seed.op == "onnx::Reshape" and onnx_seed.call["localise"] is True
    assert all(s.origin.source == "repo_tests" and s.origin.test.startswith(RELAX_TESTS) for s in seeds)
    pairs = [(fx, "tvm.from_fx"), (ep, "tvm.from_exported_program"), (onnx_seed, "tvm.from_onnx")]
    trace = tuple(str((head_co.path / f).resolve()) for f in converter_files)
    on_head = _run(pairs, head_env, trace, tmp_path / "logs-head")
    reach = coverage.reach_test(head_co.path, converter_files, g)
    for inst, target in pairs:
        res = on_head[(inst.id, target)]
        assert res["status"] == "inconsistency" and res["symptom"] == "shape mismatch", (target, res)
        assert reach(res.get("coverage") or {}), f"{target}: the seed does not run the changed lines"
    on_base = _run(pairs, revs["base"][1], (), tmp_path / "logs-base")
    assert all(on_base[(i.id, t)]["status"] == "pass" for i, t in pairs), on_base  # the bugs are the PR's
    pickle.dumps(seeds)  # seeds cross process boundaries as every instance does


@pytest.mark.slow
def test_onnxscript_own_opinfos_seed_the_touched_torchlib_function(tmp_path):
    pytest.importorskip("onnxscript")
    from dlci.scan import coverage
    from dlci.scan.repo_tests import repo_test_seeds
    nn_ops = "onnxscript/function_libs/torch_lib/ops/nn.py"
    repo, base, head = build_repo(tmp_path / "repo", _onnxscript_layout, [
        (nn_ops, "    padding_h, padding_w = pads[0], pads[1]\n",
         "    padding_h, padding_w = pads[0], pads[0]  # one padding for both dims\n")])
    g, analysis, config, revs, converter_files = _revisions(repo, base, head, tmp_path / "work")
    assert [t.operator for t in analysis.touches] == ["aten::im2col"]
    head_co, head_env = revs["head"]
    report: dict = {}
    seeds = repo_test_seeds(head_co.path, analysis.touches, config, head_env, 120.0, report=report)
    (drawn,) = report["opinfo"]
    assert drawn["named"] == ["ops.aten.im2col"] and drawn["opinfos"] == ["ops.aten.im2col"]  # softmax: untouched
    samples = [s for s in seeds if s.call["kind"] == "torch_fn"]
    assert len(samples) == 3 and all(s.call["fn"] == "torch.ops.aten.im2col" for s in samples)
    # the end-to-end test of the function (by its name) ran, and the model it exported was recorded; relu's did not
    assert [c["test"].split("::")[-1] for c in report["tests"]["chosen"]] == ["test_im2col_padded_patches"]
    (e2e,) = [s for s in seeds if s.call["kind"] == "torch_exported"]
    assert {s.op for s in seeds} == {"aten::im2col"} and e2e.call["entry"] == "torch.onnx"
    trace = tuple(str((head_co.path / f).resolve()) for f in converter_files)
    pairs = [(s, "onnxscript.torchlib") for s in samples] + [(e2e, "torch.onnx")]
    on_head = _run(pairs, head_env, trace, tmp_path / "logs-head")
    reach = coverage.reach_test(head_co.path, converter_files, g)
    assert all(reach(on_head[(s.id, t)].get("coverage") or {}) for s, t in pairs), on_head
    statuses = [on_head[(s.id, "onnxscript.torchlib")]["status"] for s in samples]
    # the samples with padding (1, 0) and (0, 2) show the bug; the unpadded one cannot
    assert sorted(statuses) == ["inconsistency", "inconsistency", "pass"], on_head
    # the exported model: torch.onnx's strict check refuses what the broken function builds
    assert on_head[(e2e.id, "torch.onnx")]["status"] in ("crash", "inconsistency"), on_head[(e2e.id, "torch.onnx")]
    on_base = _run(pairs, revs["base"][1], (), tmp_path / "logs-base")
    assert all(on_base[(s.id, t)]["status"] == "pass" for s, t in pairs), on_base
