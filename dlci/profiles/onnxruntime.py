"""ONNX Runtime: kernel registrations of the execution providers and contrib ops.

Table: every kernel registration macro under ``onnxruntime/core/providers/**`` and ``onnxruntime/contrib_ops/**``,
read at the revision analysed:

* ``ONNX_CPU_OPERATOR_KERNEL(Elu, 6, KernelDefBuilder()..., Elu<float>);`` and its ``VERSIONED`` / ``TYPED`` /
  ``ML`` / ``MS`` variants (CPU provider, domain from the macro name);
* ``ONNX_OPERATOR_KERNEL_EX(Name, kOnnxDomain, 13, kCpuExecutionProvider, builder, Class)`` and its variants
  (domain and provider as arguments);
* ``class ONNX_OPERATOR_KERNEL_CLASS_NAME(kCpuExecutionProvider, kOnnxDomain, 6, Elu);`` declarations and the
  ``BuildKernelCreateInfo<...>`` rows of ``*_execution_provider.cc`` / ``*_contrib_kernels.cc``;
* registrations written through a file's own function-like macros (``REGISTER_UNARY_ELEMENTWISE_KERNEL(Elu, 6)``),
  expanded.

Each registration names its kernel class (the last macro argument). A changed function of a kernel class
(``Gemm<T>::Compute``, a functor's ``operator()``) selects the operators registered with that class; a changed
helper selects the operators whose kernels call it (callers found by identifier, including MLAS routines called from
kernels); other changes in a file that registers kernels select the operators registered in that file. Kernels of
the CPU execution provider reach the dlci targets ``onnxruntime`` and ``torch.onnx`` (the exporter's models run on
ONNX Runtime's CPU provider); kernels of the CUDA provider reach ``onnxruntime.cuda`` and ``torch.onnx.cuda`` (GPU
runners); kernels of other providers are reported with no target.
"""
from __future__ import annotations

import re

from dlci.diff import Diff, GitRepo
from dlci.targets import reaching
from dlci.profiles import register
from dlci.profiles._tables import (Entry, Selector, IDENT, blank_cpp, calls, changed_regions, cpp_names, defines,
                                   expand, grep_words, reach, table_rows_changed, why_for)
from dlci.profiles.base import Profile, ProfileResult
from dlci.profiles.openvino import CallerIndex

PROVIDERS = "onnxruntime/core/providers"
CONTRIB = "onnxruntime/contrib_ops"
MLAS = "onnxruntime/core/mlas"
KERNEL_DIRS = (PROVIDERS, CONTRIB)
CODE_DIRS = (PROVIDERS, CONTRIB, MLAS)
SUFFIXES = (".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh", ".inc")
CPU = "onnxruntime:cpu"  # the component the CPU execution provider's kernels belong to (dlci.targets.reaching)
CUDA = "onnxruntime:cuda"  # ... and the CUDA execution provider's

MACRO = re.compile(r"\bONNX_(?:CPU_)?OPERATOR_\w*KERNEL(?:_EX|_CLASS_NAME)?\b")
DOMAINS = {"kOnnxDomain": "onnx", "kOnnxDomainAlias": "onnx", "kMLDomain": "ai.onnx.ml", "kMSDomain": "com.microsoft",
           "kMSNchwcDomain": "com.microsoft.nchwc", "kMSInternalNHWCDomain": "com.ms.internal.nhwc",
           "kPytorchAtenDomain": "org.pytorch.aten", "kMSDmlDomain": "com.microsoft.dml",
           "kMSExperimentalDomain": "com.microsoft.experimental"}
KERNEL_METHODS = frozenset({"Compute", "ComputeInternal", "ComputeImpl", "PrePack", "UseSharedPrePackedBuffers",
                            "ComputeAsync"})
TYPE_WORDS = frozenset({"float", "double", "int", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
                        "int64_t", "uint64_t", "bool", "MLFloat16", "BFloat16", "T", "T1", "T2", "std", "string",
                        "onnxruntime", "contrib", "cuda", "rocm", "functors", "true", "false", "Float8E4M3FN",
                        "Float8E5M2", "Float8E4M3FNUZ", "Float8E5M2FNUZ", "Int4x2", "UInt4x2", "float16", "half",
                        "kOnnxDomain", "kMSDomain", "kMLDomain", "class", "typename"})


