"""Bundled sample pull requests against a real frontend: the installed TVM's own Python code.

``build(name, dest)`` lays out a TVM-shaped repository (``python/tvm/**.py`` copied from the installed package, which
runs against the installed native library through ``TVM_LIBRARY_PATH``), commits it as the base, applies the sample's
one realistic edit on a branch and commits it as the head. The edits are written against TVM 0.27's sources; if a
snippet is not found (another TVM release), building the sample fails loudly instead of testing the wrong thing.
Samples of another project (``SamplePR.project``) are laid out the same way from that project's installed Python
sources: OpenVINO's package, onnx2torch's.
"""
from __future__ import annotations

from dlci.errors import UsageError

import importlib.util
import shutil
from dataclasses import dataclass, field
from pathlib import Path

FRONTEND = "python/tvm/relax/frontend"
OV_PACKAGE = "src/bindings/python/src/openvino"  # where OpenVINO's repository keeps its Python package
O2T_CONVERTERS = "onnx2torch/node_converters"  # onnx2torch's repository keeps its package at the root
DLCI_YML = """\
# how dlci imports this checkout's TVM: the Python sources from python/, the native library of the installed wheel
python_path: [python]
env:
  TVM_LIBRARY_PATH: "{site_packages}/tvm/lib"
"""


@dataclass(frozen=True)
class Edit:
    file: str   # repo-relative
    old: str
    new: str


@dataclass(frozen=True)
class SamplePR:
    name: str
    title: str
    edits: tuple[Edit, ...]
    expect_operators: tuple[str, ...] = ()   # canonical operators the diff must select
    expect_finding: bool = False             # a correct tool reports a new finding on this PR
    note: str = ""
    extra_files: dict = field(default_factory=dict)
    project: str = "tvm"                     # whose installed Python sources the repository is built from


