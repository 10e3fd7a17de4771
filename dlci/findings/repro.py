"""Standalone reproducers: one short script per finding that needs only the frameworks under test.

The script builds the single-operator model, runs the target's own entry point, compares with the reference and
exits 1 while the bug reproduces (printing a line with ``REPRODUCED``), 0 once it is fixed:

- the reference is the one the campaign judged by, embedded as arrays: computed here by the very functions
  dlci.testcase runs (:func:`judged_reference`: the eager framework output and its fp64 recomputation, or the
  exported model's outputs for a target reached through an exporter), never recomputed another way;
- the comparison is the check the finding's symptom needs, pasted from dlci.oracles.compare (``inspect.getsource``)
  with the campaign's tolerances filled in: a value mismatch gets the tolerance and fp64 arbitration check, a NaN/Inf
  mismatch the class check, a dtype or shape mismatch one comparison, a crash none (the same exception type and
  message; a hard crash: the same signal, hang or exit, in a child process).

So the script reaches the campaign's verdict on the same target output by construction, and stays short.
"""
from __future__ import annotations

import base64
import contextlib
import importlib.metadata
import inspect
import io
import json
import os
import re
import signal
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
CHILD_TIMEOUT = 300  # seconds a hard-crash reproducer waits for its child before calling it a hang


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


# -- literals ---------------------------------------------------------------------------------------------------

def py_str(text: str) -> str:
    """A double-quoted Python string literal, as the target repositories write them (JSON's escapes are Python's)."""
    return json.dumps(text, ensure_ascii=False)


def float_lit(v: float) -> str:
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def _element(v, dtype: np.dtype) -> str:
    """One array element as text: floats of a narrow type by their shortest form that round-trips."""
    if isinstance(v, float) and v == v and abs(v) != float("inf") and dtype.name in ("float16", "float32"):
        short = str(getattr(np, dtype.name)(v))
        if getattr(np, dtype.name)(float(short)) == getattr(np, dtype.name)(v):
            return short
    return float_lit(v) if isinstance(v, float) else repr(v)


def nested_literal(v, dtype: np.dtype) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(nested_literal(x, dtype) for x in v) + "]"
    return _element(v, dtype)


def array_code(a: np.ndarray) -> str:
    """Source text rebuilding the array exactly."""
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":  # ml_dtypes' type, which np.save cannot name: its values are exact in float32
        return f"{array_code(a.astype(np.float32))}.astype(ml_dtypes.bfloat16)"
    if a.size <= INLINE_ELEMENTS and a.dtype.kind in "biuf" and a.dtype.name in np.sctypeDict:
        dtype = "bool" if a.dtype.kind == "b" else f"np.{a.dtype.name}"
        if a.ndim == 1 and a.size:
            return f"np.array({nested_literal(a.tolist(), a.dtype)}, dtype={dtype})"
        flat = nested_literal(a.reshape(-1).tolist(), a.dtype)
        return f"np.array({flat}, dtype={dtype}).reshape({tuple(a.shape)!r})"
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


# -- the single-operator model ------------------------------------------------------------------------------------

_TORCH_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def torch_tensor_code(a: np.ndarray) -> str:
    """A torch.tensor literal rebuilding the array exactly (the way PyTorch's and TVM's tests spell values)."""
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return f"{torch_tensor_code(a.astype(np.float32))}.to(torch.bfloat16)"
    if a.dtype.name not in _TORCH_DTYPES or a.size > INLINE_ELEMENTS or 0 in a.shape:
        return f"torch.from_numpy({array_code(a)})"
    values = nested_literal(a.tolist(), a.dtype)
    default = {"f": "float32", "b": "bool", "i": "int64"}.get(a.dtype.kind)  # what torch.tensor infers
    return f"torch.tensor({values}" + ("" if a.dtype.name == default else f", dtype=torch.{a.dtype.name}") + ")"


def _args(values: list, kwargs: dict) -> str:
    return ", ".join([python_literal(a) for a in values] + [f"{k}={python_literal(v)}" for k, v in kwargs.items()])


def _takes_inputs_directly(call: dict, n: int) -> bool:
    """A module whose forward takes exactly the instance's tensors, in order, and nothing else: the model is the
    module itself (as dlci.models.rebuild.torch_call builds it), no wrapper needed."""
    if call.get("forward_kwargs") or call.get("forward_args", []) != [{"$t": i} for i in range(n)]:
        return False
    try:
        from dlci.instance.recipe import resolve
        params = list(inspect.signature(resolve(call["cls"]).forward).parameters.values())[1:]
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    # fx tracing makes a placeholder of every parameter: optional ones need a wrapper that leaves them out
    return len(params) == n and all(p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params)


