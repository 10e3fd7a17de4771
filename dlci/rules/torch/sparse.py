"""Category 8, sparse: the instance on dense inputs vs input 0 as a sparse COO / CSR tensor."""
import torch

from dlci.rules.torch.common import leaves


def on_sparse(case, inputs, convert):
    """Input 0 converted by the tensor method `convert`; sparse outputs made dense."""
    ts = case.to_torch(inputs)
    ts[0] = getattr(ts[0], convert)()
    with torch.no_grad():
        out = leaves(case.build_model()(*ts))
    return [(o.to_dense() if o.layout != torch.strided else o).numpy() for o in out]


def coo(case, inputs):
    """Input 0 as x.to_sparse()."""
    return on_sparse(case, inputs, "to_sparse")


def csr(case, inputs):
    """Input 0 as x.to_sparse_csr()."""
    return on_sparse(case, inputs, "to_sparse_csr")
