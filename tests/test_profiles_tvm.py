"""The TVM profile on a real checkout layout: the installed TVM's own Python sources in a temporary git repo."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from dlci import profiles, samples  # noqa: E402
from dlci.diff import GitRepo  # noqa: E402

FE = "python/tvm/relax/frontend"
BASE_FX = f"{FE}/torch/base_fx_graph_translator.py"
EP = f"{FE}/torch/exported_program_translator.py"
ONNX = f"{FE}/onnx/onnx_frontend.py"


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture(scope="module")
def tvm_repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("tvm")
    samples.copy_tvm_python(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo, git(repo, "rev-parse", "HEAD")


def pr(tvm_repo, name: str, edits: dict[str, list[tuple[str, str]]]) -> GitRepo:
    """Commit ``edits`` (file -> [(old, new)], each old snippet unique; new None deletes the file) on a branch."""
    repo, base = tvm_repo
    git(repo, "checkout", "-q", "-B", name, base)
    for rel, changes in edits.items():
        path = repo / rel
        if changes is None:
            path.unlink()
            continue
        text = path.read_text()
        for old, new in changes:
            assert text.count(old) == 1, (rel, old)
            text = text.replace(old, new)
        path.write_text(text)
    git(repo, "commit", "-q", "-am", name)
    return GitRepo(repo, base, git(repo, "rev-parse", "HEAD"))


def touched(repo: GitRepo):
    analysis = profiles.analyse(repo)
    assert analysis.profiles == ["tvm"]
    return analysis


def by_target(analysis) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for t in analysis.touches:
        for target in t.targets:
            out.setdefault(target, set()).add(t.operator)
    return out


def test_converter_body_edit_selects_its_entries_in_both_torch_maps(tvm_repo):
    sample = samples.SAMPLES["tvm-elu-minimum"]
    edit = sample.edits[0]
    a = touched(pr(tvm_repo, "elu", {edit.file: [(edit.old, edit.new)]}))
    ops = by_target(a)
    assert ops["tvm.from_exported_program"] == {"elu.default"}
    assert "elu" in ops["tvm.from_fx"] and ops["tvm.from_fx"] <= {"elu", "nn.ELU"}
    assert set(ops) == {"tvm.from_exported_program", "tvm.from_fx"}
    for t in a.touches:
        assert t.file == BASE_FX and t.why == "converter changed"
    text = GitRepo(tvm_repo[0], "HEAD", "HEAD").text(BASE_FX)
    line = a.touches[0].line
    # the selecting line lies inside _elu at head
    start = next(i for i, ln in enumerate(text.splitlines(), 1) if "def _elu(" in ln)
    assert start < line < start + 30


def test_shared_helper_selects_every_entry_that_reaches_it(tvm_repo):
    edit = samples.SAMPLES["tvm-avgpool-padding"].edits[0]
    a = touched(pr(tvm_repo, "avgpool", {edit.file: [(edit.old, edit.new)]}))
    ops = by_target(a)
    assert "avg_pool2d.default" in ops["tvm.from_exported_program"]
    assert {"avg_pool2d", "nn.AvgPool2d"} <= ops["tvm.from_fx"]
    everything = {t.operator for t in a.touches}
    assert not any("max_pool" in o or "adaptive" in o or "avg_pool1d" in o or "avg_pool3d" in o for o in everything)
    assert all("helper" in t.why and "_avg_pool2d_impl" in t.why for t in a.touches)


def test_convert_map_line_selects_only_that_entry(tvm_repo):
    a = touched(pr(tvm_repo, "mapline", {EP: [('"celu.default": self._celu,', '"celu.default": self._elu,')]}))
    assert [(t.operator, t.why, t.file) for t in a.touches] == [("celu.default", "convert-map entry changed", EP)]


def test_onnx_converter_class_and_its_base_class(tvm_repo):
    edit = samples.SAMPLES["tvm-onnx-elu-default"].edits[0]
    a = touched(pr(tvm_repo, "onnx-elu", {edit.file: [(edit.old, edit.new)]}))
    assert {(t.operator, t.namespace) for t in a.touches} == {("Elu", "onnx")}
    assert a.touches[0].targets == ("tvm.from_onnx",)
    # Pool.get_pad_pair is inherited by the pooling converters: all of them, and nothing else
    text = (Path(tvm_repo[0]) / ONNX).read_text()
    git(tvm_repo[0], "checkout", "-q", tvm_repo[1])
    start = text.index("class Pool(OnnxOpConverter):")
    body = text[start:start + 3000]
    old = "    def get_pad_pair(cls, input1d, kernel1d, stride1d, mode):\n"
    assert old in body
    b = touched(pr(tvm_repo, "onnx-pool", {ONNX: [(old, old + "        # pads are symmetric unless SAME_UPPER\n")]}))
    ops = {t.operator for t in b.touches}
    assert {"AveragePool", "MaxPool"} <= ops
    assert "Conv" not in ops and "Elu" not in ops


def test_library_op_change_selects_converters_that_call_it(tvm_repo):
    rel = "python/tvm/relax/op/nn/nn.py"
    text = (Path(tvm_repo[0]) / rel).read_text()
    start = text.index("def softplus(")
    doc_end = text.index('"""', text.index('"""', start) + 3) + 3
    a = touched(pr(tvm_repo, "relax-softplus", {rel: [(text[start:doc_end], text[start:doc_end] +
                                                       "\n    beta = float(beta)")]}))
    ops = by_target(a)
    assert "softplus.default" in ops["tvm.from_exported_program"]
    assert {"softplus", "nn.Softplus"} <= ops["tvm.from_fx"]
    assert all("library op" in t.why for t in a.touches)
    assert "elu.default" not in ops["tvm.from_exported_program"]


def test_deleted_converter_is_reported_from_the_base_side(tvm_repo):
    text = (Path(tvm_repo[0]) / EP).read_text()
    line = next(ln for ln in text.splitlines() if '"softsign.default"' in ln) + "\n"
    a = touched(pr(tvm_repo, "drop-softsign", {EP: [(line, "")]}))
    assert [(t.operator, t.why) for t in a.touches] == [("softsign.default", "convert-map entry removed (base line)")]


def test_docs_only_change_touches_nothing_and_is_fast(tvm_repo):
    repo, base = tvm_repo
    git(repo, "checkout", "-q", "-B", "docs", base)
    (repo / "docs.md").write_text("hello\n")
    git(repo, "add", "docs.md")
    git(repo, "commit", "-q", "-m", "docs")
    a = touched(GitRepo(repo, base, git(repo, "rev-parse", "HEAD")))
    assert a.touches == [] and a.unmapped == []


def test_frontend_change_reaching_no_entry_is_reported_unmapped(tvm_repo):
    """`detach_params` is a user utility in the shared common.py: no converter and no importer calls it.
    (`update_convert_map`, this test's former example, is called by `from_exported_program` and now selects the
    operators every graph has.)"""
    rel = f"{FE}/common.py"
    old = "def detach_params(mod: tvm.IRModule) -> tuple[tvm.IRModule, dict[str, list[tvm.runtime.Tensor]]]:\n"
    assert old in (Path(tvm_repo[0]) / rel).read_text()
    a = touched(pr(tvm_repo, "unmapped", {rel: [(old, old + "    # the params attribute is dropped from mod\n")]}))
    assert a.touches == []
    assert any(u["region"] == "detach_params" for u in a.unmapped)


def test_removed_opset_handler_selects_its_converter(tvm_repo):
    """A PR that deletes a converter's `_impl_v18` (a real revert: TVM #18072) changes no head line inside the class:
    the deleted method lives only on the base side, and still selects that converter, with nothing left unmapped."""
    text = (Path(tvm_repo[0]) / ONNX).read_text()
    start = text.index("class ReduceL1(OnnxOpConverter):")
    method = text.index("    @classmethod\n    def _impl_v18(", start)
    end = text.index("\n\nclass ", method)
    a = touched(pr(tvm_repo, "onnx-reducel1-v18", {ONNX: [(text[method - 1:end], "")]}))
    assert {(t.operator, t.namespace) for t in a.touches} == {("ReduceL1", "onnx")}
    assert "removed by the PR" in a.touches[0].why
    assert a.unmapped == []


def test_a_new_method_with_its_blank_line_selects_only_the_entries_that_use_it(tvm_repo):
    """A real fix (TVM #17903, SELU) adds `_selu` to the shared base class, with the blank line after it, and points
    the convert-map entries at it: the blank line sits at class level and must not count as a change of the whole
    class (that selected every operator of both torch frontends)."""
    text = (Path(tvm_repo[0]) / BASE_FX).read_text()
    anchor = "    def _tril_triu(self, op: Callable) -> Callable:\n"
    assert anchor in text
    method = ("    def _selu(self, node):\n        x = self.env[node.args[0]]\n"
              "        return self.block_builder.emit(relax.op.nn.selu(x))\n\n")
    ep_text = (Path(tvm_repo[0]) / EP).read_text()
    entry = next(ln for ln in ep_text.splitlines() if ln.strip().startswith('"selu.default":'))
    a = touched(pr(tvm_repo, "selu-method", {BASE_FX: [(anchor, method + anchor)],
                                              EP: [(entry, entry.split(":")[0] + ": self._selu,")]}))
    assert {t.operator for t in a.touches} == {"selu.default"}


def test_a_deleted_method_with_its_entries_selects_only_the_operators_that_used_it(tvm_repo):
    """The revert of a real change (TVM #17893, fmod) deletes `_fmod` from the shared base class and its entries:
    the head lines around the deletion sit at class level between two methods and must not count as a change of
    the whole class (that selected all 554 operators of both torch frontends, and fmod was never tested)."""
    root = Path(tvm_repo[0])
    text = (root / BASE_FX).read_text()
    start = text.index("    def _fmod(")
    method = text[start:text.index("    def _rsub(", start)]
    ep_lines = [ln + "\n" for ln in (root / EP).read_text().splitlines() if ln.strip().startswith('"fmod.')]
    fx = f"{FE}/torch/fx_translator.py"
    fx_line = next(ln for ln in (root / fx).read_text().splitlines() if ln.strip() == '"fmod": self._fmod,') + "\n"
    a = touched(pr(tvm_repo, "drop-fmod", {BASE_FX: [(method, "")], EP: [(ln, "") for ln in ep_lines],
                                            fx: [(fx_line, "")]}))
    assert {t.operator for t in a.touches} == {"fmod", "fmod.Scalar", "fmod.Tensor"}
    assert not any(t.why.startswith("helper") for t in a.touches)


COMMON_EP = {"add.Tensor", "mul.Tensor", "relu.default", "linear.default", "conv2d.default"}
COMMON_FX = {"add", "mul", "relu", "linear", "conv2d"}


def test_importer_input_helper_change_selects_the_operators_every_graph_has(tvm_repo):
    """A real regression (TVM b1d1cdc4 reverted): deleting the bfloat16 branch of `_convert_data_type` breaks every
    bf16 graph, because the importers type their graph inputs with it (`create_input_vars`). The converters that call
    it (astype, full, arange...) are not enough: the upstream test is a plain `x + y`."""
    text = (Path(tvm_repo[0]) / BASE_FX).read_text()
    start = text.index("    def _convert_data_type(")
    branch = text.index('        elif input_type in ["bfloat16",', start)
    branch_end = text.index("\n        elif", branch + 10) + 1
    a = touched(pr(tvm_repo, "drop-bf16", {BASE_FX: [(text[branch:branch_end], "")]}))
    ops = by_target(a)
    assert COMMON_EP <= ops["tvm.from_exported_program"] and COMMON_FX <= ops["tvm.from_fx"]
    every = {t.why for t in a.touches if "runs for every graph" in t.why}
    assert every == {f"BaseFXGraphImporter._convert_data_type runs for every graph (reached from {entry})"
                     for entry in ("from_exported_program", "from_fx")}
    # what the per-entry mapping found before stays: the converters that call the helper directly
    assert any("helper BaseFXGraphImporter._convert_data_type" in t.why for t in a.touches)
    assert not any(u["region"] == "BaseFXGraphImporter._convert_data_type" for u in a.unmapped)

    # ONNX: a line added to the graph-input parser (head side)
    onnx_text = (Path(tvm_repo[0]) / ONNX).read_text()
    old = "    def _parse_graph_input(self, graph: onnx.onnx_ml_pb2.GraphProto):\n"
    assert old in onnx_text
    b = touched(pr(tvm_repo, "onnx-input", {ONNX: [(old, old + "        # graph inputs, less initializers\n")]}))
    assert {t.operator for t in b.touches} == {"Add", "Mul", "Relu", "MatMul", "Conv"}
    assert all(t.why == "ONNXGraphImporter._parse_graph_input runs for every graph (reached from from_onnx)"
               for t in b.touches)
    assert b.unmapped == []

    # ONNX: a graph-level method deleted with its call: the method lives on the base side only
    start = onnx_text.index("    def _check_for_unsupported_ops(")
    method = onnx_text[start:onnx_text.index("    def _construct_nodes(", start)]
    c = touched(pr(tvm_repo, "onnx-no-check", {ONNX: [(method, ""), ("        self._check_for_unsupported_ops(graph)\n",
                                                                     "")]}))
    removed = [t for t in c.touches if t.why.startswith("ONNXGraphImporter._check_for_unsupported_ops")]
    assert {t.operator for t in removed} == {"Add", "Mul", "Relu", "MatMul", "Conv"}
    assert all(t.why.endswith("(reached from from_onnx): removed by the PR (base line)") for t in removed)
    assert c.unmapped == []


def test_helper_of_one_converter_does_not_select_the_common_operators(tvm_repo):
    text = (Path(tvm_repo[0]) / BASE_FX).read_text()
    old = "def _diagonal_einsum_subscripts(ndim: int, dim1: int, dim2: int) -> str:\n"
    assert old in text
    a = touched(pr(tvm_repo, "diag-helper", {BASE_FX: [(old, old + "    # the diagonal goes last\n")]}))
    ops = {t.operator for t in a.touches}
    assert ops and not ops & (COMMON_EP | COMMON_FX)
    assert all("helper _diagonal_einsum_subscripts" in t.why for t in a.touches)
