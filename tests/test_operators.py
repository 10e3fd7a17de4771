"""dlci.operators against the installed packages: canonical identity across torch, ONNX, TF, TFLite and keras."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dlci.operators as O
from dlci.operators import _tables as T
from dlci.operators._derive import tables

ROOT = Path(__file__).resolve().parents[1]


def known() -> frozenset[str]:
    v = O.vocabulary()
    return v["aten"] | v["torch.nn.functional"]


# -- real instances (the sources' own disk cache; module_db and onnx_node are cheap, OpInfo is filtered) --------

OPINFO_OPS = ["aten::add", "aten::addmm", "aten::addcmul", "aten::avg_pool2d", "aten::adaptive_avg_pool2d",
              "aten::max_pool2d", "aten::conv1d", "aten::conv2d", "aten::relu6", "aten::hardtanh",
              "aten::batch_norm", "aten::softplus", "aten::elu", "aten::linear"]


@pytest.fixture(scope="module")
def instances():
    from dlci.sources import load
    return {"opinfo": load("opinfo", limit_per_op=2, ops=OPINFO_OPS), "module_db": load("module_db"),
            "onnx_node": load("onnx_node")}


def ops_of(insts) -> set[str]:
    return {i.op for i in insts}


# -- the avg_pool chain in every namespace --------------------------------------------------------------------

AVG_POOL2D_NAMES = [
    ("aten::avg_pool2d", None), ("avg_pool2d.default", None), ("avg_pool2d", "aten"), ("aten.avg_pool2d", None),
    ("torch.ops.aten.avg_pool2d.default", None), ("torch.nn.functional.avg_pool2d", None), ("F.avg_pool2d", None),
    ("nn.functional.avg_pool2d", None), ("avg_pool2d", None),
    ("nn.AvgPool2d", None), ("nn::AvgPool2d", None), ("torch.nn.AvgPool2d", None),
    ("torch.nn.modules.pooling.AvgPool2d", None), ("AvgPool2d", "torch.nn"),
    ("onnx::AveragePool", None), ("AveragePool", "onnx"),
    ("AvgPool", "tf"), ("tf.nn.avg_pool2d", None), ("tf.raw_ops.AvgPool", None),
    ("AVERAGE_POOL_2D", "tflite"), ("AVERAGE_POOL_2D", None),
    ("AveragePooling2D", "keras"), ("keras::AveragePooling2D", None), ("AvgPool2D", "keras"),
    ("tf.keras.layers.AveragePooling2D", None),
]


@pytest.mark.parametrize("name,ns", AVG_POOL2D_NAMES)
def test_avg_pool2d_in_every_namespace(name, ns):
    c = O.canonical(name, ns)
    assert "avg_pool2d" in c
    assert not c & {"adaptive_avg_pool2d", "max_pool2d", "avg_pool2d_backward", "lp_pool2d"}, c


def test_dimensionless_names_cover_every_dimension_and_nothing_else():
    assert O.canonical("AveragePool", "onnx") == {"avg_pool1d", "avg_pool2d", "avg_pool3d"}
    assert O.canonical("tf.nn.avg_pool") == {"avg_pool1d", "avg_pool2d", "avg_pool3d"}
    assert O.canonical("AvgPool", "tf") == {"avg_pool2d"}  # the raw op is 2-D
    assert O.canonical("AvgPool3D", "tf") == {"avg_pool3d"}
    assert O.canonical("nn.AvgPool1d") == {"avg_pool1d"}
    assert O.canonical("GlobalAveragePool", "onnx") == {"adaptive_avg_pool1d", "adaptive_avg_pool2d",
                                                        "adaptive_avg_pool3d"}


# -- cross-framework identities -------------------------------------------------------------------------------

CROSS = {
    "conv2d": [("nn.Conv2d", None), ("F.conv2d", None), ("conv2d.default", None), ("Conv", "onnx"),
               ("Conv2D", "tf"), ("DepthwiseConv2dNative", "tf"), ("tf.nn.depthwise_conv2d", None),
               ("CONV_2D", "tflite"), ("DEPTHWISE_CONV_2D", "tflite"), ("Conv2D", "keras"),
               ("DepthwiseConv2D", "keras"), ("SeparableConv2D", "keras"), ("LazyConv2d", "torch.nn"),
               ("_FusedConv2D", "tf"), ("com.microsoft::FusedConv", None)],
    "conv_transpose2d": [("nn.ConvTranspose2d", None), ("Conv2DTranspose", "keras"), ("TRANSPOSE_CONV", "tflite"),
                         ("Conv2DBackpropInput", "tf"), ("tf.nn.conv2d_transpose", None), ("ConvTranspose", "onnx")],
    "batch_norm": [("nn.BatchNorm1d", None), ("nn.BatchNorm2d", None), ("nn::BatchNorm3d", None),
                   ("F.batch_norm", None), ("_native_batch_norm_legit_no_training.default", None),
                   ("aten::native_batch_norm", None), ("_native_batch_norm_legit.no_stats", None),
                   ("BatchNormalization", "onnx"), ("FusedBatchNormV3", "tf"), ("FusedBatchNorm", "tf"),
                   ("tf.nn.batch_normalization", None), ("BatchNormalization", "keras"), ("SyncBatchNorm", "torch.nn")],
    "linear": [("nn.Linear", None), ("F.linear", None), ("linear.default", None), ("Gemm", "onnx"),
               ("MatMul", "onnx"), ("MatMul", "tf"), ("Dense", "keras"), ("FULLY_CONNECTED", "tflite"),
               ("LazyLinear", "torch.nn")],
    "softplus": [("softplus", "aten"), ("aten::softplus", None), ("torch.nn.functional.softplus", None),
                 ("nn.Softplus", None), ("Softplus", "onnx"), ("Softplus", "tf"), ("tf.math.softplus", None),
                 ("softplus_", None), ("aten::nn.functional.softplus", None)],
    "elu": [("aten::elu", None), ("elu_", None), ("aten::elu.out", None), ("nn.ELU", None), ("Elu", "onnx"),
            ("Elu", "tf"), ("ELU", "tflite"), ("ELU", "keras"), ("tf.nn.elu", None)],
    "layer_norm": [("nn.LayerNorm", None), ("native_layer_norm.default", None), ("LayerNormalization", "onnx"),
                   ("LayerNormalization", "keras")],
    "max_pool2d": [("nn.MaxPool2d", None), ("max_pool2d_with_indices.default", None), ("MaxPool", "onnx"),
                   ("MaxPool", "tf"), ("MAX_POOL_2D", "tflite"), ("MaxPooling2D", "keras"), ("MaxPool2D", "keras")],
    "relu6": [("nn.ReLU6", None), ("F.relu6", None), ("Relu6", "tf"), ("RELU6", "tflite"), ("tf.nn.relu6", None)],
    "hardtanh": [("nn.Hardtanh", None), ("Relu6", "tf"), ("RELU6", "tflite"), ("Clip", "onnx")],
    "leaky_relu": [("nn.LeakyReLU", None), ("LeakyRelu", "onnx"), ("LeakyRelu", "tf"), ("LEAKY_RELU", "tflite"),
                   ("LeakyReLU", "keras")],
    "softmax": [("nn.Softmax", None), ("nn.Softmax2d", None), ("_softmax.default", None), ("softmax.int", None),
                ("Softmax", "onnx"), ("Softmax", "tf"), ("SOFTMAX", "tflite"), ("Softmax", "keras"),
                ("Tensor.softmax", None), ("_safe_softmax.default", None)],
    "gelu": [("nn.GELU", None), ("Gelu", "onnx"), ("com.microsoft::Gelu", None), ("GELU", "tflite"),
             ("tf.nn.gelu", None)],
    "mean": [("ReduceMean", "onnx"), ("Mean", "tf"), ("tf.math.reduce_mean", None), ("MEAN", "tflite"),
             ("mean.dim", None)],
    "sum": [("ReduceSum", "onnx"), ("Sum", "tf"), ("SUM", "tflite"), ("sum.dim_IntList", None)],
    "add": [("add.Tensor", None), ("__radd__", None), ("aten::__iadd__", None), ("add_", None),
            ("operator.add", None), ("Add", "onnx"), ("AddV2", "tf"), ("BiasAdd", "tf"), ("ADD", "tflite"),
            ("Add", "keras"), ("Sum", "onnx")],
    "div": [("true_divide", None), ("truediv", None), ("operator.truediv", None), ("__rtruediv__", None),
            ("Div", "onnx"), ("RealDiv", "tf"), ("DIV", "tflite"), ("tf.math.truediv", None)],
    "cat": [("concat", None), ("torch.concatenate", None), ("Concat", "onnx"), ("ConcatV2", "tf"),
            ("CONCATENATION", "tflite"), ("Concatenate", "keras")],
    "sigmoid": [("torch.special.expit", None), ("Sigmoid", "onnx"), ("LOGISTIC", "tflite"), ("nn.Sigmoid", None)],
    "erf": [("torch.special.erf", None), ("special_erf", None), ("Erf", "onnx"), ("Erf", "tf")],
    "adaptive_avg_pool2d": [("nn.AdaptiveAvgPool2d", None), ("_adaptive_avg_pool2d.default", None),
                            ("GlobalAveragePool", "onnx"), ("GlobalAveragePooling2D", "keras"),
                            ("AdaptiveAveragePooling2D", "keras")],
    "log_sigmoid": [("F.logsigmoid", None), ("nn.LogSigmoid", None), ("logsigmoid", None)],
    "eq": [("Equal", "onnx"), ("Equal", "tf"), ("EQUAL", "tflite"), ("tf.math.equal", None), ("__eq__", None)],
    "permute": [("Transpose", "onnx"), ("Transpose", "tf"), ("TRANSPOSE", "tflite"), ("Permute", "keras")],
}


@pytest.mark.parametrize("target,name,ns", [(t, n, ns) for t, names in CROSS.items() for n, ns in names])
def test_cross_framework_identity(target, name, ns):
    assert target in O.canonical(name, ns)


@pytest.mark.parametrize("name,ns,not_in", [
    ("add.Tensor", None, {"addmm", "addcmul", "addmv", "add_relu"}),
    ("Add", "onnx", {"addmm", "addcmul", "narrow", "linear"}),
    ("Mul", "onnx", {"addcmul", "matmul"}),
    ("nn.Conv2d", None, {"conv1d", "conv3d", "convolution", "conv_transpose2d"}),
    ("Conv", "onnx", {"conv_transpose2d"}),
    ("Equal", "onnx", {"equal"}),  # torch.equal returns one bool
    ("Mean", "onnx", {"mean"}),  # variadic elementwise mean, not the reduction
    ("Gather", "onnx", {"gather"}),  # aten::gather is GatherElements
    ("Normalization", "keras", {"norm"}),  # keras' standardising layer
    ("SELECT", "tflite", {"select"}), ("Select", "tf", {"select"}),
    ("unfold", "aten", {"im2col"}), ("F.unfold", None, {"unfold"}),
    ("relu6", None, {"hardtanh"}),  # canonical stays narrow; instances carry the lowering
    ("nn.AvgPool2d", None, {"avg_pool1d", "avg_pool3d"}),
])
def test_canonical_is_not_wider_than_the_operator(name, ns, not_in):
    c = O.canonical(name, ns)
    assert not c & not_in, c


# -- overloads, in-place variants, python spellings --------------------------------------------------------------

@pytest.mark.parametrize("name,expected", [
    ("aten::add.Tensor", "add"), ("add.out", "add"), ("add_", "add"), ("aten::add_.Tensor", "add"),
    ("torch.ops.aten.add.Scalar", "add"), ("aten.add.Tensor", "add"), ("Tensor.add_", "add"), ("__iadd__", "add"),
    ("mul.Scalar", "mul"), ("div.Tensor_mode", "div"), ("relu_", "relu"), ("torch.relu", "relu"),
    ("hardtanh_.default", "hardtanh"), ("sym_size.int", "sym_size"), ("torch.special.erfcx", "special_erfcx"),
    ("torch.linalg.det", "linalg_det"), ("torch.fft.rfft", "fft_rfft"), ("floordiv", "floor_divide"),
    ("aten::torch_ops_aten__safe_softmax_default", "softmax"), ("torch._C._nn.gelu", "gelu"),
    ("__getitem__", "getitem"), ("operator.getitem", "getitem"),
])
def test_overload_and_inplace_stripping(name, expected):
    assert expected in O.canonical(name)


@pytest.mark.parametrize("name,expected", [
    ("tvm.relax.op.nn.avg_pool2d", {"avg_pool2d"}), ("torch.nn.modules.conv.Conv2d", {"conv2d"}),
    ("nn.modules.Conv2d", {"conv2d"}), ("keras.src.layers.Dense", {"linear"}), ("op.AveragePool", {"avg_pool2d"}),
    ("tf.raw_ops.FusedBatchNormV3", {"batch_norm"}), ("tflite.BuiltinOperator.CONV_2D", {"conv2d"}),
])
def test_dotted_python_paths(name, expected):
    assert expected <= O.canonical(name)


def test_aliases_and_kernel_families_come_from_the_packages():
    t = tables()
    assert ["true_divide", "div"] in t["torch_aliases"]  # torch docstring "Alias for torch.div"
    assert O.canonical("clip") >= {"clip", "clamp"}
    assert O.canonical("_native_batch_norm_legit_functional") >= {"batch_norm"}
    assert O.canonical("native_layer_norm") >= {"layer_norm"}
    assert O.canonical("nll_loss_forward") >= {"nll_loss"}
    assert O.canonical("permute_copy") >= {"permute"}  # a view op's functional copy
    assert "index" not in O.canonical("index_copy")  # not a view op: no family
    # siblings that share one onnxscript function are not aliases of each other
    assert "upsample_nearest2d" not in O.canonical("upsample_nearest1d")


# -- ONNX <-> aten from onnxscript's torchlib -------------------------------------------------------------------

@pytest.mark.parametrize("onnx_op,aten", [
    ("AveragePool", {"avg_pool1d", "avg_pool2d", "avg_pool3d"}),
    ("MaxPool", {"max_pool1d", "max_pool2d", "max_pool3d"}),
    ("Conv", {"conv1d", "conv2d", "conv3d"}),
    ("BatchNormalization", {"native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"}),
    ("LayerNormalization", {"layer_norm"}),
    ("Softmax", {"_softmax", "softmax"}),
    ("LogSoftmax", {"_log_softmax", "log_softmax"}),
    ("Elu", {"elu"}), ("Celu", {"celu"}), ("Selu", {"selu"}), ("Erf", {"erf"}),
    ("ReduceMean", {"mean"}), ("ReduceSum", {"sum"}), ("Relu", {"relu"}),
    ("Resize", {"upsample_bilinear2d", "upsample_nearest2d"}),
    ("Clip", {"clamp", "hardtanh"}), ("Reshape", {"view", "reshape"}),
    ("InstanceNormalization", {"instance_norm"}), ("MatMul", {"mm", "bmm", "matmul"}),
])
def test_torchlib_derivation_finds_the_characteristic_op(onnx_op, aten):
    """The derived table alone (not the hand tables) links these."""
    assert aten <= set(tables()["torchlib"].get(onnx_op, ())), tables()["torchlib"].get(onnx_op)


def test_torchlib_derivation_ignores_glue():
    tl = tables()["torchlib"]
    for glue, wrong in [("Add", {"addmm", "addcmul", "narrow", "linear"}), ("Mul", {"addcmul", "elu"}),
                        ("Mod", {"roll"}), ("Cast", {"softmax"}), ("Shape", {"conv2d"})]:
        assert not set(tl.get(glue, ())) & wrong, (glue, tl.get(glue))


@pytest.mark.parametrize("onnx_op,aten", [
    ("Gemm", {"linear", "addmm", "mm"}), ("MatMul", {"matmul", "mm", "bmm"}), ("Gelu", {"gelu"}),
    ("BatchNormalization", {"batch_norm"}), ("HardSigmoid", {"hardsigmoid"}), ("HardSwish", {"hardswish"}),
    ("LeakyRelu", {"leaky_relu"}), ("PRelu", {"prelu"}), ("GroupNormalization", {"group_norm"}),
    ("RMSNormalization", {"rms_norm"}), ("LpPool", {"lp_pool2d"}), ("ConvTranspose", {"conv_transpose2d"}),
    ("Softplus", {"softplus"}), ("Softsign", {"softsign"}), ("Mish", {"mish"}), ("CumSum", {"cumsum"}),
    ("ReduceLogSumExp", {"logsumexp"}), ("TopK", {"topk"}), ("ArgMax", {"argmax"}), ("LRN", {"local_response_norm"}),
    ("Swish", {"silu"}), ("ThresholdedRelu", {"threshold"}), ("DepthToSpace", {"pixel_shuffle"}),
])
def test_onnx_names(onnx_op, aten):
    assert aten <= O.canonical(onnx_op, "onnx")


# -- coverage over the real instance sources ----------------------------------------------------------------------

def test_module_to_functional_derivation_covers_module_db(instances):
    ops = ops_of(instances["module_db"])
    assert len(ops) > 80
    unmapped = sorted(o for o in ops if not O.canonical(o) & known())
    share = 1 - len(unmapped) / len(ops)
    print(f"module_db: {len(ops) - len(unmapped)}/{len(ops)} map to a known aten/functional name; "
          f"unmapped: {unmapped}")
    assert share >= 0.95, unmapped
    assert set(unmapped) <= {"nn::Transformer", "nn::TransformerEncoderLayer", "nn::TransformerDecoderLayer",
                             "nn::TransformerEncoder", "nn::TransformerDecoder"}, unmapped


def test_module_derivation_without_exceptions():
    """Most classes are placed by the name comparison alone; the exception table stays small."""
    mm = O.module_map()
    derived = [c for c in mm if c not in T.MODULE_EXCEPTIONS and mm[c] & known()]
    assert len(derived) >= 110, len(derived)
    assert len(T.MODULE_EXCEPTIONS) <= 25
    for cls, exp in [("LeakyReLU", "leaky_relu"), ("GELU", "gelu"), ("BatchNorm2d", "batch_norm"),
                     ("LPPool2d", "lp_pool2d"), ("LogSoftmax", "log_softmax"), ("CrossEntropyLoss", "cross_entropy"),
                     ("MSELoss", "mse_loss"), ("KLDivLoss", "kl_div"), ("InstanceNorm3d", "instance_norm"),
                     ("Unfold", "im2col"), ("PixelShuffle", "pixel_shuffle"), ("Softmax2d", "softmax"),
                     ("ReflectionPad2d", "reflection_pad2d"), ("EmbeddingBag", "embedding_bag"),
                     ("LazyBatchNorm2d", "batch_norm"), ("Hardswish", "hardswish"), ("RMSNorm", "rms_norm")]:
        assert exp in mm[cls], (cls, mm[cls])


def test_onnx_node_operators_map_to_aten(instances):
    ops = ops_of(instances["onnx_node"])
    assert len(ops) > 150
    unmapped = sorted(o for o in ops if not O.canonical(o) & known())
    share = 1 - len(unmapped) / len(ops)
    print(f"onnx_node: {len(ops) - len(unmapped)}/{len(ops)} = {share:.0%} map to aten; unmapped: {unmapped}")
    assert share >= 0.75, unmapped


KERAS_TEST_LAYERS = [  # the layer classes keras' own shipped tests exercise (the keras_tests source)
    "Activation", "AdaptiveAveragePooling1D", "AdaptiveAveragePooling2D", "AdaptiveAveragePooling3D",
    "AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D", "AveragePooling1D", "AveragePooling2D",
    "AveragePooling3D", "BatchNormalization", "Conv1D", "Conv1DTranspose", "Conv2D", "Conv2DTranspose", "Conv3D",
    "Conv3DTranspose", "Dense", "ELU", "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalAveragePooling3D",
    "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GroupNormalization", "LayerNormalization",
    "LeakyReLU", "Masking", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "PReLU", "RMSNormalization", "ReLU",
    "Softmax", "SpectralNormalization", "UnitNormalization"]


def test_keras_layers_map_to_aten():
    vocab = O.vocabulary()["keras"]
    assert set(KERAS_TEST_LAYERS) <= vocab
    unmapped = sorted(n for n in KERAS_TEST_LAYERS if not O.canonical(f"keras::{n}") & known())
    print(f"keras: {len(KERAS_TEST_LAYERS) - len(unmapped)}/{len(KERAS_TEST_LAYERS)} map to aten; unmapped: {unmapped}")
    assert set(unmapped) <= {"Activation", "Masking", "SpectralNormalization"}


def test_opinfo_ids_map_to_aten(instances):
    ops = ops_of(instances["opinfo"])
    assert ops == set(OPINFO_OPS)
    assert all(O.canonical(o) & known() for o in ops)


# -- select: precision on real instances ---------------------------------------------------------------------

def _all(instances):
    return [i for src in instances.values() for i in src]


def test_select_avg_pool2d(instances):
    chosen = ops_of(O.select(_all(instances), O.canonical("avg_pool2d.default")))
    assert {"aten::avg_pool2d", "nn::AvgPool2d", "onnx::AveragePool"} <= chosen
    assert not chosen & {"aten::adaptive_avg_pool2d", "nn::AdaptiveAvgPool2d", "aten::max_pool2d", "nn::MaxPool2d",
                         "nn::AvgPool1d", "nn::AvgPool3d", "onnx::GlobalAveragePool", "onnx::MaxPool"}, chosen
    ids = ["keras::AveragePooling2D", "keras::AdaptiveAveragePooling2D", "keras::MaxPooling2D",
           "keras::AveragePooling1D"]
    assert O.select(ids, O.canonical("AveragePooling2D", "keras")) == ["keras::AveragePooling2D"]
    assert O.select(ids, O.canonical("nn.AvgPool2d")) == ["keras::AveragePooling2D"]


def test_select_add_is_not_addmm(instances):
    chosen = ops_of(O.select(_all(instances), O.canonical("add.Tensor")))
    assert {"aten::add", "onnx::Add"} <= chosen
    assert not chosen & {"aten::addmm", "aten::addcmul", "onnx::Gemm", "nn::Linear"}, chosen


def test_select_follows_lowering_but_not_siblings(instances):
    every = _all(instances)
    conv2d = ops_of(O.select(every, O.canonical("conv2d.default")))
    assert {"aten::conv2d", "nn::Conv2d", "onnx::Conv"} <= conv2d
    assert not conv2d & {"aten::conv1d", "nn::Conv1d", "nn::Conv3d", "nn::ConvTranspose2d"}, conv2d
    convolution = ops_of(O.select(every, O.canonical("convolution.default")))
    assert {"aten::conv1d", "aten::conv2d", "nn::Conv1d", "nn::Conv3d", "nn::ConvTranspose2d", "onnx::Conv",
            "onnx::ConvTranspose"} <= convolution
    # relu6 exports as hardtanh: a hardtanh change selects relu6 instances, not the other way round
    assert "aten::relu6" in ops_of(O.select(every, O.canonical("hardtanh.default")))
    assert "aten::hardtanh" not in ops_of(O.select(every, O.canonical("relu6.default")))
    # the batch-norm kernels select every batch norm
    bn = ops_of(O.select(every, O.canonical("_native_batch_norm_legit_no_training.default")))
    assert {"aten::batch_norm", "nn::BatchNorm2d", "nn::BatchNorm1d", "onnx::BatchNormalization"} <= bn
    assert not bn & {"nn::LayerNorm", "nn::GroupNorm", "onnx::LayerNormalization"}, bn
    # a linear change: torch Linear, ONNX Gemm/MatMul; not addmm instances (addmm is not linear)
    lin = ops_of(O.select(every, O.canonical("nn.Linear")))
    assert {"aten::linear", "nn::Linear", "onnx::Gemm", "onnx::MatMul"} <= lin
    assert "aten::addmm" not in lin
    assert "aten::linear" in ops_of(O.select(every, O.canonical("addmm.default")))  # linear exports to addmm


def test_instance_ops_closure():
    assert {"conv2d", "convolution", "_convolution"} <= O.instance_ops("nn::Conv2d")
    assert "conv1d" not in O.instance_ops("nn::Conv2d")
    assert {"batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm"} <= O.instance_ops(
        "keras::BatchNormalization")
    assert {"relu6", "hardtanh"} <= O.instance_ops("aten::relu6")
    assert "relu6" not in O.instance_ops("aten::hardtanh")
    assert "amax" in O.instance_ops("aten::masked_amax")  # torch.masked reductions run the plain one
    assert {"log_softmax", "nll_loss"} <= O.instance_ops("nn::CrossEntropyLoss")
    assert {"index", "slice", "select"} <= O.instance_ops("aten::__getitem__")
    for op in ("aten::elu", "nn::AvgPool2d", "onnx::AveragePool", "keras::Conv2D"):
        assert O.canonical(op) <= O.instance_ops(op)


def test_select_canonicalises_a_raw_spelling():
    ids = ["aten::add", "aten::addmm", "onnx::Add"]
    assert O.select(ids, {"aten::add"}) == O.select(ids, {"add.Tensor"}) == O.select(ids, {"add"}) == \
        ["aten::add", "onnx::Add"]


def test_select_keeps_order_and_handles_empty(instances):
    mods = instances["module_db"]
    chosen = O.select(mods, {"softplus"})
    assert chosen and all(i.op == "nn::Softplus" for i in chosen)
    assert chosen == [i for i in mods if i.op == "nn::Softplus"]
    assert O.select(mods, set()) == []
    assert O.select([], {"add"}) == []


# -- robustness and speed --------------------------------------------------------------------------------------

GARBAGE = ["", " ", "::", ":::", ".", "...", "!!@#", "a::b::c", "__", "_", "___x___", "x" * 5000, "ünïcødé",
           "Tensor.", "torch.", "aten::", "nn::", "onnx::", "keras::", "tf.", "F.", "\n\t", "1234", "2D", "V2",
           "aten::.default", "torch.nn.modules.", "com.microsoft::", "__radd", "relu__", "None", "op.", "NaN"]


@pytest.mark.parametrize("ns", [None, "any", "aten", "torch", "torch.nn", "onnx", "tf", "tflite", "keras"])
def test_garbage_names_do_not_crash(ns):
    for g in GARBAGE:
        out = O.canonical(g, ns)
        assert isinstance(out, frozenset) and out and all(isinstance(x, str) and x for x in out), (g, out)
        assert O.instance_ops(g) >= O.canonical(g)


def test_bad_arguments():
    with pytest.raises(TypeError):
        O.canonical(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        O.canonical("relu", 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("name,ns,expected", [
    ("Gelu", "com.microsoft", {"gelu"}), ("FusedConv", "com.microsoft", {"conv2d"}),
    ("AveragePool", "ai.onnx", {"avg_pool2d"}), ("AveragePool", "ONNX", {"avg_pool2d"}),
    ("Binarizer", "ai.onnx.ml", {"binarizer"}), ("add", "_operator", {"add"}), ("truediv", "_operator", {"div"}),
    ("relu", "caffe", {"relu"}), ("AVERAGE_POOL_2D", "tensorflow_lite", {"avg_pool2d"}),
    ("Conv2D", "relax", {"conv2d"}), ("aten::relu", "ov", {"relu"}), ("nms", "torchvision", {"nms"}),
])
def test_profile_namespaces(name, ns, expected):
    """Profiles pass their repository's own namespace spellings (ONNX domains, prim, tensorflow_lite)."""
    assert expected <= O.canonical(name, ns)


