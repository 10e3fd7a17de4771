"""Runner pools: the plan (a matrix of shards: runner kind x targets, each with the reasons it exists) and the merge
of the shards' results."""
from __future__ import annotations

import json
import re

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


# what a runner kind is, from its name in runner-labels: "gpu..." (or a name with "cuda") runs the device targets;
# "arm..."/"aarch64..." is an aarch64 CPU; any other kind ("cpu", the default) an x86-64 CPU
def kind_role(kind: str) -> str:
    k = kind.lower()
    if k.startswith("gpu") or "cuda" in k:
        return "gpu"
    if k.startswith(("arm", "aarch64")):
        return "aarch64"
    return "x86_64"


ROLE_NAMES = {"gpu": "GPU", "aarch64": "arm64", "x86_64": "x86-64 CPU"}
# code built for one CPU architecture only, by its path: aarch64/NEON/SVE/ACL kernels, x86 SIMD kernels
_AARCH64 = re.compile(r"(^|/)(aarch64|arm64|arm|neon|sve\w*|acl|vec128)(/|$)|codegen_(aarch64|arm)\b|arm_cpu|"
                      r"[_.](neon|sve2?|aarch64|arm64)\b", re.I)
_X86 = re.compile(r"(^|/)(x86|x86_64|x64|amd64|avx\w*|amx|vec256|vec512)(/|$)|codegen_x86|[_.](avx\w*|avx512\w*|"
                  r"amx|sse\d*|x86_64|x64)\b", re.I)


def code_arch(path: str) -> str | None:
    """"aarch64" or "x86_64" for code compiled for that CPU architecture only, else None (portable code)."""
    if _AARCH64.search(path):
        return "aarch64"
    if _X86.search(path):
        return "x86_64"
    return None


def route(touch, target) -> tuple[set[str], str]:
    """The runner roles a touched operator needs on ``target`` and why: a device target on the GPU runners only;
    code built for one CPU architecture on that architecture only; portable code on the x86-64 CPU runners, and on
    arm64 too where the target's backend generates different code for aarch64 (dlci.targets.ARCH_SPECIFIC)."""
    from dlci.targets import arch_specific
    if target.on_accelerator:
        return {"gpu"}, f"{target.name} runs on the {target.device} device"
    arch = code_arch(touch.file)
    if arch:
        return {arch}, f"the changed code is built for {ROLE_NAMES[arch]} only"
    if arch_specific(target):
        return {"x86_64", "aarch64"}, f"{target.name}'s code generation differs on aarch64"
    return {"x86_64"}, f"{target.name} runs on the CPU"


def plan(touches, runners: dict[str, list[str]], wanted: set[str] | None = None) -> dict:
    """The shards of a pull request: for every touched operator, the targets that reach it, on the runner kinds
    where that code runs (:func:`route`). CPU kinds get one shard per target (runners are plentiful, targets run in
    parallel); a GPU kind gets one shard with all its targets (GPU runners are scarce: one job per PR, the budget
    shared by the scheduler). Returns {"matrix": {"include": [...]}, "shards": [... with "why"], "unrouted": [...]}:
    each shard says why it exists; what no configured runner kind can run is listed, never silently dropped."""
    from dlci.targets import registry
    reg = registry()
    # (kind, target) -> reason -> the operators it holds for (one line per changed place, not per operator)
    work: dict[tuple[str, str], dict[tuple, list[str]]] = {}
    unrouted: dict[str, list[str]] = {}
    for touch in touches:
        names = touch.targets or (tuple(n for n, t in reg.items() if not t.on_accelerator)
                                  if touch.profile == "generic" else ())
        where = (touch.file, touch.line, touch.why)
        if not names:
            unrouted.setdefault("no dlci target runs this code", []).append(
                f"{touch.operator} at {touch.file}:{touch.line}: {touch.why}")
        for name in names:
            if name not in reg or (wanted is not None and name not in wanted):
                continue
            roles, because = route(touch, reg[name])
            for role in sorted(roles):
                kinds = [k for k in runners if kind_role(k) == role]
                if not kinds:
                    unrouted.setdefault(f"no {ROLE_NAMES[role]} runner kind in runner-labels", []).append(
                        f"{name}: {touch.operator} at {touch.file}:{touch.line}: {touch.why}")
                for kind in kinds:
                    ops = work.setdefault((kind, name), {}).setdefault((because, *where), [])
                    if touch.operator not in ops:
                        ops.append(touch.operator)
    shards = []
    for kind, labels in runners.items():
        names = sorted({n for k, n in work if k == kind})
        if not names:
            continue
        groups = [names] if kind_role(kind) == "gpu" else [[n] for n in names]
        for group in groups:
            why = list(dict.fromkeys(f"{because}; {', '.join(ops)} at {file}:{line}: {reason}" for n in group
                                     for (because, file, line, reason), ops in work[(kind, n)].items()))
            shards.append({"shard": f"{kind}-{'+'.join(group)}", "kind": kind, "runner": labels,
                           "targets": ",".join(group), "why": why[:5] + ([f"... and {len(why) - 5} more"]
                                                                         if len(why) > 5 else [])})
    include = [{k: s[k] for k in ("shard", "kind", "runner", "targets")} for s in shards]
    if not include:  # GitHub rejects an empty matrix: one shard that finds nothing to test, fast
        kind, labels = next(iter(runners.items()))
        include = [{"shard": f"{kind}-none", "kind": kind, "runner": labels, "targets": ""}]
    return {"matrix": {"include": include}, "shards": shards,
            "unrouted": [{"reason": r, "touches": sorted(set(v))[:20]} for r, v in unrouted.items()]}


