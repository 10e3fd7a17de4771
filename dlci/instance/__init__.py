"""Operator instances: one concrete usage of one operator, harvested from a library's own tests.

An instance is plain data (JSON-able fields plus named numpy arrays) so that it can be cached on disk,
sent to a sandboxed worker, and rendered into a standalone reproducer.

The ``call`` recipe says how to rebuild the operator call in its source framework:

- ``{"kind": "torch_fn", "fn": "torch.nn.functional.elu", "args": [...], "kwargs": {...}}``
- ``{"kind": "torch_module", "cls": "torch.nn.Conv2d", "args": [...], "kwargs": {...},
   "forward_args": [...], "forward_kwargs": {...}}`` (weights in arrays ``state:<name>``)
- ``{"kind": "onnx_model"}`` (the ModelProto bytes in array ``model``; graph inputs in order)
- ``{"kind": "keras_layer", "cls": "keras.layers.Conv2D", "config": {...}}`` (weights in ``weight:<i>``)
- ``{"kind": "tf_fn", "fn": "tf.raw_ops.StridedSlice", "kwargs": {...}}`` (framework keras: one TensorFlow op call)
- ``{"kind": "tflite_model", "variant": ...}`` (framework tflite: the flatbuffer bytes in array ``model``, inputs in the
  model's own input order, as its interpreter takes them: a quantized model's are int8/uint8)

Argument values are encoded with :func:`encode_value`: a tensor argument is ``{"$t": i}`` (the i-th input),
other non-JSON values carry a ``$``-tag. Arrays: inputs ``in:<i>``, expected outputs ``expected:<i>``.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

FRAMEWORKS = ("torch", "onnx", "keras", "tflite")


@dataclass
class TensorSpec:
    shape: list[int]
    dtype: str  # numpy-style name: float32, float64, int64, bool, complex64, float16, bfloat16, ...
    low: float | None = None  # observed value domain of the concrete input (finite values only)
    high: float | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @classmethod
    def of(cls, array: np.ndarray) -> "TensorSpec":
        low = high = None
        if array.size and array.dtype.kind in "biuf":
            finite = array[np.isfinite(array)] if array.dtype.kind == "f" else array
            if finite.size:
                low, high = float(finite.min()), float(finite.max())
        return cls(list(array.shape), dtype_name(array.dtype), low, high)


@dataclass
class Origin:
    source: str  # registry name of the source: opinfo, module_db, onnx_node, harvest
    test: str  # which test of the library produced it (e.g. "op_db:nn.functional.elu#3")
    library: str = ""  # library and version the test came from, e.g. "torch 2.13.0"


@dataclass
class Instance:
    op: str  # canonical operator id: aten::avg_pool2d, onnx::Elu, nn::Conv2d, keras::Conv2D
    framework: str  # torch | onnx | keras | tflite: how the model is built and what the reference is
    call: dict
    inputs: list[TensorSpec]
    params: dict[str, Any]  # non-tensor settings, JSON-encoded, used for value-space partitioning
    origin: Origin
    seed: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    id: str = ""

    def __post_init__(self):
        if self.framework not in FRAMEWORKS:
            raise ValueError(f"unknown framework {self.framework!r}")
        if not self.id:
            self.id = self.compute_id()

    def compute_id(self) -> str:
        h = hashlib.sha1()
        h.update(json.dumps([self.op, self.framework, self.call, [dataclasses.asdict(s) for s in self.inputs],
                             self.params], sort_keys=True, default=str).encode())
        for name in sorted(self.arrays):
            a = np.require(self.arrays[name], requirements="C")
            h.update(name.encode()); h.update(str(a.dtype).encode()); h.update(str(a.shape).encode())
            h.update(a.tobytes())
        short = self.op.replace("::", "-").replace(".", "_").replace("/", "_")
        return f"{short}-{h.hexdigest()[:10]}"

    def size(self) -> int:
        """Input elements in all: the smallest failing instance makes the most readable reproducer."""
        return sum(math.prod(s.shape) for s in self.inputs)

    def input_arrays(self) -> list[np.ndarray]:
        return [self.arrays[f"in:{i}"] for i in range(len(self.inputs))]

    def expected_arrays(self) -> list[np.ndarray] | None:
        names = sorted((k for k in self.arrays if k.startswith("expected:")), key=lambda k: int(k.split(":")[1]))
        return [self.arrays[k] for k in names] or None

    # -- (de)serialisation ---------------------------------------------------------------------------
    def to_meta(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("arrays")
        return d

    @classmethod
    def from_meta(cls, meta: dict, arrays: dict[str, np.ndarray] | None = None) -> "Instance":
        meta = dict(meta)
        meta["inputs"] = [TensorSpec(**s) for s in meta["inputs"]]
        meta["origin"] = Origin(**meta["origin"])
        arrays = dict(arrays or {})
        for i, spec in enumerate(meta["inputs"]):
            a = arrays.get(f"in:{i}")
            if spec.dtype == "bfloat16" and a is not None and a.dtype.kind == "V":  # npz keeps ml_dtypes as raw bytes
                import ml_dtypes
                arrays[f"in:{i}"] = a.view(ml_dtypes.bfloat16)
        return cls(**meta, arrays=arrays)

    def arrays_npz(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, **{k: v for k, v in self.arrays.items()})
        return buf.getvalue()


def dtype_name(dtype) -> str:
    """numpy-style name for numpy, ml_dtypes and torch dtypes."""
    s = str(dtype)
    return s.replace("torch.", "")


# -- arrays an instance can hold ----------------------------------------------------------------------

# numpy dtypes an instance may carry: they survive npz without pickling and every framework here reads them.
STORABLE_KINDS = "biuf"


class Unencodable(TypeError):
    """A value that cannot become part of an instance; ``reason`` is the stats key it is counted under."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


