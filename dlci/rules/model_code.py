"""The model code rule graphs are written against: the instance's model as source text defining ``build_model``,
``Model``, ``to_torch``, ``STATE``, ``flatten`` and ``reference`` (torch) or ``build_layer``, ``call_layer``,
``build_keras_model``, ``keras_to_tflite``, ``flatten`` and ``reference`` (keras). The rules' workers exec it and
their reproducers paste it, so both run the same code. (Single-operator reproducers have their own, shorter form in
dlci.findings.repro.model_code.)"""
from __future__ import annotations

import json

from dlci.findings.repro.literals import array_code
from dlci.instance import Instance, python_literal

_TORCH_COMMON = '''

def to_torch(inputs):
    return [torch.from_numpy(np.array(x, copy=True)) for x in inputs]


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out.detach().resolve_conj().resolve_neg().numpy()]
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in flatten(o)]
    return []


def reference():
    """Eager PyTorch in float32, and an fp64 recomputation to arbitrate rounding."""
    with torch.no_grad():
        ref = flatten(build_model()(*to_torch(INPUTS)))
        try:
            inputs64 = [t.double() if t.is_floating_point() else t for t in to_torch(INPUTS)]
            ref64 = flatten(build_model().double()(*inputs64))
        except Exception:
            ref64 = None
    return ref, ref64
'''


def torch_fn_code(inst: Instance) -> str:
    call = inst.call
    names = [f"x{i}" for i in range(len(inst.inputs))]
    args = [python_literal(a) for a in call.get("args", [])]
    kwargs = [f"{k}={python_literal(v)}" for k, v in call.get("kwargs", {}).items()]
    return (f"class Model(torch.nn.Module):\n"
            f"    def forward(self, {', '.join(names)}):\n"
            f"        return {call['fn']}({', '.join(args + kwargs)})\n\n\n"
            f"def build_model():\n    return Model().eval()\n" + _TORCH_COMMON)


def torch_module_code(inst: Instance) -> str:
    call = inst.call
    names = [f"x{i}" for i in range(len(inst.inputs))]
    ctor = [python_literal(a) for a in call.get("args", [])] + \
        [f"{k}={python_literal(v)}" for k, v in call.get("kwargs", {}).items()]
    fwd = [python_literal(a) for a in call.get("forward_args", [])] + \
        [f"{k}={python_literal(v)}" for k, v in call.get("forward_kwargs", {}).items()]
    state = {k.split(":", 1)[1]: v for k, v in inst.arrays.items() if k.startswith("state:")}
    state_code = "{\n" + "".join(f"    {k!r}: {array_code(v)},\n" for k, v in state.items()) + "}"
    return (f"STATE = {state_code}\n\n\n"
            f"class Model(torch.nn.Module):\n"
            f"    def __init__(self):\n        super().__init__()\n        self.m = {call['cls']}({', '.join(ctor)})\n\n"
            f"    def forward(self, {', '.join(names)}):\n        return self.m({', '.join(fwd)})\n\n\n"
            f"def build_model():\n    torch.manual_seed(0)\n    model = Model()\n"
            f"    model.m.load_state_dict({{k: torch.from_numpy(v.copy()) for k, v in STATE.items()}})\n"
            f"    return model.eval()\n" + _TORCH_COMMON)



def keras_code(inst: Instance) -> str:
    weights = [inst.arrays[k] for k in sorted((k for k in inst.arrays if k.startswith("weight:")),
                                               key=lambda k: int(k.split(":")[1]))]
    cls = inst.call["cls"]
    config = json.dumps(inst.call.get("config", {}), sort_keys=True)
    n = len(inst.inputs)
    args = python_literal(inst.call.get("args", [{"$t": i} for i in range(n)]))  # tensors named x<i>
    xs = ", ".join(f"x{i}" for i in range(n)) + ("," if n == 1 else "")
    return (f"CONFIG = json.loads({config!r})\n"
            "WEIGHTS = [\n" + "".join(f"    {array_code(w)},\n" for w in weights) + "]\n\n\n"
            "def call_layer(layer, xs):\n"
            f"    ({xs}) = xs\n"
            f"    return layer(*{args})\n\n\n"
            "def build_layer(dtype=None, xs=None):\n"
            f"    config = dict(CONFIG, **({{'dtype': dtype}} if dtype else {{}}))\n"
            f"    layer = {cls}.from_config(config)\n"
            "    call_layer(layer, xs if xs is not None else INPUTS)  # builds the weights\n"
            "    if WEIGHTS:\n"
            "        layer.set_weights([w.astype(dtype) if dtype and w.dtype.kind == 'f' else w for w in WEIGHTS])\n"
            "    return layer\n\n\n" + _KERAS_COMMON)


# what every keras-form instance shares: the one-layer model, its TFLite conversion and the eager references
_KERAS_COMMON = ("def build_keras_model():\n"
                 "    # static batch size: TFLite and OpenVINO then see fully static shapes\n"
                 "    ins = [keras.Input(shape=x.shape[1:], batch_size=x.shape[0], dtype=str(x.dtype), name=f'in{i}')\n"
                 "           for i, x in enumerate(INPUTS)]\n"
                 "    layer = build_layer()\n"
                 "    return keras.Model(ins, call_layer(layer, ins))\n\n\n"
                 "def keras_to_tflite(model):\n"
                 "    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())\n\n\n"
                 "def flatten(out):\n"
                 "    if isinstance(out, (list, tuple)):\n        return [a for o in out for a in flatten(o)]\n"
                 "    return [np.asarray(out)]\n\n\n"
                 "def reference():\n"
                 "    \"\"\"The layer called eagerly, and an fp64 copy of it to arbitrate rounding.\"\"\"\n"
                 "    ref = flatten(call_layer(build_layer(), INPUTS))\n"
                 "    try:\n"
                 "        xs64 = [x.astype(np.float64) if x.dtype.kind == 'f' else x for x in INPUTS]\n"
                 "        ref64 = flatten(call_layer(build_layer('float64', xs64), xs64))\n"
                 "        ref64 = ref64 if [r.shape for r in ref64] == [r.shape for r in ref] else None\n"
                 "    except Exception:\n"
                 "        ref64 = None\n"
                 "    return ref, ref64\n")



def tf_fn_code(inst: Instance) -> str:
    """One TensorFlow op call in a keras layer (``build_layer`` ignores the dtype: the op computes in its inputs'
    dtypes, so the float64 reference is the op on float64 inputs)."""
    xs = ", ".join(f"x{i}" for i in range(len(inst.inputs)))
    kwargs = ", ".join(f"{k}={python_literal(v)}" for k, v in inst.call.get("kwargs", {}).items())
    head = ("CONFIG = {}  # an op call has no layer config or weights\n"
            "WEIGHTS = []\n\n\n"
            "class Op(keras.layers.Layer):\n"
            f"    def call(self, {xs}):\n"
            f"        {xs}{',' if len(inst.inputs) == 1 else ''} = [tf.convert_to_tensor(x) for x in ({xs},)]\n"
            f"        out = tf.nest.flatten({inst.call['fn']}({kwargs}))\n"
            "        return out[0] if len(out) == 1 else out\n\n\n"
            "def call_layer(layer, xs):\n"
            "    return layer(*xs)\n\n\n"
            "def build_layer(dtype=None, xs=None):\n"
            "    return Op(autocast=False)\n\n\n")
    return head + _KERAS_COMMON


MODEL_CODE = {"torch_fn": torch_fn_code, "torch_module": torch_module_code, "keras_layer": keras_code,
              "tf_fn": tf_fn_code}
