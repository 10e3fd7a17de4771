"""References: what an instance's outputs should be, by the framework it comes from (:func:`reference`: the source
framework's outputs, flattened to numpy, and an fp64 recomputation that arbitrates rounding), and, for an instance
that reaches a target through an exporter, the exported model's own (:func:`exported_reference`, evaluated as ONNX
defines it: :func:`evaluate_onnx`). Cached with the instance's model forms (:func:`dlci.models.cached`).
"""
from __future__ import annotations

import copy

import numpy as np

from dlci.instance import Instance
from dlci.models import (_keras_layer, _torch_module, build, cached, call_layer, keras_inputs, onnx_input_names, quiet,
                         seed_all, tflite_outputs, torch_inputs)
from dlci.models.convert import flatten_outputs
from dlci.models.onnx_io import widen_to_float64

__all__ = ["ReferenceError_", "reference", "exported_reference", "evaluate_onnx", "exported_outputs"]


class ReferenceError_(Exception):
    """The reference itself could not be computed (the test is invalid)."""


def reference(instance: Instance) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """(ref, ref64): the source framework's outputs (flattened to numpy) and an fp64 recomputation or None.

    Raises ReferenceError_ when the reference cannot be computed.
    """
    def make():
        seed_all(instance.seed)
        try:
            with quiet():
                return _REFERENCES[instance.framework](instance)
        except Exception as e:
            raise ReferenceError_(f"{type(e).__name__}: {e}") from e
    return cached(instance, "reference", make)


def _torch_reference(instance: Instance):
    import torch
    module = _torch_module(instance)
    with torch.no_grad():
        ref = flatten_outputs(module(*torch_inputs(instance)))
    ref64 = None
    try:
        ref64 = _torch_reference64(instance, module)
    except Exception:  # many ops have no float64 kernel or reject mixed dtypes: no arbitration then
        ref64 = None
    if ref64 is not None and [r.shape for r in ref64] != [r.shape for r in ref]:
        ref64 = None
    return ref, ref64


_UP = {"float16": "float64", "bfloat16": "float64", "float32": "float64", "complex64": "complex128"}


def _torch_reference64(instance: Instance, module):
    import torch
    tensors = torch_inputs(instance)
    up = [_UP.get(str(t.dtype).split(".")[1]) for t in tensors]
    has_float_params = any(p.is_floating_point() and p.dtype != torch.float64
                           for p in list(module.parameters()) + list(module.buffers()))
    if not any(up) and not has_float_params:
        return None  # nothing to recompute in higher precision
    m64 = copy.deepcopy(module).to(torch.float64)  # casts floating parameters/buffers only
    tensors = [t.to(getattr(torch, u)) if u else t for t, u in zip(tensors, up)]
    seed_all(instance.seed)
    with torch.no_grad():
        return flatten_outputs(m64(*tensors))


def _onnx_reference(instance: Instance):
    model = build(instance, "onnx")
    expected = instance.expected_arrays()
    if expected is not None:
        ref = [np.asarray(e) for e in expected]
    else:
        from onnx.reference import ReferenceEvaluator
        sess = ReferenceEvaluator(model)
        ref = [np.asarray(o) for o in sess.run(None, _onnx_feed(model, instance.input_arrays()))]
    ref64 = None
    try:
        ref64 = _onnx_reference64(model, instance.input_arrays())
    except Exception:
        ref64 = None
    if ref64 is not None and [r.shape for r in ref64] != [r.shape for r in ref]:
        ref64 = None
    return ref, ref64


def exported_reference(instance: Instance, form: str, ref: list[np.ndarray], ref64: list[np.ndarray] | None
                       ) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """The reference of an instance that reaches a target through an exporter (a torch instance exported to ONNX):
    the exported model evaluated as its format defines it (ONNX Runtime, onnx.reference where ORT has no kernel),
    with an fp64 evaluation of the exported model to arbitrate (the source framework's fp64 result otherwise). When
    no evaluator runs the exported model, the source framework's own reference stays."""
    if form != "onnx":
        return ref, ref64

    def make():
        try:
            got, got64 = evaluate_onnx(build(instance, "onnx"), instance.input_arrays())
        except Exception:
            return ref, ref64
        return exported_outputs(ref, ref64, got, got64)
    return cached(instance, "reference:" + form, make)


