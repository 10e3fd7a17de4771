"""dlci.models.torch_export: torch's per-export work kept per process gives what torch computes itself."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from dlci.models import torch_export  # noqa: E402


def test_the_kept_set_of_cia_operators_is_torch_own_and_follows_a_new_custom_operator():
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program
    torch_export.memoise_cia_ops()
    torch_export.memoise_cia_ops()  # idempotent: still one layer over torch's function
    kept = exported_program._collect_all_valid_cia_ops
    assert kept is decomp_utils._collect_all_valid_cia_ops and kept.dlci_memoised
    assert not getattr(kept.original, "dlci_memoised", False)
    assert kept() == kept.original()
    # a custom operator with a CompositeImplicitAutograd kernel, registered after the set was kept
    lib = torch.library.Library("dlci_cia_test", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
    fresh = kept.original()
    assert torch.ops.dlci_cia_test.twice.default in fresh
    assert kept() == fresh


def test_an_export_with_the_kept_set_is_the_model_torch_exports_without_it(monkeypatch):
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program
    from dlci import models
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.GELU(), torch.nn.LayerNorm(3)).eval()
    args = [torch.randn(2, 4)]
    torch_export.memoise_cia_ops()
    kept = exported_program._collect_all_valid_cia_ops
    with monkeypatch.context() as m:  # torch's own function, as without dlci
        for where in (exported_program, decomp_utils):
            m.setattr(where, "_collect_all_valid_cia_ops", kept.original)
        m.setattr(torch_export, "memoise_cia_ops", lambda: None)
        plain = models.export_onnx(module, args)
    assert exported_program._collect_all_valid_cia_ops is kept
    with_kept = models.export_onnx(module, args)
    assert [n.op_type for n in plain.graph.node] == [n.op_type for n in with_kept.graph.node]
    assert plain.graph.SerializeToString() == with_kept.graph.SerializeToString()


def test_export_caches_off_leaves_the_exporter_as_torch_ships_it(monkeypatch):
    """DLCI_EXPORT_CACHES=off (the throughput benchmark's engine as issue 15 found it): the torchlib registry is
    built by torch on every export; on, one registry serves every export of the process."""
    from torch.onnx._internal.exporter import _registration
    shipped = _registration.ONNXRegistry.__dict__["from_torchlib"]
    monkeypatch.setenv("DLCI_EXPORT_CACHES", "off")
    with torch_export.shared_torchlib_registry():
        assert _registration.ONNXRegistry.__dict__["from_torchlib"] is shipped
    monkeypatch.delenv("DLCI_EXPORT_CACHES")
    with torch_export.shared_torchlib_registry():
        assert _registration.ONNXRegistry.__dict__["from_torchlib"] is not shipped
    assert _registration.ONNXRegistry.__dict__["from_torchlib"] is shipped


def test_operator_annotations_spelled_by_typing_decompose_as_torch_ships_it(monkeypatch):
    """torch._ops given typing.Callable (memoised subscriptions, the same type): the same decomposition."""
    import collections.abc
    import typing

    import torch._ops
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.GELU(), torch.nn.LayerNorm(3)).eval()
    ep = torch.export.export(module, (torch.randn(2, 4),))
    monkeypatch.setattr(torch._ops, "Callable", collections.abc.Callable)  # as torch ships it
    shipped = str(ep.run_decompositions().graph)
    torch_export._typing_callable_in_ops()
    assert torch._ops.Callable is typing.Callable and isinstance(len, torch._ops.Callable)
    assert str(ep.run_decompositions().graph) == shipped
