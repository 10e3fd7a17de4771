"""Tiny job functions run inside dlci.exec workers by tests/test_exec.py (imported as tests.exec_jobs)."""
import ctypes
import json
import os
import sys
import time

from dlci.outcome import PASS, Outcome

IMPORTS = 0  # counts how often this module was imported in one worker process
IMPORTS += 1


def _ok(name="x", **extra):
    return Outcome(name, "op", "target", status=PASS, **extra).to_dict()


def ok(name="x", stage_hook=None):
    stage_hook("run")
    return _ok(name, message=str(os.getpid()))


def sleep(seconds, name="x", stage_hook=None):
    stage_hook("run")
    t0 = time.monotonic()
    time.sleep(seconds)
    return _ok(name, message=f"{os.getpid()} {t0} {time.monotonic()}")


def raises(stage_hook=None):
    stage_hook("convert")
    raise ValueError("bug in dlci")


def segfault(stage_hook=None):
    stage_hook("convert")
    print("about to crash in convert", file=sys.stderr, flush=True)
    stage_hook("compile")
    ctypes.string_at(0)


def abort(stage_hook=None):
    stage_hook("run")
    print("aborting now", flush=True)  # stdout: must reach the log, not the protocol
    os.abort()


def exit3(stage_hook=None):
    stage_hook("run")
    os._exit(3)


def hang(stage_hook=None):
    stage_hook("compile")
    while True:
        time.sleep(1)


def eat_memory(stage_hook=None):
    stage_hook("run")
    hog = []
    while True:
        hog.append(b"\x01" * (16 << 20))  # touched pages, so RSS really grows
        time.sleep(0.01)


def garbage_stdout(stage_hook=None):
    stage_hook("run")
    sys.stdout.write("\x00\x00\x00\x00\x00\x00\x00\x10garbage" * 100)
    sys.stdout.flush()
    os.write(1, b"\xff" * 4096)  # raw fd 1, as a C library would
    print("more noise")
    return _ok("noise")


def environment(stage_hook=None):
    keys = sorted(k for k in os.environ)
    return _ok("env", message=" ".join(keys),
               traceback=os.environ.get("OMP_NUM_THREADS", "") + "|" + os.environ.get("TF_CPP_MIN_LOG_LEVEL", ""))


def modules(stage_hook=None):
    return _ok("mods", message=" ".join(m for m in ("torch", "numpy", "json") if m in sys.modules),
               traceback=str(IMPORTS))


def not_a_dict(stage_hook=None):
    return 42


def torch_op(stage_hook=None):
    import torch
    stage_hook("run")
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = torch.nn.functional.relu(x - 2).sum().item()
    return _ok("torch", message=repr(y), traceback=str(torch.get_num_threads()))


def tf_and_torch(stage_hook=None):
    import tensorflow as tf
    import torch
    stage_hook("run")
    x = torch.randn(1, 3, 32, 32)
    y = torch.nn.functional.conv2d(x, torch.randn(8, 3, 3, 3)).sum().item()
    z = float(tf.reduce_sum(tf.nn.relu(tf.ones((64, 64)))).numpy())
    return _ok("tf", message=f"{y} {z}")


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ.get("DLCI_EVIL_MARKER", "/nonexistent/x"),))


def evil_frame(stage_hook=None):
    """Untrusted code forging a protocol frame that would run a command in the parent if unpickled."""
    import pickle
    import struct
    out_fd = int(sys.argv[sys.argv.index("--out") + 1])
    body = pickle.dumps(("result", "evil", {"x": _Evil()}, 0.0))
    os.write(out_fd, struct.pack(">Q", len(body)) + body)
    time.sleep(5)
    return _ok("evil")


def fork_shared(mb, seconds, stage_hook=None):
    """Touch ``mb`` MB, then fork a child that shares them (copy-on-write) and sleep in both: the RSS summed over
    the tree counts the pages twice, the PSS once."""
    stage_hook("compile")
    block = bytearray(mb << 20)
    for k in range(0, len(block), 4096):
        block[k] = 1
    pid = os.fork()
    if pid == 0:
        time.sleep(seconds)
        os._exit(0)
    time.sleep(seconds)
    os.waitpid(pid, 0)
    return _ok("shared", message=str(len(block) >> 20))


def poisoned(stage_hook=None):
    """What a device target reports after a sticky CUDA error: a crash whose worker must not run another test."""
    stage_hook("run")
    return Outcome("p", "op", "target", status="crash", stage="run", symptom="CUDA error: illegal memory access",
                   message=str(os.getpid()), retire_worker="CUDA error: illegal memory access").to_dict()


def env_values(names, stage_hook=None):
    """The worker's values of these environment variables, and its pid."""
    stage_hook("run")
    return _ok(message=str(os.getpid()), log=json.dumps({n: os.environ.get(n) for n in names}))


def cuda_ok(stage_hook=None):
    """A CUDA computation (GPU tests only): passes with the worker's pid."""
    import torch
    stage_hook("run")
    assert float(torch.ones(4, device="cuda").sum()) == 4.0
    return _ok(message=str(os.getpid()))


def cuda_device_assert(stage_hook=None):
    """An out-of-range index in a real CUDA kernel: a device-side assert, which poisons the CUDA context."""
    import torch
    from dlci.targets._cuda import sticky_cuda_error
    stage_hook("run")
    try:
        torch.zeros(3, device="cuda")[torch.tensor([5], device="cuda")].sum().item()
        torch.cuda.synchronize()
    except RuntimeError as e:
        kind = sticky_cuda_error(e)
        return Outcome("a", "op", "torch.cuda", status="crash", stage="run", symptom=kind or type(e).__name__,
                       message=str(e)[:200], retire_worker=kind or "").to_dict()
    return _ok(message="no assert")
