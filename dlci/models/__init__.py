"""Model templates: turn one operator instance into each model form a target consumes, plus its reference.

``FORMS[name](instance)`` builds a form; use :func:`build` to get it cached per instance within the process
(a worker runs many targets on the same instance). A builder failure raises :class:`FormUnavailable`: the test
is then invalid for that target, not a target bug.

Forms: torch_module, exported_program, fx_graph, onnx, keras_model, saved_model, tflite.
"""
from __future__ import annotations

import contextlib
import copy
import io
import logging
import os
import re
import shutil
import tempfile
import warnings
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from dlci.instance import Instance
from dlci.instance.recipe import VALUES_UNDEFINED, op_base_name
from dlci.models.convert import flatten_outputs, np_to_torch
from dlci.models.onnx_io import load_onnx, widen_to_float64

__all__ = ["FORMS", "FormUnavailable", "ReferenceError_", "build", "reference", "torch_inputs", "keras_inputs",
           "shape_only_outputs", "export_onnx", "keras_to_tflite", "clear_cache", "seed_all", "quiet"]


class FormUnavailable(Exception):
    """The instance cannot be built into this model form (the test is invalid for targets consuming it)."""


class ReferenceError_(Exception):
    """The reference itself could not be computed (the test is invalid)."""


FORMS: dict[str, Callable[[Instance], Any]] = {}
# which instance frameworks each form can be built from
FORM_FRAMEWORKS: dict[str, tuple[str, ...]] = {}

_CACHE_INSTANCES = 4  # instances whose forms stay cached (a worker moves on instance by instance)
_cache: "OrderedDict[str, dict[str, Any]]" = OrderedDict()


def form(name: str, frameworks: tuple[str, ...]):
    def deco(fn):
        FORMS[name] = fn
        FORM_FRAMEWORKS[name] = frameworks
        return fn
    return deco


def _slot(instance: Instance) -> dict[str, Any]:
    slot = _cache.get(instance.id)
    if slot is None:
        slot = _cache[instance.id] = {}
        while len(_cache) > _CACHE_INSTANCES:
            _, old = _cache.popitem(last=False)
            _release(old)
    else:
        _cache.move_to_end(instance.id)
    return slot


def _release(slot: dict[str, Any]) -> None:
    for v in slot.values():
        if isinstance(v, _TempDir):
            v.cleanup()


def clear_cache() -> None:
    while _cache:
        _release(_cache.popitem()[1])
    import sys
    pack = sys.modules.get("dlci.models.pack")
    if pack is not None:  # the worker's last packed export goes with the forms it was made of
        pack._LAST_EXPORT.clear()


def cached(instance: Instance, key: str, make: Callable[[], Any]) -> Any:
    """``make()``'s value for the instance under ``key``, made once while the instance stays in the cache (a
    failure is kept too, and raised again)."""
    slot = _slot(instance)
    if key not in slot:
        try:
            slot[key] = ("ok", make())
        except BaseException as e:  # cache failures too: the same form fails the same way for every target
            if not isinstance(e, Exception):
                raise
            slot[key] = ("err", e)
    status, value = slot[key]
    if status == "err":
        raise value
    return value


def build(instance: Instance, name: str) -> Any:
    """The model form ``name`` of the instance (cached); raises FormUnavailable."""
    if name not in FORMS:
        raise KeyError(f"unknown model form {name!r}")
    if instance.framework not in FORM_FRAMEWORKS[name]:
        raise FormUnavailable(f"form {name} cannot be built from a {instance.framework} instance")

    def make():
        try:
            seed_all(instance.seed)
            with quiet():
                return FORMS[name](instance)
        except FormUnavailable:
            raise
        except Exception as e:
            raise FormUnavailable(f"{name}: {type(e).__name__}: {e}") from e  # testcase trims it
    return cached(instance, "form:" + name, make)


# -- process hygiene ------------------------------------------------------------------------------------------

def seed_torch(seed: int) -> None:
    """torch.manual_seed's effect: on a machine without CUDA, the CPU generator alone. torch.manual_seed there
    queues a seeding for each absent device kind (CUDA, XPU, MTIA) with the formatted stack of its caller, a cost
    that grows with the stack's depth (~1 ms a call from a script, several under pytest)."""
    import torch
    if torch.cuda.is_available():
        torch.manual_seed(seed)  # the GPU's generators too
    else:
        torch.default_generator.manual_seed(seed)


