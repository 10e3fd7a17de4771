"""Standalone reproducers: one short script per finding that needs only the frameworks under test.

The script builds the single-operator model, runs the target's own entry point, compares with the reference and
exits 1 while the bug reproduces (printing a line with ``REPRODUCED``), 0 once it is fixed:

- the reference is the one the campaign judged by, embedded as arrays: computed here by the very functions
  dlci.testcase runs (:func:`~dlci.findings.repro.checks.judged_reference`: the eager framework output and its fp64
  recomputation, or the exported model's outputs for a target reached through an exporter), never recomputed another
  way;
- the comparison is the check the finding's symptom needs, pasted from dlci.oracles.compare (``inspect.getsource``)
  with the campaign's tolerances filled in: a value mismatch gets the tolerance and fp64 arbitration check, a NaN/Inf
  mismatch the class check, a dtype or shape mismatch one comparison, a crash none (the same exception type and
  message; a hard crash: the same signal, hang or exit, in a child process).

So the script reaches the campaign's verdict on the same target output by construction, and stays short.

The package: :mod:`~dlci.findings.repro.literals` (values as Python literals), :mod:`~dlci.findings.repro.model_code`
(the single-operator model), :mod:`~dlci.findings.repro.checks` (the reference and the check); here the rendering
(:func:`render`, :func:`render_repro`, :func:`render_skeleton`) and the running (:func:`check_repro`).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2

from dlci.exec import cancel
from dlci.findings.repro.checks import comparison, crash_exception
from dlci.findings.repro.literals import array_code, py_str
from dlci.findings.repro.model_code import FRAMEWORK_IMPORTS, MODEL_CODE
from dlci.instance import Instance

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def template_env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined)


def code_env() -> jinja2.Environment:
    """The reproducers' templates: block tags on their own lines leave no blank line behind; ``pyrepr`` writes a
    Python literal."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["pyrepr"] = lambda v: py_str(v) if isinstance(v, str) else repr(v)
    return env


# -- rendering ---------------------------------------------------------------------------------------------------------

def import_block(lines) -> str:
    """One sorted import block: the standard library's, then the third-party ones (plain imports first)."""
    lines = sorted({ln.strip() for ln in lines if ln.strip()}, key=lambda ln: (ln.startswith("from "), ln))
    std = [ln for ln in lines if ln.split()[1].split(".")[0] in sys.stdlib_module_names]
    rest = [ln for ln in lines if ln not in std]
    return "\n".join(std) + ("\n\n" if std and rest else "") + "\n".join(rest)


def _block(template: jinja2.Template, name: str, values: dict) -> str:
    if name not in template.blocks:
        return ""
    return "".join(template.blocks[name](template.new_context(values))).strip("\n")


def _defines(code: str) -> bool:
    return any(ln.startswith(("def ", "class ")) for ln in code.splitlines())


def join_sections(sections: list[str]) -> str:
    """Top-level code sections, two blank lines around those that define functions or classes, one elsewhere."""
    sections = [s.strip("\n") for s in sections if s.strip()]
    out = sections[:1]
    for prev, cur in zip(sections, sections[1:]):
        out.append(("\n\n\n" if _defines(prev) or _defines(cur) else "\n\n") + cur)
    return "".join(out)


AS_TORCH = '''def as_torch(x):
    """numpy has no bfloat16: ml_dtypes' arrays reach torch through float32, which holds them exactly."""
    return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16) if x.dtype.name == "bfloat16" else torch.tensor(x)'''


RUN_SESSION = '''def run_session(session, xs):
    """ONNX Runtime on the inputs. Its Python binding reads no numpy bfloat16: such arrays cross as OrtValues of their
    16-bit patterns (and come back as ml_dtypes.bfloat16); a complex array goes to a float input as (real,
    imaginary) pairs, the way torch.onnx writes complex tensors."""
    feeds = {}
    for i, x in zip(session.get_inputs(), xs):
        if x.dtype.kind == "c" and i.type in ("tensor(float)", "tensor(double)"):
            x = np.stack([x.real, x.imag], axis=-1).astype(np.float32 if i.type == "tensor(float)" else np.float64)
        feeds[i.name] = x
    if not any(x.dtype.name == "bfloat16" for x in feeds.values()) and \\
            not any(o.type == "tensor(bfloat16)" for o in session.get_outputs()):
        return session.run(None, feeds)
    import ctypes

    from onnx import TensorProto
    values = {n: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(x).view(np.uint16),
                                                                 TensorProto.BFLOAT16)
              if x.dtype.name == "bfloat16" else ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))
              for n, x in feeds.items()}
    outputs = []
    for v in session.run_with_ort_values(None, values):
        if v.data_type() != "tensor(bfloat16)":
            outputs.append(np.asarray(v.numpy()))
            continue
        shape = v.shape()
        n = int(np.prod(shape)) if shape else 1
        bits = np.frombuffer((ctypes.c_uint16 * n).from_address(v.data_ptr()), np.uint16) if n else \\
            np.zeros(0, np.uint16)
        outputs.append(bits.copy().reshape(shape).view(ml_dtypes.bfloat16))
    return outputs'''


