"""The PyTorch equivalence rules against real PyTorch: each rule applies and passes on an operator it covers, says
why it does not apply elsewhere (from metadata, not a crash), and deliberately broken graphs B are caught."""
from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
from standalone import run_without_dlci

torch = pytest.importorskip("torch")

import dlci.rules as rules_pkg  # noqa: E402
import dlci.rules.torch as torch_rules  # noqa: E402
from dlci.instance import Instance, Origin, TensorSpec  # noqa: E402
from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED  # noqa: E402
from dlci.rules import CATEGORIES, RULES, Rule, all_rules  # noqa: E402
from dlci.rules.case import TorchCase  # noqa: E402
from dlci.rules.repro import render_rule_text  # noqa: E402
from dlci.rules.runner import case_for, execute_rule  # noqa: E402
from dlci.rules.source import standalone_source  # noqa: E402
from dlci.rules.torch.batch import one_by_one  # noqa: E402
from dlci.rules.torch.pad import unpadded  # noqa: E402

all_rules()  # loads the registry (RULES below)

RNG = np.random.default_rng(5)


def r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def fn_instance(opinfo: str, fn: str, args: list, kwargs: dict, arrays: list, variant: str = "") -> Instance:
    """A torch_fn instance as the opinfo source records it (origin naming its OpInfo, tensors as slots)."""
    return Instance(op="aten::" + fn.rsplit(".", 1)[1], framework="torch",
                    call={"kind": "torch_fn", "fn": fn, "args": args, "kwargs": kwargs},
                    inputs=[TensorSpec.of(a) for a in arrays], params={},
                    origin=Origin("opinfo", f"op_db:{opinfo}[{variant}]#0 sample"),
                    arrays={f"in:{i}": a for i, a in enumerate(arrays)})


def module_instance(cls: str, args: list, kwargs: dict, arrays: list, forward_kwargs: dict | None = None) -> Instance:
    """A torch_module instance as the module_db source records it: seeded constructor, state_dict as arrays (running
    statistics moved off their 0/1 defaults so that they matter)."""
    torch.manual_seed(0)
    m = getattr(torch.nn, cls)(*args, **kwargs)
    state = {}
    for k, v in m.state_dict().items():
        a = v.detach().numpy().copy()
        if k.endswith("running_var"):
            a = a + RNG.uniform(0.2, 1.0, a.shape).astype(a.dtype)
        elif k.endswith("running_mean"):
            a = a + RNG.standard_normal(a.shape).astype(a.dtype) * 0.3
        state[f"state:{k}"] = a
    return Instance(op=f"nn::{cls}", framework="torch",
                    call={"kind": "torch_module", "cls": f"torch.nn.{cls}", "args": args, "kwargs": kwargs,
                          "forward_args": [{"$t": i} for i in range(len(arrays))],
                          "forward_kwargs": forward_kwargs or {}},
                    inputs=[TensorSpec.of(a) for a in arrays], params={},
                    origin=Origin("module_db", f"module_db:nn.{cls}#0"),
                    arrays={**{f"in:{i}": a for i, a in enumerate(arrays)}, **state})


