"""Packing several single-operator models into one, so that a target converts and compiles a batch once.

A packed ONNX model runs its members side by side: disjoint subgraphs, every name prefixed ``m<k>_``, graph inputs
and outputs in member order. Only members that mean the same under one header can share a model: the same IR
version and opset imports (an operator's semantics depend on its opset), no parameters kept as inputs and no
symbolic dims (those are import paths of their own, run alone). :func:`onnx_pack_key` says which members may share.
"""
from __future__ import annotations

from typing import Any

from dlci.models import onnx_input_names, onnx_keeps_params


def onnx_pack_key(model: Any) -> tuple | None:
    """Members with equal keys may share a packed model; None: this model runs alone."""
    if onnx_keeps_params(model):
        return None
    if any(d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim):
        return None
    opsets = tuple(sorted((o.domain, o.version) for o in model.opset_import))
    return model.ir_version, opsets


def pack_onnx(models: list) -> tuple[Any, list[int], list[int]]:
    """(packed model, runtime inputs per member, outputs per member); the members share :func:`onnx_pack_key`."""
    import onnx
    from onnx import compose, helper
    first = models[0]
    nodes, inputs, outputs, inits, infos, functions = [], [], [], [], [], {}
    n_in, n_out = [], []
    for k, m in enumerate(models):
        m = compose.add_prefix(m, f"m{k}_", rename_functions=False)
        g = m.graph
        runtime = set(onnx_input_names(m))
        nodes += g.node
        inputs += [i for i in g.input if i.name in runtime]
        outputs += g.output
        inits += g.initializer
        infos += g.value_info
        for f in m.functions:  # local functions (torch.onnx's): equal names are the same function
            functions.setdefault((f.domain, f.name, getattr(f, "overload", "")), f)
        n_in.append(len([i for i in g.input if i.name in runtime]))
        n_out.append(len(g.output))
    graph = helper.make_graph(nodes, "dlci_batch", inputs, outputs, initializer=inits, value_info=infos)
    packed = helper.make_model(graph, opset_imports=list(first.opset_import), ir_version=first.ir_version,
                               functions=list(functions.values()))
    packed.producer_name = "dlci.pack"
    onnx.checker.check_model(packed)
    return packed, n_in, n_out


# model form -> (pack key, pack): the forms whose members can share one model
PACKERS = {"onnx": (onnx_pack_key, pack_onnx)}
