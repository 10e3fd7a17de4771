"""What the variant sources (onnx_variants, torch_variants, tflite_variants) share: load the base sources as
dlci.sources.selection.gather loads them (the same cache entries), pick the wanted operators, and per operator take
the candidates round robin over the kinds, so a small cap still sees each way of presenting the operator."""
from __future__ import annotations

import collections
from typing import Any, Iterator

from dlci.instance import Instance
from dlci.sources import Source, load_with_stats


class VariantSource(Source):
    """Subclasses set ``bases``, ``kinds`` and implement :meth:`candidates` and :meth:`build`."""
    kinds: tuple[str, ...] = ()
    variants_per_op = 8

    def cache_extra(self) -> dict:
        return {"variants_per_op": self.variants_per_op}

    def accepts(self, inst: Instance) -> bool:
        return True

    def candidates(self, inst: Instance) -> Iterator[tuple[str, Any]]:
        """(kind, payload) rewrites of one base instance, before validation."""
        raise NotImplementedError

    def build(self, inst: Instance, kind: str, payload: Any) -> Instance:
        """The validated variant; raises ValueError("<kind>:<reason>") for one that is not a valid case."""
        raise NotImplementedError

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        from dlci import operators
        cap = limit_per_op if limit_per_op is not None else self.variants_per_op
        from dlci.sources import SOURCES
        base: list[Instance] = []
        for name in self.bases:
            # as gather loads it: the whole source, or the wanted operators of one that harvests per operator
            per_op = getattr(SOURCES.get(name), "per_op", False)
            base += load_with_stats(name, limit_per_op=limit_per_op, ops=self.ops if per_op else None)[0]
        if self.ops:
            base = operators.select(base, self.ops)
        groups: dict[str, list[Instance]] = collections.defaultdict(list)
        for inst in base:
            if self.accepts(inst):
                groups[inst.op].append(inst)
        counts: collections.Counter = collections.Counter()
        for insts in groups.values():
            queues: dict[str, list] = collections.defaultdict(list)
            for inst in insts:
                try:
                    for kind, payload in self.candidates(inst):
                        queues[kind].append((inst, payload))
                except Exception as e:  # an instance the rewriting cannot read: skipped, said
                    self.skip(f"unreadable:{type(e).__name__}")
            seen: set[str] = set()
            n = 0
            while n < cap and any(queues.values()):
                for kind in self.kinds:
                    if n >= cap or not queues[kind]:
                        continue
                    inst, payload = queues[kind].pop(0)
                    try:
                        variant = self.build(inst, kind, payload)
                    except ValueError as e:
                        self.skip(str(e).split(" ")[0] or f"{kind}:invalid")
                        continue
                    if variant.id in seen:
                        self.skip(f"{kind}:duplicate")
                        continue
                    seen.add(variant.id)
                    counts[kind] += 1
                    n += 1
                    yield variant
        self.stats["kinds"] = dict(counts)
