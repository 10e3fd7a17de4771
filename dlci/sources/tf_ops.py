"""``tf_ops``: single TensorFlow raw-op calls, derived from the installed TensorFlow's registered OpDefs.

Operators: every name in ``dir(tf.raw_ops)`` whose OpDef (``op_def_registry.get(name)``) is a pure numeric
computation: not stateful, no resource/variant/string (or reference) inputs or outputs, no function attributes,
not deprecated at the installed graph version, at least one tensor input of a numeric type, and not one of the
excluded families (random sampling, gradients, sparse triplets, quantized types, device/TPU/XLA, training kernels,
debug, control flow, I/O — :data:`EXCLUDED`, name patterns). Each skipped operator is counted under
``op:<reason>``.

Arguments are filled by ROLE (:data:`INPUT_ROLES`, :data:`ATTR_ROLES`: tables keyed by argument/attribute names,
applied across all operators): data tensors get small shapes (rank 0-4, NHWC ``[1,5,5,3]``-like for image
operators, broadcasting / matmul / scalar partners for a second operand) in float32 and the other dtypes the type
attribute allows, values from a few domains (normal, positive, unit, small integers, and the boundary classes
zeros, signed zero, large, huge, tiny, subnormal, NaN, Inf); index and shape arguments that are tensors in the
OpDef (axis, perm, shape, paddings, begin/end/strides, size, multiples, k, indices, segment_ids, block_shape ...)
are plain Python ints/lists in the call (graph constants, the way models present them to converters), and in a
minority of instances one of them is a runtime int32 input instead (origin detail ``runtime:<name>``).
Attributes get role values (ksize/strides/padding/data_format/dilations, masks, num/num_split, keep_dims...),
their defaults, or other ``allowed_values``; an operator with a required attribute that has neither a role nor
allowed values is skipped (``op:unknown-attr:<name>``).

Dtypes are limited to those an unlabelled CPU kernel is registered for. Every candidate is validated in a sandboxed
worker, one operator per job (:mod:`dlci.exec`): first built in a graph (the op's shape function rejects most
invalid arguments there, ``rejected-static:<exception>``, before a kernel that would CHECK-fail on them runs), then
run eagerly twice (``tf.raw_ops.X(**kwargs)``, runtime inputs as tensors); a candidate that raises
(``rejected:<exception>``), returns non-numeric, empty or all-NaN outputs, or differs between the two runs
(``nondeterministic``: uninitialised outputs, e.g. Cholesky of a non-PD matrix) is dropped under that reason in
``stats["skipped"]``. TensorFlow aborts the process on some arguments (``ConjugateTranspose`` of a scalar in TF 2.21):
the worker dies, the candidate it was running is recorded in ``stats["crashes"]``, counted under
``crashed:<signal>`` and skipped, and the operator is harvested again without it. At most ``variants_per_op`` valid
candidates per operator are kept, chosen for diversity (dtypes, ranks, attribute values, value domains, runtime index
arguments; the plain float32 candidate first). ``stats`` also has ``modules`` (operators and instances per
generated TensorFlow module: math, nn, array, image, linalg, spectral...), ``ops_without_instances`` and
``nondeterministic_ops``.

Instance format (``call["kind"] == "tf_fn"``)::

    Instance(op="tf::<RawOp>", framework="keras",
             call={"kind": "tf_fn", "fn": "tf.raw_ops.<RawOp>", "kwargs": {<keyword>: {"$t": i} | JSON value}},
             inputs=[TensorSpec.of(a) ...], params={<attr / constant argument>: value},
             origin=Origin("tf_ops", "<RawOp>#<n> <detail>", "tensorflow <version>"),
             arrays={"in:<i>": ..., "expected:<j>": ...})

The keywords are those ``tf.raw_ops.<RawOp>`` accepts: the OpDef's input names (TensorFlow's Python API renames a
few: ``Sum``'s ``reduction_indices`` is ``axis``, ``Select``'s ``t``/``e`` are ``x``/``y``, ``Split``'s
``split_dim`` is ``axis``; inputs map to the function's parameters by position) and the attributes that are not
inferred from the inputs (type attributes such as ``T``/``Tidx`` and list lengths such as ``N`` are inferred and
never passed). A list input (``Pack``'s ``values``) is a JSON list of ``{"$t": i}``. Expected outputs: every output
tensor of the op, list outputs flattened, in order.
"""
from __future__ import annotations

import collections
import functools
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.sources import Source, register, stable_seed
from dlci.sources._common import dist_version, harvest_in_workers

# -- which operators -------------------------------------------------------------------------------------------

# (reason, name pattern): families that are not single pure numeric computations a converter sees in a model
EXCLUDED: tuple[tuple[str, str], ...] = (
    ("random", r"Random|Multinomial|Shuffle|SampleDistorted|TruncatedNormal|Poisson|Binomial|Sobol|"
               r"AccidentalHits|Fractional(Max|Avg)Pool|Dropout"),
    ("gradient", r"Grad(V\d)?$|GradGrad|Grad[A-Z]|Gradient|BackpropFilter"),
    ("sparse", r"^Sparse(?!Segment|ToDense)|Ragged|SetOperation|SetSize|Serialize|Deserialize|EditDistance|"
               r"SparseCore|CooTensor|CsrWrapped|SparseDense"),
    ("quantized", r"Quantized|Requantiz|UniformQuant|UniformDequant|UniformRequant|^Dequantize$|^QuantizeV2$|"
                  r"QuantizeDown"),
    ("device", r"^Xla|^TPU|Tpu|Cudnn|CheckPinned|^Copy(Host)?$|^_|^HostConst$"),
    ("training", r"BoostedTrees|Sdca|KMC2|Kmeans|NearestNeighbors|^Apply|^ResourceApply|^SparseApply|"
                 r"BlockLSTM|LSTMBlockCell|GRUBlockCell|CTCLoss"),
    ("debug", r"Debug|^Print|Assert|Summary|^Snapshot$"),
    ("control-flow", r"^(Enter|Exit|RefEnter|RefExit|Merge|Switch|NextIteration|LoopCond|For|While|If|Case|Batch|"
                     r"Unbatch|BatchFunction|MapDefun|SymbolicGradient|PyFunc\w*|EagerPyFunc|Stateless(If|Case|While)|"
                     r"ControlTrigger|NoOp|PartitionedCall|StatefulPartitionedCall|RemoteCall)$"),
    ("io", r"Dataset|Iterator|Reader|Record|^Save|^Restore|File|Decode|Encode|Queue|TensorArray|Barrier|Lookup|"
           r"Table|Variable|^Stack|^Stage|^Unstage|Recv$|Send$|Collective|Nccl|Audio|Mfcc|Wav"),
)
_EXCLUDED = tuple((reason, re.compile(p)) for reason, p in EXCLUDED)

# numpy dtype names a candidate's data may have, in order of preference (float32 first)
MAIN_DTYPES = ("float32", "int32", "float16", "float64", "int64", "bool", "complex64")
EXTRA_DTYPES = ("int8", "uint8", "int16", "uint16", "uint32", "uint64", "complex128")  # only where no main one is
SUPPORTED = MAIN_DTYPES + EXTRA_DTYPES
_NON_NUMERIC = ("resource", "variant", "string")

# -- argument roles (names of OpDef inputs and of the tf.raw_ops keywords) -----------------------------------

# tensor inputs that hold index / shape / count data: JSON constants in the call (a runtime variant for some)
INPUT_ROLES: tuple[tuple[str, str], ...] = (
    (r"^(reduction_indices|axis|dim|dimension|split_dim|concat_dim)$", "axis"),
    (r"^axes$", "axes"),
    (r"^perm$", "perm"),
    (r"^(shape|output_shape|dims|input_shape)$", "shape"),
    (r"^(input_sizes)$", "input_sizes"),
    (r"^paddings$", "paddings"),
    (r"^crops$", "crops"),
    (r"^block_shape$", "block_shape"),
    (r"^begin$", "begin"),
    (r"^end$", "end"),
    (r"^strides$", "strides"),
    (r"^(size|crop_size)$", "size"),
    (r"^multiples$", "multiples"),
    (r"^k$", "k"),
    (r"^n$", "n"),
    (r"^(ksize)$", "ksize"),
    (r"^fft_length$", "fft_length"),
    (r"^shift$", "shift"),
    (r"^size_splits$", "size_splits"),
    (r"^(indices|i|sparse_indices)$", "indices"),
    (r"^segment_ids$", "segment_ids"),
    (r"^num_segments$", "num_segments"),
    (r"^(partitions)$", "partitions"),
    (r"^(seq_lengths|sequence_length)$", "seq_lengths"),
    (r"^box_ind$", "box_ind"),
    (r"^targets$", "targets"),
    (r"^(depth|nbins|num|max_output_size|max_output_size_per_class|max_total_size|pre_nms_topn|num_rows|"
     r"num_cols|num_lower|num_upper|num_bits)$", "count"),
    (r"^(on_value|off_value|constant_values|padding_value|clip_value_min|clip_value_max|start|limit|stop|"
     r"delta|iou_threshold|score_threshold|overlap_threshold|soft_nms_sigma|nms_threshold|min_size|"
     r"contrast_factor|extrapolation_value|fill_value|default_value|l2_regularizer|value_range)$", "scalar"),
)
# tensor inputs that are data but with a shape tied to another input's
DATA_ROLES: tuple[tuple[str, str], ...] = (
    (r"^(filter|kernel)$", "filter"),
    (r"^out_backprop$", "out_backprop"),
    (r"^(bias|offset|mean|variance|gamma|beta)$", "channel"),
    (r"^(scale)$", "channel"),
    (r"^(min|max|input_min|input_max)$", "qrange"),
    (r"^condition$", "cond"),
    (r"^(updates|v)$", "updates"),
    (r"^boxes$", "boxes"),
    (r"^scores$", "scores"),
    (r"^sorted_inputs$", "sorted"),
    (r"^arr$", "counts_data"),
    (r"^(rhs)$", "rhs"),
    (r"^s[01]$", "shape_vec"),
    (r"^transforms$", "transforms"),
    (r"^offsets$", "offsets"),
    (r"^colors$", "colors"),
    (r"^translation$", "vec2"),
)
_INDEX_ROLES = {"axis", "axes", "perm", "shape", "input_sizes", "paddings", "crops", "block_shape", "begin", "end",
                "strides", "size", "multiples", "k", "n", "ksize", "fft_length", "shift", "size_splits", "indices",
                "segment_ids", "num_segments", "partitions", "seq_lengths", "box_ind", "targets", "count"}