SAMPLES: dict[str, SamplePR] = {s.name: s for s in (
    SamplePR(
        "tvm-elu-minimum",
        "[Relax][PyTorch] Simplify ELU lowering with minimum/maximum",
        (Edit(f"{FRONTEND}/torch/base_fx_graph_translator.py",
              """        # alpha * ReLU(1 - exp(x)) + ReLU(x)
        return self.block_builder.emit(
            relax.op.add(
                relax.op.multiply(
                    alpha,
                    relax.op.nn.relu(relax.op.subtract(relax.const(1, dtype), relax.op.exp(x))),
                ),
                relax.op.nn.relu(x),
            )
        )
""",
              """        # alpha * min(0, exp(x) - 1) + max(0, x)
        zero = relax.const(0, dtype)
        return self.block_builder.emit(
            relax.op.add(
                relax.op.multiply(
                    alpha,
                    relax.op.minimum(zero, relax.op.subtract(relax.op.exp(x), relax.const(1, dtype))),
                ),
                relax.op.maximum(zero, x),
            )
        )
"""),),
        expect_operators=("elu",), expect_finding=True,
        note="the new formula keeps the negated alpha of the ReLU(1 - exp(x)) form: negative inputs get the wrong "
             "sign"),
    SamplePR(
        "tvm-avgpool-padding",
        "[Relax][PyTorch] avg_pool2d: normalise the padding argument",
        (Edit(f"{FRONTEND}/torch/base_fx_graph_translator.py",
              "        # Expand to 4D by adding batch dim if input is 3D\n"
              "        x_ndim = x.ty.ndim\n"
              "        if x_ndim == 3:\n"
              "            x = relax.op.expand_dims(x, axis=0)\n"
              "        stride = kernel_size if stride is None or stride == [] else stride\n",
              "        # Expand to 4D by adding batch dim if input is 3D\n"
              "        x_ndim = x.ty.ndim\n"
              "        if x_ndim == 3:\n"
              "            x = relax.op.expand_dims(x, axis=0)\n"
              "        stride = kernel_size if stride is None or stride == [] else stride\n"
              "        padding = padding if isinstance(padding, int) else 0\n"),),
        expect_operators=("avg_pool2d",), expect_finding=True,
        note="a shared helper (_avg_pool2d_impl) now drops list/tuple paddings: every converter that reaches it is "
             "selected, and padded pooling gives wrong shapes"),
    SamplePR(
        "tvm-onnx-elu-default",
        "[Relax][ONNX] Elu: read alpha once",
        (Edit(f"{FRONTEND}/onnx/onnx_frontend.py",
              'alpha = float(attr.get("alpha", 1.0))\n        return relax.expr.const(-alpha)',
              'alpha = float(attr.get("alpha", 0.1))\n        return relax.expr.const(-alpha)'),),
        expect_operators=("elu",), expect_finding=True,
        note="the ONNX Elu converter's default alpha is wrong (1.0 per the ONNX spec)"),
    SamplePR(
        "tvm-elu-refactor",
        "[Relax][PyTorch] Rename a local in the ELU converter",
        (Edit(f"{FRONTEND}/torch/base_fx_graph_translator.py",
              """        alpha = node.args[1] if len(node.args) > 1 else node.kwargs.get("alpha", 1.0)
        dtype = x.ty.dtype

        if isinstance(alpha, int | float):
            alpha = relax.const(-alpha, dtype)
        else:
            if not isinstance(alpha, relax.Var):
                alpha = self.block_builder.emit(relax.const(-alpha, dtype))

        # alpha * ReLU(1 - exp(x)) + ReLU(x)""",
              """        alpha = node.args[1] if len(node.args) > 1 else node.kwargs.get("alpha", 1.0)
        x_dtype = x.ty.dtype

        if isinstance(alpha, int | float):
            alpha = relax.const(-alpha, x_dtype)
        else:
            if not isinstance(alpha, relax.Var):
                alpha = self.block_builder.emit(relax.const(-alpha, x_dtype))
        dtype = x_dtype

        # alpha * ReLU(1 - exp(x)) + ReLU(x)"""),),
        expect_operators=("elu",), expect_finding=False,
        note="behaviour-preserving: tested, no finding"),
    SamplePR(
        "tvm-log-softmax-keyword-dim",
        "[Relax][PyTorch] log_softmax: read dim once",
        (Edit(f"{FRONTEND}/torch/base_fx_graph_translator.py",
              """    def _log_softmax(self, node: fx.Node) -> relax.Var:
        x = self.env[node.args[0]]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", -1)
""",
              """    def _log_softmax(self, node: fx.Node) -> relax.Var:
        x = self.env[node.args[0]]
        if len(node.args) > 1:
            dim = node.args[1]
        else:
            dim = node.kwargs.get("axis", -1)
"""),),
        expect_operators=("log_softmax",), expect_finding=True,
        note="a dim passed by keyword is looked up under the wrong name and the last axis is taken instead: only "
             "a call that names dim reaches the branch (OpInfo passes it by position)"),
    SamplePR(
        "tvm-avgpool-arg-order",
        "[Relax][PyTorch] avg_pool2d: pass the pooling flags through",
        (Edit(f"{FRONTEND}/torch/base_fx_graph_translator.py",
              "        return self._avg_pool2d_impl(x, kernel_size, stride, padding, ceil_mode, count_include_pad)\n",
              "        return self._avg_pool2d_impl(x, kernel_size, stride, padding, count_include_pad, ceil_mode)\n"),),
        expect_operators=("avg_pool2d",), expect_finding=True,
        note="ceil_mode and count_include_pad swapped: padded pooling gives wrong averages, while the base revision "
             "already gets avg_pool2d wrong for divisor_override the same way (value mismatch): the new failure must "
             "not be hidden in the old one"),
    SamplePR(
        "tvm-fx-softplus-removed",
        "[Relax][PyTorch] FX: drop the softplus function entry (the module entry covers it)",
        (Edit(f"{FRONTEND}/torch/fx_translator.py",
              '            "softplus": self._softplus,\n', ""),),
        expect_operators=("softplus",), expect_finding=True,
        note="F.softplus traced by FX is no longer converted: support the base revision had is removed"),
    SamplePR(
        "tvm-onnx-get-constant-refactor",
        "[Relax][ONNX] get_constant: name the unpacked parameter table",
        (Edit(f"{FRONTEND}/onnx/onnx_frontend.py",
              """    graph_nodes, params = params
    # Convert if possible
    if isinstance(var, relax.Var) and var.name in params:
        # When converting a parameter to a constant, update references to it as well.
        _, value = params[var.name]
""",
              """    graph_nodes, param_table = params
    # Convert if possible
    if isinstance(var, relax.Var) and var.name in param_table:
        # When converting a parameter to a constant, update references to it as well.
        _, value = param_table[var.name]
"""),),
        expect_operators=(), expect_finding=False,
        note="behaviour-preserving edit of a helper that dozens of ONNX converters call: every one of them is "
             "selected, and every failure found is already on base (old bugs, limitations and exporter bugs must "
             "not be reported as the PR's)"),
    SamplePR(
        "tvm-tflite-quantized-avgpool",
        "[Relax][TFLite] avg_pool2d: pool quantized tensors in their own dtype",
        (Edit(f"{FRONTEND}/tflite/tflite_frontend.py",
              """                out = relax.op.astype(in_expr, "int32")
                out = relax.op.nn.avg_pool2d(out, **params)
                out = relax.op.astype(out, output_tensor_type_str)
""",
              """                out = relax.op.nn.avg_pool2d(in_expr, **params)
"""),),
        expect_operators=("avg_pool2d",), expect_finding=True,
        note="quantized average pooling now sums int8 values in int8: windows whose sum leaves the int8 range wrap "
             "around; float models never take this branch, only quantized TFLite models (tflite_variants) do"),
    SamplePR(
        "openvino-py-bfloat16-table",
        "[PT FE] utils: drop the duplicate bfloat16 entry of the type map",
        (Edit(f"{OV_PACKAGE}/frontend/pytorch/utils.py", '    "torch.bfloat16": OVType.bf16,\n', ""),),
        expect_operators=("add", "relu"), expect_finding=True, project="openvino",
        note="the PyTorch decoders' dtype table loses torch.bfloat16: every bfloat16 graph that OpenVINO's Python "
             "decoders read fails (a change no operator table names: tested with the operators every graph has, "
             "in bfloat16 by torch_variants)"),
    SamplePR(
        "tvm-onnx-resize-shapeexpr",
        "Revert \"[ONNX][FRONTEND][Fix] Update Resize to accept ShapeExpr\" (#18209)",
        (Edit(f"{FRONTEND}/onnx/onnx_frontend.py",
              """                "Reshape",
                "Resize",
                "ConstantOfShape",
""",
              """                "Reshape",
                "ConstantOfShape",
"""),
         Edit(f"{FRONTEND}/onnx/onnx_frontend.py",
              """                scales = scales.value.numpy()
            elif isinstance(scales, relax.expr.ShapeExpr):
                scales = [int(val.value) for val in scales.values]
            else:""",
              """                scales = scales.value.numpy()
            else:"""),
         Edit(f"{FRONTEND}/onnx/onnx_frontend.py",
              """                sizes = sizes.value.numpy().astype("int64").tolist()[2:]
            elif isinstance(sizes, relax.expr.ShapeExpr):
                sizes = [int(val.value) for val in sizes.values][2:]
            else:""",
              """                sizes = sizes.value.numpy().astype("int64").tolist()[2:]
            else:""")),
        expect_operators=("interpolate",), expect_finding=True,
        note="a real upstream fix reverted (https://github.com/apache/tvm/pull/18209, merged 2025-08-14): the "
             "importer's node loop (graph-level: it runs for every graph) again refuses a Resize whose sizes are "
             "computed from the data's Shape (a dynamic interpolate as exporters write it), and Resize again "
             "rejects sizes given as a shape expression. Every single-operator Resize test passes (its sizes are "
             "constants): only a multi-operator graph (Shape -> Slice -> Concat -> Resize) shows the regression, "
             "which the scan's fuzz share builds around the touched operators"),
    SamplePR(
        "onnx2torch-leakyrelu-default",
        "LeakyRelu: a rounder default slope",
        (Edit(f"{O2T_CONVERTERS}/activations.py", "alpha = node.attributes.get('alpha', 0.01)",
              "alpha = node.attributes.get('alpha', 0.1)"),),
        expect_operators=("leaky_relu",), expect_finding=True, project="onnx2torch",
        note="the LeakyRelu converter's default alpha is wrong (0.01 per the ONNX spec): a node that leaves alpha "
             "out gets ten times the slope on negative inputs"),
    SamplePR(
        "tvm-docs-only",
        "[Docs] Clarify the nn.Module exporter docstring",
        (Edit("README.md", "A TVM-shaped repository", "A TVM-shaped repository (Python sources only)"),),
        expect_operators=(), expect_finding=False,
        note="touches no converter: nothing to test"),
)}
DEFAULT = "tvm-elu-minimum"