def _with_helpers(inst: Instance, run: str, code: str) -> tuple[str, str]:
    """The run snippet and model code with the helpers the reproducer needs standalone: bfloat16 arrays into torch
    (``as_torch``), ONNX Runtime fed as dlci's workers feed it (``run_session``, as dlci.targets.onnxruntime.ort_run
    does)."""
    if any(x.dtype.name == "bfloat16" for x in inst.input_arrays()):
        run = run.replace("torch.tensor(x)", "as_torch(x)")  # torch.tensor cannot read ml_dtypes' bfloat16
        code = AS_TORCH + "\n\n\n" + code
    if "run_session(" in run:
        code = RUN_SESSION + "\n\n\n" + code
    return run, code


def _data_section(inputs: list[str], check: dict) -> str:
    lines = [f"INPUTS = [{inputs[0]}]"] if len(inputs) == 1 else \
        ["INPUTS = ["] + [f"    {x}," for x in inputs] + ["]"]
    if check["check"] in ("values", "integers", "classes"):
        which = f" for output {check['index']}" if check["n_outputs"] > 1 else ""
        lines += [f"# the campaign's reference{which}: {check['note']}", f"EXPECTED = {check['expected']}",
                  f"EXPECTED64 = {check['expected64'] or 'None'}"]
        if check["check"] == "values":
            lines.append(f"TOLERANCE = {check['tolerance']}  # the campaign's, for this dtype")
    elif check["check"] == "compare":
        lines += [f"# the campaign's reference: {check['note']}", f"EXPECTED = [{', '.join(check['expected'])}]",
                  "EXPECTED64 = " + ("None" if check["expected64"] is None else f"[{', '.join(check['expected64'])}]")]
    return "\n".join(lines)


def _keeps_params(inst: Instance) -> bool:
    """An ONNX case marked to be imported with its initializers kept as inputs (dlci.models.onnx_keeps_params)."""
    if inst.call["kind"] != "onnx_model":
        return False
    from dlci.models.rebuild import onnx_call
    from dlci.models import onnx_keeps_params
    return onnx_keeps_params(onnx_call(inst)[0])


def _tflite_order(inst: Instance, target_name: str) -> list[int] | None:
    """The output permutation dlci.testcase applies for this target (a keras model's outputs through TFLite)."""
    from dlci import models
    from dlci.targets import get
    try:
        return models.keras_output_order(inst) if get(target_name).tflite_outputs else None
    except Exception:  # noqa: BLE001 - no TFLite form: nothing was reordered
        return None


def target_options(inst: Instance, target: str) -> dict:
    """The entry-point options an instance carries for ``target`` (dlci.targets.base.Target.options)."""
    return dict(((inst.call.get("options") or {}).get(target)) or {})


def call_values(inst: Instance, target: str) -> dict:
    """What the snippet of a target consuming the ``aten_call`` form needs (onnxscript.torchlib): the overload the
    instance's call is (dlci.models.aten_call), its arguments as source text over the inputs ``x0, x1...``, and
    those names."""
    from dlci.findings.repro.model_code import call_arguments
    from dlci.targets import TARGETS
    names = ", ".join(f"x{i}" for i in range(len(inst.inputs)))
    empty = dict(operator=inst.op, overload="default", call_args="", input_names=names)
    if inst.call.get("kind") != "torch_fn" or getattr(TARGETS.get(target), "form", "") != "aten_call":
        return empty
    from dlci.models import FormUnavailable, build
    try:
        call = build(inst, "aten_call")
    except FormUnavailable:
        return empty
    return dict(operator=call.packet, overload=call.overload, call_args=call_arguments(call.args, call.kwargs),
                input_names=names)


