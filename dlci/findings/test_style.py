"""Reproducers in the style of the target repository's own tests, next to the standalone script.

The rendered test is the few lines a maintainer pastes into their suite as is: it calls the helper that
repository's tests call (TVM's ``check_correctness`` in tests/python/relax/test_frontend_onnx.py and
``verify_model_numerically`` in test_frontend_from_exported_program.py; OpenVINO's layer-test classes
``PytorchLayerTest``, ``OnnxRuntimeLayerTest``, ``CommonTF2LayerTest``; inductor's ``check_model`` behind
``self.common`` in test/inductor/test_torchinductor.py; ``assert_onnx_program`` of torch.onnx's exporter tests), or,
where that file has no such helper (TVM's FX and TFLite frontend tests, ONNX Runtime's python tests, TensorFlow),
the few statements its tests write out. The block to paste sits between ``# --- paste into <file> ---`` and
``# --- end of paste ---``.

So that the file also runs outside that repository (dlci checks it with pytest; :func:`check_test`), a helper the
test needs is imported from the repository's test module when that is importable, and otherwise defined by a small
stand-in between ``# --- dlci stand-in ...`` and ``# --- end of stand-in ---``: the same name and signature, doing
what the real helper does for this one case. The stand-in is not part of what is pasted.

Each rendered file carries one ``# dlci-expect: {...}`` line saying how it must fail while the bug is present
(``AssertionError`` for an inconsistency; the exception type and a stable piece of its message for a crash; the
signal, ``timeout``, ``oom`` or ``exit N`` for a crash that kills the process). :func:`check_test` reads it back.
"""
from __future__ import annotations

import json
import keyword
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlci.exec import cancel
from dlci.findings.repro import code_env, test_env
from dlci.findings.repro.checks import crash_exception, failing_output, ignored_for, is_hard_crash, judged_reference
from dlci.findings.repro.literals import array_code, float_lit, message_key, py_str
from dlci.findings.repro.model_code import keras_model, onnx_text, torch_model, torch_program_model, torch_tensor_code
from dlci.instance import Instance
from dlci.models import dynamic_shapes_code

EXPECT_PREFIX = "# dlci-expect: "
PASTE_BEGIN = "# --- paste into "
PASTE_END = "# --- end of paste ---"
STANDIN_BEGIN = "# --- dlci stand-in"
STANDIN_END = "# --- end of stand-in ---"


@dataclass(frozen=True)
class Style:
    name: str
    template: str  # under dlci/templates/
    markers: tuple[str, ...]  # text every test of this style contains (what a reviewer recognises it by)
    repository: str  # whose test suite it imitates
    description: str


STYLES: dict[str, Style] = {s.name: s for s in (
    Style("tvm", "tests/tvm.py.j2", ("tvm.testing", "def test_", "tvm.testing.main()"), "Apache TVM",
          "Apache TVM tests/python/relax/test_frontend_*.py: a test function calling check_correctness (ONNX) or "
          "verify_model_numerically (exported program), or compiling for llvm and comparing with "
          "tvm.testing.assert_allclose (FX, TFLite)"),
    Style("openvino", "tests/openvino.py.j2", ("LayerTest", "self._test(", "ie_device, precision, ir_version"),
          "OpenVINO",
          "OpenVINO tests/layer_tests: a Test<Op> class on the framework's layer-test harness (PytorchLayerTest, "
          "OnnxRuntimeLayerTest, CommonTF2LayerTest)"),
    Style("onnxruntime", "tests/onnxruntime.py.j2",
          ("unittest.TestCase", "InferenceSession", "np.testing.assert_allclose"), "ONNX Runtime",
          "ONNX Runtime onnxruntime/test/python: the graph built with onnx.helper, run by InferenceSession, "
          "compared with the expected outputs of the ONNX test or onnx.reference"),
    Style("pytorch", "tests/pytorch.py.j2", ("TestCase", "def test_", "run_tests()"), "PyTorch",
          "PyTorch test/inductor/test_torchinductor.py (a CommonTemplate method calling self.common) and "
          "test/onnx/exporter (torch.onnx.export then onnx_testing.assert_onnx_program)"),
    Style("tensorflow", "tests/tensorflow.py.j2",
          ("tf.test.TestCase", "self.assertAllClose", "tf.test.main()"), "TensorFlow",
          "TensorFlow lite/compiler tests: a tf.test.TestCase comparing the converted Keras model with eager Keras"),
)}

