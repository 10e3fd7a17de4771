"""Runner-pool routing on real upstream history: which shards `entrypoint.py` plan mode gives real TVM fixes.

    .venv/bin/python benchmarks/routing.py --tvm-repo PATH [--baseline-rev REV] [--json OUT]

PATH is a clone of apache/tvm with its history (the commits below were merged before 2025-09-01). Each case is a
real upstream commit, planned as a pull request (base = its parent) with the pool's three runner kinds
(cpu, gpu, arm64), by this dlci and, side by side, by dlci at ``--baseline-rev`` (default: the merge base with
main, i.e. before device routing) run from a git worktree in a fresh process. The classes are the code each fix
touched, read from its diff: GPU-only (CUDA codegen, dlight GPU schedules, GPU-only TIR lowering), CPU-only (LLVM
codegen, frontend converters), shared (TIR/Relax passes every target runs, library ops). What the issue asks:
a GPU-only PR plans 0 CPU shards and >= 1 GPU shard; a CPU-only PR no GPU shard; shared code both.
Prints one JSON line per case and the summary.
"""
from __future__ import annotations

import sys
from pathlib import Path

# this script's folder must not shadow the standard library (benchmarks/bisect.py would stand in for `bisect`)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNNERS = {"cpu": ["ubuntu-latest"], "gpu": ["self-hosted", "gpu"], "arm64": ["self-hosted", "arm64"]}
CASES = [  # (commit, class, upstream title)
    ("aa312a5278", "gpu", "[BugFix][CUDA] Increase FloatImm precision when printing 64 bit values in CUDA codegen"),
    ("6b89f9537c", "gpu", "[Codegen][CUDA] Fix codegen of cast among vector bfloat16, fp8 and fp4"),
    ("dafd053be2", "gpu", "[Dlight] Fix general reduction rule to support non-last reduction axis"),
    ("38b85c9f61", "gpu", "[Fix][dlight] add an explicit reduction loop check in Reduce"),
    ("090430a284", "gpu", "[DLight] Fix Matmul rule for Conv3D"),
    ("e35a424262", "gpu", "[TIR] Minor fix for default GPU schedule"),
    ("6ca0bea2d8", "gpu", "[Fix][TIR] LowerThreadAllreduce warp reduction mask"),
    ("ad9a20140c", "cpu", "[LLVM][Fix] Do not emit debuginfo on vscale or other unknown types"),
    ("46f41ce13d", "cpu", "Add registion for the operator asin and acos in llvm"),
    ("fcd266e8db", "cpu", "[Fix][ONNX] No precision widening for numpy binary operations"),
    ("a51951795c", "cpu", "[Fix][ONNX] Fix CumSum conversion when loading ONNX model"),
    ("a61e3ca0ab", "shared", "[Fix][ONNX] Fixed constant ROI handling in resize2d (and relax.op.image.resize2d)"),
    ("6704175fc7", "shared", "Pass to eliminate redundant branch and overcompute (src/tir/transforms)"),
    ("f432ebd5f5", "shared", "[Relax] Update GlobalVar name in AttachGlobalSymbol"),
    ("a1f5a29eed", "shared", "[Relax] Support InstanceNorm & [TOPI] Bugfix of InstanceNorm"),
]

# the baseline's plan mode, as entrypoint.py had it: the reached targets (every target when the touched code reaches
# none) x every runner kind
BASELINE = r'''
import json, sys
from dlci import profiles
from dlci.diff import GitRepo
from dlci.targets import registry
from dlci.github import shards
repo, commit, runners = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
a = profiles.analyse(GitRepo(repo, commit + "^", commit))
reached = sorted({t for touch in a.touches for t in touch.targets} or (set(registry()) if a.touches else set()))
print(json.dumps(shards.plan_matrix(reached, runners)["include"]))
'''


def new_plan(repo: str, commit: str) -> tuple[list[dict], float, int]:
    from dlci import profiles
    from dlci.diff import GitRepo
    from dlci.github.shards import plan
    t0 = time.perf_counter()
    analysis = profiles.analyse(GitRepo(repo, commit + "^", commit))
    planned = plan(analysis.touches, RUNNERS)
    return planned["shards"], time.perf_counter() - t0, len(analysis.touches)


def baseline_plan(worktree: Path, repo: str, commit: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(worktree))
    out = subprocess.run([sys.executable, "-c", BASELINE, repo, commit, json.dumps(RUNNERS)], env=env, cwd=worktree,
                         capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f"baseline plan failed for {commit}: {out.stderr[-2000:]}")
    return [s for s in json.loads(out.stdout.strip().splitlines()[-1]) if not s["shard"].endswith("-none")]


def per_kind(shards: list[dict]) -> dict[str, int]:
    return {k: sum(1 for s in shards if s["kind"] == k) for k in RUNNERS}


def meets(cls: str, kinds: dict[str, int]) -> bool:
    if cls == "gpu":
        return kinds["cpu"] == 0 and kinds["arm64"] == 0 and kinds["gpu"] >= 1
    if cls == "cpu":
        return kinds["gpu"] == 0 and kinds["cpu"] >= 1
    return kinds["gpu"] >= 1 and kinds["cpu"] >= 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tvm-repo", required=True, help="a clone of apache/tvm with history")
    ap.add_argument("--baseline-rev", default=None, help="dlci revision to compare with (default: merge base with "
                                                         "main)")
    ap.add_argument("--json", help="write the results here")
    ns = ap.parse_args()
    rev = ns.baseline_rev or subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
                                            capture_output=True, text=True, check=True).stdout.strip()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlci-routing-") as tmp:
        worktree = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), rev], check=True,
                       capture_output=True)
        try:
            for commit, cls, title in CASES:
                shards, seconds, touches = new_plan(ns.tvm_repo, commit)
                old = baseline_plan(worktree, ns.tvm_repo, commit)
                row = {"commit": commit, "class": cls, "title": title, "touches": touches,
                       "plan_seconds": round(seconds, 2),
                       "shards": per_kind(shards), "baseline_shards": per_kind(old),
                       "meets": meets(cls, per_kind(shards)), "baseline_meets": meets(cls, per_kind(old)),
                       "why": {s["shard"]: s["why"][0] for s in shards}}
                print(json.dumps(row), flush=True)
                rows.append(row)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                           capture_output=True)
    summary = {"baseline_rev": rev[:12], "cases": len(rows)}
    for cls in ("gpu", "cpu", "shared"):
        mine = [r for r in rows if r["class"] == cls]
        summary[cls] = {"cases": len(mine), "meets": sum(r["meets"] for r in mine),
                        "baseline_meets": sum(r["baseline_meets"] for r in mine),
                        "shards": {k: sum(r["shards"][k] for r in mine) for k in RUNNERS},
                        "baseline_shards": {k: sum(r["baseline_shards"][k] for r in mine) for k in RUNNERS}}
    summary["max_plan_seconds"] = max(r["plan_seconds"] for r in rows)
    print(json.dumps(summary, indent=2))
    if ns.json:
        Path(ns.json).write_text(json.dumps({"cases": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
