"""The stages of a campaign, each a function with typed input and output:

plan -> execute (every failure re-run once before it counts: confirm) -> reduce -> collect (confirmed signatures
become findings) -> [attribute: PR mode, dlci.scan] -> reproduce (reproducers rendered and run alone) -> report.

``dlci.campaign.run`` composes them for an explicit run; ``dlci.scan`` composes them with its own planner, the
head revision's environment and base attribution. Here plan, reduce, collect and report; execute is in
:mod:`dlci.campaign.execution`, reproduce in :mod:`dlci.campaign.reproduction`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from dlci.campaign.options import RunOptions
from dlci.campaign.reproduction import MIN_CHECK_SECONDS, reproducers_owed
from dlci.campaign.state import Campaign
from dlci.exec import Engine
from dlci.findings import Finding
from dlci.instance import Instance
from dlci.models import refused
from dlci.outcome import INCONSISTENT, Outcome
from dlci.plan import balanced
from dlci.report.document import Report

Route = Callable[[Instance], Iterable[str]]  # instance -> the targets it goes to


@dataclass(frozen=True)
class Test:
    instance: Instance
    target: str
    # run on the other revision of a pull request (the engine's twin workers), for comparison with this one's run:
    # never a test result of its own (dlci.directed's divergence search)
    twin: bool = False


def takes(target, inst: Instance) -> bool:
    """Whether ``target`` can test ``inst``: it accepts the instance's framework, and its model form is not one the
    instance can never be built into, as far as the instance alone tells (dlci.models.refused)."""
    return inst.framework in target.frameworks and refused(inst, getattr(target, "form", None)) is None


def plan(instances: Sequence[Instance], targets: dict, *, order: Callable[[Sequence[Instance]], list] | None = None,
         route: Route | None = None) -> list[Test]:
    """The tests to run, most valuable first: the instances in OPERA's diversity order (or ``order``'s), each on the
    targets that take it (and, with ``route``, that it is sent to)."""
    tests = []
    for inst in (order or balanced)(list(instances)):
        wanted = set(route(inst)) if route else None
        for name, target in targets.items():
            if (wanted is None or name in wanted) and takes(target, inst):
                tests.append(Test(inst, name))
    return tests


MULTI_OPERATOR_SHARE = 3.0  # a multi-operator finding's reduction time, in shares of a single operator's


def reduce(findings: list[Finding], campaign: Campaign, engine: Engine, options: RunOptions, *,
           until: float | None = None, hard_until: float | None = None,
           checks_for: list[Finding] | None = None) -> None:
    """Shrink each finding's representative, in the order given, while it still fails the same way (the finding's
    signature), in the campaign's own workers; a reduced instance that failed again on its confirmation run becomes
    the finding's representative. ``until``: no reduction starts after it, and each gets a fair share of what is
    left; ``hard_until``: the reproducer checks of all findings (``checks_for``, else these) keep their time
    before it."""
    from dlci.reduce import engine_runner, reduce_instance
    if hard_until is not None and options.check_repros and until is not None:
        checked = findings if checks_for is None else checks_for
        owed = reproducers_owed(campaign, [campaign.base_signature(f.signature) for f in checked], options.workers)
        # a check does not start with less than MIN_CHECK_SECONDS left: at least that much stays for them
        until = min(until, hard_until - max(1.2 * owed, MIN_CHECK_SECONDS + 1.0 if findings else 0.0))
    # a failure that needs several operators first: the hardest to cut down by hand, and what no single-operator
    # test finds; a single operator's failure in a graph is cut to that operator in one step — so the first get
    # MULTI_OPERATOR_SHARE times the time of the others
    def weight(f: Finding) -> float:
        return MULTI_OPERATOR_SHARE if (f.extra.get("graph") or {}).get("multi_operator") else 1.0
    findings = sorted(findings, key=lambda f: -weight(f))
    for n, f in enumerate(findings):
        seconds = options.seconds_to_reduce(options.budget or 0.0) * (1.0 if options.reduce_seconds else weight(f))
        if until is not None:
            seconds = min(seconds, (until - time.monotonic()) * weight(f) / sum(map(weight, findings[n:])))
        if campaign.interrupted or seconds < 2:
            return
        target = campaign.targets[f.target]
        sig = campaign.base_signature(f.signature)
        red = reduce_instance(campaign.instances[f.instance_id], f.target, sig,
                              run=engine_runner(engine, f.target, options.timeout, func=target.job_func),
                              modules=target.modules, budget=seconds)
        f.reduction = _reduction_summary(red)
        if red.confirmed and red.changed and red.outcome:
            out = Outcome.from_dict(red.outcome)
            campaign.instances[red.reduced.id] = red.reduced
            campaign.failures[sig].append(out)
            f.extra.setdefault("unreduced_instance", f.instance_id)
            f.instance_id = out.instance_id
            f.message, f.distance, f.traceback = out.message[:2000], out.distance, out.traceback[-4000:]
            f.instances = sorted(set(f.instances) | {out.instance_id})
            if out.localised:  # the reduced graph's own localisation: each of its operators checked alone
                whole = f.extra.get("graph") or {}
                f.extra["graph"] = graph_details(out, red.reduced)
                for key in WHOLE_GRAPH_KEYS:  # what was measured on the whole graph stays
                    if key in whole:
                        f.extra["graph"][key] = whole[key]
                if f.operator == campaign.instances[f.extra["unreduced_instance"]].op:
                    # the graph as found was too large to localise (dlci.localise.MAX_NODES): the reduced one names
                    # its operator, which the report, the PR's attribution and the annotations go by
                    f.operator = out.op
            if "graph" in f.extra and red.params_that_matter:  # the reduced instance's word is the last one
                f.extra["graph"]["parameters_that_matter"] = list(red.params_that_matter)
            ops = (f"{red.before['operators']} -> {red.after.get('operators')} operators, "
                   if red.before.get("operators", 1) != red.after.get("operators", 1) else "")
            options.progress(f"reduced {f.operator} on {f.target}: {ops}{red.before.get('elements')} -> "
                             f"{red.after.get('elements')} elements in {red.seconds:.0f} s"
                             + (f"; parameters that matter: {', '.join(red.params_that_matter)}"
                                if red.params_that_matter else ""))


def collect(campaign: Campaign) -> list[Finding]:
    """One finding per confirmed signature, represented by its smallest instance; failures an exporter shows
    identically are the exporter's (see attribute_to_exporter)."""
    findings: list[Finding] = []
    for sig in campaign.confirmed():
        outcomes = campaign.steady_outcomes(sig)
        rep = campaign.representative(sig)
        inst = campaign.instances[rep.instance_id]
        target = campaign.targets[rep.target]
        findings.append(Finding(
            id=f"F{len(findings) + 1:03d}", oracle=target.oracle_of(rep), operator=rep.op, target=rep.target,
            target_version=target.version(), symptom=rep.symptom, stage=rep.stage, signature=sig,
            message=rep.message[:2000], instance_id=rep.instance_id, origin=inst.origin.__dict__,
            distance=rep.distance, traceback=rep.traceback[-4000:], log=rep.log[-2000:],
            instances=sorted({o.instance_id for o in outcomes}), operators=sorted({o.op for o in outcomes}),
            confirmed=True, **target.finding_details()))
        if rep.device:  # a device target's finding names the device (findings.json, the reproducer)
            findings[-1].extra["device"] = rep.device
        if rep.localised:
            findings[-1].extra["graph"] = graph_details(rep, inst)
    return attribute_to_exporter(findings, campaign)


