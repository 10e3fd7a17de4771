"""onnxscript.torchlib: torchlib's function for an ATen overload called directly (form aten_call), against the
installed onnxscript and against a real copy of it with one function's registration taken out."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dlci import models
from dlci.findings.repro import render
from dlci.models.aten_call import aten_call
from dlci.outcome import CRASH, PASS, UNSUPPORTED
from dlci.targets import get
from dlci.testcase import execute
from tests.test_models_targets import torch_fn
from tests.test_repro import finding_of, run_alone

RNG = np.random.default_rng(3)


def test_the_form_names_the_overload_torch_resolves_for_the_arguments():
    x, y = RNG.standard_normal((3, 4), dtype=np.float32), RNG.standard_normal((3, 4), dtype=np.float32)
    assert aten_call(torch_fn("torch.add", [x, y])).qualified == "aten::add.Tensor"
    assert aten_call(torch_fn("torch.pow", [x], args=[{"$t": 0}, 2.0])).qualified == "aten::pow.Tensor_Scalar"
    div = aten_call(torch_fn("torch.div", [x, y], kwargs={"rounding_mode": "floor"}))
    assert div.qualified == "aten::div.Tensor_mode"
    chunk = aten_call(torch_fn("torch.chunk", [x], args=[{"$t": 0}, 2, 1]))
    assert chunk.qualified == "aten::chunk" and [s.shape for s in chunk.outputs[0].items] == [[3, 2], [3, 2]]


def test_a_library_call_with_arguments_of_its_own_is_the_one_overload_it_runs():
    """F.interpolate and F.max_pool2d(return_indices=True) take arguments no ATen overload of their own name takes:
    the form is the one overload the call dispatches to, with its arguments over the instance's inputs."""
    x = RNG.standard_normal((1, 2, 3, 4, 4), dtype=np.float32)
    up = aten_call(torch_fn("torch.nn.functional.interpolate", [x], kwargs={"scale_factor": 2.0, "mode": "trilinear"},
                            op="aten::interpolate"))
    assert up.qualified == "aten::upsample_trilinear3d" and up.args[:2] == [{"$t": 0}, [6, 8, 8]]
    y = RNG.standard_normal((1, 2, 4, 4), dtype=np.float32)
    pool = aten_call(torch_fn("torch.nn.functional.max_pool2d", [y], args=[{"$t": 0}, 2],
                              kwargs={"return_indices": True}))
    assert pool.qualified == "aten::max_pool2d_with_indices" and len(pool.outputs) == 2
    # a call running several ATen operators is none of them
    inst = torch_fn("torch.nn.functional.normalize", [y], op="aten::normalize")
    with pytest.raises(models.FormUnavailable, match="no one ATen overload"):
        models.build(inst, "aten_call")


def test_installed_torchlib_runs_softplus_like_torch():
    x = RNG.standard_normal((4, 5), dtype=np.float32) * 10
    o = execute(torch_fn("torch.nn.functional.softplus", [x], kwargs={"beta": 2, "threshold": 3.0}),
                "onnxscript.torchlib")
    assert o.status == PASS, o.message


def test_an_input_type_outside_the_signature_is_unsupported_not_a_crash():
    """torch.onnx casts integer inputs of div before torchlib's aten_div (TFloat) sees them."""
    x = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    o = execute(torch_fn("torch.div", [x, x]), "onnxscript.torchlib")
    assert o.status == UNSUPPORTED and "outside TFloat" in o.message, o.message


def test_a_real_torchlib_bug_reproduces_alone(tmp_path):
    """torchlib 0.7.2's aten_chunk splits into `chunks` outputs where torch returns fewer (chunks > the size)."""
    x = RNG.standard_normal((2, 3), dtype=np.float32)
    inst = torch_fn("torch.chunk", [x], args=[{"$t": 0}, 5, 1])
    o = execute(inst, "onnxscript.torchlib")
    assert o.status == CRASH and "returns 5 values, torch 3 tensor(s)" in o.message, o.message
    f = finding_of(inst, "onnxscript.torchlib", outcome=o)
    code, out, err = run_alone(render(get(f.target), f, inst, tmp_path))
    assert code == 1 and "REPRODUCED" in out, (out, err[-2000:])


