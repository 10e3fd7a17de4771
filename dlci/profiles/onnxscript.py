"""onnxscript's torchlib: the ATen -> ONNX functions that ``torch.onnx`` (dynamo exporter) dispatches to.

Table: functions in ``onnxscript/function_libs/torch_lib/ops/*.py`` decorated ``@torch_op("aten::elu")`` or
``@torch_op(("aten::x", "aten::x.Tensor"), trace_only=True)``, read at the revision analysed. A changed function
selects the ATen names it registers; a changed private helper selects the registered functions that call it (in
any ops file, by name); a function removed by the PR selects what it registered at base. Target: ``torch.onnx``.
"""
from __future__ import annotations

import ast

from dlci.diff import Diff, GitRepo
from dlci.targets import reaching
from dlci.profiles import register
from dlci.profiles._tables import (Entry, PyFile, analyse_folder, call_name, directly_in, registrations,
                                   strings_in)
from dlci.profiles.base import Profile, ProfileResult

OPS = "onnxscript/function_libs/torch_lib/ops"
COMPONENT = "onnxscript:torchlib"  # what torch.onnx declares it runs


def _namespace(name: str) -> str:
    return name.split("::", 1)[0] if "::" in name else "aten"


def read(path: str, text: str) -> PyFile | None:
    def rows(d, dec):
        if d.kind != "function" or call_name(dec) != "torch_op" or not isinstance(dec, ast.Call) or not dec.args:
            return []
        return [Entry(name, _namespace(name), path, dec.lineno, dec.end_lineno, frozenset({d.key}), d.name,
                      reaching(COMPONENT), "torch_op registration") for name in strings_in(dec.args[0])]
    return registrations(path, text, rows)


_ops_file = directly_in(OPS)


@register
class OnnxScriptProfile(Profile):
    name = "onnxscript"
    description = "onnxscript torchlib: @torch_op(\"aten::...\") functions used by the torch.onnx exporter"
    python_converter_files = (f"{OPS}/*.py",)
    python_path = ("",)  # the package sits at the repository's root: the checkout goes first on the path

    def detect(self, repo: GitRepo) -> bool:
        return bool(repo.glob(f"{OPS}/*.py"))

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        return analyse_folder(self.name, repo, diff, read, _ops_file)
