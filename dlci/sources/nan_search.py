"""Sources "nan_search" (PyTorch) and "nan_search_tf" (TensorFlow): instances of the operators in the NaN/Inf table
(dlci/nan/table.py) with their operand moved by gradient search to the edge of the operator's domain (divisor ->
tiny, log operand -> tiny positive, exp argument -> just below overflow, ...). nan_search starts from OpInfo
samples, nan_search_tf from tf_ops raw-op calls (Log, RealDiv, Rsqrt, Softmax, ...: the TensorFlow rules and the
TFLite / OpenVINO targets take them). The campaign then runs them through the compilers, where the oracle compares
NaN/Inf masks: the class of bug that a compiled kernel turns a finite result into NaN/Inf (or the reverse) at the
domain's edge, which plain differential testing on ordinary inputs never reaches."""
from __future__ import annotations

from typing import Iterator

from dlci.instance import Instance
from dlci.sources import Source, load_with_stats, register
from dlci.sources._common import dist_version


@register
class NanSearchSource(Source):
    name = "nan_search"
    framework = "torch"
    description = "OpInfo instances of domain-restricted operators driven to their domain's edge by gradient search"
    bases: tuple[str, ...] = ("opinfo",)
    seconds_per_op = 3.0  # gradient search budget per operator
    seed = 0

    def library_versions(self) -> dict[str, str]:
        return {"torch": dist_version("torch")}

    def cache_extra(self) -> dict:
        import hashlib
        from pathlib import Path
        nan_dir = Path(__file__).resolve().parent.parent / "nan"
        h = hashlib.sha1(b"".join(p.read_bytes() for p in sorted(nan_dir.glob("*.py"))))  # the search's own code
        return {"seconds_per_op": self.seconds_per_op, "seed": self.seed, "nan_code": h.hexdigest()[:12]}

    def base_ops(self) -> list[str] | None:
        return self.ops

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        from dlci.nan.operators import boundary_instances
        from dlci.sources.tf_ops.check import instance_outputs  # a raw-op call's outputs, as tf_ops validated it
        base: dict[str, list[Instance]] = {}
        for name in self.bases:
            insts, _ = load_with_stats(name, limit_per_op=limit_per_op, ops=self.base_ops())
            for inst in insts:
                base.setdefault(inst.op, []).append(inst)
        for op, insts in sorted(base.items()):
            made = boundary_instances(insts, budget=self.seconds_per_op, seed=self.seed, source=self.name,
                                      tf_outputs=instance_outputs)
            if not made:
                self.skip("no-domain-edge")  # not a table operator, or no operand that the search can move
            for inst in made[:limit_per_op or None]:
                yield inst


@register
class NanSearchTfSource(NanSearchSource):
    name = "nan_search_tf"
    framework = "keras"
    description = "tf_ops raw-op calls of domain-restricted operators driven to their domain's edge by gradient search"
    bases = ("tf_ops",)

    def library_versions(self) -> dict[str, str]:
        return {"tensorflow": dist_version("tensorflow"), "torch": dist_version("torch")}  # torch differentiates

    def base_ops(self) -> list[str] | None:
        """Only the raw ops the table reaches (tf.math.log -> Log): tf_ops harvests every op it is not told."""
        if self.ops is not None:
            return self.ops
        from dlci.nan.table import table
        return sorted({n.rsplit(".", 1)[-1] for n in table().tf_names() if not n.startswith("tf.Tensor.")}
                      | {"Div", "Inv"})
