"""Standalone reproducers: one script per finding that needs only the frameworks under test.

The script rebuilds the single-operator model from the instance's recipe, runs the target's own entry point, and
exits 1 while the bug reproduces (same exception and message, same hard crash, or the same inconsistency under the
very comparison dlci made, embedded from dlci.oracles.compare) and 0 once it is fixed.
"""
from __future__ import annotations

import base64
import inspect
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np

from dlci.exec import cancel
from dlci.instance import Instance, python_literal

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
HARD_CRASHES = ("timeout", "oom")  # plus signal names (SIG*) and "exit N": symptoms that kill the process
INLINE_ELEMENTS = 64  # arrays up to this size are written as literals; larger ones as base64 .npy


def template_env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)


def float_lit(v: float) -> str:
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def _nested_lit(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_nested_lit(x) for x in v) + "]"
    if isinstance(v, float):
        return float_lit(v)
    return repr(v)


def array_code(a: np.ndarray) -> str:
    """Source text rebuilding the array exactly."""
    a = np.asarray(a)
    if a.size <= INLINE_ELEMENTS and a.dtype.kind in "biuf" and a.dtype.name in np.sctypeDict:
        flat = _nested_lit(a.reshape(-1).tolist())
        return f"np.array({flat}, dtype=np.{a.dtype.name}).reshape({tuple(a.shape)!r})"
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    blob = base64.b64encode(buf.getvalue()).decode()
    return f"np.load(io.BytesIO(base64.b64decode({blob!r})))"


def message_key(message: str) -> str:
    """A stable piece of an error message: its first sentence, cut before addresses, long numbers and, when
    enough text is left, before the names of values (which differ between dlci's model and the reproducer's,
    e.g. `inp_0` vs `x0`)."""
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    first = re.split(r"0x[0-9a-fA-F]+|\d{5,}|/tmp/|/root/|site-packages", first)[0]
    first = re.split(r"(?<=[a-z])\.\s", first)[0].strip()
    short = re.split(r"\(|\[|'|\"|`", first)[0].strip()
    return (short if len(short) >= 24 else first)[:100]


# -- model code per recipe kind --------------------------------------------------------------------------

_TORCH_COMMON = '''

def to_torch(inputs):
    return [torch.from_numpy(np.array(x, copy=True)) for x in inputs]


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out.detach().resolve_conj().resolve_neg().numpy()]
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in flatten(o)]
    return []


def reference():
    """Eager PyTorch in float32, and an fp64 recomputation to arbitrate rounding."""
    with torch.no_grad():
        ref = flatten(build_model()(*to_torch(INPUTS)))
        try:
            inputs64 = [t.double() if t.is_floating_point() else t for t in to_torch(INPUTS)]
            ref64 = flatten(build_model().double()(*inputs64))
        except Exception:
            ref64 = None
    return ref, ref64
'''


def _torch_fn_code(inst: Instance) -> str:
    call = inst.call
    names = [f"x{i}" for i in range(len(inst.inputs))]
    args = [python_literal(a) for a in call.get("args", [])]
    kwargs = [f"{k}={python_literal(v)}" for k, v in call.get("kwargs", {}).items()]
    return (f"class Model(torch.nn.Module):\n"
            f"    def forward(self, {', '.join(names)}):\n"
            f"        return {call['fn']}({', '.join(args + kwargs)})\n\n\n"
            f"def build_model():\n    return Model().eval()\n" + _TORCH_COMMON)


def _torch_module_code(inst: Instance) -> str:
    call = inst.call
    names = [f"x{i}" for i in range(len(inst.inputs))]
    ctor = [python_literal(a) for a in call.get("args", [])] + \
        [f"{k}={python_literal(v)}" for k, v in call.get("kwargs", {}).items()]
    fwd = [python_literal(a) for a in call.get("forward_args", [])] + \
        [f"{k}={python_literal(v)}" for k, v in call.get("forward_kwargs", {}).items()]
    state = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")}
    state_code = "{\n" + "".join(f"    {k!r}: {array_code(v)},\n" for k, v in state.items()) + "}"
    return (f"STATE = {state_code}\n\n\n"
            f"class Model(torch.nn.Module):\n"
            f"    def __init__(self):\n        super().__init__()\n        self.m = {call['cls']}({', '.join(ctor)})\n\n"
            f"    def forward(self, {', '.join(names)}):\n        return self.m({', '.join(fwd)})\n\n\n"
            f"def build_model():\n    torch.manual_seed(0)\n    model = Model()\n"
            f"    model.m.load_state_dict({{k: torch.from_numpy(v.copy()) for k, v in STATE.items()}})\n"
            f"    return model.eval()\n" + _TORCH_COMMON)


