"""Device targets, the device-differential oracle and routing to runner pools.

On a CPU machine the device targets are absent, each with its reason, and naming them is not a failure; the plan
sends GPU-only code to the GPU runner kind only, CPU-only code to CPU runners only, shared code to both (real git
repositories at real upstream paths, planned by entrypoint.py's plan mode as the pool workflow runs it). The tests
at the end need a CUDA GPU and are skipped, with the reason, where there is none: nothing here fakes a device.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dlci import devices
from dlci.errors import UsageError
from dlci.instance import Instance, Origin
from dlci.outcome import INCONSISTENT, PASS, UNSUPPORTED, Outcome
from dlci.targets import registry, select

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "profiles"
SITE = Path(__import__("torch").__file__).resolve().parents[1]
DEVICE_TARGETS = {"torch.cuda", "torch.compile.cuda", "torch.onnx.cuda", "onnxruntime.cuda", "tvm.from_onnx.cuda",
                  "tvm.from_onnx.vulkan", "openvino.onnx.gpu"}
RUNNERS = {"cpu": ["ubuntu-latest"], "gpu": ["self-hosted", "gpu"], "arm64": ["self-hosted", "arm64"]}
CUDA_HERE = devices.presence("torch:cuda").present
NO_GPU = f"needs a CUDA GPU: {devices.presence('torch:cuda').reason}"


def dlci(*args, cwd=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dlci", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


# ================================================================================================================
# targets on this runner

def test_dlci_targets_lists_every_device_target_with_its_devices_or_why_not():
    proc = dlci("targets")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert DEVICE_TARGETS <= set(rows)
    for name in DEVICE_TARGETS:
        row = rows[name]
        assert row["runner_kind"] == "gpu" and row["device"] != "cpu" and row["probe"]
        if row["available"]:
            assert row["devices"], row  # present: the framework's names of the devices found
        else:
            assert row["not_on_this_runner"], row
    assert all(r["runner_kind"] == "cpu" and "probe" not in r for n, r in rows.items() if n not in DEVICE_TARGETS)
    from dlci.devices import torch_build
    version, cuda = torch_build()
    assert version == __import__("torch").__version__ and cuda == __import__("torch").version.cuda
    if cuda is None:  # the pinned CPU build: read from torch/version.py, no CUDA initialised anywhere
        assert rows["torch.cuda"]["not_on_this_runner"] == f"torch {version} is a CPU-only build (torch.version.cuda " \
                                                           "is None)"


@pytest.mark.skipif(CUDA_HERE, reason="this runner has a CUDA GPU: the device targets run here")
def test_device_targets_named_on_a_cpu_runner_are_reported_not_failed(tmp_path):
    proc = dlci("test", "--targets", "torch.cuda,torch.compile.cuda", "--ops", "elu", "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "torch.cuda: not on this runner (torch" in proc.stderr and "not a failure" in proc.stderr
    doc = json.loads((tmp_path / "o" / "findings.json").read_text())
    assert doc["findings"] == [] and doc["stats"]["tests_run"] == 0
    assert set(doc["stats"]["targets_not_on_runner"]) == {"torch.cuda", "torch.compile.cuda"}
    report = (tmp_path / "o" / "report.md").read_text()
    assert "Nothing ran on this runner" in report and "## Not on this runner" in report
    # mixed with a CPU target, the CPU target runs and the device target is set aside, never an error
    absent: dict = {}
    assert set(select("torch.cuda,tvm.from_fx", absent)) == {"tvm.from_fx"} and set(absent) == {"torch.cuda"}
    assert set(select("all", absent)) & DEVICE_TARGETS == set()
    with pytest.raises(UsageError, match="unknown target"):
        select("torch.cuda,tvm.from_gpu")


# ================================================================================================================
# routing: entrypoint.py plan mode on real git repositories

def git(d: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(d), "-c", "user.name=dlci", "-c", "user.email=dlci@example.com",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True).stdout


def commit(d: Path, msg: str = "change") -> str:
    git(d, "add", "-A")
    git(d, "commit", "-q", "--allow-empty", "-m", msg)
    return git(d, "rev-parse", "HEAD").strip()


def edit(d: Path, rel: str, old: str, new: str) -> None:
    p = d / rel
    text = p.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {rel}"
    p.write_text(text.replace(old, new))


def plan_mode(repo: Path, base: str, head: str, tmp: Path, runners=RUNNERS) -> dict:
    """entrypoint.py in plan mode, as the pool workflow's plan job runs it; plan.json and the matrix output."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "event.json").write_text("{}")
    (tmp / "out.txt").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update({"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_EVENT_PATH": str(tmp / "event.json"),
                "GITHUB_OUTPUT": str(tmp / "out.txt"), "INPUT_MODE": "plan", "INPUT_REPO-PATH": str(repo),
                "INPUT_BASE": base, "INPUT_HEAD": head, "INPUT_OUT": str(tmp / "plan"),
                "INPUT_RUNNER-LABELS": json.dumps(runners)})
    proc = subprocess.run([sys.executable, str(ROOT / "entrypoint.py")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads((tmp / "plan" / "plan.json").read_text())
    doc["log"] = proc.stdout
    return doc


def kinds(doc: dict) -> dict[str, set[str]]:
    """runner kind -> the targets its shards run"""
    out: dict[str, set[str]] = {}
    for s in doc["shards"]:
        out.setdefault(s["kind"], set()).update(s["targets"].split(","))
    return out


@pytest.fixture(scope="module")
def torch_repo(tmp_path_factory) -> tuple[Path, str]:
    """ATen's layout with the installed torch's own native_functions.yaml, lowerings and inductor code generators,
    plus the fixture's kernels (a CPU kernel, its CUDA twin, the structured kernel they share)."""
    d = tmp_path_factory.mktemp("pytorch") / "pytorch"
    shutil.copytree(FIXTURES / "pytorch", d)
    for dst, src in {"aten/src/ATen/native/native_functions.yaml":
                     "torchgen/packaged/ATen/native/native_functions.yaml",
                     "torch/_inductor/lowering.py": "torch/_inductor/lowering.py",
                     "torch/_inductor/codegen/triton.py": "torch/_inductor/codegen/triton.py",
                     "torch/_inductor/codegen/cpp.py": "torch/_inductor/codegen/cpp.py"}.items():
        (d / dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SITE / src, d / dst)
    git(d, "init", "-q")
    return d, commit(d, "base")


def _branch(repo: Path, base: str, name: str, edits: list[tuple[str, str, str]]) -> str:
    git(repo, "checkout", "-q", "-B", name, base)
    for rel, old, new in edits:
        edit(repo, rel, old, new)
    return commit(repo, name)


def test_cuda_only_cpu_only_and_shared_pytorch_kernels_plan_the_right_runner_kinds(torch_repo, tmp_path):
    repo, base = torch_repo
    cuda = _branch(repo, base, "cuda-kernel", [("aten/src/ATen/native/cuda/ActivationSoftplusKernel.cu",
                                                "::log1p(std::exp(a * beta))", "::log1p(::exp(a * beta))")])
    cpu = _branch(repo, base, "cpu-kernel", [("aten/src/ATen/native/cpu/Activation.cpp",
                                              "return (a * beta) > threshold ? a :",
                                              "return (a * beta) >= threshold ? a :")])
    shared = _branch(repo, base, "shared", [("aten/src/ATen/native/Activation.cpp",
                                             "softplus_stub(device_type(), *this, beta, threshold);",
                                             "softplus_stub(device_type(), *this, beta, threshold);  // both")])
    # a CUDA kernel: 0 CPU shards, 1 GPU shard running the CUDA targets
    doc = plan_mode(repo, base, cuda, tmp_path / "cuda")
    assert kinds(doc) == {"gpu": {"torch.cuda", "torch.compile.cuda"}}
    assert [s["shard"] for s in doc["matrix"]["include"]] == ["gpu-torch.compile.cuda+torch.cuda"]
    why = doc["shards"][0]["why"][0]
    assert "runs on the cuda device" in why and "ActivationSoftplusKernel.cu" in why and "CUDA kernel" in why
    assert "gpu-torch.compile.cuda+torch.cuda on ['self-hosted', 'gpu']: " in doc["log"]  # the plan says why
    # a CPU kernel: no GPU shard; x86-64 and arm64 for the targets whose codegen differs on aarch64
    doc = plan_mode(repo, base, cpu, tmp_path / "cpu")
    k = kinds(doc)
    assert "gpu" not in k and {"torch.compile", "tvm.from_fx", "openvino.pytorch", "torch.onnx"} <= k["cpu"]
    assert k["arm64"] == {t for t in k["cpu"] if t.startswith(("tvm.", "openvino.", "torch.compile", "torch.onnx",
                                                               "onnxruntime"))}
    assert not DEVICE_TARGETS & (k["cpu"] | k["arm64"])
    # shared code (the structured kernel both devices run): both
    doc = plan_mode(repo, base, shared, tmp_path / "shared")
    k = kinds(doc)
    assert k["gpu"] == {"torch.cuda", "torch.compile.cuda"} and "torch.compile" in k["cpu"] and k["arm64"]


@pytest.mark.skipif(CUDA_HERE, reason="this runner has a CUDA GPU: the scan would test the kernel")
def test_a_single_job_scan_of_a_cuda_only_pr_on_a_cpu_runner_says_why_nothing_ran(torch_repo, tmp_path):
    repo, base = torch_repo
    head = _branch(repo, base, "cuda-scan", [("aten/src/ATen/native/cuda/ActivationSoftplusKernel.cu",
                                              "::log1p(std::exp(a * beta))", "::log1p(::exp(a * beta))")])
    proc = dlci("scan", "--repo", str(repo), "--base", base, "--head", head, "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "o" / "findings.json").read_text())
    assert "which need a device this runner does not have" in doc["pr"]["nothing_to_test"]
    assert set(doc["stats"]["targets_not_on_runner"]) == {"torch.cuda", "torch.compile.cuda"}
    assert doc["stats"]["tests_run"] == 0  # the CPU targets were not run instead


def test_inductor_code_generators_route_to_their_device(torch_repo, tmp_path):
    repo, base = torch_repo

    def insert_in_class(name: str, rel: str, cls: str, line: str) -> str:
        git(repo, "checkout", "-q", "-B", name, base)
        lines = (repo / rel).read_text().splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"class {cls}("))
        body = next(i for i in range(at + 1, len(lines)) if lines[i].startswith("    def "))
        lines.insert(body, line)
        (repo / rel).write_text("".join(lines))
        return commit(repo, name)

    # a comment changes nothing: nothing to test, one quick shard
    doc = plan_mode(repo, base, insert_in_class("comment", "torch/_inductor/codegen/triton.py", "TritonKernel",
                                                "    # how overrides are looked up\n"), tmp_path / "comment")
    assert doc["shards"] == [] and doc["matrix"]["include"][0]["targets"] == ""
    doc = plan_mode(repo, base, insert_in_class("triton", "torch/_inductor/codegen/triton.py", "TritonKernel",
                                                "    overrides_checked = True\n"), tmp_path / "triton")
    assert kinds(doc) == {"gpu": {"torch.compile.cuda"}}
    assert "inductor's Triton (GPU) code generation changed (TritonKernel)" in doc["shards"][0]["why"][0]
    doc = plan_mode(repo, base, insert_in_class("cpp", "torch/_inductor/codegen/cpp.py", "CppKernel",
                                                "    overrides_checked = True\n"), tmp_path / "cpp")
    assert kinds(doc) == {"cpu": {"torch.compile"}, "arm64": {"torch.compile"}}


def test_onnxruntime_cuda_provider_and_cpu_kernels(tmp_path):
    d = tmp_path / "ort"
    shutil.copytree(FIXTURES / "onnxruntime", d)
    git(d, "init", "-q")
    base = commit(d, "base")
    cuda = _branch(d, base, "cuda", [("onnxruntime/core/providers/cuda/activation/activations.cc",
                                      "alpha_, p.output", "alpha_ * 1, p.output")])
    cpu = _branch(d, base, "cpu", [("onnxruntime/core/providers/cpu/activation/activations.h",
                                    "(T)alpha * (xm.exp() - 1)", "(T)alpha * (xm.exp() - 1.0f)")])
    assert kinds(plan_mode(d, base, cuda, tmp_path / "p1")) == {"gpu": {"onnxruntime.cuda", "torch.onnx.cuda"}}
    assert kinds(plan_mode(d, base, cpu, tmp_path / "p2")) == {"cpu": {"onnxruntime", "torch.onnx"},
                                                              "arm64": {"onnxruntime", "torch.onnx"}}


CODEGEN = {  # TVM's backends at their real paths: a function each, as the files hold them
    "src/target/source/codegen_cuda.cc": "void CodeGenCUDA::PrintType(DataType t, std::ostream& os) {\n"
                                         "  os << \"float\";\n}\n",
    "src/target/llvm/codegen_aarch64.cc": "llvm::Value* CodeGenAArch64::CreateIntrinsic(const CallNode* op) {\n"
                                          "  return nullptr;\n}\n",
    "src/target/llvm/codegen_llvm.cc": "void CodeGenLLVM::AddFunction(const GlobalVar& gvar) {\n  Init();\n}\n",
    "src/tir/transforms/simplify.cc": "Stmt Simplify(Stmt stmt) {\n  return stmt;\n}\n",
}


def test_tvm_backends_route_cuda_codegen_to_gpu_aarch64_codegen_to_arm64_and_tir_to_both(tmp_path):
    d = tmp_path / "tvm"
    onnx_fe = "python/tvm/relax/frontend/onnx/onnx_frontend.py"
    (d / onnx_fe).parent.mkdir(parents=True)
    shutil.copy(Path(__import__("tvm").__file__).parent / "relax/frontend/onnx/onnx_frontend.py", d / onnx_fe)
    for rel, text in CODEGEN.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    git(d, "init", "-q")
    base = commit(d, "base")
    heads = {name: _branch(d, base, name.replace("/", "-"), [(rel, old, new)]) for name, rel, old, new in (
        ("cuda", "src/target/source/codegen_cuda.cc", 'os << "float";', 'os << "float32";'),
        ("aarch64", "src/target/llvm/codegen_aarch64.cc", "return nullptr;", "return CreateCall(op);"),
        ("llvm", "src/target/llvm/codegen_llvm.cc", "Init();", "Init(true);"),
        ("tir", "src/tir/transforms/simplify.cc", "return stmt;", "return Canonical(stmt);"))}
    tvm_cpu = {n for n, t in registry().items() if n.startswith("tvm.") and not t.on_accelerator}
    assert kinds(plan_mode(d, base, heads["cuda"], tmp_path / "cuda")) == {"gpu": {"tvm.from_onnx.cuda"}}
    assert kinds(plan_mode(d, base, heads["aarch64"], tmp_path / "a")) == {"arm64": tvm_cpu}
    assert kinds(plan_mode(d, base, heads["llvm"], tmp_path / "l")) == {"cpu": tvm_cpu, "arm64": tvm_cpu}
    assert kinds(plan_mode(d, base, heads["tir"], tmp_path / "t")) == {
        "cpu": tvm_cpu, "arm64": tvm_cpu, "gpu": {"tvm.from_onnx.cuda", "tvm.from_onnx.vulkan"}}
    # no GPU runner kind configured: the CUDA codegen change is said to be untested, not planned on CPUs
    doc = plan_mode(d, base, heads["cuda"], tmp_path / "nogpu", runners={"cpu": ["ubuntu-latest"]})
    assert doc["shards"] == [] and doc["matrix"]["include"] == [
        {"shard": "cpu-none", "kind": "cpu", "runner": ["ubuntu-latest"], "targets": ""}]
    assert doc["unrouted"][0]["reason"] == "no GPU runner kind in runner-labels"
    assert "tvm.from_onnx.cuda: " in doc["unrouted"][0]["touches"][0]


# ================================================================================================================
# the device-differential oracle

def _out() -> Outcome:
    return Outcome("i", "aten::sum", "torch.cuda", status=INCONSISTENT, stage="compare", symptom="value mismatch",
                   message="1 of 4 elements differ")


def _verdict(ref):
    from dlci.oracles.compare import compare_outputs
    return lambda outputs: compare_outputs(outputs, [ref], [ref.astype(np.float64)])


def test_repeated_runs_excuse_run_to_run_variation_but_not_a_result_wrong_every_time():
    from dlci.oracles.device import rejudge
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096).astype(np.float32) * 1e4
    ref = np.array(np.sum(x.astype(np.float64)), dtype=np.float32)
    # an atomics-style reduction: the order of the float32 additions changes from run to run
    orders = iter([rng.permutation(x.size) for _ in range(8)])
    bad = np.array(ref * 1.5, dtype=np.float32)  # the first run was far off; the reruns accumulate in other orders
    out = _out()
    rejudge(out, [bad], lambda: [np.array(np.sum(x[next(orders)], dtype=np.float32))], _verdict(ref))
    assert out.status == PASS and out.device_note.startswith("nondeterministic: 1 of 4 runs differ")
    # wrong in every run, the same bits each time: the mismatch stands, saying so
    out = _out()
    rejudge(out, [bad], lambda: [bad.copy()], _verdict(ref))
    assert out.status == INCONSISTENT and "4 runs, identical, every one differs" in out.message


