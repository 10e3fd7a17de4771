"""PyTorch equivalence rules: for one operator instance, two graphs that must agree (see dlci.rules.base).

Each rule's ``code`` is self-contained (it is pasted into the finding's reproducer): the shared helpers below are
part of it. Applicability comes from metadata (OpInfo / ModuleInfo attributes, aten operator tags, signatures, the
documentation's Shape sections); where the rule's own code derives the applicable form from the documentation
(batch dims, time-major layout, dimension lifting), ``applies`` runs that same derivation through the rule's
namespace, so the planner and the reproducer can never disagree.

No rule for two EAGLE categories, because PyTorch lacks the feature:
  - separable (5): PyTorch has no separable-convolution API (only grouped conv, covered by ``torch.depthwise``);
  - codec (13): torch ships no image codec (torchvision is not part of the stack).
"""
from __future__ import annotations

from dlci.instance import Instance
from dlci.rules import register
from dlci.rules import _torch_meta as meta
from dlci.rules.base import Rule

# -- code shared by the rules (pasted into every reproducer) ---------------------------------------------------------

COMMON = r'''
import ast
import importlib
import inspect
import itertools
import math
import re

import torch.nn.functional as F


def na(reason):
    """This rule does not cover the instance (the test counts as unsupported)."""
    raise NotImplementedError("not applicable: " + reason)


def dec(v, ts):
    """An encoded argument of CALL as a Python value (tensors taken from ts)."""
    if isinstance(v, list):
        return [dec(x, ts) for x in v]
    if not isinstance(v, dict):
        return v
    if "$t" in v:
        return ts[v["$t"]]
    if "$float" in v:
        return float(v["$float"])
    if "$tuple" in v:
        return tuple(dec(x, ts) for x in v["$tuple"])
    if "$dict" in v:
        return {k: dec(x, ts) for k, x in v["$dict"].items()}
    if "$dtype" in v:
        return getattr(torch, v["$dtype"])
    if "$torch" in v:
        return getattr(torch, v["$torch"].split(".", 1)[1])
    if "$device" in v:
        return torch.device(v["$device"])
    if "$complex" in v:
        return complex(*(dec(x, ts) for x in v["$complex"]))
    raise ValueError(f"unknown encoded value {v!r}")


def resolve(path):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def param_names(obj):
    """Parameter names: the signature, else the call line the docstring opens with (torch builtins)."""
    try:
        ps = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        if not any(p.kind is p.VAR_POSITIONAL for p in ps):
            return [p.name for p in ps if p.kind is not p.VAR_KEYWORD]
    except (TypeError, ValueError):
        pass
    first = next((ln.strip() for ln in (obj.__doc__ or "").splitlines() if ln.strip()), "")
    m = re.match(r"^[\w.]+\((.*)\)", first)
    inner = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", "", m.group(1)) if m else ""
    return [re.match(r"\s*\**(\w+)", p).group(1) for p in inner.split(",") if re.match(r"\s*\**\w", p)]


def defaults(obj):
    """Parameter defaults: the signature's, else the ``name=value`` parts of the docstring's call line."""
    try:
        ps = inspect.signature(obj).parameters.values()
        if not any(p.kind is p.VAR_POSITIONAL for p in ps):
            return {p.name: p.default for p in ps if p.default is not p.empty}
    except (TypeError, ValueError):
        pass
    first = next((ln.strip() for ln in (obj.__doc__ or "").splitlines() if ln.strip()), "")
    out = {}
    for name, value in re.findall(r"(\w+)\s*=\s*([^,()]+|\([^()]*\))", first):
        try:
            out[name] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            pass
    return out


def is_fn():
    return CALL["kind"] == "torch_fn"


def encoded_call():
    """(callable, {parameter: encoded argument}): the function's arguments or the module constructor's, by name."""
    obj = resolve(CALL["fn"] if is_fn() else CALL["cls"])
    names = param_names(obj)
    args = CALL.get("args", [])
    if len(args) > len(names):
        na("more positional arguments than documented parameters")
    d = dict(zip(names, args))
    d.update(CALL.get("kwargs", {}))
    return obj, d


def the_call(ts):
    """Like encoded_call, with the arguments decoded (tensors from ts)."""
    obj, d = encoded_call()
    return obj, {k: dec(v, ts) for k, v in d.items()}


def forward_args(ts):
    return dec(CALL.get("forward_args", []), ts), {k: dec(v, ts) for k, v in CALL.get("forward_kwargs", {}).items()}


def forward_slots():
    """Module instances: forward parameter name -> input index, for the tensors passed to forward."""
    names = param_names(resolve(CALL["cls"]).forward)
    d = dict(zip(names, CALL.get("forward_args", [])))
    d.update(CALL.get("forward_kwargs", {}))
    return {k: v["$t"] for k, v in d.items() if isinstance(v, dict) and "$t" in v}


def state(dtype=None):
    """The module's weights (torch_module instances), in float64 when dtype says so."""
    out = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in STATE.items()}
    if dtype == "float64":
        out = {k: v.double() if v.is_floating_point() else v for k, v in out.items()}
    return out


def make(cls, kwargs, weights, dtype=None):
    """A module of class cls built from constructor arguments, given weights, in eval mode."""
    torch.manual_seed(0)
    m = cls(**kwargs)
    m.load_state_dict(weights)
    m = m.eval()
    return m.double() if dtype == "float64" else m


def plain(inputs, dtype=None):
    """The instance as it is (with the model in float64 when dtype says so; the inputs come widened)."""
    model = build_model()
    if dtype == "float64":
        model = model.double()
    with torch.no_grad():
        return flatten(model(*to_torch(inputs)))


def leaves(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in leaves(o)]
    return []


def tup(v, n):
    """A per-dimension setting as an n-tuple (one value, alone or in a 1-sequence, stands for every dim)."""
    if isinstance(v, (list, tuple)):
        return tuple(v) * n if len(v) == 1 else tuple(v)
    return (v,) * n
'''

DOCS = r'''

def split_top(text):
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "({[" and 1 or ch in ")}]" and -1 or 0
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def shape_doc(cls):
    """The class docstring's Shape section: entry name (lower case) -> shape alternatives (tuples of dim symbols),
    e.g. Conv2d: {"input": [("N", "C_{in}", "H_{in}", "W_{in}"), ("C_{in}", "H_{in}", "W_{in}")], ...}."""
    doc = inspect.getdoc(cls) or ""
    m = re.search(r"^Shape:\s*$(.*?)(?=^\S|\Z)", doc, re.M | re.S)
    out, name = {}, None
    for line in m.group(1).splitlines() if m else []:
        e = re.match(r"^\s*[-*]\s*(\w+)\s*:\s*(.*)$", line)
        if e:
            name, line = e.group(1).lower(), e.group(2)
            out[name] = []
        if name is None:
            continue
        for a, b in re.findall(r":math:`\(([^`]*)\)`|`\(([^`]*)\)`", line):
            out[name].append(tuple(d.strip() for d in split_top(a or b) if d.strip()))
    return out


def is_star(dim):
    return "*" in dim or "ast" in dim or dim == "..."


def module_forms(fname):
    """nn module classes documented as a function's module form: the same name up to case, underscores, a
    dimension suffix or a Loss suffix (conv2d -> Conv2d, batch_norm -> BatchNorm1d/2d/3d, mse_loss -> MSELoss)."""
    key = fname.replace("_", "").lower()
    out = []
    for c in vars(torch.nn).values():
        if isinstance(c, type) and issubclass(c, torch.nn.Module) and not c.__name__.startswith("Lazy"):
            n = c.__name__.lower()
            if n in (key, key + "loss") or re.sub(r"\dd$", "", n) == key:
                out.append(c)
    return out


def pointwise(op):
    """Whether an overload of the aten operator carries torch.Tag.pointwise (elementwise with broadcasting)."""
    packet = getattr(torch.ops.aten, op.split("::", 1)[1], None) if op.startswith("aten::") else None
    try:
        return packet is not None and any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())
    except Exception:
        return False
'''

