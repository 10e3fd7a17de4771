"""PyTorch: ATen native kernels, decompositions, references and inductor lowerings.

Tables read at the revision analysed (head, and base for removed code):

* ``aten/src/ATen/native/native_functions.yaml``: each ``- func: softplus.out(...)`` entry, its ``dispatch:`` kernels
  (``CPU, CUDA: softplus_out``) and ``structured_delegate`` (``softplus`` delegates to ``softplus.out``). A changed
  entry selects its operator; a changed C++ kernel (``aten/src/ATen/native/**``: ``TORCH_IMPL_FUNC(softplus_out)``,
  a function named in ``dispatch:``, or a CompositeImplicit kernel named after the operator) selects the entries
  dispatching to it and those delegating to them; a changed helper is followed to its callers (through
  ``REGISTER_DISPATCH(stub, &kernel)`` to the code calling ``stub``). Where the changed code runs decides the targets:
  a CPU kernel (``native/cpu``, a ``CPU`` dispatch key) reaches every torch-consuming CPU target; a CUDA kernel
  (``native/cuda``, ``native/cudnn``, ``.../cuda/``, a ``CUDA`` key) reaches the CUDA targets (torch.cuda,
  torch.compile.cuda) only; device-generic code (a composite kernel, a structured kernel's shared part, a key for
  both) reaches both; a kernel of another device (MPS, XPU, HIP...) reaches none.
* ``torch/_decomp/*.py``: ``@register_decomposition(aten.x)`` / ``([aten.a.default, aten.b])``,
  ``@aten.x.default.py_impl(...)``, ``register_inplace(aten.x_, aten.x)`` -> targets that run decompositions
  (torch.compile, torch.onnx, tvm.from_exported_program, openvino.exported_program).
* ``torch/_refs/**.py``: reference functions, named by ``@register_decomposition`` or, for
  ``@_make_elementwise_*_reference`` / ``@out_wrapper`` / ``@elementwise_type_promotion_wrapper`` functions, by the
  function name (``def softplus`` -> softplus). Registered references are decompositions (same targets).
* ``torch/_inductor/lowering.py`` (``@register_lowering(aten.x)``, ``make_fallback(aten.x)``,
  ``register_pointwise(aten.x)``...), ``torch/_inductor/decomposition.py`` and the templates' tuned lowerings in
  ``torch/_inductor/kernel/*.py`` -> ``torch.compile`` and ``torch.compile.cuda`` (inductor's code generators
  themselves, which no table maps to operators, are the ``backends`` profile's).

Private helpers in those Python files select the registered functions that call them (same file).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from dlci.diff import Diff, GitRepo
from dlci.targets import reaching
from dlci.profiles import register
from dlci.profiles._backends import backend_touches
from dlci.profiles._tables import (Changed, Entry, PyFile, PyTables, Selector, analyse_python, blank_cpp, call_name,
                                   changed_regions, cpp_names, grep_words, line_of, line_starts, matching,
                                   module_statements, py_defs, reach, torch_ops_in, why_for)
from dlci.profiles.base import Profile, ProfileResult
from dlci.profiles.openvino import CallerIndex

NATIVE = "aten/src/ATen/native"
YAML = f"{NATIVE}/native_functions.yaml"
NATIVE_SUFFIXES = (".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh", ".mm")

# the components of PyTorch that targets declare they run (dlci.targets.reaching)
EAGER, DECOMPOSITIONS, INDUCTOR = "pytorch:eager", "pytorch:decompositions", "pytorch:inductor"
EAGER_CUDA = "pytorch:eager.cuda"  # ATen's CUDA kernels (torch.cuda, and torch.compile.cuda's fallbacks)
GPU_KEYS = re.compile(r"CUDA|MPS|HIP|XPU|MTIA|Vulkan|Metal|HPU|Lazy|IPU|ORT|MAIA|PrivateUse")
CUDA_KEY = re.compile(r"CUDA")
# kernels of every device (no device in the key): they run on the CPU and on CUDA alike
GENERIC_KEYS = re.compile(r"^(Composite\w*|Math|DefaultBackend|Meta)$")
CUDA_DIRS = re.compile(r"/(cuda|cudnn|nested/cuda|sparse/cuda|quantized/cuda|transformers/cuda)/")
CPU_DIRS = re.compile(r"/(cpu|mkldnn|quantized/cpu|nested/cpu|sparse/cpu)/")
GPU_DIRS = re.compile(r"/(cuda|mps|hip|miopen|cudnn|vulkan|metal|metal\w*|xpu|mtia|nested/cuda|sparse/cuda|"
                      r"quantized/cuda|transformers/cuda|transformers/hip)/")


# ---------------------------------------------------------------------------------------------------------------
# native_functions.yaml
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class NativeEntry:
    name: str                      # "softplus.out"
    start: int
    end: int
    dispatch: list[tuple[tuple[str, ...], str]] = field(default_factory=list)  # ((keys...), kernel)
    delegate: str | None = None    # structured_delegate

    @property
    def base(self) -> str:
        return self.name.split(".")[0]


def parse_native_functions(text: str) -> list[NativeEntry]:
    out: list[NativeEntry] = []
    lines = text.split("\n")
    cur: NativeEntry | None = None
    in_dispatch = False
    for i, raw in enumerate(lines, 1):
        m = re.match(r"- func:\s*([\w.]+)\s*\(", raw)
        if m:
            cur = NativeEntry(m.group(1), i, i)
            out.append(cur)
            in_dispatch = False
            continue
        if cur is None:
            continue
        if raw.startswith("-") or (raw and not raw[0].isspace() and not raw.startswith("#")):
            cur = None
            continue
        if raw.strip() and not raw.lstrip().startswith("#"):
            cur.end = i
        s = raw.strip()
        if re.match(r"\s{2}\w", raw):
            in_dispatch = s.startswith("dispatch:")
            d = re.match(r"structured_delegate:\s*([\w.]+)", s)
            if d:
                cur.delegate = d.group(1)
        elif in_dispatch and ":" in s and not s.startswith("#"):
            keys, kernel = s.split(":", 1)
            kernel = kernel.split("#")[0].strip()
            if kernel:
                cur.dispatch.append((tuple(k.strip() for k in keys.split(",")), kernel))
    return out


def _native_targets(keys: set[str]) -> tuple[str, ...]:
    """The targets of a kernel dispatched to ``keys`` (none: CompositeImplicitAutograd, every device)."""
    cpu = not keys or any(not GPU_KEYS.search(k) for k in keys)
    cuda = not keys or any(CUDA_KEY.search(k) or GENERIC_KEYS.match(k) for k in keys)
    return tuple(dict.fromkeys((reaching(EAGER) if cpu else ()) + (reaching(EAGER_CUDA) if cuda else ())))


def _path_targets(path: str, targets: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """Where a native file's code runs narrows what its kernels reach: (targets, a note for the reason)."""
    where = "/" + path
    if CUDA_DIRS.search(where):
        return reaching(EAGER_CUDA), " (CUDA kernel: the CUDA targets)"
    if GPU_DIRS.search(where):
        return (), " (GPU code of a device no dlci target runs)"
    if CPU_DIRS.search(where):
        return tuple(x for x in targets if x in reaching(EAGER)), " (CPU kernel: the CPU targets)"
    return targets, ""


