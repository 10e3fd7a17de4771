"""Where the pull request changes what is computed: one test run on both revisions (the engine's twin workers run
the base), compared.

A regression is an input on which the head computes something other than the base, and wrong. Line and branch
coverage says whether changed code ran; it cannot say whether it changed anything: a torchlib function that builds a
graph runs its changed line for every input, and only some inputs get another graph (a size-1 output, an unbatched
input, a 0-d index). So the directed search's second phase runs what reached changed code on the base revision too
and compares, in this order:

- **status**: one revision passes where the other fails or calls the input unsupported;
- **outputs**: both ran, and the output digests (shapes, dtypes, sums: dlci.outcome.digest) differ;
- **graph**: the same outputs, but the targets' fingerprints of the converted models differ (Target.fingerprint: the
  emitted ONNX graph, TVM's imported module): the change acts on this input, computing the same here. The nodes that
  differ (Target.graph_nodes, compared as multisets) say what it made differently; a kind of difference not seen
  before (shapes aside: the same change at another shape is the same kind) is progress, as a new class of status or
  output divergence is.

An input that diverges is where the search goes on (its mutants first, the mutation that made it preferred); what
the reference says of the head's result is the campaign's oracle as for every test. A refactor, by construction,
diverges nowhere but in graphs. Head passing where base fails (twice, the same way) is what the pull request fixed.
"""
from __future__ import annotations

import re
from collections import Counter

from dlci.outcome import INVALID, PASS, UNSUPPORTED, Outcome, same_digest

KINDS = ("status", "outputs", "graph")


def _state(status: str) -> str:
    return "pass" if status == PASS else "unsupported" if status == UNSUPPORTED else "fail"


def compare(head: dict, base: Outcome) -> str | None:
    """How the base revision's run ``base`` of a test differs from the head's (``head``: Campaign.observed's
    entry): one of :data:`KINDS`, or None (the same, or no telling: a run that could not be built)."""
    if head["status"] == INVALID or base.status == INVALID:
        return None
    if _state(head["status"]) != _state(base.status):
        return "status"
    if head.get("digest") and base.digest and not same_digest(head["digest"], base.digest):
        return "outputs"
    if head.get("model") and base.model_digest and head["model"] != base.model_digest:
        return "graph"
    return None


def fixed(head: dict, base: Outcome) -> bool:
    """The head passes a test its base fails: what the pull request fixed (once the base fails it again)."""
    return head["status"] == PASS and _state(base.status) == "fail"


# the shapes in a node's line: ONNX's "float[2,3]", Relax's "R.Tensor((2, 3), ..." and "R.shape([2, 3])"
_SHAPES = re.compile(r"\[[\d?,\s]*\]|\((\([\d?,\s]*\)|[\d?,\s]+)\)")


def node_delta(head: dict, base: Outcome) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The nodes only the head's model has and those only the base's has (Target.graph_nodes lines, as multisets)."""
    h, b = Counter(head.get("nodes") or ()), Counter(base.model_nodes or ())
    return tuple(sorted((h - b).elements())), tuple(sorted((b - h).elements()))


def delta_kind(delta: tuple[tuple[str, ...], tuple[str, ...]]) -> tuple[frozenset, frozenset]:
    """A node difference with its shapes left out: the class the search counts as new or not."""
    return tuple(frozenset(_SHAPES.sub("", line) for line in side) for side in delta)  # type: ignore[return-value]


# a node line: ``Op(ins)->outs {a=1 b=[2, 2]}`` (ONNX), ``function: Op {a=1}`` (a function's node),
# ``R.nn.op(%, a=True) -> R.Tensor(...)`` (Relax); an attribute is a name=value anywhere in it (a small constant's
# ``int64[2]=[0 3]`` names no attribute)
_NODE = re.compile(r"^(?:[\w.]+: )?(?P<op>[\w.:]+)")
_ATTR = re.compile(r"(?<![\w.\]])(?P<name>[A-Za-z_]\w*)=(?P<value>\[[^\]]*\]|\([^)]*\)|'[^']*'|\"[^\"]*\"|[^\s,(){}]+)")


def _by_op(lines) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """Node lines per operator, each with its attributes (name -> value as written)."""
    out: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for line in lines:
        m = _NODE.match(line)
        if m:
            out.setdefault(m.group("op"), []).append((line, {a["name"]: a["value"] for a in _ATTR.finditer(line)}))
    return out


def delta_words(delta: tuple[tuple[str, ...], tuple[str, ...]]) -> set[str]:
    """What a node difference is about, as words the mutations' reads can name: the attributes an operator has with
    other values on one side than on the other (``allowzero``, ``ceil_mode``: the change acts on inputs where that
    attribute matters, an empty dim, an odd size), and the operators only one side emits."""
    head, base = _by_op(delta[0]), _by_op(delta[1])
    words = set(head) ^ set(base)
    for op in set(head) & set(base):
        for _, h in head[op]:
            for _, b in base[op]:
                words |= {k for k in set(h) | set(b) if h.get(k) != b.get(k)}
    return {w.rsplit("::", 1)[-1].rsplit(".", 1)[-1] for w in words}


def _bare(line: str) -> str:
    """A node line without its attributes (and the braces, commas and spaces around them)."""
    return re.sub(r"[\s{},]", "", _ATTR.sub("", line))


def describe_delta(head_only, base_only, width: int = 90) -> list[str]:
    """A node difference as a reader wants it: a node of one operator on both sides said once, with the attributes
    whose values differ (``Resize: nearest_mode head unset, base 'floor'``) or, where more than attributes differ, both
    lines from where they part; a node only one side has, whole. Two node lines of a graph usually share most of
    their text, and a line cut at a fixed width hides the difference."""
    head, base = _by_op(head_only), _by_op(base_only)
    out = []
    for op in sorted(set(head) | set(base)):
        hs, bs = head.get(op, []), base.get(op, [])
        for (h_line, h), (b_line, b) in zip(hs, bs):
            changed = sorted(k for k in set(h) | set(b) if h.get(k) != b.get(k))
            if changed and _bare(h_line) == _bare(b_line):  # the same node but for attributes
                out.append(f"{op}: " + ", ".join(f"{k} head {h.get(k, 'unset')}, base {b.get(k, 'unset')}"
                                                 for k in changed))
                continue
            at = next((i for i, (x, y) in enumerate(zip(h_line, b_line)) if x != y), min(len(h_line), len(b_line)))
            start = 0 if at <= 40 else max(h_line.rfind(" ", 0, at - 12), h_line.rfind(",", 0, at - 12)) + 1
            cut = (lambda line: (f"{op}(…{line[start:start + width]}" if start else line[:width])
                   + ("…" if len(line) > start + width else ""))
            out.append(f"{op}: head {cut(h_line)}; base {cut(b_line)}")
        out += [f"head only: {line[:width]}{'…' if len(line) > width else ''}" for line, _ in hs[len(bs):]]
        out += [f"base only: {line[:width]}{'…' if len(line) > width else ''}" for line, _ in bs[len(hs):]]
    return out
