"""Migration sources: turn the libraries' own test inputs into operator :class:`~dlci.instance.Instance` s.

Each source is one small class registered in :data:`SOURCES` by :func:`register`. :func:`load` harvests a
source once per (source, library versions, :data:`SOURCE_FORMAT`, limit, op filter) and caches the result on
disk as ``<key>.jsonl`` (a header line with the stats, then one ``Instance.to_meta()`` per line) plus
``<key>.npz`` (every instance's arrays under ``<index>/<array name>``).

Nothing is dropped silently: every skipped item is counted under a reason in ``source.stats["skipped"]``.
"""
from __future__ import annotations

import collections
import hashlib
import json
import os
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from dlci.instance import Instance

# Bump when the shape of harvested instances changes: old caches are then ignored.
SOURCE_FORMAT = 1

SOURCES: dict[str, type["Source"]] = {}


def register(cls: type["Source"]) -> type["Source"]:
    """Class decorator: add a source to :data:`SOURCES` under ``cls.name``."""
    if not cls.name or cls.name in SOURCES and SOURCES[cls.name] is not cls:
        raise ValueError(f"source name {cls.name!r} missing or taken")
    SOURCES[cls.name] = cls
    return cls


class Source:
    """A test-input source. Subclasses set the class attributes and implement :meth:`harvest`."""

    name: str = ""
    framework: str = ""  # torch | onnx | keras
    description: str = ""
    default_limit_per_op: int | None = None
    bases: tuple[str, ...] = ()  # a derived source: the sources whose instances it varies (derived per operator)
    per_op = False  # harvests the wanted operators only (cheap per operator): gather asks it for those, not all

    def __init__(self, ops: Iterable[str] | None = None):
        # ``ops``: only harvest these operators (canonical ids like "aten::add" or the library's own names)
        self.ops = sorted(set(ops)) if ops else None
        self.stats: dict[str, Any] = {"skipped": collections.Counter()}

    # -- to implement ------------------------------------------------------------------------------
    def library_versions(self) -> dict[str, str]:
        raise NotImplementedError

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        raise NotImplementedError

    # -- helpers for subclasses --------------------------------------------------------------------
    def cache_extra(self) -> dict:
        """More cache-key material (e.g. the content hash of a test suite)."""
        return {}

    def skip(self, reason: str, n: int = 1) -> None:
        self.stats["skipped"][reason] += n

    def wanted(self, *names: str) -> bool:
        return self.ops is None or any(n in self.ops for n in names if n)

    def _code_hash(self) -> str:
        # editing any harvesting code invalidates the caches too (SOURCE_FORMAT is for the deliberate bumps)
        import inspect
        h = hashlib.sha1()
        files = sorted(Path(__file__).parent.glob("*.py"))
        try:
            files.append(Path(inspect.getfile(type(self))))  # sources defined elsewhere
        except (TypeError, OSError):
            pass
        for f in files:
            h.update(f.read_bytes())
        return h.hexdigest()[:12]

    def cache_key(self, limit_per_op: int | None) -> str:
        material = {"source": self.name, "format": SOURCE_FORMAT, "versions": self.library_versions(),
                    "limit": limit_per_op, "ops": self.ops, "extra": self.cache_extra(), "code": self._code_hash()}
        digest = hashlib.sha1(json.dumps(material, sort_keys=True).encode()).hexdigest()[:16]
        return f"{self.name}-{digest}"


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where harvests are written: ``cache_dir`` when given, else dlci's cache root (:mod:`dlci.cache`)."""
    from dlci import cache
    return Path(cache_dir) if cache_dir is not None else cache.root()


def _source_object(source: "str | Source", ops) -> Source:
    if isinstance(source, Source):
        if ops is not None:
            source.ops = sorted(set(ops))
        return source
    _import_builtin_sources()
    try:
        cls = SOURCES[source]
    except KeyError:
        raise KeyError(f"unknown source {source!r}; known: {sorted(SOURCES)}") from None
    return cls(ops=ops)


def load(name: "str | Source", *, cache_dir=None, limit_per_op: int | None = None, refresh: bool = False,
         ops: Iterable[str] | None = None) -> list[Instance]:
    """Harvest source ``name`` (a registered name or a :class:`Source` object), cached on disk."""
    return load_with_stats(name, cache_dir=cache_dir, limit_per_op=limit_per_op, refresh=refresh, ops=ops)[0]