def to_numpy(t: Any, detach: bool = False) -> np.ndarray:
    """A torch tensor or numpy array as a plain numpy array, or :class:`Unencodable` with a reason.

    ``detach``: accept tensors that require grad (an instrumented suite's activations), keeping only the data.
    """
    if isinstance(t, np.ndarray):
        a = t
    else:
        import torch
        if not isinstance(t, torch.Tensor):
            raise Unencodable("unencodable-arg", f"not a tensor: {type(t).__name__}")
        if t.layout != torch.strided or t.is_sparse:
            raise Unencodable("sparse-tensor")
        if t.is_quantized:
            raise Unencodable("quantized-tensor")
        if t.is_complex():
            raise Unencodable("complex-tensor")
        if t.requires_grad and not detach:
            raise Unencodable("requires-grad")
        if t.is_nested or type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            raise Unencodable("tensor-subclass", type(t).__name__)
        if t.dtype in (torch.bfloat16,) or str(t.dtype).startswith("torch.float8"):
            raise Unencodable(f"unsupported-dtype:{str(t.dtype).replace('torch.', '')}")
        a = t.detach().cpu().resolve_conj().resolve_neg().numpy()
    if a.dtype.kind not in STORABLE_KINDS:
        raise Unencodable(f"unsupported-dtype:{a.dtype}")
    return np.require(a, requirements="C").copy()


# -- encoding of non-tensor argument values ------------------------------------------------------------

