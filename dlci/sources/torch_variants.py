"""``torch_variants``: OpInfo calls re-spelled the ways user code writes them, which converters read differently.

An FX graph keeps a call as it was written: ``F.conv_transpose2d(x, w, None, 2)`` and ``F.conv_transpose2d(x, w,
stride=2)`` become nodes whose ``args``/``kwargs`` differ, and a converter that reads ``node.args[3]`` or
``node.kwargs["stride"]`` only sees one of them. OpInfo samples pass most settings by keyword; per ``torch_fn``
instance of ``opinfo``, the kinds:

- ``keywords``: every argument after the first passed by name (where the function accepts it by name);
- ``positional``: keyword arguments passed by position, as far as the parameter order allows;
- ``defaults_omitted``: keyword arguments whose value is the parameter's default left out;
- ``defaults_explicit``: one parameter the sample leaves out passed by name with its default (``None`` where the
  signature does not say: optional arguments of builtins), which can select another overload
  (``div(a, b, rounding_mode=None)`` is ``div.Tensor_mode``, not ``div.Tensor``);
- ``dynamic_batch`` / ``dynamic_dims``: the same call exported with dynamic dims (``torch.export`` ``Dim.AUTO`` on
  the leading dim / every dim > 1 of the float inputs): the exported program carries SymInts, which translators
  convert on paths of their own (other forms run it as the static call);
- ``scalar_operand``: a rank-0 tensor argument after the first passed as a Python number, which selects another
  overload (``pow.Tensor_Scalar``, ``add.Scalar``…) and another type promotion: the number as a float with the first
  tensor cast to int64 (an integer tensor with a float scalar, the mixed case), as it is, as an int with an int64
  tensor, and as an int with a float16 tensor;
- ``dtype``: the float32 inputs cast to bfloat16 / float16 (dtype tables and casts in converters), kept where eager
  PyTorch runs the op in that dtype; compared with the fp64 reference at that dtype's tolerance.

Each variant must compute what its base instance computes (the eager reference, compared in-process): one that does
not, or that the function rejects, is dropped and counted.
"""
from __future__ import annotations

import copy
import warnings
from typing import Iterator

import numpy as np

from dlci.instance import Instance, Origin
from dlci.sources import register
from dlci.sources.variant_base import VariantSource
from dlci.sources._common import dist_version

KINDS = ("keywords", "positional", "defaults_omitted", "defaults_explicit", "scalar_operand", "dynamic_batch",
         "dynamic_dims", "dtype")
LOW_PRECISION = ("bfloat16", "float16")  # the float32 inputs cast to these (where eager runs the op in them)


def _params(fn_path: str, args: list | None = None) -> list[dict] | None:
    from dlci.reduce._introspect import torch_fn_params
    try:
        params = torch_fn_params(fn_path, args)
    except Exception:
        return None
    if not params or any(p.get("var") for p in params):
        return None  # *args: no names to move arguments to
    return params


def _defaults(fn_path: str) -> dict:
    """Parameter defaults from the Python signature (none for builtins that have no signature)."""
    import inspect
    from dlci.instance.recipe import try_resolve
    try:
        sig = inspect.signature(try_resolve(fn_path))
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in sig.parameters.values() if p.default is not p.empty}


def _plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, str)) or (
        isinstance(v, (list, tuple)) and all(isinstance(x, (bool, int, float)) for x in v))


