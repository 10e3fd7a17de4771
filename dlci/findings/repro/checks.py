"""What a reproducer checks, with what: the reference the campaign judged by (:func:`judged_reference`, computed by
the very functions dlci.testcase runs), and the check the finding's symptom needs (:func:`comparison`: the template
context, the oracle's own code pasted from dlci.oracles.compare with the campaign's tolerances).
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import signal
import sys

import numpy as np

from dlci.findings.repro.literals import array_code, message_key
from dlci.instance import Instance

HARD_CRASHES = ("timeout", "oom")  # plus signal names (SIG*) and "exit N": symptoms that kill the process
CHILD_TIMEOUT = 300  # seconds a hard-crash reproducer waits for its child before calling it a hang


@contextlib.contextmanager
def _single_threaded():
    """dlci's workers compute single-threaded (dlci.exec.engine): a sum split over threads can differ in its last
    bits, so the reference is computed here the same way."""
    if "torch" not in sys.modules:
        yield
        return
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def judged_reference(inst: Instance, target_name: str) -> tuple[list[np.ndarray], list[np.ndarray] | None, bool]:
    """(ref, ref64, exported) exactly as dlci.testcase.execute computes them for this instance on this target;
    ``exported``: the outputs of the exported model (the instance reaches the target through an exporter)."""
    from dlci import models
    from dlci.models.references import exported_reference, reference
    from dlci.targets import get
    if inst.framework == "torch":
        import torch  # noqa: F401  (so that it runs single-threaded below)
    with _single_threaded():
        ref, ref64 = reference(inst)
        target = get(target_name)
        if inst.framework not in target.exporters:
            return ref, ref64, False
        models.build(inst, target.form)
        got, got64 = exported_reference(inst, target.form, ref, ref64)
    return got, got64, got is not ref  # the same objects: no evaluator ran the exported model


def _version(dist: str) -> str:
    try:
        return " " + importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def reference_note(inst: Instance, exported: bool, arbitrated: bool) -> str:
    """What the embedded reference is, in words."""
    if exported:
        what, fp64 = "the exported ONNX model run by ONNX Runtime" + _version("onnxruntime"), "onnx.reference"
    elif inst.framework == "torch":
        what, fp64 = f"eager torch{_version('torch')}", "torch"
    elif inst.framework == "keras":
        what, fp64 = f"the Keras{_version('keras')} layer called eagerly", "keras"
    elif inst.framework == "tflite":
        what, fp64 = f"the TFLite interpreter (tensorflow{_version('tensorflow-cpu')}) on the model", ""
    else:
        what = ("the ONNX test's expected output" if inst.expected_arrays() is not None
                else f"onnx{_version('onnx')}'s reference implementation")
        fp64 = "onnx.reference"
    return what + (f"; {fp64} in float64 arbitrates rounding" if arbitrated else "")


# -- what the script checks ------------------------------------------------------------------------------------------

def _oracle_source(*functions) -> str:
    return "\n\n\n".join(inspect.getsource(fn).rstrip() for fn in functions)


def compare_source() -> str:
    """The whole oracle module (for checks no single function covers, and for the rules' reproducers)."""
    from dlci.oracles import compare
    src = inspect.getsource(compare)
    return "\n".join(ln for ln in src.splitlines() if not ln.startswith("from __future__"))


def ignored_for(inst: Instance) -> set[int]:
    from dlci.models.outputs import uncompared_outputs
    return uncompared_outputs(inst)


def skip_values_for(inst: Instance, n_outputs: int | None = None) -> set[int]:
    from dlci.models.outputs import shape_only_outputs
    return set(shape_only_outputs(inst, n_outputs))


def is_hard_crash(symptom: str) -> bool:
    return symptom.startswith("SIG") or symptom.startswith("exit") or symptom in HARD_CRASHES


def crash_exception(finding) -> str:
    """The exception a crash finding expects: its symptom, or, for findings whose symptom is not an exception name
    (PR mode's "support removed"), the one recorded in ``extra["exception"]``."""
    return (finding.extra or {}).get("exception") or finding.symptom or ""


def failing_output(finding, n: int, ignore: set[int]) -> int | None:
    """The output the finding's verdict names, as a position in the target's outputs (compare_outputs counts
    without the ignored ones)."""
    i = (finding.distance or {}).get("output")
    if not isinstance(i, int):
        return None
    keep = [k for k in range(n) if k not in ignore] if ignore else list(range(n))
    return keep[i] if 0 <= i < len(keep) else None


def _real(a: np.ndarray) -> np.ndarray:
    """The form the oracle compares floats in (complex as real/imag pairs), kept in a readable dtype."""
    if a.dtype.kind == "c":
        return np.stack([a.real, a.imag], axis=-1).astype(np.float64)
    return a if a.dtype.name in ("float16", "float32", "float64") else a.astype(np.float32)


def comparison(finding, inst: Instance, target_name: str) -> dict:
    """The template context of the check the finding's symptom needs, with the reference embedded."""
    from dlci.models.outputs import quantized_outputs
    from dlci.oracles import compare as C
    symptom = finding.symptom or ""
    if finding.oracle != "inconsistency":
        if is_hard_crash(symptom):
            code = -int(signal.Signals[symptom]) if symptom in signal.Signals.__members__ else None
            if symptom.startswith("exit"):
                code = int(symptom.split()[1]) if symptom.split()[1:] and symptom.split()[1].isdigit() else None
            return {"check": "process", "expected_code": code, "timeout": CHILD_TIMEOUT}
        return {"check": "exception", "exception": crash_exception(finding),
                "message_key": message_key(finding.message or "")}
    ref, ref64, exported = judged_reference(inst, target_name)
    ignore = ignored_for(inst)
    i = failing_output(finding, len(ref), ignore)
    ctx = {"n_outputs": len(ref), "index": i}
    if symptom == "output count":
        return {**ctx, "check": "count"}
    if i is None:  # nothing says which output: the whole comparison, as the campaign made it
        return {**ctx, "check": "compare", "oracle_code": compare_source(),
                "expected": [array_code(r) for r in ref],
                "expected64": None if ref64 is None else [array_code(r) for r in ref64],
                "skip_values": sorted(skip_values_for(inst, len(ref))), "ignore": sorted(ignore),
                "quantized": sorted(quantized_outputs(inst, ref)),
                "note": reference_note(inst, exported, ref64 is not None)}
    r = np.asarray(ref[i])
    r64 = np.asarray(ref64[i]) if ref64 is not None and i < len(ref64) else None
    if symptom == "shape mismatch":
        return {**ctx, "check": "shape", "shape": tuple(r.shape)}
    if symptom == "dtype mismatch":
        return {**ctx, "check": "dtype", "dtype": r.dtype.name}
    kind = C._kind(r)
    arbitrated = r64 is not None
    if r64 is not None and _real(r64).shape != _real(r).shape:
        r64 = None  # as the oracle does: another output layout is not arbitrated
    ctx.update(note=reference_note(inst, exported, r64 is not None),
               expected=array_code(_real(r) if kind in "fc" else r),
               expected64=None if r64 is None else array_code(_real(r64).astype(np.float64)),
               complex=kind == "c")
    if kind in "bi":
        steps = C.QUANTIZATION_STEPS if i in quantized_outputs(inst, ref) else 0
        return {**ctx, "check": "integers", "steps": steps, "oracle_code": _oracle_source(C.integers_differ)}
    if symptom == "nan mismatch":
        rounding = r.dtype.name if r.dtype.kind == "f" else "float32"  # the dtype classes_differ rounds to
        return {**ctx, "check": "classes", "rounding": rounding,
                "oracle_code": _oracle_source(C.nan_classes, C.classes_differ)}
    rtol, atol = C.tolerance(r.dtype.name, arbitrated)
    used = finding.distance or {}  # a device target's project may allow more on its device (Target.tolerances)
    rtol, atol = max(rtol, used.get("rtol", 0.0)), max(atol, used.get("atol", 0.0))
    return {**ctx, "check": "values", "oracle_code": _oracle_source(C.values_differ),
            "tolerance": f"dict(rtol={rtol!r}, atol={atol!r}, multiplier={C.FP64_MULTIPLIER!r}, "
                         f"floor={C.rel_floor(r.dtype.name)!r})"}


