"""Profiles other than TVM: OpenVINO, ONNX Runtime, PyTorch, onnxscript, onnx2torch, tf2onnx and the generic fallback.

Every test builds a real git repository in ``tmp_path`` (from ``tests/fixtures/profiles/<name>`` or, for PyTorch and
onnxscript, from the files the installed packages ship), commits a realistic edit and checks which operators the
profile selects, with which file:line, targets and reasons, and what it reports as unmapped.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dlci.diff import GitRepo
from dlci.profiles import PROFILES, registry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profiles"
SITE = Path(__import__("torch").__file__).resolve().parents[1]

# the targets that declare they run PyTorch's eager kernels / decompositions, and OpenVINO's FX frontend
TORCH_TARGETS = {"tvm.from_exported_program", "tvm.from_fx", "tvm.from_onnx", "openvino.pytorch",
                 "openvino.exported_program", "openvino.onnx", "openvino.torch_compile", "torch.compile", "torch.onnx"}
# decompositions and lowerings run in inductor on every device: the CUDA compile target reaches them too
DECOMP_TARGETS = {"torch.compile", "torch.compile.cuda", "torch.onnx", "tvm.from_exported_program",
                  "openvino.exported_program", "openvino.torch_compile"}
OV_FX = ("openvino.exported_program", "openvino.torch_compile")
CUDA_TARGETS = {"torch.cuda", "torch.compile.cuda"}  # the targets running ATen's CUDA kernels
INDUCTOR = ("torch.compile", "torch.compile.cuda")

registry()


# -- repository helpers -------------------------------------------------------------------------------------------

def git(d: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(d), "-c", "user.name=dlci", "-c", "user.email=dlci@example.com",
                    "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args], check=True,
                   capture_output=True)


def commit(d: Path, msg: str = "change") -> None:
    git(d, "add", "-A")
    git(d, "commit", "-q", "--allow-empty", "-m", msg)


def init(d: Path) -> Path:
    git(d, "init", "-q")
    commit(d, "base")
    return d


def from_fixture(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    shutil.copytree(FIXTURES / name, d)
    return init(d)


def edit(d: Path, rel: str, old: str, new: str) -> int:
    """Replace ``old`` (must occur once) and return the head line where ``new`` starts."""
    p = d / rel
    text = p.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {rel}"
    at = text.index(old)
    p.write_text(text.replace(old, new))
    return text[:at].count("\n") + 1


def line_of(d: Path, rel: str, needle: str, rev: str | None = None) -> int:
    text = (d / rel).read_text() if rev is None else subprocess.run(
        ["git", "-C", str(d), "show", f"{rev}:{rel}"], capture_output=True, text=True, check=True).stdout
    assert text.count(needle) == 1, f"{needle!r} occurs {text.count(needle)} times in {rel}"
    return text[:text.index(needle)].count("\n") + 1


def analyse(d: Path, profile: str):
    repo = GitRepo(d, "HEAD~1", "HEAD")
    return PROFILES[profile].analyse(repo, repo.diff())


def detect(d: Path, profile: str) -> bool:
    return PROFILES[profile].detect(GitRepo(d, "HEAD", "HEAD"))


def selected(result) -> set[tuple[str, str, tuple[str, ...]]]:
    return {(t.operator, t.namespace, t.targets) for t in result.touches}


def operators(result) -> set[str]:
    return {t.operator for t in result.touches}


def where(result) -> set[tuple[str, int]]:
    return {(t.file, t.line) for t in result.touches}


# ================================================================================================================
# detection: each profile recognises its own kind of repository and no other

DETECTS = {"openvino": "openvino", "onnxruntime": "onnxruntime", "onnx2torch": "onnx2torch", "tf2onnx": "tf2onnx"}


@pytest.mark.parametrize("fixture", sorted(DETECTS) + ["generic"])
def test_detection_matrix(tmp_path, fixture):
    d = from_fixture(tmp_path, fixture)
    for profile in ("openvino", "onnxruntime", "onnx2torch", "tf2onnx", "pytorch", "onnxscript"):
        assert detect(d, profile) == (DETECTS.get(fixture) == profile), (fixture, profile)
    assert detect(d, "generic")


def test_nothing_detected_in_an_empty_repository(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    (d / "README.md").write_text("nothing here\n")
    init(d)
    assert not any(detect(d, p) for p in ("openvino", "onnxruntime", "onnx2torch", "tf2onnx", "pytorch",
                                           "onnxscript"))


# ================================================================================================================
# OpenVINO

OV_PT = "src/frontends/pytorch/src"


def test_openvino_translator_body_selects_every_table_entry_naming_it(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{OV_PT}/op/elu.cpp", "auto alpha = context.const_input<float>(1);",
              "auto alpha = context.get_input(1);")
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("aten::elu", "aten", ("openvino.pytorch",)),
                           ("aten::elu_", "aten", ("openvino.pytorch",)),
                           ("aten.elu.default", "aten", OV_FX)}
    assert where(r) == {(f"{OV_PT}/op/elu.cpp", ln)}
    assert {t.converter for t in r.touches} == {"translate_elu"}
    assert all(t.why == "translator translate_elu changed" and t.profile == "openvino" for t in r.touches)
    assert r.unmapped == []


def test_openvino_table_line_selects_its_entry(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{OV_PT}/op_table.cpp", '{"aten::threshold", op::translate_threshold},',
              '{"aten::threshold", op::quantizable_op<op::translate_threshold>},')
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("aten::threshold", "aten", ("openvino.pytorch",))}
    assert where(r) == {(f"{OV_PT}/op_table.cpp", ln)}
    assert r.touches[0].converter == "quantizable_op<translate_threshold>"
    assert "table entry changed" in r.touches[0].why
    assert r.unmapped == []


def test_openvino_multi_line_table_entry(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{OV_PT}/op_table.cpp", "         op::translate_hardtanh},",
              "         op::quantizable_op<op::translate_hardtanh>},")
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("aten::hardtanh", "aten", ("openvino.pytorch",))}
    assert where(r) == {(f"{OV_PT}/op_table.cpp", ln)}


def test_openvino_helper_in_an_op_file_selects_its_callers(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{OV_PT}/op/avg_poolnd.cpp", "bool ceil_mode = !context",
              "bool ceil_mode = context.get_input_size() > 4 && !context")
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("aten::avg_pool1d", "aten", ("openvino.pytorch",)),
                           ("aten::avg_pool2d", "aten", ("openvino.pytorch",)),
                           ("aten::avg_pool3d", "aten", ("openvino.pytorch",)),
                           ("aten.avg_pool2d.default", "aten", OV_FX)}
    assert where(r) == {(f"{OV_PT}/op/avg_poolnd.cpp", ln)}
    assert all(t.why.startswith("helper translate_avg_pool_base changed (reached from translate_avg_pool")
               for t in r.touches)


def test_openvino_utils_helper_selects_translators_that_call_it(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{OV_PT}/utils.cpp", "std::make_shared<ov::op::v0::Clamp>(x, lo, hi)",
              "std::make_shared<ov::op::v0::Clamp>(x, hi, lo)")
    commit(d)
    r = analyse(d, "openvino")
    # translate_hardtanh calls it directly; the FX entry's translate_hardtanh_fx calls translate_hardtanh
    assert selected(r) == {("aten::hardtanh", "aten", ("openvino.pytorch",)),
                           ("aten.hardtanh.default", "aten", OV_FX)}
    assert where(r) == {(f"{OV_PT}/utils.cpp", ln)}
    fx = next(t for t in r.touches if t.operator == "aten.hardtanh.default")
    assert fx.converter == "translate_hardtanh_fx" and "clamp_to_range" in fx.why


def test_openvino_deleted_translator_selects_its_entries_at_base(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    fn_line = line_of(d, f"{OV_PT}/op/softplus.cpp", "OutputVector translate_softplus(")
    ts_line = line_of(d, f"{OV_PT}/op_table.cpp", '{"aten::softplus", op::translate_softplus}')
    fx_line = line_of(d, f"{OV_PT}/op_table.cpp", '{"aten.softplus.default", op::translate_softplus}')
    (d / f"{OV_PT}/op/softplus.cpp").unlink()
    edit(d, f"{OV_PT}/op_table.cpp", '        {"aten::softplus", op::translate_softplus},\n', "")
    edit(d, f"{OV_PT}/op_table.cpp", '        {"aten.softplus.default", op::translate_softplus},\n', "")
    edit(d, f"{OV_PT}/op_table.cpp", "OP_CONVERTER(translate_softplus);\n", "")
    commit(d)
    r = analyse(d, "openvino")
    # nothing for the rows next to the deleted ones (aten::threshold, aten.threshold.default)
    assert selected(r) == {("aten::softplus", "aten", ("openvino.pytorch",)),
                           ("aten.softplus.default", "aten", OV_FX)}
    assert where(r) == {(f"{OV_PT}/op/softplus.cpp", fn_line), (f"{OV_PT}/op_table.cpp", ts_line),
                        (f"{OV_PT}/op_table.cpp", fx_line)}
    assert all("base line" in t.why for t in r.touches)
    assert r.unmapped == []


def test_openvino_deleted_statement_inside_a_translator(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    edit(d, f"{OV_PT}/op/hardtanh.cpp", "    auto threshold = context.const_input<float>(1);\n", "")
    commit(d)
    r = analyse(d, "openvino")
    assert operators(r) == {"aten::threshold", "aten::threshold_", "aten.threshold.default"}


def test_openvino_refactor_touching_no_converter(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    edit(d, f"{OV_PT}/op/elu.cpp", "// aten::elu(Tensor self,", "// aten::elu(Tensor input,")
    edit(d, f"{OV_PT}/op/elu.cpp", '#include "openvino/op/multiply.hpp"\n',
         '#include "openvino/op/multiply.hpp"\n#include "openvino/op/add.hpp"\n')
    ln = edit(d, f"{OV_PT}/utils.cpp", "return context.get_input_size() > 7;", "return context.get_input_size() > 8;")
    edit(d, "src/core/README.md", "placeholder", "placeholder only")
    commit(d)
    r = analyse(d, "openvino")
    assert r.touches == []
    assert r.unmapped == [{"file": f"{OV_PT}/utils.cpp", "line": ln, "region": "is_legacy_layout",
                           "why": "changed converter code that no operator table entry reaches"}]


ONNX_SRC = "src/frontends/onnx/frontend/src"


def test_openvino_onnx_translator_and_registration(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{ONNX_SRC}/op/elu.cpp", 'get_attribute_value<double>("alpha", 1)',
              'get_attribute_value<double>("alpha", 1.0)')
    reg = edit(d, f"{ONNX_SRC}/op/softmax.cpp", 'ONNX_OP("Softmax", OPSET_RANGE(11, 12)',
               'ONNX_OP("Softmax", OPSET_RANGE(11, 12) ')
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("Elu", "onnx", ("openvino.onnx",)), ("Softmax", "onnx", ("openvino.onnx",))}
    assert where(r) == {(f"{ONNX_SRC}/op/elu.cpp", ln), (f"{ONNX_SRC}/op/softmax.cpp", reg)}
    soft = next(t for t in r.touches if t.operator == "Softmax")
    assert soft.why == "ONNX_OP registration changed" and soft.converter == "ai_onnx::opset_11::softmax"


def test_openvino_onnx_shared_factory_method_selects_only_its_callers(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, f"{ONNX_SRC}/utils/pooling_factory.cpp", '"count_include_pad", 0', '"count_include_pad", 1')
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("AveragePool", "onnx", ("openvino.onnx",))}   # not MaxPool: same class, other method
    assert where(r) == {(f"{ONNX_SRC}/utils/pooling_factory.cpp", ln)}
    assert r.touches[0].why == "helper make_avg_pool changed (reached from average_pool)"


def test_openvino_onnx_contrib_domain(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    edit(d, f"{ONNX_SRC}/op/com.microsoft/fused_gelu.cpp", "GeluApproximationMode::TANH",
         "GeluApproximationMode::ERF")
    commit(d)
    assert selected(analyse(d, "openvino")) == {("FastGelu", "com.microsoft", ("openvino.onnx",))}


def test_openvino_tensorflow_common_translator_reaches_tf_and_tflite(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    edit(d, "src/frontends/tensorflow_common/src/op/avg_pool.cpp", "tf_ksize, true)", "tf_ksize, false)")
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("AvgPool", "tf", ("openvino.tf",)), ("AvgPool3D", "tf", ("openvino.tf",)),
                           ("AVERAGE_POOL_2D", "tflite", ("openvino.tflite",))}
    tfl = next(t for t in r.touches if t.operator == "AVERAGE_POOL_2D")
    assert tfl.converter == "avg_pool_2d" and "translate_avg_pool_op" in tfl.why


def test_openvino_tflite_table_row_with_rename_macro(tmp_path):
    d = from_fixture(tmp_path, "openvino")
    ln = edit(d, "src/frontends/tensorflow_lite/src/op_table.cpp", 'translate_relu_6_op, "Relu6")}',
              'translate_relu_6_op, "Relu6V2")}')
    commit(d)
    r = analyse(d, "openvino")
    assert selected(r) == {("RELU6", "tflite", ("openvino.tflite",))}
    assert where(r) == {("src/frontends/tensorflow_lite/src/op_table.cpp", ln)}


# ================================================================================================================
# ONNX Runtime

ORT_CPU = "onnxruntime/core/providers/cpu"
ORT_TARGETS = ("onnxruntime", "torch.onnx")


def test_onnxruntime_functor_change_selects_the_cpu_kernel_only(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    ln = edit(d, f"{ORT_CPU}/activation/activations.h", "(T)alpha * (xm.exp() - 1)", "(T)alpha * (xm.exp() - 1.0f)")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert selected(r) == {("Elu", "onnx", ORT_TARGETS)}   # the CUDA Elu kernel is another class
    assert where(r) == {(f"{ORT_CPU}/activation/activations.h", ln)}
    assert r.touches[0].why == "kernel Elu changed"


def test_onnxruntime_kernel_helper_selects_the_kernel_registrations(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    ln = edit(d, f"{ORT_CPU}/math/gemm.cc", "y[i * n + j] = row_vector ? c[j] : c[i * n + j];",
              "y[i * n + j] = row_vector ? c[j] : c[i];")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert selected(r) == {("Gemm", "onnx", ORT_TARGETS)}
    assert {t.converter for t in r.touches} == {"Gemm<float> [Cpu, opset 7]", "Gemm<float> [Cpu, opset 13]"}
    assert where(r) == {(f"{ORT_CPU}/math/gemm.cc", ln)}
    assert all(t.why == "helper BroadcastBias changed (reached from Gemm)" for t in r.touches)


def test_onnxruntime_shared_kernel_template_and_pool_type(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    edit(d, f"{ORT_CPU}/nn/pool.cc", "Tensor* Y = context->Output(0, output_dims);",
         "Tensor* Y = context->Output(0, TensorShape(output_dims));")
    commit(d)
    assert operators(analyse(d, "onnxruntime")) == {"AveragePool", "MaxPool"}
    edit(d, f"{ORT_CPU}/nn/pool.cc", "return value / static_cast<float>(size);",
         "return value / static_cast<float>(size + 0);")
    commit(d)
    assert operators(analyse(d, "onnxruntime")) == {"AveragePool"}


def test_onnxruntime_mlas_routine_selects_the_kernel_calling_it(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    ln = edit(d, "onnxruntime/core/mlas/lib/logistic.cpp", "1.0f / (1.0f + std::exp(-Value))",
              "1.0f / (1.0f + std::exp(-Value)) + 0.0f")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert selected(r) == {("Sigmoid", "onnx", ORT_TARGETS)}
    assert where(r) == {("onnxruntime/core/mlas/lib/logistic.cpp", ln)}
    assert "MlasComputeLogistic" in r.touches[0].why


def test_onnxruntime_registration_line_and_local_macro(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    ln = edit(d, f"{ORT_CPU}/activation/activations.cc", "REGISTER_UNARY_ELEMENTWISE_KERNEL(Softplus, 1);",
              "REGISTER_UNARY_ELEMENTWISE_KERNEL(Softplus, 6);")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert selected(r) == {("Softplus", "onnx", ORT_TARGETS)}
    assert where(r) == {(f"{ORT_CPU}/activation/activations.cc", ln)}
    # the macro every registration of the file goes through
    edit(d, f"{ORT_CPU}/activation/activations.cc", "MayInplace(0, 0)", "MayInplace(0, 0).Alias(0, 0)")
    commit(d)
    assert operators(analyse(d, "onnxruntime")) == {"Elu", "Relu", "Sigmoid", "Softplus"}


def test_onnxruntime_cuda_kernel_reaches_the_cuda_targets_only(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    edit(d, "onnxruntime/core/providers/cuda/activation/activations.cc", "alpha_, p.output", "alpha_ * 1, p.output")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert selected(r) == {("Elu", "onnx", ("onnxruntime.cuda", "torch.onnx.cuda"))}  # ORT's CUDA provider, on GPUs
    assert r.touches[0].converter == "Elu<float> [Cuda, opset 6]"


def test_onnxruntime_contrib_op(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    edit(d, "onnxruntime/contrib_ops/cpu/bert/fast_gelu.cc", "0.044715f", "0.044715f + 0.0f")
    commit(d)
    assert selected(analyse(d, "onnxruntime")) == {("FastGelu", "com.microsoft", ORT_TARGETS)}


def test_onnxruntime_removed_registrations(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    row = line_of(d, f"{ORT_CPU}/cpu_execution_provider.cc",
                  "BuildKernelCreateInfo<ONNX_OPERATOR_KERNEL_CLASS_NAME(kCpuExecutionProvider, kOnnxDomain, 6, Relu)>")
    edit(d, f"{ORT_CPU}/cpu_execution_provider.cc",
         "      BuildKernelCreateInfo<ONNX_OPERATOR_KERNEL_CLASS_NAME(kCpuExecutionProvider, kOnnxDomain, 6, Relu)>,\n",
         "")
    gemm = line_of(d, f"{ORT_CPU}/math/gemm.cc", "ONNX_CPU_OPERATOR_VERSIONED_TYPED_KERNEL(")
    edit(d, f"{ORT_CPU}/math/gemm.cc",
         "ONNX_CPU_OPERATOR_VERSIONED_TYPED_KERNEL(\n    Gemm,\n    7,\n    8,\n    float,\n"
         "    KernelDefBuilder().TypeConstraint(\"T\", DataTypeImpl::GetTensorType<float>()),\n"
         "    Gemm<float>);\n\n", "")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert {(t.operator, t.converter, t.file, t.line) for t in r.touches} == {
        ("Relu", "Relu [Cpu, opset 6]", f"{ORT_CPU}/cpu_execution_provider.cc", row),
        ("Gemm", "Gemm<float> [Cpu, opset 7]", f"{ORT_CPU}/math/gemm.cc", gemm)}
    assert all("removed (base line)" in t.why for t in r.touches)


def test_onnxruntime_unused_utility_is_unmapped(tmp_path):
    d = from_fixture(tmp_path, "onnxruntime")
    ln = edit(d, "onnxruntime/core/providers/common/narrow.h", "T{}", "T()")
    commit(d)
    r = analyse(d, "onnxruntime")
    assert r.touches == []
    assert [(u["file"], u["line"], u["region"]) for u in r.unmapped] == [
        ("onnxruntime/core/providers/common/narrow.h", ln, "narrow_or_zero")]


# ================================================================================================================
# PyTorch, on the files the installed torch ships

TORCH_FILES = {
    "aten/src/ATen/native/native_functions.yaml": "torchgen/packaged/ATen/native/native_functions.yaml",
    "torch/_inductor/lowering.py": "torch/_inductor/lowering.py",
    "torch/_decomp/decompositions.py": "torch/_decomp/decompositions.py",
    "torch/_refs/__init__.py": "torch/_refs/__init__.py",
    "torch/_refs/nn/functional/__init__.py": "torch/_refs/nn/functional/__init__.py",
}
REFS_F = "torch/_refs/nn/functional/__init__.py"
LOWERING = "torch/_inductor/lowering.py"
DECOMP = "torch/_decomp/decompositions.py"
YAML = "aten/src/ATen/native/native_functions.yaml"


@pytest.fixture
def torch_repo(tmp_path) -> Path:
    d = tmp_path / "pytorch"
    shutil.copytree(FIXTURES / "pytorch", d)   # our own native C++ kernels in ATen's layout
    for dst, src in TORCH_FILES.items():
        (d / dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SITE / src, d / dst)
    return init(d)


def test_pytorch_detect(torch_repo, tmp_path):
    assert detect(torch_repo, "pytorch")
    assert not detect(from_fixture(tmp_path, "tf2onnx"), "pytorch")


def test_pytorch_softplus_decomposition_body(torch_repo):
    ln = edit(torch_repo, REFS_F, "rhs = torch.log1p(torch.exp(scaled_input))",
              "rhs = torch.log1p(torch.exp(scaled_input)) * 1")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert [(t.operator, t.namespace, set(t.targets), t.file, t.line, t.converter) for t in r.touches] == [
        ("softplus", "aten", DECOMP_TARGETS, REFS_F, ln, "softplus")]
    assert r.touches[0].why == "function softplus changed"
    assert r.unmapped == []


def test_pytorch_decomposition_in_decompositions_py(torch_repo):
    ln = edit(torch_repo, DECOMP,
              "def softplus_backward(out_grad: Tensor, x: Tensor, beta: float, threshold: float):\n",
              "def softplus_backward(out_grad: Tensor, x: Tensor, beta: float, threshold: float):\n"
              "    beta = float(beta)\n")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert {(t.operator, t.file, t.line) for t in r.touches} == {("softplus_backward", DECOMP, ln + 1)}
    assert set(r.touches[0].targets) == DECOMP_TARGETS


def test_pytorch_decomposition_removed(torch_repo):
    text = (torch_repo / DECOMP).read_text()
    start = text.index("@register_decomposition(aten.softplus_backward)")
    end = text.index("\n@", start + 1)
    deco_line = text[:start].count("\n") + 1
    (torch_repo / DECOMP).write_text(text[:start] + text[end + 1:])
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert {(t.operator, t.file, t.line) for t in r.touches} == {("softplus_backward", DECOMP, deco_line)}
    assert "removed (base line)" in r.touches[0].why


def test_pytorch_registration_statement(torch_repo):
    ln = edit(torch_repo, DECOMP, "register_inplace(aten.hardtanh_, aten.hardtanh)",
              "register_inplace(aten.hardtanh_, aten.hardtanh)  # in place")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert {(t.operator, t.file, t.line, t.converter) for t in r.touches} == {
        ("hardtanh_", DECOMP, ln, "register_inplace")}


def test_pytorch_inductor_lowering_body_and_fallback(torch_repo):
    ln = edit(torch_repo, LOWERING, '    fn = ops_wrapper("isinf")\n', '    fn = ops_wrapper("isinf")  # inf check\n')
    fb = edit(torch_repo, LOWERING, "make_fallback(aten._pdist_forward, require_contiguous)",
              "make_fallback(aten._pdist_forward)")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert {(t.operator, t.targets, t.file, t.line) for t in r.touches} == {
        ("isinf", INDUCTOR, LOWERING, ln), ("_pdist_forward", INDUCTOR, LOWERING, fb)}


def test_pytorch_inductor_private_helper_selects_its_lowerings(torch_repo):
    text = (torch_repo / LOWERING).read_text()
    at = text.index("def _avg_poolnd(")
    ln = text[:at].count("\n") + 3   # a parameter line of the helper
    lines = text.split("\n")
    lines[ln - 1] += "  # renamed soon"
    (torch_repo / LOWERING).write_text("\n".join(lines))
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    ops = operators(r)
    assert {"avg_pool2d", "avg_pool3d"} <= ops
    assert not ops & {"max_pool2d_with_indices", "softplus", "isinf"}
    assert all(t.why.startswith("helper _avg_poolnd changed") and t.line == ln for t in r.touches)


def test_pytorch_native_functions_entry_selects_it_and_its_delegates(torch_repo):
    ln = edit(torch_repo, YAML, "    CPU, CUDA: softplus_out\n", "    CPU, CUDA: softplus_out_v2\n")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert {(t.operator, t.file, t.line) for t in r.touches} == {("softplus.out", YAML, ln), ("softplus", YAML, ln)}
    assert all(set(t.targets) == TORCH_TARGETS | CUDA_TARGETS for t in r.touches)  # dispatched to CPU and CUDA


def test_pytorch_native_kernel_through_dispatch_stub(torch_repo):
    ln = edit(torch_repo, "aten/src/ATen/native/cpu/Activation.cpp", "return (a * beta) > threshold ? a :",
              "return (a * beta) >= threshold ? a :")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert {(t.operator, t.file, t.line) for t in r.touches} == {
        ("softplus.out", "aten/src/ATen/native/cpu/Activation.cpp", ln),
        ("softplus", "aten/src/ATen/native/cpu/Activation.cpp", ln)}
    assert all(set(t.targets) == TORCH_TARGETS and "softplus_value" in t.why for t in r.touches)


def test_pytorch_structured_kernel_and_composite_kernel(torch_repo):
    edit(torch_repo, "aten/src/ATen/native/Activation.cpp", "softplus_stub(device_type(), *this, beta, threshold);",
         "softplus_stub(device_type(), *this, beta, threshold);  // structured")
    commit(torch_repo)
    assert operators(analyse(torch_repo, "pytorch")) == {"softplus.out", "softplus"}
    edit(torch_repo, "aten/src/ATen/native/Activation.cpp", "/*max_val=*/6);", "/*max_val=*/6.0);")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert operators(r) == {"relu6"} and r.touches[0].why == "kernel relu6 changed"


def test_pytorch_cuda_kernel_reaches_the_cuda_targets_only(torch_repo):
    edit(torch_repo, "aten/src/ATen/native/cuda/ActivationSoftplusKernel.cu", "::log1p(std::exp(a * beta))",
         "::log1p(::exp(a * beta))")
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert operators(r) == {"softplus.out", "softplus"}
    assert all(set(t.targets) == CUDA_TARGETS and "CUDA kernel" in t.why for t in r.touches)


def test_pytorch_refactor_touching_no_kernel(torch_repo):
    ln = edit(torch_repo, "aten/src/ATen/native/Activation.cpp", "self.numel() < 16", "self.numel() < 32")
    edit(torch_repo, LOWERING, '    fn = ops_wrapper("isinf")\n',
         '    # the inf check\n    fn = ops_wrapper("isinf")\n')
    commit(torch_repo)
    r = analyse(torch_repo, "pytorch")
    assert r.touches == []   # a comment line added to a lowering changes nothing
    assert [(u["line"], u["region"]) for u in r.unmapped] == [(ln, "is_cheap_layout")]


# ================================================================================================================
# onnxscript torchlib, on the installed files

OPS = "onnxscript/function_libs/torch_lib/ops"


@pytest.fixture
def onnxscript_repo(tmp_path) -> Path:
    import onnxscript
    d = tmp_path / "onnxscript"
    (d / OPS).mkdir(parents=True)
    for f in (Path(onnxscript.__file__).parent / "function_libs/torch_lib/ops").glob("*.py"):
        shutil.copy(f, d / OPS / f.name)
    return init(d)


def test_onnxscript_detect(onnxscript_repo, tmp_path):
    assert detect(onnxscript_repo, "onnxscript")
    assert not detect(onnxscript_repo, "pytorch")


def test_onnxscript_function_body(onnxscript_repo):
    ln = edit(onnxscript_repo, f"{OPS}/nn.py", "    self = op.Mul(self, input_scale)\n    return op.Mul(op.Elu(",
              "    self = op.Mul(input_scale, self)\n    return op.Mul(op.Elu(")
    commit(onnxscript_repo)
    r = analyse(onnxscript_repo, "onnxscript")
    assert [(t.operator, t.namespace, t.targets, t.file, t.line, t.converter) for t in r.touches] == [
        ("aten::elu", "aten", ("torch.onnx", "onnxscript.torchlib"), f"{OPS}/nn.py", ln, "aten_elu")]


def test_onnxscript_private_helper(onnxscript_repo):
    text = (onnxscript_repo / f"{OPS}/core.py").read_text()
    at = text.index("def _atan2(")
    ln = text[:at].count("\n") + 2
    lines = text.split("\n")
    lines[ln - 1] += "  # helper"
    (onnxscript_repo / f"{OPS}/core.py").write_text("\n".join(lines))
    commit(onnxscript_repo)
    r = analyse(onnxscript_repo, "onnxscript")
    assert {"aten::atan2", "aten::angle"} <= operators(r)
    assert not operators(r) & {"aten::elu", "aten::add", "aten::atan"}
    assert all(t.why.startswith("helper _atan2 changed") for t in r.touches)


def test_onnxscript_decorator_and_deletion(onnxscript_repo):
    ln = edit(onnxscript_repo, f"{OPS}/nn.py", '@torch_op("aten::elu", trace_only=True)',
              '@torch_op(("aten::elu", "aten::elu.default"), trace_only=True)')
    commit(onnxscript_repo)
    r = analyse(onnxscript_repo, "onnxscript")
    assert {(t.operator, t.line) for t in r.touches} == {("aten::elu", ln), ("aten::elu.default", ln)}
    text = (onnxscript_repo / f"{OPS}/nn.py").read_text()
    start = text.index('@torch_op(("aten::elu"')
    end = text.index("\ndef aten_elu_backward(")
    base_line = text[:start].count("\n") + 1
    (onnxscript_repo / f"{OPS}/nn.py").write_text(text[:start] + text[end + 1:])
    commit(onnxscript_repo)
    r = analyse(onnxscript_repo, "onnxscript")
    assert {(t.operator, t.line) for t in r.touches} == {("aten::elu", base_line), ("aten::elu.default", base_line)}


def test_onnxscript_comment_only_change_selects_nothing(onnxscript_repo):
    edit(onnxscript_repo, f"{OPS}/nn.py", "    input_scale = op.CastLike(input_scale, self)\n",
         "    # scale the input first\n    input_scale = op.CastLike(input_scale, self)\n")
    commit(onnxscript_repo)
    r = analyse(onnxscript_repo, "onnxscript")
    assert r.touches == [] and r.unmapped == []


# ================================================================================================================
# onnx2torch

ACT = "onnx2torch/node_converters/activations.py"
POOL = "onnx2torch/node_converters/pooling.py"


def test_onnx2torch_converter_body(tmp_path):
    d = from_fixture(tmp_path, "onnx2torch")
    ln = edit(d, ACT, "torch_module=nn.ELU(alpha=_alpha(node, 1.0)),",
              "torch_module=nn.ELU(alpha=_alpha(node, 1.0), inplace=False),")
    commit(d)
    r = analyse(d, "onnx2torch")
    assert selected(r) == {("Elu", "onnx", ("onnx2torch",))}  # the target running the checkout's converters
    assert where(r) == {(ACT, ln)}


def test_onnx2torch_module_class_and_helper(tmp_path):
    d = from_fixture(tmp_path, "onnx2torch")
    edit(d, ACT, "return torch.clip(self.alpha", "return torch.clamp(self.alpha")
    commit(d)
    r = analyse(d, "onnx2torch")
    assert operators(r) == {"HardSigmoid"} and "OnnxHardSigmoid" in r.touches[0].why
    edit(d, ACT, 'return float(node.attributes.get("alpha", default))',
         'return float(node.attributes.get("alpha") or default)')
    commit(d)
    assert operators(analyse(d, "onnx2torch")) == {"Elu", "HardSigmoid", "LeakyRelu"}
    edit(d, POOL, 'return bool(node.attributes.get("ceil_mode", 0))', 'return node.attributes.get("ceil_mode", 0) == 1')
    commit(d)
    assert operators(analyse(d, "onnx2torch")) == {"AveragePool", "MaxPool"}


def test_onnx2torch_decorator_lines(tmp_path):
    d = from_fixture(tmp_path, "onnx2torch")
    ln = edit(d, ACT, '@add_converter(operation_type="HardSigmoid", version=6)\n',
              '@add_converter(operation_type="HardSigmoid", version=6)\n'
              '@add_converter(operation_type="HardSigmoid", version=22)\n')
    commit(d)
    r = analyse(d, "onnx2torch")
    assert [(t.operator, t.line, t.converter) for t in r.touches] == [
        ("HardSigmoid", ln + 1, "_ (add_converter HardSigmoid v22)")]
    gone = line_of(d, ACT, '@add_converter(operation_type="LeakyRelu", version=16)')
    edit(d, ACT, '@add_converter(operation_type="LeakyRelu", version=16)\n', "")
    commit(d)
    r = analyse(d, "onnx2torch")
    assert [(t.operator, t.line, t.converter) for t in r.touches] == [
        ("LeakyRelu", gone, "_ (add_converter LeakyRelu v16)")]


def test_onnx2torch_deleted_converter_among_same_named_defs(tmp_path):
    d = from_fixture(tmp_path, "onnx2torch")
    text = (d / ACT).read_text()
    start = text.index('@add_converter(operation_type="Softplus"')
    end = text.index('@add_converter(operation_type="Relu"')
    base_line = text[:start].count("\n") + 1
    (d / ACT).write_text(text[:start] + text[end:])
    commit(d)
    r = analyse(d, "onnx2torch")
    # every converter is named `_`: the deleted one is Softplus, not its neighbour Relu
    assert {(t.operator, t.line) for t in r.touches} == {("Softplus", base_line)}


def test_onnx2torch_unused_helper_is_unmapped(tmp_path):
    d = from_fixture(tmp_path, "onnx2torch")
    ln = edit(d, POOL, 'return f"pool_{node.name}"', 'return f"pool-{node.name}"')
    commit(d)
    r = analyse(d, "onnx2torch")
    assert r.touches == []
    assert [(u["file"], u["line"], u["region"]) for u in r.unmapped] == [(POOL, ln, "_legacy_pool_name")]


# ================================================================================================================
# tf2onnx

MATH = "tf2onnx/onnx_opset/math.py"
NN = "tf2onnx/onnx_opset/nn.py"
COMMON = "tf2onnx/onnx_opset/common.py"


def test_tf2onnx_handler_method(tmp_path):
    d = from_fixture(tmp_path, "tf2onnx")
    ln = edit(d, MATH, 'node.set_attr("max", 6.0)', 'node.set_attr("max", float(6))')
    commit(d)
    r = analyse(d, "tf2onnx")
    assert selected(r) == {("Relu6", "tf", ("tf2onnx",)), ("Relu6V2", "tf", ("tf2onnx",))}
    assert where(r) == {(MATH, ln)}
    assert {t.converter for t in r.touches} == {"Relu6 (-> Clip)"}


def test_tf2onnx_helper_and_base_class(tmp_path):
    d = from_fixture(tmp_path, "tf2onnx")
    edit(d, NN, 'node.set_attr("auto_pad", "VALID")', 'node.set_attr("auto_pad", "NOTSET")')
    commit(d)
    assert operators(analyse(d, "tf2onnx")) == {"Conv2D", "Conv3D", "AvgPool", "AvgPool3D", "MaxPool", "MaxPoolV2"}
    ln = edit(d, COMMON, 'node.set_attr("broadcast", 1)', 'node.set_attr("broadcast", True)')
    commit(d)
    r = analyse(d, "tf2onnx")
    # subclasses in another opset file inherit the changed handler
    assert operators(r) == {"Add", "AddV2", "Sub", "Mul", "RealDiv", "TruncateDiv"}
    assert where(r) == {(COMMON, ln)}
    edit(d, COMMON, "if dtype not in (1, 10, 11):", "if dtype not in (1, 10, 11, 16):")
    commit(d)
    assert operators(analyse(d, "tf2onnx")) == {"Elu", "Relu", "Softplus"}


def test_tf2onnx_decorator_line_and_tflite_handler(tmp_path):
    d = from_fixture(tmp_path, "tf2onnx")
    ln = edit(d, NN, '@tf_op(["MaxPool", "MaxPoolV2"], onnx_op="MaxPool")',
              '@tf_op(["MaxPool", "MaxPoolV2", "MaxPoolWithArgmax"], onnx_op="MaxPool")')
    commit(d)
    r = analyse(d, "tf2onnx")
    assert operators(r) == {"MaxPool", "MaxPoolV2", "MaxPoolWithArgmax"}   # not the AvgPool decorator's ops
    assert where(r) == {(NN, ln)}
    edit(d, MATH, 'node.type = "Relu6"', 'node.type = "Relu6V2"')
    commit(d)
    assert selected(analyse(d, "tf2onnx")) == {("TFL_RELU6", "tflite", ())}  # no target converts TFLite models


def test_tf2onnx_deleted_handler_and_unused_helper(tmp_path):
    d = from_fixture(tmp_path, "tf2onnx")
    text = (d / NN).read_text()
    start = text.index('@tf_op("BiasAdd")')
    base_line = text[:start].count("\n") + 1
    (d / NN).write_text(text[:start].rstrip() + "\n")
    ln = edit(d, MATH, 'return node.get_attr_value("min"), node.get_attr_value("max")',
              'return node.get_attr_value("max"), node.get_attr_value("min")')
    commit(d)
    r = analyse(d, "tf2onnx")
    assert {(t.operator, t.file, t.line) for t in r.touches} == {("BiasAdd", NN, base_line)}
    assert [(u["file"], u["line"], u["region"]) for u in r.unmapped] == [(MATH, ln, "_clip_bounds")]


# ================================================================================================================
# generic fallback

GEN = "miniconv/ops.py"


def test_generic_changed_function_and_string(tmp_path):
    d = from_fixture(tmp_path, "generic")
    ln = edit(d, GEN, "return np.log1p(np.exp(beta * x)) / beta", "return np.logaddexp(0, beta * x) / beta")
    row = edit(d, GEN, '    "ReduceMean": convert_reduce,\n',
               '    "ReduceMean": convert_reduce,\n    "HardSigmoid": convert_hard_sigmoid,\n')
    commit(d)
    r = analyse(d, "generic")
    assert {(t.operator, t.namespace, t.line) for t in r.touches} == {("softplus", "aten", ln),
                                                                      ("HardSigmoid", "onnx", row + 1)}
    assert all(t.targets == () and t.why.startswith("generic: ") for t in r.touches)


def test_generic_precision_on_a_refactor(tmp_path):
    d = from_fixture(tmp_path, "generic")
    edit(d, GEN, "output = np.asarray(x).shape\n    return tuple(output)",
         "result = np.asarray(x).shape\n    return tuple(result)")
    edit(d, GEN, 'mode = node.attrs.get("mode", "mean")', 'mode = node.attrs.get("mode", "sum")')
    edit(d, "README.md", "add, mean", "add, mean, max")
    commit(d)
    assert analyse(d, "generic").touches == []


def test_generic_rules():
    from dlci.profiles.generic import Vocab, line_operators, region_operator
    v = Vocab({"aten": frozenset({"softplus", "mean", "add", "avg_pool2d", "elu"}),
               "torch.nn.functional": frozenset({"gelu"}), "torch.nn": frozenset({"ELU"}),
               "onnx": frozenset({"Elu", "Add", "AveragePool"}), "tf": frozenset({"Elu", "AvgPool"}),
               "tflite": frozenset({"AVERAGE_POOL_2D"}), "keras": frozenset({"Conv2D"})})
    assert region_operator("_convert_softplus", v) == ("softplus", "aten")
    assert region_operator("TorchFXImporter._avg_pool2d_impl", v) == ("avg_pool2d", "aten")
    assert region_operator("Elu", v) == ("Elu", "any")            # ONNX and TF both know it
    assert region_operator("convert_mean", v) is None             # a common word
    assert region_operator("AveragePool", v) == ("AveragePool", "onnx")
    line = '    "Add": x, "AVERAGE_POOL_2D": y, F.gelu(t), aten.add.Tensor'
    found = {(n, ns) for n, ns, _ in line_operators(line, v)}
    assert found == {("AVERAGE_POOL_2D", "tflite"), ("gelu", "aten"), ("add", "aten")}   # bare "Add" is too common
    assert line_operators("    # softplus and elu are the same here", v) == []
    assert line_operators("    output = mean + add(x)", v) == []


def test_generic_runs_only_when_no_profile_recognises_the_repository(tmp_path):
    from dlci.profiles import analyse as analyse_all
    g = from_fixture(tmp_path, "generic")
    edit(g, GEN, "return np.log1p(np.exp(beta * x)) / beta", "return np.logaddexp(0, beta * x) / beta")
    commit(g)
    assert analyse_all(GitRepo(g, "HEAD~1", "HEAD")).profiles == ["generic"]
    o = from_fixture(tmp_path, "onnx2torch")
    edit(o, ACT, "return torch.clip(self.alpha", "return torch.clamp(self.alpha")
    commit(o)
    a = analyse_all(GitRepo(o, "HEAD~1", "HEAD"))
    assert a.profiles == ["onnx2torch"] and {t.operator for t in a.touches} == {"HardSigmoid"}
