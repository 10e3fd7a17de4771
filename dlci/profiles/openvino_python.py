"""OpenVINO's Python side: the PyTorch frontend's decoders, the torch.compile backend, the export decompositions, the
TensorFlow frontend's graph iterator and the model converter (ovc).

These files are plain Python over the wheel's native libraries, so a PR to them runs from its checkout (the package
directory gets the installed wheel's native files linked in: :func:`link_native`), the way TVM's Python frontends do.
Where the package lives: ``src/bindings/python/src/openvino`` (OpenVINO's repository) or ``openvino`` at the root (a
repository of the wheel's Python sources).

What a change selects, per area (first match): the operators its changed lines name (``torch.ops.aten.x``,
``aten.x``, ``"aten::x"``: an entry of the torch.compile support table, of a decomposition list, a decoder branch
for one op); a changed function that names none but is registered for some (``@register_decomposition(aten.x)``)
selects those; anything else is code every graph runs (a decoder's input, constant or dtype handling), tested with
the operators nearly every graph has.
"""
from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from dlci.diff import Diff, GitRepo
from dlci.operators import BASIC_OPERATORS
from dlci.profiles.base import ProfileResult, Touch
from dlci.targets import reaching

PACKAGE_ROOTS = ("src/bindings/python/src", "")
MARKERS = ("frontend/pytorch/fx_decoder.py", "frontend/pytorch/ts_decoder.py")

# package-relative file pattern -> components (what the targets declare they reach), first match wins
AREAS = (
    ("frontend/pytorch/ts_decoder.py", ("openvino:frontend.pytorch.ts",)),
    ("frontend/pytorch/fx_decoder.py", ("openvino:frontend.pytorch.fx",)),
    ("frontend/pytorch/torchdynamo/export_decompositions.py", ("openvino:frontend.pytorch.export",)),
    ("frontend/pytorch/torchdynamo/*", ("openvino:torchdynamo",)),
    ("frontend/pytorch/*", ("openvino:frontend.pytorch.ts", "openvino:frontend.pytorch.fx")),
    ("frontend/tensorflow/*", ("openvino:frontend.tf",)),
    ("frontend/onnx/*", ("openvino:frontend.onnx",)),
    ("tools/ovc/*", ("openvino:ovc",)),
)
# what a change to code every graph runs is tested with, per namespace of the area's instances
COMMON = {"aten": BASIC_OPERATORS, "tf": BASIC_OPERATORS, "onnx": ("Add", "Mul", "Relu", "MatMul", "Conv", "Softmax")}
_OPS = re.compile(r"""(?:torch\.ops\.aten\.|\baten\.|["']aten::)([A-Za-z_][A-Za-z0-9_]*)""")


def package_dir(repo: GitRepo, rev: str = "head") -> str | None:
    """Repo-relative directory of the openvino Python package at ``rev``, None when the repository has none."""
    for root in PACKAGE_ROOTS:
        pkg = f"{root}/openvino" if root else "openvino"
        if any(repo.exists(f"{pkg}/{m}", rev) for m in MARKERS):
            return pkg
    return None


def _area(rel: str) -> tuple[str, ...] | None:
    for pattern, components in AREAS:
        if fnmatch.fnmatch(rel, pattern):
            return components
    return None


def _ops_in(text: str) -> list[str]:
    return list(dict.fromkeys(m.group(1) for m in _OPS.finditer(text)))


def _targets(components: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t for c in components for t in reaching(c)))


def analyse(repo: GitRepo, diff: Diff, profile: str) -> ProfileResult:
    """Touches for the changed lines of the package's Python files: added lines in head coordinates, removed ones in
    base coordinates (a line the PR deleted is judged by what it said)."""
    from dlci.diff.regions import innermost, regions
    result = ProfileResult()
    for side in ("head", "base"):
        pkg = package_dir(repo, side)
        if pkg is None:
            continue
        for ch in diff.files:
            path = ch.path if side == "head" else (ch.old_path or ch.path)
            changed = set(ch.added) if side == "head" else set(ch.removed)
            components = _area(path[len(pkg) + 1:]) if path.startswith(pkg + "/") else None
            if not changed or not path.endswith(".py") or components is None:
                continue
            text = repo.text(path, side) or ""
            lines = text.split("\n")
            regs = [r for r in regions(path, text) if r.kind != "class"]
            groups: dict[object, list[int]] = {}
            for ln in sorted(changed):
                code = lines[ln - 1].strip() if ln <= len(lines) else ""
                if code and not code.startswith("#"):
                    groups.setdefault(innermost(regs, ln), []).append(ln)
            joined = " ".join(components)
            namespace = "tf" if "frontend.tf" in joined else "onnx" if "frontend.onnx" in joined else "aten"
            for region, mine in groups.items():
                ops = _ops_in("\n".join(lines[ln - 1] for ln in mine))
                why = "changed line names it"
                if not ops and region is not None:
                    decorators = lines[max(0, region.start - 4):region.start]  # @register_decomposition(...)
                    ops = _ops_in("\n".join(ln for ln in decorators if ln.strip().startswith("@")))
                    why = f"{region.name} is registered for it"
                if not ops:
                    ops = list(COMMON[namespace])
                    where = region.name if region is not None else "module level"
                    why = f"{where} runs for every graph (decoder/converter code naming no operator)"
                for op in ops:
                    result.touches.append(Touch(
                        operator=f"aten::{op}" if namespace == "aten" else op,
                        namespace="any" if namespace == "tf" else namespace,
                        converter=region.name if region is not None else "<module>", file=path, line=mine[0],
                        why=why if side == "head" else f"{why} (base line: code removed)",
                        targets=_targets(components), profile=profile))
    return result


def link_native(root: Path) -> None:
    """Give a checkout's openvino Python package the installed wheel's native files (``_pyopenvino``, the frontends'
    extension modules, ``libs/``) and any module it does not hold (the wheel merges ovc and other tools into the
    package), as symlinks: its own Python then runs over the installed native libraries."""
    import importlib.util
    spec = importlib.util.find_spec("openvino")
    if spec is None or not spec.submodule_search_locations:
        return
    installed = Path(list(spec.submodule_search_locations)[0])
    for base in PACKAGE_ROOTS:
        pkg = root / base / "openvino" if base else root / "openvino"
        if any((pkg / m).is_file() for m in MARKERS):
            break
    else:
        return
    for folder, dirs, files in os.walk(installed):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(folder).relative_to(installed)
        target = pkg / rel
        if target.is_symlink():
            continue
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(Path(folder), target_is_directory=True)  # a whole subpackage the checkout lacks
            dirs[:] = []
            continue
        for f in files:
            if not (target / f).exists() and not (target / f).is_symlink():
                (target / f).symlink_to(Path(folder) / f)
