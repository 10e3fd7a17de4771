"""Fallback for repositories no specific profile recognises: operator names in the changed code.

No table to read, so the evidence is the changed text itself, matched against :func:`dlci.operators.vocabulary`
(namespace -> known operator names). Only names in an *operator-naming position* count, so ordinary code does not
select operators by accident:

1. a qualified operator reference: ``aten::elu``, ``aten.elu.default``, ``torch.ops.aten.elu``, ``F.elu`` /
   ``torch.nn.functional.elu``, ``nn.ELU`` / ``torch.nn.ELU``, ``onnx::Elu``, ``tf.raw_ops.Elu``,
   ``layers.Conv2D`` / ``keras.layers.Conv2D`` -- any known name;
2. a string literal that is exactly a known name (``"Elu"``, ``"AVERAGE_POOL_2D"``, ``"softplus.default"``);
3. the name of a changed function or class, after dropping converter affixes (``convert_``, ``translate_``,
   ``_impl``, ``_op``, ``_v6``...): ``_convert_softplus`` -> softplus, ``class Elu(OnnxOpConverter)`` -> Elu.

For 2 and 3 a lowercase (ATen-style) name needs at least 4 characters and must not be a common word (``mean``,
``view``, ``size``, ``select``, ``range``... see ``COMMON``); a CamelCase/UPPER name (ONNX, TF, TFLite, keras,
torch.nn) needs at least 3 characters, must be in that namespace's vocabulary and not in ``COMMON_FOREIGN``
(``Const``, ``Identity``, ``Shape``...). Bare identifiers elsewhere in a line (``x = torch.zeros(...)``'s ``x``,
a variable named ``output``) never count; comment lines are skipped. Touches carry no target: a generic repository
is not tied to a dlci entry point.
"""
from __future__ import annotations

import re

from dlci.diff import Diff, GitRepo
from dlci.profiles import register
from dlci.profiles._tables import Entry, Selector
from dlci.profiles.base import Profile, ProfileResult

CODE_SUFFIXES = (".py", ".pyi", ".cc", ".cpp", ".cxx", ".c", ".h", ".hpp", ".hh", ".cu", ".cuh", ".inc", ".java",
                 ".kt", ".scala", ".rs", ".go", ".js", ".ts", ".mm", ".swift", ".yaml", ".yml", ".td", ".mlir")

COMMON = frozenset("""
    abs add all and any append alias angle bool cat ceil char chunk clamp clone conj contiguous copy count cpu cuda
    data delete detach diag dict diff dim dims dist div dot double empty equal exp expand fill flip float floor format
    full gather half imag index inner input item len lift list long max mean min mode mul name narrow neg new norm
    normal numel ones outer output permute pow print prod put rand randn range real repeat reshape resize result roll
    round scatter select set shape short sign size sizes slice sort split square stack std str string sub sum take
    trace transpose tuple type uniform unbind unsqueeze squeeze value values var view where zero zeros
    Bool Int Float Size Delete Complex Generator Storage Device Layout Scalar Tensor
""".split())
COMMON_FOREIGN = frozenset("""
    Add All Any Assert Cast Const Constant Identity If Loop Max Mean Min Mod NoOp Placeholder Print Range Shape Size
    Sum Sub Mul Div Pad Pack Fill Where Select Split Slice Less Greater Equal Not And Or Log Exp Neg Sign Less Tile
    Input Output Layer Model Dense Activation Flatten Reshape Concatenate Lambda Wrapper Sequential Module
    ADD SUB MUL DIV MEAN SUM SHAPE CAST FILL PACK PAD SELECT SLICE SPLIT WHERE RANGE RANK LESS EQUAL CALL CUSTOM
    IF WHILE LOG EXP NEG SIGN
""".split())

AFFIX_PREFIX = re.compile(r"^_*(?:(?:convert|translate|lower|lowering|legalize|emit|visit|handle|impl|op|aten|onnx|tf|"
                          r"tflite|keras|torch|make|build|create|register|rewrite|decompose|map)_+)*")
AFFIX_SUFFIX = re.compile(r"(?:_+(?:op|ops|impl|impl_v\d+|converter|convert|kernel|module|fx|default|out|v\d+|"
                          r"lowering|decomp|decomposition|handler|translator|fn|func|helper|nd|base))*_*$")

QUALIFIED = [
    (re.compile(r"\baten(?:::|\.)([A-Za-z_]\w*)"), ("aten",)),
    (re.compile(r"\btorch\.ops\.aten\.([A-Za-z_]\w*)"), ("aten",)),
    (re.compile(r"\b(?:F|functional|torch\.nn\.functional)\.([A-Za-z_]\w*)"), ("torch.nn.functional",)),
    (re.compile(r"\b(?:nn|torch\.nn)\.([A-Z]\w*)"), ("torch.nn",)),
    (re.compile(r"\bonnx::([A-Z]\w*)"), ("onnx",)),
    (re.compile(r"\b(?:tf\.)?raw_ops\.([A-Z]\w*)"), ("tf",)),
    (re.compile(r"\b(?:keras\.)?layers\.([A-Z]\w*)"), ("keras",)),
    (re.compile(r"\bBuiltinOperator[_.:]+([A-Z][A-Z0-9_]*)"), ("tflite",)),
]
STRING = re.compile(r"""(?<![\w\\])(["'])([A-Za-z_][\w.]*?)\1""")
COMMENT = re.compile(r"^\s*(#|//|/\*|\*|--|;)")
NS_OUT = {"torch.nn.functional": "aten"}


