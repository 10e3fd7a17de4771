"""Building a graph node by node with every value's shape and values known as it is added (the paper's shapes &
parameters calculator): each node is shape-inferred by ONNX and evaluated by ONNX's reference implementation on its
actual inputs the moment it is added, so a block can choose its parameters from the shapes it receives, and a node
ONNX rejects, or whose values come out non-finite or huge (a logarithm of negative data), is never added: the
block tries another placement instead.

Adapters (Reshape, Slice, Pad) bring a tensor to the shape a block needs, as the paper's aggregation rule does
(Cast/Shape/Slice/Pad before an Add or Concat whose inputs do not match).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dlci.models.graph import DEFAULT_OPSET, Graph, GraphError, Node, Value, schema

ADAPTER_OPS = ("Reshape", "Slice", "Pad")


class ValueDomainError(GraphError):
    """A node whose values on its actual inputs are not finite or too large (its input is outside its domain)."""


VALUE_LIMIT = 1e4  # larger values test overflow more than the compiler
SHARED_CONSTANT_MAX = 8  # integer constants up to this many elements are shared by the nodes that take them


class Builder:
    """Nodes, constants, the (shape, dtype) and the values of every value so far; :meth:`mark`/:meth:`rollback` undo
    a block that could not be placed. ``values``: the graph inputs' arrays (random ones when not given)."""

    def __init__(self, inputs: Sequence[Value], opset: int = DEFAULT_OPSET, values: Sequence[np.ndarray] | None = None,
                 seed: int = 0):
        self.opset = opset
        self.inputs = list(inputs)
        self.nodes: list[Node] = []
        self.constants: dict[str, np.ndarray] = {}
        self.types: dict[str, tuple[tuple[int, ...], str]] = {v.name: (tuple(v.shape), v.dtype) for v in inputs}
        if values is None:
            rng = np.random.default_rng(seed)
            values = [rng.standard_normal(v.shape).astype(v.dtype) for v in inputs]
        self.values: dict[str, np.ndarray] = {v.name: np.asarray(a) for v, a in zip(inputs, values)}
        self._n = 0
        self.block = ""  # the block the next nodes belong to

    # -- names and constants ---------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, value: Any, hint: str = "c", dtype: str | None = None) -> str:
        a = np.asarray(value, dtype=dtype) if dtype else np.asarray(value)
        if a.dtype == np.float64 and dtype is None:
            a = a.astype(np.float32)
        if a.dtype.kind in "iub" and a.size <= SHARED_CONSTANT_MAX:
            # a shape, axes or index list another node already takes is the same initializer, as exporters write
            # it: an importer that consumes an initializer at its first use fails at the second
            for name, have in self.constants.items():
                if have.dtype == a.dtype and have.shape == a.shape and np.array_equal(have, a):
                    return name
        name = self.fresh(hint)
        self.constants[name] = np.require(a, requirements="C")
        self.types[name] = (tuple(a.shape), a.dtype.name)
        self.values[name] = self.constants[name]
        return name

    def shape(self, x: str) -> tuple[int, ...]:
        return self.types[x][0]

    def dtype(self, x: str) -> str:
        return self.types[x][1]

    # -- transactions ----------------------------------------------------------------------------------------
    def mark(self) -> tuple:
        return len(self.nodes), set(self.constants), set(self.types)

    def rollback(self, mark: tuple) -> None:
        n, consts, types = mark
        del self.nodes[n:]
        for k in set(self.constants) - consts:
            del self.constants[k]
        for k in set(self.types) - types:
            del self.types[k]
            self.values.pop(k, None)

    # -- nodes -----------------------------------------------------------------------------------------------
    def node(self, op: str, inputs: Sequence[str], attrs: dict | None = None, outputs: int = 1) -> list[str]:
        """Add one node with ``outputs`` named outputs (at least the schema's required ones); their shapes come from
        ONNX strict inference on the node alone (constants included, so shape-valued inputs propagate). Raises
        GraphError when ONNX rejects it."""
        import onnx
        from onnx import helper, numpy_helper
        from dlci.models.graph import _onnx_attribute, _value_types
        sch = schema(op, self.opset)
        if sch is None or sch.deprecated:
            raise GraphError(f"no operator {op} in opset {self.opset}")
        unknown = set(attrs or {}) - set(sch.attributes)
        if unknown:
            raise GraphError(f"{op} has no attribute {', '.join(sorted(unknown))} in opset {self.opset}")
        outs = names = [self.fresh(op.lower()) for _ in range(max(outputs, sch.min_output))]
        attrs = dict(attrs or {})
        node = helper.make_node(op, [x for x in inputs], names)
        node.attribute.extend(_onnx_attribute(a, v, sch, self.constants) for a, v in attrs.items())
        feeds, inits = [], []
        for x in dict.fromkeys(x for x in inputs if x):
            if x in self.constants or (self.types[x][1] in ("int64", "int32") and x in self.values):
                # integer values (shapes computed from shapes) go in as their values: the whole graph's inference
                # propagates them as data too (data_prop), and the node's output shape depends on them
                inits.append(numpy_helper.from_array(np.asarray(self.values[x]), x))
            else:
                shape, dtype = self.types[x]
                feeds.append(helper.make_tensor_value_info(x, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                           list(shape)))
        g = helper.make_graph([node], "probe", feeds, [helper.make_tensor_value_info(x, 0, None) for x in outs],
                              inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            inferred = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
        except Exception as e:  # noqa: BLE001
            raise GraphError(f"{op}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else e}") from None
        types = _value_types(inferred)
        for x in outs:
            if x not in types:
                raise GraphError(f"{op}: no static shape for its output")
            if math.prod(types[x][0]) > MAX_ELEMENTS:
                raise GraphError(f"{op}: output of {math.prod(types[x][0])} elements is too large")
        values = self._evaluate(op, m, [vi.name for vi in feeds], outs, types)
        for x in outs:
            self.types[x] = types[x]
            self.values[x] = values[x]
        self.nodes.append(_node(op, inputs, names, attrs, self.block))
        return outs

    def _evaluate(self, op: str, model, feeds: list[str], outs: list[str], types: dict) -> dict[str, np.ndarray]:
        """The node on its actual inputs (ONNX's reference implementation): shapes must be the inferred ones (else
        inference and the implementation read the node differently), float values finite and moderate."""
        import warnings
        from onnx.reference import ReferenceEvaluator
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = ReferenceEvaluator(model).run(None, {x: self.values[x] for x in feeds})
        except Exception as e:  # noqa: BLE001 - the reference rejects what inference let through
            raise GraphError(f"{op}: the reference cannot evaluate it ({type(e).__name__}: {str(e)[:100]})") from None
        out = {}
        for x, v in zip(outs, got):
            v = np.asarray(v)
            if tuple(v.shape) != types[x][0]:
                raise GraphError(f"{op}: inferred shape {list(types[x][0])}, computed {list(v.shape)}")
            if v.dtype.kind == "f" and v.size and (not np.all(np.isfinite(v)) or np.max(np.abs(v)) > VALUE_LIMIT):
                raise ValueDomainError(f"{op}: values not finite or above {VALUE_LIMIT:g} on its inputs")
            out[x] = v
        return out

    def one(self, op: str, inputs: Sequence[str], attrs: dict | None = None) -> str:
        """Add one node; its first output."""
        return self.node(op, inputs, attrs)[0]

    # -- adapters --------------------------------------------------------------------------------------------
    def adapt(self, x: str, shape: Sequence[int]) -> str:
        """``x`` brought to ``shape``: a Reshape where the element counts agree, else a Slice and/or a Pad (same
        rank), else flattened, cut or padded and reshaped."""
        shape = tuple(int(d) for d in shape)
        have = self.shape(x)
        if have == shape:
            return x
        was = self.block
        self.block = "adapter"
        try:
            if math.prod(have) == math.prod(shape):
                return self.one("Reshape", [x, self.const(np.array(shape, np.int64), "shape")])
            if len(have) == len(shape):
                return self._slice_pad(x, have, shape)
            flat = self.one("Reshape", [x, self.const(np.array([-1], np.int64), "shape")])
            flat = self._slice_pad(flat, (math.prod(have),), (math.prod(shape),))
            return self.one("Reshape", [flat, self.const(np.array(shape, np.int64), "shape")])
        finally:
            self.block = was

    def _slice_pad(self, x: str, have: Sequence[int], want: Sequence[int]) -> str:
        cut = [i for i, (h, w) in enumerate(zip(have, want)) if h > w]
        if cut:
            x = self.one("Slice", [x, self.const(np.zeros(len(cut), np.int64), "starts"),
                                   self.const(np.array([want[i] for i in cut], np.int64), "ends"),
                                   self.const(np.array(cut, np.int64), "axes")])
        grow = [max(0, w - h) for h, w in zip(have, want)]
        if any(grow):
            x = self.one("Pad", [x, self.const(np.array([0] * len(grow) + grow, np.int64), "pads")])
        return x

    def rank(self, x: str, r: int, rng: np.random.Generator) -> str:
        """``x`` as a rank-``r`` tensor with the same elements where it can be (a Reshape), sizes chosen from its
        own dims."""
        have = self.shape(x)
        if len(have) == r:
            return x
        n = math.prod(have)
        dims = _factor(n, r, rng)
        return self.adapt(x, dims)

    def input_values(self) -> list[np.ndarray]:
        return [self.values[v.name] for v in self.inputs]

    def graph(self, outputs: Sequence[str], name: str = "fuzz") -> Graph:
        return Graph(list(self.inputs), list(self.nodes), list(outputs), dict(self.constants), self.opset, name)


MAX_ELEMENTS = 1 << 14  # per value: onnx.reference's Conv and the fp64 recomputation stay fast


def _node(op: str, inputs: Sequence[str], outputs: Sequence[str], attrs: dict, block: str) -> Node:
    return Node(op, list(inputs), list(outputs), dict(attrs), block=block)


def _factor(n: int, r: int, rng: np.random.Generator) -> list[int]:
    """``r`` positive dims whose product is ``n`` (small factors spread over the dims)."""
    dims = [1] * r
    primes = []
    m, p = n, 2
    while m > 1 and p * p <= m:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    if m > 1:
        primes.append(m)
    for q in sorted(primes, reverse=True):
        k = int(np.argmin(dims)) if rng.random() < 0.7 else int(rng.integers(r))
        dims[k] *= q
    return dims
