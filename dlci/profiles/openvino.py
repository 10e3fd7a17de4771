"""OpenVINO: the PyTorch, ONNX, TensorFlow and TensorFlow Lite frontends.

Tables read at the revision analysed (head, and base for removed code):

* PyTorch ``src/frontends/pytorch/src/op_table.cpp``: ``get_supported_ops_ts()`` rows (``{"aten::elu",
  op::translate_elu}``) -> target ``openvino.pytorch``; ``get_supported_ops_fx()`` rows (``{"aten.elu.default",
  op::translate_elu}``) -> ``openvino.exported_program``. Translators live in ``op/*.cpp``; helpers in
  ``utils.cpp`` and in the op files themselves (``translate_avg_pool_base``).
* ONNX: ``ONNX_OP("Elu", OPSET_SINCE(1), ai_onnx::opset_1::elu[, DOMAIN])`` registrations in
  ``src/frontends/onnx/frontend/src/**.cpp`` -> ``openvino.onnx``.
* TensorFlow ``src/frontends/tensorflow/src/op_table.cpp`` ``get_supported_ops()`` rows (``{"Elu",
  CreatorFunction(translate_elu_op)}``), translators shared in ``src/frontends/tensorflow_common`` ->
  ``openvino.tf``.
* TensorFlow Lite ``src/frontends/tensorflow_lite/src/op_table.cpp`` (``{"ELU", translate_elu_op}``,
  ``OP_CONVERT_TYPE_RENAME(translate_pad_op, "Pad")``) -> ``openvino.tflite``.

A changed table row selects its operator; a changed function selects every row naming it; a changed helper selects
the rows whose translators call it (callers found by identifier at the same revision, a few levels deep); a changed
function no row reaches is reported as unmapped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dlci.diff import Diff, GitRepo
from dlci.targets import reaching
from dlci.profiles._backends import backend_touches
from dlci.profiles import register
from dlci.profiles._tables import (Changed, Entry, Selector, brace_entries, calls, changed_regions, compact,
                                   cpp_names, cpp_refs, grep_words, reach, table_rows_changed, unquote, why_for)
from dlci.profiles import openvino_python
from dlci.profiles.base import Profile, ProfileResult

CPP_SUFFIXES = (".cpp", ".cc", ".hpp", ".h", ".hh", ".cxx")

PT_TABLE = "src/frontends/pytorch/src/op_table.cpp"
TF_TABLE = "src/frontends/tensorflow/src/op_table.cpp"
TFLITE_TABLE = "src/frontends/tensorflow_lite/src/op_table.cpp"
ONNX_SRC = "src/frontends/onnx/frontend/src"
TF_COMMON = ("src/frontends/tensorflow_common/src", "src/frontends/tensorflow_common/include")

ONNX_DOMAINS = {"MICROSOFT_DOMAIN": "com.microsoft", "PYTORCH_ATEN_DOMAIN": "org.pytorch.aten",
                "MMDEPLOY_DOMAIN": "mmdeploy", "OPENVINO_ONNX_DOMAIN": "org.openvinotoolkit",
                "ONNX_DOMAIN": "onnx", "ai.onnx": "onnx", "": "onnx"}


def _torch_namespace(key: str) -> str:
    if key.startswith(("aten::", "aten.")):
        return "aten"
    if key.startswith("<built-in"):
        return "python"
    m = re.match(r"(\w+)(::|\.)", key)
    return m.group(1) if m else "aten"


def _pytorch_tables(repo: GitRepo, rev: str) -> list[Entry]:
    text = repo.text(PT_TABLE, rev)
    if text is None:
        return []
    out = []
    for fn, component, label in (("get_supported_ops_ts", "openvino:frontend.pytorch.ts", "TorchScript op table entry"),
                                 ("get_supported_ops_fx", "openvino:frontend.pytorch.fx", "FX op table entry")):
        targets = reaching(component)
        for key, expr, a, b in brace_entries(text, fn):
            out.append(Entry(key, _torch_namespace(key), PT_TABLE, a, b, cpp_refs(expr), compact(expr), targets,
                             label))
    return out


def _brace_table(path: str, namespace: str, component: str, label: str) -> Callable:
    def load(repo: GitRepo, rev: str) -> list[Entry]:
        text = repo.text(path, rev)
        if text is None:
            return []
        targets = reaching(component)
        return [Entry(key, namespace, path, a, b, cpp_refs(expr), compact(expr), targets, label)
                for key, expr, a, b in brace_entries(text, "get_supported_ops")]
    return load


ONNX_REGISTRATIONS = ("ONNX_OP", "ONNX_OP_M", "register_translator")


def _onnx_tables(repo: GitRepo, rev: str) -> list[Entry]:
    out = []
    for path in sorted(grep_words(repo, rev, ONNX_REGISTRATIONS, [ONNX_SRC])):
        if not path.endswith(CPP_SUFFIXES):
            continue
        text = repo.text(path, rev)
        if text is None:
            continue
        for c in calls(text, ONNX_REGISTRATIONS):
            if len(c.args) < 3:
                continue
            name = unquote(c.args[0])
            if name is None:
                continue
            domain = c.args[3].strip() if len(c.args) > 3 else ""
            ns = ONNX_DOMAINS.get(unquote(domain) or domain, unquote(domain) or domain.lower())
            fn = c.args[2].strip()
            refs = cpp_refs(fn)
            out.append(Entry(name, ns, path, c.line, c.end_line, refs, re.sub(r"\s+", "", fn),
                             reaching("openvino:frontend.onnx"), "ONNX_OP registration"))
    return out


@dataclass(frozen=True)
class Frontend:
    name: str
    marker: str                        # a file (or glob) whose presence at a revision means the frontend exists
    code: tuple[str, ...]              # directories of converter code (translators, helpers)
    tables: Callable[[GitRepo, str], list[Entry]]
    table_files: tuple[str, ...] = ()  # files that hold only the table (their loose lines are declarations)
    table_functions: tuple[str, ...] = ()  # the functions returning the tables (their other lines are plumbing)
    same_file_first: bool = False      # a function name resolves to rows of its own file first (ONNX: elu in elu.cpp)


FRONTENDS = (
    Frontend("pytorch", PT_TABLE, ("src/frontends/pytorch/src", "src/frontends/common_translators"),
             _pytorch_tables, (PT_TABLE,), ("get_supported_ops_ts", "get_supported_ops_fx")),
    Frontend("onnx", ONNX_SRC + "/op/*.cpp", (ONNX_SRC,), _onnx_tables, same_file_first=True),
    Frontend("tensorflow", TF_TABLE, ("src/frontends/tensorflow/src",) + TF_COMMON,
             _brace_table(TF_TABLE, "tf", "openvino:frontend.tf", "TensorFlow op table entry"), (TF_TABLE,),
             ("get_supported_ops",)),
    Frontend("tensorflow_lite", TFLITE_TABLE, ("src/frontends/tensorflow_lite/src",) + TF_COMMON,
             _brace_table(TFLITE_TABLE, "tflite", "openvino:frontend.tflite", "TensorFlow Lite op table entry"),
             (TFLITE_TABLE,), ("get_supported_ops",)),
)


def _under(path: str, dirs: tuple[str, ...]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def _exists(repo: GitRepo, marker: str, rev: str) -> bool:
    return bool(repo.glob(marker, rev)) if "*" in marker else repo.exists(marker, rev)


class CallerIndex:
    """Who references a name, at one revision, within a set of directories (``git grep -w``, then the enclosing
    region of each hit)."""

    def __init__(self, repo: GitRepo, rev: str, dirs: tuple[str, ...], suffixes=CPP_SUFFIXES, max_files: int = 60,
                 names_of=cpp_names):
        self.repo, self.rev, self.dirs, self.suffixes, self.max_files = repo, rev, dirs, suffixes, max_files
        self.names_of = names_of
        self._regions: dict[str, list] = {}
        self._cache: dict[str, list[Changed]] = {}
        self.too_wide: set[str] = set()

    def regions(self, path: str):
        if path not in self._regions:
            from dlci.diff.regions import regions
            text = self.repo.text(path, self.rev)
            self._regions[path] = (regions(path, text), text) if text is not None else ([], None)
        return self._regions[path]

    def enclosing(self, path: str, line: int) -> tuple[list[str], str] | None:
        """(names, label) of the function containing ``line`` of ``path``; None outside functions."""
        from dlci.diff.regions import innermost
        regs, text = self.regions(path)
        r = innermost([x for x in regs if x.kind != "entry"], line)
        if r is None or r.kind == "class":
            return None
        return self.names_of(r, text), r.name

    def __call__(self, name: str, file: str) -> list[Changed]:
        if name in self._cache:
            return self._cache[name]
        hits = {p: ls for p, ls in grep_words(self.repo, self.rev, [name], self.dirs).items()
                if p.endswith(self.suffixes)}
        if len(hits) > self.max_files:  # a utility everything uses: following it would select the world
            self.too_wide.add(name)
            hits = {}
        out = []
        for path, lines in sorted(hits.items()):
            seen = set()
            for ln in lines:
                found = self.enclosing(path, ln)
                if found is None:
                    continue
                names, label = found
                if not names or names[0] == name or (label, path) in seen:
                    continue  # the definition of `name` itself
                seen.add((label, path))
                out.append(Changed(path, ln, names, label, self.rev))
        self._cache[name] = out
        return out


def direct_lookup(entries: list[Entry], same_file_first: bool) -> Callable[[str, str], list[Entry]]:
    by_ref: dict[str, list[Entry]] = {}
    for e in entries:
        for r in e.refs:
            by_ref.setdefault(r, []).append(e)

    def direct(name: str, file: str) -> list[Entry]:
        rows = by_ref.get(name, [])
        if same_file_first:
            mine = [e for e in rows if e.file == file]
            return mine or rows
        return rows
    return direct


def analyse_cpp_frontends(profile: str, repo: GitRepo, diff: Diff, frontends, *, code_suffixes=CPP_SUFFIXES,
                          what: str = "translator") -> ProfileResult:
    """The shared engine: for each frontend present, rows touched directly plus rows reached from changed code."""
    sel = Selector(profile)
    explained: dict[tuple[str, str, int], bool] = {}   # (file, label, line) -> reached some row
    for fe in frontends:
        if not (_exists(repo, fe.marker, "head") or _exists(repo, fe.marker, "base")):
            continue
        mine = [ch for ch in diff.files if not ch.binary and
                (_under(ch.path, fe.code) or (ch.old_path and _under(ch.old_path, fe.code)))
                and (ch.path.endswith(code_suffixes) or (ch.old_path or "").endswith(code_suffixes))]
        if not mine:
            continue
        head_entries = fe.tables(repo, "head")
        base_entries = fe.tables(repo, "base")
        head_keys = {(e.operator, e.table, e.targets) for e in head_entries}
        removed = {(e.operator, e.table, e.targets) for e in base_entries} - head_keys
        for side, entries in (("head", head_entries), ("base", base_entries)):
            direct = direct_lookup(entries, fe.same_file_first)
            callers = CallerIndex(repo, side, fe.code, code_suffixes)
            for ch in mine:
                if side == "head" and ch.status == "deleted":
                    continue
                if side == "base" and ch.status == "added":
                    continue
                used = table_rows_changed(sel, ch, side, entries, removed)
                file = ch.path if side == "head" else (ch.old_path or ch.path)
                is_table = file in fe.table_files
                regions = changed_regions(repo, ch, side, skip=lambda ln: ln in used,
                                          names_of=cpp_names)
                for c in regions:
                    key = (c.file, c.label, c.line)
                    explained.setdefault(key, False)
                    if is_table and (not c.names or c.names[0] in fe.table_functions):
                        explained[key] = True  # declarations next to the table, the table function's plumbing
                        continue
                    if not c.names:
                        continue
                    for entry, path in reach(c, direct, callers):
                        explained[key] = True
                        why = why_for(path, entry, what)
                        if side == "base":
                            why += " (base line: code removed)"
                        conv = path[-1] if path[-1] in entry.refs else entry.converter
                        sel.touch(entry, c.file, c.line, why, converter=conv)
                    if not explained[key] and c.names and c.names[0] in callers.too_wide:
                        explained[key] = None  # type: ignore[assignment]
    for (file, label, line), ok in sorted(explained.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        if ok is None:
            sel.unmapped(file, line, label, "helper used too widely to follow (more than 60 files reference it)")
        elif not ok:
            sel.unmapped(file, line, None if label == "<module>" else label,
                         "changed converter code that no operator table entry reaches")
    return sel.result


@register
class OpenVINOProfile(Profile):
    name = "openvino"
    # transformations (fusions, constant folding, layout), the core's shape inference, the CPU plugin's graph and
    # node fusions, the ONNX frontend's graph walk, and the model conversion pipeline
    graph_code = (("src/common/transformations/*", "openvino:ovc"), ("src/core/*", "openvino:ovc"),
                  ("src/plugins/intel_cpu/src/graph*", "openvino:cpu"),
                  ("src/plugins/intel_cpu/src/transformations/*", "openvino:cpu"),
                  ("src/frontends/onnx/frontend/src/core/*", "openvino:frontend.onnx"),
                  ("src/frontends/onnx/frontend/src/utils/*", "openvino:frontend.onnx"),
                  ("tools/ovc/openvino/tools/ovc/*", "openvino:ovc"))
    description = ("OpenVINO frontends: PyTorch op_table.cpp (TorchScript/FX), ONNX ONNX_OP registrations, "
                   "TensorFlow and TensorFlow Lite op_table.cpp; the Python side (PyTorch decoders, torch.compile "
                   "backend, export decompositions, TensorFlow graph iterator, ovc)")
    python_converter_files = tuple(f"{root}/openvino/frontend/**.py".lstrip("/") for root in
                                   openvino_python.PACKAGE_ROOTS)
    # the checkout's Python package over the installed wheel's native libraries (linked in by prepare_checkout);
    # whichever layout the repository has
    python_path = openvino_python.PACKAGE_ROOTS

    def prepare_checkout(self, root: Path) -> None:
        openvino_python.link_native(root)

    def detect(self, repo: GitRepo) -> bool:
        return any(_exists(repo, fe.marker, "head") for fe in FRONTENDS) or \
            openvino_python.package_dir(repo) is not None

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        result = analyse_cpp_frontends(self.name, repo, diff, FRONTENDS)
        python = openvino_python.analyse(repo, diff, self.name)
        backends = backend_touches(repo, diff, "openvino", self.name)  # the CPU and GPU plugins
        for part in (python, backends):
            result.touches += part.touches
            result.unmapped += part.unmapped
        return result
