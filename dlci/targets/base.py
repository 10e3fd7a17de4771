"""What a target is: one frontend entry point (plus the compiler/runtime behind it) that dlci tests."""
from __future__ import annotations

import importlib.metadata
from typing import Any, ClassVar, Sequence

import numpy as np


class Target:
    """A frontend entry point that can reach a converter, followed by compile and run.

    Subclasses declare which instance frameworks they accept and which model form they consume
    (see dlci.models.FORMS); ``convert``/``compile``/``run`` are timed and attributed separately.
    """
    name: ClassVar[str]                 # e.g. "tvm.from_exported_program"
    frameworks: ClassVar[tuple[str, ...]]  # instance frameworks accepted: torch / onnx / keras
    form: ClassVar[str]                 # model form consumed, a key of dlci.models.FORMS
    package: ClassVar[str]              # distribution whose version is reported (e.g. "apache-tvm")
    modules: ClassVar[tuple[str, ...]] = ()  # top-level modules whose frames identify the converter in tracebacks

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return ""

    def available(self) -> bool:
        return bool(self.version())

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        """True when the exception is the target saying "I do not support this", not a bug."""
        return False

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        raise NotImplementedError

    def compile(self, converted: Any) -> Any:
        return converted

    def run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError
