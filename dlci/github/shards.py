"""Runner pools: the plan (a matrix of shards: target x runner kind) and the merge of the shards' results."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from dlci.findings import Finding
from dlci.report.document import Report

DEFAULT_RUNNERS = {"cpu": ["ubuntu-latest"]}


def parse_runner_labels(text: str) -> dict[str, list[str]]:
    from dlci.github.runner import EventError
    if not text:
        return dict(DEFAULT_RUNNERS)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise EventError(f"input runner-labels is not JSON: {e}") from None
    if not isinstance(data, dict) or not data or not all(
            isinstance(k, str) and isinstance(v, (list, str)) for k, v in data.items()):
        raise EventError('input runner-labels must map a runner kind to labels, e.g. {"cpu": ["ubuntu-latest"]}')
    return {k: [v] if isinstance(v, str) else [str(x) for x in v] for k, v in data.items()}


def plan_matrix(targets: list[str], runners: dict[str, list[str]]) -> dict:
    """One shard per (runner kind, target): platform bugs (aarch64 codegen, GPU kernels) show per kind."""
    include = [{"shard": f"{kind}-{target}", "kind": kind, "runner": labels, "targets": target}
               for kind, labels in runners.items() for target in targets]
    if not include:  # GitHub rejects an empty matrix: one shard that finds nothing to test, fast
        kind, labels = next(iter(runners.items()))
        include = [{"shard": f"{kind}-none", "kind": kind, "runner": labels, "targets": ""}]
    return {"include": include}


def merge(shard_dirs: list[Path], out: Path) -> Report:
    """Merge the shards' findings.json into one report under ``out`` (reproducers copied and renumbered).
    The same signature from several runner kinds is one finding listing the kinds."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro").mkdir(exist_ok=True)
    docs = []
    for d in shard_dirs:
        path = Path(d) / "findings.json"
        if path.is_file():
            docs.append((Path(d), Report.read(path).to_dict()))
    if not docs:
        raise FileNotFoundError(f"no findings.json in any shard under {', '.join(map(str, shard_dirs)) or '-'}")
    findings, by_sig = [], {}
    stats = {"tests_run": 0, "tests_valid": 0, "seconds": 0.0, "per_target": {}, "flaky": [], "shards": []}
    pr = None
    for d, doc in docs:
        kind = (json.loads((d / "shard.json").read_text()) if (d / "shard.json").is_file() else {}).get("kind", "")
        st = doc["stats"]
        stats["tests_run"] += st.get("tests_run", 0)
        stats["tests_valid"] += st.get("tests_valid", 0)
        stats["seconds"] = max(stats["seconds"], st.get("seconds", 0.0))
        stats["flaky"] += st.get("flaky") or []
        stats["shards"].append({"dir": d.name, "kind": kind, "tests_run": st.get("tests_run", 0)})
        for target, counts in (st.get("per_target") or {}).items():
            key = f"{target}@{kind}" if kind and len({k for k in _kinds(docs)}) > 1 else target
            stats["per_target"][key] = counts
        pr = _merge_pr(pr, doc.get("pr"))
        for f in doc["findings"]:
            if f["signature"] in by_sig:
                by_sig[f["signature"]].setdefault("runners", []).append(kind)
                continue
            f = dict(f, runners=[kind] if kind else [])
            if f.get("repro") and (d / f["repro"]).is_file():
                f["_src"] = d / f["repro"]
            by_sig[f["signature"]] = f
            findings.append(f)
    for n, f in enumerate(findings, start=1):
        f["id"] = f"F{n:03d}"
        src = f.pop("_src", None)
        if src is not None:
            dest = out / "repro" / f"{f['id']}_{src.name.split('_', 1)[-1]}"
            shutil.copyfile(src, dest)
            f["repro"] = str(dest.relative_to(out))
    return Report(findings=[Finding.from_dict(f) for f in findings], stats=stats, pr=pr)


def _kinds(docs) -> set[str]:
    return {(json.loads((d / "shard.json").read_text()) if (d / "shard.json").is_file() else {}).get("kind", "")
            for d, _ in docs}


def _merge_pr(acc: dict | None, pr: dict | None) -> dict | None:
    """Shards share the diff; a changed line is a test gap only if no shard reached it."""
    if pr is None:
        return acc
    if acc is None:
        return json.loads(json.dumps(pr))
    a, b = acc.get("coverage") or {}, pr.get("coverage") or {}
    if a and b:
        gaps_b = {(g["file"], g["line"]) for g in b.get("unreached") or []}
        a["unreached"] = [g for g in a.get("unreached") or [] if (g["file"], g["line"]) in gaps_b]
        a["reached_statements"] = max(a.get("reached_statements", 0), b.get("reached_statements", 0))
        a["instances_reaching"] = a.get("instances_reaching", 0) + b.get("instances_reaching", 0)
    elif b:
        acc["coverage"] = b
    if acc.get("nothing_to_test") and not pr.get("nothing_to_test"):
        acc["nothing_to_test"] = None
    return acc
