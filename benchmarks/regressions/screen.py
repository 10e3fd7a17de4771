"""Exhaustive screen of upstream fix commits for the real-regressions corpus (cases.yaml).

    python benchmarks/regressions/screen.py --project tvm --git-dir /path/to/apache-tvm.git \\
        --since 2024-09-01 --until 2025-09-01 --out DIR [--stage revert|test|groundtruth] [--timeout S]
    python benchmarks/regressions/screen.py --project onnxscript --git-dir /path/to/onnxscript.git ...

Every first-parent commit of the repository's default branch whose committer date (UTC) lies in [since, until)
and that touches one of the project's frontend folders is one row of the screening table; the stages, in order,
and the first one a commit fails is the column that stopped it:

  not_fix_by_rule        the subject does not match FIX_RULE (the mechanical definition of a "fix commit")
  no_frontend_change     no .py file of the frontend folders is changed
  revert_does_not_apply  the commit's reverse diff, restricted to the frontend .py files, with RENAMES applied to
                         its text (the API renames between the fix's code and the installed release), does not apply
                         to the installed release with `patch -R -F3` (every hunk must apply), or the reverted
                         module does not compile, or it names a global the installed module does not define (pyflakes)
                         ... unless the transplant applies: the touched frontend package whole (torchlib; TVM:
                         the touched frontend folders), at the fix commit (base) and at its parent (head), with
                         RENAMES, over the installed release's other modules; both must compile. The fix's own
                         test then decides, as for a revert, whether that pair is a case (transplant())
  no_own_test            the commit adds or changes no test (test functions of its test files whose source, with
                         decorators and the module-level assignments and classes it names, differs from the parent's; for onnxscript also the TorchLibOpInfo entries of ops_test_data.py it
                         adds or changes and the entries over the OpInfos of extra_opinfo.py whose definition or
                         sample function it changes)
  test_not_extractable   the test cannot be extracted at the fix commit (extract_tests.py / extract_opinfo_tests.py)
  test_not_failing_reverted  the extracted test does not fail on the installed sources with the fix reverted
  test_not_passing_fixed     the extracted test does not pass on the installed sources
  qualifies              a case: the reverse diff is the head, the extracted test its ground truth

With --kind refactor the stages are fix_by_rule (FIX_RULE or an own test: not a refactor), not_refactor_by_rule
(the subject does not match REFACTOR_RULE), no_frontend_change, revert_does_not_apply (no transplant),
does_not_import (either revision fails to import a touched module: groundtruth.imports_both) and qualifies: the
reverse diff is the base, the installed release the head (refactor_row).

The screen never runs dlci and never looks at whether dlci catches a case. Writes DIR/screen.{json,csv,md} and, for
every commit past the revert stage, DIR/cand/<id>/ (<id>.diff and the extracted upstream test files, named as store.py
names them). --emit adds the qualifying rows to cases.yaml and records their materialisation in materialise.yaml (the
files as edits of the installed release with lines of the upstream files, the test files' names and sha256): no
upstream text goes into the tree. Ground-truth results are cached (groundtruth.py's cache, $DLCI_CACHE_DIR). The same inputs (mirror
state, window, installed releases) give the same table.
"""
from __future__ import annotations

import argparse
import ast
import csv
import datetime as dt
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import yaml  # noqa: E402

import store  # noqa: E402

FIX_RULE = (r"(?i)(?<![a-z])(fix\w*|bug\w*|hotfix|incorrect\w*|wrong\w*|error\w*|crash\w*|issue\w*|"
            r"correct(ly|ness|ion)?)(?![a-z])")

# --kind refactor: the mechanical definition of a behaviour-preserving change (matched on the subject of a commit that
# is no fix by FIX_RULE and adds or changes no test): a refactor, a simplification, tracing instead of scripting,
# lint, annotations, names moved or replaced
REFACTOR_RULE = (r"(?i)(?<![a-z_])(refactor\w*|simplif\w*|clean\w*|tidy|trace_only|traceable|trac(e|ing)|rename\w*|"
                 r"lint\w*|ruff|annotat\w*|typing|namespaces?|reorgani[sz]\w*|mov(e|es|ed|ing)|replac\w*|use|chore|"
                 r"style|format\w*|deduplicat\w*|duplicat\w*|unif(y|ied)|shared?)(?![a-z_])")

PROJECTS = {
    "tvm": {
        "repo": "apache/tvm", "package": "tvm",
        "folders": {"onnx": "python/tvm/relax/frontend/onnx/", "torch": "python/tvm/relax/frontend/torch/",
                    "tflite": "python/tvm/relax/frontend/tflite/"},
        "src_prefix": "python/tvm/",   # upstream path prefix of the installed package's directory
        # test files whose changed test functions are the fix's own tests
        "tests": r"^tests/python/relax/test_(frontend_|from_)[^/]*\.py$",
        # dotted names the restored (pre-fix) lines use must exist in the installed release
        "api_roots": {"tvm": "tvm", "relax": "tvm.relax", "tirx": "tvm.tirx", "topi": "tvm.topi", "te": "tvm.te"},
        # the torch frontend tests compare with a 2025 IRModule: dlci's numerical verify_model (see README)
        "numeric": {"tests/python/relax/test_frontend_from_exported_program.py": "verify_model_ep",
                    "tests/python/relax/test_frontend_from_fx.py": "verify_model_fx"},
        # API renames between the TVM of the fixes and the installed 0.27 (regex, replacement, path prefix or None),
        # applied to the diff text before it is applied (as .struct_info -> .ty for the `literal` cases)
        "renames": [
            (r"\.struct_info\b", ".ty", None),
            (r"\brelax\.TensorStructInfo\b", "relax.TensorType", None),
            (r"\brelax\.ShapeStructInfo\b", "relax.ShapeType", None),
            (r"\brelax\.TupleStructInfo\b", "relax.TupleType", None),
            (r"\brelax\.PrimStructInfo\b", "relax.PrimType", None),
            (r"\brelax\.ObjectStructInfo\b", "relax.AnyType", None),
            (r"\brelax\.(?:expr\.)?Constant\b", "tvm.ir.GenericConst", None),
            (r"\b(tvm\.)?tir\.", r"\1tirx.", None),
            (r"\bfrom tvm import tir\b", "from tvm import tirx", None),
            (r"\.name_hint\b", ".name", None),
            (r"\btvm\.nd\.array\b", "tvm.runtime.tensor", None),
            (r"\.data\.numpy\(\)", ".value.numpy()", "python/tvm/relax/frontend/onnx/"),
        ],
    },
    "onnxscript": {
        "repo": "microsoft/onnxscript", "package": "onnxscript",
        "folders": {"torchlib": "onnxscript/function_libs/torch_lib/ops/"},
        # torch_lib was onnxscript/function_libs/torch_aten until 2023-04-21 (#659)
        "path_renames": {"onnxscript/function_libs/torch_aten/": "onnxscript/function_libs/torch_lib/"},
        # the tests were onnxscript/tests/ until 2024-04-05 (#1346), imported as onnxscript.tests
        "test_renames": {"onnxscript/tests/": "tests/"},
        "src_prefix": "onnxscript/",
        # a transplant takes torchlib whole: its ops modules import tensor_typing, registration and common of their
        # time
        "transplant_root": ["onnxscript/function_libs/torch_lib/"],
        "tests": r"^tests/.*(/test_[^/]*|_test|_tests)\.py$",
        "numeric": {},
        "renames": [],
        "api_roots": {},
    },
}
OPINFO_DATA = "tests/function_libs/torch_lib/ops_test_data.py"
OPINFO_EXTRA = "tests/function_libs/torch_lib/extra_opinfo.py"
HARNESS = {"tests/function_libs/torch_lib/ops_test.py", "tests/function_libs/torch_lib/ops_test_common.py"}
# the fix commit's OpInfo harness runs torchlib through graph_building (the TorchScript builder, removed in
# onnxscript 0.4): the release's own harness modules are used instead, with the fix commit's data modules
RELEASE_TESTS = "v0.7.1"
HARNESS_NOTE = ("# dlci screen: the module as in the release's own tests (v0.7.1): the fix commit's harness runs "
                "torchlib through graph_building, removed in onnxscript 0.4.\n")