_CONST_ROLES = _INDEX_ROLES | {"scalar"}
# roles whose constant may become a runtime int32 input in a variant (shape/index arguments a converter must treat
# as dynamic then)
_RUNTIME_OK = ("axis", "perm", "shape", "paddings", "begin", "end", "strides", "size", "multiples", "k",
               "indices", "segment_ids", "shift", "block_shape", "crops", "axes", "fft_length", "n", "count")

# attributes with a role: values from the inputs' shapes / layout (all others: default, allowed values, flips)
ATTR_ROLES: tuple[tuple[str, str], ...] = (
    (r"^(ksize|ksizes)$", "ksize"),
    (r"^strides$", "strides_attr"),
    (r"^(dilations|rates)$", "dilations"),
    (r"^padding$", "padding"),
    (r"^explicit_paddings$", "explicit_paddings"),
    (r"^data_format$", "data_format"),
    (r"^(align_corners|half_pixel_centers)$", "resize_flag"),
    (r"^(begin_mask|end_mask)$", "mask"),
    (r"^(ellipsis_mask|new_axis_mask|shrink_axis_mask)$", "mask_bit"),
    (r"^num$", "num"),
    (r"^num_split$", "num_split"),
    (r"^num_partitions$", "num_partitions"),
    (r"^axis$", "axis_attr"),
    (r"^(squeeze_dims)$", "squeeze"),
    (r"^seq_dim$", "seq_dim"),
    (r"^batch_dim$", "batch_dim"),
    (r"^block_size$", "block_size"),
    (r"^k$", "k_attr"),
    (r"^(keep_dims|keepdims)$", "flag"),
    (r"^shape$", "shape_attr"),
    (r"^equation$", "equation"),
    (r"^boundaries$", "boundaries"),
    (r"^(interpolation)$", "interpolation"),
    (r"^(kernel_type)$", "kernel_type"),
    (r"^(noise)$", "noise"),
    (r"^(mode)$", "mode"),
    (r"^(window_size)$", "window_size"),
    (r"^(stride)$", "stride"),
    (r"^(beam_width|top_paths)$", "small_count"),
    (r"^(min|max)$", "qbound"),
    (r"^(reduction_dimension)$", "last_axis"),
    (r"^(binary_output)$", "flag"),
    (r"^(src_format|dst_format)$", "format_string"),
)
_INTERP = ("BILINEAR", "NEAREST")
_EQUATIONS = (  # einsum equation, operand shapes
    ("ij,jk->ik", ([3, 4], [4, 5])), ("bij,bjk->bik", ([2, 3, 4], [2, 4, 2])), ("ij->ji", ([3, 4],)),
    ("ii->i", ([3, 3],)), ("ij,j->i", ([3, 4], [4])), ("i,j->ij", ([3], [4])),
    ("bhwc,cd->bhwd", ([1, 3, 3, 2], [2, 4])),
    ("ij->", ([2, 3],)), ("bij->bji", ([2, 3, 4],)),
)

DOMAINS = ("normal", "positive", "unit", "small_int")
BOUNDARY_DOMAINS = ("zeros", "signed_zero", "large", "huge", "tiny", "subnormal", "nan", "inf")
NONFINITE = ("nan", "inf")
_FLOAT_ONLY_DOMAINS = ("signed_zero", "tiny", "subnormal", "nan", "inf", "unit")

# Operators whose result is unspecified outside a value domain (undefined behaviour in the kernels' C++, an order
# or a precision the op does not define). Their candidates stay inside it: two correct kernels may differ outside,
# and a rule would report that difference as a bug. (name pattern, constraint): see _Builder._constrain.
VALUE_DOMAINS: tuple[tuple[str, str], ...] = (
    (r"^(LeftShift|RightShift)$", "shift_below_width"),  # shifting by >= the bit width (or < 0) is UB
    (r"^Cast$", "in_range_cast"),  # float -> int outside the int's range (or NaN) is UB
    (r"^(FakeQuant|QuantizeAndDequantize)", "finite"),  # NaN/Inf rounded to an int grid
    (r"^(BatchMatrix|Matrix)(Inverse|Solve|TriangularSolve)$", "well_conditioned"),  # the result is the rounding
    (r"^(BatchSelfAdjointEig|SelfAdjointEig|BatchCholesky|Cholesky)", "hermitian"),  # only one triangle is read
    (r"^(TopK|TopKV2|NthElement)$", "no_nan"),  # NaN has no place in an order
)
_VALUE_DOMAINS = tuple((re.compile(p), c) for p, c in VALUE_DOMAINS)
# the value domains each constraint leaves out
_DOMAINS_OUT = {"in_range_cast": NONFINITE + ("huge",), "finite": NONFINITE, "no_nan": ("nan",),
                "well_conditioned": NONFINITE + ("huge", "large", "zeros"), "hermitian": NONFINITE + ("huge",)}


def value_domains(name: str) -> tuple[str, ...]:
    return tuple(c for rx, c in _VALUE_DOMAINS if rx.search(name))


def _role(name: str, table) -> str | None:
    for pattern, role in table:
        if re.match(pattern, name):
            return role
    return None


# -- operator plans (worker side: needs TensorFlow) ---------------------------------------------------------------

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


# -- candidates --------------------------------------------------------------------------------------------------

@dataclass
class _Rt:
    """A runtime tensor input of a candidate."""
    array: np.ndarray


@dataclass
class _Cand:
    index: int
    kwargs: dict  # keyword -> _Rt | [_Rt] | JSON constant
    params: dict
    domain: str
    runtime_arg: str | None
    detail: str
    features: frozenset = frozenset()


class _Ctx:
    """What one candidate has chosen so far."""

    def __init__(self, p: _Plan, rng: np.random.Generator, first: bool):
        self.p, self.rng, self.first = p, rng, first
        self.values: dict[str, Any] = {}  # keyword -> chosen value (arrays for data, JSON for the rest)
        self.dtypes: dict[str, str] = {}  # type attr -> dtype
        self.shape: list[int] | None = None  # the primary data shape
        self.layout = "NHWC"
        self.spatial = 3 if p.kind == "volume" else 2
        self.domain = "normal"
        self.notes: list[str] = []

    # a choice: the first candidate takes the first option, the others the first one with probability p0
    def pick(self, options, p0: float = 0.5):
        options = list(options)
        if not options:
            raise _Skip("no-option")
        if self.first or len(options) == 1 or self.rng.random() < p0:
            return options[0]
        return options[int(self.rng.integers(1, len(options)))]

    @property
    def rank(self) -> int:
        return len(self.shape) if self.shape is not None else 2

    def dim(self, axis: int, default: int = 3) -> int:
        if self.shape is None or not self.shape:
            return default
        return self.shape[axis % len(self.shape)]

    @property
    def channel_axis(self) -> int:
        return 1 if self.layout.startswith("NC") else -1

    def spatial_axes(self) -> list[int]:
        r = self.rank
        return list(range(2, r)) if self.layout.startswith("NC") else list(range(1, r - 1))


def _floatish(dtype: str) -> bool:
    return dtype.startswith(("float", "complex"))


