"""Reproducers in the style of the target repository's own tests, next to the standalone script.

A maintainer can paste the rendered file into their suite: it builds the same single-operator model as the standalone
reproducer (the model/inputs code comes from :mod:`dlci.findings.repro`), runs the target through the same entry
point, and compares in the way that repository's tests do (``tvm.testing.assert_allclose``, OpenVINO's layer-test
harness, an ONNX graph run by ``onnxruntime.InferenceSession``, ``torch.testing.assert_close``, ``tf.test.TestCase``).
It fails while the bug is present and passes once it is fixed; :func:`check_test` runs it under pytest to prove the
first half.

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

import jinja2
import numpy as np

from dlci.exec import cancel
from dlci.findings import repro as R
from dlci.instance import Instance

EXPECT_PREFIX = "# dlci-expect: "


@dataclass(frozen=True)
class Style:
    name: str
    template: str  # under dlci/templates/
    markers: tuple[str, ...]  # text every test of this style contains (what a reviewer recognises it by)
    repository: str  # whose test suite it imitates
    description: str


STYLES: dict[str, Style] = {s.name: s for s in (
    Style("tvm", "tests/tvm.py.j2", ("tvm.testing.assert_allclose", "tvm.compile(", "tvm.testing.main()"), "Apache TVM",
          "Apache TVM tests/python/relax/test_frontend_*.py: a test function per case, imported with the frontend, "
          "compiled for llvm, run on the Relax VM and compared with tvm.testing.assert_allclose"),
    Style("openvino", "tests/openvino.py.j2", ("LayerTest", "self._test(", "ie_device, precision, ir_version"), "OpenVINO",
          "OpenVINO tests/layer_tests: a Test<Op> class on the framework's layer-test harness (PytorchLayerTest, "
          "OnnxRuntimeLayerTest, CommonTF2LayerTest) with a local stand-in where the harness is not installed"),
    Style("onnxruntime", "tests/onnxruntime.py.j2",
          ("unittest.TestCase", "InferenceSession", "np.testing.assert_allclose"), "ONNX Runtime",
          "ONNX Runtime python tests / ONNX backend node tests: the graph built with onnx.helper, run by "
          "InferenceSession, compared with the expected outputs of the ONNX test or onnx.reference"),
    Style("pytorch", "tests/pytorch.py.j2",
          ("TestCase", "torch.testing.assert_close", "run_tests()"), "PyTorch",
          "PyTorch test/inductor and test/onnx: a TestCase class comparing the compiled (or exported and ONNX "
          "Runtime-run) model with eager PyTorch via torch.testing.assert_close"),
    Style("tensorflow", "tests/tensorflow.py.j2",
          ("tf.test.TestCase", "self.assertAllClose", "tf.test.main()"), "TensorFlow",
          "TensorFlow kernel/lite tests: a tf.test.TestCase comparing the compiled Keras layer with eager Keras"),
)}



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
    first comparison; "onnx" (the ONNX test's expected outputs or onnx.reference): the ONNX backend runner's looser
    ones, which dlci applies where nothing arbitrates the rounding of a reference."""
    from dlci.oracles.compare import LOOSE_TOLERANCES, TOLERANCES
    return dict(LOOSE_TOLERANCES if reference == "onnx" else TOLERANCES)


def _is_hard_crash(symptom: str) -> bool:
    return symptom.startswith("SIG") or symptom.startswith("exit") or symptom in R.HARD_CRASHES


def expectation(finding) -> dict:
    """How the rendered test fails while the bug is present."""
    symptom = finding.symptom or ""
    if finding.oracle == "inconsistency":
        return {"failure": "AssertionError", "symptom": symptom}
    if _is_hard_crash(symptom):
        return {"crash": symptom}
    return {"failure": symptom, "message": R.message_key(finding.message or "")}


def read_expectation(path: Path) -> dict | None:
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith(EXPECT_PREFIX):
            return json.loads(line[len(EXPECT_PREFIX):])
    return None


# -- ONNX models as onnx.helper code ---------------------------------------------------------------------------

