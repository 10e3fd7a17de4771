"""Bisection over real OpenVINO releases: installs and wall time with a cold and a warm cache, reproducer runs
against ceil(log2 N); and a release-regression run (`dlci test --against`) side by side with the same run without.

    .venv/bin/python benchmarks/bisect.py [--script benchmarks/bisect_repro/ov_exp_near_overflow.py]
        [--package openvino] [--good V] [--bad V] [--skip-cold] [--json FILE]
        [--against openvino==2025.4.1 [--ops OPS] [--targets TARGETS] [--budget S] [--no-bisect]]

The bug: OpenVINO's CPU exp returns +inf just below float32's overflow (found in 2026.4.1). The whole bisection
runs twice in this process through dlci.bisect.releases.bisect_releases, exactly what `dlci bisect` runs:
cold (an empty dlci cache and an empty pip cache: every wheel is downloaded from the index) and warm (both kept).
Then the search alone, with a synthetic oracle over N candidates and every position of the transition: the
reproducer runs it needs against the bound 2 + ceil(log2(N-1)) (two endpoints, then halving).

--against: the older release's layer built into an empty folder with an empty pip cache (the cold install), then
two `python -m dlci test` processes with the same operators, targets and budget, one plain and one with
`--against` (the machine's dlci cache: the layer is then warm): wall time of each, the findings of each, and how the
`--against` run classified them (new in the installed release / already in the older one / not compared).
"""
from __future__ import annotations

import os
import sys

# run as a script, this file's folder comes first on sys.path and its name shadows the standard library's bisect
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlci.bisect import search  # noqa: E402
from dlci.bisect.oracle import BAD, GOOD, Verdict  # noqa: E402
from dlci.bisect.releases import bisect_releases  # noqa: E402


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def real_run(label: str, args, cache: Path, pip_cache: Path) -> dict:
    os.environ["DLCI_CACHE_DIR"] = str(cache)
    os.environ["PIP_CACHE_DIR"] = str(pip_cache)
    t0 = time.monotonic()
    res = bisect_releases(Path(args.script), args.package, good=args.good, bad=args.bad,
                          say=lambda s: print(f"  [{label} {time.monotonic() - t0:6.1f}s] {s}", flush=True))
    wall = time.monotonic() - t0
    d = res.to_dict()
    n = d["candidates"]
    return {"run": label, "wall_s": round(wall, 1), "releases_in_range": n, "range": d["range"],
            "first_bad": d["first_bad"], "last_good": d["last_good"], "layers_used": d["installs"],
            "layers_installed": d["installed_now"], "layers_cached": d["cached"], "not_installable": d["failed"],
            "install_s": d["install_seconds"], "reproducer_runs": d["reproducer_runs"],
            "bound_2_plus_ceil_log2": 2 + math.ceil(math.log2(n - 1)),
            "skipped": [t["candidate"] for t in d["tried"] if t["verdict"] == "skip"],
            "tried": [(t["candidate"], t["verdict"]) for t in d["tried"]],
            "pip_cache_mb": round(_du(pip_cache) / 2**20), "layers_mb": round(_du(cache / "bisect") / 2**20),
            "report": d["report"]}


def search_only(sizes=(10, 27, 100, 1000)) -> list[dict]:
    rows = []
    for n in sizes:
        cands = list(range(n))
        runs = []
        for first_bad in range(1, n):
            def test(c, fb=first_bad):
                return Verdict(str(c), GOOD if c < fb else BAD, ran=True)
            r = search.bisect([str(c) for c in cands], lambda c: test(int(c)))
            assert r.first_new == str(first_bad)
            runs.append(r.runs())
        rows.append({"N": n, "runs_mean": round(sum(runs) / len(runs), 2), "runs_max": max(runs),
                     "bound_2_plus_ceil_log2": 2 + math.ceil(math.log2(n - 1)), "ceil_log2_N": math.ceil(math.log2(n))})
    return rows


AGAINST_OPS = "exp,expm1,softplus,sigmoid,tanh,log1p,elu,gelu,erf,sinh,cosh,pow"