PREFIX = {"onnx": "onnx", "torch": "torch", "tflite": "tflite", "torchlib": "onnxscript"}
STOPWORDS = {"fix", "fixes", "fixed", "fixing", "bug", "bugfix", "the", "a", "an", "in", "of", "for", "to", "when",
             "op", "ops", "operator", "relax", "frontend", "pytorch", "onnx", "torchlib", "tvm", "and", "with",
             "on", "is", "by", "unity", "feat", "torch", "support", "issue", "incorrect", "wrong", "error", "s"}
REFACTOR_STAGES = ["fix_by_rule", "not_refactor_by_rule", "no_frontend_change", "revert_does_not_apply",
                   "does_not_import", "qualifies"]
STAGES = ["not_fix_by_rule", "no_frontend_change", "revert_does_not_apply", "no_own_test", "test_not_extractable",
          "test_not_failing_reverted", "test_not_passing_fixed", "qualifies"]


def git(gitdir: str, *args: str, check: bool = True) -> str:
    p = subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True, text=True)
    if check and p.returncode:
        raise RuntimeError(f"git {' '.join(args[:3])}: {p.stderr[:300]}")
    return p.stdout


def show(gitdir: str, rev: str, path: str) -> str | None:
    p = subprocess.run(["git", "--git-dir", gitdir, "show", f"{rev}:{path}"], capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else None


def installed_dir(package: str) -> Path:
    from build import installed_package
    return installed_package(package)


def window_commits(gitdir: str, folders: list[str], since: str, until: str) -> list[dict]:
    lo = dt.datetime.fromisoformat(since).replace(tzinfo=dt.timezone.utc)
    hi = dt.datetime.fromisoformat(until).replace(tzinfo=dt.timezone.utc)
    out = git(gitdir, "log", "--first-parent", "--format=%H%x09%P%x09%cI%x09%s", "HEAD", "--", *folders)
    rows = []
    for line in out.splitlines():
        sha, parents, date, subject = line.split("\t", 3)
        when = dt.datetime.fromisoformat(date).astimezone(dt.timezone.utc)
        if lo <= when < hi:
            rows.append({"commit": sha, "parent": parents.split()[0], "merged": when.date().isoformat(),
                         "subject": subject})
    return rows[::-1]   # oldest first


def changed_files(gitdir: str, parent: str, sha: str) -> list[tuple[str, str]]:
    out = git(gitdir, "diff", "--no-renames", "--name-status", parent, sha)
    return [(l.split("\t")[0][0], l.split("\t")[-1]) for l in out.splitlines() if l.strip()]


def renamed_path(proj: dict, path: str) -> str:
    for old, new in proj.get("path_renames", {}).items():
        if path.startswith(old):
            return new + path[len(old):]
    return path


def rename_diff(diff: str, renames, path_renames: dict | None = None) -> str:
    out, path = [], ""
    for line in diff.splitlines(keepends=True):
        for old, new in (path_renames or {}).items():
            if line.startswith(("diff --git ", "--- a/", "+++ b/")):
                line = line.replace(f"a/{old}", f"a/{new}").replace(f"b/{old}", f"b/{new}")
        if line.startswith("diff --git "):
            path = line.split(" b/", 1)[-1].strip()
        if line[:1] in " +-" and not line.startswith(("+++ ", "--- ")):
            for pat, repl, where in renames:
                if where is None or path.startswith(where):
                    line = line[0] + re.sub(pat, repl, line[1:])
        out.append(line)
    return "".join(out)


def _undefined(path: Path) -> set[str]:
    from pyflakes import api, messages, reporter   # main() checks that it is installed

    class R(reporter.Reporter):
        def __init__(self):
            self.names = set()

        def flake(self, m):
            if isinstance(m, messages.UndefinedName):
                self.names.add(m.message_args[0])

        def unexpectedError(self, *a):
            pass

        def syntaxError(self, *a):
            self.names.add("<syntax error>")
    r = R()
    api.checkPath(str(path), r)
    return r.names


def _code(line: str) -> str:
    """a line as the loose revert compares it: without its comment and without any whitespace ('' for a blank or
    comment-only line)"""
    s, quote, i = line, None, 0
    while i < len(s):   # the first '#' outside a string literal on the line
        c = s[i]
        if quote:
            if c == "\\":
                i += 1
            elif s.startswith(quote, i):
                i += len(quote) - 1
                quote = None
        elif c in "'\"":
            quote = s[i:i + 3] if s[i:i + 3] in ("'" * 3, '"' * 3) else c
            i += len(quote) - 1
        elif c == "#":
            s = s[:i]
            break
        i += 1
    return re.sub(r"\s+", "", s)


def _hunks(fdiff: str) -> list[dict]:
    """the hunks of one file's unified diff: [{start (1-based, new side), lines: [(tag, text)]}]"""
    out = []
    for m in re.finditer(r"(?m)^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@.*\n", fdiff):
        lines = []
        for l in fdiff[m.end():].split("\n"):
            if l.startswith("\\"):
                continue
            if l[:1] not in (" ", "+", "-"):
                break
            lines.append((l[0], l[1:] + "\n"))
        out.append({"start": int(m.group(1)), "lines": lines})
    return out


LOOSE_FUZZ = 3   # context lines a hunk may lose at either end, as with patch -F3


def _locate(hunk: list[tuple[str, str]], keys: list[str]) -> tuple[dict[int, int], int] | None:
    """where the hunk's new side (its context and '+' lines) stands in a file whose lines are `keys` (_code() of
    each), blank and comment-only lines skipped on both sides, dropping up to LOOSE_FUZZ context code lines at either
    end (the least that finds it): ({index in hunk -> line index in the file} for its code lines, the fuzz used);
    None where it stands nowhere, or at more than one place (unlike patch, no nearest guess)"""
    code = [(j, _code(x)) for j, (tag, x) in enumerate(hunk) if tag != "-" and _code(x)]
    at = [i for i, k in enumerate(keys) if k]
    seq = [keys[i] for i in at]
    changed = [j for j, (tag, _) in enumerate(hunk) if tag != " "]
    lo, hi = min(changed), max(changed)
    lead = [c for c in code if c[0] < lo]
    mid = [c for c in code if lo <= c[0] <= hi]
    trail = [c for c in code if c[0] > hi]
    for fuzz in range(LOOSE_FUZZ + 1):
        key = lead[min(fuzz, len(lead)):] + mid + trail[:max(0, len(trail) - fuzz)]
        # an anchor of two code lines at least; where the fix only deleted lines (the revert only inserts), one
        # context line before them at least
        if len(key) < 2 or (not any(hunk[j][0] == "+" for j, _ in mid) and not any(j < lo for j, _ in key)):
            break
        want = [k for _, k in key]
        first = want[0]
        hits = [s for s in range(len(seq) - len(want) + 1) if seq[s] == first and seq[s:s + len(want)] == want]
        if len(hits) > 1:
            return None
        if hits:
            return {j: at[hits[0] + n] for n, (j, _) in enumerate(key)}, fuzz
    return None


def _loose_apply(hunk: list[tuple[str, str]], text: list[str], where: dict[int, int]) -> tuple[int, int, list[str]]:
    """the hunk reversed where it stands: (first, end, lines) to replace text[first:end] with. Context lines keep the
    file's own text; the '+' lines go (with the file's blank or comment lines between two of them); the '-' lines
    come back as the diff has them, at their place among the others."""
    js = sorted(where)
    first, last = where[js[0]], where[js[-1]]
    out, pos, prev_plus = [], first, False   # pos: the next line of the file not yet kept or dropped
    context_gap = False   # a blank or comment context line of the hunk since its last code line
    for j, (tag, line) in enumerate(hunk):
        if j < js[0] or j > js[-1]:
            continue
        if tag == "-":
            if context_gap:   # the file's lines standing for those context lines come first
                nxt = next((where[k] for k in js if k > j), pos)
                out.extend(text[pos:nxt])
                pos, context_gap = max(pos, nxt), False
            out.append(line)
            continue
        if j not in where:
            context_gap = context_gap or tag == " "
            continue   # a blank or comment line of the hunk: the file's own stand in its place
        i = where[j]
        if not (prev_plus and tag == "+"):
            out.extend(text[pos:i])
        pos, context_gap = i + 1, False
        if tag == " ":
            out.append(text[i])
        prev_plus = tag == "+"
    return first, last + 1, out


def loose_revert(diff: str, root: Path, folders: list[str]) -> tuple[bool, str]:
    """The reverse diff applied hunk by hunk where `patch -R -F3` refuses it (the code was reformatted around the
    fix since): each hunk's new side is looked for with its lines compared without whitespace and comments, blank and
    comment-only lines skipped, at the one place it stands, dropping up to LOOSE_FUZZ context lines at either end; a
    hunk that stands nowhere in its file is looked for in the other modules of the frontend folders (code moved
    between them) and must stand in exactly one. Every hunk must apply, in files the fix modified (not added or
    deleted). The lines it restores are the diff's, as they are (with the API renames)."""
    plan: dict[str, list] = {}
    texts: dict[str, list[str] | None] = {}
    keys: dict[str, list[str]] = {}
    moved = 0

    def lines(rel: str) -> list[str] | None:
        if rel not in texts:
            f = root / rel
            texts[rel] = f.read_text().splitlines(keepends=True) if f.is_file() else None
            keys[rel] = [_code(x) for x in texts[rel] or []]
        return texts[rel]
    for fdiff in re.split(r"(?m)^diff --git ", diff)[1:]:
        head = fdiff.split("\n@@", 1)[0]
        if "new file mode" in head or "deleted file mode" in head or "\n+++ b/" not in head:
            return False, "the fix adds or deletes a file"
        rel = head.split("\n+++ b/", 1)[1].split("\n", 1)[0].strip()
        if lines(rel) is None:
            return False, f"{rel} is not in the installed release"
        for h in _hunks(fdiff):
            if not any(tag != " " for tag, _ in h["lines"]):
                continue
            found, target = _locate(h["lines"], keys[rel]), rel
            if found is None:
                others = []
                for folder in folders:
                    for py in sorted((root / folder).glob("*.py")):
                        o = f"{folder}/{py.name}"
                        if o != rel and lines(o) is not None:
                            hit = _locate(h["lines"], keys[o])
                            if hit is not None:
                                others.append((o, hit))
                if len(others) != 1:
                    return False, (f"a hunk of {Path(rel).name} (line {h['start']}) stands nowhere"
                                   + (f" or in {len(others)} modules" if others else ""))
                (target, found), moved = others[0], moved + 1
            plan.setdefault(target, []).append((h["lines"], found))
    fuzzed = 0
    for rel, items in plan.items():
        text = lines(rel)
        edits = []
        for hunk, (where, fuzz) in items:
            edits.append(_loose_apply(hunk, text, where))
            fuzzed += fuzz > 0
        edits.sort(key=lambda e: e[0])
        for a, b in zip(edits, edits[1:]):
            if a[1] > b[0]:
                return False, f"two hunks stand on the same lines of {Path(rel).name}"
        for first, end, new in reversed(edits):
            text[first:end] = new
        (root / rel).write_text("".join(text))
    n = sum(len(v) for v in plan.values())
    return True, (f"{n} hunk(s) found with lines compared without whitespace and comments, {fuzzed} with fuzz"
                  + (f", {moved} in another module of the folder" if moved else ""))


def commit_diff(proj: dict, gitdir: str, row: dict, paths: list[str]) -> str:
    """The commit's diff over ``paths``, in the installed release's layout (the project's renames applied)."""
    diff = git(gitdir, "diff", "--no-renames", "--no-color", "-U3", row["parent"], row["commit"], "--", *paths)
    return rename_diff(diff, proj["renames"], proj.get("path_renames"))


def try_revert(proj: dict, gitdir: str, row: dict, files: list[tuple[str, str]],
               loose: bool = True) -> tuple[bool, str, str]:
    """(applies, detail, patch against the installed sources): the reverse diff with `patch -R -F3`, else (loose)
    with loose_revert"""
    pkg = installed_dir(proj["package"])
    diff = commit_diff(proj, gitdir, row, [f for _, f in files])
    files = [(s, renamed_path(proj, f)) for s, f in files]
    tmp = Path(tempfile.mkdtemp(prefix="screen-rev-"))
    try:
        for status, f in files:
            src = pkg / f[len(proj["src_prefix"]):]
            if src.is_file():
                (tmp / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, tmp / f)
            elif status != "A":
                return False, f"{f} is not in the installed release", ""
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x",
               "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@x"}
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "installed"]):
            subprocess.run(["git", "-C", str(tmp), *args], check=True, capture_output=True, env=env)
        p = subprocess.run(["patch", "-p1", "-R", "-F3", "--batch", "-N", "--no-backup-if-mismatch",
                            "--reject-file=-", "-d", str(tmp)], input=diff, capture_output=True, text=True)
        how = ""
        if p.returncode != 0:
            failed = re.findall(r"(\d+) out of (\d+) hunks? (?:FAILED|ignored)", p.stdout)
            msg = "; ".join(f"{a}/{b} hunks fail" for a, b in failed) or p.stdout.strip().splitlines()[-1][:160]
            if not loose:
                return False, f"patch -R -F3: {msg}", ""
            # patch leaves the hunks that applied: start again from the installed files
            subprocess.run(["git", "-C", str(tmp), "checkout", "-q", "--", "."], check=True, capture_output=True,
                           env=env)
            subprocess.run(["git", "-C", str(tmp), "clean", "-qfd"], check=True, capture_output=True, env=env)
            folders = sorted({str(Path(f).parent) for _, f in files}
                             | {d.rstrip("/") for d in proj["folders"].values() if any(f.startswith(d) for _, f in files)})
            ok, how = loose_revert(diff, tmp, folders)
            if not ok:
                return False, f"patch -R -F3: {msg}; loose: {how}", ""
        for _, f in files:
            t = tmp / f
            if not t.exists():
                continue
            try:
                compile(t.read_text(), str(t), "exec")
            except SyntaxError as e:
                return False, f"reverted {Path(f).name} does not compile (line {e.lineno}: {e.msg})", ""
            src = pkg / f[len(proj["src_prefix"]):]
            new = _undefined(t) - (_undefined(src) if src.is_file() else set())
            if new:
                return False, f"reverted {Path(f).name} names undefined {', '.join(sorted(new))}", ""
        dangling = dangling_members(proj, pkg, tmp, files)
        if dangling:
            return False, f"the reverted code leaves references to members it removes: {', '.join(dangling[:3])}", ""
        missing = missing_api(proj, diff)
        if missing:
            return False, f"the restored lines use API absent from the release: {', '.join(missing[:3])}", ""
        subprocess.run(["git", "-C", str(tmp), "add", "-A"], check=True, capture_output=True, env=env)
        patch = subprocess.run(["git", "-C", str(tmp), "diff", "--cached", "--no-color"], capture_output=True,
                               text=True, check=True, env=env).stdout
        if not patch.strip():
            return False, "the reverse diff changes nothing on the installed release", ""
        if how:
            return True, f"applies loosely: {how}", patch
        fuzz = len(re.findall(r"with fuzz", p.stdout))
        offs = len(re.findall(r"succeeded at", p.stdout))
        return True, f"applies ({fuzz} hunk(s) with fuzz, {offs} at an offset)", patch
    finally:
        shutil.rmtree(tmp, ignore_errors=True)



