"""Reproducer checks: the same reproducers run alone in fresh interpreters and as children of warm interpreters
(dlci.findings.warm), both two at a time; the verdicts must agree (a warm "does not reproduce" is never taken:
check_repro then asks a fresh interpreter, which this benchmark counts as the warm side's time too).

    .venv/bin/python benchmarks/repro_checks.py [--from DLCI_OUT_DIR] [--workers 2] [--json PATH]

Without --from, a short `dlci test` (TVM's FX importer over a few operators, reproducers not checked) makes them.
"""
from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]  # benchmarks/bisect.py shadows bisect

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_reproducers(out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "dlci", "test", "--ops", "conv_transpose2d,avg_pool2d,softplus,elu",
                    "--targets", "tvm.from_fx,tvm.from_exported_program", "--budget", "120", "--no-reduce",
                    "--no-repro-check", "--out", str(out)], cwd=ROOT, check=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="source", help="a dlci output folder whose repro/*.py to check")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    from dlci.findings.repro import check_repro, scrubbed_env
    from dlci.findings.warm import WarmPool
    source = Path(args.source) if args.source else make_reproducers(Path(tempfile.mkdtemp(prefix="dlci-rc-")))
    scripts = sorted((source / "repro").glob("F*.py"))
    if not scripts:
        sys.exit(f"no reproducer under {source / 'repro'}")
    # each side writes its own logs (.fresh.log, .warm.log) beside the scripts
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        fresh = list(pool.map(lambda s: check_repro(s, log_suffix=".fresh.log"), scripts))
    fresh_s = time.monotonic() - t0
    t0 = time.monotonic()
    with WarmPool(scrubbed_env(), args.workers) as warm, ThreadPoolExecutor(args.workers) as pool:
        warmed = list(pool.map(lambda s: check_repro(s, log_suffix=".warm.log", warm=warm), scripts))
    warm_s = time.monotonic() - t0
    doc = {"reproducers": len(scripts), "workers": args.workers,
           "fresh": {"seconds": round(fresh_s, 1), "per_check_s": round(fresh_s * args.workers / len(scripts), 2),
                     "reproduce": sum(fresh)},
           "warm": {"seconds": round(warm_s, 1), "per_check_s": round(warm_s * args.workers / len(scripts), 2),
                    "reproduce": sum(warmed),
                    "from_warm_child": sum(1 for s in scripts
                                           if s.with_suffix(".warm.log").read_text().startswith("exit 1 (a child"))},
           "same_verdicts": fresh == warmed, "speedup": round(fresh_s / warm_s, 2) if warm_s else None}
    print(json.dumps(doc, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
