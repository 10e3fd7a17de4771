"""Running a PyTorch program under interception (``torch.overrides.TorchFunctionMode``), without touching its code.

One run of the program:
- every random draw (``torch.rand*``, ``Tensor.uniform_``/``normal_``..., ``torch.nn.init.*``) is an *external*:
  recorded, optionally replaced by a given value (the generator is still called so the random stream stays the
  same), and in a differentiable run returned as a tensor whose gradient the search can ask for;
- every call of a table operation has its operand's distance to the invalid set measured (and, at the target call
  site, differentiated with respect to the externals);
- every intercepted call is checked: finite inputs and a NaN/Inf output end the run with an :class:`Event`; the
  table operations also get a backward probe (finite incoming gradient, NaN/Inf gradient for their inputs).

Only the outermost call is seen (the mode is off inside its own handler): ``F.log_softmax`` is one call, not the
aten ops it is made of, and the reported line is the innermost frame in the user's file.
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
from dlci.nan.standalone import (install_seeding, is_numpy_data, torch_backward_probe, torch_finite_inputs,
                                 torch_name_of, torch_public_names, torch_tensors)

_PUBLIC: dict[int, str] | None = None


def public_names() -> dict[int, str]:
    """id(function object) -> public dotted name, over torch's user-facing namespaces (first name wins; cached)."""
    global _PUBLIC
    if _PUBLIC is None:
        _PUBLIC = torch_public_names()
    return _PUBLIC


def name_of(func) -> str:
    return torch_name_of(func, public_names())


# -- random generators: name -> how to read the legal range of a draw ------------------------------------------

def _f(v, default):
    try:
        return float(v) if v is not None else default
    except (TypeError, ValueError):
        return default  # tensor-valued parameters: the empirical range decides


def _arg(args, kwargs, i, kw, default=None):
    return kwargs[kw] if kw in kwargs else (args[i] if i < len(args) else default)


def _uniform(a, b):
    b_in = np.nextafter(np.float32(b), np.float32(a)) if np.isfinite(b) else b  # [a, b): b itself is not drawn
    return ("real", float(a), float(b_in), (float(b) - float(a)) / 2 or 1.0)


def _normal(mean, std, orig):
    if mean is None:
        mean = float(orig.mean()) if orig.size else 0.0
    if std is None or std <= 0:
        std = float(orig.std()) if orig.size > 1 and orig.std() > 0 else 1.0
    return ("real", mean - NORMAL_SIGMAS * std, mean + NORMAL_SIGMAS * std, std)


def _empirical_uniform(orig):
    m = float(np.abs(orig).max()) if orig.size else 1.0
    return ("real", -m, m, m or 1.0)


def _positive(orig, scale=None):
    s = scale or (float(orig.mean()) if orig.size and orig.mean() > 0 else 1.0)
    return ("real", 0.0, NORMAL_SIGMAS * s, s)