@pytest.mark.slow
def test_a_checkout_without_the_registration_says_unsupported(tmp_path):
    """A real copy of onnxscript whose aten::softplus registration is deleted, first on the workers' path: the
    target reads the checkout's registry (support removed is then the scan's finding, new in the PR)."""
    installed = Path(importlib.util.find_spec("onnxscript").origin).parent
    shutil.copytree(installed, tmp_path / "onnxscript", ignore=shutil.ignore_patterns("__pycache__"))
    nn = tmp_path / "onnxscript" / "function_libs" / "torch_lib" / "ops" / "nn.py"
    text = nn.read_text()
    assert '@torch_op("aten::softplus")\n' in text
    nn.write_text(text.replace('@torch_op("aten::softplus")\n', ""))
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, sys, numpy as np\n"
        "import onnxscript\n"
        "from dlci.targets import get\n"
        "from dlci.testcase import execute\n"
        "from tests.test_models_targets import torch_fn\n"
        "x = np.linspace(-3, 3, 12, dtype=np.float32)\n"
        "o = execute(torch_fn('torch.nn.functional.softplus', [x]), 'onnxscript.torchlib')\n"
        "print(json.dumps({'file': onnxscript.__file__, 'status': o.status, 'message': o.message}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parent.parent)])}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(tmp_path)), got
    assert got["status"] == UNSUPPORTED and "registers no function for aten::softplus" in got["message"], got


@pytest.mark.slow
def test_of_an_operators_several_functions_the_first_whose_signature_takes_the_inputs_runs(tmp_path):
    """A checkout that registers a float function and an int function for one operator (torchlib's floor_divide
    before the two were merged): integer inputs run the int one, as torchlib's type-based dispatch chose; a PR
    that deletes the int function leaves integer inputs outside every signature (unsupported: support removed),
    and the reproducer of the same call says the same."""
    installed = Path(importlib.util.find_spec("onnxscript").origin).parent
    shutil.copytree(installed, tmp_path / "onnxscript", ignore=shutil.ignore_patterns("__pycache__"))
    core = tmp_path / "onnxscript" / "function_libs" / "torch_lib" / "ops" / "core.py"
    text = core.read_text()
    merged = '@torch_op("aten::floor_divide", trace_only=True)\ndef aten_floor_divide(self: TTensor, other: TTensor)'
    assert merged in text
    float_first = ('@torch_op("aten::floor_divide", trace_only=True)\n'
                   'def aten_floor_divide_float(self: TFloat, other: TFloat) -> TFloat:\n'
                   '    return op.Floor(op.Div(self, other))\n\n\n')
    core.write_text(text.replace(merged, float_first + merged.replace("TTensor", "TInt")))
    # the registry as torchlib's of 2024 kept it: every real function of an operator (0.7 keeps the first only)
    registration = core.parent.parent / "registration.py"
    keeps_one = "            if overloaded_function.overloads:\n"
    assert keeps_one in registration.read_text()
    registration.write_text(registration.read_text().replace(keeps_one, "            if False:\n"))
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, sys, numpy as np\n"
        "from dlci.testcase import execute\n"
        "from tests.test_models_targets import torch_fn\n"
        "x = np.arange(1, 7, dtype=sys.argv[1]).reshape(2, 3)\n"
        "o = execute(torch_fn('torch.floor_divide', [x, x + 1]), 'onnxscript.torchlib')\n"
        "print(json.dumps({'status': o.status, 'message': o.message}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parent.parent)])}

    def probe(dtype):
        proc = subprocess.run([sys.executable, str(script), dtype], capture_output=True, text=True, env=env,
                              timeout=300)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    assert probe("int64")["status"] == PASS and probe("float32")["status"] == PASS
    core.write_text(text.replace(merged, float_first + merged.split("\n", 1)[1]))  # the int one unregistered
    got = probe("int64")
    assert got["status"] == UNSUPPORTED and "outside TFloat" in got["message"], got
    # the reproducer picks the function the same way: OutsideSignature there too
    from dlci.findings import Finding
    from dlci.findings.repro import render_repro  # noqa: F401 - the module renders with the target's template
    x = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    inst = torch_fn("torch.floor_divide", [x, x + 1])
    f = Finding(id="S001", oracle="support", operator=inst.op, target="onnxscript.torchlib", target_version="x",
                symptom="support removed", stage="convert", signature="s", message=got["message"],
                instance_id=inst.id, origin=inst.origin.__dict__, distance={}, traceback="", instances=[inst.id],
                operators=[inst.op], confirmed=True, extra={"exception": "OutsideSignature"})
    path = render(get(f.target), f, inst, tmp_path)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=str(tmp_path))
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout, (proc.stdout, proc.stderr[-2000:])


