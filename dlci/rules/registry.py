"""The rule registry: built-in rules (``dlci.rules.torch``, ``dlci.rules.tf``) and a project's own
(``$DLCI_RULE_MODULES``). Imports no framework: rule modules name their graph functions by ``"module:function"``."""
from __future__ import annotations

import importlib
import os

from dlci.rules.base import CATEGORIES, LIBRARIES, Rule

RULES: dict[str, Rule] = {}
_LOADED: set[str] = set()  # rule modules imported so far
PREFIX = "rule."
BUILTIN_MODULES = ("dlci.rules.torch", "dlci.rules.tf")
EXTRA_MODULES_ENV = "DLCI_RULE_MODULES"  # comma-separated importable modules that register more rules


def register(*rules: Rule) -> None:
    for rule in rules:
        if rule.name in RULES:
            raise ValueError(f"rule {rule.name!r} registered twice")
        if rule.category not in CATEGORIES or rule.library not in LIBRARIES:
            raise ValueError(f"rule {rule.name!r}: unknown category {rule.category!r} or library {rule.library!r}")
        RULES[rule.name] = rule


def _load() -> dict[str, Rule]:
    """Import the rule modules once: the built-in ones, then a project's own (``$DLCI_RULE_MODULES``, inherited
    by the sandboxed workers, so its rules run there too). A module lists its rules in ``RULES`` or registers them
    itself with :func:`register`."""
    extra = [m.strip() for m in os.environ.get(EXTRA_MODULES_ENV, "").split(",") if m.strip()]
    for name in BUILTIN_MODULES + tuple(extra):
        if name not in _LOADED:
            listed = getattr(importlib.import_module(name), "RULES", ())
            register(*(r for r in listed if RULES.get(r.name) is not r))
            _LOADED.add(name)
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
