"""Which TensorFlow raw ops ``tf_ops`` harvests and how their arguments are filled: the excluded families
(:data:`EXCLUDED`), the dtypes a candidate's data may have, and the role tables keyed by argument and attribute names
(:data:`INPUT_ROLES`, :data:`DATA_ROLES`, :data:`ATTR_ROLES`) that the builder's per-role tables dispatch on, with the
value domains a candidate's data is drawn from.
"""
from __future__ import annotations

import re

# -- which operators -------------------------------------------------------------------------------------------

# (reason, name pattern): families that are not single pure numeric computations a converter sees in a model
EXCLUDED: tuple[tuple[str, str], ...] = (
    ("random", r"Random|Multinomial|Shuffle|SampleDistorted|TruncatedNormal|Poisson|Binomial|Sobol|"
               r"AccidentalHits|Fractional(Max|Avg)Pool|Dropout"),
    ("gradient", r"Grad(V\d)?$|GradGrad|Grad[A-Z]|Gradient|BackpropFilter"),
    ("sparse", r"^Sparse(?!Segment|ToDense)|Ragged|SetOperation|SetSize|Serialize|Deserialize|EditDistance|"
               r"SparseCore|CooTensor|CsrWrapped|SparseDense"),
    ("quantized", r"Quantized|Requantiz|UniformQuant|UniformDequant|UniformRequant|^Dequantize$|^QuantizeV2$|"
                  r"QuantizeDown"),
    ("device", r"^Xla|^TPU|Tpu|Cudnn|CheckPinned|^Copy(Host)?$|^_|^HostConst$"),
    ("training", r"BoostedTrees|Sdca|KMC2|Kmeans|NearestNeighbors|^Apply|^ResourceApply|^SparseApply|"
                 r"BlockLSTM|LSTMBlockCell|GRUBlockCell|CTCLoss"),
    ("debug", r"Debug|^Print|Assert|Summary|^Snapshot$"),
    ("control-flow", r"^(Enter|Exit|RefEnter|RefExit|Merge|Switch|NextIteration|LoopCond|For|While|If|Case|Batch|"
                     r"Unbatch|BatchFunction|MapDefun|SymbolicGradient|PyFunc\w*|EagerPyFunc|Stateless(If|Case|While)|"
                     r"ControlTrigger|NoOp|PartitionedCall|StatefulPartitionedCall|RemoteCall)$"),
    ("io", r"Dataset|Iterator|Reader|Record|^Save|^Restore|File|Decode|Encode|Queue|TensorArray|Barrier|Lookup|"
           r"Table|Variable|^Stack|^Stage|^Unstage|Recv$|Send$|Collective|Nccl|Audio|Mfcc|Wav"),
)
_EXCLUDED = tuple((reason, re.compile(p)) for reason, p in EXCLUDED)

# numpy dtype names a candidate's data may have, in order of preference (float32 first)
MAIN_DTYPES = ("float32", "int32", "float16", "float64", "int64", "bool", "complex64")
EXTRA_DTYPES = ("int8", "uint8", "int16", "uint16", "uint32", "uint64", "complex128")  # only where no main one is
SUPPORTED = MAIN_DTYPES + EXTRA_DTYPES
_NON_NUMERIC = ("resource", "variant", "string")

# -- argument roles (names of OpDef inputs and of the tf.raw_ops keywords) -----------------------------------

# tensor inputs that hold index / shape / count data: JSON constants in the call (a runtime variant for some)
INPUT_ROLES: tuple[tuple[str, str], ...] = (
    (r"^(reduction_indices|axis|dim|dimension|split_dim|concat_dim)$", "axis"),
    (r"^axes$", "axes"),
    (r"^perm$", "perm"),
    (r"^(shape|output_shape|dims|input_shape)$", "shape"),
    (r"^(input_sizes)$", "input_sizes"),
    (r"^paddings$", "paddings"),
    (r"^crops$", "crops"),
    (r"^block_shape$", "block_shape"),
    (r"^begin$", "begin"),
    (r"^end$", "end"),
    (r"^strides$", "strides"),
    (r"^(size|crop_size)$", "size"),
    (r"^multiples$", "multiples"),
    (r"^k$", "k"),
    (r"^n$", "n"),
    (r"^(ksize)$", "ksize"),
    (r"^fft_length$", "fft_length"),
    (r"^shift$", "shift"),
    (r"^size_splits$", "size_splits"),
    (r"^(indices|i|sparse_indices)$", "indices"),
    (r"^segment_ids$", "segment_ids"),
    (r"^num_segments$", "num_segments"),
    (r"^(partitions)$", "partitions"),
    (r"^(seq_lengths|sequence_length)$", "seq_lengths"),
    (r"^box_ind$", "box_ind"),
    (r"^targets$", "targets"),
    (r"^(depth|nbins|num|max_output_size|max_output_size_per_class|max_total_size|pre_nms_topn|num_rows|"
     r"num_cols|num_lower|num_upper|num_bits)$", "count"),
    (r"^(on_value|off_value|constant_values|padding_value|clip_value_min|clip_value_max|start|limit|stop|"
     r"delta|iou_threshold|score_threshold|overlap_threshold|soft_nms_sigma|nms_threshold|min_size|"
     r"contrast_factor|extrapolation_value|fill_value|default_value|l2_regularizer|value_range)$", "scalar"),
)
# tensor inputs that are data but with a shape tied to another input's
DATA_ROLES: tuple[tuple[str, str], ...] = (
    (r"^(filter|kernel)$", "filter"),
    (r"^out_backprop$", "out_backprop"),
    (r"^(bias|offset|mean|variance|gamma|beta)$", "channel"),
    (r"^(scale)$", "channel"),
    (r"^(min|max|input_min|input_max)$", "qrange"),
    (r"^condition$", "cond"),
    (r"^(updates|v)$", "updates"),
    (r"^boxes$", "boxes"),
    (r"^scores$", "scores"),
    (r"^sorted_inputs$", "sorted"),
    (r"^arr$", "counts_data"),
    (r"^(rhs)$", "rhs"),
    (r"^s[01]$", "shape_vec"),
    (r"^transforms$", "transforms"),
    (r"^offsets$", "offsets"),
    (r"^colors$", "colors"),
    (r"^translation$", "vec2"),
)
_INDEX_ROLES = {"axis", "axes", "perm", "shape", "input_sizes", "paddings", "crops", "block_shape", "begin", "end",
                "strides", "size", "multiples", "k", "n", "ksize", "fft_length", "shift", "size_splits", "indices",
                "segment_ids", "num_segments", "partitions", "seq_lengths", "box_ind", "targets", "count"}
