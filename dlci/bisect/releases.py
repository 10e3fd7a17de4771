"""Released versions of a package from the package index, and cached environments in which to run one of them.

**Listing** (:func:`list_releases`): ``pip index versions`` run by the interpreter under test, so the list holds
exactly the releases pip can install there (wheels for this Python and platform, yanked ones left out), ordered
by PEP 440. The index is the one pip is configured with, or ``index_url``.

**Layered environments** (:class:`ReleaseEnvs`): the environment of release V of a package is the current
environment (the *base*) with only what V needs changed layered on top. pip resolves ``package==V`` against the
base (``pip install --dry-run --report``: installed distributions that satisfy V's requirements are kept), and only
the distributions it would install (V itself and the companions V needs in other versions, e.g. ``numpy<2`` for
OpenVINO 2024.x) go with ``--no-deps`` into ``--target`` folder that is put first on PYTHONPATH. torch,
TensorFlow, onnx and whatever else is unchanged are shared with the base, never copied. A layer is built in a
temporary folder, checked (V imports and reports its version from the layer), then renamed into place: the cache
never holds a half-written environment. Deterministic failures (nothing to install for this Python, unresolvable
requirements, does not import) are cached as ``<name>-<version>.failed.json`` so that a warm run skips them
without asking pip again. Layers live under ``$DLCI_CACHE_DIR/bisect/envs/<key>/`` where key hashes the base
environment (Python version, platform, every installed distribution and version) and the index: a changed base
gets new layers.

``dlci test --against`` runs dlci's own sandboxed workers under an older release the same way: the layer's ``env``
merged over the worker environment (:class:`dlci.bisect.attribution.ReleaseComparison`).
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dlci.bisect.oracle import SKIP, Verdict, inherited, run_command, run_script
from dlci.bisect.search import FIXED, REGRESSION, BisectInputError, SearchResult, bisect
from dlci.errors import InfrastructureError

PIP_TIMEOUT = 1800
MANIFEST = "dlci-env.json"
_UNREACHABLE = re.compile(r"Could not fetch URL|NewConnectionError|Max retries exceeded|Temporary failure in name "
                          r"resolution|Network is unreachable|ConnectTimeout|ReadTimeout")
# pip's words for a failure that a retry would repeat (so it is cached as a skip)
_DETERMINISTIC = re.compile(r"ResolutionImpossible|No matching distribution|conflicting dependencies|"
                            r"requires a different Python|Requires-Python|is not a supported wheel")


class CandidateSkip(Exception):
    """A release that cannot be tested here (does not install or import): skipped with this reason."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cache_root() -> Path:
    from dlci import cache
    return cache.root() / "bisect"


def _pip(python: str, args: list[str], index_url: str | None = None, timeout: float = PIP_TIMEOUT
         ) -> subprocess.CompletedProcess:
    # pip of this interpreter, acting for ``python`` (pip >= 22.3): the base needs no pip of its own
    cmd = [sys.executable, "-m", "pip"]
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        cmd += ["--python", python]
    cmd += args + (["--index-url", index_url] if index_url else [])
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"pip timed out after {timeout:.0f} s: {shlex.join(cmd)}") from None


def _errors(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("ERROR")]
    return " ".join(lines)[-600:] or "\n".join(text.strip().splitlines()[-3:])[-600:]


def list_releases(package: str, index_url: str | None = None, pre: bool = False,
                  python: str | None = None) -> list[str]:
    """Versions of ``package`` installable on ``python``, oldest first. Unknown package: BisectInputError."""
    from packaging.version import InvalidVersion, Version
    proc = _pip(python or sys.executable, ["index", "versions", package] + (["--pre"] if pre else []), index_url,
                timeout=300)
    if proc.returncode != 0:
        if _UNREACHABLE.search(proc.stderr):
            raise InfrastructureError(f"the package index cannot be reached to list {package}: {_errors(proc.stderr)}")
        raise BisectInputError(f"unknown package {package!r}: the index has no installable release of it for this "
                               f"Python ({_errors(proc.stderr)})")
    m = re.search(r"^Available versions:\s*(.+)$", proc.stdout, re.M)
    if not m:
        raise BisectInputError(f"unknown package {package!r}: pip lists no version ({proc.stdout.strip()[:200]})")
    versions = []
    for v in (x.strip() for x in m.group(1).split(",")):
        try:
            versions.append((Version(v), v))
        except InvalidVersion:
            continue
    return [v for _, v in sorted(versions)]


