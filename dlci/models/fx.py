"""A user's PyTorch model as a graph of torch calls (``torch.fx``): what a failure of a whole torch model is localised
on, at the torch level (``dlci test --model FILE.py:FUNCTION``, the model loaded by dlci.models.program; Audee's
localisation, dlci.localise).

The ONNX graph model (dlci.models.graph) does not cover such a model: its operators are torch calls, and the
torch targets (export, FX, TorchScript, dynamo) each see them through their own front door. So the unit of
localisation is the node of the module's FX graph (``torch.fx.symbolic_trace``: a call of a torch function, a tensor
method or a standard ``torch.nn`` module), which is also what a maintainer reads.

:class:`FxView` — the traced module: its nodes, every node's value in float32 and in float64 (a
``torch.fx.Interpreter`` over the module and over a float64 copy), each node **alone** as a single-operator instance
fed with the float32 reference's values (a ``torch_fn`` or ``torch_module`` recipe, checked to compute exactly what
the node computed: what the rest of dlci tests, reduces and writes reproducers for), the module with a node's value
substituted, and the module exposing every node's value.
"""
from __future__ import annotations

import copy
import inspect
from typing import Any

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec, Unencodable, encode_value, to_numpy
from dlci.models.program import program_module, trace

_CALLS = ("call_function", "call_method", "call_module")
# operator-module functions an FX graph records for Python operators, by the aten operator they stand for
_PY_OPERATORS = {"add": "add", "iadd": "add", "sub": "sub", "isub": "sub", "mul": "mul", "imul": "mul",
                 "truediv": "div", "itruediv": "div", "floordiv": "floor_divide", "matmul": "matmul", "pow": "pow",
                 "neg": "neg", "mod": "remainder", "getitem": "getitem", "and_": "bitwise_and", "or_": "bitwise_or"}
# constructor parameters that say where and in which dtype weights live, not what the module computes
_CTOR_SKIP = {"self", "device", "dtype"}


def operators(inst: Instance) -> int:
    """Operator nodes of a torch program (1 when it cannot be traced here)."""
    try:
        return max(1, len(FxView(inst).nodes))
    except Exception:  # noqa: BLE001
        return 1


# -- the view localisation works on --------------------------------------------------------------------------------