def candidates(inst: Instance) -> Iterator[tuple[str, str, dict]]:
    """(kind, detail, call) re-spellings of one torch_fn instance, before validation."""
    call = inst.call
    params = _params(call["fn"], list(call.get("args", [])))
    if params is None:
        return
    names = [p["name"] for p in params]
    args, kwargs = list(call.get("args", [])), dict(call.get("kwargs", {}))
    if len(args) > len(params):
        return
    movable = [i for i in range(1, len(args)) if params[i]["keyword"] and params[i]["name"] not in kwargs]
    if movable:
        first = movable[0]
        if all(i in movable for i in range(first, len(args))):
            new_args = args[:first]
            new_kwargs = {**{params[i]["name"]: args[i] for i in range(first, len(args))}, **kwargs}
            yield ("keywords", f"{', '.join(params[i]['name'] for i in range(first, len(args)))} by name",
                   {**call, "args": new_args, "kwargs": new_kwargs})
    moved = []
    new_args, new_kwargs = list(args), dict(kwargs)
    for p in params[len(args):]:
        if p["name"] not in new_kwargs or p.get("kwonly"):
            break
        new_args.append(new_kwargs.pop(p["name"]))
        moved.append(p["name"])
    if moved:
        yield ("positional", f"{', '.join(moved)} by position", {**call, "args": new_args, "kwargs": new_kwargs})
    floating = [t for t in inst.inputs if str(t.dtype).startswith(("float", "bfloat"))]
    if any(t.shape and t.shape[0] > 1 for t in floating):
        yield ("dynamic_batch", "leading dim of the float inputs dynamic", {**call, "dynamic": "batch"})
    if any(sum(d > 1 for d in t.shape) > 1 for t in floating):
        yield ("dynamic_dims", "every dim > 1 of the float inputs dynamic", {**call, "dynamic": "all"})
    defaults = _defaults(call["fn"])
    same = [k for k, v in kwargs.items() if k in defaults and _plain(v) and _plain(defaults[k])
            and v == defaults[k] and k in names]
    if same:
        yield ("defaults_omitted", f"{', '.join(same)} left to the default",
               {**call, "kwargs": {k: v for k, v in kwargs.items() if k not in same}})
    for p in params[len(args):]:
        name = p["name"]
        if not p["has_default"] or not p["keyword"] or name in kwargs or name == "out" or name.startswith("_"):
            continue
        value = defaults.get(name)
        if _plain(value):
            yield ("defaults_explicit", f"{name}={value!r} passed by name", {**call, "kwargs": {**kwargs, name: value}})


# (detail, cast of the first tensor or None, the number's type): the mixed-category promotion first, where
# converters that type a Python scalar on their own go wrong
SCALAR_FORMS = (("an int64 tensor with a float scalar", "int64", float), ("a float scalar", None, float),
                ("an int64 tensor with an int scalar", "int64", int),
                ("a float16 tensor with an int scalar", "float16", int))


def _scalar_operands(inst: Instance) -> Iterator[tuple[str, dict, int, float | int, str | None]]:
    """(detail, call, input position dropped, the number, cast of the first input) for each rank-0 float tensor
    argument after the first one, in each of SCALAR_FORMS."""
    call = inst.call
    args = list(call.get("args", []))
    first = args[0].get("$t") if args and isinstance(args[0], dict) else None
    if first is None or inst.inputs[first].dtype != "float32":
        return
    arrays = inst.input_arrays()
    for pos, arg in enumerate(args[1:], start=1):
        j = arg.get("$t") if isinstance(arg, dict) else None
        if j is None or j == first or inst.inputs[j].shape or inst.inputs[j].dtype != "float32":
            continue
        value = float(arrays[j])
        for detail, cast, number in SCALAR_FORMS:
            scalar = number(round(value)) if number is int else value
            new_args = [_renumber(a, j) for a in args]
            new_args[pos] = scalar
            yield (f"argument {pos} as a Python {number.__name__} ({scalar!r}), {detail}",
                   {**call, "args": new_args, "kwargs": _renumber(dict(call.get("kwargs", {})), j)}, j, cast)


def _renumber(value, dropped: int):
    """An encoded argument with tensor slots after ``dropped`` moved down by one."""
    if isinstance(value, dict):
        if "$t" in value and len(value) == 1:
            return {"$t": value["$t"] - (value["$t"] > dropped)}
        return {k: _renumber(v, dropped) for k, v in value.items()}
    if isinstance(value, list):
        return [_renumber(v, dropped) for v in value]
    return value


