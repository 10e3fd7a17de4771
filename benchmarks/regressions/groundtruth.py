"""Ground truth of a case: the fix's own upstream test must fail on head (the fix reverted) and pass on base.

    python benchmarks/regressions/groundtruth.py [--upstream DIR] [CASE ...] [--refresh]

Each revision of the case's repository (build.py) is exported to a directory and the case's upstream test files
(<case>__<module>.py, extracted from the upstream cache and checked against materialise.yaml, see store.py) run under
pytest with that checkout's python/ first on PYTHONPATH over the installed native library (TVM_LIBRARY_PATH), as dlci
runs a TVM checkout; a conftest asserts that `tvm` is imported from the checkout. On head pytest stops at the first
failure (-x). Results are cached under $DLCI_CACHE_DIR (or ~/.cache/dlci) keyed by the case's materialised sources
(their recorded sha256 and tree ids; a screen candidate's diff), the test files (names and sha256), this file,
upstream/_torch_numeric.py and the installed versions. Without the upstream cache it exits saying how to get it
(materialise.py fetch).
"""
from __future__ import annotations

import hashlib
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import HERE, LAYOUT, BuildError, build, installed_tvm, installed_version, package_of  # noqa: E402
import materialise  # noqa: E402
import store  # noqa: E402

VERSION = 1
UPSTREAM = HERE / "upstream"
CONFTEST = """\
import importlib
import os
mod = importlib.import_module(os.environ["DLCI_GT_PACKAGE"])
assert os.path.realpath(mod.__file__).startswith(os.path.realpath(os.environ["DLCI_GT_CHECKOUT"])), mod.__file__
"""


def cache_dir() -> Path:
    root = Path(os.environ.get("DLCI_CACHE_DIR") or Path.home() / ".cache" / "dlci")
    d = root / "bench-regressions"
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_files(case: dict) -> list[tuple[str, bytes]]:
    """[(name, content)] of the case's upstream test files in name order: extracted by store.py (checked against
    materialise.yaml), or, where UPSTREAM is set to a folder of loose files (screen.py's candidates), its
    <case>__*.py"""
    if UPSTREAM == store.UPSTREAM:
        return store.files(case["id"])
    stem = case["id"].replace("-", "_")
    return [(f.name, f.read_bytes()) for f in sorted(UPSTREAM.glob(f"{stem}__*.py"))]


def test_digests(case: dict) -> list[tuple[str, str]]:
    """[(name, sha256)] of the case's test files: as recorded (store.files checks them whenever they are used), or of
    the loose files"""
    if UPSTREAM == store.UPSTREAM:
        return list(store.recorded(case["id"]).items())
    return [(name, store.sha256(data)) for name, data in test_files(case)]


def cache_key(case: dict) -> str:
    h = hashlib.sha256(f"v{VERSION}".encode())
    if case.get("patch"):   # a screen.py candidate
        h.update(Path(case["patch"]).read_bytes())
        if case.get("base_patch"):   # a transplant's base
            h.update(b"base:" + Path(case["base_patch"]).read_bytes())
    else:
        entry = materialise.load()["cases"].get(case["id"]) or {}
        key = {"tree": entry.get("tree"), "sources": [[f["path"], f["installed"], f["result"]]
                                                      for f in entry.get("sources", [])]}
        if entry.get("base_sources"):   # a transplant (old keys unchanged for the other cases)
            key["base_sources"] = [[f["path"], f["installed"], f["result"]] for f in entry["base_sources"]]
        h.update(json.dumps(key, sort_keys=True).encode())
    for name, digest in test_digests(case):
        h.update(f"{name}={digest}".encode())
    for f in (store.UPSTREAM / "_torch_numeric.py", Path(__file__)):
        h.update(f.name.encode() + f.read_bytes())
    for dist in ("apache-tvm", "onnxscript", "onnx-ir", "torch", "onnx", "onnxruntime", "numpy"):
        h.update(f"{dist}={installed_version(dist)}".encode())
    return h.hexdigest()[:20]


def _export(repo: Path, rev: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    # a TVM checkout has include/ at its root (tvm.libinfo looks there when compiling host code): the installed one
    if not (dest / "python" / "tvm").is_dir():
        return
    inc = installed_tvm() / "include"
    if inc.is_dir() and not (dest / "include").exists():
        (dest / "include").symlink_to(inc)


def checkout_env(package: str, checkout: Path, *more: Path) -> dict:
    """The environment that imports ``package`` from a checkout's sources (TVM's with the installed native library)
    before the installed one; ``more``: folders after it on the path."""
    src_root = checkout / Path(LAYOUT[package][0]).parent   # python/ for TVM, the root for onnxscript
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src_root), *map(str, more)]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    if package == "tvm":
        env["TVM_LIBRARY_PATH"] = str(installed_tvm() / "lib")
    return env


