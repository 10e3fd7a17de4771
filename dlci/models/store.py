"""A disk store of exported models, shared by the targets, workers and runs that consume the same form.

Exporting a torch instance to ONNX is most of a test of an ONNX target (torch.onnx.export: ~0.4 s, the target's
own convert/compile/run often less), and every ONNX target (TVM's and OpenVINO's ONNX frontends, ONNX Runtime) of
a campaign meets the same export: it is made once and read back by the others. A packed batch's export is stored
under its members (the targets of a campaign pack the same batches). Failures are stored too, as what the tests
report of them (the exception's type name and message), since the same export fails the same way for every target.

An entry's key is a content hash: every member's content (:meth:`Instance.compute_id`, which hashes the operator,
call, inputs and arrays, and the seed), the versions of the exporting libraries and the source of dlci's model
building code, so an edited instance, an upgraded torch or a changed recipe never reads a stale entry.
Entries live under ``$DLCI_CACHE_DIR/forms`` (``~/.cache/dlci/forms``), or the folder ``DLCI_FORM_STORE`` names;
``DLCI_FORM_STORE=off`` turns the store off.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from dlci.instance import Instance

FORMAT = 3  # bump when the entries' layout changes (2: JSON, not pickle; 3: a packed failure's symptom)


def _setting() -> str:
    return os.environ.get("DLCI_FORM_STORE", "").strip()


def enabled() -> bool:
    return _setting().lower() not in ("off", "0", "no", "false")


def root() -> Path:
    """``$DLCI_FORM_STORE`` where it names a folder, else ``forms`` under dlci's cache folder."""
    if _setting() and _setting().lower() not in ("on", "1", "yes", "true"):
        return Path(_setting())
    from dlci import cache
    return cache.root() / "forms"


@functools.lru_cache(maxsize=1)
def _environment() -> str:
    """The exporting libraries' versions and dlci's model-building code, hashed."""
    from importlib import metadata
    h = hashlib.sha1()
    import importlib.util
    for dist in ("torch", "onnx", "onnxscript"):
        try:
            h.update(f"{dist}={metadata.version(dist)};".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none;".encode())
        # where it is imported from: a PR scan runs a checkout's Python over the installed version (PYTHONPATH),
        # whose exports must never be read by the other revision
        spec = importlib.util.find_spec(dist)
        h.update(f"{getattr(spec, 'origin', None)};".encode())
    here = Path(__file__).resolve().parent
    for f in sorted([*here.glob("*.py"), *(here.parent / "instance").glob("*.py")]):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def key(kind: str, instances: list[Instance]) -> str:
    # compute_id, not .id: an instance edited after it got its id must not find its old entry
    material = [FORMAT, kind, _environment(), [[i.compute_id(), i.seed] for i in instances]]
    return hashlib.sha1(json.dumps(material).encode()).hexdigest()


def _path(k: str) -> Path:
    return root() / k[:2] / f"{k}.json"


# entries are tuples of str, int, lists and bytes, written as JSON (bytes as base64): the store sits in a cache a
# runner keeps between runs, where a PR's code ran, and reading it must never execute anything (pickle would)
def _encode(x: Any) -> Any:
    if isinstance(x, bytes):
        return {"b64": base64.b64encode(x).decode("ascii")}
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    raise TypeError(f"the store keeps plain data, not {type(x).__name__}")


def _decode(x: Any) -> Any:
    if isinstance(x, dict):
        return base64.b64decode(x["b64"])
    if isinstance(x, list):
        return [_decode(v) for v in x]
    return x


def load(k: str) -> Any | None:
    """The entry stored under ``k``, or None (absent, unreadable, or the store is off)."""
    if not enabled():
        return None
    try:
        with open(_path(k), encoding="utf-8") as fh:
            entry = _decode(json.load(fh))
        return tuple(entry) if isinstance(entry, list) and entry else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(k: str, entry: Any) -> None:
    """Write atomically (workers of a campaign write the same entries at once); a full disk only loses the entry."""
    if not enabled():
        return
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_encode(entry), fh)
        os.replace(tmp, path)
    except (OSError, TypeError):
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass


class StoredFailure(Exception):
    """A failure read back from the store: raised as a class of the original's name, with its message, so that a
    test reports it as it reported the original (its symptom is the exception's type name)."""


@functools.lru_cache(maxsize=None)
def _failure_class(name: str) -> type:
    return type(name, (StoredFailure,), {"__module__": __name__})


def failure(name: str, message: str) -> StoredFailure:
    return _failure_class(name)(message)


def lasting(e: BaseException) -> bool:
    """Whether a failure says something about the model (stored), not about the moment (memory, files)."""
    return isinstance(e, Exception) and not isinstance(e, (MemoryError, OSError))


def onnx_export(kind: str, instances: list[Instance], export: Callable[[], Any],
                describe: Callable[[BaseException], tuple | None], revive: Callable[[tuple], None]) -> Any:
    """The ONNX model ``export()`` makes of these instances, read from the store when it holds it. A failure of
    ``export`` is stored as ``describe(exception)`` (a tuple of plain data; None: not stored) and a stored one is
    raised again by ``revive(tuple)``."""
    import onnx
    k = key(kind, instances)
    entry = load(k)
    if entry is not None:
        if entry[0] == "ok":
            return onnx.load_from_string(entry[1])
        revive(entry)
        raise AssertionError("revive must raise")  # a stored failure never passes for a model
    try:
        model = export()
    except Exception as e:
        stored = describe(e)
        if stored is not None:
            save(k, stored)
        raise
    save(k, ("ok", model.SerializeToString()))
    return model