GENERATORS = {
    # out-of-place draws: (args, kwargs, drawn array) -> (kind, low, high, scale)
    "torch.rand": lambda a, k, o: _uniform(0.0, 1.0),
    "torch.rand_like": lambda a, k, o: _uniform(0.0, 1.0),
    "torch.randn": lambda a, k, o: _normal(0.0, 1.0, o),
    "torch.randn_like": lambda a, k, o: _normal(0.0, 1.0, o),
    "torch.normal": lambda a, k, o: _normal(_f(_arg(a, k, 0, "mean"), None), _f(_arg(a, k, 1, "std"), None), o),
    "torch.randint": lambda a, k, o: ("int", float(o.min()) if o.size else 0, float(o.max()) if o.size else 0, 1.0),
    "torch.randint_like": lambda a, k, o: ("int", 0.0, 0.0, 1.0),
    "torch.randperm": lambda a, k, o: ("int", 0.0, 0.0, 1.0),
    "torch.bernoulli": lambda a, k, o: ("int", 0.0, 1.0, 1.0),
    "torch.multinomial": lambda a, k, o: ("int", 0.0, 0.0, 1.0),
    "torch.poisson": lambda a, k, o: ("int", 0.0, 0.0, 1.0),
    # in-place draws into an existing tensor (weights)
    "torch.Tensor.uniform_": lambda a, k, o: _uniform(_f(_arg(a, k, 1, "from"), 0.0), _f(_arg(a, k, 2, "to"), 1.0)),
    "torch.Tensor.normal_": lambda a, k, o: _normal(_f(_arg(a, k, 1, "mean"), 0.0), _f(_arg(a, k, 2, "std"), 1.0), o),
    "torch.Tensor.random_": lambda a, k, o: ("int", 0.0, 0.0, 1.0),
    "torch.Tensor.bernoulli_": lambda a, k, o: ("int", 0.0, 1.0, 1.0),
    "torch.Tensor.geometric_": lambda a, k, o: ("int", 0.0, 0.0, 1.0),
    "torch.Tensor.exponential_": lambda a, k, o: _positive(o, 1.0 / _f(_arg(a, k, 1, "lambd"), 1.0)),
    "torch.Tensor.log_normal_": lambda a, k, o: _positive(o),
    "torch.Tensor.cauchy_": lambda a, k, o: _normal(_f(_arg(a, k, 1, "median"), 0.0), _f(_arg(a, k, 2, "sigma"), 1.0),
                                                    o),
    "torch.nn.init.uniform_": lambda a, k, o: _uniform(_f(_arg(a, k, 1, "a"), 0.0), _f(_arg(a, k, 2, "b"), 1.0)),
    "torch.nn.init.normal_": lambda a, k, o: _normal(_f(_arg(a, k, 1, "mean"), 0.0), _f(_arg(a, k, 2, "std"), 1.0), o),
    "torch.nn.init.trunc_normal_": lambda a, k, o: ("real", _f(_arg(a, k, 3, "a"), -2.0), _f(_arg(a, k, 4, "b"), 2.0),
                                                    _f(_arg(a, k, 2, "std"), 1.0)),
    "torch.nn.init.kaiming_uniform_": lambda a, k, o: _empirical_uniform(o),
    "torch.nn.init.xavier_uniform_": lambda a, k, o: _empirical_uniform(o),
    "torch.nn.init.kaiming_normal_": lambda a, k, o: _normal(0.0, None, o),
    "torch.nn.init.xavier_normal_": lambda a, k, o: _normal(0.0, None, o),
    "torch.nn.init.orthogonal_": lambda a, k, o: _empirical_uniform(o),
    "torch.nn.init.sparse_": lambda a, k, o: _normal(0.0, None, o),
}
INPLACE_GENERATORS = {n for n in GENERATORS if n.endswith("_")}


def _data_range(a, k, o):
    m = float(o.mean()) if o.size else 0.0
    sd = float(o.std()) if o.size > 1 and o.std() > 0 else 1.0
    return ("real", m - NORMAL_SIGMAS * sd, m + NORMAL_SIGMAS * sd, sd)


# numpy data entering the program (inputs loaded or generated with numpy): externals too, when the argument is a
# float ndarray of two or more elements (constants written in the code stay constants; torch.from_numpy does not
# pass through torch function modes, so its arrays are not seen)
DATA_SOURCES = {"torch.as_tensor": _data_range, "torch.tensor": _data_range,
                "torch.asarray": _data_range}
GENERATORS.update(DATA_SOURCES)


# outputs that are not computed from their inputs (uninitialised memory) are never findings
NO_CHECK = {"torch.empty", "torch.empty_like", "torch.empty_strided", "torch.Tensor.new_empty",
            "torch.Tensor.new_empty_strided", "torch.Tensor.__setitem__", "torch.Tensor.set_",
            "torch.Tensor.resize_", "torch.Tensor.resize_as_"}


def _is_inplace(name: str, kwargs: dict) -> bool:
    short = name.rsplit(".", 1)[-1]
    return ("out" in kwargs and kwargs["out"] is not None) or (short.endswith("_") and not short.endswith("__")) \
        or (short.startswith("__i") and short.endswith("__") and short not in ("__init__", "__index__", "__int__",
                                                                               "__invert__", "__iter__"))


