"""The subgraph blocks of the block corpus (dlci.fuzz.corpus): the structures compilers treat specially and random
wiring rarely produces (the paper's subgraphs): conv -> norm -> activation, conv + bias + activation, a residual add,
self-attention, reshape/transpose chains (channel shuffle), split/concat, and the decomposed forms of LayerNorm, GELU,
softmax, HardSwish, SiLU and a squeeze-excite block, which pattern-matching fusions rewrite. Their parameters are
computed from the shape they receive (e.g. "same" padding from kernel, stride and dilation, as the paper's eq. 9-10),
so every instance is valid.

Each is a function ``fn(b, xs, p, rng) -> output`` registered with :func:`register` under its block name, with its
in-degrees, inner edges and each parameter's choices; :data:`TEMPLATES` holds them in the order registered, which is
the corpus's order (a function that builds several blocks is registered once per block).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from dlci.fuzz.block import Block
from dlci.fuzz.build import Builder
from dlci.models.graph import GraphError

TEMPLATES: dict[str, "Template"] = {}


def register(name: str, in_degrees: tuple[int, ...], inner_edges: tuple, **space):
    """Decorator: ``fn(b, xs, p, rng) -> output`` as the subgraph block ``name`` (:class:`Template`), its
    parameters' choices ``space``."""
    def deco(fn: Callable) -> Callable:
        if name in TEMPLATES:
            raise ValueError(f"template {name!r} registered twice")
        TEMPLATES[name] = Template(name, fn, in_degrees, inner_edges, space)
        return fn
    return deco


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


_CONV_SPACE = dict(co=[0, 0, 4, 8], k=[1, 3, 3, 5], d=[1, 1, 2], same=[True, True, False], group=[1, 1, 2],
                   bias=[True, False], eps=[1e-5, 1e-3, 0.1])


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


register("Conv+BatchNormalization+Relu", (1,), ((0, 1), (1, 2)), **_CONV_SPACE)(_t_conv_bn_act("Relu"))
register("Conv+BatchNormalization+Clip", (1,), ((0, 1), (1, 2)), **_CONV_SPACE, lo=[0.0, -1.0],
         hi=[6.0, 1.0])(_t_conv_bn_act("Clip"))


def _activation(b, y, act, p):
    if act == "Clip":
        return b.one("Clip", [y, b.const(np.float32(p.get("lo", 0.0)), "lo"),
                              b.const(np.float32(p.get("hi", 6.0)), "hi")])
    if act == "LeakyRelu":
        return b.one("LeakyRelu", [y], {"alpha": p.get("alpha", 0.1)})
    return b.one(act, [y])


@register("Conv+Add+Relu", (1,), ((0, 1), (1, 2)), co=[0, 4, 8], k=[1, 3], d=[1, 2], same=[True, False],
          bias_shape=["c11", "1c11", "scalar"], act=["Relu"])
