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
import tempfile
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


def run(cmd, *, timeout: float | None = None, input: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` in its own process group, killed (with whatever it
    started) on timeout or cancellation; raises subprocess.TimeoutExpired like subprocess.run.

    Its output goes to temporary files, not pipes: a process it leaves behind in a session of its own (out of the
    group's reach; a pull request's code can do that) keeps a pipe open, and reading a pipe to its end would then
    wait for that process (seen: 10 minutes for a daemon a converter under test forked), not for the command."""
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f, tempfile.TemporaryFile() as in_f:
        if input is not None:   # ``input``: the command's standard input, as subprocess.run takes it
            in_f.write(input.encode())
            in_f.seek(0)
            kwargs["stdin"] = in_f
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, start_new_session=True, **kwargs)
        with _lock:
            _children.add(proc)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            with _lock:
                _children.discard(proc)
            try:   # what the command left behind in its group goes with it
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if proc.poll() is None:
                proc.wait()

        def text(f) -> str:
            f.seek(0)
            return f.read().decode("utf-8", "replace")
        out, err = text(out_f), text(err_f)
    if timed_out:
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
