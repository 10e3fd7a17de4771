"""TensorFlow/Keras equivalence rules (TF 2.x with Keras 3 on the TF backend): each turns one keras layer instance
into two graphs that must agree (see dlci.rules.base).

This module declares the rules; their graphs are functions in the modules next to it (``optimization``, ``conv``,
``formula``, ``sparse``, ``image_scale``, ``batch``, ``dtypes``, ``codec``, ``pad``, ``save_load``, ``layout``,
``autograd``; shared helpers in ``common``, scaling laws in ``laws``), named by ``"module:function"`` so that
listing the rules imports no TensorFlow. Graph A is mostly the layer as recorded, called eagerly
(``common.eager``); called with ``dtype="float64"`` it builds the same layer in float64, the reference that
arbitrates float32 rounding. Applicability (``why_not``) is in ``meta``.

Category 10 (time-major vs batch-major RNNs) has no rule: Keras 3 RNN layers have no ``time_major`` argument, and
the TF API that has one, ``tf.compat.v1.nn.dynamic_rnn``, takes ``tf.compat.v1.nn.rnn_cell`` cells, which raise "not
available with Keras 3" in TF 2.16 and later.
Category "device" has no TF rule either: it needs a GPU runner.
"""
from __future__ import annotations

import dataclasses

from dlci.rules.base import Rule
from dlci.rules.tf import meta

LIB = "tensorflow"
_M = "dlci.rules.tf."
EAGER = _M + "common:eager"  # graph A of most rules: the layer as recorded, called eagerly

_XLA_UNSUPPORTED = (r"unsupported operations when trying to compile", r"No registered '\w+' OpKernel for XLA_",
                    r"XLA compilation requires", r"is not compilable", r"XLA can't deduce compile time constant",
                    r"XLA does not support", r"UnimplementedError")  # tf2xla's own "not implemented" for an op form
_SPARSE_UNSUPPORTED = (r"Attempt to convert a value \(SparseTensor", r"SparseTensor.{0,80}(not supported|unsupported)",
                       r"(does not|doesn't) support sparse", r"sparse (inputs? )?(is|are) not supported",
                       r"^TypeError: .*SparseTensor")  # an op of the layer takes no SparseTensor operand
_LAYOUT_UNSUPPORTED = (r"only supports NHWC", r"NCHW.{0,80}(not supported|unsupported)", r"data_format.{0,40}CPU",
                       r"CPU.{0,80}(NHWC|NDHWC|channels_last)")
# TF has CPU kernels of some ops for some dtypes only (MaxPool3D/AvgPool3D: no float64, no float16 MaxPool3D)
_NO_DTYPE_KERNEL = (r"Value for attr 'T' of \w+ is not in the list of allowed values",
                    r"Could not find device for node: \{\{node \w+\}\} = \w+\[[^\]]*T=DT_\w+")
# TF's CPU convolutions are NHWC-only without oneDNN (and in float64 always): channels_first then has no kernel
_NO_CPU_KERNEL = (r"only supports (the )?NHWC", r"only supports (the )?NDHWC") + _NO_DTYPE_KERNEL
_NO_GRADIENT = (r"No gradient defined for operation", r"gradient registry has no entry",
                r"LookupError: .*gradient",  # and a gradient kernel without float64 (ResizeBilinearGrad)
                r"cannot compute \w*Grad as input #\d+\(zero-based\) was expected to be a \w+ tensor",
                r"UnimplementedError",  # a gradient kernel's own "not yet supported" (depthwise backprop)
                r"not differentiable in float64 here")  # autograd.check_differentiable: no derivative to compare
_BATCH_DERIVED = "input specs (rank >= 2, batch > 1) and get_config() axis keys (no reduction over dim 0)"

