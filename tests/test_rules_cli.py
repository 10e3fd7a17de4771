"""`dlci rules`: the registry listing, a run through the real campaign (confirmation, reduction, reproducer that fails
alone), configuration and scan selection of rules."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from standalone import run_without_dlci

from dlci.config import Config, ConfigError
from dlci.rules import CATEGORIES, all_rules, describe, get_rule
from dlci.rules.source import SourceError, standalone_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rules"
EAGLE = [c for c in CATEGORIES if CATEGORIES[c][0].isdigit()]
# categories a library does not have the feature for (documented in the rule modules)
ABSENT = {"torch": {"separable", "codec"}, "tensorflow": {"time_major"}}


def dlci(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "dlci", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def test_list_holds_every_eagle_category_per_library():
    proc = dlci("rules", "--list")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {r["name"] for r in rows} == set(all_rules())
    for lib in ("torch", "tensorflow"):
        have = {r["category"] for r in rows if r["library"] == lib}
        assert set(EAGLE) - ABSENT[lib] <= have, sorted(set(EAGLE) - ABSENT[lib] - have)
    for r in rows:
        assert r["graph_a"] and r["graph_b"] and r["summary"] and r["applies_to"], r["name"]
    assert len(EAGLE) == 16


def test_rule_names_and_targets_resolve():
    name = next(iter(all_rules()))
    assert get_rule(name) is get_rule("rule." + name)
    assert describe(get_rule(name))["target"] == "rule." + name
    with pytest.raises(KeyError):
        get_rule("no.such.rule")


def test_unknown_rule_is_a_usage_error(tmp_path):
    proc = dlci("rules", "--rules", "no.such.rule", "--out", str(tmp_path))
    assert proc.returncode == 2 and "unknown rule" in proc.stderr


@pytest.mark.slow
def test_false_equivalence_becomes_a_confirmed_reduced_finding(tmp_path):
    env = {"PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]),
           "DLCI_RULE_MODULES": "false_elu_rule"}
    out = tmp_path / "out"
    proc = dlci("rules", "--ops", "elu", "--rules", "test.elu_alpha_one", "--budget", "60", "--out", str(out),
                "--no-widen", "--limit-per-op", "4", env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((out / "findings.json").read_text())
    [f] = doc["findings"]
    assert f["oracle"] == "equivalence" and f["target"] == "rule.test.elu_alpha_one"
    assert f["rule"]["graph_b"] == "F.elu(x, alpha=1.0)" and f["rule"]["category"] == "formula"
    assert f["repro_checked"] is True and f["confirmed"]
    assert "alpha" in f["reduction"]["params_that_matter"]
    report = (out / "report.md").read_text()
    assert "equivalence rule `test.elu_alpha_one`" in report and "graph B: F.elu(x, alpha=1.0)" in report
    # the reproducer stands alone (dlci not importable, no extra rule module) and fails while the graphs disagree
    script = out / f["repro"]
    text = script.read_text()
    assert "from dlci" not in text and "import dlci" not in text
    assert "def elu_alpha_one(case, inputs):" in text  # the project's function, pasted from its module
    run = run_without_dlci(script, tmp_path)
    assert run.returncode == 1 and "REPRODUCED value mismatch" in run.stdout, (run.stdout[-2000:], run.stderr[-2000:])


def _package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_standalone_source_follows_helpers_into_the_rules_package(tmp_path, monkeypatch):
    _package(tmp_path, {
        "proj/__init__.py": "",
        "proj/helpers.py": "import math\n\nK = 3  # a constant the rule uses\n\n\ndef helper(x):\n"
                           "    return x * K + math.pi\n\n\ndef unused():\n    return 0\n",
        "proj/rules.py": "from proj.helpers import helper\n\n\ndef graph_b(case, inputs):\n"
                         "    return [helper(x) for x in inputs]\n",
        "proj/bad.py": "T = {}\nT.update(a=1)\n\n\ndef uses_t(case, inputs):\n    return T\n\n\n"
                       "def uses_nothing_defined(case, inputs):\n    return NOWHERE\n",
        "proj/clash.py": "from proj.rules import graph_b\n\n\ndef helper(x):\n    return x\n\n\n"
                         "def graph_a(case, inputs, dtype=None):\n    return helper(graph_b(case, inputs))\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    bundle = standalone_source("proj.rules:graph_b")
    assert bundle.imports == ["import math"] and bundle.modules == ["proj.helpers", "proj.rules"]
    assert "K = 3  # a constant the rule uses" in bundle.code and "def unused" not in bundle.code
    ns: dict = {}
    exec("\n".join(bundle.imports) + "\n" + bundle.code, ns)
    assert ns["graph_b"](None, [1.0]) == [3.0 + math.pi]
    with pytest.raises(SourceError, match="more than one"):
        standalone_source("proj.bad:uses_t")
    with pytest.raises(SourceError, match="NOWHERE"):
        standalone_source("proj.bad:uses_nothing_defined")
    with pytest.raises(SourceError, match="name clash"):
        standalone_source("proj.clash:graph_a")


def test_listing_imports_no_framework():
    assert all(not hasattr(r, "applies") for r in all_rules().values())  # the predicate is why_not only
    proc = subprocess.run([sys.executable, "-c", "import dlci.rules, sys; dlci.rules.all_rules(); "
                           "print(sorted(m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules))"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.strip() == "[]", proc.stderr  # listing the rules imports no framework


def test_config_rules_key():
    cfg = Config.parse("rules: [torch.jit.trace]\n")
    assert cfg.rules == ["torch.jit.trace"]
    with pytest.raises(ConfigError, match="unknown key"):
        Config.parse("nan_programs: ['train.py:step']\n")  # the NaN search runs with `dlci nan --program`
    with pytest.raises(ConfigError, match="rules must be list"):
        Config.parse("rules: yes-please\n")


def test_scan_runs_a_librarys_rules_only_for_its_own_pr():
    from types import SimpleNamespace
    from dlci.scan.selection import rule_targets
    from dlci.profiles.base import Touch
    kernel = ("softplus", "aten", "softplus_kernel")
    torch_pr = SimpleNamespace(profiles=["pytorch"], touches=[
        Touch(*kernel, "aten/src/ATen/native/cpu/Activation.cpp", 9, "kernel changed", ("torch.compile",), "pytorch")])
    tvm_pr = SimpleNamespace(profiles=["tvm"], touches=[
        Touch("elu", "aten", "_elu", "python/tvm/relax/frontend/torch/fx_translator.py", 9, "converter changed",
              ("tvm.from_fx",), "tvm")])
    cuda_pr = SimpleNamespace(profiles=["pytorch"], touches=[
        Touch(*kernel, "aten/src/ATen/native/cuda/ActivationSoftplusKernel.cu", 9, "kernel changed",
              ("torch.cuda", "torch.compile.cuda"), "pytorch")])
    got = rule_targets(torch_pr, Config(), None)
    assert got and all(t.rule.library == "torch" for t in got.values())
    assert rule_targets(tvm_pr, Config(), None) == {}  # a converter PR: torch's own rules test torch, not the PR
    assert rule_targets(cuda_pr, Config(), None) == {}  # a CUDA kernel: the rules run the CPU's kernels
    assert rule_targets(torch_pr, Config(rules=["none"]), None) == {}
    one = next(n for n, r in all_rules().items() if r.library == "torch")
    assert set(rule_targets(tvm_pr, Config(rules=[one]), None)) == {"rule." + one}
    with pytest.raises(ConfigError):
        rule_targets(torch_pr, Config(rules=["no.such.rule"]), None)


@pytest.mark.slow
def test_tensorflow_rules_run_on_tensorflow_op_instances(tmp_path):
    """tf_ops gives the TensorFlow rules operator material beyond keras layers: `dlci rules --ops tf.math.xdivy
    --library tensorflow` runs the op-call rules (tf.function, XLA, autograd, SavedModel) on Xdivy instances and none
    of the layer-only ones."""
    out = tmp_path / "out"
    proc = dlci("rules", "--ops", "tf.math.xdivy", "--library", "tensorflow", "--budget", "90", "--no-widen",
                "--out", str(out), "--limit-per-op", "3", timeout=900)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ran = {r["target"] for r in rows if r["op"] == "tf::Xdivy"}
    assert {"rule.tf.function", "rule.tf.function.xla"} <= ran, ran
    assert not ran & {"rule.tf.save_load.config", "rule.tf.formula.activation", "rule.tf.batch"}, ran
    assert sum(1 for r in rows if r["op"] == "tf::Xdivy" and r["status"] in ("pass", "inconsistency")) >= 3
