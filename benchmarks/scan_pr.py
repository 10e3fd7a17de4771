"""PR scanning on the bundled sample PRs: time to the first confirmed finding, and APFD of the diff-aware order.

    .venv/bin/python benchmarks/scan_pr.py [--budget 300] [--distractors 20] [--skip-apfd] [--skip-latency]

Latency: each sample PR is scanned by a fresh `python -m dlci scan` process; the clock starts before the process
does (imports, sample build, diff, source loading, worktree and worker start-up all count) and stops when the first
failure that turns out new in the PR is confirmed (stats.confirmed_at). Every sample with an injected bug must yield a finding that is new
in the PR; the refactor and docs-only samples must yield none.

APFD: a pool of tests = the instances of the touched operators plus those of `--distractors` other operators, each
through every TVM entry point that accepts it. Every test runs once on the head and (where it fails) on the base
revision; a test detects the PR's fault when it fails on head and not the same way on base. The same tests are then
ordered three ways: dlci's diff-aware order (diff-selected instances on the targets that reach the changed
converter first, OPERA diversity within), plain OPERA order, and random orders (mean of 20).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlci import samples  # noqa: E402


def latency(names: list[str], budget: float, workdir: Path) -> list[dict]:
    rows = []
    for name in names:
        out = workdir / f"latency-{name}"
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-m", "dlci", "scan", "--sample", name, "--out", str(out),
                               "--budget", str(budget), "--fail-on", "never"], capture_output=True, text=True)
        wall = time.time() - t0
        doc = json.loads((out / "findings.json").read_text())
        new = [f for f in doc["findings"] if f.get("new_in_pr")]
        # the clock stops at the first confirmation of a finding that is new in the PR (not an old bug of the base)
        times = [doc["stats"]["confirmed_at"][f["signature"]] for f in new
                 if f["signature"] in doc["stats"].get("confirmed_at", {})]
        first = min(times) if times else None
        rows.append({"sample": name, "expect_finding": samples.SAMPLES[name].expect_finding, "exit": proc.returncode,
                     "seconds_to_first_confirmed": round(first - t0, 1) if first else None,
                     "new_findings": len(new), "already_on_base": len(doc["findings"]) - len(new),
                     "operators": sorted({f["operator"] for f in new}),
                     "reproducers_fail_on_head_pass_on_base": sum(1 for f in new if f.get("repro_checked")
                                                                  and f.get("repro_passes_on_base")),
                     "tests_run": doc["stats"]["tests_run"], "wall_seconds": round(wall, 1)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _run_all(tests, env: dict, workers: int = 2) -> dict:
    """(instance id, target) -> outcome dict, every test once in the sandboxed workers."""
    from dlci.exec import Engine, Job
    from dlci.targets import TARGETS
    results = {}
    jobs = [Job(id=f"{i.id}@{t}", func="dlci.testcase:execute_job", args=(i, t), instance_id=i.id, op=i.op,
                target=t, affinity=i.id) for i, t in tests]
    warm = sorted({m for _, t in tests for m in getattr(TARGETS[t], "warm_imports", ())})
    with Engine(workers=workers, timeout=120, memory_mb=3000, warm_imports=warm, env=env) as engine:
        engine.run(jobs, lambda job, res: results.__setitem__((job.instance_id, job.target), res))
    return results


def apfd_for(name: str, distractors: int, workdir: Path, seeds: int = 20) -> dict:
    from dlci import operators, profiles
    from dlci import sources as S
    from dlci.checkout import Checkout
    from dlci.config import Config
    from dlci.diff import GitRepo
    from dlci.outcome import Outcome, same_digest
    from dlci.plan import apfd, balanced
    from dlci.scan.selection import canonical_targets, runtime_defaults
    from dlci.targets import TARGETS

    repo_path, base, head = samples.build(name, workdir / f"apfd-{name}")
    repo = GitRepo(repo_path, base, head)
    analysis = profiles.analyse(repo)
    tvm_targets = {n: t for n, t in TARGETS.items() if n.startswith("tvm.") and t.available()}
    want = canonical_targets(analysis, tvm_targets)
    S.registry()
    everything = [i for src in ("opinfo", "module_db", "onnx_node") for i in S.load(src, limit_per_op=3)]
    touched_ops = {i.op for i in operators.select(everything, set(want))}
    others = sorted({i.op for i in everything} - touched_ops)
    rng = random.Random(0)
    chosen_ops = touched_ops | set(rng.sample(others, min(distractors, len(others))))
    pool = [i for i in everything if i.op in chosen_ops]
    tests = [(i, t) for i in pool for t, tgt in tvm_targets.items() if i.framework in tgt.frameworks]

    defaults = runtime_defaults(["tvm"])
    wd = Path(tempfile.mkdtemp(prefix="apfd-", dir=workdir))
    head_co = Checkout.create(repo_path, repo.head, wd, "head")
    base_co = Checkout.create(repo_path, repo.base, wd, "base")
    try:
        t0 = time.time()
        on_head = _run_all(tests, head_co.env(Config(), *defaults))
        failing = [(i, t) for i, t in tests if on_head.get((i.id, t), {}).get("status") in ("crash", "inconsistency")]
        on_base = _run_all(failing, base_co.env(Config(), *defaults)) if failing else {}
        run_seconds = time.time() - t0
    finally:
        head_co.remove()
        base_co.remove()
    detects = {}
    for i, t in failing:
        h = Outcome.from_dict(on_head[(i.id, t)])
        b = on_base.get((i.id, t))
        b = Outcome.from_dict(b) if b is not None else None
        same = b is not None and b.failed and (b.status, b.stage, b.symptom) == (h.status, h.stage, h.symptom) \
            and same_digest(h.digest, b.digest)
        if not same:
            detects[f"{i.id}@{t}"] = {"injected"}
    ids = [f"{i.id}@{t}" for i, t in tests]

    def per_instance(order, targets_of):
        return [f"{i.id}@{t}" for i in order for t in tvm_targets if i.framework in tvm_targets[t].frameworks
                and t in targets_of(i)]

    selected = operators.select(pool, set(want))
    sel_ids = {i.id for i in selected}
    reach = lambda i: {x for c in operators.instance_ops(i.op) & want.keys() for x in want[c]}  # noqa: E731
    first = per_instance(balanced(selected), reach)
    rest = [x for x in per_instance(balanced(pool), lambda i: set(tvm_targets)) if x not in set(first)]
    orders = {"diff_aware": first + rest, "opera": per_instance(balanced(pool), lambda i: set(tvm_targets))}
    row = {"sample": name, "tests": len(ids), "instances": len(pool), "operators": len(chosen_ops),
           "diff_selected_tests": len(first), "detecting_tests": len(detects), "run_seconds": round(run_seconds, 1)}
    for key, order in orders.items():
        assert sorted(order) == sorted(ids), key
        row[f"apfd_{key}"] = round(apfd(order, detects), 4)
        row[f"first_detecting_position_{key}"] = next((n for n, x in enumerate(order, 1) if x in detects), None)
    rand = []
    for seed in range(seeds):
        order = list(ids)
        random.Random(seed).shuffle(order)
        rand.append(apfd(order, detects))
    row["apfd_random_mean"] = round(statistics.mean(rand), 4)
    row["selected_instances_outside_selection"] = len(sel_ids - {i.id for i in pool})
    print(json.dumps(row), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--distractors", type=int, default=20)
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--skip-apfd", action="store_true")
    args = ap.parse_args()
    buggy = [n for n, s in samples.SAMPLES.items() if s.expect_finding]
    clean = [n for n, s in samples.SAMPLES.items() if not s.expect_finding]
    with tempfile.TemporaryDirectory(prefix="dlci-bench-") as tmp:
        work = Path(tmp)
        summary = {"benchmark": "scan_pr", "cpu_count": os.cpu_count()}
        if not args.skip_latency:
            rows = latency(buggy + clean, args.budget, work)
            found = [r for r in rows if r["expect_finding"]]
            summary["latency"] = {
                "median_seconds_to_first_confirmed": statistics.median(
                    [r["seconds_to_first_confirmed"] or float("inf") for r in found]),
                "injected_bugs_found_new": sum(1 for r in found if r["new_findings"] > 0),
                "injected_bugs": len(found),
                "false_new_findings_on_clean_prs": sum(r["new_findings"] for r in rows if not r["expect_finding"]),
                "rows": rows}
        if not args.skip_apfd:
            summary["apfd"] = [apfd_for(n, args.distractors, work) for n in buggy]
        print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