def torch_model(inst: Instance, class_name: str = "Model", leaf: bool = False) -> tuple[str, str]:
    """(code, expression): code that defines the instance's torch model and the expression that builds it.
    ``leaf``: a torch.nn module always sits inside a wrapper, as dlci.models' fx_graph form has it (fx traces
    through the root module but keeps a standard submodule as one call_module node)."""
    call = inst.call
    names = ", ".join(f"x{i}" for i in range(len(inst.inputs)))
    if call["kind"] == "torch_fn":
        return (f"class {class_name}(torch.nn.Module):\n    def forward(self, {names}):\n"
                f"        return {call['fn']}({_args(call.get('args', []), call.get('kwargs', {}))})\n",
                f"{class_name}()")
    module = f"{call['cls']}({_args(call.get('args', []), call.get('kwargs', {}))})"
    state = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")}
    direct = _takes_inputs_directly(call, len(inst.inputs))
    if direct and not leaf:
        code, expr, holder = "", f"{module}.eval()", "model"
    elif direct and len(inst.inputs) == 1:  # a one-input module as a submodule: Sequential is that wrapper
        code, expr, holder = "", f"torch.nn.Sequential({module}).eval()", "model[0]"
    else:
        fwd = _args(call.get("forward_args", []), call.get("forward_kwargs", {}))
        code = (f"class {class_name}(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                f"        self.m = {module}\n\n    def forward(self, {names}):\n        return self.m({fwd})\n")
        expr, holder = f"{class_name}().eval()", "model.m"
    if not state:
        return code, expr
    entries = "".join(f"    {py_str(k)}: {torch_tensor_code(v)},\n" for k, v in state.items())
    code += ("\n\n" if code else "") + f"model = {expr}\n{holder}.load_state_dict({{\n{entries}}}, strict=False)\n"
    return code, "model"


def onnx_text(model) -> str | None:
    """The model's textual form when it parses back to the same graph (the most readable form), else None. Who
    produced the model and its doc strings are left out: they change nothing it computes."""
    try:
        import onnx.parser
        import onnx.printer
        bare = type(model)()
        bare.CopyFrom(model)
        for field in ("producer_name", "producer_version", "doc_string", "metadata_props"):
            bare.ClearField(field)
        bare.graph.ClearField("doc_string")
        for node in bare.graph.node:
            node.ClearField("doc_string")
            node.ClearField("metadata_props")
        text = onnx.printer.to_text(bare)
        back = onnx.parser.parse_model(text)
        if [n.op_type for n in back.graph.node] == [n.op_type for n in model.graph.node] and \
                len(back.graph.input) == len(model.graph.input):
            return text
    except Exception:
        return None
    return None


def onnx_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    import onnx
    model = onnx.load_from_string(inst.arrays["model"].tobytes())
    text = onnx_text(model)
    if text is not None:
        return f'model = onnx.parser.parse_model("""\n{text.strip()}\n""")\n', "model"
    blob = base64.b64encode(model.SerializeToString()).decode()
    return f"model = onnx.load_from_string(base64.b64decode({blob!r}))\n", "model"


def keras_model(inst: Instance, leaf: bool = False, inputs: str = "INPUTS") -> tuple[str, str]:
    """The layer from its config with its weights, in a Keras model with static input shapes (as dlci.models
    builds the keras_model form); ``layer`` is the layer itself, ``inputs`` names the input arrays. A ``tf_fn``
    recipe: a layer class making the op call."""
    if inst.call["kind"] == "tf_fn":
        return tf_fn_model(inst, inputs)
    weights = [inst.arrays[k] for k in sorted((k for k in inst.arrays if k.startswith("weight:")),
                                               key=lambda k: int(k.split(":")[1]))]
    n = len(inst.inputs)
    config = json.dumps(inst.call.get("config", {}), sort_keys=True)
    args = inst.call.get("args")
    unpack = ""
    if args is None or args == [{"$t": i} for i in range(n)]:
        call = "layer(*inputs)"
    else:
        unpack = ", ".join(f"x{i}" for i in range(n)) + ("," if n == 1 else "") + " = inputs\n"
        call = f"layer({', '.join(python_literal(a) for a in args)})"
    code = (f"layer = {inst.call['cls']}.from_config(json.loads({config!r}))\n"
            "inputs = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=f\"in{i}\")\n"
            f"          for i, x in enumerate({inputs})]\n" + unpack +
            f"model = keras.Model(inputs, {call})\n")
    if weights:
        code += "layer.set_weights([" + ", ".join(array_code(w) for w in weights) + "])\n"
    return code, "model"


def tf_fn_model(inst: Instance, inputs: str = "INPUTS") -> tuple[str, str]:
    """One TensorFlow op call as a keras layer in a model with static input shapes (dlci.models.rebuild's TFCall)."""
    xs = ", ".join(f"x{i}" for i in range(len(inst.inputs)))
    kwargs = ", ".join(f"{k}={python_literal(v)}" for k, v in inst.call.get("kwargs", {}).items())
    code = ("class Op(keras.layers.Layer):\n"
            f"    def call(self, {xs}):\n"
            f"        return {inst.call['fn']}({kwargs})\n\n\n"
            "inputs = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=f\"in{i}\")\n"
            f"          for i, x in enumerate({inputs})]\n"
            "model = keras.Model(inputs, Op(autocast=False)(*inputs))\n")
    return code, "model"


def tflite_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """The TFLite flatbuffer itself (a quantized model is the converter's output, not rebuilt here: the script
    needs no TensorFlow)."""
    blob = base64.b64encode(np.asarray(inst.arrays["model"]).tobytes()).decode()
    lines = [blob[i:i + 100] for i in range(0, len(blob), 100)]
    return "buf = base64.b64decode(\n" + "".join(f"    {ln!r}\n" for ln in lines) + ")\n", "buf"


def torch_program_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """A user's whole PyTorch model (``FILE.py:FUNCTION``, dlci.models.program): the script imports their file and
    calls the function, then loads the weights the failing instance ran wherever they differ from the program's own
    (a search changed them)."""
    from dlci.models.program import load
    file, func = inst.call["program"].rsplit(":", 1)
    code = (f"spec = importlib.util.spec_from_file_location(\"user_model\", {py_str(file)})\n"
            "user_model = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(user_model)\n"
            f"model = user_model.{func}()[0].eval()\n")
    own = {k: v.detach().numpy() for k, v in load(inst.call["program"])[0].state_dict().items()}
    changed = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")
               and not np.array_equal(own.get(k.split(":", 1)[1]), v)}
    if changed:
        entries = "".join(f"    {py_str(k)}: {torch_tensor_code(v)},\n" for k, v in changed.items())
        code += f"model.load_state_dict({{\n{entries}}}, strict=False)\n"
    return code, "model"


