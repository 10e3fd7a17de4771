"""Target registry: each frontend entry point (plus the compiler/runtime behind it) is one target.

``TARGETS`` maps names to Target instances; modules register theirs with :func:`register`. Importing this
package imports no framework: targets import theirs lazily.
"""
from __future__ import annotations

from dlci.targets.base import Target

TARGETS: dict[str, Target] = {}


def register(cls: type[Target]) -> type[Target]:
    """Class decorator: instantiate the target and register it by name."""
    if cls.name in TARGETS:
        raise ValueError(f"target {cls.name!r} registered twice")
    TARGETS[cls.name] = cls()
    return cls


def available_targets(framework: str | None = None) -> list[str]:
    """Names of the targets whose package is installed (optionally: that accept instances of ``framework``)."""
    return [name for name, t in TARGETS.items()
            if t.available() and (framework is None or framework in t.frameworks)]


def get(name: str) -> Target:
    try:
        return TARGETS[name]
    except KeyError:
        raise KeyError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))}") from None


# registration happens on import of the target modules
from dlci.targets import tvm, openvino, onnxruntime, torch_compile, tensorflow  # noqa: E402,F401
