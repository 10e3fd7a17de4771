"""Operator metadata behind the torch rules' applicability: OpInfo / ModuleInfo attributes, signatures and the
documentation's Shape sections. Nothing here is a hand-kept operator list; every lookup is cached.

An instance's metadata comes from where it was harvested: ``Origin.test`` names the OpInfo (``op_db:NAME[VARIANT]#k``)
or ModuleInfo (``module_db:NAME#k``) it came from, and ``Instance.call`` names the callable.
"""
from __future__ import annotations

import functools
import inspect
import re
import warnings

from dlci.instance import Instance

_OPINFO_TEST = re.compile(r"^op_db:(.+?)\[(.*?)\]#")
_MODULE_TEST = re.compile(r"^module_db:(\S+?)#")

# -- the databases -------------------------------------------------------------------------------------------

@functools.cache
def _op_db_index() -> dict:
    from dlci.torch_testing import op_db
    return {(op.name, op.variant_test_name or ""): op for op in op_db()}


@functools.cache
def _module_db_index() -> dict:
    from dlci.torch_testing import module_db
    return {info.name: info for info in module_db()}


def opinfo(inst: Instance):
    """The OpInfo the instance was sampled from, or None (module instances, other sources)."""
    m = _OPINFO_TEST.match(inst.origin.test or "")
    if inst.origin.source != "opinfo" or not m:
        return None
    return _op_db_index().get((m.group(1), m.group(2)))


def moduleinfo(inst: Instance):
    m = _MODULE_TEST.match(inst.origin.test or "")
    if inst.origin.source != "module_db" or not m:
        return None
    return _module_db_index().get(m.group(1))


def supported_dtypes(inst: Instance) -> frozenset[str] | None:
    """dtype names the instance's OpInfo/ModuleInfo declares on CPU (None when unknown)."""
    info = opinfo(inst) or moduleinfo(inst)
    if info is None:
        return None
    return frozenset(str(d).replace("torch.", "") for d in info.supported_dtypes("cpu"))


# -- callables and their parameters ------------------------------------------------------------------------------

@functools.cache
def resolve(path: str):
    """The callable a dotted path names (cached: applicability checks ask for the same ones over and over)."""
    from dlci.instance.recipe import resolve as import_dotted
    return import_dotted(path)


def target(inst: Instance):
    """The function (torch_fn) or module class (torch_module) the instance calls."""
    return resolve(inst.call["fn"] if inst.call["kind"] == "torch_fn" else inst.call["cls"])


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


@functools.cache
def param_names(obj) -> tuple[str, ...]:
    """A callable's parameter names: its signature, else the call line its docstring opens with (torch builtins,
    e.g. ``conv2d(input, weight, bias=None, stride=1, ...) -> Tensor``). Classes: the constructor's."""
    try:
        ps = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        if not any(p.kind is p.VAR_POSITIONAL for p in ps):
            return tuple(p.name for p in ps if p.kind is not p.VAR_KEYWORD)
    except (TypeError, ValueError):
        pass
    first = next((ln.strip() for ln in (obj.__doc__ or "").splitlines() if ln.strip()), "")
    m = re.match(r"^[\w.]+\((.*)\)", first)
    if not m:
        return ()
    names = []
    for part in _split_top(m.group(1)):
        n = re.match(r"\s*\**(\w+)", part)
        if n:
            names.append(n.group(1))
    return tuple(names)


# -- documentation ---------------------------------------------------------------------------------------------

def _doc_text(obj) -> str:
    return inspect.getdoc(obj) or ""


def accepts_string_padding(inst: Instance) -> bool:
    """Whether the callable's ``padding`` takes "same"/"valid": the constructor's annotation (``_size_2_t | str``)
    or the function's documentation of ``padding``."""
    obj = target(inst)
    if inst.call["kind"] == "torch_module":
        try:
            ann = inspect.signature(obj).parameters["padding"].annotation
        except (KeyError, TypeError, ValueError):
            return False
        return "str" in str(ann)
    m = re.search(r"^\s*padding\b(.*?)(?=^\s*\w+\s*[:(]|\Z)", _doc_text(obj), re.M | re.S)
    return bool(m and re.search(r"['\"]same['\"]", m.group(1)))


def is_pad(inst: Instance) -> bool:
    """A padding operator by its documentation ("Pads tensor." / "Pads the input tensor ...")."""
    return bool(re.match(r"^(\S+\(.*\)\s*->.*\n\s*)?Pads (the input )?tensor", _doc_text(target(inst)).strip()))


# -- homogeneity probe (image_scale) -----------------------------------------------------------------------------

_probed: dict[str, str | None] = {}