class TorchAdapter:
    """The array vocabulary the table's distances are written in, for torch tensors."""

    def __init__(self, dtype=None):
        self.dtype = dtype

    def bind(self, x):
        return TorchAdapter(x.dtype)

    def _finfo(self):
        import torch
        d = self.dtype if self.dtype is not None and self.dtype.is_floating_point else torch.float32
        return torch.finfo(d)

    def log_max(self):
        return math.log(self._finfo().max)

    def log_tiny(self):
        fi = self._finfo()
        return math.log(fi.smallest_normal * fi.eps)  # the smallest subnormal

    @staticmethod
    def is_tensor(x):
        import torch
        return isinstance(x, torch.Tensor)

    @staticmethod
    def is_float(x):
        return x.is_floating_point()

    @staticmethod
    def ndim(x):
        return x.dim()

    @staticmethod
    def f64(x):
        import torch
        return x.to(torch.float64)

    @staticmethod
    def abs(x):
        return x.abs()

    @staticmethod
    def minimum(a, b):
        import torch
        return torch.minimum(a, b)

    @staticmethod
    def where(c, a, b):
        import torch
        return torch.where(c, a, b)

    @staticmethod
    def round(x):
        return x.detach().round()

    @staticmethod
    def log(x):
        return x.log()

    @staticmethod
    def amin(x):
        return x.amin() if x.numel() else None

    @staticmethod
    def amax(x):
        return x.amax()

    @staticmethod
    def amax_dim(x, dim):
        return x.amax(dim=dim)

    @staticmethod
    def amin_dim(x, dim):
        return x.amin(dim=dim)

    @staticmethod
    def var_dims(x, dims):
        return x.var(dim=dims, unbiased=False)

    @staticmethod
    def norm_dims(name, x, args, kwargs):
        if name.endswith("layer_norm"):
            shape = T.arg(args, kwargs, 1, "normalized_shape")
            n = len(shape) if isinstance(shape, (list, tuple)) else 1
            return tuple(range(x.dim() - n, x.dim()))
        if name.endswith("batch_norm"):
            return tuple(d for d in range(x.dim()) if d != 1) or None
        if name.endswith("instance_norm"):
            return tuple(range(2, x.dim())) or None
        return None


_TO_NUMPY = {"torch.Tensor.numpy", "torch.Tensor.__array__"}
_BACKWARD_CALLS = {"torch.Tensor.backward", "torch.autograd.backward", "torch.autograd.grad"}


def _retaining(name, args, kwargs):
    """The program's backward call with retain_graph=True: in a differentiable run its data externals are graph
    inputs shared by every training step, and the first backward would free what the next one needs."""
    pos = 2 if name == "torch.Tensor.backward" else (3 if name == "torch.autograd.grad" else 2)
    kwargs = dict(kwargs)
    if len(args) > pos:
        args = tuple(args[:pos]) + (True,) + tuple(args[pos + 1:])
    else:
        kwargs["retain_graph"] = True
    return args, kwargs


