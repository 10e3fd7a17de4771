"""onnx2torch: an ONNX model converted by ``onnx2torch.convert`` into a torch.fx GraphModule, run in torch (eager).

The instances are dlci's ONNX single-operator models (the ``onnx`` form, as ``onnxruntime`` and ``tvm.from_onnx``
take them), judged against the ONNX reference (the node test's expected outputs or ``onnx.reference``, with an fp64
evaluation to arbitrate). onnx2torch says "unsupported" by raising NotImplementedError (``Converter is not
implemented (OperationDescription(...))`` for an operator or opset it has no converter for, "... is not
implemented" for an attribute value), by stating a fixed parameter ("alpha parameter must be 1.67..., not 2.0"), or
by requiring an input to be a constant ("Tensor ... is not found in constant values").

**torchvision.** onnx2torch's package imports every converter module, two of which (NonMaxSuppression, RoiAlign)
import torchvision. The only torchvision for the pinned torch on PyPI is a CUDA build whose native library needs
torch's CUDA libraries, so over the CPU torch ``import torchvision`` raises ("operator torchvision::nms does not
exist") and ``import onnx2torch`` with it. Where that happens, :func:`load` runs the package's own ``__init__``
files statement by statement and leaves out the statements that fail inside torchvision: every other converter is
the package's (the checkout's, in a scan) own code, and the left-out operators are unsupported here, saying why.
Where torchvision imports, the package is imported as a user imports it.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.exec.origins import failed_optional, optional_imports
from dlci.models.convert import flatten_outputs, np_to_torch
from dlci.targets._common import NOT_SUPPORTED, raised_in
from dlci.targets.base import Target, register

PACKAGE = "onnx2torch"
# dependencies whose failure to import leaves out the converter modules that need them, not the whole package (with
# those $DLCI_OPTIONAL_IMPORTS names, which the onnx2torch profile sets for a scan's workers and its checkout proof)
OPTIONAL = ("torchvision",)

# what the package left out where an optional dependency did not import: the statement -> why
LEFT_OUT: dict[str, str] = {}

# onnx2torch's statements of its own limits beside NotImplementedError and dlci's NOT_SUPPORTED phrases ("Shape from
# opset < 15 does not support start != 0"): a parameter it only converts at one value ("alpha parameter must be
# 1.6732..., not 2.0"), an input it needs as a constant ("Tensor "x" is not found in constant values")
LIMITS = ("parameter must be", "is not found in constant values", "only supports")


def from_optional(exc: BaseException) -> str | None:
    """The optional dependency (top-level name) whose import failure ``exc`` is, else None."""
    return failed_optional(exc, optional_imports(OPTIONAL))


def load():
    """The ``onnx2torch`` package as this process imports it (:data:`LEFT_OUT` says what it had to leave out)."""
    loaded = sys.modules.get(PACKAGE)
    if loaded is not None and hasattr(loaded, "convert"):
        return loaded
    try:
        import onnx2torch
        return onnx2torch
    except Exception as e:  # noqa: BLE001 - only an optional dependency's failure is tolerated, below
        if from_optional(e) is None:
            raise
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]  # the half-imported package: loaded again from its files
    spec = importlib.util.find_spec(PACKAGE)  # a top-level package: found without running its code
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{PACKAGE} is not installed", name=PACKAGE)
    root = Path(list(spec.submodule_search_locations)[0])
    package = _bare_package(PACKAGE, root)
    converters = _bare_package(f"{PACKAGE}.node_converters", root / "node_converters")
    setattr(package, "node_converters", converters)
    _run_init(converters)  # first: the package's own __init__ imports the converter entry point, which needs them
    _run_init(package)
    return package


def _bare_package(name: str, folder: Path):
    """The package ``name`` of ``folder`` as a module whose ``__init__`` has not run yet (in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    return module


def _run_init(module) -> None:
    """Run a package's ``__init__.py`` statement by statement, leaving out (into :data:`LEFT_OUT`) those that fail
    because an optional dependency does not import."""
    import __future__
    path = module.__spec__.origin
    source = Path(path).read_text(encoding="utf-8")
    flags = 0
    for statement in ast.parse(source, path).body:
        if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
            for alias in statement.names:
                flags |= getattr(__future__, alias.name).compiler_flag
        code = compile(ast.Module(body=[statement], type_ignores=[]), path, "exec", flags=flags, dont_inherit=True)
        try:
            exec(code, module.__dict__)
        except Exception as e:  # noqa: BLE001 - only an optional dependency's failure is tolerated
            dependency = from_optional(e)
            if dependency is None:
                raise
            LEFT_OUT[ast.unparse(statement)] = f"{dependency} does not import here ({type(e).__name__}: " \
                                               f"{str(e).splitlines()[0][:200] if str(e) else ''})"


def left_out_operators() -> dict[str, str]:
    """The ONNX operators (op_type -> why) whose converters :func:`load` left out: those the left-out modules
    register (``@add_converter(operation_type=...)``, read from their files)."""
    out: dict[str, str] = {}
    package = sys.modules.get(PACKAGE)
    if not LEFT_OUT or package is None:
        return out
    root = Path(package.__spec__.origin).parent
    for statement, why in LEFT_OUT.items():
        parts = statement.split()
        if len(parts) < 2 or parts[0] != "from" or not parts[1].startswith(PACKAGE + "."):
            continue
        path = root.joinpath(*parts[1].split(".")[1:]).with_suffix(".py")
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == \
                    "add_converter":
                given = [k.value for k in node.keywords if k.arg == "operation_type"] + node.args[:1]
                if given and isinstance(given[0], ast.Constant) and isinstance(given[0].value, str):
                    out[given[0].value] = f"its converter module {parts[1]} is left out: {why}"
    return out


class LeftOut(NotImplementedError):
    """onnx2torch has no converter for the operator here because its module needs a dependency that does not
    import (:data:`LEFT_OUT`)."""


@register
class Onnx2Torch(Target):
    name = "onnx2torch"
    frameworks = ("onnx",)
    form = "onnx"
    package = "onnx2torch"
    modules = ("onnx2torch",)
    reaches = ("onnx2torch:converters",)
    warm_imports = ("torch", "onnx")

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        for e in chain(exc):
            msg = str(e)
            if stage == "convert" and isinstance(e, NotImplementedError):
                return True  # "Converter is not implemented (...)", "... mode is not implemented"
            if stage == "convert" and raised_in(e, ("onnx2torch",)) and (
                    NOT_SUPPORTED.search(msg) or any(limit in msg for limit in LIMITS)):
                return True
            # torch has no kernel for the dtype ("abs_cpu" not implemented for 'UInt16', "Could not run 'aten::x'
            # with arguments from the 'CPU' backend"), or no tensor of it
            if stage == "run" and isinstance(e, (RuntimeError, TypeError, NotImplementedError)) and (
                    "not implemented for" in msg or "can't convert np.ndarray of type" in msg
                    or msg.startswith("Could not run 'aten::")):
                return True
        return False

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        import onnx
        onnx2torch = load()
        own = onnx.ModelProto()
        own.CopyFrom(model)  # convert edits the model it is given; the form is shared with other targets
        try:
            return onnx2torch.convert(own)
        except NotImplementedError as e:
            op = re.search(r"operation_type='([^']+)'", str(e))
            why = left_out_operators().get(op.group(1)) if op and "Converter is not implemented" in str(e) else None
            if why:
                raise LeftOut(f"{e}: {why}") from e
            raise

    def run(self, gm: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import torch
        with torch.no_grad():
            return flatten_outputs(gm(*[np_to_torch(x) for x in inputs]))
