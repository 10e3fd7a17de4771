"""dlci nan at exact collapses: snap moves (dlci/nan/snap.py), the search's use of its whole budget, the budget as a
wall-clock bound, Keras weights matched to their draws through variable creation, and gradients through the
TensorFlow backward probes.

The programs here are held out: none of them is bundled (dlci/nan/programs), so the search is not fitted to them.
Each buggy one has a NaN/Inf that random draws never reach (a variance, a norm or a distance exactly 0, a cosine
exactly 1); each guarded twin must give no finding.
"""
from __future__ import annotations

import json
import os
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest
from nan_helpers import bug_line, one_torch_thread, write_program

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TORCH_PROGRAMS = '''
import torch
import torch.nn.functional as F
from torch import nn


def channel_std():
    """Per-channel batch standardisation of a conv feature map, written by hand, no eps."""
    conv = nn.Conv2d(3, 4, 3, padding=1)
    images = torch.rand(6, 3, 8, 8)
    f = conv(images)
    mu = f.mean(dim=(0, 2, 3), keepdim=True)
    var = ((f - mu) ** 2).mean(dim=(0, 2, 3), keepdim=True)
    out = (f - mu) * torch.rsqrt(var)  # BUG
    loss = out.abs().mean()
    loss.backward()
    return loss.item()


def channel_std_guarded():
    conv = nn.Conv2d(3, 4, 3, padding=1)
    images = torch.rand(6, 3, 8, 8)
    f = conv(images)
    mu = f.mean(dim=(0, 2, 3), keepdim=True)
    var = ((f - mu) ** 2).mean(dim=(0, 2, 3), keepdim=True)
    out = (f - mu) * torch.rsqrt(var + 1e-5)
    loss = out.abs().mean()
    loss.backward()
    return loss.item()


def readout_std():
    """Batch standardisation of random-projection scores; eps guards the division, not sqrt's derivative."""
    emb = nn.Embedding(50, 12)
    tokens = torch.randint(0, 50, (24,))
    proj = torch.randn(12, 5)
    s = emb(tokens) @ proj
    sd = torch.sqrt(((s - s.mean(0)) ** 2).mean(0))  # BUG
    z = (s - s.mean(0)) / (sd + 1e-6)
    loss = z.pow(2).mean()
    loss.backward()
    return loss.item()


def readout_std_guarded():
    emb = nn.Embedding(50, 12)
    tokens = torch.randint(0, 50, (24,))
    proj = torch.randn(12, 5)
    s = emb(tokens) @ proj
    sd = torch.sqrt(((s - s.mean(0)) ** 2).mean(0) + 1e-6)
    z = (s - s.mean(0)) / sd
    loss = z.pow(2).mean()
    loss.backward()
    return loss.item()


def unit_rows():
    """Linear projections normalised by hand to unit length (no ReLU: only an exact zero row has norm 0)."""
    enc = nn.Linear(10, 6)
    x = torch.randn(16, 10)
    e = enc(x)
    z = e / e.norm(dim=1, keepdim=True)  # BUG
    loss = -(z @ z.T).logsumexp(1).mean()
    loss.backward()
    return loss.item()


def unit_rows_guarded():
    enc = nn.Linear(10, 6)
    x = torch.randn(16, 10)
    e = enc(x)
    z = e / (e.norm(dim=1, keepdim=True) + 1e-6)
    loss = -(z @ z.T).logsumexp(1).mean()
    loss.backward()
    return loss.item()


def pair_sqrt():
    """Distance between the encodings of two inputs, as sqrt of the summed squared difference."""
    enc = nn.Sequential(nn.Linear(7, 12), nn.Tanh(), nn.Linear(12, 4))
    a = torch.randn(12, 7)
    b = torch.randn(12, 7)
    d = torch.sqrt(((enc(a) - enc(b)) ** 2).sum(1))  # BUG
    loss = F.relu(1.0 - d).mean()
    loss.backward()
    return loss.item()


def pair_sqrt_guarded():
    enc = nn.Sequential(nn.Linear(7, 12), nn.Tanh(), nn.Linear(12, 4))
    a = torch.randn(12, 7)
    b = torch.randn(12, 7)
    d = torch.sqrt(((enc(a) - enc(b)) ** 2).sum(1) + 1e-12)
    loss = F.relu(1.0 - d).mean()
    loss.backward()
    return loss.item()


def cosine_angle():
    """acos of a cosine written by hand; the division by the norms is unguarded too, but the angle is the bug
    training meets (predictions align with their targets)."""
    net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    x = torch.randn(18, 5)
    target = torch.randn(18, 3)
    pred = net(x)
    cos = (pred * target).sum(1) / (pred.norm(dim=1) * target.norm(dim=1))
    angle = torch.acos(cos)  # BUG
    loss = angle.mean()
    loss.backward()
    return loss.item()


def cosine_angle_guarded():
    net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 3))
    x = torch.randn(18, 5)
    target = torch.randn(18, 3)
    pred = net(x)
    cos = (pred * target).sum(1) / (pred.norm(dim=1) * target.norm(dim=1) + 1e-8)
    angle = torch.acos(cos.clamp(-1 + 1e-6, 1 - 1e-6))
    loss = angle.mean()
    loss.backward()
    return loss.item()


def clamped():
    """Guarded by clamps: every site sits on a floor, so a search exhausts them quickly."""
    w = torch.randn(6, 1, requires_grad=True)
    x = torch.randn(10, 6)
    p = torch.sigmoid(x @ w).clamp(1e-4, 1 - 1e-4)
    loss = -(torch.log(p) + torch.log(1 - p)).mean()
    loss.backward()
    return loss.item()

'''

