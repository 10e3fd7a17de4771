"""The multi-operator graph model: typed nodes (an ONNX operator and its attributes) joined by tensor edges.

A :class:`Graph` is plain data — graph inputs with their shapes and dtypes, nodes in topological order, named
constants (weights) as numpy arrays, the outputs — so that it can be generated (dlci.fuzz), stored in an instance,
sent to a worker, cut down (dlci.reduce.graph) and printed in a reproducer. Node types are ONNX operators because
ONNX publishes a schema for every one of them (``onnx.defs``: arity, type constraints, attribute types), which is
what validation and generation read; the graph is materialised in the forms targets consume:

- :meth:`Graph.to_onnx` — a ``ModelProto`` (ONNX Runtime, ``tvm.from_onnx``, ``openvino.onnx``);
- its torch form, :mod:`dlci.models.graph_torch` — an ``nn.Module`` whose ``forward`` calls one torch function per
  node (the torch targets: export, FX, torch.compile, torch.onnx, OpenVINO's pytorch frontend).

Before any target sees a graph, :meth:`Graph.check` holds it to the frameworks' own inference: the ONNX checker and
strict shape inference (every value's shape and type must be inferable), and, for the torch form, a run on meta
tensors. A malformed spec or graph raises :class:`GraphError` with a message that says what is wrong and where.

What the Audee work needs, without changing structure: :meth:`with_outputs` exposes intermediate values,
:meth:`cut` feeds a set of nodes from values computed elsewhere (the other nodes removed, their outputs becoming graph
inputs), :meth:`with_constants` replaces weights and :func:`graph_instance` takes any input values.
"""
from __future__ import annotations

import copy
import json
import math
import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["GraphError", "Value", "Node", "Graph", "graph_instance", "graph_of", "DEFAULT_OPSET", "schema"]

DEFAULT_OPSET = 18  # what every target of the pinned stack imports (TVM's ONNX frontend, OpenVINO, ORT)
SPEC_VERSION = 1
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*\Z")


class GraphError(ValueError):
    """A malformed graph spec, or a graph the frameworks' shape and type inference reject."""


