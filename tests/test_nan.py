"""dlci nan: the vulnerable-operation table, the gradient-guided NaN/Inf search (PyTorch and TensorFlow), the
random baseline, the command with its reproducers, and boundary instances for the compiler campaign.

The programs are tiny and written here (tmp files); every search has fixed seeds, so "random misses what gradient
finds" is a property of the programs (a softmax probability only underflows for a logit gap past 103), not luck.
"""
from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
from nan_helpers import bug_line, one_torch_thread, run_without_dlci, write_program

TORCH_PROGRAMS = '''
import torch
import torch.nn.functional as F
from torch import nn


def buggy():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(6, 8)
    y = torch.randint(0, 4, (6,))
    z = model(x)
    loss = -(torch.log(torch.softmax(z, 1)) * F.one_hot(y, 4)).sum(1).mean()  # BUG
    loss.backward()
    return loss.item()


def guarded():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(6, 8)
    y = torch.randint(0, 4, (6,))
    z = model(x)
    loss = -(F.log_softmax(z, 1) * F.one_hot(y, 4)).sum(1).mean()
    loss.backward()
    return loss.item()


def stdnorm():
    fc = nn.Linear(4, 32)
    x = torch.rand(16, 4) * 2 - 1
    h = torch.relu(fc(x))
    z = h / h.std(dim=1, keepdim=True)  # BUG
    return z.sum().item()


def raises():
    x = torch.randn(3)
    return x.reshape(7)
'''

TF_PROGRAM = '''
import tensorflow as tf


def churn():
    w = tf.random.normal((8, 1))
    x = tf.random.normal((16, 8))
    p = tf.sigmoid(tf.matmul(x, w))
    loss = -tf.reduce_mean(tf.math.log(1.0 - p))  # BUG
    return float(loss)
'''


@pytest.fixture(scope="module")
def torch_file(tmp_path_factory):
    with one_torch_thread():
        yield write_program(tmp_path_factory, "nanprog", "models.py", TORCH_PROGRAMS)


@pytest.fixture(scope="module")
def tf_file(tmp_path_factory) -> Path:
    return write_program(tmp_path_factory, "nanprog_tf", "tf_models.py", TF_PROGRAM)


# -- the table ----------------------------------------------------------------------------------------------

def test_table_derives_domains_from_opinfo():
    from dlci.nan import table as T
    derived = {d["opinfo"]: d for d in T.derive_opinfo_domains()}
    assert (derived["acos"]["low"], derived["acos"]["high"]) == (-1.0, 1.0)
    assert {"torch.acos", "torch.Tensor.acos", "torch.arccos"} <= set(derived["acos"]["torch"])
    assert derived["log"]["low"] == 0.0 and derived["log"]["high"] is None
    assert derived["log1p"]["low"] == -1.0
    # merged: hand entries keep their framework names, OpInfo-only domain ops become entries of their own
    merged = T.Table(T.merge(T.ENTRIES, list(derived.values())))
    assert merged.torch("torch.Tensor.log")[0]["name"] == "log"
    assert merged.torch("torch.acos")[0].get("opinfo") == "acos"
    assert merged.by_name("erfinv")["check"] == "domain" and merged.by_name("erfinv")["high"] == 1.0
    assert merged.torch("torch.Tensor.__truediv__")[1] == [1, "other"]
    assert merged.torch("torch.Tensor.__rtruediv__")[1] == [0, "self"]
    assert merged.tf("tf.math.log")[0]["name"] == "log" and merged.tf("tf.Tensor.__truediv__")[0]["name"] == "div"
    assert merged.tf("tf.nn.softmax")[0].get("precursor")
    assert T.same_op("torch.Tensor.div", "torch.div") and T.same_op("tf.math.truediv", "tf.math.divide")


