"""`dlci test` end to end on the real stack: findings, reproducers, reports, exit codes, interruption."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def dlci(*args, timeout=600, cwd_=ROOT, **kw):
    return subprocess.run([sys.executable, "-m", "dlci", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd_, **kw)


@pytest.mark.parametrize("args, fragment", [
    (["test", "--targets", "no.such.target"], "unknown target"),
    (["test", "--sources", "nosuchsource", "--targets", "onnxruntime"], "unknown source"),
    (["test", "--ops", "definitely_not_an_op", "--targets", "onnxruntime", "--sources", "onnx_node"],
     "no instance of the operators"),
    (["test", "--budget", "soon"], "invalid float value"),
    (["test", "--workers", "0", "--targets", "onnxruntime", "--sources", "onnx_node"], "--workers must be at least 1"),
    (["test", "--budget", "-5", "--targets", "onnxruntime", "--sources", "onnx_node"], "--budget must be at least 1"),
    (["test", "--harvest", "/no/such/suite", "--targets", "onnxruntime", "--sources", "onnx_node"],
     "--harvest path does not exist"),
])
def test_bad_input_is_a_usage_error(args, fragment, tmp_path):
    proc = dlci(*args, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr


def test_targets_lists_versions():
    proc = dlci("targets")
    rows = json.loads(proc.stdout)
    names = {r["name"]: r for r in rows if r["available"]}
    for name in ("tvm.from_exported_program", "tvm.from_fx", "tvm.from_onnx", "tvm.from_tflite",
                 "openvino.pytorch", "openvino.onnx", "onnxruntime", "torch.compile"):
        assert name in names and names[name]["version"], name


@pytest.mark.slow
def test_campaign_finds_confirms_and_reproduces_a_real_bug(tmp_path):
    # TVM 0.27's from_fx celu converter ignores a positional alpha: a real bug on the pinned stack.
    # torch.onnx (the exporter, run by ONNX Runtime) gets the same instances and must stay clean.
    out = tmp_path / "out"
    # a relative --out, as a user types it: reproducers must still be found and run
    proc = dlci("test", "--ops", "celu", "--targets", "tvm.from_fx,torch.onnx", "--sources", "opinfo",
                "--limit-per-op", "6", "--budget", "90", "--out", "out", cwd_=tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((out / "findings.json").read_text())
    assert doc["version"] == 1
    st = doc["stats"]
    assert st["tests_run"] >= 8 and st["tests_valid"] >= 8
    assert set(st["per_target"]) == {"tvm.from_fx", "torch.onnx"}
    assert st["per_target"]["torch.onnx"]["pass"] >= 4
    findings = doc["findings"]
    assert [f["target"] for f in findings] == ["tvm.from_fx"]
    f = findings[0]
    assert f["operator"] == "aten::celu" and f["oracle"] == "inconsistency" and f["confirmed"]
    assert f["new_in_pr"] is None and f["repro_checked"] is True
    for key in ("id", "symptom", "signature", "repro"):
        assert f[key]
    # the reproducer is standalone: it reproduces alone in a fresh interpreter, outside the repo
    repro = out / f["repro"]
    run = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert run.returncode == 1 and "REPRODUCED" in run.stdout
    assert "dlci" not in repro.read_text().split('"""', 2)[2].split("# ---")[0]  # imports no dlci
    report = (out / "report.md").read_text()
    assert "1 confirmed finding" in report and "tvm.from_fx" in report
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == st["tests_run"] + sum(1 for ln in lines if json.loads(ln)["confirming"])


