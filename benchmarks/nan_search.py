"""NaN/Inf search: dlci.nan's gradient-guided search (GRIST-style: the program's random inputs and weights pushed by
back-propagation toward the invalid domain of one vulnerable operation at a time, with snap moves to exact collapses)
side by side with the baseline, re-running the program with fresh random seeds, on every bundled program
(dlci/nan/programs), with the same budget.

    .venv/bin/python benchmarks/nan_search.py [--budget 30] [--seeds 3] [--programs a,b] [--rate-runs 200]
                                              [--ablation] [--quick]

Per program and strategy: detections over the seeds, detections at the expected operation and line, and the median
time to the first NaN/Inf, where a miss counts as the whole budget (so a speedup over a strategy that missed is a
lower bound). Buggy programs give the detection rates and speedups; guarded twins give the false positives (any
NaN/Inf reported on them is one). Totals are given for all programs and for two groups: the exact-collapse family
(COLLAPSE: a variance, a norm or a distance exactly 0, a cosine exactly 1; added with the snap moves) and the others.
--ablation also runs the gradient search without snap moves (strategy "nosnap"). --rate-runs N also runs each
program N times unmodified (seeds 0..N-1) and reports how often it goes NaN/Inf on its own, the chance the baseline
has per run.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dlci.nan.programs import PROGRAMS, Program, get, op_matches  # noqa: E402

STRATEGIES = ["gradient", "random"]  # "nosnap" joins with --ablation
QUICK = ["torch_xent", "torch_arcface", "torch_embed_norm", "tf_churn", "torch_batch_std", "tf_batch_whiten",
         "torch_xent_guarded", "tf_xent_guarded", "torch_batch_std_guarded"]
# the exact-collapse family (and its guarded twins), added with the snap moves
COLLAPSE = {"torch_batch_std", "torch_direction", "torch_gram_std", "torch_unit_head", "tf_siamese", "tf_batch_whiten",
            "tf_angular", "tf_layer_std", "tf_gram_corr", "tf_unit_proj"}
COLLAPSE |= {f"{n}_guarded" for n in COLLAPSE}


def set_threads(n: int) -> None:
    """Pin both frameworks to n threads before they start their pools (the same for both strategies)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import torch
    torch.set_num_threads(n)
    import tensorflow as tf
    try:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    except RuntimeError:  # already initialised
        pass


def seed_all(prog: Program, seed: int) -> None:
    if prog.framework == "torch":
        import torch
        torch.manual_seed(seed)
    else:
        import keras
        keras.utils.set_random_seed(seed)


def plain_runs(prog: Program, runs: int) -> dict:
    """Run the program unmodified with seeds 0..runs-1: how often it returns NaN/Inf, and its time per run."""
    fn = prog.entry()
    bad, t0 = [], time.perf_counter()
    for seed in range(runs):
        seed_all(prog, seed)
        try:
            value = float(fn())
        except Exception:  # noqa: BLE001 - a crash is not a NaN, but it is worth seeing
            value = float("nan")
        if not math.isfinite(value):
            bad.append(seed)
    return {"runs": runs, "nonfinite": len(bad), "rate": round(len(bad) / runs, 4), "seeds": bad[:20],
            "ms_per_run": round(1000 * (time.perf_counter() - t0) / max(runs, 1), 1)}


def one_search(prog: Program, strategy: str, budget: float, seed: int, minimize: float) -> dict:
    from dlci.nan import load_program, search
    gc.collect()
    t0 = time.perf_counter()
    try:
        res = search(load_program(prog.spec), strategy="random" if strategy == "random" else "gradient",
                     budget=budget, seed=seed, minimize_seconds=minimize, snaps=strategy != "nosnap")
    except Exception as e:  # noqa: BLE001 - one failing search must not sink the table
        return {"strategy": strategy, "seed": seed, "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc()[-2000:], "found": False, "correct": False,
                "time": budget, "wall_s": round(time.perf_counter() - t0, 2)}
    found = bool(res.found)
    correct = found and op_matches(res.op, prog.expected_op) and res.line == prog.expected_line \
        and Path(str(res.file)).resolve() == prog.path
    first = res.seconds_to_first if found and res.seconds_to_first is not None else None
    return {"strategy": strategy, "seed": seed, "found": found, "correct": bool(correct),
            "kind": res.kind if found else None, "op": res.op if found else None,
            "line": res.line if found else None, "code": (res.code or "").strip() if found else None,
            "seconds_to_first": None if first is None else round(first, 3),
            "time": round(min(first, budget), 3) if first is not None else budget,  # a miss counts as the budget
            "runs": res.runs, "iterations": res.iterations, "rounds": res.rounds,
            "searched_s": round(res.seconds, 2), "wall_s": round(time.perf_counter() - t0, 2)}