class NativeTable:
    """native_functions.yaml at one revision, as rows (one per entry, with delegates) and a kernel index."""

    def __init__(self, text: str | None):
        self.entries = parse_native_functions(text) if text else []
        self.by_name = {e.name: e for e in self.entries}
        self.delegates: dict[str, list[NativeEntry]] = {}
        for e in self.entries:
            if e.delegate:
                self.delegates.setdefault(e.delegate, []).append(e)
        self.kernels: dict[str, list[tuple[NativeEntry, tuple[str, ...]]]] = {}
        for e in self.entries:
            for keys, k in e.dispatch:
                self.kernels.setdefault(k, []).append((e, keys))
            if not e.dispatch and not e.delegate:   # CompositeImplicitAutograd: at::native::<name>
                self.kernels.setdefault(e.base, []).append((e, ("CompositeImplicitAutograd",)))
        self.rows = [self.row(e) for e in self.entries]

    def row(self, e: NativeEntry, keys: set[str] | None = None, converter: str | None = None) -> Entry:
        if keys is None:
            keys = {k for ks, _ in e.dispatch for k in ks}
        return Entry(e.name, "aten", YAML, e.start, e.end, frozenset(k for _, k in e.dispatch),
                     converter or (", ".join(sorted({k for _, k in e.dispatch})) or e.base),
                     _native_targets(keys), "native_functions.yaml entry")

    def with_delegates(self, e: NativeEntry) -> list[NativeEntry]:
        out, todo = [], [e]
        while todo:
            x = todo.pop()
            if x not in out:
                out.append(x)
                todo += self.delegates.get(x.name, [])
        return out

    def kernel_rows(self, kernel: str) -> list[Entry]:
        rows = []
        for e, keys in self.kernels.get(kernel, []):
            for x in self.with_delegates(e):
                rows.append(self.row(x, set(keys), converter=kernel))
        return rows


