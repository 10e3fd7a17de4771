"""pytest plugin that records the operator calls a test suite makes (``-p dlci.sources.harvest_plugin``).

Run by :class:`dlci.sources.harvest.Harvest` in a subprocess. At ``pytest_configure`` it patches, in memory only:

- public functions of ``torch.nn.functional`` and the public ``torch.*`` tensor functions;
- ``torch.nn.Module.__call__`` for torch's built-in modules (constructor arguments are captured by wrapping the
  built-in classes' ``__init__``);
- ``keras.src.layers.layer.Layer.__call__`` for keras' built-in layers;
- ``onnx.helper.make_node`` (counted) and ``onnx.helper.make_model`` (single-node models with typed inputs).

Only the outermost recorded call is kept (a thread-local guard hides the calls it makes). Each record is
appended to ``$DLCI_HARVEST_OUT.jsonl`` with its arrays in ``$DLCI_HARVEST_OUT.bin`` (``np.save`` bytes at the
offsets the JSON line names) and both are flushed at once, so a suite that crashes keeps every finished record.
"""
from __future__ import annotations

import collections
import functools
import hashlib
import inspect
import io
import json
import os
import threading

import numpy as np

_guard = threading.local()
_REC: "Recorder | None" = None


def _busy() -> bool:
    return getattr(_guard, "depth", 0) > 0


class _Guarded:
    def __enter__(self):
        _guard.depth = getattr(_guard, "depth", 0) + 1

    def __exit__(self, *exc):
        _guard.depth -= 1


def _current_test() -> str:
    cur = os.environ.get("PYTEST_CURRENT_TEST", "")
    return cur.rsplit(" ", 1)[0] if cur else "<collection>"


class Recorder:
    def __init__(self, prefix: str, cap: int | None, max_elems: int, ops: set[str] | None):
        self.meta = open(prefix + ".jsonl", "a", encoding="utf-8")
        self.blob = open(prefix + ".bin", "ab")
        self.cap, self.max_elems, self.ops = cap, max_elems, ops
        self.seen: set[str] = set()
        self.per_op: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()  # every observed call, kept or not
        self.skipped: collections.Counter = collections.Counter()
        self.events = 0

    # -- bookkeeping ------------------------------------------------------------------------------------
    def wants(self, op: str) -> bool:
        """Count the call; False when it is filtered out or its op is full already (saves encoding it)."""
        self.calls[op] += 1
        if self.ops is not None and op not in self.ops and op.split("::", 1)[-1] not in self.ops:
            return False
        if self.cap is not None and self.per_op[op] >= self.cap:
            self.skip("over-cap")
            return False
        return True

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1
        self._tick()

    def _tick(self) -> None:
        self.events += 1
        if self.events % 200 == 0:
            self.write_stats()

    def write_stats(self) -> None:
        line = {"$stats": {"skipped": dict(self.skipped), "calls": dict(self.calls)}}
        self.meta.write(json.dumps(line) + "\n")
        self.meta.flush()

    # -- records ---------------------------------------------------------------------------------------
    def emit(self, record: dict, arrays: dict[str, np.ndarray]) -> None:
        h = hashlib.sha1(json.dumps([record["op"], record["call"], record["params"]], sort_keys=True,
                                    default=str).encode())
        for name in sorted(arrays):
            a = arrays[name]
            h.update(name.encode()); h.update(str(a.dtype).encode()); h.update(str(a.shape).encode())
            h.update(np.require(a, requirements="C").tobytes())
        key = h.hexdigest()
        if key in self.seen:
            return self.skip("duplicate")
        self.seen.add(key)
        record["test"] = _current_test()
        record["seed"] = int.from_bytes(bytes.fromhex(key[:8]), "little") & 0x7FFFFFFF
        refs = {}
        for name, a in arrays.items():
            if a.size > self.max_elems and name != "model":
                # too big to keep: the parent regenerates it from the seed inside the observed value range
                refs[name] = {"generate": _spec(a)}
                continue
            buf = io.BytesIO()
            np.save(buf, np.require(a, requirements="C"), allow_pickle=False)
            self.blob.seek(0, os.SEEK_END)
            refs[name] = {"offset": self.blob.tell(), "nbytes": buf.tell()}
            self.blob.write(buf.getvalue())
        self.blob.flush()
        record["arrays"] = refs
        self.meta.write(json.dumps(record) + "\n")
        self.meta.flush()
        self.per_op[record["op"]] += 1
        self._tick()

    def close(self) -> None:
        self.write_stats()
        self.meta.close()
        self.blob.close()


