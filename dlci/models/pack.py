"""Packing several single-operator tests into one model, so that a target converts and compiles a batch once.

A packer (:data:`PACKERS`, keyed by the target's model form) says in which form each member is built before packing
(``member_form``), which members may share a model (``key``: equal keys pack together, None runs alone) and how to
pack them (``pack``: the packed model, the runtime inputs and the outputs of each member, in member order).

Members are packed from the cheapest form that the packed one can be made of: an ONNX node test is packed as ONNX
(disjoint subgraphs, every name prefixed ``m<k>_``), while torch instances are packed as torch modules, a module
that runs each member on its own inputs and returns their outputs in member order, which is then exported once
(``torch.export`` or ``torch.onnx``): the export's fixed cost, most of a torch test that goes through ONNX (about
1 s per export here, 0.05 s per member of a packed export), is paid once per batch as convert and compile are.
Only members that mean the same inside the packed model share one: the same IR version and opset imports for ONNX
(an operator's semantics depend on its opset), no parameters kept as inputs, static shapes (a dynamic or symbolic dim
is an import path of its own, run alone).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from dlci.instance import Instance
from dlci.models import onnx_input_names, onnx_keeps_params

Packed = tuple[Any, list[int], list[int]]  # (packed model, runtime inputs per member, outputs per member)


class CannotPack(Exception):
    """The members cannot share this packed model (a packer's limit, not a finding): each runs alone."""


@dataclass(frozen=True)
class Packer:
    member_form: Callable[[Instance], str]           # the form a member is built in before packing
    key: Callable[[Instance, Any], tuple | None]     # (instance, member model) -> pack key; None: runs alone
    pack: Callable[[list[Instance], list[Any], list[int]], Packed]  # (instances, member models, outputs each)
    # (packed model, members' input counts, operator names a target's failure lists) -> the members that hold a
    # node of one of them (raises where a node of one is no member's); None: this form cannot tell
    owners: Callable[[Any, list[int], set[str]], set[int]] | None = None


# -- ONNX members -----------------------------------------------------------------------------------------------

def onnx_pack_key(model: Any) -> tuple | None:
    """ONNX models with equal keys may share a packed model; None: this model runs alone."""
    if onnx_keeps_params(model):
        return None
    if any(d.dim_param for vi in model.graph.input for d in vi.type.tensor_type.shape.dim):
        return None
    opsets = tuple(sorted((o.domain, o.version) for o in model.opset_import))
    return model.ir_version, opsets


def pack_onnx(models: list) -> Packed:
    """Disjoint subgraphs in one ONNX model; the members share :func:`onnx_pack_key`."""
    import onnx
    from onnx import compose, helper
    first = models[0]
    nodes, inputs, outputs, inits, infos, functions = [], [], [], [], [], {}
    n_in, n_out = [], []
    for k, m in enumerate(models):
        m = compose.add_prefix(m, f"m{k}_", rename_functions=False)
        g = m.graph
        runtime = set(onnx_input_names(m))
        nodes += g.node
        inputs += [i for i in g.input if i.name in runtime]
        outputs += g.output
        inits += g.initializer
        infos += g.value_info
        for f in m.functions:  # local functions (torch.onnx's): equal names are the same function
            functions.setdefault((f.domain, f.name, getattr(f, "overload", "")), f)
        n_in.append(len([i for i in g.input if i.name in runtime]))
        n_out.append(len(g.output))
    graph = helper.make_graph(nodes, "dlci_batch", inputs, outputs, initializer=inits, value_info=infos)
    packed = helper.make_model(graph, opset_imports=list(first.opset_import), ir_version=first.ir_version,
                               functions=list(functions.values()))
    packed.producer_name = "dlci.pack"
    onnx.checker.check_model(packed)
    return packed, n_in, n_out


# -- torch members ------------------------------------------------------------------------------------------------

def torch_pack_key(instance: Instance) -> tuple | None:
    """Torch instances share a packed module unless exported with dynamic dims (an import path of its own) or
    recorded from a repository's tests (the recorded program is the test: dlci.models.recorded)."""
    if instance.call.get("dynamic") or instance.call.get("kind") in ("torch_exported", "torch_fx"):
        return None
    return ("torch",)


def _tensor_leaves(out: Any, into: list) -> list:
    """The tensors of a module's output in the order dlci.models.convert.flatten_outputs lists them (non-tensors
    dropped), so that a member's outputs inside the packed module line up with its reference."""
    import torch
    if isinstance(out, torch.Tensor):
        into.append(out)
    elif isinstance(out, (list, tuple)):
        for v in out:
            _tensor_leaves(v, into)
    elif isinstance(out, dict):
        for v in out.values():
            _tensor_leaves(v, into)
    return into


_FORWARDS: set = set()  # the code objects of packed forwards, whose frames name the member that raised


class _PackedMembers:
    """The forward of a packed module: runs every member on its own slice of the inputs, returns all their tensors.
    A member's ``forward`` is called, not the member: a member called as a submodule is traced in a scope of its
    own, where TorchScript keeps an alias as written (aten::true_divide, which OpenVINO has no rule for) instead of
    the canonical op a top-level trace records (aten::div), and the member would not mean what it means alone."""

    @staticmethod
    def forward(self, *xs):
        outs, pos = [], 0
        for member_index, (member, n) in enumerate(zip(self.members, self.n_in)):  # noqa: B007 (read by culprit)
            _tensor_leaves(member.forward(*xs[pos:pos + n]), outs)
            pos += n
        return tuple(outs)


_FORWARDS.add(_PackedMembers.forward.__code__)


def packed_module(modules: list, n_in: list[int]) -> Any:
    """One module whose forward runs every member on its own slice of the inputs (:class:`_PackedMembers`)."""
    import torch
    cls = type("PackedMembers", (torch.nn.Module,), {"forward": _PackedMembers.forward})
    module = cls()
    module.members = torch.nn.ModuleList(modules)
    module.n_in = list(n_in)
    return module.eval()


def culprits(exc: BaseException, module: Any) -> list[int]:
    """The members whose own code raised ``exc`` (or an exception it was raised from) while ``module``, a packed
    module, was traced or exported: the ``member_index`` of its forward's frame in the traceback; else the member
    whose inputs the graph node being translated when it raised depends on (:func:`_node_member`), and with it
    every member that has a node the exporter has no function for (:func:`_undispatchable`: the exporter stops at
    the first, and each would otherwise cost another failed export of the group). Empty when none is known."""
    seen = set()
    frames = []
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        tb = e.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            if frame.f_code in _FORWARDS and frame.f_locals.get("self") is module:
                k = frame.f_locals.get("member_index")
                return [] if k is None else [k]
            frames.append(frame)
            tb = tb.tb_next
        e = e.__cause__ or e.__context__
    n_in = getattr(module, "n_in", None)
    if not n_in:
        return []
    k = _translated_member(frames, n_in)
    found: list[int] = [] if k is None else [k]
    if found:
        for frame in frames:
            graph, registry = frame.f_locals.get("fx_graph"), frame.f_locals.get("registry")
            if graph is not None and registry is not None:
                found += sorted(_undispatchable(graph, registry, n_in) - set(found))
                break
    return found


def _translated_member(frames: list, n_in: list[int]) -> int | None:
    """The member of the graph node (a frame's local ``node``) being translated in these frames, the outermost
    frame that names one first."""
    found = _translated_node(frames, n_in)
    return None if found is None else found[0]


def _translated_node(frames: list, n_in: list[int]) -> tuple[int, Any] | None:
    for frame in frames:
        node = frame.f_locals.get("node")
        if type(node).__name__ == "Node" and type(node).__module__ == "torch.fx.node":
            k = _node_member(node, n_in)
            if k is not None:
                return k, node
    return None


def converting_node(exc: BaseException, n_in: list[int]) -> tuple[int, Any] | None:
    """(member, graph node) that a target's converter was translating when it raised ``exc`` (TVM's importers
    hand each torch.fx node to a function taking ``node``); None when no frame holds one of the packed graph."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return _translated_node(frames, n_in)


def member_nodes(graph: Any, n_in: list[int], members: set[int]) -> frozenset[tuple[str, str]]:
    """(function name, node name) of each call of ``graph`` (a packed program's) that belongs to one of
    ``members`` (:func:`nodes_by_member`): what stands in for those members while the others run."""
    by_member = nodes_by_member(graph, n_in)
    return frozenset().union(*(by_member.get(k, frozenset()) for k in members))


def nodes_by_member(graph: Any, n_in: list[int]) -> dict[int, frozenset[tuple[str, str]]]:
    """Member -> (function name, node name) of the calls of ``graph`` that belong to it: they compute on that
    member's inputs or parameters alone (:func:`_node_member`), or on no input at all and only that member's calls
    use them (a constant made in the graph; one that is a member's output makes it a lone member, judged alone:
    :func:`lone_members`). Each node's owner is found once, for every member."""
    return {k: frozenset((node.target.__name__, node.name) for node in nodes if hasattr(node.target, "__name__"))
            for k, nodes in _call_owners(graph, n_in).items()}


def _call_owners(graph: Any, n_in: list[int]) -> dict[int, list]:
    """Member -> its call nodes of ``graph`` (:func:`nodes_by_member`); calls that are no single member's are left
    out."""
    bounds = [sum(n_in[:k + 1]) for k in range(len(n_in))]
    owner: dict = {}
    reads: dict = {}  # node -> the members whose inputs or parameters it depends on
    reads_input: dict = {}
    calls = []
    for node in graph.nodes:  # inputs come before their users
        reads_input[node] = node.op in ("placeholder", "get_attr") or any(reads_input.get(n, True)
                                                                        for n in node.all_input_nodes)
        mine = _placeholder_member(node, bounds) if node.op == "placeholder" else None
        reads[node] = frozenset({mine} if mine is not None else ()).union(
            *(reads.get(n, frozenset()) for n in _data_inputs(node)))
        if node.op == "call_function":
            calls.append(node)
            owner[node] = next(iter(reads[node])) if len(reads[node]) == 1 else None
    for node in reversed(calls):
        if owner[node] is None and not reads_input[node]:
            users = {owner.get(user) for user in node.users}
            if len(users) == 1:
                owner[node] = users.pop()
    found: dict[int, list] = {}
    for node in calls:
        if owner[node] is not None:
            found.setdefault(owner[node], []).append(node)
    return found


def _undispatchable(graph: Any, registry: Any, n_in: list[int]) -> set[int]:
    """Members with an ATen node for which torch.onnx's registry has no ONNX function (its own dispatch, as the
    exporter asks it while translating); empty where this torch has no such dispatch."""
    try:
        import operator

        import torch
        from torch.onnx._internal.exporter import _dispatching
    except ImportError:
        return set()
    members = set()
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function" or target is operator.getitem or not isinstance(target, torch._ops.OpOverload) \
                or target.namespace == "onnx":  # getitem and ONNX ops are translated without the registry
            continue
        try:
            function, _ = _dispatching.dispatch(node, registry)
        except Exception:  # noqa: BLE001 - a node the dispatcher cannot even read: left to the exporter
            continue
        if function is None:
            k = _node_member(node, n_in)
            if k is not None:
                members.add(k)
    return members


_PACKED_INPUT = re.compile(r"^xs_(\d+)$")  # the packed forward's *xs, as torch.export names its placeholders
_MEMBER_PARAM = re.compile(r"members[._](\d+)[._]")  # a member's lifted parameter or buffer


def _node_member(node: Any, n_in: list[int]) -> int | None:
    """The one member a graph node of the packed program computes on: the placeholders it depends on are that
    member's inputs or parameters (a converter that raised on a node, torch.onnx's "Error when translating node",
    names no frame of the member's code: the graph says whose it is). None when it reads no member's or several."""
    bounds = [sum(n_in[:k + 1]) for k in range(len(n_in))]
    owners, todo, seen = set(), [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.op == "placeholder":
            owners.add(_placeholder_member(n, bounds))
        todo.extend(_data_inputs(n))
    owners.discard(None)
    return owners.pop() if len(owners) == 1 else None


def _data_inputs(node: Any) -> list:
    """The nodes whose values ``node`` computes on: all its inputs but an effect token, which torch.export threads
    from each call with effects to the next (torch.linalg.inv's error check after decomposition), member to
    member, and which carries no member's data."""
    inputs = node.all_input_nodes
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "with_effects" and node.args:
        return [n for n in inputs if n is not node.args[0]]
    return inputs


def _placeholder_member(node: Any, bounds: list[int]) -> int | None:
    """The member whose input (packed input ``x<i>``: ``bounds`` are the members' cumulative input counts) or
    parameter (``members.<k>.``) a placeholder is; None for neither."""
    m = _PACKED_INPUT.match(node.name)
    if m:
        return next((k for k, b in enumerate(bounds) if int(m.group(1)) < b), None)
    m = _MEMBER_PARAM.search(str(node.target)) or _MEMBER_PARAM.search(node.name)
    return int(m.group(1)) if m else None


class PackFailed(Exception):
    """Exporting or tracing a packed module failed; ``members``: those that fail it (:func:`culprits`), or [];
    ``symptom``: the type of the exporter's own exception (what a member's test alone reports when it fails so)."""

    def __init__(self, exc: BaseException | str, members: list[int], symptom: str | None = None):
        super().__init__(exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}")
        self.members = list(members)
        # the type the exporter raised, as a member's model form alone reports it (dlci.testcase._invalid)
        self.symptom = symptom or (type(exc).__name__ if isinstance(exc, BaseException) else None)


def _tracing(module: Any, trace: Callable[[], Any]) -> Any:
    try:
        return trace()
    except Exception as e:
        raise PackFailed(e, culprits(e, module)) from e


def lone_members(packed: Any, n_out: list[int]) -> set[int]:
    """The members of a packed model with an output that computes on none of its inputs (a constant: torch.fill of
    an empty tensor exports as an initializer) or is one of them as it came. Alone, such a member's model returns
    it as its whole result, which a target may treat otherwise than one element of the packed model's tuple (TVM
    could not compile an empty constant returned alone, and compiled it in a tuple): they are judged alone. Empty
    for a form that cannot be read without converting it (a torch module)."""
    member = [k for k, n in enumerate(n_out) for _ in range(n)]
    if hasattr(packed, "graph") and hasattr(packed.graph, "initializer"):  # ONNX
        fed = set(onnx_input_names(packed))
        live = set(fed)
        for node in packed.graph.node:  # topologically sorted, as ONNX requires
            if any(name in live for name in node.input if name):
                live.update(node.output)
        outputs = [o.name for o in packed.graph.output]
        lone = {pos for pos, name in enumerate(outputs) if name in fed or name not in live}
    else:
        graph = getattr(getattr(packed, "graph_module", None) or packed, "graph", None)
        if graph is None or not hasattr(graph, "nodes"):
            return set()
        exported = hasattr(packed, "graph_signature")  # an ExportedProgram: parameters are placeholders too
        live = set()
        for node in graph.nodes:
            if node.op == "placeholder":
                if not exported or _PACKED_INPUT.match(node.name):
                    live.add(node)
            elif any(n in live for n in _data_inputs(node)):
                live.add(node)
        output = next((node for node in reversed(graph.nodes) if node.op == "output"), None)
        values = output.args[0] if output is not None and output.args else ()
        values = values if isinstance(values, (tuple, list)) else (values,)
        lone = {pos for pos, v in enumerate(values)
                if not hasattr(v, "op") or v.op == "placeholder" or v not in live}
        outputs = values
    if len(outputs) != len(member):
        return set()
    return {member[pos] for pos in lone}


def exported_program_owners(ep: Any, n_in: list[int], names: set[str]) -> set[int]:
    """The members of a packed program with a node of one of ``names`` ('linalg_lu_solve.default', 'histc'), as
    exported or as decomposed to core ATen (what TVM's from_exported_program converts: a target names the
    functions an operator decomposes into, linalg_lu_solve for aten::lu_solve). A member that holds one fails
    alone on the same node: decomposing is per node. Raises where such a node is no single member's: the caller
    stands in for every node of those functions, and one of an undecided member must not be stood in for."""
    found: set[int] = set()
    from dlci.models.torch_export import decomposed
    for program in (ep, decomposed(ep)):
        owned = {node: k for k, nodes in _call_owners(program.graph, n_in).items() for node in nodes}
        for node in program.graph.nodes:
            name = getattr(node.target, "__name__", "") if node.op == "call_function" else ""
            if name and (name in names or name.removesuffix(".default") in names):
                if node not in owned:
                    raise ValueError(f"{node.name} ({name}) is no single member's")
                found.add(owned[node])
    return found


def pack_fx_graph(instances: list[Instance], modules: list, n_out: list[int]) -> Packed:
    """The packed module traced once by torch.fx. A traced member's output is one proxy however many tensors it
    stands for: members of several outputs are indexed by their reference's count (a flat tuple; a nested one does
    not line up, and that member is judged alone)."""
    import torch.fx
    from dlci.models import fixed_arity
    _, n_in = _torch_args(instances)

    class TracedMembers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.members = torch.nn.ModuleList(modules)

        def forward(self, *xs):
            outs, pos = [], 0
            for member_index, (member, n, k) in enumerate(zip(self.members, n_in, n_out)):  # noqa: B007
                out = member(*xs[pos:pos + n])
                pos += n
                if isinstance(out, torch.fx.Proxy):
                    outs += [out] if k == 1 else [out[i] for i in range(k)]
                else:
                    _tensor_leaves(out, outs)
            return tuple(outs)

    _FORWARDS.add(TracedMembers.forward.__code__)
    packed = TracedMembers().eval()
    gm = _tracing(packed, lambda: torch.fx.symbolic_trace(fixed_arity(packed, sum(n_in))))
    gm.dlci_input_info = [(list(a.shape), str(a.dtype)) for inst in instances for a in inst.input_arrays()]
    return gm, n_in, n_out


def _torch_args(instances: list[Instance]) -> tuple[list, list[int]]:
    from dlci.models import torch_inputs
    args, n_in = [], []
    for inst in instances:
        xs = torch_inputs(inst)
        args += xs
        n_in.append(len(xs))
    return args, n_in


def pack_torch_module(instances: list[Instance], modules: list, n_out: list[int]) -> Packed:
    _, n_in = _torch_args(instances)
    return packed_module(modules, n_in), n_in, n_out


def pack_exported_program(instances: list[Instance], modules: list, n_out: list[int]) -> Packed:
    """The packed module exported once. A program that writes a buffer or an input (an in-place op, a norm in
    training mode) is an import path of its own: its members run alone."""
    import torch
    args, n_in = _torch_args(instances)
    module = packed_module(modules, n_in)
    ep = _tracing(module, lambda: torch.export.export(module, tuple(args)))
    sig = ep.graph_signature
    if sig.buffers_to_mutate or sig.user_inputs_to_mutate:
        raise CannotPack("the packed program mutates state")
    if len(sig.user_outputs) != sum(n_out):
        raise CannotPack(f"{len(sig.user_outputs)} outputs, the members have {sum(n_out)}")
    return ep, n_in, n_out


def _pack_torch_onnx(instances: list[Instance], modules: list, n_out: list[int]) -> Packed:
    """The packed module exported once with torch.onnx (the exporter every torch instance meets on its way to an
    ONNX target); the member outputs' count and the inputs must survive the export."""
    from dlci.models import export_onnx, store
    from dlci.errors import chain
    args, n_in = _torch_args(instances)
    members = [(i.compute_id(), i.seed) for i in instances]
    cut = _cut_from_last_export(members, n_in, n_out)
    if cut is not None:
        return cut, n_in, n_out

    def export():
        module = packed_module(modules, n_in)
        model = _tracing(module, lambda: export_onnx(module, args))
        if len(onnx_input_names(model)) != sum(n_in) or len(model.graph.output) != sum(n_out):
            raise CannotPack("the exported model dropped inputs or outputs")
        return model

    def describe(e: BaseException):  # what dlci.testcase._split reads of a failure: its text and its culprit
        if isinstance(e, CannotPack):
            return ("cannot", str(e))
        if isinstance(e, PackFailed) and store.lasting(e.__cause__):
            return ("failed", "\n".join(str(x) for x in chain(e)), e.members, e.symptom)
        return None

    def revive(entry):
        raise CannotPack(entry[1]) if entry[0] == "cannot" else PackFailed(entry[1], entry[2], entry[3])
    model = store.onnx_export("packed-onnx", instances, export, describe, revive)
    _LAST_EXPORT[:] = [(members, model, n_in, n_out)]
    return model, n_in, n_out


_LAST_EXPORT: list = []  # [(members' content keys, packed model, n_in, n_out)]: this worker's last packed export


def _cut_from_last_export(members: list, n_in: list[int], n_out: list[int]) -> Any | None:
    """A group the target failed on is split and its parts packed again: a part of the worker's last packed export
    is cut out of it (its members' inputs to their outputs, onnx.utils.Extractor) instead of exported again. The
    exported model's inputs and outputs are in member order, each member's own (checked when it was exported)."""
    if not _LAST_EXPORT:
        return None
    last, model, last_in, last_out = _LAST_EXPORT[0]
    where = {m: k for k, m in enumerate(last)}
    if len(where) != len(last) or not all(m in where for m in members):
        return None
    ks = [where[m] for m in members]
    if [last_in[k] for k in ks] != n_in or [last_out[k] for k in ks] != n_out:
        return None
    if ks == list(range(len(last))):
        return model
    from onnx.utils import Extractor
    inputs, outputs = onnx_input_names(model), [o.name for o in model.graph.output]
    starts_in = [sum(last_in[:k]) for k in range(len(last_in))]
    starts_out = [sum(last_out[:k]) for k in range(len(last_out))]
    names_in = [inputs[starts_in[k] + j] for k in ks for j in range(last_in[k])]
    names_out = [outputs[starts_out[k] + j] for k in ks for j in range(last_out[k])]
    try:
        return Extractor(model).extract_model(names_in, names_out)
    except Exception:  # noqa: BLE001 - a model the extractor cannot cut is exported again
        return None


def _onnx_member_form(instance: Instance) -> str:
    return "onnx" if instance.framework == "onnx" else "torch_module"


def _onnx_key(instance: Instance, model: Any) -> tuple | None:
    if instance.framework == "onnx":
        key = onnx_pack_key(model)
        return None if key is None else ("onnx", *key)
    return torch_pack_key(instance)


def _pack_onnx_form(instances: list[Instance], members: list, n_out: list[int]) -> Packed:
    if all(i.framework == "onnx" for i in instances):
        return pack_onnx(members)
    return _pack_torch_onnx(instances, members, n_out)


def _torch_key(instance: Instance, model: Any) -> tuple | None:
    return torch_pack_key(instance)


# model form -> its packer: the forms whose members can share one model
PACKERS = {
    "onnx": Packer(_onnx_member_form, _onnx_key, _pack_onnx_form),
    "exported_program": Packer(lambda inst: "torch_module", _torch_key, pack_exported_program,
                               exported_program_owners),
    "torch_module": Packer(lambda inst: "torch_module", _torch_key, pack_torch_module),
    "fx_graph": Packer(lambda inst: "torch_module", _torch_key, pack_fx_graph),
}
