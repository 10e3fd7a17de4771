"""Import ``torch.testing._internal`` without its test-only dependencies.

``common_utils`` does ``import expecttest`` only to subclass ``expecttest.TestCase`` (golden-output
assertions); the op/module databases never use it. The pinned stack does not ship expecttest, so when it is
missing a minimal stand-in is registered — nothing is installed and nothing on disk changes. :func:`opinfo` looks an
OpInfo up by name: PyTorch's own facts about an operator (dlci's are in :mod:`dlci.operators.facts`).
"""
from __future__ import annotations

import functools
import sys
import types
import unittest


def ensure_importable() -> None:
    try:
        import expecttest  # noqa: F401
        return
    except ImportError:
        pass
    stub = types.ModuleType("expecttest")
    stub.__doc__ = "dlci stand-in: only what torch.testing._internal.common_utils touches at import"
    stub.ACCEPT = False

    class TestCase(unittest.TestCase):
        def assertExpectedInline(self, *args, **kwargs):  # only used by torch's own test files
            raise unittest.SkipTest("expecttest is not installed")

    stub.TestCase = TestCase
    sys.modules["expecttest"] = stub


def op_db():
    ensure_importable()
    from torch.testing._internal.common_methods_invocations import op_db as db
    return db


@functools.lru_cache(maxsize=1)
def _opinfo_index() -> dict:
    return {(op.name, op.variant_test_name or ""): op for op in op_db()}


def opinfo(name: str, variant: str = ""):
    """The OpInfo of ``op_db`` named ``name`` with variant ``variant`` ("" for none), or None: its value ``domain``,
    the dtypes it supports per device, the tests expected to fail or allowed wider tolerances, per device."""
    return _opinfo_index().get((name, variant))


def module_db():
    ensure_importable()
    from torch.testing._internal.common_modules import module_db as db
    return db