def _t_conv_bias_act(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    co = p["co"] or b.shape(x)[1]
    y = _conv(b, x, rng, co, p["k"], p["d"], p["same"], bias=False)
    bias_shape = {"c11": (co, 1, 1), "1c11": (1, co, 1, 1), "scalar": ()}[p["bias_shape"]]
    y = b.one("Add", [y, b.const(_rand(bias_shape, rng, 0.5), "bias")])
    return _activation(b, y, p["act"], p)


@register("Conv+Mul+Add", (1,), ((0, 1), (1, 2)), co=[0, 4], k=[1, 3], d=[1, 2], same=[True, False], bias=[True, False])
def _t_conv_scale_shift(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    co = p["co"] or b.shape(x)[1]
    y = _conv(b, x, rng, co, p["k"], p["d"], p["same"], bias=p["bias"])
    y = b.one("Mul", [y, b.const(_rand((1, co, 1, 1), rng) + 1.0, "scale")])
    return b.one("Add", [y, b.const(_rand((1, co, 1, 1), rng, 0.5), "shift")])


@register("Conv+Relu+Conv+Add", (1,), ((0, 1), (1, 2), (2, 3)), k=[1, 3], k2=[1, 3, 5], order=[True, False])
def _t_residual(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    c = b.shape(x)[1]
    y = _conv(b, x, rng, c, p["k"], 1, True, bias=True)
    y = b.one("Relu", [y])
    y = _conv(b, y, rng, c, p["k2"], 1, True, bias=True)
    return b.one("Add", [y, x] if p["order"] else [x, y])


@register("MatMul+MatMul+MatMul+Transpose+MatMul+Mul+Softmax+MatMul", (1,),
          ((1, 3), (0, 4), (3, 4), (4, 5), (5, 6), (6, 7), (2, 7)), dk=[0, 4, 8], scale=[1.0, 1.0, 2.0])
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


@register("Reshape+Transpose+Reshape", (1,), ((0, 1), (1, 2)), groups=[2, 3, 4])
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


@register("Transpose+Transpose", (1,), ((0, 1),), inverse=[True, False])
def _t_transpose2(b, xs, p, rng):
    x = _ranked(b, xs[0], 2, rng, to=3)
    r = len(b.shape(x))
    p1 = list(rng.permutation(r))
    p2 = [int(i) for i in (np.argsort(p1) if p["inverse"] else rng.permutation(r))]
    y = b.one("Transpose", [x], {"perm": [int(i) for i in p1]})
    return b.one("Transpose", [y], {"perm": p2})


@register("Split+Neg+Concat", (1,), ((0, 1), (1, 2), (0, 2)), op=["Neg"], order=[True, False])
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


@register("Concat+Split+Add", (1, 2), ((0, 1), (1, 2)))
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


@register("ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add", (1,),
          ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (1, 6), (5, 6), (6, 7), (7, 8)), axis=[-1, -1, 1],
          eps=[1e-5, 1e-12, 1e-3, 0.5], pow=[2.0, 2.0, 3.0])
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


@register("Div+Erf+Add+Mul+Mul", (1,), ((0, 1), (1, 2), (2, 3), (3, 4)), sqrt2=[1.4142135, 1.4142135, 2.0],
          one=[1.0, 1.0, 0.5], half=[0.5, 0.5, 1.0])
def _t_gelu(b, xs, p, rng):
    x = xs[0]
    y = b.one("Div", [x, b.const(np.float32(p["sqrt2"]), "sqrt2")])
    y = b.one("Erf", [y])
    y = b.one("Add", [y, b.const(np.float32(p["one"]), "one")])
    y = b.one("Mul", [x, y])
    return b.one("Mul", [y, b.const(np.float32(p["half"]), "half")])


@register("ReduceMax+Sub+Exp+ReduceSum+Div", (1,), ((0, 1), (1, 2), (2, 3), (2, 4), (3, 4)), axis=[-1, -1, 0, 1])
def _t_softmax(b, xs, p, rng):
    x = _ranked(b, xs[0], 1, rng)
    ax = _axes_last(b, x, p)
    m = b.one("ReduceMax", [x, ax], {"keepdims": 1})
    e = b.one("Exp", [b.one("Sub", [x, m])])
    s = b.one("ReduceSum", [e, ax], {"keepdims": 1})
    return b.one("Div", [e, s])


@register("Add+Clip+Mul+Div", (1,), ((0, 1), (1, 2), (2, 3)), three=[3.0, 3.0, 2.0], six=[6.0, 6.0, 4.0])
def _t_hardswish(b, xs, p, rng):
    x = xs[0]
    y = b.one("Add", [x, b.const(np.float32(p["three"]), "three")])
    y = b.one("Clip", [y, b.const(np.float32(0.0), "zero"), b.const(np.float32(p["six"]), "six")])
    y = b.one("Mul", [x, y])
    return b.one("Div", [y, b.const(np.float32(p["six"]), "six")])


@register("Sigmoid+Mul", (1,), ((0, 1),), order=[True, False])
def _t_silu(b, xs, p, rng):
    x = xs[0]
    s = b.one("Sigmoid", [x])
    return b.one("Mul", [x, s] if p["order"] else [s, x])


@register("GlobalAveragePool+Conv+Relu+Conv+Sigmoid+Mul", (1,), ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)), ratio=[2, 4])
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


@register("Pad+Conv", (1,), ((0, 1),), pad=[1, 2], symmetric=[True, False], value=[0.0, 0.0, 1.5], then=["Conv"],
          k=[1, 3], stride=[1, 2], auto_pad=["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"])
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


register("Pad+MaxPool", (1,), ((0, 1),), pad=[1, 2], symmetric=[True, False], value=[0.0, -1.0, 1.5], then=["MaxPool"],
         k=[2, 3], stride=[1, 2], auto_pad=["NOTSET", "SAME_UPPER", "VALID"])(_t_pad_conv)