# where each target's test pastes, and the helper that file gives its tests (None: its tests spell the check out)
PASTE_INTO = {
    "tvm.from_onnx": ("tests/python/relax/test_frontend_onnx.py", "check_correctness"),
    "tvm.from_exported_program": ("tests/python/relax/test_frontend_from_exported_program.py",
                                  "verify_model_numerically"),
    "tvm.from_fx": ("tests/python/relax/test_frontend_from_fx.py", None),
    "tvm.from_tflite": ("tests/python/relax/test_frontend_tflite.py", None),
    "openvino.pytorch": ("tests/layer_tests/pytorch_tests/test_{op}.py", "PytorchLayerTest"),
    "openvino.exported_program": ("tests/layer_tests/pytorch_tests/test_{op}.py", "PytorchLayerTest"),
    "openvino.onnx": ("tests/layer_tests/onnx_tests/test_{op}.py", "OnnxRuntimeLayerTest"),
    "openvino.tf": ("tests/layer_tests/tensorflow2_keras_tests/test_tf2_keras_{op}.py", "CommonTF2LayerTest"),
    "openvino.tflite": ("tests/layer_tests/tensorflow2_keras_tests/test_tf2_keras_{op}.py", "CommonTF2LayerTest"),
    "torch.compile": ("test/inductor/test_torchinductor.py, class CommonTemplate", "check_model"),
    "torch.onnx": ("test/onnx/exporter/test_small_models_e2e.py", "assert_onnx_program"),
    "onnxruntime": ("onnxruntime/test/python/onnxruntime_test_python.py", None),
    "tf.lite": ("tensorflow/lite/python/lite_v2_test.py", None),
    "tf.xla": ("tensorflow/compiler/tests (a tf.test.TestCase)", None),
}


# -- names ----------------------------------------------------------------------------------------------------

def _op_short(op: str) -> str:
    return op.split("::")[-1].split(".")[-1]