BATCH = r'''

def form_of(alts, ndim):
    """"batch" when the documented form of this rank starts with the batch symbol N (or any leading dims *),
    "unbatched" when the fitting form lacks it, None when no documented form has this rank."""
    for alt in alts:
        fixed = [d for d in alt if not is_star(d)]
        if not (ndim >= len(fixed) if len(fixed) < len(alt) else ndim == len(alt)):
            continue
        first = alt[0] if alt else ""
        if first in ("N", "B", "minibatch") or first.startswith("N_"):
            return "batch"
        return "batch" if is_star(first) and ndim > len(fixed) else "unbatched"
    return None


def batch_slots(ts):
    """The inputs that carry the batch in dim 0 (split those; the others go whole to each sample).

    From metadata only: aten operators tagged pointwise split every input of the broadcast rank; otherwise the
    module's (or the function's module form's) documented Shape section, matched by parameter name, must give the
    tensor a form starting with N, and the parameters whose documented meaning reduces over dim 0 must not do so
    (dim, normalized_shape, reduction, batch statistics)."""
    shapes = [tuple(t.shape) for t in ts]
    if not shapes or not shapes[0]:
        na("input 0 has no dim 0")
    if pointwise(OP):
        rank = max(len(s) for s in shapes)
        full = [i for i, s in enumerate(shapes) if len(s) == rank]
        n = max(shapes[i][0] for i in full)
        if len(shapes[0]) != rank or shapes[0][0] != n or n < 2:
            na("input 0 does not carry a broadcast dim 0 of size >= 2")
        return [i for i in full if shapes[i][0] == n]
    if is_fn():
        fn, enc = encoded_call()
        classes = module_forms(CALL["fn"].rsplit(".", 1)[1])
        slots = {k: v["$t"] for k, v in enc.items() if isinstance(v, dict) and "$t" in v}
        known = {**defaults(fn), **{k: dec(v, ts) for k, v in enc.items()}}
        params = {k: known[k] for k in ("dim", "normalized_shape", "reduction", "training") if k in known}
        batch_stats = params.get("training") is True
    else:
        classes = [resolve(CALL["cls"])]
        slots = forward_slots()
        m = build_model().m
        params = {k: getattr(m, k) for k in ("dim", "normalized_shape", "reduction") if hasattr(m, k)}
        batch_stats = getattr(m, "running_mean", 0) is None
    docs = [d for d in (shape_doc(c) for c in classes) if d]
    if not docs:
        na("no documented Shape section")
    if batch_stats and any("batch statistics" in (inspect.getdoc(c) or "") for c in classes):
        na("normalizes with batch statistics (documented)")
    n, rank0 = shapes[0][0], len(shapes[0])
    if n < 2:
        na("batch of size < 2")
    if "dim" in params:
        d = params["dim"]
        if not isinstance(d, int) or d % max(rank0, 1) == 0:
            na(f"dim={d!r} is (or implicitly picks) dim 0")
    if "normalized_shape" in params:
        ns = params["normalized_shape"]
        if (len(ns) if isinstance(ns, (list, tuple, torch.Size)) else 1) >= rank0:
            na("normalized_shape covers dim 0")
    if params.get("reduction", "none") != "none":
        na(f"reduction={params['reduction']!r} reduces over the batch")
    split = []
    for name, slot in slots.items():
        keys = [name.lower() if name.lower() in d else "input" if slot == 0 and "input" in d else None for d in docs]
        if not any(keys):
            if slot != 0 and shapes[slot] == shapes[0]:
                na(f"{name} has the batch input's shape but no documented shape")
            continue  # not documented as data (weights, running stats): passed whole
        forms = {form_of(d[k], len(shapes[slot])) for d, k in zip(docs, keys) if k} - {None}
        if forms != {"batch"}:
            na(f"{name}: " + ("unbatched form" if forms else "no documented form of this rank"))
        if shapes[slot][0] != n:
            na(f"{name}: dim 0 is {shapes[slot][0]}, not the batch size {n}")
        split.append(slot)
    if 0 not in split:
        na("input 0 has no documented batch dim")
    return sorted(split)
'''

LAYOUT = r'''

def doc_entries(*objs):
    """name -> text of the ``name: ...`` / ``* **name**: ...`` / ``- **name** - ...`` entries of docstrings."""
    out = {}
    for obj in objs:
        name = None
        for line in (inspect.getdoc(obj) or "").splitlines():
            if not line.strip():
                name = None  # a blank line ends an entry (the next section may follow)
                continue
            m = re.match(r"^\s*(?:[-*]\s*)?(?:\*\*)?(\w+)(?:\*\*)?\s*(?::|\s-\s)\s*(.*)$", line)
            if m and (line.lstrip()[:1] in ("-", "*") or re.match(r"^\s*\w+:\s", line)):
                name = m.group(1)
                out[name] = out.get(name, "") + " " + m.group(2)
            elif name is not None:
                out[name] += " " + line.strip()
    return out


def sequence_layout(cls):
    """(documented entries, forward parameters whose documented shape depends on batch_first, output positions
    whose documented shape does): from the class docstring, the forward's, and the class it defers to."""
    docs = [cls, cls.forward]
    ref = re.search(r"see the docs in :class:`~?torch\.nn\.(\w+)`", inspect.getdoc(cls.forward) or "")
    if ref:
        docs.append(getattr(torch.nn, ref.group(1)).forward)
    entries = doc_entries(*docs)
    inputs = [n for n in param_names(cls.forward) if "batch_first" in entries.get(n, "")]
    outputs = ["output"]
    for obj in docs:
        m = re.search(r"^\s*Outputs:\s*(.*)$", inspect.getdoc(obj) or "", re.M)
        if m:
            tail = (inspect.getdoc(obj) or "")[m.end():]
            outputs = re.findall(r"\w+", m.group(1)) or re.findall(r"^\s*[-*]\s*\*\*(\w+)\*\*", tail, re.M)
            break
    return entries, inputs, [i for i, n in enumerate(outputs) if "batch_first" in entries.get(n, "")]
'''

CONV = r'''

def conv_parts(ts):
    """The instance's convolution: (callable, arguments by name, spatial rank, transposed?)."""
    obj, d = the_call(ts)
    names = param_names(obj)
    transposed = "output_padding" in names
    if is_fn():
        if not ({"weight", "groups"} <= set(names)):
            na("not a convolution (no weight/groups parameters)")
        nd = d["weight"].ndim - 2
    else:
        if not ({"in_channels", "kernel_size", "groups"} <= set(names)):
            na("not a convolution module (no in_channels/kernel_size/groups parameters)")
        nd = len(build_model().m.kernel_size)
    return obj, d, nd, transposed


def run_conv(obj, d, x_args, weights=None, dtype=None):
    """Call the convolution: a function with its arguments d, or a module of class obj built from constructor
    arguments d with the given weights, applied to the forward arguments."""
    with torch.no_grad():
        if is_fn():
            return obj(**d)
        m = make(obj, d, weights, dtype)
        a, k = x_args
        return m(*a, **k)
'''


def _code(*parts: str) -> str:
    return "\n".join(p.strip("\n") + "\n" for p in parts)


# -- applicability helpers (Python side) -----------------------------------------------------------------------------

def _needs_kind(kind: str):
    def check(inst: Instance) -> str | None:
        return None if inst.call.get("kind") == kind else f"{kind} instances only"
    return check


def _code_check(rule_name: str, func: str):
    """Applicability by the rule's own derivation: run ``func(tensors)`` of the rule's code on the instance."""
    def check(inst: Instance) -> str | None:
        import numpy as np
        from dlci import models
        from dlci.rules import get_rule
        from dlci.rules.runner import namespace
        with models.quiet():
            ns = namespace(inst, get_rule(rule_name))
            try:
                ns[func](ns["to_torch"]([np.array(x, copy=True) for x in ns["INPUTS"]]))
            except NotImplementedError as e:
                return str(e).replace("not applicable: ", "", 1)
        return None
    return check


def _all(*checks):
    def check(inst: Instance) -> str | None:
        for c in checks:
            reason = c(inst)
            if reason:
                return reason
        return None
    return check


def _opinfo_flag(flag: str, missing_ok: bool = True):
    def check(inst: Instance) -> str | None:
        info = meta.opinfo(inst)
        if info is None:
            return None if missing_ok else "no OpInfo for this instance"
        return None if getattr(info, flag, False) else f"OpInfo.{flag} is False"
    return check


def _float_input(inst: Instance) -> str | None:
    return None if any(s.dtype.startswith("float") for s in inst.inputs) else "no floating-point input"


def _first_input_tensor(inst: Instance) -> str | None:
    first = (inst.call.get("args") or [None])[0] if inst.call["kind"] == "torch_fn" else \
        (inst.call.get("forward_args") or [None])[0]
    return None if first == {"$t": 0} else "the first argument is not input 0"


# -- 1. optimization -------------------------------------------------------------------------------------------------

_COMPILE = _code(COMMON, r'''
import torch._dynamo


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    torch._dynamo.reset()  # no cache shared with an earlier test
    model = torch.compile(build_model(), backend="inductor", fullgraph=False)
    with torch.no_grad():
        return flatten(model(*to_torch(inputs)))
''')


def _compile_applies(inst: Instance) -> str | None:
    info = meta.opinfo(inst)
    if info is not None and getattr(info, "skip_correctness_check_compile_vs_eager", False):
        return "OpInfo.skip_correctness_check_compile_vs_eager: numerics documented to differ"
    return None


_SCRIPT = _code(COMMON, r'''

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


def scripted():
    """The scripted module (module instances) or a scripted function calling the operator (function instances)."""
    try:
        if not is_fn():
            return torch.jit.script(build_model().m)
        args = [ts_literal(a) for a in CALL.get("args", [])]
        args += [f"{k}={ts_literal(v)}" for k, v in CALL.get("kwargs", {}).items()]
        fn = CALL["fn"]
        call = f"{args[0]}.{fn.rsplit('.', 1)[1]}({', '.join(args[1:])})" if fn.startswith("torch.Tensor.") \
            else f"{fn}({', '.join(args)})"
        params = ", ".join(f"x{i}: torch.Tensor" for i in range(len(INPUTS)))
        return torch.jit.CompilationUnit(f"def fn({params}):\n    return {call}\n").fn
    except NotImplementedError:
        raise
    except Exception as e:  # TorchScript covers a subset of Python: its frontend's refusals are not bugs here
        raise RuntimeError(f"cannot script: {type(e).__name__}: {e}") from e


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    fn = scripted()
    ts = to_torch(inputs)
    with torch.no_grad():
        if is_fn():
            return flatten(fn(*ts))
        a, k = forward_args(ts)
        return flatten(fn(*a, **k))
''')

_TRACE = _code(COMMON, r'''

def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    with torch.no_grad():
        traced = torch.jit.trace(build_model(), tuple(to_torch(inputs)), check_trace=False)
        return flatten(traced(*to_torch(inputs)))
''')

_EXPORT = _code(COMMON, r'''

def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    ep = torch.export.export(build_model(), tuple(to_torch(inputs)))
    with torch.no_grad():
        return flatten(ep.module()(*to_torch(inputs)))
''')

