"""The hand-kept part of operator identity: only what cannot be derived from the installed packages.

Every entry is ``name: (targets, reason)`` with ``targets`` a space-separated list of canonical (aten-style)
names; keys are matched after the namespace's own normalisation (see :mod:`dlci.operators`). Entries that
the generic rules (snake-casing, token rewrites, dimension expansion, derived tables) already get right do not
belong here; ``tests/test_operators.py`` checks that each table entry resolves to known names where it should.
"""
from __future__ import annotations

# -- token rewrites (applied to snake-cased foreign names before looking them up among torch names) -----------
# (regex, replacement, reason); applied in order, each at most once per name.
TOKEN_REWRITES = [
    (r"(^|_)average(_|$)", r"\1avg\2", "ONNX/keras/TFLite spell out 'average'; torch says 'avg'"),
    (r"(^|_)pooling(\d?d?)(_|$)", r"\1pool\2\3", "keras 'Pooling' layers are torch 'pool' ops"),
    (r"(?<=.)_normalization(_|$)", r"_norm\1", "'BatchNormalization' (ONNX/keras/TF) is torch 'batch_norm' "
     "(a bare 'Normalization', keras' standardising layer, is not aten::norm)"),
    (r"(^|_)convolution(\d?d?)(_|$)", r"\1conv\2\3", "keras 'Convolution2D' aliases"),
    (r"^conv(\d)d_transpose$", r"conv_transpose\1d", "keras/TFLite put the dimension before 'Transpose'"),
    (r"^global_(avg|max)_pool", r"adaptive_\1_pool", "global pooling is adaptive pooling to output size 1"),
    (r"^reduce_", "", "ONNX/TF/TFLite reductions are named after the plain torch reduction"),
    (r"^(fused|mkl)_", "", "TF/grappler fused kernels (_FusedConv2D, FusedBatchNormV3) name the core op last"),
    (r"^lazy_", "", "torch.nn Lazy* modules infer their shapes but compute the same op"),
]

# -- python ``operator`` module / dunder names (TVM's FX map keys, ``_operator::x`` in exported graphs) --------
OPERATOR_FUNCS = {
    "truediv": ("div", "operator.truediv is true division"),
    "floordiv": ("floor_divide", "operator.floordiv"),
    "mod": ("remainder", "python % on tensors is torch.remainder"),
    "pos": ("positive", "unary +"),
    "invert": ("bitwise_not", "~ on tensors"),
    "and": ("bitwise_and", "& on tensors"),
    "or": ("bitwise_or", "| on tensors"),
    "xor": ("bitwise_xor", "^ on tensors"),
    "lshift": ("bitwise_left_shift", "<< on tensors"),
    "rshift": ("bitwise_right_shift", ">> on tensors"),
    "setitem": ("index_put", "t[i] = v"),
    "getitem": ("getitem", "t[i]; exported graphs lower it to index/slice/select (see LOWERING)"),
}

# -- torch.nn.functional / python-level torch names whose aten op is named differently (not derivable) ------
FUNCTIONAL_TO_ATEN = {
    "unique": ("_unique2 unique_dim _unique", "torch.unique is python; it calls _unique2 or unique_dim"),
    "lu": ("linalg_lu_factor_ex", "torch.lu is python over linalg_lu_factor_ex"),
    "cdouble": ("_to_copy to", "Tensor.cdouble() is a dtype conversion"),
    "cfloat": ("_to_copy to", "Tensor.cfloat() is a dtype conversion"),
    "interpolate": ("interpolate upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_linear1d "
                    "upsample_bilinear2d upsample_bicubic2d upsample_trilinear3d _upsample_nearest_exact1d "
                    "_upsample_nearest_exact2d _upsample_nearest_exact3d _upsample_bilinear2d_aa "
                    "_upsample_bicubic2d_aa", "F.interpolate dispatches on mode to the upsample_* kernels"),
    "upsample": ("@interpolate", "deprecated spelling of F.interpolate"),
    "upsample_nearest": ("upsample_nearest upsample_nearest1d upsample_nearest2d upsample_nearest3d",
                         "deprecated F.upsample_nearest"),
    "upsample_bilinear": ("upsample_bilinear upsample_bilinear2d", "deprecated F.upsample_bilinear"),
    "unfold": ("im2col", "F.unfold is im2col (aten::unfold is Tensor.unfold, a different op)"),
    "fold": ("col2im", "F.fold is col2im"),
    "multi_head_attention_forward": ("multi_head_attention_forward _native_multi_head_attention",
                                     "nn.MultiheadAttention's functional and its fused kernel"),
    "gumbel_softmax": ("gumbel_softmax", "random: no aten op of its own"),
}