@pytest.mark.slow
def test_support_removed_is_found_where_base_is_wrong_only_on_negative_integers(tmp_path):
    """Base's int floor_divide truncates (ONNX's integer Div), so it is wrong on a negative quotient; head deletes
    that function and refuses int64. On the drawn inputs, negative ones, base computes wrong values: neither
    revision is right there, and no support-removed finding came of it (a reverted upstream fix was missed on
    such a draw). The same inputs made non-negative, asked on base in the same run, pass there: head's refusal is
    support the PR removed, shown on those inputs."""
    from dlci.campaign import Campaign, RunOptions
    from dlci.outcome import Outcome
    from dlci.scan.attribution import support_removed
    installed = Path(importlib.util.find_spec("onnxscript").origin).parent
    merged = '@torch_op("aten::floor_divide", trace_only=True)\ndef aten_floor_divide(self: TTensor, other: TTensor)'
    float_first = ('@torch_op("aten::floor_divide", trace_only=True)\n'
                   'def aten_floor_divide_float(self: TFloat, other: TFloat) -> TFloat:\n'
                   '    return op.Floor(op.Div(self, other))\n\n\n')
    truncating = ('@torch_op("aten::floor_divide", trace_only=True)\n'
                  'def aten_floor_divide_int(self: TInt, other: TInt) -> TInt:\n'
                  '    return op.Div(self, other)\n\n\n')
    envs = {}
    for side, functions in (("base", float_first + truncating), ("head", float_first)):
        root = tmp_path / side
        shutil.copytree(installed, root / "onnxscript", ignore=shutil.ignore_patterns("__pycache__"))
        core = root / "onnxscript" / "function_libs" / "torch_lib" / "ops" / "core.py"
        text = core.read_text()
        assert merged in text
        unregistered = "def _unused_floor_divide" + merged.split("def aten_floor_divide", 1)[1]
        core.write_text(text.replace(merged, functions + unregistered))
        registration = core.parent.parent / "registration.py"
        keeps_one = "            if overloaded_function.overloads:\n"
        registration.write_text(registration.read_text().replace(keeps_one, "            if False:\n"))
        envs[side] = {"PYTHONPATH": str(root)}
    x = np.array([[-7, 5, -9], [4, -3, 8]], np.int64)
    inst = torch_fn("torch.floor_divide", [x, np.full((2, 3), 2, np.int64)])
    target = "onnxscript.torchlib"
    campaign = Campaign(instances={inst.id: inst}, targets={target: get(target)})
    campaign.record(Outcome(inst.id, inst.op, target, UNSUPPORTED, "convert", "OutsideSignature",
                            "int64 outside TFloat"), None)
    assert campaign.unsupported
    options = RunOptions(out=tmp_path / "out", budget=120.0, workers=1)
    [f] = support_removed(campaign, options, envs["base"], envs["head"], time.monotonic() + 240)
    assert f.symptom == "support removed" and f.new_in_pr and f.operator == inst.op
    twin = campaign.instances[f.instance_id]
    assert f.instance_id != inst.id and twin.origin.test.endswith("(negative values made non-negative)")
    assert (twin.arrays["in:0"] == np.abs(x)).all()
