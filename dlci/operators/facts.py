"""Per-operator facts in one place, as PyTorch's OpInfo keeps them for its own operators: declarative tables keyed by
operator base name (:func:`op_base_name`: ``aten::max.dim`` -> ``max``, ``onnx::TopK`` -> ``TopK``,
``tf::SelfAdjointEigV2`` -> ``SelfAdjointEigV2``; a TensorFlow raw op by its name), with small accessors. What dlci
knows of an operator beyond its identity (:mod:`dlci.operators`):

- value domains: where a TensorFlow raw op's result is specified (:data:`TF_VALUE_DOMAINS`, and the generator's
  value domains each constraint leaves out, :data:`DOMAINS_OUT`; :func:`value_domains`). A PyTorch operator's are
  its OpInfo's own (``domain``, the dtypes per device), looked up with :func:`dlci.torch_testing.opinfo`;
- output rules: the outputs that hold indices and are compared by shape and dtype only (:data:`INDEX_OUTPUTS`,
  :data:`UNSORTED_TOPK`), those whose contents are unspecified and not compared at all (:data:`UNCOMPARED_OUTPUTS`,
  :func:`unspecified_outputs`), and the operators whose every output is uninitialised memory
  (:data:`VALUES_UNDEFINED`, :func:`values_undefined`); :mod:`dlci.models.outputs` applies them to an instance;
- randomness: the ONNX operators whose outputs are draws (:data:`ONNX_RANDOM`), the OpInfo operators random only
  through one argument (:data:`RANDOM_ONLY_BY`);
- expected failures per target: PyTorch's OpInfo records, per operator and per test, what is expected to fail or
  allowed wider tolerances on a device (``DecorateInfo`` skips, xfails, ``toleranceOverride``); which of its tests
  speak for which dlci target is here (:data:`EAGER_TESTS`, :data:`INDUCTOR_TESTS`, :data:`COMPARE_CPU_TESTS`),
  read by :mod:`dlci.targets._cuda`.
"""
from __future__ import annotations

import re


def op_base_name(op: str) -> str:
    """'aten::max.dim' -> 'max', 'torch.Tensor.argmax' -> 'argmax', 'onnx::TopK' -> 'TopK'."""
    base = op.split("::", 1)[1].split(".")[0] if "::" in op else op.rsplit(".", 1)[-1]
    if base.startswith("special_"):
        base = base[len("special_"):]
    return base.rstrip("_")


# -- value domains ---------------------------------------------------------------------------------------------

# Operators whose result is unspecified outside a value domain (undefined behaviour in the kernels' C++, an order
# or a precision the op does not define). Their candidates stay inside it: two correct kernels may differ outside,
# and a rule would report that difference as a bug. (name pattern, constraint): see
# dlci.sources.tf_ops.build._Builder._constrain.
TF_VALUE_DOMAINS: tuple[tuple[str, str], ...] = (
    (r"^(LeftShift|RightShift)$", "shift_below_width"),  # shifting by >= the bit width (or < 0) is UB
    (r"^Cast$", "in_range_cast"),  # float -> int outside the int's range (or NaN) is UB
    (r"^(FakeQuant|QuantizeAndDequantize)", "finite"),  # NaN/Inf rounded to an int grid
    (r"^(BatchMatrix|Matrix)(Inverse|Solve|TriangularSolve)$", "well_conditioned"),  # the result is the rounding
    (r"^(BatchSelfAdjointEig|SelfAdjointEig|BatchCholesky|Cholesky)", "hermitian"),  # only one triangle is read
    (r"^(TopK|TopKV2|NthElement)$", "no_nan"),  # NaN has no place in an order
)
_TF_VALUE_DOMAINS = tuple((re.compile(p), c) for p, c in TF_VALUE_DOMAINS)
# the value domains (dlci.sources.tf_ops.roles.DOMAINS, BOUNDARY_DOMAINS) each constraint leaves out
DOMAINS_OUT = {"in_range_cast": ("nan", "inf", "huge"), "finite": ("nan", "inf"), "no_nan": ("nan",),
               "well_conditioned": ("nan", "inf", "huge", "large", "zeros"), "hermitian": ("nan", "inf", "huge")}


def value_domains(name: str) -> tuple[str, ...]:
    """The constraints of TensorFlow raw op ``name``'s value domain (none: its result is specified everywhere)."""
    return tuple(c for rx, c in _TF_VALUE_DOMAINS if rx.search(name))


# -- output rules ----------------------------------------------------------------------------------------------