def rename_text(text: str, renames, path: str) -> str:
    """RENAMES applied to a whole file's text (rename_diff's substitutions, for a file that is not a diff)"""
    for pat, repl, where in renames:
        if where is None or path.startswith(where):
            text = re.sub(pat, repl, text)
    return text


def transplant(proj: dict, gitdir: str, row: dict, files: list[tuple[str, str]]) -> tuple[bool, str, str, str]:
    """(ok, detail, base patch, head patch): where the reverse diff does not apply to the installed release, the
    frontend package the fix touches taken whole (its .py files; the project's `transplant_root`, else the touched
    frontend folders), at the fix commit for the base and at its parent for the head (RENAMES applied), over the
    installed release's other modules. A module of the fix's time imports its siblings of that time (helpers and
    type names move between releases), hence the package rather than the touched files alone. The base patch turns
    the installed files into the base, the head patch the base into the head: head and base differ by exactly the
    fix. Whether that package works with the release's other modules is for the fix's own test to say (ground truth:
    it must pass on the base and fail on the head)."""
    from build import installed_files
    roots = proj.get("transplant_root") or sorted({d for d in proj["folders"].values()
                                                   if any(renamed_path(proj, f).startswith(d) for _, f in files)})
    old_roots = [o + r[len(n):] for r in roots for o, n in proj.get("path_renames", {}).items() if r.startswith(n)]
    tmp = Path(tempfile.mkdtemp(prefix="screen-tp-"))
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x",
           "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@x"}

    def g(*args):
        return subprocess.run(["git", "-C", str(tmp), *args], check=True, capture_output=True, text=True,
                              env=env).stdout

    def ours(path: str) -> bool:
        return path.endswith(".py") and any(path.startswith(r) for r in roots)
    try:
        for rel, path in installed_files(proj["package"]).items():
            if ours(rel):
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, tmp / rel)
        g("init", "-q")
        g("add", "-A")
        g("commit", "-q", "--allow-empty", "-m", "installed")
        patches, count = {}, 0
        for side, rev in (("base", row["commit"]), ("head", row["parent"])):
            for f in tmp.rglob("*.py"):
                if ours(str(f.relative_to(tmp))):
                    f.unlink()
            listed = git(gitdir, "ls-tree", "-r", "--name-only", rev, "--", *roots, *old_roots).split()
            for upstream in listed:
                f = renamed_path(proj, upstream)
                if not ours(f):
                    continue
                text = rename_text(show(gitdir, rev, upstream) or "", proj["renames"], f)
                try:
                    compile(text, f"{side}:{f}", "exec")
                except SyntaxError as e:
                    return False, f"{Path(f).name} at the {side} does not compile (line {e.lineno}: {e.msg})", "", ""
                (tmp / f).parent.mkdir(parents=True, exist_ok=True)
                (tmp / f).write_text(text)
            g("add", "-A")
            patches[side] = g("diff", "--cached", "--no-color")
            count = count or len(g("diff", "--cached", "--name-only").split())
            g("commit", "-q", "--allow-empty", "-m", side)
        if not patches["head"].strip():
            return False, "the fix changes nothing in the transplanted package", "", ""
        return True, (f"{', '.join(roots)} whole at the fix commit and its parent ({count} file(s) differ from the "
                      "release on the base)"), patches["base"], patches["head"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

def _members(text: str) -> tuple[set[str], set[str]]:
    """(names used as self.X / cls.X, names defined: methods, class attributes, self.X = ...)"""
    tree = ast.parse(text)
    used, defined = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            (defined if isinstance(n.ctx, ast.Store) else used).add(n.attr)
        elif isinstance(n, ast.ClassDef):
            for m in n.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    defined.add(m.name)
                elif isinstance(m, (ast.Assign, ast.AnnAssign)):
                    for t in (m.targets if isinstance(m, ast.Assign) else [m.target]):
                        defined |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
    return used, defined


def dangling_members(proj: dict, pkg: Path, tmp: Path, files) -> list[str]:
    """self.X / cls.X that no class of the reverted files' folders defines any more (and that the installed release
    defines): the revert removed a method that code it did not touch still calls"""
    out = []
    for folder in sorted({str(Path(f).parent) for _, f in files}):
        inst = pkg / folder[len(proj["src_prefix"]):]
        if not inst.is_dir():
            continue
        u0, d0, u1, d1 = set(), set(), set(), set()
        for py in inst.glob("*.py"):
            rel = f"{folder}/{py.name}"
            u, d = _members(py.read_text())
            u0 |= u
            d0 |= d
            rev = tmp / rel
            u, d = _members(rev.read_text() if rev.exists() else py.read_text())
            u1 |= u
            d1 |= d
        out += sorted((u1 - d1) - (u0 - d0))
    return out


def missing_api(proj: dict, diff: str) -> list[str]:
    """dotted names (tvm.x.y, relax.op.z, ...) on the lines the revert restores that the installed release lacks"""
    roots = proj.get("api_roots") or {}
    if not roots:
        return []
    import importlib
    restored = "\n".join(l[1:] for l in diff.splitlines() if l.startswith("-") and not l.startswith("---"))
    restored = re.sub(r"#.*", "", restored)
    missing = []
    for m in sorted(set(re.findall(r"(?<![\w.])(%s)((?:\.\w+)+)" % "|".join(roots), restored))):
        root, rest = m
        try:
            obj = importlib.import_module(roots[root])
        except ImportError:
            continue
        path = roots[root]
        for part in rest.strip(".").split("."):
            if hasattr(obj, part):
                obj = getattr(obj, part)
            else:
                try:
                    obj = importlib.import_module(f"{path}.{part}")
                except ImportError:
                    missing.append(f"{root}{rest}")
                    break
            path = f"{path}.{part}"
            if not isinstance(obj, type(importlib)):
                break   # past the modules: the first attribute of a class/function is enough
    return missing


@functools.lru_cache(maxsize=None)
def _release_names(package: str) -> frozenset:
    """every identifier the installed release's Python sources write, and the names numpy, torch and onnx define"""
    import importlib
    names = set()
    for f in installed_dir(package).rglob("*.py"):
        names.update(re.findall(r"[A-Za-z_]\w*", f.read_text(errors="replace")))
    for mod in ("numpy", "torch", "onnx"):
        try:
            names.update(dir(importlib.import_module(mod)))
        except ImportError:
            pass
    return frozenset(names)


DEFINES = r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)|(?:^\s*|\.)([A-Za-z_]\w*)\s*=(?!=)"


