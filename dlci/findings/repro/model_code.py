"""The single-operator model as a reproducer's source: per recipe kind (:data:`MODEL_CODE`), code that defines the
instance's model and the expression that builds it, as :mod:`dlci.models` builds its forms.
"""
from __future__ import annotations

import base64
import inspect
import json

import numpy as np

from dlci.findings.repro.literals import INLINE_ELEMENTS, array_code, nested_literal, py_str
from dlci.instance import Instance, python_literal


_TORCH_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")


def torch_tensor_code(a: np.ndarray) -> str:
    """A torch.tensor literal rebuilding the array exactly (the way PyTorch's and TVM's tests spell values)."""
    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return f"{torch_tensor_code(a.astype(np.float32))}.to(torch.bfloat16)"
    if a.dtype.name not in _TORCH_DTYPES or a.size > INLINE_ELEMENTS or 0 in a.shape:
        return f"torch.from_numpy({array_code(a)})"
    values = nested_literal(a.tolist(), a.dtype)
    default = {"f": "float32", "b": "bool", "i": "int64"}.get(a.dtype.kind)  # what torch.tensor infers
    return f"torch.tensor({values}" + ("" if a.dtype.name == default else f", dtype=torch.{a.dtype.name}") + ")"


def call_arguments(values: list, kwargs: dict) -> str:
    return ", ".join([python_literal(a) for a in values] + [f"{k}={python_literal(v)}" for k, v in kwargs.items()])


def _takes_inputs_directly(call: dict, n: int) -> bool:
    """A module whose forward takes exactly the instance's tensors, in order, and nothing else: the model is the
    module itself (as dlci.models.rebuild.torch_call builds it), no wrapper needed."""
    if call.get("forward_kwargs") or call.get("forward_args", []) != [{"$t": i} for i in range(n)]:
        return False
    try:
        from dlci.instance.recipe import resolve
        params = list(inspect.signature(resolve(call["cls"]).forward).parameters.values())[1:]
    except (ImportError, AttributeError, TypeError, ValueError):
        return False
    # fx tracing makes a placeholder of every parameter: optional ones need a wrapper that leaves them out
    return len(params) == n and all(p.kind == p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params)