register("Pad+AveragePool", (1,), ((0, 1),), pad=[1, 2], symmetric=[True, False], value=[0.0, 1.5],
         then=["AveragePool"], k=[2, 3], stride=[1, 2], auto_pad=["NOTSET", "SAME_LOWER", "VALID"])(_t_pad_conv)


@register("MatMul+Add+Relu", (1,), ((0, 1), (1, 2)), n=[0, 4, 16], bias=["row", "full"], order=[True, False],
          act=["Relu"])
def _t_matmul_add(b, xs, p, rng):
    x = _ranked(b, xs[0], 2, rng)
    k = b.shape(x)[-1]
    n = p["n"] or k
    y = b.one("MatMul", [x, b.const(_rand((k, n), rng, 1 / math.sqrt(k)), "W")])
    bias_shape = (n,) if p["bias"] == "row" else (1,) * (len(b.shape(y)) - 1) + (n,)
    y = b.one("Add", [y, b.const(_rand(bias_shape, rng, 0.5), "bias")] if p["order"] else
              [b.const(_rand(bias_shape, rng, 0.5), "bias"), y])
    return _activation(b, y, p["act"], p)


register("MatMul+Add+Tanh", (1,), ((0, 1), (1, 2)), n=[0, 8], bias=["row", "full"], order=[True, False],
         act=["Tanh"])(_t_matmul_add)


@register("Flatten+Gemm", (1,), ((0, 1),), axis=[1, 1, 2], n=[4, 8], transB=[0, 1], alpha=[1.0, 0.5], beta=[1.0, 2.0])
def _t_flatten_gemm(b, xs, p, rng):
    x = _ranked(b, xs[0], 1, rng, to=2)
    y = b.one("Flatten", [x], {"axis": min(p["axis"], len(b.shape(x)))})
    k = b.shape(y)[1]
    n = p["n"]
    w = _rand((n, k) if p["transB"] else (k, n), rng, 1 / math.sqrt(max(1, k)))
    return b.one("Gemm", [y, b.const(w, "W"), b.const(_rand((n,), rng, 0.5), "C")],
                 {"transB": p["transB"], "alpha": p["alpha"], "beta": p["beta"]})


@register("Conv+HardSwish+Conv", (1,), ((0, 1), (1, 2)), k=[3, 5], d=[1, 2], act=["HardSwish"], co=[0, 8])
def _t_depthwise(b, xs, p, rng):
    x = _nchw(b, xs[0], rng)
    c = b.shape(x)[1]
    y = _conv(b, x, rng, c, p["k"], p["d"], True, group=c, bias=True)
    y = _activation(b, y, p["act"], p)
    return _conv(b, y, rng, p["co"] or c, 1, 1, True, bias=True)


@register("ReduceMean+Sub", (1,), ((0, 1),), reduce=["ReduceMean"], combine=["Sub"])
def _t_reduce_bcast(b, xs, p, rng):
    x = _ranked(b, xs[0], 1, rng, to=2)
    axis = int(rng.integers(len(b.shape(x))))
    m = b.one(p["reduce"], [x, b.const(np.array([axis], np.int64), "axes")], {"keepdims": 1})
    return b.one(p["combine"], [x, m])


register("ReduceMax+Div", (1,), ((0, 1),), reduce=["ReduceMax", "ReduceL2"], combine=["Div"])(_t_reduce_bcast)


@register("Shape+Slice+Concat+Reshape", (1,), ((0, 1), (1, 2), (2, 3)), keep=[1, 2, 3])
def _t_shape_flatten(b, xs, p, rng):
    """A dynamic reshape as exporters write it: the target shape computed from the data's own Shape."""
    x = _ranked(b, xs[0], 2, rng, to=3)
    r = len(b.shape(x))
    keep = min(p["keep"], r - 1)
    shape = b.one("Shape", [x])
    head = b.one("Slice", [shape, b.const(np.array([0], np.int64), "s"), b.const(np.array([keep], np.int64), "e")])
    tgt = b.one("Concat", [head, b.const(np.array([-1], np.int64), "m1")], {"axis": 0})
    return b.one("Reshape", [x, tgt])


@register("Shape+Gather+Unsqueeze+Concat+Reshape+Relu", (1,), ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5)), axis=[0, 1, -1],
          first=[True, False], then=["Relu"])
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


@register("Shape+ConstantOfShape+Mul", (1,), ((0, 1), (1, 2)), how=["ConstantOfShape"], value=[1.0, 0.5, -2.0])
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