class SampleError(UsageError):
    """The sample cannot be built here (TVM not installed, or its sources changed)."""


def _git(repo: Path, *args: str) -> str:
    from dlci.diff import git
    proc = git.run(repo, *args, extra_env={
        "GIT_AUTHOR_NAME": "dlci sample", "GIT_AUTHOR_EMAIL": "sample@dlci.invalid", "GIT_COMMITTER_NAME": "dlci sample",
        "GIT_COMMITTER_EMAIL": "sample@dlci.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"})
    if proc.returncode != 0:
        raise SampleError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def installed_package(module: str, name: str, extra: str) -> Path:
    """The folder of an installed package, located without importing it (and torch with it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise SampleError(f"{name} is not installed: pip install 'dlci[{extra}]'")
    return Path(list(spec.submodule_search_locations)[0])


def installed_tvm() -> Path:
    return installed_package("tvm", "TVM", "tvm")


def copy_python(src: Path, dest: Path) -> None:
    """The Python sources of the package folder ``src`` copied to the folder ``dest``."""
    for path in src.rglob("*.py"):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def copy_tvm_python(dest: Path) -> None:
    """The installed TVM's Python sources laid out as in a TVM checkout (python/tvm/...)."""
    copy_python(installed_tvm(), dest / "python" / "tvm")