# -- torch.nn module classes that the derivation (class name ~ functional name) cannot place ----------------
MODULE_EXCEPTIONS = {
    "BCELoss": ("binary_cross_entropy", "acronym of the functional name"),
    "BCEWithLogitsLoss": ("binary_cross_entropy_with_logits", "acronym of the functional name"),
    "NLLLoss2d": ("nll_loss nll_loss2d", "deprecated 2-D NLL loss"),
    "ConstantPad1d": ("pad constant_pad_nd", "F.pad(mode='constant') is aten::constant_pad_nd"),
    "ConstantPad2d": ("pad constant_pad_nd", "F.pad(mode='constant') is aten::constant_pad_nd"),
    "ConstantPad3d": ("pad constant_pad_nd", "F.pad(mode='constant') is aten::constant_pad_nd"),
    "ZeroPad1d": ("pad constant_pad_nd", "constant padding with 0"),
    "ZeroPad2d": ("pad constant_pad_nd", "constant padding with 0"),
    "ZeroPad3d": ("pad constant_pad_nd", "constant padding with 0"),
    "CircularPad1d": ("pad _pad_circular", "F.pad(mode='circular')"),
    "CircularPad2d": ("pad _pad_circular", "F.pad(mode='circular')"),
    "CircularPad3d": ("pad _pad_circular", "F.pad(mode='circular')"),
    "RNN": ("rnn_tanh rnn_relu", "nonlinearity chooses the aten op"),
    "RNNCell": ("rnn_tanh_cell rnn_relu_cell", "nonlinearity chooses the aten op"),
    "UpsamplingNearest2d": ("upsample_nearest2d", "'Upsampling' spelling"),
    "UpsamplingBilinear2d": ("upsample_bilinear2d", "'Upsampling' spelling"),
    "SyncBatchNorm": ("batch_norm", "distributed batch norm, same op on one device"),
    "MultiheadAttention": ("@multi_head_attention_forward", "camel case hides 'head'"),
    "CrossMapLRN2d": ("local_response_norm", "legacy LRN"),
    "AdaptiveLogSoftmaxWithLoss": ("log_softmax", "composite; its core op"),
    "Identity": ("identity", "no op"),
}

# -- extra aten ops an *instance* exercises once exported (torch.export core-ATen decompositions) ----------
# instance_ops() adds these; canonical() does not (a change to conv2d must not select conv1d instances, a change
# to convolution must select both).
LOWERING = {
    "conv1d": ("convolution", "CompositeImplicit: exported as aten::convolution"),
    "conv2d": ("convolution", "CompositeImplicit: exported as aten::convolution"),
    "conv3d": ("convolution", "CompositeImplicit: exported as aten::convolution"),
    "conv_transpose1d": ("convolution", "CompositeImplicit: exported as aten::convolution"),
    "conv_transpose2d": ("convolution", "CompositeImplicit: exported as aten::convolution"),
    "conv_transpose3d": ("convolution", "CompositeImplicit: exported as aten::convolution"),
    "linear": ("addmm mm", "CompositeImplicit: exported as addmm (2-D) or mm"),
    "matmul": ("mm bmm mv dot", "CompositeImplicit: dispatches on ranks"),
    "relu6": ("hardtanh", "relu6 is hardtanh(0, 6) after decomposition"),
    "instance_norm": ("batch_norm", "instance_norm runs batch_norm on a reshaped input"),
    "softmin": ("softmax", "F.softmin is softmax(-x)"),
    "cross_entropy": ("log_softmax nll_loss", "F.cross_entropy decomposes to log_softmax + nll_loss"),
    "cross_entropy_loss": ("log_softmax nll_loss", "aten's cross_entropy_loss decomposes the same way"),
    "scaled_dot_product_attention": ("_scaled_dot_product_flash_attention_for_cpu "
                                     "_scaled_dot_product_efficient_attention _scaled_dot_product_flash_attention",
                                     "SDPA picks a fused backend kernel"),
    "pad": ("constant_pad_nd reflection_pad1d reflection_pad2d reflection_pad3d replication_pad1d "
            "replication_pad2d replication_pad3d _pad_circular", "F.pad dispatches on mode"),
    "getitem": ("index slice select", "t[i] becomes index/slice/select"),
    "multi_head_attention_forward": ("linear scaled_dot_product_attention", "MHA projects then attends"),
}