def torch_graph_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """A generated graph's module, as dlci.models.graph_torch writes it (the same source the campaign ran), its
    weights as arrays."""
    from dlci.models.graph import graph_of
    from dlci.models.graph_torch import torch_source
    src, arrays = torch_source(graph_of(inst))
    weights = "".join(f"    {attr!r}: {array_code(a)},\n" for attr, a in arrays.items())
    return src + f"\n\nmodel = Graph({{\n{weights}}}).eval()\n", "model"


MODEL_CODE = {"torch_fn": torch_model, "torch_module": torch_model, "torch_program": torch_program_model,
              "torch_graph": torch_graph_model,
              "onnx_model": onnx_model,
              "keras_layer": keras_model, "tf_fn": keras_model, "tflite_model": tflite_model}
FRAMEWORK_IMPORTS = {"torch": ["import torch"], "onnx": ["import onnx"],
                     "keras": ["import json", "import keras", "import tensorflow as tf"], "tflite": []}


# -- the reference the campaign judged by ---------------------------------------------------------------------------

@contextlib.contextmanager
def _single_threaded():
    """dlci's workers compute single-threaded (dlci.exec.engine): a sum split over threads can differ in its last
    bits, so the reference is computed here the same way."""
    if "torch" not in sys.modules:
        yield
        return
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def judged_reference(inst: Instance, target_name: str) -> tuple[list[np.ndarray], list[np.ndarray] | None, bool]:
    """(ref, ref64, exported) exactly as dlci.testcase.execute computes them for this instance on this target;
    ``exported``: the outputs of the exported model (the instance reaches the target through an exporter)."""
    from dlci import models
    from dlci.targets import get
    if inst.framework == "torch":
        import torch  # noqa: F401  (so that it runs single-threaded below)
    with _single_threaded():
        ref, ref64 = models.reference(inst)
        target = get(target_name)
        if inst.framework not in target.exporters:
            return ref, ref64, False
        models.build(inst, target.form)
        got, got64 = models.exported_reference(inst, target.form, ref, ref64)
    return got, got64, got is not ref  # the same objects: no evaluator ran the exported model