def test_distances_follow_the_dtype():
    import torch
    from dlci.nan import table as T
    from dlci.nan.torch_trace import TorchAdapter
    t = T.table(with_opinfo=False)
    entry, pos = t.torch("torch.exp")
    d32 = T.call_distance(entry, "torch.exp", (torch.tensor([80.0]),), {}, pos, TorchAdapter(), "torch")
    d64 = T.call_distance(entry, "torch.exp", (torch.tensor([80.0], dtype=torch.float64),), {}, pos, TorchAdapter(),
                          "torch")
    assert float(d32) == pytest.approx(np.log(np.finfo(np.float32).max) - 80.0)
    assert float(d64) == pytest.approx(np.log(np.finfo(np.float64).max) - 80.0)
    entry, pos = t.torch("torch.pow")
    frac = T.call_distance(entry, "torch.pow", (torch.tensor([0.5, -0.25]), 0.4), {}, pos, TorchAdapter(), "torch")
    assert float(frac.min()) == -0.25  # a negative base under a fractional exponent is past the boundary
    assert T.call_distance(entry, "torch.pow", (torch.tensor([0.5]), 2), {}, pos, TorchAdapter(), "torch") is not None


# -- the search --------------------------------------------------------------------------------------------

def test_gradient_search_finds_softmax_underflow_and_random_misses_it(torch_file):
    from dlci.nan import search
    spec = f"{torch_file}:buggy"
    res = search(spec, strategy="gradient", budget=20, seed=0)
    assert res.found and res.kind == "inf" and res.op == "torch.log" and res.phase == "forward"
    assert res.file == str(torch_file) and res.line == bug_line(torch_file, "buggy")
    assert "torch.log(torch.softmax(z, 1))" in res.code
    assert res.seconds_to_first is not None and res.seconds_to_first < 15
    assert res.externals and all(isinstance(v, np.ndarray) for v in res.externals.values())
    assert any("torch.randn" in k or "kaiming" in k for k in res.externals)
    d = res.to_dict()
    assert d["found"] and d["op"] == "torch.log" and json.dumps(d)
    # the baseline re-runs the program with fresh seeds under the same interception: a logit gap past 103 does
    # not happen by chance
    base = search(spec, strategy="random", budget=3, seed=0)
    assert not base.found and base.runs > 5 and base.seconds_to_first is None


def test_guarded_program_has_no_finding(torch_file):
    from dlci.nan import search
    res = search(f"{torch_file}:guarded", strategy="gradient", budget=4, seed=0)
    assert not res.found
    # the search did work: the log_softmax site was a candidate and was driven to its underflow boundary
    assert any(c["op"] == "torch.nn.functional.log_softmax" for c in res.candidates)


def test_gradient_search_finds_division_by_zero_std(torch_file):
    import torch
    from dlci.nan import search
    originals = (torch.manual_seed, torch.random.manual_seed, np.random.seed, torch.inference_mode)
    res = search(f"{torch_file}:stdnorm", strategy="gradient", budget=20, seed=0)
    assert res.found and res.kind == "nan" and res.line == bug_line(torch_file, "stdnorm")
    assert res.op in ("torch.Tensor.div", "torch.Tensor.__truediv__")
    # values from rand stay in [0, 1): the failure-inducing draw is a legal one
    rand = [v for k, v in res.externals.items() if "torch.rand@" in k]
    assert all(v.min() >= 0 and v.max() < 1 for v in rand)
    # the interception is gone afterwards
    assert (torch.manual_seed, torch.random.manual_seed, np.random.seed, torch.inference_mode) == originals
    assert torch.overrides._get_current_function_mode() is None


def test_tensorflow_search_finds_log_of_saturated_sigmoid(tf_file):
    import tensorflow as tf
    from dlci.nan import search
    originals = (tf.math.log, tf.exp, tf.random.normal, tf.Tensor.__truediv__)
    res = search(f"{tf_file}:churn", strategy="gradient", budget=30, seed=0)
    assert res.found and res.op == "tf.math.log" and res.kind == "inf"
    assert res.line == bug_line(tf_file, "churn")
    # the wrappers are taken off after every run
    assert (tf.math.log, tf.exp, tf.random.normal, tf.Tensor.__truediv__) == originals


