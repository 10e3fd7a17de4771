"""The bundled NaN/Inf programs (dlci/nan/programs): the manifest points at the marked lines, every program runs to a
finite loss with ordinary seeds, guarded twins stay finite over many seeds and under the gradient search, and the
gradient search finds each buggy program's operation and line."""
from __future__ import annotations

import math
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from dlci.nan.programs import MARKER, PROGRAMS, bundled_path, get, marker_lines, op_base, op_matches  # noqa: E402

BUGGY = [p.name for p in PROGRAMS if p.buggy]
GUARDED = [p.name for p in PROGRAMS if not p.buggy]
# the search budgets are ceilings: a find ends the search, so the file's time is set by how fast the finds are;
# minimize_seconds=0: the finding's values are not minimised (that is the engine's own test's business)
FIND_BUDGET = {"torch": 20.0, "tensorflow": 45.0}
GUARDED_BUDGET = {"torch": 2.0, "tensorflow": 3.0}
# how the expected operation is spelled on its line
SPELLING = {"div": ("/", "div"), "pow": ("pow", "**")}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny programs on a shared machine: more threads only contend
    yield
    torch.set_num_threads(before)


def seed_all(framework: str, seed: int) -> None:
    if framework == "torch":
        import torch
        torch.manual_seed(seed)
    else:
        import keras
        keras.utils.set_random_seed(seed)


def run(name: str, seed: int) -> float:
    prog = get(name)
    seed_all(prog.framework, seed)
    value = prog.entry()()
    assert isinstance(value, float), (name, type(value))
    return value


def test_manifest_covers_both_frameworks_with_twins():
    def count(framework, buggy):
        return sum(p.framework == framework and p.buggy == buggy for p in PROGRAMS)
    assert count("torch", True) >= 6 and count("tensorflow", True) >= 4
    assert count("torch", False) >= 3 and count("tensorflow", False) >= 2
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS)
    for p in PROGRAMS:
        assert p.path.is_file() and p.spec == f"{p.path}:train" == bundled_path(p.name)
        assert p.expected_op is None or p.expected_op.startswith("torch." if p.framework == "torch" else "tf.")
        if p.twin:
            twin = get(p.twin)
            assert twin.buggy != p.buggy and twin.framework == p.framework and twin.twin == p.name
    with pytest.raises(KeyError, match="no bundled program"):
        get("no_such_program")


@pytest.mark.parametrize("name", BUGGY)
def test_expected_line_is_the_marked_operation(name):
    prog = get(name)
    lines = prog.path.read_text().splitlines()
    assert marker_lines(prog.path) == [prog.expected_line]
    line = lines[prog.expected_line - 1]
    assert line.rstrip().endswith(MARKER)
    base = op_base(prog.expected_op)
    assert any(s in line.split("#")[0] for s in SPELLING.get(base, (base,))), (line, prog.expected_op)


@pytest.mark.parametrize("name", GUARDED)
def test_guarded_programs_have_no_marker(name):
    assert marker_lines(get(name).path) == []


def test_op_matching_accepts_spellings_not_other_ops():
    assert op_matches("torch.Tensor.__truediv__", "torch.div") and op_matches("Tensor.div", "torch.div")
    assert op_matches("tf.math.truediv", "tf.math.divide") and op_matches("torch.Tensor.log", "torch.log")
    assert not op_matches("torch.log1p", "torch.log") and not op_matches("tf.math.log", "torch.log")
    assert not op_matches(None, "torch.log") and op_matches(None, None)


@pytest.mark.parametrize("name", [p.name for p in PROGRAMS])
def test_program_runs_to_a_finite_loss(name):
    assert math.isfinite(run(name, 0))


@pytest.mark.parametrize("name", GUARDED)
def test_guarded_programs_stay_finite_over_many_seeds(name):
    seeds = range(1, 41) if get(name).framework == "torch" else range(1, 9)
    bad = [s for s in seeds if not math.isfinite(run(name, s))]
    assert not bad, f"{name} went NaN/Inf with seeds {bad}"


@pytest.mark.parametrize("name", BUGGY)
def test_gradient_search_finds_the_bug(name):
    from dlci.nan import load_program, search
    prog = get(name)
    res = search(load_program(prog.spec), strategy="gradient", budget=FIND_BUDGET[prog.framework], seed=0,
                 minimize_seconds=0)
    assert res.found, f"{name}: nothing found in {res.runs} runs / {res.iterations} iterations"
    assert res.kind in ("nan", "inf")
    assert (res.line, op_base(res.op)) == (prog.expected_line, op_base(prog.expected_op)), res.to_dict()
    assert op_matches(res.op, prog.expected_op) and os.path.samefile(res.file, prog.path)
    assert res.seconds_to_first is not None and res.seconds_to_first <= FIND_BUDGET[prog.framework]


@pytest.mark.parametrize("name", GUARDED)
def test_gradient_search_finds_nothing_in_guarded_programs(name):
    from dlci.nan import load_program, search
    prog = get(name)
    res = search(load_program(prog.spec), strategy="gradient", budget=GUARDED_BUDGET[prog.framework], seed=0,
                 minimize_seconds=0)
    assert not res.found, res.to_dict()
    assert res.iterations > 0 or res.runs > 0  # it did search