# what localisation measured on the graph as found (dlci.localise), kept when the reduced graph is localised
WHOLE_GRAPH_KEYS = ("first_divergent", "trace", "share", "graph_operators", "parameters_that_matter", "parameters")


def graph_details(outcome: Outcome, inst: Instance) -> dict:
    """What a graph finding says about its operators (dlci.localise): the operator it is localised to, the
    graph's operators, each one's single-operator test on the same target, and whether the failure needs several;
    for a wrong output, where the divergence starts (the trace) and the culprit's share of the final error."""
    from dlci.reduce.graph import operators
    loc = outcome.localised or {}
    alone = loc.get("alone") or {}
    every = bool(alone) and len(alone) == loc.get("nodes")
    trace, share = loc.get("trace") or {}, loc.get("share") or {}
    params = loc.get("parameters") or {}
    audee = {**({"first_divergent": trace.get("first_divergent", "")} if trace.get("used") else {}),
             **({"trace": trace} if trace else {}), **({"share": share} if share else {}),
             **({"parameters_that_matter": params.get("matter", []), "parameters": params} if params else {}),
             **({"cut_after": loc["cut_after"]} if loc.get("cut_after") else {})}
    types = _node_types(inst)
    count = len(types) if inst.call.get("kind") == "torch_program" else operators(inst)
    return {"localised_to": loc.get("operator", outcome.op), "node": loc.get("node", ""),
            "multi_operator": bool(loc.get("multi_operator")), **audee,
            "graph_operators": loc.get("nodes", count),
            "operators": count, "node_types": types, "framework": inst.framework,
            "multi_operator_only": bool(loc.get("multi_operator")) and every and
            all(s == "pass" for s in alone.values()),
            "each_operator_alone": alone, "every_operator_checked": every,
            **({"note": loc["note"]} if loc.get("note") else {}), **({"error": loc["error"]} if loc.get("error") else {})}