T0, T1, T2 = {"$t": 0}, {"$t": 1}, {"$t": 2}
I = {
    "relu": fn_instance("nn.functional.relu", "torch.nn.functional.relu", [T0], {}, [r(4, 5)]),
    "sin": fn_instance("sin", "torch.sin", [T0], {}, [r(3, 4)]),
    "abs": fn_instance("abs", "torch.abs", [T0], {}, [r(3, 4)]),
    "add_int": fn_instance("add", "torch.add", [T0, T1], {"alpha": 2},
                           [RNG.integers(-50, 50, (3, 4)).astype(np.int64),
                            RNG.integers(-50, 50, (3, 4)).astype(np.int64)]),
    "softplus": fn_instance("nn.functional.softplus", "torch.nn.functional.softplus", [T0],
                            {"beta": 2.0, "threshold": 3.0}, [r(3, 6) * 3]),
    "gelu_tanh": fn_instance("nn.functional.gelu", "torch.nn.functional.gelu", [T0], {"approximate": "tanh"},
                             [r(2, 7)]),
    "avg_pool": fn_instance("nn.functional.avg_pool2d", "torch.nn.functional.avg_pool2d", [T0, 3],
                            {"stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": True},
                            [r(1, 2, 6, 6)]),
    "avg_pool_div": fn_instance("nn.functional.avg_pool2d", "torch.nn.functional.avg_pool2d", [T0, [2, 3]],
                                {"padding": [1, 1], "count_include_pad": False, "divisor_override": 5},
                                [r(2, 1, 5, 7)]),
    "max_pool1d": fn_instance("nn.functional.max_pool1d", "torch.nn.functional.max_pool1d", [T0, 3],
                              {"stride": 2, "padding": 1}, [r(2, 3, 9)]),
    "max_pool2d": fn_instance("nn.functional.max_pool2d", "torch.nn.functional.max_pool2d", [T0, 2], {},
                              [r(2, 3, 6, 6)]),
    "conv2d": fn_instance("nn.functional.conv2d", "torch.nn.functional.conv2d", [T0, T1, T2],
                          {"stride": 2, "padding": 1, "dilation": 1, "groups": 1},
                          [r(2, 4, 7, 7), r(6, 4, 2, 3), r(6)]),
    "conv1d_grouped": fn_instance("nn.functional.conv1d", "torch.nn.functional.conv1d", [T0, T1, T2],
                                  {"groups": 3, "padding": 1}, [r(2, 6, 9), r(9, 2, 3), r(9)]),
    "pad_reflect": fn_instance("nn.functional.pad", "torch.nn.functional.pad", [T0, [2, 1, 0, 3]],
                               {"mode": "reflect"}, [r(2, 3, 5, 6)], variant="reflect"),
    "pad_crop": fn_instance("nn.functional.pad", "torch.nn.functional.pad", [T0, [-1, 1]], {"mode": "constant"},
                            [r(2, 5)], variant="constant"),
    "mse_mean": fn_instance("nn.functional.mse_loss", "torch.nn.functional.mse_loss", [T0, T1], {},
                            [r(4, 3), r(4, 3)]),
    "conv2d_mod": module_instance("Conv2d", [2, 4, 4], {"dilation": 2, "padding_mode": "reflect"}, [r(2, 2, 9, 9)]),
    "conv2d_dw": module_instance("Conv2d", [3, 6, 3], {"padding": 1}, [r(2, 3, 5, 5)]),
    "conv1d_mod": module_instance("Conv1d", [2, 3, 3], {"stride": 2}, [r(3, 2, 11)]),
    "convt": module_instance("ConvTranspose2d", [2, 3, 2], {}, [r(1, 2, 4, 4)]),
    "linear": module_instance("Linear", [5, 3], {}, [r(4, 5)]),
    "layernorm": module_instance("LayerNorm", [5], {}, [r(3, 5)]),
    "batchnorm": module_instance("BatchNorm2d", [3], {}, [r(2, 3, 4, 4)]),
    "instnorm_unbatched": module_instance("InstanceNorm1d", [3], {"affine": True}, [r(3, 6)]),
    "gru": module_instance("GRU", [3, 4], {"num_layers": 2, "batch_first": True}, [r(2, 5, 3)]),
    "encoder": module_instance("TransformerEncoderLayer", [], {"d_model": 4, "nhead": 2, "dim_feedforward": 8,
                                                               "dropout": 0.0}, [r(5, 2, 4)]),
    "reflection_pad": module_instance("ReflectionPad2d", [[1, 2, 0, 1]], {}, [r(1, 2, 4, 5)]),
    "softmax0": module_instance("Softmax", [], {"dim": 0}, [r(3, 4)]),
}

# rule -> instances it must apply to and pass on
PASSING = {
    "torch.compile.inductor": ["relu"],
    "torch.jit.script": ["softplus", "conv2d_mod"],
    "torch.jit.trace": ["conv2d"],
    "torch.export": ["linear", "max_pool2d"],
    "torch.same_padding": ["conv2d", "conv2d_mod"],
    "torch.dim_lift": ["max_pool1d", "conv1d_mod"],
    "torch.depthwise": ["conv1d_grouped", "conv2d_dw"],
    "torch.dilated": ["conv2d", "conv1d_mod"],
    "torch.formula": ["softplus", "gelu_tanh", "avg_pool", "avg_pool_div", "batchnorm", "instnorm_unbatched",
                      "layernorm"],
    "torch.sparse.coo": ["sin"],
    "torch.sparse.csr": ["abs"],
    "torch.image_scale": ["max_pool2d", "relu"],
    "torch.time_major": ["gru", "encoder"],
    "torch.pipeline": ["linear", "conv2d_mod"],
    "torch.dtype.int32": ["add_int"],
    "torch.dtype.float64": ["relu", "max_pool2d"],
    "torch.dtype.float16": ["max_pool2d"],
    "torch.pad_unpad": ["pad_reflect", "reflection_pad"],
    "torch.batch": ["layernorm", "batchnorm", "relu"],
    "torch.vmap": ["linear", "relu"],
    "torch.save_load.state_dict": ["batchnorm"],
    "torch.save_load.module": ["linear"],
    "torch.export.save_load": ["conv1d_mod"],
    "torch.channels_last": ["conv2d_mod", "batchnorm"],
    "torch.autograd.jvp_vjp": ["softplus", "conv2d"],
}

