"""The torch form of a graph (dlci.models.graph): source code of an ``nn.Module`` whose ``forward`` calls one torch
function per node, so that every torch target (export, FX, torch.compile, torch.onnx, OpenVINO's pytorch frontend)
gets a module written as a user writes one, and a reproducer prints the very same source.

Float constants become buffers; integer values (shapes, axes, indices, and what Shape/Gather/Concat compute from
static shapes) are literals, since every shape in a generated graph is static. Each ONNX operator maps to its torch
counterpart by one entry of ``EMIT`` — the operators the corpus generates for whose semantics torch has a faithful
call; a node without one (or with an attribute the call cannot express) is a GraphError: the graph has no torch
form, and torch targets do not get it.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from dlci.models.graph import Graph, GraphError, Node

FLOAT_KINDS = "f"


class _Ctx:
    """What an emitter reads: input expressions, constants as literals, static shapes, attributes; ``buffer`` keeps
    an array (indices, a condition) as a buffer of the module."""

    def __init__(self, graph: Graph, types: dict, values: dict, buffers: dict[str, str]):
        self.graph, self.types, self.values, self.buffers = graph, types, values, buffers
        self.extra: dict[str, np.ndarray] = {}

    def t(self, x: str) -> str:
        if x in self.buffers:
            return f"self.{self.buffers[x]}"
        return _var(x)

    def buffer(self, array, hint: str) -> str:
        attr = f"k_{hint}{len(self.extra)}"
        self.extra[attr] = np.require(np.asarray(array), requirements="C")
        return f"self.{attr}"

    def lit(self, x: str) -> list | float | int:
        v = self.values.get(x) if x not in self.graph.constants else self.graph.constants[x]
        if v is None:
            raise GraphError(f"{x!r} is not a constant")
        return np.asarray(v).tolist()

    def shape(self, x: str) -> tuple[int, ...]:
        return tuple(self.types[x][0])


def _var(name: str) -> str:
    return "v_" + "".join(c if c.isalnum() else "_" for c in name)


def _a(n: Node, key: str, default=None):
    return n.attrs.get(key, default)


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


# -- emitters: (ctx, node) -> expression (a tuple expression for several outputs) ---------------------------------

def _unary(fn: str) -> Callable:
    return lambda c, n: f"{fn}({c.t(n.inputs[0])})"


def _binary(op: str) -> Callable:
    return lambda c, n: f"({c.t(n.inputs[0])} {op} {c.t(n.inputs[1])})"


def _variadic(fn: str) -> Callable:
    def emit(c, n):
        expr = c.t(n.inputs[0])
        for x in n.inputs[1:]:
            expr = f"{fn}({expr}, {c.t(x)})"
        return expr
    return emit


def _mean(c, n):
    return "(" + " + ".join(c.t(x) for x in n.inputs) + f") / {len(n.inputs)}"


def _window_pads(c, n, x: str, kernel: list[int], strides: list[int], dilations: list[int]) -> list[int]:
    """ONNX pads [begin..., end...] of a conv/pool node, with auto_pad resolved on the static input shape."""
    spatial = c.shape(x)[2:]
    auto = _a(n, "auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin + end
    if auto == "VALID":
        return [0] * (2 * len(spatial))
    return list(_a(n, "pads", [0] * (2 * len(spatial))))


def _padded(c, x_expr: str, pads: list[int], value: str = "0.0") -> tuple[str, list[int]]:
    """Asymmetric pads as an explicit F.pad (torch's windows take symmetric padding only)."""
    r = len(pads) // 2
    if pads[:r] == pads[r:]:
        return x_expr, pads[:r]
    torch_pads = []
    for i in reversed(range(r)):
        torch_pads += [pads[i], pads[i + r]]
    return f"torch.nn.functional.pad({x_expr}, {torch_pads}, value={value})", [0] * r


def _conv(c, n):
    x, w = n.inputs[0], n.inputs[1]
    wshape = c.shape(w)
    r = len(wshape) - 2
    if r not in (1, 2, 3):
        raise GraphError(f"Conv of rank {r + 2}")
    kernel = list(_a(n, "kernel_shape", wshape[2:]))
    strides = list(_a(n, "strides", [1] * r))
    dil = list(_a(n, "dilations", [1] * r))
    xe, pad = _padded(c, c.t(x), _window_pads(c, n, x, kernel, strides, dil))
    bias = c.t(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else "None"
    return (f"torch.nn.functional.conv{r}d({xe}, {c.t(w)}, {bias}, stride={strides}, padding={pad}, "
            f"dilation={dil}, groups={_a(n, 'group', 1)})")


def _pool(kind: str) -> Callable:
    def emit(c, n):
        x = n.inputs[0]
        r = len(c.shape(x)) - 2
        if r not in (1, 2, 3):
            raise GraphError(f"{n.op} of rank {r + 2}")
        kernel = list(_a(n, "kernel_shape"))
        strides = list(_a(n, "strides", [1] * r))
        dil = list(_a(n, "dilations", [1] * r))
        pads = _window_pads(c, n, x, kernel, strides, dil)
        ceil = bool(_a(n, "ceil_mode", 0))
        if kind == "max":
            if len([y for y in n.outputs if y]) > 1:
                raise GraphError("MaxPool indices output")
            xe, pad = _padded(c, c.t(x), pads, "float('-inf')")
            if any(2 * p > k for p, k in zip(pad, kernel)):
                raise GraphError("MaxPool padding larger than half the kernel")
            return (f"torch.nn.functional.max_pool{r}d({xe}, {kernel}, {strides}, {pad}, dilation={dil}, "
                    f"ceil_mode={ceil})")
        if any(d != 1 for d in dil):
            raise GraphError("AveragePool with dilations")
        include = bool(_a(n, "count_include_pad", 0))
        r2 = len(pads) // 2
        if pads[:r2] != pads[r2:] and not include:
            raise GraphError("AveragePool with asymmetric pads excluded from the count")
        xe, pad = _padded(c, c.t(x), pads)
        if any(2 * p > k for p, k in zip(pad, kernel)):
            raise GraphError("AveragePool padding larger than half the kernel")
        return (f"torch.nn.functional.avg_pool{r}d({xe}, {kernel}, {strides}, {pad}, ceil_mode={ceil}, "
                f"count_include_pad={include})")
    return emit


def _global(fn: str) -> Callable:
    def emit(c, n):
        r = len(c.shape(n.inputs[0]))
        return f"{c.t(n.inputs[0])}.{fn}(dim={list(range(2, r))}, keepdim=True)"
    return emit


def _static_reshape(c, n):
    return f"{c.t(n.inputs[0])}.reshape({list(c.shape(n.outputs[0]))})"


def _reduce(fn: str) -> Callable:
    def emit(c, n):
        x = n.inputs[0]
        r = len(c.shape(x))
        axes = c.lit(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] else _a(n, "axes", None)
        if not axes:
            if _a(n, "noop_with_empty_axes", 0):
                return c.t(x)
            axes = list(range(r))
        axes = sorted(_axis(a, r) for a in axes)
        keep = bool(_a(n, "keepdims", 1))
        xe = c.t(x)
        body = {"mean": f"{xe}.mean(dim={axes}, keepdim={keep})", "sum": f"{xe}.sum(dim={axes}, keepdim={keep})",
                "max": f"{xe}.amax(dim={axes}, keepdim={keep})", "min": f"{xe}.amin(dim={axes}, keepdim={keep})",
                "l1": f"{xe}.abs().sum(dim={axes}, keepdim={keep})",
                "l2": f"{xe}.square().sum(dim={axes}, keepdim={keep}).sqrt()",
                "sumsquare": f"{xe}.square().sum(dim={axes}, keepdim={keep})",
                "logsum": f"{xe}.sum(dim={axes}, keepdim={keep}).log()",
                "logsumexp": f"torch.logsumexp({xe}, dim={axes}, keepdim={keep})"}
        if fn == "prod":
            expr = xe
            for a in sorted(axes, reverse=True):
                expr = f"{expr}.prod(dim={a}, keepdim={keep})"
            return expr
        return body[fn]
    return emit


def _softmax(fn: str) -> Callable:
    return lambda c, n: f"torch.{fn}({c.t(n.inputs[0])}, dim={_a(n, 'axis', -1)})"


def _transpose(c, n):
    r = len(c.shape(n.inputs[0]))
    return f"{c.t(n.inputs[0])}.permute({list(_a(n, 'perm', list(reversed(range(r)))))})"


def _concat(c, n):
    return "torch.cat([" + ", ".join(c.t(x) for x in n.inputs) + f"], dim={_a(n, 'axis')})"


def _split(c, n):
    x = n.inputs[0]
    axis = _axis(_a(n, "axis", 0), len(c.shape(x)))
    sizes = [c.shape(y)[axis] for y in n.outputs if y]
    if len(sizes) != len(n.outputs):
        raise GraphError("Split with an output left out")
    return f"torch.split({c.t(x)}, {sizes}, dim={axis})"


def _slice(c, n):
    x = n.inputs[0]
    shape = c.shape(x)
    starts, ends = c.lit(n.inputs[1]), c.lit(n.inputs[2])
    axes = c.lit(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] else list(range(len(starts)))
    steps = c.lit(n.inputs[4]) if len(n.inputs) > 4 and n.inputs[4] else [1] * len(starts)
    index = [":"] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        if st <= 0:
            raise GraphError("Slice with a negative step")
        a = _axis(a, len(shape))
        size = shape[a]
        s = max(0, min(size, s + size if s < 0 else s))
        e = max(0, min(size, e + size if e < 0 else e))
        index[a] = f"{s}:{e}" + (f":{st}" if st != 1 else "")
    return f"{c.t(x)}[{', '.join(index)}]"


def _pad(c, n):
    if _a(n, "mode", "constant") != "constant":
        raise GraphError("Pad mode other than constant")
    pads = c.lit(n.inputs[1])
    if any(p < 0 for p in pads):
        raise GraphError("Pad with negative pads")
    if len(n.inputs) > 3 and n.inputs[3]:
        raise GraphError("Pad with axes")
    value = _scalar(c.lit(n.inputs[2])) if len(n.inputs) > 2 and n.inputs[2] else 0.0
    r = len(pads) // 2
    torch_pads = []
    for i in reversed(range(r)):
        torch_pads += [pads[i], pads[i + r]]
    return f"torch.nn.functional.pad({c.t(n.inputs[0])}, {torch_pads}, value={value!r})"


def _gather(elements: bool) -> Callable:
    """Gather (a row per index) or GatherElements (an element per index) with constant indices."""
    def emit(c, n):
        x = n.inputs[0]
        shape = c.shape(x)
        axis = _axis(_a(n, "axis", 0), len(shape))
        idx = np.asarray(c.lit(n.inputs[1]), np.int64)
        idx = np.where(idx < 0, idx + shape[axis], idx)
        if elements:
            return f"torch.gather({c.t(x)}, {axis}, {c.buffer(idx, 'index')})"
        return (f"torch.index_select({c.t(x)}, {axis}, {c.buffer(idx.reshape(-1), 'index')})"
                f".reshape({list(c.shape(n.outputs[0]))})")
    return emit


def _scalar(v) -> float:
    a = np.asarray(v).reshape(-1)
    if a.size != 1:
        raise GraphError("a bound that is not a scalar")
    return float(a[0])


def _clip(c, n):
    lo = _scalar(c.lit(n.inputs[1])) if len(n.inputs) > 1 and n.inputs[1] else None
    hi = _scalar(c.lit(n.inputs[2])) if len(n.inputs) > 2 and n.inputs[2] else None
    return f"torch.clamp({c.t(n.inputs[0])}, min={lo!r}, max={hi!r})"


def _gemm(c, n):
    a, b = c.t(n.inputs[0]), c.t(n.inputs[1])
    a = f"{a}.t()" if _a(n, "transA", 0) else a
    b = f"{b}.t()" if _a(n, "transB", 0) else b
    expr = f"{float(_a(n, 'alpha', 1.0))!r} * torch.matmul({a}, {b})"
    if len(n.inputs) > 2 and n.inputs[2]:
        expr += f" + {float(_a(n, 'beta', 1.0))!r} * {c.t(n.inputs[2])}"
    return f"({expr})"


def _layer_norm(c, n):
    x = n.inputs[0]
    shape = c.shape(x)
    axis = _axis(_a(n, "axis", -1), len(shape))
    norm = list(shape[axis:])
    if len([y for y in n.outputs if y]) > 1:
        raise GraphError("LayerNormalization mean/inv-std outputs")
    w = f"{c.t(n.inputs[1])}.expand({norm})"
    b = f"{c.t(n.inputs[2])}.expand({norm})" if len(n.inputs) > 2 and n.inputs[2] else "None"
    return f"torch.nn.functional.layer_norm({c.t(x)}, {norm}, {w}, {b}, eps={float(_a(n, 'epsilon', 1e-5))!r})"


def _batch_norm(c, n):
    if len([y for y in n.outputs if y]) > 1 or _a(n, "training_mode", 0):
        raise GraphError("BatchNormalization in training mode")
    x, scale, bias, mean, var = (c.t(v) for v in n.inputs[:5])
    return (f"torch.nn.functional.batch_norm({x}, {mean}, {var}, {scale}, {bias}, False, 0.0, "
            f"{float(_a(n, 'epsilon', 1e-5))!r})")


def _instance_norm(c, n):
    x, scale, bias = (c.t(v) for v in n.inputs[:3])
    return (f"torch.nn.functional.instance_norm({x}, weight={scale}, bias={bias}, "
            f"eps={float(_a(n, 'epsilon', 1e-5))!r})")


def _prelu(c, n):
    x, s = c.t(n.inputs[0]), c.t(n.inputs[1])
    return f"torch.where({x} < 0, {x} * {s}, {x})"


def _mod(c, n):
    if not _a(n, "fmod", 0):
        raise GraphError("Mod without fmod on floats")
    return f"torch.fmod({c.t(n.inputs[0])}, {c.t(n.inputs[1])})"


def _cumsum(c, n):
    x = n.inputs[0]
    axis = _axis(int(np.asarray(c.lit(n.inputs[1]))), len(c.shape(x)))
    xe = c.t(x)
    if _a(n, "reverse", 0):
        xe = f"torch.flip({xe}, [{axis}])"
    expr = f"torch.cumsum({xe}, dim={axis})"
    if _a(n, "exclusive", 0):
        expr = f"({expr} - {xe})"
    if _a(n, "reverse", 0):
        expr = f"torch.flip({expr}, [{axis}])"
    return expr


def _topk(c, n):
    x = n.inputs[0]
    k = int(np.asarray(c.lit(n.inputs[1])).reshape(-1)[0])
    axis = _axis(_a(n, "axis", -1), len(c.shape(x)))
    if any(y for y in n.outputs[1:]) and n.outputs[1] in c.graph.consumers():
        raise GraphError("TopK indices used")
    return (f"(torch.topk({c.t(x)}, {k}, dim={axis}, largest={bool(_a(n, 'largest', 1))}, "
            f"sorted={bool(_a(n, 'sorted', 1))})[0], None)")


def _selu(c, n):
    x = c.t(n.inputs[0])
    a, g = float(_a(n, "alpha", 1.67326319217681884765625)), float(_a(n, "gamma", 1.05070102214813232421875))
    return f"({g!r} * torch.where({x} > 0, {x}, {a!r} * (torch.exp({x}) - 1)))"


EMIT: dict[str, Callable] = {
    **{op: _unary(f"torch.{op.lower()}") for op in ("Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Sin", "Cos",
                                                    "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh",
                                                    "Atanh", "Tanh", "Sigmoid", "Relu", "Erf", "Floor", "Ceil",
                                                    "Round", "Sign")},
    "Identity": lambda c, n: c.t(n.inputs[0]),
    "Softplus": _unary("torch.nn.functional.softplus"), "Softsign": _unary("torch.nn.functional.softsign"),
    "Mish": _unary("torch.nn.functional.mish"), "HardSwish": _unary("torch.nn.functional.hardswish"),
    "Elu": lambda c, n: f"torch.nn.functional.elu({c.t(n.inputs[0])}, {float(_a(n, 'alpha', 1.0))!r})",
    "Celu": lambda c, n: f"torch.nn.functional.celu({c.t(n.inputs[0])}, {float(_a(n, 'alpha', 1.0))!r})",
    "LeakyRelu": lambda c, n: f"torch.nn.functional.leaky_relu({c.t(n.inputs[0])}, {float(_a(n, 'alpha', 0.01))!r})",
    "HardSigmoid": lambda c, n: (f"torch.clamp({float(_a(n, 'alpha', 0.2))!r} * {c.t(n.inputs[0])} + "
                                 f"{float(_a(n, 'beta', 0.5))!r}, 0.0, 1.0)"),
    "ThresholdedRelu": lambda c, n: (f"torch.where({c.t(n.inputs[0])} > {float(_a(n, 'alpha', 1.0))!r}, "
                                     f"{c.t(n.inputs[0])}, torch.zeros_like({c.t(n.inputs[0])}))"),
    "Selu": _selu,
    "Add": _binary("+"), "Sub": _binary("-"), "Mul": _binary("*"), "Div": _binary("/"),
    "Pow": lambda c, n: f"torch.pow({c.t(n.inputs[0])}, {c.t(n.inputs[1])})",
    "Max": _variadic("torch.maximum"), "Min": _variadic("torch.minimum"), "Sum": _variadic("torch.add"),
    "Mean": _mean, "PRelu": _prelu, "Mod": _mod,
    "MatMul": lambda c, n: f"torch.matmul({c.t(n.inputs[0])}, {c.t(n.inputs[1])})", "Gemm": _gemm,
    "Conv": _conv, "MaxPool": _pool("max"), "AveragePool": _pool("avg"),
    "GlobalAveragePool": _global("mean"), "GlobalMaxPool": _global("amax"),
    "BatchNormalization": _batch_norm, "InstanceNormalization": _instance_norm, "LayerNormalization": _layer_norm,
    "Softmax": _softmax("softmax"), "LogSoftmax": _softmax("log_softmax"),
    "Transpose": _transpose, "Reshape": _static_reshape, "Flatten": _static_reshape, "Squeeze": _static_reshape,
    "Unsqueeze": _static_reshape,
    "Expand": lambda c, n: f"torch.broadcast_to({c.t(n.inputs[0])}, {list(c.shape(n.outputs[0]))})",
    "Tile": lambda c, n: f"{c.t(n.inputs[0])}.repeat({c.lit(n.inputs[1])})",
    "Concat": _concat, "Split": _split, "Slice": _slice, "Pad": _pad, "Gather": _gather(False),
    "GatherElements": _gather(True), "Clip": _clip, "CumSum": _cumsum, "TopK": _topk,
    "Einsum": lambda c, n: "torch.einsum(" + repr(_a(n, "equation")) + ", " + ", ".join(c.t(x) for x in n.inputs) + ")",
    "Where": lambda c, n: f"torch.where({c.buffer(np.asarray(c.lit(n.inputs[0])), 'cond')}, {c.t(n.inputs[1])}, "
                          f"{c.t(n.inputs[2])})",
    **{f"Reduce{k}": _reduce(v) for k, v in (("Mean", "mean"), ("Sum", "sum"), ("Max", "max"), ("Min", "min"),
                                             ("Prod", "prod"), ("L1", "l1"), ("L2", "l2"), ("SumSquare", "sumsquare"),
                                             ("LogSum", "logsum"), ("LogSumExp", "logsumexp"))},
}


# -- the module ----------------------------------------------------------------------------------------------------

def torch_source(graph: Graph, class_name: str = "Graph") -> tuple[str, dict[str, np.ndarray]]:
    """(source of the module class, buffer attribute -> array). The class's ``__init__`` takes those arrays.

    Values that do not depend on the inputs' values — shapes and what Shape, Gather, Concat, ConstantOfShape compute
    from them, arithmetic on constants — are computed here (every shape is static): an integer one becomes a
    literal where it is read, a float one a buffer."""
    types = graph.value_types()
    static = set(graph.constants)
    for n in graph.nodes:
        if n.op == "Shape" or all(x in static for x in n.inputs if x):
            static.update(x for x in n.outputs if x)
    folded = [x for n in graph.nodes for x in n.outputs if x and x in static]
    values = {}
    if folded:
        zeros = [np.zeros(v.shape, v.dtype) for v in graph.inputs]
        every = graph.evaluate(zeros, intermediate=True)
        values = {x: every[x] for x in folded if x in every}
    arrays: dict[str, np.ndarray] = {}
    buffers: dict[str, str] = {}  # value -> attribute
    for name, a in [*graph.constants.items(), *values.items()]:
        if np.asarray(a).dtype.kind in FLOAT_KINDS:
            attr = "c_" + "".join(ch if ch.isalnum() else "_" for ch in name)
            buffers[name] = attr
            arrays[attr] = np.require(np.asarray(a), requirements="C")
    ctx = _Ctx(graph, types, values, buffers)
    lines = []
    for n in graph.nodes:
        if all(x in values for x in n.outputs if x):
            continue  # computed here: a literal or a buffer where it is read
        emit = EMIT.get(n.op)
        if emit is None or n.domain:
            raise GraphError(f"no torch form for {n.op}")
        try:
            expr = emit(ctx, n)
        except GraphError as e:
            raise GraphError(f"no torch form for {n.op}: {e}") from None
        except (TypeError, ValueError, KeyError, IndexError) as e:  # an attribute the torch call cannot take
            raise GraphError(f"no torch form for {n.op}: {type(e).__name__}: {e}") from None
        if len(n.outputs) > 1:
            names = ", ".join(_var(x) if x else "_" for x in n.outputs)
            lines.append(f"{names} = {expr}")
        else:
            lines.append(f"{_var(n.outputs[0])} = {expr}")
    arrays.update(ctx.extra)
    args = ", ".join(_var(v.name) for v in graph.inputs)
    rets = ", ".join(ctx.t(x) for x in graph.outputs)
    init = "".join(f"        self.register_buffer({attr!r}, torch.from_numpy(arrays[{attr!r}]))\n" for attr in arrays)
    body = "".join(f"        {ln}\n" for ln in lines)
    src = (f"class {class_name}(torch.nn.Module):\n"
           f"    def __init__(self, arrays):\n        super().__init__()\n{init}\n"
           f"    def forward(self, {args}):\n{body}        return {rets}{',' if len(graph.outputs) == 1 else ''}\n")
    return src, arrays


def check_torch(graph: Graph) -> None:
    """The torch form run on meta tensors (shapes only, no computation): its outputs must have the shapes and
    dtypes ONNX inference gives. GraphError otherwise."""
    import torch
    module = build_module(graph).to("meta")
    types = graph.value_types()
    xs = [torch.empty(v.shape, dtype=getattr(torch, v.dtype), device="meta") for v in graph.inputs]
    try:
        with torch.no_grad():
            outs = module(*xs)
    except Exception as e:  # noqa: BLE001 - torch rejects the module: no torch form
        raise GraphError(f"the torch form fails on meta tensors: {type(e).__name__}: {str(e)[:160]}") from None
    for x, o in zip(graph.outputs, outs):
        if tuple(o.shape) != tuple(types[x][0]) or str(o.dtype).replace("torch.", "") != types[x][1]:
            raise GraphError(f"the torch form gives {o.dtype}{list(o.shape)} for {x!r}, ONNX {types[x]}")


def build_module(graph: Graph):
    """The module (eval mode). GraphError when the torch form cannot express the graph."""
    import torch
    src, arrays = torch_source(graph)
    ns: dict = {"torch": torch}
    exec(compile(src, "<dlci graph module>", "exec"), ns)  # noqa: S102 - source generated from the graph above
    module = ns["Graph"]({k: v.copy() for k, v in arrays.items()}).eval()
    module.dlci_source = src
    return module


def torch_graph_instance(graph: Graph, inputs: Sequence[np.ndarray], *, op: str = "", source: str = "graph",
                         test: str = "", seed: int = 0, localise: bool = True):
    """The graph as a ``torch_graph`` test instance (the torch targets): the graph's spec, its constants as
    ``const:<name>`` arrays, built into an nn.Module by :func:`build_module`. GraphError when the torch form cannot
    express the graph, or disagrees with ONNX on a shape. ``localise``: as dlci.models.graph.graph_instance."""
    from dlci.instance import Instance, Origin, TensorSpec
    graph.check_inputs(inputs)
    check_torch(graph)
    arrays = {f"in:{i}": np.require(a, requirements="C") for i, a in enumerate(inputs)}
    arrays.update(graph.arrays())
    import torch
    return Instance(op=op or f"graph::{graph.name}", framework="torch",
                    call={"kind": "torch_graph", "graph": graph.to_spec(), "localise": bool(localise)},
                    inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(len(inputs))],
                    params={"operators": len(graph.nodes)},
                    origin=Origin(source, test or graph.name, f"torch {torch.__version__}"), seed=seed, arrays=arrays)
