"""Graph fuzzing: MCTS vs random block choice (the graph-fuzzing paper's RQ2), same generator, budget, targets and
seeds, each run a fresh `python -m dlci fuzz` process.

    .venv/bin/python benchmarks/fuzz.py [--budget 240] [--seeds 0,1] [--targets tvm.from_onnx,openvino.onnx,onnxruntime]
                                        [--work DIR] [--json PATH] [--together]
    .venv/bin/python benchmarks/fuzz.py --offline 150 [--seeds 0,1]

Per strategy (mean over the seeds): each operator-level coverage criterion (OTC, IDC, ODC, SEC, SPC) and OLC at
fixed points of the testing time and at its end, networks kept, distinct confirmed findings (signatures; the ones a
standalone reproducer reproduces alone) and, of those, the findings whose reduced graph needs several operators
(every operator alone passes). Prints one JSON document (and writes it with --json); each run's own output folder
stays under --work for review (findings.json, report.md, repro/). --together runs the two strategies of a seed at the
same time instead of one after the other: on a machine shared with other work, load drifts then hit both alike
(each gets half the machine, so the figures are lower than a run alone).

--offline N: no target runs, only the generator, the coverage and the strategies' feedback (MCTS rewarded as if
every test passed, a network's cost its size): coverage after N networks and after fixed numbers of operators
generated, per strategy and seed. Free of machine load; it says what the choice of blocks is worth per network and
per operator, not per second.
"""
from __future__ import annotations

import sys
from pathlib import Path

# this script's folder must not shadow the standard library (benchmarks/bisect.py would stand in for `bisect`)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import json
import statistics
import subprocess
import tempfile
import time

ROOT = Path(__file__).resolve().parent.parent
CRITERIA = ("OTC", "IDC", "ODC", "SEC", "SPC", "OLC")
STRATEGIES = ("mcts", "random")


def run_one(strategy: str, seed: int, budget: float, targets: str, out: Path) -> dict:
    return finish(start(strategy, seed, budget, targets, out))


def start(strategy: str, seed: int, budget: float, targets: str, out: Path) -> tuple:
    cmd = [sys.executable, "-m", "dlci", "fuzz", "--strategy", strategy, "--seed", str(seed), "--budget",
           str(budget), "--targets", targets, "--out", str(out), "--fail-on", "never"]
    # stderr to a file, not a pipe: with two runs at once an unread pipe would stall the one not waited on
    out.parent.mkdir(parents=True, exist_ok=True)
    err = open(out.parent / f"{out.name}.stderr", "w+")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, text=True, cwd=ROOT)
    return strategy, seed, out, proc, time.monotonic(), err


def finish(started: tuple) -> dict:
    strategy, seed, out, proc, t0, err = started
    proc.wait()
    wall = time.monotonic() - t0
    err.seek(0)
    stderr = err.read()
    err.close()
    doc = json.loads((out / "findings.json").read_text()) if (out / "findings.json").exists() else {}
    fz = (doc.get("stats") or {}).get("fuzz") or {}
    findings = doc.get("findings") or []
    return {"strategy": strategy, "seed": seed, "exit": proc.returncode, "wall_seconds": round(wall, 1),
            "coverage": fz.get("coverage"), "timeline": fz.get("timeline") or [],
            "networks": fz.get("networks"), "tests_run": (doc.get("stats") or {}).get("tests_run"),
            "findings": [{"id": f["id"], "target": f["target"], "operator": f["operator"], "symptom": f["symptom"],
                          "signature": f["signature"], "repro_checked": f.get("repro_checked"),
                          "multi_operator_only": (f.get("graph") or {}).get("multi_operator_only"),
                          "operators": (f.get("graph") or {}).get("node_types")} for f in findings],
            "out": str(out), "stderr_tail": stderr[-600:] if proc.returncode not in (0, 1) else ""}


def at(timeline: list[dict], t: float) -> dict:
    """The coverage reached by time ``t`` (seconds of testing)."""
    last = {k: 0.0 for k in CRITERIA}
    for p in timeline:
        if p["t"] > t:
            break
        last = p
    return {k: last.get(k, 0.0) for k in CRITERIA}


def summary(runs: list[dict], points: list[float]) -> dict:
    out = {}
    for s in STRATEGIES:
        mine = [r for r in runs if r["strategy"] == s]
        if not mine:
            continue
        final = {k: round(statistics.mean((r["coverage"] or {}).get(k, 0.0) for r in mine), 4) for k in CRITERIA}
        over_time = {f"{int(t)}s": {k: round(statistics.mean(at(r["timeline"], t)[k] for r in mine), 4)
                                    for k in CRITERIA} for t in points}
        found = [f for r in mine for f in r["findings"] if f["repro_checked"] is not False]
        out[s] = {"final": final, "over_time": over_time,
                  "networks": round(statistics.mean((r["networks"] or {}).get("kept", 0) for r in mine), 1),
                  "findings_per_run": round(statistics.mean(len(r["findings"]) for r in mine), 2),
                  "distinct_findings": len({f["signature"] for f in found}),
                  "multi_operator_findings": len({f["signature"] for f in found if f["multi_operator_only"]}),
                  "multi_operator_per_run": round(statistics.mean(
                      len({f["signature"] for f in r["findings"] if f["multi_operator_only"]}) for r in mine), 2)}
    if len(out) == 2:
        m, r = out["mcts"], out["random"]
        out["mcts_ahead"] = {k: m["final"][k] > r["final"][k] for k in CRITERIA}
        out["mcts_ahead"]["distinct_findings"] = m["distinct_findings"] >= r["distinct_findings"]
    return out


