"""Standalone reproducers for NaN/Inf findings.

A reproducer needs only the framework and numpy. It imports the user's program by path, seeds the generators the
way the finding run did, replaces the random draws that matter (by their order of drawing) with the embedded
failure-inducing values, runs FUNCTION, and watches the reported operation at the reported line: it exits 1 and
prints REPRODUCED while finite inputs there still give a NaN/Inf (or, for a backward finding, a finite incoming
gradient gives a NaN/Inf gradient), 0 once that no longer happens, 2 when the program cannot be run at all.
"""
from __future__ import annotations

import base64
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from dlci.nan.search import SearchResult



def array_literal(a: np.ndarray) -> str:
    """Source rebuilding the array exactly (the reproducers' shared encoding: NaN/Inf literals, base64 .npy when
    large)."""
    from dlci.findings.repro import array_code
    return array_code(a)


def file_name(fid: str, op: str) -> str:
    return f"{fid}_nan_{re.sub(r'[^A-Za-z0-9]+', '_', op).strip('_')}.py"


_COMMON = r'''
import base64
import importlib.util
import io
import linecache
import math
import os
import random
import sys
import traceback
import zlib

import numpy as np

PROGRAM = {program!r}
PROGRAM_REL = {program_rel!r}  # the same file relative to where the search ran (a moved checkout)
if not os.path.exists(PROGRAM) and os.path.exists(PROGRAM_REL):
    PROGRAM = os.path.abspath(PROGRAM_REL)
FUNCTION = {function!r}
RUN_SEED = {run_seed!r}
OP = {op!r}
LINE = {line!r}
CODE = {code!r}
PHASE = {phase!r}
KIND = {kind!r}


# draw index (order of the program's random draws) -> the failure-inducing value
VALUES = {{
{values}
}}


def program_seed(n):
    if RUN_SEED == 0:
        return int(n)
    return (int(n) * 1000003 + int(RUN_SEED)) % (2 ** 31 - 1)


def at_reported_line(frame):
    """Is the innermost frame in the program's file at the reported line (or at a line with the same code)?"""
    f = frame
    while f is not None:
        if f.f_code.co_filename == PROGRAM:
            return f.f_lineno == LINE or linecache.getline(PROGRAM, f.f_lineno).strip() == CODE
        f = f.f_back
    return False


def load():
    spec = importlib.util.spec_from_file_location("nan_repro_program", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nan_repro_program"] = module
    spec.loader.exec_module(module)
    return getattr(module, FUNCTION)


HIT = []
'''

_TORCH = r'''
import torch
from torch.overrides import TorchFunctionMode

GENERATORS = {generators!r}
INPLACE = {{g for g in GENERATORS if g.endswith("_")}}
DATA_SOURCES = {{"torch.as_tensor", "torch.tensor", "torch.asarray"}}


def is_numpy_data(args, kwargs):
    v = args[0] if args else kwargs.get("data", kwargs.get("obj"))
    return isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size >= 2


def public_names():
    import torch.nn.functional as F
    import torch.nn.init
    out = {{}}
    for mod, prefix in ((torch, "torch"), (torch.Tensor, "torch.Tensor"), (F, "torch.nn.functional"),
                        (torch.special, "torch.special"), (torch.linalg, "torch.linalg"), (torch.fft, "torch.fft"),
                        (torch.nn.init, "torch.nn.init")):
        for attr in dir(mod):
            try:
                obj = getattr(mod, attr)
            except Exception:
                continue
            if callable(obj) and not isinstance(obj, type):
                out.setdefault(id(obj), prefix + "." + attr)
    return out


NAMES = public_names()


def name_of(func):
    n = NAMES.get(id(func))
    if n:
        return n
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    for cls in ("TensorBase.", "Tensor."):
        if qual.startswith(cls):
            return "torch.Tensor." + qual[len(cls):]
    if qual.startswith("_VariableFunctionsClass."):
        return "torch." + qual.split(".", 1)[1]
    return (getattr(func, "__module__", None) or "torch") + "." + qual


def finite_inputs(args, kwargs):
    for v in list(args) + list(kwargs.values()):
        vs = v if isinstance(v, (list, tuple)) else [v]
        for t in vs:
            if isinstance(t, float) and not math.isfinite(t):
                return False
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() \
                    and not bool(torch.isfinite(t.detach()).all()):
                return False
    return True


class Reproduce(TorchFunctionMode):
    draws = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {{}}
        name = name_of(func)
        if name in GENERATORS and (name not in DATA_SOURCES or is_numpy_data(args, kwargs)):
            out = func(*args, **kwargs)
            t = (args[0] if args else kwargs.get("tensor", kwargs.get("self"))) if name in INPLACE else out
            if isinstance(t, torch.Tensor) and not t.is_complex() and t.layout == torch.strided:
                k = Reproduce.draws
                Reproduce.draws += 1
                if k in VALUES and tuple(VALUES[k].shape) == tuple(t.shape):
                    with torch.no_grad():
                        t.copy_(torch.as_tensor(VALUES[k]).to(t.dtype))
            return out
        if name != OP or not at_reported_line(sys._getframe(1)):
            return func(*args, **kwargs)
        ok_in = finite_inputs(args, kwargs)
        if PHASE == "backward" and torch.is_grad_enabled():
            state = {{}}

            def out_hook(g):
                state["ok"] = bool(torch.isfinite(g).all())

            def in_hook(g):
                if state.get("ok") and g is not None and not bool(torch.isfinite(g).all()) and not HIT:
                    HIT.append("NaN" if bool(torch.isnan(g).any()) else "Inf")

            def wrap(v):
                if isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point():
                    w = v.view_as(v)
                    w.register_hook(in_hook)
                    return w
                return v

            args = tuple(wrap(a) for a in args)
            kwargs = {{k: wrap(v) for k, v in kwargs.items()}}
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and out.requires_grad:
                out.register_hook(out_hook)
            return out
        out = func(*args, **kwargs)
        if PHASE == "forward" and ok_in and isinstance(out, torch.Tensor) and out.is_floating_point():
            if not bool(torch.isfinite(out.detach()).all()) and not HIT:
                HIT.append("NaN" if bool(torch.isnan(out.detach()).any()) else "Inf")
        return out


def main():
    try:
        fn = load()
    except Exception:
        traceback.print_exc()
        print("ERROR: cannot import " + PROGRAM)
        return 2
    real_seed, real_np, real_py = torch.random.manual_seed, np.random.seed, random.seed
    real_seed(program_seed(0))
    real_np(program_seed(0) % (2 ** 32))
    real_py(program_seed(0))
    torch.manual_seed = torch.random.manual_seed = lambda n: real_seed(program_seed(n))
    np.random.seed = lambda n=None: real_np(None if n is None else program_seed(n) % (2 ** 32))
    random.seed = lambda n=None, *a, **k: real_py(n if n is None or RUN_SEED == 0 else
                                                  program_seed(zlib.crc32(repr(n).encode())))
    error = None
    try:
        with Reproduce():
            fn()
    except Exception:
        error = traceback.format_exc()
    return report(error)
'''