def _py_name_ok(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and name not in ("name", "doc_string", "domain",
                                                                                 "overload")


def _attr_code(attr) -> str | None:
    from onnx import AttributeProto, helper, numpy_helper
    if attr.ref_attr_name:
        return None
    t = attr.type
    if t == AttributeProto.FLOAT:
        return R.float_lit(float(attr.f))
    if t == AttributeProto.INT:
        return repr(int(attr.i))
    if t == AttributeProto.STRING:
        try:
            return repr(attr.s.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    if t in (AttributeProto.FLOATS, AttributeProto.INTS, AttributeProto.STRINGS):
        value = helper.get_attribute_value(attr)
        if not value:
            return None  # helper.make_node cannot infer the type of an empty list
        if t == AttributeProto.FLOATS:
            return "[" + ", ".join(R.float_lit(float(v)) for v in value) + "]"
        if t == AttributeProto.INTS:
            return repr([int(v) for v in value])
        try:
            return repr([v.decode("utf-8") for v in value])
        except UnicodeDecodeError:
            return None
    if t == AttributeProto.TENSOR:
        arr = numpy_helper.to_array(attr.t)
        if arr.dtype == object:
            return None
        name = f", name={attr.t.name!r}" if attr.t.name else ""
        return f"numpy_helper.from_array({R.array_code(arr)}{name})"
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
                        repr(d.dim_param) if d.HasField("dim_param") else "None")
        shape = "[" + ", ".join(dims) + "]"
    else:
        shape = "None"
    return f"helper.make_tensor_value_info({vi.name!r}, {elem}, {shape})"


def onnx_helper_code(model) -> str | None:
    """Source of ``def make_model()`` rebuilding ``model`` with onnx.helper, or None when the model uses something
    helper calls cannot express plainly (subgraphs, functions, empty list attributes, ...)."""
    from onnx import numpy_helper
    g = model.graph
    if model.functions or g.sparse_initializer or not g.node:
        return None
    nodes = []
    for n in g.node:
        parts = [repr(n.op_type), repr(list(n.input)), repr(list(n.output))]
        if n.name:
            parts.append(f"name={n.name!r}")
        if n.domain:
            parts.append(f"domain={n.domain!r}")
        for a in n.attribute:
            code = _attr_code(a)
            if code is None or not _py_name_ok(a.name):
                return None
            parts.append(f"{a.name}={code}")
        nodes.append("        helper.make_node(" + ", ".join(parts) + "),\n")
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
        inits.append(f"            numpy_helper.from_array({R.array_code(arr)}, name={init.name!r}),\n")
    opsets = ", ".join(f"helper.make_opsetid({o.domain!r}, {o.version})" for o in model.opset_import)

    def listing(key: str, codes: list[str]) -> list[str]:
        return [f"        {key}=[\n", *(f"            {c},\n" for c in codes), "        ],\n"]
    lines = ["def make_model():\n", "    nodes = [\n", *nodes, "    ]\n",
             "    graph = helper.make_graph(\n", "        nodes,\n", f"        {g.name or 'test_graph'!r},\n",
             *listing("inputs", infos["input"]), *listing("outputs", infos["output"])]
    if inits:
        lines += ["        initializer=[\n", *inits, "        ],\n"]
    if infos["value_info"]:
        lines += listing("value_info", infos["value_info"])
    lines += ["    )\n",
              f"    return helper.make_model(graph, opset_imports=[{opsets}], ir_version={model.ir_version})\n"]
    return "".join(lines)


def _same_onnx(a, b) -> bool:
    import onnx.printer

    def text(m):  # on a copy: the caller's model stays untouched
        c = type(m)()
        c.CopyFrom(m)
        c.doc_string = c.graph.doc_string = ""
        c.producer_name = c.producer_version = ""
        c.graph.name = "g"
        for n in c.graph.node:
            n.doc_string = ""
        return onnx.printer.to_text(c)
    return text(a) == text(b)


def onnx_model_code(inst: Instance) -> tuple[str, bool]:
    """(source defining ``make_model()``, built with onnx.helper?). Falls back to the standalone reproducer's form
    (textual ONNX or base64) when the helper code would not rebuild the very same graph."""
    import base64
    import io

    import onnx
    from onnx import TensorProto, helper, numpy_helper
    model = onnx.load_from_string(inst.arrays["model"].tobytes())
    code = onnx_helper_code(model)
    if code is not None:
        try:  # our own generated code: make sure it rebuilds the same graph before a maintainer reads it
            ns = {"np": np, "io": io, "base64": base64, "onnx": onnx, "helper": helper, "TensorProto": TensorProto,
                  "numpy_helper": numpy_helper}
            exec(compile(code, "<dlci onnx helper code>", "exec"), ns)
            if _same_onnx(ns["make_model"](), model):
                return code, True
        except Exception:
            pass
    # the standalone reproducer's own form (private helper of dlci.findings.repro), minus its reference()
    text = R.onnx_code(inst).split("\n\ndef reference():")[0]
    text = re.sub(r"\nEXPECTED = \[.*", "", text, flags=re.S)
    return text.rstrip() + "\n\n\ndef make_model():\n    return ONNX_MODEL", False


# -- rendering --------------------------------------------------------------------------------------------------

def _env() -> jinja2.Environment:
    # the standalone reproducer's template folder (its targets/ includes are shared); block tags on their own lines
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(R.TEMPLATES)), keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


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