def torch_model(inst: Instance, class_name: str = "Model", leaf: bool = False) -> tuple[str, str]:
    """(code, expression): code that defines the instance's torch model and the expression that builds it.
    ``leaf``: a torch.nn module always sits inside a wrapper, as dlci.models' fx_graph form has it (fx traces
    through the root module but keeps a standard submodule as one call_module node)."""
    call = inst.call
    names = ", ".join(f"x{i}" for i in range(len(inst.inputs)))
    if call["kind"] == "torch_fn":
        args = call.get("args", [])
        if call["fn"].startswith("torch.Tensor.") and args:  # a method is called on its tensor (as FnCall does)
            first = call_arguments([args[0]], {})
            expr = f"{first}.{call['fn'].rsplit('.', 1)[1]}({call_arguments(args[1:], call.get('kwargs', {}))})"
        else:
            expr = f"{call['fn']}({call_arguments(args, call.get('kwargs', {}))})"
        return (f"class {class_name}(torch.nn.Module):\n    def forward(self, {names}):\n"
                f"        return {expr}\n", f"{class_name}()")
    module = f"{call['cls']}({call_arguments(call.get('args', []), call.get('kwargs', {}))})"
    state = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")}
    direct = _takes_inputs_directly(call, len(inst.inputs))
    if direct and not leaf:
        code, expr, holder = "", f"{module}.eval()", "model"
    elif direct and len(inst.inputs) == 1:  # a one-input module as a submodule: Sequential is that wrapper
        code, expr, holder = "", f"torch.nn.Sequential({module}).eval()", "model[0]"
    else:
        fwd = call_arguments(call.get("forward_args", []), call.get("forward_kwargs", {}))
        code = (f"class {class_name}(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                f"        self.m = {module}\n\n    def forward(self, {names}):\n        return self.m({fwd})\n")
        expr, holder = f"{class_name}().eval()", "model.m"
    if not state:
        return code, expr
    entries = "".join(f"    {py_str(k)}: {torch_tensor_code(v)},\n" for k, v in state.items())
    code += ("\n\n" if code else "") + f"model = {expr}\n{holder}.load_state_dict({{\n{entries}}}, strict=False)\n"
    return code, "model"


def onnx_text(model) -> str | None:
    """The model's textual form when it parses back to the same graph (the most readable form), else None. Who
    produced the model and its doc strings are left out: they change nothing it computes."""
    try:
        import onnx.parser
        import onnx.printer
        bare = type(model)()
        bare.CopyFrom(model)
        for field in ("producer_name", "producer_version", "doc_string", "metadata_props"):
            bare.ClearField(field)
        bare.graph.ClearField("doc_string")
        for node in bare.graph.node:
            node.ClearField("doc_string")
            node.ClearField("metadata_props")
        text = onnx.printer.to_text(bare)
        back = onnx.parser.parse_model(text)
        if [n.op_type for n in back.graph.node] == [n.op_type for n in model.graph.node] and \
                len(back.graph.input) == len(model.graph.input):
            return text
    except Exception:
        return None
    return None


def onnx_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    import onnx
    model = onnx.load_from_string(inst.arrays["model"].tobytes())
    text = onnx_text(model)
    if text is not None:
        return f'model = onnx.parser.parse_model("""\n{text.strip()}\n""")\n', "model"
    blob = base64.b64encode(model.SerializeToString()).decode()
    return f"model = onnx.load_from_string(base64.b64decode({blob!r}))\n", "model"


def keras_model(inst: Instance, leaf: bool = False, inputs: str = "INPUTS") -> tuple[str, str]:
    """The layer from its config with its weights, in a Keras model with static input shapes (as dlci.models
    builds the keras_model form); ``layer`` is the layer itself, ``inputs`` names the input arrays. A ``tf_fn``
    recipe: a layer class making the op call."""
    if inst.call["kind"] == "tf_fn":
        return tf_fn_model(inst, inputs)
    weights = [inst.arrays[k] for k in sorted((k for k in inst.arrays if k.startswith("weight:")),
                                               key=lambda k: int(k.split(":")[1]))]
    n = len(inst.inputs)
    config = json.dumps(inst.call.get("config", {}), sort_keys=True)
    args = inst.call.get("args")
    unpack = ""
    if args is None or args == [{"$t": i} for i in range(n)]:
        call = "layer(*inputs)"
    else:
        unpack = ", ".join(f"x{i}" for i in range(n)) + ("," if n == 1 else "") + " = inputs\n"
        call = f"layer({', '.join(python_literal(a) for a in args)})"
    code = (f"layer = {inst.call['cls']}.from_config(json.loads({config!r}))\n"
            "inputs = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=f\"in{i}\")\n"
            f"          for i, x in enumerate({inputs})]\n" + unpack +
            f"model = keras.Model(inputs, {call})\n")
    if weights:
        code += "layer.set_weights([" + ", ".join(array_code(w) for w in weights) + "])\n"
    return code, "model"


def tf_fn_model(inst: Instance, inputs: str = "INPUTS") -> tuple[str, str]:
    """One TensorFlow op call as a keras layer in a model with static input shapes (dlci.models.rebuild's TFCall)."""
    xs = ", ".join(f"x{i}" for i in range(len(inst.inputs)))
    kwargs = ", ".join(f"{k}={python_literal(v)}" for k, v in inst.call.get("kwargs", {}).items())
    code = ("class Op(keras.layers.Layer):\n"
            f"    def call(self, {xs}):\n"
            f"        return {inst.call['fn']}({kwargs})\n\n\n"
            "inputs = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=f\"in{i}\")\n"
            f"          for i, x in enumerate({inputs})]\n"
            "model = keras.Model(inputs, Op(autocast=False)(*inputs))\n")
    return code, "model"


def tflite_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """The TFLite flatbuffer itself (a quantized model is the converter's output, not rebuilt here: the script
    needs no TensorFlow)."""
    blob = base64.b64encode(np.asarray(inst.arrays["model"]).tobytes()).decode()
    lines = [blob[i:i + 100] for i in range(0, len(blob), 100)]
    return "buf = base64.b64decode(\n" + "".join(f"    {ln!r}\n" for ln in lines) + ")\n", "buf"


def torch_program_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """A user's whole PyTorch model (``FILE.py:FUNCTION``, dlci.models.program): the script imports their file and
    calls the function, then loads the weights the failing instance ran wherever they differ from the program's own
    (a search changed them)."""
    from dlci.models.program import load
    file, func = inst.call["program"].rsplit(":", 1)
    code = (f"spec = importlib.util.spec_from_file_location(\"user_model\", {py_str(file)})\n"
            "user_model = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(user_model)\n"
            f"model = user_model.{func}()[0].eval()\n")
    own = {k: v.detach().numpy() for k, v in load(inst.call["program"])[0].state_dict().items()}
    changed = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")
               and not np.array_equal(own.get(k.split(":", 1)[1]), v)}
    if changed:
        entries = "".join(f"    {py_str(k)}: {torch_tensor_code(v)},\n" for k, v in changed.items())
        code += f"model.load_state_dict({{\n{entries}}}, strict=False)\n"
    return code, "model"