def merge(results: list) -> tuple[Report, dict[str, bytes]]:
    """Merge the shards' results (each read through :mod:`dlci.report.intake`: a shard ran the pull request's code,
    and a fork uploads its own artifact) into one report and its reproducers (path -> bytes, renumbered): nothing is
    read again from the shard folders, and the caller writes the output. The same signature from several runner
    kinds is one finding listing the kinds."""
    from dlci.report import intake
    if not results:
        raise FileNotFoundError("no shard results to merge")
    kinds = {r.shard.get("kind", "") for r in results}
    findings, by_sig = [], {}
    stats = {"tests_run": 0, "tests_valid": 0, "seconds": 0.0, "per_target": {}, "flaky": [], "shards": []}
    pr = None
    for res in results:
        doc = res.report.to_dict()
        kind = res.shard.get("kind", "")
        st = doc["stats"]
        stats["tests_run"] += st.get("tests_run", 0)
        stats["tests_valid"] += st.get("tests_valid", 0)
        stats["seconds"] = max(stats["seconds"], st.get("seconds", 0.0))
        stats["flaky"] += st.get("flaky") or []
        for key in ("devices", "device_notes", "targets_not_on_runner"):  # a GPU shard's device, or why it had none
            if isinstance(st.get(key), dict):
                stats.setdefault(key, {}).update(st[key])
        stats["shards"].append({"dir": res.folder.name, "kind": kind, "tests_run": st.get("tests_run", 0)})
        for target, counts in (st.get("per_target") or {}).items():
            key = f"{target}@{kind}" if kind and len(kinds) > 1 else target
            stats["per_target"][key] = counts
        pr = _merge_pr(pr, doc.get("pr"))
        for f in doc["findings"]:
            if f["signature"] in by_sig:
                by_sig[f["signature"]].setdefault("runners", []).append(kind)
                continue
            f = dict(f, runners=[kind] if kind else [])
            f["_script"] = res.scripts.get(f.get("repro") or "")
            f["test_style_repro"] = ""  # not carried over: the merged artifact holds the scripts it lists
            by_sig[f["signature"]] = f
            findings.append(f)
    scripts: dict[str, bytes] = {}
    for n, f in enumerate(findings, start=1):
        f["id"] = f"F{n:03d}"
        script = f.pop("_script", None)
        if script is not None:
            f["repro"] = f"repro/{f['id']}_{intake.script_name(f['repro']).split('_', 1)[-1]}"
            scripts[f["repro"]] = script
        else:
            f["repro"] = ""
    return Report(findings=[Finding.from_dict(f) for f in findings], stats=stats, pr=pr), scripts


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
