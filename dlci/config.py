"""`.dlci.yml`: how a target repository tells dlci what to test and how to import its own code.

Every key is optional (the detected profile supplies defaults). In a pull request's scan the policy (every key
but python_path, env and install) is read from the base revision, so that the PR cannot change what tests it or
what counts; python_path, env and install are read from each revision's own file, since each needs its own to
build and import itself.

```yaml
profiles: [tvm]                 # restrict the profiles (default: every profile that recognises the repo)
targets: [tvm.from_fx, tvm.from_onnx]   # restrict the targets (default: those the touched converters reach)
sources: [opinfo, module_db, onnx_node] # migration sources (default: all built-in ones)
budget: 300                     # seconds of testing when --budget is not given
limit_per_op: 8                 # instances per operator per source
rules: [torch.compile.inductor]  # equivalence rules for a library's own PR (default: all of that library's;
                                # [none] switches them off); see `dlci rules --list`
known_issues:                   # findings to list as known, not as bugs (see dlci/findings/known.py)
  - signature: "tvm.from_fx|compare|nn::ELU|*"
    link: https://github.com/apache/tvm/issues/NNNN
python_path: [python]           # checkout-relative entries put first on PYTHONPATH
env:                            # environment for the tests; {checkout}, {prefix}, {site_packages} are expanded
  TVM_LIBRARY_PATH: "{site_packages}/tvm/lib"
install: "pip install --no-deps --target {prefix} dist/*.whl"   # run in each revision's checkout; {prefix} is
                                                                # put first on PYTHONPATH
bisect: [commits, releases]     # commits (default): a finding new in a multi-commit PR names the commit that
                                # introduced it; releases: one already on base is bisected over the releases of its
                                # target's package; [none] switches both off (see dlci/bisect)
bisect_budget: 600              # seconds for all of a scan's bisections (default 600)
repo_tests:                     # the repository's own tests as seeds of a scan (dlci.scan.repo_tests)
  share: 0.15                   # of the scan's budget (default 0.15, at most 90 s; 0 = off)
  max_tests: 24                 # test functions run per scan
  paths: ["tests/frontend/test_*.py"]        # more test files (globs) besides the profile's own layout
  entries: {"mypkg.frontend:from_onnx": onnx}  # more entry points to record: what each takes first
                                # (exported_program, fx, onnx, or module: an nn.Module and its example args)
fuzz:                           # the graph fuzzer's share of a scan (dlci.fuzz): networks built around the touched
  share: 0.3                    # operators, or over the whole corpus for graph-level changes; share of the testing
  strategy: mcts                # budget (default 0.3 for tvm/openvino/onnxruntime repositories, else 0; 0 = off)
  max_blocks: 4
  seed: 0
  torch: false                  # also the torch-only targets (each network as an nn.Module)
```
Unknown keys and wrong types are configuration errors (exit 2), reported with the key's name.
"""
from __future__ import annotations

from dlci.errors import UsageError

from dataclasses import dataclass, field

CONFIG_FILE = ".dlci.yml"


class ConfigError(UsageError):
    """A malformed .dlci.yml: the CLI reports it and exits 2."""


