"""What a PR scan tests: the targets that reach the touched converters, the equivalence rules of a library's own PR,
the instances of the touched operators, and the environment the revision's code needs."""
from __future__ import annotations

import fnmatch

from dlci.config import Config, ConfigError

# profiles whose repository is the library an equivalence rule exercises
RULE_LIBRARIES = {"pytorch": "torch"}


def canonical_targets(analysis, chosen: dict) -> dict[str, set[str]]:
    """canonical operator -> targets that reach a changed converter for it (all chosen when a touch names none)."""
    from dlci import operators
    want: dict[str, set[str]] = {}
    for t in analysis.touches:
        reach = {x for x in t.targets if x in chosen} if t.targets else set(chosen)
        for canon in operators.canonical(t.operator, t.namespace):
            want.setdefault(canon, set()).update(reach)
    return {c: ts for c, ts in want.items() if ts}


def device_only(touch) -> bool:
    """Only device targets (GPU runners) reach this touched code."""
    from dlci.targets import registry
    reg = registry()
    return bool(touch.targets) and all(n in reg and reg[n].on_accelerator for n in touch.targets)


def rule_targets(analysis, config: Config, named: list[str] | None) -> dict:
    """Equivalence rules for the touched library (all of its rules unless .dlci.yml `rules` names some or says
    [none]); explicit --targets naming rule.<name> targets are honoured as well."""
    from dlci.rules import rule_targets as select
    # the rules run the library on the CPU: a PR whose touches only device targets reach (a CUDA kernel) gets none
    libraries = {RULE_LIBRARIES[t.profile] for t in analysis.touches
                 if t.profile in RULE_LIBRARIES and not device_only(t)}
    rules_named = [t for t in (named or []) if t.startswith("rule.")]
    if config.rules is not None and [r.lower() for r in config.rules] == ["none"]:
        return select(rules_named) if rules_named else {}
    try:
        chosen = select(config.rules or None) if config.rules else {}
        if not config.rules:
            for lib in libraries:
                chosen.update(select(library=lib))
        if rules_named:
            chosen.update(select(rules_named))
    except KeyError as e:
        raise ConfigError(f"rules: {str(e).strip(chr(34) + chr(39))}") from None
    if named and not rules_named:
        return {}  # explicit --targets without rule targets: the user narrowed the run
    return chosen


def runtime_defaults(profile_names: list[str]) -> tuple[tuple[str, ...], dict]:
    """python_path and env that the detected profiles need by default (a .dlci.yml overrides them)."""
    from dlci.profiles import PROFILES
    paths: list[str] = []
    env: dict = {}
    for name in profile_names:
        p = PROFILES[name]
        paths += [x for x in p.python_path if x not in paths]
        env.update(p.env or {})
    return tuple(paths), env


def converter_files(analysis) -> list[str]:
    """Changed Python files that hold converters of a detected profile: their lines are traced while converting."""
    from dlci.profiles import PROFILES
    patterns = [pat for name in analysis.profiles for pat in getattr(PROFILES[name], "python_converter_files", ())]
    return sorted({f.path for f in analysis.diff.files if f.status != "deleted" and f.path.endswith(".py")
                   and any(fnmatch.fnmatch(f.path, p) for p in patterns)})
