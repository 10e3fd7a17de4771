"""Diff analysis speed: dlci.diff (one raw listing + one streamed -U0 patch, one cat-file process) vs a naive
per-file pipeline (a `git show` per side per file + difflib), both followed by regions/touched for every file.

The repository is built in a temp dir from the installed TVM's Relax frontends (real Python converter code) plus
synthetic C++ converters and a native_functions.yaml; the head commit edits, inserts and deletes lines in most
files, renames some (with and without edits), deletes and adds files, and changes a binary file. The budget is
2 s for a >= 5,000-line diff including regions.

    .venv/bin/python benchmarks/diff_speed.py [--repeat 3] [--source DIR] [--keep]
"""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dlci.diff import FileChange, GitRepo, Hunk  # noqa: E402
from dlci.diff.regions import _regions_cached, touched  # noqa: E402

BUDGET_S = 2.0
TVM_FRONTEND = Path(__file__).resolve().parent.parent / ".venv/lib/python3.11/site-packages/tvm/relax/frontend"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
ENV.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b",
           GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b", LC_ALL="C")


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True).stdout


# -- building the repository -----------------------------------------------------------------------------------

def cpp_file(n: int, funcs: int = 40) -> str:
    parts = [f"// synthetic converter file {n}\n#include <map>\n#include <string>\n\n"
             f"namespace ov {{\nnamespace op{n} {{\n"]
    for i in range(funcs):
        parts.append(f"""
OutputVector translate_op{n}_{i}(const NodeContext& context) {{
    auto x = context.get_input(0);  // {{ comment brace
    const char* s = "}} in a string";
    auto f = [&](int k) {{ return k + {i}; }};
    if (context.has_attribute("alpha")) {{
        x = make(x, f({i}));
    }}
    return {{context.mark_node(x)}};
}}
""")
    parts.append(f"\nclass Registry{n} {{\n public:\n")
    for i in range(10):
        parts.append(f"  int method_{i}(int a) const {{\n    return a * {i};\n  }}\n")
    parts.append("};\n")
    parts.append(f"}}  // namespace op{n}\n}}  // namespace ov\n")
    for i in range(10):
        parts.append(f"ONNX_CPU_OPERATOR_KERNEL(\n    Op{n}x{i},\n    {i},\n    KernelDefBuilder(),\n    Op<float>);\n")
    return "".join(parts)


def yaml_file(entries: int = 300) -> str:
    return "".join(f"- func: op_{i}.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  python_module: nn\n"
                   f"  dispatch:\n    CPU: op_{i}_out\n\n" for i in range(entries))


def synthetic_python(n: int) -> str:
    body = [f"class Importer{n}:\n"]
    for i in range(60):
        body.append(f"    @staticmethod\n    def _op_{i}(node, x={i}):\n        y = node.args[0]\n"
                    f"        z = y * x\n        return z + {i}\n\n")
    return "".join(body)


def build_base(repo: Path, source: Path | None, cpp_files: int) -> None:
    if source is not None and source.is_dir():
        for p in sorted(source.rglob("*.py")):
            dst = repo / "python/tvm/relax/frontend" / p.relative_to(source)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst)
    else:   # no TVM installed: a synthetic stand-in of similar size
        for n in range(30):
            dst = repo / f"python/frontend/importer_{n}.py"
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(synthetic_python(n) * 3)
    for n in range(cpp_files):
        dst = repo / f"src/frontends/op_{n}.cpp"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(cpp_file(n))
    (repo / "aten/native_functions.yaml").parent.mkdir(parents=True, exist_ok=True)
    (repo / "aten/native_functions.yaml").write_text(yaml_file())
    (repo / "assets/weights.bin").parent.mkdir(parents=True, exist_ok=True)
    (repo / "assets/weights.bin").write_bytes(bytes(range(256)) * 64)


