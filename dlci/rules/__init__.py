"""Equivalence rules (the EAGLE idea): a registry of rules, each turning one operator instance into two graphs that
must agree. Every rule is exposed to the campaign as a pseudo-target named ``rule.<name>``, so rule tests are
planned, confirmed by a re-run, deduplicated, reduced, attributed to head/base and reported like any other test.

``RULES`` maps rule names to :class:`~dlci.rules.base.Rule` (dlci.rules.registry); dlci.rules.base says how to
write a rule. Importing this package imports no framework.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util

from dlci.rules.base import CATEGORIES, LIBRARIES, NotApplicable, Rule
from dlci.rules.registry import RULES, all_rules, get_rule, register
from dlci.targets.base import Target

_PACKAGES = {"torch": "torch", "tensorflow": "tensorflow-cpu"}


def _version(library: str) -> str:
    for dist in (_PACKAGES[library], library):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


class RuleTarget(Target):
    """A rule seen by the campaign as a target named ``rule.<name>``: its tests build the rule's two graphs in the
    worker (dlci.rules.runner), its findings are equivalence findings, its reproducers embed the rule's code."""

    form = "rule"
    job_func = "dlci.rules.runner:execute_rule_job"

    def __init__(self, rule: Rule):
        self.rule = rule
        self.name = rule.target
        self.frameworks = (rule.framework,)
        self.package = _PACKAGES[rule.library]
        self.modules = ("torch",) if rule.library == "torch" else ("tensorflow", "keras")
        self.timeout = rule.timeout
        self.warm_imports = ("torch",) if rule.library == "torch" else ("tensorflow",)

    def version(self) -> str:
        return _version(self.rule.library)

    def available(self) -> bool:
        if not self.version():
            return False
        return all(importlib.util.find_spec(m.split(".")[0]) is not None for m in self.rule.needs)

    def oracle_of(self, outcome) -> str:
        return "equivalence"

    def finding_details(self) -> dict:
        rule = self.rule
        return {"rule": {"name": rule.name, "category": rule.category, "category_title": CATEGORIES[rule.category],
                         "library": rule.library, "summary": rule.summary, "graph_a": rule.graph_a,
                         "graph_b": rule.graph_b}}

    def render_repro(self, finding, instance, repro_dir):
        from dlci.rules.repro import render_rule_repro
        return render_rule_repro(finding, instance, repro_dir)


def rule_targets(names=None, library: str | None = None) -> dict[str, RuleTarget]:
    """Targets for the available rules (all, or the named ones; optionally of one library)."""
    chosen = [get_rule(n) for n in names] if names else list(all_rules().values())
    out = {}
    for rule in chosen:
        if library and rule.library != library:
            continue
        t = RuleTarget(rule)
        if t.available():
            out[t.name] = t
    return out


def describe(rule: Rule) -> dict:
    """One registry entry as JSON (``dlci rules --list``)."""
    return {"name": rule.name, "target": rule.target, "category": rule.category,
            "category_title": CATEGORIES[rule.category], "library": rule.library, "summary": rule.summary,
            "graph_a": rule.graph_a, "graph_b": rule.graph_b, "applies_to": rule.derived_from,
            "comparison": "exact" if rule.exact else "per-dtype tolerance, fp64 arbitration",
            "available": RuleTarget(rule).available()}


__all__ = ["CATEGORIES", "LIBRARIES", "NotApplicable", "RULES", "Rule", "RuleTarget", "all_rules", "describe",
           "get_rule", "register", "rule_targets"]