_TF = r'''
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf

GENERATORS = {generators!r}
MODULES = ("tf", "tf.math", "tf.nn", "tf.random", "tf.linalg")


def resolve(dotted):
    obj = tf
    for p in dotted.split(".")[1:-1]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    fn = getattr(obj, dotted.split(".")[-1], None)
    return None if fn is None else (obj, dotted.split(".")[-1], fn)


def locations(dotted):
    """Every public attribute that holds the same function (tf.exp is tf.math.exp)."""
    r = resolve(dotted)
    if r is None:
        return None, []
    owner, attr, fn = r
    locs = [(owner, attr)]
    for m in MODULES:
        mod = tf
        for p in m.split(".")[1:]:
            mod = getattr(mod, p, None) if mod is not None else None
        if mod is None:
            continue
        for a in dir(mod):
            if not a.startswith("_") and (mod, a) != (owner, attr):
                try:
                    if getattr(mod, a) is fn:
                        locs.append((mod, a))
                except Exception:
                    pass
    return fn, locs


def finite(v):
    if isinstance(v, float):
        return math.isfinite(v)
    if hasattr(v, "numpy") and getattr(getattr(v, "dtype", None), "is_floating", False):
        try:
            return bool(np.all(np.isfinite(v.numpy())))
        except Exception:
            return None
    return None


DRAWS = [0]
DEPTH = [0]


def generator_wrapper(orig):
    def wrapped(*args, **kwargs):
        if DEPTH[0]:
            return orig(*args, **kwargs)
        out = orig(*args, **kwargs)
        if not (hasattr(out, "numpy") and tf.executing_eagerly()):
            return out
        k = DRAWS[0]
        DRAWS[0] += 1
        if k in VALUES and tuple(VALUES[k].shape) == tuple(out.shape):
            out = tf.constant(VALUES[k].astype(out.dtype.as_numpy_dtype), dtype=out.dtype)
        return out
    return wrapped


def op_wrapper(orig):
    def wrapped(*args, **kwargs):
        if DEPTH[0] or not at_reported_line(sys._getframe(1)):
            return orig(*args, **kwargs)
        DEPTH[0] += 1
        try:
            ok_in = all(finite(v) is not False for v in list(args) + list(kwargs.values()))
            if PHASE == "backward":
                slots = [(w, k) for w, items in (("a", enumerate(args)), ("k", kwargs.items())) for k, v in items
                         if tf.is_tensor(v) and getattr(v.dtype, "is_floating", False) and hasattr(v, "numpy")
                         and not isinstance(v, tf.Variable)]
                if slots:
                    def call_with(values):
                        a, kw = list(args), dict(kwargs)
                        for (w, k), v in zip(slots, values):
                            if w == "a":
                                a[k] = v
                            else:
                                kw[k] = v
                        return orig(*a, **kw)

                    @tf.custom_gradient
                    def probed(*values):
                        with tf.GradientTape() as inner:
                            inner.watch(values)
                            y = call_with(values)

                        def grad(dy):
                            gs = inner.gradient(y, list(values), output_gradients=dy)
                            if finite(dy) is True and not HIT:
                                for g in gs:
                                    if g is not None and finite(g) is False:
                                        HIT.append("NaN" if bool(np.any(np.isnan(g.numpy()))) else "Inf")
                                        break
                            return gs
                        return y, grad

                    return probed(*[args[k] if w == "a" else kwargs[k] for w, k in slots])
            out = orig(*args, **kwargs)
            if PHASE == "forward" and ok_in and finite(out) is False and not HIT:
                HIT.append("NaN" if bool(np.any(np.isnan(out.numpy()))) else "Inf")
            return out
        finally:
            DEPTH[0] -= 1
    return wrapped


def main():
    try:
        fn = load()
    except Exception:
        traceback.print_exc()
        print("ERROR: cannot import " + PROGRAM)
        return 2
    for g in GENERATORS:
        orig, locs = locations(g)
        for owner, attr in locs:
            setattr(owner, attr, generator_wrapper(orig))
    orig, locs = locations(OP)
    if orig is None:
        print("ERROR: " + OP + " does not exist in this TensorFlow")
        return 2
    for owner, attr in locs:
        setattr(owner, attr, op_wrapper(orig))
    real_seed, real_np, real_py = tf.random.set_seed, np.random.seed, random.seed

    def reset_keras():
        try:
            from keras.src.backend.common import global_state
            from keras.src.random import seed_generator
            global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
        except Exception:
            pass

    def seed_all(n):
        s = program_seed(n)
        real_seed(s)
        real_np(s % (2 ** 32))
        real_py(s)
        reset_keras()

    seed_all(0)
    tf.random.set_seed = lambda n: real_seed(program_seed(n))
    np.random.seed = lambda n=None: real_np(None if n is None else program_seed(n) % (2 ** 32))
    random.seed = lambda n=None, *a, **k: real_py(n if n is None or RUN_SEED == 0 else
                                                  program_seed(zlib.crc32(repr(n).encode())))
    try:
        import keras
        keras.utils.set_random_seed = seed_all
    except Exception:
        pass
    tf.config.run_functions_eagerly(True)
    error = None
    try:
        fn()
    except Exception:
        error = traceback.format_exc()
    return report(error)
'''