def unknown_attributes(proj: dict, diff: str) -> list[str]:
    """attributes (``x.checked_type``) on the lines the revert restores that the installed release never names: an
    API removed since (a reverted refactor whose base would fail at run time on every call, not at import)"""
    restored = "\n".join(l[1:] for l in diff.splitlines() if l.startswith("-") and not l.startswith("---"))
    restored = re.sub(r"#.*|'[^'\n]*'|\"[^\"\n]*\"", "", restored)
    # and names the restored lines define themselves (a method the revert brings back, then called as self._x)
    defined = {n for pair in re.findall(DEFINES, restored, re.M) for n in pair if n}
    known = _release_names(proj["package"]) | defined
    return sorted({a for a in re.findall(r"(?<=[\w)\]])\.([A-Za-z_]\w*)", restored) if a not in known})


# ---- the fix's own tests

def _defs(src: str | None) -> dict[str, str]:
    """test name (test_x / Class.test_x) -> its source with decorators, plus the source of the module-level
    assignments and classes (not functions) it names (a parametrize list, a model class, a table)"""
    if not src:
        return {}
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return {}
    data = {}
    for n in tree.body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        data[x.id] = _decorated(src, n)
        elif isinstance(n, ast.ClassDef) and not n.name.startswith("Test"):
            data[n.name] = _decorated(src, n)

    def text(node) -> str:
        names = sorted({x.id for x in ast.walk(node) if isinstance(x, ast.Name) and x.id in data})
        return _decorated(src, node) + "".join(f"\n#{k}\n{data[k]}" for k in names)
    out = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"):
            out[n.name] = text(n)
        elif isinstance(n, ast.ClassDef):
            for m in n.body:
                if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test"):
                    out[f"{n.name}.{m.name}"] = text(m)
    return out


