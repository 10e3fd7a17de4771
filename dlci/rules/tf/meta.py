"""What the TensorFlow/Keras rules know about keras layers, as data: where each rule applies and why.

Applicability is read from the instance itself (the layer's ``get_config()`` keys, its class name's rank suffix,
its input specs) and from keras' own API (``inspect.signature`` of the sibling classes), so a layer keras adds
tomorrow is covered when it has the same shape of configuration. Two tables are documentation turned
into data: ``FORMULAS`` below (which layers have a formula in their keras docstring, and where it is) and
``dlci.rules.tf.laws.SCALING`` (how a layer's output scales when its input is multiplied by a constant, read off
those same formulas; the image_scale rule's graph reads it too).

Importing this module imports no framework; keras is imported lazily by the checks that read its signatures.
"""
from __future__ import annotations

import functools
import inspect
import re

import numpy as np

from dlci.rules.tf.laws import SCALING

# layer class -> where its formula is written (keras 3 docstrings; dlci.rules.tf.formula holds the formula itself)
FORMULAS = {
    "activation": {
        "ELU": "keras.layers.ELU docstring: f(x) = alpha * (exp(x) - 1) for x < 0, x for x >= 0",
        "LeakyReLU": "keras.layers.LeakyReLU docstring: f(x) = negative_slope * x for x < 0, x for x >= 0",
        "PReLU": "keras.layers.PReLU docstring: f(x) = alpha * x for x < 0, x for x >= 0 (alpha: the weight)",
        "ReLU": "keras.layers.ReLU docstring: max_value above max_value, x from threshold, "
                "negative_slope * (x - threshold) below",
        "Softmax": "keras.layers.Softmax docstring: exp(x) / sum(exp(x), axis)",
        "Activation": "keras.activations.<name> docstrings (the table ACTIVATIONS in dlci.rules.tf.formula)",
    },
    "normalization": {
        "BatchNormalization": "keras.layers.BatchNormalization docstring (inference): "
                              "gamma * (x - moving_mean) / sqrt(moving_var + epsilon) + beta",
        "LayerNormalization": "keras.layers.LayerNormalization docstring: (x - mean) / sqrt(var + epsilon) * gamma "
                              "+ beta over `axis`",
        "GroupNormalization": "keras.layers.GroupNormalization docstring: mean and variance per group of channels "
                              "(and all other non-batch axes), then gamma, beta per channel",
        "RMSNormalization": "keras.layers.RMSNormalization docstring: x * rsqrt(mean(square(x)) + epsilon) * scale",
        "UnitNormalization": "keras.layers.UnitNormalization docstring: each sample scaled to L2 norm 1 over `axis`",
    },
    "pooling": {
        "AveragePooling": "keras.layers.AveragePooling*D docstrings: window means; 'same' pads as tf.nn.pool "
                          "documents and averages over the in-bounds elements",
        "MaxPooling": "keras.layers.MaxPooling*D docstrings: window maxima; 'same' windows ignore the padding",
        "GlobalAveragePooling": "keras.layers.GlobalAveragePooling*D docstrings: mean over the spatial axes",
        "GlobalMaxPooling": "keras.layers.GlobalMaxPooling*D docstrings: max over the spatial axes",
        "AdaptiveAveragePooling": "keras.layers.AdaptiveAveragePooling*D: bins floor(i*L/o) .. ceil((i+1)*L/o)",
        "AdaptiveMaxPooling": "keras.layers.AdaptiveMaxPooling*D: bins floor(i*L/o) .. ceil((i+1)*L/o)",
    },
    "linear": {
        "Dense": "keras.layers.Dense docstring: output = activation(dot(input, kernel) + bias)",
        "Rescaling": "keras.layers.Rescaling docstring: output = input * scale + offset",
    },
}

# keras.activations functions whose docstring formula dlci.rules.tf.formula implements (names as in get_config())
ACTIVATION_NAMES = (
    "linear", "relu", "relu6", "leaky_relu", "elu", "selu", "softplus", "softsign", "soft_shrink", "sparse_plus",
    "silu", "swish", "squareplus", "gelu", "celu", "tanh", "tanh_shrink", "hard_tanh", "hard_shrink", "sigmoid",
    "exponential", "hard_sigmoid", "log_sigmoid", "sparse_sigmoid", "hard_silu", "hard_swish", "mish", "softmax",
    "log_softmax",
)

