"""The block corpus (the paper's BC): the blocks a generated network is made of, with their allowed in-degrees and
inner edges.

- **Operator blocks** come from what is installed, not from a hand table: every ONNX backend node test case
  (``onnx_node``, migrated by dlci.sources) whose operator computes float32 data is a parameterised building block
  — its attributes and constant inputs are known-valid parameter sets (the variants), its inputs' types decide which
  ones can be data edges (the ONNX schema's type constraints: an input sharing the output's type parameter), and the
  schema's attribute types and the values the cases use give the parameter mutation its domain.
- **Subgraph blocks** are the structures compilers treat specially and random wiring rarely produces (the paper's
  subgraphs), each registered by name in :data:`dlci.fuzz.templates.TEMPLATES`: conv -> norm -> activation, a
  residual add, self-attention, the decomposed forms of LayerNorm, GELU, softmax ... (see :mod:`dlci.fuzz.templates`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlci.fuzz.block import Block
from dlci.fuzz.build import ADAPTER_OPS, Builder, ValueDomainError
from dlci.fuzz.templates import TEMPLATES
from dlci.models.graph import DEFAULT_OPSET, GraphError, Value, schema
from dlci.operators.facts import ONNX_RANDOM as _RANDOM

OUT_DEGREES = (0, 1, 2)  # the out-degrees the corpus allows every operator (the paper's {0, 1, 2})
# operators left out of operator blocks, with why (everything else float32-valued from the node tests is in)
EXCLUDED = {
    "Hardmax": "a one-hot of an argmax: ties make its values arbitrary",
    "Dropout": "training-only randomness; identity in inference",
    "Constant": "no data input", "ConstantOfShape": "no data input", "EyeLike": "no data input",
    "Range": "no data input",
}


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
    blocks: list[Block] = [*ops, *TEMPLATES.values()]
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
