"""Category 1, optimization: the instance eagerly (graph A: dlci.rules.torch.common.plain) vs compiled by
torch.compile, TorchScript (script / trace) or torch.export (graph B)."""
import torch
import torch._dynamo

from dlci.rules.torch.common import forward_args, is_fn, na


def compile_run(case, inputs):
    """torch.compile(model, backend="inductor"), with no cache shared with an earlier test."""
    torch._dynamo.reset()
    model = torch.compile(case.build_model(), backend="inductor", fullgraph=False)
    with torch.no_grad():
        return case.flatten(model(*case.to_torch(inputs)))


def ts_literal(v):
    """TorchScript source for an encoded argument (tensors are the parameters x0, x1, ...)."""
    if isinstance(v, list):
        return "[" + ", ".join(ts_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        if "$t" in v:
            return f"x{v['$t']}"
        if "$tuple" in v:
            items = [ts_literal(x) for x in v["$tuple"]]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if "$float" in v:
            return f"float({v['$float']!r})"
        if "$dtype" in v:
            return f"torch.{v['$dtype']}"
        if "$torch" in v:
            return v["$torch"]
        na(f"TorchScript has no literal for {v!r}")
    return repr(v)


def scripted(case):
    """The scripted module (module instances) or a scripted function calling the operator (function instances)."""
    try:
        if not is_fn(case):
            return torch.jit.script(case.build_model().m)
        args = [ts_literal(a) for a in case.call.get("args", [])]
        args += [f"{k}={ts_literal(v)}" for k, v in case.call.get("kwargs", {}).items()]
        fn = case.call["fn"]
        call = f"{args[0]}.{fn.rsplit('.', 1)[1]}({', '.join(args[1:])})" if fn.startswith("torch.Tensor.") \
            else f"{fn}({', '.join(args)})"
        params = ", ".join(f"x{i}: torch.Tensor" for i in range(len(case.inputs)))
        return torch.jit.CompilationUnit(f"def fn({params}):\n    return {call}\n").fn
    except NotImplementedError:
        raise
    except Exception as e:  # TorchScript covers a subset of Python: its frontend's refusals are not bugs here
        raise RuntimeError(f"cannot script: {type(e).__name__}: {e}") from e


def script_run(case, inputs):
    """The TorchScript form called on the inputs."""
    fn = scripted(case)
    ts = case.to_torch(inputs)
    with torch.no_grad():
        if is_fn(case):
            return case.flatten(fn(*ts))
        a, k = forward_args(case, ts)
        return case.flatten(fn(*a, **k))


def trace_run(case, inputs):
    """torch.jit.trace(model, inputs) replayed on the tracing inputs."""
    with torch.no_grad():
        graph = torch.jit.trace(case.build_model(), tuple(case.to_torch(inputs)), check_trace=False)
        return case.flatten(graph(*case.to_torch(inputs)))


def export_run(case, inputs):
    """torch.export.export(model, inputs).module() called on the inputs."""
    ep = torch.export.export(case.build_model(), tuple(case.to_torch(inputs)))
    with torch.no_grad():
        return case.flatten(ep.module()(*case.to_torch(inputs)))
