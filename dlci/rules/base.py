"""What an equivalence rule is: two graphs built from one operator instance that must agree (the EAGLE idea).

A rule is data (:class:`Rule`) plus two plain Python functions in an ordinary module: one computes graph A, the
other graph B. dlci's sandboxed workers call them; a finding's reproducer pastes their source, with the source of
every module-level name they use (helpers, tables, the :class:`~dlci.rules.case.Case` class), so what dlci
compared is what the maintainer re-runs, and the reproducer needs the frameworks under test but never dlci.

Writing a rule (the built-in ones in ``dlci/rules/torch`` and ``dlci/rules/tf`` are examples):

- ``graph_a(case, inputs, dtype=None) -> list[np.ndarray]``: the plain form. ``case`` is a
  :class:`~dlci.rules.case.Case` (``TorchCase`` / ``KerasCase``): the instance's ``inputs`` (numpy), ``params``,
  ``op``, ``call`` (the ``Instance.call`` recipe, tensors encoded as ``{"$t": i}``), ``state`` (torch module
  weights) or ``config`` / ``weights`` (keras), and the instance's model code: ``case.build_model()``,
  ``case.to_torch(arrays)``, ``case.flatten(out)``, ``case.model_class`` for torch; ``case.build_layer(dtype=None,
  xs=None)``, ``case.call_layer(layer, xs)``, ``case.build_keras_model()``, ``case.flatten(out)`` for keras.
  ``inputs`` is a fresh copy of ``case.inputs``. Called a second time with ``dtype="float64"`` (and float inputs
  widened) for the fp64 reference that arbitrates rounding; raise ``NotImplementedError`` when an fp64 form makes
  no sense (the comparison then runs without arbitration).
- ``graph_b(case, inputs) -> list[np.ndarray]``: the form that must agree with graph A.
- Either raises ``NotImplementedError("not applicable: ...")`` when the rule does not cover the instance: the test
  then counts as unsupported, never as a bug.

The functions are module-level ``def``s; the module-level names they use must be defined in their module by one
statement each (a ``def``, a ``class``, an assignment or an import) or imported from another such module with
``from module import name``. Imports of frameworks and of the standard library are copied into the reproducer as
imports; names from dlci or from the rule's own package are pasted as source. ``Rule.graph_a_fn`` and
``Rule.graph_b_fn`` take the functions themselves or ``"module:function"`` paths, imported only when a test runs
(the built-in rules do so, so that listing rules imports no framework).

A project registers its own rules from a module named in ``$DLCI_RULE_MODULES``: it lists them in a module-level
``RULES`` (or calls :func:`dlci.rules.register`). ``why_not`` says, from metadata, why the rule does not apply to an
instance (None when it does).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

# EAGLE's 16 categories (numbers as in the paper) plus the extras dlci adds
CATEGORIES = {
    "optimization": "1: eager vs optimized/compiled execution",
    "same_padding": "2: built-in 'same' padding vs explicit padding",
    "dim_lift": "3: a 2-D operator through its 3-D form",
    "depthwise": "4: depthwise convolution reimplemented from plain convolutions",
    "separable": "5: separable convolution reimplemented from depthwise + pointwise convolutions",
    "dilated": "6: dilated convolution reimplemented with a zero-inserted kernel",
    "formula": "7: an API vs the formula its documentation gives",
    "sparse": "8: dense vs sparse inputs",
    "image_scale": "9: normalized vs 0-255 image inputs",
    "time_major": "10: RNN time-major vs batch-major",
    "pipeline": "11: direct call vs through a dataset pipeline",
    "dtype": "12: the same values in two dtypes whose ranges both hold them",
    "codec": "13: encode -> decode with a lossless image codec",
    "pad_unpad": "14: pad -> unpad",
    "batch": "15: batch-size invariance in inference mode",
    "save_load": "16: save -> load",
    # beyond EAGLE
    "layout": "memory layout (channels_last vs contiguous, channels_first vs channels_last)",
    "autograd": "forward values vs autograd-derived values (forward-mode vs reverse-mode)",
    "device": "CPU vs GPU (only where a GPU runner exists)",
}

LIBRARIES = ("torch", "tensorflow")

GraphFn = Callable[..., list]


class NotApplicable(Exception):
    """A rule does not apply to this instance (counts as unsupported)."""


def _always(inst) -> str | None:
    return None


def resolve_function(ref: str | GraphFn) -> GraphFn:
    """A graph function given as itself or as ``"module:function"``."""
    if callable(ref):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True, kw_only=True)
class Rule:
    name: str                 # registry key and target name suffix: "rule.<name>", e.g. "torch.compile.inductor"
    category: str             # a key of CATEGORIES
    library: str              # "torch" | "tensorflow"
    summary: str              # one line: what must agree and why it must
    graph_a: str              # description of the plain graph
    graph_b: str              # description of the equivalent graph
    graph_a_fn: str | GraphFn  # graph_a(case, inputs, dtype=None), or "module:function" (see above)
    graph_b_fn: str | GraphFn  # graph_b(case, inputs), or "module:function"
    # the reason this rule does not apply to the instance; None when it applies (from metadata, never a crash)
    why_not: Callable[[object], str | None] = field(default=_always, compare=False)
    # which operators this rule applies to, described for `dlci rules --list` (e.g. "OpInfo.supports_sparse")
    derived_from: str = ""
    exact: bool = False       # compare bit-exactly (inverse pairs, integer data); integer outputs always are exact
    # error text (regex over "Type: message") meaning graph B's feature does not cover this instance: unsupported
    unsupported: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # importable modules required (e.g. "torch._inductor"); missing -> rule unavailable
    timeout: float | None = None  # per test, when the default is too short (torch.compile cold start)

    @property
    def target(self) -> str:
        return f"rule.{self.name}"

    @property
    def framework(self) -> str:
        """The instance framework the rule consumes."""
        return "torch" if self.library == "torch" else "keras"

    def graph_functions(self) -> tuple[GraphFn, GraphFn]:
        """(graph A, graph B) as functions (imports their modules, and so the framework)."""
        return resolve_function(self.graph_a_fn), resolve_function(self.graph_b_fn)
