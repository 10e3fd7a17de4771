"""Model templates: turn one operator instance into each model form a target consumes.

``FORMS[name](instance)`` builds a form; use :func:`build` to get it cached per instance within the process
(a worker runs many targets on the same instance). A builder failure raises :class:`FormUnavailable`: the test
is then invalid for that target, not a target bug.

Forms: torch_module, exported_program, fx_graph, aten_call (one ATen overload call), onnx, keras_model, saved_model, tflite. What an instance's outputs
should be is :mod:`dlci.models.references`; which of them are compared how, :mod:`dlci.models.outputs`.
"""
from __future__ import annotations

import contextlib
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
from dlci.models.convert import np_to_torch

__all__ = ["FORMS", "FormUnavailable", "build", "torch_inputs", "keras_inputs", "export_onnx", "keras_to_tflite",
           "clear_cache", "seed_all", "quiet"]


class FormUnavailable(Exception):
    """The instance cannot be built into this model form (the test is invalid for targets consuming it)."""


FORMS: dict[str, Callable[[Instance], Any]] = {}
# which instance frameworks each form can be built from
FORM_FRAMEWORKS: dict[str, tuple[str, ...]] = {}
# per form, why an instance of those frameworks can never be built into it, said from the instance alone: the plan
# sends it to no target consuming the form (torchlib's aten_call took nn.Module instances, each an invalid test in
# the slot of a valid one)
FORM_REFUSES: dict[str, Callable[[Instance], str | None]] = {}

_CACHE_INSTANCES = 4  # instances whose forms stay cached (a worker moves on instance by instance)
_cache: "OrderedDict[str, dict[str, Any]]" = OrderedDict()


def form(name: str, frameworks: tuple[str, ...], refuses: Callable[[Instance], str | None] | None = None):
    def deco(fn):
        FORMS[name] = fn
        FORM_FRAMEWORKS[name] = frameworks
        if refuses is not None:
            FORM_REFUSES[name] = refuses
        return fn
    return deco


def refused(instance: Instance, name: str | None) -> str | None:
    """Why the model form ``name`` can never be built from the instance, known without building it; None: it may
    be (building it is the test's first step)."""
    check = FORM_REFUSES.get(name) if name else None
    return check(instance) if check is not None else None


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
    if instance.call.get("kind") == "torch_exported":  # the program the repository's test exported, as it was
        from dlci.models.recorded import exported_program
        return exported_program(instance)
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


def _not_an_aten_call(instance: Instance) -> str | None:
    from dlci.models.aten_call import not_an_aten_call
    return not_an_aten_call(instance)


@form("aten_call", ("torch",), refuses=_not_an_aten_call)
def _form_aten_call(instance: Instance):
    from dlci.models.aten_call import aten_call
    return aten_call(instance)


@form("fx_graph", ("torch",))
def _form_fx_graph(instance: Instance):
    import torch.fx
    kind = instance.call.get("kind")
    if kind == "torch_exported":
        raise FormUnavailable("a recorded exported program has no torch.fx graph of its own (its nodes are ATen's)")
    if kind == "torch_fx":  # the graph the repository's test traced, as it was
        gm = _torch_module(instance)
        gm.dlci_input_info = [(list(a.shape), str(a.dtype)) for a in instance.input_arrays()]
        return gm
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


KEEP_PARAMS_KEY = "dlci.keep_params_in_input"  # ONNX metadata: import with the initializers as function inputs


def onnx_keeps_params(model) -> bool:
    """Whether the model asks converters that can to keep its initializers as inputs (TVM's keep_params_in_input,
    how TVM's own tests and users who ship weights separately import a model)."""
    return any(p.key == KEEP_PARAMS_KEY and p.value == "true" for p in model.metadata_props)


def onnx_input_names(model) -> list[str]:
    """Graph inputs that are fed at run time (initializers with the same name are not)."""
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


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