# torch.export refusing a program (data-dependent shapes, dynamo's unsupported constructs) is a documented limit
_EXPORT_UNSUPPORTED = (r"torch\._dynamo\.exc\.(Unsupported|UserError)", r"^Unsupported:", r"^UserError:",
                       r"GuardOnDataDependentSymNode", r"[Dd]ata.dependent", r"Could not guard on",
                       r"Could not extract specialized integer", r"unbacked", r"non-tensor output",
                       r"not a valid output", r"^TorchRuntimeError: Dynamo failed to run FX node with fake tensors",
                       r"^(DataDependentOutputException|DynamicOutputShapeException):")

# -- 2. same padding -------------------------------------------------------------------------------------------------

_SAME = _code(COMMON, CONV, r'''

def same_pads(kernel, dilation):
    """F.pad amounts 'same' amounts to: dilation * (kernel - 1) in all, the odd one at the end (last dim first)."""
    pads = []
    for k, d in zip(reversed(kernel), reversed(dilation)):
        total = d * (k - 1)
        pads += [total // 2, total - total // 2]
    return pads


def graph_a(inputs, dtype=None):
    ts = to_torch(inputs)
    obj, d, nd, transposed = conv_parts(ts)
    d.update(stride=1, padding="same")  # 'same' is only defined for stride 1
    return flatten(run_conv(obj, d, forward_args(ts) if not is_fn() else None, None if is_fn() else state(dtype),
                            dtype))


def graph_b(inputs):
    ts = to_torch(inputs)
    obj, d, nd, transposed = conv_parts(ts)
    if is_fn():
        pads = same_pads(d["weight"].shape[2:], tup(d.get("dilation", 1), nd))
        d.update(input=F.pad(d["input"], pads), stride=1, padding=0)
        return flatten(run_conv(obj, d, None))
    m = build_model().m
    mode = {"zeros": "constant"}.get(m.padding_mode, m.padding_mode)
    d.update(stride=1, padding=0, padding_mode="zeros")
    a, k = forward_args(ts)
    x = F.pad(a[0], same_pads(m.kernel_size, m.dilation), mode=mode)
    return flatten(run_conv(obj, d, ([x] + list(a[1:]), k), state()))
''')


def _conv_like(inst: Instance) -> str | None:
    names = set(meta.param_names(meta.target(inst)))
    need = {"weight", "groups"} if inst.call["kind"] == "torch_fn" else {"in_channels", "kernel_size", "groups"}
    return None if need <= names else "not a convolution (signature has no weight/groups or kernel_size/groups)"


def _not_transposed(inst: Instance) -> str | None:
    return "transposed convolution" if "output_padding" in meta.param_names(meta.target(inst)) else None


def _string_padding(inst: Instance) -> str | None:
    return None if meta.accepts_string_padding(inst) else "padding does not take 'same' (signature/docs)"


# -- 3. dim lift -----------------------------------------------------------------------------------------------------

_LIFT = _code(COMMON, DOCS, r'''
# parameters given per spatial dimension, and their value for a new leading spatial dim of size 1
LIFT = {"kernel_size": 1, "stride": 1, "dilation": 1, "padding": 0, "output_padding": 0, "output_size": 1}


def lift_param(name, v, nd, pad_module):
    if v is None or isinstance(v, str) or (isinstance(v, (list, tuple)) and len(v) == 0):
        return v
    if pad_module and name == "padding":  # F.pad order: last dim first, so the new dim's pair goes at the end
        return tuple(v if isinstance(v, (list, tuple)) else [v] * (2 * nd)) + (0, 0)
    vals = list(v) if isinstance(v, (list, tuple)) else [v]
    if len(vals) == 1:
        vals = vals * nd  # one value stands for every spatial dim
    if len(vals) != nd:
        na(f"{name}={v!r} also sizes non-spatial dims")
    return tuple([LIFT[name]] + vals)


def lift_plan(ts):
    """(lifted callable, its arguments, nd, lifted module class or None): the (nd+1)-d form of the operator."""
    path = CALL["fn"] if is_fn() else CALL["cls"]
    m = re.search(r"([12])d$", path, re.I)
    if not m:
        na("not a 1-d/2-d operator name")
    nd = int(m.group(1))
    path2 = path[:-2] + f"{nd + 1}" + path[-1]
    try:
        obj2 = resolve(path2)
    except (ImportError, AttributeError):
        na(f"no {nd + 1}-d form")
    obj, d = the_call(ts)
    x0 = ts[0]
    cls, cls2 = (module_forms(path.rsplit(".", 1)[1]), module_forms(path2.rsplit(".", 1)[1])) if is_fn() \
        else ([obj], [obj2])
    ranks = {len(a) for c in cls for a in shape_doc(c).get("input", [])}
    ranks2 = {len(a) for c in cls2 for a in shape_doc(c).get("input", [])}
    if x0.ndim not in ranks or x0.ndim + 1 not in ranks2:
        na(f"a {x0.ndim}-d input has no documented {nd + 1}-d counterpart")
    pad_module = not is_fn() and (inspect.getdoc(obj) or "").startswith("Pads")
    for k, v in list(d.items()):
        if k in LIFT:
            d[k] = lift_param(k, v, nd, pad_module)
        elif is_fn() and isinstance(v, torch.Tensor) and v.ndim >= nd + 1:
            d[k] = v.unsqueeze(v.ndim - nd)
    return obj2, d, nd


def check(ts):
    lift_plan(ts)


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    ts = to_torch(inputs)
    obj2, d, nd = lift_plan(ts)
    with torch.no_grad():
        if is_fn():
            out = obj2(**d)
        else:
            torch.manual_seed(0)
            m2 = obj2(**d).eval()
            mine = m2.state_dict()
            m2.load_state_dict({k: v.unsqueeze(v.ndim - nd) if mine[k].ndim == v.ndim + 1 else v
                                for k, v in state().items()})
            a, k = forward_args([t.unsqueeze(t.ndim - nd) if t.ndim >= nd + 1 else t for t in ts])
            out = m2(*a, **k)
    # drop the new size-1 dim again: it sits right before the last nd dims
    return flatten([o.squeeze(o.ndim - nd - 1) if o.ndim >= nd + 2 and o.shape[o.ndim - nd - 1] == 1 else o
                    for o in leaves(out)])
''')

# -- 4. depthwise (grouped) ------------------------------------------------------------------------------------------

_DEPTHWISE = _code(COMMON, CONV, r'''

def grouped(ts, dtype=None):
    """(callable, arguments, weights, nd, groups): the instance's grouped conv, or, when it has groups=1, its
    depthwise variant (groups = in_channels, weight[:, :1]) where out_channels is a multiple of in_channels."""
    obj, d, nd, transposed = conv_parts(ts)
    weights = None if is_fn() else state(dtype)
    w = d["weight"] if is_fn() else weights["weight"]
    g = d.get("groups", 1)
    if g == 1:
        cin = w.shape[0] if transposed else w.shape[1]
        if transposed or cin < 2 or w.shape[0] % cin:
            na("groups=1 and no depthwise variant (transposed, one channel, or out_channels % in_channels)")
        g = cin
        if is_fn():
            d["weight"] = w[:, :1].contiguous()
        else:
            weights["weight"] = w[:, :1].contiguous()
        d["groups"] = g
    return obj, d, weights, nd, g


def check(ts):
    grouped(ts)


def graph_a(inputs, dtype=None):
    ts = to_torch(inputs)
    obj, d, weights, nd, g = grouped(ts, dtype)
    return flatten(run_conv(obj, d, None if is_fn() else forward_args(ts), weights, dtype))


def graph_b(inputs):
    """One plain (groups=1) convolution per group on its slice of channels, concatenated."""
    ts = to_torch(inputs)
    obj, d, weights, nd, g = grouped(ts)
    x = d["input"] if is_fn() else forward_args(ts)[0][0]
    cdim = x.ndim - nd - 1
    w = d["weight"] if is_fn() else weights["weight"]
    b = d.get("bias") if is_fn() else weights.get("bias")
    outs = []
    for j, (xj, wj) in enumerate(zip(x.chunk(g, cdim), w.chunk(g, 0))):
        bj = None if b is None else b.chunk(g, 0)[j]
        if is_fn():
            outs.append(run_conv(obj, {**d, "input": xj, "weight": wj, "bias": bj, "groups": 1}, None))
        else:
            kw = {**d, "in_channels": d["in_channels"] // g, "out_channels": d["out_channels"] // g, "groups": 1}
            wts = {"weight": wj} if bj is None else {"weight": wj, "bias": bj}
            outs.append(run_conv(obj, kw, ([xj], {}), wts))
    return flatten(torch.cat(outs, cdim))
''')

# -- 6. dilated ------------------------------------------------------------------------------------------------------