# (rule, instance, a piece of the reason it gives for not applying)
NOT_APPLICABLE = [
    ("torch.same_padding", "relu", "not a convolution"),
    ("torch.same_padding", "convt", "transposed"),
    ("torch.sparse.coo", "conv2d", "OpInfo.supports_sparse is False"),
    ("torch.batch", "softmax0", "dim=0"),
    ("torch.batch", "mse_mean", "reduction='mean'"),
    ("torch.image_scale", "conv2d", "not positively homogeneous"),
    ("torch.time_major", "conv2d_mod", "no batch_first parameter"),
    ("torch.pad_unpad", "pad_crop", "negative padding"),
    ("torch.pad_unpad", "relu", "not documented as padding"),
    ("torch.dtype.int32", "relu", "no int64 input"),
    ("torch.dtype.float64", "softplus", "not selected"),
    ("torch.dim_lift", "relu", "1-d/2-d"),
    ("torch.save_load.state_dict", "relu", "torch_module"),
    ("torch.autograd.jvp_vjp", "linear", "no OpInfo"),
]


def test_registry_covers_the_categories_torch_has():
    mine = {n: rule for n, rule in RULES.items() if rule.library == "torch"}
    assert set(PASSING) == set(mine)
    eagle = {c for c in CATEGORIES if CATEGORIES[c][0].isdigit()}
    # PyTorch has no separable-conv API and no image codec: documented in the module, no rule
    assert eagle - {"separable", "codec"} <= {rule.category for rule in mine.values()}
    assert "separable" in torch_rules.__doc__ and "codec" in torch_rules.__doc__
    for rule in mine.values():
        assert rule.name.startswith("torch.") and rule.derived_from and rule.summary
        graph_a, graph_b = rule.graph_functions()
        assert callable(graph_a) and callable(graph_b), rule.name
        # what a reproducer pastes: real source, no dlci import, compiles on its own
        bundle = standalone_source(TorchCase, rule.graph_a_fn, rule.graph_b_fn)
        assert not any("dlci" in line for line in bundle.imports), (rule.name, bundle.imports)
        compile("\n".join(bundle.imports) + "\n" + bundle.code, rule.name, "exec")


@pytest.mark.parametrize("rule", sorted(PASSING))
def test_every_reproducer_renders(rule):
    text = render_rule_text(RULES[rule], I[PASSING[rule][0]], _finding(rule))
    compile(text, rule, "exec")
    assert "import dlci" not in text and "from dlci" not in text


@pytest.mark.parametrize("rule,key", [(rule, key) for rule, keys in PASSING.items() for key in keys])
def test_rule_applies_and_passes(rule, key):
    out = execute_rule(I[key], f"rule.{rule}")
    assert out.status == PASS, (out.status, out.stage, out.symptom, out.message, out.traceback[-1500:])


@pytest.mark.parametrize("rule,key,reason", NOT_APPLICABLE)
def test_rule_says_why_it_does_not_apply(rule, key, reason):
    assert reason in (RULES[rule].why_not(I[key]) or "")
    out = execute_rule(I[key], f"rule.{rule}")
    assert out.status == UNSUPPORTED and reason in out.message


def nudged_batch(case, inputs):
    """torch.batch's graph B with the last sample slightly off."""
    outs = one_by_one(case, inputs)
    outs[0][-1] = outs[0][-1] * 1.001 + 1e-3
    return outs


def one_ulp_off(case, inputs):
    """torch.pad_unpad's graph B one ulp off: an exact rule must see it."""
    out = unpadded(case, inputs)[0].copy()
    out.flat[0] = np.nextafter(out.flat[0], np.float32(np.inf))
    return [out]


def _broken(name: str, base: str, graph_b) -> Rule:
    """A copy of a registered rule whose graph B is deliberately wrong."""
    rule = RULES[base]
    return Rule(name=name, category=rule.category, library="torch", summary="broken on purpose",
                graph_a=rule.graph_a, graph_b="wrong", graph_a_fn=rule.graph_a_fn, graph_b_fn=graph_b,
                why_not=rule.why_not, exact=rule.exact)


def test_broken_graph_b_is_an_inconsistency_not_a_pass():
    nudge = _broken("test.broken.batch", "torch.batch", nudged_batch)
    drop = _broken("test.broken.pad", "torch.pad_unpad", one_ulp_off)
    with mock.patch.dict(rules_pkg.RULES):
        rules_pkg.register(nudge, drop)
        assert execute_rule(I["layernorm"], "rule.test.broken.batch").status == INCONSISTENT
        assert execute_rule(I["layernorm"], "rule.torch.batch").status == PASS
        out = execute_rule(I["pad_reflect"], "rule.test.broken.pad")
        assert out.status == INCONSISTENT and "exact" in out.message
    assert "test.broken.batch" not in rules_pkg.RULES and "test.broken.pad" not in rules_pkg.RULES