def _registration(macro: str, args: tuple[str, ...]):
    """(op, domain constant, provider constant, kernel class expression, since version) or None."""
    args = tuple(a.strip() for a in args)
    if not args:
        return None
    if macro.endswith("_CLASS_NAME"):
        if len(args) < 4:
            return None
        return args[-1], args[1], args[0], "", args[2]
    if macro.startswith("ONNX_CPU_"):
        dom = "kMLDomain" if "_ML_" in macro else "kMSDomain" if "_MS_" in macro else "kOnnxDomain"
        cls = args[-1] if len(args) >= 3 else ""
        return args[0], dom, "kCpuExecutionProvider", cls, args[1] if len(args) > 1 else ""
    if len(args) < 4:
        return None
    provider = next((a for a in args[2:] if re.fullmatch(r"k\w*ExecutionProvider", a)), "")
    return args[0], args[1], provider, args[-1], args[2]


def _kernel_classes(expr: str) -> frozenset[str]:
    return frozenset(w for w in IDENT.findall(blank_cpp(expr, strings=True)) if w not in TYPE_WORDS)


def _entries_in(path: str, text: str) -> list[Entry]:
    out = []
    code = blank_cpp(text)
    local = defines(text)

    def add(macro, args, line, end_line, via=None, start=None) -> Entry | None:
        reg = _registration(macro, args)
        if reg is None:
            return None
        op, dom, provider, cls, ver = reg
        if not IDENT.fullmatch(op) or op in local:
            return None
        cpu = provider == "kCpuExecutionProvider"
        targets = reaching(CPU) if cpu else reaching(CUDA) if provider == "kCudaExecutionProvider" else ()
        label = "kernel registration"
        if macro.endswith("_CLASS_NAME"):
            before = code[max(0, (start or 0) - 40):start or 0].rstrip()
            label = "kernel list entry" if before.endswith("<") else "kernel class declaration"
        conv = re.sub(r"\s+", "", cls) or op
        prov = provider.replace("ExecutionProvider", "").lstrip("k") or "?"
        e = Entry(op, DOMAINS.get(dom, dom), path, line, end_line, _kernel_classes(cls),
                  f"{conv} [{prov}, opset {ver}]" if ver else conv, targets,
                  label + (f" (via {via})" if via else ""))
        out.append(e)
        return e

    # direct registrations (outside #define bodies)
    names = set(MACRO.findall(blank_cpp(code, strings=True)))
    for c in calls(text, names, blanked=code):
        add(c.name, c.args, c.line, c.end_line, start=c.start)
    # registrations through the file's own macros: expand each invocation (a few levels); the macro's definition
    # is part of each registration it makes, so a changed #define line selects them too
    if local:
        for c in calls(text, local.keys(), blanked=code):
            for macro, args, chain in _expand_all(c.name, c.args, local, 0):
                e = add(macro, args, c.line, c.end_line, via=c.name)
                if e is not None:
                    for d in chain:
                        out.append(Entry(e.operator, e.namespace, path, d.line, d.end, e.refs, e.converter,
                                         e.targets, f"kernel registration macro {d.name}"))
    return out


def _expand_all(name: str, args: tuple[str, ...], local: dict, depth: int, chain: tuple = ()):
    """(registration macro, its arguments, the local #defines expanded to reach it) for a local macro call."""
    if depth > 4:
        return
    chain = chain + (local[name],)
    body = expand(local[name], args)
    for c in calls(body, set(MACRO.findall(body)) | set(local), skip_defines=False):
        if c.name in local:
            if all(d.name != c.name for d in chain):
                yield from _expand_all(c.name, c.args, local, depth + 1, chain)
        else:
            yield c.name, c.args, chain


def kernel_table(repo: GitRepo, rev: str, only: set[str] | None = None) -> list[Entry]:
    """Every registration at ``rev`` (or only those in the files ``only``)."""
    out = []
    if only is not None:
        paths = sorted(only)
    else:
        paths = sorted(grep_words(repo, rev, ["KernelDefBuilder", "ONNX_OPERATOR_KERNEL_CLASS_NAME",
                                              "ONNX_OPERATOR_TYPED_KERNEL_CLASS_NAME",
                                              "ONNX_OPERATOR_VERSIONED_KERNEL_CLASS_NAME",
                                              "ONNX_OPERATOR_VERSIONED_TYPED_KERNEL_CLASS_NAME"], KERNEL_DIRS))
    for path in paths:
        if not path.endswith(SUFFIXES) or not any(path.startswith(d + "/") for d in KERNEL_DIRS):
            continue
        text = repo.text(path, rev)
        if text is not None:
            out += _entries_in(path, text)
    return out


def _key(e: Entry) -> tuple:
    """A registration's identity across revisions: operator, where it is listed, provider and opset version."""
    return e.operator, e.namespace, e.table, e.targets, e.converter


