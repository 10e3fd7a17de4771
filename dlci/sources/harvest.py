"""``harvest``: run any pytest suite in a subprocess under :mod:`dlci.sources.harvest_plugin` and turn the
operator calls it made into instances.

``Harvest(paths=[...], name="mysuite")`` is a source object for :func:`dlci.sources.load`; ``keras_tests`` is a
registered ready-made one over keras' own shipped layer tests.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from dlci.instance import Instance, Origin, TensorSpec
from dlci.sources import Source, load, register
from dlci.sources._common import dist_version

_REPO_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the dlci package
_DISTS = {"torch": ["torch"], "keras": ["keras", "tensorflow-cpu", "tensorflow"], "onnx": ["onnx"]}


def suite_hash(paths: Sequence[str | os.PathLike]) -> str:
    """Content hash of every file under the suite paths (caches follow edits of the tests)."""
    h = hashlib.sha1()
    for p in sorted(Path(p).resolve() for p in paths):
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file()
                                               and "__pycache__" not in f.parts and f.suffix != ".pyc")
        for f in files:
            h.update(str(f).encode())
            h.update(hashlib.sha1(f.read_bytes()).digest())
    return h.hexdigest()


def generate(spec: dict, seed: int) -> np.ndarray:
    """A stand-in for a tensor that was too big to record: same shape and dtype, values in the observed range."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(spec["dtype"])
    shape = spec["shape"]
    low = spec["low"] if spec["low"] is not None else 0
    high = spec["high"] if spec["high"] is not None else 1
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(int(low), int(high), size=shape, endpoint=True).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


