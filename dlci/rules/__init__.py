"""Equivalence rules (the EAGLE idea): a registry of rules, each turning one operator instance into two graphs that
must agree. Every rule is exposed to the campaign as a pseudo-target named ``rule.<name>``, so rule tests are
planned, confirmed by a re-run, deduplicated, reduced, attributed to head/base and reported like any other test.

``RULES`` maps rule names to :class:`~dlci.rules.base.Rule`; rule modules register theirs with :func:`register`.
Importing this package imports no framework.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os

from dlci.rules.base import CATEGORIES, LIBRARIES, NotApplicable, Rule
from dlci.targets.base import Target

RULES: dict[str, Rule] = {}
PREFIX = "rule."
_PACKAGES = {"torch": "torch", "tensorflow": "tensorflow-cpu"}


def register(*rules: Rule) -> None:
    for rule in rules:
        if rule.name in RULES:
            raise ValueError(f"rule {rule.name!r} registered twice")
        if rule.category not in CATEGORIES or rule.library not in LIBRARIES:
            raise ValueError(f"rule {rule.name!r}: unknown category {rule.category!r} or library {rule.library!r}")
        RULES[rule.name] = rule


BUILTIN_MODULES = ("dlci.rules.torch_rules", "dlci.rules.tf_rules")
EXTRA_MODULES_ENV = "DLCI_RULE_MODULES"  # comma-separated importable modules that register more rules


def _load() -> dict[str, Rule]:
    """Import the rule modules once: the built-in ones, then a project's own (``$DLCI_RULE_MODULES``, inherited
    by the sandboxed workers, so its rules run there too)."""
    if not RULES:
        extra = [m.strip() for m in os.environ.get(EXTRA_MODULES_ENV, "").split(",") if m.strip()]
        for module in BUILTIN_MODULES + tuple(extra):
            importlib.import_module(module)
    return RULES


def all_rules() -> dict[str, Rule]:
    return dict(_load())


def get_rule(name: str) -> Rule:
    """A rule by its name or its target name (``rule.<name>``)."""
    rules = _load()
    key = name[len(PREFIX):] if name.startswith(PREFIX) else name
    try:
        return rules[key]
    except KeyError:
        raise KeyError(f"unknown rule {name!r}; `dlci rules --list` shows them") from None


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
    rules = _load()
    chosen = [get_rule(n) for n in names] if names else list(rules.values())
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
