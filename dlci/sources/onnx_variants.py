"""``onnx_variants``: ONNX node instances rewritten the ways real models present an operator to a converter.

The ONNX backend node tests feed every input at run time and declare the newest opset, while converters take other
paths for what real models contain: a shape, axes, pads or split sizes given as an initializer or a ``Constant``
node (TVM's ``get_constant`` and the branches on ``GenericConst``), an older opset (``_impl_v1``, ``_impl_v11`` …),
optional inputs and attributes left out. Per base instance (``onnx_node``), the kinds:

- ``initializer``: every input but the first (the data) becomes an initializer; ``constant_node``: the same inputs
  as ``Constant`` nodes; ``all_initializers`` (two inputs or more): every input constant, so converters that fold
  constants fold this node;
- ``exported_params``: the ``initializer`` form as an exporter writes it into a whole model: initializers named
  ``onnx::<Op>_<n>`` and shared by a second copy of the node (an extra output), imported with the initializers as
  inputs (TVM's ``keep_params_in_input``, marked in the model's metadata);
- ``opset``: the model declared at each older version of the operator's schema (``onnx.version_converter`` where it
  has an adapter, else the same node re-declared when that version's schema accepts it), of the ``initializer``
  form where there is one, since older schemas often take those inputs as attributes;
- ``symbolic_batch`` / ``symbolic_dims``: the leading dim / every dim > 1 of the runtime inputs declared symbolic
  (``dim_param``), the dynamic-batch models converters import with shape variables (floating-point inputs only:
  shapes, axes and indices keep their length);
  outputs keep their rank, their sizes become unknown;
- ``optional_absent``: trailing optional inputs left out; ``attribute_default``: one attribute that has a default
  left out;
- ``rank``: the data input (the first, floating-point, rank >= 3) with its last dim dropped or a dim appended, where
  the schema takes any rank (global pooling, normalisations: converters often assume the 2-D image case).

Every variant is checked (``onnx.checker`` with shape inference) and evaluated with ``onnx.reference``: a variant
that keeps the semantics (initializer, constant node, opset) must reproduce the base case's expected outputs, or it
is dropped (``<kind>:changed-outputs``); the others take the reference's outputs as expected.
"""
from __future__ import annotations

import copy
import warnings
from typing import Iterator

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.instance.recipe import attribute_value
from dlci.sources import register
from dlci.sources.variant_base import VariantSource
from dlci.sources._common import dist_version

PRESERVING = ("initializer", "constant_node", "all_initializers", "opset", "symbolic_batch", "symbolic_dims")
KINDS = PRESERVING + ("exported_params", "optional_absent", "attribute_default", "rank")
OLDER_OPSETS = 4  # older schema versions tried per instance (the newest ones, and the oldest)


def _schemas(op_type: str, domain: str) -> list:
    import onnx.defs
    return sorted((s for s in onnx.defs.get_all_schemas_with_history()
                   if s.name == op_type and s.domain == domain and not s.deprecated), key=lambda s: s.since_version)


def _model(inst: Instance):
    import onnx
    return onnx.load_from_string(inst.arrays["model"].tobytes())


def _main_node(model, op_type: str):
    return next(n for n in model.graph.node if n.op_type == op_type)


def _runtime_inputs(model) -> list:
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def _as_constants(model, arrays: list[np.ndarray], which: set[int], how: str):
    """The model with runtime inputs ``which`` (positions) turned into initializers or Constant nodes."""
    from onnx import helper, numpy_helper
    m = copy.deepcopy(model)
    g = m.graph
    inputs = _runtime_inputs(m)
    for pos in sorted(which, reverse=True):
        vi = inputs[pos]
        tensor = numpy_helper.from_array(np.asarray(arrays[pos]), vi.name)
        if how == "initializer":
            g.initializer.append(tensor)
        else:
            g.node.insert(0, helper.make_node("Constant", [], [vi.name], value=tensor))
        g.input.remove(vi)
    return m, [a for i, a in enumerate(arrays) if i not in which]


