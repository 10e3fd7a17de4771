"""The inconsistency oracle: per-dtype tolerances, fp64 arbitration, NaN/Inf masks, index outputs."""
import numpy as np
import torch

from dlci.oracles.compare import compare_outputs


def test_identical_outputs_are_consistent():
    a = np.random.RandomState(0).randn(4, 5).astype(np.float32)
    assert compare_outputs([a.copy()], [a], [a.astype(np.float64)]) is None


def test_real_value_error_is_reported_with_distance():
    a = np.random.RandomState(0).randn(4, 5).astype(np.float32)
    got = a.copy()
    got[1, 2] += 0.5
    v = compare_outputs([got], [a], [a.astype(np.float64)])
    assert v["symptom"] == "value mismatch"
    assert v["distance"]["mismatched"] == 1 and abs(v["distance"]["max_abs"] - 0.5) < 1e-6


def test_reduction_rounding_is_arbitrated_by_fp64():
    # summing float32 in another order differs beyond float32 rtol, but no further from fp64 than eager is
    x = torch.randn(1 << 16, generator=torch.Generator().manual_seed(1)) * 1000
    ref = x.sum().numpy()
    ref64 = x.double().sum().numpy()
    got = np.float32(x.numpy()[::-1].cumsum(dtype=np.float32)[-1])
    assert compare_outputs([np.asarray(got)], [np.asarray(ref)], [np.asarray(ref64)]) is None
    # without an fp64 reference the same gap still passes the looser ONNX-style tolerance
    assert compare_outputs([np.asarray(got)], [np.asarray(ref)], None) is None


def test_nan_where_reference_is_finite_is_a_nan_mismatch():
    ref = np.array([1.0, 2.0, 3.0], np.float32)
    got = np.array([1.0, np.nan, 3.0], np.float32)
    v = compare_outputs([got], [ref], [ref.astype(np.float64)])
    assert v["symptom"] == "nan mismatch" and v["distance"]["first_index"] == [1]


def test_fp32_overflow_to_inf_is_not_a_bug():
    # the float32 reference overflowed where the target kept a finite huge value: fp64 rounded to f32 is inf too
    ref = np.array([np.inf], np.float32)
    got = np.array([np.inf], np.float32)
    ref64 = np.array([1e39])
    assert compare_outputs([got], [ref], [ref64]) is None
    got_nan = np.array([np.nan], np.float32)
    assert compare_outputs([got_nan], [ref], [ref64])["symptom"] == "nan mismatch"


def test_shape_and_dtype_and_count():
    a = np.zeros((2, 3), np.float32)
    assert compare_outputs([a.reshape(3, 2)], [a], None)["symptom"] == "shape mismatch"
    assert compare_outputs([a.astype(np.float64)], [a], None)["symptom"] == "dtype mismatch"
    assert compare_outputs([a, a], [a], None)["symptom"] == "output count"
    # the reference's dtype is the declared one: int32 where the model declares int64 is a bug users hit
    i = np.arange(6).reshape(2, 3)
    assert compare_outputs([i.astype(np.int32)], [i], None)["symptom"] == "dtype mismatch"
    assert compare_outputs([i.copy()], [i], None) is None
    assert compare_outputs([i + 1], [i], None)["symptom"] == "value mismatch"


def test_index_outputs_compare_shape_only():
    vals = np.array([1.0, 1.0], np.float32)
    idx_ref, idx_got = np.array([0, 1]), np.array([1, 0])  # a tie: both orders are right
    assert compare_outputs([vals, idx_got], [vals, idx_ref], None, skip_values={1}) is None
    assert compare_outputs([vals, idx_got], [vals, idx_ref], None)["symptom"] == "value mismatch"
