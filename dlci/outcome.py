"""The result of one test: one instance through one target. Streams from workers to the parent as a dict."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# status values
PASS = "pass"                    # target agreed with the reference
UNSUPPORTED = "unsupported"      # the target said it does not support the operator/form: not a bug
INVALID = "invalid"              # the test itself could not be built (reference failed, model form unavailable)
CRASH = "crash"                  # exception, abort, segfault, hang or OOM inside the target
INCONSISTENT = "inconsistency"   # target ran but disagrees with the reference (shape, dtype, values, NaN/Inf mask)
STATUSES = (PASS, UNSUPPORTED, INVALID, CRASH, INCONSISTENT)

# stages, in order
STAGES = ("reference", "model", "convert", "compile", "run", "compare")


@dataclass
class Outcome:
    instance_id: str
    op: str
    target: str
    status: str
    stage: str | None = None      # where it happened (crash: convert/compile/run; invalid: reference/model)
    symptom: str = ""             # exception type, "SIGSEGV", "timeout", "oom", "value mismatch", "nan mismatch", ...
    message: str = ""
    traceback: str = ""
    distance: dict | None = None  # for inconsistencies: max_abs, max_rel, ref_err, mismatched, output index
    timings: dict = field(default_factory=dict)  # stage -> seconds spent inside that stage
    log: str = ""                 # stderr tail of the worker when it died
    seconds: float = 0.0          # wall time of the whole test inside the worker (or until it was killed)
    coverage: dict = field(default_factory=dict)  # traced converter file -> sorted lines run while converting
    # traced converter file -> [from line, to line] transitions within one frame while converting (-1: the return),
    # which branch outcomes ran (dlci.directed.goals)
    arcs: dict = field(default_factory=dict)
    # traced converter file -> a changed statement's first line -> "name=class" of the values it computed on
    # (dlci.testcase.value_class), which the directed search steers toward new ones
    values: dict = field(default_factory=dict)
    digest: list = field(default_factory=list)     # per output: shape and summary numbers of what the target gave
    # the target's fingerprint of the model it converted (Target.fingerprint; asked in PR scans): two revisions
    # that convert an input to the same model compute the same thing on it
    model_digest: str = ""
    model_nodes: list = field(default_factory=list)  # the same model node by node (Target.graph_nodes)
    batch: int = 1                # tests that shared this one's convert and compile (dlci.testcase.execute_batch)
    # the first test of its target in its worker: its seconds include the target's one-time start there (the
    # imports and first calls of its libraries), which the scheduler does not charge to the arm (up to a bound)
    cold: bool = False
    device: str = ""              # the accelerator a device target ran on ("cuda:0 NVIDIA H100 80GB HBM3")
    # what the device-differential oracle concluded beyond the status ("nondeterministic: 2 of 4 runs differ ..."),
    # dlci.oracles.device
    device_note: str = ""
    # the worker must not run another test: a device error poisoned its process (CUDA context); the engine replaces it
    retire_worker: str = ""
    localised: dict = field(default_factory=dict)  # a graph test's failure localised to an operator (dlci.localise)
    fitness: dict = field(default_factory=dict)  # a searched candidate's closeness to failing (dlci.oracles.fitness)

    @property
    def valid(self) -> bool:
        """A valid test exercised the target (it passed, or it failed in a way that counts)."""
        return self.status in (PASS, CRASH, INCONSISTENT)

    @property
    def failed(self) -> bool:
        return self.status in (CRASH, INCONSISTENT)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Outcome":
        return cls(**{k: d[k] for k in d if k in cls.__dataclass_fields__})


def digest(arrays) -> list:
    """A compact fingerprint of a target's outputs: two runs gave the same result when their digests agree
    (used to tell a failure that is already on the base revision from one the PR changed)."""
    import numpy as np
    out = []
    for a in arrays:
        a = np.asarray(a)
        entry = {"shape": list(a.shape), "dtype": str(a.dtype)}
        if a.dtype.kind in "biufc" and a.size:
            x = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
            finite = np.isfinite(x)
            entry.update(sum=complex(x[finite].sum()).real, abs=float(np.abs(x[finite]).sum()),
                         nan=int(np.isnan(x).sum()), inf=int((~finite).sum() - np.isnan(x).sum()))
        out.append(entry)
    return out


def same_digest(a: list, b: list, rtol: float = 1e-6) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if {k: v for k, v in x.items() if k not in ("sum", "abs")} != {k: v for k, v in y.items()
                                                                    if k not in ("sum", "abs")}:
            return False
        for key in ("sum", "abs"):
            u, v = x.get(key, 0.0), y.get(key, 0.0)
            if abs(u - v) > rtol * max(1.0, abs(u), abs(v)):
                return False
    return True