def edit_python(text: str, rng: random.Random, every: int) -> str:
    """Edits that keep the file valid Python: comments appended to code lines, comment lines inserted, and one
    top-level function or method removed (so some regions exist only at base)."""
    lines = text.split("\n")
    try:
        tree = ast.parse(text)
        victims = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and not n.decorator_list and 5 < (n.end_lineno - n.lineno) < 60]
    except SyntaxError:
        victims = []
    drop: set[int] = set()
    if victims:
        v = rng.choice(victims)
        drop = set(range(v.lineno - 1, v.end_lineno))
    out = []
    for i, line in enumerate(lines):
        if i in drop:
            if i == min(drop):   # the block may have held nothing else
                out.append(line[:len(line) - len(line.lstrip())] + "pass")
            continue
        code = line.strip()
        if code and not line.rstrip().endswith("\\") and rng.randrange(every) == 0:
            indent = line[:len(line) - len(line.lstrip())]
            if rng.random() < 0.5:
                line = line + "  # dlci-bench edit"
            else:
                out.append(f"{indent}# dlci-bench insert")
        out.append(line)
    edited = "\n".join(out)
    if victims:
        ast.parse(edited)   # the benchmark measures the ast path, not the syntax-error fallback
    return edited


def edit_cpp(text: str, rng: random.Random) -> str:
    out = []
    for line in text.split("\n"):
        if "x = make(" in line and rng.random() < 0.6:
            line = line.replace("x = make(", "x = make_v2(")
        if "return a *" in line and rng.random() < 0.5:
            line = line.replace("return a *", "return a +")
        out.append(line)
    text = "\n".join(out)
    start = text.find("\nOutputVector translate_op")   # delete one whole function
    end = text.find("\n}\n", start) + 3
    return text[:start + 1] + text[end:]


def build_head(repo: Path, rng: random.Random) -> None:
    py = sorted((repo / "python").rglob("*.py"))
    cpp = sorted((repo / "src").rglob("*.cpp"))
    renamed_pure, renamed_edit, deleted = py[0], py[1:3], py[3:5]
    for p in py[5:]:
        p.write_text(edit_python(p.read_text(), rng, every=7))
    for p in renamed_edit:
        p.write_text(edit_python(p.read_text(), rng, every=60))
        git(repo, "mv", str(p.relative_to(repo)), str(p.with_name("renamed_" + p.name).relative_to(repo)))
    git(repo, "mv", str(renamed_pure.relative_to(repo)),
        str(renamed_pure.with_name("moved_" + renamed_pure.name).relative_to(repo)))
    for p in deleted:
        git(repo, "rm", "-q", str(p.relative_to(repo)))
    for p in cpp:
        p.write_text(edit_cpp(p.read_text(), rng))
    (repo / "src/frontends/op_new.cpp").write_text(cpp_file(99, funcs=10))
    y = repo / "aten/native_functions.yaml"
    y.write_text(y.read_text().replace("python_module: nn\n  dispatch:\n    CPU: op_1", "python_module: nn\n  "
                                       "tags: pointwise\n  dispatch:\n    CPU: op_1"))
    (repo / "assets/weights.bin").write_bytes(bytes(range(255, -1, -1)) * 64)


def make_repo(root: Path, source: Path | None, cpp_files: int) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    build_base(repo, source, cpp_files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    build_head(repo, random.Random(0))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "head")
    return repo


# -- the two pipelines -----------------------------------------------------------------------------------------

def dlci_side(repo: Path) -> dict:
    _regions_cached.cache_clear()
    t0 = time.perf_counter()
    with GitRepo(repo, "base", "HEAD") as g:
        d = g.diff()
        t_diff = time.perf_counter() - t0
        n_touched = 0
        for ch in d.files:
            if ch.binary:
                continue
            head = g.text(ch.path) if ch.status != "deleted" else None
            base = g.text(ch.old_path, "base") if ch.old_path else None
            n_touched += len(touched(ch, head, base))
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "diff_seconds": t_diff, "files": len(d.files),
            "added": sum(len(f.added) for f in d.files), "removed": sum(len(f.removed) for f in d.files),
            "binary": sum(f.binary for f in d.files), "touched_regions": n_touched}


