"""What a PR scan tests: the targets that reach the touched converters, the equivalence rules of a library's own PR,
the instances of the touched operators, and the environment the revision's code needs."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from dlci.config import Config, ConfigError

# profiles whose repository is the library an equivalence rule exercises
RULE_LIBRARIES = {"pytorch": "torch"}


def canonical_targets(analysis, chosen: dict) -> dict[str, set[str]]:
    """canonical operator -> targets that reach a changed converter for it (all chosen when a touch names none)."""
    from dlci import operators
    want: dict[str, set[str]] = {}
    for t in analysis.touches:
        reach = {x for x in t.targets if x in chosen} if t.targets else set(chosen)
        for canon in operators.canonical(t.operator, t.namespace):
            want.setdefault(canon, set()).update(reach)
    return {c: ts for c, ts in want.items() if ts}


def device_only(touch) -> bool:
    """Only device targets (GPU runners) reach this touched code."""
    from dlci.targets import registry
    reg = registry()
    return bool(touch.targets) and all(n in reg and reg[n].on_accelerator for n in touch.targets)


def rule_targets(analysis, config: Config, named: list[str] | None) -> dict:
    """Equivalence rules for the touched library (all of its rules unless .dlci.yml `rules` names some or says
    [none]); explicit --targets naming rule.<name> targets are honoured as well."""
    from dlci.rules import rule_targets as select
    # the rules run the library on the CPU: a PR whose touches only device targets reach (a CUDA kernel) gets none
    libraries = {RULE_LIBRARIES[t.profile] for t in analysis.touches
                 if t.profile in RULE_LIBRARIES and not device_only(t)}
    rules_named = [t for t in (named or []) if t.startswith("rule.")]
    if config.rules is not None and [r.lower() for r in config.rules] == ["none"]:
        return select(rules_named) if rules_named else {}
    try:
        chosen = select(config.rules or None) if config.rules else {}
        if not config.rules:
            for lib in libraries:
                chosen.update(select(library=lib))
        if rules_named:
            chosen.update(select(rules_named))
    except KeyError as e:
        raise ConfigError(f"rules: {str(e).strip(chr(34) + chr(39))}") from None
    if named and not rules_named:
        return {}  # explicit --targets without rule targets: the user narrowed the run
    return chosen


def runtime_defaults(profile_names: list[str]) -> tuple[tuple[str, ...], dict]:
    """python_path and env that the detected profiles need by default (a .dlci.yml overrides them)."""
    from dlci.profiles import PROFILES
    paths: list[str] = []
    env: dict = {}
    for name in profile_names:
        p = PROFILES[name]
        paths += [x for x in p.python_path if x not in paths]
        env.update(p.env or {})
    return tuple(paths), env


def converter_files(analysis) -> list[str]:
    """Changed Python files that hold converters of a detected profile: their lines are traced while converting."""
    from dlci.profiles import PROFILES
    patterns = [pat for name in analysis.profiles for pat in getattr(PROFILES[name], "python_converter_files", ())]
    return sorted({f.path for f in analysis.diff.files if f.status != "deleted" and f.path.endswith(".py")
                   and any(fnmatch.fnmatch(f.path, p) for p in patterns)})


# -- the graph fuzzer's share ----------------------------------------------------------------------------------------

COMPILER_PROFILES = ("tvm", "openvino", "onnxruntime")  # the fuzz share is on by default for their repositories
DEFAULT_FUZZ_SHARE = 0.3


@dataclass
class FuzzShare:
    share: float            # of the testing budget
    targets: dict           # name -> Target: installed, taking ONNX or torch graphs, reached by the change
    must: set[str]          # corpus operators the networks are built around (touched ones); empty: whole corpus
    strategy: str = "mcts"
    max_blocks: int = 4
    seed: int = 0
    why: str = ""

    def describe(self) -> dict:
        return {"share": self.share, "targets": sorted(self.targets), "built_around": sorted(self.must),
                "strategy": self.strategy, "why": self.why}


def fuzz_share(analysis, config: Config, named: list[str] | None, share: float | None = None) -> FuzzShare | None:
    """The fuzz share of a scan, or None: ``share`` (``--fuzz-share``), else ``.dlci.yml`` ``fuzz.share`` (default
    0.3 for a compiler's repository, else off); networks go to the installed ONNX-taking targets that the change reaches (a touched converter's, or
    graph-level code's, see Profile.graph_code), built around the touched operators the corpus has (each with varied
    producers and consumers), or over the whole corpus when only graph-level code changed."""
    from dlci import operators, targets
    settings = dict(config.fuzz or {})
    default = DEFAULT_FUZZ_SHARE if set(analysis.profiles) & set(COMPILER_PROFILES) else 0.0
    share = float(settings.get("share", default)) if share is None else share
    if share <= 0:
        return None
    reached = {x for t in analysis.touches for x in t.targets} | {x for g in analysis.graph_level for x in g["targets"]}
    wanted = set(named or config.targets or []) or None
    # ONNX-taking targets by default; torch-only targets (each network as an nn.Module) when .dlci.yml asks: each
    # of their tests exports the module, and localising a failure exports every node alone, which a PR's budget
    # rarely affords beside the operators' own tests
    kinds = {"onnx", "torch"} if settings.get("torch") else {"onnx"}
    chosen = {n: t for n, t in targets.registry().items()
              if n in reached and kinds & set(t.frameworks) and t.available() and (wanted is None or n in wanted)}
    if not chosen:
        return None
    from dlci.fuzz.corpus import load_corpus
    corpus = load_corpus()
    touched = {c for t in analysis.touches if set(t.targets) & set(chosen)
               for c in operators.canonical(t.operator, t.namespace)}
    must = {op for op in corpus.ops if operators.instance_ops(f"onnx::{op}") & touched}
    if not must and not analysis.graph_level:
        return None  # the touched operators are in no block: nothing multi-operator to build around them
    why = (f"graph-level code changed ({len(analysis.graph_level)} place(s))" if analysis.graph_level else "") + \
        ("; " if analysis.graph_level and must else "") + \
        (f"networks around the touched operators {', '.join(sorted(must))}" if must else "")
    return FuzzShare(share, chosen, must, settings.get("strategy", "mcts"), settings.get("max_blocks", 4),
                     settings.get("seed", 0), why)
