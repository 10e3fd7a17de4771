"""Autograd: forward-mode and reverse-mode derivatives must agree, <u, J v> == <J^T u, v> (the dot-product test)."""
import numpy as np
import torch

from dlci.rules.torch.common import leaves, na


def dual_setup(case, inputs):
    """f(float inputs) -> float outputs in float64, the primals, and the probe directions v (inputs), u (outputs)."""
    ts = [t.double() if t.is_floating_point() else t for t in case.to_torch(inputs)]
    slots = [i for i, t in enumerate(ts) if t.is_floating_point()]
    model = case.build_model().double()

    def f(*xs):
        full = list(ts)
        for i, x in zip(slots, xs):
            full[i] = x
        return tuple(o for o in leaves(model(*full)) if o.is_floating_point())
    primals = tuple(ts[i] for i in slots)
    gen = torch.Generator().manual_seed(0)
    v = tuple(torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in primals)
    with torch.no_grad():
        outs = f(*primals)
    if not outs:
        na("no floating-point output")
    if not all(bool(torch.isfinite(o).all()) for o in outs):
        na("non-finite outputs: no derivative to compare")
    u = tuple(torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in outs)
    return f, primals, v, u


def forward_mode(case, inputs, dtype=None):
    """<u, J v> with J v from forward mode (torch.func.jvp)."""
    f, primals, v, u = dual_setup(case, inputs)
    _, jv = torch.func.jvp(f, primals, v)
    return [np.array(sum(float((a * b).sum()) for a, b in zip(u, jv)))]


def reverse_mode(case, inputs):
    """<J^T u, v> with J^T u from reverse mode (torch.func.vjp): the same number (the dot-product test)."""
    f, primals, v, u = dual_setup(case, inputs)
    _, pullback = torch.func.vjp(f, *primals)
    return [np.array(sum(float((a * b).sum()) for a, b in zip(pullback(u), v)))]