def render_text(finding, inst: Instance, template: str | None = None) -> str:
    """The reproducer's source. ``template``: the target's snippet (blocks ``imports`` and ``run``; default
    ``targets/<target>.j2``)."""
    env = code_env()
    snippet = env.get_template(template or f"targets/{finding.target}.j2")
    # a snippet sets module_as_leaf when its entry point treats a standard torch.nn submodule apart (torch.fx)
    leaf = bool(getattr(snippet.make_module({"framework": inst.framework, "model": "", "n_outputs": 1,
                                             "dynamic_shapes": "", "keep_params": False, "device": "",
                                             "options": {}, **call_values(inst, finding.target)}),
                        "module_as_leaf", False))
    code, model = MODEL_CODE[inst.call["kind"]](inst, leaf=leaf)
    check = comparison(finding, inst, finding.target)
    from dlci.models import dynamic_shapes_code
    options = target_options(inst, finding.target)
    values = dict(framework=inst.framework, model=model, n_outputs=check.get("n_outputs", 1),
                  dynamic_shapes=dynamic_shapes_code(inst),
                  keep_params=_keeps_params(inst) or bool(options.get("keep_params_in_input")),
                  device=finding.extra.get("device", ""),  # a device target's: the device the campaign ran on
                  options=options, **call_values(inst, finding.target))
    run = _block(snippet, "run", values)
    order = _tflite_order(inst, finding.target)
    if order:
        run += f"\noutputs = [outputs[k] for k in {order}]  # the converter reordered the keras model's outputs"
    run, code = _with_helpers(inst, run, code)
    inputs = [array_code(x) for x in inst.input_arrays()]
    sections = [_data_section(inputs, check), code, check.get("oracle_code", "")]
    body = join_sections(sections)
    imports = ["import numpy as np", *FRAMEWORK_IMPORTS[inst.framework],
               *_block(snippet, "imports", values).splitlines()]
    if "json." not in body + run:
        imports = [ln for ln in imports if ln != "import json"]  # a keras layer's config needs it, an op call not
    if "ml_dtypes." in body + run:
        imports.append("import ml_dtypes")
    if "base64." in body + run:
        imports += ["import base64", "import io"]
    if "importlib.util." in body:
        imports.append("import importlib.util")
    if check["check"] == "process":
        imports += ["import subprocess", "import sys"]
    if "onnx.parser." in body:  # binds onnx too
        imports = [ln for ln in imports if ln != "import onnx"] + ["import onnx.parser"]
    origin = inst.origin.test + (f" ({inst.origin.library})" if inst.origin.library else "")
    check.setdefault("exception", crash_exception(finding))
    return env.get_template("repro.py.j2").render(
        f=finding, inst=inst, origin=origin, imports=import_block(imports), body=body,
        spaced=_defines([s for s in sections if s.strip()][-1]), run=run, **check)


def render(target, finding, inst: Instance, repro_dir: Path) -> Path:
    """The target's standalone reproducer of the finding: its own script where it writes one (``render_repro``, an
    equivalence rule's), else the generic single-operator script with its snippet (``repro_template``)."""
    own = getattr(target, "render_repro", None)
    if own is not None:
        return own(finding, inst, repro_dir)
    return render_repro(finding, inst, repro_dir, template=target.repro_template())


def render_repro(finding, inst: Instance, repro_dir: Path, template: str | None = None) -> Path:
    """Write repro/<finding id>_<target>_<op>.py and return its path."""
    safe_op = re.sub(r"[^A-Za-z0-9_]+", "_", finding.operator).strip("_")
    path = Path(repro_dir) / f"{finding.id}_{finding.target.replace('.', '_')}_{safe_op}.py"
    path.write_text(render_text(finding, inst, template), encoding="utf-8")
    return path


# -- running ---------------------------------------------------------------------------------------------------------

def scrubbed_env(overrides: dict | None = None) -> dict:
    """Untrusted code never sees tokens or runner secrets. ``overrides``: the revision's environment (PR mode)."""
    from dlci.exec.engine import is_secret_name
    env = {**os.environ, **{k: str(v) for k, v in (overrides or {}).items()}}
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def test_env(overrides: dict | None = None) -> dict:
    """The environment a reproducer is checked in: the very one its tests ran in (dlci.exec.engine.worker_env:
    the revision's paths first, the same threads and settings, no secrets), so that a check never drops a finding
    because it ran elsewhere."""
    from dlci.exec.engine import worker_env
    return worker_env(overrides)