def encode_value(value: Any, tensor_slot) -> Any:
    """JSON-encode an argument. ``tensor_slot(t)`` registers a tensor input and returns its index.

    Raises TypeError for values that cannot be rebuilt in another process (callables, generators, ...).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return {"$float": repr(value)}
        return value
    if isinstance(value, complex):
        return {"$complex": [encode_value(value.real, tensor_slot), encode_value(value.imag, tensor_slot)]}
    if isinstance(value, (list, tuple)):
        items = [encode_value(v, tensor_slot) for v in value]
        return items if isinstance(value, list) else {"$tuple": items}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("dict with non-string keys")
        return {"$dict": {k: encode_value(v, tensor_slot) for k, v in value.items()}}
    if isinstance(value, np.ndarray):
        return {"$t": tensor_slot(value)}
    mod = type(value).__module__ or ""
    if mod.startswith("torch"):
        import torch
        if isinstance(value, torch.Tensor):
            return {"$t": tensor_slot(value)}
        if isinstance(value, torch.dtype):
            return {"$dtype": dtype_name(value)}
        if isinstance(value, torch.Size):
            return list(value)
        if isinstance(value, (torch.memory_format, torch.layout)):
            return {"$torch": str(value)}  # e.g. "torch.channels_last"
        if isinstance(value, torch.device):
            return {"$device": str(value)}
    if isinstance(value, np.generic):
        return encode_value(value.item(), tensor_slot)
    raise TypeError(f"cannot encode argument of type {type(value).__name__}")


def decode_value(value: Any, tensors: list) -> Any:
    """Inverse of :func:`encode_value`; ``tensors`` holds the already-built framework tensors."""
    if isinstance(value, list):
        return [decode_value(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if "$t" in value:
        return tensors[value["$t"]]
    if "$float" in value:
        return float(value["$float"])
    if "$complex" in value:
        re, im = (decode_value(v, tensors) for v in value["$complex"])
        return complex(re, im)
    if "$tuple" in value:
        return tuple(decode_value(v, tensors) for v in value["$tuple"])
    if "$dict" in value:
        return {k: decode_value(v, tensors) for k, v in value["$dict"].items()}
    if "$dtype" in value:
        import torch
        return getattr(torch, value["$dtype"])
    if "$torch" in value:
        import torch
        return getattr(torch, value["$torch"].split(".", 1)[1])
    if "$device" in value:
        import torch
        return torch.device(value["$device"])
    raise ValueError(f"unknown encoded value {value!r}")


def python_literal(value: Any) -> str:
    """Source text that rebuilds an encoded value in a reproducer (tensors are named ``x<i>``)."""
    if isinstance(value, list):
        return "[" + ", ".join(python_literal(v) for v in value) + "]"
    if not isinstance(value, dict):
        return repr(value)
    if "$t" in value:
        return f"x{value['$t']}"
    if "$float" in value:
        return f"float({value['$float']!r})"
    if "$complex" in value:
        re, im = (python_literal(v) for v in value["$complex"])
        return f"complex({re}, {im})"
    if "$tuple" in value:
        items = [python_literal(v) for v in value["$tuple"]]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if "$dict" in value:
        return "{" + ", ".join(f"{k!r}: {python_literal(v)}" for k, v in value["$dict"].items()) + "}"
    if "$dtype" in value:
        return f"torch.{value['$dtype']}"
    if "$torch" in value:
        return value["$torch"]
    if "$device" in value:
        return f"torch.device({value['$device']!r})"
    raise ValueError(f"unknown encoded value {value!r}")


# -- OPERA value-space partitioning ----------------------------------------------------------------------

def _int_part(v: int) -> str:
    if v in (-1, 0, 1, 2):
        return str(v)
    return "neg" if v < 0 else "large"


def _float_part(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    if v in (1.0, -1.0):
        return str(v)
    mag = "(0,1)" if abs(v) < 1 else ">1"
    return ("-" if v < 0 else "+") + mag


def value_partition(value: Any) -> str:
    """The OPERA partition a non-tensor argument value falls into."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return "int:" + _int_part(value)
    if isinstance(value, float):
        return "float:" + _float_part(value)
    if isinstance(value, str):
        return "enum:" + value
    if isinstance(value, list):
        parts = sorted({value_partition(v) for v in value})
        return f"list{len(value) if len(value) <= 4 else 'N'}:" + "|".join(parts)
    if isinstance(value, dict):
        if "$t" in value:
            return "tensor"
        if "$float" in value:
            return "float:" + _float_part(float(value["$float"]))
        if "$tuple" in value:
            return value_partition(list(value["$tuple"]))
        for tag in ("$dtype", "$torch", "$device"):
            if tag in value:
                return "enum:" + str(value[tag])
        if "$complex" in value:
            return "complex"
        if "$dict" in value:
            return "dict"
    return type(value).__name__


def tensor_partition(spec: TensorSpec) -> str:
    rank = spec.rank if spec.rank <= 5 else ">5"
    empty = ",empty" if any(d == 0 for d in spec.shape) else ""
    return f"{spec.dtype}×r{rank}{empty}"


def variant_kind(inst: Instance) -> str | None:
    """The way a variant source re-presented its base case (``exported_params``, ``scalar_operand``…), else None."""
    if inst.call.get("variant"):
        return inst.call["variant"]
    m = re.search(r" \[(\w+): ", inst.origin.test) if inst.origin.source.endswith("_variants") else None
    return m.group(1) if m else None


def family(inst: Instance) -> tuple[str, str]:
    """What a test stands for when one of them runs a changed line: a variant kind across operators (the way of
    presenting an operator reached the change), else the source's cases of that operator."""
    kind = variant_kind(inst)
    return (inst.origin.source, kind) if kind else (inst.origin.source, inst.op)


def features(inst: Instance) -> frozenset[str]:
    """The value-space partitions one instance covers (used for diversity and its measurement)."""
    out = {f"in{i}:{tensor_partition(s)}" for i, s in enumerate(inst.inputs)}
    out.add(f"arity:{len(inst.inputs)}")
    kind = variant_kind(inst)
    if kind:
        out.add(f"variant:{kind}")
    for name, value in _flatten_params(inst.params):
        out.add(f"{name}={value_partition(value)}")
    return frozenset(out)


def _flatten_params(params: dict, prefix: str = "") -> Iterable[tuple[str, Any]]:
    for k, v in params.items():
        if isinstance(v, dict) and "$dict" in v:
            yield from _flatten_params(v["$dict"], f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def is_float_dtype(dtype: str) -> bool:
    return dtype in ("float16", "bfloat16", "float32", "float64") or dtype.startswith("float8")
