"""Name normalisation shared by operator identity and the derivation of its tables: snake case, token rewrites,
dimension- and affix-free stems."""
from __future__ import annotations

import re

from dlci.operators import _tables as T


def squash(name: str) -> str:
    """Name without inner underscores (leading ones kept): ``log_sigmoid`` ~ ``logsigmoid`` ~ ``LogSigmoid``."""
    body = name.lstrip("_")
    return name[: len(name) - len(body)] + body.replace("_", "").lower()


def snake(name: str) -> str:
    """CamelCase / UPPER_SNAKE -> lower snake; ``2D`` -> ``2d`` glued to the preceding word."""
    s = re.sub(r"(\d)D(?=[A-Z_]|$)", r"\1d", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.lower()
    s = re.sub(r"[^a-z0-9_]+", "_", s)
    s = re.sub(r"_+([123]d)(?=_|$)", r"\1", s)
    return re.sub(r"_+", "_", s).strip("_")


def rewrite(s: str) -> str:
    for pattern, repl, _reason in T.TOKEN_REWRITES:
        s = re.sub(pattern, repl, s, count=1)
    return s


def stem(name: str) -> str:
    """Dimension-free, affix-free snake stem (``_native_batch_norm_legit`` and ``BatchNormalization`` ->
    ``batch_norm``, ``avg_pool2d`` and ``AveragePool`` -> ``avg_pool``); used to match ONNX ops to aten ops."""
    s = rewrite(snake(name)) if name[:1].isupper() else name.lstrip("_")
    return re.sub(r"(?<=[a-z])_?[123]d$", "", strip_affixes(s))


def strip_affixes(s: str) -> str:
    """One round of kernel-family prefixes (``native_``, ...) and suffixes (``_legit``, ...) removed."""
    for p in T.FAMILY_PREFIXES:
        if s.startswith(p):
            s = s[len(p):]
    for suf in T.FAMILY_SUFFIXES:
        if s.endswith(suf):
            return s[: -len(suf)]
    return s
