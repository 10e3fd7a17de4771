"""`dlci rules`: the registry listing, a run through the real campaign (confirmation, reduction, reproducer that fails
alone), configuration and scan selection of rules."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlci.config import Config, ConfigError
from dlci.rules import CATEGORIES, all_rules, describe, get_rule

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
    # the reproducer stands alone (no dlci on the path, no extra rule module) and fails while the graphs disagree
    script = out / f["repro"]
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DLCI_RULE_MODULES")}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=clean, cwd=tmp_path)
    assert run.returncode == 1 and "REPRODUCED value mismatch" in run.stdout
    assert "from dlci" not in script.read_text()


def test_config_rules_key():
    cfg = Config.parse("rules: [torch.jit.trace]\n")
    assert cfg.rules == ["torch.jit.trace"]
    with pytest.raises(ConfigError, match="unknown key"):
        Config.parse("nan_programs: ['train.py:step']\n")  # the NaN search runs with `dlci nan --program`
    with pytest.raises(ConfigError, match="rules must be list"):
        Config.parse("rules: yes-please\n")


def test_scan_runs_a_librarys_rules_only_for_its_own_pr():
    from types import SimpleNamespace
    from dlci.scan import ScanRequest, _rule_targets
    req = ScanRequest(repo=Path("."), base="a", head="b", out=Path("."))
    torch_pr = SimpleNamespace(profiles=["pytorch"])
    tvm_pr = SimpleNamespace(profiles=["tvm"])
    got = _rule_targets(torch_pr, Config(), req)
    assert got and all(t.rule.library == "torch" for t in got.values())
    assert _rule_targets(tvm_pr, Config(), req) == {}  # a converter PR: torch's own rules test torch, not the PR
    assert _rule_targets(torch_pr, Config(rules=["none"]), req) == {}
    one = next(n for n, r in all_rules().items() if r.library == "torch")
    assert set(_rule_targets(tvm_pr, Config(rules=[one]), req)) == {"rule." + one}
    with pytest.raises(ConfigError):
        _rule_targets(torch_pr, Config(rules=["no.such.rule"]), req)
