"""Tables derived from the installed packages, cached on disk per package versions.

Each part is optional: a missing package gives an empty part, never an error. Nothing here is imported by
``import dlci.operators``; :func:`tables` runs on first use. Cold derivation imports torch (about 1.5 s) and
parses onnxscript's torchlib, keras' and TensorFlow's API listings as text (no TF/keras import); the result is
kept as JSON under ``$DLCI_CACHE_DIR`` (or ``~/.cache/dlci``) keyed by the package versions and this package's
source, so a warm process reads one small file.
"""
from __future__ import annotations

import ast
import collections
import functools
import hashlib
import importlib.util
import json
import os
import re
import tempfile
from pathlib import Path

FORMAT = 1
_PACKAGES = ("torch", "onnx", "onnxscript", "keras", "tensorflow", "tensorflow-cpu", "tflite")


def versions() -> dict[str, str | None]:
    from importlib import metadata
    out = {}
    for dist in _PACKAGES:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def cache_dir() -> Path:
    from dlci import cache
    return cache.root()


def _source_hash() -> str:
    h = hashlib.sha1()
    for f in sorted(Path(__file__).parent.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def cache_path() -> Path:
    material = json.dumps({"format": FORMAT, "versions": versions(), "code": _source_hash()}, sort_keys=True)
    return cache_dir() / f"operators-{hashlib.sha1(material.encode()).hexdigest()[:16]}.json"


@functools.lru_cache(maxsize=1)
def tables() -> dict:
    """All derived tables (see :func:`derive`), from the disk cache when it matches the installed packages."""
    path = cache_path()
    try:
        data = json.loads(path.read_text())
        if data.get("format") == FORMAT:
            return data
    except (OSError, ValueError):
        pass
    data = derive()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".operators-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        pass
    return data


def derive() -> dict:
    data: dict = {"format": FORMAT, "versions": versions()}
    for part in (_torch, _torchlib, _onnx, _tflite, _keras, _tf):
        try:
            data.update(part())
        except Exception as e:  # noqa: BLE001 - a broken/missing package only loses its part
            data.setdefault("errors", {})[part.__name__.lstrip("_")] = f"{type(e).__name__}: {e}"
    return data


# -- torch --------------------------------------------------------------------------------------------------

_ALIAS_DOC = re.compile(r"Alias (?:for|of) :?(?:func|meth|attr)?:?`?~?(torch\.[\w.]+)")
_SUBMODULES = {"special": "special_", "linalg": "linalg_", "fft": "fft_"}


def _python_to_aten(path: str) -> str:
    """``torch.special.erf`` -> ``special_erf``; ``torch.nn.functional.softmax`` -> ``softmax``."""
    parts = path.split(".")[1:]
    if parts[:2] == ["nn", "functional"]:
        parts = parts[2:]
    if len(parts) == 2 and parts[0] in _SUBMODULES:
        return _SUBMODULES[parts[0]] + parts[1]
    return parts[-1]


def _torch() -> dict:
    if importlib.util.find_spec("torch") is None:
        return {}
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    aten: set[str] = set()
    views: set[str] = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        name = schema.name[6:]
        aten.add(name)
        rets = schema.returns
        if rets and not schema.is_mutable and all(r.alias_info is not None and not r.alias_info.is_write
                                                  for r in rets):
            views.add(name)
    for full in torch._C._dispatch_get_all_op_names():
        if full.startswith("aten::"):
            aten.add(full[6:].split(".")[0])
    # in-place variants (add_) are the same operator
    aten = {n[:-1] if n.endswith("_") and not n.endswith("__") and n[:-1] in aten else n for n in aten}
    views = {n for n in views if n in aten}

    functional = sorted(k for k in dir(F) if not k.startswith("_") and not k.endswith("_")
                        and callable(getattr(F, k)) and not isinstance(getattr(F, k), type)
                        and getattr(getattr(F, k), "__module__", "") not in ("typing",)
                        and k not in ("boolean_dispatch", "assert_int_or_pair", "handle_torch_function",
                                      "has_torch_function_unary", "has_torch_function_variadic"))

    aliases = []
    spaces = {"torch": torch, "torch.special": torch.special, "torch.linalg": torch.linalg, "torch.fft": torch.fft,
              "torch.nn.functional": F, "torch.Tensor": torch.Tensor}
    for prefix, mod in spaces.items():
        for k in dir(mod):
            if k.startswith("_"):
                continue
            try:
                doc = getattr(getattr(mod, k), "__doc__", None)
            except Exception:  # noqa: BLE001 - odd attributes
                continue
            if isinstance(doc, str):
                m = _ALIAS_DOC.search(doc[:400])
                if m:
                    a, b = _python_to_aten(f"{prefix}.{k}"), _python_to_aten(m.group(1))
                    if a != b:
                        aliases.append([a, b])

    modules = sorted(k for k in dir(nn.modules) if isinstance(getattr(nn.modules, k), type)
                     and issubclass(getattr(nn.modules, k), nn.Module))
    return {"aten": sorted(aten), "views": sorted(views), "functional": functional,
            "torch_aliases": sorted(aliases), "modules": modules}


# -- onnxscript's torchlib: which ONNX ops implement which aten op -----------------------------------------------

def _torchlib_sources() -> list[Path]:
    spec = importlib.util.find_spec("onnxscript")
    if spec is None or not spec.origin:
        return []
    root = Path(spec.origin).parent / "function_libs" / "torch_lib" / "ops"
    return sorted(root.glob("*.py"))


def torchlib_functions() -> tuple[dict, dict]:
    """Parse torchlib's sources (no import): ``{function: (onnx ops, called names)}`` and
    ``{registered name: [functions]}`` (complex-number variants left out)."""
    funcs: dict[str, tuple[set, set]] = {}
    regs: dict[str, list[str]] = collections.defaultdict(list)
    for path in _torchlib_sources():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            ops, calls = set(), set()
            for n in ast.walk(node):
                if isinstance(n, ast.Call):
                    fn = n.func
                    if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) \
                            and re.fullmatch(r"op\d*", fn.value.id) and fn.attr[:1].isupper():
                        ops.add(fn.attr)
                    elif isinstance(fn, ast.Name):
                        calls.add(fn.id)
            funcs.setdefault(node.name, (ops, calls))
            for d in node.decorator_list:
                if not (isinstance(d, ast.Call) and getattr(d.func, "id", None) == "torch_op" and d.args):
                    continue
                if any(k.arg == "complex" and getattr(k.value, "value", False) for k in d.keywords):
                    continue
                a = d.args[0]
                elts = [a] if isinstance(a, ast.Constant) else list(getattr(a, "elts", []))
                names = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                for nm in names:
                    regs[nm].append(node.name)
                regs.setdefault("\0group", []).append("\t".join(names))
    return funcs, dict(regs)