def test_sigterm_writes_a_partial_report(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "dlci", "test", "--ops", "all", "--targets", "onnxruntime",
                             "--sources", "onnx_node", "--budget", "600", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = out / "results.jsonl"
    deadline = time.time() + 240
    while time.time() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 20:
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("no results streamed")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err[-2000:]
    doc = json.loads((out / "findings.json").read_text())
    assert doc["stats"]["interrupted"] is True
    assert doc["stats"]["tests_run"] >= 20
    assert "partial" in (out / "report.md").read_text()


def test_sources_counts_operators_and_instances():
    proc = dlci("sources", "--sources", "onnx_node", "--verbose")
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = json.loads(proc.stdout)["onnx_node"]
    assert row["framework"] == "onnx"
    assert row["operators"] == len(row["per_operator"]) > 100
    assert row["instances"] == sum(row["per_operator"].values())
    assert row["per_operator"]["onnx::Relu"] >= 1


def test_unsupported_outcomes_kept_are_distinct_reasons():
    """PR mode asks the base revision about a few 'unsupported' outcomes per (target, operator): they must be the
    distinct reasons, not the first few instances (13 CumSum cases with a runtime axis hid the 8 the PR broke)."""
    from dlci.campaign.state import UNSUPPORTED_KEPT, Campaign
    from dlci.outcome import UNSUPPORTED, Outcome

    campaign = Campaign(instances={}, targets={})
    for i in range(13):
        campaign.record(Outcome(f"runtime-axis{i}", "onnx::CumSum", "tvm.from_onnx", UNSUPPORTED, "convert",
                                "ValueError", f"CumSum with non-constant axis input is not supported. Got {i}"), None)
    campaign.record(Outcome("reverse", "onnx::CumSum", "tvm.from_onnx", UNSUPPORTED, "convert", "ValueError",
                            "not supported type in emit_te: <class 'tvm.ir.expr.Call'>"), None)
    kept = campaign.unsupported[("tvm.from_onnx", "onnx::CumSum")]
    assert [o.instance_id for o in kept] == ["runtime-axis0", "reverse"]
    assert len(kept) <= UNSUPPORTED_KEPT


def test_unsupported_outcomes_of_one_reason_keep_a_few_other_calls():
    """The first instance of a reason may fail on base for a reason of its own (unfold's empty batch, a ceil_mode
    TVM's max_pool2d gets wrong on base): more of the same reason are kept, each another call (shapes, settings),
    the first of each reason before any second (attribution asks base in that order)."""
    from dlci.campaign.state import UNSUPPORTED_PER_KIND, Campaign
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import UNSUPPORTED, Outcome

    calls = [([0, 1, 5, 5], {}), ([0, 1, 5, 5], {}), ([2, 3, 5, 5], {}), ([2, 3, 5, 5], {"ceil_mode": True})] + \
        [([n, 1, 4, 4], {}) for n in range(1, 12)]
    insts = {f"i{n}": Instance(op="aten::im2col", framework="torch", call={"kind": "torch_fn", "fn": "f"},
                               inputs=[TensorSpec(shape, "float32")], params=params, origin=Origin("opinfo", "t"),
                               id=f"i{n}") for n, (shape, params) in enumerate(calls)}
    insts["other"] = Instance(op="aten::im2col", framework="torch", call={"kind": "torch_fn", "fn": "f"},
                              inputs=[TensorSpec([1, 1, 4, 4], "float32")], params={}, origin=Origin("opinfo", "t"),
                              id="other")
    campaign = Campaign(instances=insts, targets={})
    for n in range(len(calls)):
        campaign.record(Outcome(f"i{n}", "aten::im2col", "onnxscript.torchlib", UNSUPPORTED, "convert",
                                "NotRegistered", "torchlib registers no function for aten::im2col"), None)
    campaign.record(Outcome("other", "aten::im2col", "onnxscript.torchlib", UNSUPPORTED, "run", "NotImplemented",
                            "Could not find an implementation for Col2Im"), None)
    kept = campaign.unsupported[("onnxscript.torchlib", "aten::im2col")]
    same = [f"i{n}" for n in range(len(calls)) if n != 1][:UNSUPPORTED_PER_KIND]  # i1 repeats i0's call
    assert [o.instance_id for o in kept] == same + ["other"]
    assert campaign.unsupported_rank(kept) == list(range(len(same))) + [0]
    # calls without tensors (hann_window(1), hann_window(5)...) differ by their settings
    windows = {f"w{n}": Instance(op="aten::hann_window", framework="torch",
                                 call={"kind": "torch_fn", "fn": "torch.hann_window", "args": [n]}, inputs=[],
                                 params={"arg0": n}, origin=Origin("factories", "t"), id=f"w{n}") for n in (1, 2, 5)}
    campaign = Campaign(instances=windows, targets={})
    for i in windows:
        campaign.record(Outcome(i, "aten::hann_window", "onnxscript.torchlib", UNSUPPORTED, "convert",
                                "NotRegistered", "torchlib registers no function for aten::hann_window"), None)
    assert [o.instance_id for o in campaign.unsupported[("onnxscript.torchlib", "aten::hann_window")]] == \
        ["w1", "w2", "w5"]


def test_steered_order_follows_the_variant_kind_that_ran_a_changed_line():
    """Plan order until a test runs a changed line; then every other test comes from that test's family (a variant
    kind across operators), and nothing is run twice or lost."""
    from dlci.campaign.execution import Steered
    from dlci.campaign.stages import Test
    from dlci.instance import Instance, Origin, variant_kind

    def inst(op, kind=None):
        origin = Origin("onnx_variants", f"case of {op} [{kind}: how]") if kind else Origin("onnx_node", f"case {op}")
        return Instance(op=op, framework="onnx", call={"kind": "onnx_model"}, inputs=[], params={}, origin=origin)
    plan = [Test(inst(f"onnx::Op{n}", kind), "tvm.from_onnx")
            for n, kind in enumerate([None, "initializer", None, "exported_params", None, None, "exported_params",
                                      "initializer", "exported_params"])]
    steered = Steered(plan)
    it = iter(steered)
    got = [next(it), next(it)]
    assert got == plan[:2]
    steered.heat(plan[3].instance)  # an exported_params case ran a changed statement
    got += list(it)
    assert sorted(map(id, got)) == sorted(map(id, plan))  # each test exactly once
    kinds = [variant_kind(t.instance) for t in got]
    assert kinds == [None, "initializer", None, "exported_params", None, "exported_params", None, "exported_params",
                     "initializer"], kinds


def test_steered_order_takes_hot_families_in_turn():
    """Two families ran changed lines: the steered picks alternate between them (a converter every family reaches
    keeps the plan's diversity), and the plan order still gets every other turn."""
    from dlci.campaign.execution import Steered
    from dlci.campaign.stages import Test
    from dlci.instance import Instance, Origin, variant_kind

    def inst(n, kind):
        return Instance(op=f"onnx::Op{n}", framework="onnx", call={"kind": "onnx_model"}, inputs=[], params={},
                        origin=Origin("onnx_variants", f"case {n} [{kind}: how]"))
    plan = [Test(inst(n, kind), "tvm.from_onnx") for n, kind in
            enumerate(["opset"] * 4 + ["initializer"] * 4 + ["exported_params"] * 4)]
    steered = Steered(plan)
    it = iter(steered)
    steered.heat(plan[4].instance)
    steered.heat(plan[8].instance)
    got = list(it)
    assert sorted(map(id, got)) == sorted(map(id, plan))
    hot_turns = [variant_kind(t.instance) for t in got[1:8:2]]
    assert hot_turns == ["initializer", "exported_params", "initializer", "exported_params"], hot_turns
    assert [variant_kind(t.instance) for t in got[0:8:2]][:2] == ["opset", "opset"]


def test_a_failure_spread_over_many_operators_is_shown_on_the_most_basic_one():
    """One root cause under many operators (a dtype table every graph goes through): the finding is shown on add,
    the operator a maintainer reads as "any graph"; a failure of two operators is shown on the one the PR touched
    most directly, then on the smallest instance."""
    from dlci.campaign.state import Campaign
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import CRASH, Outcome

    def inst(op, n):
        x = np.zeros(n, np.float32)
        return Instance(op=op, framework="torch", call={"kind": "torch_fn", "fn": "torch.relu", "args": [{"$t": 0}]},
                        inputs=[TensorSpec.of(x)], params={}, origin=Origin("opinfo", op), arrays={"in:0": x})
    insts = [inst("aten::mean", 2), inst("aten::add", 50), inst("aten::relu", 3), inst("aten::sum", 1)]

    def campaign(members, preferred):
        c = Campaign({i.id: i for i in members}, {"t": type("T", (), {"modules": ()})()}, preferred_ops=preferred)
        for i in members:
            c.failures["sig"].append(Outcome(instance_id=i.id, op=i.op, target="t", status=CRASH, symptom="E"))
        return c
    spread = campaign(insts, ["mean", "sum", "add"])
    assert spread.representative("sig").op == "aten::add"
    two = campaign(insts[:1] + insts[3:], ["sum", "mean"])
    assert two.representative("sig").op == "aten::sum"
    unranked = campaign(insts[:1] + insts[3:], [])
    assert unranked.representative("sig").op == "aten::sum"  # smallest


def test_tests_that_repeat_a_passing_trace_wait_for_the_rest():
    """Two passing runs of one (family, operator, target) with the very same converter-line trace: the rest of that
    group waits until every other test has run, and nothing is lost."""
    from dlci.campaign.execution import Steered
    from dlci.campaign.stages import Test
    from dlci.instance import Instance, Origin

    def inst(op, n):
        return Instance(op=op, framework="onnx", call={"kind": "onnx_model"}, inputs=[], params={"n": n},
                        origin=Origin("onnx_node", f"case {op} {n}"))
    plan = [Test(inst("onnx::Relu", n), "tvm.from_onnx") for n in range(5)] + \
        [Test(inst("onnx::Add", n), "tvm.from_onnx") for n in range(2)]
    steered = Steered(plan)
    it = iter(steered)
    first = [next(it), next(it)]
    for t in first:
        steered.observe(t, {"/f.py": [1, 2, 3]}, passed=True)
    rest = list(it)
    assert [t.instance.op for t in rest] == ["onnx::Add", "onnx::Add"] + ["onnx::Relu"] * 3
    assert sorted(map(id, first + rest)) == sorted(map(id, plan))


def test_a_test_whose_form_could_not_be_built_brings_its_operators_next_test_on_that_target_forward():
    """The target could not build its model form from an instance (an invalid test at the model stage): the next
    test of that operator on that target runs next, ahead of the plan's other operators, so instances the target can
    take are not left behind the ones it cannot; other targets and operators keep their order, nothing is lost."""
    from dlci.campaign.execution import Steered
    from dlci.campaign.stages import Test
    from dlci.instance import Instance, Origin

    def inst(op, n):
        return Instance(op=op, framework="torch", call={"kind": "torch_fn", "fn": "torch.Tensor.__getitem__"},
                        inputs=[], params={"n": n}, origin=Origin("opinfo", f"{op} {n}"))
    plan = []
    for n in range(4):  # the plan interleaves operators
        for op in ("aten::__getitem__", "aten::batch_norm", "aten::index"):
            plan += [Test(inst(op, n), "onnxscript.torchlib"), Test(inst(op, n), "torch.onnx")]
    steered = Steered(plan)
    it = iter(steered)
    first = next(it)
    assert (first.instance.op, first.target) == ("aten::__getitem__", "onnxscript.torchlib")
    steered.unbuildable(first)
    second = next(it)
    assert (second.instance.op, second.target, second.instance.params["n"]) == \
        ("aten::__getitem__", "onnxscript.torchlib", 1)
    steered.unbuildable(second)
    third = next(it)
    assert third.instance.params["n"] == 2 and third.target == "onnxscript.torchlib"
    assert steered.brought_forward(second) and steered.brought_forward(third) and not steered.brought_forward(first)
    rest = list(it)
    assert [(t.instance.op, t.target) for t in rest[:2]] == [("aten::__getitem__", "torch.onnx"),
                                                            ("aten::batch_norm", "onnxscript.torchlib")]
    assert sorted(map(id, [first, second, third] + rest)) == sorted(map(id, plan))


def test_the_plan_sends_no_test_a_targets_form_refuses_from_the_instance_alone():
    """torchlib's aten_call form is one ATen overload call: an nn.Module instance or an ONNX node never is one, so
    the plan gives torchlib none of them (each was an invalid test in a valid one's slot); torch.onnx still takes
    the module, and an ATen function call goes to both."""
    from dlci.campaign.stages import plan
    from dlci.instance import Instance, Origin
    from dlci.targets import registry

    targets = {n: registry()[n] for n in ("onnxscript.torchlib", "torch.onnx")}
    module = Instance(op="nn::BatchNorm2d", framework="torch", call={"kind": "torch_module", "cls": "x"},
                      inputs=[], params={}, origin=Origin("module_db", "m"))
    fn = Instance(op="aten::batch_norm", framework="torch",
                  call={"kind": "torch_fn", "fn": "torch.nn.functional.batch_norm"}, inputs=[], params={},
                  origin=Origin("opinfo", "f"))
    with_options = Instance(op="aten::relu", framework="torch",
                            call={"kind": "torch_fn", "fn": "torch.relu", "options": {"dynamic": True}}, inputs=[],
                            params={}, origin=Origin("opinfo", "o"))
    tests = plan([module, fn, with_options], targets, order=list)
    assert sorted((t.instance.op, t.target) for t in tests) == [
        ("aten::batch_norm", "onnxscript.torchlib"), ("aten::batch_norm", "torch.onnx"),
        ("aten::relu", "torch.onnx"), ("nn::BatchNorm2d", "torch.onnx")]
    # a PR scan that chose torchlib alone selects no module instance: an operator only modules stand for is a test
    # gap (said, neutral), not a scan whose tests all come back invalid or, none left, "no test ran"
    from dlci.scan import Selection
    alone = Selection(chosen={"onnxscript.torchlib": targets["onnxscript.torchlib"]},
                      want={"batch_norm": {"onnxscript.torchlib"}})
    assert not alone.reaches(module) and alone.reaches(fn)


def test_reproducer_checks_are_owed_by_what_each_signatures_test_costs_alone():
    """Testing stops to leave time for the reproducer checks: what they owe follows each signature's test run
    alone (its confirmation, not the share of a batch that found it), so a cheap signature reserves little and an
    expensive one much — a flat figure per signature ended a broad run's testing 90 s before it had to."""
    from dlci.campaign.reproduction import FRESH_CHECK_SECONDS, RENDER_SECONDS, REPRO_CHECK_OVERHEAD, reproducers_owed
    from dlci.campaign.state import Campaign
    from dlci.outcome import CRASH, Outcome

    campaign = Campaign(instances={}, targets={"t": type("T", (), {"modules": ()})()})
    cheap = Outcome("a", "onnx::Relu", "t", CRASH, "convert", "ValueError", "relu", seconds=0.01)
    slow = Outcome("b", "onnx::Conv", "t", CRASH, "convert", "KeyError", "conv", seconds=0.05)  # a batch's share
    sig_cheap, sig_slow = campaign.record(cheap, None), campaign.record(slow, None)
    assert sig_cheap and sig_slow and sig_cheap != sig_slow
    assert campaign.test_seconds_alone[sig_slow] == 0.05
    campaign.record(Outcome("b", "onnx::Conv", "t", CRASH, "convert", "KeyError", "conv", seconds=4.0), sig_slow)
    assert campaign.confirm_state[sig_slow] == "confirmed"
    assert campaign.test_seconds_alone[sig_slow] == 4.0  # the confirmation ran alone: its cost is the check's
    one = reproducers_owed(campaign, [sig_cheap], workers=2)
    both = reproducers_owed(campaign, [sig_cheap, sig_slow], workers=2)
    assert one == RENDER_SECONDS + (REPRO_CHECK_OVERHEAD + 0.01) / 2
    assert both - one == RENDER_SECONDS + (REPRO_CHECK_OVERHEAD + 4.0) / 2
    # a device target's reproducer is checked in a fresh interpreter, alone after the others: it owes that whole
    campaign.targets["cuda"] = type("T", (), {"modules": (), "on_accelerator": True})()
    on_device = campaign.record(Outcome("c", "onnx::Relu", "cuda", CRASH, "run", "ValueError", "relu", seconds=0.01),
                                None)
    assert reproducers_owed(campaign, [on_device], workers=2) >= FRESH_CHECK_SECONDS


def test_the_reduction_leaves_the_reproducer_checks_the_time_one_needs_to_start(tmp_path):
    """A reproducer check does not start with less than MIN_CHECK_SECONDS before its deadline: the reduction stops
    that much before it, however cheap the checks are estimated (a scan's head checks were all skipped: the
    reduction ran until 2 s before the deadline, their estimate)."""
    import time as _time

    from dlci.campaign import stages
    from dlci.campaign.options import RunOptions
    from dlci.campaign.reproduction import MIN_CHECK_SECONDS
    from dlci.campaign.state import Campaign
    from dlci.findings import Finding

    campaign = Campaign(instances={}, targets={"t": type("T", (), {"modules": ()})()})
    finding = Finding(id="F001", oracle="crash", operator="onnx::Relu", target="t", target_version="1",
                      symptom="ValueError", stage="convert", signature="t|convert|onnx::Relu|ValueError",
                      message="m", instance_id="missing", origin={})
    options = RunOptions(out=tmp_path, budget=170.0)
    assert options.check_repros and options.reduce
    now = _time.monotonic()
    # an engine of None: a reduction that started would fail on it
    stages.reduce([finding], campaign, None, options, until=now + 60, hard_until=now + MIN_CHECK_SECONDS + 2)
    assert finding.reduction is None
    with pytest.raises(KeyError, match="missing"):  # with the time to spare, the reduction does start (and
        stages.reduce([finding], campaign, None, options, until=now + 60, hard_until=now + 60)  # looks it up)


def test_the_checks_on_base_are_reserved_at_the_base_revisions_measured_import_time(tmp_path):
    """Each new finding's reproducer is checked alone on base in a fresh interpreter. The scan reserves that time
    before the head's checks and the reduction; at a flat 15 s a check, three TVM findings took the head checks'
    whole window, where the checks took 4-11 s. With the base's proof measured, the reservation follows it, and
    never drops below what one check needs to start."""
    from types import SimpleNamespace

    from dlci.campaign.options import RunOptions
    from dlci.campaign.reproduction import MIN_CHECK_SECONDS
    from dlci.campaign.state import Campaign
    from dlci.outcome import CRASH, Outcome
    from dlci.scan import BASE_CHECK_SECONDS, _new_checks_owed

    campaign = Campaign(instances={}, targets={"t": type("T", (), {"modules": ()})()})
    findings = []
    for n, op in enumerate(("onnx::Relu", "onnx::Conv", "onnx::Gemm")):
        sig = campaign.record(Outcome(str(n), op, "t", CRASH, "convert", "ValueError", op, seconds=0.2), None)
        findings.append(SimpleNamespace(signature=sig, new_in_pr=True, known=None, base={"status": "pass"}))
    options = RunOptions(out=tmp_path, budget=170.0, workers=2)
    unmeasured = _new_checks_owed(campaign, findings, options, SimpleNamespace(base_import_seconds=None), False)
    assert unmeasured == 2 * BASE_CHECK_SECONDS  # three checks, two at once: two rounds
    measured = _new_checks_owed(campaign, findings, options, SimpleNamespace(base_import_seconds=3.0), False)
    assert MIN_CHECK_SECONDS <= measured < unmeasured / 2
    # a slow import is capped at the unmeasured figure; a fast one still leaves a check the time to start
    assert _new_checks_owed(campaign, findings, options, SimpleNamespace(base_import_seconds=60.0), False) \
        == unmeasured
    assert _new_checks_owed(campaign, findings[:1], options, SimpleNamespace(base_import_seconds=0.1), False) \
        == MIN_CHECK_SECONDS
    # no new finding owes nothing
    old = [SimpleNamespace(**{**vars(f), "new_in_pr": False}) for f in findings]
    assert _new_checks_owed(campaign, old, options, SimpleNamespace(base_import_seconds=3.0), True) == 0.0


def test_a_failure_one_signature_shares_over_two_operators_is_new_where_base_passes_the_other(monkeypatch):
    """A real onnxscript PR (the vec overload of upsample_bilinear2d, reverted) makes torch.onnx decompose
    upsample_bilinear, and the decomposition crashes in a converter frame that interpolate's tests, failing so on
    base too, crash in: one signature over both operators. Base re-ran the 8 best instances, all interpolate, and
    the whole finding was called "already on base". Base must see every operator among the instances, and the
    operator it passes is new in the PR, its re-runs' unsampled likes with it."""
    from dlci.campaign import Campaign, RunOptions
    from dlci.findings import Finding
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import CRASH, PASS, Outcome
    from dlci.scan import attribution
    from dlci.targets import get
    target = "onnxscript.torchlib"

    def inst(n: int, op: str, side: int) -> Instance:
        return Instance(op=op, framework="torch", call={"kind": "torch_fn", "fn": "f"},
                        inputs=[TensorSpec([1, 1, side, side + n], "float32")], params={},
                        origin=Origin("opinfo", f"{op}#{n}"), id=f"{op.split('::')[1]}{n}")
    insts = {i.id: i for i in [inst(n, "aten::interpolate", 4) for n in range(12)]
             + [inst(n, "aten::upsample_bilinear", 9) for n in range(4)]}  # larger: never among the 8 smallest
    campaign = Campaign(instances=insts, targets={target: get(target)})

    def crash(iid: str) -> Outcome:
        return Outcome(iid, insts[iid].op, target, CRASH, "convert", "ConversionError",
                       "aten_arange() got an unexpected keyword argument 'device'")
    sig = campaign.signature(crash("interpolate0"))
    campaign.failures[sig] = [crash(i) for i in insts]
    f = Finding(id="F001", oracle="crash", operator="aten::interpolate", target=target, target_version="",
                symptom="ConversionError", stage="convert", signature=sig, message="", instance_id="interpolate0",
                origin={}, instances=sorted(insts), operators=["aten::interpolate", "aten::upsample_bilinear"])
    asked = []

    def on_base(jobs, *_args):  # the base revision: interpolate fails the same way, upsample_bilinear converts
        asked.extend(j.instance_id for j in jobs)
        return {j.id: crash(j.instance_id) if j.op == "aten::interpolate" else
                Outcome(j.instance_id, j.op, target, PASS) for j in jobs}
    monkeypatch.setattr(attribution, "_run", on_base)
    parts = attribution.attribute([f], campaign, RunOptions(out=Path("unused")), {}, time.monotonic() + 60)
    assert {insts[i].op for i in asked} == {"aten::interpolate", "aten::upsample_bilinear"}
    assert len(asked) == attribution.BASE_RERUNS  # one more form costs no more re-runs than before
    old, new = sorted(parts, key=lambda p: bool(p.new_in_pr))
    assert old.new_in_pr is False and old.operators == ["aten::interpolate"]
    assert new.new_in_pr is True and new.operators == ["aten::upsample_bilinear"]
    assert len(new.instances) == 4 and new.instance_id.startswith("upsample_bilinear")  # passes on base
    assert new.base["status"] == PASS and new.signature.endswith("|new in PR")
    # generated graphs are operators of their own name, but one form: 40 of them cost no more re-runs
    graphs = {f"g{n}": Instance(op=f"graph::fuzz{n}", framework="onnx", call={"kind": "onnx_model"}, inputs=[],
                                params={}, origin=Origin("fuzz", f"g{n}"), id=f"g{n}") for n in range(40)}
    campaign.instances.update(graphs)
    g = Finding.from_dict({**f.to_dict(), "instances": sorted(graphs), "instance_id": "g0"})
    assert len(attribution._base_sample(g, campaign)) == attribution.BASE_RERUNS


def test_an_instance_base_fails_otherwise_is_changed_by_the_pr_never_new_nor_old(monkeypatch):
    """Neither revision right: a fix PR turns a converter crash into a wrong result on some inputs. Those instances
    are "changed by this PR" (their reproducer cannot pass on base), apart from the ones base passes (new) and the
    ones base fails the same way (old): three parts of one signature, each with its own representative."""
    from dlci.campaign import Campaign, RunOptions
    from dlci.findings import CHANGED_PART, NEW_PART, Finding, attribution as attribution_of, is_new
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import CRASH, INCONSISTENT, PASS, Outcome
    from dlci.scan import attribution
    from dlci.targets import get
    target = "tvm.from_fx"
    insts = {f"i{n}": Instance(op="aten::conv_transpose1d", framework="torch", call={"kind": "torch_fn", "fn": "f"},
                               inputs=[TensorSpec([1, 2, 3 + n], "float32")], params={},
                               origin=Origin("opinfo", f"conv#{n}"), id=f"i{n}") for n in range(6)}
    campaign = Campaign(instances=insts, targets={target: get(target)})

    def wrong(iid: str, got: float = 1.0) -> Outcome:
        return Outcome(iid, "aten::conv_transpose1d", target, INCONSISTENT, "compare", "value mismatch",
                       "1 of 6 elements differ", digest=[{"shape": [6], "sum": got}])
    sig = campaign.signature(wrong("i0"))
    campaign.failures[sig] = [wrong(i) for i in insts]
    f = Finding(id="F001", oracle="inconsistency", operator="aten::conv_transpose1d", target=target,
                target_version="", symptom="value mismatch", stage="compare", signature=sig, message="",
                instance_id="i0", origin={}, instances=sorted(insts), operators=["aten::conv_transpose1d"])

    def on_base(jobs, *_args):  # i0, i1 crash on base; i2, i3 pass; i4, i5 fail as on head
        def one(iid):
            n = int(iid[1:])
            return (Outcome(iid, "aten::conv_transpose1d", target, CRASH, "convert", "NameError", "x") if n < 2
                    else Outcome(iid, "aten::conv_transpose1d", target, PASS) if n < 4 else wrong(iid))
        return {j.id: one(j.instance_id) for j in jobs}
    monkeypatch.setattr(attribution, "_run", on_base)
    parts = attribution.attribute([f], campaign, RunOptions(out=Path("unused")), {}, time.monotonic() + 60)
    by = {attribution_of(p): p for p in parts}
    assert sorted(by) == ["changed", "new", "on_base"]
    assert by["on_base"].instances == ["i4", "i5"] and by["on_base"].signature == sig
    assert by["changed"].instances == ["i0", "i1"] and by["changed"].signature == sig + CHANGED_PART
    assert by["changed"].new_in_pr is False and by["changed"].base["changed"] is True
    assert by["changed"].base["status"] == CRASH and not by["changed"].base["same_failure"]
    assert by["new"].instances == ["i2", "i3"] and by["new"].instance_id in ("i2", "i3")
    assert by["new"].signature == sig + NEW_PART and by["new"].base["status"] == PASS
    assert [is_new(p) for p in (by["changed"], by["on_base"], by["new"])] == [False, False, True]
    # folded apart: a changed finding is never folded into the old one of the same operator and symptom
    assert len(attribution.fold([by["changed"], by["on_base"]])) == 2


def _interpolate_crashes(shapes: dict):
    """interpolate instances of the given input shapes, all crashing on head with one message (the torch 2.13 call
    into a 2024 torchlib), and a crash finding over all of them: (instances, crash, finding_of)."""
    from dlci.findings import Finding
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import CRASH, Outcome
    target = "torch.onnx"
    insts = {iid: Instance(op="aten::interpolate", framework="torch", call={"kind": "torch_fn", "fn": "f"},
                           inputs=[TensorSpec(shape, "float32")], params={}, origin=Origin("opinfo", iid), id=iid)
             for iid, shape in shapes.items()}

    def crash(iid: str) -> Outcome:
        return Outcome(iid, "aten::interpolate", target, CRASH, "convert", "ConversionError",
                       "aten_arange() got an unexpected keyword argument 'device'")

    def finding_of(campaign) -> Finding:
        sig = campaign.signature(crash(next(iter(insts))))
        campaign.failures[sig] = [crash(i) for i in insts]
        return Finding(id="F001", oracle="crash", operator="aten::interpolate", target=target, target_version="",
                       symptom="ConversionError", stage="convert", signature=sig, message="",
                       instance_id=next(iter(insts)), origin={}, instances=sorted(insts),
                       operators=["aten::interpolate"])
    return insts, crash, finding_of


def _passing_on_base_if(prefix: str, crash, ran: list):
    """A stand-in for attribution's base run: the instances whose id starts with ``prefix`` pass, the rest crash."""
    from dlci.outcome import PASS, Outcome

    def on_base(jobs, *_args):
        ran.extend(j.instance_id for j in jobs)
        return {j.id: Outcome(j.instance_id, "aten::interpolate", "torch.onnx", PASS) if j.instance_id.startswith(prefix)
                else crash(j.instance_id) for j in jobs}
    return on_base


def test_the_instances_of_another_input_rank_are_re_run_on_base_even_behind_many_smaller_ones(monkeypatch):
    """interpolate on 4-d inputs fails the same on both revisions; on 5-d inputs (upsample_trilinear3d, the function
    the PR removed) it fails on head only, with the same message. The 5-d instances are larger, so the smallest-first
    sample of the finding's instances never reached them: the input ranks are a form of their own, each re-run."""
    from dlci.campaign import Campaign, RunOptions
    from dlci.findings import attribution as attribution_of
    from dlci.scan import attribution
    from dlci.targets import get
    insts, crash, finding_of = _interpolate_crashes({f"i{n}": [1, 2, 3, 3 + n] for n in range(20)}
                                                    | {f"t{n}": [1, 2, 3, 4, 5 + n] for n in range(3)})
    campaign = Campaign(instances=insts, targets={"torch.onnx": get("torch.onnx")})
    f = finding_of(campaign)
    ran = []
    monkeypatch.setattr(attribution, "_run", _passing_on_base_if("t", crash, ran))  # the 5-d ones pass on base
    parts = attribution.attribute([f], campaign, RunOptions(out=Path("unused")), {}, time.monotonic() + 60)
    assert len(ran) <= attribution.BASE_RERUNS and any(i.startswith("t") for i in ran), ran
    by = {attribution_of(p): p for p in parts}
    assert sorted(by) == ["new", "on_base"], parts
    # the 5-d instances not re-run go with the re-runs of their own form: new
    assert by["new"].instances == ["t0", "t1", "t2"] and by["new"].instance_id.startswith("t")


def test_what_the_divergence_search_saw_pass_on_base_is_re_run_there_first(monkeypatch):
    """Among one form (interpolate, 5-d inputs) some instances fail on both revisions alike (nearest) and some on
    head only (trilinear), and the smallest-first sample picks a nearest one. The divergence search paired the
    trilinear ones with base and saw them pass: the finding's base re-runs take those first, and its new part shows."""
    from dlci.campaign import Campaign, RunOptions
    from dlci.findings import attribution as attribution_of
    from dlci.scan import attribution
    from dlci.targets import get
    insts, crash, finding_of = _interpolate_crashes({f"i{n}": [1, 2, 3, 3 + n] for n in range(20)}
                                                    | {f"n{n}": [1, 2, 3, 4, 4 + n] for n in range(12)}
                                                    | {f"t{n}": [1, 2, 3, 4, 20 + n] for n in range(2)})
    monkeypatch.setattr(attribution, "_run", _passing_on_base_if("t", crash, []))  # the trilinear ones pass on base
    kinds = {}
    for seen in (False, True):
        campaign = Campaign(instances=insts, targets={"torch.onnx": get("torch.onnx")})
        f = finding_of(campaign)
        if seen:
            campaign.passed_on_base |= {("t0", "torch.onnx"), ("t1", "torch.onnx")}
        parts = attribution.attribute([f], campaign, RunOptions(out=Path("unused")), {}, time.monotonic() + 60)
        kinds[seen] = {attribution_of(p): p.instances for p in parts}
    assert kinds[False] == {"on_base": sorted(insts)}  # without the search's word, the trilinear ones hide
    assert kinds[True]["new"] == ["t0", "t1"] and "t0" not in kinds[True]["on_base"], kinds[True]


def test_a_test_base_does_not_support_and_head_passes_is_fixed_by_the_pr(monkeypatch):
    """A PR that adds a torchlib function: base says unsupported (no function registered), head passes. Shown as
    fixed, twice the same on base; a test base passes is not."""
    from dlci.campaign import Campaign, RunOptions
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import PASS, UNSUPPORTED, Outcome
    from dlci.scan import attribution
    from dlci.targets import get
    target = "onnxscript.torchlib"
    insts = {f"i{n}": Instance(op="aten::hann_window", framework="torch", call={"kind": "torch_fn", "fn": "f"},
                               inputs=[TensorSpec([n + 1], "float32")], params={}, origin=Origin("factories", f"w{n}"),
                               id=f"i{n}") for n in range(3)}
    campaign = Campaign(instances=insts, targets={target: get(target)})

    def on_base(jobs, *_args):  # i0, i1: no function on base; i2 passes there too
        return {j.id: Outcome(j.instance_id, j.op, target, PASS) if j.instance_id == "i2" else
                Outcome(j.instance_id, j.op, target, UNSUPPORTED, "convert", "NotRegistered",
                        "torchlib registers no function for aten::hann_window") for j in jobs}
    monkeypatch.setattr(attribution, "_run", on_base)
    fixed = attribution.fixed_in_pr(campaign, RunOptions(out=Path("unused")), {},
                                    [(i, target) for i in insts], time.monotonic() + 60)
    assert [(f["operator"], f["status_on_base"], f["instances"]) for f in fixed] == [
        ("aten::hann_window", UNSUPPORTED, ["i0", "i1"])]


def test_the_repository_tests_spend_the_budget_and_a_long_preparation_extends_it(monkeypatch):
    from dlci.campaign import clock as clock_module
    now = [1000.0]
    monkeypatch.setattr(clock_module.time, "monotonic", lambda: now[0])
    quick = clock_module.Clock(170.0)
    now[0] += 20.0  # warm caches: testing keeps its share, the deadline its place
    quick.testing_starts()
    assert quick.tests_until == 1000.0 + 0.6 * 170.0 and quick.hard == 1170.0
    now[0] = 1000.0
    cold = clock_module.Clock(170.0)
    now[0] = 1062.0  # a cold harvest: testing still gets its least share, and the run overruns
    cold.testing_starts()
    assert cold.tests_until == 1062.0 + 0.3 * 170.0 and cold.hard > 1170.0
    now[0] = 1000.0
    seeded = clock_module.Clock(170.0)
    now[0] = 1062.0  # the same 62 s, 31 of them the repository's own tests: they were testing, within the budget
    seeded.testing_starts(tested=31.0)
    assert seeded.tests_until == 1000.0 + 0.6 * 170.0 and seeded.hard == 1170.0


def test_tests_the_window_left_unrun_go_on_while_what_was_found_does_not_need_the_post_processing(monkeypatch):
    """A cold start ate the testing window (onnx-conv-auto-pad: 72 s of preparation, 17 of 133 tests run, one
    finding, the scan idle 48 s before its deadline): the tests left run on, stopping while what they find still has
    its time; with many findings, or nothing left to run, they do not."""
    from dlci import scan
    from dlci.campaign import Campaign, Clock, RunOptions, stages
    from dlci.instance import Instance, Origin, TensorSpec
    from dlci.outcome import CRASH, PASS, Outcome
    from dlci.targets import get
    now = [1000.0]
    monkeypatch.setattr(scan.time, "monotonic", lambda: now[0])
    insts = {f"i{n}": Instance(op="aten::add", framework="torch", call={"kind": "torch_fn", "fn": "f"},
                               inputs=[TensorSpec([2, n + 1], "float32")], params={}, origin=Origin("opinfo", "t"),
                               id=f"i{n}") for n in range(10)}
    target = "torch.onnx"
    tests = stages.plan(list(insts.values()), {target: get(target)})
    ran, failing = [], [""]

    def execute(campaign, todo, engine, options, *, until, keep, **_traced):
        for t in todo:  # one test a second; the one named ``failing[0]`` crashes
            if now[0] >= until or not keep():
                break
            ran.append(t.instance.id)
            bad = t.instance.id == failing[0]
            out = Outcome(t.instance.id, "aten::add", target, CRASH if bad else PASS, "convert",
                          "ValueError" if bad else "", "x")
            campaign.record(out, None)
            if out.status == CRASH:
                campaign.confirm_state[campaign.signature(out)] = "confirmed"
            now[0] += 1.0
    monkeypatch.setattr(scan, "execute", execute)

    def scanned(found: int, at: float, fails: str = "", unsupported: tuple = (), removed=frozenset()):
        failing[0] = fails
        campaign = Campaign(instances=insts, targets={target: get(target)})
        for t in tests[:4]:
            campaign.tried.add((t.instance.id, t.target))
        for n in range(found):
            campaign.confirm_state[f"sig{n}"] = "confirmed"
        for op in unsupported:  # head called these unsupported
            campaign.unsupported[(target, op)] = []
        ran.clear()
        now[0] = 1000.0
        clock = Clock(170.0)
        now[0] = at
        scan._overtime(campaign, tests, None, RunOptions(out=Path("unused")), clock, lambda _m: None, {}, removed)
        return list(ran), campaign
    # one finding at 105 s: 65 s left, 45 needed: the six tests left run
    got, campaign = scanned(1, 1105.0)
    assert got == ["i4", "i5", "i6", "i7", "i8", "i9"], got
    assert campaign.extra_stats["overtime"] == {"tests_left": 6, "ran": 6}
    # two findings at 100 s (60 s needed): i5 crashes, and three need the whole window: no test after it
    assert scanned(2, 1100.0, fails="i5")[0] == ["i4", "i5"]
    assert scanned(3, 1105.0)[0] == []  # three findings need the whole window
    assert scanned(0, 1160.0)[0] == []  # too little left to start
    # head calls two operators unsupported whose registration the PR deleted: the base re-runs will most likely
    # make them support-removed findings, whose reproducers' checks are owed as a confirmed signature's are
    assert len(scanned(1, 1105.0, unsupported=("aten::mv", "aten::lerp"))[0]) == 6  # any other unsupported: no debt
    assert scanned(1, 1105.0, unsupported=("aten::mv", "aten::lerp"), removed=frozenset({"mv", "lerp"}))[0] == []
    campaign = Campaign(instances=insts, targets={target: get(target)})
    campaign.tried |= {(t.instance.id, t.target) for t in tests}
    now[0] = 1105.0
    scan._overtime(campaign, tests, None, RunOptions(out=Path("unused")), Clock(170.0), lambda _m: None, {})
    assert "overtime" not in campaign.extra_stats  # every test ran