def torch_graph_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """A generated graph's module, as dlci.models.graph_torch writes it (the same source the campaign ran), its
    weights as arrays."""
    from dlci.models.graph import graph_of
    from dlci.models.graph_torch import torch_source
    src, arrays = torch_source(graph_of(inst))
    weights = "".join(f"    {attr!r}: {array_code(a)},\n" for attr, a in arrays.items())
    return src + f"\n\nmodel = Graph({{\n{weights}}}).eval()\n", "model"


def torch_exported_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """A program recorded from a repository's test (dlci.models.recorded): torch.export's JSON of it, rebuilt with
    the weights as tensors (nothing unpickled); the model is its eager module."""
    from dlci.models.recorded import program_json
    program = json.dumps(program_json(inst)).encode()
    blob = base64.b64encode(program).decode()
    lines = "".join(f"    {blob[i:i + 100]!r}\n" for i in range(0, len(blob), 100))
    params = inst.call.get("parameters") or {}

    def tensors(prefix: str) -> str:
        out = ""
        for key, v in inst.arrays.items():
            if key.startswith(prefix + ":"):
                name = key.split(":", 1)[1]
                value = torch_tensor_code(v)
                if prefix == "state" and name in params:
                    value = f"torch.nn.Parameter({value}, requires_grad={bool(params[name])})"
                out += f"    {py_str(name)}: {value},\n"
        return "{\n" + out + "}" if out else "{}"
    code = ("from torch._export.serde.serialize import SerializedArtifact, deserialize\n\n"
            f"program = base64.b64decode(\n{lines})\n"
            f"state = {tensors('state')}\n"
            f"constants = {tensors('const')}\n"
            f"example = tuple(torch.from_numpy(x) for x in INPUTS)\n"
            "ep = deserialize(SerializedArtifact(program, state, constants, (example, {})))  # the test's program\n"
            "model = ep.module()\n"
            "model.__dict__.pop(\"train\", None), model.__dict__.pop(\"eval\", None)  # torch's stand-ins raise\n")
    return code, "model"


def torch_fx_model(inst: Instance, leaf: bool = False) -> tuple[str, str]:
    """A torch.fx graph recorded from a repository's test (dlci.models.recorded): a module whose forward is the
    graph's own code, with its torch.nn submodules and tensor attributes."""
    from dlci.models.recorded import fx_module
    gm = fx_module(inst)
    forward = gm.code.strip("\n")
    body = ["class Recorded(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for path, spec in (inst.call.get("modules") or {}).items():
        module = f"{spec['cls']}({call_arguments(spec.get('args', []), spec.get('kwargs', {}))})"
        body.append(f"        put(self, {py_str(path)}, {module})")
    for key, v in inst.arrays.items():
        if key.startswith("attr:"):
            body.append(f"        put(self, {py_str(key.split(':', 1)[1])}, {torch_tensor_code(v)})")
    body += ["", *("    " + ln if ln.strip() else "" for ln in forward.splitlines())]
    helper = ("def put(root, path, value):\n"
              "    *owners, leaf = path.split(\".\")\n"
              "    for name in owners:\n"
              "        if not hasattr(root, name):\n"
              "            root.add_module(name, torch.nn.Module())\n"
              "        root = getattr(root, name)\n"
              "    if isinstance(value, torch.nn.Module):\n"
              "        root.add_module(leaf, value)\n"
              "    else:\n"
              "        root.register_buffer(leaf, value)\n")
    imports = "".join(f"import {m}\n" for m in ("math", "operator") if f"{m}." in forward)
    code = imports + helper + "\n\n" + "\n".join(body) + "\n\n\nmodel = Recorded().eval()\n"
    state = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")}
    if state:
        entries = "".join(f"    {py_str(k)}: {torch_tensor_code(v)},\n" for k, v in state.items())
        code += f"model.load_state_dict({{\n{entries}}}, strict=False)\n"
    return code, "model"


MODEL_CODE = {"torch_fn": torch_model, "torch_module": torch_model, "torch_program": torch_program_model,
              "torch_graph": torch_graph_model, "torch_exported": torch_exported_model, "torch_fx": torch_fx_model,
              "onnx_model": onnx_model,
              "keras_layer": keras_model, "tf_fn": keras_model, "tflite_model": tflite_model}
FRAMEWORK_IMPORTS = {"torch": ["import torch"], "onnx": ["import onnx"],
                     "keras": ["import json", "import keras", "import tensorflow as tf"], "tflite": []}
