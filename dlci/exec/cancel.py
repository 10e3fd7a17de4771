"""Cancellation in any phase: a CI job's time limit, or GitHub cancelling a superseded run (SIGINT, then SIGTERM, then
a kill seconds later), must end a run within seconds with its partial report written.

The engine handles the signals itself while tests run (dlci.exec.engine). Outside it, :func:`install` makes SIGTERM
and SIGINT raise :class:`Cancelled` in the main thread, after killing the child processes started through
:func:`run` (reproducers, install commands), so that threads waiting on them return at once; the command then writes
what it has and exits 3.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading

_children: set[subprocess.Popen] = set()
_lock = threading.Lock()


class Cancelled(BaseException):
    """The run was cancelled by a signal (a BaseException, like KeyboardInterrupt: ``except Exception`` must not
    swallow it)."""


def kill_children() -> None:
    with _lock:
        children = list(_children)
    for proc in children:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _handler(signum, frame) -> None:
    kill_children()
    raise Cancelled(signal.Signals(signum).name)


def install() -> None:
    """SIGTERM and SIGINT raise Cancelled in the main thread (a no-op elsewhere, or where they are ignored)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _handler)


def run(cmd, *, timeout: float | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` in its own process group, killed (with whatever it
    started) on timeout or cancellation; raises subprocess.TimeoutExpired like subprocess.run."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **kwargs)
    with _lock:
        _children.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    finally:
        with _lock:
            _children.discard(proc)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
