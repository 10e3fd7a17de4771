"""OpenVINO's Python side: what a PR to the PyTorch decoders, the torch.compile backend, the export decompositions or
ovc selects, and a checkout of it running over the installed native libraries (real OpenVINO sources, real git)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openvino")

from dlci import samples  # noqa: E402
from dlci.diff import GitRepo  # noqa: E402
from dlci.profiles import PROFILES, registry  # noqa: E402

PKG = samples.OV_PACKAGE


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("ov") / "repo"
    repo, _, _ = samples.build("openvino-py-bfloat16-table", d)
    return repo


def pr(base_repo: Path, tmp_path: Path, rel: str, old: str, new: str) -> GitRepo:
    """A PR on the OpenVINO-shaped repository: one edit of the installed sources, committed on a branch."""
    d = tmp_path / "r"
    subprocess.run(["git", "clone", "-q", str(base_repo), str(d)], check=True)
    subprocess.run(["git", "-C", str(d), "checkout", "-q", "-b", "change", "origin/main"], check=True)
    path = d / PKG / rel
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(d)}
    subprocess.run(["git", "-C", str(d), "commit", "-qam", "pr"], check=True, env=env)
    return GitRepo(d, "origin/main", "HEAD")


def touches(repo: GitRepo) -> set[tuple[str, tuple[str, ...]]]:
    registry()
    result = PROFILES["openvino"].analyse(repo, repo.diff())
    return {(t.operator, tuple(sorted(t.targets))) for t in result.touches}


def test_a_repository_of_the_python_package_is_openvinos(base_repo):
    registry()
    repo = GitRepo(base_repo, "main", "pr/openvino-py-bfloat16-table")
    assert PROFILES["openvino"].detect(repo)
    got = touches(repo)
    torch_targets = ("openvino.exported_program", "openvino.pytorch", "openvino.torch_compile")
    # the dtype table every decoder reads names no operator: the operators every graph has stand in for it
    assert ("aten::add", torch_targets) in got and ("aten::relu", torch_targets) in got


def test_a_torch_compile_support_entry_selects_its_operator_for_torch_compile_only(base_repo, tmp_path):
    repo = pr(base_repo, tmp_path, "frontend/pytorch/torchdynamo/op_support.py",
              '            "torch.ops.aten.gelu.default": None,\n', "")
    assert touches(repo) == {("aten::gelu", ("openvino.torch_compile",))}


def test_a_decomposition_body_selects_the_operator_it_is_registered_for(base_repo, tmp_path):
    repo = pr(base_repo, tmp_path, "frontend/pytorch/torchdynamo/decompositions.py",
              "        batch_size, num_head, q_size, head_size = (",
              "        batch_size, num_head, q_size, head_size = (  # sizes of the query")
    got = touches(repo)
    assert got == {("aten::_scaled_dot_product_flash_attention", ("openvino.torch_compile",))}, got


def test_an_export_decomposition_entry_selects_its_operator_for_exported_programs(base_repo, tmp_path):
    repo = pr(base_repo, tmp_path, "frontend/pytorch/torchdynamo/export_decompositions.py",
              "        torch.ops.aten.celu,\n", "")
    assert touches(repo) == {("aten::celu", ("openvino.exported_program",))}


def test_a_checkout_runs_its_own_python_over_the_installed_native_libraries(base_repo, tmp_path):
    """prepare_checkout links the wheel's native files into the checkout's package: `import openvino` then loads
    the checkout's Python (the PR's code) and converts a model."""
    from dlci.checkout import Checkout
    from dlci.config import Config
    registry()
    profile = PROFILES["openvino"]
    co = Checkout.create(base_repo, "pr/openvino-py-bfloat16-table", tmp_path / "work", "head")
    try:
        profile.prepare_checkout(co.path)
        env = co.env(Config.parse(None, "defaults"), profile.python_path)
        code = ("import openvino as ov, torch\n"
                "from openvino.frontend.pytorch import utils\n"
                "print(utils.__file__)\n"
                "print('torch.bfloat16' in utils.pt_to_ov_type_map)\n"
                "m = ov.convert_model(torch.nn.ReLU(), example_input=torch.randn(2, 3))\n"
                "print(ov.Core().compile_model(m, 'CPU')(torch.randn(2, 3).numpy())[0].shape)\n")
        import os
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        where, has_bf16, shape = proc.stdout.split("\n")[:3]
        assert where.startswith(str(co.path)) and has_bf16 == "False" and shape == "(2, 3)"
    finally:
        co.remove()