def _tol_literal(table: dict) -> str:
    return "{\n" + "".join(f"    {k!r}: ({v[0]!r}, {v[1]!r}),\n" for k, v in table.items()) + "}"


def _set_literal(s) -> str:
    return "{" + ", ".join(repr(i) for i in sorted(s)) + "}" if s else "set()"


def render_test(finding, instance: Instance, out_dir: Path, *, style: str | None, form: str = "") -> Path | None:
    """Write ``out_dir/test_<finding id>_<target>.py`` in ``style`` (a key of STYLES: the target's ``test_style``;
    ``form``: the model form the target converts); None when no style serves the target."""
    if style not in STYLES:
        return None
    style = STYLES[style]
    inst = instance
    fw = inst.framework
    kind = inst.call["kind"]
    env = _env()
    # the standalone reproducer's framework imports, split into the standard-library and third-party blocks
    lines = [ln for ln in R.IMPORTS[fw].splitlines() if ln.strip()]
    std_imports = [ln for ln in lines if ln.split()[1].split(".")[0] in sys.stdlib_module_names]
    fw_imports = [ln for ln in lines if ln not in std_imports]
    if kind == "onnx_model":
        model_code, _ = onnx_model_code(inst)
        expected = inst.expected_arrays()
        expected_code = ("EXPECTED = [\n" + "".join(f"    {R.array_code(e)},\n" for e in expected) + "]"
                         if expected is not None else "")
    else:
        model_code, expected_code = R.MODEL_CODE[kind](inst), ""
        # the fp64 recomputation that arbitrates dlci's own comparison has no place in a plain test
        model_code = model_code.split("\n\ndef reference():")[0]
    model_code = model_code.strip()
    reference = "onnx" if fw == "onnx" else "eager"
    inputs_code = "INPUTS = [\n" + "".join(f"    {R.array_code(x)},\n" for x in inst.input_arrays()) + "]"
    skip = R.skip_values_for(inst)
    ignore = R.ignored_for(inst)
    expect = expectation(finding)
    snake, camel = op_snake(inst.op), op_camel(inst.op)
    origin = f"{inst.origin.test} ({inst.origin.library})" if inst.origin.library else inst.origin.test
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = _test_path(finding, out_dir)
    table = tolerance_table(reference)
    float_dtypes = [s.dtype for s in inst.inputs if s.dtype in table] or ["float32"]
    ctx = dict(
        f=finding, inst=inst, style=style, target=finding.target, framework=fw, std_imports=std_imports,
        fw_imports=fw_imports, inputs_code=inputs_code, model_code=model_code, expected_code=expected_code,
        reference=reference, tolerances=_tol_literal(table), eps=repr(max(table[float_dtypes[0]])),
        flavour=_OV_FLAVOURS.get(form, ""),
        skip_values=_set_literal(skip), ignore=_set_literal(ignore), has_skip=bool(skip), has_ignore=bool(ignore),
        test_name=f"test_{snake}_{finding.id}", op_camel=camel,
        kind_name=inst.op if inst.op.startswith("aten::") and kind == "torch_fn" else None,
        expect_line=EXPECT_PREFIX + json.dumps(expect, sort_keys=True),
        summary=_docsafe(f"{finding.target} {finding.target_version}: {finding.symptom} on {finding.operator}"),
        message_lines=[_docsafe(m) for m in _message_lines(finding.message)],
        about=_docsafe(textwrap.fill(
            f"Operator instance {inst.id} from {origin}, written in the style of {style.repository}'s own tests so "
            f"that it can join that suite. It fails while the bug is present and passes once it is fixed; its inputs "
            f"are embedded.", width=110)),
    )
    text = env.get_template(style.template).render(**ctx)
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
    run_env = R.scrubbed_env(env)
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
           "read_expectation", "onnx_helper_code", "onnx_model_code", "tolerance_table"]
