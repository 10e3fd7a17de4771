"""Build a case of cases.yaml as a git repository shaped like an upstream checkout (as dlci's bundled samples are).

    python benchmarks/regressions/build.py CASE DEST        # prints: DEST BASE_SHA HEAD_SHA

base = the installed package's Python sources laid out as upstream does (apache-tvm: python/tvm/** plus a .dlci.yml
that runs the checkout's python/ over the installed native library; onnxscript: onnxscript/** at the root); head = base with the case's patch applied (a regression: the upstream fix
reverted). For a refactor the patch reverts the refactor: base = sources + patch, head = the sources as installed, so
the pull request applies the real refactor. A patch that does not apply cleanly to the installed release raises
BuildError (the case is then reported as skipped with that reason).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

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
    src = installed_package(package)
    pattern = "*.py" if package == "tvm" else "*"   # TVM: the Python sources only (the native library is shared)
    for path in src.rglob(pattern):
        rel = path.relative_to(src)
        if "__pycache__" in rel.parts or not path.is_file():
            continue
        target = dest / LAYOUT[package][0] / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def build(case: dict, dest: Path) -> tuple[Path, str, str]:
    """Returns (repo, base sha, head sha)."""
    package = package_of(case)
    want = load_cases()["releases"][package]
    have = installed_version(want["package"])
    if have != want["version"]:
        raise BuildError(f"patches are written against {want['package']} {want['version']}, installed: {have}")
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    _copy_sources(dest, package)
    (dest / ".dlci.yml").write_text(LAYOUT[package][1])
    (dest / "README.md").write_text(f"{package} Python sources ({want['package']} {want['version']}) for dlci's benchmark "
                                    f"case {case['id']} ({case['url']}).\n")
    _git(dest, "init", "-q", "-b", "main")
    patch = (HERE / case["patch"]).read_text()
    refactor = case["kind"] == "refactor"
    if refactor:   # the state before the refactor
        _git(dest, "apply", "--check", "-", input=patch)
        _git(dest, "apply", "-", input=patch)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "base")
    base = _git(dest, "rev-parse", "HEAD")
    _git(dest, "checkout", "-q", "-b", f"pr/{case['id']}")
    args = ["apply", "-R"] if refactor else ["apply"]
    _git(dest, *args, "--check", "-", input=patch)
    _git(dest, *args, "-", input=patch)
    verb = "Apply" if refactor else "Revert"
    _git(dest, "commit", "-q", "-am", f"{verb} {case['title']}\n\n{case['url']}")
    head = _git(dest, "rev-parse", "HEAD")
    return dest, base, head


def main():
    cases = {c["id"]: c for c in load_cases()["cases"]}
    if len(sys.argv) != 3 or sys.argv[1] not in cases:
        raise SystemExit(f"usage: build.py CASE DEST; cases: {', '.join(cases)}")
    repo, base, head = build(cases[sys.argv[1]], Path(sys.argv[2]))
    print(repo, base, head)


if __name__ == "__main__":
    main()