def evaluate_onnx(model, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """(outputs, fp64 outputs or None) of an ONNX model as its format defines it: ONNX Runtime, or onnx.reference
    where ORT has no kernel; raises when neither runs it."""
    try:
        got = _ort_outputs(model, arrays)
    except Exception:  # no ORT kernel for this op/dtype: the specification's own evaluator
        from onnx.reference import ReferenceEvaluator
        got = [np.asarray(o) for o in ReferenceEvaluator(model).run(None, _onnx_feed(model, arrays))]
    try:
        got64 = _onnx_reference64(model, arrays)
    except Exception:
        got64 = None
    return got, got64


def exported_outputs(ref: list[np.ndarray], ref64: list[np.ndarray] | None, got: list[np.ndarray],
                     got64: list[np.ndarray] | None) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """What an exported model's evaluation (``got``, ``got64``) makes of the source framework's reference: the
    exported model's outputs with their fp64 arbitration (the source's fp64 result where the exported one is
    missing); the source's own reference when the output structures differ (no common ground to judge by)."""
    if len(got) != len(ref):
        return ref, ref64
    if got64 is None or [g.shape for g in got64] != [g.shape for g in got]:
        got64 = ref64 if ref64 is not None and [r.shape for r in ref64] == [g.shape for g in got] else None
    return got, got64


def _ort_outputs(model, arrays: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return [np.asarray(o) for o in sess.run(None, dict(zip(names, arrays)))]


def _onnx_feed(model, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
    names = onnx_input_names(model)
    if len(names) != len(arrays):
        raise ValueError(f"model has {len(names)} inputs, instance {len(arrays)}")
    return dict(zip(names, arrays))


def _onnx_reference64(model, arrays):
    """Evaluate a copy of the model with every float32 tensor widened to float64 (None if there are none)."""
    from onnx.reference import ReferenceEvaluator
    m = widen_to_float64(model)
    if m is None:
        return None
    arrays64 = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
    out = ReferenceEvaluator(m).run(None, _onnx_feed(m, arrays64))
    return [np.asarray(o) for o in out]


def _keras_reference(instance: Instance):
    layer = _keras_layer(instance)
    xs = keras_inputs(instance)
    ref = flatten_outputs(call_layer(instance, layer, xs))
    ref64 = None
    try:
        ref64 = _keras_reference64(instance, layer, xs)
    except Exception:
        ref64 = None
    if ref64 is not None and [r.shape for r in ref64] != [r.shape for r in ref]:
        ref64 = None
    return ref, ref64


def _keras_reference64(instance: Instance, layer, xs):
    if instance.call["kind"] == "tf_fn":  # the op itself in float64, where it has a float64 kernel
        if not any(x.dtype.kind == "f" and x.dtype != np.float64 for x in xs):
            return None
        return flatten_outputs(call_layer(instance, layer, [x.astype(np.float64) if x.dtype.kind == "f" else x
                                                            for x in xs]))
    config = dict(layer.get_config())
    config["dtype"] = "float64"
    layer64 = type(layer).from_config(config)
    xs64 = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in xs]
    call_layer(instance, layer64, xs64)  # builds the weights
    weights = layer.get_weights()
    if weights:
        layer64.set_weights([w.astype(np.float64) if w.dtype.kind == "f" else w for w in weights])
    return flatten_outputs(call_layer(instance, layer64, xs64))


def _tflite_reference(instance: Instance):
    """A TFLite model means what its own interpreter computes (the format's reference, as ONNX's is onnx.reference):
    a quantized model's integer arithmetic has no float64 recomputation to arbitrate with."""
    expected = instance.expected_arrays()
    if expected is not None:
        return [np.asarray(e) for e in expected], None
    return tflite_outputs(build(instance, "tflite"), instance.input_arrays()), None


_REFERENCES = {"torch": _torch_reference, "onnx": _onnx_reference, "keras": _keras_reference,
               "tflite": _tflite_reference}