# -- extra aten aliases not stated by torch docstrings or onnxscript registrations ---------------------------
# (empty: with those two sources and the family affixes below, every alias dlci needs is derived)
ATEN_ALIASES: dict[str, tuple[str, str]] = {}

# -- names shared by the foreign vocabularies (ONNX, TF, TFLite, keras), keyed by the snake-cased name --------
FOREIGN = {
    "equal": ("eq", "elementwise (torch.equal returns one bool)"),
    "greater_or_equal": ("ge", "elementwise >="),
    "less_or_equal": ("le", "elementwise <="),
    "gather": ("index_select embedding select take", "take along an axis (aten::gather is GatherElements)"),
    "transpose": ("permute transpose t", "ONNX/TF Transpose takes a full permutation"),
    "pack": ("stack", "TF Pack / TFLite PACK"),
    "unpack": ("unbind", "TF Unpack / TFLite UNPACK"),
    "expand_dims": ("unsqueeze", "TF/TFLite ExpandDims"),
    "strided_slice": ("slice", "TF/TFLite StridedSlice"),
    "bias_add": ("add", "TF BiasAdd adds a 1-D bias"),
    "add_n": ("add", "variadic sum"),
    "real_div": ("div", "TF RealDiv"),
    "truncate_div": ("div", "TF TruncateDiv (rounding_mode='trunc')"),
    "floor_div": ("floor_divide", "TF FloorDiv / TFLite FLOOR_DIV"),
    "floor_mod": ("remainder", "TF FloorMod / TFLite FLOOR_MOD"),
    "logistic": ("sigmoid", "TFLite LOGISTIC"),
    "concatenation": ("cat", "TFLite CONCATENATION"),
    "fully_connected": ("linear matmul mm addmm", "TFLite FULLY_CONNECTED"),
    "dense": ("linear matmul mm addmm", "keras Dense"),
    "mat_mul": ("matmul mm linear", "TF MatMul (2-D): keras Dense and torch Linear export to it"),
    "batch_mat_mul": ("bmm matmul", "TF BatchMatMul(V2/V3)"),
    "batch_matmul": ("bmm matmul", "TFLite BATCH_MATMUL"),
    "resize_bilinear": ("upsample_bilinear2d interpolate", "TF/TFLite bilinear resize"),
    "resize_nearest_neighbor": ("upsample_nearest2d interpolate", "TF/TFLite nearest resize"),
    "resize_bicubic": ("upsample_bicubic2d interpolate", "TF bicubic resize"),
    "mirror_pad": ("pad reflection_pad1d reflection_pad2d reflection_pad3d", "reflect/symmetric padding"),
    "pad": ("pad constant_pad_nd", "constant padding"),
    "space_to_depth": ("pixel_unshuffle", "same rearrangement"),
    "depth_to_space": ("pixel_shuffle", "same rearrangement"),
    "lrn": ("local_response_norm", "acronym"),
    "local_response_norm": ("local_response_norm", "TFLite LOCAL_RESPONSE_NORMALIZATION"),
    "l2_norm": ("normalize", "TFLite L2_NORMALIZATION"),
    "l2_normalize": ("normalize", "tf.math.l2_normalize"),
    "lp_norm": ("normalize", "ONNX LpNormalization"),
    "unit_norm": ("normalize", "keras UnitNormalization"),
    "l2_pool2d": ("lp_pool2d", "TFLite L2_POOL_2D"),
    "swish": ("silu", "x * sigmoid(x)"),
    "hard_swish": ("hardswish", "TFLite HARD_SWISH"),
    "relu6": ("relu6 hardtanh", "clip to [0, 6]"),
    "relu_n1_to_1": ("hardtanh clamp", "TFLite RELU_N1_TO_1"),
    "relu_0_to_1": ("hardtanh clamp", "TFLite RELU_0_TO_1"),
    "embedding_lookup": ("embedding", "TF/TFLite embedding lookup"),
    "cast": ("to _to_copy", "dtype conversion"),
    "depthwise_conv2d": ("conv2d", "a grouped conv2d (groups == channels)"),
    "depthwise_conv2d_native": ("conv2d", "TF raw DepthwiseConv2dNative"),
    "depthwise_conv1d": ("conv1d", "keras DepthwiseConv1D"),
    "separable_conv1d": ("conv1d", "depthwise then pointwise conv"),
    "separable_conv2d": ("conv2d", "depthwise then pointwise conv"),
    "transpose_conv": ("conv_transpose2d", "TFLite TRANSPOSE_CONV"),
    "conv2d_backprop_input": ("conv_transpose2d", "TF raw transposed conv"),
    "conv3d_backprop_input": ("conv_transpose3d", "TF raw transposed conv"),
    "range": ("arange", "ONNX Range / TF Range"),
    "fill": ("full", "TF Fill"),
    "clip_by_value": ("clamp", "tf.clip_by_value"),
    "batch_norm_with_global_normalization": ("batch_norm", "old TF batch norm"),
    "max": ("amax max", "TF Max / TFLite REDUCE_MAX reduce over axes"),
    "min": ("amin min", "TF Min / TFLite REDUCE_MIN reduce over axes"),
    "arg_max": ("argmax", "snake-casing splits it"),
    "arg_min": ("argmin", "snake-casing splits it"),
    "simple_rnn": ("rnn_tanh rnn_relu", "keras SimpleRNN"),
    "rnn": ("rnn_tanh rnn_relu", "ONNX RNN"),
    "multiply": ("mul", "keras Multiply merge layer"),
    "subtract": ("sub", "keras Subtract merge layer"),
    "average": ("elementwise_mean", "keras Average merge layer: mean of several inputs (not a reduction)"),
    "dot": ("matmul bmm", "keras Dot layer: batched dot product"),
    "zero_padding1d": ("pad constant_pad_nd", "keras ZeroPadding"),
    "zero_padding2d": ("pad constant_pad_nd", "keras ZeroPadding"),
    "zero_padding3d": ("pad constant_pad_nd", "keras ZeroPadding"),
    "up_sampling1d": ("upsample_nearest1d interpolate", "keras UpSampling1D repeats"),
    "up_sampling2d": ("upsample_nearest2d upsample_bilinear2d interpolate", "keras UpSampling2D"),
    "up_sampling3d": ("upsample_nearest3d interpolate", "keras UpSampling3D"),
    "cropping1d": ("slice", "keras Cropping"),
    "cropping2d": ("slice", "keras Cropping"),
    "cropping3d": ("slice", "keras Cropping"),
    "thresholded_relu": ("threshold", "x if x > alpha else 0"),
    "attention": ("scaled_dot_product_attention", "ONNX Attention"),
    "multi_head_attention": ("multi_head_attention_forward scaled_dot_product_attention", "keras MHA"),
}

