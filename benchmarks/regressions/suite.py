"""A case repository's own frontend test suite, as it stood before the fix (`real_regressions.py`).

The independent check scans each repository *with its own test suite*, minus the fix's test; the case repositories
`build.py` makes hold the installed release's sources only, so the scan's seeds from the repository's tests
(dlci.scan.repo_tests) never had anything to read here. `add(case, repo)` commits the upstream frontend test files at
the fix commit's parent (where the fix's own test does not exist yet) on the base revision, under the PR's change:
both revisions hold the same suite and the PR's diff is unchanged. The files are read from the upstream cache at run
time, with the API renames `extract_tests.py` applies to the cases' own tests (and onnxscript's old `onnxscript/tests/`
layout moved to `tests/`, where the layout of later fixes has it); `materialise.yaml` keeps per case the commit and
the sha256 of what that gives (`suite`), never the text. `--record` writes those; a mismatch is a `BuildError`.

    .venv/bin/python benchmarks/regressions/suite.py --record [CASE ...]   # the cases' suite digests
"""
from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import materialise  # noqa: E402
from build import BuildError, load_cases, package_of  # noqa: E402
from extract_tests import REGEX_RENAMES, RENAMES  # noqa: E402
from screen import PROJECTS, test_path  # noqa: E402

# what the repository's tests of its frontends are (fnmatch over the paths at the fix's parent, after path renames)
FILES = {
    "tvm": ("tests/python/conftest.py", "tests/python/relax/conftest.py", "tests/python/relax/test_frontend_*.py"),
    "onnxscript": ("tests/__init__.py", "tests/common/*.py", "tests/function_libs/__init__.py",
                   "tests/function_libs/torch_lib/*.py"),
}


def _renamed(package: str, path: str) -> str:
    """a test path where later fixes have it (onnxscript's tests were onnxscript/tests/ until 2024-04)"""
    return test_path(PROJECTS[package], path)


def _text(package: str, text: str) -> str:
    if package == "tvm":
        for old, new in RENAMES:
            text = text.replace(old, new)
        for pattern, repl, _ in REGEX_RENAMES:
            text = re.sub(pattern, repl, text)
    for old, new in PROJECTS[package].get("test_renames", {}).items():
        # the old location imported as a package (onnxscript.tests): imported from the new one
        text = re.sub(r"\b" + re.escape(old.strip("/").replace("/", ".")) + r"\b", new.strip("/").replace("/", "."),
                      text)
    return text


def files(case: dict) -> tuple[str, dict[str, str]]:
    """(the fix's parent, {repository path: text}) of the case's frontend test suite"""
    package = package_of(case)
    rev = materialise.rev_parse(case["repo"], f"{case['commit']}^")
    listing = subprocess.run(["git", "--git-dir", str(materialise.git_dir(case["repo"])), "ls-tree", "-r",
                              "--name-only", rev], capture_output=True, text=True, check=True).stdout.split()
    out = {}
    for path in listing:
        target = _renamed(package, path)
        if any(fnmatch.fnmatchcase(target, g) for g in FILES[package]) and target not in out:
            out[target] = _text(package, materialise.show(case["repo"], rev, path))
    return rev, out


def digest(found: dict[str, str]) -> str:
    return materialise.sha256("".join(f"{p}\0{materialise.sha256(t)}\n" for p, t in sorted(found.items())))


def _git(repo: Path, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if p.returncode:
        raise BuildError(f"git {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout.strip()


def add(case: dict, repo: Path, entry: dict | None = None) -> tuple[str, str, dict]:
    """Commits the case's suite on `main` and rebases `pr/<case>` onto it; returns (base sha, head sha, what was
    added: commit, files, sha256). entry: the case's materialise.yaml entry (default: read the file); its `suite`
    digest must match."""
    entry = entry if entry is not None else materialise.load()["cases"].get(case["id"]) or {}
    rev, found = files(case)
    got = digest(found)
    want = (entry.get("suite") or {}).get("sha256")
    if want is None:
        raise BuildError(f"{case['id']}: no suite digest in materialise.yaml (suite.py --record {case['id']})")
    if got != want:
        raise BuildError(f"{case['id']}: the suite at {rev[:12]} hashes to {got[:12]}, materialise.yaml records "
                         f"{want[:12]}")
    branch = f"pr/{case['id']}"
    _git(repo, "checkout", "-q", "main")
    for path, text in found.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode())
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"the repository's frontend tests (upstream {rev[:12]})")
    _git(repo, "rebase", "-q", "main", branch)
    base, head = _git(repo, "rev-parse", "main"), _git(repo, "rev-parse", branch)
    return base, head, {"commit": rev, "files": len(found), "sha256": got}


def record(ids: list[str] | None) -> None:
    doc = materialise.load()
    for case in load_cases()["cases"]:
        if ids and case["id"] not in ids:
            continue
        rev, found = files(case)
        doc["cases"].setdefault(case["id"], {})["suite"] = {"commit": rev, "files": len(found), "sha256": digest(found)}
        print(f"{case['id']}: {len(found)} files at {rev[:12]}")
    materialise.save(doc)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--record", nargs="*", metavar="CASE", help="record the suite digests (all cases if none named)")
    ap.add_argument("--upstream", default=None)
    a = ap.parse_args()
    materialise.set_root(a.upstream)
    if a.record is None:
        ap.error("nothing to do: --record [CASE ...]")
    record(a.record or None)
