"""Running a TensorFlow / Keras program under interception, without touching its code.

For the duration of one run the table's ``tf.math`` / ``tf.nn`` functions (under every public alias: ``tf.exp`` is
``tf.math.exp``), the ``tf.Tensor`` operators and the ``tf.random`` generators (Keras 3 initializers reach
``tf.random.stateless_*``) are replaced by wrappers; everything is restored afterwards. ``tf.function`` bodies run
eagerly during the run (``tf.config.run_functions_eagerly``), so values can be checked.

The run happens inside a persistent ``tf.GradientTape``: the random draws of a differentiable run are watched, the
target site's distance is kept, and its gradient is taken after the run; weights (Keras/TF variables, whose
initial values are draws the tape cannot follow through ``assign``) are matched to their draw by shape and value.

Events are detected at the intercepted (table) operations only. Each table call with plain float tensor arguments
runs under a ``tf.custom_gradient`` probe that computes the op's own gradient and records a backward event when a
finite upstream gradient becomes NaN/Inf there (sqrt at 0, acos at +-1, ...).
"""
from __future__ import annotations

import contextlib
import math
import sys
import time

import numpy as np

import dlci.nan.table as T
from dlci.models.program import Program
from dlci.nan.core import (NORMAL_SIGMAS, Event, External, RunConfig, RunRecord, RunState, Stop,
                           inside_optimizer)
from dlci.nan.standalone import (TF_MODULES, install_seeding, reset_keras_seed, tf_aliases, tf_finite, tf_floating,
                                 tf_is_eager_tensor, tf_locations, tf_probe_slots, tf_probed_call)

# generator name -> (args, kwargs, drawn array, is_float) -> (kind, low, high, scale)


def _kw(args, kwargs, i, name, default=None):
    return kwargs[name] if name in kwargs else (args[i] if i < len(args) else default)


def _num(v, default):
    try:
        return float(v) if v is not None else default
    except (TypeError, ValueError):
        return default


def _uniform(args, kwargs, o, floating, lo_i, hi_i):
    if not floating:
        return ("int", 0.0, 0.0, 1.0)
    a = _num(_kw(args, kwargs, lo_i, "minval"), 0.0)
    b = _num(_kw(args, kwargs, hi_i, "maxval"), 1.0)
    return ("real", a, float(np.nextafter(np.float32(b), np.float32(a))), (b - a) / 2 or 1.0)


def _normal(args, kwargs, o, floating, m_i, s_i, sigmas=NORMAL_SIGMAS):
    if not floating:
        return ("int", 0.0, 0.0, 1.0)
    m = _num(_kw(args, kwargs, m_i, "mean"), 0.0)
    s = _num(_kw(args, kwargs, s_i, "stddev"), 1.0)
    return ("real", m - sigmas * s, m + sigmas * s, s)


GENERATORS = {
    "tf.random.uniform": lambda a, k, o, f: _uniform(a, k, o, f, 1, 2),
    "tf.random.normal": lambda a, k, o, f: _normal(a, k, o, f, 1, 2),
    "tf.random.truncated_normal": lambda a, k, o, f: _normal(a, k, o, f, 1, 2, sigmas=2.0),
    "tf.random.stateless_uniform": lambda a, k, o, f: _uniform(a, k, o, f, 2, 3),
    "tf.random.stateless_normal": lambda a, k, o, f: _normal(a, k, o, f, 2, 3),
    "tf.random.stateless_truncated_normal": lambda a, k, o, f: _normal(a, k, o, f, 2, 3, sigmas=2.0),
}


_PLAN = None


def _plan(tab: T.Table):
    """[(display name, original, [(owner, attr), ...], is_generator)], built once per process."""
    global _PLAN
    if _PLAN is not None:
        return _PLAN
    where = tf_aliases(TF_MODULES)
    plan, done = [], set()
    for name, is_gen in [(n, False) for n in tab.tf_names()] + [(n, True) for n in GENERATORS]:
        fn, locs = tf_locations(name, where)
        if fn is None or id(fn) in done:
            continue
        done.add(id(fn))
        plan.append((name, fn, locs, is_gen))
    _PLAN = plan
    return plan


_ACTIVE = None  # the TFRun in progress


def _leaves(x, out, depth=0):
    if isinstance(x, (list, tuple)) and depth < 2:
        for v in x:
            _leaves(v, out, depth + 1)
    else:
        out.append(x)
    return out