def test_torch_deterministic_mode_and_opinfo_expectations_decide_the_rest():
    from dlci.oracles.device import rejudge
    ref = np.arange(4, dtype=np.float32)
    wrong = ref[::-1].copy()
    out = _out()  # torch: "index_add_cuda_ does not have a deterministic implementation": unspecified result
    rejudge(out, [wrong], lambda: [wrong.copy()], _verdict(ref),
            deterministic=lambda: "index_add_cuda_ does not have a deterministic implementation, but you set ...")
    assert out.status == UNSUPPORTED and out.symptom == "nondeterministic"
    out = _out()  # the deterministic implementation agrees with the CPU: only the default kernel's order differs
    rejudge(out, [wrong], lambda: [wrong.copy()], _verdict(ref), deterministic=lambda: [ref.copy()])
    assert out.status == PASS and "deterministic implementation" in out.device_note
    out = _out()  # ... and when it differs as well, it is a bug
    rejudge(out, [wrong], lambda: [wrong.copy()], _verdict(ref), deterministic=lambda: [wrong.copy()])
    assert out.status == INCONSISTENT and "the deterministic implementation differs too" in out.message
    out = _out()
    rejudge(out, [wrong], lambda: pytest.fail("not rerun"), _verdict(ref), expected_to_differ="OpInfo x: xfail")
    assert out.status == UNSUPPORTED and out.device_note == "expected to differ from the CPU: OpInfo x: xfail"