def onnx_code(inst: Instance) -> str:
    import onnx
    model = onnx.load_from_string(inst.arrays["model"].tobytes())
    text = None
    try:  # the textual form is readable; keep it only when it parses back to the same graph
        import onnx.parser
        import onnx.printer
        candidate = onnx.printer.to_text(model)
        if onnx.parser.parse_model(candidate).graph.node[0].op_type == model.graph.node[0].op_type:
            text = candidate
    except Exception:
        text = None
    if text is not None:
        model_code = f"ONNX_MODEL = onnx.parser.parse_model({text!r})"
    else:
        blob = base64.b64encode(model.SerializeToString()).decode()
        model_code = f"ONNX_MODEL = onnx.load_from_string(base64.b64decode({blob!r}))"
    expected = inst.expected_arrays()
    if expected is not None:
        ref = "EXPECTED = [\n" + "".join(f"    {array_code(e)},\n" for e in expected) + "]\n"
        ref += ("\n\ndef reference():\n    \"\"\"The expected outputs that the ONNX node test ships.\"\"\"\n"
                "    return EXPECTED, None\n")
    else:
        ref = ("\n\ndef reference():\n    from onnx.reference import ReferenceEvaluator\n"
               "    return [np.asarray(o) for o in ReferenceEvaluator(ONNX_MODEL).run(None, "
               "{i.name: x for i, x in zip(ONNX_MODEL.graph.input, INPUTS)})], None\n")
    return model_code + "\n" + ref


def _keras_code(inst: Instance) -> str:
    weights = [inst.arrays[k] for k in sorted((k for k in inst.arrays if k.startswith("weight:")),
                                               key=lambda k: int(k.split(":")[1]))]
    cls = inst.call["cls"]
    config = json.dumps(inst.call.get("config", {}), sort_keys=True)
    n = len(inst.inputs)
    args = python_literal(inst.call.get("args", [{"$t": i} for i in range(n)]))  # tensors named x<i>
    xs = ", ".join(f"x{i}" for i in range(n)) + ("," if n == 1 else "")
    return (f"CONFIG = json.loads({config!r})\n"
            "WEIGHTS = [\n" + "".join(f"    {array_code(w)},\n" for w in weights) + "]\n\n\n"
            "def call_layer(layer, xs):\n"
            f"    ({xs}) = xs\n"
            f"    return layer(*{args})\n\n\n"
            "def build_layer(dtype=None, xs=None):\n"
            f"    config = dict(CONFIG, **({{'dtype': dtype}} if dtype else {{}}))\n"
            f"    layer = {cls}.from_config(config)\n"
            "    call_layer(layer, xs if xs is not None else INPUTS)  # builds the weights\n"
            "    if WEIGHTS:\n"
            "        layer.set_weights([w.astype(dtype) if dtype and w.dtype.kind == 'f' else w for w in WEIGHTS])\n"
            "    return layer\n\n\n"
            "def build_keras_model():\n"
            "    # static batch size: TFLite and OpenVINO then see fully static shapes\n"
            "    ins = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=f'in{i}')\n"
            "           for i, x in enumerate(INPUTS)]\n"
            "    layer = build_layer()\n"
            "    return keras.Model(ins, call_layer(layer, ins))\n\n\n"
            "def keras_to_tflite(model):\n"
            "    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())\n\n\n"
            "def flatten(out):\n"
            "    if isinstance(out, (list, tuple)):\n        return [a for o in out for a in flatten(o)]\n"
            "    return [np.asarray(out)]\n\n\n"
            "def reference():\n"
            "    \"\"\"The layer called eagerly, and an fp64 copy of it to arbitrate rounding.\"\"\"\n"
            "    ref = flatten(call_layer(build_layer(), INPUTS))\n"
            "    try:\n"
            "        xs64 = [x.astype(np.float64) if x.dtype.kind == 'f' else x for x in INPUTS]\n"
            "        ref64 = flatten(call_layer(build_layer('float64', xs64), xs64))\n"
            "        ref64 = ref64 if [r.shape for r in ref64] == [r.shape for r in ref] else None\n"
            "    except Exception:\n"
            "        ref64 = None\n"
            "    return ref, ref64\n")


