"""onnxscript's torchlib called directly: the function registered for an ATen overload, traced into an ONNX model
the way ``torch.onnx`` traces it for one FX node, checked strictly and run by ONNX Runtime.

``torch.onnx`` decomposes many operators before dispatching (chunk, unfold, the window functions, im2col in some
releases), so a torchlib function can be broken while every export of its operator passes; torchlib's own tests
call the functions on OpInfo samples for that reason, and so does this target (form ``aten_call``).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.targets._common import onnx_fingerprint, onnx_nodes
from dlci.targets.base import Target, register
from dlci.targets.onnxruntime import ort_run, ort_session, ort_unsupported

OPSET = 18  # torch.onnx's default opset for torchlib


class NotRegistered(LookupError):
    """torchlib registers no function for the overload: the target does not support the operator."""


class OutsideSignature(TypeError):
    """An input's element type is outside the function's type constraint. torch.onnx casts such inputs before it
    dispatches (its type promotion), so the function never sees them: unsupported, not a bug."""


def _refused_input(function, args: list, kwargs: dict) -> str | None:
    """Why the function's signature refuses the traced arguments (an element type its constraint leaves out)."""
    import onnx_ir as ir
    signature = getattr(function, "op_signature", None)
    if signature is None:
        return None
    bound = dict(zip((p.name for p in signature.params), args))
    bound.update(kwargs)
    for param in signature.params:
        constraint = getattr(param, "type_constraint", None)
        value = bound.get(param.name)
        values = value if isinstance(value, (list, tuple)) else [value]
        if constraint is None or not all(isinstance(v, ir.Value) for v in values if v is not None):
            continue
        allowed = {getattr(t, "dtype", None) for t in constraint.allowed_types}
        for v in values:
            if v is not None and v.dtype is not None and v.dtype not in allowed:
                return (f"{param.name} is {v.dtype.name}, outside {constraint.name} of "
                        f"{getattr(function, 'name', '')}")
    return None


def _onnx_dtype(name: str):
    """The ONNX element type of a torch dtype's name ("float32", "bool"...), as torch.onnx maps it."""
    import torch
    from torch.onnx._internal.exporter._core import torch_dtype_to_onnx_dtype
    return torch_dtype_to_onnx_dtype(getattr(torch, name))


def _python_arg(value):
    """A non-tensor argument as torch.onnx hands it to torchlib: dtypes as ONNX types, devices/layouts as text."""
    import torch
    from torch.onnx._internal.exporter._core import torch_dtype_to_onnx_dtype
    if isinstance(value, (list, tuple)):
        return [_python_arg(v) for v in value]
    if isinstance(value, torch.dtype):
        return torch_dtype_to_onnx_dtype(value)
    if isinstance(value, (torch.device, torch.memory_format, torch.layout)):
        return str(value)
    return value


def functions_for(qualified: str, complex_inputs: bool = False) -> list:
    """Every torchlib function the checkout registers for ``aten::name[.overload]``, in the registry's order (an
    operator with an int and a float implementation has two)."""
    import importlib
    from onnxscript.function_libs.torch_lib.registration import default_registry
    importlib.import_module("onnxscript.function_libs.torch_lib.ops")  # importing the ops modules registers them
    if qualified not in default_registry:
        raise NotRegistered(f"torchlib registers no function for {qualified}")
    entry = default_registry[qualified]
    funcs = entry.complex if complex_inputs else entry.overloads
    if not funcs:
        raise NotRegistered(f"torchlib registers no {'complex ' if complex_inputs else ''}function for {qualified}")
    return list(funcs)


