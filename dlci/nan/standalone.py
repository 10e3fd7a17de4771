"""Helpers of the NaN/Inf search that must also run without dlci.

The tracers (:mod:`dlci.nan.torch_trace`, :mod:`dlci.nan.tf_trace`) call these functions, and reproducers
(:mod:`dlci.nan.repro`) paste their source (``inspect.getsource``), because a reproducer may import only the
framework and numpy. So: nothing here imports dlci; a function uses only the standard library modules imported
below, numpy as ``np``, the framework (imported inside the function) and the other functions of this module.
"""
from __future__ import annotations

import math
import random
import zlib

import numpy as np

# -- seeding ------------------------------------------------------------------------------------------------

def program_seed(run_seed, n):
    """The seed a program's own seeding call with ``n`` gets in run ``run_seed`` (run 0: the program as written)."""
    if run_seed == 0:
        return int(n)
    return (int(n) * 1000003 + int(run_seed)) % (2 ** 31 - 1)


def install_seeding(run_seed, patch, framework_seed, framework_owners, after=None):
    """Seed every generator for run ``run_seed`` and map the program's own seeding calls onto it.

    ``patch(owner, attr, value)`` installs a replacement (the caller decides whether it is restored);
    ``framework_seed`` is the framework's real seeding function, ``framework_owners`` the (owner, attr) places the
    program may call it by. Returns the everything-seeding function (for helpers such as Keras' set_random_seed).
    """
    real_np_seed, real_py_seed = np.random.seed, random.seed

    def seed_all(n):
        s = program_seed(run_seed, n)
        framework_seed(s)
        real_np_seed(s % (2 ** 32))
        real_py_seed(s)
        if after is not None:
            after()

    def np_seed(n=None):
        real_np_seed(None if n is None else program_seed(run_seed, n) % (2 ** 32))

    def py_seed(n=None, *args, **kwargs):
        # random.seed takes any hashable: a stable integer of it (hash() of a str changes between processes)
        real_py_seed(n if n is None or run_seed == 0 else program_seed(run_seed, zlib.crc32(repr(n).encode())))

    seed_all(0)
    for owner, attr in framework_owners:
        patch(owner, attr, lambda n: framework_seed(program_seed(run_seed, n)))
    patch(np.random, "seed", np_seed)
    patch(random, "seed", py_seed)
    return seed_all


def user_frame(path, start):
    """(line, function) of the innermost frame of ``start``'s stack that runs code from ``path``."""
    f = start
    while f is not None:
        if f.f_code.co_filename == path:
            return f.f_lineno, f.f_code.co_name
        f = f.f_back
    return None


# -- PyTorch ----------------------------------------------------------------------------------------------------

def torch_public_names():
    """id(function object) -> public dotted name, over torch's user-facing namespaces (first name wins)."""
    import torch
    import torch.fft
    import torch.linalg
    import torch.nn.functional
    import torch.nn.init
    import torch.special
    out = {}
    for mod, prefix in ((torch, "torch"), (torch.Tensor, "torch.Tensor"), (torch.nn.functional, "torch.nn.functional"),
                        (torch.special, "torch.special"), (torch.linalg, "torch.linalg"), (torch.fft, "torch.fft"),
                        (torch.nn.init, "torch.nn.init")):
        for attr in dir(mod):
            try:
                obj = getattr(mod, attr)
            except Exception:  # noqa: BLE001 - lazy attributes that fail to load are no operators
                continue
            if callable(obj) and not isinstance(obj, type):
                out.setdefault(id(obj), prefix + "." + attr)
    return out


def torch_name_of(func, names):
    """The public name of an intercepted torch function (``names``: :func:`torch_public_names`)."""
    n = names.get(id(func))
    if n:
        return n
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    for cls in ("TensorBase.", "Tensor."):
        if qual.startswith(cls):
            return "torch.Tensor." + qual[len(cls):]
    if qual.startswith("_VariableFunctionsClass."):
        return "torch." + qual.split(".", 1)[1]
    return (getattr(func, "__module__", None) or "torch") + "." + qual


def is_numpy_data(args, kwargs):
    """Is the argument of torch.tensor/as_tensor float numpy data (two or more elements), not a constant?"""
    v = args[0] if args else kwargs.get("data", kwargs.get("obj"))
    return isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size >= 2


def torch_tensors(x, out, depth=0):
    """The tensors of an argument (lists and tuples two levels down), appended to ``out``."""
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif depth < 2 and isinstance(x, (list, tuple)):
        for v in x:
            torch_tensors(v, out, depth + 1)
    return out


def torch_finite_inputs(args, kwargs):
    import torch
    for v in list(args) + list(kwargs.values()):
        if isinstance(v, float) and not math.isfinite(v):
            return False
        for t in torch_tensors(v, []):
            if (t.is_floating_point() or t.is_complex()) and t.numel() and not bool(torch.isfinite(t.detach()).all()):
                return False
    return True


