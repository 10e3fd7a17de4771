"""Bisection over real OpenVINO releases: installs and wall time with a cold and a warm cache, reproducer runs
against ceil(log2 N).

    .venv/bin/python benchmarks/bisect.py [--script benchmarks/bisect_repro/ov_exp_near_overflow.py]
        [--package openvino] [--good V] [--bad V] [--skip-cold] [--json FILE]

The bug: OpenVINO's CPU exp returns +inf just below float32's overflow (found in 2026.4.1). The whole bisection
runs twice in this process through dlci.bisect.releases.bisect_releases, exactly what `dlci bisect` runs:
cold (an empty dlci cache and an empty pip cache: every wheel is downloaded from the index) and warm (both kept).
Then the search alone, with a synthetic oracle over N candidates and every position of the transition: the
reproducer runs it needs against the bound 2 + ceil(log2(N-1)) (two endpoints, then halving).
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", default=str(ROOT / "benchmarks" / "bisect_repro" / "ov_exp_near_overflow.py"))
    ap.add_argument("--package", default="openvino")
    ap.add_argument("--good")
    ap.add_argument("--bad")
    ap.add_argument("--skip-cold", action="store_true", help="only the warm run (with the machine's dlci cache)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="dlci-bench-bisect-") as tmp:
        cache, pip_cache = Path(tmp) / "cache", Path(tmp) / "pip"
        if args.skip_cold:
            cache = Path(os.environ.get("DLCI_CACHE_DIR") or Path.home() / ".cache" / "dlci")
            pip_cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
        else:
            rows.append(real_run("cold", args, cache, pip_cache))
        rows.append(real_run("warm", args, cache, pip_cache))
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
        Path(args.json).write_text(json.dumps({"real": rows, "search_only": syn}, indent=2) + "\n")


if __name__ == "__main__":
    main()