def trace(call, inputs: Sequence[np.ndarray]):
    """The ONNX model (onnx.ModelProto) of torchlib's function for ``call`` (an :class:`AtenCall`) on inputs like
    ``inputs``: graph input i is the instance's input i; outputs typed as torch's outputs are."""
    import onnx_ir as ir
    import onnxscript
    from onnxscript import evaluator
    from torch.onnx._internal.exporter import _building, _ir_passes, _tensors
    from dlci.instance import decode_value

    functions = functions_for(call.qualified)
    opset = onnxscript.values.Opset("", OPSET)
    graph = ir.Graph((), (), nodes=(), opset_imports={"": OPSET}, name="main_graph")
    symbols = []
    for i, x in enumerate(inputs):
        value = _tensors.SymbolicTensor(opset=opset, name=f"input_{i}", shape=ir.Shape(list(x.shape)),
                                        type=ir.TensorType(ir.DataType.from_numpy(x.dtype)))
        graph.inputs.append(value)
        symbols.append(value)
    args = _python_arg(decode_value(call.args, symbols))
    kwargs = {k: _python_arg(decode_value(v, symbols)) for k, v in call.kwargs.items()}
    if "dtype" in kwargs and kwargs["dtype"] is None:
        kwargs["dtype"] = -1  # what torch.onnx passes for an explicit dtype=None
    # the first function whose signature takes the arguments' element types, as torchlib's type-based dispatch
    # chose among an operator's functions (torch.onnx now takes the first: torchlib no longer registers more than
    # one, but a checkout may, and a PR that drops the int one drops int support)
    refusals = [_refused_input(f, args, kwargs) for f in functions]
    if all(refusals):
        raise OutsideSignature(f"{call.qualified}: {refusals[0]}")
    function = functions[refusals.index(None)]
    recorder = _building.OpRecorder(opset, {})
    with evaluator.default_as(recorder):
        results = function(*args, **kwargs)
    results = list(results) if isinstance(results, (tuple, list)) else [results]
    specs = call.outputs
    if len(specs) == 1 and specs[0].items is not None and len(results) == len(specs[0].items) != 1:
        specs = specs[0].items  # a Tensor[] return as separate values (Split with num_outputs), not a sequence
    if len(results) != len(specs):
        torch_count = sum(len(s.items) if s.items is not None else 1 for s in call.outputs)
        raise ValueError(f"{call.qualified}: torchlib's function returns {len(results)} values, torch "
                         f"{torch_count} tensor(s)")
    for value, spec in zip(results, specs):
        if not isinstance(value, ir.Value):
            raise TypeError(f"{call.qualified}: torchlib's function returned {type(value).__name__}, not a value")
        if spec.items is not None:
            dtypes = {s.dtype for s in spec.items}
            value.type = ir.SequenceType(ir.TensorType(_onnx_dtype(dtypes.pop() if len(dtypes) == 1 else "")))
        else:
            value.shape = ir.Shape(spec.shape)
            value.dtype = _onnx_dtype(spec.dtype)
    graph.outputs.extend(results)
    graph.extend(recorder.nodes)
    model = ir.Model(graph, ir_version=10, producer_name="dlci")
    for identifier, fn in recorder.functions.items():
        model.functions[identifier] = fn if isinstance(fn, ir.Function) else \
            ir.serde.deserialize_function(fn.to_function_proto())
    _ir_passes.add_opset_imports(model)
    return ir.to_proto(model)


@register
class Torchlib(Target):
    name = "onnxscript.torchlib"
    frameworks = ("torch",)
    form = "aten_call"
    package = "onnxscript"
    modules = ("onnxscript", "onnx_ir")
    reaches = ("onnxscript:torchlib",)  # (ONNX Runtime's kernels: torch.onnx and onnxruntime test those)
    # complex tensors cross torchlib as real pairs (a convention of its complex functions), not as ONNX complex
    unsupported_dtypes = ("complex64", "complex128", "complex32")

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        if stage != "convert":
            return ort_unsupported(exc)
        return any(isinstance(e, (NotRegistered, OutsideSignature)) or type(e).__name__ == "NotImplementedError" for e in chain(exc))

    def convert(self, call: Any, inputs: Sequence[np.ndarray]) -> Any:
        from dlci.models.onnx_io import check_strict
        model = trace(call, inputs)
        check_strict(model)  # torchlib's functions must make valid ONNX, not only models ORT tolerates
        return model

    def compile(self, model: Any) -> Any:
        return ort_session(model)

    def fingerprint(self, converted: Any) -> str | None:
        return onnx_fingerprint(converted)

    def graph_nodes(self, converted: Any) -> list[str] | None:
        return onnx_nodes(converted)

    def run(self, sess: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if not any(o.type.startswith("seq(") for o in sess.get_outputs()):
            return ort_run(sess, inputs)
        names = [i.name for i in sess.get_inputs()]
        flat: list[np.ndarray] = []
        for out in sess.run(None, dict(zip(names, inputs))):
            flat.extend(np.asarray(o) for o in out) if isinstance(out, list) else flat.append(np.asarray(out))
        return flat
