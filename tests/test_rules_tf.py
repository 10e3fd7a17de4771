"""The TensorFlow/Keras equivalence rules against real TF/Keras: each rule applies and passes on a layer it covers,
says why it does not apply elsewhere, and a deliberately broken graph B is caught."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from dlci.instance import Instance, Origin, TensorSpec  # noqa: E402
from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED  # noqa: E402
from dlci.rules import CATEGORIES, RULES, Rule, all_rules  # noqa: E402
from dlci.rules.case import KerasCase  # noqa: E402
from dlci.rules.repro import render_rule_text  # noqa: E402
from dlci.rules.runner import case_for, execute_rule, widen  # noqa: E402
from dlci.rules.source import standalone_source  # noqa: E402
from dlci.rules.tf.common import eager  # noqa: E402

all_rules()  # loads the registry (RULES below)

RNG = np.random.default_rng(3)


def layer_instance(cls: str, config: dict, x: np.ndarray) -> Instance:
    """A keras_layer instance as the harvest records it: config from get_config(), the layer's own weights
    (perturbed so that biases and statistics are not zeros and ones)."""
    layer = getattr(keras.layers, cls)(**config)
    keras.utils.set_random_seed(0)
    layer(x)
    arrays = {"in:0": x}
    for i, (var, w) in enumerate(zip(layer.weights, layer.get_weights())):
        w = np.asarray(w)
        if w.dtype.kind == "f":
            w = w + RNG.standard_normal(w.shape).astype(w.dtype) * 0.1
        if "variance" in var.name:
            w = np.abs(w) + 0.5
        arrays[f"weight:{i}"] = w
    return Instance(op=f"keras::{cls}", framework="keras",
                    call={"kind": "keras_layer", "cls": f"keras.layers.{cls}",
                          "config": json.loads(json.dumps(layer.get_config())), "args": [{"$t": 0}]},
                    inputs=[TensorSpec.of(x)], params={}, origin=Origin("test", "hand"), arrays=arrays)


def r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


DENSE = layer_instance("Dense", {"units": 3, "activation": "tanh"}, r(3, 4))
CONV1D = layer_instance("Conv1D", {"filters": 3, "kernel_size": 2}, r(2, 6, 2))
CASES = {
    "dense": DENSE,
    "conv1d": CONV1D,
    "conv2d_same": layer_instance("Conv2D", {"filters": 2, "kernel_size": 4, "strides": 2, "padding": "same"},
                                  r(1, 7, 7, 2)),
    "maxpool_same": layer_instance("MaxPooling2D", {"pool_size": 2, "strides": 2, "padding": "same"},
                                   r(2, 5, 5, 3)),
    "avgpool_same": layer_instance("AveragePooling1D", {"pool_size": 3, "strides": 2, "padding": "same"},
                                   r(2, 8, 2)),
    "depthwise": layer_instance("DepthwiseConv2D", {"kernel_size": 2, "depth_multiplier": 2}, r(1, 5, 5, 3)),
    "grouped": layer_instance("Conv1D", {"filters": 4, "kernel_size": 2, "groups": 2}, r(2, 6, 4)),
    "separable": layer_instance("SeparableConv1D", {"filters": 3, "kernel_size": 2, "depth_multiplier": 2},
                                r(2, 7, 2)),
    "dilated": layer_instance("Conv1D", {"filters": 2, "kernel_size": 2, "dilation_rate": 2}, r(2, 7, 3)),
    "relu": layer_instance("ReLU", {"max_value": 1.5, "negative_slope": 0.2, "threshold": 0.1}, r(3, 5)),
    "gelu": layer_instance("Activation", {"activation": "gelu"}, r(3, 5)),
    "layernorm": layer_instance("LayerNormalization", {}, r(3, 6)),
    "groupnorm": layer_instance("GroupNormalization", {"groups": 2}, r(2, 3, 4)),
    "batchnorm": layer_instance("BatchNormalization", {}, r(3, 4)),
    "conv2d_relu": layer_instance("Conv2D", {"filters": 2, "kernel_size": 2, "activation": "relu"}, r(2, 4, 4, 2)),
    "embedding": layer_instance("Embedding", {"input_dim": 6, "output_dim": 2},
                                RNG.integers(0, 6, (3, 4)).astype(np.int64)),
    "maxpool_rgb": layer_instance("MaxPooling2D", {"pool_size": 2}, r(2, 4, 4, 3)),
    "batch1": layer_instance("Dense", {"units": 2}, r(1, 4)),
    "glu": layer_instance("Activation", {"activation": "glu"}, r(3, 4)),
}

# rule -> instance it must pass on
PASSING = {
    "tf.function": "dense", "tf.function.xla": "relu", "tf.same_padding": "conv2d_same", "tf.dim_lift": "conv1d",
    "tf.depthwise": "depthwise", "tf.separable": "separable", "tf.dilated": "dilated",
    "tf.formula.activation": "relu", "tf.formula.normalization": "groupnorm", "tf.formula.pooling": "avgpool_same",
    "tf.formula.linear": "dense", "tf.sparse": "dense", "tf.image_scale": "conv2d_relu",
    "tf.data.pipeline": "dense", "tf.dtype.widen": "dense", "tf.dtype.policy": "dense",
    "tf.codec.png": "maxpool_rgb", "tf.pad_unpad.keras": "conv1d", "tf.pad_unpad.tf": "dense",
    "tf.batch": "layernorm", "tf.save_load.keras": "dense", "tf.save_load.config": "conv1d",
    "tf.save_load.saved_model": "dense", "tf.layout.data_format": "maxpool_rgb", "tf.autograd.jvp_vjp": "dense",
}
# more pairs that must pass (other branches of the same rules)
MORE = [("tf.same_padding", "maxpool_same"), ("tf.same_padding", "avgpool_same"), ("tf.depthwise", "grouped"),
        ("tf.formula.activation", "gelu"), ("tf.formula.normalization", "layernorm"),
        ("tf.formula.pooling", "maxpool_same"), ("tf.image_scale", "batchnorm"), ("tf.dtype.widen", "embedding")]


def _tf_rules():
    return {n: r for n, r in RULES.items() if r.library == "tensorflow"}


def test_registry_covers_the_categories_tf_has():
    rules = _tf_rules()
    assert set(PASSING) == set(rules)  # every rule is exercised below
    covered = {r.category for r in rules.values()}
    # time_major: Keras 3 RNNs have no time-major form; device: needs a GPU runner
    assert covered == set(CATEGORIES) - {"time_major", "device"}
    for rule in rules.values():
        assert rule.name.startswith("tf.") and rule.framework == "keras" and rule.derived_from
        assert all(callable(f) for f in rule.graph_functions())
        bundle = standalone_source(KerasCase, rule.graph_a_fn, rule.graph_b_fn)
        assert not any("dlci" in line for line in bundle.imports), (rule.name, bundle.imports)
        compile("\n".join(bundle.imports) + "\n" + bundle.code, rule.name, "exec")


@pytest.mark.parametrize("rule", sorted(PASSING))
def test_every_reproducer_renders(rule):
    finding = SimpleNamespace(id="F1", target=f"rule.{rule}", target_version="", symptom="value mismatch",
                              operator="op", signature="sig", stage="compare", message="")
    text = render_rule_text(RULES[rule], CASES[PASSING[rule]], finding)
    compile(text, rule, "exec")
    assert "import dlci" not in text and "from dlci" not in text


def test_tables_match_keras():
    # the documentation-as-data tables name real keras classes and activations, and the code holds every formula
    from dlci.rules.tf import meta
    from dlci.rules.tf.formula import ACTIVATIONS
    for name in meta.SCALING:
        assert hasattr(keras.layers, name), name
    x = np.linspace(-4, 4, 17).reshape(1, 17)
    for name in meta.ACTIVATION_NAMES:
        got = ACTIVATIONS[name](x)
        want = np.asarray(keras.activations.get(name)(x))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)


def _assert_status(rule: str, inst: Instance, status: str):
    o = execute_rule(inst, f"rule.{rule}")
    assert o.status == status, (rule, inst.op, o.stage, o.symptom, o.message, o.traceback[-1500:])
    return o


@pytest.mark.parametrize("rule", sorted(PASSING))
def test_rule_applies_and_passes(rule):
    _assert_status(rule, CASES[PASSING[rule]], PASS)


@pytest.mark.parametrize("rule,key", MORE)
def test_rule_other_branches_pass(rule, key):
    _assert_status(rule, CASES[key], PASS)


@pytest.mark.parametrize("rule,key,reason", [
    ("tf.separable", "dense", "no spatial rank"),
    ("tf.dilated", "conv1d", "not dilated"),
    ("tf.same_padding", "conv1d", "padding='valid'"),
    ("tf.batch", "batch1", "batch of one"),
    ("tf.formula.activation", "glu", "no formula"),
    ("tf.image_scale", "dense", "not positively homogeneous"),
    ("tf.depthwise", "conv1d", "neither a depthwise"),
    ("tf.autograd.jvp_vjp", "embedding", "non-float inputs"),
])
def test_not_applicable_reasons(rule, key, reason):
    o = _assert_status(rule, CASES[key], UNSUPPORTED)
    assert o.stage == "model" and reason in o.message


def test_graph_b_errors_that_mean_unsupported():
    # ReLU rejects SparseTensor inputs: the sparse rule's feature does not cover it (matched error text)
    o = _assert_status("tf.sparse", CASES["relu"], UNSUPPORTED)
    assert o.stage == "run" and "SparseTensor" in o.message
    # a Dense output is not an image
    o = _assert_status("tf.codec.png", DENSE, UNSUPPORTED)
    assert "not image-shaped" in o.message
    # TF has no float64 CPU kernel for MaxPool3D: the float64 twin of the layer does not exist here
    o = _assert_status("tf.dtype.policy", layer_instance("MaxPooling3D", {"pool_size": 2}, r(1, 2, 2, 2, 1)),
                       UNSUPPORTED)
    assert o.stage == "run" and "double" in o.message


def test_graph_a_honours_float64():
    # the fp64 reference that arbitrates rounding must really be float64
    for name, rule in _tf_rules().items():
        if rule.exact or name in ("tf.dtype.policy", "tf.autograd.jvp_vjp") or rule.why_not(DENSE):
            continue
        case = case_for(DENSE)
        out = rule.graph_functions()[0](case, widen(case.inputs), dtype="float64")
        assert all(o.dtype == np.float64 for o in out), name


def scaled_output(case, inputs):
    """The layer times 1.001: a graph B that must be caught."""
    return [o * 1.001 for o in eager(case, inputs)]


def one_ulp_up(case, inputs):
    """The layer nudged by one ulp: an exact rule must see it."""
    return [np.nextafter(o, np.inf) for o in eager(case, inputs)]


def test_broken_graph_b_is_detected():
    broken = Rule(name="tf.test.broken", category="optimization", library="tensorflow",
                  summary="a graph B that scales the output", graph_a="the layer", graph_b="the layer times 1.001",
                  graph_a_fn=eager, graph_b_fn=scaled_output)
    exact = Rule(name="tf.test.broken_exact", category="save_load", library="tensorflow",
                 summary="a graph B one ulp off", graph_a="the layer", graph_b="the layer nudged by one ulp",
                 graph_a_fn=eager, graph_b_fn=one_ulp_up, exact=True)
    try:
        RULES[broken.name] = broken
        RULES[exact.name] = exact
        o = _assert_status(broken.name, DENSE, INCONSISTENT)
        assert o.symptom == "value mismatch"
        _assert_status(exact.name, DENSE, INCONSISTENT)
    finally:
        RULES.pop(broken.name, None)
        RULES.pop(exact.name, None)