def run_tests(case: dict, checkout: Path, stop_first: bool, timeout: float = 1200) -> dict:
    files = test_files(case)
    tdir = Path(tempfile.mkdtemp(prefix="gt-tests-"))
    try:
        for name, data in files:
            (tdir / name).write_bytes(data)
        shutil.copy(store.UPSTREAM / "_torch_numeric.py", tdir / "_torch_numeric.py")
        (tdir / "conftest.py").write_text(CONFTEST)
        package = package_of(case)
        env = {**checkout_env(package, checkout, tdir), "DLCI_GT_CHECKOUT": str(checkout), "DLCI_GT_PACKAGE": package}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir",
               str(tdir), "-W", "ignore", *(["-x"] if stop_first else []), *[name for name, _ in files]]
        t0 = time.time()
        try:
            proc = subprocess.run(cmd, cwd=tdir, env=env, capture_output=True, text=True, timeout=timeout)
            rc, out = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            rc, out = -9, f"timeout after {timeout} s\n{(e.stdout or b'')[-2000:]!r}"
        lines = [l for l in out.splitlines() if l.strip()]
        tally = [l for l in lines if re.search(r"\b(passed|failed|error|errors|no tests ran)\b in [0-9.]+s", l)]
        summary = (tally or lines or [""])[-1].strip("= ")
        failed = [l.split(" ", 1)[1].split(" - ")[0] for l in out.splitlines() if l.startswith("FAILED ")]
        errors = [l for l in out.splitlines() if l.startswith("E  ")][:3]
        return {"rc": rc, "summary": summary, "failed": failed[:10], "first_error": errors,
                "seconds": round(time.time() - t0, 1),
                "status": {0: "passed", 1: "failed"}.get(rc, "error")}
    finally:
        shutil.rmtree(tdir, ignore_errors=True)


def imports_both(case: dict, repo: Path, base: str, head: str, refresh: bool = False) -> dict:
    """A refactor's ground truth: both revisions import every module the change touches (a reverse diff can restore
    a call the installed release no longer takes, which no name check sees); cached by the two trees."""
    trees = [subprocess.run(["git", "-C", str(repo), "rev-parse", f"{rev}^{{tree}}"], capture_output=True, text=True,
                            check=True).stdout.strip() for rev in (base, head)]
    path = cache_dir() / f"{case['id']}-imports-{trees[0][:12]}-{trees[1][:12]}.json"
    if path.exists() and not refresh:
        return {**json.loads(path.read_text()), "cached": True}
    package = package_of(case)
    changed = subprocess.run(["git", "-C", str(repo), "diff", "--name-only", base, head], capture_output=True,
                             text=True, check=True).stdout.split()
    root = Path(LAYOUT[package][0]).parent   # python/ for TVM, the root for onnxscript
    modules = sorted(".".join(Path(f).relative_to(root).with_suffix("").parts) for f in changed
                     if f.endswith(".py") and Path(f).is_relative_to(root))
    out: dict = {"valid": True, "reason": f"refactor: both revisions import {', '.join(modules) or 'no module'}",
                 "modules": modules}
    work = Path(tempfile.mkdtemp(prefix="gt-imports-"))
    try:
        for name, rev in (("base", base), ("head", head)):
            co = work / name
            _export(repo, rev, co)
            env = checkout_env(package, co)
            code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"
            proc = subprocess.run([sys.executable, "-c", code, *modules], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=600)
            out[name] = {"status": "passed" if proc.returncode == 0 else "failed",
                         "first_error": [l for l in proc.stderr.splitlines() if l.strip()][-1:]}
            if proc.returncode != 0 and out["valid"]:
                out.update(valid=False, reason=f"refactor: the {name} revision does not import the touched modules "
                                               f"({out[name]['first_error'][0][:200] if out[name]['first_error'] else proc.returncode})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    path.write_text(json.dumps(out, indent=1))
    return {**out, "cached": False}


def check(case: dict, repo: Path, base: str, head: str, refresh: bool = False) -> dict:
    """{'valid': bool, 'reason': str, 'head': {...}, 'base': {...}} (cached)."""
    if case["kind"] != "regression":
        return imports_both(case, repo, base, head, refresh)
    if not test_digests(case):
        return {"valid": False, "reason": "no upstream test for this fix", "cached": False}
    test_files(case)   # extracted and checked against their recorded sha256 (StoreError), cached result or not
    key = cache_key(case)
    path = cache_dir() / f"{case['id']}-{key}.json"
    if path.exists() and not refresh:
        return {**json.loads(path.read_text()), "cached": True}
    work = Path(tempfile.mkdtemp(prefix="gt-"))
    try:
        res = {}
        for name, rev in (("head", head), ("base", base)):
            co = work / name
            _export(repo, rev, co)
            res[name] = run_tests(case, co, stop_first=name == "head")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if res["head"]["status"] != "failed":
        reason = f"upstream test does not fail on head ({res['head']['status']}: {res['head']['summary']})"
    elif res["base"]["status"] != "passed":
        reason = f"upstream test does not pass on base ({res['base']['status']}: {res['base']['summary']})"
    else:
        reason = "upstream test fails on head and passes on base"
    out = {"valid": reason.startswith("upstream test fails on head"), "reason": reason, "key": key, **res}
    path.write_text(json.dumps(out, indent=1))
    return {**out, "cached": False}


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--upstream", help="the upstream cache folder (materialise.py)")
    ap.add_argument("--refresh", action="store_true", help="run the tests again, whatever is cached")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args()
    for case in materialise.cases_for(args.cases, args.upstream):
        with tempfile.TemporaryDirectory(prefix="gt-repo-") as tmp:
            try:
                repo, base, head = build(case, Path(tmp) / "repo")
                res = check(case, repo, base, head, refresh=args.refresh)
            except materialise.UpstreamMissing as e:
                raise SystemExit(str(e))
            except (BuildError, store.StoreError) as e:
                res = {"valid": False, "reason": f"not materialised: {e}"}
        print(json.dumps({"case": case["id"], "valid": res["valid"], "reason": res["reason"],
                          **{k: {x: res[k][x] for x in ("status", "summary", "seconds", "failed")}
                             for k in ("head", "base") if k in res}}), flush=True)


if __name__ == "__main__":
    main()