_DILATED = _code(COMMON, CONV, r'''

def dilated(ts, dtype=None):
    """(callable, arguments, weights, nd, dilation): the instance's conv with its dilation, or dilation 2 where the
    instance has none, when the input is large enough for it."""
    obj, d, nd, transposed = conv_parts(ts)
    weights = None if is_fn() else state(dtype)
    dil = tup(d.get("dilation", 1), nd)
    if all(v == 1 for v in dil):
        dil = (2,) * nd
        w = d["weight"] if is_fn() else weights["weight"]
        x = d["input"] if is_fn() else forward_args(ts)[0][0]
        pad = d.get("padding", 0)
        if not transposed and not isinstance(pad, str):
            for size, p, k in zip(x.shape[-nd:], tup(pad, nd), w.shape[2:]):
                if size + 2 * p < 2 * (k - 1) + 1:
                    na("input smaller than the kernel dilated by 2")
    d["dilation"] = dil
    return obj, d, weights, nd, dil


def check(ts):
    dilated(ts)


def zero_inserted(w, dil):
    """The kernel with dilation-1 zeros between its taps: a dilation-1 kernel of size dilation*(k-1)+1."""
    size = [d * (k - 1) + 1 for k, d in zip(w.shape[2:], dil)]
    out = w.new_zeros(tuple(w.shape[:2]) + tuple(size))
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dil)] = w
    return out


def graph_a(inputs, dtype=None):
    ts = to_torch(inputs)
    obj, d, weights, nd, dil = dilated(ts, dtype)
    return flatten(run_conv(obj, d, None if is_fn() else forward_args(ts), weights, dtype))


def graph_b(inputs):
    ts = to_torch(inputs)
    obj, d, weights, nd, dil = dilated(ts)
    if is_fn():
        d.update(weight=zero_inserted(d["weight"], dil), dilation=1)
        return flatten(run_conv(obj, d, None))
    weights["weight"] = zero_inserted(weights["weight"], dil)
    d.update(dilation=1, kernel_size=tuple(weights["weight"].shape[2:]))
    return flatten(run_conv(obj, d, forward_args(ts), weights))
''')

# -- 7. formula ------------------------------------------------------------------------------------------------------

_FORMULA = _code(COMMON, DOCS, r'''
# The formulas of the torch.nn / torch.nn.functional documentation (the "Math" / formula blocks of each page),
# keyed by the functional's name and reading its documented parameters. Computed in float64.

def sigmoid(x):
    return 1 / (1 + torch.exp(-x))


def softplus(x, beta=1.0, threshold=20.0):
    # Softplus(x) = 1/beta * log(1 + exp(beta * x)); "reverts to the linear function when input * beta > threshold"
    return torch.where(x * beta > threshold, x, torch.log1p(torch.exp(beta * x)) / beta)


def reduce(v, reduction="mean"):
    return v.mean() if reduction == "mean" else v.sum() if reduction == "sum" else v


def per_channel(v, x):
    """A per-channel vector broadcast along dim 1 of x."""
    return v.reshape([1, -1] + [1] * (x.ndim - 2))


def normalized(x, dims, eps):
    mean = x.mean(dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dims, keepdim=True)  # the biased estimator, as the docs say
    return (x - mean) / torch.sqrt(var + eps)


def affine(y, w, b, shape):
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def batch_norm(a):
    x, eps = a["input"], a.get("eps", 1e-5)
    if a.get("training", False) or a.get("running_mean") is None:
        y = normalized(x, [d for d in range(x.ndim) if d != 1], eps)
    else:
        y = (x - per_channel(a["running_mean"], x)) / torch.sqrt(per_channel(a["running_var"], x) + eps)
    return affine(y, a.get("weight"), a.get("bias"), [1, -1] + [1] * (x.ndim - 2))


def instance_norm(a):
    x, eps = a["input"], a.get("eps", 1e-5)
    if a.get("use_input_stats", True) or a.get("running_mean") is None:
        y = normalized(x, list(range(2, x.ndim)), eps)
    else:
        y = (x - per_channel(a["running_mean"], x)) / torch.sqrt(per_channel(a["running_var"], x) + eps)
    return affine(y, a.get("weight"), a.get("bias"), [1, -1] + [1] * (x.ndim - 2))


def layer_norm(a):
    x, shape = a["input"], list(a["normalized_shape"])
    y = normalized(x, list(range(x.ndim - len(shape), x.ndim)), a.get("eps", 1e-5))
    return affine(y, a.get("weight"), a.get("bias"), shape)


def group_norm(a):
    x, g = a["input"], a["num_groups"]
    y = normalized(x.reshape(x.shape[0], g, -1), [2], a.get("eps", 1e-5)).reshape(x.shape)
    return affine(y, a.get("weight"), a.get("bias"), [1, -1] + [1] * (x.ndim - 2))


def rms_norm(a):
    x, shape = a["input"], list(a["normalized_shape"])
    eps = a.get("eps")
    eps = torch.finfo(a["$dtype"]).eps if eps is None else eps  # "defaults to torch.finfo(x.dtype).eps"
    dims = list(range(x.ndim - len(shape), x.ndim))
    y = x / torch.sqrt((x * x).mean(dims, keepdim=True) + eps)
    return y if a.get("weight") is None else y * a["weight"]


def softmax(x, dim):
    if dim is None:
        na("implicit softmax dim (deprecated)")
    e = torch.exp(x - x.amax(dim, keepdim=True))  # shifting by the max leaves the formula's value unchanged
    return e / e.sum(dim, keepdim=True)


def log_softmax(x, dim):
    if dim is None:
        na("implicit softmax dim (deprecated)")
    z = x - x.amax(dim, keepdim=True)  # log(exp(x_i) / sum_j exp(x_j)), shifted by the max: the same value
    return z - torch.log(torch.exp(z).sum(dim, keepdim=True))


def cosine_similarity(a):
    x1, x2 = torch.broadcast_tensors(a["x1"], a["x2"])  # "dim refers to the dimension in this common shape"
    dim, eps = a.get("dim", 1), a.get("eps", 1e-8)
    n1 = torch.clamp_min(torch.linalg.vector_norm(x1, 2, dim), eps)
    n2 = torch.clamp_min(torch.linalg.vector_norm(x2, 2, dim), eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def unweighted(a):
    if a.get("weight") is not None:
        na("weighted loss")
    return a


def avg_pool(a, nd):
    """out = sum of the window / divisor: divisor_override if given, else the window size, counting the implicit
    zero padding when count_include_pad (but not the ceil_mode overhang past it), else only input elements."""
    x = a["input"]
    k = tup(a["kernel_size"], nd)
    s = a.get("stride")
    s = k if s is None or (isinstance(s, (list, tuple)) and not s) else tup(s, nd)
    p = tup(a.get("padding", 0), nd)
    ceil, cip, div = a.get("ceil_mode", False), a.get("count_include_pad", True), a.get("divisor_override")
    size = x.shape[x.ndim - nd:]
    out = []
    for n, kk, ss, pp in zip(size, k, s, p):
        o = (-(-(n + 2 * pp - kk) // ss) if ceil else (n + 2 * pp - kk) // ss) + 1
        if ceil and (o - 1) * ss >= n + pp:
            o -= 1  # "sliding windows that would start in the right padded region are ignored"
        out.append(o)
    y = x.new_zeros(tuple(x.shape[:x.ndim - nd]) + tuple(out))
    for idx in itertools.product(*(range(o) for o in out)):
        lo = [i * ss - pp for i, ss, pp in zip(idx, s, p)]
        hi = [l + kk for l, kk in zip(lo, k)]
        lo_in, hi_in = [max(l, 0) for l in lo], [min(h, n) for h, n in zip(hi, size)]
        window = x[(...,) + tuple(slice(l, h) for l, h in zip(lo_in, hi_in))]
        if div:
            count = div
        elif cip:
            count = math.prod(min(h, n + pp) - l for l, h, n, pp in zip(lo, hi, size, p))
        else:
            count = math.prod(h - l for l, h in zip(lo_in, hi_in))
        y[(...,) + idx] = window.sum(tuple(range(-nd, 0))) / count
    return y


def prelu(a):
    x, w = a["input"], a["weight"]
    w = w.reshape(()) if w.numel() == 1 else per_channel(w, x) if x.ndim >= 2 else w
    return torch.clamp_min(x, 0) + w * torch.clamp_max(x, 0)


def smooth_l1(d, beta):
    return torch.abs(d) - 0.5 * beta if beta == 0 else torch.where(torch.abs(d) < beta, 0.5 * d * d / beta,
                                                                    torch.abs(d) - 0.5 * beta)


def bce(a):
    x, y = a["input"], a["target"]
    # "our solution is that BCELoss clamps its log function outputs to be greater than or equal to -100"
    v = -(y * torch.clamp_min(torch.log(x), -100) + (1 - y) * torch.clamp_min(torch.log(1 - x), -100))
    return reduce(v if a.get("weight") is None else v * a["weight"], a.get("reduction", "mean"))


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

FORMULAS = {
    "relu": lambda a: torch.clamp_min(a["input"], 0),
    "relu6": lambda a: torch.clamp(a["input"], 0, 6),
    "hardtanh": lambda a: torch.clamp(a["input"], a.get("min_val", -1.0), a.get("max_val", 1.0)),
    "leaky_relu": lambda a: torch.clamp_min(a["input"], 0)
    + a.get("negative_slope", 0.01) * torch.clamp_max(a["input"], 0),
    "elu": lambda a: torch.where(a["input"] > 0, a["input"], a.get("alpha", 1.0) * (torch.exp(a["input"]) - 1)),
    "selu": lambda a: SELU_SCALE * (torch.clamp_min(a["input"], 0)
                                    + torch.clamp_max(SELU_ALPHA * (torch.exp(a["input"]) - 1), 0)),
    "celu": lambda a: torch.clamp_min(a["input"], 0) + torch.clamp_max(
        a.get("alpha", 1.0) * (torch.exp(a["input"] / a.get("alpha", 1.0)) - 1), 0),
    "gelu": lambda a: 0.5 * a["input"] * (1 + (
        torch.tanh(math.sqrt(2 / math.pi) * (a["input"] + 0.044715 * a["input"] ** 3))
        if a.get("approximate", "none") == "tanh" else torch.erf(a["input"] / math.sqrt(2)))),
    "silu": lambda a: a["input"] * sigmoid(a["input"]),
    "mish": lambda a: a["input"] * torch.tanh(torch.log1p(torch.exp(a["input"]))),
    "softplus": lambda a: softplus(a["input"], a.get("beta", 1.0), a.get("threshold", 20.0)),
    "hardswish": lambda a: a["input"] * torch.clamp(a["input"] + 3, 0, 6) / 6,
    "hardsigmoid": lambda a: torch.clamp(a["input"] / 6 + 0.5, 0, 1),
    # log(1 / (1 + exp(-x))), written min(x, 0) - log1p(exp(-|x|)) so that it does not overflow
    "logsigmoid": lambda a: torch.clamp_max(a["input"], 0) - torch.log1p(torch.exp(-torch.abs(a["input"]))),
    "sigmoid": lambda a: sigmoid(a["input"]),
    "softsign": lambda a: a["input"] / (1 + torch.abs(a["input"])),
    "tanhshrink": lambda a: a["input"] - torch.tanh(a["input"]),
    "softshrink": lambda a: torch.where(a["input"] > a.get("lambd", 0.5), a["input"] - a.get("lambd", 0.5),
                                        torch.where(a["input"] < -a.get("lambd", 0.5),
                                                    a["input"] + a.get("lambd", 0.5), 0.0)),
    "hardshrink": lambda a: torch.where(torch.abs(a["input"]) > a.get("lambd", 0.5), a["input"], 0.0),
    "threshold": lambda a: torch.where(a["input"] > a["threshold"], a["input"], float(a["value"])),
    "prelu": prelu,
    "glu": lambda a: (lambda h: h[0] * sigmoid(h[1]))(a["input"].chunk(2, a.get("dim", -1))),
    "softmax": lambda a: softmax(a["input"], a.get("dim")),
    "softmin": lambda a: softmax(-a["input"], a.get("dim")),
    "log_softmax": lambda a: log_softmax(a["input"], a.get("dim")),
    "batch_norm": batch_norm,
    "instance_norm": instance_norm,
    "layer_norm": layer_norm,
    "group_norm": group_norm,
    "rms_norm": rms_norm,
    "avg_pool1d": lambda a: avg_pool(a, 1),
    "avg_pool2d": lambda a: avg_pool(a, 2),
    "avg_pool3d": lambda a: avg_pool(a, 3),
    "normalize": lambda a: a["input"] / torch.clamp_min(
        torch.linalg.vector_norm(a["input"], a.get("p", 2.0), a.get("dim", 1), keepdim=True), a.get("eps", 1e-12)),
    "cosine_similarity": cosine_similarity,
    "logit": lambda a: (lambda z: torch.log(z / (1 - z)))(
        a["input"] if a.get("eps") is None else torch.clamp(a["input"], a["eps"], 1 - a["eps"])),
    "mse_loss": lambda a: reduce((unweighted(a)["input"] - a["target"]) ** 2, a.get("reduction", "mean")),
    "l1_loss": lambda a: reduce(torch.abs(unweighted(a)["input"] - a["target"]), a.get("reduction", "mean")),
    "smooth_l1_loss": lambda a: reduce(smooth_l1(a["input"] - a["target"], a.get("beta", 1.0)),
                                       a.get("reduction", "mean")),
    "huber_loss": lambda a: reduce(a.get("delta", 1.0) * smooth_l1(unweighted(a)["input"] - a["target"],
                                                                   a.get("delta", 1.0)),
                                   a.get("reduction", "mean")),
    "soft_margin_loss": lambda a: reduce(torch.log1p(torch.exp(-a["target"] * a["input"])),
                                         a.get("reduction", "mean")),
    "binary_cross_entropy": bce,
}
IGNORED = {"inplace", "_stacklevel", "momentum", "out"}  # no effect on the value in eval mode
LEGACY = {"size_average", "reduce"}  # deprecated spellings of reduction


def module_functional(cls):
    """The documented functional a module class calls: the first F.<name>(...) of its forward (or the self._helper
    methods it calls) that has a formula here."""
    seen = set()

    def scan(fn, depth):
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            return None
        for kind, name in re.findall(r"\b(F|self)\.(\w+)\(", src):
            if kind == "F" and name in FORMULAS:
                return name
            if kind == "self" and depth < 2 and name not in seen and callable(getattr(cls, name, None)):
                seen.add(name)
                found = scan(getattr(cls, name), depth + 1)
                if found:
                    return found
        return None
    return scan(cls.forward, 0)


DOCUMENTED = ("torch.nn.functional", "torch", "torch.special")  # the documented namespaces (not torch.masked)


def formula_call(ts):
    """(formula name, arguments by the functional's parameter names, unbatched?): for a module, its forward
    input is given a batch dim when the module's documented Shape says it is the unbatched form."""
    if is_fn():
        space, name = CALL["fn"].rsplit(".", 1)
        if name not in FORMULAS or space not in DOCUMENTED:
            na(f"no documented formula for {CALL['fn']}")
        _, d = the_call(ts)
        return name, d, False
    m = build_model().m
    name = module_functional(type(m))
    if name is None:
        na(f"{type(m).__name__} calls no functional with a documented formula")
    a, k = forward_args(ts)
    alts = shape_doc(type(m)).get("input", [])
    x = a[0]
    unbatched = isinstance(x, torch.Tensor) and any(
        len(alt) == x.ndim and alt[0] != "N" and not any(is_star(s) for s in alt) for alt in alts) and any(
        len(alt) == x.ndim + 1 and alt[0] == "N" for alt in alts)
    if unbatched:
        a = [x.unsqueeze(0)] + list(a[1:])
    names = param_names(getattr(F, name))
    d = dict(zip(names, a))
    d.update(k)
    for n in names[len(a):]:
        if n in ("training", "use_input_stats") and hasattr(m, "running_mean"):
            d[n] = m.training or m.running_mean is None  # the module's rule for using batch statistics
        elif n not in d and hasattr(m, n):
            d[n] = getattr(m, n)
    return name, d, unbatched


def check(ts):
    name, d, unbatched = formula_call(ts)
    if any(d.get(k) is not None for k in LEGACY):
        na("legacy size_average/reduce arguments")
    x = next(v for v in d.values() if isinstance(v, torch.Tensor))
    if not x.is_floating_point():
        na("integer input")
    if not x.numel():
        na("empty input")


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    ts = to_torch(inputs)
    check(ts)
    name, d, unbatched = formula_call(ts)
    x = next(v for v in d.values() if isinstance(v, torch.Tensor))
    out_dtype = d.get("dtype") or x.dtype
    a = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
         for k, v in d.items() if k not in IGNORED and k not in LEGACY}
    a["$dtype"] = x.dtype
    with torch.no_grad():
        y = FORMULAS[name](a).to(out_dtype)
    return flatten(y.squeeze(0) if unbatched else y)
''')