def op_snake(op: str) -> str:
    """aten::avg_pool2d -> avg_pool2d, nn::ELU -> elu, onnx::MaxUnpool -> max_unpool."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", _op_short(op))
    s = re.sub(r"[^A-Za-z0-9]+", "_", s).strip("_").lower()
    return s or "op"


def op_camel(op: str) -> str:
    """aten::avg_pool2d -> AvgPool2d, nn::ELU -> ELU, onnx::MaxUnpool -> MaxUnpool."""
    short = re.sub(r"[^A-Za-z0-9_]+", "_", _op_short(op))
    parts = [p for p in short.split("_") if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Op"
    return name if not name[0].isdigit() else "Op" + name


def _test_path(finding, out_dir: Path) -> Path:
    return Path(out_dir) / f"test_{finding.id}_{finding.target.replace('.', '_')}.py"


# -- tolerances and expectations --------------------------------------------------------------------------------

def tolerance_table(reference: str) -> dict[str, tuple[float, float]]:
    """dlci's (rtol, atol) per dtype. ``reference`` "eager" (torch/Keras, float32): torch.testing's defaults, dlci's
    first comparison; "onnx" (ONNX Runtime, the ONNX test's expected outputs or onnx.reference): the ONNX backend
    runner's looser ones, which dlci applies where nothing arbitrates the rounding of a reference. A pasted test has
    no fp64 arbitration: these are the tolerances that make sense without it."""
    from dlci.oracles.compare import tolerance, TOLERANCES
    return {dtype: tolerance(dtype, arbitrated=reference != "onnx") for dtype in TOLERANCES}


def expectation(finding) -> dict:
    """How the rendered test fails while the bug is present."""
    symptom = finding.symptom or ""
    if finding.oracle == "inconsistency":
        return {"failure": "AssertionError", "symptom": symptom}
    if is_hard_crash(symptom):
        return {"crash": symptom}
    return {"failure": crash_exception(finding), "message": message_key(finding.message or "")}


def read_expectation(path: Path) -> dict | None:
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith(EXPECT_PREFIX):
            return json.loads(line[len(EXPECT_PREFIX):])
    return None


def paste_block(path: Path) -> str:
    """The lines a maintainer pastes (between the paste markers)."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.index(PASTE_BEGIN)
    start = text.index("\n", start) + 1
    return text[start:text.index(PASTE_END, start)].rstrip() + "\n"


# -- ONNX models as onnx.helper code ---------------------------------------------------------------------------

def _q(text: str) -> str:
    return py_str(text)


def _qlist(items) -> str:
    return "[" + ", ".join(_q(x) for x in items) + "]"


def _py_name_ok(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and name not in ("name", "doc_string", "domain",
                                                                                 "overload")


def _attr_code(attr) -> str | None:
    from onnx import AttributeProto, helper, numpy_helper
    if attr.ref_attr_name:
        return None
    t = attr.type
    if t == AttributeProto.FLOAT:
        return float_lit(float(attr.f))
    if t == AttributeProto.INT:
        return repr(int(attr.i))
    if t == AttributeProto.STRING:
        try:
            return _q(attr.s.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    if t in (AttributeProto.FLOATS, AttributeProto.INTS, AttributeProto.STRINGS):
        value = helper.get_attribute_value(attr)
        if not value:
            return None  # helper.make_node cannot infer the type of an empty list
        if t == AttributeProto.FLOATS:
            return "[" + ", ".join(float_lit(float(v)) for v in value) + "]"
        if t == AttributeProto.INTS:
            return repr([int(v) for v in value])
        try:
            return _qlist(v.decode("utf-8") for v in value)
        except UnicodeDecodeError:
            return None
    if t == AttributeProto.TENSOR:
        arr = numpy_helper.to_array(attr.t)
        if arr.dtype == object:
            return None
        name = f", name={_q(attr.t.name)}" if attr.t.name else ""
        return f"numpy_helper.from_array({array_code(arr)}{name})"
    return None  # graphs, sparse tensors, type protos: the textual form below carries them


def _value_info_code(vi) -> str | None:
    from onnx import TensorProto
    if not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    elem = f"TensorProto.{TensorProto.DataType.Name(tt.elem_type)}"
    if tt.HasField("shape"):
        dims = []
        for d in tt.shape.dim:
            dims.append(repr(d.dim_value) if d.HasField("dim_value") else
                        _q(d.dim_param) if d.HasField("dim_param") else "None")
        shape = "[" + ", ".join(dims) + "]"
    else:
        shape = "None"
    return f"helper.make_tensor_value_info({_q(vi.name)}, {elem}, {shape})"


def _listing(items: list[str], indent: str, width: int = 110) -> str:
    """A Python list of these items, on one line when it fits."""
    one = "[" + ", ".join(items) + "]"
    if len(indent) + len(one) <= width:
        return one
    return "[\n" + "".join(f"{indent}    {it},\n" for it in items) + f"{indent}]"


def onnx_helper_code(model, var: str = "model") -> str | None:
    """Statements that build ``model`` with onnx.helper, the way TVM's and ONNX Runtime's tests build graphs
    (``node``/``nodes``, ``graph``, then ``var``); None when helper calls cannot express it plainly (subgraphs,
    functions, empty list attributes, external data, ...)."""
    from onnx import numpy_helper
    g = model.graph
    if model.functions or g.sparse_initializer or not g.node:
        return None
    nodes = []
    for n in g.node:
        parts = [_q(n.op_type), _qlist(n.input), _qlist(n.output)]
        if n.name:
            parts.append(f"name={_q(n.name)}")
        if n.domain:
            parts.append(f"domain={_q(n.domain)}")
        for a in n.attribute:
            code = _attr_code(a)
            if code is None or not _py_name_ok(a.name):
                return None
            parts.append(f"{a.name}={code}")
        nodes.append("helper.make_node(" + ", ".join(parts) + ")")
    infos = {}
    for kind in ("input", "output", "value_info"):
        codes = [_value_info_code(v) for v in getattr(g, kind)]
        if any(c is None for c in codes):
            return None
        infos[kind] = codes
    inits = []
    for init in g.initializer:
        if init.data_location == 1:  # external data
            return None
        arr = numpy_helper.to_array(init)
        if arr.dtype == object:
            return None
        inits.append(f"numpy_helper.from_array({array_code(arr)}, name={_q(init.name)})")
    lines = [f"node = {nodes[0]}" if len(nodes) == 1 else f"nodes = {_listing(nodes, '')}",
             "graph = helper.make_graph(",
             f"    {'[node]' if len(nodes) == 1 else 'nodes'},",
             f"    {_q(g.name or 'test_graph')},",
             f"    inputs={_listing(infos['input'], '    ')},",
             f"    outputs={_listing(infos['output'], '    ')},"]
    if inits:
        lines.append(f"    initializer={_listing(inits, '    ')},")
    if infos["value_info"]:
        lines.append(f"    value_info={_listing(infos['value_info'], '    ')},")
    opsets = ", ".join(f"helper.make_opsetid({_q(o.domain)}, {o.version})" for o in model.opset_import)
    lines += [")", f"{var} = helper.make_model(graph, opset_imports=[{opsets}], ir_version={model.ir_version})"]
    return "\n".join(lines) + "\n"


def _same_onnx(a, b) -> bool:
    import onnx.printer

    def text(m):  # on a copy: the caller's model stays untouched
        c = type(m)()
        c.CopyFrom(m)
        for field in ("doc_string", "producer_name", "producer_version", "metadata_props"):
            c.ClearField(field)
        c.graph.ClearField("doc_string")
        c.graph.name = "g"
        for n in c.graph.node:  # what a node computes does not depend on its attributes' order or its metadata
            attrs = sorted(n.attribute, key=lambda a: a.name)
            n.ClearField("attribute")
            n.attribute.extend(attrs)
            n.ClearField("doc_string")
            n.ClearField("metadata_props")
        return onnx.printer.to_text(c)
    return text(a) == text(b)


def onnx_code(model, var: str = "model") -> tuple[str, bool]:
    """(statements binding ``var`` to the model, built with onnx.helper?). Falls back to the standalone
    reproducer's textual (or base64) form when the helper code would not rebuild the very same graph."""
    import base64
    import io

    import onnx
    from onnx import TensorProto, helper, numpy_helper
    code = onnx_helper_code(model, var)
    if code is not None:
        try:  # our own generated code: make sure it rebuilds the same graph before a maintainer reads it
            ns = {"np": np, "io": io, "base64": base64, "onnx": onnx, "helper": helper, "TensorProto": TensorProto,
                  "numpy_helper": numpy_helper}
            exec(compile(code, "<dlci onnx helper code>", "exec"), ns)
            if _same_onnx(ns[var], model):
                return code, True
        except Exception:
            pass
    text = onnx_text(model)
    if text is not None:
        return f'{var} = onnx.parser.parse_model("""\n{text.strip()}\n""")\n', False
    blob = base64.b64encode(model.SerializeToString()).decode()
    return f"{var} = onnx.load_from_string(base64.b64decode({blob!r}))\n", False


def onnx_model_code(inst: Instance) -> tuple[str, bool]:
    """The instance's ONNX model as statements binding ``model`` (see :func:`onnx_code`)."""
    import onnx
    return onnx_code(onnx.load_from_string(inst.arrays["model"].tobytes()))


# -- model and input code ----------------------------------------------------------------------------------------

def _tuple(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _kind_in_trace(model_code: str, expr: str, inst: Instance, kind: str) -> bool:
    """Does TorchScript tracing of the model show ``kind`` (what PytorchLayerTest asserts)? Checked here, since a
    kind the graph lacks would fail the test for another reason than the bug."""
    import torch
    try:
        ns = {"torch": torch, "np": np}
        exec(compile(model_code + f"\n__model = {expr}\n", "<dlci model code>", "exec"), ns)
        from dlci.models.convert import np_to_torch
        traced = torch.jit.trace(ns["__model"], tuple(np_to_torch(x) for x in inst.input_arrays()), check_trace=False)
        return any(n.kind() == kind for n in traced.inlined_graph.nodes())
    except Exception:
        return False


def _reference_kind(inst: Instance, exported: bool) -> str:
    return "onnx" if exported or inst.framework == "onnx" else "eager"


# -- rendering --------------------------------------------------------------------------------------------------

def _docsafe(text: str) -> str:
    """Text that cannot end or break the test's docstring."""
    text = "".join(c if c >= " " or c in "\t\n" else "?" for c in str(text))
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _message_lines(message: str, n: int = 6, width: int = 110) -> list[str]:
    out = []
    for ln in (message or "").splitlines():
        ln = ln.rstrip()
        if ln.strip():
            out.append(ln if len(ln) <= width else ln[:width - 3] + "...")
        if len(out) >= n:
            break
    return out


# the OpenVINO layer-test harness a finding's test uses, by the model form its target converts
_OV_FLAVOURS = {"torch_module": "pytorch", "exported_program": "pytorch", "fx_graph": "pytorch", "onnx": "onnx",
                "saved_model": "keras", "keras_model": "keras", "tflite": "keras"}


def render_test(finding, instance: Instance, out_dir: Path, *, style: str | None, form: str = "") -> Path | None:
    """Write ``out_dir/test_<finding id>_<target>.py`` in ``style`` (a key of STYLES: the target's ``test_style``;
    ``form``: the model form the target converts); None when no style serves the target."""
    if style not in STYLES:
        return None
    style = STYLES[style]
    inst, target = instance, finding.target
    fw = inst.framework
    ref, _, exported = judged_reference(inst, target)
    ignore = ignored_for(inst)
    index = failing_output(finding, len(ref), ignore)
    index = 0 if index is None else index
    flavour = _OV_FLAVOURS.get(form, "")
    # the ONNX model the target converts: the instance's own, or the export a torch instance reaches it through
    onnx_form = fw == "onnx" or (form == "onnx" and fw == "torch")
    snake, camel = op_snake(inst.op), op_camel(inst.op)
    ctx = dict(f=finding, inst=inst, style=style, target=target, framework=fw, index=index, n_outputs=len(ref),
               flavour=flavour, test_name=f"test_{snake}_{finding.id}", op_camel=camel, op_snake=snake,
               symptom=finding.symptom if finding.oracle == "inconsistency" else "",
               single=len(ref) == 1, dynamic_shapes=dynamic_shapes_code(inst))
    where, helper = PASTE_INTO.get(target, ("the target's test suite", None))
    ctx.update(paste_into=where.format(op=snake), helper=helper)
    reference = _reference_kind(inst, exported)
    out_dtype = np.asarray(ref[index]).dtype.name if ref else "float32"
    table = tolerance_table(reference)
    rtol, atol = table.get(out_dtype, table["float32"])
    ctx.update(rtol=repr(rtol), atol=repr(atol), eps=repr(max(rtol, atol)), out_dtype=out_dtype)
    if onnx_form:
        from dlci import models
        model = models.build(inst, "onnx")
        code, helper_built = onnx_code(model)
        names = models.onnx_input_names(model)
        entries = [f"{_q(n)}: {array_code(x)}" for n, x in zip(names, inst.input_arrays())]
        one = "{" + ", ".join(entries) + "}"
        ctx.update(onnx_code=code, helper_built=helper_built,
                   feed=one if len(one) <= 90 else "{\n" + "".join(f"    {e},\n" for e in entries) + "}",
                   opset=next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None),
                   ir_version=model.ir_version,
                   expected=array_code(np.asarray(ref[index])))
    if fw == "torch":
        leaf = target == "tvm.from_fx"
        if inst.call["kind"] == "torch_program":  # a user's whole model: their file, as the script imports it
            code, expr = torch_program_model(inst, leaf=leaf)
            code = "import importlib.util\n\n" + code
        else:
            code, expr = torch_model(inst, class_name=camel if style.name != "openvino" else f"aten_{snake}",
                                       leaf=leaf)
        aten = inst.op if inst.op.startswith("aten::") else ""
        ctx.update(model_code=code, model_expr=expr,
                   args=_tuple([torch_tensor_code(x) for x in inst.input_arrays()]),
                   inputs_np=_tuple([array_code(x) for x in inst.input_arrays()]),
                   kind_name=aten if aten and style.name == "openvino" and _kind_in_trace(code, expr, inst, aten)
                   else None)
    if fw == "keras":
        code, _ = keras_model(inst, inputs="inputs_np")
        ctx.update(keras_code=code, inputs_np="[" + ", ".join(array_code(x) for x in inst.input_arrays()) + "]")
    expect = expectation(finding)
    origin = f"{inst.origin.test} ({inst.origin.library})" if inst.origin.library else inst.origin.test
    ctx.update(
        expect_line=EXPECT_PREFIX + json.dumps(expect, sort_keys=True),
        summary=_docsafe(f"{finding.target} {finding.target_version}: {finding.symptom} on {finding.operator}"),
        message_lines=[_docsafe(m) for m in _message_lines(finding.message)],
        about=_docsafe(textwrap.fill(
            f"Instance {inst.id} from {origin}, written as a test of {style.repository}'s own suite: the block "
            f"between the paste markers goes into {ctx['paste_into']} as is"
            + (f" (it calls that file's {helper})" if helper else "")
            + ". It fails while the bug is present and passes once it is fixed.", width=110)),
    )
    ctx["uses_base64"] = any("base64." in v for v in ctx.values() if isinstance(v, str))  # large arrays
    text = code_env().get_template(style.template).render(**ctx)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = _test_path(finding, out_dir)
    path.write_text(text, encoding="utf-8")
    return path


# -- checking -----------------------------------------------------------------------------------------------------

_LOCATION = re.compile(r"^.+:\d+: ([A-Za-z_][\w.]*)\s*$")


def _failure_type(failure: ET.Element) -> str:
    """The exception class name of one junit <failure>: the last line of pytest's long report ("file:line: Type"),
    else the message's "Type: ..." prefix."""
    lines = [ln for ln in (failure.text or "").strip().splitlines() if ln.strip()]
    if lines:
        m = _LOCATION.match(lines[-1])
        if m:
            return m.group(1).rsplit(".", 1)[-1]
    msg = failure.get("message") or ""
    head = msg.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if re.fullmatch(r"[A-Za-z_][\w.]*", head) else ""


def reproduces(expect: dict | None, returncode: int | None, junit_xml: str | None) -> bool:
    """Whether one pytest run of a rendered test shows the expected failure (see :func:`expectation`).
    ``returncode`` None: the run timed out."""
    if not expect:
        return False
    crash = expect.get("crash")
    if crash is not None:
        if returncode is None:
            return crash == "timeout"
        if crash.startswith("SIG"):
            try:
                return returncode == -int(signal.Signals[crash])
            except KeyError:
                return returncode < 0
        if crash.startswith("exit"):
            try:
                return returncode == int(crash.split()[1]) and not junit_xml
            except (IndexError, ValueError):
                return False
        if crash == "oom":
            return returncode == -int(signal.SIGKILL) or (junit_xml is not None and "MemoryError" in junit_xml)
        return False
    if returncode != 1 or not junit_xml:
        return False
    try:
        root = ET.fromstring(junit_xml)
    except ET.ParseError:
        return False
    failures, errors = [], 0
    for case in root.iter("testcase"):
        for child in case:
            if child.tag == "failure":
                failures.append(child)
            elif child.tag == "error":
                errors += 1
    if errors or not failures:
        return False  # a broken test (setup error, missing fixture) is no reproduction
    want = expect.get("failure", "AssertionError")
    key = expect.get("message") or ""
    for fail in failures:
        if _failure_type(fail) != want.rsplit(".", 1)[-1]:
            return False
        if key and key not in (fail.get("message") or "") + "\n" + (fail.text or ""):
            return False
    return True


def pytest_available() -> bool:
    """check_test needs pytest in dlci's own environment (a dev dependency, not a runtime one)."""
    import importlib.util
    return importlib.util.find_spec("pytest") is not None


def check_test(path: Path, env: dict | None = None, timeout: float = 600) -> bool:
    """Run the rendered test alone under pytest in a fresh interpreter (secrets scrubbed as for the standalone
    reproducer): True when it fails the expected way while the bug is present. The pytest output goes to
    ``<test>.log`` next to it. The run is isolated from whatever pytest configuration, conftest.py or plugins
    surround the output folder, so that it says something about the test alone."""
    path = Path(path).resolve()
    expect = read_expectation(path)
    if not pytest_available():
        path.with_suffix(".log").write_text("pytest is not installed in dlci's environment: not run\n")
        return False
    run_env = test_env(env)
    run_env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    run_env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    with tempfile.TemporaryDirectory(prefix="dlci-test-style-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ini),
               "--rootdir", str(path.parent), "--noconftest", f"--junitxml={report}", str(path)]
        log = path.with_suffix(".log")
        try:
            proc = cancel.run(cmd, timeout=timeout, cwd=str(path.parent), env=run_env)
        except subprocess.TimeoutExpired:
            log.write_text(f"$ python {' '.join(cmd[1:])}\ntimed out after {timeout} s\n")
            return reproduces(expect, None, None)
        xml = report.read_text(encoding="utf-8", errors="replace") if report.exists() else None
    log.write_text(f"$ python {' '.join(cmd[1:])}\nexit {proc.returncode}\n--- stdout\n{proc.stdout[-60000:]}\n"
                   f"--- stderr\n{proc.stderr[-20000:]}", encoding="utf-8")
    return reproduces(expect, proc.returncode, xml)


__all__ = ["STYLES", "Style", "render_test", "check_test", "pytest_available", "reproduces", "expectation",
           "read_expectation", "paste_block", "onnx_helper_code", "onnx_code", "onnx_model_code", "tolerance_table"]