def median(xs):
    return round(statistics.median(xs), 3) if xs else None


def summarise(prog: Program, rows: list[dict], budget: float) -> dict:
    out = {"program": prog.name, "framework": prog.framework, "buggy": prog.buggy,
           "group": "collapse" if prog.name in COLLAPSE else "other",
           "expected": f"{prog.expected_op} @ line {prog.expected_line}" if prog.buggy else None}
    for strategy in {r["strategy"] for r in rows}:
        mine = [r for r in rows if r["strategy"] == strategy]
        times = [r["time"] for r in mine]
        out[strategy] = {"seeds": len(mine), "found": sum(r["found"] for r in mine),
                         "correct": sum(r["correct"] for r in mine), "errors": sum("error" in r for r in mine),
                         "median_time_s": median(times),
                         "median_runs": median([r["runs"] for r in mine if "runs" in r]),
                         # a search that finds nothing must have used its budget (none stops early)
                         "min_searched_s_when_missed": min([r["searched_s"] for r in mine
                                                            if not r["found"] and "searched_s" in r], default=None),
                         "reported": sorted({f"{r['op']} @ {r['line']}" for r in mine if r["found"]})}
    if prog.buggy:
        g, r = out["gradient"]["median_time_s"], out["random"]["median_time_s"]
        out["speedup"] = round(r / g, 1) if g else None
        # a miss is counted at the budget: where a strategy missed in the median, its time is a floor
        out["random_missed"] = out["random"]["found"] < out["random"]["seeds"]
        out["gradient_missed"] = out["gradient"]["found"] < out["gradient"]["seeds"]
    return out


def totals(summaries: list[dict], budget: float) -> dict:
    buggy = [s for s in summaries if s["buggy"]]
    guarded = [s for s in summaries if not s["buggy"]]
    tot = {"budget_s": budget, "buggy_programs": len(buggy), "guarded_programs": len(guarded)}
    for strategy in [x for x in STRATEGIES if all(x in s for s in buggy)]:
        n = sum(s[strategy]["seeds"] for s in buggy)
        tot[strategy] = {
            "detection_rate": round(sum(s[strategy]["found"] for s in buggy) / n, 3) if n else None,
            "correct_op_line_rate": round(sum(s[strategy]["correct"] for s in buggy) / n, 3) if n else None,
            "programs_detected_every_seed": sum(s[strategy]["found"] == s[strategy]["seeds"] for s in buggy),
            "sum_median_time_s": round(sum(s[strategy]["median_time_s"] for s in buggy), 2),
            # over the searches that found it: the time to the first NaN/Inf of the reported finding
            "median_time_to_first_s": median([r["seconds_to_first"] for s in buggy for r in s["searches"]
                                              if r["strategy"] == strategy and r.get("seconds_to_first") is not None]),
            "min_searched_s_when_missed": min([x for s in summaries if strategy in s
                                               for x in [s[strategy]["min_searched_s_when_missed"]] if x is not None],
                                              default=None),
            "false_positives": sum(s[strategy]["found"] for s in guarded if strategy in s),
            "guarded_searches": sum(s[strategy]["seeds"] for s in guarded if strategy in s),
            "errors": sum(s[strategy]["errors"] for s in summaries if strategy in s)}
    speedups = [s["speedup"] for s in buggy if s.get("speedup")]
    if speedups:
        tot["speedup_geomean"] = round(math.exp(sum(math.log(x) for x in speedups) / len(speedups)), 1)
        g = tot["gradient"]["sum_median_time_s"]
        tot["speedup_of_summed_medians"] = round(tot["random"]["sum_median_time_s"] / g, 1) if g else None
        tot["speedup_note"] = ("misses are counted at the budget; the speedup is a lower bound wherever random missed "
                               f"({sum(s['random_missed'] for s in buggy)} of {len(buggy)} buggy programs)")
    return tot