_CONST_ROLES = _INDEX_ROLES | {"scalar"}
# roles whose constant may become a runtime int32 input in a variant (shape/index arguments a converter must treat
# as dynamic then)
_RUNTIME_OK = ("axis", "perm", "shape", "paddings", "begin", "end", "strides", "size", "multiples", "k",
               "indices", "segment_ids", "shift", "block_shape", "crops", "axes", "fft_length", "n", "count")

# attributes with a role: values from the inputs' shapes / layout (all others: default, allowed values, flips)
ATTR_ROLES: tuple[tuple[str, str], ...] = (
    (r"^(ksize|ksizes)$", "ksize"),
    (r"^strides$", "strides_attr"),
    (r"^(dilations|rates)$", "dilations"),
    (r"^padding$", "padding"),
    (r"^explicit_paddings$", "explicit_paddings"),
    (r"^data_format$", "data_format"),
    (r"^(align_corners|half_pixel_centers)$", "resize_flag"),
    (r"^(begin_mask|end_mask)$", "mask"),
    (r"^(ellipsis_mask|new_axis_mask|shrink_axis_mask)$", "mask_bit"),
    (r"^num$", "num"),
    (r"^num_split$", "num_split"),
    (r"^num_partitions$", "num_partitions"),
    (r"^axis$", "axis_attr"),
    (r"^(squeeze_dims)$", "squeeze"),
    (r"^seq_dim$", "seq_dim"),
    (r"^batch_dim$", "batch_dim"),
    (r"^block_size$", "block_size"),
    (r"^k$", "k_attr"),
    (r"^(keep_dims|keepdims)$", "flag"),
    (r"^shape$", "shape_attr"),
    (r"^equation$", "equation"),
    (r"^boundaries$", "boundaries"),
    (r"^(interpolation)$", "interpolation"),
    (r"^(kernel_type)$", "kernel_type"),
    (r"^(noise)$", "noise"),
    (r"^(mode)$", "mode"),
    (r"^(window_size)$", "window_size"),
    (r"^(stride)$", "stride"),
    (r"^(beam_width|top_paths)$", "small_count"),
    (r"^(min|max)$", "qbound"),
    (r"^(reduction_dimension)$", "last_axis"),
    (r"^(binary_output)$", "flag"),
    (r"^(src_format|dst_format)$", "format_string"),
)
_INTERP = ("BILINEAR", "NEAREST")
_EQUATIONS = (  # einsum equation, operand shapes
    ("ij,jk->ik", ([3, 4], [4, 5])), ("bij,bjk->bik", ([2, 3, 4], [2, 4, 2])), ("ij->ji", ([3, 4],)),
    ("ii->i", ([3, 3],)), ("ij,j->i", ([3, 4], [4])), ("i,j->ij", ([3], [4])),
    ("bhwc,cd->bhwd", ([1, 3, 3, 2], [2, 4])),
    ("ij->", ([2, 3],)), ("bij->bji", ([2, 3, 4],)),
)

DOMAINS = ("normal", "positive", "unit", "small_int")
BOUNDARY_DOMAINS = ("zeros", "signed_zero", "large", "huge", "tiny", "subnormal", "nan", "inf")
NONFINITE = ("nan", "inf")
_FLOAT_ONLY_DOMAINS = ("signed_zero", "tiny", "subnormal", "nan", "inf", "unit")

# the order the builder fills a candidate's inputs in, by role (roles not listed, e.g. shape and out_backprop, last;
# the primary data input first whatever its role): the shapes and constants that others follow from come first
INPUT_PRIORITY = {
    "input_sizes": 0,
    **dict.fromkeys(("filter", "channel", "qrange", "cond", "rhs", "data", "sorted", "scores", "boxes", "counts_data",
                     "scalar_data", "shape_vec", "transforms", "offsets", "colors", "vec2"), 1),
    **dict.fromkeys(("axis", "perm", "begin", "multiples", "paddings", "block_shape", "k", "n", "count", "ksize",
                     "axes", "fft_length", "scalar", "size_splits", "dims_mask"), 2),
    **dict.fromkeys(("end", "strides", "size", "crops", "shift", "indices", "segment_ids", "partitions",
                     "seq_lengths", "box_ind", "targets"), 3),
    **dict.fromkeys(("updates", "num_segments"), 4),
}


def _role(name: str, table) -> str | None:
    for pattern, role in table:
        if re.match(pattern, name):
            return role
    return None
