"""One operator selection for every command: the instances of the wanted operators from the named sources."""
from __future__ import annotations

from typing import Iterable

from dlci.errors import UsageError
from dlci.instance import Instance
from dlci.sources import SOURCES, load, registry
from dlci.sources.harvest import load_harvest


class UnknownSource(UsageError):
    """A source name that no registered source has."""


def gather(names: Iterable[str], wanted_ops: Iterable[str], *, limit_per_op: int | None = None,
           harvest_paths: Iterable[str] = (), frameworks: Iterable[str] | None = None,
           progress=lambda msg: None, canonical: bool = False) -> list[Instance]:
    """The instances of ``wanted_ops`` (operator names in any spelling, or ``all``; none: nothing) from the named
    sources and from the pytest suites at ``harvest_paths``; ``frameworks``: skip sources of other frameworks. One
    operator selection for every command: :func:`dlci.operators.select`. Derived sources (boundary, nan_search)
    derive only the wanted operators. ``canonical``: the names are canonical operators, where ``all`` is the
    operator (torch.all, ONNX ReduceMin on bool…), not every operator."""
    from dlci import operators
    registry()
    names = list(names)
    unknown = [n for n in names if n not in SOURCES]
    if unknown:
        raise UnknownSource(f"unknown source(s) {', '.join(unknown)}; known: {', '.join(sorted(SOURCES))}")
    wanted = {o.strip() for o in wanted_ops if o.strip()}
    if not wanted:
        return []
    everything = not canonical and "all" in {w.lower() for w in wanted}
    derive = sorted({c for o in wanted for c in operators.canonical(o)})  # what derived sources derive
    fws = set(frameworks) if frameworks is not None else None
    picked: list[Instance] = []
    for name in names:
        src = SOURCES[name]
        if name == "harvest" or (fws is not None and src.framework not in fws):
            continue  # harvest needs a suite path (harvest_paths)
        progress(f"loading source {name} (cached after the first harvest)")
        ops = derive if (src.bases or src.per_op) and not everything else None
        found = load(name, limit_per_op=limit_per_op, ops=ops)
        picked += found if everything else operators.select(found, wanted)
    for path in harvest_paths:
        progress(f"harvesting operator calls from pytest suite {path}")
        found = load_harvest([path], limit_per_op=limit_per_op)
        picked += found if everything else operators.select(found, wanted)
    return picked
