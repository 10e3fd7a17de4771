"""Reproducer checks from warm interpreters: a reproducer run alone costs 3-6 s here, almost all of it importing
torch and the target's library, and a broad run can owe a hundred such checks before its budget ends (testing stops
early so that they fit). A warm interpreter imports those libraries once; each check is a child forked from it,
which runs the script as ``__main__`` in the script's folder and exits. Nothing else ever ran in that child, so it
runs the script alone, as a fresh interpreter would, but without paying the imports again.

Only a *reproduces* verdict is taken from a warm check: any other result (passes, times out, the warm interpreter
gone) is decided by a fresh interpreter, as before, so a finding is never dropped on a warm check's word. The
libraries preloaded start no thread at import, so forking after them is safe; the others are imported in the child.
"""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from dlci.exec import cancel

PRELOAD = ("numpy", "torch", "tvm", "onnx", "onnxruntime")
# run first in a warm interpreter, by path (the revision's environment may not import dlci): what a reproducer
# computes does not depend on it, and an OpenVINO reproducer otherwise waits on the network for a usage event
_SETUP = Path(__file__).resolve().parent.parent / "targets" / "_openvino_quiet.py"

# the warm interpreter: imports PRELOAD (whatever of it is installed), then forks one child per request line
_SERVER = r"""
import importlib, json, os, runpy, sys, traceback
runpy.run_path(sys.argv.pop(1), run_name="__main__")  # dlci/targets/_openvino_quiet.py: no usage telemetry
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
proto = os.fdopen(os.dup(1), "w")
print(json.dumps({"ready": True}), file=proto, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(f, fd)
                os.close(f)
            script = req["script"]
            os.chdir(os.path.dirname(script))
            sys.argv = [script]
            sys.path[0] = os.path.dirname(script)
            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as e:
                if e.code is None or isinstance(e.code, int):
                    code = e.code or 0
                else:
                    print(e.code, file=sys.stderr)
                    code = 1
            except BaseException:
                traceback.print_exc()
                code = 1
        finally:
            try:
                sys.stdout.flush(); sys.stderr.flush()
            finally:
                os._exit(code)
    print(json.dumps({"pid": pid}), file=proto, flush=True)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    print(json.dumps({"rc": rc}), file=proto, flush=True)
"""


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class _Interpreter:
    """One warm interpreter; one check at a time."""

    def __init__(self, env: dict, preload: tuple[str, ...] = PRELOAD, ready_within: float = 120.0):
        from dlci.exec import interp
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(_SETUP), *preload], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     env=interp.env(env), cwd=interp.neutral_dir(), start_new_session=True)
        with cancel._lock:  # a cancelled run kills it (and the check it is running) with the other children
            cancel._children.add(self.proc)
        self.ready = self._read(timeout=ready_within) == {"ready": True}
        if not self.ready:
            self.close()

    def _read(self, timeout: float) -> dict | None:
        got: queue.Queue = queue.Queue()
        reader = threading.Thread(target=lambda: got.put(self.proc.stdout.readline()), daemon=True)
        reader.start()
        try:
            line = got.get(timeout=timeout)
        except queue.Empty:
            return None
        try:
            return json.loads(line) if line else None
        except json.JSONDecodeError:
            return None

    def run(self, script: Path, timeout: float) -> Result | None:
        """The script's exit code and output, or None: timed out, or the interpreter is gone (then closed)."""
        if not self.ready or self.proc.poll() is not None:
            return None
        with tempfile.TemporaryDirectory(prefix="dlci-warm-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            try:
                self.proc.stdin.write(json.dumps({"script": str(script), "stdout": str(out),
                                                  "stderr": str(err)}) + "\n")
                self.proc.stdin.flush()
            except OSError:
                self.close()
                return None
            started = self._read(timeout=30)
            if not started or "pid" not in started:
                self.close()
                return None
            done = self._read(timeout=timeout)
            if not done or "rc" not in done:  # timed out: the child is killed, the interpreter is not trusted again
                try:
                    os.kill(started["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.close()
                return None
            read = lambda p: p.read_text(errors="replace") if p.exists() else ""  # noqa: E731
            return Result(done["rc"], read(out), read(err))

    def close(self) -> None:
        self.ready = False
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
        with cancel._lock:
            cancel._children.discard(self.proc)


class WarmPool:
    """``size`` warm interpreters in one environment, started on first use; use as a context manager."""

    def __init__(self, env: dict, size: int = 2, preload: tuple[str, ...] = PRELOAD):
        self.env, self.size, self.preload = env, max(1, size), preload
        self._free: queue.Queue = queue.Queue()
        self._started = 0
        self._all: list[_Interpreter] = []
        self._lock = threading.Lock()

    def _take(self, timeout: float) -> _Interpreter:
        while True:
            with self._lock:
                start = self._free.empty() and self._started < self.size
                if start:
                    self._started += 1
            if start:
                interp = _Interpreter(self.env, self.preload, ready_within=min(120.0, timeout))
                with self._lock:
                    self._all.append(interp)
                return interp
            try:
                return self._free.get(timeout=1.0)
            except queue.Empty:  # all busy; one may die and free a place to start another
                continue

    def run(self, script: Path, timeout: float) -> Result | None:
        interp = self._take(timeout)
        try:
            return interp.run(Path(script).resolve(), timeout)
        finally:
            if not interp.ready:  # replace a dead or untrusted interpreter on the next use
                with self._lock:
                    self._started -= 1
            else:
                self._free.put(interp)

    def close(self) -> None:
        for interp in self._all:
            interp.close()

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