def _without_input(inst: Instance, dropped: int, cast: str | None, first: int) -> tuple[dict, list]:
    """Arrays and specs with input ``dropped`` gone and input ``first`` cast (int64 values rounded)."""
    from dlci.instance import TensorSpec
    kept = [(i, a) for i, a in enumerate(inst.input_arrays()) if i != dropped]
    arrays = {k: v for k, v in inst.arrays.items() if not k.startswith("in:")}
    inputs = []
    for n, (i, a) in enumerate(kept):
        if i == first and cast:
            a = np.round(a).astype(cast) if cast.startswith("int") else a.astype(cast)
        arrays[f"in:{n}"] = a
        inputs.append(TensorSpec.of(a))
    return arrays, inputs


def _cast_inputs(inst: Instance, dtype: str) -> tuple[dict, list]:
    """The instance's float32 inputs cast to ``dtype`` (ml_dtypes for bfloat16); other inputs as they are."""
    from dlci.instance import TensorSpec
    target = np.dtype(dtype) if dtype != "bfloat16" else __import__("ml_dtypes").bfloat16
    arrays, inputs = dict(inst.arrays), []
    for i, a in enumerate(inst.input_arrays()):
        if a.dtype == np.float32:
            a = a.astype(target)
            arrays[f"in:{i}"] = a
        inputs.append(TensorSpec.of(a))
    return arrays, inputs


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype
        and (x.dtype.kind not in "biufc" or np.allclose(x, y, rtol=1e-6, atol=1e-6, equal_nan=True))
        for x, y in zip(a, b))


@register
class TorchVariantSource(VariantSource):
    name = "torch_variants"
    framework = "torch"
    description = "opinfo calls with arguments by name, by position, and defaults left out (same eager result)"
    default_limit_per_op = None
    bases = ("opinfo",)
    kinds = KINDS

    def library_versions(self) -> dict[str, str]:
        return {"torch": dist_version("torch")}

    def accepts(self, inst: Instance) -> bool:
        return inst.call.get("kind") == "torch_fn"

    def candidates(self, inst: Instance):
        for kind, detail, call in candidates(inst):
            yield kind, (detail, call, None)
        for detail, call, dropped, cast in _scalar_operands(inst):
            yield "scalar_operand", (detail, call, ("scalar", dropped, cast))
        if any(t.dtype == "float32" for t in inst.inputs):
            for dtype in LOW_PRECISION:
                yield "dtype", (f"float32 inputs as {dtype}", inst.call, dtype)

    def build(self, inst: Instance, kind: str, payload) -> Instance:
        from dlci.models.references import reference
        detail, call, cast = payload
        arrays, inputs = dict(inst.arrays), list(inst.inputs)
        if isinstance(cast, tuple):  # scalar_operand: one input became a number, the first may change dtype
            _, dropped, first_cast = cast
            arrays, inputs = _without_input(inst, dropped, first_cast, inst.call["args"][0]["$t"])
            cast = first_cast
        elif cast:
            arrays, inputs = _cast_inputs(inst, cast)
        variant = Instance(op=inst.op, framework="torch", call=copy.deepcopy(call), inputs=inputs,
                           params=dict(inst.params), seed=inst.seed, arrays=arrays,
                           origin=Origin("torch_variants", f"{inst.origin.test} [{kind}: {detail}]",
                                         inst.origin.library))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = reference(variant)[0]
                same = True if cast else _same(got, reference(inst)[0])
        except Exception as e:
            raise ValueError(f"{kind}:rejected") from e
        if not same:
            raise ValueError(f"{kind}:changed-outputs")
        if cast and got and all(g.dtype.kind == "f" and g.size and not np.isfinite(g).any() for g in got):
            raise ValueError(f"{kind}:no-finite-output")
        return variant
