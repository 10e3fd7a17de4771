"""Helpers shared by targets: where an exception was raised, and the 'unsupported' message shapes."""
from __future__ import annotations

import re
import traceback

# an explicit rejection: "X is not supported", "Unsupported dtype ...", "not implemented for ...", and a converter's
# statement of its own limitation ("Only constant axes currently supported", "TopK k must be a constant")
NOT_SUPPORTED = re.compile(r"\bnot (yet )?supported\b|\bunsupported\b|\bnot (yet )?implemented\b|"
                           r"\b(do|does) not support\b|\bonly (constant|static)\b|\bmust be (a )?(constant|static)\b|"
                           r"\bcurrently supported\b", re.I)


def raised_in(exc: BaseException, prefixes: tuple[str, ...]) -> bool:
    """Was the exception raised by code under one of these module prefixes (its innermost frame)?"""
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return False
    mod = last.tb_frame.f_globals.get("__name__", "")
    return any(mod == p or mod.startswith(p + ".") for p in prefixes)


def type_name(exc: BaseException) -> str:
    return type(exc).__name__


def format_exc(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