# -- ONNX-only meanings (keys: ONNX op_type of the default domain) --------------------------------------------
ONNX = {
    "Mean": ("elementwise_mean", "variadic elementwise mean, not the torch reduction"),
    "Sum": ("add", "variadic elementwise sum, not the torch reduction"),
    "Max": ("maximum", "variadic elementwise max"),
    "Min": ("minimum", "variadic elementwise min"),
    "Mod": ("remainder fmod", "the fmod attribute chooses"),
    "Shrink": ("hardshrink softshrink", "bias/lambd attributes give either"),
    "Pad": ("pad constant_pad_nd reflection_pad1d reflection_pad2d reflection_pad3d replication_pad1d "
            "replication_pad2d replication_pad3d _pad_circular", "mode attribute"),
    "Gemm": ("linear addmm mm", "alpha*A@B + beta*C"),
    "Upsample": ("@Resize", "deprecated Resize"),
    "Resize": ("interpolate upsample_nearest1d upsample_nearest2d upsample_nearest3d upsample_linear1d "
               "upsample_bilinear2d upsample_bicubic2d upsample_trilinear3d", "mode attribute"),
    "Einsum": ("einsum", "onnxscript also lowers mT/mH to it"),
    "EyeLike": ("eye", "identity-matrix constructor"),
    "Tile": ("tile repeat", "torch.Tensor.repeat is a tile"),
    "SoftmaxCrossEntropyLoss": ("cross_entropy cross_entropy_loss", "F.cross_entropy"),
    "DFT": ("fft_fft fft_ifft fft_rfft fft_irfft _fft_c2c _fft_r2c _fft_c2r", "generic discrete Fourier transform"),
    "ConstantOfShape": ("full", "fill a shape"),
    "Shape": ("sym_size size", "shape of a tensor"),
    "MatMul": ("matmul mm bmm mv dot linear", "the core of every torch matrix product"),
    "Equal": ("eq", "elementwise (onnxscript also lowers the all-equal torch.equal to it)"),
    "And": ("logical_and", "boolean tensors"),
    "Or": ("logical_or", "boolean tensors"),
    "Not": ("logical_not", "boolean tensors"),
    "ReduceL1": ("norm linalg_vector_norm", "ord=1 norm over axes"),
    "ReduceL2": ("norm linalg_vector_norm", "ord=2 norm over axes"),
    "ScatterElements": ("scatter scatter_add scatter_reduce", "torch.scatter semantics (reduction attribute)"),
    "ScatterND": ("index_put", "t[idx] = v"),
    "Compress": ("masked_select index_select", "select by a boolean mask along an axis"),
    "QuantizeLinear": ("quantize_per_tensor quantize_per_channel", "affine quantisation"),
    "DequantizeLinear": ("dequantize", "affine dequantisation"),
}

