"""Operator metadata behind the torch rules' applicability: OpInfo / ModuleInfo attributes, signatures and the
documentation's Shape sections, and the ``why_not`` checks built from them. Nothing here is a hand-kept operator
list; every lookup is cached. Importing this module imports no framework.

An instance's metadata comes from where it was harvested: ``Origin.test`` names the OpInfo (``op_db:NAME[VARIANT]#k``)
or ModuleInfo (``module_db:NAME#k``) it came from, and ``Instance.call`` names the callable.
"""
from __future__ import annotations

import functools
import inspect
import re
import warnings

from dlci.instance import Instance
from dlci.rules.torch.docs import param_names as documented_params

_OPINFO_TEST = re.compile(r"^op_db:(.+?)\[(.*?)\]#")
_MODULE_TEST = re.compile(r"^module_db:(\S+?)#")

# -- the databases -------------------------------------------------------------------------------------------

@functools.cache
def _module_db_index() -> dict:
    from dlci.torch_testing import module_db
    return {info.name: info for info in module_db()}


def opinfo(inst: Instance):
    """The OpInfo the instance was sampled from, or None (module instances, other sources)."""
    m = _OPINFO_TEST.match(inst.origin.test or "")
    if inst.origin.source != "opinfo" or not m:
        return None
    from dlci.torch_testing import opinfo as lookup
    return lookup(m.group(1), m.group(2))


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


@functools.cache
def param_names(obj) -> tuple[str, ...]:
    """A callable's parameter names (dlci.rules.torch.docs.param_names, cached)."""
    return tuple(documented_params(obj))


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
    from dlci.models.rebuild import torch_call
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
    from dlci.models.rebuild import torch_call
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


# -- why_not checks: each returns the reason a rule does not apply to the instance, None when it does ---------------

def all_of(*checks):
    """The first reason any of the checks gives."""
    def check(inst: Instance) -> str | None:
        for c in checks:
            reason = c(inst)
            if reason:
                return reason
        return None
    return check


def kind_is(kind: str):
    def check(inst: Instance) -> str | None:
        return None if inst.call.get("kind") == kind else f"{kind} instances only"
    return check


def derivation(check_path: str):
    """Applicability by the rule's own derivation, the same code graph B runs: ``check(case, tensors)`` of
    ``"module:function"`` on the instance; its "not applicable" reason, if any."""
    def check(inst: Instance) -> str | None:
        from dlci import models
        from dlci.rules.base import resolve_function
        from dlci.rules.runner import case_for
        from dlci.rules.torch.common import derivation_reason
        with models.quiet():
            return derivation_reason(case_for(inst), resolve_function(check_path))
    return check


def opinfo_flag(flag: str, missing_ok: bool = True):
    def check(inst: Instance) -> str | None:
        info = opinfo(inst)
        if info is None:
            return None if missing_ok else "no OpInfo for this instance"
        return None if getattr(info, flag, False) else f"OpInfo.{flag} is False"
    return check


def float_input(inst: Instance) -> str | None:
    return None if any(s.dtype.startswith("float") for s in inst.inputs) else "no floating-point input"


def first_input_tensor(inst: Instance) -> str | None:
    first = (inst.call.get("args") or [None])[0] if inst.call["kind"] == "torch_fn" else \
        (inst.call.get("forward_args") or [None])[0]
    return None if first == {"$t": 0} else "the first argument is not input 0"


def compile_checked(inst: Instance) -> str | None:
    info = opinfo(inst)
    if info is not None and getattr(info, "skip_correctness_check_compile_vs_eager", False):
        return "OpInfo.skip_correctness_check_compile_vs_eager: numerics documented to differ"
    return None


def conv_like(inst: Instance) -> str | None:
    names = set(param_names(target(inst)))
    need = {"weight", "groups"} if inst.call["kind"] == "torch_fn" else {"in_channels", "kernel_size", "groups"}
    return None if need <= names else "not a convolution (signature has no weight/groups or kernel_size/groups)"