class FxView:
    """The traced program of a ``torch_program`` instance, as dlci.localise reads a graph."""

    def __init__(self, inst: Instance):
        import torch
        self.inst = inst
        base = dict(inst.call)
        base.pop("expose", None), base.pop("substitute", None)
        self.module = program_module(Instance(inst.op, inst.framework, base, inst.inputs, inst.params, inst.origin,
                                              inst.seed, inst.arrays, inst.id))
        self.gm = trace(self.module)
        self.nodes = [n for n in self.gm.graph.nodes if n.op in _CALLS]
        self.index = {n.name: k for k, n in enumerate(self.nodes)}
        self._v32: dict | None = None
        self._v64: dict | None = None
        self.torch = torch

    # naming
    def __len__(self) -> int:
        return len(self.nodes)

    def op(self, k: int) -> str:
        return node_op(self.gm, self.nodes[k])

    def label(self, k: int) -> str:
        return f"{k}:{self.op(k).split('::')[-1]}"

    def names(self, k: int) -> list[str]:
        """Names a target's message may use for node k."""
        n = self.nodes[k]
        return [n.name] + ([str(n.target)] if n.op == "call_module" else [])

    def input_names(self) -> list[str]:
        return [n.name for n in self.gm.graph.nodes if n.op == "placeholder"]

    def op_type(self, k: int) -> str:
        return self.op(k).split("::")[-1]

    # structure
    def output_nodes(self) -> list[str | None]:
        """The node behind each (flattened) output of the module, None where an output is not a node's value."""
        import torch.fx
        out = next(n for n in self.gm.graph.nodes if n.op == "output")
        leaves: list[str | None] = []

        def walk(a):
            if isinstance(a, (list, tuple)):
                for x in a:
                    walk(x)
            elif isinstance(a, dict):
                for x in a.values():
                    walk(x)
            elif isinstance(a, torch.fx.Node):
                v = self.values().get(a.name)
                if isinstance(v, (tuple, list)):
                    leaves.extend([a.name] * len([x for x in v if isinstance(x, self.torch.Tensor)]))
                else:
                    leaves.append(a.name)
        walk(out.args[0])
        return leaves

    def ancestors(self, name: str | None) -> set[int]:
        """Operator nodes the value of node ``name`` depends on (itself included)."""
        if name is None:
            return set()
        by_name = {n.name: n for n in self.gm.graph.nodes}
        seen: set[int] = set()
        todo = [by_name[name]] if name in by_name else []
        while todo:
            n = todo.pop()
            k = self.index.get(n.name)
            if k is not None:
                if k in seen:
                    continue
                seen.add(k)
            todo += list(n.all_input_nodes)
        return seen

    def inputs_of(self, k: int) -> list[int]:
        return [self.index[a.name] for a in self.nodes[k].all_input_nodes if a.name in self.index]

    def producer_of(self, name: str | None) -> int | None:
        return self.index.get(name) if name else None

    def values_of(self, k: int) -> list[tuple[str, np.ndarray, np.ndarray | None]]:
        """(name, float32 reference, float64 reference) of node k's value when it is one tensor."""
        from dlci.models.convert import torch_to_np
        name = self.nodes[k].name
        v, v64 = self.values().get(name), self.values64().get(name)
        if not isinstance(v, self.torch.Tensor):
            return []
        return [(name, torch_to_np(v), torch_to_np(v64) if isinstance(v64, self.torch.Tensor) else None)]

    # values
    def _run(self, gm, tensors) -> dict:
        import torch.fx
        seen: dict[str, Any] = {}

        class Capture(torch.fx.Interpreter):
            def run_node(self, n):
                v = super().run_node(n)
                seen[n.name] = v
                return v

        with self.torch.no_grad():
            Capture(gm).run(*tensors)
        return seen

    def values(self) -> dict:
        """node name -> its value in the float32 reference (the module as the program built it)."""
        if self._v32 is None:
            from dlci.models import seed_all
            from dlci.models.convert import np_to_torch
            seed_all(self.inst.seed)
            self._v32 = self._run(self.gm, [np_to_torch(a) for a in self.inst.input_arrays()])
        return self._v32

    def values64(self) -> dict:
        """node name -> its value in a float64 copy of the module, fed the inputs widened to float64."""
        if self._v64 is None:
            from dlci.models import seed_all
            from dlci.models.convert import np_to_torch
            gm64 = copy.deepcopy(self.gm).to(self.torch.float64)
            xs = [np_to_torch(a) for a in self.inst.input_arrays()]
            xs = [x.to(self.torch.float64) if x.is_floating_point() else x for x in xs]
            seed_all(self.inst.seed)
            self._v64 = self._run(gm64, xs)
        return self._v64

    def tensor_nodes(self) -> list[int]:
        """Nodes whose value is one tensor (what can be exposed, substituted and compared)."""
        vals = self.values()
        return [k for k, n in enumerate(self.nodes) if isinstance(vals.get(n.name), self.torch.Tensor)]

    # instances derived for localisation
    def _derive(self, call: dict, arrays: dict, op: str | None = None) -> Instance:
        inputs = [TensorSpec.of(arrays[f"in:{i}"]) for i in range(sum(1 for k in arrays if k.startswith("in:")))]
        return Instance(op=op or self.inst.op, framework="torch", call=call, inputs=inputs, params={},
                        origin=self.inst.origin, seed=self.inst.seed, arrays=arrays)

    def exposed(self, ks: list[int]) -> tuple[Instance, list[str]]:
        """(the program returning, after its own outputs, the values of those nodes ``ks`` that are one tensor and
        not an output already, their names)."""
        shown = set(self.output_nodes())
        names = [self.nodes[k].name for k in ks if self.nodes[k].name not in shown and self.values_of(k)]
        call = {**self.inst.call, "expose": names, "localise": False}
        return self._derive(call, dict(self.inst.arrays)), names

    def fixed(self, k: int) -> Instance | None:
        """The program with node k's value fed from the float32 reference (a trailing input): what the output is
        once this operator is made right."""
        v = self.values().get(self.nodes[k].name)
        if not isinstance(v, self.torch.Tensor) or self.nodes[k].name in self.output_nodes():
            return None
        try:
            fed = to_numpy(v, detach=True)
        except Unencodable:
            return None
        arrays = dict(self.inst.arrays)
        arrays[f"in:{len(self.inst.inputs)}"] = fed
        call = {**self.inst.call, "substitute": [self.nodes[k].name], "localise": False}
        return self._derive(call, arrays)

    def alone(self, k: int) -> Instance | None:
        """Node k alone, fed with the float32 reference's values, as a single-operator instance (``torch_fn`` or
        ``torch_module``) checked to compute exactly what the node computed; None when it cannot be expressed."""
        try:
            inst = self._alone(k)
        except Exception:  # noqa: BLE001 - an argument dlci cannot encode, a module it cannot rebuild
            return None
        return inst if inst is not None and self._same_as_node(inst, k) else None

    def _alone(self, k: int) -> Instance | None:
        import torch.fx
        node, vals = self.nodes[k], self.values()
        tensors: list[np.ndarray] = []

        def slot(t) -> int:
            tensors.append(to_numpy(t, detach=True))
            return len(tensors) - 1

        def enc(a):
            if isinstance(a, torch.fx.Node):
                return encode_value(vals[a.name], slot)
            if isinstance(a, (list, tuple)):
                items = [enc(x) for x in a]
                return items if isinstance(a, list) else {"$tuple": items}
            if isinstance(a, dict):
                return {"$dict": {key: enc(x) for key, x in a.items()}}
            return encode_value(a, slot)

        args = [enc(a) for a in node.args]
        kwargs = {key: enc(v) for key, v in node.kwargs.items()}
        if not tensors:
            return None
        arrays = {f"in:{i}": a for i, a in enumerate(tensors)}
        if node.op == "call_module":
            mod = self.gm.get_submodule(node.target)
            cls_path = f"torch.nn.{type(mod).__name__}"
            from dlci.instance.recipe import try_resolve
            if try_resolve(cls_path) is not type(mod):
                return None
            ctor = constructor_kwargs(mod)
            if ctor is None:
                return None
            for name, t in mod.state_dict().items():
                arrays[f"state:{name}"] = to_numpy(t, detach=True)
            call = {"kind": "torch_module", "cls": cls_path, "args": [], "kwargs": ctor,
                    "forward_args": args, "forward_kwargs": kwargs}
            params = dict(ctor)
        else:
            path = fn_path(node)
            if path is None:
                return None
            call = {"kind": "torch_fn", "fn": path, "args": args, "kwargs": kwargs}
            from dlci.instance.recipe import params_of
            params = params_of(args, kwargs)
        return Instance(op=self.op(k), framework="torch", call=call,
                        inputs=[TensorSpec.of(arrays[f"in:{i}"]) for i in range(len(tensors))], params=params,
                        origin=Origin(self.inst.origin.source, f"{self.inst.origin.test} node {node.name}",
                                      self.inst.origin.library),
                        seed=self.inst.seed, arrays=arrays)

    def _same_as_node(self, inst: Instance, k: int) -> bool:
        """The single-operator instance recomputes the node's value exactly (else it is not that node alone)."""
        from dlci.models.rebuild import torch_call
        from dlci.models import seed_all
        from dlci.models.convert import flatten_outputs
        module, tensors = torch_call(inst)
        seed_all(self.inst.seed)
        with self.torch.no_grad():
            got = flatten_outputs(module(*tensors))
        want = flatten_outputs(self.values()[self.nodes[k].name])
        return len(got) == len(want) and len(got) > 0 and all(
            a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
            for a, b in zip(got, want))

    # the conditioning check (dlci.localise): the float64 module with inputs and weights jittered
    def perturbed(self, i: int, members: int, rel: float, rng) -> list[np.ndarray]:
        from dlci.models.convert import flatten_outputs, np_to_torch
        torch = self.torch
        out = []
        for _ in range(members):
            m64 = copy.deepcopy(self.module).to(torch.float64)
            with torch.no_grad():
                for p in list(m64.parameters()) + list(m64.buffers()):
                    if p.is_floating_point():
                        p.mul_(1.0 + rel * torch.from_numpy(rng.uniform(-1.0, 1.0, tuple(p.shape))))
                xs = []
                for a in self.inst.input_arrays():
                    x = np_to_torch(a)
                    if x.is_floating_point():
                        x = x.to(torch.float64) * (1.0 + rel * torch.from_numpy(rng.uniform(-1.0, 1.0, a.shape)))
                    xs.append(x)
                outs = flatten_outputs(m64(*xs))
            if i < len(outs):
                out.append(outs[i])
        return out