TF_PROGRAMS = '''
import keras
import tensorflow as tf


class Project(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_normal")
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal")

    def call(self, x):
        return tf.matmul(x, self.w) + self.b


class Net(keras.Model):
    def __init__(self, eps):
        super().__init__()
        self.project = Project(6)
        self.out = keras.layers.Dense(1)
        self.eps = eps

    def call(self, x):
        h = self.project(x)
        mean, var = tf.nn.moments(h, axes=[0])
        if self.eps:
            return self.out((h - mean) * tf.math.rsqrt(var + self.eps))
        return self.out((h - mean) * tf.math.rsqrt(var))  # BUG


def fit(eps):
    model = Net(eps)
    opt = keras.optimizers.SGD(learning_rate=0.5)
    x = tf.random.normal((32, 5))
    y = tf.random.normal((32, 1))
    for _ in range(3):  # large steps: the weights end far from their initial draws
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return float(loss)


def whitened():
    return fit(0.0)


def whitened_guarded():
    return fit(1e-5)


def through_probe():
    """A vulnerable op (log) downstream of another (sqrt), after the program's own backward."""
    w = tf.Variable(tf.random.normal((4, 3)))
    x = tf.random.normal((8, 4))
    with tf.GradientTape() as tape:
        r = tf.sqrt(tf.square(tf.matmul(x, w)) + 1.0)
        loss = tf.reduce_mean(tf.math.log(r))
    tape.gradient(loss, [w])
    return float(loss)
'''


@pytest.fixture(scope="module")
def torch_file(tmp_path_factory):
    with one_torch_thread():
        yield write_program(tmp_path_factory, "snapprog", "held_out.py", TORCH_PROGRAMS)


@pytest.fixture(scope="module")
def tf_file(tmp_path_factory) -> Path:
    return write_program(tmp_path_factory, "snapprog_tf", "held_out_tf.py", TF_PROGRAMS)


# -- the moves ----------------------------------------------------------------------------------------------

def _ext(index, value, low=-np.inf, high=np.inf, scale=1.0):
    from dlci.nan.core import External
    value = np.asarray(value, dtype=np.float32)
    return External(index=index, gen="torch.randn", file="", line=0, shape=value.shape, dtype="float32",
                    orig=value, low=low, high=high, scale=scale)


def _moves(externals, grads, kind="both"):
    from dlci.nan.snap import snaps
    return {m.label: m.values for m in snaps(externals, {}, grads, kind)}


def test_zero_moves_follow_the_gradient_support():
    """A column statistic of x @ w: its gradient for w lives in one column, which the move zeroes (and only it);
    a bias under a shift-invariant statistic has no gradient and is zeroed whole."""
    rng = np.random.default_rng(0)
    x, w, b = _ext(0, rng.normal(size=(5, 3))), _ext(1, rng.normal(size=(3, 4))), _ext(2, rng.normal(size=4))
    gw = np.zeros((3, 4))
    gw[:, 2] = rng.normal(size=3)
    moves = _moves([x, w, b], {0: rng.normal(size=(5, 3)), 1: gw, 2: np.zeros(4)}, "zero")
    col = moves["zero e1"][1]
    assert np.all(col[:, 2] == 0) and np.array_equal(np.delete(col, 2, axis=1), np.delete(w.orig, 2, axis=1))
    assert np.all(moves["zero e2"][2] == 0)
    assert set(moves["zero all"]) == {0, 1, 2}
    assert not any(k.startswith("unit") for k in moves)  # a collapse to 0 has no use for unit vectors