def table(summaries: list[dict], budget: float) -> str:
    head = (f"{'program':26s} {'fw':5s} {'grad found':>10s} {'correct':>7s} {'median s':>8s}   "
            f"{'rand found':>10s} {'correct':>7s} {'median s':>8s}  {'speedup':>8s}  {'NaN/run':>7s}")
    ablation = any("nosnap" in s for s in summaries)
    if ablation:
        head += f"   {'no-snap found':>13s} {'median s':>8s}"
    lines = [head, "-" * len(head)]
    for s in summaries:
        g, r = s["gradient"], s["random"]
        fw = "torch" if s["framework"] == "torch" else "tf"
        if s["buggy"]:
            sp = f"{'>=' if s['random_missed'] else ''}{s['speedup']}x" if s.get("speedup") else "-"
        else:
            sp = "(guarded)"
        rate = s.get("plain", {}).get("rate")
        line = (f"{s['program']:26s} {fw:5s} {g['found']:>4d}/{g['seeds']:<5d} {g['correct']:>7d} "
                f"{g['median_time_s']:>8.2f}   {r['found']:>4d}/{r['seeds']:<5d} {r['correct']:>7d} "
                f"{r['median_time_s']:>8.2f}  {sp:>8s}  {'' if rate is None else f'{rate:.1%}':>7s}")
        if ablation and "nosnap" in s:
            n = s["nosnap"]
            line += f"   {n['found']:>7d}/{n['seeds']:<5d} {n['median_time_s']:>8.2f}"
        lines.append(line)
    lines.append(f"(median time to the first NaN/Inf over the seeds; a miss counts as the budget, {budget:g} s; "
                 "'>=' where random missed; on guarded programs every find is a false positive)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per search, the same for both strategies")
    ap.add_argument("--seeds", type=int, default=3, help="searches per program and strategy (seeds 0..N-1)")
    ap.add_argument("--programs", help="comma-separated program names (default: all bundled)")
    ap.add_argument("--rate-runs", type=int, default=0,
                    help="also run each program N times unmodified and report its own NaN/Inf rate")
    ap.add_argument("--minimize-seconds", type=float, default=0.0,
                    help="time each finding's values may be minimised after the find (not part of the time to it)")
    ap.add_argument("--threads", type=int, default=1, help="torch and TF threads (both strategies alike)")
    ap.add_argument("--ablation", action="store_true",
                    help="also run the gradient search without snap moves (strategy nosnap)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 9 programs, one seed, 5 s budget")
    ap.add_argument("--json", type=Path, help="also write the JSON report here")
    args = ap.parse_args()
    if args.quick:
        args.budget, args.seeds = min(args.budget, 5.0), 1
        args.programs = args.programs or ",".join(QUICK)
    progs = [get(n.strip()) for n in args.programs.split(",")] if args.programs else list(PROGRAMS)
    if args.ablation:
        STRATEGIES.append("nosnap")
    set_threads(args.threads)

    summaries, t_start = [], time.perf_counter()
    for prog in progs:
        plain = plain_runs(prog, max(args.rate_runs, 1))  # at least one run: imports and first-call warm-up
        rows = []
        for seed in range(args.seeds):
            for strategy in STRATEGIES:  # alternated, so both see the same machine load
                if strategy == "nosnap" and not prog.buggy:
                    continue  # the ablation is about detections; guarded programs get the full search
                row = one_search(prog, strategy, args.budget, seed, args.minimize_seconds)
                rows.append(row)
                print(f"  {prog.name} seed {seed} {strategy:8s} found={row['found']!s:5s} "
                      f"correct={row['correct']!s:5s} t={row['time']}s"
                      + (f" {row['op']} @ {row['line']}" if row.get("found") else "")
                      + (f" ERROR {row['error']}" if "error" in row else ""), file=sys.stderr, flush=True)
        s = summarise(prog, rows, args.budget)
        s["plain"] = plain if args.rate_runs else {"ms_per_run": plain["ms_per_run"]}
        s["searches"] = rows
        summaries.append(s)

    groups = {g: totals([s for s in summaries if s["group"] == g], args.budget) for g in ("collapse", "other")
              if any(s["group"] == g for s in summaries)}
    report = {"budget_s": args.budget, "seeds": args.seeds, "threads": args.threads,
              "wall_s": round(time.perf_counter() - t_start, 1), "totals": totals(summaries, args.budget),
              "totals_by_group": groups, "programs": summaries}
    print(table(summaries, args.budget))
    print(json.dumps({"all": report["totals"], **groups}, indent=2))
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
