"""onnx2torch: ONNX -> torch.nn converters.

Table: functions in ``onnx2torch/node_converters/*.py`` decorated ``@add_converter(operation_type="Elu",
version=6)`` (usually stacked, one per opset version, on a function named ``_``), read at the revision analysed. A
changed converter selects its ONNX operator; a changed ``nn.Module`` class or helper selects the converters that use
it (same file or another converter file, by name). Touches carry the targets that reach ``onnx2torch:converters``
(the ``onnx2torch`` target: ONNX instances converted by the checkout's onnx2torch and run in torch). The checkout's
package sits at its root, first on the workers' path; a converter module that needs torchvision is left out where
torchvision does not import (dlci.targets.onnx2torch), which the checkout's proof of origin is told through
``$DLCI_OPTIONAL_IMPORTS``.
"""
from __future__ import annotations

import ast

from dlci.diff import Diff, GitRepo
from dlci.targets import reaching
from dlci.profiles import register
from dlci.profiles._tables import (Entry, PyFile, analyse_folder, call_name, directly_in, registrations)
from dlci.profiles.base import Profile, ProfileResult

CONVERTERS = "onnx2torch/node_converters"
COMPONENT = "onnx2torch:converters"  # what the onnx2torch target declares it runs


def _arg(dec: ast.Call, pos: int, kw: str):
    for k in dec.keywords:
        if k.arg == kw:
            return k.value
    return dec.args[pos] if len(dec.args) > pos else None


def _const(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
        return str(node.value)
    return None


def _domain(node) -> str:
    if node is None:
        return "onnx"
    value = _const(node)
    if value is not None:
        return value or "onnx"
    text = ast.unparse(node)
    return "onnx" if text.endswith("ONNX_DOMAIN") else text


def read(path: str, text: str) -> PyFile | None:
    def rows(d, dec):
        if d.kind != "function" or call_name(dec) != "add_converter" or not isinstance(dec, ast.Call):
            return []
        op = _const(_arg(dec, 0, "operation_type"))
        if op is None:
            return []
        version = _const(_arg(dec, 1, "version")) or "?"
        return [Entry(op, _domain(_arg(dec, 2, "domain")), path, dec.lineno, dec.end_lineno, frozenset({d.key}),
                      f"{d.name} (add_converter {op} v{version})", reaching(COMPONENT), "add_converter registration")]
    return registrations(path, text, rows)


_converter_file = directly_in(CONVERTERS)


@register
class Onnx2TorchProfile(Profile):
    name = "onnx2torch"
    description = "onnx2torch: @add_converter(operation_type=..., version=...) ONNX -> torch converters"
    python_converter_files = (f"{CONVERTERS}/*.py",)
    python_path = ("",)  # the package sits at the repository's root: the checkout goes first on the path
    # a converter module whose torchvision does not import here is left out, not the package (dlci.exec.origins)
    env = {"DLCI_OPTIONAL_IMPORTS": "torchvision"}

    def detect(self, repo: GitRepo) -> bool:
        return repo.exists(f"{CONVERTERS}/registry.py") or (
            bool(repo.glob(f"{CONVERTERS}/*.py")) and repo.exists("onnx2torch/converter.py"))

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        return analyse_folder(self.name, repo, diff, read, _converter_file)