def _spec(a: np.ndarray) -> dict:
    from dlci.instance import TensorSpec
    s = TensorSpec.of(a)
    return {"shape": s.shape, "dtype": s.dtype, "low": s.low, "high": s.high}


def _record_call(op: str, build, call_orig):
    """Run ``call_orig`` under the guard; ``build()`` (before the call: inputs may be mutated in place) returns
    ``(record, arrays, check_output)`` or raises Unencodable; ``check_output(out)`` returns a skip reason."""
    from dlci.instance import Unencodable
    rec = _REC
    with _Guarded():
        prepared = None
        if rec is not None and rec.wants(op):
            try:
                prepared = build()
            except Unencodable as e:
                rec.skip(e.reason)
            except Exception as e:  # noqa: BLE001 - never break the suite because of the recorder
                rec.skip(f"record-error:{type(e).__name__}")
        try:
            out = call_orig()
        except BaseException:
            if prepared is not None:
                rec.skip("call-raised")
            raise
        if prepared is not None:
            record, arrays, check = prepared
            try:
                reason = check(out)
                if reason:
                    rec.skip(reason)
                else:
                    rec.emit(record, arrays)
            except Exception as e:  # noqa: BLE001
                rec.skip(f"record-error:{type(e).__name__}")
        return out


# -- torch -----------------------------------------------------------------------------------------------

# torch.* / F.* names that are not operators on tensors (helpers, factories, in-place, uninitialised memory).
_TORCH_SKIP = {"tensor", "as_tensor", "asarray", "from_numpy", "from_file", "frombuffer", "is_tensor", "is_storage",
               "numel", "is_floating_point", "is_complex", "is_nonzero", "is_same_size", "result_type", "can_cast",
               "promote_types", "set_grad_enabled", "is_grad_enabled", "is_inference_mode_enabled", "get_default_dtype",
               "empty", "empty_like", "empty_strided", "empty_permuted", "is_conj", "is_neg", "is_inference",
               "is_signed", "is_distributed", "get_device", "handle_torch_function", "has_torch_function",
               "has_torch_function_unary", "has_torch_function_variadic", "boolean_dispatch", "assert_int_or_pair",
               "fork", "wait", "save", "load", "compile", "vmap", "cond", "chunk_size", "typename",
               "broadcast_shapes", "manual_seed", "seed", "initial_seed", "set_printoptions"}
_TRAIN_SENSITIVE = ("Dropout", "BatchNorm", "InstanceNorm", "RReLU", "FractionalMaxPool", "SyncBatchNorm")
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict", "Module", "Container"}


def _torch_targets():
    """(namespace, attribute, dotted path, op id) of every torch function to wrap."""
    import torch
    import torch.nn.functional as F
    vf = torch._C._VariableFunctions
    out = []
    for name in sorted(dir(F)):
        obj = getattr(F, name)
        if name.startswith("_") or name in _TORCH_SKIP or name.endswith("_") or isinstance(obj, type) \
                or inspect.ismodule(obj) or not callable(obj) or _is_random(name):
            continue
        if getattr(obj, "__module__", None) not in ("torch.nn.functional", "torch._C._nn", "torch", None) \
                and not hasattr(vf, name):
            continue
        out.append((F, name, f"torch.nn.functional.{name}", f"aten::{name}"))
    public = set(getattr(torch.functional, "__all__", []))
    for name in sorted(dir(torch)):
        if name.startswith("_") or name in _TORCH_SKIP or name.endswith("_") or name.endswith("_like"):
            continue
        if not (hasattr(vf, name) or name in public):
            continue
        obj = getattr(torch, name)
        if isinstance(obj, type) or inspect.ismodule(obj) or not callable(obj) or _is_random(name):
            continue
        out.append((torch, name, f"torch.{name}", f"aten::{name}"))
    return out