@dataclass
class Config:
    profiles: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    budget: float | None = None
    limit_per_op: int | None = None
    python_path: list[str] | None = None
    env: dict[str, str] | None = None
    install: str | None = None
    known_issues: list[dict] = field(default_factory=list)
    rules: list[str] | None = None
    bisect: list[str] | None = None
    bisect_budget: float | None = None
    fuzz: dict | None = None
    repo_tests: dict | None = None
    source: str = "defaults"  # where it came from, for the report

    # what a revision needs to build and import itself: read from each revision's own .dlci.yml. Everything else
    # is policy (what is tested, with what budget, what counts, what is known): read from the base revision only,
    # so that a pull request cannot narrow its own testing or silence its own findings
    BUILD_KEYS = ("python_path", "env", "install")

    def policy(self) -> dict:
        return {k: getattr(self, k) for k in self._TYPES if k not in self.BUILD_KEYS}

    def with_build_of(self, other: "Config") -> "Config":
        """This configuration's policy with ``other``'s build keys (the head revision's python_path/env/install
        under the base revision's policy)."""
        import dataclasses
        return dataclasses.replace(self, **{k: getattr(other, k) for k in self.BUILD_KEYS})

    def policy_changes(self, other: "Config") -> list[str]:
        """The policy keys whose values differ in ``other``."""
        mine, theirs = self.policy(), other.policy()
        return [k for k in mine if mine[k] != theirs[k]]

    def known(self):
        from dlci.findings.known import parse
        return parse(self.known_issues, self.source)

    _TYPES = {"profiles": list, "targets": list, "sources": list, "budget": (int, float), "limit_per_op": int,
              "python_path": list, "env": dict, "install": str, "known_issues": list,
              "rules": list, "bisect": (list, str), "bisect_budget": (int, float), "fuzz": dict,
              "repo_tests": dict}
    FUZZ_KEYS = {"share": (int, float), "strategy": str, "max_blocks": int, "seed": int, "torch": bool}
    REPO_TESTS_KEYS = {"share": (int, float), "max_tests": int, "paths": list, "entries": dict}
    REPO_TESTS_TAKES = ("exported_program", "fx", "onnx", "module")  # what a recorded entry point takes first

    @classmethod
    def parse(cls, text: str | None, origin: str = CONFIG_FILE) -> "Config":
        if text is None:
            return cls()
        import yaml
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{origin}: not valid YAML: {e}") from None
        except RecursionError:
            raise ConfigError(f"{origin}: nested too deeply to be a configuration") from None
        if data is None:
            return cls(source=origin)
        if not isinstance(data, dict):
            raise ConfigError(f"{origin}: expected a mapping at the top level, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls._TYPES))
        if unknown:
            raise ConfigError(f"{origin}: unknown key(s) {', '.join(map(str, unknown))}; "
                              f"known: {', '.join(sorted(cls._TYPES))}")
        for key, value in data.items():
            want = cls._TYPES[key]
            if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
                names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
                raise ConfigError(f"{origin}: {key} must be {names}, got {type(value).__name__}")
        for key in ("profiles", "targets", "sources", "python_path", "rules"):
            if any(not isinstance(v, str) for v in data.get(key) or []):
                raise ConfigError(f"{origin}: every entry of {key} must be a string")
        if any(not isinstance(v, (str, int, float)) for v in (data.get("env") or {}).values()):
            raise ConfigError(f"{origin}: env values must be strings")
        for name in data.get("env") or {}:
            # dlci's own settings (the cache roots, the untrusted mark, the sandbox) are never a revision's to set
            if not isinstance(name, str) or str(name).upper().startswith("DLCI_"):
                raise ConfigError(f"{origin}: env.{name}: names starting with DLCI_ are dlci's own settings, not "
                                  "a revision's")
        if data.get("budget") is not None and data["budget"] <= 0:
            raise ConfigError(f"{origin}: budget must be positive")
        if isinstance(data.get("bisect"), str):
            data["bisect"] = [data["bisect"]]
        bad = [v for v in data.get("bisect") or [] if v not in ("commits", "releases", "none")]
        if bad:
            raise ConfigError(f"{origin}: bisect entries are commits, releases or none; got {bad[0]!r}")
        if data.get("bisect_budget") is not None and data["bisect_budget"] <= 0:
            raise ConfigError(f"{origin}: bisect_budget must be positive")
        for key, value in (data.get("fuzz") or {}).items():
            want = cls.FUZZ_KEYS.get(key)
            if want is None:
                raise ConfigError(f"{origin}: unknown fuzz key {key!r}; known: {', '.join(sorted(cls.FUZZ_KEYS))}")
            if not isinstance(value, want) or (isinstance(value, bool) and want is not bool):
                raise ConfigError(f"{origin}: fuzz.{key} must be a number" if key == "share" else
                                  f"{origin}: fuzz.{key} must be {want.__name__}")
        fz = data.get("fuzz") or {}
        if "share" in fz and not 0 <= fz["share"] <= 0.9:
            raise ConfigError(f"{origin}: fuzz.share must be between 0 and 0.9, got {fz['share']}")
        if fz.get("strategy", "mcts") not in ("mcts", "random"):
            raise ConfigError(f"{origin}: fuzz.strategy is mcts or random, got {fz['strategy']!r}")
        if fz.get("max_blocks", 1) < 1:
            raise ConfigError(f"{origin}: fuzz.max_blocks must be at least 1")
        _check_repo_tests(data.get("repo_tests") or {}, origin, cls)
        if data.get("limit_per_op") is not None and data["limit_per_op"] < 1:
            raise ConfigError(f"{origin}: limit_per_op must be at least 1")
        for key, text in [("install", data.get("install"))] + [(f"env.{k}", v) for k, v in (data.get("env") or {}).items()]:
            if isinstance(text, str):
                _check_placeholders(text, f"{origin}: {key}")
        from dlci.findings.known import KnownIssueError, parse as parse_known
        try:
            parse_known(data.get("known_issues") or [], origin)
        except KnownIssueError as e:
            raise ConfigError(str(e)) from None
        cfg = cls(**{k: v for k, v in data.items() if v is not None}, source=origin)
        cfg.env = {str(k): str(v) for k, v in (cfg.env or {}).items()} if cfg.env is not None else None
        return cfg


def _check_repo_tests(value: dict, origin: str, cls) -> None:
    """``repo_tests``: known keys of the right types, a share between 0 and 0.5, entry points named
    ``module:function`` with what they take."""
    import re
    for key, v in value.items():
        want = cls.REPO_TESTS_KEYS.get(key)
        if want is None:
            raise ConfigError(f"{origin}: unknown repo_tests key {key!r}; known: "
                              f"{', '.join(sorted(cls.REPO_TESTS_KEYS))}")
        if not isinstance(v, want) or isinstance(v, bool):
            raise ConfigError(f"{origin}: repo_tests.{key} must be "
                              f"{'a number' if key == 'share' else want.__name__}")
    if not 0 <= value.get("share", 0) <= 0.5:
        raise ConfigError(f"{origin}: repo_tests.share must be between 0 and 0.5, got {value['share']}")
    if value.get("max_tests", 1) < 1:
        raise ConfigError(f"{origin}: repo_tests.max_tests must be at least 1")
    for p in value.get("paths") or []:
        if not isinstance(p, str) or p.startswith("/") or ".." in p.split("/"):
            raise ConfigError(f"{origin}: repo_tests.paths entries are repository-relative globs, got {p!r}")
    for spec, takes in (value.get("entries") or {}).items():
        if not isinstance(spec, str) or not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", spec):
            raise ConfigError(f"{origin}: repo_tests.entries keys are module:function, got {spec!r}")
        if takes not in cls.REPO_TESTS_TAKES:
            raise ConfigError(f"{origin}: repo_tests.entries.{spec} takes one of "
                              f"{', '.join(cls.REPO_TESTS_TAKES)}, got {takes!r}")


PLACEHOLDERS = ("checkout", "prefix", "site_packages")  # what install and env values may name in braces


def _check_placeholders(text: str, where: str) -> None:
    """``{checkout}``, ``{prefix}``, ``{site_packages}`` and ``{{``/``}}`` (a literal brace) only."""
    import string
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as e:
        raise ConfigError(f"{where}: {e} (write a literal brace as {{{{ or }}}})") from None
    bad = [n for n in names if n not in PLACEHOLDERS]
    if bad:
        raise ConfigError(f"{where}: unknown placeholder {{{bad[0]}}}; known: "
                          + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS) + " (a literal brace is {{ or }})")
