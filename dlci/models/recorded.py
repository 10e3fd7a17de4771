"""Whole torch models recorded at a frontend's entry point while a repository's own tests ran (dlci.sources.repo_tests),
as two recipes that rebuild exactly what the test handed to the importer:

- ``torch_exported``: an ``ExportedProgram`` (what ``from_exported_program(ep)`` took). Its graph is kept as
  torch.export's own JSON serialisation (array ``program``, uint8), its parameters and buffers as ``state:<name>``,
  its lifted tensor constants as ``const:<name>``, its example inputs as the instance's inputs. It is rebuilt with
  torch's deserializer fed with tensors made here from those arrays: nothing is unpickled (``torch.export.load``
  falls back to ``torch.load(weights_only=False)``), and the JSON is checked first (:func:`check_program`), since a
  pull request's tests wrote it: every call target an ATen/prims overload or a symbolic-shape helper, every symbolic
  expression (torch hands them to ``sympy.sympify``, which evaluates Python) made of sympy's arithmetic only, no
  custom objects, and the program's guard code (which torch compiles into ``ep.module()``) dropped.
- ``torch_fx``: a ``torch.fx.GraphModule`` (what ``from_fx(gm, input_info)`` took): its nodes as JSON in
  ``call["graph"]`` (call targets as dotted paths, tensor methods by name), its leaf modules as ``torch_module``
  recipes in ``call["modules"]`` with their weights as ``state:<path>.<name>``, its tensor attributes as
  ``attr:<path>``. Rebuilt node by node into the same graph (:func:`check_fx` first: every target a torch function,
  a torch.nn module, a pure operator-module function, a tensor method).

The eager reference is the rebuilt program itself (``ep.module()``, the GraphModule), which is what the test's model
computes. Both run alone, never packed (dlci.models.pack): the recorded program is the test.
"""
from __future__ import annotations

import json
import re
import tokenize
from io import StringIO
from typing import Any

import numpy as np

from dlci.instance import Instance, Unencodable, decode_value, encode_value, to_numpy

EXPORTED = "torch_exported"
FX = "torch_fx"
KINDS = (EXPORTED, FX)
MAX_ELEMENTS = 4_000_000  # weights and inputs of one recorded model, all together


class UntrustedProgram(ValueError):
    """A recorded program names something that is not a framework operator, or holds code: it is not rebuilt."""


# -- what a recorded program may name ---------------------------------------------------------------------------------

