"""A long-lived worker: ``python -m dlci.exec.worker --in FD --out FD [--warm mod,...] [--data-limit-mb N]``.

Reads jobs from the ``--in`` pipe, calls ``func(*args, stage_hook=hook)`` and writes results to the ``--out``
pipe (see :mod:`dlci.exec.protocol`). fd 1 is pointed at fd 2 so that prints from libraries under test land
in the worker's log instead of corrupting the protocol. Crashes (signals, hangs, OOM) are not handled here:
the engine watches the process and builds the crash result from the outside.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import resource
import signal
import sys
import threading
import time
import traceback

_T0 = time.monotonic()

from dlci.exec import protocol  # noqa: E402  (kept light: no numpy/torch here)


def _redirect_stdout() -> None:
    os.dup2(2, 1)  # anything written to fd 1 (C or Python) goes to the log
    sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # nothing under test may block on stdin
    os.close(devnull)


def _watch_parent() -> None:
    """Exit if the engine process goes away (e.g. SIGKILLed) so no worker is left hanging on a job."""
    parent = os.getppid()

    def loop():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(70)

    threading.Thread(target=loop, name="dlci-parent-watch", daemon=True).start()


def _resolve(spec: str, cache: dict):
    fn = cache.get(spec)
    if fn is None:
        mod_name, _, attr = spec.partition(":")
        if not attr:
            raise ValueError(f"func must be 'module:function', got {spec!r}")
        obj = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
        fn = cache[spec] = obj
    return fn


def _harness_error(meta: dict, exc: BaseException, seconds: float, where: str) -> dict:
    # A failure of dlci's own code, not of the target: reported as invalid, never as a target crash.
    from dlci.outcome import INVALID, Outcome
    return Outcome(meta.get("instance_id", ""), meta.get("op", ""), meta.get("target", ""), status=INVALID,
                   stage="harness", symptom=type(exc).__name__, message=f"{where}: {exc}"[:2000],
                   traceback="".join(traceback.format_exception(exc))[-8000:], seconds=seconds).to_dict()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--in", dest="in_fd", type=int, required=True)
    ap.add_argument("--out", dest="out_fd", type=int, required=True)
    ap.add_argument("--warm", default="")
    ap.add_argument("--data-limit-mb", type=int, default=0)
    ns = ap.parse_args(argv)
    in_fd, out_fd = ns.in_fd, ns.out_fd
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)  # children of the code under test must not hold the protocol pipes

    _redirect_stdout()
    faulthandler.enable(file=sys.stderr, all_threads=False)  # Python stack of a segfault/abort goes to the log
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)  # engine asks before a timeout kill
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine decides when workers stop
    _watch_parent()
    if ns.data_limit_mb > 0:
        # Backstop for allocation bursts faster than the engine's RSS sampling (RLIMIT_AS breaks torch/TF).
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        soft = ns.data_limit_mb << 20
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))

    lock = threading.Lock()

    def send(msg) -> None:
        frame = protocol.encode(msg)
        with lock:
            protocol.write_all(out_fd, frame)

    warm_errors = {}
    warm_seconds = {}
    for mod in filter(None, ns.warm.split(",")):
        t = time.monotonic()
        try:
            importlib.import_module(mod)
        except Exception as exc:  # a missing optional stack is not fatal; jobs needing it will say so
            warm_errors[mod] = f"{type(exc).__name__}: {exc}"
            print(f"[dlci worker] warm import {mod} failed: {warm_errors[mod]}", file=sys.stderr, flush=True)
        warm_seconds[mod] = time.monotonic() - t
    send(("ready", {"pid": os.getpid(), "startup_seconds": time.monotonic() - _T0,
                    "warm_seconds": warm_seconds, "warm_errors": warm_errors}))

    funcs: dict = {}
    while True:
        try:
            raw = protocol.read_exact(in_fd, protocol.HEADER_SIZE)
            if raw is None:
                return 0  # engine closed the pipe
            (size,) = protocol._HEADER.unpack(raw)
            body = protocol.read_exact(in_fd, size) or b""
        except (EOFError, OSError) as exc:  # said in the log: a test that closed our descriptor shows up here
            print(f"[dlci worker] job pipe unreadable, exiting: {exc!r}", file=sys.stderr, flush=True)
            return 0
        t0 = time.monotonic()
        try:
            msg = protocol.pickle.loads(body)
        except Exception as exc:
            # cannot even learn the job id: the engine sees a dead worker and reports the job
            print(f"[dlci worker] cannot decode job: {exc!r}", file=sys.stderr, flush=True)
            return 4
        if msg[0] == "exit":
            return 0
        _, job_id, func, args_blob, meta = msg

        def hook(stage: str, _job_id=job_id) -> None:
            # flush so the log tail of a crash in this stage holds what was printed before it
            try:
                sys.stdout.flush(); sys.stderr.flush()
            except Exception:
                pass
            send(("stage", _job_id, str(stage)))

        try:
            fn = _resolve(func, funcs)
            args = protocol.pickle.loads(args_blob)
        except Exception as exc:
            result = _harness_error(meta, exc, time.monotonic() - t0, f"cannot load {func} or its arguments")
        else:
            try:
                result = fn(*args, stage_hook=hook)
                if not isinstance(result, dict):
                    raise TypeError(f"{func} returned {type(result).__name__}, not a dict")
            except Exception as exc:
                result = _harness_error(meta, exc, time.monotonic() - t0, f"{func} raised")
        seconds = time.monotonic() - t0
        try:
            sys.stdout.flush(); sys.stderr.flush()
        except Exception:
            pass
        try:
            frame = protocol.encode(("result", job_id, result, seconds))
        except Exception as exc:
            frame = protocol.encode(("result", job_id, _harness_error(meta, exc, seconds, "result not picklable"),
                                     seconds))
        try:
            with lock:
                protocol.write_all(out_fd, frame)
        except OSError as exc:
            print(f"[dlci worker] result pipe unwritable, exiting: {exc!r}", file=sys.stderr, flush=True)
            return 0  # engine gone (or the test closed our descriptor)


if __name__ == "__main__":
    sys.exit(main())
