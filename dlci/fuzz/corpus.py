"""The block corpus (the paper's BC): the blocks a generated network is made of, with their allowed in-degrees and
inner edges.

- **Operator blocks** come from what is installed, not from a hand table: every ONNX backend node test case
  (``onnx_node``, migrated by dlci.sources) whose operator computes float32 data is a parameterised building block
  — its attributes and constant inputs are known-valid parameter sets (the variants), its inputs' types decide which
  ones can be data edges (the ONNX schema's type constraints: an input sharing the output's type parameter), and the
  schema's attribute types and the values the cases use give the parameter mutation its domain.
- **Subgraph blocks** are the structures compilers treat specially and random wiring rarely produces (the paper's
  subgraphs): conv -> norm -> activation, conv + bias + activation, a residual add, self-attention, reshape/transpose
  chains (channel shuffle), split/concat, and the decomposed forms of LayerNorm, GELU, softmax, HardSwish, SiLU and a
  squeeze-excite block, which pattern-matching fusions rewrite. Their parameters are computed from the shape they
  receive (e.g. "same" padding from kernel, stride and dilation, as the paper's eq. 9-10), so every instance is valid.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from dlci.fuzz.build import ADAPTER_OPS, Builder, ValueDomainError
from dlci.models.graph import DEFAULT_OPSET, GraphError, Value, schema
from dlci.operators import ONNX_RANDOM as _RANDOM

OUT_DEGREES = (0, 1, 2)  # the out-degrees the corpus allows every operator (the paper's {0, 1, 2})
# operators left out of operator blocks, with why (everything else float32-valued from the node tests is in)
EXCLUDED = {
    "Hardmax": "a one-hot of an argmax: ties make its values arbitrary",
    "Dropout": "training-only randomness; identity in inference",
    "Constant": "no data input", "ConstantOfShape": "no data input", "EyeLike": "no data input",
    "Range": "no data input",
}


class Block:
    """A corpus entry. ``draw`` picks parameters, ``mutate`` changes one (the paper's parameter mutation),
    ``build`` adds the block's nodes for the given data inputs and returns its output value."""
    name: str
    ops: tuple[str, ...]
    in_degrees: tuple[int, ...]
    inner_edges: tuple[tuple[int, int], ...] = ()
    kind = "operator"

    def draw(self, rng: np.random.Generator) -> dict:
        raise NotImplementedError

    def mutate(self, params: dict, rng: np.random.Generator) -> dict:
        raise NotImplementedError

    def build(self, b: Builder, xs: list[str], params: dict, rng: np.random.Generator) -> str:
        raise NotImplementedError

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind, "ops": list(self.ops), "in_degrees": list(self.in_degrees),
                "inner_edges": [list(e) for e in self.inner_edges]}


# -- operator blocks from the ONNX node tests ------------------------------------------------------------------

# constant inputs whose meaning does not depend on the data's shape beyond what ONNX's shape inference checks (axes,
# a target shape, pads, slice bounds, scalar bounds): a block with only such constants may take the shape it is
# given; any other constant (weights, statistics, indices) was written for the node test's own shapes, and the block
# is then placed at those shapes (adapters bring its inputs there)
SHAPE_FREE_INPUTS = frozenset({"axes", "axis", "shape", "pads", "repeats", "split", "starts", "ends", "steps",
                               "constant_value", "min", "max", "scales", "sizes", "roi"})


@dataclass
class _Variant:
    attrs: dict
    slots: list[tuple[str, np.ndarray, str]]  # per node input: ("data"|"const"|"absent", its value, formal name)
    origin: str

    @property
    def shape_free(self) -> bool:
        return all(role != "const" or name in SHAPE_FREE_INPUTS for role, _, name in self.slots)


class OperatorBlock(Block):
    def __init__(self, op: str, variants: list[_Variant], data_slots: int):
        self.name = op
        self.ops = (op,)
        self.variants = variants
        self.in_degrees = tuple(range(1, data_slots + 1))
        domain: dict[str, list] = {}
        for v in variants:
            for a, val in v.attrs.items():
                if isinstance(val, float) and val not in domain.setdefault(a, []):
                    domain[a].append(val)
        self.float_attrs = domain  # the parameters a mutation may move freely (integers, strings and lists stay
        # as a node test sets them: a pooling's pads, a Mod's fmod are only valid with the rest of their case)

    def draw(self, rng):
        return {"variant": int(rng.integers(len(self.variants))), "attrs": {}}

    def mutate(self, params, rng):
        p = {"variant": params["variant"], "attrs": dict(params.get("attrs", {}))}
        v = self.variants[p["variant"] % len(self.variants)]
        names = sorted(a for a in self.float_attrs if a in v.attrs)
        if not names or rng.random() < 0.3:
            p["variant"] = int(rng.integers(len(self.variants)))
            p["attrs"] = {}
            return p
        a = names[int(rng.integers(len(names)))]
        p["attrs"][a] = _near(self.float_attrs[a], rng)
        return p

    def build(self, b, xs, params, rng):
        v = self.variants[params["variant"] % len(self.variants)]
        attrs = {**v.attrs, **params.get("attrs", {})}
        data = [j for j, (role, _, _) in enumerate(v.slots) if role == "data"]
        pure = not any(role == "const" for role, _, _ in v.slots)
        if not pure:
            data = data[:1]  # weights or parameters beside the data: only the data is an edge
        if not xs or len(xs) > len(data):
            raise GraphError(f"{self.name} takes 1 to {len(data)} data inputs here, not {len(xs)}")
        edge = dict(zip(data, xs))
        plans = []
        if v.shape_free:
            # as given: the data inputs that get no edge are constants of the first input's shape
            plans.append({j: edge.get(j, ("@random", xs[0])) for j in data})
            if len(xs) > 1:  # an aggregation: the other inputs brought to the first one's shape (the paper's rule)
                plans.append({j: (x if k == 0 else ("@like", x, xs[0])) for k, (j, x) in enumerate(edge.items())})
        plans.append({j: ("@native", x, tuple(v.slots[j][1].shape)) for j, x in edge.items()})
        last: Exception | None = None
        for plan in plans:
            for guard in _VALUE_GUARDS:
                mark = b.mark()
                try:
                    ins = []
                    for j, (role, value, _) in enumerate(v.slots):
                        if j in plan:
                            ins.append(_placed(b, plan[j], guard if j == data[0] else (), rng))
                        elif role == "absent":
                            ins.append("")
                        else:
                            ins.append(b.const(value, "w"))
                    while ins and not ins[-1]:
                        ins.pop()
                    out = b.node(self.name, ins, attrs)[0]
                    if b.dtype(out) != "float32":
                        raise GraphError(f"{self.name} gives {b.dtype(out)}")
                    return out
                except ValueDomainError as e:  # outside the operator's domain: the next guard, then the next plan
                    b.rollback(mark)
                    last = e
                except GraphError as e:
                    b.rollback(mark)
                    last = e
                    break
        raise last or GraphError(f"{self.name}: cannot be placed")