_MACRO_FN = re.compile(r"\b(TORCH_(?:IMPL|META|PRECOMPUTE_META)_FUNC2?)\s*\(\s*(\w+)")


def macro_functions(text: str) -> list[tuple[str, str, int, int]]:
    """Structured-kernel functions defined through macros, which a declarator scan does not see:
    ``TORCH_IMPL_FUNC(softplus_out) (const Tensor& self, ...) { ... }`` -> ("softplus_out", "TORCH_IMPL_FUNC",
    first line, last line)."""
    code = blank_cpp(text, strings=True)
    starts = line_starts(text)
    out = []
    for m in _MACRO_FN.finditer(code):
        j = matching(code, code.index("(", m.start()))
        k = re.compile(r"\s*\(").match(code, j + 1) if j > 0 else None
        if not k:
            continue
        p = matching(code, k.end() - 1)
        b = re.compile(r"\s*(?:const\s*)?\{").match(code, p + 1) if p > 0 else None
        if not b:
            continue
        close = matching(code, b.end() - 1)
        if close > 0:
            out.append((m.group(2), m.group(1), line_of(starts, m.start()), line_of(starts, close)))
    return out


def _in_macro_function(text: str | None, line: int) -> tuple[list[str], str] | None:
    if text is None:
        return None
    for name, macro, a, b in macro_functions(text):
        if a <= line <= b:
            return [name], f"{macro}({name})"
    return None


class NativeCallers(CallerIndex):
    """Callers within ATen native code, plus the dispatch-stub hop: ``REGISTER_DISPATCH(softplus_stub,
    &softplus_kernel)`` makes ``softplus_kernel`` reachable from whoever calls ``softplus_stub``."""

    def enclosing(self, path: str, line: int):
        found = super().enclosing(path, line)
        return found if found is not None else _in_macro_function(self.regions(path)[1], line)

    def __call__(self, name: str, file: str) -> list[Changed]:
        out = list(super().__call__(name, file))
        if name in self.too_wide:
            return out
        for path, lines in grep_words(self.repo, self.rev, [name], self.dirs).items():
            text = self.regions(path)[1] if path.endswith(self.suffixes) else None
            if text is None:
                continue
            src = text.split("\n")
            for ln in lines:
                m = re.search(r"REGISTER_\w*DISPATCH\s*\(\s*(\w+)\s*,\s*&?\s*(?:[\w:]+::)?" + re.escape(name) + r"\b",
                              src[ln - 1] if ln <= len(src) else "")
                if m:
                    out.append(Changed(path, ln, [m.group(1)], f"REGISTER_DISPATCH({m.group(1)})", self.rev))
        return out


# ---------------------------------------------------------------------------------------------------------------
# Python registrations
# ---------------------------------------------------------------------------------------------------------------

REGISTERING_CALLS = re.compile(r"^(register_\w+|make_fallback|add_needs_realized_inputs|make_foreach_pointwise)$")
ELEMENTWISE_REFS = ("_make_elementwise_unary_reference", "_make_elementwise_binary_reference")
REF_WRAPPERS = ("out_wrapper", "elementwise_type_promotion_wrapper", "_inplace_wrapper",
                "elementwise_unary_scalar_wrapper")


def _statement_rows(path: str, text: str, targets, table: str) -> list[Entry]:
    rows = []
    for stmt in module_statements(text) or []:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            fn = call_name(node)
            if not fn or not REGISTERING_CALLS.match(fn):
                continue
            ops = [op for a in node.args for op in torch_ops_in(a)]
            if fn == "register_inplace" or fn.startswith("register_foreach"):
                ops = ops[:1] if fn == "register_inplace" else ops
            refs = frozenset(n.id for a in list(node.args) + [k.value for k in node.keywords]
                             for n in ast.walk(a) if isinstance(n, ast.Name)
                             and n.id not in ("aten", "prims", "torch", "inductor_prims"))
            for op, ns in ops:
                rows.append(Entry(op, ns, path, stmt.lineno, stmt.end_lineno, refs, fn, targets, table))
    return rows