# -- the command, reproducers, exit codes ---------------------------------------------------------------------

def _args(out: Path, *programs: str, budget: float = 10.0, strategy: str = "gradient") -> Namespace:
    return Namespace(program=list(programs), budget=budget, strategy=strategy, seed=0, out=str(out), fail_on="any")


@pytest.mark.slow
def test_command_writes_confirmed_findings_with_standalone_reproducers(torch_file, tmp_path):
    from dlci.nan.command import main
    prog = tmp_path / "prog.py"
    prog.write_text(torch_file.read_text())
    out = tmp_path / "out"
    rc = main(_args(out, f"{prog}:buggy", f"{prog}:guarded", budget=8))
    assert rc == 1
    doc = json.loads((out / "findings.json").read_text())
    assert doc["version"] == 1 and len(doc["findings"]) == 1
    f = doc["findings"][0]
    line = bug_line(prog, "buggy")
    assert f["oracle"] == "nan" and f["operator"] == "torch.log" and f["symptom"] == "Inf in torch.log"
    assert f["target"].startswith("torch ") and f["target"].endswith(" eager") and f["new_in_pr"] is None
    assert f["line"] == line and f["signature"].endswith(f"|torch.log|{f['file']}:{line}")
    assert f["repro"].startswith("repro/") and f["repro"].endswith("_nan_torch_log.py")
    st = doc["stats"]
    assert st["tests_run"] >= st["tests_valid"] > 0 and st["per_target"] and len(st["programs"]) == 2
    assert "torch.log" in (out / "report.md").read_text()
    # the reproducer alone, with dlci not importable: exits 1 while the bug is there ...
    script = out / f["repro"]
    p = run_without_dlci(script)
    assert p.returncode == 1 and "REPRODUCED" in p.stdout, p.stdout + p.stderr
    # ... and 0 once the line is fixed (same line number, log_softmax instead of log(softmax))
    fixed = prog.read_text().replace("torch.log(torch.softmax(z, 1))", "F.log_softmax(z, 1)")
    prog.write_text(fixed)
    p = run_without_dlci(script)
    assert p.returncode == 0 and "not reproduced" in p.stdout, p.stdout + p.stderr



def test_reproducer_helpers_are_self_contained():
    """The helpers pasted into reproducers import no dlci and use only what a reproducer defines."""
    import ast
    import builtins
    import inspect
    import textwrap
    from dlci.nan import standalone
    tree = ast.parse(Path(standalone.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert not (node.module or "").startswith("dlci"), ast.dump(node)
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("dlci") for a in node.names), ast.dump(node)
    header = {"math", "random", "zlib", "np", "os", "sys"}  # what the reproducer header imports
    for group in (standalone.TORCH, standalone.TF):
        pasted = {f.__name__ for f in standalone.COMMON + group}
        for f in standalone.COMMON + group:
            fn = ast.parse(textwrap.dedent(inspect.getsource(f))).body[0]
            bound = {a.arg for a in ast.walk(fn) if isinstance(a, ast.arg)}
            bound |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            bound |= {a.asname or a.name.split(".")[0] for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))
                      for a in n.names}
            bound |= {n.name for n in ast.walk(fn) if isinstance(n, ast.FunctionDef)}
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            free = used - bound - pasted - header - set(dir(builtins))
            assert not free, (f.__name__, free)


@pytest.mark.parametrize("spec,needle", [
    ("no_colon_here", "expected FILE:FUNCTION"),
    ("/nonexistent/dir/prog.py:train", "no such file"),
    ("{file}:missing_function", "has no function"),
    ("{file}:raises", "raised on its own"),
])
def test_bad_program_specs_exit_2(torch_file, tmp_path, capsys, spec, needle):
    from dlci.nan.command import main
    out = tmp_path / "out"
    rc = main(_args(out, spec.format(file=torch_file), budget=2))
    assert rc == 2
    assert needle in capsys.readouterr().err
    doc = json.loads((out / "findings.json").read_text())  # results are written even then
    assert doc["findings"] == [] and needle in doc["stats"]["programs"][0]["result"]