def seed_all(seed: int = 0) -> None:
    np.random.seed(seed % 2**32)
    import random
    random.seed(seed)
    import sys
    if "torch" in sys.modules:
        seed_torch(seed)
    if "keras" in sys.modules:
        import keras
        keras.utils.set_random_seed(seed % 2**32)


@contextlib.contextmanager
def quiet():
    """Silence the chatter of exporters (torch.onnx prints progress, warns about torchvision, ...)."""
    changed = [(lg, lg.level) for lg in map(logging.getLogger, _CHATTY_LOGGERS) if lg.level < logging.ERROR]
    _set_levels([(lg, logging.ERROR) for lg, _ in changed])  # nothing to do when nested in another quiet()
    buf = io.StringIO()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(buf):
            warnings.simplefilter("ignore")
            yield
    finally:
        _set_levels(changed)


_CHATTY_LOGGERS = ("torch.onnx", "torch._dynamo", "torch._inductor", "torch.export", "onnxscript", "tensorflow",
                   "absl")


def _set_levels(levels: list) -> None:
    """Logger.setLevel for each, with the loggers' level cache cleared once, not once per logger (each clear
    walks every logger of the process: a few ms per quiet() with torch, OpenVINO and TVM loaded)."""
    clear = getattr(logging.Logger.manager, "_clear_cache", None)
    for lg, level in levels:
        if clear is None:
            lg.setLevel(level)
        else:
            lg.level = level
    if levels and clear is not None:
        clear()


class _TempDir:
    """A temporary directory owned by the form cache (removed when the instance leaves it)."""

    def __init__(self, prefix: str, sub: str = ""):
        self.path = tempfile.mkdtemp(prefix=prefix)
        self.model_path = os.path.join(self.path, sub) if sub else self.path

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)

    def __fspath__(self):
        return self.model_path

    def __str__(self):
        return self.model_path


# -- torch forms ------------------------------------------------------------------------------------------------

def _rebuilder():
    from dlci.models import rebuild  # lazily: sources import their libraries' test suites
    return rebuild


def torch_inputs(instance: Instance) -> list:
    """Fresh torch tensors for the instance's inputs (a copy per call: ops may write into them)."""
    return [np_to_torch(a) for a in instance.input_arrays()]


def _torch_module(instance: Instance):
    from dlci.models import torch_export
    torch_export.memoise_cia_ops()  # every torch test's model is built here; its exports come after
    return cached(instance, "torch_call", lambda: _rebuilder().torch_call(instance)[0].eval())


@form("torch_module", ("torch",))
def _form_torch_module(instance: Instance):
    return _torch_module(instance)


@form("exported_program", ("torch",))
def _form_exported_program(instance: Instance):
    import torch
    args = tuple(torch_inputs(instance))
    module = _torch_module(instance)
    return torch.export.export(module, args, dynamic_shapes=_dynamic_shapes(instance, module))


def dynamic_axes(instance: Instance) -> list[list[int]] | None:
    """Per input, the dims torch.export takes dynamic for an instance that asks for them (``call["dynamic"]``,
    torch_variants): the leading dim ("batch") or every dim > 1 ("all") of its floating-point inputs."""
    which = instance.call.get("dynamic")
    if not which:
        return None
    return [[axis for axis, size in enumerate(t.shape) if size > 1 and (axis == 0 or which == "all")]
            if str(t.dtype).startswith(("float", "bfloat")) else [] for t in instance.inputs]


def _dynamic_shapes(instance: Instance, module):
    """dynamic_axes as Dim.AUTO: export keeps what the program allows dynamic and specializes the rest, as a user's
    export does. A forward(*tensors) takes them as one tuple."""
    import inspect
    import torch
    axes = dynamic_axes(instance)
    if axes is None:
        return None
    spec = tuple({a: torch.export.Dim.AUTO for a in dims} or None for dims in axes)
    params = list(inspect.signature(module.forward).parameters.values())
    return (spec,) if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL else spec


def dynamic_shapes_code(instance: Instance) -> str:
    """The same, as source for a reproducer's torch.export.export call ("" for a static instance)."""
    axes = dynamic_axes(instance)
    if axes is None:
        return ""
    spec = ", ".join("{" + ", ".join(f"{a}: torch.export.Dim.AUTO" for a in dims) + "}" if dims else "None"
                     for dims in axes)
    return f", dynamic_shapes=({spec},)"


