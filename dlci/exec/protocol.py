"""Length-prefixed pickle frames between the engine and its workers.

A frame is an 8-byte big-endian length followed by that many bytes of pickle. Each message is a tuple whose
first item names it:

parent -> worker: ("job", job_id, func, args, meta)   meta: instance_id/op/target for harness errors
                  ("exit",)
worker -> parent: ("ready", info)                       info: pid, startup seconds, warm import errors
                  ("stage", job_id, stage)
                  ("result", job_id, outcome_dict, seconds)
"""
from __future__ import annotations

import io
import os
import pickle
import struct

_HEADER = struct.Struct(">Q")
HEADER_SIZE = _HEADER.size
PROTOCOL = pickle.HIGHEST_PROTOCOL


def encode(msg) -> bytes:
    payload = pickle.dumps(msg, protocol=PROTOCOL)
    return _HEADER.pack(len(payload)) + payload


def write_all(fd: int, data: bytes) -> None:
    """Blocking write of a whole frame (the worker side; pipes may accept partial writes)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int) -> bytes | None:
    """Blocking read of exactly n bytes; None on EOF before any byte, EOFError on a torn frame."""
    chunks = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            if got == 0:
                return None
            raise EOFError("torn frame")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(fd: int):
    """Blocking read of one message; None on a clean EOF."""
    header = read_exact(fd, HEADER_SIZE)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    body = read_exact(fd, size) if size else b""
    if body is None:
        raise EOFError("torn frame")
    return pickle.loads(body)


# Untrusted code runs in the worker and can write to its end of the pipe, so the parent (which may hold
# secrets) only unpickles plain data: containers, numbers, strings and numpy arrays/scalars.
_SAFE_GLOBALS = {
    ("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray", "bytes", "int",
                             "float", "str", "bool", "list", "tuple", "dict")
} | {("collections", "OrderedDict")} | {
    (mod, n) for mod in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("scalar", "_reconstruct")
} | {
    (mod, "_frombuffer") for mod in ("numpy.core.numeric", "numpy._core.numeric")
} | {("numpy", "dtype"), ("numpy", "ndarray")}


class ProtocolError(Exception):
    pass


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"worker sent a disallowed object {module}.{name}")


def safe_loads(data: bytes):
    return _SafeUnpickler(io.BytesIO(data)).load()


class FrameBuffer:
    """Incremental decoder for the parent's non-blocking reads (restricted unpickling)."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data: bytes) -> list:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER_SIZE:
            (size,) = _HEADER.unpack_from(self._buf)
            end = HEADER_SIZE + size
            if len(self._buf) < end:
                break
            body = bytes(self._buf[HEADER_SIZE:end])
            del self._buf[:end]
            try:
                out.append(safe_loads(body))
            except Exception as exc:  # handed to the engine, which treats the worker as broken
                out.append(ProtocolError(f"undecodable frame from worker: {exc}"))
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)
