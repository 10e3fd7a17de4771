"""Draw the samples of a repository's own OpInfos (``python -m dlci.sources.repo_opinfo SPEC.json``), run by
:func:`dlci.sources.repo_tests.draw_opinfo` in a subprocess with the pull request's head first on the path.

SPEC names the repository, its files that define an ``OP_DB`` list of OpInfos (onnxscript's ``extra_opinfo.py``),
the OpInfo names its test data ties to the touched converters, the touched canonical operators and a limit per
operator. Each file is imported under a private name; a module it imports that is not installed here and that no
sample of the touched operators needs (torchvision, for onnxscript's) is stood in for by an empty module, so that the
rest of the file still loads. The OpInfos named, or whose operator is a touched one, are sampled exactly as the
``opinfo`` source samples PyTorch's database (float32 first, then the other dtypes each declares, every sample proven
to rebuild, run deterministically and leave its inputs untouched), and written as a harvest cache (SPEC's ``out``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
import warnings
from pathlib import Path

STAND_IN = ("torchvision",)  # optional imports of test-data files that a missing package should not stop


class _Absent:
    """What a stood-in module's attribute is: any attribute of it is another, calling it says the package is missing.
    A test-data file that names ``torchvision.ops.nms`` at import (an OpInfo's ``op=``) still loads; only a sample
    that calls it fails."""

    def __init__(self, qualname: str):
        self.__qualname__ = qualname
        self.__name__ = qualname.rsplit(".", 1)[-1]

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self.__qualname__}.{attr}")

    def __call__(self, *args, **kwargs):
        raise ModuleNotFoundError(f"{self.__qualname__}: {self.__qualname__.split('.')[0]} is not installed here "
                                  f"(dlci stood in for it)")

    def __repr__(self) -> str:
        return f"<absent {self.__qualname__}>"


def _stand_in(name: str) -> None:
    module = types.ModuleType(name)
    module.__path__ = []  # a package: "from torchvision import ops" gets an absent stand-in too

    def absent(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{name}.{attr}")
    module.__getattr__ = absent
    sys.modules[name] = module


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except Exception:  # noqa: BLE001 - not installed, or installed and broken (torchvision over another torch)
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        return False


def load_file(path: Path, index: int):
    """The file imported as a module of its own; modules in :data:`STAND_IN` it names that do not import here are
    stood in for first."""
    text = path.read_text(encoding="utf-8", errors="replace")
    for name in STAND_IN:
        if name in text and name not in sys.modules and not _importable(name):
            _stand_in(name)
    spec = importlib.util.spec_from_file_location(f"dlci_repo_opinfo_{index}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(spec_path: str) -> int:
    import torch
    from dlci import operators
    from dlci.sources import write_cache
    from dlci.torch_testing import ensure_importable
    ensure_importable()  # torch.testing._internal without expecttest
    from dlci.sources.opinfo import OpInfoSource, _untracked_samples, fn_path, op_id
    spec = json.loads(Path(spec_path).read_text())
    repo, names, wanted = Path(spec["repo"]), set(spec["names"]), frozenset(spec["ops"])
    limit = int(spec.get("limit") or 12)
    source = OpInfoSource()
    source.stats["opinfos"] = []
    out = []
    seen: set[str] = set()
    for index, rel in enumerate(spec["files"]):
        try:
            module = load_file(repo / rel, index)
        except Exception as e:  # noqa: BLE001 - the file does not import here: said, not fatal
            source.skip(f"import-error:{type(e).__name__}")
            print(f"dlci repo_opinfo: {rel} does not import: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
            continue
        for op in getattr(module, "OP_DB", None) or []:
            oid = _op_id(op, op_id)
            named = op.name in names
            if not named and operators.instance_ops(oid).isdisjoint(wanted):
                continue
            source.stats["opinfos"].append(op.name)
            path = fn_path(op) if source.skip_reason(op) is None else None
            with warnings.catch_warnings(), _untracked_samples(), torch.no_grad():
                warnings.simplefilter("ignore")
                try:
                    batch = list(source._op_instances(op, oid, path, limit)) if path else []
                except Exception as e:  # noqa: BLE001 - a broken sample generator loses its OpInfo only
                    source.skip(f"generator-error:{type(e).__name__}")
                    batch = []
            for inst in batch:
                inst.origin.source = "repo_tests"
                inst.origin.test = f"{rel}:" + inst.origin.test.removeprefix("op_db:")
                inst.id = inst.compute_id()
                if inst.id not in seen:
                    seen.add(inst.id)
                    out.append(inst)
    stats = {"skipped": dict(source.stats["skipped"]), "opinfos": source.stats["opinfos"], "instances": len(out)}
    write_cache(Path(spec["out"] + ".jsonl"), Path(spec["out"] + ".npz"), out, stats)
    return 0


def _op_id(op, default) -> str:
    """``aten::<name>`` of an OpInfo: ``ops.aten.col2im`` and ``aten_name="index.Tensor"`` without their overload,
    the rest as the ``opinfo`` source names its operators."""
    if op.name.startswith("ops.aten.") or "." in (op.aten_name or ""):
        return "aten::" + (op.aten_name or op.name).removeprefix("ops.aten.").split(".")[0]
    return default(op)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