def _exported_params(model, arrays: list[np.ndarray], which: set[int], op_type: str):
    """The node as torch.onnx exports it into a whole model: inputs ``which`` as initializers named the exporter's
    way (``onnx::<Op>_<n>``), each shared with a second copy of the node (an exporter stores a value once for every
    node that needs it), and the model marked for import with its initializers as inputs (TVM's
    ``keep_params_in_input``, how TVM's own tests import). The copy's outputs are extra graph outputs."""
    from dlci.models import KEEP_PARAMS_KEY
    m, rest = _as_constants(model, arrays, which, "initializer")
    g = m.graph
    node = _main_node(m, op_type)
    for n, init in enumerate(i for i in g.initializer if i.name in set(node.input)):
        new = f"onnx::{op_type}_{n}"
        for nd in g.node:
            nd.input[:] = [new if x == init.name else x for x in nd.input]
        init.name = new
    outs = {o.name: o for o in g.output}
    if not all(o in outs for o in node.output if o):
        return None  # an output another node consumes: the copy would not be a plain extra output
    twin = copy.deepcopy(node)
    twin.name = (node.name or op_type) + "_again"
    twin.output[:] = [f"{o}_again" if o else o for o in node.output]
    g.node.append(twin)
    for o in node.output:
        if o:
            extra = copy.deepcopy(outs[o])
            extra.name = f"{o}_again"
            g.output.append(extra)
    m.metadata_props.add(key=KEEP_PARAMS_KEY, value="true")
    return m, rest


def _symbolic(model, leading_only: bool):
    """The case as it is (every input fed at run time: a dynamic dim shared with a constant would not be a valid model
    for other sizes) with dims of its floating-point inputs declared symbolic (``dim_param``, one name per size so
    that dims which must agree still do; size-1 dims stay, they broadcast); None when no dim qualifies. Output sizes
    become unknown and value_info goes: inference recomputes them."""
    import onnx
    m = copy.deepcopy(model)
    changed = False
    floating = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    for vi in _runtime_inputs(m):
        if vi.type.tensor_type.elem_type not in floating:
            continue  # shapes, axes, indices: their length is part of the graph's meaning
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if (axis == 0 or not leading_only) and d.HasField("dim_value") and d.dim_value > 1:
                d.dim_param = f"n{d.dim_value}"  # setting the oneof clears dim_value
                changed = True
    if not changed:
        return None
    for vo in m.graph.output:
        for d in vo.type.tensor_type.shape.dim:
            d.ClearField("dim_value")  # rank kept, sizes unknown
    del m.graph.value_info[:]
    return m


def _ranked(model, arrays: list[np.ndarray], grow: bool):
    """The case with its data input one dim shorter (the last dropped) or longer (a dim of 2 appended, the values
    repeated); the output shapes are left to inference. None when the data input is not a float tensor of rank 3+."""
    import onnx
    data = arrays[0] if arrays else None
    inputs = _runtime_inputs(model)
    if data is None or data.dtype.kind != "f" or data.ndim < 3 or not inputs:
        return None
    new = np.repeat(data[..., None], 2, axis=-1) if grow else np.ascontiguousarray(data[..., 0])
    m = copy.deepcopy(model)
    shape = _runtime_inputs(m)[0].type.tensor_type.shape
    del shape.dim[:]
    for d in new.shape:
        shape.dim.add().dim_value = int(d)
    for vo in m.graph.output:
        vo.type.tensor_type.ClearField("shape")  # rank and sizes follow from the new input
    del m.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    except Exception:
        return None  # the operator does not take this rank
    for vo, got in zip(m.graph.output, inferred.graph.output):
        if got.type.tensor_type.HasField("shape"):
            vo.type.tensor_type.shape.CopyFrom(got.type.tensor_type.shape)
    return m, [new] + list(arrays[1:])


def _older_opsets(model, node, domain: str) -> list[int]:
    declared = next((o.version for o in model.opset_import if (o.domain or "") == domain), None)
    if declared is None:
        return []
    schemas = [s for s in _schemas(node.op_type, domain) if s.since_version <= declared]
    # every older version may be reached (converters keep `_impl_v1` for the attribute forms, Clip-6's min/max); a
    # version the reference cannot evaluate is dropped by validate(). Versions where the operator's form changed
    # (inputs or attributes, as an `_impl_vN` split would) come first, newest first, then the first version (what
    # `_impl_v1` converts), then the others.
    form = [(tuple(p.name for p in s.inputs), tuple(sorted(s.attributes))) for s in schemas]
    older = list(range(len(schemas) - 2, -1, -1))
    ranked = [i for i in older if form[i] != form[i + 1]] + [0] + [i for i in older if form[i] == form[i + 1]]
    ranked = list(dict.fromkeys(i for i in ranked if i in older))
    return sorted((schemas[i].since_version for i in ranked[:OLDER_OPSETS]), reverse=True)


