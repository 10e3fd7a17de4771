"""From failed outcomes to deduplicated, confirmed findings.

A failure only becomes a finding once a re-run failed with the same signature; one that does not reproduce is
recorded as flaky and never reported as a bug. The signature (target, converter function from the traceback or the
operator, symptom, stage, normalized message) groups the many instances that hit one bug into one finding.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields

from dlci.outcome import CRASH, INCONSISTENT, Outcome

_NORMALIZERS = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(/[\w.\-+]+)+/([\w.\-]+\.\w+)"), r"\2"),  # absolute paths -> file name
    # a value a compiler names as it builds (TVM's Relax vars lv3/gv0) or a graph input (dlci.localise.
    # anonymised): the same operand is one or the other as a graph grows or is reduced, and the bug is the same
    (re.compile(r"\b[lg]v\d+\b|<input>"), "%v"),
    # what else a compiler numbers as it builds (allocations; a node name's counter Pow_3)
    (re.compile(r"\b(alloc|storage)\d+\b"), r"\1N"),
    (re.compile(r"(?<=[A-Za-z]_)\d+\b"), "N"),
    (re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b"), "N"),  # numbers, shapes, line numbers
    (re.compile(r"'[^']{40,}'"), "'…'"),
    (re.compile(r"\s+"), " "),
]


def normalize_message(message: str) -> str:
    """The part of an error message that stays the same across instances of one bug."""
    first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "")
    for pattern, repl in _NORMALIZERS:
        first = pattern.sub(repl, first)
    return first[:160]


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


_PLUMBING = ("/ffi/", "_ffi", "/error", "/utils/", "/_internal/exporter/_core")  # frames that only relay errors


def converter_frame(traceback_text: str, modules: tuple[str, ...]) -> str:
    """The innermost traceback frame inside the target's own packages, as 'pkg/path.py:function'."""
    best = ""
    for path, _line, func in _FRAME.findall(traceback_text or ""):
        norm = path.replace("\\", "/")
        for mod in modules:
            marker = "/" + mod.replace(".", "/") + "/"
            if marker in norm and not any(p in norm for p in _PLUMBING):
                best = mod.replace(".", "/") + "/" + norm.split(marker, 1)[1] + ":" + func
    return best


def signature(outcome: Outcome, modules: tuple[str, ...] = ()) -> str:
    """Dedup key. Inconsistencies group per operator; crashes per converter frame (else operator)."""
    if outcome.status == INCONSISTENT:
        where = outcome.op
        if (outcome.localised or {}).get("multi_operator"):  # needs other operators: not the operator's own bug
            where += LOCALISED_IN_GRAPH
        detail = outcome.symptom
    else:
        where = converter_frame(outcome.traceback, modules) or outcome.op
        # a graph test's message with the graph's own names replaced (dlci.localise.anonymised)
        detail = f"{outcome.symptom}: {normalize_message((outcome.localised or {}).get('message') or outcome.message)}"
    return f"{outcome.target}|{outcome.stage}|{where}|{detail}"


LOCALISED_IN_GRAPH = " (in a graph)"  # a localised graph failure that needs other operators (dlci.localise)
NEW_PART = "|new in PR"  # suffix of the part of a finding that base attribution found new (dlci.scan.attribution)
NEW_IN_RELEASE_PART = "|new in release"  # the same, of release attribution (dlci test --against)
CHANGED_PART = "|changed"  # the part that fails on the other side too, otherwise (either comparison)


def base_signature(signature: str) -> str:
    """The dedup signature without the suffix base attribution adds to a split finding's new part."""
    for suffix in (NEW_PART, NEW_IN_RELEASE_PART, CHANGED_PART):
        if signature.endswith(suffix):
            return signature[:-len(suffix)]
    return signature


