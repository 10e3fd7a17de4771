"""tf2onnx: TensorFlow (and TFLite, TF.js) -> ONNX handlers.

Table: classes in ``tf2onnx/onnx_opset/*.py`` decorated ``@tf_op("Elu")``, ``@tf_op(["Relu6", "Relu6V2"],
onnx_op="Clip")`` (``@tfl_op`` for TFLite ops, ``@tfjs_op`` for TF.js), whose ``@classmethod version_N(cls, ctx,
node, **kwargs)`` handlers convert the op, read at the revision analysed. A changed handler selects the class's ops;
a changed helper function or base class selects the handler classes that call or inherit it (any opset file, by
name). A TensorFlow handler's touches carry the targets that reach ``tf2onnx:tf`` (the ``tf2onnx`` target: keras
and TensorFlow-op instances converted by the checkout's tf2onnx, run by ONNX Runtime); a TFLite or TF.js handler's
carry those reaching ``tf2onnx:tflite`` / ``tf2onnx:tfjs`` (none yet). The checkout's package sits at its root, first
on the workers' path.
"""
from __future__ import annotations

import ast

from dlci.diff import Diff, GitRepo
from dlci.targets import reaching
from dlci.profiles import register
from dlci.profiles._tables import (Entry, PyFile, analyse_folder, call_name, directly_in, registrations,
                                   strings_in)
from dlci.profiles.base import Profile, ProfileResult

OPSET = "tf2onnx/onnx_opset"
DECORATORS = {"tf_op": "tf", "tfl_op": "tflite", "tfjs_op": "tfjs"}


def read(path: str, text: str) -> PyFile | None:
    def rows(d, dec):
        ns = DECORATORS.get(call_name(dec) or "")
        if not ns or not isinstance(dec, ast.Call) or not dec.args:
            return []
        onnx_op = next((k.value.value for k in dec.keywords if k.arg == "onnx_op"
                        and isinstance(k.value, ast.Constant)), None)
        return [Entry(op, ns, path, dec.lineno, dec.end_lineno, frozenset({d.key}),
                      d.name + (f" (-> {onnx_op})" if onnx_op else ""), reaching(f"tf2onnx:{ns}"),
                      f"{call_name(dec)} handler")
                for op in strings_in(dec.args[0])]
    return registrations(path, text, rows)


_opset_file = directly_in(OPSET)


@register
class Tf2OnnxProfile(Profile):
    name = "tf2onnx"
    description = "tf2onnx: @tf_op/@tfl_op handler classes (version_N methods) in tf2onnx/onnx_opset"
    python_converter_files = (f"{OPSET}/*.py",)
    python_path = ("",)  # the package sits at the repository's root: the checkout goes first on the path

    def detect(self, repo: GitRepo) -> bool:
        return repo.exists("tf2onnx/handler.py") and bool(repo.glob(f"{OPSET}/*.py"))

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        return analyse_folder(self.name, repo, diff, read, _opset_file, what="handler")