class Harvest(Source):
    """Instrument a pytest suite. ``paths``: test files or directories; ``frameworks``: what to patch."""

    name = "harvest"
    framework = "mixed"  # each instance carries its own: torch, keras or onnx
    description = "operator calls recorded while running a pytest suite"
    default_limit_per_op = 24

    def __init__(self, paths: Sequence[str | os.PathLike] = (), name: str | None = None, ops=None,
                 frameworks: Sequence[str] = ("torch", "keras", "onnx"), pytest_args: Sequence[str] = (),
                 timeout: float = 900, maxfail: int | None = None, max_elements: int = 100_000):
        super().__init__(ops=ops)
        if not paths:
            raise ValueError("Harvest needs the paths of a pytest suite")
        self.paths = [str(Path(p).resolve()) for p in paths]
        if name:
            self.name = name
        self.frameworks = tuple(frameworks)
        if len(self.frameworks) == 1:
            self.framework = self.frameworks[0]
        self.pytest_args = list(pytest_args)
        self.timeout, self.maxfail, self.max_elements = timeout, maxfail, max_elements
        self._hash: str | None = None

    def library_versions(self) -> dict[str, str]:
        out = {"pytest": dist_version("pytest")}
        for fw in self.frameworks:
            for dist in _DISTS.get(fw, [fw]):
                v = dist_version(dist)
                if v != "missing":
                    out[dist] = v
        if "keras" in self.frameworks:
            out["keras_backend"] = os.environ.get("KERAS_BACKEND", "tensorflow")
        return out

    def cache_extra(self) -> dict:
        if self._hash is None:
            self._hash = suite_hash(self.paths)
        plugin = Path(__file__).with_name("harvest_plugin.py").read_bytes()
        return {"paths": self.paths, "suite": self._hash, "frameworks": list(self.frameworks),
                "pytest_args": self.pytest_args, "maxfail": self.maxfail, "max_elements": self.max_elements,
                "plugin": hashlib.sha1(plugin).hexdigest()}

    # -- running the suite ---------------------------------------------------------------------------
    def command(self, ini: str) -> list[str]:
        common = os.path.commonpath([p if os.path.isdir(p) else os.path.dirname(p) for p in self.paths])
        cmd = [sys.executable, "-m", "pytest", *self.paths, "-p", "dlci.sources.harvest_plugin", "-q",
               "-p", "no:cacheprovider",  # never write .pytest_cache into the suite (it may be site-packages)
               "-c", ini,  # an empty config: the surrounding project's pytest settings must not leak in
               f"--rootdir={common}", f"--confcutdir={common}", "-W", "ignore"]
        if self.maxfail:
            cmd.append(f"--maxfail={self.maxfail}")
        return cmd + self.pytest_args

    def harvest(self, limit_per_op: int | None = None) -> Iterator[Instance]:
        with tempfile.TemporaryDirectory(prefix="dlci-harvest-") as td:
            prefix = os.path.join(td, "records")
            ini = os.path.join(td, "pytest.ini")
            Path(ini).write_text("[pytest]\n")
            env = dict(os.environ)
            env.update({
                "DLCI_HARVEST_OUT": prefix, "DLCI_HARVEST_CAP": str(limit_per_op or 0),
                "DLCI_HARVEST_FRAMEWORKS": ",".join(self.frameworks),
                "DLCI_HARVEST_MAX_ELEMS": str(self.max_elements),
                "PYTHONPATH": os.pathsep.join([str(_REPO_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p]),
                "PYTHONDONTWRITEBYTECODE": "1",  # leave installed test folders untouched
                "TF_CPP_MIN_LOG_LEVEL": env.get("TF_CPP_MIN_LOG_LEVEL", "2"),
            })
            if self.ops:
                env["DLCI_HARVEST_OPS"] = json.dumps(self.ops)
            t0 = time.monotonic()
            try:
                proc = subprocess.run(self.command(ini), cwd=td, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, timeout=self.timeout)
                rc, output = proc.returncode, proc.stdout
            except subprocess.TimeoutExpired as e:
                rc, output = "timeout", e.stdout or b""
            self.stats["suite_seconds"] = round(time.monotonic() - t0, 2)
            self.stats["suite_returncode"] = rc
            tail = output.decode("utf-8", "replace").strip().splitlines()[-15:]
            self.stats["suite_tail"] = tail
            if rc == "timeout" or isinstance(rc, int) and rc < 0:
                warnings.warn(f"dlci harvest {self.name}: the suite {'timed out' if rc == 'timeout' else f'died with signal {-rc}'}"
                              "; keeping what was recorded before", RuntimeWarning, stacklevel=2)
            elif rc not in (0, 1, 5):  # 1: some tests failed (fine for harvesting), 5: nothing collected
                warnings.warn(f"dlci harvest {self.name}: pytest exited {rc}: {' | '.join(tail[-3:])}",
                              RuntimeWarning, stacklevel=2)
            yield from self.read_records(prefix)

    def read_records(self, prefix: str) -> Iterator[Instance]:
        meta, blob_path = prefix + ".jsonl", prefix + ".bin"
        if not os.path.exists(meta):
            self.skip("no-records")
            return
        blob = Path(blob_path).read_bytes() if os.path.exists(blob_path) else b""
        libs = {fw: f"{fw} {self._version_of(fw)}" for fw in ("torch", "keras", "onnx")}
        plugin_stats = None
        seen_ops: dict[str, int] = {}
        with open(meta, encoding="utf-8") as f:
            lines = f.read().split("\n")
        # the last line lacks its newline when the suite died mid-write: it is incomplete, drop it
        complete, partial = lines[:-1], lines[-1]
        if partial.strip():
            self.skip("truncated-record")
        for line in complete:
            rec = json.loads(line)
            if "$stats" in rec:
                plugin_stats = rec["$stats"]
                continue
            try:
                arrays = self._arrays(rec, blob)
            except (ValueError, EOFError, OSError):
                self.skip("truncated-record")
                continue
            seen_ops[rec["op"]] = seen_ops.get(rec["op"], 0) + 1
            inst = Instance(
                op=rec["op"], framework=rec["framework"], call=rec["call"],
                inputs=[TensorSpec(**s) for s in rec["inputs"]], params=rec["params"],
                origin=Origin(self.name, rec["test"], libs.get(rec["framework"], "")),
                seed=rec["seed"], arrays=arrays)
            if inst.framework == "torch":
                # the same proof as for OpInfo samples: rebuilds standalone, deterministic, inputs untouched
                from dlci.models.rebuild import check_torch_instance
                reason = check_torch_instance(inst)
                if reason:
                    self.skip(reason)
                    continue
            yield inst
        if plugin_stats is None:
            # the suite died before the plugin wrote its counters: only the kept records tell what was called
            self.stats["plugin_stats_lost"] = True
            plugin_stats = {"calls": seen_ops}
        for reason, n in plugin_stats.get("skipped", {}).items():
            self.skip(reason, n)
        self.stats["calls"] = plugin_stats.get("calls", {})

    @staticmethod
    def _arrays(rec: dict, blob: bytes) -> dict[str, np.ndarray]:
        out = {}
        for name, ref in rec["arrays"].items():
            if "generate" in ref:
                out[name] = generate(ref["generate"], rec["seed"] + len(out))
                continue
            start, n = ref["offset"], ref["nbytes"]
            if start + n > len(blob):
                raise EOFError("arrays file shorter than its index")
            out[name] = np.load(io.BytesIO(blob[start:start + n]), allow_pickle=False)
        return out

    @staticmethod
    def _version_of(fw: str) -> str:
        for dist in _DISTS.get(fw, [fw]):
            v = dist_version(dist)
            if v != "missing":
                return v
        return "missing"


_KERAS_TESTS = ("activations", "pooling", "normalization", "convolutional/conv_test.py",
                "convolutional/conv_transpose_test.py", "core/dense_test.py")


@register
class KerasTests(Harvest):
    """keras' own layer tests (shipped inside the wheel), instrumented: ``keras::<Layer>`` instances."""

    name = "keras_tests"
    framework = "keras"
    description = "keras layer calls recorded while running keras' shipped layer tests"

    def __init__(self, ops=None, subset: Sequence[str] = _KERAS_TESTS, **kwargs):
        import importlib.util
        spec = importlib.util.find_spec("keras")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("keras is not installed")
        root = Path(list(spec.submodule_search_locations)[0]) / "src" / "layers"
        kwargs.setdefault("frameworks", ("keras",))
        # quantization / LoRA variants rebuild from config only together with their extra state
        kwargs.setdefault("pytest_args", ["-k", "not quantiz and not lora and not int8 and not float8"])
        super().__init__(paths=[root / p for p in subset], ops=ops, **kwargs)


def load_harvest(paths: Iterable[str | os.PathLike], *, name: str | None = None, cache_dir=None,
                 limit_per_op: int | None = None, refresh: bool = False, ops: Iterable[str] | None = None,
                 **harvest_options) -> list[Instance]:
    """Instrument the pytest suite at ``paths`` (see :class:`Harvest`), cached like :func:`load`."""
    src = Harvest(paths=list(paths), name=name, ops=ops, **harvest_options)
    return load(src, cache_dir=cache_dir, limit_per_op=limit_per_op, refresh=refresh)