class TFAdapter:
    def __init__(self, dtype=None):
        import tensorflow as tf
        self.tf = tf
        self.dtype = dtype

    def bind(self, x):
        return TFAdapter(x.dtype)

    def _finfo(self):
        try:
            return np.finfo(self.dtype.as_numpy_dtype)
        except Exception:  # noqa: BLE001
            return np.finfo(np.float32)

    def log_max(self):
        return math.log(float(self._finfo().max))

    def log_tiny(self):
        fi = self._finfo()
        return math.log(float(fi.smallest_subnormal))

    def is_tensor(self, x):
        return self.tf.is_tensor(x) or isinstance(x, self.tf.Variable)

    def is_float(self, x):
        return tf_floating(x)

    def ndim(self, x):
        return len(x.shape)

    def f64(self, x):
        return self.tf.cast(x, self.tf.float64)

    def abs(self, x):
        return self.tf.abs(x)

    def minimum(self, a, b):
        return self.tf.minimum(a, b)

    def where(self, c, a, b):
        return self.tf.where(c, a, b)

    def round(self, x):
        return self.tf.stop_gradient(self.tf.round(x))

    def log(self, x):
        return self.tf.math.log(x)

    def amin(self, x):
        return self.tf.reduce_min(x)

    def amax(self, x):
        return self.tf.reduce_max(x)

    def amax_dim(self, x, dim):
        return self.tf.reduce_max(x, axis=dim)

    def amin_dim(self, x, dim):
        return self.tf.reduce_min(x, axis=dim)

    def var_dims(self, x, dims):
        return self.tf.math.reduce_variance(x, axis=dims)

    def norm_dims(self, name, x, args, kwargs):
        return None


class TFRun(RunState):
    def __init__(self, program: Program, cfg: RunConfig, tab: T.Table):
        import tensorflow as tf
        super().__init__(program, cfg, tab, TFAdapter())
        self.tf = tf
        self.depth = 0
        self.tape = None
        self.data_handles: dict[int, object] = {}
        self.var_ext: dict = {}  # variable reference -> the external its initial value came from
        self.best_d = None

    def call(self, name, orig, args, kwargs):
        if self.rec.event is not None:
            raise Stop()  # a backward event was recorded: nothing later can be "first"
        hit = self.table.tf(name)
        eager = self.tf.executing_eagerly()
        slots = tf_probe_slots(args, kwargs) if hit is not None and eager else None
        out = self._probed(name, hit, orig, args, kwargs, slots) if slots else orig(*args, **kwargs)
        if hit is not None and self.tf.executing_eagerly():
            self._measure(name, hit, args, kwargs)
        outs = [v for v in _leaves(out, []) if tf_is_eager_tensor(v)]
        bad = None
        for v in outs:
            fin = tf_finite(v)
            if fin is False:
                bad = "nan" if bool(np.any(np.isnan(v.numpy()))) else "inf"
                break
        if bad is None:
            return out
        ins = _leaves(list(args) + list(kwargs.values()), [])
        if any(tf_finite(v) is False for v in ins):
            return out
        file, line, code = self.site()
        self.rec.event = Event(op=name, file=file, line=line, code=code, kind=bad, phase="forward",
                               entry=hit[0]["name"] if hit else None)
        raise Stop()

    # -- backward probe: the op's own input gradient, finite upstream gradient -------------------------------
    def _probed(self, name, hit, orig, args, kwargs, slots):
        on_bad = self.backward_event(name, hit[0]["name"], *self.site())
        return tf_probed_call(orig, args, kwargs, slots, on_bad)

    def _measure(self, name, hit, args, kwargs):
        entry, pos = hit
        if inside_optimizer(sys._getframe(1), self.path):
            return  # an optimizer's own eps-guarded arithmetic: not a model operation
        file, line, code = self.site()
        key = (name, file, line)
        want = self.diff and self.cfg.target == key
        if not (self.cfg.survey or want):
            return
        tf = self.tf
        try:
            m = T.call_distance(entry, name, args, kwargs, pos, self.adapter, "tf")
            if m is None:
                return
            flat = tf.reshape(m, [-1])
            n = int(flat.shape[0])
            if n == 0:
                return
            dmin = float(tf.reduce_min(flat).numpy())
        except Exception:  # noqa: BLE001 - an argument pattern the distance does not cover
            return
        if self.cfg.survey:
            self.survey(key, name, entry, file, line, code, dmin)
        if want:
            focus = self.cfg.focus
            idx = focus if focus is not None and focus < n else int(tf.argmin(flat).numpy())
            d = flat[idx]
            dv = float(d.numpy())
            if math.isfinite(dv) and dv < self.best:
                self.best, self.best_d = dv, d
                self.rec.target_d, self.rec.focus = dv, idx

    def draw(self, name, gen, orig, args, kwargs):
        tf = self.tf
        if self.rec.event is not None:
            raise Stop()
        out = orig(*args, **kwargs)
        if not tf_is_eager_tensor(out) or not tf.executing_eagerly():
            return out
        k = len(self.rec.externals)
        file, line, _ = self.site()
        arr = out.numpy().copy()
        floating = tf_floating(out)
        kind, low, high, scale = gen(args, kwargs, arr, floating)
        ext = External(index=k, gen=name, file=file, line=line, shape=tuple(arr.shape), dtype=str(arr.dtype),
                       orig=arr, kind=kind, low=low, high=high, scale=float(scale) if scale else 1.0)
        self.rec.externals.append(ext)
        sub = self.cfg.subst.get(k)
        if sub is not None and tuple(sub.shape) == tuple(arr.shape):
            out = tf.constant(np.asarray(sub).astype(arr.dtype), dtype=out.dtype)
        if self.diff and self.cfg.draw_grads and floating and kind == "real" and self.tape is not None:
            self.tape.watch(out)
            self.data_handles[k] = out
            ext.differentiable = True
        return out

    def _current(self, e: External) -> np.ndarray:
        return np.asarray(self.cfg.subst.get(e.index, e.orig))

    def created(self, next_creator, **kwargs):
        """Variable creation (tf.variable_creator_scope): a variable whose initial value is a draw of this run is
        that draw's weight, however far training moves it before the gradients are taken."""
        v = next_creator(**kwargs)
        try:
            val = np.asarray(v.numpy())
        except Exception:  # noqa: BLE001 - a variable without an eager value
            return v
        for e in reversed(self.rec.externals):
            if e.kind == "real" and tuple(val.shape) == e.shape and e.index not in self.var_ext.values():
                if np.array_equal(val, self._current(e).astype(val.dtype)):
                    self.var_ext[v.ref()] = e.index
                    break
        return v

    def _match(self, v, taken: set) -> int | None:
        """A variable made outside the run's creator scope: the draw nearest to its value now, if near enough."""
        try:
            val = v.numpy().astype(np.float64)
        except Exception:  # noqa: BLE001
            return None
        best = None
        for e in self.rec.externals:
            if e.index in taken or e.kind != "real" or tuple(val.shape) != e.shape:
                continue
            cur = self._current(e).astype(np.float64)
            err = float(np.max(np.abs(val - cur))) if cur.size else 0.0
            if err <= 0.05 * e.scale and (best is None or err < best[0]):
                best = (err, e.index)
        return None if best is None else best[1]

    def gradients(self):
        """After the run: gradients of the target's best distance for the watched draws and the matched weights."""
        if self.best_d is None or self.tape is None:
            return
        # weights first: a draw that initialised a variable is followed through the variable (assign cuts the tape)
        sources, keys, taken = [], [], set()
        for v in self.tape.watched_variables():
            k = self.var_ext.get(v.ref())
            if k is None or k in taken:  # a variable made before the run: matched by its value now
                k = self._match(v, taken)
            if k is not None:
                e = self.rec.externals[k]
                taken.add(k)
                e.differentiable = e.iterative = True
                sources.append(v)
                keys.append(k)
        for k, t in self.data_handles.items():
            if k not in taken:
                sources.append(t)
                keys.append(k)
        if not sources:
            return
        self.own_grad = True
        try:
            grads = self.tape.gradient(self.best_d, sources)
        except Exception:  # noqa: BLE001 - a graph the tape cannot differentiate: no gradient this run
            return
        finally:
            self.own_grad = False
        out = {}
        for k, g in zip(keys, grads):
            if g is None:
                continue
            if hasattr(g, "values") and hasattr(g, "indices"):  # IndexedSlices
                g = self.tf.convert_to_tensor(g)
            out[k] = np.asarray(g.numpy(), dtype=np.float64)
        self.rec.grads = out