def load_with_stats(name: "str | Source", *, cache_dir=None, limit_per_op: int | None = None,
                    refresh: bool = False, ops: Iterable[str] | None = None) -> tuple[list[Instance], dict]:
    """Like :func:`load`, also returning the harvest's stats (skip reasons, timings, ...)."""
    src = _source_object(name, ops)
    if limit_per_op is None:
        limit_per_op = src.default_limit_per_op
    from dlci import cache
    root = cache_root(cache_dir)
    key = src.cache_key(limit_per_op)
    meta_path, npz_path = root / f"{key}.jsonl", root / f"{key}.npz"
    # an untrusted run reads the trusted harvest too (never the other way round: dlci.cache)
    readable = [root] + ([cache.base()] if cache_dir is None and cache.untrusted() else [])
    for where in readable if not refresh else []:
        if not (where / f"{key}.jsonl").exists():
            continue
        try:
            return read_cache(where / f"{key}.jsonl", where / f"{key}.npz")
        except Exception as e:  # noqa: BLE001 - any damage means: harvest again
            warnings.warn(f"dlci: cache {where / f'{key}.jsonl'} is unreadable ({type(e).__name__}: {e}); "
                          "re-harvesting", RuntimeWarning, stacklevel=2)
    import time
    t0 = time.monotonic()
    seen: set[str] = set()
    instances = []
    for inst in src.harvest(limit_per_op):
        if inst.id in seen:
            src.skip("duplicate")
            continue
        seen.add(inst.id)
        instances.append(inst)
    stats = _plain(src.stats)
    stats["seconds"] = round(time.monotonic() - t0, 2)
    stats["instances"] = len(instances)
    stats["ops"] = len({i.op for i in instances})
    stats["versions"] = src.library_versions()
    write_cache(meta_path, npz_path, instances, stats)
    return instances, stats