def against_runs(args, tmp: Path) -> dict:
    import subprocess
    from dlci.bisect.attribution import parse_against
    from dlci.bisect.releases import ReleaseEnvs
    package, version = parse_against(args.against)
    saved = os.environ.get("PIP_CACHE_DIR")
    os.environ["PIP_CACHE_DIR"] = str(tmp / "pip-cold")
    t0 = time.monotonic()
    layer = ReleaseEnvs(root=tmp / "layers-cold").get(package, version)
    cold_install = time.monotonic() - t0
    if saved is None:
        os.environ.pop("PIP_CACHE_DIR")
    else:
        os.environ["PIP_CACHE_DIR"] = saved
    runs = {}
    for label, extra in (("plain", []), ("against", ["--against", args.against])):
        out = tmp / label
        cmd = [sys.executable, "-m", "dlci", "test", "--ops", args.ops, "--targets", args.targets, "--budget",
               str(args.budget), "--out", str(out)] + extra
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        doc = json.loads((out / "findings.json").read_text())
        runs[label] = {"wall_s": round(wall, 1), "exit": proc.returncode, "tests_valid": doc["stats"]["tests_valid"],
                       "findings": [(f["id"], f["target"], f["operator"], f["symptom"]) for f in doc["findings"]],
                       "doc": doc}
        print(f"  [{label}] {wall:.0f} s, exit {proc.returncode}, {len(doc['findings'])} findings", flush=True)
    doc = runs["against"].pop("doc")
    runs["plain"].pop("doc")
    summary = doc.get("against") or {}
    per_finding = [{"id": f["id"], "target": f["target"], "operator": f["operator"], "symptom": f["symptom"],
                    "new_in_release": f.get("new_in_release"), "older": (f.get("against") or {}).get("status"),
                    "reproducer_on_older": ((f.get("against") or {}).get("reproducer") or {}).get("verdict")}
                   for f in doc["findings"]]
    return {"spec": args.against, "ops": args.ops, "targets": args.targets, "budget_s": args.budget,
            "layer": layer.delta, "layer_cold_install_s": round(cold_install, 1),
            "layer_in_run": "cached" if summary.get("layer_from_cache") else "installed",
            "prepare_s": summary.get("prepare_seconds"), "plain": runs["plain"], "against": runs["against"],
            "new_in_installed": len(summary.get("new", [])), "already_in_older": len(summary.get("already", [])),
            "not_compared": len(summary.get("not_compared", [])), "line": summary.get("line"),
            "per_finding": per_finding}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", default=str(ROOT / "benchmarks" / "bisect_repro" / "ov_exp_near_overflow.py"))
    ap.add_argument("--package", default="openvino")
    ap.add_argument("--good")
    ap.add_argument("--bad")
    ap.add_argument("--skip-cold", action="store_true", help="only the warm run (with the machine's dlci cache)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--against", metavar="PACKAGE==VERSION", help="also measure a dlci test --against run")
    ap.add_argument("--ops", default=AGAINST_OPS, help="with --against: the operators")
    ap.add_argument("--targets", default="openvino.pytorch,openvino.onnx", help="with --against: the targets")
    ap.add_argument("--budget", type=float, default=300, help="with --against: each run's budget")
    ap.add_argument("--no-bisect", action="store_true", help="only the --against measurement")
    args = ap.parse_args()
    rows = []
    against = None
    machine_cache = os.environ.get("DLCI_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="dlci-bench-bisect-") as tmp:
        if args.against:
            against = against_runs(args, Path(tmp))
        cache, pip_cache = Path(tmp) / "cache", Path(tmp) / "pip"
        if args.skip_cold:
            cache = Path(machine_cache or Path.home() / ".cache" / "dlci")
            pip_cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
        elif not args.no_bisect:
            rows.append(real_run("cold", args, cache, pip_cache))
        if not args.no_bisect:
            rows.append(real_run("warm", args, cache, pip_cache))
    if against:
        a = against
        print(f"\n--against {a['spec']}: layer {', '.join(a['layer'])}: cold install {a['layer_cold_install_s']} s "
              f"(empty pip cache); in the run: {a['layer_in_run']}, {a['prepare_s']} s to check the spec and get it")
        print(f"  plain run {a['plain']['wall_s']} s, {len(a['plain']['findings'])} findings; --against run "
              f"{a['against']['wall_s']} s, {len(a['against']['findings'])} findings; budget {a['budget_s']:.0f} s each")
        print(f"  {a['line']}")
        for f in a["per_finding"]:
            print(f"    {f['id']} {f['operator']} on {f['target']} ({f['symptom']}): new_in_release "
                  f"{f['new_in_release']}, older: {f['older']}, its reproducer on the older release: "
                  f"{f['reproducer_on_older']}")
    if args.no_bisect:
        if args.json:
            Path(args.json).write_text(json.dumps({"against": against}, indent=2) + "\n")
        return
    print(f"\n{'run':5} {'wall s':>7} {'N':>3} {'layers used/new/cached':>23} {'runs':>5} {'bound':>5}  answer")
    for r in rows:
        print(f"{r['run']:5} {r['wall_s']:7.1f} {r['releases_in_range']:3} "
              f"{r['layers_used']:>11}/{r['layers_installed']}/{r['layers_cached']:<9} {r['reproducer_runs']:5} "
              f"{r['bound_2_plus_ceil_log2']:5}  {r['report']}")
        print(f"      tried: {', '.join(f'{c} {v}' for c, v in r['tried'])}; pip cache {r['pip_cache_mb']} MB, "
              f"layers {r['layers_mb']} MB, install {r['install_s']} s")
    syn = search_only()
    print(f"\n{'N':>5} {'runs mean':>9} {'runs max':>8} {'2+ceil(log2(N-1))':>18}")
    for s in syn:
        print(f"{s['N']:5} {s['runs_mean']:9} {s['runs_max']:8} {s['bound_2_plus_ceil_log2']:18}")
    if args.json:
        Path(args.json).write_text(json.dumps({"real": rows, "search_only": syn, "against": against}, indent=2)
                                   + "\n")


if __name__ == "__main__":
    main()