def _wrapper(name, orig, is_gen):
    gen = GENERATORS.get(name) if is_gen else None

    def wrapped(*args, **kwargs):
        st = _ACTIVE
        if st is None or st.depth:
            return orig(*args, **kwargs)
        st.depth += 1
        try:
            if gen is not None:
                return st.draw(name, gen, orig, args, kwargs)
            return st.call(name, orig, args, kwargs)
        finally:
            st.depth -= 1

    wrapped.__name__ = getattr(orig, "__name__", name.rsplit(".", 1)[-1])
    wrapped.__doc__ = getattr(orig, "__doc__", None)
    wrapped.__wrapped__ = orig
    return wrapped


@contextlib.contextmanager
def _patched(tab: T.Table, run_seed: int):
    import tensorflow as tf
    saved = []

    def patch(owner, attr, value):
        saved.append((owner, attr, getattr(owner, attr)))
        setattr(owner, attr, value)

    for name, fn, locs, is_gen in _plan(tab):
        w = _wrapper(name, fn, is_gen)
        for owner, attr in locs:
            patch(owner, attr, w)
    seed_all = install_seeding(run_seed, patch, tf.random.set_seed, [(tf.random, "set_seed")], after=reset_keras_seed)
    try:
        import keras
        patch(keras.utils, "set_random_seed", seed_all)
    except Exception:  # noqa: BLE001 - keras absent
        pass
    eager_was = tf.config.functions_run_eagerly()
    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(eager_was)
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


def run(program: Program, cfg: RunConfig, tab: T.Table | None = None) -> RunRecord:
    global _ACTIVE
    import tensorflow as tf
    tab = tab or T.table()
    state = TFRun(program, cfg, tab)
    t0 = time.monotonic()
    with _patched(tab, cfg.run_seed):
        _ACTIVE = state
        tape = tf.GradientTape(persistent=True) if cfg.differentiable else None
        state.tape = tape
        try:
            with tf.variable_creator_scope(state.created):
                state.execute(tape if tape is not None else contextlib.nullcontext())
        finally:
            _ACTIVE = None
        if state.rec.event is None and tape is not None:
            state.gradients()
    state.rec.seconds = time.monotonic() - t0
    return state.rec