# -- 8. sparse -------------------------------------------------------------------------------------------------------

_SPARSE_CODE = r'''

def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    ts = to_torch(inputs)
    ts[0] = ts[0].{convert}()
    with torch.no_grad():
        out = leaves(build_model()(*ts))
    return [(o.to_dense() if o.layout != torch.strided else o).numpy() for o in out]
'''

# the op's sparse kernels do not cover this layout/rank/argument combination: a documented coverage gap
_SPARSE_UNSUPPORTED = (r"with arguments from the '(Sparse|SparseCsr)CPU' backend", r"not implemented for '?Sparse",
                       r"NotImplementedError", r"(sparse|Sparse)[^\n]*(not supported|unsupported|is not implemented)",
                       r"does not (have|support) (strides|is_contiguous)", r"expected .*strided",
                       r"to_sparse_csr[^\n]*(dimension|dim)", r"Sparse CSR tensors",
                       r"only supports strided", r"is_coalesced", r"unsupported layout", r"layout",
                       r"expects explicit mask", r"is unsupported", r"operands have incompatible sizes")


def _sparse_applies(flag: str):
    def check(inst: Instance) -> str | None:
        reason = _opinfo_flag(flag, missing_ok=False)(inst) or _first_input_tensor(inst)
        if reason:
            return reason
        if flag == "supports_sparse_csr" and len(inst.inputs[0].shape) < 2:
            return "CSR needs a 2-d (or batched) input"
        return None
    return check


# -- 9. image scale --------------------------------------------------------------------------------------------------

_IMAGE_SCALE = _code(COMMON, r'''
SCALE = 255.0  # normalized [0, 1] images vs 0-255 ones


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    ts = to_torch(inputs)
    ts[0] = ts[0] * SCALE
    with torch.no_grad():
        return flatten([o / SCALE for o in leaves(build_model()(*ts))])
''')

_F32_MAX = 3.4028234663852886e38


def _scale_range(inst: Instance) -> str | None:
    s = inst.inputs[0]
    if s.low is not None and max(abs(s.low), abs(s.high)) * 255 >= _F32_MAX:
        return "255 x overflows float32"
    return None


# -- 10. time major --------------------------------------------------------------------------------------------------