def test_unknown_names_normalise():
    assert O.canonical("my_custom_op.default") == {"my_custom_op"}
    assert O.canonical("FooBarBaz", "onnx") == {"foo_bar_baz"}
    assert O.canonical("SOME_NEW_OP", "tflite") == {"some_new_op"}
    assert O.canonical("MyLayer", "keras") == {"my_layer"}


def test_every_vocabulary_name_resolves_in_every_namespace():
    voc = O.vocabulary()
    assert {"aten", "torch.nn", "onnx", "tf", "tflite", "keras"} <= set(voc)
    assert len(voc["aten"]) > 1000 and len(voc["onnx"]) > 150 and len(voc["tflite"]) > 150
    assert len(voc["keras"]) > 100 and len(voc["tf"]) > 1000 and len(voc["torch.nn"]) > 100
    assert "AveragePool" in voc["onnx"] and "ai.onnx.ml::TreeEnsemble" in voc["onnx"]
    assert "AVERAGE_POOL_2D" in voc["tflite"] and "FusedBatchNormV3" in voc["tf"]
    assert "AvgPool2D" in voc["keras"] and "AvgPool2d" in voc["torch.nn"]
    t0 = time.monotonic()
    for ns, names in voc.items():
        for n in names:
            assert O.canonical(n, ns)
            assert O.canonical(n)
    assert time.monotonic() - t0 < 20


