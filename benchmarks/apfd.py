"""Prioritization: APFD of dlci's OPERA diversity order vs the source order and random orders, on the faults a
finished campaign confirmed (each finding's signature is one fault; a test detects the faults its instance hit).

    .venv/bin/python benchmarks/apfd.py --run DIR [--pool opinfo]   (DIR: the --out of a `dlci test` run)

With --pool it also reports how many operators and value-space partitions the first k tests of each order cover.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dlci.plan import apfd, prioritize  # noqa: E402


def diversity(pool: str, checkpoints=(100, 500, 1000, 2000)) -> dict:
    """Operators and (operator, value-space partition) pairs covered by the first k tests of each order."""
    from dlci.instance import features
    from dlci.sources import load
    instances = load(pool)
    rng = random.Random(0)
    shuffled = list(instances)
    rng.shuffle(shuffled)
    orders = {"opera": prioritize(instances), "source_order": list(instances), "random": shuffled}
    out = {"pool": pool, "instances": len(instances)}
    for name, order in orders.items():
        ops, parts, row = set(), set(), {}
        for k, inst in enumerate(order, start=1):
            ops.add(inst.op)
            parts |= {(inst.op, f) for f in features(inst)}
            if k in checkpoints:
                row[k] = {"operators": len(ops), "partitions": len(parts)}
        out[name] = row
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", help="also measure diversity of the first k tests over this source's instances")
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--random-orders", type=int, default=20)
    args = ap.parse_args()
    doc = json.loads((args.run / "findings.json").read_text())
    faults: dict[str, set] = defaultdict(set)
    for f in doc["findings"]:
        for inst_id in f["instances"]:
            faults[inst_id].add(f["signature"])
    tested = []
    for line in (args.run / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if not row.get("confirming") and row["instance_id"] not in tested:
            tested.append(row["instance_id"])
    from dlci.sources import load, registry
    by_id = {}
    for name in ("opinfo", "module_db", "onnx_node", "keras_tests"):
        if name in registry():
            for inst in load(name):
                by_id.setdefault(inst.id, inst)
    instances = [by_id[i] for i in tested if i in by_id]
    opera = [i.id for i in prioritize(instances)]
    source_order = sorted((i.id for i in instances), key=lambda i: (by_id[i].origin.source, by_id[i].op, i))
    rng = random.Random(0)
    randoms = []
    for _ in range(args.random_orders):
        order = [i.id for i in instances]
        rng.shuffle(order)
        randoms.append(apfd(order, faults))
    report = {"diversity": diversity(args.pool)} if args.pool else {}
    print(json.dumps({**report, "instances": len(instances), "faults": len({s for v in faults.values() for s in v}),
                      "apfd_opera": round(apfd(opera, faults), 3),
                      "apfd_source_order": round(apfd(source_order, faults), 3),
                      "apfd_random_mean": round(sum(randoms) / len(randoms), 3)}, indent=2))


if __name__ == "__main__":
    main()
