"""The tf2onnx target on real tf2onnx, TensorFlow and ONNX Runtime (no mocks): keras instances converted with
``tf2onnx.convert.from_function``, what it cannot convert, and a broken handler in a tf2onnx-shaped checkout (the
installed release's sources) caught through the checkout's code, with a reproducer that fails there only."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tf2onnx")

from dlci.findings.repro import render  # noqa: E402
from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED  # noqa: E402
from dlci.profiles import PROFILES, registry  # noqa: E402
from dlci.targets import get, reaching  # noqa: E402
from dlci.testcase import execute  # noqa: E402
from tests.standalone import run_without_dlci  # noqa: E402
from tests.test_models_targets import keras_layer  # noqa: E402
from tests.test_repro import finding_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
X = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
SELU = keras_layer("keras.layers.Activation", {"activation": "selu"}, [X])
registry()  # the profiles


def test_keras_activations_pass():
    for inst in (SELU, keras_layer("keras.layers.ELU", {"alpha": 0.5}, [X]),
                 keras_layer("keras.layers.LeakyReLU", {"negative_slope": 0.2}, [X])):
        o = execute(inst, "tf2onnx")
        assert o.status == PASS, (inst.op, o.stage, o.symptom, o.message)


def test_what_tf2onnx_or_ort_cannot_convert_is_unsupported():
    # keras Discretization lowers to tf.Bucketize, for which tf2onnx 1.17 has no handler (it says so in its log)
    o = execute(keras_layer("keras.layers.Discretization", {"bin_boundaries": [0.0, 1.0]}, [X]), "tf2onnx")
    assert o.status == UNSUPPORTED and o.stage == "convert" and "Bucketize" in o.message, (o.status, o.message)
    # tf2onnx writes a float64 Selu, which ONNX Runtime has no kernel for
    o = execute(keras_layer("keras.layers.Activation", {"activation": "selu", "dtype": "float64"},
                            [X.astype(np.float64)]), "tf2onnx")
    assert o.status == UNSUPPORTED and o.stage == "compile" and "NOT_IMPLEMENTED" in o.message, (o.status, o.message)


def test_the_profile_routes_tensorflow_handlers_to_the_target():
    assert reaching("tf2onnx:tf") == ("tf2onnx",)
    assert PROFILES["tf2onnx"].python_path == ("",)


CHILD = """
import json, sys
from dlci.findings.repro import render
from dlci.targets import get
from dlci.testcase import execute
from tests.test_repro import finding_of
from tests.test_tf2onnx import SELU
import tf2onnx
o = execute(SELU, "tf2onnx")
path = render(get("tf2onnx"), finding_of(SELU, "tf2onnx", outcome=o), SELU, __import__("pathlib").Path(sys.argv[1]))
print(json.dumps({"status": o.status, "symptom": o.symptom, "from": tf2onnx.__file__, "repro": str(path)}))
"""


@pytest.mark.slow
def test_a_broken_handler_in_a_checkout_is_caught_through_the_checkouts_code(tmp_path):
    """The installed tf2onnx's sources as a checkout whose Selu handler sets gamma to 1.05 (ONNX Selu's default
    is 1.0507...): run through the target with the checkout first on the path, as a scan's workers run, Selu is a
    value mismatch; the reproducer fails with the checkout and passes on the installed release."""
    import tf2onnx
    checkout = tmp_path / "checkout"
    shutil.copytree(Path(tf2onnx.__file__).parent, checkout / "tf2onnx", ignore=shutil.ignore_patterns("__pycache__"))
    handlers = checkout / "tf2onnx/onnx_opset/math.py"
    text = handlers.read_text()
    old = '@tf_op("Selu")\nclass Selu:\n    @classmethod\n    def version_1(cls, ctx, node, **kwargs):\n        pass\n'
    assert text.count(old) == 1, "the Selu handler of tf2onnx 1.17 is not where this test expects it"
    handlers.write_text(text.replace(old, old.replace("        pass\n", '        node.set_attr("gamma", 1.05)\n')))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["from"] == str(checkout / "tf2onnx/__init__.py")
    assert got["status"] == INCONSISTENT and got["symptom"] == "value mismatch", got
    repro = Path(got["repro"])
    assert run_without_dlci(repro, tmp_path).returncode == 0  # the installed release converts Selu right
    head = dict(os.environ, PYTHONPATH=os.pathsep.join([str(checkout), sysconfig.get_paths()["purelib"]]))
    alone = subprocess.run([sys.executable, "-S", str(repro)], capture_output=True, text=True, env=head,
                           cwd=tmp_path, timeout=300)
    assert alone.returncode == 1 and "REPRODUCED" in alone.stdout, (alone.stdout, alone.stderr[-2000:])


def test_the_reproducer_runs_tf2onnx_alone(tmp_path):
    o = execute(SELU, "tf2onnx")
    assert o.status == PASS
    path = render(get("tf2onnx"), finding_of(SELU, "tf2onnx", outcome=o), SELU, tmp_path)
    proc = run_without_dlci(path, tmp_path)
    assert proc.returncode == 0 and "no longer reproduces" in proc.stdout, (proc.stdout, proc.stderr[-3000:])
    assert "from_function" in path.read_text()