def _is_random(name: str) -> bool:
    import torch
    from dlci.sources.opinfo import _RANDOM_NAME
    if _RANDOM_NAME.search(name) or name.startswith("gumbel"):
        return True
    packet = getattr(torch.ops.aten, name, None)
    try:
        return any(torch.Tag.nondeterministic_seeded in getattr(packet, o).tags for o in packet.overloads())
    except Exception:  # noqa: BLE001
        return False


def _torch_output_check(out) -> str | None:
    from dlci.instance.recipe import tensor_leaves
    leaves = tensor_leaves(out)
    if not leaves:
        return "non-tensor-output"
    return None


def _patch_torch() -> None:
    import torch
    from dlci.instance.recipe import params_of
    from dlci.instance import Unencodable, to_numpy
    from dlci.sources._common import Slots, encode

    def wrap(orig, path, op):
        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            if _busy():
                return orig(*args, **kwargs)

            def build():
                slots = Slots(detach=True)
                eargs = [encode(a, slots) for a in args]
                ekw = {k: encode(v, slots) for k, v in kwargs.items()}
                if not slots.arrays:
                    raise Unencodable("no-tensor-input")
                record = {"op": op, "framework": "torch",
                          "call": {"kind": "torch_fn", "fn": path, "args": eargs, "kwargs": ekw},
                          "inputs": [_spec(a) for a in slots.arrays], "params": params_of(eargs, ekw)}
                return record, {f"in:{i}": a for i, a in enumerate(slots.arrays)}, _torch_output_check

            return _record_call(op, build, lambda: orig(*args, **kwargs))
        wrapper.__dlci_original__ = orig
        return wrapper

    for ns, name, path, op in _torch_targets():
        setattr(ns, name, wrap(getattr(ns, name), path, op))

    # constructor arguments of built-in modules: the first (outermost) __init__ of an object records them
    def wrap_init(orig):
        @functools.wraps(orig)
        def __init__(self, *args, **kwargs):
            if "_dlci_ctor" not in self.__dict__:
                object.__setattr__(self, "_dlci_ctor", (args, kwargs))
            orig(self, *args, **kwargs)
        return __init__

    builtin = {}
    for name in dir(torch.nn):
        cls = getattr(torch.nn, name)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and name not in _CONTAINERS:
            builtin[cls] = f"torch.nn.{name}"
    for cls in {c for b in builtin for c in b.__mro__ if issubclass(c, torch.nn.Module)
                and c is not torch.nn.Module and "__init__" in c.__dict__}:
        cls.__init__ = wrap_init(cls.__dict__["__init__"])

    orig_call = torch.nn.Module.__call__

    def module_call(self, *args, **kwargs):
        cls = type(self)
        if _busy() or cls not in builtin:
            return orig_call(self, *args, **kwargs)
        op = f"nn::{cls.__name__}"

        def build():
            ctor = self.__dict__.get("_dlci_ctor")
            if ctor is None:
                raise Unencodable("unknown-constructor")
            if self.training and any(t in type(m).__name__ for m in self.modules() for t in _TRAIN_SENSITIVE):
                raise Unencodable("training-mode")
            cslots = Slots(detach=True)
            cargs = [encode(a, cslots) for a in ctor[0]]
            ckw = {k: encode(v, cslots) for k, v in ctor[1].items()}
            if cslots.arrays:
                raise Unencodable("tensor-in-constructor")
            slots = Slots(detach=True)
            fargs = [encode(a, slots) for a in args]
            fkw = {k: encode(v, slots) for k, v in kwargs.items()}
            if not slots.arrays:
                raise Unencodable("no-tensor-input")
            arrays = {f"in:{i}": a for i, a in enumerate(slots.arrays)}
            arrays.update({f"state:{k}": to_numpy(v, detach=True) for k, v in self.state_dict().items()})
            params = params_of(cargs, ckw)
            params.update({f"forward.{k}": v for k, v in params_of(fargs, fkw).items()})
            record = {"op": op, "framework": "torch",
                      "call": {"kind": "torch_module", "cls": builtin[cls], "args": cargs, "kwargs": ckw,
                               "forward_args": fargs, "forward_kwargs": fkw},
                      "inputs": [_spec(a) for a in slots.arrays], "params": params}
            return record, arrays, _torch_output_check

        return _record_call(op, build, lambda: orig_call(self, *args, **kwargs))

    torch.nn.Module.__call__ = module_call


