"""Apache TVM: the Relax frontends (torch exported-program and FX translators, ONNX, TFLite).

Each frontend is one declarative row: the files that hold its converters (the convert map's file first), the class
that builds the map, how to read map keys, and the dlci targets (entry points) that run it. The operators come from
the convert maps themselves (see ``_pymap``); a change to the library's own operator layer (``python/tvm/relax/op``,
``python/tvm/topi``) selects the entries whose converters call the changed function. A change on the path the importer
itself runs for every graph (``from_onnx`` and what it calls: graph inputs, parameters, the node loop, outputs) selects
the frontend's few most common operators, since any graph would show it.
"""
from __future__ import annotations

import ast
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from dlci.diff import Diff, FileChange, GitRepo
from dlci.targets import reaching
from dlci.profiles import register
from dlci.profiles._backends import backend_touches
from dlci.profiles._pymap import LIBRARY_ROOTS, PyIndex
from dlci.profiles.base import Profile, ProfileResult, Touch

ROOT = "python/tvm/relax/frontend"
LIBRARY_CODE = ("python/tvm/relax/op/*", "python/tvm/topi/*")


def _torch_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "aten"  # "softplus.default" (exported program) or "softplus" (FX function/method name)
    text = ast.unparse(node)
    if text.startswith(("nn.", "torch.nn.")):
        return "torch.nn"  # module classes in the FX map
    return "aten" if isinstance(node, ast.Attribute) else None


def _string_key(namespace: str) -> Callable[[ast.AST], str | None]:
    return lambda node: namespace if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


@dataclass(frozen=True)
class Frontend:
    name: str
    files: tuple[str, ...]          # relative to ROOT; the convert map's file first
    map_owner: str | None           # class whose method builds the map (None: a module-level map)
    key_namespace: Callable[[ast.AST], str | None]
    component: str                  # what the targets that run this frontend declare they reach
    entry: str                      # module-level function that imports a whole graph (in files[0])
    # map keys of the operators nearly every graph has: what a change on the entry's own path (graph inputs,
    # parameters, the node loop, outputs), which runs for every graph whatever its operators, is tested with
    common: tuple[str, ...] = ()


FRONTENDS = (
    Frontend("exported_program", ("torch/exported_program_translator.py", "torch/base_fx_graph_translator.py",
                                  "common.py"), "ExportedProgramImporter", _torch_key, "tvm:frontend.exported_program",
             "from_exported_program", ("add.Tensor", "mul.Tensor", "relu.default", "linear.default", "conv2d.default")),
    Frontend("fx", ("torch/fx_translator.py", "torch/base_fx_graph_translator.py", "common.py"), "TorchFXImporter",
             _torch_key, "tvm:frontend.fx", "from_fx", ("add", "mul", "relu", "linear", "conv2d")),
    Frontend("onnx", ("onnx/onnx_frontend.py", "common.py"), None, _string_key("onnx"), "tvm:frontend.onnx",
             "from_onnx", ("Add", "Mul", "Relu", "MatMul", "Conv")),
    Frontend("tflite", ("tflite/tflite_frontend.py", "tflite/tflite_flexbuffer.py", "common.py"), "OperatorConverter",
             _string_key("tflite"), "tvm:frontend.tflite", "from_tflite",
             ("ADD", "MUL", "RELU", "FULLY_CONNECTED", "CONV_2D")),
)


def _path(rel: str) -> str:
    return f"{ROOT}/{rel}"


