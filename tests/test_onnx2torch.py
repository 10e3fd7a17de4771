"""The onnx2torch target on real onnx2torch, real torch and ONNX's own node tests (no mocks), and a scan of an
onnx2torch-shaped pull request built from the installed release's sources whose head breaks one converter."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

if importlib.util.find_spec("onnx2torch") is None:  # found, not imported: it may need the target's loader here
    pytest.skip("onnx2torch is not installed", allow_module_level=True)

from dlci import samples  # noqa: E402
from dlci.exec import origins  # noqa: E402
from dlci.exec.engine import worker_env  # noqa: E402
from dlci.findings.repro import render  # noqa: E402
from dlci.models.onnx_io import load_onnx  # noqa: E402
from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED  # noqa: E402
from dlci.profiles import PROFILES, registry  # noqa: E402
from dlci.targets import get, reaching  # noqa: E402
from dlci.targets import onnx2torch as target_module  # noqa: E402
from dlci.testcase import execute  # noqa: E402
from tests.standalone import run_without_dlci  # noqa: E402
from tests.test_models_targets import onnx_node  # noqa: E402
from tests.test_repro import finding_of  # noqa: E402

SAMPLE = "onnx2torch-leakyrelu-default"
registry()  # the profiles


@pytest.fixture(scope="module")
def node_tests():
    """ONNX's backend node tests (with their expected outputs) of a few operators, as dlci's onnx_node source
    gives them."""
    from dlci import sources as S
    S.registry()
    wanted = {"onnx::LeakyRelu", "onnx::Elu", "onnx::Det"}
    return [i for i in S.load("onnx_node") if i.op in wanted]


def test_node_tests_of_a_converted_operator_pass(node_tests):
    leaky = [i for i in node_tests if i.op == "onnx::LeakyRelu"]
    assert len(leaky) >= 3  # test_leakyrelu, _default, _example
    for inst in leaky:
        o = execute(inst, "onnx2torch")
        assert o.status == PASS, (inst.id, o.stage, o.symptom, o.message)
        assert {"convert", "run", "compare"} <= set(o.timings)


def test_an_operator_or_opset_without_a_converter_is_unsupported(node_tests):
    """Det has no converter; Elu's node tests are stamped opset 22 (Elu's latest version), and onnx2torch 1.5.15
    registers Elu for version 6 only."""
    cases = [i for i in node_tests if i.op in ("onnx::Det", "onnx::Elu")]
    assert {i.op for i in cases} == {"onnx::Det", "onnx::Elu"}
    for inst in cases:
        o = execute(inst, "onnx2torch")
        assert o.status == UNSUPPORTED and o.stage == "convert", (inst.id, o.status, o.message)
        assert "Converter is not implemented" in o.message and inst.op.split("::")[1] in o.message
    elu = [execute(i, "onnx2torch").message for i in cases if i.op == "onnx::Elu"]
    assert all("version=22" in m for m in elu), elu


def test_a_converters_stated_limit_is_unsupported_and_a_wrong_result_is_not():
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    # onnx2torch converts Selu only at ONNX's default alpha/gamma ("alpha parameter must be 1.67..., not 2.0")
    o = execute(onnx_node("Selu", [x], attrs={"alpha": 2.0}), "onnx2torch")
    assert o.status == UNSUPPORTED and "alpha parameter must be" in o.message, o.message
    # a stored expected output that the converted module does not compute is a finding, never "unsupported"
    wrong = np.where(x > 0, x, 0.1 * x).astype(np.float64)
    o = execute(onnx_node("LeakyRelu", [x.astype(np.float64)], expected=[wrong]), "onnx2torch")
    assert o.status == INCONSISTENT and o.symptom == "value mismatch", (o.status, o.message)


def test_converters_needing_torchvision_are_left_out_only_where_it_does_not_import():
    target = get("onnx2torch")
    package = target_module.load()
    assert hasattr(package, "convert") and "node_converters" in package.__dict__
    nms = onnx_node("NonMaxSuppression", [np.zeros((1, 2, 4), np.float32), np.zeros((1, 1, 2), np.float32)],
                    opset=13)
    try:
        import torchvision  # noqa: F401
        imports = True
    except Exception:  # noqa: BLE001 - PyPI's CUDA torchvision over the CPU torch raises RuntimeError
        imports = False
    assert bool(target_module.LEFT_OUT) == (not imports)
    if imports:
        return
    left = target_module.left_out_operators()
    assert {"NonMaxSuppression", "RoiAlign"} <= set(left)
    assert "LeakyRelu" not in left and "Elu" not in left
    with pytest.raises(target_module.LeftOut) as info:
        target.convert(load_onnx(nms.arrays), [])
    assert "torchvision" in str(info.value) and target.is_unsupported(info.value, "convert")


def test_the_checkout_proof_locates_converter_files_past_an_optional_dependency():
    """What a scan asks before it runs an onnx2torch checkout: where its converter modules come from, in an
    interpreter started as the workers are. With the profile's environment the answer is the file."""
    module = "onnx2torch.node_converters.activations"
    env = dict(PROFILES["onnx2torch"].env)
    answer = origins.ask([module], worker_env(env))[module]
    assert answer.endswith("onnx2torch/node_converters/activations.py"), answer
    if target_module.LEFT_OUT:  # torchvision breaks the package here: without the hint the answer is an error
        plain = {k: v for k, v in os.environ.items() if k != origins.OPTIONAL_ENV}
        assert origins.ask([module], worker_env(plain))[module].startswith("error:")


