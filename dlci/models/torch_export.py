"""What torch's exporters recompute on every call although it does not depend on the model: computed once per
process here, so that many small exports (one per test, or one per packed batch) do not each pay it.

- :func:`shared_torchlib_registry`: torch.onnx.export's registry of ATen -> ONNX functions (built from torchlib's
  source: ~60 % of exporting a small module), scoped to one export call.
- :func:`memoise_cia_ops`: the set of CompositeImplicitAutograd operators that ``run_decompositions`` may keep
  (torch walks every operator of every loaded namespace, twice per call: ~30 % of a small torch.onnx export,
  and part of TVM's and OpenVINO's imports of an ExportedProgram). Kept per process, keyed by what the set is
  computed from that can change at run time: the C++ dispatcher's CIA registrations and the operator namespaces.
  A new custom operator (torch.library registers it with the dispatcher) changes the key, so the set is computed
  again. (torch itself already keeps the aten namespace's part for the life of the process.)
- :func:`_typing_callable_in_ops`: ``run_decompositions`` registers and removes a Python kernel for each of ~1,100
  composite operators on every call (``OperatorBase.py_impl``), and each registration evaluates its inner
  function's annotations, two ``collections.abc.Callable[_P, _T]`` subscriptions that are not memoised: ~25 % of
  decomposing a small program. torch._ops is given ``typing.Callable``, whose subscriptions typing memoises.

Both leave the exporters' output unchanged; where torch lacks the hook, nothing is patched.
``DLCI_EXPORT_CACHES=off`` leaves torch as it ships (what benchmarks/throughput.py measures the engine against as
it was before these existed).
"""
from __future__ import annotations

import contextlib
import os
from typing import Any


def _enabled() -> bool:
    return os.environ.get("DLCI_EXPORT_CACHES", "").strip().lower() not in ("off", "0", "no")

_TORCHLIB_REGISTRIES: dict[int, Any] = {}  # opset version -> the exporter's registry, built once per process


@contextlib.contextmanager
def shared_torchlib_registry():
    """The registry built once per process and reused while an export runs; the exporter only reads it (dlci
    passes no custom translation table, the one thing that writes into it)."""
    if not _enabled():
        yield
        return
    try:
        from torch.onnx._internal.exporter import _registration
        cls = _registration.ONNXRegistry
        original = cls.__dict__["from_torchlib"]
        build_registry = original.__func__
    except (ImportError, AttributeError, KeyError):
        yield
        return

    def shared(klass, opset_version=None):
        args = () if opset_version is None else (opset_version,)
        key = -1 if opset_version is None else opset_version
        if key not in _TORCHLIB_REGISTRIES:
            _TORCHLIB_REGISTRIES[key] = build_registry(klass, *args)
        return _TORCHLIB_REGISTRIES[key]

    cls.from_torchlib = classmethod(shared)
    try:
        yield
    finally:
        cls.from_torchlib = original


_CIA_SETS: dict[tuple, frozenset] = {}
_CIA_INSTALLED = False
_CIA_CALLERS = ("torch.export.exported_program", "torch.export.decomp_utils")  # modules that import the function


def memoise_cia_ops() -> None:
    """Installed once per process (idempotent): every caller of torch's ``_collect_all_valid_cia_ops`` gets a
    copy of the set computed for the current key. Called before every torch model is built: after the first call
    it returns at once."""
    global _CIA_INSTALLED
    if _CIA_INSTALLED or not _enabled():
        return
    _CIA_INSTALLED = True
    import importlib
    try:
        import torch
        from torch._export import utils
        original = utils._collect_all_valid_cia_ops
        callers = [importlib.import_module(name) for name in _CIA_CALLERS]
    except (ImportError, AttributeError):
        return
    _typing_callable_in_ops()
    if getattr(original, "dlci_memoised", False):
        return

    def key() -> tuple:
        registered = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
        return hash(tuple(registered)), len(registered), tuple(sorted(torch.ops._dir))

    def collect():
        k = key()
        if k not in _CIA_SETS:
            _CIA_SETS[k] = frozenset(original())
            # computing it loads the registered operators, and so their namespaces: file it under the key it leaves
            _CIA_SETS.setdefault(key(), _CIA_SETS[k])
        return set(_CIA_SETS[k])

    collect.dlci_memoised, collect.original = True, original
    for module in (utils, *callers):
        if getattr(module, "_collect_all_valid_cia_ops", None) is original:
            module._collect_all_valid_cia_ops = collect


def _typing_callable_in_ops() -> None:
    """torch._ops names ``Callable`` only in annotations (of py_impl's inner function, among others): the same
    type, as typing spells it, costs a dictionary lookup where collections.abc builds a new alias each time."""
    import collections.abc
    import typing
    try:
        import torch._ops as ops
    except ImportError:
        return
    if getattr(ops, "Callable", None) is collections.abc.Callable:
        ops.Callable = typing.Callable


def decomposed(ep: Any) -> Any:
    """``ep.run_decompositions()`` (torch's default table: core ATen), computed once per program and kept on it.
    TVM's from_exported_program decomposes the program it is given; when it calls a packed program's nodes
    unsupported, the search for the members that own them reads the same decomposition (~0.5 s a call, a third of
    it torch re-registering its composite kernels). The program is never changed after export, so the kept one
    stays right."""
    kept = getattr(ep, "_dlci_decomposed", None)
    if kept is None:
        kept = ep.run_decompositions()
        try:
            ep._dlci_decomposed = kept
        except AttributeError:  # a program type that takes no attributes: decomposed again next time
            pass
    return kept