def fixed_arity(module, n: int):
    """Wrap ``module`` (forward(*tensors)) so that forward takes n named arguments: fx tracing needs that."""
    import torch

    names = [f"x{i}" for i in range(n)]
    ns: dict[str, Any] = {}
    exec(f"def forward(self, {', '.join(names)}):\n    return self.inner({', '.join(names)})\n", ns)
    cls = type("FixedArity", (torch.nn.Module,), {"forward": ns["forward"]})
    wrapper = cls()
    wrapper.inner = module
    return wrapper.eval()


@form("fx_graph", ("torch",))
def _form_fx_graph(instance: Instance):
    import torch.fx
    gm = torch.fx.symbolic_trace(fixed_arity(_torch_module(instance), len(instance.inputs)))
    # TVM's from_fx needs [(shape, dtype)] per placeholder
    gm.dlci_input_info = [(list(a.shape), str(a.dtype)) for a in instance.input_arrays()]
    return gm


def export_onnx(module, tensors) -> Any:
    """torch.onnx.export (dynamo exporter) to one in-memory ModelProto; exceptions propagate."""
    import torch
    from dlci.models import torch_export
    torch_export.memoise_cia_ops()
    with quiet(), torch_export.shared_torchlib_registry():
        prog = torch.onnx.export(module, tuple(tensors), dynamo=True, external_data=False, verbose=False)
    return prog.model_proto


@form("onnx", ("torch", "onnx"))
def _form_onnx(instance: Instance):
    if instance.framework == "onnx":
        import onnx
        return onnx.load_from_string(np.asarray(instance.arrays["model"]).tobytes())
    from dlci.models import store

    def describe(e: BaseException):
        return ("err", type(e).__name__, str(e)) if store.lasting(e) else None

    def revive(entry):
        raise store.failure(entry[1], entry[2])
    return store.onnx_export("onnx", [instance], lambda: export_onnx(_torch_module(instance), torch_inputs(instance)),
                             describe, revive)


# -- keras forms ------------------------------------------------------------------------------------------------

def keras_inputs(instance: Instance) -> list[np.ndarray]:
    return [np.array(a, copy=True) for a in instance.input_arrays()]


def _keras_layer(instance: Instance):
    return cached(instance, "keras_call", lambda: _rebuilder().keras_call(instance)[0])


def call_layer(instance: Instance, layer, xs: list):
    """Call the layer as the recipe says: ``args`` (default: the inputs in order) with tensors decoded from ``xs``
    (merge layers such as Add take one list argument)."""
    from dlci.instance import decode_value
    args = instance.call.get("args", [{"$t": i} for i in range(len(xs))])
    return layer(*decode_value(args, list(xs)))


@form("keras_model", ("keras",))
def _form_keras_model(instance: Instance):
    import keras
    arrays = instance.input_arrays()
    # the batch size is fixed so that TFLite and OpenVINO see fully static shapes
    ins = [keras.Input(shape=a.shape[1:], batch_size=a.shape[0], dtype=str(a.dtype), name=f"in{i}")
           for i, a in enumerate(arrays)]
    return keras.Model(ins, call_layer(instance, _keras_layer(instance), ins))


@form("saved_model", ("keras",))
def _form_saved_model(instance: Instance):
    """A SavedModel directory (os.fspath() of the result) inside a temp dir owned by the cache."""
    model = build(instance, "keras_model")
    d = _TempDir("dlci-sm-", sub="m")
    try:
        model.export(d.model_path, format="tf_saved_model", verbose=False)
    except Exception:
        d.cleanup()
        raise
    return d


def keras_to_tflite(model) -> bytes:
    """TFLiteConverter on a keras model (builtin ops only); exceptions propagate."""
    import tensorflow as tf
    with quiet():
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        return bytes(conv.convert())


@form("tflite", ("keras", "tflite"))
def _form_tflite(instance: Instance):
    if instance.framework == "tflite":
        return bytes(np.asarray(instance.arrays["model"]).tobytes())
    return keras_to_tflite(build(instance, "keras_model"))


