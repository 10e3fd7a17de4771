"""What a target is: one frontend entry point (plus the compiler/runtime behind it) that dlci tests.

Everything dlci needs to know about a target is declared on its class, so that adding a target is one module under
``dlci/targets`` plus its reproducer snippet ``dlci/templates/targets/<name>.j2``: the campaign, the reducer, the
reproducers, the test-style reproducers and the diff profiles read these declarations and nothing else.
"""
from __future__ import annotations

import importlib.metadata
from typing import Any, ClassVar, Sequence

import numpy as np

from dlci.outcome import INCONSISTENT, Outcome

# name -> target; the built-in modules and a project's own (see dlci.targets) register into it on import
TARGETS: dict[str, "Target"] = {}


def register(cls: type["Target"]) -> type["Target"]:
    """Class decorator: instantiate the target and register it by name."""
    if cls.name in TARGETS:
        raise ValueError(f"target {cls.name!r} registered twice")
    TARGETS[cls.name] = cls()
    return cls


class Target:
    """A frontend entry point that can reach a converter, followed by compile and run.

    ``convert``/``compile``/``run`` are timed and attributed separately (a crash names its stage).
    """
    name: ClassVar[str]                    # e.g. "tvm.from_exported_program"
    frameworks: ClassVar[tuple[str, ...]]  # instance frameworks accepted: torch / onnx / keras
    form: ClassVar[str]                    # model form consumed, a key of dlci.models.FORMS
    package: ClassVar[str]                 # distribution whose version is reported (e.g. "apache-tvm")
    modules: ClassVar[tuple[str, ...]] = ()  # top-level modules whose frames identify the converter in tracebacks
    # the code this target runs, as "<project>:<component>" ("tvm:frontend.onnx", "onnxruntime:cpu",
    # "pytorch:decompositions"): a diff profile that maps a change to a component selects every target reaching it
    reaches: ClassVar[tuple[str, ...]] = ()
    device: ClassVar[str] = "cpu"          # where the compiled model runs: cpu, cuda, vulkan, gpu (OpenVINO's GPU)
    # the probe (a key of dlci.devices.PROBES) that finds at run time whether that device is on this runner; None:
    # the CPU, always here. A device target is absent ("not on this runner", with the reason), never a failure
    probe: ClassVar[str | None] = None
    timeout: ClassVar[float | None] = None  # seconds per test when the run's default is too short
    warm_imports: ClassVar[tuple[str, ...]] = ()  # modules a worker imports before its first test of this target
    test_style: ClassVar[str | None] = None  # a key of dlci.findings.test_style.STYLES (None: standalone script only)
    # instance framework -> the exporter target that turns such instances into this target's form first
    # ({"torch": "torch.onnx"}): a failure the exporter shows identically on the same instances is the exporter's
    exporters: ClassVar[dict[str, str]] = {}
    job_func: ClassVar[str] = "dlci.testcase:execute_job"  # the worker function running one test (module:function)
    # its outputs are a TFLite model's, in the converter's subgraph order (keras instances: put back in the order
    # the keras model returns them, dlci.models.keras_output_order)
    tflite_outputs: ClassVar[bool] = False
    # element types the target has no tensors of: a test with such an input or output is unsupported, not a finding
    unsupported_dtypes: ClassVar[tuple[str, ...]] = ()

    # tests packed into one model and converted/compiled together (dlci.testcase.execute_batch) where the form has
    # a packer (dlci.models.pack.PACKERS); 1: one test per model. Chosen from measured costs: docs/architecture.md, "Batches"
    batch_size: ClassVar[int] = 1

    # the entry point's own options, beside the defaults dlci converts with: name -> the values worth trying
    # (decompositions off, parameters kept as graph inputs, dynamic shapes...). An instance that carries a choice
    # for this target (``call["options"][name]``) is converted with it (:meth:`with_options`), and its reproducer
    # says so; the directed search varies them (dlci.directed.mutations: target options)
    options: ClassVar[dict[str, tuple]] = {}
    chosen: dict = {}  # the options this copy converts with

    def with_options(self, options: dict) -> "Target":
        """This target converting with ``options`` (names of :attr:`options` only; others are refused)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise ValueError(f"{self.name} has no option {', '.join(unknown)}")
        import copy
        other = copy.copy(self)
        other.chosen = dict(options)
        return other

    def packer(self):
        """How this target's tests are packed (dlci.models.pack.PACKERS), or None: one test per model."""
        from dlci.models.pack import PACKERS
        return PACKERS.get(self.form) if self.batch_size > 1 else None

    def version(self) -> str:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return ""

    def presence(self):
        """Can this target run here? A :class:`dlci.devices.Presence`: the package, then the device."""
        from dlci.devices import Presence, presence
        found = presence(self.probe) if self.probe else None
        if found is not None and not found.present:
            return found  # the probe says why (a CPU-only build, no device...)
        if not self.version():
            return Presence(False, f"{self.package} is not installed")
        return found or Presence(True, "cpu")

    def available(self) -> bool:
        return bool(self.version()) and (self.probe is None or self.presence().present)

    @property
    def on_accelerator(self) -> bool:
        return self.device != "cpu"

    # -- the device-differential oracle (dlci.oracles.device); the CPU targets keep these defaults ----------------
    def tolerances(self, instance) -> dict[str, tuple[float, float]]:
        """(rtol, atol) per output dtype that this target's own project allows on its device for this instance,
        beyond dlci's defaults (PyTorch: OpInfo's toleranceOverride for CUDA)."""
        return {}

    def expected_to_differ(self, instance) -> str | None:
        """Why this instance's result on the device is not expected to equal the CPU's, when the target's project
        says so (OpInfo: a skip or xfail of PyTorch's own CPU-vs-CUDA test); None otherwise."""
        return None

    def deterministic_run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray] | str | None:
        """Run again with the framework's deterministic algorithms: the outputs, or the framework's statement that
        the computation has no deterministic implementation (a str), or None when the target has no such mode."""
        return None

    def device_name(self) -> str:
        """The accelerator this process runs the target on, as its framework names it (reports, reproducers)."""
        return self.device

    def device_error(self, exc: BaseException) -> str | None:
        """A device error that poisons the process (CUDA: illegal memory access, device-side assert): its short
        name, else None. The test is a crash and the worker is replaced after it."""
        return None

    def is_unsupported(self, exc: BaseException, stage: str) -> bool:
        """True when the exception is the target saying "I do not support this", not a bug."""
        return False

    def fingerprint(self, converted: Any) -> str | None:
        """A short, deterministic fingerprint of what ``convert`` made (the imported module, the emitted graph):
        equal at two revisions when both converted an input to the same model. None: this target cannot say."""
        return None

    def graph_nodes(self, converted: Any) -> list[str] | None:
        """What ``convert`` made, one readable line per node and without value names (dlci.targets._common's
        ``onnx_nodes``, ``tvm_nodes``): where two revisions' fingerprints differ, the lines that differ say what the
        change made differently. None: this target cannot say."""
        return None

    def is_harness_failure(self, exc: BaseException) -> bool:
        """True when the exception says the environment is incomplete (a library or header dlci's setup failed to
        provide), not that the target is wrong: the test is invalid, never a finding."""
        return False

    def unsupported_operators(self, message: str) -> set[str]:
        """The operators (bare names: erfinv, special_bessel_j0) that an "unsupported" message of this target lists
        as the ones it cannot convert; a packed batch's members of those operators are unsupported without a run
        alone (dlci.testcase._split). Empty: the target's messages do not say."""
        return set()

    def unsupported_nodes(self, message: str) -> set[str]:
        """The graph nodes' names (an operator's overload as torch names it: 'linalg_lu_solve.default', or a bare
        name) that an "unsupported" message lists; a packed batch's members holding one are unsupported without
        a run alone (dlci.models.pack.Packer.owners). By default the operators it lists."""
        return self.unsupported_operators(message)

    def standing_in(self, names: set[str], nodes: frozenset = frozenset()) -> "Target | None":
        """This target converting with each graph node of ``names`` (what :meth:`unsupported_nodes` read from its
        message) and each node of ``nodes`` ((function name, node name) pairs: a member's whose node crashed the
        converter) replaced by a stand-in of the node's shape and type, or None where it cannot. A packed batch
        whose conversion failed on such nodes runs its other members so, without being exported again: the
        stood-in nodes belong to members decided otherwise, whose outputs are not read
        (dlci.testcase._others_standing_in)."""
        return None

    def stand_in_graph(self, model: Any) -> Any:
        """The torch.fx graph whose node names :meth:`standing_in` reads for ``model`` (a packed model of this
        target's form), or None where the target has none: the graph its converter walks."""
        return None

    def convert(self, model: Any, inputs: Sequence[np.ndarray]) -> Any:
        raise NotImplementedError

    def compile(self, converted: Any) -> Any:
        return converted

    def run(self, compiled: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    # -- findings -----------------------------------------------------------------------------------------------
    def oracle_of(self, outcome: Outcome) -> str:
        """The oracle that judged a failure of this target (findings.json ``oracle``)."""
        return "inconsistency" if outcome.status == INCONSISTENT else "crash"

    def finding_details(self) -> dict:
        """More fields for every finding of this target (an equivalence rule names itself and its two graphs)."""
        return {}

    def repro_template(self) -> str:
        """The reproducer snippet that defines ``run_target(inputs)`` (under dlci/templates): the generic
        single-operator script runs the target with it (dlci.findings.repro.render). A target whose reproducer is
        another script altogether defines ``render_repro(finding, instance, repro_dir) -> Path`` instead."""
        return f"targets/{self.name}.j2"