# value guards tried in turn when an operator's data is outside its domain: none, squashed into (0, 1) (acos, log,
# sqrt, atanh), moved to [1, inf) (acosh); the guards are operators of the corpus, so they count as coverage too
_VALUE_GUARDS = ((), ("Sigmoid",), ("Abs", "AddOne"))


def _placed(b: Builder, how, guard: tuple = (), rng=None) -> str:
    if isinstance(how, str):
        x = how
    else:
        kind, x, *ref = how
        if kind == "@random":  # a constant input shaped like the data
            return b.const((rng or np.random.default_rng(0)).standard_normal(b.shape(x)).astype(np.float32), "w")
        x = b.adapt(x, b.shape(ref[0]) if kind == "@like" else ref[0])
    for g in guard:
        was, b.block = b.block, "adapter"
        try:
            x = b.one("Add", [x, b.const(np.float32(1.0), "one")]) if g == "AddOne" else b.one(g, [x])
        finally:
            b.block = was
    return x


def _near(domain: list, rng) -> Any:
    """A value for an attribute: one the node tests use, or a neighbour of one."""
    v = domain[int(rng.integers(len(domain)))]
    if rng.random() < 0.5:
        return v
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if isinstance(v, int):
        return max(0, v + int(rng.choice([-1, 1])))
    if isinstance(v, float):
        return float(np.float32(v * rng.uniform(0.5, 2.0)))
    if isinstance(v, list) and v and all(isinstance(e, int) for e in v):
        w = list(v)
        k = int(rng.integers(len(w)))
        w[k] = max(0, w[k] + int(rng.choice([-1, 1])))
        return w
    return v


def operator_blocks(opset: int = DEFAULT_OPSET) -> tuple[list[OperatorBlock], dict[str, str]]:
    """Operator blocks from the ONNX node tests (harvested by dlci.sources, cached), each variant checked by ONNX
    inference at ``opset`` on its own shapes; and the operators left out with why."""
    from dlci import sources
    from dlci.instance.recipe import attribute_value
    from dlci.models.onnx_io import feed_names, load_onnx
    skipped: dict[str, str] = {}
    by_op: dict[str, list[_Variant]] = {}
    data_slots: dict[str, int] = {}
    for inst in sources.load("onnx_node"):
        try:
            model = load_onnx(inst.arrays)
        except Exception:  # noqa: BLE001
            continue
        if len(model.graph.node) != 1:
            continue
        node = model.graph.node[0]
        op = node.op_type
        if node.domain not in ("", "ai.onnx"):
            skipped.setdefault(op, f"domain {node.domain}")
            continue
        if op in EXCLUDED or op in _RANDOM:
            skipped.setdefault(op, EXCLUDED.get(op, "random"))
            continue
        sch = schema(op, opset)
        if sch is None or sch.deprecated:
            skipped.setdefault(op, f"not in opset {opset}")
            continue
        if any(a.type in (5, 10) for a in node.attribute):  # GRAPH / GRAPHS
            skipped.setdefault(op, "subgraph attribute")
            continue
        feeds = dict(zip(feed_names(model), inst.input_arrays()))
        formal = list(sch.inputs)
        out_type = sch.outputs[0].type_str if sch.outputs else None
        slots: list[tuple[str, np.ndarray, str]] = []
        ok = True
        for j, x in enumerate(node.input):
            f = formal[min(j, len(formal) - 1)] if formal else None
            if not x:
                slots.append(("absent", np.zeros(0, np.float32), f.name if f else ""))
                continue
            if x not in feeds:
                ok = False
                break
            a = np.asarray(feeds[x])
            # a data edge: an input of the output's type parameter, whose type set has float32 (a case written
            # with float64 or float16 values takes float32 ones as well)
            is_data = f is not None and f.type_str == out_type and a.dtype.kind == "f" and a.size > 0 \
                and "tensor(float)" in _allowed(sch, f.type_str)
            slots.append(("data", a.astype(np.float32), f.name) if is_data else ("const", a, f.name if f else ""))
        if not ok or not any(role == "data" for role, _, _ in slots):
            skipped.setdefault(op, "no float data input")
            continue
        attrs = {a.name: attribute_value(a) for a in node.attribute}
        if any(isinstance(v, dict) for v in attrs.values()):
            skipped.setdefault(op, "tensor attribute")
            continue
        if op == "RoiAlign" and attrs.get("mode") == "max":
            skipped.setdefault("RoiAlign(mode=max)", "the specification's max mode is disputed (ONNX Runtime warns "
                                                     "that its own summation there is incorrect)")
            continue
        variant = _Variant(attrs, slots, inst.origin.test)
        if not _variant_valid(op, variant, opset):
            skipped.setdefault(op, f"its node tests are not valid at opset {opset}")
            continue
        by_op.setdefault(op, []).append(variant)
        pure = not any(r == "const" for r, _, _ in slots)
        data_slots[op] = max(data_slots.get(op, 0), min(3, sum(1 for r, _, _ in slots if r == "data")) if pure else 1)
    blocks = [OperatorBlock(op, vs, data_slots[op]) for op, vs in sorted(by_op.items())]
    for op in by_op:
        skipped.pop(op, None)
    return blocks, skipped


def _allowed(sch, type_str: str) -> set[str]:
    """The types a schema's type parameter (or a literal type) allows."""
    for c in sch.type_constraints:
        if c.type_param_str == type_str:
            return set(c.allowed_type_strs)
    return {type_str}


def _variant_valid(op: str, v: _Variant, opset: int) -> bool:
    """The node test's own case, at its own shapes and values, through ONNX inference and the reference in float32
    and float64 (the oracle's arbitration needs both)."""
    data = [(j, a) for j, (r, a, _) in enumerate(v.slots) if r == "data"]
    b = Builder([Value(f"x{j}", tuple(a.shape), "float32") for j, a in data], opset, values=[a for _, a in data])
    ins, k = [], 0
    for role, a, _ in v.slots:
        if role == "data":
            ins.append(b.inputs[k].name)
            k += 1
        elif role == "absent":
            ins.append("")
        else:
            ins.append(b.const(a, "w"))
    while ins and not ins[-1]:
        ins.pop()
    try:
        out = b.node(op, ins, v.attrs)[0]
        if b.dtype(out) != "float32":
            return False
        b.graph([out]).evaluate(b.input_values(), float64=True)
        return True
    except Exception:  # noqa: BLE001 - GraphError, or no float64 kernel in the reference
        return False