def _provider(path: str) -> str | None:
    """``cpu`` for providers/cpu/... and contrib_ops/cpu/...; None elsewhere (MLAS, framework code)."""
    m = re.match(r"onnxruntime/(?:core/providers|contrib_ops)/([^/]+)/", path)
    return m.group(1) if m else None


def ort_names(region, text) -> list[str]:
    """A kernel method is referenced through its class (``Gemm<T>::Compute`` -> Gemm, a functor's ``operator()``
    -> the functor); a helper by its own name."""
    names = cpp_names(region, text)
    return [n for n in names if n not in KERNEL_METHODS] or names


@register
class OnnxRuntimeProfile(Profile):
    name = "onnxruntime"
    # graph optimisers (fusions, constant folding, layout transformation), the graph itself and session setup
    graph_code = (("onnxruntime/core/optimizer/*", "onnxruntime:cpu"), ("onnxruntime/core/graph/*", "onnxruntime:cpu"),
                  ("onnxruntime/core/framework/*", "onnxruntime:cpu"),
                  ("onnxruntime/core/session/*", "onnxruntime:cpu"))
    description = "ONNX Runtime kernel registrations (execution providers, contrib ops)"

    def detect(self, repo: GitRepo) -> bool:
        return (repo.exists(f"{PROVIDERS}/cpu/cpu_execution_provider.cc")
                or bool(repo.glob(f"{PROVIDERS}/cpu/*.cc")) and repo.exists("onnxruntime/core/framework/op_kernel.h"))

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        sel = Selector(self.name)
        mine = [ch for ch in diff.files if not ch.binary and any(
            (p or "").startswith(d + "/") for d in CODE_DIRS for p in (ch.path, ch.old_path))
            and (ch.path.endswith(SUFFIXES) or (ch.old_path or "").endswith(SUFFIXES))]
        if not mine:
            return sel.result
        head = kernel_table(repo, "head")
        # the base table differs from head only in the changed files
        changed_base = {ch.old_path for ch in mine if ch.old_path}
        changed_head = {ch.path for ch in mine if ch.status != "deleted"}
        base = [e for e in head if e.file not in changed_head] + kernel_table(repo, "base", changed_base)
        removed = {_key(e) for e in base} - {_key(e) for e in head}
        explained: dict = {}
        for side, entries in (("head", head), ("base", base)):
            by_class: dict[str, list[Entry]] = {}
            by_file: dict[str, list[Entry]] = {}
            for e in entries:
                for r in e.refs:
                    by_class.setdefault(r, []).append(e)
                if e.table.startswith(("kernel registration")):
                    by_file.setdefault(e.file, []).append(e)

            def direct(name: str, file: str) -> list[Entry]:
                """Registrations naming class ``name``: those of the same file, else of the same provider (a CPU
                functor change is not a CUDA kernel change), else all."""
                rows = by_class.get(name, [])
                for scope in (lambda e: e.file == file, lambda e: _provider(e.file) == _provider(file)):
                    mine_rows = [e for e in rows if scope(e)]
                    if mine_rows:
                        return mine_rows
                return rows

            callers = CallerIndex(repo, side, CODE_DIRS, SUFFIXES, names_of=ort_names)
            for ch in mine:
                if (side == "head" and ch.status == "deleted") or (side == "base" and ch.status == "added"):
                    continue
                used = table_rows_changed(sel, ch, side, entries, removed, key=_key)
                file = ch.path if side == "head" else (ch.old_path or ch.path)
                for c in changed_regions(repo, ch, side, skip=lambda ln: ln in used, names_of=ort_names):
                    key = (c.file, c.label, c.line)
                    explained.setdefault(key, False)
                    hits = reach(c, direct, callers) if c.names else []
                    suffix = " (base line: code removed)" if side == "base" else ""
                    for entry, path in hits:
                        explained[key] = True
                        sel.touch(entry, c.file, c.line, why_for(path, entry, "kernel") + suffix)
                    if not hits and by_file.get(file):
                        explained[key] = True
                        for entry in by_file[file]:
                            sel.touch(entry, c.file, c.line,
                                      f"kernel file changed ({c.label} registers or implements {entry.operator})"
                                      + suffix)
        for (file, label, line), ok in sorted(explained.items(), key=lambda kv: (kv[0][0], kv[0][2])):
            if not ok:
                sel.unmapped(file, line, None if label == "<module>" else label,
                             "changed kernel code that no kernel registration reaches")
        return sel.result