def _base_info(python: str) -> dict:
    code = ("import json, sys, sysconfig, importlib.metadata as m\n"
            "d = {}\n"
            "for x in m.distributions():\n"
            "    n = x.metadata['Name']\n"
            "    if n: d.setdefault(n, x.version)\n"  # the first on sys.path is the one imported
            "print(json.dumps({'python': sys.version.split()[0], 'implementation': sys.implementation.name,\n"
            "  'platform': sysconfig.get_platform(), 'executable': sys.executable, 'dists': d,\n"
            "  'modules': m.packages_distributions()}))\n")
    from dlci.exec import interp
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120, env=interp.env(),
                          cwd=interp.neutral_dir(), stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise BisectInputError(f"cannot run the interpreter {python}: {proc.stderr.strip()[-300:]}")
    info = json.loads(proc.stdout)
    info["dists"] = {canonical(k): v for k, v in info["dists"].items()}
    return info


@dataclass
class ReleaseEnv:
    """Release ``version`` of ``package``: ``env`` (merge over os.environ) runs code under it."""
    package: str
    version: str
    path: Path | None                 # the layer; None: the base already has this version
    delta: list[str]                  # name==version installed into the layer
    env: dict
    cached: bool
    seconds: float = 0.0
    install_command: str = ""

    def describe(self) -> str:
        if self.path is None:
            return "the base environment (installed release)"
        return ("cached layer" if self.cached else "new layer") + f" {self.path} ({', '.join(self.delta)})"


