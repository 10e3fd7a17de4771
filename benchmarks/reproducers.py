"""Reproducer size, before and after, over the findings of one real campaign: lines of the standalone scripts and of
the test-style reproducers (the whole file, and the block a maintainer pastes), median and max.

    .venv/bin/python benchmarks/reproducers.py [--ops elu,celu,...] [--targets tvm.from_fx,...] [--budget 600]
        [--before 64c20e1] [--check] [--keep DIR] [--json FILE]

One campaign runs in this process through dlci.campaign's stages (plan, execute with confirmation, collect, reduce:
what `dlci test` runs before it writes reproducers), so each finding is represented by its reduced instance. Each
finding's reproducers are then rendered twice: by this tree's renderers, and by the renderers of git revision
``--before`` (its dlci package extracted with `git archive` and run in a subprocess on the same findings and
instances). ``--check`` also runs every standalone script alone and counts the ones that reproduce (exit 1 and
REPRODUCED), before and after.
"""
from __future__ import annotations

import os
import sys

# run as a script, this file's folder comes first on sys.path, and benchmarks/bisect.py shadows the standard library's
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import io
import json
import pickle
import statistics
import subprocess
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # noqa: E402 (the imports below are dlci's, from this tree)

OPS = "elu,celu,avg_pool2d,batch_norm,conv_transpose2d,topk,softplus,hardtanh,max_unpool,leaky_relu"
TARGETS = ("tvm.from_fx,tvm.from_onnx,tvm.from_exported_program,openvino.pytorch,openvino.exported_program,"
           "openvino.onnx,onnxruntime,torch.onnx,torch.compile")

# run by the --before revision's interpreter: its own dlci renders the same findings
_RENDER_BEFORE = r'''
import json, pickle, sys
from pathlib import Path
from dlci.findings import Finding
from dlci.instance import Instance
from dlci.targets import get
from dlci.findings.test_style import render_test
try:
    from dlci.findings.repro import render
except ImportError:  # a revision from before findings.repro.render: each target rendered its own
    def render(t, f, inst, out):
        return t.render_repro(f, inst, out)
cases, out = pickle.load(open(sys.argv[1], "rb")), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for fd, meta, arrays in cases:
    f, inst = Finding.from_dict(fd), Instance.from_meta(meta, arrays)
    t = get(f.target)
    row = {"id": f.id}
    try:
        row["repro"] = str(render(t, f, inst, out))
    except Exception as e:
        row["repro_error"] = f"{type(e).__name__}: {e}"
    try:
        p = render_test(f, inst, out / "tests", style=t.test_style, form=t.form)
        row["test"] = str(p) if p else None
    except Exception as e:
        row["test_error"] = f"{type(e).__name__}: {e}"
    print(json.dumps(row), flush=True)
'''


def campaign_findings(ops: str, targets: str, budget: float, limit_per_op: int, workers: int, reduce_seconds: float,
                      out: Path):
    """(findings, instances) of one campaign, reduced as `dlci test` reduces them."""
    from dlci import sources, targets as T
    from dlci.campaign import stages
    from dlci.campaign.execution import execute, open_engine
    from dlci.campaign.options import RunOptions
    from dlci.campaign.state import Campaign
    from dlci.sources.selection import gather
    chosen = T.select(targets)
    options = RunOptions(out=out, budget=budget, workers=workers, limit_per_op=limit_per_op, check_repros=False,
                         reduce_seconds=reduce_seconds, progress=lambda s: print(f"  {s}", flush=True))
    frameworks = {f for t in chosen.values() for f in t.frameworks}
    instances = gather(list(sources.DEFAULT_SOURCES), ops.split(","), limit_per_op=limit_per_op,
                       frameworks=frameworks)
    print(f"{len(instances)} instances of {len({i.op for i in instances})} operators on {len(chosen)} targets",
          flush=True)
    campaign = Campaign({i.id: i for i in instances}, dict(chosen))
    tests = stages.plan(instances, campaign.targets)
    out.mkdir(parents=True, exist_ok=True)
    with open_engine(options, campaign.targets) as engine:
        execute(campaign, tests, engine, options)
        findings = stages.collect(campaign)
        stages.reduce(findings, campaign, engine, options)
    return findings, campaign.instances


def _lines(path) -> int:
    return len(Path(path).read_text(encoding="utf-8").splitlines())


def _run(path: Path) -> bool:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the script needs no dlci
    try:
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600,
                              cwd=str(path.parent), env=env)
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 1 and "REPRODUCED" in proc.stdout


