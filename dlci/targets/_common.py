"""Helpers shared by targets: where an exception was raised, and the 'unsupported' message shapes."""
from __future__ import annotations

import re
import traceback

# an explicit rejection: "X is not supported", "Unsupported dtype ...", "not implemented for ...", and a converter's
# statement of its own limitation ("Only constant axes currently supported", "TopK k must be a constant")
NOT_SUPPORTED = re.compile(r"\bnot (yet )?supported\b|\bunsupported\b|\bnot (yet )?implemented\b|"
                           r"\b(do|does) not support\b|\bonly (constant|static)\b|\bmust be (a )?(constant|static)\b|"
                           r"\bcurrently supported\b", re.I)


def raised_in(exc: BaseException, prefixes: tuple[str, ...]) -> bool:
    """Was the exception raised by code under one of these module prefixes (its innermost frame)?"""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return False
    mod = last.tb_frame.f_globals.get("__name__", "")
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def type_name(exc: BaseException) -> str:
    return type(exc).__name__


def format_exc(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def onnx_fingerprint(model) -> str:
    """A fingerprint of an ONNX model (ModelProto) that names do not change: nodes in order with their op, domain,
    attributes and the positions of the values they read; graph inputs' and outputs' types; initializers' bytes; the
    local functions likewise. Two exporters (or two revisions of one) that emit the same computation under other
    value names give the same fingerprint."""
    import hashlib

    h = hashlib.sha256()

    def graph(g, outer: dict) -> None:
        ids = dict(outer)

        def ref(name: str) -> str:
            return ids.get(name, "?" if name else "-")
        for i, vi in enumerate(g.input):
            ids[vi.name] = f"i{i}"
            h.update(vi.type.SerializeToString(deterministic=True))
        for i, t in enumerate(g.initializer):
            ids[t.name] = f"w{i}"
            h.update(t.SerializeToString(deterministic=True).replace(t.name.encode(), b""))
        for n, node in enumerate(g.node):
            h.update(f"|{node.domain}:{node.op_type}({','.join(ref(x) for x in node.input)})".encode())
            for a in sorted(node.attribute, key=lambda a: a.name):
                if a.g.ByteSize() or a.graphs:
                    for sub in ([a.g] if a.g.ByteSize() else []) + list(a.graphs):
                        graph(sub, ids)
                    continue
                a2 = type(a)()
                a2.CopyFrom(a)
                h.update(a2.SerializeToString(deterministic=True))
            for k, out in enumerate(node.output):
                ids[out] = f"n{n}.{k}"
        for vi in g.output:
            h.update(f"->{ref(vi.name)}".encode())
            h.update(vi.type.SerializeToString(deterministic=True))

    graph(model.graph, {})
    for f in sorted(model.functions, key=lambda f: (f.domain, f.name)):
        h.update(f"fn {f.domain}:{f.name}({len(f.input)})".encode())
        ids = {name: f"i{i}" for i, name in enumerate(f.input)}
        for n, node in enumerate(f.node):
            h.update(f"|{node.domain}:{node.op_type}({','.join(ids.get(x, '?') for x in node.input)})".encode())
            for a in sorted(node.attribute, key=lambda a: a.name):
                h.update(a.SerializeToString(deterministic=True))
            for k, out in enumerate(node.output):
                ids[out] = f"n{n}.{k}"
    return h.hexdigest()[:16]


MAX_GRAPH_NODES = 200  # nodes described per model: a single-operator test's graph has a handful


def onnx_nodes(model) -> list[str]:
    """The nodes of an ONNX model, one readable line each and without value names: the operator, the types of what
    it reads and makes (elem type and shape, from ONNX shape inference where the exporter left none), its attributes,
    and a small constant's values. Two revisions' lists differ exactly in the nodes the change made differently
    (``Pow(int64[2,3], float32[]) -> int64[2,3]`` on one, ``Cast`` then ``Pow(float32...)`` on the other)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper, shape_inference

    try:
        model = shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - the exporter's own types, then
        pass
    types: dict[str, str] = {}

    def type_of(t) -> str:
        if not t.HasField("tensor_type"):
            return t.WhichOneof("value") or "?"
        tt = t.tensor_type
        name = onnx.TensorProto.DataType.Name(tt.elem_type).lower() if tt.elem_type else "?"
        if not tt.HasField("shape"):
            return name
        return name + "[" + ",".join(str(d.dim_value) if d.HasField("dim_value") else "?" for d in tt.shape.dim) + "]"

    def small(t) -> str:
        try:
            a = numpy_helper.to_array(t)
        except Exception:  # noqa: BLE001
            return ""
        dtype = onnx.TensorProto.DataType.Name(t.data_type).lower()
        shape = "[" + ",".join(map(str, a.shape)) + "]"
        return f"{dtype}{shape}" + (f"={np.array2string(a.ravel(), threshold=4)}" if a.size <= 4 else "")

    def attr(a) -> str:
        if a.HasField("t"):
            return f"{a.name}={small(a.t)}"
        if a.g.ByteSize() or a.graphs:
            return f"{a.name}=<graph>"
        value = onnx.helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        return f"{a.name}={value!r}"[:60]

    lines: list[str] = []
    for g in [model.graph]:
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            types[vi.name] = type_of(vi.type)
        for t in g.initializer:
            types[t.name] = small(t)
        for node in g.node:
            ins = ",".join(types.get(x, "?") if x else "-" for x in node.input)
            outs = ",".join(types.get(x, "?") for x in node.output)
            attrs = " ".join(attr(a) for a in sorted(node.attribute, key=lambda a: a.name))
            op = f"{node.domain}::{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
            lines.append(f"{op}({ins})->{outs}" + (f" {{{attrs}}}" if attrs else ""))
    for f in sorted(model.functions, key=lambda f: (f.domain, f.name)):
        for node in f.node:  # a function's values have no inferred types: the operators and attributes say enough
            attrs = " ".join(attr(a) for a in sorted(node.attribute, key=lambda a: a.name))
            lines.append(f"{f.name}: {node.op_type}" + (f" {{{attrs}}}" if attrs else ""))
    return lines[:MAX_GRAPH_NODES]


_BINDING = re.compile(r"^\s*[A-Za-z_]\w*: (?P<type>.+?) = (?P<value>R\..+)$")
_NAME = re.compile(r"(?<![\w.\"'])(?!R\b|T\b|I\b|True\b|False\b|None\b)[A-Za-z_]\w*(?![\w(.=])")


def tvm_nodes(mod) -> list[str]:
    """The operator calls of a Relax module, one line each (``R.nn.relu(%) -> R.Tensor((2, 3), dtype="float32")``):
    the printed bindings with the variables' names left out, so that two revisions' imports differ only where the
    change made the importer emit something else."""
    lines = []
    for line in mod.script(show_meta=False).splitlines():
        m = _BINDING.match(line)
        if m:
            lines.append(f"{_NAME.sub('%', m['value'])} -> {m['type']}")
    return lines[:MAX_GRAPH_NODES]