def torch_backward_probe(args, kwargs, on_bad):
    """Watch one call's backward: the float arguments that require grad are replaced by views with a gradient
    hook, and ``on_bad("nan" | "inf")`` is called when the call's finite incoming gradient gives them a NaN/Inf one.

    Returns ``(args, kwargs, watch_output)``; call ``watch_output(out)`` with the call's result."""
    import torch
    state = {"gout_ok": None}

    def out_hook(g):
        state["gout_ok"] = bool(torch.isfinite(g).all())

    def in_hook(g):
        if state["gout_ok"] is not True or g is None or not g.is_floating_point():
            return
        if not bool(torch.isfinite(g).all()):
            on_bad("nan" if bool(torch.isnan(g).any()) else "inf")

    def wrap(v):
        if isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point():
            w = v.view_as(v)
            w.register_hook(in_hook)
            return w
        return v

    def watch_output(out):
        if isinstance(out, torch.Tensor) and out.requires_grad:
            out.register_hook(out_hook)

    return tuple(wrap(a) for a in args), {k: wrap(v) for k, v in kwargs.items()}, watch_output


# -- TensorFlow -------------------------------------------------------------------------------------------------

TF_MODULES = ("tf", "tf.math", "tf.nn", "tf.random", "tf.linalg")


def tf_resolve(dotted):
    """(owner, attr, object) for ``tf.math.log`` / ``tf.Tensor.__truediv__``, or None."""
    import tensorflow as tf
    obj = tf
    for p in dotted.split(".")[1:-1]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    fn = getattr(obj, dotted.split(".")[-1], None)
    return None if fn is None else (obj, dotted.split(".")[-1], fn)


def tf_aliases(modules):
    """id(function) -> every public (module, attr) that holds it, over ``modules`` (tf.exp is tf.math.exp)."""
    import tensorflow as tf
    where = {}
    for mname in modules:
        mod = tf
        for part in mname.split(".")[1:]:
            mod = getattr(mod, part, None) if mod is not None else None
        if mod is None:
            continue
        for attr in dir(mod):
            if attr.startswith("_"):
                continue
            try:
                obj = getattr(mod, attr)
            except Exception:  # noqa: BLE001 - lazy attributes
                continue
            if callable(obj) and not isinstance(obj, type):
                where.setdefault(id(obj), []).append((mod, attr))
    return where


def tf_locations(dotted, where):
    """(function, [(owner, attr), ...]) of a dotted TF name and all its aliases; (None, []) if it does not exist."""
    r = tf_resolve(dotted)
    if r is None:
        return None, []
    owner, attr, fn = r
    return fn, [(owner, attr)] + [loc for loc in where.get(id(fn), []) if loc != (owner, attr)]


def tf_is_eager_tensor(v):
    return hasattr(v, "numpy") and hasattr(v, "dtype") and hasattr(v, "shape")


def tf_floating(v):
    return bool(getattr(getattr(v, "dtype", None), "is_floating", False))


def tf_finite(v):
    """True/False for eager float values, None when it cannot be known (symbolic tensors, non-floats)."""
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, np.ndarray):
        return bool(np.all(np.isfinite(v))) if v.dtype.kind == "f" else None
    if tf_is_eager_tensor(v) and tf_floating(v):
        try:
            return bool(np.all(np.isfinite(v.numpy())))
        except Exception:  # noqa: BLE001 - graph tensors
            return None
    return None


def tf_probe_slots(args, kwargs):
    """Where the float tensors of a call are: [("a", index) | ("k", name)]; None when any argument is a variable
    (read inside a custom gradient, a variable would need its own gradient plumbing) or no float tensor is there."""
    import tensorflow as tf
    slots = []
    for where, items in (("a", enumerate(args)), ("k", kwargs.items())):
        for key, v in items:
            if isinstance(v, tf.Variable) or (hasattr(v, "_value") and hasattr(v, "assign")):
                return None
            if tf.is_tensor(v) and tf_floating(v) and tf_is_eager_tensor(v):
                slots.append((where, key))
    return slots or None


def tf_probed_call(orig, args, kwargs, slots, on_bad):
    """``orig(*args, **kwargs)`` under a custom gradient that computes the op's own input gradient: ``on_bad(kind)``
    when a finite incoming gradient becomes NaN/Inf there (sqrt at 0, acos at +-1, ...)."""
    import tensorflow as tf

    def call_with(values):
        a, kw = list(args), dict(kwargs)
        for (w, k), v in zip(slots, values):
            if w == "a":
                a[k] = v
            else:
                kw[k] = v
        return orig(*a, **kw)

    @tf.custom_gradient
    def op(*values):
        # persistent: the program's backward and the search's own gradient may both pass through this op
        with tf.GradientTape(persistent=True) as inner:
            inner.watch(values)
            y = call_with(values)

        def grad(dy):
            gs = inner.gradient(y, list(values), output_gradients=dy)
            if tf_finite(dy) is True:
                for g in gs:
                    if g is not None and tf_finite(g) is False:
                        on_bad("nan" if bool(np.any(np.isnan(g.numpy()))) else "inf")
                        break
            return gs

        return y, grad

    return op(*[args[k] if w == "a" else kwargs[k] for w, k in slots])


def reset_keras_seed():
    """Keras keeps a process-wide SeedGenerator for unseeded keras.random calls: recreate it from the new seed."""
    try:
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    except Exception:  # noqa: BLE001 - another keras layout: unseeded keras.random calls then vary between runs
        pass


COMMON = (program_seed, install_seeding, user_frame)
TORCH = (torch_public_names, torch_name_of, is_numpy_data, torch_tensors, torch_finite_inputs, torch_backward_probe)
TF = (tf_resolve, tf_aliases, tf_locations, tf_is_eager_tensor, tf_floating, tf_finite, tf_probe_slots,
      tf_probed_call, reset_keras_seed)
