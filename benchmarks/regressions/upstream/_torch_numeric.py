"""dlci's numerical stand-in for TVM's torch-frontend ``verify_model`` helpers (not upstream code).

The upstream tests of 2024-2025 compare the imported module with a hand-written IRModule of that time
(``tvm.ir.assert_structural_equal``); the installed release emits other, equivalent IR for most operators, so that
check fails on the base revision too and says nothing about the fix. These helpers keep the upstream test's model,
inputs and arguments and compare TVM's result with PyTorch eager instead (the ``expected`` module is ignored).
"""
import numpy as np
import torch

import tvm
from tvm import relax


def _to_tvm(t: torch.Tensor):
    t = t.detach()
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return tvm.runtime.tensor(t.float().numpy().astype(ml_dtypes.bfloat16))
    return tvm.runtime.tensor(t.numpy())


def _flatten(x):
    if isinstance(x, (list, tuple)) or (hasattr(x, "__len__") and not hasattr(x, "numpy")
                                         and not isinstance(x, torch.Tensor)):
        return [y for item in x for y in _flatten(item)]
    return [x]


def _as_np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return x.float().numpy() if x.dtype == torch.bfloat16 else x.numpy()
    if hasattr(x, "numpy"):
        a = x.numpy()
        return a.astype(np.float32) if a.dtype.name == "bfloat16" else a
    return np.asarray(x)


def _run(mod, inputs):
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod, params = relax.frontend.detach_params(mod)
    ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return vm["main"](*[_to_tvm(t) for t in inputs], *params.get("main", []))


def _compare(got, want, inputs):
    got, want = _flatten(got), _flatten(want)
    assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
    bf16 = any(isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 for t in inputs)
    tol = 1e-2 if bf16 else 1e-5
    for g, w in zip(got, want):
        g, w = _as_np(g), _as_np(w)
        assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _eager(torch_model, inputs):
    """PyTorch's result, or None where it cannot serve as a reference: eager rejects the inputs (the upstream
    structural test never ran the model: e.g. bitwise ops on float inputs), or the model is random (dropout in
    training mode: two runs differ)."""
    try:
        with torch.no_grad():
            torch.manual_seed(0)
            a = torch_model(*[t.clone() for t in inputs])
            torch.manual_seed(1)
            b = torch_model(*[t.clone() for t in inputs])
    except Exception:  # noqa: BLE001
        return None
    for x, y in zip(_flatten(a), _flatten(b)):
        if not np.array_equal(_as_np(x), _as_np(y), equal_nan=True):
            return None
    return a


def verify_model_ep(torch_model, example_args, binding=None, expected=None, dynamic_shapes=None, **kwargs):
    from torch.export import export
    from tvm.relax.frontend.torch import from_exported_program
    torch_model = torch_model.eval() if hasattr(torch_model, "eval") else torch_model
    want = _eager(torch_model, example_args)
    if want is None:
        return
    ep = export(torch_model, args=example_args, dynamic_shapes=dynamic_shapes)
    mod = from_exported_program(ep)
    _compare(_run(mod, example_args), want, example_args)


def verify_model_fx(torch_model, input_info, binding=None, expected=None, **kwargs):
    from torch import fx
    from tvm.relax.frontend.torch import from_fx
    torch_model = torch_model.eval() if hasattr(torch_model, "eval") else torch_model
    graph_model = fx.symbolic_trace(torch_model)
    with torch.no_grad():
        mod = from_fx(graph_model, input_info)
    inputs = []
    for shape, dtype in input_info:
        dt = getattr(torch, dtype) if isinstance(dtype, str) else dtype
        inputs.append(torch.randn(*shape).to(dt) if dt.is_floating_point else torch.randint(-8, 8, tuple(shape)).to(dt))
    want = _eager(torch_model, inputs)
    if want is None:
        return
    _compare(_run(mod, inputs), want, inputs)