def tflite_output_order(buf: bytes) -> list[int] | None:
    """Where a keras model's outputs went in its TFLite conversion: position ``j`` holds the index, among the model's
    subgraph outputs (what an interpreter or a TFLite frontend returns, in order), of keras output ``j``. The converter
    orders subgraph outputs as it likes; the signature names them ``output_<j>``. None: one output or no such names."""
    import tensorflow as tf
    with quiet():
        interp = tf.lite.Interpreter(model_content=buf)
        signatures = interp._get_full_signature_list()
        order = [d["index"] for d in interp.get_output_details()]
    if len(order) < 2 or len(signatures) != 1:
        return None
    named = next(iter(signatures.values()))["outputs"]
    if not all(re.fullmatch(r"output_\d+", n) for n in named) or sorted(named.values()) != sorted(order):
        return None
    perm = [order.index(named[n]) for n in sorted(named, key=lambda n: int(n.split("_")[1]))]
    return None if perm == list(range(len(perm))) else perm


def keras_output_order(instance: Instance) -> list[int] | None:
    """:func:`tflite_output_order` of a keras instance's TFLite form (cached with it)."""
    if instance.framework != "keras":
        return None
    return cached(instance, "tflite_output_order", lambda: tflite_output_order(build(instance, "tflite")))


