"""The accelerators of this runner, as each framework sees them: whether the device a target runs on is here, its
name, and if not, why not ("not on this runner", never a failure).

A target names the probe of its device (``Target.probe``): ``torch:cuda``, ``onnxruntime:cuda``, ``tvm:cuda``,
``tvm:vulkan``, ``openvino:GPU``. A probe first looks at what needs no import (a CPU-only torch build says
``cuda = None`` in its version file; a CPU onnxruntime is another distribution than onnxruntime-gpu). Only a build
that could use a device is asked, in a child process (``python -m dlci.devices``), whether one is there: dlci's own
process never initialises CUDA (a context holds hundreds of MB of GPU memory per process, and dlci's workers are
started by exec, never forked from a process that touched CUDA). Answers are cached per process and per
``CUDA_VISIBLE_DEVICES``: a runner sharing a host with others sees only the devices it was given.

``python -m dlci.devices`` prints every probe's answer as JSON.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

PROBE_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Presence:
    present: bool
    reason: str = ""          # absent: why ("torch 2.13.0+cpu is a CPU-only build"); present: what runs it
    devices: tuple[str, ...] = ()  # "cuda:0 NVIDIA H100 80GB HBM3", as the framework names them
    memory_mb: tuple[int, ...] = ()  # total memory of each device, where the framework says

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Probe:
    key: str
    # what needs no import: None when a device may be there (ask the child), else the absent Presence
    static: Callable[[], Presence | None]
    # run in the child process: imports the framework and looks for the device
    dynamic: Callable[[], Presence] = field(repr=False, default=None)


def _dist_version(*names: str) -> tuple[str, str]:
    for name in names:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "", ""


# -- torch ------------------------------------------------------------------------------------------------------

def torch_build() -> tuple[str, str | None]:
    """(torch version, the CUDA version it was built for or None), read from torch/version.py without importing
    torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return "", None
    text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8", errors="replace")
    version = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]*)['\"]|None)", text, re.M)
    return (version.group(1) if version else ""), (cuda.group(1) if cuda and cuda.group(1) else None)


def _torch_static() -> Presence | None:
    version, cuda = torch_build()
    if not version:
        return Presence(False, "torch is not installed")
    if cuda is None:
        return Presence(False, f"torch {version} is a CPU-only build (torch.version.cuda is None)")
    return None


def _torch_dynamic() -> Presence:
    import torch
    if not torch.cuda.is_available():
        return Presence(False, f"torch {torch.__version__} (CUDA {torch.version.cuda}) finds no CUDA device"
                               f"{_visible_note()}")
    names, mem = [], []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        names.append(f"cuda:{i} {p.name}")
        mem.append(int(p.total_memory >> 20))
    return Presence(True, f"torch {torch.__version__}, CUDA {torch.version.cuda}", tuple(names), tuple(mem))


def _visible_note() -> str:
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    return f" (CUDA_VISIBLE_DEVICES={value!r})" if value is not None else ""


# -- ONNX Runtime -----------------------------------------------------------------------------------------------

def _ort_static() -> Presence | None:
    gpu = _dist_version("onnxruntime-gpu")[1]
    if gpu:
        return None
    name, version = _dist_version("onnxruntime")
    if version:
        return Presence(False, f"onnxruntime {version} is the CPU build (the CUDA execution provider comes with "
                               "onnxruntime-gpu, not installed)")
    return Presence(False, "onnxruntime-gpu is not installed")


def _ort_dynamic() -> Presence:
    import onnxruntime as ort
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return Presence(False, f"onnxruntime {ort.__version__} has no CUDAExecutionProvider "
                               f"(providers: {', '.join(ort.get_available_providers())})")
    from onnx import TensorProto, helper
    if hasattr(ort, "preload_dlls"):  # the CUDA libraries pip installed (with CUDA torch), found before a session
        try:
            ort.preload_dlls()
        except Exception:  # noqa: BLE001 - the session below says what is missing
            pass
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CUDAExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - no driver, no device, missing CUDA/cuDNN libraries
        return Presence(False, f"onnxruntime {ort.__version__}: the CUDA execution provider cannot start "
                               f"({_first_line(e)}){_visible_note()}")
    if "CUDAExecutionProvider" not in sess.get_providers():
        return Presence(False, f"onnxruntime {ort.__version__}: no CUDA device{_visible_note()}")
    return Presence(True, f"onnxruntime-gpu {ort.__version__}", nvidia_names())


# -- TVM --------------------------------------------------------------------------------------------------------

def _tvm_static() -> Presence | None:
    if not _dist_version("apache-tvm")[1] and importlib.util.find_spec("tvm") is None:
        return Presence(False, "apache-tvm is not installed")
    return None


def _tvm_dynamic(kind: str) -> Presence:
    import tvm
    flag = {"cuda": "USE_CUDA", "vulkan": "USE_VULKAN"}[kind]
    info = tvm.support.libinfo()
    version = getattr(tvm, "__version__", "")
    if str(info.get(flag, "OFF")).upper() in ("OFF", "", "FALSE", "0"):
        return Presence(False, f"TVM {version} was built without {kind} ({flag}=OFF)")
    dev = getattr(tvm, kind)(0)
    if not dev.exist:
        return Presence(False, f"TVM {version} ({flag}=ON) finds no {kind} device{_visible_note()}")
    if kind == "cuda" and importlib.util.find_spec("cuda.bindings") is None and shutil.which("nvcc") is None:
        return Presence(False, f"TVM {version} compiles CUDA kernels with NVRTC (the cuda-bindings package) or nvcc: "
                               "neither is installed")
    names = []
    for i in range(8):
        d = getattr(tvm, kind)(i)
        if not d.exist:
            break
        names.append(f"{kind}:{i} {d.device_name}")
    return Presence(True, f"TVM {version} ({flag}=ON)", tuple(names))


# -- OpenVINO ---------------------------------------------------------------------------------------------------

def _ov_static() -> Presence | None:
    spec = importlib.util.find_spec("openvino")
    if spec is None or not spec.origin:
        return Presence(False, "openvino is not installed")
    libs = Path(spec.origin).parent / "libs"
    if libs.is_dir() and not any(libs.glob("*intel_gpu_plugin*")):
        return Presence(False, "this openvino wheel has no GPU plugin")
    return None


def _ov_dynamic() -> Presence:
    import openvino as ov
    core = ov.Core()
    found = [d for d in core.available_devices if d == "GPU" or d.startswith("GPU.")]
    if not found:
        return Presence(False, f"OpenVINO {ov.__version__} lists no GPU (available_devices: "
                               f"{', '.join(core.available_devices)}): its GPU plugin runs Intel GPUs through OpenCL")
    names = []
    for d in found:
        try:
            names.append(f"{d} {core.get_property(d, 'FULL_DEVICE_NAME')}")
        except Exception:  # noqa: BLE001
            names.append(d)
    return Presence(True, f"OpenVINO {ov.__version__}", tuple(names))


def nvidia_names() -> tuple[str, ...]:
    """GPU names from nvidia-smi (honours CUDA_VISIBLE_DEVICES only as far as the driver does: informational)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=index,name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(f"cuda:{line.split(',', 1)[0].strip()} {line.split(',', 1)[1].strip()}"
                 for line in out.splitlines() if "," in line)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


PROBES: dict[str, Probe] = {p.key: p for p in (
    Probe("torch:cuda", _torch_static, _torch_dynamic),
    Probe("onnxruntime:cuda", _ort_static, _ort_dynamic),
    Probe("tvm:cuda", _tvm_static, lambda: _tvm_dynamic("cuda")),
    Probe("tvm:vulkan", _tvm_static, lambda: _tvm_dynamic("vulkan")),
    Probe("openvino:GPU", _ov_static, _ov_dynamic),
)}

_CACHE: dict[tuple[str, str | None], Presence] = {}


def presence(key: str) -> Presence:
    """Is the device of probe ``key`` on this runner? Static checks here, the rest in one child process (every probe
    still unanswered is asked at once)."""
    if key not in PROBES:
        raise KeyError(f"unknown device probe {key!r}; known: {', '.join(sorted(PROBES))}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if (key, visible) not in _CACHE:
        pending = []
        for k, probe in PROBES.items():
            if (k, visible) in _CACHE:
                continue
            answer = probe.static()
            if answer is None:
                pending.append(k)
            else:
                _CACHE[(k, visible)] = answer
        if pending:
            for k, answer in _ask_child(pending).items():
                _CACHE[(k, visible)] = answer
    return _CACHE[(key, visible)]


def _ask_child(keys: list[str]) -> dict[str, Presence]:
    from dlci.exec import interp
    cmd = interp.command("dlci.devices", "--dynamic", ",".join(keys))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=interp.env(),
                              cwd=interp.neutral_dir(), stdin=subprocess.DEVNULL)
        doc = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else {}
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        return {k: Presence(False, f"device probe failed: {type(e).__name__}: {e}") for k in keys}
    out = {}
    for k in keys:
        d = doc.get(k)
        out[k] = Presence(d["present"], d["reason"], tuple(d["devices"]), tuple(d.get("memory_mb", ()))) if d else \
            Presence(False, f"device probe failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return out


def _dynamic(keys: list[str]) -> dict[str, dict]:
    out = {}
    for k in keys:
        try:
            out[k] = PROBES[k].dynamic().to_dict()
        except Exception as e:  # noqa: BLE001 - a framework that fails to import or to enumerate: absent, and why
            out[k] = Presence(False, f"{k.split(':')[0]} probe raised {type(e).__name__}: {_first_line(e)}").to_dict()
    return out


def report() -> dict[str, dict]:
    """Every probe's answer (what ``dlci targets`` and ``python -m dlci.devices`` show)."""
    return {k: presence(k).to_dict() for k in PROBES}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--dynamic":
        # the child: its stdout is the protocol (one JSON line last); framework chatter goes to stderr
        real = os.dup(1)
        os.dup2(2, 1)
        doc = _dynamic([k for k in argv[1].split(",") if k in PROBES])
        os.write(real, (json.dumps(doc) + "\n").encode())
        return 0
    print(json.dumps(report(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def worker_gpus(probes: set[str]) -> tuple[list[str], int | None]:
    """For an engine whose targets run on these probes' devices: the device ids its worker slots spread over (the
    runner's CUDA_VISIBLE_DEVICES, else every device found) and the device memory the workers share (MiB; the
    smallest device's, or $DLCI_GPU_MEMORY_MB where the runner shares its GPU with others), None when unknown."""
    found = [presence(k) for k in sorted(probes) if k in PROBES]
    found = [p for p in found if p.present]
    if not found:
        return [], None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else \
        [str(i) for i in range(max(len(p.devices) for p in found))]
    limit = os.environ.get("DLCI_GPU_MEMORY_MB", "")
    if limit.isdigit():
        return ids, int(limit)
    mem = [m for p in found for m in p.memory_mb]
    return ids, (min(mem) if mem else None)