def naive_side(repo: Path) -> dict:
    """What one writes first: list the files, fetch both sides of each with `git show`, difflib them."""
    _regions_cached.cache_clear()
    t0 = time.perf_counter()
    listing = git(repo, "diff", "--name-status", "-z", "-M", "base", "HEAD").split(b"\0")
    entries, i = [], 0
    while i < len(listing) and listing[i]:
        st = listing[i].decode()
        if st[0] in "RC":
            entries.append((st[0], listing[i + 1].decode(), listing[i + 2].decode()))
            i += 3
        else:
            entries.append((st[0], listing[i + 1].decode(), listing[i + 1].decode()))
            i += 2

    def show(rev: str, path: str) -> str | None:
        r = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=repo, env=ENV, capture_output=True)
        if r.returncode or b"\0" in r.stdout[:8000]:
            return None
        return r.stdout.decode("utf-8", "replace")

    added = removed = n_touched = 0
    for st, old, new in entries:
        base = show("base", old) if st != "A" else None
        head = show("HEAD", new) if st != "D" else None
        a = base.split("\n") if base is not None else []
        b = head.split("\n") if head is not None else []
        ch = FileChange(new, None if st == "A" else old, {"A": "added", "D": "deleted", "R": "renamed"}.get(st,
                        "modified"))
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag != "equal":
                ch.hunks.append(Hunk(i1 if i2 == i1 else i1 + 1, i2 - i1, j1 if j2 == j1 else j1 + 1, j2 - j1))
                ch.removed.extend(range(i1 + 1, i2 + 1))
                ch.added.extend(range(j1 + 1, j2 + 1))
        added += len(ch.added)
        removed += len(ch.removed)
        n_touched += len(touched(ch, head, base))
    return {"seconds": time.perf_counter() - t0, "files": len(entries), "added": added, "removed": removed,
            "touched_regions": n_touched}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side (the best is reported)")
    ap.add_argument("--source", type=Path, default=TVM_FRONTEND, help="a directory of Python files to diff")
    ap.add_argument("--cpp-files", type=int, default=12)
    ap.add_argument("--keep", action="store_true", help="keep the generated repository and print its path")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dlci-diff-bench-"))
    try:
        t0 = time.perf_counter()
        repo = make_repo(root, args.source if args.source.is_dir() else None, args.cpp_files)
        build_s = time.perf_counter() - t0
        fast = [dlci_side(repo) for _ in range(args.repeat)]
        naive = [naive_side(repo) for _ in range(args.repeat)]
        best, nbest = min(fast, key=lambda r: r["seconds"]), min(naive, key=lambda r: r["seconds"])
        report = {
            "benchmark": "diff_speed",
            "source": str(args.source) if args.source.is_dir() else "synthetic",
            "files": best["files"], "changed_lines": best["added"] + best["removed"],
            "added": best["added"], "removed": best["removed"], "binary_files": best["binary"],
            "touched_regions": best["touched_regions"],
            "seconds": round(best["seconds"], 3), "diff_only_seconds": round(best["diff_seconds"], 3),
            "seconds_runs": [round(r["seconds"], 3) for r in fast],
            "budget_s": BUDGET_S, "within_budget": best["seconds"] <= BUDGET_S,
            "baseline": {"method": "per-file git show x2 + difflib, then touched()",
                         "seconds": round(nbest["seconds"], 3),
                         "seconds_median": round(statistics.median(r["seconds"] for r in naive), 3),
                         "files": nbest["files"], "changed_lines": nbest["added"] + nbest["removed"],
                         "touched_regions": nbest["touched_regions"]},
            "speedup": round(nbest["seconds"] / best["seconds"], 1),
            "build_repo_seconds": round(build_s, 1),
        }
        if args.keep:
            report["repo"] = str(repo)
        print(json.dumps(report))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