def not_transposed(inst: Instance) -> str | None:
    return "transposed convolution" if "output_padding" in param_names(target(inst)) else None


def string_padding(inst: Instance) -> str | None:
    return None if accepts_string_padding(inst) else "padding does not take 'same' (signature/docs)"


def sparse_layout(flag: str):
    def check(inst: Instance) -> str | None:
        reason = opinfo_flag(flag, missing_ok=False)(inst) or first_input_tensor(inst)
        if reason:
            return reason
        if flag == "supports_sparse_csr" and len(inst.inputs[0].shape) < 2:
            return "CSR needs a 2-d (or batched) input"
        return None
    return check


_F32_MAX = 3.4028234663852886e38


def scale_in_range(inst: Instance) -> str | None:
    s = inst.inputs[0]
    if s.low is not None and max(abs(s.low), abs(s.high)) * 255 >= _F32_MAX:
        return "255 x overflows float32"
    return None


def selection(low: str, high: str):
    def check(inst: Instance) -> str | None:
        if "dtype" in inst.call.get("kwargs", {}):
            return "an explicit dtype argument fixes the computation dtype"
        return selection_probe(inst, low, high)
    return check


def dtypes_have(*names: str):
    def check(inst: Instance) -> str | None:
        dts = supported_dtypes(inst)
        if dts is None:
            return "no OpInfo/ModuleInfo dtypes for this instance"
        missing = [n for n in names if n not in dts]
        return f"OpInfo/ModuleInfo dtypes lack {', '.join(missing)}" if missing else None
    return check


def int64_inputs(inst: Instance) -> str | None:
    ints = [s for s in inst.inputs if s.dtype == "int64"]
    if not ints:
        return "no int64 input"
    if any(s.low is not None and (s.low < -2**31 or s.high > 2**31 - 1) for s in ints):
        return "int64 values outside the int32 range"
    return None


def f16_range(inst: Instance) -> str | None:
    floats = [s for s in inst.inputs if s.dtype == "float32"]
    if not floats:
        return "no float32 input"
    if any(s.low is not None and max(abs(s.low), abs(s.high)) > 65504 for s in floats):
        return "values beyond the float16 range"
    return None


def documented_pad(inst: Instance) -> str | None:
    return None if is_pad(inst) else "not documented as padding ('Pads tensor')"


def has_state(inst: Instance) -> str | None:
    if inst.call.get("kind") != "torch_module":
        return "torch_module instances only"
    return None if any(k.startswith("state:") for k in inst.arrays) else "module has no state"


def spatial_input(inst: Instance) -> str | None:
    ok = any(s.dtype.startswith("float") and len(s.shape) in (4, 5) for s in inst.inputs)
    return None if ok else "no 4-d/5-d floating-point input"


def derivatives_tested(inst: Instance) -> str | None:
    """The OpInfo's own derivative tests cover plain inputs: no structure-imposing gradcheck_wrapper (hermitian,
    triangular, masked inputs: derivatives only on a subspace) and no skip of its forward/backward-AD tests."""
    info = opinfo(inst)
    if info is None:
        return "no OpInfo for this instance"
    wrapper = getattr(info.gradcheck_wrapper, "__name__", "")
    if wrapper != "<lambda>":
        return f"OpInfo.gradcheck_wrapper is {wrapper}: derivatives are defined on structured inputs only"
    tests = {"test_forward_mode_AD", "test_fn_fwgrad_bwgrad", "test_fn_grad"}
    for d in list(info.skips or ()) + list(info.decorators or ()):
        if getattr(d, "cls_name", None) in ("TestFwdGradients", "TestBwdGradients") and \
                getattr(d, "test_name", None) in tests and \
                any("skip" in repr(x).lower() or "expectedFailure" in repr(x) for x in getattr(d, "decorators", ())):
            return f"OpInfo skips {d.cls_name}.{d.test_name}"
    return None
