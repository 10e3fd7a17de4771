"""Build a case of cases.yaml as a git repository shaped like an upstream checkout (as dlci's bundled samples are).

    python benchmarks/regressions/build.py [--upstream DIR] CASE DEST      # prints: DEST BASE_SHA HEAD_SHA

The installed package's Python sources laid out as upstream does (apache-tvm: python/tvm/** plus a .dlci.yml that runs
the checkout's python/ over the installed native library; onnxscript: onnxscript/** at the root), with the case's
files materialised from materialise.yaml (the installed file's lines, upstream lines read from the upstream cache at
pinned commits, a few literal lines; see materialise.py): a regression's head is the sources with those files (the
upstream fix reverted), base the sources as installed; a refactor's base is the sources with those files (the refactor
reverted), head the sources as installed, so the pull request applies the real refactor. A transplanted regression
(screen.py's transplant, where the revert does not apply to the release) has both sides edited: its base the touched
files at the fix commit (materialise.yaml's base_sources), its head the same files at the fix's parent. Every materialised file is
checked against its recorded sha256 and the base and head trees against their recorded git tree ids; anything else
raises BuildError (the case is then reported as skipped with that reason). Without the upstream cache the entry points
exit saying how to get it (materialise.py fetch).

screen.py's candidates are not in materialise.yaml yet: theirs is a unified diff outside the tree (`patch`, a path),
applied with git apply as the case's edit.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import yaml  # noqa: E402

import materialise  # noqa: E402

HERE = Path(__file__).resolve().parent
# per package: where its sources sit in an upstream checkout, and the .dlci.yml that runs them
LAYOUT = {
    "tvm": ("python/tvm", """\
# the checkout's Python sources (python/) over the installed wheel's native library
python_path: [python]
env:
  TVM_LIBRARY_PATH: "{site_packages}/tvm/lib"
"""),
    "onnxscript": ("onnxscript", """\