register("Shape+Expand+Add", (1,), ((0, 1), (1, 2)), how=["Expand"])(_t_shape_expand)


@register("Shape+Slice+Concat+Resize", (1,), ((0, 1), (1, 2), (2, 3)), factor=[2.0, 0.5, 1.5],
          mode=["nearest", "linear"])
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


@register("Transpose+Transpose+Conv+Relu+Transpose", (1,), ((0, 1), (1, 2), (2, 3), (3, 4)), co=[0, 4], k=[1, 3],
          act=["Relu"])
def _t_nhwc_conv(b, xs, p, rng):
    """A layout round trip around a convolution (NHWC -> NCHW -> conv -> NHWC), as converted TF models have it."""
    x = _nchw(b, xs[0], rng)
    t = b.one("Transpose", [x], {"perm": [0, 2, 3, 1]})  # the data as NHWC
    y = b.one("Transpose", [t], {"perm": [0, 3, 1, 2]})
    y = _conv(b, y, rng, p["co"] or b.shape(x)[1], p["k"], 1, True, bias=True)
    y = b.one(p["act"], [y])
    return b.one("Transpose", [y], {"perm": [0, 2, 3, 1]})


@register("MatMul+Mul", (1,), ((0, 1),), n=[0, 8], scale=["scalar", "one", "row", "col"], where=["after"])
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


register("Mul+MatMul", (1,), ((0, 1),), n=[0, 8], scale=["scalar", "one", "row"], where=["before"])(_t_matmul_scale)


@register("Unsqueeze+Relu+Squeeze", (1,), ((0, 1), (1, 2)), op=["Relu"])
def _t_squeeze_chain(b, xs, p, rng):
    """Unsqueeze, an op, Squeeze back (reshape-like chains a simplifier removes)."""
    x = xs[0]
    r = len(b.shape(x))
    axis = int(rng.integers(r + 1))
    u = b.one("Unsqueeze", [x, b.const(np.array([axis], np.int64), "ax")])
    y = b.one(p["op"], [u])
    return b.one("Squeeze", [y, b.const(np.array([axis], np.int64), "ax")])


@register("ReduceMean+Unsqueeze+Sub", (1,), ((0, 1), (1, 2)), reduce=["ReduceMean"])
def _t_reduce_keepdims(b, xs, p, rng):
    """A reduction without keepdims, its axis put back with Unsqueeze and broadcast against the data."""
    x = _ranked(b, xs[0], 2, rng)
    axis = int(rng.integers(len(b.shape(x))))
    m = b.one(p["reduce"], [x, b.const(np.array([axis], np.int64), "axes")], {"keepdims": 0})
    m = b.one("Unsqueeze", [m, b.const(np.array([axis], np.int64), "ax")])
    return b.one("Sub", [x, m])


register("ReduceSum+Unsqueeze+Sub", (1,), ((0, 1), (1, 2)), reduce=["ReduceSum"])(_t_reduce_keepdims)


@register("Exp+Mul+Add", (1,), ((0, 1), (1, 2)), full=[True, False], op1=["Exp"], scale=[0.5, 2.0], combine=["Add"])
def _t_const_chain(b, xs, p, rng):
    """Arithmetic on a constant before it meets the data: what constant folding computes at compile time."""
    x = xs[0]
    c = b.const(_rand(b.shape(x) if p["full"] else (b.shape(x)[-1] if b.shape(x) else 1,), rng), "k")
    c = b.one(p["op1"], [c])
    c = b.one("Mul", [c, b.const(np.float32(p["scale"]), "s")])
    return b.one(p["combine"], [x, c])


register("Abs+Mul+Div", (1,), ((0, 1), (1, 2)), full=[True, False], op1=["Abs"], scale=[0.5, 3.0],
         combine=["Div"])(_t_const_chain)


@register("Transpose+MatMul", (1,), ((0, 1),), perm=["last2", "last2", "batch"], side=["left", "right"], n=[4, 8])
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


@register("Exp+Add+Log", (1,), ((0, 1), (1, 2)), one=[1.0, 1.0, 2.0], order=[True, False])
def _t_softplus(b, xs, p, rng):
    """log(exp(x) + 1) written out (SoftPlus fusions match it; with another constant it is not a softplus)."""
    e = b.one("Exp", [xs[0]])
    return b.one("Log", [b.one("Add", [e, b.const(np.float32(p["one"]), "one")] if p["order"] else
                               [b.const(np.float32(p["one"]), "one"), e])])