def offline(networks: int, seeds: list[int]) -> dict:
    import numpy as np

    from dlci.fuzz.corpus import load_corpus
    from dlci.fuzz.coverage import Coverage
    from dlci.fuzz.generate import generate
    from dlci.fuzz.search import make_strategy
    from dlci.models.graph import GraphError
    marks = [n for n in (300, 600, 1000, 1500) if n < networks * 8]
    out = {}
    for s in STRATEGIES:
        for seed in seeds:
            corpus = load_corpus()
            cov = Coverage(corpus)
            rng = np.random.default_rng(seed)
            strat = make_strategy(s, corpus, cov, rng)
            sizes: list[int] = []
            points = {}
            while len(sizes) < networks:
                choice = strat.choose()
                try:
                    gen = generate(corpus, choice.blocks, choice.mutations, rng)
                except GraphError:
                    strat.credit(choice, {})
                    strat.feedback(choice, 0.0)
                    continue
                if not cov.adds(gen.features):
                    strat.credit(choice, {})
                    strat.feedback(choice, 0.0)
                    continue
                cov.add(gen.features)
                sizes.append(len(gen.graph.nodes))
                strat.credit(choice, {op: cov.balanced(g, per_op=True) for op, g in cov.last_op_gains.items()})
                rel = max(0.25, sizes[-1] / float(np.mean(sizes)))
                strat.charge(choice, rel)
                strat.feedback(choice, 0.5 + 0.5 * min(1.0, cov.balanced(cov.last_gains) / (2 * rel)))
                for m in marks:
                    if sum(sizes) >= m and f"{m} operators" not in points:
                        points[f"{m} operators"] = {k: round(v, 4) for k, v in cov.figures().items()}
            points[f"{networks} networks"] = {k: round(v, 4) for k, v in cov.figures().items()}
            out.setdefault(s, {})[f"seed{seed}"] = {"operators": sum(sizes), **points}
    for s in STRATEGIES:  # the mean over the seeds, where every seed reached the point
        keys = set.intersection(*(set(v) for v in out[s].values())) - {"operators"}
        out[s]["mean"] = {k: {c: round(statistics.mean(out[s][f"seed{x}"][k][c] for x in seeds), 4)
                              for c in CRITERIA} for k in sorted(keys)}
    out["mcts_ahead"] = {k: {c: out["mcts"]["mean"][k][c] > out["random"]["mean"][k][c] for c in CRITERIA}
                         for k in out["mcts"]["mean"] if k in out["random"]["mean"]}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=240.0)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--targets", default="tvm.from_onnx,openvino.onnx,onnxruntime")
    ap.add_argument("--work", default=None, help="folder for the runs' outputs (default: a temporary one)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--together", action="store_true", help="run a seed's two strategies at the same time")
    ap.add_argument("--offline", type=int, default=0, metavar="N",
                    help="no targets: coverage per network and per operator generated, N networks per run")
    args = ap.parse_args(argv)
    if args.offline:
        doc = {"offline": args.offline, "seeds": [int(s) for s in args.seeds.split(",") if s.strip()]}
        doc["summary"] = offline(args.offline, doc["seeds"])
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1))
        print(json.dumps(doc["summary"]["mcts_ahead"], indent=1))
        return 0
    work = Path(args.work or tempfile.mkdtemp(prefix="dlci-bench-fuzz-"))
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    runs = []
    for seed in seeds:
        if args.together:
            started = [start(s, seed, args.budget, args.targets, work / f"{s}-seed{seed}") for s in STRATEGIES]
            done = [finish(p) for p in started]
        else:  # one after the other
            done = [run_one(s, seed, args.budget, args.targets, work / f"{s}-seed{seed}") for s in STRATEGIES]
        for r in done:
            print(json.dumps({k: r[k] for k in ("strategy", "seed", "exit", "wall_seconds", "coverage", "networks")}
                             | {"findings": len(r["findings"])}), file=sys.stderr, flush=True)
            runs.append(r)
    testing = 0.6 * args.budget
    points = [round(testing * f) for f in (0.25, 0.5, 0.75, 1.0)]
    doc = {"budget": args.budget, "seeds": seeds, "together": args.together, "targets": args.targets.split(","),
           "work": str(work),
           "summary": summary(runs, points), "runs": runs}
    text = json.dumps(doc, indent=1)
    if args.json:
        Path(args.json).write_text(text)
    print(json.dumps(doc["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