# the checkout's onnxscript package (pure Python) first on the path
python_path: ["."]
"""),
}


class BuildError(Exception):
    pass


def load_cases(path: Path = HERE / "cases.yaml") -> dict:
    return yaml.safe_load(path.read_text())


def installed_package(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(f"{name} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def installed_tvm() -> Path:
    return installed_package("tvm")


def package_of(case: dict) -> str:
    return case.get("package", "tvm")


def installed_version(dist: str) -> str | None:
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(repo: Path, *args: str, input: str | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "dlci benchmark",
           "GIT_AUTHOR_EMAIL": "bench@dlci.invalid", "GIT_COMMITTER_NAME": "dlci benchmark",
           "GIT_COMMITTER_EMAIL": "bench@dlci.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, input=input)
    if proc.returncode != 0:
        raise BuildError(f"git {' '.join(args[:2])}: {proc.stderr.strip()[:500]}")
    return proc.stdout.strip()


def _copy_sources(dest: Path, package: str) -> None:
    for rel, path in installed_files(package).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def source_path(package: str, path: str) -> Path:
    """the installed file of a repository path (python/tvm/x.py -> <site-packages>/tvm/x.py)"""
    prefix = LAYOUT[package][0] + "/"
    if not path.startswith(prefix):
        raise BuildError(f"{path} is not under {prefix}")
    return installed_package(package) / path[len(prefix):]


def materialised_files(case: dict, entry: dict | None = None, side: str = "sources") -> dict[str, str | None]:
    """{repository path: text (None: absent)} of the case's edited files, each checked against materialise.yaml's
    sha256: side "sources", the head of a regression or the base of a refactor; "base_sources", the base of a
    transplanted regression (the touched files at the fix commit; screen.py's transplant)"""
    entry = entry if entry is not None else materialise.load()["cases"].get(case["id"])
    if side == "base_sources" and entry and not entry.get(side):
        return {}
    if not entry or not entry.get(side):
        raise BuildError(f"{case['id']}: no {side} in materialise.yaml")
    package = package_of(case)
    out = {}
    for f in entry[side]:
        src = source_path(package, f["path"])
        installed = src.read_bytes().decode() if src.is_file() else None
        try:
            out[f["path"]] = materialise.materialise_file(f, installed, case["repo"])
        except materialise.UpstreamMissing:
            raise
        except materialise.MaterialiseError as e:
            raise BuildError(f"{case['id']}: {e}") from None
    return out


def _write(dest: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        target = dest / path
        if text is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text.encode())


def fix_branch(repo: Path, case_id: str) -> str:
    """A branch ``fix/<case>`` on top of ``pr/<case>`` whose tree is main's: the upstream fix itself as a pull request
    onto the reverted code (a PR's diff is taken from the merge base, so head ``main`` over base ``pr/<case>``, an
    ancestor of it, would be an empty change). Returns the branch name."""
    name = f"fix/{case_id}"
    sha = _git(repo, "commit-tree", "main^{tree}", "-p", f"pr/{case_id}", "-m", f"the upstream fix ({case_id})")
    _git(repo, "branch", "-f", name, sha)
    return name


def build(case: dict, dest: Path, entry: dict | None = None, check_trees: bool = True) -> tuple[Path, str, str]:
    """Returns (repo, base sha, head sha). entry: the case's materialise.yaml entry (default: read the file)."""
    package = package_of(case)
    want = load_cases()["releases"][package]
    have = installed_version(want["package"])
    if have != want["version"]:
        raise BuildError(f"the edits are recorded against {want['package']} {want['version']}, installed: {have}")
    if not case.get("patch"):
        entry = entry if entry is not None else materialise.load()["cases"].get(case["id"])
        files = materialised_files(case, entry)   # before touching dest: a missing cache leaves nothing behind
        base_files = materialised_files(case, entry, "base_sources")
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _copy_sources(dest, package)
    (dest / ".dlci.yml").write_text(LAYOUT[package][1])
    (dest / "README.md").write_text(f"{package} Python sources ({want['package']} {want['version']}) for dlci's benchmark "
                                    f"case {case['id']} ({case['url']}).\n")
    _git(dest, "init", "-q", "-b", "main")
    refactor = case["kind"] == "refactor"
    if case.get("patch"):   # a screen.py candidate: its diff, outside the tree
        patch = Path(case["patch"]).read_text()
        if refactor:   # the state before the refactor
            _git(dest, "apply", "--check", "-", input=patch)
            _git(dest, "apply", "-", input=patch)
        elif case.get("base_patch"):   # a transplant: the touched files at the fix commit
            _git(dest, "apply", "-", input=Path(case["base_patch"]).read_text())
    elif refactor:
        _write(dest, files)
    else:
        _write(dest, base_files)   # a transplant's base ({} for a revert: the installed files are its base)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "base")
    base = _git(dest, "rev-parse", "HEAD")
    _git(dest, "checkout", "-q", "-b", f"pr/{case['id']}")
    if case.get("patch"):
        args = ["apply", "-R"] if refactor else ["apply"]
        _git(dest, *args, "--check", "-", input=patch)
        _git(dest, *args, "-", input=patch)
    elif refactor:   # back to the installed files
        for path in files:
            src = source_path(package, path)
            if src.is_file():
                shutil.copyfile(src, dest / path)
            else:
                (dest / path).unlink(missing_ok=True)
    else:
        _write(dest, files)
    _git(dest, "add", "-A")
    verb = "Apply" if refactor else "Revert"
    _git(dest, "commit", "-q", "-m", f"{verb} {case['title']}\n\n{case['url']}")
    head = _git(dest, "rev-parse", "HEAD")
    trees = (entry or {}).get("tree") if not case.get("patch") else None
    if check_trees and trees:
        got = {"base": _git(dest, "rev-parse", f"{base}^{{tree}}"), "head": _git(dest, "rev-parse", f"{head}^{{tree}}")}
        bad = [k for k in ("base", "head") if got[k] != trees.get(k)]
        if bad:
            raise BuildError(f"{case['id']}: the {' and '.join(bad)} tree is {got[bad[0]][:12]}, materialise.yaml "
                             f"records {str(trees.get(bad[0]))[:12]} (another layout or installed sources)")
    return dest, base, head


def record(case_id: str, repo: Path) -> dict:
    """materialise.yaml's entry for a case from a repository holding it (main = base, pr/<case> = head; only the
    files that differ are recorded, against the installed ones); the entry must rebuild the same trees"""
    import screen
    case = {c["id"]: c for c in load_cases()["cases"]}.get(case_id)
    if case is None:
        raise BuildError(f"{case_id} is not a case of cases.yaml")
    package = package_of(case)
    proj = screen.PROJECTS[package]
    renames = [(pat, repl) for pat, repl, _ in proj["renames"]]
    base, head = "main", f"pr/{case_id}"
    side = base if case["kind"] == "refactor" else head
    changed = _git(repo, "diff", "--name-only", "--no-renames", base, head).split()

    def at(rev, path):
        try:
            return _git_bytes(repo, "show", f"{rev}:{path}").decode()
        except BuildError:
            return None

    def installed(path):
        src = source_path(package, path)
        return src.read_bytes().decode() if src.is_file() else None
    entry = {"sources": [materialise.record_file(case["repo"], case["commit"], path, installed(path), at(side, path),
                                                 renames, proj.get("path_renames")) for path in changed]}
    moved = _differs_from_installed(repo, base, package) if case["kind"] == "regression" else []
    if moved:   # a transplant: its base is the upstream package at the fix commit, its head at the fix's parent
        parent = materialise.rev_parse(case["repo"], f"{case['commit']}^")

        def whole(path, rev):
            target = at(base if rev == case["commit"] else head, path)
            olds = [o + path[len(n):] for o, n in (proj.get("path_renames") or {}).items() if path.startswith(n)]
            return (target is not None and materialise.record_whole(case["repo"], rev, [path, *olds], path,
                                                                    installed(path), target, renames)) or \
                materialise.record_file(case["repo"], case["commit"], path, installed(path), target, renames,
                                        proj.get("path_renames"))
        entry["sources"] = [whole(path, parent) for path in changed]
        entry["base_sources"] = [whole(path, case["commit"]) for path in moved]
    want = {"base": _git(repo, "rev-parse", f"{base}^{{tree}}"), "head": _git(repo, "rev-parse", f"{head}^{{tree}}")}
    import tempfile
    with tempfile.TemporaryDirectory(prefix="record-") as tmp:
        _, b, h = build(case, Path(tmp) / "repo", entry=entry, check_trees=False)
        got = {"base": _git(Path(tmp) / "repo", "rev-parse", f"{b}^{{tree}}"),
               "head": _git(Path(tmp) / "repo", "rev-parse", f"{h}^{{tree}}")}
    if got != want:
        raise BuildError(f"{case_id}: the recorded edits rebuild trees {got}, the repository has {want} (files other "
                         f"than the edited ones differ from the installed release or build.py's layout)")
    entry = {"tree": got, **entry}
    doc = materialise.load()
    tests = (doc["cases"].get(case_id) or {}).get("tests")
    doc["cases"][case_id] = {**entry, **({"tests": tests} if tests else {})}
    materialise.save(doc)
    return entry



def installed_files(package: str) -> dict[str, Path]:
    """{repository path: installed file} of the files _copy_sources lays out"""
    src = installed_package(package)
    pattern = "*.py" if package == "tvm" else "*"   # TVM: the Python sources only (the native library is shared)
    return {str(Path(LAYOUT[package][0]) / path.relative_to(src)): path for path in src.rglob(pattern)
            if path.is_file() and "__pycache__" not in path.relative_to(src).parts}


def _differs_from_installed(repo: Path, rev: str, package: str) -> list[str]:
    """the paths under the package's layout where rev differs from the installed release (added, changed, absent)"""
    import hashlib
    prefix = LAYOUT[package][0] + "/"
    tree = {}
    for line in _git(repo, "ls-tree", "-r", rev, "--", prefix).splitlines():
        meta, path = line.split("\t", 1)
        tree[path] = meta.split()[2]
    have = installed_files(package)
    out = []
    for path in sorted(set(tree) | set(have)):
        if path not in have or path not in tree:
            out.append(path)
            continue
        data = have[path].read_bytes()
        if hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() != tree[path]:
            out.append(path)
    return out

def _git_bytes(repo: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True)
    if proc.returncode != 0:
        raise BuildError(f"git {' '.join(args[:2])}: {proc.stderr.decode(errors='replace').strip()[:300]}")
    return proc.stdout


def main():
    import argparse
    cases = {c["id"]: c for c in load_cases()["cases"]}
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", help="the upstream cache folder (materialise.py)")
    ap.add_argument("case", choices=list(cases), metavar="CASE")
    ap.add_argument("dest", type=Path)
    args = ap.parse_args()
    materialise.set_root(args.upstream)
    try:
        repo, base, head = build(cases[args.case], args.dest)
    except materialise.UpstreamMissing as e:
        raise SystemExit(str(e))
    except BuildError as e:
        raise SystemExit(f"build.py: {e}")
    print(repo, base, head)


if __name__ == "__main__":
    main()