def _decorated_rows(path: str, defs, targets, table: str, refs_mode: bool = False) -> list[Entry]:
    """One row per operator a decorator registers, spanning that decorator's lines (so a changed decorator selects
    what it registers, a changed body everything the function registers)."""
    rows = []
    for d in defs:
        if d.kind != "function" or d.parent is not None:
            continue
        found: list[tuple[str, str, ast.AST, bool]] = []   # (op, namespace, decorator, registered)
        naming = None            # a reference-making decorator: the function name is the operator
        registers_by_name = False
        for dec in d.decorators:
            fn = call_name(dec)
            if fn in ("register_decomposition", "register_lowering") and isinstance(dec, ast.Call) and dec.args:
                found += [(op, ns, dec, True) for op, ns in torch_ops_in(dec.args[0])]
            elif fn == "py_impl" and isinstance(dec, ast.Call):
                found += [(op, ns, dec, True) for op, ns in torch_ops_in(dec.func)]
            elif refs_mode and fn in ELEMENTWISE_REFS:
                naming = naming or dec
                registers_by_name = registers_by_name or not any(
                    k.arg == "aten_op" and isinstance(k.value, ast.Constant) and k.value.value is None
                    for k in getattr(dec, "keywords", []))
            elif refs_mode and fn in REF_WRAPPERS:
                naming = naming or dec
        if refs_mode and not found and naming is not None and not d.name.startswith("_"):
            found = [(d.name, "aten", naming, registers_by_name)]
        seen = set()
        for op, ns, dec, registered in found:
            if (op, ns) in seen:
                continue
            seen.add((op, ns))
            t = targets if registered or not refs_mode else ()
            label = table if registered or not refs_mode else "reference (not registered as a decomposition)"
            rows.append(Entry(op, ns, path, dec.lineno, dec.end_lineno, frozenset({d.key}), d.name, t, label))
    return rows


def _python_reader(path: str, text: str) -> PyFile | None:
    defs = py_defs(text)
    if defs is None:
        return None
    if path.startswith("torch/_inductor/"):
        targets, table = reaching(INDUCTOR), ("inductor lowering" if path.endswith("lowering.py")
                                            else "inductor decomposition")
    else:
        targets, table = reaching(DECOMPOSITIONS), ("reference" if path.startswith("torch/_refs/") else "decomposition")
    rows = _decorated_rows(path, defs, targets, table, refs_mode=path.startswith("torch/_refs/"))
    return PyFile(path, defs, rows, _statement_rows(path, text, targets, table + " registration"))


def _python_file(path: str) -> bool:
    return path.endswith(".py") and (
        re.fullmatch(r"torch/_decomp/[^/]+\.py", path) is not None
        or (path.startswith("torch/_refs/") and "/test" not in path)
        or path in ("torch/_inductor/lowering.py", "torch/_inductor/decomposition.py")
        or re.fullmatch(r"torch/_inductor/kernel/[^/]+\.py", path) is not None)  # templates' tuned lowerings


# ---------------------------------------------------------------------------------------------------------------