def test_the_profile_routes_its_touches_to_the_target():
    assert reaching("onnx2torch:converters") == ("onnx2torch",)
    assert PROFILES["onnx2torch"].python_path == ("",)


def test_the_reproducer_runs_onnx2torch_alone(node_tests, tmp_path):
    """A passing node test rendered as a finding's reproducer: it runs onnx2torch without dlci and says the bug
    does not reproduce (exit 0)."""
    inst = next(i for i in node_tests if i.op == "onnx::LeakyRelu")
    path = render(get("onnx2torch"), finding_of(inst, "onnx2torch"), inst, tmp_path)
    proc = run_without_dlci(path, tmp_path)
    assert proc.returncode == 0 and "no longer reproduces" in proc.stdout, (proc.stdout, proc.stderr[-3000:])
    assert "onnx2torch" in path.read_text() and "import dlci" not in path.read_text()


@pytest.mark.slow
def test_a_broken_converter_in_an_onnx2torch_pr_is_found_new_on_its_operator(tmp_path):
    """The sample: onnx2torch's own sources (the installed release) with a head commit that gives LeakyRelu the
    wrong default slope. A scan with the defaults imports the checkout's converters, finds the bug on
    onnx::LeakyRelu through onnx2torch, new in the PR, with a reproducer that fails on head and passes on base."""
    from dlci.cli import main
    out = tmp_path / "out"
    code = main(["scan", "--sample", SAMPLE, "--out", str(out), "--workers", "2", "--budget", "150"])
    doc = json.loads((out / "findings.json").read_text())
    assert code == 1, doc.get("stats")
    findings = doc["findings"]
    assert findings and all(f["operator"] == "onnx::LeakyRelu" and f["target"] == "onnx2torch" for f in findings), \
        [(f["operator"], f["target"], f["signature"]) for f in findings]
    new = [f for f in findings if f["new_in_pr"] is True]
    assert new, findings
    for f in new:
        assert f["symptom"] == "value mismatch" and f["base"]["status"] == "pass"
        assert f["repro_checked"] is True and f["repro_passes_on_base"] is True and f["reaches_change"] is True
    pr = doc["pr"]
    assert pr["operators"] == ["leaky_relu"]
    assert {(t["file"], tuple(t["targets"])) for t in pr["touched"]} == {
        ("onnx2torch/node_converters/activations.py", ("onnx2torch",))}
    # the reproducer is standalone: the installed onnx2torch (the base code) passes it, the PR's head fails it
    repro = out / new[0]["repro"]
    assert run_without_dlci(repro, tmp_path).returncode == 0
    head = dict(os.environ, PYTHONPATH=os.pathsep.join([str(out / "sample-pr"), sysconfig.get_paths()["purelib"]]))
    proc = subprocess.run([sys.executable, "-S", str(repro)], capture_output=True, text=True, env=head, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 1 and "REPRODUCED" in proc.stdout, (proc.stdout, proc.stderr[-2000:])
    assert samples.SAMPLES[SAMPLE].expect_finding
