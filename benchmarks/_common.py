"""Shared helpers for the benchmarks: pick instances, sample the memory of a process tree."""
from __future__ import annotations

import threading
import time

import psutil


def pick_instances(source: str, framework_target: str, count: int, per_op: int = 2):
    """`count` instances from a source, at most `per_op` per operator, that the target accepts."""
    from dlci.sources import load
    from dlci.targets import get
    target = get(framework_target)
    chosen, seen = [], {}
    for inst in load(source):
        if inst.framework not in target.frameworks:
            continue
        if seen.get(inst.op, 0) >= per_op:
            continue
        seen[inst.op] = seen.get(inst.op, 0) + 1
        chosen.append(inst)
        if len(chosen) >= count:
            break
    return chosen


def _pss(p: psutil.Process) -> int:
    """Proportional set size: pages shared with forked children are counted once, not per process."""
    try:
        with open(f"/proc/{p.pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return p.memory_info().rss
    except psutil.Error:
        return 0


class TreeMemory:
    """Peak summed PSS of this process and all its descendants, sampled in a thread. Every half second: the
    kernel walks each mapping of a process to sum its PSS (~12 ms for a worker that imported torch and TVM), and
    at 0.1 s the sampling of three such processes took a third of one of the two cores the measured run has."""

    def __init__(self, period: float = 0.5):
        self.period = period
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me] + me.children(recursive=True):
                total += _pss(p)
            self.peak = max(self.peak, total)
            time.sleep(self.period)


    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