def _decorated(src: str, node) -> str:
    lines = src.splitlines(keepends=True)
    start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
    return "".join(lines[start:node.end_lineno])


def _segmenter(src: str):
    """ast.get_source_segment(src, node) without splitting the source again for every node (it does, and the
    TESTED_TORCHLIB_OPS of ops_test_data.py has hundreds of entries: quadratic)"""
    lines = ast._splitlines_no_ff(src)   # noqa: SLF001  (the splitting get_source_segment uses)

    def seg(node) -> str | None:
        try:
            if node.end_lineno is None or node.end_col_offset is None:
                return None
            first, last = node.lineno - 1, node.end_lineno - 1
            col, end_col = node.col_offset, node.end_col_offset
        except AttributeError:
            return None
        if first == last:
            return lines[first].encode()[col:end_col].decode()
        return "".join([lines[first].encode()[col:].decode(), *lines[first + 1:last],
                        lines[last].encode()[:end_col].decode()])
    return seg


def _opinfo_entries(src: str | None) -> dict[str, list[str]]:
    from extract_opinfo_tests import root_name
    if not src:
        return {}
    out: dict[str, list[str]] = {}
    segment = _segmenter(src)
    for n in ast.parse(src).body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            t = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if isinstance(t, ast.Name) and t.id == "TESTED_TORCHLIB_OPS" and isinstance(n.value, (ast.Tuple, ast.List)):
                for e in n.value.elts:
                    name = root_name(e)
                    if name:
                        out.setdefault(name, []).append(segment(e))
    return out


