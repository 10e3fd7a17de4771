"""A user's program, ``FILE:FUNCTION`` (FUNCTION takes no arguments): imported as it is (:func:`load_program`: the
programs ``dlci nan`` searches, PyTorch or TensorFlow), and a PyTorch model given so (``dlci test --model
FILE.py:FUNCTION``) as one test instance.

For a model, FUNCTION returns ``(module, inputs)``: the module in eval mode and a tuple of example input tensors.

- :func:`program_instance` — the model as one instance (recipe ``torch_program``: the program's file and function,
  its inputs ``in:<i>`` and every entry of its state dict ``state:<name>``, so that a search can change inputs and
  weights and the instance says which ones it ran);
- :func:`program_module` — that module again (in a worker, for every torch model form), with the instance's
  weights; two variants serve localisation (dlci.models.fx): ``expose`` (node values as extra outputs) and
  ``substitute`` (a node's value fed from outside, as a new trailing input).
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import inspect
import linecache
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec, Unencodable, to_numpy

KIND = "torch_program"


class ProgramError(ValueError):
    """A ``FILE:FUNCTION`` that cannot be used: a bad spec, a missing file or function, an import failure, a program
    that raises on its own before any search, or (as a PyTorch model) one returning the wrong thing."""


@dataclass
class Program:
    spec: str
    path: Path  # resolved absolute path of the user's file
    function: str
    module: Any
    fn: Callable[[], Any]

    @property
    def file(self) -> str:
        return str(self.path)

    def framework(self) -> str:
        """torch | tensorflow, from what the program's module imported (its globals)."""
        seen = set()
        for value in vars(self.module).values():
            mod = value.__name__ if inspect.ismodule(value) else getattr(value, "__module__", None)
            if isinstance(mod, str):
                seen.add(mod.split(".", 1)[0])
        if seen & {"tensorflow", "keras", "tf_keras"}:
            return "tensorflow"
        if "torch" in seen:
            return "torch"
        raise ProgramError(f"{self.spec}: cannot tell its framework (the file imports neither torch nor "
                           "tensorflow/keras)")