# -- subgraph blocks ---------------------------------------------------------------------------------------------

class Template(Block):
    """A subgraph block: ``fn(b, xs, p, rng) -> output`` builds it; ``space`` gives each parameter's choices."""
    kind = "subgraph"

    def __init__(self, name: str, fn: Callable, in_degrees: tuple[int, ...], inner_edges: tuple, space: dict):
        self.name, self.fn, self.in_degrees, self.inner_edges, self.space = name, fn, in_degrees, inner_edges, space
        self.ops = tuple(dict.fromkeys(name.split("+")))

    def draw(self, rng):
        return {k: _pick(v, rng) for k, v in self.space.items()}

    def mutate(self, params, rng):
        p = dict(params)
        if self.space:
            k = sorted(self.space)[int(rng.integers(len(self.space)))]
            p[k] = _pick(self.space[k], rng)
        return p

    def build(self, b, xs, params, rng):
        return self.fn(b, xs, params, rng)


def _pick(choices: list, rng):
    c = choices[int(rng.integers(len(choices)))]
    return c() if callable(c) else c


def _ranked(b: Builder, x: str, low: int, rng, to: int | None = None) -> str:
    """``x`` when its rank is at least ``low``, else its elements as a rank-``to`` tensor (default ``low``)."""
    return x if len(b.shape(x)) >= low else b.rank(x, to or low, rng)


