"""Operator plans (worker side: needs TensorFlow): a raw op's registered OpDef read into the role of every argument
(:func:`plan`), and why an op is not harvested (:func:`op_reason`).
"""
from __future__ import annotations

import collections
import functools
import re
from dataclasses import dataclass
from typing import Any

from dlci.sources.tf_ops.roles import (_CONST_ROLES, _EXCLUDED, _NON_NUMERIC, ATTR_ROLES, DATA_ROLES, INPUT_ROLES,
                                       SUPPORTED, _role)


class _Skip(Exception):
    """The operator cannot be planned: ``reason`` is the stats key (without the ``op:`` prefix)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_NODEFAULT = object()


@dataclass
class _In:
    name: str  # OpDef name
    kw: str  # tf.raw_ops keyword
    role: str  # data | <data role> | <constant role>
    fixed: str | None  # numpy dtype of a fixed-type input
    type_attr: str | None
    allowed: tuple[str, ...]  # supported dtypes the input may have
    is_list: bool = False
    min_len: int = 1


@dataclass
class _Attr:
    name: str  # the tf.raw_ops keyword (the OpDef name but for a few renamed ones)
    type: str
    default: Any
    allowed: tuple
    minimum: int | None
    role: str | None


@dataclass
class _Plan:
    name: str
    inputs: list[_In]
    attrs: list[_Attr]  # only those tf.raw_ops accepts as keywords
    type_attrs: dict[str, tuple[str, ...]]  # inferred type attr -> supported dtypes
    kind: str  # image | volume | matrix | generic
    module: str

    def attr(self, name: str) -> _Attr | None:
        return next((a for a in self.attrs if a.name == name), None)

    def has_input(self, *names: str) -> bool:
        return any(i.name in names or i.kw in names for i in self.inputs)


@functools.lru_cache(maxsize=1)
def _tf():
    import tensorflow as tf
    return tf


def _dtype_name(enum: int) -> str | None:
    tf = _tf()
    try:
        d = tf.dtypes.as_dtype(enum)
    except TypeError:
        return None
    return d.name


def _attr_value(v) -> Any:
    """An AttrValue proto as a JSON value (or _NODEFAULT)."""
    which = v.WhichOneof("value")
    if which is None:
        return _NODEFAULT
    if which == "list":
        lst = v.list
        for f in ("i", "f", "b", "s", "type", "shape"):
            items = list(getattr(lst, f))
            if items:
                if f == "s":
                    return [x.decode() for x in items]
                if f == "type":
                    return [_dtype_name(x) for x in items]
                if f == "shape":
                    return _NODEFAULT
                return [float(x) if f == "f" else x for x in items]
        return []
    if which == "s":
        return v.s.decode()
    if which == "type":
        return _dtype_name(v.type)
    if which == "shape":
        if v.shape.unknown_rank:
            return _NODEFAULT
        return [d.size for d in v.shape.dim]
    if which == "f":
        return float(v.f)
    if which in ("i", "b"):
        return getattr(v, which)
    return _NODEFAULT


def _allowed_types(attr_def) -> tuple[str, ...]:
    types = [_dtype_name(t) for t in attr_def.allowed_values.list.type] if attr_def.HasField("allowed_values") else []
    if not types:
        return SUPPORTED
    return tuple(t for t in SUPPORTED if t in types)


def _gen_module(fn) -> str:
    mod = getattr(fn, "__module__", "") or ""
    m = re.search(r"gen_(\w+?)_ops$", mod)
    return m.group(1) if m else (mod.rsplit(".", 1)[-1] or "?")


def cpu_kernel_types(name: str) -> dict[str, set[str] | None] | None:
    """Type attr -> the dtypes some (unlabelled) CPU kernel of ``name`` accepts (None: unconstrained); None when
    the op has no CPU kernel."""
    from tensorflow.python.framework import kernels
    try:
        kl = kernels.get_registered_kernels_for_op(name)
    except Exception:  # noqa: BLE001 - no kernel registry: no constraint
        return {}
    cpu = [k for k in kl.kernel if k.device_type == "CPU" and not k.label]
    if not cpu:
        return None
    out: dict[str, set[str] | None] = {}
    for k in cpu:
        constrained = {c.name: {_dtype_name(t) for t in c.allowed_values.list.type} for c in k.constraint}
        for attr in set(out) | set(constrained):
            if attr in out and out[attr] is None:
                continue
            if attr not in constrained:
                out[attr] = None
            else:
                out[attr] = (out.get(attr) or set()) | constrained[attr]
    # an attr unconstrained by some kernel is unconstrained overall
    for k in cpu:
        names = {c.name for c in k.constraint}
        for attr in out:
            if attr not in names:
                out[attr] = None
    return out


def op_reason(name: str) -> str | None:
    """Why raw op ``name`` is not harvested (None: it is)."""
    from tensorflow.python.framework import op_def_registry, versions
    od = op_def_registry.get(name)
    if od is None:
        return "no-opdef"
    if od.is_stateful:
        return "stateful"
    for reason, pattern in _EXCLUDED:
        if pattern.search(name):
            return reason
    if od.deprecation.version and od.deprecation.version <= versions.GRAPH_DEF_VERSION:
        return "deprecated"
    if any(a.type in ("func", "list(func)") for a in od.attr):
        return "function-attr"
    if not od.output_arg:
        return "no-output"
    attrs = {a.name: a for a in od.attr}

    def types(arg) -> tuple[str, ...] | None:
        if arg.type:
            return (_dtype_name(arg.type),)
        if arg.type_attr:
            return _allowed_types(attrs[arg.type_attr])
        return None  # type list

    numeric_input = False
    for arg in list(od.input_arg) + list(od.output_arg):
        if arg.is_ref:
            return "ref-arg"
        t = types(arg)
        if t is not None and (not t or all(x in _NON_NUMERIC or x not in SUPPORTED for x in t)):
            return "non-numeric-arg" if any(x in _NON_NUMERIC for x in t) or not t else "unsupported-dtype"
        if arg in od.input_arg and t and any(x in SUPPORTED for x in t):
            numeric_input = True
    if not numeric_input:
        return "no-numeric-input"
    if cpu_kernel_types(name) is None:
        return "no-cpu-kernel"
    return None


def _op_kind(name: str, od, attr_names: set[str], input_names: set[str]) -> str:
    if "3D" in name or "Volume" in name or any(a.name == "data_format" and _attr_value(a.default_value) == "NDHWC"
                                              for a in od.attr):
        return "volume"
    if attr_names & {"data_format", "ksize", "ksizes", "dilations", "rates", "block_size"} \
            or input_names & {"images", "image"} or re.search(r"Image|Resize|Crop|Pool|Conv|Dilation|Depth|LRN|"
                                                              r"Space|Batch(To)?Space|HSV|RGB|Glimpse|Bounding", name):
        return "image"
    if re.search(r"Matrix|Cholesky|Qr$|Svd|Eig|^Lu$|Determinant|Tridiagonal|Triangular|MatMul|Banded", name) \
            or input_names & {"matrix", "rhs"}:
        return "matrix"
    return "generic"


def plan(name: str) -> _Plan:
    """The roles of every argument of raw op ``name``; raises :class:`_Skip`."""
    import inspect
    from tensorflow.python.framework import op_def_registry
    tf = _tf()
    reason = op_reason(name)
    if reason:
        raise _Skip(reason)
    od = op_def_registry.get(name)
    fn = getattr(tf.raw_ops, name)
    params = [p for p in inspect.signature(fn).parameters if p != "name"]
    n_in = len(od.input_arg)
    attr_defs = {a.name: a for a in od.attr}
    cpu = cpu_kernel_types(name) or {}

    def allowed_types(attr: str) -> tuple[str, ...]:
        types = _allowed_types(attr_defs[attr])
        if cpu.get(attr):
            types = tuple(t for t in types if t in cpu[attr])
        return types

    # tf.raw_ops keywords: the inputs by position, then the attributes that are not inferred from the inputs;
    # TensorFlow's Python API defs rename a few (Squeeze's squeeze_dims is `axis`): paired in order
    inferred = {x for arg in od.input_arg for x in (arg.type_attr, arg.number_attr, arg.type_list_attr) if x}
    unknown = [p for p in params[n_in:] if p not in attr_defs]
    unnamed = [a.name for a in od.attr if a.name not in params and a.name not in inferred]
    if len(params) < n_in or len(unknown) != len(unnamed):
        raise _Skip("signature-mismatch")
    opdef_name = {**{p: p for p in params[n_in:] if p in attr_defs}, **dict(zip(unknown, unnamed))}
    inputs: list[_In] = []
    governed: dict[str, list[str]] = collections.defaultdict(list)  # type attr -> roles of its inputs
    for arg, kw in zip(od.input_arg, params[:n_in]):
        role = _role(arg.name, INPUT_ROLES) or _role(kw, INPUT_ROLES) or _role(arg.name, DATA_ROLES) or "data"
        fixed = _dtype_name(arg.type) if arg.type else None
        if arg.type_list_attr:
            allowed = allowed_types(arg.type_list_attr)
            is_list, min_len, type_attr = True, max(1, attr_defs[arg.type_list_attr].minimum or 1), None
        else:
            type_attr = arg.type_attr or None
            allowed = (fixed,) if fixed else allowed_types(type_attr)
            is_list = bool(arg.number_attr)
            min_len = max(1, attr_defs[arg.number_attr].minimum) if is_list else 1
        allowed = tuple(t for t in allowed if t in SUPPORTED)
        if not allowed:
            if role in _CONST_ROLES:
                allowed = ("int32",)
            else:
                raise _Skip("unsupported-dtype")
        if fixed == "bool" and role == "shape":
            role = "dims_mask"
        if arg.name == "output_shape" and any(a.name == "images" for a in od.input_arg):
            role = "size"  # ImageProjectiveTransform: the output's [height, width]
        if arg.name == "scale" and any(a.name == "translation" for a in od.input_arg):
            role = "vec2"
        if arg.name == "value" and role == "data" and any(a.name in ("dims", "shape") for a in od.input_arg):
            role = "scalar_data"  # Fill's value: a runtime scalar
        if role in _CONST_ROLES and role != "scalar" and not any(t.startswith(("int", "uint")) for t in allowed):
            role = "data" if role not in ("indices",) else role  # e.g. a float "size": data after all
        if type_attr:
            governed[type_attr].append(role)
        inputs.append(_In(arg.name, kw, role, fixed, type_attr, allowed, is_list, min_len))
    if not any(i.role not in _CONST_ROLES for i in inputs) and not any(i.role in _CONST_ROLES for i in inputs):
        raise _Skip("no-input")
    attrs: list[_Attr] = []
    for p in params[n_in:]:
        a = attr_defs[opdef_name[p]]
        allowed: tuple = ()
        if a.HasField("allowed_values"):
            lst = a.allowed_values.list
            allowed = tuple(x.decode() for x in lst.s) or tuple(_dtype_name(t) for t in lst.type)
        role = _role(a.name, ATTR_ROLES) or _role(p, ATTR_ROLES)
        if a.type == "type" and role is None:
            role = "dtype"
        attrs.append(_Attr(p, a.type, _attr_value(a.default_value) if a.HasField("default_value") else _NODEFAULT,
                           allowed, a.minimum if a.has_minimum else None, role))
    for a in attrs:
        if a.default is _NODEFAULT and a.role is None and not a.allowed and a.type != "bool":
            raise _Skip(f"unknown-attr:{a.name}")
    type_attrs = {t: allowed_types(t) for t in governed}
    kind = _op_kind(name, od, {a.name for a in od.attr}, {i.name for i in inputs})
    return _Plan(name, inputs, attrs, type_attrs, kind, _gen_module(fn))