def test_per_dtype_tolerances_of_the_device_widen_only_their_dtype():
    from dlci.oracles.compare import compare_outputs
    ref = np.ones(8, np.float32)
    got, ref64 = ref + np.float32(5e-4), ref.astype(np.float64)
    assert compare_outputs([got], [ref], [ref64]) is not None  # 5e-4 off where fp64 says 0 is exact
    assert compare_outputs([got], [ref], [ref64], widen={"float32": (1e-3, 1e-3)}) is None
    assert compare_outputs([got], [ref], [ref64], widen={"float16": (1e-1, 1e-1)}) is not None


def _opinfo_instance(name: str, variant: str = "") -> Instance:
    return Instance(op=f"aten::{name}", framework="torch", call={"kind": "torch_fn", "fn": "torch.add"}, inputs=[],
                    params={}, origin=Origin("opinfo", f"op_db:{name}[{variant}]#0 sample", "torch"))


def test_what_pytorchs_own_cuda_tests_allow_comes_from_the_installed_opinfo():
    from dlci.operators.facts import EAGER_TESTS
    from dlci.targets import _cuda
    # OpInfo's toleranceOverride for CUDA (TestCommon.test_noncontiguous_samples: conv_transpose2d float32)
    tol = _cuda.opinfo_tolerances(_opinfo_instance("nn.functional.conv_transpose2d"), EAGER_TESTS)
    assert tol.get("float32", (0, 0))[1] >= 2e-5
    assert _cuda.opinfo_tolerances(_opinfo_instance("nn.functional.elu"), set()) == {}
    # PyTorch does not expect CUDA to match the CPU for special.zeta and as_strided's partial views (test_compare_cpu
    # is an expected failure there), nor for the values of empty_like
    assert "test_compare_cpu is marked expectedFailure" in _cuda.opinfo_expects_difference(
        _opinfo_instance("as_strided", "partial_views"))
    assert "expectedFailure" in _cuda.opinfo_expects_difference(_opinfo_instance("special.zeta"))
    assert "has_nondeterministic_output" in _cuda.opinfo_expects_difference(_opinfo_instance("empty_like"))
    assert _cuda.opinfo_expects_difference(_opinfo_instance("as_strided")) is None
    assert _cuda.opinfo_expects_difference(_opinfo_instance("add")) is None
    # CUDA's sticky errors, as torch words them, retire the worker; other CUDA failures do not
    assert _cuda.sticky_cuda_error(RuntimeError(
        "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported"
    )) == "CUDA error: illegal memory access"
    assert _cuda.sticky_cuda_error(RuntimeError("CUDA error: device-side assert triggered")) == \
        "CUDA error: device-side assert"
    assert _cuda.sticky_cuda_error(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")) is None


@pytest.mark.parametrize("target", ["torch.cuda", "torch.compile.cuda"])
def test_device_reproducers_name_the_device_and_keep_the_campaigns_numerics(target, tmp_path):
    from dlci.findings import Finding
    from dlci.findings.repro import render_repro
    from dlci.instance import TensorSpec
    x = -np.linspace(0.5, 3.0, 12, dtype=np.float32).reshape(3, 4)
    inst = Instance(op="nn::ELU", framework="torch", call={"kind": "torch_module", "cls": "torch.nn.ELU", "args": [],
                                                            "kwargs": {}, "forward_args": [{"$t": 0}],
                                                            "forward_kwargs": {}},
                    inputs=[TensorSpec.of(x)], params={}, origin=Origin("test", "hand"), arrays={"in:0": x})
    finding = Finding(id="F001", oracle="inconsistency", operator=inst.op, target=target, target_version="2.13.0",
                      symptom="value mismatch", stage="compare", signature="s", message="m", instance_id=inst.id,
                      origin=inst.origin.__dict__, distance={"output": 0, "rtol": 2e-4, "atol": 1e-4},
                      instances=[inst.id], confirmed=True, extra={"device": "cuda:0 NVIDIA H100 80GB HBM3"})
    path = render_repro(finding, inst, tmp_path)
    text = path.read_text()
    compile(text, str(path), "exec")
    assert f"{target} 2.13.0 on cuda:0 NVIDIA H100 80GB HBM3" in text.splitlines()[0]
    assert 'DEVICE = "cuda"' in text and "allow_tf32 = False" in text and "rtol=0.0002" in text
    if not CUDA_HERE:  # it says it cannot tell here, instead of passing or failing
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 125 and "needs a CUDA GPU" in proc.stdout


# ================================================================================================================
# on a GPU (skipped here with the reason)

@pytest.mark.skipif(not CUDA_HERE, reason=NO_GPU)
def test_cuda_targets_run_opinfo_samples_and_every_finding_reproduces_alone(tmp_path):
    proc = dlci("test", "--targets", "torch.cuda,torch.compile.cuda", "--ops", "add,mul,softmax,sum,index_add,cumsum",
                "--budget", "240", "--fail-on", "never", "--out", str(tmp_path / "o"), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "o" / "findings.json").read_text())
    st = doc["stats"]
    assert st["per_target"]["torch.cuda"]["pass"] > 0 and st["per_target"]["torch.compile.cuda"]["pass"] > 0
    assert "cuda:" in st["devices"]["torch.cuda"]
    assert all(f["repro_checked"] for f in doc["findings"])


@pytest.mark.skipif(not CUDA_HERE, reason=NO_GPU)
def test_a_device_side_assert_costs_one_test_and_the_worker_is_replaced(tmp_path):
    from dlci.exec import Engine, Job
    jobs = [Job(id=f"{k}{n}", func=f"tests.exec_jobs:{k}", args=(), instance_id=k, target="torch.cuda")
            for n, k in enumerate(["cuda_ok", "cuda_device_assert", "cuda_ok"])]
    got = {}
    with Engine(workers=1, timeout=120, log_dir=str(tmp_path)) as engine:
        info = engine.run(jobs, lambda j, r: got.__setitem__(j.id, r))
    assert got["cuda_device_assert1"]["retire_worker"] == "CUDA error: device-side assert"
    assert got["cuda_ok0"]["status"] == got["cuda_ok2"]["status"] == PASS and info.retired == 1
    assert got["cuda_ok0"]["message"] != got["cuda_ok2"]["message"]  # a fresh process after the poisoned one