@register
class TVMProfile(Profile):
    name = "tvm"
    description = "Apache TVM Relax frontends: torch (exported program, FX), ONNX, TFLite convert maps"
    python_converter_files = tuple(_path(f) for fe in FRONTENDS for f in fe.files)
    # the checkout's Python sources over the installed wheel's native library (TVM's frontends are plain Python)
    python_path = ("python",)
    env = {"TVM_LIBRARY_PATH": "{site_packages}/tvm/lib"}
    # Relax passes and pipelines, legalization, the VM build, TIR lowering and codegen: what every imported graph
    # is compiled through (Python; the C++ counterparts need a build named in .dlci.yml install:)
    graph_code = (("python/tvm/relax/transform/*", "tvm:relax"), ("python/tvm/relax/backend/*", "tvm:relax"),
                  ("python/tvm/relax/pipeline.py", "tvm:relax"), ("python/tvm/relax/vm_build.py", "tvm:relax"),
                  ("python/tvm/relax/block_builder.py", "tvm:relax"), ("python/tvm/tir/*", "tvm:codegen.llvm"),
                  ("python/tvm/dlight/*", "tvm:codegen.llvm"), ("src/relax/transform/*", "tvm:relax"),
                  ("src/relax/backend/*", "tvm:relax"), ("src/relax/ir/*", "tvm:relax"),
                  ("src/tir/transforms/*", "tvm:codegen.llvm"), ("src/target/llvm/*", "tvm:codegen.llvm"))

    def prepare_checkout(self, root: Path) -> None:
        """TVM's build step looks for its C headers next to the Python package (wheel layout) or at the worktree root
        (source layout). A checkout whose python/ runs over the installed wheel, without the headers at its root,
        gets the wheel's include/ linked in: otherwise every compile fails with "Cannot find TVM include path"."""
        import importlib.util
        pkg = root / "python" / "tvm"
        if not pkg.is_dir() or (pkg / "include").exists() or (root / "include" / "tvm" / "runtime").is_dir():
            return
        spec = importlib.util.find_spec("tvm")
        installed = Path(spec.origin).parent / "include" if spec and spec.origin else None
        if installed is not None and (installed / "tvm" / "runtime").is_dir():
            (pkg / "include").symlink_to(installed, target_is_directory=True)

    def detect(self, repo: GitRepo) -> bool:
        return any(repo.exists(_path(fe.files[0])) for fe in FRONTENDS)

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        from dlci.diff.regions import touched

        result = ProfileResult()
        by_path: dict[str, FileChange] = {}
        for ch in diff.files:
            by_path[ch.path] = ch
            if ch.old_path:
                by_path.setdefault(ch.old_path, ch)
        library = [ch for ch in diff.files if any(fnmatch.fnmatch(ch.path, p) for p in LIBRARY_CODE)
                   and ch.path.endswith(".py")]
        library_names = self._changed_library_functions(repo, library)
        explained: set[tuple[str, str]] = set()  # (file, region) that selected at least one operator
        frontend_regions: dict[tuple[str, str], tuple[str, int]] = {}  # every changed frontend region -> (file, line)

        for fe in FRONTENDS:
            paths = [_path(f) for f in fe.files]
            if not repo.exists(paths[0]) and not repo.exists(paths[0], "base"):
                continue
            changes = [by_path[p] for p in paths if p in by_path]
            if not changes and not library_names:
                continue
            head_keys = None
            for side in ("head", "base"):
                index = PyIndex()
                for p in paths:
                    text = repo.text(p, side)
                    if text is not None and not index.add_file(p, text, fe.key_namespace):
                        result.unmapped.append({"file": p, "line": 0, "region": None,
                                                "why": f"does not parse at {side}: converters in it not mapped"})
                entries = [e for e in index.entries if e.owner == fe.map_owner]
                if side == "head":
                    head_keys = {e.key for e in entries}
                changed = self._changed_in(side, changes, repo, touched, index)
                if side == "head":
                    for key, where in changed.items():
                        frontend_regions.setdefault(key, where)
                if not changed and not library_names:
                    continue
                for entry in entries:
                    hits = self._hits(entry, index, changed, library_names if side == "head" else {})
                    if side == "base" and entry.key in head_keys:  # an edited map line shows on the head side
                        hits = {k: v for k, v in hits.items() if not k[1].startswith("<module>@")}
                    for (file, region), (line, why) in hits.items():
                        explained.add((file, region))
                        # a library op (relax.op, topi) is legalized the same way for every target: the GPU
                        # targets compile it too, a frontend's own code only runs on its CPU targets
                        library = any(fnmatch.fnmatch(file, p) for p in LIBRARY_CODE)
                        result.touches.append(Touch(
                            operator=entry.key, namespace=entry.namespace, converter=entry.converter,
                            file=file, line=line,
                            why=why if side == "head" else _base_why(why, entry.key in head_keys),
                            targets=reaching(fe.component) + (_shared_gpu_targets() if library else ()),
                            profile=self.name))
                # a change on the importer's own path runs for every graph: no map entry reaches it (or only the
                # few converters that share the helper), so the operators every graph has stand in for "any graph"
                path = _entry_path(index, fe.entry) if changed else set()
                common = [e for e in entries if e.key in fe.common]
                for (file, region), (_, line) in changed.items():
                    if region not in path:
                        continue
                    explained.add((file, region))
                    why = f"{region} runs for every graph (reached from {fe.entry})"
                    if side == "head":
                        result.graph_level.append({"file": file, "line": line, "component": fe.component, "why": why,
                                                   "targets": list(reaching(fe.component))})
                    for entry in common:
                        result.touches.append(Touch(
                            operator=entry.key, namespace=entry.namespace, converter=entry.converter,
                            file=file, line=line,
                            why=why if side == "head" else _base_why(why, entry.key in head_keys),
                            targets=reaching(fe.component), profile=self.name))
        for (file, region), (_, line) in sorted(frontend_regions.items()):
            deletion_neighbour = (region.startswith("<module>@") and file in by_path
                                  and line not in by_path[file].added and any(f == file for f, _ in explained))
            if (file, region) not in explained and not deletion_neighbour:  # a deletion shows on the base side
                result.unmapped.append({"file": file, "line": line, "region": region,
                                        "why": "changed frontend code that no convert-map entry reaches"})
        backends = backend_touches(repo, diff, "tvm", self.name)  # codegen, dlight, runtimes, TIR
        result.touches += backends.touches
        result.unmapped += backends.unmapped
        return result

    # -- helpers ------------------------------------------------------------------------------------------------
    @staticmethod
    def _changed_in(side, changes, repo, touched, index: PyIndex) -> dict[tuple[str, str], tuple[str, int]]:
        """(file, name) -> (file, line) for what changed on this side: the index's function/class names, or
        "<module>@line" for each changed line inside a convert-map entry or at module level."""
        out = {}
        for ch in changes:
            head_text = repo.text(ch.path, "head") if ch.status != "deleted" else None
            base_text = repo.text(ch.old_path, "base") if ch.old_path else None
            file = ch.path if side == "head" else (ch.old_path or ch.path)
            # lines next to a pure deletion count for the enclosing function, never for a neighbouring map entry
            lines = sorted(ch.touched_head_lines()) if side == "head" else list(ch.removed)
            edited = set(ch.added) if side == "head" else set(ch.removed)
            spans = [(e.start, e.end) for e in index.entries if e.file == file]
            in_entry = {ln for ln in lines if any(a <= ln <= b for a, b in spans)}
            for ln in sorted(in_entry & edited):
                out.setdefault((file, f"<module>@{ln}"), (file, ln))
            for tr in touched(ch, head_text, base_text):
                if tr.side != side:
                    continue
                if tr.region is None:
                    if tr.line not in in_entry:
                        out.setdefault((file, f"<module>@{tr.line}"), (file, tr.line))
                    continue
                rest = [ln for ln in lines if tr.region.start <= ln <= tr.region.end and ln not in in_entry]
                if not rest:
                    continue  # every changed line of this region is a map entry: reported per entry above
                if side == "head" and not set(rest) & edited and (
                        tr.region.kind == "class" or all(ln == tr.region.start for ln in rest)):
                    # only the neighbours of a pure deletion between two definitions: what was deleted (a method)
                    # is attributed on the base side, in the region it had there; neither the class as a whole
                    # (reached by every converter of the importer) nor the method after it changed
                    continue
                name = _resolve(tr.region.name, index) or f"<module>@{rest[0]}"
                out.setdefault((file, name), (file, rest[0]))
        return out

    @staticmethod
    def _hits(entry, index: PyIndex, changed: dict, library_names: dict) -> dict:
        hits = {}
        funcs = classes = None
        for (file, name), (_, line) in changed.items():
            if name.startswith("<module>@"):
                if file == entry.file and entry.start <= line <= entry.end:
                    hits[(file, name)] = (line, "convert-map entry changed")
                continue
            if funcs is None:
                funcs, classes = index.reach(entry.refs, entry.owner)
            if name in funcs or name in classes:
                direct = entry.converter.startswith(("self." + name.split(".")[-1], name.split(".")[0]))
                hits[(file, name)] = (line, "converter changed" if direct else
                                      f"helper {name} changed (reached from {entry.converter})")
        if library_names:
            if funcs is None:
                funcs, classes = index.reach(entry.refs, entry.owner)
            for chain in (c[len("#chain:"):] for c in classes if c.startswith("#chain:")):
                parts = chain.split(".")
                if len(parts) >= 2 and parts[0] in LIBRARY_ROOTS and parts[-1] in library_names:
                    file, line = library_names[parts[-1]]
                    hits[(file, parts[-1])] = (line, f"library op {chain} changed (called by {entry.converter})")
        return hits

    @staticmethod
    def _changed_library_functions(repo: GitRepo, changes: list[FileChange]) -> dict[str, tuple[str, int]]:
        from dlci.diff.regions import touched
        names = {}
        for ch in changes:
            head_text = repo.text(ch.path, "head") if ch.status != "deleted" else None
            base_text = repo.text(ch.old_path, "base") if ch.old_path else None
            for tr in touched(ch, head_text, base_text):
                if tr.region is not None and tr.region.kind == "function":
                    names.setdefault(tr.region.name.split(".")[0] if tr.region.parent is None
                                     else tr.region.name.split(".")[-1], (ch.path, tr.line))
        return names


def _shared_gpu_targets() -> tuple[str, ...]:
    """The device targets that compile TVM's library ops (relax.op, topi) through the same legalization."""
    from dlci.targets import registry
    return tuple(n for n in reaching("tvm:topi") if registry()[n].on_accelerator)


def _base_why(why: str, still_mapped: bool) -> str:
    """Base-side hits only come from code the PR deleted (touched() keeps base regions that are gone at head): an
    entry the PR removed, or code an entry that still exists reached on base (a removed `_impl_v18`)."""
    return f"{why}: removed by the PR (base line)" if still_mapped else "convert-map entry removed (base line)"


def _entry_path(index: PyIndex, entry: str) -> set[str]:
    """Functions and instantiated classes that the module-level ``entry`` runs for every graph it imports."""
    fn = index.funcs.get(entry)
    if fn is None or fn.owner is not None:
        return set()
    funcs, classes = index.reach(fn.refs, None, program=True)
    return funcs | {entry} | {c for c in classes if not c.startswith("#chain:")}


def _resolve(region_name: str, index: PyIndex) -> str | None:
    """A region's qualified name as the index knows it: nested functions count as their enclosing def."""
    parts = region_name.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in index.funcs or cand in index.classes:
            return cand
    return None