@dataclass
class ReleaseEnvs:
    """Layered environments over the base interpreter ``python`` (default: this one), cached on disk."""
    python: str = sys.executable
    index_url: str | None = None
    root: Path | None = None
    say: Callable[[str], None] = lambda s: None
    installs: int = 0       # layers built in this run
    cached: int = 0         # layers found in the cache
    failed: int = 0         # releases that did not install or import
    install_seconds: float = 0.0
    _info: dict | None = field(default=None, repr=False)

    @property
    def info(self) -> dict:
        if self._info is None:
            self._info = _base_info(self.python)
        return self._info

    @property
    def dir(self) -> Path:
        if self.root is None:
            info = self.info
            # not the interpreter's path: venv/bin/python and venv/bin/python3.11 (a console script's) are one
            # environment, and two venvs with the same distributions resolve every release the same way
            key = json.dumps([info["implementation"], info["python"], info["platform"],
                              sorted(info["dists"].items()), self.index_url], sort_keys=True)
            self.root = cache_root() / "envs" / hashlib.sha256(key.encode()).hexdigest()[:16]
        return self.root

    def _sweep(self) -> None:
        """Temporary folders of builds whose process is gone (killed mid-install) are removed."""
        for tmp in self.dir.glob(".*.tmp-*"):
            pid = tmp.name.rsplit("-", 1)[-1]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(tmp, ignore_errors=True)

    def base_version(self, package: str) -> str | None:
        return self.info["dists"].get(canonical(package))

    def get(self, package: str, version: str) -> ReleaseEnv:
        """The environment of ``package==version``; raises :class:`CandidateSkip` when it cannot be had."""
        name = canonical(package)
        if _same_version(self.base_version(name), version):
            return ReleaseEnv(package, version, None, [], {}, cached=True)
        final = self.dir / f"{name}-{version}"
        failed = self.dir / f"{name}-{version}.failed.json"
        if (final / MANIFEST).is_file():
            self.cached += 1
            return self._load(final, package, version)
        if failed.is_file():
            self.failed += 1
            raise CandidateSkip(json.loads(failed.read_text())["reason"] + " (cached)")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._sweep()
        t0 = time.monotonic()
        tmp = self.dir / f".{name}-{version}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            delta = self._resolve(package, version, failed)
            self.say(f"installing {package}=={version} as a layer ({', '.join(delta)})")
            proc = _pip(self.python, ["install", "--quiet", "--no-deps", "--no-warn-script-location", "--target",
                                      str(tmp)] + delta, self.index_url)
            if proc.returncode != 0:
                self._fail(failed, proc.stderr, f"{package} {version} does not install")
            self._check_import(tmp, name, version, failed)
            manifest = {"package": package, "version": version, "delta": delta, "base": self.python,
                        "index_url": self.index_url, "seconds": round(time.monotonic() - t0, 1),
                        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
            try:
                os.rename(tmp, final)
            except OSError:  # another process built it first: theirs is as good
                if not (final / MANIFEST).is_file():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        seconds = time.monotonic() - t0
        self.installs += 1
        self.install_seconds += seconds
        env = self._load(final, package, version)
        env.cached, env.seconds = False, seconds
        return env

    def _load(self, path: Path, package: str, version: str) -> ReleaseEnv:
        manifest = json.loads((path / MANIFEST).read_text())
        env = {"PYTHONPATH": os.pathsep.join([str(path)] + inherited("PYTHONPATH"))}
        cmd = _pip_line(self.python, ["install", "--no-deps", "--target", str(path)] + manifest["delta"],
                        self.index_url)
        return ReleaseEnv(package, version, path, manifest["delta"], env, cached=True, install_command=cmd)

    def _resolve(self, package: str, version: str, failed: Path) -> list[str]:
        """What pip would install for package==version over the base: the layer's content, as name==version."""
        report = Path(tempfile.mkstemp(prefix="dlci-pip-report-", suffix=".json")[1])
        try:
            proc = _pip(self.python, ["install", "--dry-run", "--quiet", "--report", str(report),
                                      f"{package}=={version}"], self.index_url)
            if proc.returncode != 0:
                self._fail(failed, proc.stderr, f"{package} {version} does not resolve with this environment")
            items = json.loads(report.read_text()).get("install", [])
        finally:
            report.unlink(missing_ok=True)
        return [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items]

    def _check_import(self, layer: Path, name: str, version: str, failed: Path) -> None:
        modules = _top_level_modules(layer, name)
        code = ("import importlib, importlib.metadata as m, sys, os\n"
                f"print(m.version({name!r}))\n"
                f"for mod in {modules!r}:\n"
                "    f = getattr(importlib.import_module(mod), '__file__', None) or ''\n"
                "    print(mod, os.path.realpath(f))\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(layer)] + inherited("PYTHONPATH"))}
        from dlci.exec import interp
        proc = subprocess.run([self.python, "-c", code], capture_output=True, text=True, env=interp.env(env),
                              timeout=600, stdin=subprocess.DEVNULL, cwd=interp.neutral_dir())
        if proc.returncode != 0:
            self._fail(failed, proc.stderr, f"{name} {version} does not import", always=True)
        lines = proc.stdout.splitlines()
        if not lines or not _same_version(lines[0].strip(), version):
            self._fail(failed, proc.stdout, f"{name} {version}: the layer is shadowed, metadata says {lines[:1]}",
                       always=True)
        real = os.path.realpath(layer)
        outside = [ln for ln in lines[1:] if ln.split(" ", 1)[-1] and not ln.split(" ", 1)[-1].startswith(real)]
        if outside:
            self._fail(failed, "\n".join(outside), f"{name} {version}: modules imported from outside the layer",
                       always=True)

    def _fail(self, marker: Path, output: str, what: str, always: bool = False):
        self.failed += 1
        if _UNREACHABLE.search(output):
            raise InfrastructureError(f"{what}: the package index cannot be reached ({_errors(output)})")
        reason = f"{what}: {_errors(output)}"
        if always or _DETERMINISTIC.search(output):
            tmp = marker.with_name(marker.name + f".tmp-{os.getpid()}")
            tmp.write_text(json.dumps({"reason": reason}))
            os.replace(tmp, marker)
        raise CandidateSkip(reason)

    def summary(self) -> str:
        used = self.installs + self.cached
        return f"{used} install{'s' if used != 1 else ''}, {self.cached} cached" + (
            f", {self.failed} failed" if self.failed else "")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _same_version(a: str | None, b: str | None) -> bool:
    from packaging.version import InvalidVersion, Version
    if a is None or b is None:
        return False
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _top_level_modules(layer: Path, name: str) -> list[str]:
    """Import names of distribution ``name`` in the layer (top_level.txt, else the RECORD's top folders)."""
    for info in layer.glob("*.dist-info"):
        if canonical(info.name[:-len(".dist-info")].rsplit("-", 1)[0]) != name:
            continue
        top = info / "top_level.txt"
        if top.is_file():
            mods = [m.strip() for m in top.read_text().split() if m.strip() and not m.startswith("_")]
            if mods:
                return mods
        record = info / "RECORD"
        mods = set()
        if record.is_file():
            for row in record.read_text().splitlines():
                path = row.split(",", 1)[0]
                head = path.split("/", 1)[0]
                if path.endswith("/__init__.py") and path.count("/") == 1 and not head.startswith("_"):
                    mods.add(head)
        return sorted(mods)
    return []


def _pip_line(python: str, args: list[str], index_url: str | None) -> str:
    cmd = [sys.executable, "-m", "pip"]
    if os.path.realpath(python) != os.path.realpath(sys.executable):
        cmd += ["--python", python]
    return shlex.join(cmd + args + (["--index-url", index_url] if index_url else []))


# -- the whole bisection over releases ------------------------------------------------------------------------------

def script_imports(script: Path) -> list[str]:
    """Top-level modules a script imports (for the fresh-venv command of each verdict)."""
    try:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    mods = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            mods.append(node.module.split(".")[0])
    return list(dict.fromkeys(mods))


def _fresh_venv_command(envs: ReleaseEnvs, script: Path, package: str, version: str, delta: list[str],
                        imported: list[str] | None = None) -> str:
    """The same verdict by hand: a new venv with the release and the distributions of what the run imported
    (``imported``; else the script's own imports) at the versions used."""
    pins = {canonical(d.split("==")[0]): d for d in delta}
    pins.setdefault(canonical(package), f"{package}=={version}")
    modules = envs.info.get("modules", {})
    for mod in imported if imported is not None else script_imports(script):
        for dist in modules.get(mod, []):
            c = canonical(dist)
            if c not in pins and c in envs.info["dists"]:
                pins[c] = f"{dist}=={envs.info['dists'][c]}"
    venv = f"/tmp/venv-{canonical(package)}-{version}"
    return (f"python{'.'.join(envs.info['python'].split('.')[:2])} -m venv {venv} && {venv}/bin/pip install "
            f"{' '.join(shlex.quote(p) for p in pins.values())} && {venv}/bin/python {shlex.quote(str(script))}")


@dataclass
class ReleaseBisection:
    package: str
    script: Path
    result: SearchResult
    envs: ReleaseEnvs
    releases: list[str]
    seconds: float

    def report_line(self) -> str:
        r, pkg = self.result, self.package
        stats = self.envs.summary()
        if r.first_new is None:
            return f"{pkg}: nothing decided ({r.note}); {stats}"
        if r.last_old is None and not r.complete:  # the budget ran out before an older release was tested
            return f"{r.states[1]} in {pkg} {r.first_new}, not narrowed further ({r.note}); {stats}"
        if r.mode == REGRESSION:
            if r.last_old is None:
                return f"bad in every {pkg} release tested ({r.note}); {stats}"
            if not r.complete:
                return f"introduced in {pkg} after {r.last_old} and by {r.first_new} ({r.note}); {stats}"
            if r.skipped_between:
                return (f"introduced in {pkg} {', '.join(r.skipped_between + [r.first_new])} (untestable between); "
                        f"{r.last_old} good; {stats}")
            return f"introduced in {pkg} {r.first_new}; {r.last_old} good; {stats}"
        if r.last_old is None:
            return f"good in every {pkg} release tested ({r.note}); {stats}"
        if not r.complete:
            return f"fixed in {pkg} after {r.last_old} and by {r.first_new} ({r.note}); {stats}"
        if r.skipped_between:
            return (f"fixed in {pkg} {', '.join(r.skipped_between + [r.first_new])} (untestable between); "
                    f"{r.last_old} bad; {stats}")
        return f"fixed in {pkg} {r.first_new}; {r.last_old} bad; {stats}"

    def to_dict(self) -> dict:
        return {"kind": "releases", "package": self.package, "script": str(self.script),
                **self.result.to_dict(), "installs": self.envs.installs + self.envs.cached,
                "installed_now": self.envs.installs, "cached": self.envs.cached, "failed": self.envs.failed,
                "install_seconds": round(self.envs.install_seconds, 1), "seconds": round(self.seconds, 1),
                "base_python": self.envs.python, "base_version": self.envs.base_version(self.package),
                "cache": str(self.envs.dir), "report": self.report_line()}


def _pick(releases: list[str], version: str, flag: str, package: str) -> int:
    for i, v in enumerate(releases):
        if _same_version(v, version):
            return i
    shown = ", ".join(releases[-8:])
    raise BisectInputError(f"{flag} {version}: {package} has no such release installable here "
                           f"({len(releases)} releases, newest: {shown})")


def bisect_releases(script: Path, package: str, *, good: str | None = None, bad: str | None = None,
                    mode: str = REGRESSION, index_url: str | None = None, pre: bool = False,
                    python: str | None = None, budget_s: float | None = None, timeout: float = 600,
                    log_dir: Path | None = None, say: Callable[[str], None] = lambda s: None) -> ReleaseBisection:
    """Bisect ``script`` (exit 0 good, 1 bad) over the releases of ``package``.

    regression (default): the last good and first bad release between ``good`` (default: the oldest) and ``bad``
    (default: the installed release, else the newest). fixed: the last bad and first good release between ``bad``
    (older; default: the installed release) and ``good`` (newer; default: the newest)."""
    t0 = time.monotonic()
    script = Path(script).resolve()
    if not script.is_file():
        raise BisectInputError(f"no reproducer script at {script}")
    python = python or sys.executable
    envs = ReleaseEnvs(python=python, index_url=index_url, say=say)
    releases = list_releases(package, index_url, pre, python)
    installed = envs.base_version(package)
    installed_listed = next((v for v in releases if _same_version(v, installed)), None)
    if mode == REGRESSION:
        lo = _pick(releases, good, "--good", package) if good else 0
        hi = _pick(releases, bad, "--bad", package) if bad else (
            releases.index(installed_listed) if installed_listed else len(releases) - 1)
        labels, pinned_old, pinned_new = ("--good", "--bad"), bool(good), bool(bad)
    elif mode == FIXED:
        lo = _pick(releases, bad, "--bad", package) if bad else (
            releases.index(installed_listed) if installed_listed else 0)
        hi = _pick(releases, good, "--good", package) if good else len(releases) - 1
        labels, pinned_old, pinned_new = ("--bad", "--good"), bool(bad), bool(good)
    else:
        raise ValueError(mode)
    if hi <= lo:
        raise BisectInputError(f"empty range: {labels[0]} {releases[lo]} is not older than {labels[1]} "
                               f"{releases[hi]}" + (" (looking for a fix? use --fixed)" if mode == REGRESSION and
                                                    hi < lo else ""))
    candidates = releases[lo:hi + 1]
    say(f"{package}: {len(candidates)} releases from {candidates[0]} to {candidates[-1]} "
        f"(installed: {installed or 'none'}); layers under {envs.dir}")

    def test(version: str) -> Verdict:
        try:
            env = envs.get(package, version)
        except CandidateSkip as e:
            return Verdict(version, SKIP, str(e), None, detail={"environment": "not installable"})
        log = log_dir / f"{canonical(package)}-{version}.log" if log_dir else None
        v = run_script(script, env.env, version, python, timeout, log, trace_imports=True)
        if env.path is not None:
            v.commands = [env.install_command, run_command({"PYTHONPATH": str(env.path)}, script, python)]
        else:
            v.commands = [run_command({}, script, python)]
        v.detail = {"environment": "base" if env.path is None else ("cached" if env.cached else "installed"),
                    "delta": env.delta, "install_seconds": round(env.seconds, 1),
                    "fresh_venv": _fresh_venv_command(envs, script, package, version, env.delta, v.modules)}
        return v

    result = bisect(candidates, test, mode, pinned_old=pinned_old, pinned_new=pinned_new, budget_s=budget_s,
                    labels=labels, say=say)
    return ReleaseBisection(package, script, result, envs, releases, time.monotonic() - t0)