MODEL_CODE = {"torch_fn": _torch_fn_code, "torch_module": _torch_module_code, "onnx_model": onnx_code,
               "keras_layer": _keras_code}
IMPORTS = {"torch": "import torch", "onnx": "import onnx", "keras": "import json\n\nimport keras\nimport tensorflow as tf"}


def compare_source() -> str:
    from dlci.oracles import compare
    src = inspect.getsource(compare)
    return "\n".join(ln for ln in src.splitlines() if not ln.startswith("from __future__"))


def ignored_for(inst: Instance) -> set[int]:
    from dlci.models import uncompared_outputs
    return uncompared_outputs(inst)


def skip_values_for(inst: Instance) -> set[int]:
    from dlci.models import shape_only_outputs
    return set(shape_only_outputs(inst))


def render_repro(finding, inst: Instance, repro_dir: Path, template: str | None = None) -> Path:
    """Write repro/<finding id>_<target>_<op>.py and return its path. ``template``: the target's snippet defining
    ``run_target(inputs)`` (default ``targets/<target>.j2``)."""
    env = template_env()
    kind = inst.call["kind"]
    imports = IMPORTS[inst.framework]
    inputs_code = "INPUTS = [\n" + "".join(f"    {array_code(x)},\n" for x in inst.input_arrays()) + "]"
    target_code = env.get_template(template or f"targets/{finding.target}.j2").render(framework=inst.framework)
    symptom = finding.symptom or ""
    child = symptom.startswith("SIG") or symptom.startswith("exit") or symptom in HARD_CRASHES
    text = env.get_template("repro.py.j2").render(
        f=finding, inst=inst, imports=imports, inputs_code=inputs_code, model_code=MODEL_CODE[kind](inst),
        target_code=target_code, compare_code=compare_source() if finding.oracle == "inconsistency" else "",
        skip_values=repr(set(skip_values_for(inst))) if skip_values_for(inst) else "set()",
        ignore=repr(set(ignored_for(inst))) if ignored_for(inst) else "set()",
        child_process=child, timeout=300, message_key=message_key(finding.message))
    safe_op = re.sub(r"[^A-Za-z0-9_]+", "_", finding.operator).strip("_")
    path = repro_dir / f"{finding.id}_{finding.target.replace('.', '_')}_{safe_op}.py"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def scrubbed_env(overrides: dict | None = None) -> dict:
    """Untrusted code never sees tokens or runner secrets. ``overrides``: the revision's environment (PR mode)."""
    from dlci.exec.engine import is_secret_name
    env = {**os.environ, **{k: str(v) for k, v in (overrides or {}).items()}}
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def check_repro(path: Path, timeout: float = 600, env: dict | None = None, log_suffix: str = ".log") -> bool:
    """Run the reproducer alone in a fresh interpreter: True when it exits 1 (reproduces)."""
    path = Path(path).resolve()  # it runs from its own folder: a relative path would not find it there
    try:
        proc = cancel.run([sys.executable, str(path)], timeout=timeout,
                          cwd=str(path.parent), env=scrubbed_env(env))
    except subprocess.TimeoutExpired:
        path.with_suffix(log_suffix).write_text(f"timed out after {timeout} s\n")
        return False
    path.with_suffix(log_suffix).write_text(f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n"
                                        f"{proc.stderr[-20000:]}")
    return proc.returncode == 1 and "REPRODUCED" in proc.stdout