def _node_types(inst: Instance) -> list[str]:
    if inst.call.get("kind") == "torch_program":
        from dlci.models.fx import FxView
        try:
            view = FxView(inst)
            return [view.op_type(k) for k in range(len(view))]
        except Exception:  # noqa: BLE001 - the report does without
            return []
    from dlci.models.graph import graph_of
    g = graph_of(inst)
    return g.operators() if g is not None else []


def _same_failure(a: Outcome, b: Outcome) -> bool:
    if a.status != b.status or a.symptom != b.symptom:
        return False
    if a.status == INCONSISTENT:  # the very same wrong numbers, not just the same kind of mismatch
        da, db = a.distance or {}, b.distance or {}
        return da.get("output") == db.get("output") and abs(da.get("max_abs", 0) - db.get("max_abs", 0)) <= \
            1e-6 * max(1.0, abs(da.get("max_abs", 0)))
    return True


def attribute_to_exporter(findings: list[Finding], campaign: Campaign) -> list[Finding]:
    """A failure that a target shows on instances it received through an exporter (torch -> torch.onnx ->
    tvm.from_onnx), and that the exporter target shows identically on the same instances, is the exporter's: fold
    it into the exporter's finding."""
    failed: dict[tuple[str, str], Outcome] = {}  # (target, instance id) -> its failure
    for outcomes in campaign.failures.values():
        for o in outcomes:
            failed[(o.target, o.instance_id)] = o
    by_sig = {f.signature: f for f in findings}
    kept = []
    for f in findings:
        exporter = campaign.targets[f.target].exporters.get(campaign.instances[f.instance_id].framework)
        if exporter in campaign.targets:
            mine = campaign.failures[f.signature]
            theirs = [failed.get((exporter, o.instance_id)) for o in mine]
            if all(t is not None and _same_failure(o, t) for o, t in zip(mine, theirs)):
                owner = by_sig.get(campaign.signature(theirs[0]))
                if owner is not None:
                    owner.also_in = sorted(set(owner.also_in) | {f.target})
                    continue
        kept.append(f)
    return kept


def _reduction_summary(red) -> dict | None:
    if red is None:
        return None
    return {"confirmed": red.confirmed, "changed": red.changed, "from_instance": red.original.id,
            "before": red.before, "after": red.after, "params_that_matter": list(red.params_that_matter),
            "steps": len(red.steps), "tried": red.tried, "seconds": round(red.seconds, 1)}


# -- report -----------------------------------------------------------------------------------------------------

def report(campaign: Campaign, findings: list[Finding], *, unreproduced: list[dict] | None = None,
           pr: dict | None = None) -> Report:
    """The findings document of the campaign as it stands."""
    stats = campaign.stats()
    if unreproduced is not None:
        stats["unreproduced"] = [{k: f[k] for k in ("operator", "target", "symptom", "signature", "repro")}
                                 for f in unreproduced]
    return Report(findings=list(findings), stats=stats, pr=pr)