_TIME_MAJOR = _code(COMMON, LAYOUT, r'''

def layout_plan(ts):
    """(input slots to transpose, output positions to transpose back, batched?) from the documented shapes."""
    cls = resolve(CALL["cls"])
    if "batch_first" not in param_names(cls):
        na("the constructor has no batch_first parameter")
    entries, names, outs = sequence_layout(cls)
    slots = forward_slots()
    if not names or not outs or not any(n in slots for n in names):
        na("no input/output documented in terms of batch_first")
    for n in slots:
        if not re.search(r":math:`|`\(", entries.get(n, "")):
            na(f"the shape of {n!r} is not documented")
    seq = [slots[n] for n in names if n in slots]
    batched = ts[seq[0]].ndim == 3  # the docs' (L, N, H) / (N, L, H); (L, H) is unbatched
    return seq, outs, batched


def check(ts):
    layout_plan(ts)


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    """The other layout: batch_first flipped, same weights, sequence inputs and outputs transposed (dims 0 and 1).
    Unbatched inputs stay as they are: the docs say batch_first is ignored for them."""
    ts = to_torch(inputs)
    seq, outs, batched = layout_plan(ts)
    cls, kw = the_call(ts)
    batch_first = kw.get("batch_first", defaults(cls).get("batch_first", False))
    m = make(cls, {**kw, "batch_first": not batch_first}, build_model().m.state_dict())
    a, k = forward_args([t.transpose(0, 1) if batched and i in seq else t for i, t in enumerate(ts)])
    with torch.no_grad():
        out = leaves(m(*a, **k))
    return flatten([o.transpose(0, 1) if batched and i in outs else o for i, o in enumerate(out)])
''')

# -- 11 / 15. pipeline, batch, vmap ----------------------------------------------------------------------------------

_BATCH_HEAD = _code(COMMON, DOCS, BATCH, r'''

def check(ts):
    batch_slots(ts)


def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)
''')

_PIPELINE = _code(_BATCH_HEAD, r'''

def graph_b(inputs):
    """The batch inputs through DataLoader(TensorDataset(...), batch_size=ceil(N / 2)), outputs concatenated."""
    ts = to_torch(inputs)
    slots = batch_slots(ts)
    n = ts[slots[0]].shape[0]
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*[ts[i] for i in slots]),
                                         batch_size=(n + 1) // 2, shuffle=False)
    model, parts = build_model(), []
    with torch.no_grad():
        for batch in loader:
            full = list(ts)
            for i, b in zip(slots, batch):
                full[i] = b
            parts.append(leaves(model(*full)))
    return flatten([torch.cat(p) for p in zip(*parts)])
''')

_BATCH = _code(_BATCH_HEAD, r'''

def graph_b(inputs):
    """Each sample alone (a batch of one), outputs concatenated."""
    ts = to_torch(inputs)
    slots = batch_slots(ts)
    model, parts = build_model(), []
    with torch.no_grad():
        for j in range(ts[slots[0]].shape[0]):
            parts.append(leaves(model(*[t[j:j + 1] if i in slots else t for i, t in enumerate(ts)])))
    return flatten([torch.cat(p) for p in zip(*parts)])
''')

_VMAP = _code(_BATCH_HEAD, r'''

def graph_b(inputs):
    """torch.vmap over the batch: each mapped call sees one sample as a batch of one (N, ...) -> (N, 1, ...)."""
    ts = to_torch(inputs)
    slots = batch_slots(ts)
    model = build_model()
    xs = [t.unsqueeze(1) if i in slots else t for i, t in enumerate(ts)]
    dims = tuple(0 if i in slots else None for i in range(len(ts)))
    with torch.no_grad():
        out = torch.vmap(lambda *a: tuple(leaves(model(*a))), in_dims=dims)(*xs)
    return flatten([o.reshape((o.shape[0] * o.shape[1],) + tuple(o.shape[2:])) for o in out])
''')

_VMAP_UNSUPPORTED = (r"vmap: .*(not supported|It looks like you're|data-dependent|does not support)",
                     r"Batching rule not implemented", r"vmap.*\.item\(\)", r"randomness")

# -- 12. dtype -------------------------------------------------------------------------------------------------------

_INT32 = _code(COMMON, r'''
I32 = np.iinfo(np.int32)


def in_int32(arrays):
    return all(a.dtype.kind != "i" or not a.size or (a.min() >= I32.min and a.max() <= I32.max) for a in arrays)


def graph_a(inputs, dtype=None):
    if dtype == "float64":
        raise NotImplementedError("integer computation: no float64 form")
    return plain(inputs)


def graph_b(inputs):
    """The int64 inputs as int32 (their values fit); the int64 results must fit int32 too (no wrap-around)."""
    if not in_int32(inputs) or not in_int32(plain(inputs)):
        na("values outside the int32 range")
    return [o.astype(np.int64) if o.dtype == np.int32 else o
            for o in plain([x.astype(np.int32) if x.dtype == np.int64 else x for x in inputs])]
''')

# index arguments must be int64 ("Expected a long tensor for index", "dtype of indices should be Long"): the int32
# copy of an index input is outside what the operator accepts, not a wrong result
_INT32_UNSUPPORTED = (r"(?i)\blong\b", r"(?i)\bint64\b", r"LongTensor")

_FLOAT_DTYPE = r'''
NARROW, WIDE = {narrow!r}, {wide!r}  # numpy dtype names


def explicit_dtype():
    if "dtype" in CALL.get("kwargs", {{}}):
        na("an explicit dtype argument fixes the computation dtype")


def run_in(inputs, name):
    """The model in dtype `name`, its floating weights and inputs first rounded to NARROW (values both hold)."""
    model = build_model().to(getattr(torch, NARROW)).to(getattr(torch, name))
    xs = [x.astype(NARROW).astype(name) if x.dtype.kind == "f" else x for x in inputs]
    with torch.no_grad():
        return flatten(model(*to_torch(xs)))


def selected(outs, inputs):
    """Every finite float result is, up to sign, one of the input or weight values (or 0): values selected or
    moved, not computed; otherwise the two dtypes may round differently and the rule does not apply."""
    pool = [np.abs(x.astype(NARROW).astype(np.float64)).ravel() for x in inputs if x.dtype.kind == "f"]
    pool += [np.abs(t.detach().to(getattr(torch, NARROW)).double().numpy()).ravel()
             for t in list(build_model().parameters()) + list(build_model().buffers()) if t.is_floating_point()]
    pool = np.concatenate(pool + [np.zeros(1)])
    for o in outs:
        if o.dtype.kind == "f":
            v = np.abs(o[np.isfinite(o)].astype(np.float64))
            if not np.isin(v, pool).all():
                na("results on this instance are computed values, not selected ones")


def graph_a(inputs, dtype=None):
    """The operator in {wide} on the same values, results rounded to the dtypes the {narrow} run gives."""
    explicit_dtype()
    wide = run_in(inputs, WIDE)
    if dtype == "float64":
        return wide
    selected(wide, inputs)
    narrow = graph_b(inputs)
    return [w.astype(n.dtype) if w.dtype.kind == "f" and n.dtype.kind == "f" else w for w, n in zip(wide, narrow)]


def graph_b(inputs):
    """The operator in {narrow} (inputs and weights rounded to {narrow}: the values both dtypes hold)."""
    explicit_dtype()
    return run_in(inputs, NARROW)
'''

_FLOAT64 = _code(COMMON, _FLOAT_DTYPE.format(narrow="float32", wide="float64"))
_FLOAT16 = _code(COMMON, _FLOAT_DTYPE.format(narrow="float16", wide="float32"))


def _selection(low: str, high: str):
    def check(inst: Instance) -> str | None:
        if "dtype" in inst.call.get("kwargs", {}):
            return "an explicit dtype argument fixes the computation dtype"
        return meta.selection_probe(inst, low, high)
    return check


def _dtypes_have(*names: str):
    def check(inst: Instance) -> str | None:
        dts = meta.supported_dtypes(inst)
        if dts is None:
            return "no OpInfo/ModuleInfo dtypes for this instance"
        missing = [n for n in names if n not in dts]
        return f"OpInfo/ModuleInfo dtypes lack {', '.join(missing)}" if missing else None
    return check


def _int64_inputs(inst: Instance) -> str | None:
    ints = [s for s in inst.inputs if s.dtype == "int64"]
    if not ints:
        return "no int64 input"
    if any(s.low is not None and (s.low < -2**31 or s.high > 2**31 - 1) for s in ints):
        return "int64 values outside the int32 range"
    return None


def _f16_range(inst: Instance) -> str | None:
    floats = [s for s in inst.inputs if s.dtype == "float32"]
    if not floats:
        return "no float32 input"
    if any(s.low is not None and max(abs(s.low), abs(s.high)) > 65504 for s in floats):
        return "values beyond the float16 range"
    return None


# -- 14. pad -> unpad ------------------------------------------------------------------------------------------------

_PAD_UNPAD = _code(COMMON, r'''

def pads():
    """The F.pad-style amounts (last dim first) of the instance's padding."""
    if is_fn():
        return list(the_call(to_torch(INPUTS))[1]["pad"])
    p = build_model().m.padding
    return list(p) if isinstance(p, (list, tuple)) else [p] * 2


def check(ts):
    if any(p < 0 for p in pads()):
        na("negative padding crops: nothing to slice back")


def graph_a(inputs, dtype=None):
    return [np.array(inputs[0], copy=True)]


def graph_b(inputs):
    ts = to_torch(inputs)
    check(ts)
    p = pads()
    with torch.no_grad():
        out = leaves(build_model()(*ts))[0]
    for i in range(len(p) // 2):
        dim = out.ndim - 1 - i
        out = out.narrow(dim, p[2 * i], out.shape[dim] - p[2 * i] - p[2 * i + 1])
    return flatten(out)
''')


def _is_pad(inst: Instance) -> str | None:
    return None if meta.is_pad(inst) else "not documented as padding ('Pads tensor')"