def _extra_opinfos(src: str | None) -> dict[str, str]:
    """OpInfo name -> its definition plus the module functions it uses (transitively)"""
    if not src:
        return {}
    tree = ast.parse(src)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    segment = _segmenter(src)
    out = {}
    for n in tree.body:
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and getattr(
                n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", "") == "OP_DB":
            for e in n.value.elts:
                if not (isinstance(e, ast.Call) and e.args and isinstance(e.args[0], ast.Constant)):
                    continue
                used, todo = [], [e]
                while todo:
                    for sub in ast.walk(todo.pop()):
                        if isinstance(sub, ast.Name) and sub.id in funcs and sub.id not in used:
                            used.append(sub.id)
                            todo.append(funcs[sub.id])
                out[e.args[0].value] = segment(e) + "".join(
                    _decorated(src, funcs[u]) for u in sorted(used))
    return out


def own_tests(proj: dict, gitdir: str, row: dict, files: list[tuple[str, str]]) -> list[dict]:
    """upstream_test items: [{file, functions[, numeric][, opinfo_entries]}]"""
    items = []
    rx = re.compile(proj["tests"])
    real = {}   # the path as in the release's layout -> the path at the commit
    for s_, f in files:
        if s_ != "D":
            real[test_path(proj, f)] = f
    paths = list(real)

    def at(rev: str, f: str) -> str | None:
        return show(gitdir, rev, real.get(f, f)) or show(gitdir, rev, f)
    opinfo: set[str] = set()
    if OPINFO_DATA in paths:
        old, new = _opinfo_entries(at(row["parent"], OPINFO_DATA)), _opinfo_entries(at(row["commit"], OPINFO_DATA))
        opinfo |= {k for k, v in new.items() if sorted(v) != sorted(old.get(k, []))}
    if OPINFO_EXTRA in paths:
        old, new = _extra_opinfos(at(row["parent"], OPINFO_EXTRA)), _extra_opinfos(at(row["commit"], OPINFO_EXTRA))
        changed = {k for k, v in new.items() if old.get(k) != v}
        entries = _opinfo_entries(at(row["commit"], OPINFO_DATA))
        opinfo |= changed & set(entries)
    if opinfo:
        items.append({"file": "tests/function_libs/torch_lib/ops_test.py",
                      "functions": ["TestOutputConsistencyFullGraph.test_output_match_opinfo_"],
                      "opinfo_entries": sorted(opinfo)})
    for f in paths:
        if not rx.search(f) or f in HARNESS or f in (OPINFO_DATA, OPINFO_EXTRA):
            continue
        old, new = _defs(at(row["parent"], f)), _defs(at(row["commit"], f))
        changed = [k for k, v in new.items() if old.get(k) != v]
        if changed:
            item = {"file": real[f], "functions": changed}
            if f in proj["numeric"]:
                item["numeric"] = proj["numeric"][f]
            items.append(item)
    return items


def test_path(proj: dict, path: str) -> str:
    for old, new in proj.get("test_renames", {}).items():
        if path.startswith(old):
            return new + path[len(old):]
    return path


def _show_renamed(proj: dict, gitdir: str, rev: str, path: str) -> str | None:
    """a test module at rev, from its old location if need be, with its imports of the old location renamed"""
    text = show(gitdir, rev, path)
    for old, new in proj.get("test_renames", {}).items():
        if text is None and path.startswith(new):
            text = show(gitdir, rev, old + path[len(new):])
        if text is not None:
            text = text.replace(old.strip("/").replace("/", ".") + ".", new.strip("/").replace("/", ".") + ".")
    return text


def extract(proj: dict, case: dict, gitdir: str, dest: Path) -> None:
    """write the case's upstream test files into dest, as loose files (as the store materialises them)"""
    import extract_opinfo_tests as eo
    import extract_tests as et
    dest.mkdir(parents=True, exist_ok=True)
    for item in case["upstream_test"]:
        if item.get("opinfo_entries"):
            eo.GIT, eo.OUT = gitdir, dest

            common = _show_renamed(proj, gitdir, case["commit"], f"{eo.D}/ops_test_common.py") or ""
            release_harness = "graph_building" in common

            def eo_show(commit, path):
                if release_harness and commit == case["commit"] and path.endswith(("/ops_test.py",
                                                                                   "/ops_test_common.py")):
                    commit = RELEASE_TESTS
                text = _show_renamed(proj, gitdir, commit, path)
                if text is None:
                    raise SystemExit(f"{path} not at {commit[:10]}")
                return text
            eo.show = eo_show
            eo.write_case(case["id"], case["commit"], set(item["opinfo_entries"]), [])
            if release_harness:
                item["harness"] = RELEASE_TESTS
                stem = case["id"].replace("-", "_")
                for m in ("ops_test", "ops_test_common"):
                    f = dest / f"{stem}__{m}.py"
                    t = f.read_text().replace(f"/blob/{case['commit']}/{eo.D}/{m}.py", f"/blob/{RELEASE_TESTS}/{eo.D}/{m}.py")
                    f.write_text(t.replace("# Renames for the installed release:", HARNESS_NOTE + "# Renames for the installed release:", 1))
            continue
        src = _show_renamed(proj, gitdir, case["commit"], item["file"])
        body = et.extract(src, item["functions"])
        applied = []
        for old, new in et.RENAMES:
            if old in body:
                body = body.replace(old, new)
                applied.append(f"{old.strip()} -> {new.strip() or '(removed)'}")
        for pattern, repl, label in et.REGEX_RENAMES:
            body, n = re.subn(pattern, repl, body)
            if n:
                applied.append(label)
        url = f"https://github.com/{case['repo']}/blob/{case['commit']}/{item['file']}"
        lic = et.LICENSES.get(case["repo"], "see the repository")
        header = (f"# ---- from {url}\n# ({lic}): imports, module-level "
                  f"helpers and the test functions {', '.join(item['functions'])}.\n"
                  f"# Renames for the installed release: {'; '.join(applied) or 'none'}\n")
        if item.get("numeric"):
            header += ("# verify_model below is dlci's numerical replacement (benchmarks/regressions/upstream/"
                       "_torch_numeric.py): the upstream one compares with a 2025 IRModule structurally.\n")
            body += f"\nfrom _torch_numeric import {item['numeric']} as verify_model  # noqa: E402,F811\n"
        (dest / et.test_file_name(case["id"], item["file"])).write_text(
            "# flake8: noqa\n# pylint: skip-file\n" + header + body)


def ground_truth(case: dict, cand: Path, timeout: float) -> dict:
    import groundtruth as gt
    from build import build
    shutil.copyfile(HERE / "upstream" / "_torch_numeric.py", cand / "_torch_numeric.py")
    gt.UPSTREAM = cand
    gt.run_tests = functools.partial(_ORIG_RUN, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="screen-gt-") as tmp:
        repo, base, head = build(candidate(case, cand), Path(tmp) / "repo")
        return gt.check(candidate(case, cand), repo, base, head)


def candidate(case: dict, cand: Path) -> dict:
    """the case with its candidate's patches (the head's; a transplant's base patch too) for build.build"""
    base = cand / f"{case['id']}.base.diff"
    return {**case, "patch": str(cand / f"{case['id']}.diff"), **({"base_patch": str(base)} if base.is_file() else {})}


def case_id(row: dict, folder_key: str, taken: set[str]) -> str:
    s = re.sub(r"\[[^\]]*\]|\(#\d+\)|\|.*$", " ", row["subject"])
    s = re.sub(r"\b(Fix\w*|FixOp)\b", " ", s, flags=re.I)
    words = [w for w in re.split(r"[^a-z0-9]+", s.lower().replace("aten_", "").replace("aten::", "")) if w]
    words = [w for w in words if w not in STOPWORDS][:4] or [row["commit"][:8]]
    cid = f"{PREFIX[folder_key]}-{'-'.join(words)}"
    if cid in taken:
        cid = f"{cid}-{row['commit'][:7]}"
    taken.add(cid)
    return cid


_ORIG_RUN = None


def operators(proj: dict, patch: str, root: Path | None = None) -> list[str]:
    """the operators a case's patch touches, read mechanically from the sources the patch applies to (the installed
    release; root: a checkout of the base, for a transplant): ONNX converter classes, torch converter-map keys /
    converter methods, torchlib @torch_op registrations around the changed lines"""
    pkg = installed_dir(proj["package"])
    ops: list[str] = []

    def add(o):
        if o not in ops:
            ops.append(o)
    for fdiff in re.split(r"(?m)^diff --git ", patch)[1:]:
        path = fdiff.split(" b/", 1)[1].split("\n", 1)[0].strip()
        src = root / path if root is not None else pkg / path[len(proj["src_prefix"]):]
        if not src.is_file():
            continue
        text = src.read_text()
        lines = set()
        for m in re.finditer(r"(?m)^@@ -(\d+)(?:,(\d+))? ", fdiff):
            start, n = int(m.group(1)), int(m.group(2) or 1)
            body = fdiff[m.end():].split("\n@@", 1)[0].splitlines()[1:]
            ln = start
            for l in body:
                if l.startswith("-"):
                    lines.add(ln)
                if not l.startswith("+"):
                    ln += 1
            if not any(l.startswith("-") for l in body):
                lines.add(start + n // 2)
        tree = ast.parse(text)
        src_lines = text.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                continue
            if not any(node.lineno <= x <= node.end_lineno for x in lines):
                continue
            if "onnx_frontend" in path and isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", "") == "OnnxOpConverter" for b in node.bases):
                add(f"onnx::{node.name}")
            if "torch_lib" in path and isinstance(node, ast.FunctionDef):
                for d in node.decorator_list:
                    for c in ast.walk(d):
                        if isinstance(c, ast.Constant) and isinstance(c.value, str) and "::" in c.value:
                            add(c.value.split(".")[0])
            if "/torch/" in path and isinstance(node, ast.FunctionDef) and node.name.startswith("_") and \
                    not node.name.startswith("__") and node.name not in ("_create_convert_map",) and \
                    node.end_lineno - node.lineno < 400:
                add(f"aten::{node.name.strip('_')}")
        if "/torch/" in path:
            for x in sorted(lines):
                line = src_lines[x - 1] if 0 < x <= len(src_lines) else ""
                m = re.match(r'\s*"([a-z_0-9]+)(?:\.\w+)?"\s*:', line)
                if m:
                    add(f"aten::{m.group(1).rstrip('_')}")
    return ops


OPINFO_ADAPTATION = ("OpInfo harness (the fix's test is its ops_test_data.py entries): <id>__{ops_test,"
                     "ops_test_common,ops_test_data[,extra_opinfo]}.py are those modules at the fix commit with "
                     "TESTED_TORCHLIB_OPS (and extra_opinfo's OP_DB) restricted to the fix's entries, tests.* imports "
                     "pointed at the sibling files, an expecttest stub, dtype_op_schema_compatible from the release's "
                     "own tests (onnxscript v0.7.1) and TestFunctionValidity dropped (extract_opinfo_tests.py)")


def emit(out: Path, args) -> None:
    """add the qualifying rows of out/screen.json to cases.yaml, and their materialisation to materialise.yaml: the
    candidate's files (its diff applied to the installed release) described as edits of the installed files with
    lines of the upstream files at the commit's parent (build.record), and the names and sha256 of its extracted test
    files (store.put); no upstream text is written into the tree"""
    import build
    import materialise
    materialise.use_git_dir(PROJECTS[json.loads((out / "screen.json").read_text())["meta"]["project"]]["repo"],
                            args.git_dir)
    doc = json.loads((out / "screen.json").read_text())
    proj = PROJECTS[doc["meta"]["project"]]
    cases_path = HERE / "cases.yaml"
    have = {c["id"] for c in yaml.safe_load(cases_path.read_text())["cases"]}
    blocks, added = [], []
    for r in doc["rows"]:
        if r.get("stage") != "qualifies" or r["id"] in have or r.get("in_corpus"):
            continue
        cand = out / "cand" / r["id"]
        patch = (cand / f"{r['id']}.diff").read_text()
        files = re.findall(r"(?m)^diff --git a/(\S+) ", patch)
        moved = r["revert"].startswith("transplant")
        with tempfile.TemporaryDirectory(prefix="emit-ops-") as tmp:
            root = None
            if moved:   # the operators are read from the base the head patch applies to
                root, _, _ = build.build(candidate({"id": r["id"], "kind": "regression", "repo": proj["repo"],
                                                    "title": r["subject"], "url": r["url"],
                                                    **({"package": proj["package"]} if proj["package"] != "tvm"
                                                       else {})}, cand), Path(tmp) / "repo")
                subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)
            ops = operators(proj, patch, root)
        renames = [f"{a} -> {b}" for a, b, _ in (tuple(x) for x in doc["meta"]["renames"])]
        if doc["meta"].get("kind") == "refactor":
            case = {"id": r["id"], "kind": "refactor",
                    **({"package": proj["package"]} if proj["package"] != "tvm" else {}),
                    "repo": proj["repo"], "commit": r["commit"], "url": r["url"], "merged": r["merged"],
                    "title": r["subject"], "files": files, "operators": ops or ["(none found)"],
                    "bug": "none expected: a change its subject calls behaviour-preserving (the screen's refactor rule), "
                           "with no fix subject and no test of its own; a finding new in the PR is a false alarm "
                           "unless a look by hand shows the change altered behaviour",
                    "revert": ("base = installed sources with the commit's reverse diff applied ("
                               + ("loosely, hunk by hunk" if r["revert"].startswith("applies loosely") else
                                  "literal, `patch -R -F3`")
                               + (f", after screen.py's API renames for {doc['meta']['project']}" if renames else "")
                               + f": {r['revert']}); head = installed sources"),
                    "screen": {"rule": "refactor", "window": f"[{doc['meta']['since']}, {doc['meta']['until']})",
                               "tool": "benchmarks/regressions/screen.py --kind refactor"}}
            blocks.append(yaml.safe_dump([case], sort_keys=False, width=200, allow_unicode=True))
            added.append((case, cand))
            continue
        adapt = []
        for item in r["upstream_test"]:
            if item.get("opinfo_entries"):
                adapt.append(OPINFO_ADAPTATION + (
                    f"; ops_test.py and ops_test_common.py from the release's own tests ({item['harness']}): the "
                    "fix commit's harness runs torchlib through graph_building, removed in onnxscript 0.4"
                    if item.get("harness") else ""))
            if item.get("numeric"):
                adapt.append(f"{Path(item['file']).name}: verify_model replaced by dlci's numerical "
                             f"{item['numeric']} (upstream/_torch_numeric.py)")
        case = {
            "id": r["id"], "kind": "regression",
            **({"package": proj["package"]} if proj["package"] != "tvm" else {}),
            "repo": proj["repo"], "commit": r["commit"], "url": r["url"], "merged": r["merged"],
            "title": r["subject"], "files": files, "operators": ops or ["(none found)"],
            "bug": (("the fix reverted" if "subject" in r["rule"] else
                     "the change reverted (screened as a change of frontend code with its own test; not a fix by "
                     "its subject)") + f": {r['subject']}. On head: "
                    + "; ".join(e.strip().lstrip("E").strip() for e in r["groundtruth"]["head"]["first_error"][:1])),
            "revert": ((r["revert"] if moved else
                        "loose: the commit's reverse diff applied hunk by hunk by screen.py's loose_revert (`patch "
                        "-R -F3` refuses it)" if r["revert"].startswith("applies loosely") else
                        "literal: the commit's reverse diff applied with `patch -R -F3`")
                       + (f" after screen.py's API renames for {doc['meta']['project']}" if renames else "")
                       + ("" if moved else f": {r['revert']}")),
            "upstream_test": r["upstream_test"],
            **({"test_adaptation": "; ".join(adapt)} if adapt else {}),
            "screen": {"rule": r["rule"], "window": f"[{doc['meta']['since']}, {doc['meta']['until']})",
                       "tool": "benchmarks/regressions/screen.py"},
        }
        blocks.append(yaml.safe_dump([case], sort_keys=False, width=200, allow_unicode=True))
        added.append((case, cand))
    if blocks:
        text = cases_path.read_text()
        i = text.index("\nexcluded:")
        cases_path.write_text(text[:i + 1] + "".join(blocks) + text[i + 1:])
    for case, cand in added:   # now that cases.yaml names them
        with tempfile.TemporaryDirectory(prefix="emit-") as tmp:
            repo, _, _ = build.build(candidate(case, cand), Path(tmp) / "repo")
            entry = build.record(case["id"], repo)
        stem = case["id"].replace("-", "_")
        if case["kind"] == "refactor":   # no test of its own: the scan alone judges it
            print(f"added {case['id']} (refactor)", file=sys.stderr)
            continue
        store.put(case["id"], {f.name: f.read_text() for f in sorted(cand.glob(f"{stem}__*.py"))})
        lit = sum(materialise.literal_lines(f.get("edits", [])) for k in ("base_sources", "sources")
                  for f in entry.get(k, []))
        print(f"added {case['id']}: {len(entry['sources'])} file(s) recorded as edits ({lit} literal line(s)), "
              f"{len(store.recorded(case['id']))} test file(s)", file=sys.stderr)


def main():
    global _ORIG_RUN
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", choices=sorted(PROJECTS), required=True)
    ap.add_argument("--git-dir", required=True)
    ap.add_argument("--since", required=True)
    ap.add_argument("--until", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stage", choices=["revert", "test", "groundtruth"], default="groundtruth",
                    help="last stage to run (revert: diff application only; test: + own-test extraction)")
    ap.add_argument("--timeout", type=float, default=900, help="per test run (head, base)")
    ap.add_argument("--rule", choices=["subject", "subject-or-test"], default="subject-or-test",
                    help="which commits are fix commits: the subject matches FIX_RULE, or also every commit that "
                         "changes frontend code and adds or changes a test")
    ap.add_argument("--kind", choices=["regression", "refactor"], default="regression",
                    help="regression: fix commits reverted; refactor: behaviour-preserving commits (REFACTOR_RULE) "
                         "applied, their reverse diff the base")
    ap.add_argument("--skip-known", action="store_true",
                    help="no ground truth for commits already in cases.yaml (cases or excluded)")
    ap.add_argument("--only", default="", help="comma-separated commit prefixes (debugging)")
    ap.add_argument("--emit", action="store_true",
                    help="no screening: add the qualifying rows of OUT/screen.json to cases.yaml")
    args = ap.parse_args()
    if args.emit:
        return emit(Path(args.out), args)
    import importlib.util
    if importlib.util.find_spec("pyflakes") is None:   # the revert stage's undefined-name check: it would pass more
        raise SystemExit("screen.py needs pyflakes for the revert stage's undefined-name check: "
                         ".venv/bin/pip install -c constraints.txt pyflakes")
    os.environ.setdefault("DLCI_CACHE_DIR", str(Path(args.out) / "cache"))
    import groundtruth as gt
    _ORIG_RUN = gt.run_tests
    proj = PROJECTS[args.project]
    doc = yaml.safe_load((HERE / "cases.yaml").read_text())
    existing = {c["commit"]: c["id"] for c in doc["cases"]}
    excluded = {e["commit"]: e["reason"] for e in doc.get("excluded", [])}
    taken = {c["id"] for c in doc["cases"]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folders = list(proj["folders"].values())
    folders += [o + d[len(n):] for d in list(folders) for o, n in proj.get("path_renames", {}).items() if d.startswith(n)]
    rows = []
    for row in window_commits(args.git_dir, folders, args.since, args.until):
        if args.only and not any(row["commit"].startswith(p) for p in args.only.split(",")):
            continue
        sha = row["commit"]
        row["url"] = f"https://github.com/{proj['repo']}/commit/{sha}"
        row["in_corpus"] = next((v for k, v in existing.items() if k.startswith(sha[:10]) or sha.startswith(k)), "")
        row["excluded"] = next((v for k, v in excluded.items() if sha.startswith(k)), "")
        files = changed_files(args.git_dir, row["parent"], sha)
        front = [(s, f) for s, f in files if f.endswith(".py") and any(f.startswith(d) for d in folders)]
        row["frontends"] = sorted({k for k, d in proj["folders"].items()
                                   if any(renamed_path(proj, f).startswith(d) for _, f in front)})
        row["files"] = [f for _, f in front]
        rows.append(row)
        by_subject = bool(re.search(FIX_RULE, row["subject"]))
        items = own_tests(proj, args.git_dir, row, files)
        by_test = bool(front) and bool(items)
        row["rule"] = "+".join(x for x, y in (("subject", by_subject), ("test", by_test)) if y)
        if args.kind == "refactor":
            refactor_row(proj, args, row, front, by_subject or by_test, taken, out)
            write(out, args, rows)
            continue
        if not (by_subject or (args.rule == "subject-or-test" and by_test)):
            row.update(stage="not_fix_by_rule", detail="")
            continue
        if not front:
            row.update(stage="no_frontend_change", detail="")
            continue
        ok, detail, patch = try_revert(proj, args.git_dir, row, front)
        base_patch = ""
        if not ok:
            moved, how, base_patch, patch = transplant(proj, args.git_dir, row, front)
            if not moved:
                row.update(stage="revert_does_not_apply", detail=f"{detail}; transplant: {how}")
                continue
            detail = f"transplant: {how} (the reverse diff: {detail})"
        row["revert"] = detail
        row["id"] = row["in_corpus"] or case_id(row, row["frontends"][0], taken)
        cand = out / "cand" / row["id"]
        if cand.exists():
            shutil.rmtree(cand)
        cand.mkdir(parents=True)
        (cand / f"{row['id']}.diff").write_text(patch)
        if base_patch:
            (cand / f"{row['id']}.base.diff").write_text(base_patch)
        if args.stage == "revert":
            row.update(stage="(revert applies; not screened further)", detail=detail)
            continue
        if not items:
            row.update(stage="no_own_test", detail="")
            continue
        row["upstream_test"] = items
        case = {"id": row["id"], "kind": "regression", "repo": proj["repo"], "commit": sha, "url": row["url"],
                "title": row["subject"], "upstream_test": items,
                **({"package": proj["package"]} if proj["package"] != "tvm" else {})}
        try:
            extract(proj, case, args.git_dir, cand)
        except (SystemExit, Exception) as e:  # noqa: BLE001
            row.update(stage="test_not_extractable", detail=str(e)[:200])
            continue
        if args.stage == "test":
            row.update(stage="(own test extracted; ground truth not run)", detail="")
            continue
        if args.skip_known and (row["in_corpus"] or row["excluded"]):
            row.update(stage="(in corpus)" if row["in_corpus"] else "(excluded in cases.yaml)",
                       detail=row["in_corpus"] or row["excluded"][:120])
            continue
        print(f"[screen] ground truth {row['id']} {sha[:10]} {row['subject'][:60]}", file=sys.stderr, flush=True)
        res = ground_truth(case, cand, args.timeout)
        row["groundtruth"] = {k: {x: res[k].get(x) for x in ("status", "summary", "seconds", "failed", "first_error")}
                              for k in ("head", "base") if k in res}
        if res["valid"]:
            row.update(stage="qualifies", detail=res["reason"])
        elif "does not fail on head" in res["reason"]:
            row.update(stage="test_not_failing_reverted", detail=res["reason"])
        else:
            row.update(stage="test_not_passing_fixed", detail=res["reason"])
        write(out, args, rows)   # progress
    write(out, args, rows)


def refactor_row(proj: dict, args, row: dict, front: list[tuple[str, str]], fix: bool, taken: set[str],
                 out: Path) -> None:
    """--kind refactor: a commit qualifies when it is no fix (FIX_RULE, own test), its subject says a
    behaviour-preserving change (REFACTOR_RULE), it changes frontend code and its reverse diff applies to the
    installed release (no transplant): the reverted sources are the case's base, the installed ones its head"""
    if fix:
        row.update(stage="fix_by_rule", detail="")
    elif not re.search(REFACTOR_RULE, row["subject"]):
        row.update(stage="not_refactor_by_rule", detail="")
    elif not front:
        row.update(stage="no_frontend_change", detail="")
    else:
        ok, detail, patch = try_revert(proj, args.git_dir, row, front)
        if not ok:
            row.update(stage="revert_does_not_apply", detail=detail)
            return
        unknown = unknown_attributes(proj, commit_diff(proj, args.git_dir, row, [f for _, f in front]))
        if unknown:
            row.update(stage="revert_does_not_apply",
                       detail=f"the restored lines use attributes the release never names: {', '.join(unknown[:4])}")
            return
        row.update(revert=detail, id=row["in_corpus"] or "refactor-" + case_id(row, row["frontends"][0], taken))
        cand = out / "cand" / row["id"]
        if cand.exists():
            shutil.rmtree(cand)
        cand.mkdir(parents=True)
        (cand / f"{row['id']}.diff").write_text(patch)
        import build
        import groundtruth as gt
        case = {"id": row["id"], "kind": "refactor", "repo": proj["repo"], "title": row["subject"], "url": row["url"],
                **({"package": proj["package"]} if proj["package"] != "tvm" else {})}
        with tempfile.TemporaryDirectory(prefix="screen-imports-") as tmp:
            repo, base, head = build.build(candidate(case, cand), Path(tmp) / "repo")
            res = gt.imports_both(case, repo, base, head)
        row.update(stage="qualifies" if res["valid"] else "does_not_import", detail=detail if res["valid"] else
                   res["reason"])


def write(out: Path, args, rows: list[dict]) -> None:
    meta = {"project": args.project, "since": args.since, "until": args.until, "fix_rule": FIX_RULE, "rule": args.rule,
            "kind": args.kind, **({"refactor_rule": REFACTOR_RULE} if args.kind == "refactor" else {}),
            "renames": [list(r) for r in PROJECTS[args.project]["renames"]],
            "head_of_mirror": git(args.git_dir, "rev-parse", "HEAD").strip()}
    (out / "screen.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    cols = ["merged", "commit", "subject", "frontends", "rule", "stage", "detail", "id", "in_corpus", "excluded"]
    with open(out / "screen.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in rows:
            w.writerow([r["commit"][:10] if c == "commit" else ",".join(r[c]) if c == "frontends" else r.get(c, "")
                        for c in cols])
    md = [f"# Screen: {args.project}, first-parent commits touching {', '.join(PROJECTS[args.project]['folders'].values())}"
          f" with committer date in [{args.since}, {args.until})", "",
          f"Fix rule (subject): `{FIX_RULE}`", "",
          *([f"Refactor rule (subject, no fix, no test of its own): `{REFACTOR_RULE}`", ""]
            if args.kind == "refactor" else []),
          "| merged | commit | subject | frontend | rule | stopped at | detail | case |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        subj = r["subject"].replace("|", "\\|")[:90]
        note = r.get("in_corpus") and f"in corpus: {r['in_corpus']}" or r.get("excluded") and "excluded in cases.yaml" \
            or (r.get("id", "") if r.get("stage") == "qualifies" else "")
        md.append(f"| {r['merged']} | {r['commit'][:10]} | {subj} | {','.join(r['frontends'])} | {r.get('rule', '')} | {r.get('stage', '')} "
                  f"| {str(r.get('detail', '')).replace('|', '/')[:120]} | {note} |")
    (out / "screen.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