def _version(dist: str) -> str:
    try:
        return " " + importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def reference_note(inst: Instance, exported: bool, arbitrated: bool) -> str:
    """What the embedded reference is, in words."""
    if exported:
        what, fp64 = "the exported ONNX model run by ONNX Runtime" + _version("onnxruntime"), "onnx.reference"
    elif inst.framework == "torch":
        what, fp64 = f"eager torch{_version('torch')}", "torch"
    elif inst.framework == "keras":
        what, fp64 = f"the Keras{_version('keras')} layer called eagerly", "keras"
    elif inst.framework == "tflite":
        what, fp64 = f"the TFLite interpreter (tensorflow{_version('tensorflow-cpu')}) on the model", ""
    else:
        what = ("the ONNX test's expected output" if inst.expected_arrays() is not None
                else f"onnx{_version('onnx')}'s reference implementation")
        fp64 = "onnx.reference"
    return what + (f"; {fp64} in float64 arbitrates rounding" if arbitrated else "")


# -- what the script checks ------------------------------------------------------------------------------------------

def _oracle_source(*functions) -> str:
    return "\n\n\n".join(inspect.getsource(fn).rstrip() for fn in functions)


def compare_source() -> str:
    """The whole oracle module (for checks no single function covers, and for the rules' reproducers)."""
    from dlci.oracles import compare
    src = inspect.getsource(compare)
    return "\n".join(ln for ln in src.splitlines() if not ln.startswith("from __future__"))


def ignored_for(inst: Instance) -> set[int]:
    from dlci.models import uncompared_outputs
    return uncompared_outputs(inst)


def skip_values_for(inst: Instance, n_outputs: int | None = None) -> set[int]:
    from dlci.models import shape_only_outputs
    return set(shape_only_outputs(inst, n_outputs))


def is_hard_crash(symptom: str) -> bool:
    return symptom.startswith("SIG") or symptom.startswith("exit") or symptom in HARD_CRASHES


def crash_exception(finding) -> str:
    """The exception a crash finding expects: its symptom, or, for findings whose symptom is not an exception name
    (PR mode's "support removed"), the one recorded in ``extra["exception"]``."""
    return (finding.extra or {}).get("exception") or finding.symptom or ""


def failing_output(finding, n: int, ignore: set[int]) -> int | None:
    """The output the finding's verdict names, as a position in the target's outputs (compare_outputs counts
    without the ignored ones)."""
    i = (finding.distance or {}).get("output")
    if not isinstance(i, int):
        return None
    keep = [k for k in range(n) if k not in ignore] if ignore else list(range(n))
    return keep[i] if 0 <= i < len(keep) else None


def _real(a: np.ndarray) -> np.ndarray:
    """The form the oracle compares floats in (complex as real/imag pairs), kept in a readable dtype."""
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag], axis=-1).astype(np.float64)
    return a if a.dtype.name in ("float16", "float32", "float64") else a.astype(np.float32)


def comparison(finding, inst: Instance, target_name: str) -> dict:
    """The template context of the check the finding's symptom needs, with the reference embedded."""
    from dlci.models import quantized_outputs
    from dlci.oracles import compare as C
    symptom = finding.symptom or ""
    if finding.oracle != "inconsistency":
        if is_hard_crash(symptom):
            code = -int(signal.Signals[symptom]) if symptom in signal.Signals.__members__ else None
            if symptom.startswith("exit"):
                code = int(symptom.split()[1]) if symptom.split()[1:] and symptom.split()[1].isdigit() else None
            return {"check": "process", "expected_code": code, "timeout": CHILD_TIMEOUT}
        return {"check": "exception", "exception": crash_exception(finding),
                "message_key": message_key(finding.message or "")}
    ref, ref64, exported = judged_reference(inst, target_name)
    ignore = ignored_for(inst)
    i = failing_output(finding, len(ref), ignore)
    ctx = {"n_outputs": len(ref), "index": i}
    if symptom == "output count":
        return {**ctx, "check": "count"}
    if i is None:  # nothing says which output: the whole comparison, as the campaign made it
        return {**ctx, "check": "compare", "oracle_code": compare_source(),
                "expected": [array_code(r) for r in ref],
                "expected64": None if ref64 is None else [array_code(r) for r in ref64],
                "skip_values": sorted(skip_values_for(inst, len(ref))), "ignore": sorted(ignore),
                "quantized": sorted(quantized_outputs(inst, ref)),
                "note": reference_note(inst, exported, ref64 is not None)}
    r = np.asarray(ref[i])
    r64 = np.asarray(ref64[i]) if ref64 is not None and i < len(ref64) else None
    if symptom == "shape mismatch":
        return {**ctx, "check": "shape", "shape": tuple(r.shape)}
    if symptom == "dtype mismatch":
        return {**ctx, "check": "dtype", "dtype": r.dtype.name}
    kind = C._kind(r)
    arbitrated = r64 is not None
    if r64 is not None and _real(r64).shape != _real(r).shape:
        r64 = None  # as the oracle does: another output layout is not arbitrated
    ctx.update(note=reference_note(inst, exported, r64 is not None),
               expected=array_code(_real(r) if kind in "fc" else r),
               expected64=None if r64 is None else array_code(_real(r64).astype(np.float64)),
               complex=kind == "c")
    if kind in "bi":
        steps = C.QUANTIZATION_STEPS if i in quantized_outputs(inst, ref) else 0
        return {**ctx, "check": "integers", "steps": steps, "oracle_code": _oracle_source(C.integers_differ)}
    if symptom == "nan mismatch":
        rounding = r.dtype.name if r.dtype.kind == "f" else "float32"  # the dtype classes_differ rounds to
        return {**ctx, "check": "classes", "rounding": rounding,
                "oracle_code": _oracle_source(C.nan_classes, C.classes_differ)}
    rtol, atol = C.tolerance(r.dtype.name, arbitrated)
    used = finding.distance or {}  # a device target's project may allow more on its device (Target.tolerances)
    rtol, atol = max(rtol, used.get("rtol", 0.0)), max(atol, used.get("atol", 0.0))
    return {**ctx, "check": "values", "oracle_code": _oracle_source(C.values_differ),
            "tolerance": f"dict(rtol={rtol!r}, atol={atol!r}, multiplier={C.FP64_MULTIPLIER!r}, "
                         f"floor={C.rel_floor(r.dtype.name)!r})"}


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