# operators whose output values are undefined (uninitialised memory): only shapes, dtypes and crashes can be judged
VALUES_UNDEFINED = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                              "empty_permuted"})


def values_undefined(op: str) -> bool:
    return op_base_name(op) in VALUES_UNDEFINED


# operator base name -> output positions that hold indices (ties make their values arbitrary)
INDEX_OUTPUTS = {
    "argmax": {0}, "argmin": {0}, "argsort": {0}, "sort": {1}, "topk": {1}, "kthvalue": {1}, "mode": {1},
    "median": {1}, "nanmedian": {1}, "max": {1}, "min": {1}, "cummax": {1}, "cummin": {1},
    "unique": {1, 2}, "unique_consecutive": {1}, "max_pool1d_with_indices": {1},
    "max_pool2d_with_indices": {1}, "max_pool3d_with_indices": {1}, "adaptive_max_pool1d": {1},
    "adaptive_max_pool2d": {1}, "adaptive_max_pool3d": {1}, "max_pool1d": {1}, "max_pool2d": {1},
    "max_pool3d": {1}, "fractional_max_pool2d": {1}, "fractional_max_pool3d": {1},
    # ONNX, and TensorFlow raw ops
    "ArgMax": {0}, "ArgMin": {0}, "TopK": {1}, "Unique": {1, 2}, "MaxPool": {1},
    "TopKV2": {1}, "UniqueV2": {1}, "UniqueWithCounts": {1, 2}, "UniqueWithCountsV2": {1, 2},
    "MaxPoolWithArgmax": {1},
}
# top-k without sorting: the order of the values is implementation-defined too
UNSORTED_TOPK = {"topk", "TopK", "TopKV2"}


# operator base name -> outputs that are implementation-defined and not compared at all: the statistics the
# native normalisation kernels save for backward (empty in eval mode in eager PyTorch, anything elsewhere)
UNCOMPARED_OUTPUTS = {"native_batch_norm": {1, 2}, "_native_batch_norm_legit": {1, 2},
                      "_native_batch_norm_legit_no_training": {1, 2}, "native_group_norm": {1, 2},
                      "native_layer_norm": {1, 2}, "_batch_norm_with_update": {1, 2, 3},
                      # TensorFlow: reserve spaces are for the kernel's own gradient, their contents unspecified
                      # (XLA and the CPU kernel fill them differently, V3's third is uninitialised)
                      "FusedBatchNorm": {3, 4}, "FusedBatchNormV2": {3, 4}, "FusedBatchNormV3": {3, 4, 5},
                      # singular / eigen vectors are unique only up to sign (and rotation in repeated eigenvalues)
                      "Svd": {1, 2}, "SelfAdjointEigV2": {1}}


def unspecified_outputs(op: str) -> set[int]:
    """Output positions of operator ``op`` ("tf::SelfAdjointEigV2", "aten::native_batch_norm") whose contents are
    unspecified."""
    return set(UNCOMPARED_OUTPUTS.get(op_base_name(op), set()))


# -- randomness ------------------------------------------------------------------------------------------------

# ONNX operators whose outputs are draws, not functions of their inputs: no reference can judge one run of them
ONNX_RANDOM = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
                         "Multinomial"})

# ops whose only randomness is a probability argument: their samples with it at 0 are deterministic and kept
# (scaled_dot_product_attention's dropout_p; the attention converters were otherwise never tested)
RANDOM_ONLY_BY = {"nn.functional.scaled_dot_product_attention": "dropout_p"}


# -- expected failures per target: what PyTorch's own tests allow on CUDA ---------------------------------------

# the OpInfo tests whose CUDA tolerances apply to a whole-op CUDA result against a reference (eager), and those of
# inductor's own OpInfo test (torch.compile on CUDA)
EAGER_TESTS = {("TestCommon", None), ("TestCommon", "test_compare_cpu"), ("TestCommon", "test_noncontiguous_samples"),
               ("TestCommon", "test_variant_consistency_eager"), ("TestCommon", "test_out"),
               ("TestUnaryUfuncs", None), ("TestUnaryUfuncs", "test_reference_numerics_normal"),
               ("TestBinaryUfuncs", None), ("TestReductions", None)}
INDUCTOR_TESTS = {("TestInductorOpInfo", None), ("TestInductorOpInfo", "test_comprehensive")} | EAGER_TESTS
# the test whose skip or expected failure says PyTorch itself does not expect CUDA to match the CPU
COMPARE_CPU_TESTS = {("TestCommon", "test_compare_cpu")}
