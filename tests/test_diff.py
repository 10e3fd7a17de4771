"""Git diff analysis (dlci.diff) and source regions (dlci.diff.regions), against real git repositories."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from dlci.diff import DiffError, FileChange, GitRepo, Hunk, diff, match_path
from dlci.diff.regions import innermost, language, regions, touched

# -- a tiny git driver for building fixtures -------------------------------------------------------------------

_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
_ENV.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", LC_ALL="C")


class Repo:
    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.path, env=_ENV, check=True, capture_output=True,
                              text=True).stdout.strip()

    def write(self, rel: str, content: str | bytes) -> None:
        p = self.path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)

    def mv(self, src: str, dst: str) -> None:
        (self.path / dst).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", src, dst)

    def commit(self, msg: str = "c", **files: str | bytes | None) -> str:
        for rel, content in files.items():
            if content is None:
                self.git("rm", "-q", rel)
            else:
                self.write(rel, content)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", msg)
        return self.git("rev-parse", "HEAD")


def lines(n: int, fmt: str = "line {}") -> str:
    return "".join(fmt.format(i) + "\n" for i in range(1, n + 1))


@pytest.fixture
def repo(tmp_path) -> Repo:
    return Repo(tmp_path / "repo")


def changes(r: Repo, base: str = "HEAD~1", head: str = "HEAD", **limits):
    d = GitRepo(r.path, base, head).diff(**limits)
    return d, {f.path: f for f in d.files}


# -- diff: statuses and lines ----------------------------------------------------------------------------------

def test_modified_lines_and_hunks(repo):
    repo.commit(**{"a.txt": lines(10)})
    text = lines(10).replace("line 3\n", "THREE\n").replace("line 7\n", "line 7\nnew A\nnew B\n")
    repo.commit(**{"a.txt": text.replace("line 9\n", "")})
    d, files = changes(repo)
    ch = files["a.txt"]
    assert ch.status == "modified" and ch.old_path == "a.txt" and not ch.binary
    assert ch.added == [3, 8, 9]
    assert ch.removed == [3, 9]
    assert ch.hunks == [Hunk(3, 1, 3, 1), Hunk(7, 0, 8, 2), Hunk(9, 1, 10, 0)]
    assert d.truncated is False and d.head == repo.git("rev-parse", "HEAD")


def test_pure_rename_has_no_lines(repo):
    repo.commit(**{"old/name.py": lines(30)})
    repo.mv("old/name.py", "new/name.py")
    repo.commit()
    _, files = changes(repo)
    ch = files["new/name.py"]
    assert (ch.status, ch.old_path, ch.similarity) == ("renamed", "old/name.py", 100)
    assert ch.added == [] and ch.removed == [] and ch.hunks == []
    assert ch.touched_head_lines() == set()


def test_rename_with_edits(repo):
    repo.commit(**{"a.py": lines(30)})
    repo.mv("a.py", "b.py")
    repo.commit(**{"b.py": lines(30).replace("line 12\n", "changed 12\n")})
    _, files = changes(repo)
    ch = files["b.py"]
    assert ch.status == "renamed" and ch.old_path == "a.py" and 50 < ch.similarity < 100
    assert ch.added == [12] and ch.removed == [12]
    assert "a.py" not in files


def test_copy_of_a_modified_file(repo):
    repo.commit(**{"src.cc": lines(40)})
    # -C finds copies whose source is modified in the same change
    repo.commit(**{"src.cc": lines(40) + "tail\n", "dst.cc": lines(40).replace("line 2\n", "two\n")})
    _, files = changes(repo)
    ch = files["dst.cc"]
    assert (ch.status, ch.old_path) == ("copied", "src.cc")
    assert ch.added == [2] and ch.removed == [2]
    assert files["src.cc"].status == "modified" and files["src.cc"].added == [41]


def test_delete_and_add(repo):
    repo.commit(**{"gone.py": lines(5), "keep.txt": "k\n"})
    repo.commit(**{"gone.py": None, "fresh.py": lines(3, "fresh {}")})   # unlike gone.py: not a rename
    _, files = changes(repo)
    gone, fresh = files["gone.py"], files["fresh.py"]
    assert (gone.status, gone.old_path, gone.removed, gone.added) == ("deleted", "gone.py", [1, 2, 3, 4, 5], [])
    assert gone.touched_head_lines() == set()
    assert (fresh.status, fresh.old_path, fresh.added, fresh.removed) == ("added", None, [1, 2, 3], [])


def test_binary_files_have_no_lines(repo):
    repo.commit(**{"w.bin": b"\x00\x01" * 100, "t.txt": "a\n"})
    repo.commit(**{"w.bin": b"\x00\x02" * 100, "new.bin": b"PK\x00\x00", "t.txt": "b\n"})
    d, files = changes(repo)
    assert files["w.bin"].binary and files["w.bin"].added == [] and files["w.bin"].status == "modified"
    assert files["new.bin"].binary and files["new.bin"].status == "added"
    assert not files["t.txt"].binary and files["t.txt"].added == [1]
    assert any("2 binary files" in n for n in d.notes)


def test_mode_and_type_changes(repo):
    repo.commit(**{"run.sh": "echo hi\n", "link": "target\n"})
    (repo.path / "run.sh").chmod(0o755)
    (repo.path / "link").unlink()
    os.symlink("run.sh", repo.path / "link")
    repo.commit()
    _, files = changes(repo)
    assert files["run.sh"].status == "modified" and files["run.sh"].added == []
    assert (files["run.sh"].old_mode, files["run.sh"].new_mode) == ("100644", "100755")
    link = files["link"]
    # git prints a type change as a deletion plus an addition; both halves land in one FileChange
    assert link.status == "type-changed" and link.removed == [1] and link.added == [1]
    assert link.new_mode == "120000"


@pytest.mark.parametrize("name", ["with space.py", "ünïcødé/dir/ß.py", 'quo"te\\back.py', "tab\there.py",
                                  "new\nline.py", "-dash.py"])
def test_unusual_paths(repo, name):
    repo.commit(**{name: lines(4), "other.txt": "x\n"})
    repo.commit(**{name: lines(4).replace("line 2", "two")})
    g = GitRepo(repo.path)
    d = g.diff()
    assert [f.path for f in d.files] == [name]
    assert d.files[0].added == [2] and d.files[0].removed == [2]
    assert g.text(name) == lines(4).replace("line 2", "two")
    assert g.text(name, "base") == lines(4)
    assert g.exists(name) and name in g.files()


def test_unusual_paths_in_a_rename(repo):
    repo.commit(**{"a dir/x y.py": lines(20)})
    repo.mv("a dir/x y.py", "b dir/ü \"z\".py")
    repo.commit(**{"b dir/ü \"z\".py": lines(20).replace("line 4", "four")})
    _, files = changes(repo)
    ch = files['b dir/ü "z".py']
    assert (ch.status, ch.old_path, ch.added) == ("renamed", "a dir/x y.py", [4])


def test_crlf_and_missing_final_newline(repo):
    repo.commit(**{"win.cpp": "a\r\nb\r\nc\r\n", "tail.py": "x = 1\ny = 2"})
    repo.commit(**{"win.cpp": "a\r\nB\r\nc\r\n", "tail.py": "x = 1\ny = 3"})
    g = GitRepo(repo.path)
    files = {f.path: f for f in g.diff().files}
    assert files["win.cpp"].added == [2] and files["win.cpp"].removed == [2]
    assert files["tail.py"].added == [2] and files["tail.py"].removed == [2]
    assert g.text("win.cpp") == "a\r\nB\r\nc\r\n"   # bytes are not normalised
    assert g.text("tail.py") == "x = 1\ny = 3"


def test_patch_text_that_looks_like_headers(repo):
    # hunk bodies are skipped by count: a changed line reading "diff --git ..." or "@@ ..." is just content
    fake = "diff --git a/z b/z\n@@ -1,2 +1,9 @@\n+++ b/z\nrename from q\n"
    repo.commit(**{"doc.md": "intro\n", "z": "z\n"})
    repo.commit(**{"doc.md": "intro\n" + fake, "z": "Z\n"})
    _, files = changes(repo)
    assert set(files) == {"doc.md", "z"}
    assert files["doc.md"].added == [2, 3, 4, 5]
    assert files["z"].added == [1]


def test_merge_base_excludes_base_branch_progress(repo):
    repo.commit(**{"a.py": lines(10), "b.py": lines(10)})
    repo.git("checkout", "-q", "-b", "pr")
    pr = repo.commit(**{"a.py": lines(10).replace("line 2", "pr change")})
    repo.git("checkout", "-q", "main")
    main = repo.commit(**{"b.py": lines(10).replace("line 5", "main moved on"), "c.py": "new on main\n"})
    g = GitRepo(repo.path, "main", "pr")
    d = g.diff()
    assert [f.path for f in d.files] == ["a.py"]
    assert d.base == repo.git("merge-base", "main", "pr") != main
    assert d.base_ref == "main" and d.head == pr
    assert g.text("b.py", "base") == lines(10)   # "base" reads the fork point, not main's tip


def test_hostile_git_config_does_not_change_parsing(repo, tmp_path):
    repo.commit(**{"a.py": lines(20), "r.py": lines(20)})
    repo.mv("r.py", "moved.py")
    repo.commit(**{"a.py": lines(20).replace("line 3", "three").replace("line 15", "fifteen")})
    expected = [(f.path, f.status, f.old_path, f.added, f.removed) for f in changes(repo)[0].files]
    marker = tmp_path / "external-diff-ran"
    for key, value in [("diff.external", f"touch {marker}; false"), ("color.ui", "always"),
                       ("color.diff", "always"), ("diff.noprefix", "true"), ("diff.mnemonicPrefix", "true"),
                       ("diff.renames", "false"), ("diff.context", "10"), ("diff.interHunkContext", "50"),
                       ("diff.relative", "true"), ("core.quotePath", "true"), ("diff.renameLimit", "1"),
                       ("pager.diff", "false"), ("core.pager", "false"),
                       ("core.fsmonitor", f"touch {marker}; false")]:
        repo.git("config", key, value)
    repo.write(".git/info/attributes", "*.py diff=evil\n")
    repo.git("config", "diff.evil.textconv", "tr a-z A-Z")
    g = GitRepo(repo.path)
    got = [(f.path, f.status, f.old_path, f.added, f.removed) for f in g.diff().files]
    assert got == expected
    assert g.text("a.py").startswith("line 1\n") and "moved.py" in g.files()   # no textconv on reads either
    assert ("moved.py", "renamed", "r.py", [], []) in got
    assert not marker.exists()


def test_environment_does_not_leak_into_git(repo, monkeypatch):
    repo.commit(**{"a.txt": "1\n"})
    repo.commit(**{"a.txt": "2\n"})
    monkeypatch.setenv("GIT_DIR", "/nonexistent")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", "false")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'diff.noprefix'='true'")
    _, files = changes(repo)
    assert files["a.txt"].added == [1]


def test_errors(repo, tmp_path):
    repo.commit(**{"a": "1\n"})
    repo.commit(**{"a": "2\n"})
    with pytest.raises(DiffError, match="unknown revision 'nope'"):
        GitRepo(repo.path, "nope", "HEAD")
    with pytest.raises(DiffError, match="bad revision"):
        GitRepo(repo.path, "--output=/tmp/x", "HEAD")
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(DiffError, match="not a git repository"):
        GitRepo(plain)
    with pytest.raises(DiffError, match="not a git repository"):
        GitRepo(tmp_path / "missing")
    # a blob is not a commit
    with pytest.raises(DiffError, match="unknown revision"):
        GitRepo(repo.path, "HEAD:a", "HEAD")
    repo.git("checkout", "-q", "--orphan", "island")
    repo.commit(**{"b": "x\n"})
    with pytest.raises(DiffError, match="no merge base"):
        GitRepo(repo.path, "main", "island")


def test_subdirectory_resolves_to_repo_root(repo):
    repo.commit(**{"sub/a.py": "1\n"})
    repo.commit(**{"sub/a.py": "2\n"})
    d = diff(repo.path / "sub", "HEAD~1", "HEAD")
    assert Path(d.repo) == repo.path.resolve() and [f.path for f in d.files] == ["sub/a.py"]


def test_truncation_by_files_and_lines(repo):
    repo.commit(**{f"f{i}.txt": lines(10) for i in range(5)})
    repo.commit(**{f"f{i}.txt": lines(10, "edited {}") for i in range(5)})
    d, _ = changes(repo, max_files=2)
    assert d.truncated and len(d.files) == 5
    assert [bool(f.added) for f in d.files] == [True, True, False, False, False]
    assert all(f.status == "modified" for f in d.files)
    assert any("max_files=2" in n for n in d.notes)
    d, _ = changes(repo, max_lines=45)   # 20 changed lines per file: two fit, the third passes the limit
    assert d.truncated and [bool(f.removed) for f in d.files] == [True, True, False, False, False]
    assert any("max_lines=45" in n for n in d.notes)
    d, _ = changes(repo)
    assert not d.truncated and all(f.added for f in d.files) and d.notes == []


def test_touched_head_lines_of_a_pure_deletion():
    ch = FileChange("a.py", "a.py", "modified", added=[20], removed=[5, 6, 7],
                    hunks=[Hunk(5, 3, 4, 0), Hunk(25, 0, 20, 1)])
    # lines 5-7 were deleted after head line 4: lines 4 and 5 now surround the gap
    assert ch.touched_head_lines() == {4, 5, 20}
    top = FileChange("a.py", "a.py", "modified", removed=[1], hunks=[Hunk(1, 1, 0, 0)])
    assert top.touched_head_lines() == {1}


def test_deletion_points_skip_blank_and_comment_lines():
    """onnxscript's unfold fix reverted: the deleted `if dimension < 0:` block sat between `else:` and a blank line;
    the statement a test runs where it used to run is the next line holding code."""
    head = "def f(x, d):\n    if x:\n        y = 0\n    else:\n\n        # note\n        y = d\n    return y\n"
    ch = FileChange("a.py", "a.py", "modified", removed=[5, 6, 7], hunks=[Hunk(5, 3, 4, 0)])
    assert ch.deletion_points(head) == {7: Hunk(5, 3, 4, 0)}
    tail = FileChange("a.py", "a.py", "modified", removed=[9], hunks=[Hunk(9, 1, 8, 0)])
    assert set(tail.deletion_points(head)) == {9}  # nothing after it: the line after the point, as before


def test_text_files_exists_glob(repo):
    repo.commit(**{"pkg/a.py": "a\n", "pkg/sub/b.py": "b\n", "pkg/c.txt": "c\n", "img.png": b"\x89PNG\x00",
                   "latin.c": "caf\xe9\n".encode("latin-1"), "bom.py": b"\xef\xbb\xbfx = 1\n"})
    repo.commit(**{"pkg/c.txt": None})
    g = GitRepo(repo.path)
    assert g.text("pkg/a.py") == "a\n"
    assert g.text("img.png") is None           # binary
    assert g.text("missing.py") is None        # absent
    assert g.text("no such file.py") is None and g.text("pkg/a.py missing") is None
    assert g.text("pkg") is None               # a tree, not a file
    assert g.text("pkg/c.txt") is None and g.text("pkg/c.txt", "base") == "c\n"
    assert g.text("latin.c") == "café\n"       # not UTF-8: latin-1 keeps the lines
    assert g.text("bom.py") == "x = 1\n"
    assert g.text("pkg/c.txt", repo.git("rev-parse", "HEAD~1")) == "c\n"
    assert g.exists("pkg/sub/b.py") and not g.exists("pkg/c.txt") and g.exists("pkg/c.txt", "base")
    assert "pkg/c.txt" not in g.files() and "pkg/c.txt" in g.files("base")
    assert g.glob("pkg/*.py") == ["pkg/a.py"]
    assert g.glob("pkg/**/*.py") == ["pkg/a.py", "pkg/sub/b.py"]
    assert g.glob("**/b.py") == ["pkg/sub/b.py"]
    assert g.glob("pkg/**") == ["pkg/a.py", "pkg/sub/b.py"]
    assert match_path("a/[bc].py", "a/b.py") and not match_path("a/*.py", "a/x/b.py")


# -- regions ---------------------------------------------------------------------------------------------------

def test_language():
    assert [language(p) for p in ("a.py", "x/b.CC", "k.cu", "n.yaml", "m.yml", "r.md", "op.inc")] == \
        ["python", "cpp", "cpp", "yaml", "yaml", None, "cpp"]


PY = '''\
import os


@register("elu")
@other
def top(x):
    def inner():
        return 1
    return inner()


class Importer:
    """doc"""

    async def _softplus(self, node):
        return node

    if os.name:
        def _cond(self):
            pass

    class Nested:
        def deep(self):
            pass
'''


def test_python_regions_nested_and_decorated():
    rs = regions("m.py", PY)
    got = {r.name: (r.kind, r.start, r.end, r.parent) for r in rs}
    assert got == {
        "top": ("function", 4, 9, None),
        "top.inner": ("function", 7, 8, "top"),
        "Importer": ("class", 12, 24, None),
        "Importer._softplus": ("function", 15, 16, "Importer"),
        "Importer._cond": ("function", 19, 20, "Importer"),
        "Importer.Nested": ("class", 22, 24, "Importer"),
        "Importer.Nested.deep": ("function", 23, 24, "Importer.Nested"),
    }
    assert innermost(rs, 8).name == "top.inner" and innermost(rs, 4).name == "top"
    assert innermost(rs, 13).name == "Importer" and innermost(rs, 1) is None


def test_python_regions_survive_syntax_errors():
    broken = PY.replace("return node", "return node +") + "\ndef after(\n    a,\n):\n    s = '''\ndef fake():\n'''\n"
    rs = regions("m.py", broken)
    got = {r.name: (r.start, r.end) for r in rs}
    assert got["top"] == (4, 9) and got["top.inner"] == (7, 8)
    assert got["Importer._softplus"] == (15, 16) and got["Importer.Nested.deep"] == (23, 24)
    assert got["after"] == (26, 31) and "fake" not in got and "after.fake" not in got


CPP = r'''// a comment with { and }
#include <map>
#define BODY(x) { return x; }
#define MULTI(a) \
    do { a; } \
    while (0)
namespace ov {
namespace frontend {
/* block comment {
   } */
OutputVector translate_elu(const NodeContext& context) {
    auto s = "string with } brace";
    auto r = R"xx(raw ) " } string)xx";
    char c = '}';
    auto f = [&](int x) { return x + 1; };
    return {context.mark_node(x)};
}

template <typename T, int N = 3>
Status Elu<T>::Compute(OpKernelContext* ctx) const {
  if (x) { y(); }
  return Status::OK();
}

class TVM_DLL Foo : public Bar<int> {
 public:
  Foo(int a) : a_(a), b_{a} {
    init();
  }
  ~Foo() override {}
  bool operator==(const Foo& o) const { return a_ == o.a_; }
  struct Inner {
    void g() noexcept {
    }
  };
 private:
  int a_;
};

const std::map<std::string, CreatorFunction> get_supported_ops() {
    return {
        {"aten::elu", op::translate_elu},
    };
}
}  // namespace frontend
}  // namespace ov

ONNX_CPU_OPERATOR_KERNEL(
    Elu,
    6,
    KernelDefBuilder().TypeConstraint("T", DataTypeImpl::GetTensorType<float>()),
    Elu<float>);
ONNX_OPERATOR_KERNEL_EX(Relu, kOnnxDomain, 6, kCpuExecutionProvider,
    KernelDefBuilder(), Relu<float>)
TEST(EluTest, Basic) {
  EXPECT_EQ(1, 1);
}
'''


def test_cpp_regions():
    got = {r.name: (r.kind, r.start, r.end, r.parent) for r in regions("elu.cpp", CPP)}
    assert got == {
        "translate_elu": ("function", 11, 17, None),
        "Elu::Compute": ("function", 19, 23, "Elu"),
        "Foo": ("class", 25, 38, None),
        "Foo::Foo": ("function", 27, 29, "Foo"),
        "Foo::~Foo": ("function", 30, 30, "Foo"),
        "Foo::operator==": ("function", 31, 31, "Foo"),
        "Foo::Inner": ("class", 32, 35, "Foo"),
        "Foo::Inner::g": ("function", 33, 34, "Foo::Inner"),
        "get_supported_ops": ("function", 40, 44, None),
        "ONNX_CPU_OPERATOR_KERNEL(Elu, 6": ("entry", 48, 52, None),
        "ONNX_OPERATOR_KERNEL_EX(Relu, kOnnxDomain": ("entry", 53, 54, None),
        "TEST(EluTest, Basic)": ("function", 55, 57, None),
    }


def test_cpp_literals_and_comments_cannot_unbalance_braces():
    # each trap alone would end translate_x early or start a phantom function
    traps = ['  const char* s = "}";', "  char c = '}';", '  auto r = R"d(}})d";', "  // }", "  /* } */",
             "#define CLOSE }", "  auto q = '\"';", '  const char* e = "\\"}";']
    for trap in traps:
        src = f"void translate_x(int a) {{\n{trap}\n  return;\n}}\nvoid after() {{\n}}\n"
        got = {r.name: (r.start, r.end) for r in regions("t.cc", src)}
        assert got == {"translate_x": (1, 4), "after": (5, 6)}, trap


def test_cpp_tables_macros_and_namespaces():
    src = '''\
namespace a::b {
static const std::map<std::string, int> kTable = {
    {"x", 1},
    {"y", 2},
};
OP_CONVERTER(translate_elu);
TVM_REGISTER_GLOBAL("relax.op.elu")
    .set_body_typed([](Expr x) { return Elu(x); });
}
extern "C" {
int c_api(int x) { return x; }
}
auto Foo::bar() -> std::vector<int> {
  return {};
}
TORCH_IMPL_FUNC(softplus_out) (
   const Tensor& self, const Tensor& result
) {
  char w = L'}';
}
REGISTER_DISPATCH(elu_stub, &elu_kernel);
TORCH_LIBRARY_IMPL(aten, CPU, m) {
  m.impl("elu", elu);
}
'''
    got = {r.name: (r.kind, r.start, r.end, r.parent) for r in regions("t.cc", src)}
    assert got == {
        "kTable": ("entry", 2, 5, None),
        "OP_CONVERTER(translate_elu)": ("entry", 6, 6, None),
        'TVM_REGISTER_GLOBAL("relax.op.elu")': ("entry", 7, 8, None),
        "c_api": ("function", 11, 11, None),
        "Foo::bar": ("function", 13, 15, "Foo"),
        "TORCH_IMPL_FUNC(softplus_out)": ("function", 16, 20, None),
        "REGISTER_DISPATCH(elu_stub, &elu_kernel)": ("entry", 21, 21, None),
        "TORCH_LIBRARY_IMPL(aten, CPU": ("function", 22, 24, None),   # first two arguments name a macro call
    }


NATIVE = '''\
# native_functions.yaml style

- func: softplus.out(Tensor self, Scalar beta=1, *, Tensor(a!) out) -> Tensor(a!)
  python_module: nn
  dispatch:
    CPU, CUDA: softplus_out

- func: softplus(Tensor self, Scalar beta=1) -> Tensor
  structured_delegate: softplus.out
# a comment between entries

- name: "elu_backward(Tensor grad) -> Tensor"
  self: grad
'''


def test_yaml_native_functions_entries():
    got = {r.name: (r.kind, r.start, r.end) for r in regions("native_functions.yaml", NATIVE)}
    assert got == {"softplus.out": ("entry", 3, 6), "softplus": ("entry", 8, 9), "elu_backward": ("entry", 12, 13)}


def test_yaml_mapping_keys():
    src = "version: 1\naten::elu:\n  a: 1\nops:\n  - name: relu\n    x: 1\n  - name: selu\n"
    got = {r.name: (r.start, r.end, r.parent) for r in regions("m.yml", src)}
    assert got == {"version": (1, 1, None), "aten::elu": (2, 3, None), "ops": (4, 7, None),
                   "relu": (5, 6, "ops"), "selu": (7, 7, "ops")}


# -- touched ---------------------------------------------------------------------------------------------------

def test_touched_maps_lines_to_innermost_regions_and_deleted_functions(repo):
    base = '''\
import os


def keep(x):
    return x


def dropped(y):
    a = 1
    return y


class Conv:
    def run(self):
        return 1

    def old(self):
        return 2
'''
    head = base.replace("import os", "import sys").replace("return x", "return x + 1")
    head = head.replace("def dropped(y):\n    a = 1\n    return y\n\n\n", "")
    head = head.replace("\n    def old(self):\n        return 2\n", "")
    repo.commit(**{"m.py": base})
    repo.commit(**{"m.py": head})
    g = GitRepo(repo.path)
    ch = g.diff().files[0]
    got = [(t.region.name if t.region else None, t.line, t.side)
           for t in touched(ch, g.text("m.py"), g.text("m.py", "base"))]
    # Conv.old was the last thing in the file: the deletion point follows Conv.run, which is selected too
    assert got == [(None, 1, "head"), ("keep", 5, "head"), ("Conv.run", 10, "head"),
                   ("dropped", 8, "base"), ("Conv.old", 17, "base")]


def test_touched_deleted_file_is_all_base(repo):
    repo.commit(**{"op.cc": "#include <x>\nvoid a() {\n}\nvoid b() {\n}\n"})
    repo.commit(**{"op.cc": None})
    g = GitRepo(repo.path)
    ch = g.diff().files[0]
    got = [(t.region.name if t.region else None, t.line, t.side) for t in touched(ch, None, g.text("op.cc", "base"))]
    assert got == [(None, 1, "base"), ("a", 2, "base"), ("b", 4, "base")]


def test_touched_one_entry_per_region_and_binary_nothing():
    text = "def f():\n    a = 1\n    b = 2\n    c = 3\n"
    ch = FileChange("f.py", "f.py", "modified", added=[2, 3, 4], removed=[2, 3],
                    hunks=[Hunk(2, 2, 2, 3)])
    got = touched(ch, text, "def f():\n    a = 0\n    b = 0\n")
    assert [(t.region.name, t.line, t.side) for t in got] == [("f", 2, "head")]
    assert touched(FileChange("x.bin", "x.bin", "modified", binary=True), None, None) == []


def test_touched_yaml_entry(repo):
    repo.commit(**{"native_functions.yaml": NATIVE})
    repo.commit(**{"native_functions.yaml": NATIVE.replace("structured_delegate: softplus.out",
                                                           "structured_delegate: softplus.out\n  tags: pointwise")})
    g = GitRepo(repo.path)
    ch = g.diff().files[0]
    got = touched(ch, g.text(ch.path), g.text(ch.path, "base"))
    assert [(t.region.name, t.line) for t in got] == [("softplus", 10)]