@dataclass(frozen=True)
class Value:
    """A tensor edge (or graph input): its name, static shape and dtype (numpy-style name)."""
    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"

    def to_spec(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass
class Node:
    """One operator application. ``inputs`` name values ("" for an optional input left out); ``attrs`` are JSON-able
    (int, float, str and lists of them; a tensor attribute as ``{"$array": name}`` naming a constant)."""
    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""
    name: str = ""
    block: str = ""  # the corpus block this node was generated from (coverage, reports); "" elsewhere

    def to_spec(self) -> dict:
        d = {"op": self.op, "inputs": list(self.inputs), "outputs": list(self.outputs)}
        for key in ("attrs", "domain", "name", "block"):
            if getattr(self, key):
                d[key] = copy.deepcopy(getattr(self, key))
        return d


def schema(op: str, opset: int = DEFAULT_OPSET, domain: str = ""):
    """The ONNX schema of ``op`` as of ``opset`` (None when the installed onnx has no such operator)."""
    import onnx.defs
    try:
        return onnx.defs.get_schema(op, opset, domain)
    except Exception:  # noqa: BLE001 - onnx raises SchemaError for unknown ops
        return None


@dataclass
class Graph:
    inputs: list[Value]
    nodes: list[Node]
    outputs: list[str]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    opset: int = DEFAULT_OPSET
    name: str = "graph"

    # -- reading ---------------------------------------------------------------------------------------------
    def producers(self) -> dict[str, int]:
        """value name -> index of the node producing it."""
        return {x: k for k, n in enumerate(self.nodes) for x in n.outputs if x}

    def consumers(self) -> dict[str, list[int]]:
        """value name -> indices of the nodes reading it (once per node)."""
        out: dict[str, list[int]] = {}
        for k, n in enumerate(self.nodes):
            for x in dict.fromkeys(x for x in n.inputs if x):
                out.setdefault(x, []).append(k)
        return out

    def data_inputs(self, k: int) -> list[str]:
        """The inputs of node ``k`` that carry data at run time (not constants): its in-edges."""
        return [x for x in self.nodes[k].inputs if x and x not in self.constants]

    def ancestors(self, names: Iterable[str]) -> set[int]:
        """Nodes whose outputs the values ``names`` depend on."""
        prod = self.producers()
        seen: set[int] = set()
        todo = [prod[x] for x in names if x in prod]
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            todo += [prod[x] for x in self.nodes[k].inputs if x in prod]
        return seen

    def operators(self) -> list[str]:
        return [n.op for n in self.nodes]

    # -- spec ------------------------------------------------------------------------------------------------
    def to_spec(self) -> dict:
        """JSON-able description; constants by name and shape (their values travel as arrays ``const:<name>``)."""
        return {"version": SPEC_VERSION, "name": self.name, "opset": self.opset,
                "inputs": [v.to_spec() for v in self.inputs],
                "constants": {k: {"shape": list(a.shape), "dtype": a.dtype.name} for k, a in self.constants.items()},
                "nodes": [n.to_spec() for n in self.nodes], "outputs": list(self.outputs)}

    def arrays(self) -> dict[str, np.ndarray]:
        return {f"const:{k}": a for k, a in self.constants.items()}

    @classmethod
    def from_spec(cls, spec: Any, arrays: dict[str, np.ndarray] | None = None) -> "Graph":
        """The graph of a spec (``to_spec``'s form, e.g. read from a JSON file) and its constants' arrays
        (``const:<name>``; a constant without one is drawn at random, seeded by its name). Raises GraphError
        saying what is malformed."""
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except ValueError as e:
                raise GraphError(f"graph spec is not JSON: {e}") from None
        if not isinstance(spec, dict):
            raise GraphError(f"graph spec must be an object, got {type(spec).__name__}")
        unknown = set(spec) - {"version", "name", "opset", "inputs", "constants", "nodes", "outputs"}
        if unknown:
            raise GraphError(f"graph spec: unknown key(s) {', '.join(sorted(unknown))}")
        if spec.get("version", SPEC_VERSION) != SPEC_VERSION:
            raise GraphError(f"graph spec version {spec.get('version')!r} (this dlci reads {SPEC_VERSION})")
        arrays = arrays or {}
        try:
            inputs = [Value(_name(v["name"], "input"), tuple(_dims(v["shape"], f"input {v['name']!r}")),
                            _dtype(v.get("dtype", "float32"), f"input {v['name']!r}"))
                      for v in _list(spec.get("inputs"), "inputs")]
            constants = {}
            for name, c in _dict(spec.get("constants", {}), "constants").items():
                _name(name, "constant")
                given = arrays.get(f"const:{name}")
                if given is not None:
                    constants[name] = np.asarray(given)
                    continue
                shape = _dims(_dict(c, f"constant {name!r}").get("shape", []), f"constant {name!r}")
                dtype = _dtype(c.get("dtype", "float32"), f"constant {name!r}")
                rng = np.random.default_rng(abs(hash(name)) % 2**32)
                constants[name] = rng.standard_normal(shape).astype(dtype) if np.dtype(dtype).kind == "f" \
                    else rng.integers(0, 2, shape).astype(dtype)
            nodes = []
            for k, n in enumerate(_list(spec.get("nodes"), "nodes")):
                n = _dict(n, f"node {k}")
                if not isinstance(n.get("op"), str) or not n["op"]:
                    raise GraphError(f"node {k}: 'op' must be an operator name")
                bad = set(n) - {"op", "inputs", "outputs", "attrs", "domain", "name", "block"}
                if bad:
                    raise GraphError(f"node {k} ({n['op']}): unknown key(s) {', '.join(sorted(bad))}")
                nodes.append(Node(n["op"], [_name(x, f"node {k} input", empty=True) for x in
                                            _list(n.get("inputs"), f"node {k} inputs")],
                                  [_name(x, f"node {k} output", empty=True) for x in
                                   _list(n.get("outputs"), f"node {k} outputs")],
                                  dict(_dict(n.get("attrs", {}), f"node {k} attrs")), n.get("domain", ""),
                                  n.get("name", ""), n.get("block", "")))
            outputs = [_name(x, "output") for x in _list(spec.get("outputs"), "outputs")]
            opset = spec.get("opset", DEFAULT_OPSET)
            if not isinstance(opset, int) or not 1 <= opset <= 30:
                raise GraphError(f"graph spec: opset {opset!r} is not an ONNX opset number")
        except KeyError as e:
            raise GraphError(f"graph spec: missing field {e}") from None
        except (TypeError, AttributeError) as e:
            raise GraphError(f"graph spec: malformed entry ({e})") from None
        g = cls(inputs, nodes, outputs, constants, opset, str(spec.get("name", "graph")))
        g.check_structure()
        return g

    # -- validation ------------------------------------------------------------------------------------------
    def check_structure(self) -> None:
        """Names defined once and before use, outputs produced, operators and attributes known to their schema,
        arity within it. Raises GraphError."""
        defined: dict[str, str] = {}
        for v in self.inputs:
            if v.name in defined:
                raise GraphError(f"input {v.name!r} defined twice")
            defined[v.name] = "input"
        for name in self.constants:
            if name in defined:
                raise GraphError(f"constant {name!r} has the name of an input")
            defined[name] = "constant"
        if not self.nodes:
            raise GraphError("the graph has no node")
        for k, n in enumerate(self.nodes):
            where = f"node {k} ({n.op})"
            sch = schema(n.op, self.opset, n.domain)
            if sch is None:
                raise GraphError(f"{where}: no operator {n.domain + '::' if n.domain else ''}{n.op} in ONNX opset "
                                 f"{self.opset} (onnx.defs)")
            if sch.deprecated:
                raise GraphError(f"{where}: {n.op} is deprecated in opset {self.opset}")
            low, high = sch.min_input, sch.max_input
            if not low <= len(n.inputs) <= high:
                raise GraphError(f"{where}: {len(n.inputs)} inputs, the schema takes {low} to {high}")
            if not sch.min_output <= len(n.outputs) <= sch.max_output:
                raise GraphError(f"{where}: {len(n.outputs)} outputs, the schema gives {sch.min_output} to "
                                 f"{sch.max_output}")
            for a in n.attrs:
                if a not in sch.attributes:
                    raise GraphError(f"{where}: no attribute {a!r} (the schema has: "
                                     f"{', '.join(sorted(sch.attributes)) or 'none'})")
            for j, x in enumerate(n.inputs):
                if x and x not in defined:
                    raise GraphError(f"{where}: input {j} reads {x!r}, which no earlier node, input or constant "
                                     "defines (nodes must be in topological order)")
            for x in n.outputs:
                if x and x in defined:
                    raise GraphError(f"{where}: output {x!r} is already defined by the {defined[x]}")
                if x:
                    defined[x] = where
        if not self.outputs:
            raise GraphError("the graph has no output")
        for x in self.outputs:
            if x not in defined or defined[x] in ("input", "constant"):
                raise GraphError(f"output {x!r} is not computed by any node")

    def check(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Structure, then the ONNX checker and strict shape inference on the ONNX form; every value's shape must be
        static. Returns name -> (shape, dtype) of every value. Raises GraphError."""
        self.check_structure()
        import onnx
        model = self.to_onnx()  # strict shape inference first: the checker wants every output's shape
        try:
            onnx.checker.check_model(model, full_check=False)
            inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True,
                                                         data_prop=True)
        except Exception as e:  # noqa: BLE001 - onnx raises several exception types
            raise GraphError(f"ONNX rejects the graph: {_first_line(e)}") from None
        types = _value_types(inferred)
        for x in [x for n in self.nodes for x in n.outputs if x]:
            if x not in types:
                raise GraphError(f"shape inference gives no static shape for {x!r} (produced by "
                                 f"{self.nodes[self.producers()[x]].op})")
        return types

    def value_types(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """name -> (shape, dtype) of inputs, constants and every node output (strict inference; GraphError)."""
        return self.check()

    # -- materialising ---------------------------------------------------------------------------------------
    def to_onnx(self, *, shapes: bool = True):
        """The ONNX ModelProto (constants as initializers). ``shapes``: output value infos with the shapes strict
        inference gives (the checker needs them; GraphError when inference fails)."""
        import onnx
        from onnx import helper, numpy_helper
        inits = [numpy_helper.from_array(np.require(a, requirements="C"), name) for name, a in self.constants.items()]
        nodes = []
        for k, n in enumerate(self.nodes):
            sch = schema(n.op, self.opset, n.domain)
            attrs = {}
            for a, v in n.attrs.items():
                attrs[a] = _onnx_attribute(a, v, sch, self.constants)
            node = helper.make_node(n.op, list(n.inputs), list(n.outputs), name=n.name or f"n{k}_{n.op}",
                                    domain=n.domain or None)
            node.attribute.extend(attrs.values())
            nodes.append(node)
        ins = [helper.make_tensor_value_info(v.name, helper.np_dtype_to_tensor_dtype(np.dtype(v.dtype)),
                                             list(v.shape)) for v in self.inputs]
        outs = [helper.make_tensor_value_info(x, onnx.TensorProto.UNDEFINED, None) for x in self.outputs]
        g = helper.make_graph(nodes, self.name, ins, outs, inits)
        opsets = [helper.make_opsetid("", self.opset)]
        opsets += [helper.make_opsetid(d, 1) for d in sorted({n.domain for n in self.nodes if n.domain})]
        model = helper.make_model(g, opset_imports=opsets, producer_name="dlci")
        model.ir_version = min(model.ir_version, helper.find_min_ir_version_for(list(model.opset_import)))
        if not shapes:
            return model
        try:
            inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        except Exception as e:  # noqa: BLE001
            raise GraphError(f"ONNX rejects the graph: {_first_line(e)}") from None
        types = _value_types(inferred)
        del model.graph.output[:]
        for x in self.outputs:
            if x not in types:
                raise GraphError(f"shape inference gives no static shape for output {x!r}")
            shape, dtype = types[x]
            model.graph.output.append(helper.make_tensor_value_info(
                x, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)))
        return model

    @classmethod
    def from_onnx(cls, model) -> "Graph":
        """The graph of an ONNX model whose nodes are plain operators (no subgraph attributes, no local functions);
        initializers become constants. Raises GraphError for what the model cannot express."""
        from onnx import AttributeProto, numpy_helper
        from dlci.instance.recipe import attribute_value
        g = model.graph
        if model.functions:
            raise GraphError("the model has local functions: not a plain operator graph")
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), DEFAULT_OPSET)
        constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        inputs = []
        for vi in g.input:
            if vi.name in constants:
                continue
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if any(d < 0 for d in dims):
                raise GraphError(f"input {vi.name!r} has a dynamic shape")
            inputs.append(Value(vi.name, tuple(dims), _np_name(tt.elem_type)))
        nodes = []
        for k, n in enumerate(g.node):
            attrs: dict[str, Any] = {}
            for a in n.attribute:
                if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                    raise GraphError(f"node {k} ({n.op_type}) has a subgraph attribute")
                if a.type == AttributeProto.TENSOR:
                    cname = f"{n.name or 'n' + str(k)}.{a.name}"
                    constants[cname] = numpy_helper.to_array(a.t)
                    attrs[a.name] = {"$array": cname}
                else:
                    attrs[a.name] = attribute_value(a)
            nodes.append(Node(n.op_type, list(n.input), list(n.output), attrs,
                              "" if n.domain in ("", "ai.onnx") else n.domain, n.name))
        return cls(inputs, nodes, [o.name for o in g.output], constants, opset, g.name or "graph")

    # -- Audee's needs: same structure, other observations / values ------------------------------------------
    def with_outputs(self, names: Sequence[str]) -> "Graph":
        """The same graph exposing ``names`` (intermediate values) as outputs too, after its own."""
        g = self.copy()
        for x in names:
            if x not in g.outputs:
                g.outputs.append(x)
        g.check_structure()
        return g

    def with_constants(self, values: dict[str, np.ndarray]) -> "Graph":
        """The same structure with some weights replaced (shape and dtype must stay)."""
        g = self.copy()
        for name, a in values.items():
            old = g.constants.get(name)
            if old is None:
                raise GraphError(f"no constant {name!r}")
            a = np.asarray(a)
            if a.shape != old.shape or a.dtype != old.dtype:
                raise GraphError(f"constant {name!r}: {a.dtype}{list(a.shape)} does not replace "
                                 f"{old.dtype}{list(old.shape)}")
            g.constants[name] = a
        return g

    def cut(self, keep: Iterable[int], types: dict[str, tuple[tuple[int, ...], str]] | None = None,
            as_constants: Iterable[str] = ()) -> "Graph":
        """The nodes ``keep`` alone: every value they read that none of them produces becomes a graph input (fed
        with values computed elsewhere: substitution), or a constant when named in ``as_constants`` (its value is
        then set with :meth:`with_constants` or given here through ``types``' companion arrays by the caller);
        outputs: the kept nodes' values the graph outputs or a removed node read, else each kept sink's first
        output. ``types``: :meth:`value_types` of this graph (computed when not given)."""
        keep = sorted(set(keep))
        if not keep:
            raise GraphError("cut: no node kept")
        types = types or self.value_types()
        kept = set(keep)
        produced = {x for k in keep for x in self.nodes[k].outputs if x}
        as_constants = set(as_constants)
        inputs: list[Value] = []
        constants: dict[str, np.ndarray] = {}
        for k in keep:
            for x in self.nodes[k].inputs:
                if not x or x in produced or x in constants or any(v.name == x for v in inputs):
                    continue
                if x in self.constants:
                    constants[x] = self.constants[x]
                elif x in as_constants:
                    shape, dtype = types[x]
                    constants[x] = np.zeros(shape, dtype)
                else:
                    shape, dtype = types[x]
                    inputs.append(Value(x, tuple(shape), dtype))
        for k in keep:  # tensor attributes' constants
            for v in self.nodes[k].attrs.values():
                if isinstance(v, dict) and "$array" in v:
                    constants[v["$array"]] = self.constants[v["$array"]]
        cons = self.consumers()
        outputs = [x for x in self.outputs if x in produced]
        for k in keep:
            outs = [x for x in self.nodes[k].outputs if x]
            read_outside = [x for x in outs if any(c not in kept for c in cons.get(x, []))]
            outputs += [x for x in read_outside if x not in outputs]
            if outs and not any(x in outputs for x in outs) and not any(c in kept for x in outs
                                                                       for c in cons.get(x, [])):
                outputs.append(outs[0])
        g = Graph(inputs, [copy.deepcopy(self.nodes[k]) for k in keep], outputs, constants, self.opset, self.name)
        g.check_structure()
        return g

    def copy(self) -> "Graph":
        return Graph(list(self.inputs), copy.deepcopy(self.nodes), list(self.outputs), dict(self.constants),
                     self.opset, self.name)

    def check_inputs(self, inputs: Sequence[np.ndarray]) -> None:
        """GraphError unless ``inputs`` are one array per graph input, each of its shape and dtype."""
        if len(inputs) != len(self.inputs):
            raise GraphError(f"{len(inputs)} input arrays for {len(self.inputs)} graph inputs")
        for v, a in zip(self.inputs, inputs):
            if tuple(np.shape(a)) != tuple(v.shape) or np.asarray(a).dtype.name != v.dtype:
                raise GraphError(f"input {v.name!r}: {np.asarray(a).dtype}{list(np.shape(a))} given for "
                                 f"{v.dtype}{list(v.shape)}")

    # -- evaluating ------------------------------------------------------------------------------------------
    def evaluate(self, inputs: Sequence[np.ndarray], *, float64: bool = False,
                 intermediate: bool = False) -> dict[str, np.ndarray] | list[np.ndarray]:
        """The ONNX reference implementation on this graph: the outputs (a list), or every value by name
        (``intermediate``). ``float64``: every float32 tensor (inputs, constants, values) widened to float64."""
        from onnx.reference import ReferenceEvaluator
        model = self.to_onnx()
        arrays = list(inputs)
        if float64:
            from dlci.models.onnx_io import widen_to_float64
            wide = widen_to_float64(model)
            if wide is None:
                raise GraphError("the graph has nothing to widen to float64")
            model = wide
            arrays = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays]
        feed = dict(zip([v.name for v in self.inputs], arrays))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = ReferenceEvaluator(model).run(None, feed, intermediate=intermediate)
        if intermediate:
            return {k: np.asarray(v) for k, v in dict(got).items() if k}
        return [np.asarray(o) for o in got]


# -- instances ------------------------------------------------------------------------------------------------

def graph_instance(graph: Graph, inputs: Sequence[np.ndarray], *, op: str = "", source: str = "graph",
                   test: str = "", seed: int = 0, localise: bool = True):
    """The graph as an ``onnx_model`` test instance: every ONNX target and the whole ONNX pipeline (packing, graph
    reduction, reproducers); its torch form is dlci.models.graph_torch's ``torch_graph_instance``. ``localise``: a
    failure is localised to the operator that causes it (dlci.localise) before it is counted."""
    from dlci.models.onnx_io import instance_from_model
    graph.check_inputs(inputs)
    inst = instance_from_model(graph.to_onnx(), list(inputs), op=op or f"graph::{graph.name}", source=source,
                               test=test, seed=seed)
    if localise:
        inst.call["localise"] = True
        inst.id = inst.compute_id()
    return inst


def graph_of(inst) -> Graph | None:
    """The graph model of an instance that holds one (a torch_graph recipe, or an onnx_model of plain operators);
    None for every other recipe."""
    kind = inst.call.get("kind")
    if kind == "torch_graph":
        return Graph.from_spec(inst.call["graph"], {k: v for k, v in inst.arrays.items() if k.startswith("const:")})
    if kind == "onnx_model" and "model" in inst.arrays:
        from dlci.models.onnx_io import load_onnx
        try:
            return Graph.from_onnx(load_onnx(inst.arrays))
        except GraphError:
            return None
    return None


# -- helpers ---------------------------------------------------------------------------------------------------

def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"{type(e).__name__}: {(lines[-1] if lines and lines[0].startswith('[') else lines[0])[:300]}" \
        if lines else type(e).__name__


def _np_name(elem_type: int) -> str:
    from onnx import helper
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


def _value_types(model) -> dict[str, tuple[tuple[int, ...], str]]:
    from onnx import numpy_helper
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    g = model.graph
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        out[t.name] = (tuple(a.shape), a.dtype.name)
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.elem_type or not tt.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
        if any(d < 0 for d in dims):
            continue
        try:
            out[vi.name] = (tuple(dims), _np_name(tt.elem_type))
        except Exception:  # noqa: BLE001 - a type numpy cannot name (strings)
            continue
    return out


def _onnx_attribute(name: str, value: Any, sch, constants: dict[str, np.ndarray]):
    from onnx import AttributeProto, helper, numpy_helper
    attr_type = sch.attributes[name].type if sch is not None and name in sch.attributes else None
    if isinstance(value, dict) and "$array" in value:
        if value["$array"] not in constants:
            raise GraphError(f"attribute {name!r} names constant {value['$array']!r}, which the graph lacks")
        return helper.make_attribute(name, numpy_helper.from_array(np.require(constants[value["$array"]],
                                                                              requirements="C")))
    try:
        if attr_type == AttributeProto.FLOAT:
            value = float(value)
        elif attr_type == AttributeProto.FLOATS:
            value = [float(v) for v in value]
        elif attr_type == AttributeProto.INT:
            value = int(value)
        elif attr_type == AttributeProto.INTS:
            value = [int(v) for v in value]
        if isinstance(value, list) and not value and attr_type is not None:
            return helper.make_attribute(name, value, attr_type=attr_type)
        return helper.make_attribute(name, value)
    except (TypeError, ValueError) as e:
        raise GraphError(f"attribute {name!r}={value!r}: {e}") from None


def _list(v, what: str) -> list:
    if not isinstance(v, list):
        raise GraphError(f"graph spec: {what} must be a list, got {type(v).__name__}")
    return v


def _dict(v, what: str) -> dict:
    if not isinstance(v, dict):
        raise GraphError(f"graph spec: {what} must be an object, got {type(v).__name__}")
    return v


def _name(v, what: str, empty: bool = False) -> str:
    if not isinstance(v, str) or (not v and not empty) or (v and not _NAME.match(v)):
        raise GraphError(f"graph spec: {what} name {v!r} is not a valid value name")
    return v


def _dims(v, what: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v):
        raise GraphError(f"graph spec: {what}: shape {v!r} must be a list of non-negative integers")
    if math.prod(v) > 1 << 26:
        raise GraphError(f"graph spec: {what}: shape {v!r} is too large")
    return v


def _dtype(v, what: str) -> str:
    try:
        return np.dtype(v).name
    except TypeError:
        raise GraphError(f"graph spec: {what}: unknown dtype {v!r}") from None