class TorchRun(RunState):
    """State of one intercepted run."""

    def __init__(self, program: Program, cfg: RunConfig, tab: T.Table):
        import torch
        super().__init__(program, cfg, tab, TorchAdapter())
        self.torch = torch
        self.ptr_to_ext: dict[int, int] = {}
        self.handles: dict[int, dict[int, object]] = {}  # external -> {id: tensor whose gradient is the external's}
        self.own_leaf: dict[int, int] = {}  # external -> id of the leaf this run made for it

    # -- the handler --------------------------------------------------------------------------------
    def call(self, func, args, kwargs):
        torch = self.torch
        if self.rec.event is not None:
            raise Stop()  # a backward event was recorded: nothing later can be "first"
        name = name_of(func)
        gen = GENERATORS.get(name)
        if gen is not None and (name not in DATA_SOURCES or is_numpy_data(args, kwargs)):
            return self.draw(name, gen, func, args, kwargs)
        if self.diff and name in _BACKWARD_CALLS:
            args, kwargs = _retaining(name, args, kwargs)
        if self.diff and args and isinstance(args[0], torch.Tensor) and args[0].requires_grad:
            if name in _TO_NUMPY:  # a draw the run made differentiable: the program still gets its numpy array
                return func(args[0].detach(), *args[1:], **kwargs)
            if name == "torch.Tensor.requires_grad_" and not args[0].is_leaf:
                return args[0]
        hit = self.table.torch(name)
        inplace = _is_inplace(name, kwargs)
        pre_ok = torch_finite_inputs(args, kwargs) if inplace and name not in NO_CHECK else None
        if self.diff:
            self._note_handles(args)
        force = (self.diff and not inplace and not torch.is_grad_enabled()
                 and any(t.requires_grad for t in torch_tensors(list(args) + list(kwargs.values()), [])))
        probe = None
        with torch.enable_grad() if force else contextlib.nullcontext():
            if hit is not None and not inplace and torch.is_grad_enabled():
                args, kwargs, probe = self._probe_inputs(name, args, kwargs)
            out = func(*args, **kwargs)
            if probe is not None:
                probe(out)
            if hit is not None:
                self._measure(name, hit, args, kwargs)
        if name not in NO_CHECK and not name.endswith(("__get__", "__set__")):
            # (attribute reads such as p.grad only show a value some backward already produced)
            self._check(name, args, kwargs, out, inplace, pre_ok, hit)
        return out

    def _check(self, name, args, kwargs, out, inplace, pre_ok, hit):
        torch = self.torch
        outs = torch_tensors(out, [])
        if not outs and inplace and args:
            outs = torch_tensors(args[0], [])
        bad = None
        for t in outs:
            if t.is_floating_point() and t.numel():
                fin = torch.isfinite(t.detach())
                if not bool(fin.all()):
                    bad = "nan" if bool(torch.isnan(t.detach()).any()) else "inf"
                    break
        if bad is None:
            return
        ok = pre_ok if inplace else torch_finite_inputs(args, kwargs)
        if not ok:
            return
        file, line, code = self.site()
        self.rec.event = Event(op=name, file=file, line=line, code=code, kind=bad, phase="forward",
                               entry=hit[0]["name"] if hit else None)
        raise Stop()

    # -- backward probes ----------------------------------------------------------------------------
    def _probe_inputs(self, name, args, kwargs):
        entry = self.table.torch(name)
        on_bad = self.backward_event(name, entry[0]["name"] if entry else None, *self.site())
        return torch_backward_probe(args, kwargs, on_bad)

    # -- distances and gradients ----------------------------------------------------------------------
    def _measure(self, name, hit, args, kwargs):
        entry, pos = hit
        if inside_optimizer(sys._getframe(1), self.path):
            return  # an optimizer's own arithmetic (eps-guarded sqrt of the second moment...): not a model operation
        file, line, code = self.site()
        key = (name, file, line)
        want_grad = self.diff and self.cfg.target == key
        if not (self.cfg.survey or want_grad):
            return
        try:
            m = T.call_distance(entry, name, args, kwargs, pos, self.adapter, "torch")
        except Exception:  # noqa: BLE001 - an argument pattern the distance does not cover: not a candidate
            return
        if m is None or m.numel() == 0:
            return
        flat = m.reshape(-1)
        if self.cfg.survey:
            self.survey(key, name, entry, file, line, code, float(flat.detach().min()))
        if want_grad:
            focus = self.cfg.focus
            idx = focus if focus is not None and focus < flat.numel() else int(flat.detach().argmin())
            d = flat[idx]
            dv = float(d.detach())
            if math.isfinite(dv) and dv < self.best:
                self.best = dv
                self.rec.target_d, self.rec.focus = dv, idx
                self._gradients(d)

    def _gradients(self, d):
        torch = self.torch
        if not d.requires_grad:
            return
        pairs = [(k, t) for k, hs in self.handles.items() for t in hs.values() if t.requires_grad]
        if not pairs:
            return
        self.own_grad = True
        try:
            grads = torch.autograd.grad(d, [t for _, t in pairs], allow_unused=True, retain_graph=True)
        except RuntimeError:
            return
        finally:
            self.own_grad = False
        out: dict[int, np.ndarray] = {}
        for (k, _t), g in zip(pairs, grads):
            if g is None:
                continue
            a = g.detach().to(torch.float64).cpu().numpy()
            out[k] = out[k] + a if k in out else a
        self.rec.grads = out

    def _note_handles(self, args):
        if not self.ptr_to_ext:
            return
        for t in torch_tensors(list(args), []):
            if t.is_leaf and t.requires_grad:
                k = self.ptr_to_ext.get(t.data_ptr())
                if k is not None and id(t) not in self.handles.setdefault(k, {}):
                    if tuple(t.shape) == self.rec.externals[k].shape:
                        self.handles[k][id(t)] = t
                        if id(t) != self.own_leaf.get(k):
                            self.rec.externals[k].iterative = True
                            self.rec.externals[k].differentiable = True

    # -- external values ---------------------------------------------------------------------------------
    def draw(self, name, gen, func, args, kwargs):
        torch = self.torch
        k = len(self.rec.externals)
        file, line, _code = self.site()
        out = func(*args, **kwargs)  # always draw: later draws see the same random stream
        inplace = name in INPLACE_GENERATORS
        t = (args[0] if args else kwargs.get("tensor", kwargs.get("self"))) if inplace else out
        if not isinstance(t, torch.Tensor) or t.is_complex() or t.layout != torch.strided:
            return out
        orig = t.detach().cpu()
        orig = (orig.float() if orig.dtype in (torch.bfloat16, torch.float16) else orig).numpy().copy()
        kind, low, high, scale = gen(args, kwargs, orig)
        if not t.is_floating_point():
            kind = "int"
        ext = External(index=k, gen=name, file=file, line=line, shape=tuple(t.shape),
                       dtype=str(t.dtype).replace("torch.", ""), orig=orig, kind=kind, low=low, high=high,
                       scale=float(scale) if scale and math.isfinite(scale) else 1.0)
        self.rec.externals.append(ext)
        sub = self.cfg.subst.get(k)
        if sub is not None and tuple(sub.shape) == tuple(t.shape):
            with torch.no_grad():
                t.copy_(torch.as_tensor(np.asarray(sub)).to(t.dtype))
        if inplace:
            if self.diff and t.is_leaf and t.requires_grad and kind == "real":
                self.handles.setdefault(k, {})[id(t)] = t
                ext.iterative = ext.differentiable = True
            self.ptr_to_ext[t.data_ptr()] = k
            return out
        if self.diff and self.cfg.draw_grads and kind == "real" and t.is_floating_point():
            with torch.enable_grad():
                leaf = t.detach().clone().requires_grad_(True)
                ret = leaf if kwargs.get("requires_grad") else leaf.clone()
            self.handles.setdefault(k, {})[id(leaf)] = leaf
            self.own_leaf[k] = id(leaf)
            ext.differentiable = True
            self.ptr_to_ext[ret.data_ptr()] = k
            return ret
        self.ptr_to_ext[t.data_ptr()] = k
        return t


