"""Imported as a warm import by tests/test_exec.py: crashes the interpreter that imports it."""
import ctypes

ctypes.string_at(0)