def test_moves_stay_in_the_legal_range():
    """A draw from uniform_(2, 3) cannot be 0: the move puts it at its bound (a constant: still a collapse)."""
    e = _ext(0, np.full((4, 2), 2.5), low=2.0, high=3.0)
    v = _moves([e], {0: np.ones((4, 2))}, "zero")["zero e0"][0]
    assert np.all(v == 2.0)


def test_equal_copy_and_unit_moves():
    from dlci.nan.snap import short
    rng = np.random.default_rng(1)
    a, b = _ext(0, rng.normal(size=(4, 3))), _ext(1, rng.normal(size=(4, 3)))
    g = np.zeros((4, 3))
    g[2] = [5.0, 1.0, 1.0]  # row 2 moves the operand most: the rows copy it
    moves = _moves([a, b], {0: g + 0.1, 1: np.ones((4, 3))}, "unit")
    rows = moves["equal e0 axis 0"][0]
    assert np.all(rows == rows[2]) and np.array_equal(rows[2], short(a.orig[2]).astype(np.float32))
    assert not np.array_equal(rows[2], a.orig[2]) or np.array_equal(short(a.orig[2]), a.orig[2])
    copy = next(v for k, v in moves.items() if k.startswith("copy"))
    assert len(copy) == 1 and np.array_equal(next(iter(copy.values())), a.orig if 1 in copy else b.orig)
    unit = moves["unit e0"][0]
    assert np.all(np.count_nonzero(unit, axis=1) == 1)
    assert np.all(np.abs(unit).sum(axis=1) == 1.0)  # a power of two that normalises exactly
    assert np.array_equal(np.argmax(np.abs(unit), axis=1), np.argmax(np.abs(a.orig), axis=1))
    assert not any(k.startswith("zero") for k in moves)  # cosines at 1 are not reached through zeros


def test_move_families_follow_the_table():
    from dlci.nan import table as T
    from dlci.nan.snap import family
    t = T.table()
    assert family(t.by_name("sqrt")) == "zero" and family(t.by_name("div")) == "zero"
    assert family(t.by_name("rsqrt")) == "zero" and family(t.by_name("normalize")) == "zero"
    assert family(t.by_name("acos")) == "unit" and family(t.by_name("log1p")) == "unit"
    assert family(t.by_name("exp")) is None and family(t.by_name("softmax")) is None


# -- the search -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("function,op", [
    ("channel_std", "torch.rsqrt"),
    ("readout_std", "torch.sqrt"),
    ("unit_rows", "div"),
    ("pair_sqrt", "torch.sqrt"),
    ("cosine_angle", "torch.acos"),
])
def test_snaps_reach_exact_collapses(torch_file, function, op):
    from dlci.nan import search
    from dlci.nan.programs import op_matches
    res = search(f"{torch_file}:{function}", budget=15, seed=0, minimize_seconds=0)
    assert res.found, res.to_dict()
    assert res.line == bug_line(torch_file, function), res.to_dict()
    assert op_matches(res.op, op) or op == "div" and res.op in ("torch.Tensor.div", "torch.Tensor.__truediv__")
    assert res.seconds_to_first < 10


@pytest.mark.slow
@pytest.mark.parametrize("function", ["channel_std", "unit_rows"])
def test_without_snaps_the_collapse_is_missed(torch_file, function):
    """The same programs: continuous steps alone and random draws do not get there in the same budget."""
    from dlci.nan import search
    assert not search(f"{torch_file}:{function}", budget=5, seed=0, minimize_seconds=0, snaps=False).found
    assert not search(f"{torch_file}:{function}", strategy="random", budget=5, seed=0).found


@pytest.mark.parametrize("function", ["channel_std_guarded", "readout_std_guarded", "unit_rows_guarded",
                                      "pair_sqrt_guarded", "cosine_angle_guarded", "clamped"])
