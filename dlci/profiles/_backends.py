"""Compiler backends and device plugins: the code below the frontends that no convert map or kernel table maps to
operators — TVM's code generators, GPU schedules (dlight) and runtimes, OpenVINO's device plugins, inductor's code
generators. A change there runs for every graph the backend compiles, so it is tested with the operators every
graph has (or, where a file is about one kind of computation, those operators: a dlight rule for reductions, a plugin
node) on the targets that run that backend. This is what sends a CUDA codegen PR to the GPU runners, an LLVM or
CPU-plugin PR to the CPU and arm64 runners (dlci.github.shards), and nothing to a runner whose targets never run it.

Each backend is one row of ``BACKENDS``: the project's marker file, file patterns (fnmatch, repo-relative), the
component the targets running that code declare (``Target.reaches``), what the code is, and its operators. The
project's own profile (tvm, openvino, pytorch) adds these touches to its own (:func:`backend_touches`).
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from dlci.diff import Diff, GitRepo
from dlci.profiles._tables import changed_regions, cpp_names
from dlci.profiles.base import ProfileResult, Touch
from dlci.targets import reaching

# the operators every graph has, as each project's GPU/CPU targets are fed (ONNX for TVM's and OpenVINO's device
# targets, aten for inductor)
ONNX_COMMON = ("Add", "Mul", "Relu", "MatMul", "Conv", "ReduceSum", "Softmax")
ATEN_COMMON = ("add", "mul", "relu", "sum", "amax", "softmax", "cumsum", "mm", "convolution")
ONNX_BY_KIND = {
    "matmul": ("MatMul", "Gemm", "Conv"), "gemv": ("MatMul", "Gemm"), "low_batch_gemv": ("MatMul", "Gemm"),
    "reduction": ("ReduceSum", "ReduceMean", "ReduceMax", "Softmax"),
    "general_reduction": ("ReduceSum", "ReduceMean", "Softmax", "LayerNormalization"),
    "transpose": ("Transpose",), "rmsnorm": ("LayerNormalization",), "fallback": ONNX_COMMON,
    "conv": ("Conv",), "convolution": ("Conv",), "deconv": ("ConvTranspose",), "pooling": ("MaxPool", "AveragePool"),
    "softmax": ("Softmax",), "eltwise": ("Add", "Mul", "Relu", "Sigmoid", "Tanh"), "reduce": ("ReduceSum", "ReduceMax"),
    "gemm": ("Gemm", "MatMul"), "fullyconnected": ("Gemm", "MatMul"), "mvn": ("LayerNormalization",),
    "interpolate": ("Resize",), "concat": ("Concat",), "gather": ("Gather",), "topk": ("TopK",),
}


@dataclass(frozen=True)
class Backend:
    project: str                   # "tvm", "openvino", "pytorch"
    patterns: tuple[str, ...]
    component: str                 # dlci.targets.reaching
    what: str
    namespace: str = "onnx"
    operators: tuple[str, ...] = ONNX_COMMON
    by_kind: dict = field(default_factory=dict)  # file stem -> operators (a file about one kind of computation)


BACKENDS = (
    # TVM: GPU schedules and code generation (tvm.from_onnx.cuda / .vulkan); the LLVM CPU backend (every CPU target)
    Backend("tvm", ("python/tvm/dlight/gpu/*", "python/tvm/s_tir/dlight/gpu/*", "python/tvm/dlight/base/*",
                    "python/tvm/s_tir/dlight/base/*"), "tvm:dlight", "TVM's dlight GPU schedule rules",
            by_kind=ONNX_BY_KIND),
    Backend("tvm", ("python/tvm/topi/gpu/*", "python/tvm/topi/cuda/*"), "tvm:topi.gpu", "TVM's GPU topi schedules",
            by_kind=ONNX_BY_KIND),
    Backend("tvm", ("src/target/source/codegen_cuda*", "src/target/source/literal/cuda*", "src/target/opt/build_cuda*",
                    "python/tvm/contrib/nvcc.py", "python/tvm/support/nvcc.py", "python/tvm/relax/backend/cuda/*",
                    "src/target/source/ptx*", "src/tir/transforms/lower_warp_memory.cc"),
            "tvm:codegen.cuda", "TVM's CUDA code generation"),
    Backend("tvm", ("src/runtime/cuda/*",), "tvm:runtime.cuda", "TVM's CUDA runtime"),
    Backend("tvm", ("src/target/spirv/*", "python/tvm/relax/backend/gpu_generic/*"), "tvm:codegen.vulkan",
            "TVM's SPIR-V (Vulkan) code generation"),
    Backend("tvm", ("src/runtime/vulkan/*",), "tvm:runtime.vulkan", "TVM's Vulkan runtime"),
    Backend("tvm", ("src/target/llvm/*", "python/tvm/relax/backend/cpu_generic/*"), "tvm:codegen.llvm",
            "TVM's LLVM CPU code generation"),
    # TIR passes that only GPU code takes (thread/warp lowering, the default GPU schedule), before the shared ones
    Backend("tvm", ("src/tir/*gpu*", "src/tir/*warp*", "src/tir/*thread_allreduce*", "src/tir/*thread_sync*",
                    "src/s_tir/*gpu*", "src/s_tir/*warp*", "src/s_tir/*thread_allreduce*"), "tvm:tir.gpu",
            "TVM's GPU-only TIR lowering"),
    Backend("tvm", ("src/tir/*", "src/s_tir/*", "src/arith/*", "src/relax/transform/*", "src/relax/backend/vm/*"),
            "tvm:tir", "TVM's TIR/Relax lowering, shared by every target"),
    # OpenVINO: device plugins
    Backend("openvino", ("src/plugins/intel_gpu/*",), "openvino:gpu", "OpenVINO's GPU plugin", by_kind=ONNX_BY_KIND),
    Backend("openvino", ("src/plugins/intel_cpu/*",), "openvino:cpu", "OpenVINO's CPU plugin", by_kind=ONNX_BY_KIND),
    # PyTorch inductor: its two code generators (the lowerings and templates' registrations: the pytorch profile)
    Backend("pytorch", ("torch/_inductor/codegen/triton*", "torch/_inductor/codegen/cuda/*",
                        "torch/_inductor/codegen/cutlass/*", "torch/_inductor/codegen/cuda_combined_scheduling.py",
                        "torch/_inductor/codegen/cpp_wrapper_gpu.py", "torch/_inductor/runtime/triton*",
                        "torch/_inductor/codegen/simd*"),
            "pytorch:inductor.triton", "inductor's Triton (GPU) code generation", "aten", ATEN_COMMON),
    Backend("pytorch", ("torch/_inductor/codegen/cpp*", "torch/_inductor/codegen/cpu_device_op_overrides.py",
                        "torch/_inductor/cpp_builder.py", "torch/_inductor/codecache.py"),
            "pytorch:inductor.cpp", "inductor's C++ (CPU) code generation", "aten", ATEN_COMMON),
)

SUFFIXES = (".py", ".cc", ".cpp", ".c", ".h", ".hpp", ".cu", ".cuh", ".cl", ".inc", ".S")


def backend_of(path: str, projects: set[str]) -> Backend | None:
    """The backend row of a repository path, among those of ``projects``."""
    for b in BACKENDS:
        if b.project in projects and any(fnmatch.fnmatch(path, p) for p in b.patterns):
            return b
    return None


def operators_of(backend: Backend, path: str) -> tuple[str, ...]:
    """A file about one kind of computation (``dlight/gpu/reduction.py``, ``intel_cpu/src/nodes/softmax.cpp``)
    names it by its stem; anything else runs for every graph."""
    stem = re.sub(r"[^a-z0-9_]", "", PurePosixPath(path).stem.lower())
    return backend.by_kind.get(stem, backend.operators)


def backend_touches(repo: GitRepo, diff: Diff, project: str, profile: str) -> ProfileResult:
    """What ``project``'s changed backend code (its BACKENDS rows) touches: the operators of each changed file, on the
    targets that run that code. Called by the project's own profile."""
    result = ProfileResult()
    seen = set()
    for ch in diff.files:
        if ch.binary:
            continue
        side = "base" if ch.status == "deleted" else "head"
        path = ch.path if side == "head" else (ch.old_path or ch.path)
        backend = backend_of(path, {project})
        if backend is None or not path.endswith(SUFFIXES):
            continue
        regions = changed_regions(repo, ch, side, names_of=cpp_names if not path.endswith(".py") else None)
        if not regions:
            continue  # comments and blank lines change nothing
        first = regions[0]
        targets = reaching(backend.component)
        ops = operators_of(backend, path)
        label = "" if first.label == "<module>" else f" ({first.label})"
        why = (f"{backend.what} changed{label}: it runs for every graph it compiles; tested with "
               + ("the operators of this file's kind" if ops is not backend.operators
                  else "the operators every graph has") + (" (base line: code removed)" if side == "base" else ""))
        for op in ops:
            if (op, backend.component, path) not in seen:
                seen.add((op, backend.component, path))
                result.touches.append(Touch(operator=op, namespace=backend.namespace, converter=backend.component,
                                            file=first.file, line=first.line, why=why, targets=targets,
                                            profile=profile))
        if not targets:
            result.unmapped.append({"file": first.file, "line": first.line, "region": first.label,
                                    "why": f"{backend.what}: no dlci target runs it"})
    return result