_RULES = [
    Rule(name="tf.function", category="optimization", library=LIB,
         summary="tf.function traces the layer into a graph: its outputs must match eager execution",
         graph_a="the layer called eagerly", graph_b="the same layer called through tf.function",
         graph_a_fn=EAGER, graph_b_fn=_M + "optimization:graph_mode", why_not=meta.applies_any,
         derived_from="every keras layer instance"),
    Rule(name="tf.function.xla", category="optimization", library=LIB,
         summary="XLA (tf.function(jit_compile=True)) must compute what eager execution computes",
         graph_a="the layer called eagerly", graph_b="the same layer through tf.function(jit_compile=True)",
         graph_a_fn=EAGER, graph_b_fn=_M + "optimization:xla", why_not=meta.applies_any,
         unsupported=_XLA_UNSUPPORTED, timeout=300,
         derived_from="every keras layer instance; ops without an XLA kernel are unsupported (error text)"),
    Rule(name="tf.same_padding", category="same_padding", library=LIB,
         summary="padding='same' (and 'causal') is explicit padding followed by padding='valid'",
         graph_a="the layer with padding='same'/'causal'",
         graph_b="ZeroPadding*D (tf.pad with -inf for max pooling; window counts for average pooling) + "
                 "padding='valid'",
         graph_a_fn=EAGER, graph_b_fn=_M + "conv:explicit_padding", why_not=meta.applies_same_padding,
         derived_from="get_config(): padding in ('same', 'causal') with kernel_size or pool_size; rank from the "
                      "class name and data_format"),
    Rule(name="tf.dim_lift", category="dim_lift", library=LIB,
         summary="an N-D layer equals its (N+1)-D form on the input with a size-1 spatial dim",
         graph_a="the N-D layer (Conv1D, MaxPooling2D, ...)",
         graph_b="keras.layers.<(N+1)D form> with kernels given a size-1 dim",
         graph_a_fn=EAGER, graph_b_fn=_M + "conv:lifted", why_not=meta.applies_dim_lift,
         derived_from="class name rank suffix; the (N+1)-D class exists in keras.layers and its inspect.signature "
                      "takes every get_config() key; list-valued keys are one value per spatial dim"),
    Rule(name="tf.depthwise", category="depthwise", library=LIB,
         summary="a depthwise (or grouped) convolution is one plain convolution per channel group, concatenated",
         graph_a="DepthwiseConv*D / Conv*D(groups > 1)", graph_b="Conv*D per input channel / per group, "
                                                                 "concatenated, + bias",
         graph_a_fn=EAGER, graph_b_fn=_M + "conv:per_group", why_not=meta.applies_depthwise,
         derived_from="get_config(): depth_multiplier without filters (depthwise) or groups > 1 (grouped)"),
    Rule(name="tf.separable", category="separable", library=LIB,
         summary="a separable convolution is a depthwise convolution followed by a 1x1 convolution with the same "
                 "weights",
         graph_a="SeparableConv*D",
         graph_b="DepthwiseConv*D(depthwise kernel) then Conv*D(1x1 pointwise kernel, bias, activation)",
         graph_a_fn=EAGER, graph_b_fn=_M + "conv:depthwise_then_pointwise", why_not=meta.applies_separable,
         derived_from="get_config(): depth_multiplier and filters (SeparableConv1D/2D)"),
    Rule(name="tf.dilated", category="dilated", library=LIB,
         summary="a dilated convolution is an undilated one with a zero-inserted kernel",
         graph_a="the layer with dilation_rate d",
         graph_b="the layer with dilation_rate 1 and kernels (k-1)*d+1 with zeros between",
         graph_a_fn=EAGER, graph_b_fn=_M + "conv:undilated", why_not=meta.applies_dilated,
         derived_from="get_config(): kernel_size and a dilation_rate > 1"),
    Rule(name="tf.formula.activation", category="formula", library=LIB,
         summary="activation layers compute the formula their keras docstring gives",
         graph_a="ELU / LeakyReLU / PReLU / ReLU / Softmax / Activation(name)",
         graph_b="the docstring formula in float64 numpy",
         graph_a_fn=EAGER, graph_b_fn=_M + "formula:activation_formula", why_not=meta.applies_formula("activation"),
         derived_from="_tf_meta.FORMULAS['activation'] (keras docstrings) and ACTIVATION_NAMES"),
    Rule(name="tf.formula.normalization", category="formula", library=LIB,
         summary="normalization layers (inference) compute the formula their keras docstring gives",
         graph_a="BatchNormalization / LayerNormalization / GroupNormalization / RMSNormalization / "
                 "UnitNormalization",
         graph_b="the docstring formula in float64 numpy",
         graph_a_fn=EAGER, graph_b_fn=_M + "formula:normalization_formula",
         why_not=meta.applies_formula("normalization"),
         derived_from="_tf_meta.FORMULAS['normalization'] (keras docstrings)"),
    Rule(name="tf.formula.pooling", category="formula", library=LIB,
         summary="pooling layers compute window means/maxima as documented",
         graph_a="Average/Max/GlobalAverage/GlobalMax/AdaptiveAverage/AdaptiveMax pooling",
         graph_b="the windows in float64 numpy",
         graph_a_fn=EAGER, graph_b_fn=_M + "formula:pooling_formula", why_not=meta.applies_formula("pooling"),
         derived_from="_tf_meta.FORMULAS['pooling'] (keras docstrings, tf.nn.pool padding rules)"),
    Rule(name="tf.formula.linear", category="formula", library=LIB,
         summary="Dense is activation(x @ kernel + bias) and Rescaling is x * scale + offset, as documented",
         graph_a="Dense / Rescaling", graph_b="the docstring formula in float64 numpy",
         graph_a_fn=EAGER, graph_b_fn=_M + "formula:linear_formula", why_not=meta.applies_formula("linear"),
         derived_from="_tf_meta.FORMULAS['linear'] (keras docstrings)"),
    Rule(name="tf.sparse", category="sparse", library=LIB,
         summary="a layer that accepts a tf.SparseTensor must compute what it computes on the dense tensor",
         graph_a="the layer on a dense input with every third element zero",
         graph_b="the layer on tf.sparse.from_dense(input)",
         graph_a_fn=_M + "sparse:dense_input", graph_b_fn=_M + "sparse:sparse_input", why_not=meta.applies_sparse,
         unsupported=_SPARSE_UNSUPPORTED,
         derived_from="probe: every float instance; layers that reject SparseTensor inputs are unsupported "
                      "(error text)"),
    Rule(name="tf.image_scale", category="image_scale", library=LIB,
         summary="0-255 images vs normalized ones: a layer's scaling law (read off its formula) must hold",
         graph_a="the layer on x",
         graph_b="the layer on 255 * x with its input-unit parameters scaled, divided by 255 ** degree",
         graph_a_fn=EAGER, graph_b_fn=_M + "image_scale:rescaled", why_not=meta.applies_image_scale,
         derived_from="_tf_meta.SCALING (homogeneity degree and scaled config/weights per layer class, from the "
                      "formulas); HOMOGENEOUS_ACTIVATIONS"),
    Rule(name="tf.data.pipeline", category="pipeline", library=LIB,
         summary="mapping the layer over a tf.data pipeline of batches gives the direct call's outputs",
         graph_a="the layer on the whole batch",
         graph_b="tf.data.Dataset.from_tensor_slices(...).batch(2).map(layer), concatenated",
         graph_a_fn=EAGER, graph_b_fn=_M + "batch:dataset_map", why_not=meta.applies_batch,
         derived_from=_BATCH_DERIVED),
    Rule(name="tf.dtype.widen", category="dtype", library=LIB,
         summary="the same values as float32/int32 or float64/int64 inputs give bit-identical outputs (keras "
                 "autocasts)",
         graph_a="the layer on float32 / int32 inputs", graph_b="the same layer on the same values as float64 / "
                                                                "int64",
         graph_a_fn=_M + "dtypes:narrow_inputs", graph_b_fn=_M + "dtypes:wide_inputs",
         why_not=meta.applies_dtype_widen, exact=True,
         derived_from="input specs: float inputs, or integers within int32; layer.autocast"),
    Rule(name="tf.dtype.policy", category="dtype", library=LIB,
         summary="a float32 layer and its float64 twin agree on float16-representable inputs (loose float32 "
                 "tolerance)",
         graph_a="the layer with a float32 dtype policy",
         graph_b="the layer with a float64 dtype policy, rounded to float32",
         graph_a_fn=_M + "dtypes:float32_policy", graph_b_fn=_M + "dtypes:float64_policy",
         why_not=meta.applies_dtype_policy, derived_from="get_config()['dtype'] is float32 and the inputs are float"),
    Rule(name="tf.codec.png", category="codec", library=LIB,
         summary="PNG is lossless: the layer's output as an 8/16-bit image survives tf.io.encode_png -> "
                 "decode_png",
         graph_a="the output quantized to uint8 and uint16",
         graph_b="the same through tf.io.encode_png and tf.io.decode_png",
         graph_a_fn=_M + "codec:images", graph_b_fn=_M + "codec:png_round_trip", why_not=meta.applies_codec,
         exact=True, derived_from="the output's shape: rank 3/4 with 1, 3 or 4 channels (checked on the output)"),
    Rule(name="tf.pad_unpad.keras", category="pad_unpad", library=LIB,
         summary="Cropping*D undoes ZeroPadding*D exactly: the layer sees its own input",
         graph_a="the layer on x", graph_b="the layer on Cropping*D(ZeroPadding*D(x))",
         graph_a_fn=EAGER, graph_b_fn=_M + "pad:keras_unpadded", why_not=meta.applies_pad_unpad_keras, exact=True,
         derived_from="input rank 3..5 (ZeroPadding1D..3D)"),
    Rule(name="tf.pad_unpad.tf", category="pad_unpad", library=LIB,
         summary="slicing undoes tf.pad exactly: the layer sees its own input",
         graph_a="the layer on x", graph_b="the layer on tf.pad(x) sliced back",
         graph_a_fn=EAGER, graph_b_fn=_M + "pad:tf_unpadded", why_not=meta.applies_pad_unpad_tf, exact=True,
         derived_from="any input of rank >= 1"),
    Rule(name="tf.batch", category="batch", library=LIB,
         summary="in inference mode each sample's output does not depend on the rest of the batch",
         graph_a="the layer on the whole batch", graph_b="the layer on one sample at a time, concatenated",
         graph_a_fn=EAGER, graph_b_fn=_M + "batch:one_by_one", why_not=meta.applies_batch,
         derived_from=_BATCH_DERIVED),
    Rule(name="tf.save_load.keras", category="save_load", library=LIB,
         summary="model.save('x.keras') -> keras.models.load_model gives a model with the same outputs",
         graph_a="the single-layer keras model", graph_b="the same model saved and loaded (.keras)",
         graph_a_fn=_M + "save_load:keras_model", graph_b_fn=_M + "save_load:keras_file", why_not=meta.applies_any,
         exact=True, derived_from="every keras layer instance"),
    Rule(name="tf.save_load.config", category="save_load", library=LIB,
         summary="from_config(get_config()) plus set_weights(get_weights()) rebuilds the same layer",
         graph_a="the layer", graph_b="its copy through get_config/from_config and get_weights/set_weights",
         graph_a_fn=EAGER, graph_b_fn=_M + "save_load:config_copy", why_not=meta.applies_any, exact=True,
         derived_from="every keras layer instance"),
    Rule(name="tf.save_load.saved_model", category="save_load", library=LIB,
         summary="tf.saved_model.save -> tf.saved_model.load keeps the serving function's outputs",
         graph_a="the model's tf.function serving function",
         graph_b="the same after tf.saved_model.save/load (serving_default)",
         graph_a_fn=_M + "save_load:serving_function", graph_b_fn=_M + "save_load:saved_model",
         why_not=meta.batched_inputs, exact=True, derived_from="every keras layer instance"),
    Rule(name="tf.layout.data_format", category="layout", library=LIB,
         summary="channels_first and channels_last are the same layer on transposed tensors",
         graph_a="the layer with its data_format", graph_b="the layer with the other data_format on transposed "
                                                           "inputs",
         graph_a_fn=EAGER, graph_b_fn=_M + "layout:other_data_format", why_not=meta.applies_layout,
         unsupported=_LAYOUT_UNSUPPORTED, derived_from="get_config(): data_format; rank from the class name"),
    Rule(name="tf.autograd.jvp_vjp", category="autograd", library=LIB,
         summary="forward and reverse mode agree: <u, J v> (ForwardAccumulator) == <J^T u, v> (GradientTape), in "
                 "float64",
         graph_a="<u, J v> by tf.autodiff.ForwardAccumulator", graph_b="<J^T u, v> by tf.GradientTape",
         graph_a_fn=_M + "autograd:forward_mode", graph_b_fn=_M + "autograd:reverse_mode",
         why_not=meta.applies_autograd, unsupported=_NO_GRADIENT, derived_from="float inputs"),
]


def _conditioned(why_not):
    def check(inst):
        return why_not(inst) or meta.well_conditioned(inst)
    return check


# the rules that hold for a single TensorFlow op call (tf_ops) as much as for a keras layer: the others are about a
# layer's config, weights or keras serialisation
OP_CALL_RULES = {"tf.function", "tf.function.xla", "tf.autograd.jvp_vjp", "tf.save_load.saved_model"}


def _layers_only(why_not):
    def check(inst):
        if inst.call.get("kind") == "tf_fn":
            return "a TensorFlow op call, not a keras layer (no config, weights or layer serialisation)"
        return why_not(inst)
    return check


# a layer with no CPU kernel here (float64 3-D pooling, channels_first convolutions) is outside every rule's reach;
# tolerance-compared rules skip outputs that are rounding noise by construction
RULES = [dataclasses.replace(r, unsupported=tuple(dict.fromkeys(r.unsupported + _NO_CPU_KERNEL)),
                             why_not=(r.why_not if r.exact else _conditioned(r.why_not)) if r.name in OP_CALL_RULES
                             else _layers_only(r.why_not if r.exact else _conditioned(r.why_not)))
         for r in _RULES]
