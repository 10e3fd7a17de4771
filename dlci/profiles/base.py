"""What a profile is: it recognises a kind of repository and maps changed code to the operators it converts.

A profile reads the repository's own tables (convert maps, op registrations, decorators) at the head revision
(and at the base revision for deleted code), never a hand-kept list of operators. Each selected operator comes with
the file:line that selected it, so a maintainer can see why dlci tests what it tests.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlci.diff import Diff, GitRepo


SMOKE = "module-level change"  # how a touch selected by module-level code (a smoke test of the file) starts


@dataclass(frozen=True)
class Touch:
    """One operator reached by a change."""
    operator: str        # as the repository names it: "softplus.default", "aten::threshold", "AveragePool"
    namespace: str       # how to read that name: aten | torch.nn | onnx | tf | tflite | keras | any
    converter: str       # the code that converts it: "ExportedProgramImporter._softplus", "translate_threshold"
    file: str            # repo-relative path of the line that selected it
    line: int            # 1-based, head coordinates (base coordinates when the code was deleted)
    why: str             # e.g. "converter changed", "helper _avg_pool2d_impl changed (reached from _avg_pool2d)"
    targets: tuple[str, ...] = ()  # dlci targets (frontend entry points) that reach this converter
    profile: str = ""

    @property
    def indirect(self) -> bool:
        """Reached through a changed helper, library op or per-graph code, not by its own converter or map entry
        (a helper shared by hundreds of converters must not crowd out the entry the PR edited)."""
        return self.why.startswith(("helper ", "library op ", SMOKE)) or "runs for every graph" in self.why

    @property
    def entry_removed(self) -> bool:
        """The PR deleted this operator's registration or map entry: head calling it unsupported is what the
        base revision is asked about (support removed), so its reproducers' checks are likely owed."""
        return self.why.endswith("(base line)") and "removed" in self.why

    @property
    def smoke(self) -> bool:
        """Selected only because module-level code of its file changed: a few of its tests are enough."""
        return self.why.startswith(SMOKE)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ProfileResult:
    touches: list[Touch] = field(default_factory=list)
    # changed files this profile recognised as its own (converter code) but could map to no operator:
    # reported, so a change to shared infrastructure is visible rather than silently ignored
    unmapped: list[dict] = field(default_factory=list)   # {"file", "line", "region", "why"}
    # changes to code every graph goes through whatever its operators (passes, fusion, lowering, the importer's own
    # node loop): no operator stands for them, multi-operator graphs do (the graph fuzzer's share of a scan)
    graph_level: list[dict] = field(default_factory=list)  # {"file", "line", "why", "component", "targets"}


class Profile:
    """Subclass, set ``name``/``description``, implement :meth:`detect` and :meth:`analyse`."""

    name: str = ""
    description: str = ""
    # file patterns (fnmatch, repo-relative) of Python converter code whose line coverage can refine selection
    python_converter_files: tuple[str, ...] = ()
    # how a checkout of this kind of repository is made importable by default (a .dlci.yml overrides both):
    # checkout-relative PYTHONPATH entries, and environment values ({site_packages}, {checkout} are expanded)
    python_path: tuple[str, ...] = ()
    env: dict = {}
    # (file pattern, component) of the compiler's graph-level code: a change there is tested with generated
    # multi-operator graphs on the targets that reach the component (fnmatch patterns, repo-relative)
    graph_code: tuple[tuple[str, str], ...] = ()

    def prepare_checkout(self, root: Path) -> None:
        """Give a checkout of this kind of repository what it needs, beside its own sources, to run over the
        installed libraries (nothing by default)."""

    def detect(self, repo: GitRepo) -> bool:
        """Is this profile's kind of repository (checked at head)?"""
        raise NotImplementedError

    def analyse(self, repo: GitRepo, diff: Diff) -> ProfileResult:
        """Map the diff's changed regions to operators."""
        raise NotImplementedError