def node_op(gm, node) -> str:
    """The operator id of an FX node: ``nn::Conv2d`` (a module), ``aten::avg_pool2d`` (a function or method)."""
    if node.op == "call_module":
        return f"nn::{type(gm.get_submodule(node.target)).__name__}"
    if node.op == "call_method":
        return f"aten::{node.target}"
    name = getattr(node.target, "__name__", str(node.target)).strip("_")
    if getattr(node.target, "__module__", None) in ("_operator", "operator"):
        name = _PY_OPERATORS.get(name, name)
    return f"aten::{name}"


def fn_path(node) -> str | None:
    """A dotted path that imports the node's callable (``torch.nn.functional.avg_pool2d``, ``torch.Tensor.view``,
    ``operator.add``), checked to resolve to that very object."""
    from dlci.instance.recipe import try_resolve
    if node.op == "call_method":
        path = f"torch.Tensor.{node.target}"
        return path if try_resolve(path) is not None else None
    fn = node.target
    name = getattr(fn, "__name__", None)
    if not name:
        return None
    for mod in (getattr(fn, "__module__", None), "torch", "torch.nn.functional", "torch.special", "torch.linalg",
                "torch.fft", "operator"):
        if not mod or mod.startswith("torch._C"):
            continue
        path = f"{'operator' if mod == '_operator' else mod}.{name}"
        if try_resolve(path) is fn:
            return path
    return None