def _mode_class():
    from torch.overrides import TorchFunctionMode

    class Intercept(TorchFunctionMode):
        def __init__(self, run: TorchRun):
            super().__init__()
            self.run = run

        def __torch_function__(self, func, types, args=(), kwargs=None):
            return self.run.call(func, args, kwargs or {})

    return Intercept


_MODE = None


@contextlib.contextmanager
def _seeding(run_seed: int, differentiable: bool):
    """Seed every generator for the run and map the program's own seeding calls (restored afterwards)."""
    import torch
    saved = {}

    def patch(obj, attr, value):
        saved[(obj, attr)] = getattr(obj, attr)
        setattr(obj, attr, value)

    install_seeding(run_seed, patch, torch.random.manual_seed, [(torch, "manual_seed"), (torch.random, "manual_seed")])
    if differentiable:
        # inference_mode tensors can never join a graph: run such blocks as no_grad (the handler lifts no_grad)
        class _InferenceAsNoGrad(torch.no_grad):
            def __init__(self, mode: bool = True):
                super().__init__()

        patch(torch, "inference_mode", _InferenceAsNoGrad)
    try:
        yield
    finally:
        for (obj, attr), value in saved.items():
            setattr(obj, attr, value)


def run(program: Program, cfg: RunConfig, tab: T.Table | None = None) -> RunRecord:
    """Run the program once under interception."""
    global _MODE
    import torch
    if _MODE is None:
        _MODE = _mode_class()
    state = TorchRun(program, cfg, tab or T.table())
    t0 = time.monotonic()
    grad_was = torch.is_grad_enabled()
    with _seeding(cfg.run_seed, cfg.differentiable):
        try:
            state.execute(_MODE(state))
        finally:
            torch.set_grad_enabled(grad_was)
    state.rec.seconds = time.monotonic() - t0
    return state.rec
