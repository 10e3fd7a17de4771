"""What the equivalence rules run on: the instances of the wanted operators from the sources of each rule's
framework, widened by the constraint-aware generator's variants, and which rules each instance goes to."""
from __future__ import annotations

from typing import Callable

# the migration sources (and their boundary-variant source) that feed the rules of each instance framework
SOURCES = {"torch": ("opinfo", "module_db"), "keras": ("keras_tests", "tf_ops")}
WIDENING = {"torch": "boundary", "keras": "keras_boundary"}


def material(targets: dict, ops: list[str], *, sources: list[str] | None = None, limit_per_op: int | None = None,
             harvest_paths: list[str] = (), widen: bool = True, progress=lambda msg: None) -> list:
    """Instances of ``ops`` for the rule ``targets``; ``widen``: plus their boundary variants (validated in
    sandboxed workers: a boundary value can crash the framework itself; cached like every source)."""
    from dlci import sources as S
    from dlci.sources.selection import gather
    frameworks = {f for t in targets.values() for f in t.frameworks}
    names = sources or [s for f in sorted(frameworks) for s in SOURCES.get(f, ())]
    instances = [i for i in gather(names, ops, limit_per_op=limit_per_op, harvest_paths=harvest_paths,
                                     progress=progress) if i.framework in frameworks]
    if widen and instances:
        before = len(instances)
        for framework, name in sorted(WIDENING.items()):
            ops_here = sorted({i.op for i in instances if i.framework == framework})
            if ops_here and framework in frameworks:
                progress(f"loading source {name} for {len(ops_here)} operators (cached after the first run)")
                instances += S.load(name, ops=ops_here, limit_per_op=limit_per_op)
        progress(f"constraint-aware generator: {len(instances) - before} boundary variants of {before} instances")
    return instances


def router(targets: dict) -> Callable:
    """instance -> the rules that apply to it, decided from metadata before anything runs (pairs that do not apply
    are never scheduled)."""
    def route(inst) -> list[str]:
        chosen = []
        for name, t in targets.items():
            if inst.framework not in t.frameworks:
                continue
            try:
                if t.rule.why_not(inst):
                    continue
            except Exception:  # a broken check is the worker's to report (invalid), not a reason to skip
                pass
            chosen.append(name)
        return chosen
    return route
