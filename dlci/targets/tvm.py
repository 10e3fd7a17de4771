"""Apache TVM (Relax) targets: one per frontend entry point; all compile for llvm and run on the Relax VM."""
from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from dlci.errors import chain
from dlci.models.convert import flatten_outputs
from dlci.targets._common import NOT_SUPPORTED, raised_in, tvm_nodes
from dlci.targets.base import Target, register


class _TVM(Target):
    package = "apache-tvm"
    modules = ("tvm",)
    test_style = "tvm"

    def fingerprint(self, converted: Any) -> str | None:
        import tvm_ffi  # TVM 0.27: structural hashing lives in its FFI package
        return f"{tvm_ffi.structural_hash(converted) & 0xFFFFFFFFFFFFFFFF:016x}"

    def graph_nodes(self, converted: Any) -> list[str] | None:
        return tvm_nodes(converted)

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        import tvm.error
        for e in chain(exc):
            # OpNotImplemented: ops missing from the ONNX/TFLite convert maps; AttributeUnImplemented: attr values
            if isinstance(e, (tvm.error.OpNotImplemented, tvm.error.OpAttributeUnImplemented)):
                return True
        if stage != "convert" or not raised_in(exc, ("tvm",)):
            return False
        msg = str(exc)
        # torch translators: `assert not missing, f"Unsupported function types [...]"` and friends
        if msg.startswith(("Unsupported function types", "Unsupported module type", "Unsupported function target")):
            return True
        # explicit rejections of a dtype/attribute value: "Unsupported rounding_mode: ...", "... not supported"
        return isinstance(exc, (ValueError, TypeError, NotImplementedError, AssertionError)) and bool(
            NOT_SUPPORTED.search(msg))

    def unsupported_operators(self, message: str) -> set[str]:
        # the torch translators: "Unsupported function types ['erfinv.default', 'histc']" (a default overload only:
        # another overload of the operator may be supported)
        bare = (n.removesuffix(".default") for n in self.unsupported_nodes(message))
        return {n for n in bare if "." not in n}

    def unsupported_nodes(self, message: str) -> set[str]:
        listed = re.search(r"Unsupported function types \[([^\]]*)\]", message)
        nodes = set(re.findall(r"'([\w.]+)'", listed.group(1))) if listed else set()
        if "Unsupported input kind: InputKind.TOKEN" in message:
            # an effect token is the program's input because a node runs with effects (torch.linalg.inv's error
            # check after decomposition): that node's member brings it, alone as packed
            nodes.add("with_effects")
        return nodes

    def is_harness_failure(self, exc: BaseException) -> bool:
        # a checkout's python/ over the installed wheel without the wheel's headers or native library
        return any(re.search(r"Cannot find (TVM include path|libtvm)", str(e)) for e in chain(exc))

    def compile(self, mod: Any) -> Any:
        import tvm
        ex = tvm.compile(mod, target="llvm")
        return tvm.relax.VirtualMachine(ex, tvm.cpu())

    def run(self, vm: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import tvm
        out = vm["main"](*[tvm.runtime.tensor(np.require(x, requirements="C")) for x in inputs])
        # a single Tensor or an Array (possibly nested): both flatten to the list of outputs
        return flatten_outputs(out)


@register
class TVMFromExportedProgram(_TVM):
    name = "tvm.from_exported_program"
    frameworks = ("torch",)
    form = "exported_program"
    batch_size = 16  # run_decompositions' fixed cost (~0.3 s) paid once per batch: benchmarks/throughput.py
    reaches = ("tvm:frontend.exported_program", "tvm:relax", "tvm:topi", "tvm:tir", "tvm:codegen.llvm",
               "pytorch:eager", "pytorch:export", "pytorch:decompositions")

    options = {"run_ep_decomposition": (False,)}  # torch's decompositions off: the converters of undecomposed ops
    stand_ins: frozenset = frozenset()       # functions whose every node converts to zeros of its shape
    stand_in_nodes: frozenset = frozenset()  # (function, node name): those nodes only (standing_in)

    def convert(self, ep: Any, inputs: Sequence[np.ndarray]) -> Any:
        from tvm.relax.frontend.torch import from_exported_program
        custom = {name: _zeros_like_node for name in self.stand_ins}
        for function in {f for f, _ in self.stand_in_nodes} - set(custom):
            custom[function] = _zeros_for_nodes(function, frozenset(n for f, n in self.stand_in_nodes
                                                                    if f == function))
        if self.chosen.get("run_ep_decomposition") is False:  # as a user who turns them off imports it
            return from_exported_program(ep, run_ep_decomposition=False, custom_convert_map=custom)
        if _decomposes_itself(ep):  # what TVM would do first, done here once per program (models.torch_export)
            from dlci.models.torch_export import decomposed
            return from_exported_program(decomposed(ep), run_ep_decomposition=False, custom_convert_map=custom)
        return from_exported_program(ep, custom_convert_map=custom)

    def stand_in_graph(self, ep: Any) -> Any:
        if not _decomposes_itself(ep):  # TVM decomposes it on each call: names not read from a kept graph
            return None
        from dlci.models.torch_export import decomposed
        return decomposed(ep).graph

    def standing_in(self, names: set[str], nodes: frozenset = frozenset()) -> "Target | None":
        import copy
        stand_in = copy.copy(self)
        stand_in.stand_ins, stand_in.stand_in_nodes = frozenset(names), frozenset(nodes)
        return stand_in


def _zeros_like_node(node: Any, importer: Any) -> Any:
    """A stand-in for a node TVM cannot convert: zeros of its shape and type (a tuple of them for several
    outputs), from torch.export's metadata. A symbolic shape raises, and the batch is packed again instead."""
    from tvm import relax

    def zeros(v):
        return relax.op.zeros(relax.ShapeExpr([int(d) for d in v.shape]), importer._convert_data_type(str(v.dtype)))
    val = node.meta["val"]
    if isinstance(val, (list, tuple)):
        return importer.block_builder.emit(relax.Tuple([zeros(v) for v in val]))
    return importer.block_builder.emit(zeros(val))


def _zeros_for_nodes(function: str, names: frozenset) -> Any:
    """A converter for ``function`` that stands in for the nodes named (:func:`_zeros_like_node`) and converts
    its other nodes as TVM does: a custom converter replaces TVM's own for every node of the function."""
    def convert(node: Any, importer: Any) -> Any:
        if node.name in names:
            return _zeros_like_node(node, importer)
        own = importer.__dict__.get("_dlci_own_converters")
        if own is None:  # TVM's map as it builds it, before the custom converters replaced entries of it
            own = importer.__dict__["_dlci_own_converters"] = importer.create_convert_map()
        return own[function](node)
    return convert


def _decomposes_itself(ep: Any) -> bool:
    """Whether TVM's from_exported_program runs torch's default decomposition on ``ep`` before translating it (as
    it decides: unless a buffer, parameter or constant is not a strided tensor); False where this TVM cannot be told
    not to."""
    import inspect
    import itertools

    import torch
    from tvm.relax.frontend.torch import from_exported_program
    if "run_ep_decomposition" not in inspect.signature(from_exported_program).parameters:
        return False

    def sparse(t) -> bool:
        try:
            return isinstance(t, torch.Tensor) and t.layout != torch.strided
        except RuntimeError:
            return False
    # TVM's own check is a function local to from_exported_program (_has_sparse_tensors): not importable
    tensors = itertools.chain((t for _, t in ep.named_buffers()), (t for _, t in ep.named_parameters()),
                              ep.constants.values(), getattr(ep, "tensor_constants", {}).values())
    return not any(sparse(t) for t in tensors)


@register
class TVMFromFX(_TVM):
    name = "tvm.from_fx"
    frameworks = ("torch",)
    form = "fx_graph"
    batch_size = 16  # 64 opinfo tests: 1.35x packed (an fx import is cheap alone; half of them unsupported)
    reaches = ("tvm:frontend.fx", "tvm:relax", "tvm:topi", "tvm:tir", "tvm:codegen.llvm", "pytorch:eager", "pytorch:fx")

    def convert(self, gm: Any, inputs: Sequence[np.ndarray]) -> Any:
        from tvm.relax.frontend.torch import from_fx
        info = getattr(gm, "dlci_input_info", None) or [(list(x.shape), str(x.dtype)) for x in inputs]
        return from_fx(gm, [(tuple(s), d) for s, d in info])


@register
class TVMFromONNX(_TVM):
    name = "tvm.from_onnx"
    frameworks = ("torch", "onnx")
    form = "onnx"
    # torch instances exported once per batch (the export is ~90 % of a test alone), node tests packed as ONNX
    batch_size = 16
    reaches = ("tvm:frontend.onnx", "tvm:relax", "tvm:topi", "tvm:tir", "tvm:codegen.llvm", "pytorch:eager")
    exporters = {"torch": "torch.onnx"}
    options = {"keep_params_in_input": (True,)}  # the initializers as graph inputs (another converter path)

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        from tvm.relax.frontend.onnx import from_onnx
        from dlci.models import onnx_input_names, onnx_keeps_params
        names = onnx_input_names(model)
        # concrete shapes, except for the dims the model itself declares symbolic (a dynamic batch): those are
        # imported as a user imports them, as shape variables, which is a converter path of its own
        symbolic = {vi.name for vi in model.graph.input
                    if any(d.dim_param for d in vi.type.tensor_type.shape.dim)}
        shape_dict = {n: list(x.shape) for n, x in zip(names, inputs) if n not in symbolic}
        dtype_dict = {n: str(x.dtype) for n, x in zip(names, inputs)}
        if not onnx_keeps_params(model) and not self.chosen.get("keep_params_in_input"):
            return from_onnx(model, shape_dict=shape_dict, dtype_dict=dtype_dict)
        from tvm import relax
        mod = from_onnx(model, shape_dict=shape_dict, dtype_dict=dtype_dict, keep_params_in_input=True)
        mod, params = relax.frontend.detach_params(mod)
        return mod, [p.numpy() for p in params.get("main", [])]

    def compile(self, converted: Any) -> Any:
        mod, params = converted if isinstance(converted, tuple) else (converted, [])
        return super().compile(mod), params

    def run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        vm, params = compiled
        return super().run(vm, [*inputs, *params])  # the kept parameters follow the inputs in main's signature


@register
class TVMFromTFLite(_TVM):
    name = "tvm.from_tflite"
    frameworks = ("keras", "tflite")
    form = "tflite"
    tflite_outputs = True
    reaches = ("tvm:frontend.tflite", "tvm:relax", "tvm:topi", "tvm:tir", "tvm:codegen.llvm",
               "tensorflow:lite.converter")

    def convert(self, buf: bytes, inputs: Sequence[np.ndarray]) -> Any:
        import tflite
        from tvm.relax.frontend.tflite import from_tflite
        model = tflite.Model.GetRootAsModel(buf, 0)
        return from_tflite(model)


class _TVMOnGPU:
    """TVM's GPU code generation on one of its GPU targets: the default Relax pipeline of that target (for CUDA: the
    dlight default schedules, CUDA codegen, NVRTC), the model on the device, the outputs copied back."""
    kind: str = ""
    test_style = None
    batch_size = 1  # the device oracle runs a failing model again: one test per model

    def compile(self, converted: Any) -> Any:
        import tvm
        mod, params = converted if isinstance(converted, tuple) else (converted, [])
        target = tvm.target.Target(self.kind)
        ex = tvm.compile(mod, target=target)
        return tvm.relax.VirtualMachine(ex, getattr(tvm, self.kind)(0)), params

    def run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        import tvm
        vm, params = compiled
        dev = getattr(tvm, self.kind)(0)
        out = vm["main"](*[tvm.runtime.tensor(np.require(x, requirements="C"), device=dev)
                           for x in [*inputs, *params]])
        dev.sync()
        return flatten_outputs(out)

    def device_error(self, exc: BaseException) -> str | None:
        from dlci.targets._cuda import sticky_cuda_error
        return sticky_cuda_error(exc) if self.kind == "cuda" else None

    def device_name(self) -> str:
        import tvm
        dev = getattr(tvm, self.kind)(0)
        return f"{self.kind}:0 {dev.device_name}" if dev.exist else self.kind


@register
class TVMFromONNXCUDA(_TVMOnGPU, TVMFromONNX):
    name = "tvm.from_onnx.cuda"
    device = kind = "cuda"
    probe = "tvm:cuda"
    reaches = ("tvm:relax", "tvm:topi", "tvm:tir", "tvm:tir.gpu", "tvm:codegen.cuda", "tvm:dlight", "tvm:topi.gpu",
               "tvm:runtime.cuda")


@register
class TVMFromONNXVulkan(_TVMOnGPU, TVMFromONNX):
    name = "tvm.from_onnx.vulkan"
    device = kind = "vulkan"
    probe = "tvm:vulkan"
    reaches = ("tvm:relax", "tvm:topi", "tvm:tir", "tvm:tir.gpu", "tvm:codegen.vulkan", "tvm:dlight",
               "tvm:topi.gpu", "tvm:runtime.vulkan")