_TAIL = r'''

def report(error):
    where = "%s:%d" % (PROGRAM, LINE)
    grad = " gradient" if PHASE == "backward" else ""
    if HIT:
        print("REPRODUCED: %s%s in %s at %s: %s" % (HIT[0], grad, OP, where, CODE))
        return 1
    if error is not None:
        print(error)
        print("ERROR: the program raised before %s at %s went NaN/Inf" % (OP, where))
        return 2
    print("not reproduced: %s at %s stays finite%s (fixed)" % (OP, where, grad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def render(res: SearchResult, generators: list[str], title: str = "") -> str:
    values = "\n".join(f"    {k}: {array_literal(v)},  # {_label(res, k)}"
                       for k, v in sorted(res.substitutions.items()))
    try:
        rel = os.path.relpath(res.file_program)
    except ValueError:
        rel = res.file_program
    fields = dict(program=res.file_program, program_rel=rel, function=res.function, run_seed=int(res.run_seed or 0), op=res.op,
                  line=int(res.line or 0), code=res.code or "", phase=res.phase or "forward", kind=res.kind,
                  values=values, generators=sorted(generators))
    head = (f'"""dlci nan reproducer: {(res.kind or "").upper()}{" gradient" if res.phase == "backward" else ""} in '
            f'{res.op} at {Path(res.file or "").name}:{res.line} ({res.program}).\n\n'
            f"{title}\nRun alone: exits 1 (REPRODUCED) while the bug is there, 0 once fixed, 2 if the program cannot "
            f'run.\n"""\n')
    body = _COMMON.format(**fields) + (_TORCH if res.framework == "torch" else _TF).format(**fields) + _TAIL
    return head + body


def _label(res: SearchResult, k: int) -> str:
    for e in res.external_info:
        if e["index"] == k:
            return f"{e['gen']} at {Path(e['file']).name if e['file'] else 'library code'}:{e['line']}, " \
                   f"shape {tuple(e['shape'])}"
    return ""


def generators_for(framework: str) -> list[str]:
    if framework == "torch":
        from dlci.nan.torch_trace import GENERATORS
    else:
        from dlci.nan.tf_trace import GENERATORS
    return sorted(GENERATORS)


def write(res: SearchResult, path: Path, title: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(res, generators_for(res.framework), title), encoding="utf-8")
    return path


def check(path: Path, timeout: float = 300.0) -> tuple[int, str]:
    """Run a reproducer alone (fresh interpreter): (exit code, output tail)."""
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=str(path.parent))
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return p.returncode, (p.stdout + p.stderr)[-2000:]