def _plain(obj):
    """Counters and tuples to plain JSON types."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


# -- the on-disk cache ---------------------------------------------------------------------------------

def _file_sha1(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _atomic_tmp(path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def write_cache(meta_path: Path, npz_path: Path, instances: list[Instance], stats: dict) -> None:
    """Write atomically: npz first, then the JSONL whose header names the npz's hash.

    A reader that finds the JSONL therefore also finds the matching npz; a crash at any point leaves either the
    old complete cache or none.
    """
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    tmp_npz, tmp_meta = _atomic_tmp(npz_path), _atomic_tmp(meta_path)
    try:
        arrays = {}
        for i, inst in enumerate(instances):
            for k, a in inst.arrays.items():
                if a.dtype == object:
                    raise TypeError(f"{inst.id}: object array {k} cannot be cached")
                arrays[f"{i}/{k}"] = a
        with open(tmp_npz, "wb") as f:
            np.savez(f, **arrays)
        header = {"$header": {"format": SOURCE_FORMAT, "count": len(instances), "npz_sha1": _file_sha1(tmp_npz),
                              "stats": stats}}
        with open(tmp_meta, "w") as f:
            f.write(json.dumps(header) + "\n")
            for inst in instances:
                f.write(json.dumps(inst.to_meta()) + "\n")
        for t in (tmp_npz, tmp_meta):
            os.chmod(t, 0o644)  # mkstemp makes 0600; a shared cache dir should stay readable
        os.replace(tmp_npz, npz_path)
        os.replace(tmp_meta, meta_path)
    finally:
        for t in (tmp_npz, tmp_meta):
            if t.exists():
                t.unlink()


def read_cache(meta_path: Path, npz_path: Path) -> tuple[list[Instance], dict]:
    with open(meta_path) as f:
        lines = f.read().splitlines()
    header = json.loads(lines[0])["$header"]
    if header["format"] != SOURCE_FORMAT or header["count"] != len(lines) - 1:
        raise ValueError("truncated or foreign cache")
    if _file_sha1(npz_path) != header["npz_sha1"]:
        raise ValueError("arrays file does not match the metadata")
    per_instance: dict[int, dict[str, np.ndarray]] = collections.defaultdict(dict)
    try:
        with np.load(npz_path, allow_pickle=False) as npz:
            for key in npz.files:
                idx, name = key.split("/", 1)
                per_instance[int(idx)][name] = npz[key]
    except zipfile.BadZipFile as e:
        raise ValueError(str(e)) from e
    instances = []
    for i, line in enumerate(lines[1:]):
        meta = json.loads(line)
        inst = Instance.from_meta(meta, per_instance.get(i, {}))
        check_call(inst.call)
        instances.append(inst)
    return instances, header["stats"]


# What a cached call may name: an operator of the frameworks under test. A cache entry is a file on disk that a
# process running a pull request's code could have written (same user, no sandbox), and a later run imports and
# calls what it names: anything that reads or writes files, loads code or pickles, or starts programs is refused.
_CALL_ROOTS = ("torch", "tf", "tensorflow", "keras")
_CALL_REFUSED = frozenset({
    # modules a framework happens to import (torch.os.system would resolve) and what loads code or data
    "os", "sys", "subprocess", "shutil", "builtins", "importlib", "pickle", "marshal", "socket", "ctypes", "io",
    "pathlib", "runpy", "tempfile", "glob", "urllib", "http", "requests", "multiprocessing", "threading",
    "hub", "package", "cpp_extension", "load_library", "gfile", "saving", "get_file", "load_model", "py_function",
    "numpy_function", "Lambda", "eval", "exec", "compile", "system", "popen", "open",
    "load", "save", "ReadFile", "WriteFile", "MatchingFiles", "PyFunc", "PyFuncStateless", "EagerPyFunc"})


class UntrustedCacheEntry(ValueError):
    """A cached instance names something that is not a framework operator: the entry is not read."""


def check_call(call: dict) -> None:
    """Refuse a cached call recipe whose function or class is not a framework operator (see above)."""
    for key in ("fn", "cls"):
        path = call.get(key)
        if path is None:
            continue
        parts = path.split(".") if isinstance(path, str) else [""]
        if parts[0] not in _CALL_ROOTS or len(parts) < 2 or any(
                not p.isidentifier() or p in _CALL_REFUSED or p.startswith(("load_", "save_"))
                or (p.startswith("__") and i < len(parts) - 1) for i, p in enumerate(parts)):
            raise UntrustedCacheEntry(f"a cached instance names {str(path)[:120]!r}, not a framework operator")


def summary(instances: Iterable[Instance]) -> dict:
    """Per-operator instance counts (plus totals) of a harvest."""
    instances = list(instances)
    per_op = collections.Counter(i.op for i in instances)
    per_fw = collections.Counter(i.framework for i in instances)
    return {"instances": sum(per_op.values()), "ops": len(per_op), "per_op": dict(sorted(per_op.items())),
            "per_framework": dict(per_fw)}


def stable_seed(*parts: str) -> int:
    """A seed that depends only on the given names (never on hash randomisation or order of harvest)."""
    return int.from_bytes(hashlib.sha1("\0".join(parts).encode()).digest()[:4], "little") & 0x7FFFFFFF


# The built-in sources register themselves on import (plugins of this registry: they import it, it names them).
BUILTIN_MODULES = ("dlci.sources.opinfo", "dlci.sources.modules", "dlci.sources.onnx_node", "dlci.sources.harvest",
                   "dlci.sources.boundary", "dlci.sources.nan_search", "dlci.sources.onnx_variants",
                   "dlci.sources.torch_variants", "dlci.sources.tflite_variants",
                   "dlci.sources.tf_ops", "dlci.sources.factories")
# what `dlci test` and `dlci scan` load when no --sources / .dlci.yml sources are given
DEFAULT_SOURCES = ("opinfo", "module_db", "onnx_node", "keras_tests")
# what `dlci scan` adds for the operators a PR touches: TensorFlow's own ops (TFLite converters see ops keras layers never
# emit), the variants of their cases that take other converter paths, and calls of tensor-less ATen factories
PR_SOURCES = DEFAULT_SOURCES + ("tf_ops", "onnx_variants", "torch_variants", "tflite_variants", "factories")


def _import_builtin_sources() -> None:
    # imported lazily: a source module imports its library's test suite, which is heavy
    import importlib
    for module in BUILTIN_MODULES:
        importlib.import_module(module)


__all__ = ["SOURCES", "SOURCE_FORMAT", "DEFAULT_SOURCES", "PR_SOURCES", "Source", "register", "load", "load_with_stats", "summary",
           "cache_root", "stable_seed", "registry"]


def registry() -> dict[str, type["Source"]]:
    """All registered sources (the built-in ones are imported on first use)."""
    _import_builtin_sources()
    return SOURCES
