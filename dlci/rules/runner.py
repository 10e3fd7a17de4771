"""One rule test, in a sandboxed worker: build graph A and graph B from one instance, compare, classify.

Stages: "model" (the instance's model code and the rule's graph functions are loaded), "reference" (graph A, plus
its fp64 recomputation), "run" (graph B), "compare". Graph A failing makes the test invalid (not the library's fault
as far as this rule can tell); graph B failing where graph A ran is a crash of the equivalent form, unless the rule
says the error means its feature does not cover this instance (unsupported).
"""
from __future__ import annotations

import json
import re
import time
import traceback
from typing import Callable

import numpy as np

from dlci.instance import Instance
from dlci.outcome import CRASH, INCONSISTENT, INVALID, PASS, UNSUPPORTED, Outcome, digest
from dlci.rules.case import KerasCase, TorchCase
from dlci.rules.registry import get_rule

_CASES: dict[str, object] = {}  # instance id -> its Case (per worker)
_NOT_APPLICABLE = re.compile(r"^NotImplementedError: not applicable", re.I)


def framework_imports(library: str) -> str:
    common = "import base64\nimport io\nimport json\n\nimport numpy as np\n"
    return common + ("import torch" if library == "torch" else "import keras\nimport tensorflow as tf")


def model_code(instance: Instance) -> str:
    from dlci.rules.model_code import MODEL_CODE
    return MODEL_CODE[instance.call["kind"]](instance)


def case_code(instance: Instance) -> str:
    """The statement building the instance's Case from its model code's names (dlci.rules.model_code.MODEL_CODE),
    the same in the worker and in the reproducer."""
    names = {"inputs": "INPUTS", "params": "PARAMS", "op": "OP", "call": "CALL", "flatten": "flatten"}
    if instance.framework == "torch":
        cls = "TorchCase"
        names.update(build_model="build_model", model_class="Model", to_torch="to_torch",
                     state="STATE" if instance.call["kind"] == "torch_module" else "{}")
    else:
        cls = "KerasCase"
        names.update(build_layer="build_layer", call_layer="call_layer", build_keras_model="build_keras_model",
                     config="CONFIG", weights="WEIGHTS")
    args = ", ".join(f"{k}={v}" for k, v in names.items())
    return f"CASE = {cls}({args})"


def clear_cases() -> None:
    """Forget the cached cases (a fresh start, as a new worker has)."""
    _CASES.clear()


def case_for(instance: Instance):
    """The instance as the rules' graphs see it: its model code run in a namespace of its own (as the reproducer
    runs it), then the Case built from its names. Cached per worker."""
    if instance.id in _CASES:
        return _CASES[instance.id]
    library = "torch" if instance.framework == "torch" else "tensorflow"
    ns: dict = {"__name__": f"dlci_model_{instance.id}", "np": np}
    exec(framework_imports(library), ns)
    ns["INPUTS"] = [np.array(a, copy=True) for a in instance.input_arrays()]
    ns["PARAMS"] = json.loads(json.dumps(instance.params, default=str))
    ns["OP"] = instance.op
    ns["CALL"] = json.loads(json.dumps(instance.call, default=str))
    exec(compile(model_code(instance), f"<model {instance.id}>", "exec"), ns)
    ns.update(TorchCase=TorchCase, KerasCase=KerasCase)
    exec(case_code(instance), ns)
    if len(_CASES) > 64:
        clear_cases()
    _CASES[instance.id] = ns["CASE"]
    return ns["CASE"]