def homogeneity_probe(inst: Instance) -> str | None:
    """None when the operator, with the instance's other inputs and parameters, is positively homogeneous of
    degree 1 in its first input: f(c x) == c f(x) for c in (2, 255, 1/255) on random data of the instance's
    shape, in float64 (a property of the operator, probed away from the instance's own values, so that a bug on
    those values is not mistaken for non-homogeneity). Otherwise the reason."""
    if inst.id in _probed:
        return _probed[inst.id]
    import torch
    from dlci.instance.recipe import tensor_leaves
    from dlci.instance.recipe import torch_call
    reason = None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation chatter of the probed operators
            module, xs = torch_call(inst)
            if not xs[0].is_floating_point():
                raise _Refused("first input is not floating point")
            module = module.double()
            xs = [x.double() if x.is_floating_point() else x for x in xs]
            gen = torch.Generator().manual_seed(0)
            # several draws over several magnitudes: a one-element input meets thresholds and kinks in some draw
            draws = [torch.randn(xs[0].shape, generator=gen, dtype=torch.float64) * 10 ** (k % 5 - 2)
                     for k in range(12)]

            def f(x0):
                out = tensor_leaves(module(*([x0] + xs[1:])))
                if not out or any(not o.is_floating_point() for o in out):
                    raise _Refused("outputs are not all floating point")
                return out
            nonzero = False
            for r in draws:
                ref = f(r)
                nonzero = nonzero or any(o.numel() and bool((o[torch.isfinite(o)].abs() > 0).any()) for o in ref)
                for c in (2.0, 255.0, 1 / 255):
                    for o, e in zip(f(r * c), ref):
                        if not _scaled(o / c, e):
                            raise _Refused(f"not positively homogeneous in its first input "
                                           f"(f({c:g} x) != {c:g} f(x))")
            if not nonzero:
                raise _Refused("output is all zeros (or not finite): scaling proves nothing")
    except _Refused as e:
        reason = str(e)
    except Exception as e:  # noqa: BLE001 - a probe that cannot run decides "not applicable"
        reason = f"probe failed: {type(e).__name__}"
    if len(_probed) > 4096:
        _probed.clear()
    _probed[inst.id] = reason
    return reason


class _Refused(Exception):
    pass


def _scaled(got, ref) -> bool:
    """Same shape, same non-finite entries, finite entries equal to float64 rounding."""
    import torch
    if got.shape != ref.shape:
        return False
    fin = torch.isfinite(ref)
    if not torch.equal(fin, torch.isfinite(got)) or not torch.equal(torch.nan_to_num(got[~fin], nan=0.0),
                                                                   torch.nan_to_num(ref[~fin], nan=0.0)):
        return False
    if not bool(fin.any()):
        return True
    scale = float(ref[fin].abs().max())
    return bool(torch.allclose(got[fin], ref[fin], rtol=1e-9, atol=1e-12 * scale))


# -- selection probe (float dtype rules) -----------------------------------------------------------------------

def selection_probe(inst: Instance, low: str, high: str) -> str | None:
    """None when the operator, with the instance's non-float arguments, only selects and moves values: on random
    data of the instance's shapes (held exactly in ``low`` and ``high``), the ``high`` results rounded to ``low``
    equal the ``low`` results bit for bit, and every float output value is, up to sign, a float input value,
    0, inf or nan. Such results cannot legitimately depend on the dtype; anything computed (a rounding that may
    differ between dtypes) is refused."""
    key = f"{inst.id}|{low}|{high}"
    if key in _probed:
        return _probed[key]
    import copy
    import torch
    from dlci.instance.recipe import tensor_leaves
    from dlci.instance.recipe import torch_call
    lo_t, hi_t = getattr(torch, low), getattr(torch, high)
    reason = None
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecation chatter of the probed operators
            module, xs = torch_call(inst)
            if not any(x.is_floating_point() for x in xs):
                raise _Refused("no floating-point input")
            gen = torch.Generator().manual_seed(0)
            lo = [(torch.randn(x.shape, generator=gen, dtype=torch.float64) * 3).to(lo_t) if x.is_floating_point()
                  else x for x in xs]
            hi = [x.to(hi_t) if x.is_floating_point() else x for x in lo]
            m_lo = copy.deepcopy(module).to(lo_t)
            m_hi = copy.deepcopy(m_lo).to(hi_t)
            out_lo, out_hi = tensor_leaves(m_lo(*lo)), tensor_leaves(m_hi(*hi))
            if not out_lo or out_hi is None or len(out_lo) != len(out_hi):
                raise _Refused("outputs are not tensors")
            if not any(o.is_floating_point() for o in out_lo):
                raise _Refused("no floating-point output")
            values = torch.cat([x.abs().double().flatten() for x in lo if x.is_floating_point()] +
                               [p.abs().double().flatten() for p in list(m_lo.parameters()) + list(m_lo.buffers())
                                if p.is_floating_point()] + [torch.zeros(1, dtype=torch.float64)])
            for a, b in zip(out_lo, out_hi):
                if a.shape != b.shape or a.dtype.is_floating_point != b.dtype.is_floating_point:
                    raise _Refused("outputs differ in shape or kind between dtypes")
                if not a.is_floating_point():
                    if not torch.equal(a, b):
                        raise _Refused("integer outputs differ between dtypes on random data")
                    continue
                if not torch.equal(torch.nan_to_num(b.to(a.dtype), nan=7.0), torch.nan_to_num(a, nan=7.0)) \
                        or not bool(torch.isnan(b.to(a.dtype)).eq(torch.isnan(a)).all()):
                    raise _Refused("results differ between dtypes: computed, not selected")
                finite = a[torch.isfinite(a)].abs().double().flatten()
                if finite.numel() and not bool(torch.isin(finite, values).all()):
                    raise _Refused("outputs are computed values, not selected input values")
    except _Refused as e:
        reason = str(e)
    except Exception as e:  # noqa: BLE001
        reason = f"probe failed: {type(e).__name__}"
    if len(_probed) > 4096:
        _probed.clear()
    _probed[key] = reason
    return reason
