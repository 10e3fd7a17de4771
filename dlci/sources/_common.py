"""Helpers shared by the sources: tensor slots, argument encoding, dotted-path resolution."""
from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

import numpy as np

from dlci.instance import Unencodable, encode_value, to_numpy


def dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


class Slots:
    """Collects the tensor inputs of one call; the same tensor object used twice gets one slot."""

    def __init__(self, detach: bool = False):
        self.detach = detach
        self.arrays: list[np.ndarray] = []
        self._by_id: dict[int, int] = {}
        self._keep: list = []  # keep the originals alive so id() stays unique

    def __call__(self, t) -> int:
        key = id(t)
        if key in self._by_id:
            return self._by_id[key]
        self.arrays.append(to_numpy(t, self.detach))
        self._keep.append(t)
        self._by_id[key] = len(self.arrays) - 1
        return self._by_id[key]


def encode(value: Any, slots: Slots) -> Any:
    try:
        return encode_value(value, slots)
    except Unencodable:
        raise
    except TypeError as e:
        raise Unencodable("unencodable-arg", str(e)) from e


def harvest_in_workers(source, engine, todo: list[str], payload, on_done, *, job_func: str, max_rounds: int,
                       crash_reason=lambda key, symptom: f"crashed:{symptom}") -> None:
    """One job per operator in the engine's sandboxed workers, in rounds. A job's worker announces each candidate
    it validates (stage ``"candidate <key>"``): when the framework kills the worker, only that candidate is lost: it
    is recorded in ``source.stats["crashes"]``, counted under ``crash_reason(key, signal)``, and the operator runs
    again without it (``payload(op, skipped keys)``), up to ``max_rounds`` times. ``on_done(op, result)`` takes a
    job's result and says whether it was one (a dead worker's outcome is not). Raises InterruptedError when the run
    was interrupted: a partial harvest must not be cached as the whole one."""
    import collections
    from dlci.exec import Job
    skips: dict[str, list[str]] = collections.defaultdict(list)
    crashes = source.stats.setdefault("crashes", [])
    for round_ in range(max_rounds):
        if not todo:
            return
        again: list[str] = []

        def on_result(job, res):
            if on_done(job.op, res):
                return
            stage = res.get("stage") or ""
            key = stage[len("candidate "):] if stage.startswith("candidate ") else ""
            symptom = res.get("symptom") or "error"
            crashes.append({"op": job.op, "candidate": key, "symptom": symptom,
                            "message": (res.get("message") or "")[:300]})
            if res.get("status") == "crash" and key and key not in skips[job.op]:
                source.skip(crash_reason(key, symptom))
                skips[job.op].append(key)
                again.append(job.op)
            else:
                source.skip(f"op-failed:{symptom}")

        jobs = (Job(id=f"{op}#{round_}", func=job_func, args=(payload(op, list(skips[op])),), op=op, instance_id=op,
                    target=source.name, affinity="") for op in todo)
        info = engine.run(jobs, on_result)
        if info.interrupted:
            raise InterruptedError(f"{source.name} harvest interrupted ({info.reason})")
        todo = again
    for _ in todo:
        source.skip("op-failed:too-many-crashes")