def constructor_kwargs(mod) -> dict | None:
    """Keyword arguments that rebuild a standard ``torch.nn`` module, read from the attributes its constructor
    stores under the same names (a ``bias`` weight stands for ``bias=True``); None when a parameter is not stored
    (the caller also checks the rebuilt module computes the same). Values equal to the default are left out."""
    import torch
    try:
        sig = inspect.signature(type(mod).__init__)
    except (TypeError, ValueError):
        return None
    out = {}
    for p in sig.parameters.values():
        if p.name in _CTOR_SKIP or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if not hasattr(mod, p.name):
            if p.default is p.empty:
                return None
            continue
        v = getattr(mod, p.name)
        if p.name == "bias" and (v is None or isinstance(v, torch.Tensor)):
            v = v is not None
        elif isinstance(v, torch.Tensor) or callable(v) and not isinstance(v, (bool, int, float, str)):
            if p.default is p.empty:
                return None
            continue
        try:
            enc = encode_value(v, lambda t: (_ for _ in ()).throw(TypeError("tensor")))
        except TypeError:
            if p.default is p.empty:
                return None
            continue
        if p.default is not p.empty:
            try:
                if enc == encode_value(p.default, lambda t: 0) or v == p.default:
                    continue
            except (TypeError, ValueError, RuntimeError):
                pass
        out[p.name] = enc
    return out