# -- keras -----------------------------------------------------------------------------------------------

from dlci.instance.recipe import keras_params as _keras_params  # noqa: E402


def _patch_keras() -> None:
    import keras
    from keras.src.layers.layer import Layer
    from dlci.instance import Unencodable

    orig_call = Layer.__call__

    def builtin_path(cls) -> str | None:
        if cls.__module__.startswith("keras.src.layers.") and getattr(keras.layers, cls.__name__, None) is cls:
            return f"keras.layers.{cls.__name__}"
        return None

    def layer_call(self, *args, **kwargs):
        cls = type(self)
        path = None if _busy() else builtin_path(cls)
        if path is None:
            return orig_call(self, *args, **kwargs)
        op = f"keras::{cls.__name__}"
        extra = {k: v for k, v in kwargs.items() if not (k == "training" and not v)}

        def build():
            if len(args) != 1 or extra:
                raise Unencodable("multi-input" if len(args) != 1 else "call-kwargs")
            x = args[0]
            if isinstance(x, keras.KerasTensor):
                raise Unencodable("symbolic-input")
            if getattr(getattr(self, "dtype_policy", None), "quantization_mode", None):
                raise Unencodable("quantized-layer")
            try:
                arr = np.asarray(keras.ops.convert_to_numpy(x))
            except Exception as e:  # graph tensors inside tf.function have no value
                raise Unencodable("symbolic-input") from e
            if arr.dtype.kind not in "biuf":
                raise Unencodable(f"unsupported-dtype:{arr.dtype}")
            try:
                config = json.loads(json.dumps(self.get_config()))
            except (TypeError, ValueError, NotImplementedError) as e:
                raise Unencodable("unencodable-config") from e
            record = {"op": op, "framework": "keras",
                      "call": {"kind": "keras_layer", "cls": path, "config": config, "args": [{"$t": 0}]},
                      "inputs": [_spec(arr)], "params": _keras_params(config)}
            arrays = {"in:0": arr}

            def check(out):
                outs = out if isinstance(out, (list, tuple)) else [out]
                try:
                    [keras.ops.convert_to_numpy(o) for o in outs]
                except Exception:  # noqa: BLE001
                    return "non-tensor-output"
                # weights as used by this call (built by it when the layer was fresh)
                for i, w in enumerate(self.get_weights()):
                    arrays[f"weight:{i}"] = np.asarray(w)
                return None

            return record, arrays, check

        return _record_call(op, build, lambda: orig_call(self, *args, **kwargs))

    Layer.__call__ = layer_call


# -- onnx ------------------------------------------------------------------------------------------------