def _lowercase(name: str) -> bool:
    return name[:1].islower() or name[:1] == "_"


class Vocab:
    def __init__(self, vocab: dict[str, frozenset[str]]):
        self.by_ns = vocab
        self.lower: dict[str, str] = {}           # aten / functional names -> namespace
        self.foreign: dict[str, list[str]] = {}   # CamelCase/UPPER names -> namespaces
        for ns, names in vocab.items():
            for n in names:
                if ns in ("aten", "torch.nn.functional") and _lowercase(n):
                    self.lower.setdefault(n, ns)
                elif not _lowercase(n):
                    self.foreign.setdefault(n, []).append(ns)

    def strict(self, name: str) -> tuple[str, str] | None:
        """(name, namespace) for a name in an operator-naming position that passes the noise rules."""
        base = name.split(".")[0] if _lowercase(name) else name
        if _lowercase(base):
            if len(base) >= 4 and base not in COMMON and base.strip("_") not in COMMON and base in self.lower:
                return base, NS_OUT.get(self.lower[base], self.lower[base])
            return None
        if len(base) >= 3 and base not in COMMON_FOREIGN and base not in COMMON and base in self.foreign:
            nss = self.foreign[base]
            return base, (nss[0] if len(nss) == 1 else "any")
        return None


def region_operator(name: str, vocab: Vocab) -> tuple[str, str] | None:
    """A changed function/class name read as an operator: ``_convert_softplus`` -> softplus, ``Elu`` -> Elu."""
    last = re.split(r"::|\.", name)[-1]
    if not last or not re.fullmatch(r"\w+", last):
        return None
    if not _lowercase(last):
        return vocab.strict(last)
    stripped = AFFIX_SUFFIX.sub("", AFFIX_PREFIX.sub("", last))
    for cand in dict.fromkeys((stripped, stripped.lstrip("_"), last.lstrip("_"))):
        if cand:
            hit = vocab.strict(cand)
            if hit:
                return hit
    return None


def line_operators(line: str, vocab: Vocab) -> list[tuple[str, str, str]]:
    """(name, namespace, evidence) for the operator names a code line mentions in naming positions."""
    if COMMENT.match(line):
        return []
    out = []
    for rx, (ns,) in QUALIFIED:
        for m in rx.finditer(line):
            name = m.group(1)
            known = vocab.by_ns.get(ns, frozenset())
            if name in known or name.split(".")[0] in known:
                out.append((name.split(".")[0] if ns == "aten" else name, NS_OUT.get(ns, ns),
                            f"qualified reference {m.group(0)}"))
    for m in STRING.finditer(line):
        s = m.group(2)
        s = s.split("::", 1)[-1]
        hit = vocab.strict(s)
        if hit:
            out.append((hit[0], hit[1], f"string {m.group(0)}"))
    seen, uniq = set(), []
    for item in out:
        if item[:2] not in seen:
            seen.add(item[:2])
            uniq.append(item)
    return uniq


@register
class GenericProfile(Profile):
    name = "generic"
    description = ("fallback: operator names in changed code (qualified references, string literals, changed "
                   "function names) matched against the known operator vocabulary")

    def __init__(self, vocabulary: dict[str, frozenset[str]] | None = None):
        self._vocab = Vocab(vocabulary) if vocabulary is not None else None

    def vocab(self) -> Vocab:
        if self._vocab is None:
            from dlci.operators import vocabulary
            self._vocab = Vocab(vocabulary())
        return self._vocab

    def detect(self, repo: GitRepo) -> bool:
        return True   # the registry runs it only when no other profile recognised the repository

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        from dlci.diff.regions import touched
        vocab = self.vocab()
        sel = Selector(self.name)
        for ch in diff.files:
            if ch.binary or not (ch.path.endswith(CODE_SUFFIXES) or (ch.old_path or "").endswith(CODE_SUFFIXES)):
                continue
            head = repo.text(ch.path, "head") if ch.status != "deleted" else None
            base = repo.text(ch.old_path, "base") if ch.old_path else None
            found: set[tuple[str, str]] = set()

            def add(name, ns, file, line, why, converter):
                if (name, ns) in found:
                    return
                found.add((name, ns))
                sel.touch(Entry(name, ns, file, line, line, frozenset(), converter), file, line, f"generic: {why}")

            for side, text, lines, file in (("head", head, ch.added, ch.path),
                                            ("base", base, ch.removed, ch.old_path or ch.path)):
                if text is None:
                    continue
                src = text.split("\n")
                for ln in lines:
                    if 0 < ln <= len(src):
                        for name, ns, why in line_operators(src[ln - 1], vocab):
                            add(name, ns, file, ln, why + (" (removed line)" if side == "base" else ""), "")
            for tr in touched(ch, head, base):
                if tr.region is None or tr.region.kind not in ("function", "class"):
                    continue
                hit = region_operator(tr.region.name, vocab)
                if hit:
                    file = ch.path if tr.side == "head" else (ch.old_path or ch.path)
                    add(hit[0], hit[1], file, tr.line, f"changed {tr.region.kind} {tr.region.name}",
                        tr.region.name)
        return sel.result