def _finding(target: str, stage: str = "compare", message: str = "") -> SimpleNamespace:
    return SimpleNamespace(id="F1", target=f"rule.{target}", target_version=torch.__version__, symptom="value mismatch",
                           operator="op", signature="sig", stage=stage, message=message)


def test_reproducer_runs_without_dlci(tmp_path):
    """The reproducer of a (deliberately) broken rule pastes the rule's functions and helpers from their modules
    and this test module, runs with dlci not importable, and exits 1 while the graphs disagree; the real rule's
    exits 0."""
    broken = _broken("test.broken.batch", "torch.batch", nudged_batch)
    inst = I["layernorm"]
    for rule, code in ((broken, 1), (RULES["torch.batch"], 0)):
        script = tmp_path / f"{rule.name}.py"
        script.write_text(render_rule_text(rule, inst, _finding(rule.name)))
        run = run_without_dlci(script, tmp_path)
        assert run.returncode == code, (rule.name, run.stdout[-2000:], run.stderr[-3000:])
        assert ("REPRODUCED value mismatch" in run.stdout) == (code == 1), run.stdout


def refuses(case, inputs):
    """torch.batch's graph B failing as a broken kernel would."""
    raise RuntimeError("the kernel refuses this batch")


def misspelt(case, inputs):
    """torch.batch's graph B with the reproducer's own mistake: a name nothing binds (looked up at run time: the
    renderer refuses a pasted function that names one)."""
    return eval("undefined_in_the_reproducer")(case, inputs)


def test_a_crash_reproducer_tells_the_crash_from_another_error_and_from_its_own_mistake(tmp_path):
    """Graph B raising what the finding recorded reproduces (exit 1); another exception is "a different error"
    (exit 0); a NameError of the script's own is let through (exit 1 without REPRODUCED: neither)."""
    inst = I["layernorm"]
    for graph_b, symptom, code, reproduced in ((refuses, "RuntimeError", 1, True), (refuses, "ValueError", 0, False),
                                                (misspelt, "RuntimeError", 1, False)):
        rule = _broken(f"test.{graph_b.__name__}", "torch.batch", graph_b)
        f = _finding(rule.name, stage="run", message="the kernel refuses this batch")
        f.symptom, f.oracle_status = symptom, "crash"
        script = tmp_path / f"{graph_b.__name__}_{symptom}.py"
        script.write_text(render_rule_text(rule, inst, f))
        run = run_without_dlci(script, tmp_path)
        assert (run.returncode, "REPRODUCED" in run.stdout) == (code, reproduced), (run.stdout, run.stderr[-2000:])
        assert ("NameError" in run.stderr) == (graph_b is misspelt), run.stderr[-2000:]


def test_fp64_arbitration_keeps_rounding_quiet():
    """A reformulation whose float32 rounding legitimately differs (x*255 then /255; one sample at a time) on a
    cancelling convolution (inputs near 1000, zero-mean kernel): beyond the float32 tolerance, yet a pass, because
    graph A's float64 form shows the difference is rounding."""
    x = (1000 + RNG.standard_normal((2, 4, 9, 9))).astype(np.float32)
    w = RNG.standard_normal((3, 4, 3, 3))
    w = (w - w.mean((1, 2, 3), keepdims=True)).astype(np.float32)
    inst = fn_instance("nn.functional.conv2d", "torch.nn.functional.conv2d", [T0, T1], {}, [x, w])
    for rule in ("torch.image_scale", "torch.batch"):
        case = case_for(inst)
        graph_a, graph_b = RULES[rule].graph_functions()
        a = graph_a(case, [np.array(v) for v in case.inputs])[0]
        b = graph_b(case, [np.array(v) for v in case.inputs])[0]
        assert not np.allclose(b, a, rtol=1.3e-6, atol=1e-5), rule  # float32 tolerance alone would report it
        out = execute_rule(inst, f"rule.{rule}")
        assert out.status == PASS, (rule, out.message)


def test_graph_b_errors_outside_the_feature_are_unsupported():
    # torch.export refuses data-dependent output shapes: a documented limit, not a crash
    inst = fn_instance("nonzero", "torch.nonzero", [T0], {}, [np.array([[0.0, 1.0], [2.0, 0.0]], np.float32)])
    out = execute_rule(inst, "rule.torch.export")
    assert out.status in (PASS, UNSUPPORTED), (out.status, out.message)
    # a CSR conversion of a 1-d input is refused by metadata before anything runs
    one_d = fn_instance("abs", "torch.abs", [T0], {}, [r(5)])
    assert "2-d" in RULES["torch.sparse.csr"].why_not(one_d)