# positively homogeneous activations: f(s * x) = s * f(x) for s > 0 (read off their formulas)
HOMOGENEOUS_ACTIVATIONS = (None, "linear", "relu", "leaky_relu")

# keys of a layer's config that give axes of its input (normalisations, softmax, ...)
_AXIS_KEYS = ("axis", "axes")


# -- reading an instance -------------------------------------------------------------------------------

def layer_name(inst) -> str:
    return inst.call.get("cls", "").rsplit(".", 1)[-1]


def config(inst) -> dict:
    return inst.call.get("config", {}) or {}


def spatial_rank(inst) -> int | None:
    """N of a keras ``...ND`` / ``ConvNDTranspose`` layer, from its class name."""
    m = re.search(r"(\d)D(Transpose)?$", layer_name(inst))
    return int(m.group(1)) if m else None


def _family(inst, name: str | None = None) -> str:
    """The class name without its rank: Conv2D -> Conv, Conv2DTranspose -> ConvTranspose, AveragePooling1D ->
    AveragePooling."""
    return re.sub(r"(\d)D(Transpose)?$", r"\2", name or layer_name(inst))


def single_input(inst) -> str | None:
    if len(inst.inputs) != 1:
        return f"{len(inst.inputs)} inputs: the rule rewrites one input tensor"
    return None


def float_inputs(inst) -> str | None:
    bad = [s.dtype for s in inst.inputs if not (s.dtype.startswith("float") or s.dtype == "bfloat16")]
    return f"non-float inputs ({', '.join(bad)})" if bad else None


def empty_segments(inst) -> str | None:
    """A segment reduction with an empty segment: the segment's output is a constant (0, the dtype's lowest or
    highest), and TensorFlow's forward mode (a transposed gradient) divides by the segment's count there."""
    if "Segment" not in inst.op:
        return None
    ids, num = inst.params.get("segment_ids"), inst.params.get("num_segments")
    if isinstance(ids, list) and isinstance(num, int):
        flat = {int(x) for x in np.asarray(ids).reshape(-1)}
        if len(flat & set(range(num))) < num:
            return f"an empty segment ({num} segments, ids {sorted(flat)}): no derivative of a constant to compare"
    return None


def batched_inputs(inst) -> str | None:
    """Rules that go through the one-layer keras model need a batch axis on every input (tf_ops has rank-0 ones)."""
    return "a rank-0 input: a keras model input has a batch axis" if any(
        len(s.shape) == 0 for s in inst.inputs) else None


def first(*checks) -> str | None:
    """The first reason any check gives (checks are zero-argument callables)."""
    for check in checks:
        reason = check()
        if reason:
            return reason
    return None


def spatial_layer(inst) -> str | None:
    """A layer over N spatial dims with a data_format and an input of rank N + 2."""
    n = spatial_rank(inst)
    if n is None or "data_format" not in config(inst):
        return f"{layer_name(inst)} has no spatial rank and data_format"
    if inst.inputs[0].rank != n + 2:
        return f"input rank {inst.inputs[0].rank} is not {n + 2}"
    return None


def _axes(value, rank: int) -> set[int]:
    values = value if isinstance(value, (list, tuple)) else [value]
    return {int(v) % rank for v in values if isinstance(v, int)}


def batch_independent(inst) -> str | None:
    """Splitting dim 0 must not change the maths: rank >= 2 and no config axis on dim 0."""
    if any(s.rank < 2 for s in inst.inputs):
        return "rank-1 input: no batch dimension to split"
    if any(s.shape[0] < 2 for s in inst.inputs):
        return "batch of one: nothing to split"
    rank = inst.inputs[0].rank
    for key in _AXIS_KEYS:
        if key in config(inst) and 0 in _axes(config(inst)[key], rank):
            return f"config {key}={config(inst)[key]!r} reduces over the batch dimension"
    if layer_name(inst) in ("BatchNormalization",) and config(inst).get("synchronized"):
        return "synchronized batch normalization"
    return None


# layers that subtract a per-sample mean before dividing by a standard deviation (their docstring formulas)
MEAN_SUBTRACTING = ("LayerNormalization", "GroupNormalization")


