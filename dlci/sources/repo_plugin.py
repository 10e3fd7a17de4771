"""pytest plugin that records what a repository's own tests hand to its frontend's entry points
(``-p dlci.sources.repo_plugin``), run by :mod:`dlci.sources.repo_tests` in a subprocess on the pull request's head.

``$DLCI_REPO_ENTRIES`` (JSON) lists the entry points as ``[module, function, takes, label]`` (``label``: the dlci
target the entry point is, ``tvm.from_onnx``); at ``pytest_configure`` each
is replaced, in memory and before any test module imports it, by a wrapper that records its model argument and then
calls it as before (the tests' own assertions and their outcome do not matter to dlci). ``takes``:

- ``exported_program``: a ``torch.export.ExportedProgram`` (``from_exported_program(ep, ...)``), recorded as the
  ``torch_exported`` recipe (dlci.models.recorded), with its example inputs;
- ``fx``: a ``torch.fx.GraphModule`` and its ``input_info`` (``from_fx(gm, input_info)``), recorded as ``torch_fx``
  (the constructor arguments of torch.nn's modules are captured as they are built, as the harvest plugin does);
- ``onnx``: a ``ModelProto`` (``from_onnx(model, shape_dict=..., keep_params_in_input=...)``), kept as bytes with
  the shapes the test gave; its inputs are drawn from the declared shapes by the parent;
- ``module``: a ``torch.nn.Module`` and its example arguments (``torch.onnx.export(model, args, kwargs=...)``), kept
  as the program ``torch.export.export`` makes of it (``torch_exported``), which reaches the exporter as the test's
  model does.

Records go to ``$DLCI_HARVEST_OUT.jsonl`` / ``.bin`` through the harvest plugin's :class:`Recorder` (each flushed at
once: a suite that dies keeps what it recorded). ``$DLCI_REPO_DEADLINE`` (epoch seconds): tests that would start
after it are skipped; ``$DLCI_REPO_PER_TEST``: at most that many records per test function (all its parametrised
cases together).
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import time

_REC = None
_PER_TEST: dict[str, int] = {}
_LIMIT = 0


def _spec(a):
    from dlci.sources.harvest_plugin import _spec as spec
    return spec(a)


def _options(entry: str, bound: dict) -> dict:
    """The entry point's settings the test chose, as dlci's targets take them (``call["options"]``)."""
    if entry.endswith("from_exported_program") and bound.get("run_ep_decomposition") is False:
        return {"tvm.from_exported_program": {"run_ep_decomposition": False}}
    if entry.endswith("from_onnx") and bound.get("keep_params_in_input"):
        return {"tvm.from_onnx": {"keep_params_in_input": True}}
    return {}


def _settings(bound: dict) -> dict:
    """The plain settings of the call, for the report (no models, no tensors)."""
    out = {}
    for k, v in bound.items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, dict) and all(isinstance(x, (list, tuple)) for x in v.values()):
            try:
                out[k] = json.loads(json.dumps({str(a): [int(d) if isinstance(d, int) else str(d) for d in b]
                                                for a, b in v.items()}))
            except (TypeError, ValueError):
                pass
    return out


def _build(takes: str, entry: str, bound: dict, model):
    """(record, arrays) for one call; raises dlci.instance.Unencodable with a reason."""
    from dlci.instance import Unencodable
    from dlci.models import recorded
    inputs: list = []
    if takes == "exported_program":
        call, arrays = recorded.exported_record(model)
        framework = "torch"
    elif takes == "fx":
        info = bound.get("input_info")
        if not isinstance(info, (list, tuple)):
            raise Unencodable("no-input-info")
        call, arrays, inputs = recorded.fx_record(model, info, _constructor)
        for i, a in enumerate(inputs):
            arrays[f"in:{i}"] = a
        framework = "torch"
    elif takes == "module":  # torch.onnx.export(model, args, kwargs=...): the program torch.export makes of it
        import torch
        if isinstance(model, torch.export.ExportedProgram):
            program = model
        elif isinstance(model, torch.nn.Module):
            args = bound.get("args", ())
            args = (args,) if isinstance(args, torch.Tensor) else tuple(args or ())
            kwargs = bound.get("kwargs") or None
            if kwargs is not None and not isinstance(kwargs, dict):
                raise Unencodable("unencodable-kwargs")
            try:
                program = torch.export.export(model, args, kwargs=kwargs, strict=False)
            except Exception as e:  # noqa: BLE001 - a model torch.export does not take (the test may still pass)
                raise Unencodable(f"export-error:{type(e).__name__}") from e
        else:
            raise Unencodable("not-a-module")
        call, arrays = recorded.exported_record(program)
        framework = "torch"
    elif takes == "onnx":
        import numpy as np
        import onnx
        if isinstance(model, (bytes, bytearray)):
            model = onnx.load_model_from_string(bytes(model))
        if not isinstance(model, onnx.ModelProto):
            raise Unencodable("not-a-model-proto")
        arrays = {"model": np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy()}
        shapes = bound.get("shape_dict") or {}
        call = {"kind": "onnx_model", "shape_dict": {str(k): [int(d) if isinstance(d, int) else -1 for d in v]
                                                     for k, v in shapes.items() if isinstance(v, (list, tuple))}}
        framework = "onnx"
    else:
        raise Unencodable(f"unknown-entry-kind:{takes}")
    options = _options(entry, bound)
    if options:
        call["options"] = options
    call["entry"] = entry
    n = sum(1 for k in arrays if k.startswith("in:"))
    record = {"op": f"entry::{entry}", "framework": framework, "call": call,
              "inputs": [_spec(arrays[f"in:{i}"]) for i in range(n)], "params": {"entry": _settings(bound)}}
    return record, arrays


def _constructor(module):
    return module.__dict__.get("_dlci_ctor")


def _wrap(orig, entry: str, takes: str):
    try:
        signature = inspect.signature(orig)
    except (TypeError, ValueError):
        signature = None

    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        from dlci.instance import Unencodable
        from dlci.sources.harvest_plugin import _current_test
        rec = _REC
        test = _current_test().split("[", 1)[0]  # a parametrised test's cases share its cap
        if rec is not None and args and rec.wants(f"entry::{entry}") \
                and (not _LIMIT or _PER_TEST.get(test, 0) < _LIMIT):
            try:
                bound = signature.bind(*args, **kwargs).arguments if signature is not None else {}
                record, arrays = _build(takes, entry, dict(bound), args[0])
                before = len(rec.seen)
                rec.emit(record, arrays)
                if len(rec.seen) > before:
                    _PER_TEST[test] = _PER_TEST.get(test, 0) + 1
            except Unencodable as e:
                rec.skip(e.reason)
            except Exception as e:  # noqa: BLE001 - the recorder must never break the test
                rec.skip(f"record-error:{type(e).__name__}")
        return orig(*args, **kwargs)
    wrapper.__dlci_original__ = orig
    return wrapper


def _patch_entry(module_name: str, name: str, takes: str, label: str) -> None:
    import importlib
    module = importlib.import_module(module_name)
    orig = getattr(module, name)
    wrapped = _wrap(orig, label, takes)
    # every module that bound the function already (the package re-exports its submodule's): patched alike
    for mod in list(sys.modules.values()):
        try:
            if getattr(mod, name, None) is orig:
                setattr(mod, name, wrapped)
        except Exception:  # noqa: BLE001 - odd module objects
            continue


def _capture_constructors() -> None:
    """The arguments each torch.nn module was built with (its outermost __init__), for recorded FX graphs."""
    import torch

    def wrap_init(init):
        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            if "_dlci_ctor" not in self.__dict__:
                object.__setattr__(self, "_dlci_ctor", (args, kwargs))
            init(self, *args, **kwargs)
        return __init__

    classes = {c for n in dir(torch.nn) for c in [getattr(torch.nn, n)]
               if isinstance(c, type) and issubclass(c, torch.nn.Module) and c is not torch.nn.Module}
    for cls in {k for c in classes for k in c.__mro__ if issubclass(k, torch.nn.Module) and k is not torch.nn.Module
                and "__init__" in k.__dict__ and k.__module__.startswith("torch.nn.")}:
        cls.__init__ = wrap_init(cls.__dict__["__init__"])


def install() -> None:
    global _REC, _LIMIT
    prefix = os.environ.get("DLCI_HARVEST_OUT")
    if not prefix or _REC is not None:
        return
    from dlci.models.recorded import MAX_ELEMENTS
    from dlci.sources.harvest_plugin import Recorder
    _REC = Recorder(prefix, None, MAX_ELEMENTS + 1, None)
    _LIMIT = int(os.environ.get("DLCI_REPO_PER_TEST") or 0)
    entries = json.loads(os.environ.get("DLCI_REPO_ENTRIES") or "[]")
    if any(takes == "fx" for _, _, takes, _ in entries):
        try:
            _capture_constructors()
        except ImportError:
            _REC.skipped["framework-missing:torch"] += 1
    for module_name, name, takes, label in entries:
        try:
            _patch_entry(module_name, name, takes, label)
        except Exception as e:  # noqa: BLE001 - an entry this checkout lacks is only not recorded
            _REC.skipped[f"entry-missing:{module_name}.{name}:{type(e).__name__}"] += 1


def pytest_configure(config) -> None:
    install()


def pytest_runtest_setup(item) -> None:
    deadline = float(os.environ.get("DLCI_REPO_DEADLINE") or 0)
    if deadline and time.time() > deadline:
        import pytest
        if _REC is not None:
            _REC.skipped["deadline"] += 1
        pytest.skip("dlci: the repository tests' time is up")


def pytest_unconfigure(config) -> None:
    if _REC is not None:
        _REC.close()