def tflite_outputs(buf: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The TFLite interpreter (single-threaded) on a model, inputs in the model's own input order."""
    import tensorflow as tf
    with quiet():
        interp = tf.lite.Interpreter(model_content=buf, num_threads=1)
        interp.allocate_tensors()
        for d, x in zip(interp.get_input_details(), inputs):
            interp.set_tensor(d["index"], np.require(x, requirements="C"))
        interp.invoke()
        return [np.array(interp.get_tensor(d["index"]), copy=True) for d in interp.get_output_details()]


# -- references ------------------------------------------------------------------------------------------------

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


KEEP_PARAMS_KEY = "dlci.keep_params_in_input"  # ONNX metadata: import with the initializers as function inputs


def onnx_keeps_params(model) -> bool:
    """Whether the model asks converters that can to keep its initializers as inputs (TVM's keep_params_in_input,
    how TVM's own tests and users who ship weights separately import a model)."""
    return any(p.key == KEEP_PARAMS_KEY and p.value == "true" for p in model.metadata_props)


def onnx_input_names(model) -> list[str]:
    """Graph inputs that are fed at run time (initializers with the same name are not)."""
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


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


# -- outputs that must not be compared by value ----------------------------------------------------------------

# operator base name -> output positions that hold indices (ties make their values arbitrary)
_INDEX_OUTPUTS = {
    "argmax": {0}, "argmin": {0}, "argsort": {0}, "sort": {1}, "topk": {1}, "kthvalue": {1}, "mode": {1},
    "median": {1}, "nanmedian": {1}, "max": {1}, "min": {1}, "cummax": {1}, "cummin": {1},
    "unique": {1, 2}, "unique_consecutive": {1}, "max_pool1d_with_indices": {1},
    "max_pool2d_with_indices": {1}, "max_pool3d_with_indices": {1}, "adaptive_max_pool1d": {1},
    "adaptive_max_pool2d": {1}, "adaptive_max_pool3d": {1}, "max_pool1d": {1}, "max_pool2d": {1},
    "max_pool3d": {1}, "fractional_max_pool2d": {1}, "fractional_max_pool3d": {1},
    # ONNX, and TensorFlow raw ops
    "ArgMax": {0}, "ArgMin": {0}, "TopK": {1}, "Unique": {1, 2}, "MaxPool": {1},
    "TopKV2": {1}, "UniqueV2": {1}, "UniqueWithCounts": {1, 2}, "UniqueWithCountsV2": {1, 2},
    "MaxPoolWithArgmax": {1},
}
# top-k without sorting: the order of the values is implementation-defined too
_UNSORTED_TOPK = {"topk", "TopK", "TopKV2"}


# operator base name -> outputs that are implementation-defined and not compared at all: the statistics the
# native normalisation kernels save for backward (empty in eval mode in eager PyTorch, anything elsewhere)
_UNCOMPARED_OUTPUTS = {"native_batch_norm": {1, 2}, "_native_batch_norm_legit": {1, 2},
                       "_native_batch_norm_legit_no_training": {1, 2}, "native_group_norm": {1, 2},
                       "native_layer_norm": {1, 2}, "_batch_norm_with_update": {1, 2, 3},
                       # TensorFlow: reserve spaces are for the kernel's own gradient, their contents unspecified
                       # (XLA and the CPU kernel fill them differently, V3's third is uninitialised)
                       "FusedBatchNorm": {3, 4}, "FusedBatchNormV2": {3, 4}, "FusedBatchNormV3": {3, 4, 5},
                       # singular / eigen vectors are unique only up to sign (and rotation in repeated eigenvalues)
                       "Svd": {1, 2}, "SelfAdjointEigV2": {1}}


QUANTIZED_DTYPES = ("int8", "uint8", "int16")


def quantized_outputs(instance: Instance, ref: list[np.ndarray]) -> set[int]:
    """Outputs of a quantized TFLite model that hold quantized values: implementations may round a value to the
    neighbouring step (TFLite's own kernels differ by one step between reference and optimised paths)."""
    if instance.framework != "tflite":
        return set()
    return {i for i, r in enumerate(ref) if np.asarray(r).dtype.name in QUANTIZED_DTYPES}


def uncompared_outputs(instance: Instance) -> set[int]:
    graph = _output_producers(instance)
    if graph is not None:  # a graph of several operators: by the operator that computes each output
        return {j for j, p in enumerate(graph) if p is not None and p[1] in unspecified_outputs(p[0])}
    return unspecified_outputs(instance.op)


def _output_producers(instance: Instance) -> list[tuple[str, int, dict] | None] | None:
    """For a graph of several operators (onnx_model, torch_graph): per graph output, (operator, output position,
    attributes) of the node that computes it (None for an input passed through); None for a single operator, whose
    instance's operator and parameters speak for its outputs. A graph instance's ``op`` is one of its operators:
    its index outputs are not the graph's (a TopK before a Cast would leave the Cast's output unjudged)."""
    kind = instance.call.get("kind")
    if kind == "torch_graph":
        spec = instance.call.get("graph") or {}
        nodes = [(n.get("op", ""), list(n.get("outputs", [])), dict(n.get("attrs") or {}))
                 for n in spec.get("nodes", [])]
        outputs = list(spec.get("outputs", []))
    elif kind == "onnx_model" and "model" in instance.arrays:
        from onnx import helper
        model = load_onnx(instance.arrays)
        if len(model.graph.node) < 2:
            return None
        nodes = [(n.op_type, list(n.output), {a.name: helper.get_attribute_value(a) for a in n.attribute
                                               if a.name == "sorted"}) for n in model.graph.node]
        outputs = [o.name for o in model.graph.output]
    else:
        return None
    if len(nodes) < 2:
        return None
    where = {y: (op, j, attrs) for op, ys, attrs in nodes for j, y in enumerate(ys) if y}
    return [where.get(o) for o in outputs]


def unspecified_outputs(op: str) -> set[int]:
    """Output positions of operator ``op`` ("tf::SelfAdjointEigV2", "aten::native_batch_norm") whose contents are
    unspecified."""
    return set(_UNCOMPARED_OUTPUTS.get(op_base_name(op), set()))


def shape_only_outputs(instance: Instance, n_outputs: int | None = None) -> set[int]:
    """Output positions that must be compared by shape and dtype only: index outputs of argmax, sort, topk, max(dim)
    ...; every output of an operator whose values are undefined (empty, empty_like, new_empty, empty_strided)."""
    graph = _output_producers(instance)
    if graph is not None:  # a graph of several operators: by the operator that computes each output
        positions = {j for j, p in enumerate(graph) if p is not None and (
            p[1] in _INDEX_OUTPUTS.get(p[0], ()) or
            (p[0] in _UNSORTED_TOPK and p[1] == 0 and p[2].get("sorted") in (0, False)))}
        return {p for p in positions if n_outputs is None or p < n_outputs}
    base = op_base_name(instance.op)
    if base in VALUES_UNDEFINED:
        return set(range(n_outputs if n_outputs is not None else 1))
    if instance.framework == "torch" and instance.op.startswith("nn::"):
        # module classes: MaxPool2d(return_indices=True), AdaptiveMaxPool2d(...)
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()  # MaxPool2d -> max_pool2d
    positions = set(_INDEX_OUTPUTS.get(base, set()))
    if base in _UNSORTED_TOPK and instance.params.get("sorted") is False:
        positions.add(0)
    if instance.framework == "torch" and instance.call.get("kind") == "torch_fn":
        fn = instance.call.get("fn", "").rsplit(".", 1)[-1]
        positions |= _INDEX_OUTPUTS.get(fn.rstrip("_"), set())
    if n_outputs is not None:
        # max/min without dim return one value output: nothing to skip then
        positions = {p for p in positions if p < n_outputs}
    return positions
