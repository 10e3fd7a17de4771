"""Target registry: each frontend entry point (plus the compiler/runtime behind it) is one target.

``TARGETS`` maps names to Target instances. Every module of this package, and a project's own (named in
``$DLCI_TARGET_MODULES``, inherited by the sandboxed workers), registers its targets with
:func:`dlci.targets.base.register` when :func:`registry` imports it: a new target is one module here plus its
reproducer snippet ``dlci/templates/targets/<name>.j2``. Importing this package imports no framework:
targets import theirs lazily.
"""
from __future__ import annotations

import importlib
import os
import pkgutil

from dlci.errors import UsageError
from dlci.targets.base import TARGETS, Target, register

EXTRA_MODULES_ENV = "DLCI_TARGET_MODULES"  # comma-separated importable modules that register more targets


def builtin_modules() -> list[str]:
    """Every module of this package but the protocol and private helpers: a new target is one new module."""
    return [f"{__name__}.{m.name}" for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")
            and m.name != "base"]


def registry() -> dict[str, Target]:
    """Every registered target (the built-in modules and $DLCI_TARGET_MODULES are imported on first use)."""
    extra = [m.strip() for m in os.environ.get(EXTRA_MODULES_ENV, "").split(",") if m.strip()]
    for module in builtin_modules() + extra:
        importlib.import_module(module)
    return TARGETS


def get(name: str) -> Target:
    try:
        return registry()[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))}") from None


def available_targets(framework: str | None = None) -> list[str]:
    """Names of the targets whose package is installed (optionally: that accept instances of ``framework``)."""
    return [name for name, t in registry().items()
            if t.available() and (framework is None or framework in t.frameworks)]


def reaching(component: str) -> tuple[str, ...]:
    """Targets (installed or not) that run ``component`` ("tvm:frontend.onnx"), in registration order."""
    return tuple(name for name, t in registry().items() if component in t.reaches)


def accepting(framework: str) -> tuple[str, ...]:
    """Targets (installed or not) that take instances of ``framework``, in registration order."""
    return tuple(name for name, t in registry().items() if framework in t.frameworks)


def select(names: list[str] | str, absent: dict[str, str] | None = None) -> dict[str, Target]:
    """The targets a user named (``all``: every one that can run here). Unknown names, and CPU targets whose package
    is not installed, are usage errors. A device target whose device is not on this runner is left out, never an
    error (GPU targets named on a CPU runner have nothing to test there): ``absent`` receives its name and the reason.
    (Equivalence rules are targets too, selected by :func:`dlci.rules.rule_targets`.)"""
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    names = [n for n in names if n]
    absent = {} if absent is None else absent
    if names == ["all"]:
        chosen = {}
        for n, t in registry().items():
            if t.available():
                chosen[n] = t
            elif t.probe is not None:
                absent[n] = t.presence().reason
        if not chosen:
            raise UsageError("no target available: install the frameworks (pip install 'dlci[all]')")
        return chosen
    unknown = [n for n in names if n not in registry()]
    if unknown:
        raise UsageError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(TARGETS))}")
    missing = [n for n in names if TARGETS[n].probe is None and not TARGETS[n].available()]
    if missing:
        raise UsageError(f"target(s) not installed here: {', '.join(missing)} (pip install 'dlci[all]')")
    if not names:
        raise UsageError("no target selected")
    for n in names:
        if TARGETS[n].probe is not None and not TARGETS[n].available():
            absent[n] = TARGETS[n].presence().reason
    return {n: TARGETS[n] for n in names if n not in absent}


# the components whose code generation or kernels differ on aarch64 (LLVM's AArch64 backend, the OpenVINO CPU
# plugin's ARM kernels and ACL executors, MLAS's NEON/SVE kernels, inductor's C++ with ARM vectorisation): a target
# reaching one is worth an arm64 runner (dlci.github.shards)
ARCH_SPECIFIC = frozenset({"tvm:codegen.llvm", "openvino:cpu", "onnxruntime:cpu", "pytorch:inductor.cpp"})


def arch_specific(target: Target) -> bool:
    return not target.on_accelerator and bool(ARCH_SPECIFIC & set(target.reaches))


def runner_kind(target: Target) -> str:
    """The kind of runner a target needs: ``gpu`` for a device target, else ``cpu`` (x86-64 or aarch64)."""
    return "gpu" if target.on_accelerator else "cpu"


def not_on_runner_note(absent: dict[str, str]) -> str:
    """One line per absent device target, as the commands print it."""
    return "; ".join(f"{n}: not on this runner ({why})" for n, why in sorted(absent.items()))


__all__ = ["TARGETS", "Target", "register", "registry", "get", "available_targets", "reaching", "accepting", "select",
           "not_on_runner_note", "ARCH_SPECIFIC", "arch_specific", "runner_kind"]

registry()  # the built-in targets are registered when this package is imported (they import no framework)