# -- TensorFlow raw ops whose meaning differs from their python namesake ----------------------------------------
TF_RAW = {
    "AvgPool": ("avg_pool2d", "the raw op is 2-D (AvgPool3D is the 3-D one)"),
    "MaxPool": ("max_pool2d", "the raw op is 2-D (MaxPool3D is the 3-D one)"),
    "MaxPoolV2": ("max_pool2d", "window as input"),
    "MaxPoolWithArgmax": ("max_pool2d_with_indices max_pool2d", "with indices"),
    "Conv": ("conv1d conv2d conv3d convolution", "TF 2.x N-D Conv"),
    "Select": ("where", "the raw Select is a ternary where (aten::select indexes)"),
    "SplitV": ("split split_with_sizes", "split with sizes (TFLite SPLIT_V)"),
    "SelectV2": ("where", "broadcasting where"),
}

# -- TFLite builtins that the generic rules cannot place ---------------------------------------------------------
TFLITE = {
    "CONV_3D_TRANSPOSE": ("conv_transpose3d", "dimension before 'TRANSPOSE'"),
    "UNIDIRECTIONAL_SEQUENCE_LSTM": ("lstm", "TFLite LSTM"),
    "UNIDIRECTIONAL_SEQUENCE_RNN": ("rnn_tanh rnn_relu", "TFLite RNN"),
    "BIDIRECTIONAL_SEQUENCE_LSTM": ("lstm", "TFLite bidirectional LSTM"),
    "SPLIT_V": ("split split_with_sizes", "split with sizes"),
    "SELECT": ("where", "TFLite SELECT is a ternary where"),
    "SELECT_V2": ("where", "TFLite SELECT_V2 is a broadcasting where"),
    "SQUARED_DIFFERENCE": ("squared_difference", "no torch op"),
}