def test_load_program_errors_name_the_problem(tmp_path):
    from dlci.nan import ProgramError, load_program
    bad = tmp_path / "broken.py"
    bad.write_text("import torch\ndef f(:\n")
    with pytest.raises(ProgramError, match="importing .*broken.py failed"):
        load_program(f"{bad}:f")
    args = tmp_path / "needs_args.py"
    args.write_text("import torch\ndef f(x):\n    return x\n")
    with pytest.raises(ProgramError, match="must take no arguments"):
        load_program(f"{args}:f")


# -- boundary instances for the compiler campaign --------------------------------------------------------------

def _instance(fn: str, *args, **kwargs):
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.instance.recipe import params_of
    from dlci.sources._common import Slots, encode
    slots = Slots()
    a = [encode(v, slots) for v in args]
    k = {n: encode(v, slots) for n, v in kwargs.items()}
    return Instance(op="aten::" + fn.rsplit(".", 1)[-1], framework="torch",
                    call={"kind": "torch_fn", "fn": fn, "args": a, "kwargs": k},
                    inputs=[TensorSpec.of(x) for x in slots.arrays], params=params_of(a, k),
                    origin=Origin("opinfo", f"op_db:{fn}#0", "torch"),
                    arrays={f"in:{i}": x for i, x in enumerate(slots.arrays)})


def test_boundary_instances_sit_at_the_domain_edge():
    import torch
    from dlci.nan import boundary_instances
    from dlci.models.rebuild import torch_call
    g = torch.Generator().manual_seed(0)
    log = _instance("torch.log", torch.rand(3, 4, generator=g) + 0.1)
    div = _instance("torch.div", torch.randn(5, generator=g), torch.randn(5, generator=g) + 3)
    exp = _instance("torch.exp", torch.randn(6, generator=g))
    acos = _instance("torch.Tensor.acos", torch.rand(4, generator=g) - 0.5)
    add = _instance("torch.add", torch.randn(3, generator=g), torch.randn(3, generator=g))
    erfinv = _instance("torch.erfinv", torch.rand(4, generator=g) - 0.5)  # its domain comes from OpInfo alone
    out = boundary_instances([log, div, exp, acos, add, erfinv], budget=60, seed=0)
    by_op: dict[str, list] = {}
    for inst in out:
        by_op.setdefault(inst.op, []).append(inst)
        assert inst.origin.source == "nan_search" and "edge:" in inst.origin.test
        assert inst.call == {"aten::log": log, "aten::div": div, "aten::exp": exp, "aten::acos": acos,
                             "aten::erfinv": erfinv}[inst.op].call
        assert [s.shape for s in inst.inputs] == [list(a.shape) for a in inst.input_arrays()]
        module, xs = torch_call(inst)  # rebuilds, runs, and the domain still allows it: finite outputs
        with torch.no_grad():
            assert bool(torch.isfinite(module(*xs)).all())
    assert "aten::add" not in by_op  # not a vulnerable operation
    f32 = np.finfo(np.float32)
    logs = [i.arrays["in:0"].min() for i in by_op["aten::log"]]
    assert f32.smallest_subnormal in logs and f32.smallest_normal in logs and min(logs) > 0
    divisors = [np.abs(i.arrays["in:1"]).min() for i in by_op["aten::div"]]
    assert min(divisors) < 1e-30 and min(divisors) > 0
    exps = [i.arrays["in:0"].max() for i in by_op["aten::exp"]]
    assert np.log(f32.max) - 0.01 < max(exps) < np.log(f32.max)
    acoses = [np.abs(i.arrays["in:0"]).max() for i in by_op["aten::acos"]]
    assert np.float32(1) - f32.epsneg in acoses  # the last float inside [-1, 1]
    assert np.float32(1) - f32.epsneg in [np.abs(i.arrays["in:0"]).max() for i in by_op["aten::erfinv"]]
    assert len({i.id for i in out}) == len(out)