@register
class PyTorchProfile(Profile):
    name = "pytorch"
    description = ("PyTorch: native_functions.yaml + ATen native kernels, torch/_decomp decompositions, torch/_refs "
                   "references, inductor lowerings")
    python_converter_files = ("torch/_decomp/*.py", "torch/_refs/**.py", "torch/_inductor/lowering.py",
                              "torch/_inductor/decomposition.py", "torch/_inductor/kernel/*.py")

    def detect(self, repo: GitRepo) -> bool:
        return repo.exists(YAML) or (repo.exists("torch/_inductor/lowering.py")
                                     and repo.exists("torch/_decomp/decompositions.py"))

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        sel = Selector(self.name)
        analyse_python(sel, repo, diff, PyTables(repo, _python_reader), _python_file, what="function",
                       unmapped_why="changed code that no registered decomposition/lowering/reference reaches")
        self._native(sel, repo, diff)
        backends = backend_touches(repo, diff, "pytorch", self.name)  # inductor's Triton and C++ code generators
        sel.result.touches += backends.touches
        sel.result.unmapped += backends.unmapped
        return sel.result

    def _native(self, sel: Selector, repo: GitRepo, diff: Diff) -> None:
        mine = [ch for ch in diff.files if not ch.binary and any(
            (p or "").startswith(NATIVE + "/") and ((p or "").endswith(NATIVE_SUFFIXES) or p == YAML)
            for p in (ch.path, ch.old_path))]
        if not mine:
            return
        tables = {"head": NativeTable(repo.text(YAML, "head")), "base": NativeTable(repo.text(YAML, "base"))}
        head_names = {e.name for e in tables["head"].entries}
        removed = {(r.operator, r.table, r.targets) for r in tables["base"].rows if r.operator not in head_names}
        for side in ("head", "base"):
            table = tables[side]
            callers = NativeCallers(repo, side, (NATIVE,), NATIVE_SUFFIXES)

            def direct(name: str, file: str, table=table) -> list[Entry]:
                return table.kernel_rows(name)

            for ch in mine:
                if (side == "head" and ch.status == "deleted") or (side == "base" and ch.status == "added"):
                    continue
                path = ch.path if side == "head" else (ch.old_path or ch.path)
                if path == YAML:
                    self._yaml_change(sel, ch, side, table, removed)
                    continue
                for c in self._native_regions(repo, ch, side):
                    hits = reach(c, direct, callers) if c.names else []
                    for entry, chain in hits:
                        targets, note = _path_targets(path, entry.targets)
                        why = why_for(chain, entry, "kernel") + note
                        if side == "base":
                            why += " (base line: code removed)"
                        sel.touch(entry, c.file, c.line, why, converter=chain[-1], targets=targets)
                    if not hits:
                        wide = c.names and c.names[0] in callers.too_wide
                        sel.unmapped(c.file, c.line, None if c.label == "<module>" else c.label,
                                     "helper used too widely to follow" if wide else
                                     "changed native code that no native_functions.yaml entry reaches")

    @staticmethod
    def _native_regions(repo: GitRepo, ch, side: str) -> list[Changed]:
        """Changed regions of a native C++ file; lines outside any declarator-defined function are placed in the
        macro-defined structured kernels (``TORCH_IMPL_FUNC``) around them."""
        from dlci.diff.regions import regions
        out = [c for c in changed_regions(repo, ch, side, names_of=cpp_names) if c.label != "<module>"]
        path = ch.path if side == "head" else (ch.old_path or ch.path)
        if side == "head" and ch.status == "deleted" or side == "base" and ch.status == "added":
            return out
        text = repo.text(path, side)
        if text is None:
            return out
        covered = [(r.start, r.end) for r in regions(path, text) if r.kind in ("function", "class")]
        lines = sorted(ch.touched_head_lines()) if side == "head" else list(ch.removed)
        loose = [ln for ln in lines if not any(a <= ln <= b for a, b in covered)]
        if side == "base":   # only what no longer exists at head
            head_text = repo.text(ch.path, "head") if ch.status != "deleted" else None
            alive = {n for n, *_ in macro_functions(head_text)} if head_text else set()
        else:
            alive = set()
        seen: dict[str, Changed] = {}
        first_loose = None
        for ln in loose:
            found = _in_macro_function(text, ln)
            if found is None:
                src = text.split("\n")
                s = src[ln - 1].strip() if 0 < ln <= len(src) else ""
                if first_loose is None and side == "head" and s and not s.startswith(("//", "#include", "}")):
                    first_loose = Changed(path, ln, [], "<module>", side)
                continue
            names, label = found
            if names[0] in alive or label in seen:
                continue
            seen[label] = Changed(path, ln, names, label, side)
        out += list(seen.values())
        if first_loose is not None:
            out.append(first_loose)
        return out

    @staticmethod
    def _yaml_change(sel: Selector, ch, side: str, table: NativeTable, removed: set) -> None:
        lines = ch.added if side == "head" else ch.removed
        if side == "head" and not lines:
            lines = sorted(ch.touched_head_lines())
        for e in table.entries:
            hit = [ln for ln in lines if e.start <= ln <= e.end]
            if not hit:
                continue
            row = table.row(e)
            if side == "base":
                if (row.operator, row.table, row.targets) in removed:
                    sel.touch(row, YAML, e.start, "native_functions.yaml entry removed (base line)")
                continue
            for x in table.with_delegates(e):
                why = "native_functions.yaml entry changed" if x is e else \
                    f"native_functions.yaml entry {e.name} changed ({x.name} delegates to it)"
                sel.touch(table.row(x), YAML, hit[0], why)