def well_conditioned(inst) -> str | None:
    """Normalising a (nearly) constant input divides float rounding of the mean by sqrt(epsilon): two correct float32
    computations then differ by the input's rounding times 1/sqrt(epsilon), and the fp64 reference cannot say which
    is right. Tolerance-compared rules skip such instances."""
    if layer_name(inst) not in MEAN_SUBTRACTING:
        return None
    for s in inst.inputs:
        if s.low is not None and s.high - s.low <= 1e-3 * max(abs(s.low), abs(s.high)) and s.high != 0:
            return (f"(nearly) constant input {s.low:g}..{s.high:g} to {layer_name(inst)}: its output is rounding "
                    "noise over sqrt(epsilon)")
    return None


# -- reading keras ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def keras_class(name: str):
    import keras
    return getattr(keras.layers, name, None)


@functools.lru_cache(maxsize=None)
def accepted_keys(name: str) -> frozenset[str] | None:
    """The constructor arguments of ``keras.layers.<name>`` plus the base Layer's config keys."""
    cls = keras_class(name)
    if cls is None:
        return None
    keys = {p.name for p in inspect.signature(cls.__init__).parameters.values()
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    base = {p.name for p in inspect.signature(keras_class("Layer").__init__).parameters.values()
            if p.kind is p.KEYWORD_ONLY}
    return frozenset(keys | base | {"name", "dtype", "trainable"})


def lifted_name(inst) -> str | None:
    n = spatial_rank(inst)
    return None if n is None else re.sub(r"\dD(Transpose)?$", lambda m: f"{n + 1}D{m.group(1) or ''}",
                                          layer_name(inst))


# -- applicability per rule ---------------------------------------------------------------------------

def applies_any(inst) -> str | None:
    return None


def applies_same_padding(inst) -> str | None:
    c = config(inst)
    return first(
        lambda: single_input(inst), lambda: float_inputs(inst), lambda: spatial_layer(inst),
        lambda: None if c.get("padding") in ("same", "causal") else f"padding={c.get('padding')!r}",
        lambda: None if ("kernel_size" in c or "pool_size" in c) else "no kernel_size/pool_size in the config",
        lambda: "transposed convolution: 'same' crops the output, there is no input padding form"
        if "Transpose" in layer_name(inst) else None)


def applies_dim_lift(inst) -> str | None:
    c, n = config(inst), spatial_rank(inst)

    def lift() -> str | None:
        target = lifted_name(inst)
        keys = accepted_keys(target) if n in (1, 2) else None
        if keys is None:
            return f"no keras.layers.{target}" if n in (1, 2) else f"{n}-D layer: no higher-rank form"
        missing = sorted(k for k in c if k not in keys)
        if missing:
            return f"keras.layers.{target} does not take {', '.join(missing)}"
        odd = sorted(k for k, v in c.items() if isinstance(v, (list, tuple))
                     and (len(v) != n or not all(isinstance(e, (int, float)) for e in v)))
        if odd:
            return f"config {', '.join(odd)} is not one value per spatial dim"
        if c.get("padding") == "causal":
            return f"padding='causal' has no {n + 1}-D form"
        return None
    return first(lambda: single_input(inst), lambda: float_inputs(inst), lambda: spatial_layer(inst), lift)


def applies_depthwise(inst) -> str | None:
    c = config(inst)

    def grouped() -> str | None:
        if "Transpose" in layer_name(inst):
            return "transposed convolution"
        if "depth_multiplier" in c and "filters" not in c:
            return None  # DepthwiseConv*D: one group per input channel
        if int(c.get("groups", 1) or 1) > 1 and "filters" in c:
            return None  # grouped Conv*D
        return "neither a depthwise convolution nor a grouped convolution (groups > 1)"
    return first(lambda: single_input(inst), lambda: float_inputs(inst), lambda: spatial_layer(inst), grouped,
                 lambda: None if accepted_keys(f"Conv{spatial_rank(inst)}D") else "no plain convolution of that rank")


def applies_separable(inst) -> str | None:
    c = config(inst)
    return first(lambda: single_input(inst), lambda: float_inputs(inst), lambda: spatial_layer(inst),
                 lambda: None if "depth_multiplier" in c and "filters" in c
                 else "not a separable convolution (depth_multiplier and filters)")


def applies_dilated(inst) -> str | None:
    c = config(inst)
    rates = c.get("dilation_rate")
    rates = list(rates) if isinstance(rates, (list, tuple)) else [rates] if rates else []
    return first(lambda: single_input(inst), lambda: float_inputs(inst), lambda: spatial_layer(inst),
                 lambda: None if "kernel_size" in c else "no kernel",
                 lambda: None if any(int(r) > 1 for r in rates) else f"dilation_rate={rates or None}: not dilated")


def _formula_family(inst, table: str) -> str | None:
    name = layer_name(inst)
    table_ = FORMULAS[table]
    if name in table_ or _family(inst) in table_:
        return None
    return f"no documented {table} formula for {name}"


def applies_formula(table: str):
    def check(inst) -> str | None:
        c = config(inst)

        def specifics() -> str | None:
            name = layer_name(inst)
            act = c.get("activation")
            if name == "Activation" and act not in ACTIVATION_NAMES:
                return f"activation {act!r} has no formula in the table"
            if name == "Dense" and act not in ACTIVATION_NAMES + (None,):
                return f"activation {act!r} has no formula in the table"
            if name == "LayerNormalization" and c.get("rms_scaling"):
                return "rms_scaling=True is deprecated and documented as not matching its formula"
            if name == "Dense" and c.get("lora_rank"):
                return "LoRA-adapted Dense"
            if _family(inst).startswith(("Average", "Max", "Global", "Adaptive")) and spatial_layer(inst):
                return spatial_layer(inst)
            return None
        return first(lambda: single_input(inst), lambda: float_inputs(inst),
                     lambda: _formula_family(inst, table), specifics)
    return check


def applies_sparse(inst) -> str | None:
    return first(lambda: float_inputs(inst),
                 lambda: "rank-0 input" if any(s.rank == 0 for s in inst.inputs) else None)


def applies_image_scale(inst) -> str | None:
    name, c = layer_name(inst), config(inst)

    def law() -> str | None:
        rule = SCALING.get(name)
        if rule is None:
            return f"{name} has no scaling law in the table (not positively homogeneous)"
        if rule.get("activation") and c.get("activation") not in HOMOGENEOUS_ACTIVATIONS:
            return f"activation {c.get('activation')!r} is not positively homogeneous"
        return None
    return first(lambda: float_inputs(inst), law, lambda: half_precision(inst))


def policy_name(inst) -> str:
    policy = config(inst).get("dtype")
    name = policy.get("config", {}).get("name") if isinstance(policy, dict) else policy
    return name or "float32"


def half_precision(inst) -> str | None:
    """255-scaled intermediates (squares of 0-255 values, ...) overflow float16's range (65504)."""
    half = sorted({d for d in [s.dtype for s in inst.inputs] + [policy_name(inst)] if "float16" in d})
    return f"16-bit floats ({', '.join(half)}) cannot hold 255-scaled values" if half else None


def applies_batch(inst) -> str | None:
    return batch_independent(inst)


def applies_dtype_widen(inst) -> str | None:
    for s in inst.inputs:
        if s.dtype in ("int64", "uint32", "int32"):
            if s.low is not None and not (-2**31 <= s.low and s.high < 2**31):
                return "integer values beyond int32"
        elif not s.dtype.startswith("float"):
            return f"input dtype {s.dtype}"
    return None


def applies_dtype_policy(inst) -> str | None:
    name = policy_name(inst)
    return first(lambda: float_inputs(inst),
                 lambda: None if name == "float32" else f"dtype policy {name!r} (the rule compares float32 with "
                                                        "float64)")


def applies_codec(inst) -> str | None:
    if any(s.rank not in (2, 3, 4, 5) for s in inst.inputs):
        return "input rank outside 2..5: no image-shaped output"
    return None


def applies_pad_unpad_keras(inst) -> str | None:
    return first(lambda: single_input(inst),
                 lambda: None if inst.inputs[0].rank in (3, 4, 5) else
                 f"rank {inst.inputs[0].rank}: keras ZeroPadding/Cropping take rank 3 to 5",
                 lambda: "empty input: Cropping*D refuses to crop a dim to size 0" if 0 in inst.inputs[0].shape
                 else None)


def applies_pad_unpad_tf(inst) -> str | None:
    return first(lambda: single_input(inst),
                 lambda: None if inst.inputs[0].rank >= 1 else "rank-0 input")


def applies_layout(inst) -> str | None:
    return first(lambda: single_input(inst), lambda: spatial_layer(inst))


def applies_autograd(inst) -> str | None:
    return float_inputs(inst) or empty_segments(inst)
