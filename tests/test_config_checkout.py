""".dlci.yml parsing and revision checkouts (real git worktrees, a real install command)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlci.checkout import Checkout, CheckoutError
from dlci.config import Config, ConfigError


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": os.environ["PATH"], "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_config_defaults_and_values():
    assert Config.parse(None).python_path is None
    cfg = Config.parse("python_path: [python]\nenv: {A: 1}\nbudget: 60\ntargets: [tvm.from_fx]\n")
    assert cfg.python_path == ["python"] and cfg.env == {"A": "1"} and cfg.budget == 60
    assert cfg.targets == ["tvm.from_fx"]
    assert Config.parse("").source == ".dlci.yml"


@pytest.mark.parametrize("text, message", [
    ("budget: [1]", "budget must be"),
    ("python_path: python", "python_path must be list"),
    ("targets: [1, 2]", "every entry of targets"),
    ("unknown_key: 1", "unknown key(s) unknown_key"),
    ("- a\n- b", "expected a mapping"),
    ("env: {A: [1]}", "env values must be strings"),
    ("budget: -5", "budget must be positive"),
    ("a: [unclosed", "not valid YAML"),
    ("limit_per_op: true", "limit_per_op must be int"),
])
def test_config_errors_name_the_problem(text, message):
    with pytest.raises(ConfigError) as e:
        Config.parse(text)
    assert message in str(e.value)


@pytest.fixture()
def repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "src" / "pkg" / "__init__.py").write_text("VALUE = 'base'\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "src" / "pkg" / "__init__.py").write_text("VALUE = 'head'\n")
    git(repo, "commit", "-qam", "head")
    return repo, base, git(repo, "rev-parse", "HEAD")


def _value(env: dict, module: str = "pkg") -> str:
    full = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", f"import {module}; print({module}.VALUE)"], env=full,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_each_revision_imports_its_own_code_and_the_user_tree_is_untouched(repo, tmp_path):
    path, base, head = repo
    cfg = Config.parse("python_path: [src]\n")
    work = tmp_path / "work"
    head_co = Checkout.create(path, head, work, "head")
    base_co = Checkout.create(path, base, work, "base")
    try:
        assert _value(head_co.env(cfg)) == "head"
        assert _value(base_co.env(cfg)) == "base"
        assert git(path, "status", "--porcelain") == ""  # the user's working tree and index are untouched
    finally:
        head_co.remove()
        base_co.remove()
    assert not (work / "head").exists()
    assert "work" not in git(path, "worktree", "list")


def test_install_command_fills_the_revision_prefix(repo, tmp_path):
    path, base, head = repo
    cfg = Config.parse("python_path: []\n"
                       "install: \"mkdir -p {prefix}/built && cp src/pkg/__init__.py {prefix}/built/__init__.py\"\n")
    co = Checkout.create(path, head, tmp_path / "work", "head")
    try:
        co.prepare(cfg)
        assert _value(co.env(cfg), "built") == "head"
        os.environ["DLCI_TEST_TOKEN"] = "secret"
        try:
            co.prepare(Config.parse("install: \"env > {prefix}/env.txt\"\n"))
        finally:
            del os.environ["DLCI_TEST_TOKEN"]
        seen = (co.prefix / "env.txt").read_text()
        assert "DLCI_TEST_TOKEN" not in seen and "PATH=" in seen  # secrets scrubbed, the rest inherited
        bad = Config.parse("install: \"exit 7\"\n")
        with pytest.raises(CheckoutError, match="exited 7"):
            co.prepare(bad)
        with pytest.raises(CheckoutError, match="does not exist"):
            co.env(Config.parse("python_path: [no/such/dir]\n"))
    finally:
        co.remove()


def test_bad_revision_cannot_be_checked_out(repo, tmp_path):
    path, _, _ = repo
    with pytest.raises(CheckoutError, match="worktree add"):
        Checkout.create(path, "0" * 40, tmp_path / "work", "head")


@pytest.mark.parametrize("entry", ["", ".", "./", "/"])
def test_python_path_entries_that_name_the_root_hold_the_root_package(entry):
    """An onnxscript-shaped repository (the package at the root) with ``python_path: ["."]``: its converter files are
    the checkout's modules, not "held by no entry" (every such scan stopped with exit 3)."""
    from dlci.exec.origins import module_for
    rel = "onnxscript/function_libs/torch_lib/ops/prims.py"
    assert module_for(rel, [entry]) == "onnxscript.function_libs.torch_lib.ops.prims"
    assert module_for("python/tvm/relax/frontend/onnx/onnx_frontend.py", ["./python"]) == \
        "tvm.relax.frontend.onnx.onnx_frontend"
    assert module_for("docs/conf.py", ["python"]) is None