def test_guarded_programs_have_no_finding_and_the_budget_is_used(torch_file, function):
    from dlci.nan import search
    budget = 3.0
    res = search(f"{torch_file}:{function}", budget=budget, seed=0)
    assert not res.found, res.to_dict()
    assert res.seconds >= 0.9 * budget, res.to_dict()  # no early "no finding"


def test_exhausted_sites_start_a_new_round(torch_file):
    """Every site of `clamped` sits on its clamp's floor: once they are exhausted, the search starts over from fresh
    draws rather than giving up with budget left."""
    from dlci.nan import search
    res = search(f"{torch_file}:clamped", budget=4, seed=0, max_restarts=1)
    assert not res.found and res.rounds >= 1 and res.seconds >= 3.6, res.to_dict()


def test_budget_bounds_the_whole_search(torch_file):
    """A finding made as the budget runs out is confirmed but not minimised past it: minimisation gets what is left
    of the budget, not a time of its own."""
    import sys
    from dlci.nan import load_program
    from dlci.nan.core import RunConfig
    engine = sys.modules["dlci.nan.search"]  # (dlci.nan.search the attribute is the function)
    s = engine.Searcher(load_program(f"{torch_file}:unit_rows"), budget=30, seed=0, minimize_seconds=60)
    rec0 = s.exec(RunConfig(run_seed=0, survey=True))
    with pytest.raises(engine._Found) as found:
        s._gradient(rec0)
        s._release()
    assert found.value.cfg.subst  # values to minimise
    s.t0 -= s.budget  # the budget is spent
    runs = s.runs
    res = s.result("gradient")
    s._finish(res, found.value.rec, found.value.cfg)
    assert res.found and s.runs - runs == 1  # the confirmation run alone


# -- TensorFlow -------------------------------------------------------------------------------------------------

def _target_run(prog, line: int):
    from dlci.nan import table as T
    from dlci.nan.core import RunConfig
    from dlci.nan.tf_trace import run
    survey = run(prog, RunConfig(run_seed=0, survey=True), T.table())
    key = next(k for k in survey.sites if k[2] == line)
    return run(prog, RunConfig(run_seed=0, target=key, differentiable=True), T.table())


def test_subclassed_model_weights_are_matched_to_their_draws(tf_file):
    """The custom layer's glorot_normal kernel moves far in three large SGD steps; it is still the draw that
    initialised it (matched at variable creation), so the search gets its gradient."""
    from dlci.nan import load_program
    rec = _target_run(load_program(f"{tf_file}:whitened"), bug_line(tf_file))
    kernel = next(e for e in rec.externals if e.gen == "tf.random.stateless_truncated_normal")
    assert kernel.iterative and kernel.index in rec.grads and np.any(rec.grads[kernel.index])
    bias = next(e for e in rec.externals if e.gen == "tf.random.stateless_normal")
    assert bias.iterative and bias.index in rec.grads


def test_gradients_pass_through_probed_operations(tf_file):
    """The log's distance is differentiated through the sqrt's backward probe, after the program's own backward
    went through it once."""
    from dlci.nan import load_program
    prog = load_program(f"{tf_file}:through_probe")
    line = next(i for i, ln in enumerate(tf_file.read_text().splitlines(), 1) if "tf.math.log(r)" in ln)
    rec = _target_run(prog, line)
    assert rec.target_d is not None and rec.grads and all(np.all(np.isfinite(g)) for g in rec.grads.values())
    assert any(np.any(g) for g in rec.grads.values())


@pytest.mark.slow
def test_tensorflow_collapse_with_a_reproducer_that_needs_no_dlci(tf_file, tmp_path):
    from dlci.nan import search
    from dlci.nan.command import main
    from nan_helpers import run_without_dlci
    guarded = search(f"{tf_file}:whitened_guarded", budget=4, seed=0)
    assert not guarded.found, guarded.to_dict()
    out = tmp_path / "out"
    rc = main(Namespace(program=[f"{tf_file}:whitened"], budget=30.0, strategy="gradient", seed=0, out=str(out),
                        fail_on="any"))
    doc = json.loads((out / "findings.json").read_text())
    assert rc == 1 and len(doc["findings"]) == 1, doc["stats"]
    f = doc["findings"][0]
    assert f["line"] == bug_line(tf_file) and f["operator"] == "tf.math.rsqrt", f
    p = run_without_dlci(out / f["repro"])
    assert p.returncode == 1 and "REPRODUCED" in p.stdout, p.stdout + p.stderr