def copy_openvino_python(dest: Path) -> None:
    """The installed OpenVINO's Python sources laid out as in OpenVINO's repository (no .dlci.yml: the openvino
    profile's defaults run them over the installed native libraries)."""
    copy_python(installed_package("openvino", "OpenVINO", "openvino"), dest / OV_PACKAGE)


def copy_onnx2torch_python(dest: Path) -> None:
    """The installed onnx2torch's Python sources laid out as in its repository (the package at the root; no
    .dlci.yml: the onnx2torch profile's defaults import it)."""
    copy_python(installed_package("onnx2torch", "onnx2torch", "onnx2torch"), dest / "onnx2torch")


PROJECTS = {"tvm": "TVM", "openvino": "OpenVINO", "onnx2torch": "onnx2torch"}  # SamplePR.project -> its name


def build(name: str, dest: Path) -> tuple[Path, str, str]:
    """Build sample PR ``name`` as a git repository at ``dest``; returns (repo, base sha, head sha)."""
    if name not in SAMPLES:
        raise SampleError(f"unknown sample {name!r}; known: {', '.join(sorted(SAMPLES))}")
    sample = SAMPLES[name]
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if sample.project == "openvino":
        copy_openvino_python(dest)
        (dest / "README.md").write_text("An OpenVINO-shaped repository built by dlci from the installed OpenVINO's "
                                        "Python sources.\n")
    elif sample.project == "onnx2torch":
        copy_onnx2torch_python(dest)
        (dest / "README.md").write_text("An onnx2torch-shaped repository built by dlci from the installed "
                                        "onnx2torch's sources.\n")
    else:
        copy_tvm_python(dest)
        (dest / ".dlci.yml").write_text(DLCI_YML)
        (dest / "README.md").write_text("A TVM-shaped repository built by dlci from the installed TVM's sources.\n")
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", f"base: {PROJECTS[sample.project]} Python sources")
    base = _git(dest, "rev-parse", "HEAD")
    _git(dest, "checkout", "-q", "-b", f"pr/{name}")
    for edit in sample.edits:
        path = dest / edit.file
        text = path.read_text()
        if text.count(edit.old) != 1:
            raise SampleError(f"sample {name}: the snippet to edit occurs {text.count(edit.old)} times in "
                              f"{edit.file} (written for TVM 0.27, OpenVINO 2026.4, onnx2torch 1.5.15)")
        path.write_text(text.replace(edit.old, edit.new))
    _git(dest, "commit", "-q", "-am", sample.title)
    head = _git(dest, "rev-parse", "HEAD")
    return dest, base, head