# -- keras layers that the generic rules cannot place (keys: class names) -------------------------------------
KERAS = {
    "Activation": ("activation", "the activation is a config value, not part of the op name"),
    "ReLU": ("relu relu6 hardtanh threshold", "max_value/threshold/negative_slope options"),
    "Softmax": ("softmax", "keras Softmax layer"),
    "Masking": ("masking", "no torch op"),
    "SpectralNormalization": ("spectral_norm", "torch.nn.utils.spectral_norm, not an op"),
    "GlobalAveragePooling1D": ("adaptive_avg_pool1d mean", "implemented as a mean over the steps"),
    "GlobalAveragePooling2D": ("adaptive_avg_pool2d mean", "implemented as a mean over space"),
    "GlobalAveragePooling3D": ("adaptive_avg_pool3d mean", "implemented as a mean over space"),
    "GlobalMaxPooling1D": ("adaptive_max_pool1d amax", "implemented as a max over the steps"),
    "GlobalMaxPooling2D": ("adaptive_max_pool2d amax", "implemented as a max over space"),
    "GlobalMaxPooling3D": ("adaptive_max_pool3d amax", "implemented as a max over space"),
}

# -- ONNX ops that onnxscript's torchlib uses only as glue: never characteristic of a decomposition ----------
ONNX_PLUMBING = frozenset("""
Shape Reshape Cast CastLike Constant ConstantOfShape Unsqueeze Squeeze Gather Concat Slice Expand Size Identity
If Loop Range Transpose Where Equal Less Greater LessOrEqual GreaterOrEqual Not And Or Flatten SequenceEmpty
SequenceInsert SplitToSequence ConcatFromSequence SequenceAt SequenceConstruct SequenceLength SequenceMap
OptionalHasElement OptionalGetElement Optional Split Pad NonZero Tile Dropout Compress EyeLike
""".split())
# Heavier plumbing: a decomposition that uses these is not characterised by its single arithmetic op
# (narrow = Slice + index arithmetic, roll = Slice/Concat + Mod).
ONNX_STRUCTURAL = frozenset("Gather Concat Slice Range Split SplitToSequence Tile Pad NonZero Loop If "
                            "ScatterND ScatterElements Compress".split())
# Elementwise/reduction glue: dropped when a decomposition uses several ops.
ONNX_GLUE = frozenset("""
Add Sub Mul Div Neg Abs Sqrt Pow Reciprocal Exp Log Floor Ceil Round Max Min Sign Mod Erf Tanh Sigmoid Sin Cos
Atan IsNaN IsInf Clip Xor BitShift BitwiseAnd BitwiseOr BitwiseNot BitwiseXor CumSum ArgMax ArgMin TopK Trilu
ScatterElements ScatterND GatherElements GatherND Relu Softplus Einsum Mean Sum ReduceSum ReduceMean ReduceMax
ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSumExp ReduceSumSquare ReduceLogSum RandomUniformLike
RandomNormalLike RandomUniform RandomNormal Bernoulli Multinomial QuantizeLinear DequantizeLinear Unique
""".split())

# -- aten family roots: affixes that name a variant/kernel of the same operator -------------------------------
FAMILY_PREFIXES = ("native_", "unsafe_", "safe_")  # safe_: _safe_softmax, softmax with masked rows -> 0
FAMILY_SUFFIXES = ("_legit_no_training", "_legit_functional", "_legit", "_with_update", "_no_update",
                   "_with_indices", "_forward", "_functional")
