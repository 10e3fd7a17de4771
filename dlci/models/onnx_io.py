"""ONNX models as instances hold them: the ModelProto's bytes in the array ``model`` (:func:`load_onnx`,
:func:`store_onnx`), the node an instance is about, the graph inputs fed at run time, a whole model as an
``onnx_model`` instance (:func:`instance_from_model`), and a copy widened to float64 (the fp64 arbitration).
"""
from __future__ import annotations

import copy

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.instance.recipe import attribute_value, op_id


def load_onnx(arrays: dict):
    import onnx
    return onnx.load_model_from_string(np.asarray(arrays["model"]).tobytes())


def store_onnx(model) -> np.ndarray:
    return np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy()


def main_node(model, op: str | None):
    """The node an onnx instance is about: the only node, else the first whose type the operator names."""
    nodes = list(model.graph.node)
    if len(nodes) == 1:
        return nodes[0]
    if op:
        want = op.split("::", 1)[-1]
        for n in nodes:
            if n.op_type == want:
                return n
    return nodes[-1] if nodes else None


def feed_names(model) -> list[str]:
    inits = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def instance_from_model(model, inputs: list[np.ndarray], *, op: str | None = None, source: str = "graph",
                        test: str = "", seed: int = 0) -> Instance:
    """An ``onnx_model`` instance of a whole model (one array per fed graph input, in order). ``op`` names the
    operator the instance is about (default: the last node's). The IR version is lowered to what the opsets need,
    as runtimes released before this onnx refuse newer ones."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    try:
        m.ir_version = min(m.ir_version, onnx.helper.find_min_ir_version_for(list(m.opset_import)))
    except Exception:  # noqa: BLE001
        pass
    names = feed_names(m)
    if len(names) != len(inputs):
        raise ValueError(f"model has {len(names)} inputs, {len(inputs)} arrays given")
    arrays = {f"in:{i}": np.require(a, requirements="C") for i, a in enumerate(inputs)}
    arrays["model"] = store_onnx(m)
    node = main_node(m, op)
    op = op or (op_id(node) if node is not None else "onnx::Graph")
    opset = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    last = m.graph.node[-1] if len(m.graph.node) else None
    return Instance(op=op, framework="onnx", call={"kind": "onnx_model", "opset": opset},
                    inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(len(inputs))],
                    params={a.name: attribute_value(a) for a in last.attribute} if last is not None else {},
                    origin=Origin(source, test or m.graph.name or "graph", f"onnx {onnx.__version__}"),
                    seed=seed, arrays=arrays)


def widen_to_float64(model):
    """A copy of an ONNX model with every float32 tensor (inputs, outputs, value infos, initializers, tensor
    attributes, casts to float) widened to float64; None when it has none, or operators outside the default domain
    or subgraphs (not worth widening)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    F, D = TensorProto.FLOAT, TensorProto.DOUBLE
    m = copy.deepcopy(model)
    g = m.graph
    if any(n.domain not in ("", "ai.onnx") for n in g.node) or m.functions:
        return None
    if any(a.type == onnx.AttributeProto.GRAPH or a.type == onnx.AttributeProto.GRAPHS
           for n in g.node for a in n.attribute):
        return None  # subgraphs: not worth widening
    changed = False
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == F:
            vi.type.tensor_type.elem_type = D
            changed = True
    for i, init in enumerate(g.initializer):
        if init.data_type == F:
            g.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64),
                                                             init.name))
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == F:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
            elif a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == F:
                a.i = D
    return m if changed else None


class InvalidModel(ValueError):
    """A model that violates the ONNX specification: the checker's full check or strict shape and type inference
    refuses it (ONNX Runtime may still run it)."""


def check_strict(model) -> None:
    """Raise :class:`InvalidModel` unless ``model`` passes ``onnx.checker`` (full check) and strict shape and type
    inference with data propagation: what an exporter writes must be a valid model, not just one ONNX Runtime
    tolerates."""
    import onnx
    try:
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise InvalidModel(f"the exported model is not valid ONNX: {str(e).splitlines()[0][:600]}") from e
