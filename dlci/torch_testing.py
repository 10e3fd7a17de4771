"""Import ``torch.testing._internal`` without its test-only dependencies.

``common_utils`` does ``import expecttest`` only to subclass ``expecttest.TestCase`` (golden-output
assertions); the op/module databases never use it. The pinned stack does not ship expecttest, so when it is
missing a minimal stand-in is registered — nothing is installed and nothing on disk changes.
"""
from __future__ import annotations

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


def module_db():
    ensure_importable()
    from torch.testing._internal.common_modules import module_db as db
    return db