def render_text(finding, inst: Instance, template: str | None = None) -> str:
    """The reproducer's source. ``template``: the target's snippet (blocks ``imports`` and ``run``; default
    ``targets/<target>.j2``)."""
    env = code_env()
    snippet = env.get_template(template or f"targets/{finding.target}.j2")
    # a snippet sets module_as_leaf when its entry point treats a standard torch.nn submodule apart (torch.fx)
    leaf = bool(getattr(snippet.make_module({"framework": inst.framework, "model": "", "n_outputs": 1,
                                             "dynamic_shapes": "", "keep_params": False, "device": "",
                                             "options": {}}),
                        "module_as_leaf", False))
    code, model = MODEL_CODE[inst.call["kind"]](inst, leaf=leaf)
    check = comparison(finding, inst, finding.target)
    from dlci.models import dynamic_shapes_code
    options = target_options(inst, finding.target)
    values = dict(framework=inst.framework, model=model, n_outputs=check.get("n_outputs", 1),
                  dynamic_shapes=dynamic_shapes_code(inst),
                  keep_params=_keeps_params(inst) or bool(options.get("keep_params_in_input")),
                  device=finding.extra.get("device", ""),  # a device target's: the device the campaign ran on
                  options=options)
    run = _block(snippet, "run", values)
    order = _tflite_order(inst, finding.target)
    if order:
        run += f"\noutputs = [outputs[k] for k in {order}]  # the converter reordered the keras model's outputs"
    if any(x.dtype.name == "bfloat16" for x in inst.input_arrays()):
        run = run.replace("torch.tensor(x)", "as_torch(x)")  # torch.tensor cannot read ml_dtypes' bfloat16
        code = AS_TORCH + "\n\n\n" + code
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


def render_skeleton(inst: Instance, target: str, goal: str, hint: str = "") -> str:
    """A test the maintainer can complete: the instance that came closest to a changed line the scan never reached,
    built and run through ``target`` as its reproducer would, with the goal and what to change said where the
    inputs are (``goal``: where and which way, e.g. "x.py:120 `if axis < 0` true"; ``hint``: how close it came)."""
    env = code_env()
    snippet = env.get_template(f"targets/{target}.j2")
    leaf = bool(getattr(snippet.make_module({"framework": inst.framework, "model": "", "n_outputs": 1,
                                             "dynamic_shapes": "", "keep_params": False, "device": "",
                                             "options": {}}),
                        "module_as_leaf", False))
    code, model = MODEL_CODE[inst.call["kind"]](inst, leaf=leaf)
    from dlci.models import dynamic_shapes_code
    options = target_options(inst, target)
    values = dict(framework=inst.framework, model=model, n_outputs=1, dynamic_shapes=dynamic_shapes_code(inst),
                  keep_params=_keeps_params(inst) or bool(options.get("keep_params_in_input")), device="",
                  options=options)
    run = _block(snippet, "run", values)
    if any(x.dtype.name == "bfloat16" for x in inst.input_arrays()):
        run = run.replace("torch.tensor(x)", "as_torch(x)")
        code = AS_TORCH + "\n\n\n" + code
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