# -- 16. save / load -------------------------------------------------------------------------------------------------

_SAVE_STATE = _code(COMMON, r'''

def graph_a(inputs, dtype=None):
    return plain(inputs)


def graph_b(inputs):
    """state_dict -> torch.save -> torch.load(weights_only=True) -> load_state_dict into a freshly built module."""
    buf = io.BytesIO()
    torch.save(build_model().m.state_dict(), buf)
    buf.seek(0)
    torch.manual_seed(1)  # a fresh module whose own initial weights differ from the saved ones
    model = Model()
    model.m.load_state_dict(torch.load(buf, weights_only=True))
    model.eval()
    with torch.no_grad():
        return flatten(model(*to_torch(inputs)))
''')

_SAVE_MODULE = _code(COMMON, r'''

def graph_a(inputs, dtype=None):
    return plain(inputs)


def graph_b(inputs):
    """The whole module pickled with torch.save and loaded back (weights_only=False)."""
    model = build_model()
    buf = io.BytesIO()
    torch.save(model.m, buf)
    buf.seek(0)
    model.m = torch.load(buf, weights_only=False)
    with torch.no_grad():
        return flatten(model(*to_torch(inputs)))
''')

_SAVE_EXPORT = _code(COMMON, r'''

def exported(inputs):
    return torch.export.export(build_model(), tuple(to_torch(inputs)))


def graph_a(inputs, dtype=None):
    with torch.no_grad():
        return flatten(exported(inputs).module()(*to_torch(inputs)))


def graph_b(inputs):
    """The exported program through torch.export.save / torch.export.load (a .pt2 archive in memory)."""
    buf = io.BytesIO()
    torch.export.save(exported(inputs), buf)
    buf.seek(0)
    ep = torch.export.load(buf)
    with torch.no_grad():
        return flatten(ep.module()(*to_torch(inputs)))
''')


def _has_state(inst: Instance) -> str | None:
    if inst.call.get("kind") != "torch_module":
        return "torch_module instances only"
    return None if any(k.startswith("state:") for k in inst.arrays) else "module has no state"


# -- extras: layout, autograd ----------------------------------------------------------------------------------------

_CHANNELS_LAST = _code(COMMON, r'''

def graph_a(inputs, dtype=None):
    return plain(inputs, dtype)


def graph_b(inputs):
    """Inputs (and 4-d / 5-d weights) in channels_last / channels_last_3d memory format."""
    ts = [t.to(memory_format=torch.channels_last) if t.ndim == 4 else
          t.to(memory_format=torch.channels_last_3d) if t.ndim == 5 else t for t in to_torch(inputs)]
    model = build_model()
    weights = list(model.parameters()) + list(model.buffers())
    if any(w.ndim == 4 for w in weights):
        model = model.to(memory_format=torch.channels_last)
    if any(w.ndim == 5 for w in weights):
        model = model.to(memory_format=torch.channels_last_3d)
    with torch.no_grad():
        return flatten(model(*ts))
''')


def _spatial_input(inst: Instance) -> str | None:
    ok = any(s.dtype.startswith("float") and len(s.shape) in (4, 5) for s in inst.inputs)
    return None if ok else "no 4-d/5-d floating-point input"


_AUTOGRAD = _code(COMMON, r'''

def dual_setup(inputs):
    """f(float inputs) -> float outputs in float64, the primals, and the probe directions v (inputs), u (outputs)."""
    ts = [t.double() if t.is_floating_point() else t for t in to_torch(inputs)]
    slots = [i for i, t in enumerate(ts) if t.is_floating_point()]
    model = build_model().double()

    def f(*xs):
        full = list(ts)
        for i, x in zip(slots, xs):
            full[i] = x
        return tuple(o for o in leaves(model(*full)) if o.is_floating_point())
    primals = tuple(ts[i] for i in slots)
    gen = torch.Generator().manual_seed(0)
    v = tuple(torch.randn(p.shape, generator=gen, dtype=torch.float64) for p in primals)
    with torch.no_grad():
        outs = f(*primals)
    if not outs:
        na("no floating-point output")
    if not all(bool(torch.isfinite(o).all()) for o in outs):
        na("non-finite outputs: no derivative to compare")
    u = tuple(torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in outs)
    return f, primals, v, u


def graph_a(inputs, dtype=None):
    """<u, J v> with J v from forward mode (torch.func.jvp)."""
    f, primals, v, u = dual_setup(inputs)
    _, jv = torch.func.jvp(f, primals, v)
    return [np.array(sum(float((a * b).sum()) for a, b in zip(u, jv)))]


def graph_b(inputs):
    """<J^T u, v> with J^T u from reverse mode (torch.func.vjp): the same number (the dot-product test)."""
    f, primals, v, u = dual_setup(inputs)
    _, pullback = torch.func.vjp(f, *primals)
    return [np.array(sum(float((a * b).sum()) for a, b in zip(pullback(u), v)))]
''')

_AUTOGRAD_UNSUPPORTED = (r"[Tt]rying to use forward AD", r"not implemented for forward", r"does not support forward",
                         r"forward AD", r"[Ff]orward grad", r"functorch|torch\.func|vmap", r"does not require grad",
                         r"derivative for .* is not implemented", r"not differentiable",
                         r"Cannot access data pointer of Tensor that doesn't have storage")


def _derivatives_tested(inst: Instance) -> str | None:
    """The OpInfo's own derivative tests cover plain inputs: no structure-imposing gradcheck_wrapper (hermitian,
    triangular, masked inputs: derivatives only on a subspace) and no skip of its forward/backward-AD tests."""
    info = meta.opinfo(inst)
    if info is None:
        return "no OpInfo for this instance"
    wrapper = getattr(info.gradcheck_wrapper, "__name__", "")
    if wrapper != "<lambda>":
        return f"OpInfo.gradcheck_wrapper is {wrapper}: derivatives are defined on structured inputs only"
    tests = {"test_forward_mode_AD", "test_fn_fwgrad_bwgrad", "test_fn_grad"}
    for d in list(info.skips or ()) + list(info.decorators or ()):
        if getattr(d, "cls_name", None) in ("TestFwdGradients", "TestBwdGradients") and \
                getattr(d, "test_name", None) in tests and \
                any("skip" in repr(x).lower() or "expectedFailure" in repr(x) for x in getattr(d, "decorators", ())):
            return f"OpInfo skips {d.cls_name}.{d.test_name}"
    return None


# -- the registry ----------------------------------------------------------------------------------------------------

