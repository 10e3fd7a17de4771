"""A PR that touches a helper every ONNX converter calls: what a maintainer reads, before and after.

    .venv/bin/python benchmarks/helper_pr.py [--before 64c20e1] [--budget 240] [--json FILE]

The bundled sample ``tvm-onnx-get-constant-refactor`` renames a local in TVM's ``get_constant`` (behaviour-preserving;
26 ONNX converters call it, so all are selected). The same PR is scanned twice in one run, by fresh ``python -m dlci
scan`` processes with the same budget, against one repository built from this tree's sample: by git revision ``--before`` (its dlci package extracted with `git archive`)
and by this tree. Each finding listed is put in one class by what its own message and instance show:

- ``limitation``: the converter states a limit of its own ("Only constant axes currently supported");
- ``harness``: the environment was incomplete ("Cannot find TVM include path", libtvm);
- ``exporter``: an ONNX frontend charged with a torch instance that `torch.onnx` itself exports wrongly (the exported
  model, run by ONNX Runtime, disagrees with torch eager on that instance);
- ``frontend``: none of those: a failure of the frontend itself, the kind a maintainer would call a bug.

It prints one JSON document: per run, the findings (new in the PR / already on base) and the classes; wall time.
"""
from __future__ import annotations

import os
import sys

# run as a script, this file's folder comes first on sys.path, and benchmarks/bisect.py shadows the standard library's
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import io
import json
import re
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # noqa: E402

SAMPLE = "tvm-onnx-get-constant-refactor"
LIMITATION = re.compile(r"currently supported|must be (a )?constant|only constant|not (yet )?supported|unsupported",
                        re.I)
HARNESS = re.compile(r"Cannot find (TVM include path|libtvm)")
ONNX_FRONTENDS = ("tvm.from_onnx", "openvino.onnx", "onnxruntime")


def extract(rev: str, dest: Path) -> Path:
    """The dlci package of git revision ``rev``, as a directory to put on PYTHONPATH."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "dlci"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def scan(tree: Path, repo: tuple, out: Path, budget: float) -> dict:
    path, base, head = repo
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dlci", "scan", "--repo", str(path), "--base", base, "--head", head,
                           "--budget", str(budget), "--out", str(out), "--workers", "2"],
                          cwd=tree, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    return {"exit": proc.returncode, "wall_seconds": round(wall, 1), "doc": doc, "stderr_tail": proc.stderr[-1500:]}


def exported_wrongly(instance) -> bool:
    """Does torch.onnx's export of this torch instance, run by ONNX Runtime, disagree with torch eager?"""
    from dlci.outcome import INCONSISTENT
    from dlci.testcase import execute
    return execute(instance, "torch.onnx").status == INCONSISTENT


def classify(finding: dict, out: Path) -> str:
    text = f"{finding.get('message', '')}\n{finding.get('traceback', '')}"
    if HARNESS.search(text):
        return "harness"
    if finding.get("oracle") == "crash" and LIMITATION.search(finding.get("message", "")):
        return "limitation"
    if finding["target"] in ONNX_FRONTENDS and finding["oracle"] == "inconsistency":
        instance = _instance(finding, out)
        if instance is not None and instance.framework == "torch" and exported_wrongly(instance):
            return "exporter"
    return "frontend"


def _instance(finding: dict, out: Path):
    """One of the finding's (unreduced) instances, rebuilt from the migration sources."""
    from dlci.sources.selection import gather
    ids = [finding["instance_id"], *finding.get("instances", [])]
    found = {i.id: i for i in gather(["opinfo", "module_db", "onnx_node"], [finding["operator"].split("::")[-1]],
                                     limit_per_op=None, frameworks={"torch", "onnx"})}
    return next((found[i] for i in ids if i in found), None)


def summarise(run: dict, out: Path) -> dict:
    findings = run["doc"].get("findings", [])
    rows = []
    for f in findings:
        rows.append({"id": f["id"], "target": f["target"], "operator": f["operator"], "symptom": f["symptom"],
                     "new_in_pr": f.get("new_in_pr"), "class": classify(f, out),
                     "message": (f.get("message") or "").splitlines()[0][:120] if f.get("message") else ""})
    classes = {}
    for r in rows:
        classes[r["class"]] = classes.get(r["class"], 0) + 1
    stats = run["doc"].get("stats", {})
    return {"exit": run["exit"], "wall_seconds": run["wall_seconds"], "tests_run": stats.get("tests_run"),
            "findings": len(rows), "new_in_pr": sum(1 for r in rows if r["new_in_pr"] is True),
            "on_base": sum(1 for r in rows if r["new_in_pr"] is False), "classes": classes, "rows": rows,
            **({"stderr_tail": run["stderr_tail"]} if run["exit"] not in (0, 1) else {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="64c20e1", help="git revision of dlci to compare with")
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--reuse-before", type=Path,
                    help="a previous run's --json: take its 'before' run (same sample, budget and machine) instead of "
                         "scanning again (the old tree's scan ignores the budget after testing: ~25 min)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dlci-helper-pr-"))
    from dlci import samples
    before_tree = extract(args.before, work / "before")
    repo = samples.build(SAMPLE, work / "repo")  # the PR, built once, scanned by both (the older tree may lack it)
    result = {"benchmark": "helper_pr", "sample": SAMPLE, "budget": args.budget, "cpu_count": os.cpu_count()}
    if args.reuse_before:
        result["before"] = {**json.loads(args.reuse_before.read_text())["before"], "reused_from": str(args.reuse_before)}
    for name, tree in (("before", before_tree), ("after", ROOT)):
        if name in result:
            continue
        out = work / f"out-{name}"
        run = scan(tree, repo, out, args.budget)
        result[name] = summarise(run, out)
        result[name]["revision"] = args.before if name == "before" else "this tree"
        print(json.dumps({name: {k: v for k, v in result[name].items() if k != "rows"}}), flush=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
