"""What the search may change in a seed instance — its genes — and the candidates made of new values for them.

Audee's chromosome is the model's inputs and weights; here a gene is one float array of the seed instance, so the
search works on every kind of seed alike: ``in:<i>`` (the inputs), ``state:<name>`` (a torch model's parameters and
buffers) and an ONNX model's float initializers. Shapes never change, and nothing else does: integer tensors
(indices, shapes, axes), a torch model's structure, an ONNX model's nodes and attributes stay as the seed has them.

Value domains keep every candidate a valid test:
- per operator, the inputs an operator reads directly are held inside its domain (:data:`ONNX_DOMAINS`: a logarithm's
  operand positive, a variance non-negative, an arc-sine's operand in [-1, 1]; a torch model's ``running_var``
  buffers non-negative); an ONNX initializer is a gene only where every operator reading it takes data there (a type
  parameter of its schema, not a fixed type such as Resize's ``scales``, which shapes depend on);
- per candidate, the whole graph's reference must stay defined (:meth:`Genome.check`): its outputs keep the seed's
  shapes, and the float32 and float64 references are finite — a candidate outside an operator's domain deeper in the
  graph, or overflowing the float32 range, is not a test and is drawn again.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec

TINY = float(np.finfo(np.float32).tiny)
# ONNX operator -> input slot -> (low, high): what the operator's result is defined on
ONNX_DOMAINS = {
    "Log": {0: (TINY, math.inf)}, "Sqrt": {0: (0.0, math.inf)}, "Pow": {0: (0.0, math.inf)},
    "Acos": {0: (-1.0, 1.0)}, "Asin": {0: (-1.0, 1.0)}, "Acosh": {0: (1.0, math.inf)},
    "Atanh": {0: (-1.0 + 1e-6, 1.0 - 1e-6)}, "BatchNormalization": {4: (0.0, math.inf)},
}
# torch state entries (by name suffix) -> (low, high)
TORCH_DOMAINS = {"running_var": (0.0, math.inf)}


@dataclass
class Gene:
    key: str             # "in:0", "state:fc.weight", "init:W"
    base: np.ndarray     # the seed's value
    low: float = -math.inf
    high: float = math.inf

    @property
    def scale(self) -> float:
        """How far a mutation moves this gene: the seed's own spread (its standard deviation, or its magnitude)."""
        a = self.base.astype(np.float64)
        return float(max(a.std(), np.abs(a).mean(), 1e-2)) if a.size else 1.0

    def clip(self, a: np.ndarray) -> np.ndarray:
        a = np.clip(a, self.low, self.high)
        return a.astype(self.base.dtype)


class Genome:
    """The genes of one seed instance (onnx_model, torch_program or torch_module), and its candidates."""

    def __init__(self, seed: Instance):
        self.seed = seed
        self.genes: list[Gene] = []
        self._model = None
        if seed.call.get("kind") == "onnx_model":
            self._onnx_genes()
        else:
            self._torch_genes()
        self.shapes: list[tuple] | None = None

    # -- the genes ---------------------------------------------------------------------------------------------
    def _torch_genes(self) -> None:
        for key, a in self.seed.arrays.items():
            if not (key.startswith("in:") or key.startswith("state:")) or np.asarray(a).dtype.kind != "f":
                continue
            low, high = next((d for suffix, d in TORCH_DOMAINS.items() if key.endswith(suffix)),
                             (-math.inf, math.inf))
            self.genes.append(Gene(key, np.asarray(a), low, high))

    def _onnx_genes(self) -> None:
        from dlci.models.graph import schema
        from dlci.models.onnx_io import feed_names, load_onnx
        model = load_onnx(self.seed.arrays)
        self._model = model
        feeds = feed_names(model)
        readers: dict[str, list[tuple[str, int, bool]]] = {}
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
        for n in model.graph.node:
            sch = schema(n.op_type, opset, n.domain)
            for j, x in enumerate(n.input):
                if not x:
                    continue
                data = sch is not None and _data_slot(sch, j)
                readers.setdefault(x, []).append((n.op_type, j, data))
        from onnx import numpy_helper
        for i, name in enumerate(feeds):
            a = self.seed.arrays.get(f"in:{i}")
            if a is not None and np.asarray(a).dtype.kind == "f":
                self.genes.append(Gene(f"in:{i}", np.asarray(a), *_domain(readers.get(name, []))))
        for t in model.graph.initializer:
            if t.name in feeds or t.name not in readers or not all(d for _, _, d in readers[t.name]):
                continue
            a = numpy_helper.to_array(t)
            if a.dtype.kind == "f" and a.size:
                self.genes.append(Gene(f"init:{t.name}", a, *_domain(readers[t.name])))

    def values(self) -> dict[str, np.ndarray]:
        """The seed's values of every gene."""
        return {g.key: g.base for g in self.genes}

    # -- candidates --------------------------------------------------------------------------------------------
    def candidate(self, values: dict[str, np.ndarray], tag: str) -> Instance:
        """The seed with these gene values (every other array as the seed has it), marked for the search's fitness
        (``search``) and localised like the seed."""
        arrays = {k: v for k, v in self.seed.arrays.items() if not k.startswith("expected:")}
        inits = {}
        for key, v in values.items():
            if key.startswith("init:"):
                inits[key[5:]] = v
            else:
                arrays[key] = np.require(v, requirements="C")
        if inits:
            from onnx import numpy_helper
            from dlci.models.onnx_io import store_onnx
            model = copy.deepcopy(self._model)
            for t in model.graph.initializer:
                if t.name in inits:
                    t.CopyFrom(numpy_helper.from_array(np.require(inits[t.name], requirements="C"), t.name))
            arrays["model"] = store_onnx(model)
        n = sum(1 for k in arrays if k.startswith("in:"))
        s = self.seed
        return Instance(op=s.op, framework=s.framework, call={**s.call, "search": True},
                        inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(n)], params=dict(s.params),
                        origin=Origin(s.origin.source, f"{s.origin.test} [{tag}]", s.origin.library), seed=s.seed,
                        arrays=arrays)

    def check(self, inst: Instance) -> str | None:
        """Why the candidate is not a valid test (None when it is): the reference must keep the seed's output
        shapes and be finite in float32 and in float64."""
        from dlci.models.references import reference
        try:
            ref, ref64 = reference(inst)
        except Exception as e:  # noqa: BLE001
            return f"the reference fails ({str(e)[:80]})"
        shapes = [np.shape(r) for r in ref]
        if self.shapes is None:
            self.shapes = shapes
        if shapes != self.shapes:
            return "the output shapes changed"
        for r in list(ref) + list(ref64 or []):
            r = np.asarray(r)
            if r.dtype.kind in "fc" and not np.all(np.isfinite(r)):
                return "the reference is not finite"
        return None


def _data_slot(sch, j: int) -> bool:
    """Whether input ``j`` of an operator takes data of the operator's own type (a type parameter), not a fixed
    type (Resize's ``scales``, a shape, an axis)."""
    params = sch.inputs
    if not params:
        return False
    p = params[min(j, len(params) - 1)]
    return p.type_str in {c.type_param_str for c in sch.type_constraints}


def _domain(readers: list[tuple[str, int, bool]]) -> tuple[float, float]:
    low, high = -math.inf, math.inf
    for op, j, _ in readers:
        lo, hi = ONNX_DOMAINS.get(op, {}).get(j, (-math.inf, math.inf))
        low, high = max(low, lo), min(high, hi)
    return low, high
