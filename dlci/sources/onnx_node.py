"""``onnx_node``: the ONNX backend node test cases (``onnx.backend.test.case.node``) as ``onnx_model`` instances.

Each case's single-node ModelProto is stored as the uint8 array ``model``; its data set's inputs as ``in:<i>``
(graph input order) and the expected outputs the ONNX authors computed as ``expected:<i>``.
"""
from __future__ import annotations

import re
import warnings
from typing import Iterator

import numpy as np

from dlci.instance import STORABLE_KINDS, Instance, Origin, TensorSpec, Unencodable
from dlci.sources import Source, register
from dlci.instance.recipe import attribute_value, op_id
from dlci.sources._common import dist_version
from dlci.operators.facts import ONNX_RANDOM as _RANDOM_OPS

_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")


def value_array(v, what: str) -> np.ndarray:
    """A data-set value as a storable numpy array, or :class:`Unencodable`."""
    import onnx
    from onnx import numpy_helper
    if v is None:
        raise Unencodable(f"optional-{what}")
    if isinstance(v, list):
        raise Unencodable(f"sequence-{what}")
    if isinstance(v, onnx.TensorProto):
        v = numpy_helper.to_array(v)
    if isinstance(v, (np.generic, int, float, bool)):
        v = np.asarray(v)
    if not isinstance(v, np.ndarray):
        raise Unencodable(f"unencodable-{what}", type(v).__name__)
    if v.dtype.kind not in STORABLE_KINDS or v.dtype.kind == "V" or v.dtype.names:
        kind = "string" if v.dtype.kind in "OUS" else str(v.dtype)
        raise Unencodable(f"unsupported-dtype:{kind}")
    # ml_dtypes (bfloat16, float8, int4, ...) report kind 'V' or are not numpy builtins: npz cannot keep them
    if not v.dtype.type.__module__.startswith("numpy"):
        raise Unencodable(f"unsupported-dtype:{v.dtype}")
    return np.require(v, requirements="C")


@register
class OnnxNodeSource(Source):
    name = "onnx_node"
    framework = "onnx"
    description = "ONNX backend node test cases with their expected outputs (onnx.backend.test.case.node)"
    default_limit_per_op = None  # the suite is small: keep every case

    def library_versions(self) -> dict[str, str]:
        return {"onnx": dist_version("onnx")}

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        import onnx
        from onnx.backend.test.case import node as node_cases
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the case generators divide by zero on purpose
            cases = list(node_cases.collect_testcases(None))
        self.stats["cases_seen"] = len(cases)
        names = {c.name for c in cases}
        per_op: dict[str, int] = {}
        for case in cases:
            if _EXPANDED.search(case.name) and _EXPANDED.sub("", case.name) in names:
                self.skip("function-expansion")
                continue
            graph = case.model.graph
            if len(graph.node) != 1:
                # a multi-node case that has no single-node form is kept; its op is the node its name is about
                self.stats["multi-node-kept"] = self.stats.get("multi-node-kept", 0) + 1
            node = _main_node(case)
            oid = op_id(node)
            if not self.wanted(oid, node.op_type, case.name):
                continue
            if node.op_type in _RANDOM_OPS or "training_dropout" in case.name:
                self.skip("random-op")
                continue
            for k, (ins, outs) in enumerate(case.data_sets or []):
                if limit_per_op is not None and per_op.get(oid, 0) >= limit_per_op:
                    self.skip("over-cap")
                    continue
                inst = self._instance(case, node, oid, k, ins, outs, onnx.__version__)
                if inst is not None:
                    per_op[oid] = per_op.get(oid, 0) + 1
                    yield inst

    def _instance(self, case, node, oid, k, ins, outs, version) -> Instance | None:
        graph = case.model.graph
        inits = {i.name for i in graph.initializer}
        input_names = [i.name for i in graph.input if i.name not in inits]
        try:
            if len(ins) != len(input_names):
                raise Unencodable("input-count-mismatch")
            arrays = [value_array(v, "input") for v in ins]
            expected = [value_array(v, "output") for v in outs]
        except Unencodable as e:
            self.skip(e.reason)
            return None
        model_bytes = np.frombuffer(case.model.SerializeToString(), dtype=np.uint8).copy()
        store = {f"in:{i}": a for i, a in enumerate(arrays)}
        store.update({f"expected:{i}": a for i, a in enumerate(expected)})
        store["model"] = model_bytes
        opset = {o.domain or "ai.onnx": o.version for o in case.model.opset_import}
        return Instance(
            op=oid, framework="onnx",
            call={"kind": "onnx_model", "opset": opset, "rtol": case.rtol, "atol": case.atol},
            inputs=[TensorSpec.of(a) for a in arrays],
            params={a.name: attribute_value(a) for a in node.attribute},
            origin=Origin("onnx_node", f"onnx.backend.test.case.node:{case.name}#{k}", f"onnx {version}"),
            arrays=store,
        )


def _main_node(case):
    nodes = list(case.model.graph.node)
    if len(nodes) == 1:
        return nodes[0]
    key = case.name.replace("test_", "").replace("_", "").lower()
    for n in nodes:
        if n.op_type.lower() in key:
            return n
    return nodes[-1]