def widen(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Float inputs in float64 (complex in complex128): graph A's fp64 reference."""
    out = []
    for x in inputs:
        if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
            out.append(x.astype(np.float64))
        elif x.dtype.kind == "c":
            out.append(x.astype(np.complex128))
        else:
            out.append(np.array(x, copy=True))
    return out


def output_list(value) -> list[np.ndarray]:
    """A graph's result as a list of arrays."""
    if isinstance(value, np.ndarray):
        return [value]
    return [np.asarray(v) for v in value]


def exact_verdict(got: list[np.ndarray], ref: list[np.ndarray]) -> dict | None:
    """Bit-exact comparison (inverse pairs, integer data): same count, shapes, dtypes and values (NaN = NaN)."""
    if len(got) != len(ref):
        return {"symptom": "output count", "message": f"{len(got)} outputs != {len(ref)}",
                "distance": {"got": len(got), "expected": len(ref)}}
    for i, (g, r) in enumerate(zip(got, ref)):
        if g.shape != r.shape:
            return {"symptom": "shape mismatch", "message": f"output {i}: shape {list(g.shape)} != {list(r.shape)}",
                    "distance": {"output": i, "got_shape": list(g.shape), "expected_shape": list(r.shape)}}
        if g.dtype != r.dtype:
            return {"symptom": "dtype mismatch", "message": f"output {i}: dtype {g.dtype} != {r.dtype}",
                    "distance": {"output": i, "got_dtype": str(g.dtype), "expected_dtype": str(r.dtype)}}
        if not np.array_equal(g, r, equal_nan=g.dtype.kind in "fc"):
            diff = ~((g == r) | ((g != g) & (r != r))) if g.dtype.kind in "fc" else g != r
            idx = [int(v) for v in np.argwhere(diff)[0]] if diff.ndim else []
            return {"symptom": "value mismatch",
                    "message": f"output {i}: {int(diff.sum())} of {g.size} elements differ (exact comparison), "
                               f"e.g. at {idx}: {g[tuple(idx)]!r} vs {r[tuple(idx)]!r}",
                    "distance": {"output": i, "mismatched": int(diff.sum()), "total": int(g.size)}}
    return None


def unsupported(rule, exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    if _NOT_APPLICABLE.match(text) or type(exc).__name__ == "NotApplicable":
        return True
    return any(re.search(p, text, re.S) for p in rule.unsupported)


def compare(rule, instance: Instance, b: list, a: list, a64: list | None) -> dict | None:
    from dlci.models.outputs import shape_only_outputs, uncompared_outputs
    from dlci.oracles.compare import compare_outputs
    if rule.exact:  # outputs with unspecified contents are not compared (kept in place: messages number outputs)
        ignore = uncompared_outputs(instance) if len(a) == len(b) else set()
        return exact_verdict([a[i] if i in ignore else x for i, x in enumerate(b)], a)
    return compare_outputs(b, a, a64, skip_values=shape_only_outputs(instance, len(a)),
                           ignore=uncompared_outputs(instance))


def execute_rule_job(instance: Instance, target_name: str, trace_files: tuple[str, ...] = (), watch: tuple = (),
                     fingerprint: bool = False, *, stage_hook: Callable[[str], None] | None = None) -> dict:
    return execute_rule(instance, target_name, stage_hook=stage_hook).to_dict()


def execute_rule(instance: Instance, target_name: str, *, stage_hook: Callable[[str], None] | None = None) -> Outcome:
    from dlci import models
    from dlci.testcase import first_lines

    rule = get_rule(target_name)
    out = Outcome(instance_id=instance.id, op=instance.op, target=rule.target, status=PASS)
    hook = stage_hook or (lambda stage: None)
    t0 = time.perf_counter()

    def done(status=None, stage=None, symptom="", exc: BaseException | None = None, message="") -> Outcome:
        if status is not None:
            out.status, out.stage, out.symptom = status, stage, symptom
            out.message = first_lines(str(exc)) if exc is not None else message
            if exc is not None:
                out.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        out.seconds = time.perf_counter() - t0
        return out

    if instance.framework != rule.framework:
        return done(INVALID, "model", "framework", message=f"{rule.target} takes {rule.framework} instances")
    hook("model")
    try:
        reason = rule.why_not(instance)
    except Exception as e:  # a broken applicability check is ours: the test is invalid, not a bug
        return done(INVALID, "model", type(e).__name__, e)
    if reason:
        return done(UNSUPPORTED, "model", "not applicable", message=reason)
    t = time.perf_counter()
    try:
        with models.quiet():
            case = case_for(instance)
            graph_a, graph_b = rule.graph_functions()
    except Exception as e:
        return done(INVALID, "model", type(e).__name__, e)
    finally:
        out.timings["model"] = time.perf_counter() - t

    def run(graph, inputs, **kw) -> list[np.ndarray]:
        models.seed_all(instance.seed)
        with models.quiet():
            return output_list(graph(case, inputs, **kw))

    hook("reference")
    t = time.perf_counter()
    try:
        a = run(graph_a, [np.array(x, copy=True) for x in case.inputs])
    except Exception as e:
        status = UNSUPPORTED if unsupported(rule, e) else INVALID
        return done(status, "reference", "not applicable" if status == UNSUPPORTED else type(e).__name__, e)
    a64 = None
    if not rule.exact:
        try:
            a64 = run(graph_a, widen(case.inputs), dtype="float64")
            if [x.shape for x in a64] != [x.shape for x in a]:
                a64 = None
        except Exception:  # no fp64 form: compared without arbitration
            a64 = None
    out.timings["reference"] = time.perf_counter() - t

    hook("run")
    t = time.perf_counter()
    try:
        b = run(graph_b, [np.array(x, copy=True) for x in case.inputs])
    except Exception as e:
        if unsupported(rule, e):
            return done(UNSUPPORTED, "run", "not applicable", e)
        return done(CRASH, "run", type(e).__name__, e)
    finally:
        out.timings["run"] = time.perf_counter() - t

    hook("compare")
    t = time.perf_counter()
    try:
        verdict = compare(rule, instance, b, a, a64)
    except Exception as e:
        return done(INVALID, "compare", type(e).__name__, e)
    finally:
        out.timings["compare"] = time.perf_counter() - t
    if verdict is not None:
        out.digest = digest(b)
        out.distance = verdict.get("distance")
        return done(INCONSISTENT, "compare", verdict.get("symptom", "value mismatch"),
                    message=verdict.get("message", ""))
    return done()