@register("Softplus+Tanh+Mul", (1,), ((0, 1), (1, 2)), softplus=["op"], order=[True, False])
def _t_mish(b, xs, p, rng):
    """x * tanh(softplus(x)), the softplus as the operator or written out (Mish fusions match both)."""
    x = xs[0]
    sp = b.one("Softplus", [x]) if p["softplus"] == "op" else _t_softplus(b, [x], {"one": 1.0, "order": True}, rng)
    t = b.one("Tanh", [sp])
    return b.one("Mul", [x, t] if p["order"] else [t, x])


register("Exp+Add+Log+Tanh+Mul", (1,), ((0, 1), (1, 2), (2, 3), (3, 4)), softplus=["decomposed"],
         order=[True, False])(_t_mish)


@register("Mul+Sigmoid+Mul", (1,), ((0, 1), (1, 2)), alpha=[1.702, 1.702, 1.0, -0.5])
def _t_quick_gelu(b, xs, p, rng):
    """x * sigmoid(alpha * x) (QuickGelu fusions expect alpha 1.702; another alpha must stay what it is)."""
    x = xs[0]
    s = b.one("Sigmoid", [b.one("Mul", [x, b.const(np.float32(p["alpha"]), "alpha")])])
    return b.one("Mul", [x, s])


@register("Max+Min", (1,), ((0, 1),), first=["Max"], lo=[0.0, -1.0, 0.5], hi=[6.0, 1.0, 0.25])
def _t_max_min(b, xs, p, rng):
    """Max then Min with scalar constants (a clamp to a fusion; with low above high every element is one
    constant, which a fused clamp must still give)."""
    lo, hi = (b.const(np.float32(v), n) for v, n in ((p["lo"], "lo"), (p["hi"], "hi")))
    if p["first"] == "Max":
        return b.one("Min", [b.one("Max", [xs[0], lo]), hi])
    return b.one("Max", [b.one("Min", [xs[0], hi]), lo])


register("Min+Max", (1,), ((0, 1),), first=["Min"], lo=[0.0, -1.0, 0.5], hi=[6.0, 1.0, 0.25])(_t_max_min)


@register("Relu+Clip", (1,), ((0, 1),), lo=[0.0, -1.0, 0.5], hi=[6.0, 1.0])
def _t_relu_clip(b, xs, p, rng):
    """Relu into Clip (fused into one clip with the larger lower bound)."""
    y = b.one("Relu", [xs[0]])
    return b.one("Clip", [y, b.const(np.float32(p["lo"]), "lo"), b.const(np.float32(p["hi"]), "hi")])


@register("MatMul+BatchNormalization", (1,), ((0, 1),), n=[4, 8], eps=[1e-5, 1e-3])
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


@register("Add+Softmax", (1,), ((0, 1),), bias=["row", "full", "head"], axis=[-1, -1, 1])
def _t_bias_softmax(b, xs, p, rng):
    """Softmax of data plus a broadcast bias (fused into one kernel by some runtimes)."""
    x = _ranked(b, xs[0], 2, rng)
    s = b.shape(x)
    shape = {"row": (s[-1],), "full": s, "head": (1,) * (len(s) - 2) + s[-2:]}[p["bias"]]
    y = b.one("Add", [x, b.const(_rand(shape, rng), "bias")])
    return b.one("Softmax", [y], {"axis": p["axis"]})


@register("Slice+Slice", (1,), ((0, 1),), axes=["same", "other"], step=[1, 2, -1])
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


@register("Cast+Relu+Cast", (1,), ((0, 1), (1, 2)), to=["float16", "double"], between=["Relu"])
def _t_cast_round_trip(b, xs, p, rng):
    """A float32 -> narrower or wider -> float32 round trip (removing it changes the values: only the wider one
    is exact)."""
    from onnx import TensorProto
    to = {"float16": TensorProto.FLOAT16, "double": TensorProto.DOUBLE}[p["to"]]
    y = b.one("Cast", [xs[0]], {"to": to})
    y = b.one(p["between"], [y])
    return b.one("Cast", [y], {"to": TensorProto.FLOAT})


register("Cast+Neg+Cast", (1,), ((0, 1), (1, 2)), to=["float16"], between=["Neg"])(_t_cast_round_trip)


_ACTS = ["Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSwish", "Tanh"]
