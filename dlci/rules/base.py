"""What an equivalence rule is: two graphs built from one operator instance that must agree (the EAGLE idea).

A rule is data plus one piece of Python source, ``code``. The same source runs inside dlci's sandboxed workers and is
pasted verbatim into the finding's reproducer, so what dlci compared is exactly what the maintainer re-runs.

The ``code`` contract. It is executed in a namespace that already holds:
  - ``np`` and the framework (``torch`` for library "torch"; ``tf`` and ``keras`` for library "tensorflow");
  - ``INPUTS``: the instance's input arrays (numpy), and ``PARAMS``: the instance's non-tensor settings (decoded);
  - ``OP``: the canonical operator id (e.g. "aten::conv2d", "nn::Conv2d", "keras::Conv2D"), ``CALL``: its recipe
    (the ``Instance.call`` dict, tensors encoded as {"$t": i});
  - the instance's model code (see dlci.findings.repro.MODEL_CODE): for torch ``build_model()`` (a fresh eval-mode
    ``nn.Module`` whose forward takes the inputs), ``to_torch(arrays)``, ``flatten(out)``; for keras
    ``build_layer(dtype=None, xs=None)``, ``call_layer(layer, xs)``, ``build_keras_model()``, ``flatten(out)``.
It must define
  - ``graph_a(inputs, dtype=None) -> list[np.ndarray]``: the plain form. Called a second time with
    ``dtype="float64"`` for the fp64 reference that arbitrates rounding; raise ``NotImplementedError`` when an fp64
    version makes no sense (the comparison then uses the float32 tolerances without arbitration... see compare).
  - ``graph_b(inputs) -> list[np.ndarray]``: the form that must agree with graph A.
Either may raise ``dlci.rules.base.NotApplicable``-like errors by raising ``NotImplementedError("not applicable:
...")``: the test then counts as unsupported, never as a bug.
"""
from __future__ import annotations

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


class NotApplicable(Exception):
    """A rule does not apply to this instance (raised by ``applies``-side code; counts as unsupported)."""


@dataclass(frozen=True)
class Rule:
    name: str                 # registry key and target name suffix: "rule.<name>", e.g. "torch.compile.inductor"
    category: str             # a key of CATEGORIES
    library: str              # "torch" | "tensorflow"
    summary: str              # one line: what must agree and why it must
    graph_a: str              # description of the plain graph
    graph_b: str              # description of the equivalent graph
    code: str                 # Python source defining graph_a(inputs, dtype=None) and graph_b(inputs) (see above)
    # None when the rule applies to the instance, else a short reason (derived from metadata, never a crash)
    applies: Callable[[object], str | None] = field(default=lambda inst: None, compare=False)
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