def check_repro(path: Path, timeout: float = 600, env: dict | None = None, log_suffix: str = ".log",
                warm=None) -> bool:
    """Run the reproducer alone: True when it exits 1 (reproduces). ``warm`` (a dlci.findings.warm.WarmPool in the
    same environment): first in a child of a warm interpreter, whose "reproduces" is taken; anything else is decided
    in a fresh interpreter."""
    path = Path(path).resolve()  # it runs from its own folder: a relative path would not find it there
    if warm is not None:
        got = warm.run(path, min(timeout, 120.0))  # a fork gone wrong must not cost the whole budget
        if got is not None and got.returncode == 1 and "REPRODUCED" in got.stdout:
            path.with_suffix(log_suffix).write_text(f"exit 1 (a child of a warm interpreter)\n--- stdout\n"
                                                    f"{got.stdout}\n--- stderr\n{got.stderr[-20000:]}")
            return True
    try:
        proc = cancel.run([sys.executable, str(path)], timeout=timeout,
                          cwd=str(path.parent), env=test_env(env))
    except subprocess.TimeoutExpired:
        path.with_suffix(log_suffix).write_text(f"timed out after {timeout} s\n")
        return False
    path.with_suffix(log_suffix).write_text(f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n"
                                        f"{proc.stderr[-20000:]}")
    return proc.returncode == 1 and "REPRODUCED" in proc.stdout


def why_not_reproduced(log: str) -> str:
    """One line from a reproducer's log (check_repro) saying why it did not reproduce: it ran to the end and agreed
    with the reference, or it timed out, or the script itself failed (and where)."""
    if log.startswith("timed out"):
        return log.strip().splitlines()[0]
    head, _, rest = log.partition("\n--- stdout\n")
    stdout, _, stderr = rest.partition("\n--- stderr\n")
    said = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    errors = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith((" ", "\t"))]
    code = head.strip()
    if code == "exit 0":
        return f"ran to the end without the failure: {said[-1][:200] if said else 'no output'}"
    if errors:
        return f"the script failed ({code}): {errors[-1][:200]}"
    return f"{code}: {said[-1][:200] if said else 'no output'}"


def render_skeleton(inst: Instance, target: str, goal: str, hint: str = "") -> str:
    """A test the maintainer can complete: the instance that came closest to a changed line the scan never reached,
    built and run through ``target`` as its reproducer would, with the goal and what to change said where the
    inputs are (``goal``: where and which way, e.g. "x.py:120 `if axis < 0` true"; ``hint``: how close it came)."""
    env = code_env()
    snippet = env.get_template(f"targets/{target}.j2")
    leaf = bool(getattr(snippet.make_module({"framework": inst.framework, "model": "", "n_outputs": 1,
                                             "dynamic_shapes": "", "keep_params": False, "device": "",
                                             "options": {}, **call_values(inst, target)}),
                        "module_as_leaf", False))
    code, model = MODEL_CODE[inst.call["kind"]](inst, leaf=leaf)
    from dlci.models import dynamic_shapes_code
    options = target_options(inst, target)
    values = dict(framework=inst.framework, model=model, n_outputs=1, dynamic_shapes=dynamic_shapes_code(inst),
                  keep_params=_keeps_params(inst) or bool(options.get("keep_params_in_input")), device="",
                  options=options, **call_values(inst, target))
    run = _block(snippet, "run", values)
    run, code = _with_helpers(inst, run, code)
    inputs = [array_code(x) for x in inst.input_arrays()]
    data = [f"INPUTS = [{inputs[0]}]"] if len(inputs) == 1 else ["INPUTS = ["] + [f"    {x}," for x in inputs] + ["]"]
    body = join_sections(["\n".join(data), code])
    imports = ["import numpy as np", *FRAMEWORK_IMPORTS[inst.framework],
               *_block(snippet, "imports", values).splitlines()]
    if "ml_dtypes." in body + run:
        imports.append("import ml_dtypes")
    if "base64." in body + run:
        imports += ["import base64", "import io"]
    if "onnx.parser." in body:
        imports = [ln for ln in imports if ln != "import onnx"] + ["import onnx.parser"]
    name = re.sub(r"\W+", "_", inst.op.split("::")[-1]).strip("_").lower() or "operator"
    header = (f'"""dlci: a test to complete. No instance reached {goal} (through {target}).\n\n'
              f"The closest was {inst.origin.test}{f' ({hint})' if hint else ''}: it is built and run below.\n"
              'Change its inputs or arguments so that the line above runs, and compare the outputs with the\n'
              'framework\'s own (the reproducers dlci writes show how)."""\n')
    run_lines = "\n".join("    " + ln if ln else ln for ln in run.splitlines())
    return (header + import_block(imports) + "\n\n" + body + "\n\n\n"
            f"def test_{name}_reaches_the_change():\n"
            "    # TODO: adjust INPUTS or the call's arguments above to take the branch named in the docstring\n"
            f"{run_lines}\n")