def _ops_of(name: str, funcs: dict, seen: set) -> set:
    if name in seen or name not in funcs:
        return set()
    seen.add(name)
    ops, calls = funcs[name]
    out = set(ops)
    for c in calls:
        out |= _ops_of(c, funcs, seen)
    return out


def characteristic(packet: str, ops: set, stem_of) -> set:
    """The ONNX ops that characterise one torchlib function of aten ``packet``.

    Plumbing (shape/cast/constant/control flow) never counts unless it is all there is; an op whose snake name is
    the packet's stem (``AveragePool`` for ``avg_pool2d``) wins; a single remaining op counts unless it is index
    arithmetic inside structural plumbing; of several, elementwise/reduction glue is dropped and exactly one
    structural op must remain (``BatchNormalization`` in ``native_batch_norm``); else nothing (a decomposition).
    """
    from dlci.operators._tables import ONNX_GLUE, ONNX_PLUMBING, ONNX_STRUCTURAL
    stem = stem_of(packet)
    named = {o for o in ops if stem_of(o) == stem}
    if named:
        return named
    rest = ops - ONNX_PLUMBING
    if not rest:
        return set(ops) if len(ops) == 1 else set()
    if len(rest) == 1:
        (only,) = rest
        if only in ONNX_GLUE and ops & ONNX_STRUCTURAL:
            return set()
        return rest
    core = rest - ONNX_GLUE
    return core if len(core) == 1 else set()


def _torchlib() -> dict:
    if not _torchlib_sources():
        return {}
    from dlci.operators.names import stem
    funcs, regs = torchlib_functions()
    groups = regs.pop("\0group", [])
    inverse: dict[str, set] = collections.defaultdict(set)
    for reg, fnames in regs.items():
        if not reg.startswith("aten::"):
            continue
        packet = reg[6:].split(".")[0]
        for f in fnames:
            for o in characteristic(packet, _ops_of(f, funcs, set()), stem):
                inverse[o].add(packet)
    aliases = []
    for g in groups:
        packets = sorted({n[6:].split(".")[0] for n in g.split("\t") if n.startswith("aten::")})
        # one implementation for several packets: aliases, except siblings that differ only in their dimension
        # (upsample_nearest1d/2d/3d share a function but are different ops)
        aliases += [[packets[0], p] for p in packets[1:]
                    if re.sub(r"[123]d", "", p) != re.sub(r"[123]d", "", packets[0])]
    return {"torchlib": {k: sorted(v) for k, v in sorted(inverse.items())}, "torchlib_aliases": sorted(aliases)}


# -- ONNX, TFLite, keras, TensorFlow vocabularies ------------------------------------------------------------

def _onnx() -> dict:
    if importlib.util.find_spec("onnx") is None:
        return {}
    from onnx import defs
    names = set()
    for s in defs.get_all_schemas():
        names.add(s.name if s.domain in ("", "ai.onnx") else f"{s.domain}::{s.name}")
    return {"onnx": sorted(names)}


def _tflite() -> dict:
    spec = importlib.util.find_spec("tflite")
    if spec is None or not spec.origin:
        return {}
    text = (Path(spec.origin).parent / "BuiltinOperator.py").read_text()
    return {"tflite": sorted(set(re.findall(r"^\s+([A-Z][A-Z0-9_]*)\s*=\s*-?\d+", text, re.M)))}


def _keras() -> dict:
    spec = importlib.util.find_spec("keras")
    if spec is None or not spec.origin:
        return {}
    text = (Path(spec.origin).parent / "layers" / "__init__.py").read_text()
    # "from keras.src.layers.pooling.average_pooling2d import AveragePooling2D as AvgPool2D": exported -> class
    layers = {m.group(2): m.group(1) for m in re.finditer(r"\b([A-Z]\w*) as ([A-Z]\w*)", text)}
    return {"keras": dict(sorted(layers.items()))}


def _tf() -> dict:
    spec = importlib.util.find_spec("tensorflow")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / "_api" / "v2" / "raw_ops" / "__init__.py"
    if not path.exists():
        return {}
    names = {b or a for a, b in re.findall(r"^from \S+ import (\w+)(?: as (\w+))?", path.read_text(), re.M)}
    return {"tf": sorted(n for n in names if n[:1].isupper())}