def _patch_onnx() -> None:
    import onnx.helper as helper
    from dlci.instance import Unencodable
    from dlci.instance.recipe import attribute_value, op_id

    orig_node, orig_model = helper.make_node, helper.make_model

    @functools.wraps(orig_node)
    def make_node(op_type, *args, **kwargs):
        node = orig_node(op_type, *args, **kwargs)
        if _REC is not None and not _busy():
            _REC.calls[f"{op_id(node)} (make_node)"] += 1
        return node

    @functools.wraps(orig_model)
    def make_model(graph, **kwargs):
        if _busy() or len(graph.node) != 1:
            return orig_model(graph, **kwargs)
        node = graph.node[0]
        op = op_id(node)
        with _Guarded():
            model = orig_model(graph, **kwargs)
        rec = _REC
        if rec is None or not rec.wants(op):
            return model
        try:
            record, arrays = _onnx_record(model, node, op, attribute_value)
        except Unencodable as e:
            rec.skip(e.reason)
            return model
        except Exception as e:  # noqa: BLE001
            rec.skip(f"record-error:{type(e).__name__}")
            return model
        rec.emit(record, arrays)
        return model

    helper.make_node, helper.make_model = make_node, make_model


def _onnx_record(model, node, op, attribute_value):
    import onnx
    from dlci.instance import Unencodable
    graph = model.graph
    inits = {i.name for i in graph.initializer}
    rng = np.random.default_rng(int.from_bytes(hashlib.sha1(model.SerializeToString()).digest()[:4], "little"))
    arrays = {}
    for i, vi in enumerate(v for v in graph.input if v.name not in inits):
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.HasField("shape") or not tt.elem_type:
            raise Unencodable("untyped-model-input")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if any(d is None for d in dims):
            raise Unencodable("dynamic-model-input")
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype.kind == "f":
            a = rng.standard_normal(dims).astype(dtype)
        elif dtype.kind in "iu":
            a = rng.integers(0, 3, size=dims).astype(dtype)  # small non-negative: valid as indices and counts
        elif dtype.kind == "b":
            a = rng.random(dims) < 0.5
        else:
            raise Unencodable(f"unsupported-dtype:{dtype}")
        arrays[f"in:{i}"] = a
    # make_model stamps the newest IR version this onnx knows, which runtimes released before it refuse to
    # load; the model needs no more than the minimal IR version of the opsets it imports
    stored = onnx.ModelProto()
    stored.CopyFrom(model)
    try:
        stored.ir_version = min(stored.ir_version, onnx.helper.find_min_ir_version_for(list(stored.opset_import)))
    except Exception:  # an opset this onnx does not know: keep the model as the suite built it
        pass
    arrays["model"] = np.frombuffer(stored.SerializeToString(), dtype=np.uint8).copy()
    record = {"op": op, "framework": "onnx", "call": {"kind": "onnx_model"},
              "inputs": [_spec(arrays[f"in:{i}"]) for i in range(len(arrays) - 1)],
              "params": {a.name: attribute_value(a) for a in node.attribute}}
    return record, arrays


# -- pytest hooks ----------------------------------------------------------------------------------------

def install() -> None:
    global _REC
    prefix = os.environ.get("DLCI_HARVEST_OUT")
    if not prefix or _REC is not None:
        return
    cap = int(os.environ.get("DLCI_HARVEST_CAP") or 0) or None
    ops = set(json.loads(os.environ["DLCI_HARVEST_OPS"])) if os.environ.get("DLCI_HARVEST_OPS") else None
    _REC = Recorder(prefix, cap, int(os.environ.get("DLCI_HARVEST_MAX_ELEMS") or 100_000), ops)
    frameworks = os.environ.get("DLCI_HARVEST_FRAMEWORKS", "torch,keras,onnx").split(",")
    patchers = {"torch": _patch_torch, "keras": _patch_keras, "onnx": _patch_onnx}
    for fw in frameworks:
        if fw in patchers:
            try:
                patchers[fw]()
            except ImportError:
                _REC.skipped[f"framework-missing:{fw}"] += 1


def pytest_configure(config) -> None:
    install()


def pytest_unconfigure(config) -> None:
    if _REC is not None:
        _REC.close()