_ATEN_TARGET = re.compile(r"torch\.ops\.(aten|prims)\.[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*")
# pure functions of Python's operator module (FX records Python operators on tensors and sizes with them)
OPERATOR_FUNCS = frozenset({
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "invert", "matmul", "eq", "ne",
    "lt", "le", "gt", "ge", "getitem", "and_", "or_", "xor", "not_", "lshift", "rshift", "iadd", "isub", "imul",
    "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "contains", "is_", "is_not", "truth", "concat"})
_MATH_FUNCS = frozenset({"ceil", "floor", "trunc", "sqrt", "log2", "exp", "log"})
_SYM_FUNCS = frozenset({"sym_float", "sym_int", "sym_max", "sym_min", "sym_not", "sym_ite", "sym_sqrt", "sym_sum",
                        "_sym_sqrt"})
# what sympy expressions of a program's symbolic shapes are made of (torch.utils._sympy.functions and sympy's core)
_SYMPY_NAMES = frozenset({
    "Symbol", "Integer", "Rational", "Float", "Mul", "Add", "Pow", "Mod", "FloorDiv", "CeilDiv", "PythonMod",
    "CleanDiv", "ModularIndexing", "Max", "Min", "ToFloat", "TruncToInt", "TruncToFloat", "IntTrueDiv",
    "FloatTrueDiv", "FloorToInt", "CeilToInt", "RoundToInt", "RoundDecimal", "PowByNatural", "FloatPow", "LShift",
    "RShift", "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or", "Identity", "OpaqueUnaryFn_sqrt", "floor", "ceiling",
    "Abs", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "StrictLessThan", "LessThan", "StrictGreaterThan", "GreaterThan",
    "And", "Or", "Not", "Piecewise", "ExprCondPair", "True", "False", "true", "false", "oo", "zoo", "nan", "S",
    "Half", "One", "Zero", "NegativeOne", "Infinity", "NegativeInfinity", "positive", "negative", "integer", "real",
    "nonnegative", "nonpositive", "finite", "infinite", "even", "odd", "zero", "nonzero", "prime", "composite",
    "rational", "commutative"})
_SYMPY_OPS = frozenset({"(", ")", ",", "=", "+", "-", "*", "/", "**", "%", "//"})
_SYMBOL_LITERAL = re.compile(r"['\"][a-z]+[0-9]+['\"]")
_KEPT_METADATA = ("stack_trace", "nn_module_stack", "torch_fn")  # the rest resolves names or is not needed


def check_target(target: str) -> None:
    """A call target of a serialised exported program: an ATen/prims overload or a symbolic-shape helper."""
    if not isinstance(target, str):
        raise UntrustedProgram("a call target that is not a name")
    if _ATEN_TARGET.fullmatch(target):
        return
    module, _, name = target.rpartition(".")
    if (module in ("_operator", "operator") and name in OPERATOR_FUNCS) or (module == "math" and name in _MATH_FUNCS) \
            or (module == "torch" and name in _SYM_FUNCS):
        return
    raise UntrustedProgram(f"a recorded program calls {target[:120]!r}, not an ATen operator")


def check_expression(text: str) -> None:
    """A symbolic expression (``Mul(Integer(2), Symbol('s77', positive=True, integer=True))``): sympy arithmetic on
    named symbols only, no attribute access, subscripts or other names (sympify evaluates it as Python)."""
    if not isinstance(text, str) or len(text) > 4000:
        raise UntrustedProgram("a symbolic expression that is not a short string")
    try:
        tokens = list(tokenize.generate_tokens(StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        raise UntrustedProgram(f"a symbolic expression that does not parse: {text[:80]!r}") from None
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.INDENT, tokenize.DEDENT):
            continue
        if tok.type == tokenize.NUMBER and re.fullmatch(r"[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?", tok.string):
            continue
        if tok.type == tokenize.NAME and (tok.string in _SYMPY_NAMES or re.fullmatch(r"[a-z]+[0-9]+", tok.string)):
            continue
        if tok.type == tokenize.OP and tok.string in _SYMPY_OPS:
            continue
        if tok.type == tokenize.STRING and _SYMBOL_LITERAL.fullmatch(tok.string):
            continue
        raise UntrustedProgram(f"a symbolic expression holds {tok.string[:40]!r}: {text[:80]!r}")


def check_program(program: dict) -> dict:
    """The serialised program, checked (raises :class:`UntrustedProgram`) and made inert: its guard code and the
    metadata that resolves names dropped. Returns the cleaned JSON object."""
    if not isinstance(program, dict) or "graph_module" not in program:
        raise UntrustedProgram("not a serialised exported program")

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            if "as_custom_obj" in o and o["as_custom_obj"] is not None:
                raise UntrustedProgram("a recorded program holds a custom (pickled) object")
            if isinstance(o.get("target"), str) and "inputs" in o:
                check_target(o["target"])
                meta = o.get("metadata")
                if isinstance(meta, dict):
                    o["metadata"] = {k: v for k, v in meta.items() if k in _KEPT_METADATA}
            if o.get("as_operator") is not None:
                check_target(o["as_operator"])
            if "expr_str" in o:
                check_expression(o["expr_str"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(program)
    for key in program.get("range_constraints") or {}:
        check_expression(key)
    program["guards_code"] = []  # compiled into ep.module() as Python: never from a recording
    return program


# -- recording (in the process that ran the test) ---------------------------------------------------------------------

def _encode_tensors(named: dict, prefix: str, arrays: dict) -> None:
    for name, t in named.items():
        arrays[f"{prefix}:{name}"] = to_numpy(t, detach=True)


def _size(arrays: dict) -> int:
    return sum(int(np.asarray(a).size) for k, a in arrays.items() if k != "program")


def exported_record(ep) -> tuple[dict, dict[str, np.ndarray]]:
    """``(call, arrays)`` of an ExportedProgram; raises :class:`Unencodable` with a reason when it cannot be held (a
    non-tensor or nested example input, a custom object, an unsupported dtype, too large)."""
    import torch
    from torch._export.serde.serialize import serialize
    example = getattr(ep, "example_inputs", None)
    if not example:
        raise Unencodable("no-example-inputs")
    args, kwargs = example
    if kwargs or not args or not all(type(a) is torch.Tensor for a in args):
        raise Unencodable("nested-example-inputs")
    if any(not isinstance(v, torch.Tensor) for v in ep.constants.values()):
        raise Unencodable("custom-object")
    arrays: dict[str, np.ndarray] = {}
    for i, a in enumerate(args):
        arrays[f"in:{i}"] = to_numpy(a, detach=True)
    _encode_tensors(dict(ep.state_dict), "state", arrays)
    _encode_tensors(dict(ep.constants), "const", arrays)
    if _size(arrays) > MAX_ELEMENTS:
        raise Unencodable("too-large")
    try:
        art = serialize(ep, serialize_state_dict=False, serialize_constants=False, serialize_example_inputs=False)
    except Exception as e:  # noqa: BLE001 - what torch's own serialiser cannot write
        raise Unencodable(f"unserialisable:{type(e).__name__}") from e
    program = json.loads(art.exported_program)
    try:
        check_program(program)
    except UntrustedProgram as e:
        raise Unencodable("not-aten", str(e)) from e
    arrays["program"] = np.frombuffer(json.dumps(program).encode(), dtype=np.uint8).copy()
    params = dict(ep.named_parameters())
    call = {"kind": EXPORTED, "parameters": {n: bool(p.requires_grad) for n, p in params.items()},
            "dynamic": "recorded" if symbolic_inputs(ep) else None}
    if call["dynamic"] is None:
        del call["dynamic"]
    return call, arrays


def symbolic_inputs(ep) -> bool:
    """Whether any user input of the program has a symbolic dim (the program was exported with dynamic shapes)."""
    import torch
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and any(not isinstance(d, int) for d in val.shape):
            return True
    return False


def exported_targets(program: dict) -> list[str]:
    """The ATen overloads the serialised program calls (``upsample_nearest2d.vec``), in graph order."""
    out = []
    for node in (program.get("graph_module") or {}).get("graph", {}).get("nodes", []):
        target = node.get("target") if isinstance(node, dict) else None
        m = _ATEN_TARGET.fullmatch(target or "")
        if m:
            out.append(target.split(".", 3)[3])
    return out


# -- rebuilding (in the worker) ---------------------------------------------------------------------------------------

def program_json(inst: Instance) -> dict:
    """The instance's serialised program, checked and made inert."""
    try:
        program = json.loads(np.asarray(inst.arrays["program"]).tobytes().decode())
    except (KeyError, ValueError, UnicodeDecodeError) as e:
        raise UntrustedProgram(f"no readable program ({type(e).__name__})") from None
    return check_program(program)


def exported_program(inst: Instance):
    """The ExportedProgram the test handed to the importer, rebuilt from the instance (a new object each call)."""
    import torch
    from torch._export.serde.serialize import SerializedArtifact, deserialize
    program = program_json(inst)
    kinds = inst.call.get("parameters") or {}
    state = {}
    for key, a in inst.arrays.items():
        if key.startswith("state:"):
            name = key.split(":", 1)[1]
            t = torch.from_numpy(np.array(a, copy=True))
            state[name] = torch.nn.Parameter(t, requires_grad=bool(kinds[name])) if name in kinds else t
    consts = {k.split(":", 1)[1]: torch.from_numpy(np.array(a, copy=True))
              for k, a in inst.arrays.items() if k.startswith("const:")}
    inputs = tuple(torch.from_numpy(np.array(a, copy=True)) for a in inst.input_arrays())
    return deserialize(SerializedArtifact(json.dumps(program).encode(), state, consts, (inputs, {})))


def recorded_module(inst: Instance):
    """The instance's model as an eager torch module: ``ep.module()`` of a recorded exported program, the rebuilt
    GraphModule of a recorded FX graph."""
    if inst.call["kind"] == EXPORTED:
        return eager(exported_program(inst))
    return fx_module(inst)


def eager(ep):
    """``ep.module()`` with the module's own train()/eval() back (torch replaces them by methods that raise; the
    graph computes what it was exported in, whatever the flag says)."""
    module = ep.module()
    for name in ("train", "eval"):
        module.__dict__.pop(name, None)
    return module


# -- torch.fx graphs ---------------------------------------------------------------------------------------------------

# tensor attributes a graph may read through builtins.getattr (FX records ``x.shape`` so)
_GETATTR_NAMES = frozenset({"shape", "dtype", "device", "ndim", "T", "mT", "H", "mH", "real", "imag", "is_cuda",
                            "layout", "data"})
_METHODS_REFUSED = frozenset({"apply_", "map_", "map2_", "register_hook", "register_post_accumulate_grad_hook",
                              "backward", "numpy", "tolist", "storage", "untyped_storage", "share_memory_",
                              "set_", "pin_memory", "to_sparse", "__reduce__", "__reduce_ex__", "__setstate__",
                              "__getstate__", "__init__", "__new__", "__class__", "__dict__", "__del__",
                              "__setattr__", "__getattribute__", "__init_subclass__", "__subclasshook__"})


_OPS_PATH = re.compile(r"torch\.ops\.(aten|prims)\.[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def _check_torch_path(path: str) -> None:
    """A torch function's dotted path (checked by its spelling alone: nothing is imported)."""
    if _OPS_PATH.fullmatch(path):
        return
    parts = path.split(".")
    refused = {"os", "sys", "subprocess", "builtins", "importlib", "pickle", "marshal", "io", "pathlib", "hub",
               "package", "cpp_extension", "load", "save", "load_library", "compile", "jit", "library", "ops",
               "utils", "testing", "distributed", "multiprocessing", "serialization", "_C", "cuda", "backends",
               "autograd", "onnx", "export", "fx", "_dynamo", "_inductor", "compiler", "overrides", "classes",
               "_classes", "_library"}
    if parts[0] != "torch" or len(parts) < 2 or any(not p.isidentifier() or p in refused for p in parts[1:]) \
            or parts[-1].startswith("_") and not parts[-1].startswith("__") \
            or parts[1] == "nn" and (len(parts) != 4 or parts[2] != "functional"):
        raise UntrustedProgram(f"a recorded graph calls {path[:120]!r}, not a torch operator")


def check_fx(call: dict) -> None:
    """Every node of a recorded FX graph names a torch function, a pure operator-module function, a tensor method
    or a torch.nn module (raises :class:`UntrustedProgram`)."""
    graph, modules = call.get("graph"), call.get("modules") or {}
    if not isinstance(graph, list) or not isinstance(modules, dict):
        raise UntrustedProgram("not a recorded FX graph")
    for path, spec in modules.items():
        cls = spec.get("cls", "") if isinstance(spec, dict) else ""
        if not (isinstance(cls, str) and re.fullmatch(r"torch\.nn\.[A-Z][A-Za-z0-9_]*", cls)):
            raise UntrustedProgram(f"a recorded graph's module {str(path)[:60]} is {str(cls)[:80]!r}, not torch.nn's")
        if not all(p.isidentifier() or p.isdigit() for p in str(path).split(".")):
            raise UntrustedProgram(f"a module path {str(path)[:60]!r}")
    for node in graph:
        if not isinstance(node, dict):
            raise UntrustedProgram("a node that is not a mapping")
        op, target = node.get("op"), node.get("target")
        if op in ("placeholder", "output"):
            continue
        if op == "get_attr" or op == "call_module":
            if not isinstance(target, str) or not all(p.isidentifier() or p.isdigit() for p in target.split(".")):
                raise UntrustedProgram(f"an attribute path {str(target)[:60]!r}")
            if op == "call_module" and target not in modules:
                raise UntrustedProgram(f"a call of module {target[:60]!r} that the recording does not build")
            continue
        if op == "call_method":
            if not isinstance(target, str) or not target.isidentifier() or target in _METHODS_REFUSED \
                    or (target.startswith("_") and not (target.startswith("__") and target.endswith("__"))):
                raise UntrustedProgram(f"a recorded graph calls the method {str(target)[:60]!r}")
            continue
        if op != "call_function" or not isinstance(target, str):
            raise UntrustedProgram(f"a node of kind {str(op)[:30]!r}")
        module, _, name = target.rpartition(".")
        if module in ("_operator", "operator"):
            if name not in OPERATOR_FUNCS:
                raise UntrustedProgram(f"a recorded graph calls {target[:80]!r}")
        elif target == "builtins.getattr":
            args = node.get("args") or []
            if len(args) != 2 or args[1] not in _GETATTR_NAMES:
                raise UntrustedProgram("a recorded graph reads an attribute that is not a tensor's")
        elif module == "math":
            if name not in _MATH_FUNCS:
                raise UntrustedProgram(f"a recorded graph calls {target[:80]!r}")
        else:
            _check_torch_path(target)


def _fn_path(fn) -> str | None:
    """A dotted path that imports to exactly ``fn`` (an FX call_function target)."""
    import builtins
    import operator
    from dlci.instance.recipe import try_resolve
    if fn is getattr(builtins, "getattr"):
        return "builtins.getattr"
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return None
    if getattr(operator, name, None) is fn:
        return f"_operator.{name}"
    import math
    if getattr(math, name, None) is fn:
        return f"math.{name}"
    import torch
    if isinstance(fn, torch._ops.OpOverload):
        return f"torch.ops.{fn}"
    if isinstance(fn, torch._ops.OpOverloadPacket):
        return "torch.ops." + fn._qualified_op_name.replace("::", ".")
    mod, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    # the public spelling first (F.linear is torch._C._nn.linear)
    cands = [f"{ns}.{name}" for ns in ("torch.nn.functional", "torch", "torch.special", "torch.linalg", "torch.fft",
                                       "torch.Tensor")]
    if isinstance(mod, str) and isinstance(qual, str) and "<" not in qual:
        cands.append(f"{mod}.{qual}")
    for c in cands:
        if c.startswith("torch.") and try_resolve(c) is fn:
            return c
    return None


def _encode_arg(value, names: dict, slots: list) -> Any:
    """An FX node argument as JSON: other nodes ``{"$node": name}``, slices, Ellipsis, the rest as dlci encodes
    arguments (tensors held in the graph become arrays ``fxconst:<i>``)."""
    import torch.fx
    if isinstance(value, torch.fx.Node):
        return {"$node": names[value]}
    if isinstance(value, slice):
        return {"$slice": [_encode_arg(v, names, slots) for v in (value.start, value.stop, value.step)]}
    if value is Ellipsis:
        return {"$ellipsis": True}
    if isinstance(value, (list, tuple)):
        items = [_encode_arg(v, names, slots) for v in value]
        return items if isinstance(value, list) else {"$tuple": items}
    if isinstance(value, dict):
        return {"$dict": {str(k): _encode_arg(v, names, slots) for k, v in value.items()}}

    def slot(t):
        slots.append(to_numpy(t, detach=True))
        return len(slots) - 1
    try:
        return encode_value(value, slot)
    except TypeError as e:
        raise Unencodable("unencodable-arg", str(e)) from e


def _decode_arg(value, nodes: dict, consts: list) -> Any:
    if isinstance(value, list):
        return [_decode_arg(v, nodes, consts) for v in value]
    if isinstance(value, dict):
        if "$node" in value:
            return nodes[value["$node"]]
        if "$slice" in value:
            return slice(*(_decode_arg(v, nodes, consts) for v in value["$slice"]))
        if "$ellipsis" in value:
            return Ellipsis
        if "$tuple" in value:
            return tuple(_decode_arg(v, nodes, consts) for v in value["$tuple"])
        if "$dict" in value:
            return {k: _decode_arg(v, nodes, consts) for k, v in value["$dict"].items()}
        if "$t" in value:
            return consts[value["$t"]]
    return decode_value(value, consts)


def fx_record(gm, input_info, constructor) -> tuple[dict, dict[str, np.ndarray], list[np.ndarray]]:
    """``(call, arrays, inputs)`` of a GraphModule handed to ``from_fx(gm, input_info)``; ``constructor(module)``:
    the ``(args, kwargs)`` a leaf module was built with, or None. Inputs are drawn from ``input_info`` (seeded by
    the graph). Raises :class:`Unencodable` with a reason."""
    import hashlib
    import torch
    names = {n: n.name for n in gm.graph.nodes}
    nodes, modules, arrays, slots = [], {}, {}, []
    for n in gm.graph.nodes:
        entry: dict[str, Any] = {"op": n.op, "name": n.name}
        if n.op == "placeholder":
            entry["target"] = str(n.target)
        elif n.op == "output":
            entry["args"] = _encode_arg(n.args[0], names, slots)
        elif n.op == "get_attr":
            value = _attr(gm, n.target)
            if not isinstance(value, torch.Tensor):
                raise Unencodable("non-tensor-attribute")
            entry["target"] = n.target
            arrays[f"attr:{n.target}"] = to_numpy(value, detach=True)
        else:
            if n.op == "call_function":
                path = _fn_path(n.target)
                if path is None:
                    raise Unencodable("unresolvable-fn", getattr(n.target, "__name__", str(n.target)))
                entry["target"] = path
            elif n.op == "call_module":
                entry["target"] = n.target
                if n.target not in modules:
                    sub = gm.get_submodule(n.target)
                    cls = type(sub)
                    if not cls.__module__.startswith("torch.nn.") or getattr(torch.nn, cls.__name__, None) is not cls:
                        raise Unencodable("non-builtin-module", cls.__name__)
                    ctor = constructor(sub)
                    if ctor is None:
                        raise Unencodable("unknown-constructor", cls.__name__)
                    cslots: list = []
                    cargs = [_encode_arg(a, names, cslots) for a in ctor[0]]
                    ckw = {k: _encode_arg(v, names, cslots) for k, v in ctor[1].items()}
                    if cslots:
                        raise Unencodable("tensor-in-constructor")
                    modules[n.target] = {"cls": f"torch.nn.{cls.__name__}", "args": cargs, "kwargs": ckw}
                    for k, v in sub.state_dict().items():
                        arrays[f"state:{n.target}.{k}"] = to_numpy(v, detach=True)
            else:
                entry["target"] = str(n.target)
            entry["args"] = _encode_arg(list(n.args), names, slots)
            entry["kwargs"] = _encode_arg(dict(n.kwargs), names, slots)["$dict"]
        nodes.append(entry)
    for i, a in enumerate(slots):
        arrays[f"fxconst:{i}"] = a
    call = {"kind": FX, "graph": nodes, "modules": modules}
    try:
        check_fx(call)
    except UntrustedProgram as e:
        raise Unencodable("not-torch", str(e)) from e
    seed = int.from_bytes(hashlib.sha1(json.dumps(call, sort_keys=True).encode()).digest()[:4], "little")
    inputs = draw_inputs([(list(s), str(d)) for s, d in input_info], seed)
    if len(inputs) != sum(1 for n in nodes if n["op"] == "placeholder"):
        raise Unencodable("input-info-mismatch")
    if _size(arrays) + sum(a.size for a in inputs) > MAX_ELEMENTS:
        raise Unencodable("too-large")
    return call, arrays, inputs


def _attr(root, path: str):
    obj = root
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


def draw_inputs(info: list[tuple[list, str]], seed: int, rng: np.random.Generator | None = None) -> list[np.ndarray]:
    """Seeded inputs of the given shapes and dtypes: floats standard normal, integers in [0, 4), booleans even
    (``rng``: drawn from it instead, going on where its caller is)."""
    rng = np.random.default_rng(seed) if rng is None else rng
    out = []
    for shape, dtype in info:
        dt = np.dtype(str(dtype).replace("torch.", ""))
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt.kind in "iu":
            out.append(rng.integers(0, 4, shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.random(shape) < 0.5)
        else:
            raise Unencodable(f"unsupported-dtype:{dt}")
    return out


def fx_module(inst: Instance):
    """The recorded GraphModule, rebuilt: the same nodes, its leaf modules constructed and given their weights."""
    import torch
    import torch.fx
    from dlci.instance.recipe import resolve
    call = inst.call
    check_fx(call)
    root = torch.nn.Module()
    for path, spec in call["modules"].items():
        module = resolve(spec["cls"])(*decode_value(spec.get("args", []), []),
                                      **{k: decode_value(v, []) for k, v in spec.get("kwargs", {}).items()})
        prefix = "state:" + path + "."
        weights = {k[len(prefix):]: torch.from_numpy(np.array(v, copy=True))
                   for k, v in inst.arrays.items() if k.startswith(prefix)}
        module.load_state_dict(weights, strict=True)  # what the test's module held, every entry of it
        _put(root, path, module)
    for key, a in inst.arrays.items():
        if key.startswith("attr:"):
            path = key.split(":", 1)[1]
            owner, _, leaf = path.rpartition(".")
            parent = _owner(root, owner)
            parent.register_buffer(leaf, torch.from_numpy(np.array(a, copy=True)))
    consts = [torch.from_numpy(np.array(inst.arrays[f"fxconst:{i}"], copy=True))
              for i in range(sum(1 for k in inst.arrays if k.startswith("fxconst:")))]
    graph = torch.fx.Graph()
    nodes: dict[str, Any] = {}
    for entry in call["graph"]:
        op, name = entry["op"], entry["name"]
        if op == "placeholder":
            nodes[name] = graph.placeholder(entry["target"])
        elif op == "output":
            graph.output(_decode_arg(entry["args"], nodes, consts))
        elif op == "get_attr":
            nodes[name] = graph.get_attr(entry["target"])
        else:
            args = tuple(_decode_arg(entry.get("args", []), nodes, consts))
            kwargs = _decode_arg({"$dict": entry.get("kwargs", {})}, nodes, consts)
            if op == "call_function":
                target = getattr if entry["target"] == "builtins.getattr" else resolve(entry["target"])
                nodes[name] = graph.call_function(target, args, kwargs)
            elif op == "call_method":
                nodes[name] = graph.call_method(entry["target"], args, kwargs)
            else:
                nodes[name] = graph.call_module(entry["target"], args, kwargs)
    graph.lint()
    gm = torch.fx.GraphModule(root, graph)
    return gm.eval()


def _owner(root, path: str):
    import torch
    obj = root
    for p in [x for x in path.split(".") if x]:
        if not hasattr(obj, p):
            obj.add_module(p, torch.nn.Module())
        obj = getattr(obj, p)
    return obj


def _put(root, path: str, module) -> None:
    owner, _, leaf = path.rpartition(".")
    _owner(root, owner).add_module(leaf, module)


def fx_input_info(inst: Instance) -> list[tuple[list[int], str]]:
    """What ``from_fx`` takes besides the graph: each input's shape and dtype."""
    return [(list(a.shape), str(a.dtype)) for a in inst.input_arrays()]


def call_targets(inst: Instance) -> list[str]:
    """What a recorded program calls, as operator names the profiles' vocabularies read: ATen overloads of an
    exported program (``upsample_nearest2d.vec``), torch functions, methods and module classes of an FX graph."""
    if inst.call.get("kind") == EXPORTED:
        try:
            return exported_targets(program_json(inst))
        except UntrustedProgram:
            return []
    out = []
    for node in inst.call.get("graph") or []:
        if node.get("op") == "call_module":
            spec = (inst.call.get("modules") or {}).get(node.get("target"), {})
            out.append(spec.get("cls", ""))
        elif node.get("op") in ("call_function", "call_method"):
            out.append(str(node.get("target")))
    return [t for t in out if t]