def _rules() -> list[Rule]:
    torch_only = "torch"
    return [
        Rule("torch.compile.inductor", "optimization", torch_only,
             "torch.compile (inductor, fullgraph=False) must compute what eager PyTorch computes",
             "the instance in eager mode", "torch.compile(model, backend='inductor')(inputs), dynamo reset per test",
             _COMPILE, applies=_compile_applies, needs=("torch._inductor",), timeout=240.0,
             derived_from="every torch instance, minus OpInfo.skip_correctness_check_compile_vs_eager"),
        Rule("torch.jit.script", "optimization", torch_only,
             "a TorchScript-compiled call must compute what the Python call computes",
             "the instance in eager mode",
             "torch.jit.script(module) / torch.jit.CompilationUnit of a function calling the operator",
             _SCRIPT, applies=_opinfo_flag("supports_scripting"),
             # the scripted signature is typed from the annotations: a call the annotations exclude is refused
             unsupported=(r"^RuntimeError: cannot script", r"Expected a value of type .* for argument"),
             derived_from="OpInfo.supports_scripting (functions); every module (scripting refusals: unsupported)"),
        Rule("torch.jit.trace", "optimization", torch_only,
             "a traced graph replayed on the tracing inputs must compute what eager PyTorch computes",
             "the instance in eager mode", "torch.jit.trace(model, inputs)(inputs)",
             _TRACE, applies=_opinfo_flag("supports_tracing"),
             unsupported=(r"Only tensors, lists, tuples of tensors, or dictionary of tensors can be output",
                          r"[Tt]racer cannot infer type", r"cannot be traced", r"not supported in tracing",
                          r"Tracing .* is currently not supported"),
             derived_from="OpInfo.supports_tracing (functions); every module"),
        Rule("torch.export", "optimization", torch_only,
             "an exported program's module must compute what eager PyTorch computes",
             "the instance in eager mode", "torch.export.export(model, inputs).module()(inputs)",
             _EXPORT, unsupported=_EXPORT_UNSUPPORTED, timeout=120.0,
             derived_from="every torch instance (export's refusals of a program are unsupported)"),
        Rule("torch.same_padding", "same_padding", torch_only,
             "conv(padding='same') must equal F.pad by dilation*(k-1) (odd amount at the end) then conv(padding=0)",
             "the convolution with stride 1, padding='same'",
             "explicit F.pad (the module's padding_mode) then the convolution with padding 0",
             _SAME, applies=_all(_conv_like, _not_transposed, _string_padding),
             unsupported=(r"not implemented for 'Long'|\"slow_conv\w*\" not implemented",),
             derived_from="signature has weight+groups (kernel_size+groups for modules); padding accepts 'same' "
                          "(constructor annotation / function docs); not transposed (output_padding)"),
        Rule("torch.dim_lift", "dim_lift", torch_only,
             "an N-d operator must equal its (N+1)-d form on the input with a size-1 spatial dim inserted",
             "the instance (1-d or 2-d operator)",
             "the 2-d/3-d sibling with a leading size-1 spatial dim (kernel 1, stride 1, padding 0) then squeezed",
             _LIFT, applies=_code_check("torch.dim_lift", "check"),
             derived_from="name suffix 1d/2d with an importable (N+1)d sibling; the input rank must be a documented "
                          "form (Shape section) whose (N+1)-d form exists"),
        Rule("torch.depthwise", "depthwise", torch_only,
             "a grouped (depthwise) convolution must equal one plain convolution per group, concatenated",
             "the instance's grouped conv, or its depthwise variant (groups=in_channels, weight[:, :1]) if groups=1",
             "per group: the channel slice through a groups=1 conv with that group's weights; torch.cat on channels",
             _DEPTHWISE, applies=_all(_conv_like, _code_check("torch.depthwise", "check")),
             derived_from="signature has weight+groups (kernel_size+groups for modules)"),
        Rule("torch.dilated", "dilated", torch_only,
             "a dilated convolution must equal the convolution with the zero-inserted kernel and dilation 1",
             "the conv with its dilation (dilation 2 when the instance has none and the input allows it)",
             "the same conv with dilation-1 zeros inserted between kernel taps, dilation 1",
             _DILATED, applies=_all(_conv_like, _code_check("torch.dilated", "check")),
             unsupported=(r"output padding must be smaller than either stride or dilation",),
             derived_from="signature has weight+groups+dilation (kernel_size+groups for modules)"),
        Rule("torch.formula", "formula", torch_only,
             "an activation/normalization/pooling/loss API must equal the formula its documentation gives",
             "the instance",
             "the documented formula (torch.nn docs), evaluated in float64 and rounded to the output dtype",
             _FORMULA, applies=_all(_float_input, _code_check("torch.formula", "check")),
             derived_from="the function's name (module: the F.<name> its forward calls) in the table of documented "
                          "formulas"),
        Rule("torch.sparse.coo", "sparse", torch_only,
             "an operator on a sparse COO input (x.to_sparse()) must equal it on the dense input",
             "the instance on dense inputs", "input 0 as x.to_sparse(); sparse outputs .to_dense()",
             _code(COMMON, _SPARSE_CODE.replace("{convert}", "to_sparse")),
             applies=_sparse_applies("supports_sparse"),
             unsupported=_SPARSE_UNSUPPORTED, derived_from="OpInfo.supports_sparse"),
        Rule("torch.sparse.csr", "sparse", torch_only,
             "an operator on a sparse CSR input (x.to_sparse_csr()) must equal it on the dense input",
             "the instance on dense inputs", "input 0 as x.to_sparse_csr(); sparse outputs .to_dense()",
             _code(COMMON, _SPARSE_CODE.replace("{convert}", "to_sparse_csr")),
             applies=_sparse_applies("supports_sparse_csr"),
             unsupported=_SPARSE_UNSUPPORTED, derived_from="OpInfo.supports_sparse_csr, input rank >= 2"),
        Rule("torch.image_scale", "image_scale", torch_only,
             "a positively homogeneous operator: op(255 x) / 255 == op(x) (0-255 images vs normalized ones)",
             "the instance", "input 0 times 255, outputs divided by 255",
             _IMAGE_SCALE, applies=_all(_float_input, _scale_range, meta.homogeneity_probe),
             derived_from="probe: f(c x) == c f(x) for c in 2, 255, 1/255 on random data of the instance's shape "
                          "(float64, other inputs as in the instance); first input floating; 255 x within float32"),
        Rule("torch.time_major", "time_major", torch_only,
             "a sequence module with batch_first flipped, on transposed inputs, must give the transposed outputs",
             "the instance's module",
             "the same weights with batch_first flipped; the inputs/outputs whose documented shape depends on "
             "batch_first transposed (dims 0, 1); unbatched inputs unchanged (batch_first is ignored for them)",
             _TIME_MAJOR, applies=_all(_needs_kind("torch_module"), _code_check("torch.time_major", "check")),
             derived_from="constructor with a batch_first parameter; which inputs/outputs: their docstring entries "
                          "mention batch_first; every forward tensor must have a documented shape"),
        Rule("torch.pipeline", "pipeline", torch_only,
             "feeding the batch through DataLoader(TensorDataset) in mini-batches must give the same outputs",
             "the instance on the whole batch",
             "DataLoader(TensorDataset(batch inputs), batch_size=ceil(N/2)), outputs concatenated",
             _PIPELINE, applies=_code_check("torch.pipeline", "check"),
             derived_from="dim 0 is a batch dim: aten pointwise tag, or the (module form's) documented Shape "
                          "section, with dim / normalized_shape / reduction / batch statistics not reducing dim 0"),
        Rule("torch.dtype.int32", "dtype", torch_only,
             "an integer operator on int64 values that fit int32 must give the same values in int32",
             "the instance in int64", "the int64 inputs as int32 (results must fit int32 too)",
             _INT32, applies=_all(_dtypes_have("int32", "int64"), _int64_inputs),
             unsupported=_INT32_UNSUPPORTED,
             derived_from="OpInfo/ModuleInfo dtypes (CPU) include int32 and int64; int64 inputs within int32"),
        Rule("torch.dtype.float64", "dtype", torch_only,
             "an operator that selects/moves values must give the same values in float32 and float64",
             "the operator in float64 on the float32 values, rounded back to float32",
             "the operator in float32 (the instance)",
             _FLOAT64, applies=_all(_dtypes_have("float32", "float64"), _selection("float32", "float64")),
             derived_from="OpInfo/ModuleInfo dtypes (CPU) include float64; probe: on random data the results are "
                          "bit-identical across the dtypes and are input values (selection, not arithmetic)"),
        Rule("torch.dtype.float16", "dtype", torch_only,
             "on float16 values, an operator that selects/moves values must give the same values in float16 and "
             "float32",
             "the operator in float32 on the inputs (and weights) rounded to float16, results rounded to float16",
             "the operator in float16 on the same values",
             _FLOAT16, applies=_all(_dtypes_have("float16", "float32"), _f16_range, _selection("float16", "float32")),
             unsupported=(r"ComplexHalf",),
             derived_from="OpInfo/ModuleInfo dtypes (CPU) include float16; values within the float16 range; probe "
                          "as torch.dtype.float64"),
        Rule("torch.pad_unpad", "pad_unpad", torch_only,
             "padding then slicing the padding off must give back the input exactly",
             "input 0", "the pad operator, then narrow() by the pad amounts on each padded dim",
             _PAD_UNPAD, applies=_all(_is_pad, _code_check("torch.pad_unpad", "check")), exact=True,
             derived_from="documented as padding (docstring 'Pads tensor' / 'Pads the input tensor'), no negative "
                          "pads"),
        Rule("torch.batch", "batch", torch_only,
             "in eval mode each sample's output must not depend on the rest of the batch",
             "the instance on the whole batch", "each sample alone (a batch of one), outputs concatenated",
             _BATCH, applies=_code_check("torch.batch", "check"),
             derived_from="dim 0 is a batch dim: aten pointwise tag, or the (module form's) documented Shape "
                          "section, with dim / normalized_shape / reduction / batch statistics not reducing dim 0"),
        Rule("torch.vmap", "batch", torch_only,
             "torch.vmap over the batch must equal the batched call",
             "the instance on the whole batch", "torch.vmap of the model over samples given as batches of one",
             _VMAP, applies=_code_check("torch.vmap", "check"), unsupported=_VMAP_UNSUPPORTED,
             derived_from="as torch.batch"),
        Rule("torch.save_load.state_dict", "save_load", torch_only,
             "a state_dict saved and loaded (weights_only=True) into a fresh module must reproduce the outputs",
             "the module", "a freshly built module (other initial weights) given the reloaded state_dict",
             _SAVE_STATE, applies=_has_state, exact=True, derived_from="torch_module instances with a state"),
        Rule("torch.save_load.module", "save_load", torch_only,
             "a whole module saved with torch.save and loaded back must reproduce the outputs",
             "the module", "torch.load(torch.save(module)) (weights_only=False)",
             _SAVE_MODULE, applies=_needs_kind("torch_module"), exact=True, derived_from="torch_module instances"),
        Rule("torch.export.save_load", "save_load", torch_only,
             "an exported program saved as a .pt2 archive and loaded back must reproduce its outputs",
             "torch.export.export(model).module()", "the same program through torch.export.save / load",
             _SAVE_EXPORT, exact=True, unsupported=_EXPORT_UNSUPPORTED, timeout=120.0,
             derived_from="every torch instance torch.export accepts"),
        Rule("torch.channels_last", "layout", torch_only,
             "channels_last inputs (and weights) must give the values contiguous ones give",
             "the instance (contiguous)", "inputs .to(memory_format=channels_last[_3d]), module likewise",
             _CHANNELS_LAST, applies=_spatial_input, derived_from="a 4-d or 5-d floating-point input"),
        Rule("torch.autograd.jvp_vjp", "autograd", torch_only,
             "forward-mode and reverse-mode derivatives must agree: <u, J v> == <J^T u, v> (float64)",
             "<u, J v>, J v from torch.func.jvp", "<J^T u, v>, J^T u from torch.func.vjp",
             _AUTOGRAD, applies=_all(_opinfo_flag("supports_forward_ad", missing_ok=False),
                                     _opinfo_flag("supports_autograd", missing_ok=False), _derivatives_tested,
                                     _float_input),
             unsupported=_AUTOGRAD_UNSUPPORTED,
             derived_from="OpInfo.supports_forward_ad and .supports_autograd, default gradcheck_wrapper, no skipped "
                          "derivative tests; a floating input; finite outputs"),
    ]


register(*_rules())

__all__ = ["COMMON", "DOCS", "BATCH", "LAYOUT", "CONV"]
