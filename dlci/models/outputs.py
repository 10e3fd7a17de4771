"""Which outputs of an instance are compared how: by shape and dtype only (indices, undefined values:
:func:`shape_only_outputs`), not at all (unspecified contents: :func:`uncompared_outputs`), or to within a
quantization step (:func:`quantized_outputs`). The rules themselves, per operator, are in :mod:`dlci.operators.facts`;
a graph of several operators is judged by the operator that computes each output.
"""
from __future__ import annotations

import re

import numpy as np

from dlci.instance import Instance
from dlci.models.onnx_io import load_onnx
from dlci.operators.facts import INDEX_OUTPUTS, UNSORTED_TOPK, VALUES_UNDEFINED, op_base_name, unspecified_outputs

__all__ = ["shape_only_outputs", "uncompared_outputs", "quantized_outputs", "QUANTIZED_DTYPES"]


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


def shape_only_outputs(instance: Instance, n_outputs: int | None = None) -> set[int]:
    """Output positions that must be compared by shape and dtype only: index outputs of argmax, sort, topk, max(dim)
    ...; every output of an operator whose values are undefined (empty, empty_like, new_empty, empty_strided)."""
    graph = _output_producers(instance)
    if graph is not None:  # a graph of several operators: by the operator that computes each output
        positions = {j for j, p in enumerate(graph) if p is not None and (
            p[1] in INDEX_OUTPUTS.get(p[0], ()) or
            (p[0] in UNSORTED_TOPK and p[1] == 0 and p[2].get("sorted") in (0, False)))}
        return {p for p in positions if n_outputs is None or p < n_outputs}
    base = op_base_name(instance.op)
    if base in VALUES_UNDEFINED:
        return set(range(n_outputs if n_outputs is not None else 1))
    if instance.framework == "torch" and instance.op.startswith("nn::"):
        # module classes: MaxPool2d(return_indices=True), AdaptiveMaxPool2d(...)
        base = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()  # MaxPool2d -> max_pool2d
    positions = set(INDEX_OUTPUTS.get(base, set()))
    if base in UNSORTED_TOPK and instance.params.get("sorted") is False:
        positions.add(0)
    if instance.framework == "torch" and instance.call.get("kind") == "torch_fn":
        fn = instance.call.get("fn", "").rsplit(".", 1)[-1]
        positions |= INDEX_OUTPUTS.get(fn.rstrip("_"), set())
    if n_outputs is not None:
        # max/min without dim return one value output: nothing to skip then
        positions = {p for p in positions if p < n_outputs}
    return positions