def load_program(spec: str) -> Program:
    """Import ``FILE:FUNCTION`` (FUNCTION takes no arguments). :class:`ProgramError` with a clear message."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ProgramError(f"bad program spec {spec!r}: expected FILE:FUNCTION (e.g. train.py:step)")
    file, func = spec.rsplit(":", 1)
    if not file or not func.isidentifier():
        raise ProgramError(f"bad program spec {spec!r}: expected FILE:FUNCTION with FUNCTION a Python name")
    path = Path(file).expanduser()
    if not path.is_file():
        raise ProgramError(f"{spec}: no such file {file}")
    path = path.resolve()
    name = "dlci_nan_program_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    mspec = importlib.util.spec_from_file_location(name, path)
    if mspec is None or mspec.loader is None:
        raise ProgramError(f"{spec}: {file} is not a Python file")
    module = importlib.util.module_from_spec(mspec)
    sys.modules[name] = module
    linecache.checkcache(str(path))
    try:
        mspec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - SystemExit at import time is as bad a program as any error
        sys.modules.pop(name, None)
        raise ProgramError(f"{spec}: importing {file} failed: {type(e).__name__}: {e}") from None
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        raise ProgramError(f"{spec}: {file} has no function {func!r}")
    try:
        sig = inspect.signature(fn)
        required = [p for p in sig.parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        required = []
    if required:
        names = ", ".join(p.name for p in required)
        raise ProgramError(f"{spec}: {func}() must take no arguments (it requires {names})")
    return Program(spec=spec, path=path, function=func, module=module, fn=fn)


# -- a PyTorch model: the torch_program recipe -------------------------------------------------------------------------

_LOADED: dict[tuple[str, float], tuple[Any, list]] = {}


def load(spec: str) -> tuple[Any, list]:
    """``(module, [input tensors])`` from ``FILE.py:FUNCTION`` (cached per process while the file is unchanged).
    Raises :class:`ProgramError` saying what is wrong."""
    path = spec.rsplit(":", 1)[0]
    key = (spec, os.path.getmtime(path) if os.path.isfile(path) else 0.0)
    if key in _LOADED:
        return _LOADED[key]
    prog = load_program(spec)
    import torch
    try:
        with torch.no_grad():
            got = prog.fn()
    except Exception as e:  # noqa: BLE001 - the user's code
        raise ProgramError(f"{spec}: {prog.function}() raised {type(e).__name__}: {e}") from None
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise ProgramError(f"{spec}: {prog.function}() must return (module, inputs): the module in eval mode and a "
                           f"tuple of example input tensors; it returned {_what(got)}")
    module, inputs = got
    if not isinstance(module, torch.nn.Module):
        raise ProgramError(f"{spec}: {prog.function}() must return (module, inputs); its first item is "
                           f"{_what(module)}, not a torch.nn.Module")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not inputs or \
            not all(isinstance(t, torch.Tensor) for t in inputs):
        raise ProgramError(f"{spec}: {prog.function}() must return (module, inputs) with inputs a non-empty tuple "
                           f"of tensors; got {_what(inputs)}")
    if any(m.training for m in module.modules()):
        raise ProgramError(f"{spec}: {prog.function}() returned a module in training mode: return module.eval() "
                           "(dropout and batch statistics make a training-mode run differ from run to run)")
    inputs = [t.detach().clone() for t in inputs]
    try:
        with torch.no_grad():
            module(*[t.clone() for t in inputs])
    except Exception as e:  # noqa: BLE001
        raise ProgramError(f"{spec}: the module does not run on the inputs {prog.function}() returned: "
                           f"{type(e).__name__}: {str(e)[:300]}") from None
    _LOADED[key] = (module, inputs)
    return module, inputs


def _what(v: Any) -> str:
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)} ({', '.join(type(x).__name__ for x in v[:4])})"
    return f"a {type(v).__name__}"


def program_instance(spec: str, *, seed: int = 0, source: str = "model") -> Instance:
    """The model of ``FILE.py:FUNCTION`` as one instance, its failures localised (ProgramError for bad input)."""
    file, func = spec.rsplit(":", 1) if ":" in spec else (spec, "")
    spec = f"{os.path.abspath(file)}:{func}"
    module, inputs = load(spec)
    arrays: dict[str, np.ndarray] = {}
    try:
        for i, t in enumerate(inputs):
            arrays[f"in:{i}"] = to_numpy(t, detach=True)
        for name, t in module.state_dict().items():
            arrays[f"state:{name}"] = to_numpy(t, detach=True)
    except Unencodable as e:
        raise ProgramError(f"{spec}: an input or weight dlci cannot hold ({e.reason}: {e})") from None
    stem = os.path.splitext(os.path.basename(file))[0] or "model"
    import torch
    return Instance(op=f"model::{stem}.{func}", framework="torch",
                    call={"kind": KIND, "program": spec, "localise": True},
                    inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(len(inputs))], params={},
                    origin=Origin(source, spec, f"torch {torch.__version__}"), seed=seed, arrays=arrays)


def program_module(inst: Instance):
    """The instance's module: the program's, with the instance's weights, in eval mode; with ``call["expose"]``
    (node names) those values are extra outputs after the module's own, with ``call["substitute"]`` those nodes'
    values are trailing inputs instead (the traced graph, rewired)."""
    import torch
    module, _ = load(inst.call["program"])
    module = copy.deepcopy(module)
    state = {k.split(":", 1)[1]: torch.from_numpy(np.array(v, copy=True))
             for k, v in inst.arrays.items() if k.startswith("state:")}
    if state:
        module.load_state_dict(state, strict=True)
    module.eval()
    expose, substitute = inst.call.get("expose") or [], inst.call.get("substitute") or []
    return rewired(trace(module), expose, substitute) if expose or substitute else module


def trace(module):
    """``torch.fx.symbolic_trace`` of the module (standard ``torch.nn`` modules stay one node each)."""
    import torch.fx
    try:
        return torch.fx.symbolic_trace(module)
    except Exception as e:  # noqa: BLE001 - control flow on values, unsupported Python
        raise ProgramError(f"torch.fx cannot trace the module ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
                           ) from None


def rewired(gm, expose: list[str], substitute: list[str]):
    """A copy of the traced module: ``substitute`` nodes read from new trailing inputs (in that order), ``expose``
    nodes' values returned after the module's own outputs."""
    gm = copy.deepcopy(gm)
    g = gm.graph
    nodes = {n.name: n for n in g.nodes}
    last = [n for n in g.nodes if n.op == "placeholder"][-1]
    for name in substitute:
        with g.inserting_after(last):
            ph = g.placeholder(f"dlci_fed_{name}")
        nodes[name].replace_all_uses_with(ph)
        last = ph
    if expose:
        out = next(n for n in g.nodes if n.op == "output")
        out.args = ((out.args[0], *[nodes[n] for n in expose]),)
    g.eliminate_dead_code()
    g.lint()
    gm.recompile()
    return gm