def render_after(cases, out: Path) -> list[dict]:
    from dlci.findings import Finding
    from dlci.findings.repro import render
    from dlci.findings.test_style import paste_block, render_test
    from dlci.instance import Instance
    from dlci.targets import get
    rows = []
    out.mkdir(parents=True, exist_ok=True)
    for fd, meta, arrays in cases:
        f, inst = Finding.from_dict(fd), Instance.from_meta(meta, arrays)
        t = get(f.target)
        row = {"id": f.id}
        try:
            row["repro"] = str(render(t, f, inst, out))
        except Exception as e:
            row["repro_error"] = f"{type(e).__name__}: {e}"
        try:
            p = render_test(f, inst, out / "tests", style=t.test_style, form=t.form)
            row["test"] = str(p) if p else None
            if p:
                row["paste"] = len(paste_block(p).splitlines())
        except Exception as e:
            row["test_error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    return rows


def render_before(revision: str, cases_file: Path, out: Path) -> list[dict]:
    tree = out.parent / f"dlci-{revision}"
    tree.mkdir(exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "dlci"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", _RENDER_BEFORE, str(cases_file), str(out)], capture_output=True,
                          text=True, env=env, cwd=str(tree))
    if proc.returncode != 0:
        sys.exit(f"rendering with {revision} failed:\n{proc.stderr[-3000:]}")
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]


def stats(values: list[int]) -> dict:
    return {"n": len(values), "median": statistics.median(values) if values else None,
            "max": max(values) if values else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", default=OPS)
    ap.add_argument("--targets", default=TARGETS)
    ap.add_argument("--budget", type=float, default=600.0, help="seconds of testing")
    ap.add_argument("--limit-per-op", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reduce-seconds", type=float, default=20.0, help="per finding")
    ap.add_argument("--before", default="64c20e1", help="git revision whose renderers give the 'before' numbers")
    ap.add_argument("--check", action="store_true", help="also run every standalone script alone")
    ap.add_argument("--keep", type=Path, help="write the campaign and both sets of reproducers here")
    ap.add_argument("--cases", type=Path, help="reuse the findings a previous run kept (DIR/cases.pkl)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="dlci-bench-repro-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    cases_file = work / "cases.pkl"
    if args.cases:
        cases = pickle.loads(args.cases.read_bytes())
    else:
        findings, instances = campaign_findings(args.ops, args.targets, args.budget, args.limit_per_op, args.workers,
                                                args.reduce_seconds, work / "campaign")
        cases = [(f.to_dict(), instances[f.instance_id].to_meta(), dict(instances[f.instance_id].arrays))
                 for f in findings]
    cases_file.write_bytes(pickle.dumps(cases))
    print(f"{len(cases)} findings in {time.monotonic() - t0:.0f} s; rendering", flush=True)
    after = render_after(cases, work / "after")
    before = render_before(args.before, cases_file, work / "before")
    result = {"findings": len(cases), "before_revision": args.before,
              "targets": sorted({fd["target"] for fd, _, _ in cases}),
              "symptoms": sorted({fd["symptom"] for fd, _, _ in cases})}
    for name, rows in (("before", before), ("after", after)):
        result[name] = {
            "standalone_lines": stats([_lines(r["repro"]) for r in rows if r.get("repro")]),
            "test_style_lines": stats([_lines(r["test"]) for r in rows if r.get("test")]),
            "render_errors": [r for r in rows if "repro_error" in r or "test_error" in r]}
        if name == "after":
            result[name]["test_style_paste_lines"] = stats([r["paste"] for r in rows if r.get("paste")])
        if args.check:
            from dlci.findings.test_style import check_test
            scripts = [Path(r["repro"]) for r in rows if r.get("repro")]
            tests = [Path(r["test"]) for r in rows if r.get("test")]
            with ThreadPoolExecutor(args.workers) as pool:
                result[name]["reproduce_alone"] = sum(pool.map(_run, scripts))
                # the expectation line both renderers write says how the test must fail
                result[name]["test_style_reproduces"] = sum(pool.map(lambda p: check_test(p, timeout=600), tests))
    per = {r["id"]: r for r in after}
    result["per_finding"] = [
        {"id": fd["id"], "target": fd["target"], "operator": fd["operator"], "symptom": fd["symptom"],
         "before": _lines(b["repro"]) if b.get("repro") else None,
         "after": _lines(per[fd["id"]]["repro"]) if per[fd["id"]].get("repro") else None,
         "paste_after": per[fd["id"]].get("paste")}
        for (fd, _, _), b in zip(cases, before)]
    print(json.dumps({k: v for k, v in result.items() if k != "per_finding"}, indent=1))
    for row in result["per_finding"]:
        print(f"  {row['id']} {row['target']:<26} {row['operator']:<26} {row['symptom']:<22} "
              f"standalone {row['before']} -> {row['after']}, paste block {row['paste_after']}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