def _rand(shape, rng, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _nchw(b: Builder, x: str, rng) -> str:
    """``x`` as an image batch [N, C, H, W] with H, W >= 2 where it has the elements."""
    s = b.shape(x)
    if len(s) == 4 and s[2] >= 2 and s[3] >= 2:
        return x
    n = math.prod(s)
    c = next((c for c in (4, 3, 2, 1) if n % c == 0 and n // c >= 4), 1)
    rest = n // c
    h = next((h for h in range(int(math.isqrt(rest)), 0, -1) if rest % h == 0), 1)
    return b.adapt(x, (1, c, h, rest // h))


def _same_pads(k: int, d: int) -> list[int]:
    """Padding that keeps H and W at stride 1 (the paper's eq. 9-10): total d*(k-1), split begin/end."""
    total = d * (k - 1)
    return [total // 2, total // 2, total - total // 2, total - total // 2]


def _conv(b, x, rng, co, k, d, same, group=1, bias=True):
    c = b.shape(x)[1]
    group = group if c % group == 0 and co % group == 0 else 1
    w = b.const(_rand((co, c // group, k, k), rng, 1 / math.sqrt(max(1, c // group * k * k))), "W")
    pads = _same_pads(k, d) if same else [0, 0, 0, 0]
    h, wd = b.shape(x)[2:]
    if not same and (h < d * (k - 1) + 1 or wd < d * (k - 1) + 1):
        pads = _same_pads(k, d)
    ins = [x, w] + ([b.const(_rand((co,), rng, 0.1), "B")] if bias else [])
    return b.one("Conv", ins, {"kernel_shape": [k, k], "pads": pads, "dilations": [d, d], "group": group})


def _t_conv_bn_act(act):
    def fn(b, xs, p, rng):
        x = _nchw(b, xs[0], rng)
        co = p["co"] or b.shape(x)[1]
        y = _conv(b, x, rng, co, p["k"], p["d"], p["same"], p["group"], bias=p["bias"])
        stats = [np.abs(_rand((co,), rng)) + 0.5, _rand((co,), rng, 0.1), _rand((co,), rng, 0.1),
                 np.abs(_rand((co,), rng)) + 0.5]
        y = b.one("BatchNormalization", [y] + [b.const(a, "bn") for a in stats], {"epsilon": p["eps"]})
        return _activation(b, y, act, p)
    return fn


def _activation(b, y, act, p):
    if act == "Clip":
        return b.one("Clip", [y, b.const(np.float32(p.get("lo", 0.0)), "lo"),
                              b.const(np.float32(p.get("hi", 6.0)), "hi")])
    if act == "LeakyRelu":
        return b.one("LeakyRelu", [y], {"alpha": p.get("alpha", 0.1)})
    return b.one(act, [y])


def _t_conv_bias_act(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    co = p["co"] or b.shape(x)[1]
    y = _conv(b, x, rng, co, p["k"], p["d"], p["same"], bias=False)
    bias_shape = {"c11": (co, 1, 1), "1c11": (1, co, 1, 1), "scalar": ()}[p["bias_shape"]]
    y = b.one("Add", [y, b.const(_rand(bias_shape, rng, 0.5), "bias")])
    return _activation(b, y, p["act"], p)


def _t_conv_scale_shift(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    co = p["co"] or b.shape(x)[1]
    y = _conv(b, x, rng, co, p["k"], p["d"], p["same"], bias=p["bias"])
    y = b.one("Mul", [y, b.const(_rand((1, co, 1, 1), rng) + 1.0, "scale")])
    return b.one("Add", [y, b.const(_rand((1, co, 1, 1), rng, 0.5), "shift")])


def _t_residual(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    c = b.shape(x)[1]
    y = _conv(b, x, rng, c, p["k"], 1, True, bias=True)
    y = b.one("Relu", [y])
    y = _conv(b, y, rng, c, p["k2"], 1, True, bias=True)
    return b.one("Add", [y, x] if p["order"] else [x, y])


def _t_attention(b, xs, p, rng):
    x = xs[0]
    s = b.shape(x)
    if len(s) != 3 or s[-1] < 2:
        x = b.rank(x, 3, rng)
    _, seq, d = b.shape(x)
    dk = p["dk"] or d
    q = b.one("MatMul", [x, b.const(_rand((d, dk), rng, 1 / math.sqrt(d)), "Wq")])
    k = b.one("MatMul", [x, b.const(_rand((d, dk), rng, 1 / math.sqrt(d)), "Wk")])
    v = b.one("MatMul", [x, b.const(_rand((d, dk), rng, 1 / math.sqrt(d)), "Wv")])
    kt = b.one("Transpose", [k], {"perm": [0, 2, 1]})
    att = b.one("MatMul", [q, kt])
    att = b.one("Mul", [att, b.const(np.float32(p["scale"] / math.sqrt(dk)), "scale")])
    att = b.one("Softmax", [att], {"axis": -1})
    return b.one("MatMul", [att, v])


def _t_shuffle(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    n, c, h, w = b.shape(x)
    g = p["groups"] if c % p["groups"] == 0 and c > 1 else 1
    if g == 1:
        x = b.adapt(x, (n, 2 * max(1, c // 2), h, w))
        n, c, h, w = b.shape(x)
        g = 2
    y = b.one("Reshape", [x, b.const(np.array([n, g, c // g, h, w], np.int64), "shape")])
    y = b.one("Transpose", [y], {"perm": [0, 2, 1, 3, 4]})
    return b.one("Reshape", [y, b.const(np.array([n, c, h, w], np.int64), "shape")])


def _t_transpose2(b, xs, p, rng):
    x = _ranked(b, xs[0], 2, rng, to=3)
    r = len(b.shape(x))
    p1 = list(rng.permutation(r))
    p2 = [int(i) for i in (np.argsort(p1) if p["inverse"] else rng.permutation(r))]
    y = b.one("Transpose", [x], {"perm": [int(i) for i in p1]})
    return b.one("Transpose", [y], {"perm": p2})


def _t_split_concat(b, xs, p, rng):
    x = xs[0]
    s = b.shape(x)
    axes = [a for a in range(len(s)) if s[a] >= 2]
    if not axes:
        x = b.rank(x, 2, rng)
        s = b.shape(x)
        axes = [a for a in range(len(s)) if s[a] >= 2]
        if not axes:
            raise GraphError("nothing to split")
    axis = axes[int(rng.integers(len(axes)))]
    first = int(rng.integers(1, s[axis]))
    parts = b.node("Split", [x, b.const(np.array([first, s[axis] - first], np.int64), "split")], {"axis": axis},
                   outputs=2)
    a = b.one(p["op"], [parts[0]])
    ordered = [a, parts[1]] if p["order"] else [parts[1], a]
    return b.one("Concat", ordered, {"axis": axis})


def _t_concat_split(b, xs, p, rng):
    x = xs[0]
    y = b.adapt(xs[1], b.shape(x)) if len(xs) > 1 else b.one("Neg", [x])
    s = b.shape(x)
    axis = int(rng.integers(len(s))) if s else 0
    if not s:
        raise GraphError("scalar")
    c = b.one("Concat", [x, y], {"axis": axis})
    n = b.shape(c)[axis]
    cut = int(rng.integers(1, n)) if n > 1 else 1
    parts = b.node("Split", [c, b.const(np.array([cut, n - cut], np.int64), "split")], {"axis": axis},
                   outputs=2)
    return b.one("Add", [parts[0], b.adapt(parts[1], b.shape(parts[0]))])


def _axes_last(b, x, p):
    r = len(b.shape(x))
    return b.const(np.array([p["axis"] if p["axis"] < 0 else min(p["axis"], r - 1)], np.int64), "axes")


def _t_layernorm(b, xs, p, rng):
    x = _ranked(b, xs[0], 2, rng)
    d = b.shape(x)[-1]
    ax = _axes_last(b, x, p)
    mean = b.one("ReduceMean", [x, ax], {"keepdims": 1})
    diff = b.one("Sub", [x, mean])
    sq = b.one("Pow", [diff, b.const(np.float32(p["pow"]), "two")])
    var = b.one("ReduceMean", [sq, ax], {"keepdims": 1})
    std = b.one("Sqrt", [b.one("Add", [var, b.const(np.float32(p["eps"]), "eps")])])
    y = b.one("Div", [diff, std])
    y = b.one("Mul", [y, b.const(_rand((d,), rng) + 1.0, "gamma")])
    return b.one("Add", [y, b.const(_rand((d,), rng, 0.1), "beta")])


def _t_gelu(b, xs, p, rng):
    x = xs[0]
    y = b.one("Div", [x, b.const(np.float32(p["sqrt2"]), "sqrt2")])
    y = b.one("Erf", [y])
    y = b.one("Add", [y, b.const(np.float32(p["one"]), "one")])
    y = b.one("Mul", [x, y])
    return b.one("Mul", [y, b.const(np.float32(p["half"]), "half")])


def _t_softmax(b, xs, p, rng):
    x = _ranked(b, xs[0], 1, rng)
    ax = _axes_last(b, x, p)
    m = b.one("ReduceMax", [x, ax], {"keepdims": 1})
    e = b.one("Exp", [b.one("Sub", [x, m])])
    s = b.one("ReduceSum", [e, ax], {"keepdims": 1})
    return b.one("Div", [e, s])


def _t_hardswish(b, xs, p, rng):
    x = xs[0]
    y = b.one("Add", [x, b.const(np.float32(p["three"]), "three")])
    y = b.one("Clip", [y, b.const(np.float32(0.0), "zero"), b.const(np.float32(p["six"]), "six")])
    y = b.one("Mul", [x, y])
    return b.one("Div", [y, b.const(np.float32(p["six"]), "six")])


def _t_silu(b, xs, p, rng):
    x = xs[0]
    s = b.one("Sigmoid", [x])
    return b.one("Mul", [x, s] if p["order"] else [s, x])


def _t_se(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    c = b.shape(x)[1]
    r = max(1, c // p["ratio"])
    g = b.one("GlobalAveragePool", [x])
    g = b.one("Conv", [g, b.const(_rand((r, c, 1, 1), rng, 1 / math.sqrt(c)), "W1"), b.const(_rand((r,), rng, 0.1), "B1")],
              {"kernel_shape": [1, 1]})
    g = b.one("Relu", [g])
    g = b.one("Conv", [g, b.const(_rand((c, r, 1, 1), rng, 1 / math.sqrt(r)), "W2"), b.const(_rand((c,), rng, 0.1), "B2")],
              {"kernel_shape": [1, 1]})
    g = b.one("Sigmoid", [g])
    return b.one("Mul", [x, g])


def _t_pad_conv(b, xs, p, rng):
    """An explicit Pad before a convolution or pooling, which compilers merge into it (the paper's rule: "Pad is
    merged into adjacent operators"), the window operator with its own padding mode and stride."""
    x = _nchw(b, xs[0], rng)
    top, left = p["pad"], p["pad"] if p["symmetric"] else 0
    y = b.one("Pad", [x, b.const(np.array([0, 0, top, left, 0, 0, p["pad"], p["pad"]], np.int64), "pads"),
                      b.const(np.float32(p["value"]), "value")], {"mode": "constant"})
    k, stride = p["k"], p["stride"]
    window = {"kernel_shape": [k, k], "strides": [stride, stride]}
    if p["auto_pad"] != "NOTSET":
        window["auto_pad"] = p["auto_pad"]
    if p["then"] == "Conv":
        c = b.shape(x)[1]
        w = b.const(_rand((c, c, k, k), rng, 1 / math.sqrt(c * k * k)), "W")
        return b.one("Conv", [y, w, b.const(_rand((c,), rng, 0.1), "B")], window)
    return b.one(p["then"], [y], window)


def _t_matmul_add(b, xs, p, rng):
    x = _ranked(b, xs[0], 2, rng)
    k = b.shape(x)[-1]
    n = p["n"] or k
    y = b.one("MatMul", [x, b.const(_rand((k, n), rng, 1 / math.sqrt(k)), "W")])
    bias_shape = (n,) if p["bias"] == "row" else (1,) * (len(b.shape(y)) - 1) + (n,)
    y = b.one("Add", [y, b.const(_rand(bias_shape, rng, 0.5), "bias")] if p["order"] else
              [b.const(_rand(bias_shape, rng, 0.5), "bias"), y])
    return _activation(b, y, p["act"], p)


def _t_flatten_gemm(b, xs, p, rng):
    x = _ranked(b, xs[0], 1, rng, to=2)
    y = b.one("Flatten", [x], {"axis": min(p["axis"], len(b.shape(x)))})
    k = b.shape(y)[1]
    n = p["n"]
    w = _rand((n, k) if p["transB"] else (k, n), rng, 1 / math.sqrt(max(1, k)))
    return b.one("Gemm", [y, b.const(w, "W"), b.const(_rand((n,), rng, 0.5), "C")],
                 {"transB": p["transB"], "alpha": p["alpha"], "beta": p["beta"]})


def _t_depthwise(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    c = b.shape(x)[1]
    y = _conv(b, x, rng, c, p["k"], p["d"], True, group=c, bias=True)
    y = _activation(b, y, p["act"], p)
    return _conv(b, y, rng, p["co"] or c, 1, 1, True, bias=True)


def _t_reduce_bcast(b, xs, p, rng):
    x = _ranked(b, xs[0], 1, rng, to=2)
    axis = int(rng.integers(len(b.shape(x))))
    m = b.one(p["reduce"], [x, b.const(np.array([axis], np.int64), "axes")], {"keepdims": 1})
    return b.one(p["combine"], [x, m])


def _t_shape_flatten(b, xs, p, rng):
    """A dynamic reshape as exporters write it: the target shape computed from the data's own Shape."""
    x = _ranked(b, xs[0], 2, rng, to=3)
    r = len(b.shape(x))
    keep = min(p["keep"], r - 1)
    shape = b.one("Shape", [x])
    head = b.one("Slice", [shape, b.const(np.array([0], np.int64), "s"), b.const(np.array([keep], np.int64), "e")])
    tgt = b.one("Concat", [head, b.const(np.array([-1], np.int64), "m1")], {"axis": 0})
    return b.one("Reshape", [x, tgt])


def _t_shape_gather(b, xs, p, rng):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: one dimension read back and the rest merged."""
    x = _ranked(b, xs[0], 2, rng, to=3)
    axis = p["axis"] % len(b.shape(x))
    dim = b.one("Gather", [b.one("Shape", [x]), b.const(np.array(axis, np.int64), "i")], {"axis": 0})
    dim = b.one("Unsqueeze", [dim, b.const(np.array([0], np.int64), "ax")])
    order = [dim, b.const(np.array([-1], np.int64), "m1")] if p["first"] else [b.const(np.array([-1], np.int64),
                                                                                      "m1"), dim]
    y = b.one("Reshape", [x, b.one("Concat", order, {"axis": 0})])
    return b.one(p["then"], [y])


def _t_shape_expand(b, xs, p, rng):
    """ConstantOfShape(Shape(x)) and Expand to x's shape: shapes flowing as data."""
    x = xs[0]
    s = b.one("Shape", [x])
    if p["how"] == "ConstantOfShape":  # its value attribute: a one-element tensor
        c = b.node("ConstantOfShape", [s], {"value": {"$array": b.const(np.array([p["value"]], np.float32), "v")}})[0]
        return b.one("Mul", [x, c])
    small = b.const(_rand((1,) * max(0, len(b.shape(x)) - 1) + (b.shape(x)[-1] if b.shape(x) else 1,), rng), "row")
    e = b.one("Expand", [small, s])
    return b.one("Add", [x, e])


def _t_dynamic_resize(b, xs, p, rng):
    """Resize to a size read from the data's own Shape (batch and channels kept, the spatial size given), as an
    exported interpolate with a dynamic batch has it."""
    x = _nchw(b, xs[0], rng)
    n, c, h, w = b.shape(x)
    head = b.one("Slice", [b.one("Shape", [x]), b.const(np.array([0], np.int64), "s"),
                           b.const(np.array([2], np.int64), "e")])
    hw = np.array([max(1, int(h * p["factor"])), max(1, int(w * p["factor"]))], np.int64)
    sizes = b.one("Concat", [head, b.const(hw, "hw")], {"axis": 0})
    return b.one("Resize", [x, "", "", sizes], {"mode": p["mode"]})


def _t_nhwc_conv(b, xs, p, rng):
    """A layout round trip around a convolution (NHWC -> NCHW -> conv -> NHWC), as converted TF models have it."""
    x = _nchw(b, xs[0], rng)
    t = b.one("Transpose", [x], {"perm": [0, 2, 3, 1]})  # the data as NHWC
    y = b.one("Transpose", [t], {"perm": [0, 3, 1, 2]})
    y = _conv(b, y, rng, p["co"] or b.shape(x)[1], p["k"], 1, True, bias=True)
    y = b.one(p["act"], [y])
    return b.one("Transpose", [y], {"perm": [0, 2, 3, 1]})


def _t_matmul_scale(b, xs, p, rng):
    """A matmul scaled before or after (fusions fold a scalar into it, and must leave anything else alone)."""
    x = _ranked(b, xs[0], 2, rng)
    k = b.shape(x)[-1]
    n = p["n"] or k
    scale_shape = {"scalar": (), "one": (1,), "row": (n,), "col": (b.shape(x)[-2], 1)}[p["scale"]]
    sc = b.const(_rand(scale_shape, rng) + 1.5, "scale")
    w = b.const(_rand((k, n), rng, 1 / math.sqrt(k)), "W")
    if p["where"] == "after":
        return b.one("Mul", [b.one("MatMul", [x, w]), sc])
    if p["scale"] in ("row",):
        sc = b.const(_rand((k,), rng) + 1.5, "scale")
    return b.one("MatMul", [b.one("Mul", [x, sc]), w])


def _t_squeeze_chain(b, xs, p, rng):
    """Unsqueeze, an op, Squeeze back (reshape-like chains a simplifier removes)."""
    x = xs[0]
    r = len(b.shape(x))
    axis = int(rng.integers(r + 1))
    u = b.one("Unsqueeze", [x, b.const(np.array([axis], np.int64), "ax")])
    y = b.one(p["op"], [u])
    return b.one("Squeeze", [y, b.const(np.array([axis], np.int64), "ax")])


def _t_reduce_keepdims(b, xs, p, rng):
    """A reduction without keepdims, its axis put back with Unsqueeze and broadcast against the data."""
    x = _ranked(b, xs[0], 2, rng)
    axis = int(rng.integers(len(b.shape(x))))
    m = b.one(p["reduce"], [x, b.const(np.array([axis], np.int64), "axes")], {"keepdims": 0})
    m = b.one("Unsqueeze", [m, b.const(np.array([axis], np.int64), "ax")])
    return b.one("Sub", [x, m])


def _t_const_chain(b, xs, p, rng):
    """Arithmetic on a constant before it meets the data: what constant folding computes at compile time."""
    x = xs[0]
    c = b.const(_rand(b.shape(x) if p["full"] else (b.shape(x)[-1] if b.shape(x) else 1,), rng), "k")
    c = b.one(p["op1"], [c])
    c = b.one("Mul", [c, b.const(np.float32(p["scale"]), "s")])
    return b.one(p["combine"], [x, c])


def _t_transpose_matmul(b, xs, p, rng):
    """A Transpose feeding a MatMul (fusions fold a swap of the last two axes into the matmul as a transposed
    operand, and must leave any other permutation alone)."""
    x = _ranked(b, xs[0], 2, rng)
    r = len(b.shape(x))
    perm = list(range(r))
    if p["perm"] == "batch" and r >= 3:
        perm[0], perm[1] = perm[1], perm[0]
    else:
        perm[-1], perm[-2] = perm[-2], perm[-1]
    t = b.one("Transpose", [x], {"perm": perm})
    rows, cols = b.shape(t)[-2:]
    if p["side"] == "left":
        return b.one("MatMul", [t, b.const(_rand((cols, p["n"]), rng, 1 / math.sqrt(cols)), "W")])
    return b.one("MatMul", [b.const(_rand((p["n"], rows), rng, 1 / math.sqrt(rows)), "W"), t])


def _t_softplus(b, xs, p, rng):
    """log(exp(x) + 1) written out (SoftPlus fusions match it; with another constant it is not a softplus)."""
    e = b.one("Exp", [xs[0]])
    return b.one("Log", [b.one("Add", [e, b.const(np.float32(p["one"]), "one")] if p["order"] else
                               [b.const(np.float32(p["one"]), "one"), e])])


def _t_mish(b, xs, p, rng):
    """x * tanh(softplus(x)), the softplus as the operator or written out (Mish fusions match both)."""
    x = xs[0]
    sp = b.one("Softplus", [x]) if p["softplus"] == "op" else _t_softplus(b, [x], {"one": 1.0, "order": True}, rng)
    t = b.one("Tanh", [sp])
    return b.one("Mul", [x, t] if p["order"] else [t, x])


def _t_quick_gelu(b, xs, p, rng):
    """x * sigmoid(alpha * x) (QuickGelu fusions expect alpha 1.702; another alpha must stay what it is)."""
    x = xs[0]
    s = b.one("Sigmoid", [b.one("Mul", [x, b.const(np.float32(p["alpha"]), "alpha")])])
    return b.one("Mul", [x, s])


def _t_max_min(b, xs, p, rng):
    """Max then Min with scalar constants (a clamp to a fusion; with low above high every element is one
    constant, which a fused clamp must still give)."""
    lo, hi = (b.const(np.float32(v), n) for v, n in ((p["lo"], "lo"), (p["hi"], "hi")))
    if p["first"] == "Max":
        return b.one("Min", [b.one("Max", [xs[0], lo]), hi])
    return b.one("Max", [b.one("Min", [xs[0], hi]), lo])


def _t_relu_clip(b, xs, p, rng):
    """Relu into Clip (fused into one clip with the larger lower bound)."""
    y = b.one("Relu", [xs[0]])
    return b.one("Clip", [y, b.const(np.float32(p["lo"]), "lo"), b.const(np.float32(p["hi"]), "hi")])


def _t_matmul_bn(b, xs, p, rng):
    """A 2-D MatMul then BatchNormalization over its columns (folded into the weights by fusions)."""
    x = _ranked(b, xs[0], 2, rng)
    if len(b.shape(x)) != 2:
        x = b.adapt(x, (math.prod(b.shape(x)[:-1]), b.shape(x)[-1]))
    k, n = b.shape(x)[1], p["n"]
    y = b.one("MatMul", [x, b.const(_rand((k, n), rng, 1 / math.sqrt(k)), "W")])
    stats = [np.abs(_rand((n,), rng)) + 0.5, _rand((n,), rng, 0.1), _rand((n,), rng, 0.1),
             np.abs(_rand((n,), rng)) + 0.5]
    return b.one("BatchNormalization", [y] + [b.const(a, "bn") for a in stats], {"epsilon": p["eps"]})


def _t_bias_softmax(b, xs, p, rng):
    """Softmax of data plus a broadcast bias (fused into one kernel by some runtimes)."""
    x = _ranked(b, xs[0], 2, rng)
    s = b.shape(x)
    shape = {"row": (s[-1],), "full": s, "head": (1,) * (len(s) - 2) + s[-2:]}[p["bias"]]
    y = b.one("Add", [x, b.const(_rand(shape, rng), "bias")])
    return b.one("Softmax", [y], {"axis": p["axis"]})


def _t_slice_slice(b, xs, p, rng):
    """Two Slices in a row (merged into one by simplifiers), on one axis or two, with steps."""
    x = _ranked(b, xs[0], 2, rng)
    s = b.shape(x)
    if s[-1] < 4 or s[0] < 2:  # room for both cuts
        x = b.adapt(x, (max(2, s[0]), *s[1:-1], max(4, s[-1])))
    y = x
    for k in range(2):
        axis = (len(s) - 1) if p["axes"] == "same" or k == 0 else 0
        n = b.shape(y)[axis]
        step = p["step"] if k == 0 else 1
        start, end = (n - 1, -n - 1) if step < 0 else (1, n)
        y = b.one("Slice", [y, b.const(np.array([start], np.int64), "s"), b.const(np.array([end], np.int64), "e"),
                            b.const(np.array([axis], np.int64), "ax"), b.const(np.array([step], np.int64), "st")])
    return y


def _t_cast_round_trip(b, xs, p, rng):
    """A float32 -> narrower or wider -> float32 round trip (removing it changes the values: only the wider one
    is exact)."""
    from onnx import TensorProto
    to = {"float16": TensorProto.FLOAT16, "double": TensorProto.DOUBLE}[p["to"]]
    y = b.one("Cast", [xs[0]], {"to": to})
    y = b.one(p["between"], [y])
    return b.one("Cast", [y], {"to": TensorProto.FLOAT})


_ACTS = ["Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSwish", "Tanh"]


def templates() -> list[Template]:
    def T(name, fn, degrees, edges, **space):
        return Template(name, fn, degrees, edges, space)
    conv_space = dict(co=[0, 0, 4, 8], k=[1, 3, 3, 5], d=[1, 1, 2], same=[True, True, False], group=[1, 1, 2],
                      bias=[True, False], eps=[1e-5, 1e-3, 0.1])
    return [
        T("Conv+BatchNormalization+Relu", _t_conv_bn_act("Relu"), (1,), ((0, 1), (1, 2)), **conv_space),
        T("Conv+BatchNormalization+Clip", _t_conv_bn_act("Clip"), (1,), ((0, 1), (1, 2)), **conv_space,
          lo=[0.0, -1.0], hi=[6.0, 1.0]),
        T("Conv+Add+Relu", _t_conv_bias_act, (1,), ((0, 1), (1, 2)), co=[0, 4, 8], k=[1, 3], d=[1, 2],
          same=[True, False], bias_shape=["c11", "1c11", "scalar"], act=["Relu"]),
        T("Conv+Mul+Add", _t_conv_scale_shift, (1,), ((0, 1), (1, 2)), co=[0, 4], k=[1, 3], d=[1, 2],
          same=[True, False], bias=[True, False]),
        T("Conv+Relu+Conv+Add", _t_residual, (1,), ((0, 1), (1, 2), (2, 3)), k=[1, 3], k2=[1, 3, 5],
          order=[True, False]),
        T("MatMul+MatMul+MatMul+Transpose+MatMul+Mul+Softmax+MatMul", _t_attention, (1,),
          ((1, 3), (0, 4), (3, 4), (4, 5), (5, 6), (6, 7), (2, 7)), dk=[0, 4, 8], scale=[1.0, 1.0, 2.0]),
        T("Reshape+Transpose+Reshape", _t_shuffle, (1,), ((0, 1), (1, 2)), groups=[2, 3, 4]),
        T("Transpose+Transpose", _t_transpose2, (1,), ((0, 1),), inverse=[True, False]),
        T("Split+Neg+Concat", _t_split_concat, (1,), ((0, 1), (1, 2), (0, 2)), op=["Neg"], order=[True, False]),
        T("Concat+Split+Add", _t_concat_split, (1, 2), ((0, 1), (1, 2)), ),
        T("ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add", _t_layernorm, (1,),
          ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 6), (5, 6), (6, 7), (7, 8)),
          axis=[-1, -1, 1], eps=[1e-5, 1e-12, 1e-3, 0.5], pow=[2.0, 2.0, 3.0]),
        T("Div+Erf+Add+Mul+Mul", _t_gelu, (1,), ((0, 1), (1, 2), (2, 3), (3, 4)),
          sqrt2=[1.4142135, 1.4142135, 2.0], one=[1.0, 1.0, 0.5], half=[0.5, 0.5, 1.0]),
        T("ReduceMax+Sub+Exp+ReduceSum+Div", _t_softmax, (1,), ((0, 1), (1, 2), (2, 3), (2, 4), (3, 4)),
          axis=[-1, -1, 0, 1]),
        T("Add+Clip+Mul+Div", _t_hardswish, (1,), ((0, 1), (1, 2), (2, 3)), three=[3.0, 3.0, 2.0],
          six=[6.0, 6.0, 4.0]),
        T("Sigmoid+Mul", _t_silu, (1,), ((0, 1),), order=[True, False]),
        T("GlobalAveragePool+Conv+Relu+Conv+Sigmoid+Mul", _t_se, (1,),
          ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)), ratio=[2, 4]),
        T("Pad+Conv", _t_pad_conv, (1,), ((0, 1),), pad=[1, 2], symmetric=[True, False], value=[0.0, 0.0, 1.5],
          then=["Conv"], k=[1, 3], stride=[1, 2], auto_pad=["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]),
        T("Pad+MaxPool", _t_pad_conv, (1,), ((0, 1),), pad=[1, 2], symmetric=[True, False], value=[0.0, -1.0, 1.5],
          then=["MaxPool"], k=[2, 3], stride=[1, 2], auto_pad=["NOTSET", "SAME_UPPER", "VALID"]),
        T("Pad+AveragePool", _t_pad_conv, (1,), ((0, 1),), pad=[1, 2], symmetric=[True, False],
          value=[0.0, 1.5], then=["AveragePool"], k=[2, 3], stride=[1, 2], auto_pad=["NOTSET", "SAME_LOWER", "VALID"]),
        T("MatMul+Add+Relu", _t_matmul_add, (1,), ((0, 1), (1, 2)), n=[0, 4, 16], bias=["row", "full"],
          order=[True, False], act=["Relu"]),
        T("MatMul+Add+Tanh", _t_matmul_add, (1,), ((0, 1), (1, 2)), n=[0, 8], bias=["row", "full"],
          order=[True, False], act=["Tanh"]),
        T("Flatten+Gemm", _t_flatten_gemm, (1,), ((0, 1),), axis=[1, 1, 2], n=[4, 8], transB=[0, 1],
          alpha=[1.0, 0.5], beta=[1.0, 2.0]),
        T("Conv+HardSwish+Conv", _t_depthwise, (1,), ((0, 1), (1, 2)), k=[3, 5], d=[1, 2], act=["HardSwish"],
          co=[0, 8]),
        T("ReduceMean+Sub", _t_reduce_bcast, (1,), ((0, 1),), reduce=["ReduceMean"], combine=["Sub"]),
        T("ReduceMax+Div", _t_reduce_bcast, (1,), ((0, 1),), reduce=["ReduceMax", "ReduceL2"], combine=["Div"]),
        T("Shape+Slice+Concat+Reshape", _t_shape_flatten, (1,), ((0, 1), (1, 2), (2, 3)), keep=[1, 2, 3]),
        T("Shape+Gather+Unsqueeze+Concat+Reshape+Relu", _t_shape_gather, (1,),
          ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)), axis=[0, 1, -1], first=[True, False], then=["Relu"]),
        T("Shape+ConstantOfShape+Mul", _t_shape_expand, (1,), ((0, 1), (1, 2)), how=["ConstantOfShape"],
          value=[1.0, 0.5, -2.0]),
        T("Shape+Expand+Add", _t_shape_expand, (1,), ((0, 1), (1, 2)), how=["Expand"]),
        T("Shape+Slice+Concat+Resize", _t_dynamic_resize, (1,), ((0, 1), (1, 2), (2, 3)), factor=[2.0, 0.5, 1.5],
          mode=["nearest", "linear"]),
        T("Transpose+Transpose+Conv+Relu+Transpose", _t_nhwc_conv, (1,), ((0, 1), (1, 2), (2, 3), (3, 4)),
          co=[0, 4], k=[1, 3], act=["Relu"]),
        T("MatMul+Mul", _t_matmul_scale, (1,), ((0, 1),), n=[0, 8], scale=["scalar", "one", "row", "col"],
          where=["after"]),
        T("Mul+MatMul", _t_matmul_scale, (1,), ((0, 1),), n=[0, 8], scale=["scalar", "one", "row"],
          where=["before"]),
        T("Unsqueeze+Relu+Squeeze", _t_squeeze_chain, (1,), ((0, 1), (1, 2)), op=["Relu"]),
        T("ReduceMean+Unsqueeze+Sub", _t_reduce_keepdims, (1,), ((0, 1), (1, 2)), reduce=["ReduceMean"]),
        T("ReduceSum+Unsqueeze+Sub", _t_reduce_keepdims, (1,), ((0, 1), (1, 2)), reduce=["ReduceSum"]),
        T("Exp+Mul+Add", _t_const_chain, (1,), ((0, 1), (1, 2)), full=[True, False], op1=["Exp"],
          scale=[0.5, 2.0], combine=["Add"]),
        T("Abs+Mul+Div", _t_const_chain, (1,), ((0, 1), (1, 2)), full=[True, False], op1=["Abs"],
          scale=[0.5, 3.0], combine=["Div"]),
        T("Transpose+MatMul", _t_transpose_matmul, (1,), ((0, 1),), perm=["last2", "last2", "batch"],
          side=["left", "right"], n=[4, 8]),
        T("Exp+Add+Log", _t_softplus, (1,), ((0, 1), (1, 2)), one=[1.0, 1.0, 2.0], order=[True, False]),
        T("Softplus+Tanh+Mul", _t_mish, (1,), ((0, 1), (1, 2)), softplus=["op"], order=[True, False]),
        T("Exp+Add+Log+Tanh+Mul", _t_mish, (1,), ((0, 1), (1, 2), (2, 3), (3, 4)), softplus=["decomposed"],
          order=[True, False]),
        T("Mul+Sigmoid+Mul", _t_quick_gelu, (1,), ((0, 1), (1, 2)), alpha=[1.702, 1.702, 1.0, -0.5]),
        T("Max+Min", _t_max_min, (1,), ((0, 1),), first=["Max"], lo=[0.0, -1.0, 0.5], hi=[6.0, 1.0, 0.25]),
        T("Min+Max", _t_max_min, (1,), ((0, 1),), first=["Min"], lo=[0.0, -1.0, 0.5], hi=[6.0, 1.0, 0.25]),
        T("Relu+Clip", _t_relu_clip, (1,), ((0, 1),), lo=[0.0, -1.0, 0.5], hi=[6.0, 1.0]),
        T("MatMul+BatchNormalization", _t_matmul_bn, (1,), ((0, 1),), n=[4, 8], eps=[1e-5, 1e-3]),
        T("Add+Softmax", _t_bias_softmax, (1,), ((0, 1),), bias=["row", "full", "head"], axis=[-1, -1, 1]),
        T("Slice+Slice", _t_slice_slice, (1,), ((0, 1),), axes=["same", "other"], step=[1, 2, -1]),
        T("Cast+Relu+Cast", _t_cast_round_trip, (1,), ((0, 1), (1, 2)), to=["float16", "double"],
          between=["Relu"]),
        T("Cast+Neg+Cast", _t_cast_round_trip, (1,), ((0, 1), (1, 2)), to=["float16"], between=["Neg"]),
    ]


# -- the corpus ----------------------------------------------------------------------------------------------------

@dataclass
class Corpus:
    blocks: list[Block]
    skipped: dict[str, str] = field(default_factory=dict)  # operators left out, with why
    op_in_degrees: dict[str, set[int]] = field(default_factory=dict)  # n_id_c: the in-degrees each op may have

    @property
    def ops(self) -> list[str]:
        """The operator types of the corpus (n_t of the coverage criteria), adapters included."""
        return sorted(self.op_in_degrees)

    def by_name(self) -> dict[str, Block]:
        return {b.name: b for b in self.blocks}

    def containing(self, op: str) -> list[Block]:
        return [b for b in self.blocks if op in b.ops]

    def restrict(self, ops: set[str]) -> "Corpus":
        """The blocks that contain one of ``ops`` (a PR's touched operators), plus every operator block as the
        producers and consumers around them; coverage is still measured over the whole corpus."""
        keep = [b for b in self.blocks if set(b.ops) & ops or b.kind == "operator"]
        return Corpus(keep, self.skipped, self.op_in_degrees)

    def describe(self) -> dict:
        return {"blocks": len(self.blocks), "operator_blocks": sum(1 for b in self.blocks if b.kind == "operator"),
                "subgraph_blocks": sum(1 for b in self.blocks if b.kind == "subgraph"), "operators": len(self.ops),
                "skipped": dict(sorted(self.skipped.items()))}


_CORPUS: dict[tuple, Corpus] = {}


def load_corpus(opset: int = DEFAULT_OPSET, *, only: list[str] | None = None) -> Corpus:
    """The corpus (cached per process): operator blocks from the node tests, subgraph blocks, adapters. ``only``:
    block names to keep (a user's corpus selection); an unknown name is a GraphError."""
    key = (opset, tuple(only or ()))
    if key in _CORPUS:
        return _CORPUS[key]
    ops, skipped = operator_blocks(opset)
    blocks: list[Block] = [*ops, *templates()]
    if only:
        names = {b.name: b for b in blocks}
        missing = [n for n in only if n not in names]
        if missing:
            hint = "; ".join(f"{n}: {skipped[n]}" for n in missing if n in skipped)
            raise GraphError(f"no block {', '.join(missing)} in the corpus" + (f" ({hint})" if hint else ""))
        blocks = [names[n] for n in only]
    degrees: dict[str, set[int]] = {op: {1} for op in ADAPTER_OPS}
    for blk in blocks:
        if blk.kind == "operator":
            degrees.setdefault(blk.name, set()).update(blk.in_degrees)
    for blk in blocks:
        if blk.kind == "subgraph":
            for op, ds in _probe_degrees(blk).items():
                degrees.setdefault(op, set()).update(ds)
    corpus = _CORPUS[key] = Corpus(blocks, skipped, degrees)
    return corpus


def _probe_degrees(blk: Block) -> dict[str, set[int]]:
    """The in-degrees the operators of a subgraph block have, measured on instances of it."""
    out: dict[str, set[int]] = {}
    rng = np.random.default_rng(0)
    for shape in ((1, 4, 8, 8), (2, 6, 8)):
        for d in blk.in_degrees:
            b = Builder([Value(f"x{i}", shape) for i in range(d)])
            try:
                blk.build(b, [v.name for v in b.inputs], blk.draw(rng), rng)
            except GraphError:
                continue
            for n in b.nodes:
                if n.block == "adapter":
                    continue
                out.setdefault(n.op, set()).add(max(1, sum(1 for x in n.inputs if x and x not in b.constants)))
    return out


def params_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)