def test_hand_tables_name_real_things():
    """Every hand-kept entry points at names the installed packages know (catches typos and renames)."""
    voc = O.vocabulary()
    deliberate = {"elementwise_mean", "activation", "masking", "spectral_norm", "identity", "squared_difference",
                  "getitem"}
    torchish = known() | deliberate
    for table in (T.LOWERING, T.MODULE_EXCEPTIONS, T.FUNCTIONAL_TO_ATEN, T.FOREIGN, T.ONNX, T.TF_RAW, T.TFLITE,
                  T.KERAS, T.OPERATOR_FUNCS, T.ATEN_ALIASES):
        for key, (targets, reason) in table.items():
            assert reason.strip(), key
            for t in targets.split():
                if not t.startswith("@"):
                    assert t in torchish, (key, t)
    assert set(T.ONNX) <= voc["onnx"]
    assert set(T.TF_RAW) <= voc["tf"]
    assert set(T.TFLITE) <= voc["tflite"]
    assert set(T.KERAS) <= voc["keras"]
    assert set(T.MODULE_EXCEPTIONS) <= voc["torch.nn"]
    assert set(T.LOWERING) <= known() | {"getitem"}


def test_instance_ops_is_fast_over_many_instances(instances):
    ids = [i.op for i in _all(instances)]
    voc = O.vocabulary()
    ids += [f"aten::{n}" for n in voc["aten"]] + [f"nn::{n}" for n in voc["torch.nn"]]
    ids += [f"onnx::{n}" if "::" not in n else n for n in voc["onnx"]] + [f"keras::{n}" for n in voc["keras"]]
    O.instance_ops.cache_clear()
    t0 = time.monotonic()
    for op in ids:
        O.instance_ops(op)
    cold = time.monotonic() - t0
    many = ids * (20_000 // len(ids) + 1)
    t0 = time.monotonic()
    chosen = O.select(many, {"avg_pool2d"})
    warm = time.monotonic() - t0
    print(f"instance_ops: {len(set(ids))} distinct ids cold {cold:.3f}s; select over {len(many)} {warm:.3f}s")
    assert chosen and cold < 5 and warm < 1


def test_import_is_light_and_the_disk_cache_makes_a_warm_start_cheap(tmp_path):
    code = """
import sys, time, json
t0 = time.monotonic()
import dlci.operators as O
light = not any(m in sys.modules for m in ("torch", "onnx", "onnxscript", "tensorflow", "keras"))
assert "avg_pool2d" in O.canonical("nn.AvgPool2d") and "avg_pool2d" in O.instance_ops("onnx::AveragePool")
print(json.dumps({"light": light, "seconds": time.monotonic() - t0, "torch": "torch" in sys.modules}))
"""
    env = dict(os.environ, DLCI_CACHE_DIR=str(tmp_path))
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      check=True, cwd=ROOT).stdout) for _ in range(2)]
    print(f"cold {runs[0]['seconds']:.2f}s, warm {runs[1]['seconds']:.2f}s")
    assert runs[0]["light"] and runs[1]["light"]
    assert list(tmp_path.glob("operators-*.json"))
    assert runs[0]["torch"] and not runs[1]["torch"]  # the warm start reads the cache, imports no framework
    assert runs[0]["seconds"] < 30 and runs[1]["seconds"] < 2