@dataclass
class Finding:
    id: str
    oracle: str  # crash | inconsistency | equivalence
    operator: str
    target: str
    target_version: str
    symptom: str
    stage: str | None
    signature: str
    message: str
    instance_id: str  # the representative (smallest) instance
    origin: dict
    distance: dict | None = None
    traceback: str = ""
    log: str = ""
    instances: list[str] = field(default_factory=list)  # every instance that hit this signature
    operators: list[str] = field(default_factory=list)
    also_in: list[str] = field(default_factory=list)  # targets where the same failure showed through this one
    new_in_pr: bool | None = None  # set in PR mode (dlci scan); null for explicit runs
    base: dict | None = None  # PR mode: what the same instances did on the base revision
    reaches_change: bool | None = None  # PR mode: the instance ran a changed line of converter code
    confirmed: bool = False
    repro: str = ""  # path relative to the output dir
    repro_checked: bool | None = None  # the reproducer exited 1 when run alone
    repro_passes_on_base: bool | None = None  # PR mode: the reproducer exits 0 against the base revision
    introduced_by: dict | None = None  # PR mode, several commits: the first bad commit (dlci.bisect.attribution)
    since: dict | None = None  # PR mode, already on base, `bisect: releases`: the first bad release of its package
    new_in_release: bool | None = None  # dlci test --against: new in the installed release (False: in the older)
    against: dict | None = None  # dlci test --against: what the same instances did under the older release
    reduction: dict | None = None  # how the reproducer's instance was shrunk (sizes before/after, what matters)
    test_style: str = ""             # the target repo's test style the second reproducer is written in
    test_style_repro: str = ""       # that test, relative to the output dir (pastes into their suite)
    test_style_checked: bool | None = None  # pytest ran it and it failed the way dlci saw (None: not checked)
    rule: dict | None = None  # equivalence findings: the rule, its category and both graphs it compared
    known: dict | None = None  # matched a known issue of .dlci.yml: {"link", "note"}; listed, never fails a run
    extra: dict = field(default_factory=dict)  # fields of other kinds of findings (NaN search: file, line, ...)

    def to_dict(self) -> dict:
        d = asdict(self)
        return {**d, **d.pop("extra")}

    @classmethod
    def from_dict(cls, d: dict) -> "Finding":
        names = {f.name for f in fields(cls)} - {"extra"}
        return cls(**{k: v for k, v in d.items() if k in names}, extra={k: v for k, v in d.items() if k not in names})


# -- the policy: which section a finding belongs to, and which ones fail a run ---------------------------------------

def _field(finding, name: str):
    return finding.get(name) if isinstance(finding, dict) else getattr(finding, name, None)


def attribution(finding) -> str:
    """known (matched a known issue) | new (new in the PR, or in the installed release of a ``--against`` run) |
    changed (not new: the same instances fail on the base revision, or in the older release, too, but otherwise:
    neither side is right, and the change altered how they fail) | on_base (the same failure on the base revision,
    or in the older release) | unattributed (no comparison, or its re-run did not complete). Takes a Finding or its
    dict."""
    if _field(finding, "known"):
        return "known"
    new, other = _field(finding, "new_in_pr"), _field(finding, "base")
    if new is None:
        new, other = _field(finding, "new_in_release"), _field(finding, "against")
    if new is False and (other or {}).get("changed"):
        return "changed"
    return {True: "new", False: "on_base"}.get(new, "unattributed")


def is_new(finding) -> bool:
    """What ``--fail-on new`` counts and the action reports as new findings: not a known issue, and not shown to be
    on the base revision (a regression must never pass because its base re-run did not complete)."""
    return attribution(finding) in ("new", "unattributed")


def counted(findings, policy: str) -> int:
    """How many findings the --fail-on policy counts: never | new | any (known issues never count)."""
    if policy == "never":
        return 0
    if policy == "new":
        return sum(1 for f in findings if is_new(f))
    return sum(1 for f in findings if attribution(f) != "known")


def is_failure(outcome: Outcome) -> bool:
    return outcome.status in (CRASH, INCONSISTENT)