def _values(rng: np.random.Generator, shape, dtype: str, domain: str) -> np.ndarray:
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape)) if shape else 1
    if dtype == "bool":
        return rng.random(shape) < (0.8 if domain == "positive" else 0.5)
    if dtype.startswith("complex"):
        part = "float32" if dtype == "complex64" else "float64"
        re_ = _values(rng, shape, part, domain)
        im = _values(rng, shape, part, domain if domain not in NONFINITE else "normal")
        return (re_ + 1j * im).astype(dtype)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        lo = 0 if dtype.startswith("uint") else None
        if domain == "zeros":
            return np.zeros(shape, dtype)
        if domain in ("large", "huge"):
            pool = [info.max, info.max // 2, info.max - 1, 1, 0] + ([] if lo == 0 else [info.min, info.min // 2, -1])
            return np.asarray(rng.choice(pool, size=shape)).astype(dtype)
        lo_hi = {"positive": (1, 7), "small_int": (0, 4), "unit": (-1, 2)}.get(domain, (-5, 6))
        a, b = lo_hi
        if lo == 0:
            a, b = max(a, 0), max(b, 3)
        return rng.integers(a, b, size=shape).astype(dtype)
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        if domain == "positive":
            x = rng.uniform(0.1, 3.0, shape)
        elif domain == "unit":
            x = rng.uniform(-0.95, 0.95, shape)
        elif domain == "small_int":
            x = rng.integers(-3, 4, shape).astype(np.float64)
        elif domain == "zeros":
            x = np.zeros(shape)
        elif domain == "signed_zero":
            x = rng.standard_normal(shape)
            flat = x.reshape(-1)
            pos = rng.permutation(n)[:max(1, n // 2)]
            flat[pos[0::2]] = -0.0
            flat[pos[1::2]] = 0.0
            x = flat.reshape(shape)
        elif domain in ("large", "huge", "tiny", "subnormal"):
            target = {"large": math.sqrt(float(fi.max)), "huge": float(fi.max) / 4,
                      "tiny": math.sqrt(float(fi.tiny)), "subnormal": float(fi.tiny) / 4}[domain]
            x = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 1.0, shape) * target
        else:
            x = rng.standard_normal(shape)
            if domain in NONFINITE and n:
                flat = x.reshape(-1)
                pos = rng.permutation(n)[:max(1, n // 8)]
                flat[pos] = np.nan if domain == "nan" else rng.choice([np.inf, -np.inf], pos.size)
                x = flat.reshape(shape)
        out = np.asarray(x).astype(dtype)
    if domain == "signed_zero":
        out = np.where(np.asarray(x) == 0, np.copysign(np.zeros((), dtype), np.asarray(x)).astype(dtype), out)
    return np.asarray(out, dtype=dtype)


def _spd(rng, shape, dtype: str) -> np.ndarray:
    n = shape[-1]
    m = rng.standard_normal(shape)
    a = m @ np.swapaxes(m, -1, -2) + n * np.eye(n)
    return a.astype(dtype)


_GENERIC_SHAPES = ([2, 3, 4], [3, 4], [5], [2, 3, 4, 5], [], [4, 1, 3], [6], [3, 3], [2, 1, 5, 1])
_MATRIX_SHAPES = ([3, 3], [2, 4, 4], [3, 4], [4, 3], [2, 3, 3], [1, 5, 5])
_IMAGE_SHAPES = ([1, 5, 5, 3], [2, 4, 4, 2], [1, 6, 6, 1], [1, 2, 2, 4], [4, 2, 2, 3], [1, 7, 5, 2], [1, 4, 4, 4])
_VOLUME_SHAPES = ([1, 4, 4, 4, 2], [2, 3, 3, 3, 1], [1, 5, 4, 3, 2])


def _primary_shape(c: _Ctx) -> list[int]:
    kind = c.p.kind
    if kind == "volume":
        shapes = _VOLUME_SHAPES + ([1, 5, 5, 3], [2, 3, 4])
    elif kind == "image":
        shapes = _IMAGE_SHAPES + ([2, 3, 4], [3, 4], [])
    elif kind == "matrix":
        shapes = _MATRIX_SHAPES + ([2, 3, 4], [5])
    else:
        shapes = _GENERIC_SHAPES
    if any(a.role == "squeeze" for a in c.p.attrs):
        shapes = ([4, 1, 3], [2, 1, 5, 1], [1, 3], [1]) + tuple(shapes)
    s = list(c.pick(shapes, p0=0.35))
    if c.layout.startswith("NC") and len(s) >= 3:
        s = [s[0], s[-1]] + s[1:-1]
    return s


def _related_shape(c: _Ctx, role: str) -> list[int]:
    s = list(c.shape) if c.shape is not None else [3, 4]
    r = len(s)
    if role == "rhs":
        opts = [s[:-2] + [s[-1], 2] if r >= 2 else [s[0] if s else 3, 2], s, s[:-1] + [1] if r >= 1 else [3, 1]]
        return c.pick(opts, 0.6)
    opts: list[list[int]] = [s]
    if r >= 1:
        b = [d if c.rng.random() < 0.5 else 1 for d in s]
        opts.append(b if b != s else s[1:])
        opts.append(s[1:] if r >= 2 else [])
    opts.append([])
    if r >= 2:
        opts.append(s[:-2] + [s[-1], 3])  # matmul partner
    return c.pick(opts, 0.55)


def _data_dtype(c: _Ctx, inp: _In) -> str:
    if inp.fixed:
        return inp.fixed
    if inp.type_attr and inp.type_attr in c.dtypes:
        return c.dtypes[inp.type_attr]
    return inp.allowed[0]


def _choose_dtypes(c: _Ctx) -> None:
    for attr, allowed in c.p.type_attrs.items():
        roles = {i.role for i in c.p.inputs if i.type_attr == attr}
        main = [t for t in allowed if t in MAIN_DTYPES] or [t for t in allowed if t in SUPPORTED]
        if not main:
            continue
        if roles <= _CONST_ROLES:
            # constants only (Range's start/limit/delta): a Python int or float decides
            main = [t for t in ("int32", "float32") if t in main] or main
        main = sorted(main, key=lambda t: SUPPORTED.index(t))
        if c.first or c.rng.random() < 0.45:
            c.dtypes[attr] = main[0]
        else:
            c.dtypes[attr] = main[int(c.rng.integers(0, len(main)))]


def _scalar_for(dtype: str, x: float):
    if dtype == "bool":
        return bool(x)
    if dtype.startswith(("int", "uint")):
        return int(round(x))
    return float(x)


def _const_dtype(c: _Ctx, inp: _In) -> str:
    if inp.fixed:
        return inp.fixed
    if inp.type_attr and inp.type_attr in c.dtypes:
        return c.dtypes[inp.type_attr]
    return "int32" if "int32" in inp.allowed else inp.allowed[0]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] or [1]


def _conv_out(size: int, k: int, s: int, d: int, padding: str, pads=(0, 0)) -> int:
    ek = (k - 1) * d + 1
    if padding == "SAME":
        return -(-size // s)
    if padding == "EXPLICIT":
        size = size + pads[0] + pads[1]
    return max(0, (size - ek) // s + 1)


def _list_attr(c: _Ctx, spatial_values: list[int], rank: int | None = None) -> list[int]:
    rank = rank or c.spatial + 2
    vals = list(spatial_values)[:rank - 2]
    vals += [vals[-1] if vals else 1] * (rank - 2 - len(vals))
    return [1, 1] + vals if c.layout.startswith("NC") else [1] + vals + [1]


def _attr_len(c: _Ctx, a: _Attr) -> int:
    d = a.default
    if isinstance(d, list) and d:
        return len(d)
    return c.spatial + 2


class _Builder:
    """Fills one candidate's arguments, role by role."""

    def __init__(self, p: _Plan, index: int):
        self.p = p
        self.index = index
        rng = np.random.default_rng(stable_seed("tf_ops", p.name, str(index)))
        self.c = _Ctx(p, rng, first=index == 0)
        self.domain_used = False  # whether some data input drew its values from the candidate's domain
        self.constraints = value_domains(p.name)

    def build(self) -> _Cand:
        c, p = self.c, self.p
        _choose_dtypes(c)
        df = p.attr("data_format")
        if df is not None:
            opts = [df.default] if df.default is not _NODEFAULT else []
            opts += [v for v in df.allowed if v not in opts]
            c.layout = str(c.pick(opts or ["NHWC"], p0=0.9))
            c.values[df.name] = c.layout
            if c.layout in ("CHANNELS_LAST", "CHANNELS_FIRST"):
                c.layout = "NHWC" if c.layout == "CHANNELS_LAST" else "NCHW"
            c.spatial = max(1, len(c.layout) - 2)
        ks = p.attr("ksize") or p.attr("ksizes") or p.attr("strides")
        if ks is not None and isinstance(ks.default, list) and len(ks.default) >= 3:
            c.spatial = len(ks.default) - 2
        r = int(c.rng.random() * 1e9)  # the value domain is drawn independently of the shapes
        dom_rng = np.random.default_rng(r)
        if c.first:
            c.domain = "normal"
        else:
            u = dom_rng.random()
            c.domain = (DOMAINS[int(dom_rng.integers(0, len(DOMAINS)))] if u < 0.72 else
                        BOUNDARY_DOMAINS[int(dom_rng.integers(0, len(BOUNDARY_DOMAINS)))])
        if any(c.domain in _DOMAINS_OUT.get(k, ()) for k in self.constraints):
            c.domain = "normal"
        self.eq = None
        if p.attr("equation") is not None:
            self.eq = c.pick(_EQUATIONS, 0.3)
            c.values["equation"] = self.eq[0]
        # the primary data shape: the first data input, or input_sizes (transposed convolutions)
        prim_roles = ("data", "input_sizes", "counts_data", "cond", "boxes", "sorted")
        prim = next((i for i in p.inputs if i.role in prim_roles), None)
        c.shape = _primary_shape(c)
        if prim is not None and prim.role == "boxes":
            c.shape = list(c.pick([[5, 4], [1, 3, 1, 4], [1, 3, 4]], 0.4))
        elif prim is not None and prim.role == "sorted":
            c.shape = list(c.pick([[2, 5], [3, 4], [1, 6]], 0.5))
        self.prim = prim
        order = sorted(range(len(p.inputs)), key=lambda k: (self._priority(p.inputs[k]), k))
        attr_first = [a for a in p.attrs if a.role in ("ksize", "strides_attr", "dilations", "padding",
                                                        "explicit_paddings", "axis_attr", "seq_dim", "batch_dim",
                                                        "num_partitions", "block_size", "k_attr", "mode")]
        for a in attr_first:
            self._attr(a)
        for k in order:
            inp = p.inputs[k]
            if inp.kw not in c.values:
                self._input(inp)
        for a in p.attrs:
            if a.name not in c.values:
                self._attr(a)
        self._constrain()
        return self._finish()

    def _constrain(self) -> None:
        """Moves the filled-in data into the operator's value domain (VALUE_DOMAINS)."""
        c, rng = self.c, self.c.rng
        data = [(i, c.values[i.kw]) for i in self.p.inputs if isinstance(c.values.get(i.kw), _Rt)]
        for k in self.constraints:
            if k == "shift_below_width":
                for inp, v in data:
                    if inp.name == "y" and v.array.dtype.kind in "iu":
                        bits = v.array.dtype.itemsize * 8
                        v.array = rng.integers(0, bits, v.array.shape).astype(v.array.dtype)
            elif k == "in_range_cast":
                dst = str(c.values.get("DstT", ""))
                if dst.startswith(("int", "uint")):
                    info = np.iinfo(dst)
                    for _, v in data:
                        a = v.array
                        if a.dtype.kind in "fc":
                            a = np.nan_to_num(np.real(a).astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
                            # half the range: the float's own rounding never carries it past the end
                            v.array = np.clip(a, info.min // 2, info.max // 2).astype(v.array.dtype)
            elif k == "well_conditioned":
                inp, v = data[0] if data else (None, None)
                a = v.array if v is not None else None
                if a is not None and a.ndim >= 2 and a.shape[-1] == a.shape[-2] and a.dtype.kind in "fc":
                    n = a.shape[-1]
                    m = rng.uniform(-1, 1, a.shape)
                    if "Triangular" in self.p.name:  # read from one triangle: the other is noise it ignores
                        m = np.where(np.eye(n, dtype=bool), 0, m)
                    # |diagonal| > n >= the sum of each row's other entries: diagonally dominant, cond <= 2n
                    diag = rng.choice([-1.0, 1.0], a.shape[:-1]) * (n + rng.uniform(0.5, 1.5, a.shape[:-1]))
                    v.array = (m + diag[..., None] * np.eye(n)).astype(a.dtype)
                    c.notes.append("well-conditioned")
            elif k == "hermitian":
                inp, v = data[0] if data else (None, None)
                a = v.array if v is not None else None
                if a is not None and a.ndim >= 2 and a.shape[-1] == a.shape[-2] and a.dtype.kind in "fc":
                    if "Cholesky" in self.p.name:
                        v.array = _spd(rng, a.shape, str(a.dtype))
                    else:
                        h = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
                        v.array = ((h + np.conj(np.swapaxes(h, -1, -2))) / 2).astype(a.dtype)

    def _priority(self, inp: _In) -> int:
        if inp is self.prim:
            return 0
        role = inp.role
        if role in ("input_sizes",):
            return 0
        if role in ("filter", "channel", "qrange", "cond", "rhs", "data", "sorted", "scores", "boxes",
                    "counts_data", "scalar_data", "shape_vec", "transforms", "offsets", "colors", "vec2"):
            return 1
        if role in ("axis", "perm", "begin", "multiples", "paddings", "block_shape", "k", "n", "count", "ksize",
                    "axes", "fft_length", "scalar", "size_splits", "dims_mask"):
            return 2
        if role in ("end", "strides", "size", "crops", "shift", "indices", "segment_ids", "partitions",
                    "seq_lengths", "box_ind", "targets"):
            return 3
        if role in ("updates", "num_segments"):
            return 4
        return 5  # shape, out_backprop

    # -- inputs ------------------------------------------------------------------------------------------------
    def _input(self, inp: _In) -> None:
        c = self.c
        role = inp.role
        if inp is self.prim and role not in ("input_sizes",):
            self._data(inp, list(c.shape) if c.shape is not None else [3, 4], primary=True)
            return
        if role in _CONST_ROLES:
            c.values[inp.kw] = self._const(inp)
            return
        s = list(c.shape) if c.shape is not None else [3, 4]
        shape = s
        if role == "filter":
            shape = self._filter_shape(inp)
        elif role == "out_backprop":
            shape = self._conv_output_shape()
        elif role == "channel":
            ch = c.dim(c.channel_axis) if s else 3
            shape = c.pick([[ch], []], 0.85)
        elif role == "qrange":
            ch = c.dim(-1) if s else 3
            shape = c.pick([[], [ch]], 0.6)
        elif role == "cond":
            shape = c.pick([s, s[1:] if s else [], []], 0.7)
        elif role == "updates":
            shape = self._updates_shape()
        elif role == "boxes":
            shape = c.pick([[3, 4], [s[0] if s else 1, 2, 4], [1, 3, 1, 4]], 0.5)
        elif role == "scores":
            nb = self._boxes_n()
            shape = c.pick([[nb], [1, nb, 2]], 0.7)
        elif role == "rhs":
            shape = _related_shape(c, "rhs")
        elif role == "sorted":
            shape = c.pick([s, [2, 5], [6]], 0.3)
        elif role == "counts_data":
            shape = s
        elif role == "scalar_data":
            shape = []
        elif role == "shape_vec":
            shape = [len(s)] if inp.name == "s0" else [max(1, len(s) - 1)]
        elif role == "transforms":
            shape = c.pick([[1, 8], [s[0] if s else 1, 8]], 0.5)
        elif role == "offsets":
            shape = [s[0] if s else 1, 2]
        elif role == "colors":
            shape = c.pick([[2, 4], [1, 3]], 0.6)
        elif role == "vec2":
            shape = [2]
        elif self.eq is not None:
            shape = list(self.eq[1][min(len(self.eq[1]) - 1, 1)])
        else:
            shape = _related_shape(c, "data")
        self._data(inp, shape)

    def _boxes_n(self) -> int:
        for i in self.p.inputs:
            if i.role == "boxes" and i.kw in self.c.values:
                v = self.c.values[i.kw]
                a = v.array if isinstance(v, _Rt) else None
                if a is not None and a.ndim >= 2:
                    return a.shape[1] if a.ndim >= 3 else a.shape[0]
        return 3

    def _data(self, inp: _In, shape: list[int], primary: bool = False) -> None:
        c = self.c
        dtype = _data_dtype(c, inp)
        role = inp.role
        domain = c.domain
        if role == "channel" and inp.name in ("variance", "scale"):
            domain = "positive"
        if inp.is_list:
            n = max(inp.min_len, int(c.pick([2, 3, 1], 0.6)))
            if self.eq is not None:
                shapes = [list(x) for x in self.eq[1]]
            else:
                shapes = [list(shape)] * n
            dtypes = [dtype] * len(shapes)
            if inp.type_attr is None and not inp.fixed:  # a type list: mixed dtypes
                dtypes = [inp.allowed[k % len(inp.allowed)] for k in range(len(shapes))]
            c.values[inp.kw] = [_Rt(self._array(sh, dt, domain, role, inp.name)) for sh, dt in zip(shapes, dtypes)]
            return
        c.values[inp.kw] = _Rt(self._array(shape, dtype, domain, role, inp.name))

    def _array(self, shape, dtype: str, domain: str, role: str, name: str = "") -> np.ndarray:
        c = self.c
        rng = c.rng
        if role == "boxes":
            lo = rng.uniform(0, 0.5, tuple(shape[:-1]) + (2,))
            hi = lo + rng.uniform(0.1, 0.5, lo.shape)
            return np.concatenate([lo, hi], -1).astype(dtype)[..., [0, 1, 2, 3]]
        if role == "scores":
            return rng.uniform(0, 1, shape).astype(dtype)
        if role == "shape_vec":
            s = list(c.shape or [2, 3, 4])
            v = s if name == "s0" else s[1:] or [1]
            v = [1 if (x > 1 and rng.random() < 0.3) else x for x in v]
            return np.asarray(v, dtype)
        if role == "transforms":
            t = np.tile(np.asarray([1, 0, 0, 0, 1, 0, 0, 0], np.float64), (shape[0], 1))
            t[:, :6] += rng.uniform(-0.2, 0.2, (shape[0], 6))
            return t.astype(dtype)
        if role == "offsets":
            return rng.uniform(-0.5, 0.5, shape).astype(dtype)
        if role == "colors":
            return rng.uniform(0, 1, shape).astype(dtype)
        if role == "vec2":
            return rng.uniform(0.5, 2.0, shape).astype(dtype) if name == "scale" else \
                rng.uniform(-1, 1, shape).astype(dtype)
        if role == "qrange":
            sign = -1.0 if name.endswith("min") else 1.0
            return (sign * rng.uniform(0.5, 3.0, shape)).astype(dtype)
        if role == "sorted" and dtype != "bool":
            return np.sort(_values(rng, shape, dtype, "normal" if domain in BOUNDARY_DOMAINS else domain), axis=-1)
        if role == "counts_data" and dtype.startswith(("int", "uint")):
            return rng.integers(0, 5, shape).astype(dtype)
        self.domain_used = True
        if (self.p.kind == "matrix" and len(shape) >= 2 and shape[-1] == shape[-2] and _floatish(dtype)
                and domain in ("normal", "positive") and (c.first or rng.random() < 0.5)):
            c.notes.append("spd")
            return _spd(rng, shape, dtype)
        return _values(rng, shape, dtype, domain)

    def _filter_shape(self, inp: _In) -> list[int]:
        c = self.c
        s = c.shape or [1, 5, 5, 3]
        ch = s[c.channel_axis] if len(s) >= 3 else 3
        ksz = c.values.get("ksize")
        k = int(c.pick([2, 3, 1], 0.5)) if not isinstance(ksz, list) else max(ksz)
        out = int(c.pick([2, 3, 1], 0.6))
        spatial = c.spatial
        if self.p.has_input("out_backprop") and "input_sizes" in c.values:
            spatial = len(c.values["input_sizes"]) - 2
        opts = [[k] * spatial + [ch, out], [k] * spatial + [ch]]
        if self.p.kind == "image" and "Dilation" in self.p.name:
            opts.reverse()
        shape = c.pick(opts, 0.85)
        self.filter_shape = shape
        return shape

    def _conv_output_shape(self) -> list[int]:
        c = self.c
        if "input_sizes" in c.values:
            img = list(c.values["input_sizes"])
        else:
            v = next((c.values[i.kw] for i in self.p.inputs if i is self.prim), None)
            img = list(v.array.shape) if isinstance(v, _Rt) else list(c.shape or [1, 5, 5, 3])
        fshape = getattr(self, "filter_shape", None) or [2, 2, img[-1], 2]
        spatial = len(img) - 2
        strides = c.values.get("strides") or [1] * (spatial + 2)
        dil = c.values.get("dilations") or [1] * (spatial + 2)
        padding = c.values.get("padding", "VALID")
        ep = c.values.get("explicit_paddings") or [0] * (2 * (spatial + 2))
        axes = list(range(2, spatial + 2)) if c.layout.startswith("NC") else list(range(1, spatial + 1))
        out = list(img)
        for j, ax in enumerate(axes):
            out[ax] = _conv_out(img[ax], fshape[j], strides[ax] if len(strides) > ax else 1,
                                dil[ax] if len(dil) > ax else 1, padding, (ep[2 * ax], ep[2 * ax + 1])
                                if len(ep) > 2 * ax + 1 else (0, 0))
        depthwise = "Depthwise" in self.p.name
        ch_ax = 1 if c.layout.startswith("NC") else -1
        out[ch_ax] = fshape[-1] * (fshape[-2] if depthwise and len(fshape) >= 2 else 1)
        return out

    def _updates_shape(self) -> list[int]:
        c = self.c
        idx = next((c.values[i.kw] for i in self.p.inputs if i.role == "indices" and i.kw in c.values), None)
        idx = np.asarray(idx.array if isinstance(idx, _Rt) else idx) if idx is not None else np.zeros((2, 1), int)
        s = list(c.shape or [4, 3])
        if idx.ndim >= 2:
            k = idx.shape[-1]
            return list(idx.shape[:-1]) + s[k:]
        return [int(idx.size)] + s[1:]

    # -- constants ---------------------------------------------------------------------------------------------
    def _const(self, inp: _In):
        c = self.c
        role = inp.role
        s = list(c.shape) if c.shape is not None else [3, 4]
        r = len(s)
        rng = c.rng
        if role == "axis":
            if r == 0:
                return c.pick([[], 0], 0.7)
            a = int(rng.integers(-r, r)) if not c.first else r - 1
            b = sorted({a % r, int(rng.integers(0, r))})
            return c.pick([a, [a], b, r, []], 0.55)
        if role == "axes":
            return c.pick([[r - 1] if r else [0], list(range(max(0, r - 2), r))], 0.5)
        if role == "perm":
            return list(range(r))[::-1] if c.first else [int(x) for x in rng.permutation(r)]
        if role == "input_sizes":
            img = _primary_shape(c) if self.p.kind in ("image", "volume") else [1, 5, 5, 3]
            c.shape = img
            return img
        if role == "paddings":
            bs = c.values.get("block_shape")
            if not isinstance(bs, list) and isinstance(c.values.get("block_size"), int) and r == 4:
                bs = [c.values["block_size"]] * 2  # SpaceToBatch: 2-D paddings making H, W divisible
            if isinstance(bs, list):
                sp = s[1:1 + len(bs)]
                return [[0, (-d) % b] for d, b in zip(sp, bs)]
            pads = []
            for d in s:
                hi = max(0, min(2, d - 1))
                pads.append([int(rng.integers(0, hi + 1)), int(rng.integers(0, hi + 1))])
            if "FusedPad" in self.p.name or self.p.attr("mode") is not None:
                pads = [[min(x, max(0, d - 1)) for x in pr] for pr, d in zip(pads, s)]
            return c.pick([pads, [[0, 0]] * r, [[1, 1]] * r], 0.7)
        if role == "block_shape":
            m = max(1, r - 2)
            return c.pick([[2] * m, [2] + [1] * (m - 1), [1] * m], 0.6)
        if role == "crops":
            bs = c.values.get("block_shape")
            m = len(bs) if isinstance(bs, list) else max(1, r - 2)
            return c.pick([[[0, 0]] * m, [[0, 1]] + [[0, 0]] * (m - 1)], 0.7)
        if role == "begin":
            return self._slice()
        if role in ("end", "strides"):
            return c.values.get(f"_{role}", [1] * r)
        if role == "size":
            if "begin" in c.values or any(i.role == "begin" for i in self.p.inputs):
                if "_size" in c.values:
                    return c.values["_size"]
                return [-1] * r
            if self.p.kind in ("image", "volume"):
                h, w = (s[1], s[2]) if r == 4 else (4, 4)
                return c.pick([[2 * h, 2 * w], [max(1, h - 1), w + 2], [3, 5], [h, w]], 0.5)
            return int(c.pick([5, 3, 1], 0.6))
        if role == "multiples":
            return [int(x) for x in rng.integers(1, 3, r)] if not c.first else [2] + [1] * (r - 1)
        if role == "k":
            if self.p.has_input("diagonal", "padding_value") or self.p.kind == "matrix":
                return c.pick([0, 1, -1, [-1, 1]], 0.5)
            last = s[-1] if s else 1
            return int(rng.integers(1, last + 1)) if not c.first else min(2, last)
        if role == "n":
            last = s[-1] if s else 1
            return int(rng.integers(0, last))
        if role == "ksize":
            k = int(c.pick([2, 3, 1], 0.5))
            return _list_attr(c, [k] * c.spatial, r)
        if role == "fft_length":
            n = 1 if re.search(r"FFT$", self.p.name) else (3 if "3D" in self.p.name else
                                                            (2 if "2D" in self.p.name else max(1, min(r, 2))))
            dims = s[-n:] if r >= n else [4] * n
            if self.p.name.startswith("IRFFT"):
                dims = dims[:-1] + [2 * (dims[-1] - 1) if dims[-1] > 1 else 1]
            return c.pick([dims, [max(1, d - 1) for d in dims], [d + 1 for d in dims]], 0.6)
        if role == "shift":
            ax = c.values.get("axis")
            if isinstance(ax, list):
                return [int(x) for x in rng.integers(-3, 4, len(ax))]
            return int(rng.integers(-3, 4))
        if role == "size_splits":
            ax = c.values.get("axis", 0)
            ax = ax if isinstance(ax, int) else 0
            d = c.dim(ax, 4)
            if d <= 1:
                return [d]
            cut = int(rng.integers(1, d))
            return c.pick([[cut, d - cut], [cut, -1], [d]], 0.6)
        if role == "indices":
            return self._indices(inp)
        if role == "segment_ids":
            n = c.dim(0, 4) if r else 1
            idx = next((c.values[i.kw] for i in self.p.inputs if i.role == "indices" and i.kw in c.values), None)
            if idx is not None:
                n = len(np.asarray(idx.array if isinstance(idx, _Rt) else idx).reshape(-1))
            k = int(rng.integers(1, max(1, n // 2 + 1) + 1)) if n else 1
            # every segment below the largest id holds a row: empty segments come only from num_segments
            ids = np.sort(np.concatenate([np.arange(min(k, n)), rng.integers(0, k, max(0, n - k))])).astype(int)
            if "Unsorted" in self.p.name:
                ids = rng.permutation(ids)
            c.values["_segments"] = int(ids.max()) + 1 if ids.size else 1
            return [int(x) for x in ids]
        if role == "num_segments":
            return int(c.values.get("_segments", 3)) + int(c.pick([0, 1], 0.7))
        if role == "partitions":
            k = int(c.values.get("num_partitions", 2))
            shape = c.pick([s[:1], s], 0.5) if r else []
            return rng.integers(0, k, shape).tolist()
        if role == "seq_lengths":
            bd = int(c.values.get("batch_dim", 0))
            sd = int(c.values.get("seq_dim", 1))
            n, t = c.dim(bd, 2), c.dim(sd, 3)
            return [int(x) for x in rng.integers(0, t + 1, n)]
        if role == "box_ind":
            nb = self._boxes_n()
            return [int(x) for x in rng.integers(0, max(1, c.dim(0, 1)), nb)]
        if role == "targets":
            return [int(x) for x in rng.integers(0, max(1, s[-1] if s else 1), s[0] if s else 1)]
        if role == "count":
            name = inp.name
            if name in ("num_rows", "num_cols"):
                return -1
            if name == "num_bits":
                return int(c.pick([8, 4], 0.7))
            if name in ("num_lower", "num_upper"):
                return int(c.pick([1, -1, 0, 2], 0.4))
            return int(c.pick([4, 3, 2, 1], 0.5))
        if role == "dims_mask":
            return [bool(x) for x in rng.random(r) < 0.5]
        if role == "shape":
            return self._shape_value(inp)
        if role == "scalar":
            return self._scalar(inp)
        raise _Skip(f"no-role-value:{role}")

    def _scalar(self, inp: _In):
        c = self.c
        dtype = _const_dtype(c, inp)
        name = inp.name
        table = {"on_value": 1.0, "off_value": 0.0, "value": 1.5, "constant_values": 2.0, "padding_value": 0.0,
                 "clip_value_min": -0.5, "clip_value_max": 0.5, "start": 0.0, "limit": 6.0, "stop": 3.0,
                 "delta": 1.0, "iou_threshold": 0.5, "score_threshold": 0.1, "overlap_threshold": 0.5,
                 "soft_nms_sigma": 0.5, "nms_threshold": 0.7, "min_size": 0.0, "contrast_factor": 1.5,
                 "extrapolation_value": 0.0, "fill_value": 0.0, "default_value": 0.0, "l2_regularizer": 0.0}
        if name == "delta" and self.p.has_input("images"):
            return float(c.pick([0.2, -0.1], 0.5))
        if name == "value_range":
            return [-2.0, 2.0]
        x = table.get(name, 1.0)
        if not c.first and name in ("start", "limit", "delta", "clip_value_min", "clip_value_max", "value",
                                    "constant_values"):
            x = {"start": c.pick([0.0, -2.0, 1.0]), "limit": c.pick([6.0, 5.0, 9.0]),
                 "delta": c.pick([1.0, 2.0, 3.0]), "clip_value_min": c.pick([-0.5, 0.0, -2.0]),
                 "clip_value_max": c.pick([0.5, 1.0, 2.0]), "value": c.pick([1.5, -3.0, 0.0]),
                 "constant_values": c.pick([2.0, -1.0, 0.0])}[name]
        return _scalar_for(dtype, x)

    def _slice(self):
        """begin; end, strides and Slice's size kept for their own roles."""
        c = self.c
        rng = c.rng
        s = list(c.shape) if c.shape is not None else [3, 4]
        r = len(s)
        n = r if (c.first or rng.random() < 0.75) else max(0, r - 1)
        begin, end, strides = [], [], []
        mode = "forward" if c.first else c.pick(["forward", "step", "negative"], 0.5)
        for j, d in enumerate(s[:n]):
            if c.first:
                b = 1 if j == 1 and d > 1 else 0
                begin.append(b), end.append(d), strides.append(1)
            elif mode == "negative" and d > 1:
                b = int(rng.integers(1, d))
                begin.append(b), end.append(0 if rng.random() < 0.6 else -d - 1), strides.append(-1)
            else:
                b = int(rng.integers(0, d)) if d else 0
                e = int(rng.integers(b + 1, d + 1)) if d > b else d
                begin.append(b), end.append(e), strides.append(2 if mode == "step" and rng.random() < 0.6 else 1)
        c.values["_end"], c.values["_strides"] = end, strides
        c.values["_size"] = [e - b if st == 1 else -1 for b, e, st in zip(begin, end, strides)]
        return begin

    def _indices(self, inp: _In):
        c = self.c
        rng = c.rng
        s = list(c.shape) if c.shape is not None else [4]
        r = len(s)
        if (self.prim is None and not any(i.role == "updates" for i in self.p.inputs)) or not s:
            # the indices are the data (OneHot, UnravelIndex): values below the default depth / size
            return rng.integers(0 if c.first else -1, 4, c.pick([[3], [2, 3], []], 0.6)).tolist()
        ax = c.values.get("axis", 0)
        ax = ax if isinstance(ax, int) and not isinstance(ax, bool) else 0
        m = max(1, s[ax % r])
        one = rng.integers(0, m, int(c.pick([3, 2, 1, 5], 0.5))).tolist()
        if inp.name == "i":  # InplaceAdd & co: distinct rows
            return sorted(rng.permutation(s[0])[:max(1, min(2, s[0]))].tolist())
        if self.p.has_input("segment_ids"):
            return rng.integers(0, s[0], int(c.pick([4, 3, 5], 0.5))).tolist()
        k = min(r, 2) if c.first else int(rng.integers(1, r + 1))
        nd = np.stack([rng.integers(0, d, 3) for d in s[:k]], -1).tolist()
        if any(i.role == "updates" for i in self.p.inputs) or "Nd" in self.p.name or inp.name == "sparse_indices":
            if not any(i.role == "data" for i in self.p.inputs):
                c.values["_scatter_shape"] = s  # ScatterNd: the output shape
            return nd
        two = rng.integers(0, m, (2, 2)).tolist()
        return c.pick([one, two, nd], 0.6)

    def _shape_value(self, inp: _In):
        c = self.c
        rng = c.rng
        if "_scatter_shape" in c.values:
            return list(c.values["_scatter_shape"])
        s = list(c.shape) if c.shape is not None else [3, 4]
        numel = int(np.prod(s)) if s else 1
        divs = _divisors(numel)
        a = int(divs[int(rng.integers(0, len(divs)))])
        reshape = [a, numel // a]
        opts = [reshape, [-1], [numel // a, -1], [2] + s, s, [1] + s]
        if self.prim is None or self.p.has_input("value") and self.p.name == "Fill":
            return c.pick([[2, 3], [4], [1, 2, 3], []], 0.6)
        if re.search(r"Broadcast|Ones|Zeros", self.p.name):
            opts = [[2] + s, [3] + s, s]
        return c.pick(opts, 0.45)

    # -- attributes --------------------------------------------------------------------------------------------
    def _attr(self, a: _Attr) -> None:
        c = self.c
        v = self._attr_value(a)
        if v is not _NODEFAULT:
            c.values[a.name] = v

    def _attr_value(self, a: _Attr):
        c = self.c
        rng = c.rng
        s = list(c.shape) if c.shape is not None else [3, 4]
        r = len(s)
        role = a.role
        d = a.default
        if role == "ksize":
            k = int(c.pick([2, 3, 1], 0.5))
            return _list_attr(c, [k] * c.spatial, _attr_len(c, a))
        if role == "strides_attr":
            st = int(c.pick([1, 2], 0.6))
            return _list_attr(c, [st] * c.spatial, _attr_len(c, a))
        if role == "dilations":
            if d is not _NODEFAULT and d == [] and self.p.attr("data_format") is not None:
                return d
            dl = int(c.pick([1, 2], 0.8))
            if dl == 2:
                st = c.values.get("strides")
                if isinstance(st, list) and any(x != 1 for x in st):
                    dl = 1
            return _list_attr(c, [dl] * c.spatial, _attr_len(c, a))
        if role == "padding":
            opts = [x for x in (a.allowed or ("VALID", "SAME")) if x in ("VALID", "SAME", "EXPLICIT")]
            if d is not _NODEFAULT:
                opts = [d] + [x for x in opts if x != d]
            return c.pick(opts or ["VALID"], 0.45)
        if role == "explicit_paddings":
            if c.values.get("padding") == "EXPLICIT":
                n = _attr_len(c, self.p.attr("strides")) if self.p.attr("strides") else c.spatial + 2
                sp = self.c.spatial_axes() if len(s) == n else list(range(1, n - 1))
                return [1 if (j // 2) in sp else 0 for j in range(2 * n)]
            return d if d is not _NODEFAULT else []
        if role == "data_format":
            return c.values.get(a.name, d)
        if role == "resize_flag":
            if a.name == "half_pixel_centers" and c.values.get("align_corners"):
                return False
            return bool(c.pick([d if d is not _NODEFAULT else False, not d if isinstance(d, bool) else True], 0.6))
        if role == "mask":
            n = len(c.values.get("begin", s)) if isinstance(c.values.get("begin"), list) else r
            return 0 if c.first else int(c.pick([0, int(rng.integers(0, 2 ** max(1, n)))], 0.6))
        if role == "mask_bit":
            n = len(c.values.get("begin", s)) if isinstance(c.values.get("begin"), list) else r
            return 0 if c.first else int(c.pick([0, 1 << int(rng.integers(0, max(1, n)))], 0.8))
        if role == "axis_attr":
            if self.p.name == "Pack" or self.p.name == "ParallelConcat":
                return int(c.pick([0, r, -1, int(rng.integers(-r - 1, r + 1))], 0.5))
            if self.p.name == "OneHot":
                return int(c.pick([-1, 0], 0.6))
            if r == 0:
                return d if d is not _NODEFAULT else 0
            return int(c.pick([d if isinstance(d, int) and not isinstance(d, bool) else 0,
                               int(rng.integers(-r, r))], 0.5))
        if role == "squeeze":
            ones = [k for k, x in enumerate(s) if x == 1]
            return c.pick([[], ones[:1]] if ones else [[]], 0.5)
        if role == "num":
            ax = c.values.get("axis", 0)
            return c.dim(ax if isinstance(ax, int) else 0, 1) if r else 1
        if role == "num_split":
            ss = next((c.values[i.kw] for i in self.p.inputs if i.role == "size_splits" and i.kw in c.values), None)
            if isinstance(ss, list):
                return len(ss)
            ax = c.values.get("axis", 0)
            dd = c.dim(ax if isinstance(ax, int) else 0, 1)
            divs = _divisors(dd)
            return int(c.pick(divs[1:] + divs[:1] if len(divs) > 1 else divs, 0.6))
        if role == "num_partitions":
            return int(c.pick([2, 3], 0.5))
        if role == "seq_dim":
            return 1 if r > 1 else 0
        if role == "batch_dim":
            return 0
        if role == "block_size":
            return 2
        if role == "k_attr":
            last = s[-1] if s else 1
            return int(rng.integers(1, last + 1)) if not c.first else min(2, last)
        if role == "flag":
            return bool(c.pick([d if isinstance(d, bool) else False, not d if isinstance(d, bool) else True], 0.5))
        if role == "shape_attr":
            if self.p.name == "ParallelConcat":
                vals = c.values.get("values")
                n = len(vals) if isinstance(vals, list) else 2
                return [n * (s[0] if s else 1)] + s[1:]
            return s
        if role == "equation":
            return c.values.get("equation", "ij->ji")
        if role == "boundaries":
            return c.pick([[-1.0, 0.0, 1.0], [0.0], [-0.5, 0.5, 2.0, 3.0]], 0.5)
        if role == "interpolation":
            return c.pick(a.allowed or _INTERP, 0.6)
        if role == "kernel_type":
            return c.pick(["lanczos3", "triangle", "gaussian", "box"], 0.5)
        if role == "noise":
            return "uniform" if d is _NODEFAULT else d
        if role == "mode":
            opts = list(a.allowed) or (["REFLECT", "SYMMETRIC"] if d is _NODEFAULT else [d])
            if d is not _NODEFAULT and d in opts:
                opts = [d] + [x for x in opts if x != d]
            return c.pick(opts, 0.5)
        if role == "window_size":
            return 4
        if role == "stride":
            return 2
        if role == "small_count":
            return 1
        if role == "qbound":
            return float(d) if d is not _NODEFAULT else (-6.0 if a.name == "min" else 6.0)
        if role == "last_axis":
            return -1
        if role == "format_string":
            return d if d is not _NODEFAULT else "NHWC"
        if role == "dtype":
            opts = [x for x in (a.allowed or SUPPORTED) if x in SUPPORTED]
            if d is not _NODEFAULT:
                opts = [d] + [x for x in opts if x != d]
            if not opts:
                return d if d is not _NODEFAULT else _NODEFAULT
            if self.p.name == "Bitcast":
                return c.pick([x for x in opts if x.startswith(("int", "uint", "float"))] or opts, 0.3)
            used = set(c.dtypes.values())  # a cast to the input's own dtype is no cast: other dtypes first
            return c.pick(sorted(opts, key=lambda t: (t != d, t in used, SUPPORTED.index(t))), 0.5)
        # no role: the default, another allowed value, a flipped flag
        if a.type == "bool":
            base = d if isinstance(d, bool) else False
            return bool(c.pick([base, not base], 0.7))
        if a.allowed and a.type == "string":
            opts = ([d] if d is not _NODEFAULT else []) + [x for x in a.allowed if x != d]
            return c.pick(opts, 0.6)
        if d is _NODEFAULT:
            if a.allowed:
                return c.pick(list(a.allowed), 0.6)
            raise _Skip(f"unknown-attr:{a.name}")
        return d

    # -- the call ----------------------------------------------------------------------------------------------
    def _finish(self) -> _Cand:
        c, p = self.c, self.p
        kwargs: dict[str, Any] = {}
        consts: dict[str, Any] = {}
        for inp in p.inputs:
            v = c.values.get(inp.kw, _NODEFAULT)
            if v is _NODEFAULT:
                raise _Skip(f"unfilled:{inp.kw}")
            kwargs[inp.kw] = v
            if not isinstance(v, (_Rt, list)) or (isinstance(v, list) and not any(isinstance(x, _Rt) for x in v)):
                consts[inp.kw] = v
        runtime = [k for k, v in kwargs.items() if isinstance(v, _Rt) or
                   (isinstance(v, list) and v and isinstance(v[0], _Rt))]
        arrays = [x.array for v in kwargs.values() for x in (v if isinstance(v, list) else [v]) if isinstance(x, _Rt)]
        if c.domain in _FLOAT_ONLY_DOMAINS and not any(_floatish(str(a.dtype)) for a in arrays) \
                or not self.domain_used:
            c.domain = "normal"  # integer / bool data, or no data input drawn from the domain at all
        runtime_arg = None
        if not runtime:
            # no runtime input at all: the first index / scalar argument becomes one (a model has an input)
            order = sorted((i for i in p.inputs if i.kw in consts),
                           key=lambda i: ({"indices": 0, "scalar": 1, "counts_data": 2}.get(i.role, 3)))
            if not order:
                raise _Skip("no-runtime-input")
            self._to_runtime(order[0], kwargs, consts)
            runtime_arg = order[0].kw
        elif not c.first and c.rng.random() < 0.22:
            cands = [i for i in p.inputs if i.kw in consts and i.role in _RUNTIME_OK]
            if cands:
                inp = cands[int(c.rng.integers(0, len(cands)))]
                if self._to_runtime(inp, kwargs, consts):
                    runtime_arg = inp.kw
        for a in p.attrs:
            if a.name in c.values and not a.name.startswith("_"):
                kwargs[a.name] = c.values[a.name]
                consts[a.name] = c.values[a.name]
        kwargs = {k: kwargs[k] for k in [i.kw for i in p.inputs] + [a.name for a in p.attrs] if k in kwargs}
        detail = self._detail(kwargs, consts, runtime_arg)
        return _Cand(self.index, kwargs, {k: v for k, v in consts.items()}, c.domain, runtime_arg, detail)

    def _to_runtime(self, inp: _In, kwargs: dict, consts: dict) -> bool:
        v = consts[inp.kw]
        dtype = _const_dtype(self.c, inp)
        if inp.role in _INDEX_ROLES and not dtype.startswith(("int", "uint")):
            dtype = "int32" if "int32" in inp.allowed else next((t for t in inp.allowed if t.startswith("int")),
                                                                inp.allowed[0])
        try:
            arr = np.asarray(v, dtype=dtype)
        except (TypeError, ValueError):
            return False
        if arr.dtype == object:
            return False
        kwargs[inp.kw] = _Rt(arr)
        del consts[inp.kw]
        return True

    def _detail(self, kwargs: dict, consts: dict, runtime_arg: str | None) -> str:
        parts = []
        for k, v in kwargs.items():
            if isinstance(v, _Rt):
                parts.append(f"{k}:{_spec(v.array)}")
            elif isinstance(v, list) and v and isinstance(v[0], _Rt):
                parts.append(f"{k}:[{','.join(_spec(x.array) for x in v)}]")
        text = " ".join(parts)
        if self.c.domain != "normal":
            text += f" {self.c.domain}"
        for note in dict.fromkeys(self.c.notes):  # spd, well-conditioned
            text += f" {note}"
        shown = []
        for k, v in consts.items():
            a = self.p.attr(k)
            if a is not None and a.default is not _NODEFAULT and a.default == v:
                continue
            js = json.dumps(v, separators=(",", ":"))
            shown.append(f"{k}={js if len(js) <= 32 else js[:29] + '...'}")
        if shown:
            text += " " + " ".join(shown)
        if runtime_arg:
            text += f" runtime:{runtime_arg}"
        return text


def _spec(a: np.ndarray) -> str:
    return f"{a.dtype}{list(a.shape)}".replace(" ", "")


# -- validation ----------------------------------------------------------------------------------------------------

MAX_OUTPUT_ELEMENTS = 200_000


def _flatten(out) -> list:
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _flatten(o)]
    return [out]


def _call(fn, kwargs: dict):
    """``fn(**kwargs)`` with the runtime inputs as tensors (as a model's inputs are: with numpy arrays instead, raw
    ops infer a type attribute from the Python constants, e.g. Range's Tidx as int32 beside a float32 start)."""
    tf = _tf()

    def tensor(x):
        return tf.constant(x.array) if isinstance(x, _Rt) else x
    py = {k: ([tensor(x) for x in v] if isinstance(v, list) and any(isinstance(x, _Rt) for x in v) else tensor(v))
          for k, v in kwargs.items()}
    return fn(**py)


def _static_check(fn, kwargs: dict) -> str | None:
    """Build the call in a graph first: TensorFlow's shape functions reject most invalid arguments there, where some
    kernels would abort the process on them (oneDNN convolutions and pooling CHECK-fail on wrong ranks)."""
    tf = _tf()

    def const(v):
        if isinstance(v, _Rt):
            return tf.constant(v.array)
        if isinstance(v, list) and v and isinstance(v[0], _Rt):
            return [tf.constant(x.array) for x in v]
        return v

    try:
        with tf.Graph().as_default():
            fn(**{k: const(v) for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 - the op's shape function or attr checks reject the arguments
        return f"rejected-static:{type(e).__name__}"
    return None


def _check(name: str, cand: _Cand) -> tuple[list[np.ndarray] | None, str | None]:
    """Build the candidate in a graph, then run it eagerly twice: (outputs, None) or (None, reason)."""
    import warnings
    tf = _tf()
    fn = getattr(tf.raw_ops, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reason = _static_check(fn, cand.kwargs)
    if reason:
        return None, reason
    outs = []
    for _ in range(2):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                res = _call(fn, cand.kwargs)
                flat = _flatten(res)
                arrays = []
                for t in flat:
                    if not hasattr(t, "numpy") or not getattr(t, "dtype", None) or \
                            not (t.dtype.is_floating or t.dtype.is_integer or t.dtype.is_bool or t.dtype.is_complex) \
                            or t.dtype.is_quantized:
                        return None, "non-numeric-output"
                    arrays.append(np.asarray(t.numpy()))
        except Exception as e:  # noqa: BLE001 - TensorFlow rejects the arguments
            return None, f"rejected:{type(e).__name__}"
        outs.append(arrays)
    first, second = outs
    if not first:
        return None, "no-output"
    if any(a.dtype == object or a.dtype.kind not in "biufc" for a in first):
        return None, "non-numeric-output"
    if all(a.size == 0 for a in first):
        return None, "empty-output"
    if sum(a.size for a in first) > MAX_OUTPUT_ELEMENTS:
        return None, "output-too-large"
    from dlci.models import unspecified_outputs
    unspecified = unspecified_outputs(f"tf::{name}")
    for k, (a, b) in enumerate(zip(first, second)):
        if k in unspecified:  # contents unspecified (SelfAdjointEigV2's v without compute_v): never compared
            continue
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            return None, "nondeterministic"
    floats = [a for a in first if a.dtype.kind in "fc" and a.size]
    if floats and all(np.isnan(a).all() for a in floats) and len(floats) == len([a for a in first if a.size]):
        return None, "all-nan-output"
    return first, None


def instance_outputs(inst: Instance) -> list[np.ndarray] | None:
    """A tf_ops instance (or one derived from it, e.g. moved to a domain edge) validated as its candidate was: built
    in a graph, run eagerly twice; its outputs, or None where TensorFlow rejects it or the runs differ."""
    arrays = inst.input_arrays()

    def decode(v):
        if isinstance(v, dict) and "$t" in v:
            return _Rt(arrays[v["$t"]])
        if isinstance(v, list) and v and all(isinstance(x, dict) and "$t" in x for x in v):
            return [_Rt(arrays[x["$t"]]) for x in v]
        return v
    cand = _Cand(0, {k: decode(v) for k, v in inst.call.get("kwargs", {}).items()}, {}, "", None, "")
    outs, _ = _check(inst.call["fn"].rsplit(".", 1)[-1], cand)
    return outs


# -- choosing the kept candidates ----------------------------------------------------------------------------------

def _features(cand: _Cand) -> frozenset:
    from dlci.instance import value_partition
    f = {f"domain:{cand.domain}"}
    for k, v in cand.kwargs.items():
        if isinstance(v, _Rt):
            f.add(f"{k}:{v.array.dtype}:r{v.array.ndim}")
        elif isinstance(v, list) and v and isinstance(v[0], _Rt):
            f.add(f"{k}:{v[0].array.dtype}:r{v[0].array.ndim}:n{len(v)}")
    for k, v in cand.params.items():
        f.add(f"{k}={value_partition(v)}")
    if cand.runtime_arg:
        f.add(f"runtime:{cand.runtime_arg}")
    return frozenset(f)


def select(valid: list[tuple[_Cand, list[np.ndarray]]], cap: int) -> list[tuple[_Cand, list[np.ndarray]]]:
    """At most ``cap`` of the valid candidates, greedily the ones adding the most new features; boundary value
    domains at most a third of them, NaN/Inf ones at most an eighth (at least one)."""
    covered: set = set()
    chosen: list = []
    left = list(valid)
    n_boundary = n_nonfinite = 0
    max_boundary, max_nonfinite = max(1, cap // 3), max(1, cap // 8)
    if left and left[0][0].index == 0 and cap > 0:  # the plain float32 case first, where it is valid
        chosen.append(left.pop(0))
        covered |= chosen[0][0].features
    while left and len(chosen) < cap:
        best, best_score = None, None
        for k, (cand, outs) in enumerate(left):
            if cand.domain in BOUNDARY_DOMAINS and n_boundary >= max_boundary:
                continue
            if cand.domain in NONFINITE and n_nonfinite >= max_nonfinite:
                continue
            new = len(cand.features - covered)
            nan_out = cand.domain not in NONFINITE and any(
                a.dtype.kind in "fc" and a.size and np.isnan(a).any() for a in outs)
            score = (new - (3 if nan_out else 0), -cand.index)
            if best_score is None or score > best_score:
                best, best_score = k, score
        if best is None:
            break
        cand, outs = left.pop(best)
        chosen.append((cand, outs))
        covered |= cand.features
        n_boundary += cand.domain in BOUNDARY_DOMAINS
        n_nonfinite += cand.domain in NONFINITE
    return sorted(chosen, key=lambda co: co[0].index)


def _json_value(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    return v


def to_instance(name: str, cand: _Cand, outs: list[np.ndarray], version: str) -> Instance:
    arrays: dict[str, np.ndarray] = {}
    call_kwargs: dict[str, Any] = {}

    def slot(a: np.ndarray) -> dict:
        i = sum(1 for k in arrays if k.startswith("in:"))
        arrays[f"in:{i}"] = np.require(a, requirements="C").copy()
        return {"$t": i}

    for k, v in cand.kwargs.items():
        if isinstance(v, _Rt):
            call_kwargs[k] = slot(v.array)
        elif isinstance(v, list) and v and isinstance(v[0], _Rt):
            call_kwargs[k] = [slot(x.array) for x in v]
        else:
            call_kwargs[k] = _json_value(v)
    n_in = len(arrays)
    for j, o in enumerate(outs):
        arrays[f"expected:{j}"] = np.require(o, requirements="C").copy()
    return Instance(op=f"tf::{name}", framework="keras",
                    call={"kind": "tf_fn", "fn": f"tf.raw_ops.{name}", "kwargs": call_kwargs},
                    inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(n_in)],
                    params={k: _json_value(v) for k, v in cand.params.items()},
                    origin=Origin("tf_ops", f"{name}#{cand.index} {cand.detail}".strip(), f"tensorflow {version}"),
                    seed=stable_seed("tf_ops", name, str(cand.index)), arrays=arrays)


# -- worker jobs ---------------------------------------------------------------------------------------------------

def catalog_job(payload: dict, *, stage_hook=None) -> dict:
    """Engine job: every raw op with its generated-module name and the reason it is skipped (None: harvested)."""
    tf = _tf()
    out = []
    for name in sorted(n for n in dir(tf.raw_ops) if not n.startswith("_")):
        try:
            reason = op_reason(name)
        except Exception as e:  # noqa: BLE001 - an odd OpDef: skip it, say why
            reason = f"opdef-error:{type(e).__name__}"
        out.append({"name": name, "module": _gen_module(getattr(tf.raw_ops, name)), "skip": reason})
    return {"ops": out, "version": tf.__version__}


def _cand_key(cand: _Cand) -> str:
    """Identity of a candidate's call: keywords, constants and the exact runtime arrays."""
    import hashlib

    def enc(v):
        if isinstance(v, _Rt):
            a = np.require(v.array, requirements="C")
            return f"{_spec(a)}:{hashlib.sha1(a.tobytes()).hexdigest()}"
        if isinstance(v, list) and v and isinstance(v[0], _Rt):
            return [enc(x) for x in v]
        return v
    return json.dumps({k: enc(v) for k, v in cand.kwargs.items()}, sort_keys=True, default=str)


def harvest_op(name: str, *, cap: int, candidates: int, skip=(), hook=None) -> tuple[list[Instance], dict]:
    """At most ``cap`` validated instances of raw op ``name`` from ``candidates`` generated ones."""
    tf = _tf()
    dropped: collections.Counter = collections.Counter()
    try:
        p = plan(name)
    except _Skip as e:
        return [], {"op_skip": e.reason, "dropped": {}, "tried": 0}
    valid: list = []
    seen: set = set()
    tried = 0
    for i in range(candidates):
        if f"{name}#{i}" in skip:  # a candidate that killed a worker before
            continue
        try:
            cand = _Builder(p, i).build()
        except _Skip as e:
            dropped[f"unbuilt:{e.reason}"] += 1
            continue
        except Exception as e:  # noqa: BLE001 - a role that does not fit this operator's arguments
            dropped[f"unbuilt:{type(e).__name__}"] += 1
            continue
        key = _cand_key(cand)
        if key in seen:
            dropped["duplicate-candidate"] += 1
            continue
        seen.add(key)
        tried += 1
        if hook is not None:
            hook(f"candidate {name}#{i}")
        outs, reason = _check(name, cand)
        if reason:
            dropped[reason] += 1
            continue
        cand.features = _features(cand)
        valid.append((cand, outs))
    kept = select(valid, cap)
    dropped["not-selected"] += len(valid) - len(kept)
    insts = [to_instance(name, cand, outs, tf.__version__) for cand, outs in kept]
    return insts, {"dropped": dict(dropped), "tried": tried, "valid": len(valid), "module": p.module,
                   "op_skip": None if kept else "no-valid-candidate"}


def harvest_job(payload: dict, *, stage_hook=None) -> dict:
    """Engine job (``dlci.sources.tf_ops:harvest_job``): :func:`harvest_op` in a sandboxed worker, plain data back."""
    insts, stats = harvest_op(payload["op"], cap=payload["cap"], candidates=payload["candidates"],
                              skip=set(payload.get("skip", ())), hook=stage_hook)
    return {"instances": [[i.to_meta(), dict(i.arrays)] for i in insts], "stats": stats}


# -- the source ----------------------------------------------------------------------------------------------------

def _strip(name: str) -> str:
    s = name.strip()
    for p in ("tf::", "tensorflow::", "tf.raw_ops.", "raw_ops.", "tflite::", "tf.compat.v1.", "tf."):
        if s.startswith(p):
            s = s[len(p):]
    return s.rsplit(".", 1)[-1]


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@register
class TfOpsSource(Source):
    name = "tf_ops"
    framework = "keras"
    description = "TensorFlow raw ops (tf.raw_ops), one call each, arguments derived from the registered OpDefs"
    default_limit_per_op = None  # None: variants_per_op
    per_op = True  # `ops` given: only those operators are harvested (gather passes the wanted ones)
    variants_per_op = 8
    candidates_per_op = 48
    workers = 2
    job_timeout = 180.0  # one operator's candidates in a worker
    max_rounds = 6  # re-runs of an operator whose worker died (each without the candidates that killed it)
    warm_imports = ("tensorflow",)
    # (test hook) Engine job function per operator: "module:function"
    job_func = f"{__name__}:harvest_job"

    def library_versions(self) -> dict[str, str]:
        v = dist_version("tensorflow")
        return {"tensorflow": v if v != "missing" else dist_version("tensorflow-cpu")}

    def cache_extra(self) -> dict:
        return {"variants_per_op": self.variants_per_op, "candidates_per_op": self.candidates_per_op,
                "job": self.job_func}

    def wants(self, raw: str) -> bool:
        """Whether raw op ``raw`` is among ``self.ops`` (raw, ``tf::X``, canonical or TFLite spellings)."""
        if self.ops is None:
            return True
        own = {_squash(raw), _squash(re.sub(r"V\d+$", "", raw))}
        for o in self.ops:
            if _squash(_strip(o)) in own:
                return True
        from dlci import operators
        try:
            return bool(operators.select([f"tf::{raw}"], set(self.ops)))
        except Exception:  # noqa: BLE001 - identity tables unavailable: names only
            return False

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        import os
        from dlci.exec import Engine, Job
        cap = limit_per_op if limit_per_op is not None else self.variants_per_op
        t0 = time.monotonic()
        results: dict[str, list[Instance]] = {}
        modules: dict[str, str] = {}
        self.stats["crashes"] = []
        self.stats["candidates"] = {"tried": 0, "valid": 0}
        with Engine(workers=max(1, min(self.workers, os.cpu_count() or 1)), timeout=self.job_timeout,
                    warm_imports=self.warm_imports + (__name__,)) as eng:
            catalog: dict = {}

            def on_catalog(job, res):
                catalog.update(res)

            info = eng.run([Job(id="catalog", func=f"{__name__}:catalog_job", args=({},), op="catalog",
                                instance_id="catalog", target=self.name)], on_catalog)
            if info.interrupted:
                raise InterruptedError(f"{self.name} harvest interrupted ({info.reason})")
            if "ops" not in catalog:
                raise RuntimeError(f"{self.name}: listing the raw ops failed: {catalog.get('message', catalog)}")
            todo = []
            for entry in catalog["ops"]:
                if not self.wants(entry["name"]):
                    continue
                modules[entry["name"]] = entry["module"]
                if entry["skip"]:
                    self.skip(f"op:{entry['skip']}")
                else:
                    todo.append(entry["name"])
            self.stats["ops_considered"] = len(modules)
            order = list(todo)

            def on_done(op, res) -> bool:
                if "instances" not in res:
                    return False
                results[op] = [Instance.from_meta(m, a) for m, a in res["instances"]]
                st = res["stats"]
                for reason, n in st.get("dropped", {}).items():
                    if reason != "not-selected":
                        self.skip(reason, n)
                if st.get("dropped", {}).get("nondeterministic"):  # two eager runs disagreed
                    self.stats.setdefault("nondeterministic_ops", {})[op] = st["dropped"]["nondeterministic"]
                self.stats["candidates"]["tried"] += st.get("tried", 0)
                self.stats["candidates"]["valid"] += st.get("valid", 0)
                if st.get("op_skip"):
                    self.skip(f"op:{st['op_skip']}")
                return True

            harvest_in_workers(self, eng, todo, lambda op, skip: {"op": op, "cap": cap,
                                                                  "candidates": self.candidates_per_op,
                                                                  "skip": skip},
                               on_done, job_func=self.job_func, max_rounds=self.max_rounds)
        per_module: dict[str, dict[str, int]] = {}
        for op, mod in modules.items():
            m = per_module.setdefault(mod, {"ops": 0, "harvested_ops": 0, "instances": 0})
            m["ops"] += 1
            if results.get(op):
                m["harvested_ops"] += 1
                m["instances"] += len(results[op])
        self.stats["modules"] = dict(sorted(per_module.items()))
        self.stats["ops_without_instances"] = sorted(op for op in order if not results.get(op))
        self.stats["harvest_seconds"] = round(time.monotonic() - t0, 1)
        for op in order:
            yield from results.get(op, [])


__all__ = ["TfOpsSource", "plan", "op_reason", "harvest_op", "harvest_job", "catalog_job", "select",
           "instance_outputs", "value_domains", "EXCLUDED", "INPUT_ROLES", "DATA_ROLES", "ATTR_ROLES", "VALUE_DOMAINS"]
