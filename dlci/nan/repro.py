"""Standalone reproducers for NaN/Inf findings.

A reproducer needs only the framework and numpy. It imports the user's program by path, seeds the generators the
way the finding run did, replaces the random draws that matter (by their order of drawing) with the embedded
failure-inducing values, runs FUNCTION, and watches the reported operation at the reported line: it exits 1 and
prints REPRODUCED while finite inputs there still give a NaN/Inf (or, for a backward finding, a finite incoming
gradient gives a NaN/Inf gradient), 0 once that no longer happens, 2 when the program cannot be run at all.
"""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import dlci.nan.standalone as standalone
from dlci.nan.search import SearchResult


def array_literal(a: np.ndarray) -> str:
    """Source rebuilding the array exactly (the reproducers' shared encoding: NaN/Inf literals, base64 .npy when
    large)."""
    from dlci.findings.repro.literals import array_code
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


def at_reported_line(frame):
    """Is the innermost frame in the program's file at the reported line (or at a line with the same code)?"""
    uf = user_frame(PROGRAM, frame)
    return uf is not None and (uf[0] == LINE or linecache.getline(PROGRAM, uf[0]).strip() == CODE)


def load():
    spec = importlib.util.spec_from_file_location("nan_repro_program", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    sys.modules["nan_repro_program"] = module
    spec.loader.exec_module(module)
    return getattr(module, FUNCTION)


def hit(kind):
    if not HIT:
        HIT.append("NaN" if kind == "nan" else "Inf")


HIT = []
'''

_TORCH = r'''
import torch
from torch.overrides import TorchFunctionMode

GENERATORS = {generators!r}
INPLACE = {{g for g in GENERATORS if g.endswith("_")}}
DATA_SOURCES = {data_sources!r}
NAMES = torch_public_names()


class Reproduce(TorchFunctionMode):
    draws = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {{}}
        name = torch_name_of(func, NAMES)
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
        ok_in = torch_finite_inputs(args, kwargs)
        if PHASE == "backward" and torch.is_grad_enabled():
            args, kwargs, watch_output = torch_backward_probe(args, kwargs, hit)
            out = func(*args, **kwargs)
            watch_output(out)
            return out
        out = func(*args, **kwargs)
        if PHASE == "forward" and ok_in and isinstance(out, torch.Tensor) and out.is_floating_point():
            if not bool(torch.isfinite(out.detach()).all()):
                hit("nan" if bool(torch.isnan(out.detach()).any()) else "inf")
        return out


def install():
    install_seeding(RUN_SEED, setattr, torch.random.manual_seed,
                    [(torch, "manual_seed"), (torch.random, "manual_seed")])
    return True


def run(fn):
    with Reproduce():
        fn()
'''

_TF = r'''
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf

GENERATORS = {generators!r}
WHERE = tf_aliases({modules!r})


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
            ok_in = all(tf_finite(v) is not False for v in list(args) + list(kwargs.values()))
            slots = tf_probe_slots(args, kwargs) if PHASE == "backward" else None
            if slots:
                return tf_probed_call(orig, args, kwargs, slots, hit)
            out = orig(*args, **kwargs)
            if PHASE == "forward" and ok_in and tf_finite(out) is False:
                hit("nan" if bool(np.any(np.isnan(out.numpy()))) else "inf")
            return out
        finally:
            DEPTH[0] -= 1
    return wrapped


def install():
    for g in GENERATORS:
        orig, locs = tf_locations(g, WHERE)
        for owner, attr in locs:
            setattr(owner, attr, generator_wrapper(orig))
    orig, locs = tf_locations(OP, WHERE)
    if orig is None:
        print("ERROR: " + OP + " does not exist in this TensorFlow")
        return False
    for owner, attr in locs:
        setattr(owner, attr, op_wrapper(orig))
    seed_all = install_seeding(RUN_SEED, setattr, tf.random.set_seed, [(tf.random, "set_seed")],
                               after=reset_keras_seed)
    try:
        import keras
        keras.utils.set_random_seed = seed_all
    except Exception:
        pass
    tf.config.run_functions_eagerly(True)
    return True


def run(fn):
    fn()
'''

_TAIL = r'''

def main():
    try:
        fn = load()
    except Exception:
        traceback.print_exc()
        print("ERROR: cannot import " + PROGRAM)
        return 2
    if not install():
        return 2
    error = None
    try:
        run(fn)
    except Exception:
        error = traceback.format_exc()
    return report(error)


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
    fields = dict(program=res.file_program, program_rel=rel, function=res.function, run_seed=int(res.run_seed or 0),
                  op=res.op, line=int(res.line or 0), code=res.code or "", phase=res.phase or "forward",
                  kind=res.kind, values=values, generators=sorted(generators), modules=standalone.TF_MODULES,
                  data_sources=sorted(_data_sources(res.framework)))
    head = (f'"""dlci nan reproducer: {(res.kind or "").upper()}{" gradient" if res.phase == "backward" else ""} in '
            f'{res.op} at {Path(res.file or "").name}:{res.line} ({res.program}).\n\n'
            f"{title}\nRun alone: exits 1 (REPRODUCED) while the bug is there, 0 once fixed, 2 if the program cannot "
            f'run.\n"""\n')
    body = (_COMMON.format(**fields) + prelude(res.framework)
            + (_TORCH if res.framework == "torch" else _TF).format(**fields) + _TAIL)
    return head + body


def prelude(framework: str) -> str:
    """The tracers' own helpers, pasted from their source: the reproducer runs the same code without dlci."""
    fns = standalone.COMMON + (standalone.TORCH if framework == "torch" else standalone.TF)
    return "\n# -- helpers from dlci/nan/standalone.py --\n\n" + "\n\n".join(inspect.getsource(f) for f in fns)


def _label(res: SearchResult, k: int) -> str:
    for e in res.external_info:
        if e["index"] == k:
            return f"{e['gen']} at {Path(e['file']).name if e['file'] else 'library code'}:{e['line']}, " \
                   f"shape {tuple(e['shape'])}"
    return ""


def _data_sources(framework: str) -> list[str]:
    if framework != "torch":
        return []
    from dlci.nan.torch_trace import DATA_SOURCES
    return sorted(DATA_SOURCES)


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
    from dlci.exec import cancel
    try:   # cancel.run: a process the code under test leaves behind does not hold the verdict up
        p = cancel.run([sys.executable, str(path)], timeout=timeout, env=env, cwd=str(path.parent))
    except subprocess.TimeoutExpired:
        return 124, "timed out"
    return p.returncode, (p.stdout + p.stderr)[-2000:]