def _at_opset(model, version: int, domain: str, op_type: str):
    """The model declared at ``version``: converted where onnx has an adapter, else re-declared with the constant
    inputs that schema takes as attributes moved into them (Clip-6 min/max, Pad-2 pads, Squeeze-11 axes ...)."""
    from onnx import version_converter
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if domain == "":
                return version_converter.convert_version(model, version)
    except Exception:
        pass
    m = copy.deepcopy(model)
    for o in m.opset_import:
        if (o.domain or "") == domain:
            o.version = version
    old = next((s for s in reversed(_schemas(op_type, domain)) if s.since_version <= version), None)
    if old is not None:
        _inputs_to_attributes(m, _main_node(m, op_type), old)
    return m


RENAMED_ATTRIBUTES = {("Pad", "constant_value"): "value"}  # input name -> the attribute it was before


def _inputs_to_attributes(model, node, schema) -> None:
    """Constant inputs of ``node`` that ``schema`` (an older version) has as attributes of the same name, moved there;
    the newest schema names the inputs. Inputs it cannot move (fed at run time) stay: validation then drops it."""
    from onnx import AttributeProto, helper, numpy_helper
    newest = _schemas(node.op_type, node.domain or "")[-1]
    formal = [p.name for p in newest.inputs]
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consts.update({n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node
                   if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"})
    keep = []
    for pos, name in enumerate(node.input):
        param = formal[pos] if pos < len(formal) else None
        param = RENAMED_ATTRIBUTES.get((node.op_type, param), param)
        attr = schema.attributes.get(param) if param and pos >= len(schema.inputs) else None
        if attr is not None and not name:
            continue  # an optional input left out: the attribute keeps its default
        if attr is None or name not in consts:
            keep.append(name)
            continue
        value = np.asarray(consts[name])
        kind = {AttributeProto.INTS: lambda v: [int(x) for x in v.ravel()],
                AttributeProto.FLOATS: lambda v: [float(x) for x in v.ravel()],
                AttributeProto.INT: lambda v: int(v.ravel()[0]),
                AttributeProto.FLOAT: lambda v: float(v.ravel()[0])}.get(attr.type)
        if kind is None or (attr.type in (AttributeProto.INT, AttributeProto.FLOAT) and value.size != 1):
            keep.append(name)
            continue
        node.attribute.append(helper.make_attribute(param, kind(value), attr_type=attr.type))
    del node.input[:]
    node.input.extend(keep)
    used = {i for n in model.graph.node for i in n.input}
    for t in [t for t in model.graph.initializer if t.name not in used]:
        model.graph.initializer.remove(t)
    for n in [n for n in model.graph.node if n.op_type == "Constant" and n.output[0] not in used]:
        model.graph.node.remove(n)


def _optional_tail(node, schema) -> int:
    """How many of the node's trailing inputs are optional in its schema (0 when none)."""
    import onnx.defs
    formal = list(schema.inputs)
    n = 0
    for pos in range(len(node.input) - 1, -1, -1):
        param = formal[min(pos, len(formal) - 1)] if formal else None
        if param is None or param.option != onnx.defs.OpSchema.FormalParameterOption.Optional:
            break
        n += 1
    return n


def candidates(inst: Instance) -> Iterator[tuple[str, str, object, list[np.ndarray]]]:
    """(kind, detail, model, input arrays) variants of one ONNX instance, before validation."""
    import onnx.defs
    model = _model(inst)
    op_type = inst.op.split("::", 1)[-1].split(".")[0]
    try:
        node = _main_node(model, op_type)
    except StopIteration:
        return
    domain = node.domain or ""
    arrays = inst.input_arrays()
    n_in = len(_runtime_inputs(model))
    consts = set(range(1, n_in))
    const_form = None
    if consts:
        const_form = _as_constants(model, arrays, consts, "initializer")
        yield ("initializer", f"inputs {sorted(consts)} as initializers", *const_form)
        yield ("constant_node", f"inputs {sorted(consts)} as Constant nodes",
               *_as_constants(model, arrays, consts, "constant"))
        exported = _exported_params(model, arrays, consts, op_type)
        if exported is not None:
            yield ("exported_params", f"inputs {sorted(consts)} as exporter-named initializers shared by two "
                   "nodes, imported as parameters", *exported)
    if n_in >= 2:
        yield ("all_initializers", "every input an initializer", *_as_constants(model, arrays, set(range(n_in)),
                                                                              "initializer"))
    base_model, base_arrays = const_form or (model, arrays)
    for kind, axes in (("symbolic_batch", "the leading dim"), ("symbolic_dims", "every dim > 1")):
        symbolic = _symbolic(model, leading_only=kind == "symbolic_batch")
        if symbolic is not None:
            yield (kind, f"{axes} of the floating-point inputs symbolic", symbolic, arrays)
    for grow in (False, True):
        ranked = _ranked(model, arrays, grow)
        if ranked is not None:
            yield ("rank", f"data input of rank {ranked[1][0].ndim}", *ranked)
    for version in _older_opsets(model, node, domain):
        yield ("opset", f"opset {version}", _at_opset(base_model, version, domain, op_type), base_arrays)
    declared = next((o.version for o in model.opset_import if (o.domain or "") == domain), None)
    try:
        schema = onnx.defs.get_schema(op_type, declared, domain) if declared else None
    except Exception:
        schema = None
    if schema is None:
        return
    tail = _optional_tail(node, schema)
    runtime = [i.name for i in _runtime_inputs(model)]
    for k in range(1, tail + 1):
        dropped = list(node.input[len(node.input) - k:])
        if any(d and d not in runtime for d in dropped):
            continue  # an optional input fed by another node: keep the case as it is
        m = copy.deepcopy(model)
        mn = _main_node(m, op_type)
        del mn.input[len(mn.input) - k:]
        keep = [pos for pos, name in enumerate(runtime) if name not in dropped]
        for vi in [vi for vi in m.graph.input if vi.name in dropped]:
            m.graph.input.remove(vi)
        yield ("optional_absent", f"optional inputs {dropped} left out", m, [arrays[p] for p in keep])
    defaults = {name for name, attr in schema.attributes.items() if attr.default_value.name}
    for attr in node.attribute:
        if attr.name in defaults:
            m = copy.deepcopy(model)
            mn = _main_node(m, op_type)
            mn.attribute.remove(next(a for a in mn.attribute if a.name == attr.name))
            yield ("attribute_default", f"attribute {attr.name} left to its default", m, arrays)


def validate(inst: Instance, kind: str, model, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The variant's expected outputs; raises ValueError (with a reason) for a variant that is not a valid case."""
    import onnx
    from onnx.reference import ReferenceEvaluator
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:
        raise ValueError(f"{kind}:invalid-model") from e
    names = [i.name for i in _runtime_inputs(model)]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            got = [np.asarray(o) for o in ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))]
    except Exception as e:
        raise ValueError(f"{kind}:reference-failed") from e
    expected = inst.expected_arrays()
    if kind in PRESERVING and expected is not None:
        if len(got) != len(expected) or any(
                g.shape != e.shape or g.dtype != e.dtype
                or not np.allclose(g, e, rtol=1e-4, atol=1e-5, equal_nan=True)
                for g, e in zip(got, expected) if e.dtype.kind in "biufc"):
            raise ValueError(f"{kind}:changed-outputs")
        return [np.asarray(e) for e in expected]
    if any(g.dtype.kind not in "biufc" for g in got):
        raise ValueError(f"{kind}:unstorable-output")
    if got and all(g.dtype.kind in "fc" and g.size and np.isnan(g).all() for g in got):
        raise ValueError(f"{kind}:all-nan-output")
    return got


def variant_instance(inst: Instance, kind: str, detail: str, model, arrays: list[np.ndarray],
                     expected: list[np.ndarray]) -> Instance:
    store = {f"in:{i}": np.asarray(a) for i, a in enumerate(arrays)}
    store.update({f"expected:{i}": np.asarray(e) for i, e in enumerate(expected)})
    store["model"] = np.frombuffer(model.SerializeToString(), dtype=np.uint8).copy()
    op_type = inst.op.split("::", 1)[-1].split(".")[0]
    node = _main_node(model, op_type)
    call = {**inst.call, "opset": {o.domain or "ai.onnx": o.version for o in model.opset_import}, "variant": kind}
    return Instance(op=inst.op, framework="onnx", call=call, inputs=[TensorSpec.of(a) for a in arrays],
                    params={a.name: attribute_value(a) for a in node.attribute},
                    origin=Origin("onnx_variants", f"{inst.origin.test} [{kind}: {detail}]", inst.origin.library),
                    seed=inst.seed, arrays=store)


@register
class OnnxVariantSource(VariantSource):
    name = "onnx_variants"
    framework = "onnx"
    description = ("onnx_node cases with inputs as initializers / Constant nodes, at older opsets, with optional "
                   "inputs and attributes left out (validated with onnx.reference)")
    default_limit_per_op = None
    bases = ("onnx_node",)
    kinds = KINDS
    variants_per_op = 24

    def library_versions(self) -> dict[str, str]:
        return {"onnx": dist_version("onnx")}

    def candidates(self, inst: Instance):
        for kind, detail, model, arrays in candidates(inst):
            yield kind, (detail, model, arrays)

    def build(self, inst: Instance, kind: str, payload) -> Instance:
        detail, model, arrays = payload
        expected = validate(inst, kind, model, arrays)
        return variant_instance(inst, kind, detail, model, arrays, expected)
