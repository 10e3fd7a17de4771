"""The corpus's upstream text, materialised at run time: the tree stores facts and edits, never upstream code.

    python benchmarks/regressions/materialise.py fetch [--upstream DIR] [--from REPO=URL_OR_GIT_DIR ...]
    python benchmarks/regressions/materialise.py where [--upstream DIR]
    python benchmarks/regressions/materialise.py record [--upstream DIR] CASE REPO     # maintainer tool

A case's repository (build.py) is the installed release's Python sources with some files edited: a regression's head
(the fix reverted), a refactor's base (the refactor reverted). materialise.yaml says, per case and file, how: a list of
edits of the installed file, each replacing a range of its lines by segments taken from

- the installed file itself (`{lines: [a, b]}`),
- an upstream file at a pinned commit (`{rev: SHA, path: P, lines: [a, b]}`), read at run time from the upstream
  cache (below) with `git cat-file blob SHA:P`,
- or, for the few lines a person wrote while porting a revert, literal text (`{text: "..."}`),

each optionally re-indented (`indent: +k / -k` spaces on non-blank lines) and with regex substitutions applied in order
(`sub: [[pattern, replacement], ...]`: the API renames between the upstream code of the time and the installed
release). The sha256 of every installed file before the edits, of every file after them, and the git tree ids of the
repository's base and head are recorded and checked. The cases' upstream test files are not stored either: store.py
re-extracts them from the cache with the extraction tools and checks their recorded sha256.

The upstream cache is a folder of bare git repositories (`apache+tvm.git`, `microsoft+onnxscript.git`): `--upstream
DIR`, else $DLCI_UPSTREAM, else $DLCI_CACHE_DIR/upstream, else ~/.cache/dlci/upstream. `fetch` clones what is missing
from https://github.com/apache/tvm and https://github.com/microsoft/onnxscript, or from `--from REPO=URL`; a local git
directory is cloned with --shared (its objects are borrowed, not copied: the clone needs that directory to stay). Every
benchmark entry point that needs the cache and finds it missing exits saying what to run.

`record` is the maintainer's way to add or change a case: build the case (or lay out the installed sources), edit the
files by hand on the case's branch, and `record` describes the difference as edits, preferring the installed file's
own lines, then the upstream files at the case's commit's parent and at the commit (with the project's API renames
and re-indentation), then other upstream revisions whose history holds the line (git log -S), literal text last; it
checks that the edits reproduce the files byte for byte and writes them with their sha256 into materialise.yaml.
"""
from __future__ import annotations

import argparse
import difflib
import hashlib
import os
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
DATA = HERE / "materialise.yaml"
REPOS = {"apache/tvm": "https://github.com/apache/tvm",
         "microsoft/onnxscript": "https://github.com/microsoft/onnxscript"}
FETCH_HINT = ".venv/bin/python benchmarks/regressions/materialise.py fetch"


class MaterialiseError(Exception):
    """the recorded edits do not reproduce the recorded bytes, or an input is not what was recorded"""


class UpstreamMissing(MaterialiseError):
    """the upstream cache lacks a repository or a commit: the message says what to run"""


# ---- the upstream cache

_ROOT: Path | None = None   # --upstream, set by the entry points


def set_root(path: str | Path | None) -> None:
    global _ROOT
    _ROOT = Path(path).expanduser().resolve() if path else None
    _show.cache_clear()


def root() -> Path:
    if _ROOT is not None:
        return _ROOT
    if os.environ.get("DLCI_UPSTREAM"):
        return Path(os.environ["DLCI_UPSTREAM"]).expanduser()
    base = Path(os.environ.get("DLCI_CACHE_DIR") or Path.home() / ".cache" / "dlci").expanduser()
    return base / "upstream"


def repo_dir(repo: str) -> Path:
    return root() / (repo.replace("/", "+") + ".git")


def missing(what: str) -> UpstreamMissing:
    cmd = FETCH_HINT + (f" --upstream {_ROOT}" if _ROOT is not None else "")
    return UpstreamMissing(
        f"{what}.\nThe corpus's upstream files (the cases' source edits take upstream lines, their tests are "
        f"extracted from upstream test files) are materialised at run time from clones of the upstream repositories "
        f"in the upstream cache {root()} (--upstream DIR or $DLCI_UPSTREAM for another folder). Get them once with\n"
        f"    {cmd}\n"
        f"(clones {' and '.join(REPOS.values())}), or from local git directories with\n"
        f"    {cmd} --from apache/tvm=PATH --from microsoft/onnxscript=PATH")


_GIT_DIRS: dict[str, Path] = {}   # use_git_dir(): a maintainer's own git directory instead of the cache's clone


def use_git_dir(repo: str, path: str | Path) -> None:
    """read repo from this git directory instead of the cache (screen.py --git-dir)"""
    _GIT_DIRS[repo] = Path(path)
    _show.cache_clear()


def git_dir(repo: str) -> Path:
    if repo in _GIT_DIRS:
        return _GIT_DIRS[repo]
    d = repo_dir(repo)
    if not (d / "HEAD").exists():
        raise missing(f"the upstream cache has no clone of {repo} ({d})")
    return d


def rev_parse(repo: str, rev: str) -> str:
    """the commit id rev names in the cached clone of repo (a transplant's head: the fix commit's parent)"""
    p = subprocess.run(["git", "--git-dir", str(git_dir(repo)), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                       capture_output=True, text=True)
    if p.returncode:
        raise missing(f"{repo} at {rev}")
    return p.stdout.strip()


def has_commit(repo: str, rev: str) -> bool:
    return subprocess.run(["git", "--git-dir", str(git_dir(repo)), "cat-file", "-e", f"{rev}^{{commit}}"],
                          capture_output=True).returncode == 0


@lru_cache(maxsize=256)
def _show(gdir: str, rev: str, path: str) -> bytes | None:
    p = subprocess.run(["git", "--git-dir", gdir, "cat-file", "blob", f"{rev}:{path}"], capture_output=True)
    return p.stdout if p.returncode == 0 else None


def show(repo: str, rev: str, path: str) -> str:
    """the text of path at rev in repo's clone in the cache"""
    data = _show(str(git_dir(repo)), rev, path)
    if data is None:
        if not has_commit(repo, rev):
            raise missing(f"commit {rev[:12]} of {repo} is not in the upstream cache ({repo_dir(repo)}): fetch again")
        raise MaterialiseError(f"{repo}: {path} does not exist at {rev[:12]}")
    return data.decode()


def require(repos: list[str] | None = None, revs: dict[str, list[str]] | None = None) -> None:
    """raise UpstreamMissing unless the cache holds the repositories and the commits (default: every commit the
    corpus pins in those repositories)"""
    repos = repos or list(REPOS)
    for repo in repos:
        git_dir(repo)
    if revs is None:
        revs = {r: c for r, c in pinned_revs().items() if r in repos}
    for repo, rs in revs.items():
        absent = [r for r in rs if not has_commit(repo, r)]
        if absent:
            raise missing(f"{len(absent)} pinned commit(s) of {repo} (first {absent[0][:12]}) are not in the "
                          f"upstream cache ({repo_dir(repo)}): fetch again")


def cases_for(ids: list[str] | None, upstream: str | None = None) -> list[dict]:
    """the entry points' start: the cases of cases.yaml named by ids (in that order; all when none), once the
    upstream cache (upstream: --upstream) holds their repositories and pinned commits; SystemExit saying what to
    run otherwise"""
    set_root(upstream)
    cases = {c["id"]: c for c in yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]}
    unknown = [i for i in ids or [] if i not in cases]
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
    chosen = [cases[i] for i in ids] if ids else list(cases.values())
    try:
        require(sorted({c["repo"] for c in chosen}))
    except UpstreamMissing as e:
        raise SystemExit(str(e)) from None
    return chosen


def fetch(sources: dict[str, str]) -> list[str]:
    """clone each repository into the cache if absent, then fetch the commits materialise.yaml pins if missing"""
    out = []
    doc = load()
    for repo, url in REPOS.items():
        src = sources.get(repo, url)
        dest = repo_dir(repo)
        if not (dest / "HEAD").exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            local = Path(src).expanduser()
            if local.exists():   # a local git directory (bare or not): borrow its objects
                gd = subprocess.run(["git", "-C", str(local), "rev-parse", "--absolute-git-dir"],
                                    capture_output=True, text=True)
                if gd.returncode:
                    raise SystemExit(f"{src} is not a git directory")
                cmd = ["git", "clone", "-q", "--bare", "--shared", gd.stdout.strip(), str(dest)]
            else:
                cmd = ["git", "clone", "-q", "--bare", src, str(dest)]
            print(" ".join(cmd), file=sys.stderr, flush=True)
            if subprocess.run(cmd).returncode:
                raise SystemExit(f"cloning {src} failed")
            out.append(f"{repo}: cloned from {src} into {dest}")
        else:
            out.append(f"{repo}: {dest} present")
        want = pinned_revs(doc).get(repo, [])
        absent = [r for r in want if not has_commit(repo, r)]
        if absent:
            subprocess.run(["git", "--git-dir", str(dest), "fetch", "-q", src, *absent])
            absent = [r for r in want if not has_commit(repo, r)]
        out.append(f"{repo}: {len(want) - len(absent)} of {len(want)} pinned commits present"
                   + (f"; missing {', '.join(m[:12] for m in absent)}" if absent else ""))
        _show.cache_clear()
    return out


# ---- the data file

def load() -> dict:
    if not DATA.exists():
        return {"cases": {}}
    return yaml.load(DATA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {"cases": {}}


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper, s):
    """literal text as a block (|), when YAML can hold it so: printable, no trailing blanks on a line"""
    block = "\n" in s.rstrip("\n") or s.endswith("\n")
    block = block and all(c.isprintable() or c == "\n" for c in s) and all(l == l.rstrip() for l in s.split("\n"))
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|" if block else None)


class _Flow(dict):
    pass


class _FlowList(list):
    pass


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Flow, lambda d, m: d.represent_mapping("tag:yaml.org,2002:map", m, flow_style=True))
_Dumper.add_representer(_FlowList, lambda d, s: d.represent_sequence("tag:yaml.org,2002:seq", s, flow_style=True))

ABOUT = ("How each case's files are materialised (materialise.py): per case, the git tree ids of its repository's base "
         "and head (build.py), per edited file the sha256 of the installed file and of the result and the edits "
         "(line ranges of the installed file replaced by segments: the installed file's own lines, an upstream "
         "file's lines at a commit, or literal text; each with optional regex `sub` and `indent`), and the names and "
         "sha256 of the case's upstream test files as the extraction tools make them (store.py). No upstream text.")


def _styled(doc: dict) -> dict:
    """one line per segment that takes lines from a file (literal text stays a block), ranges and trees inline"""
    out = {"about": ABOUT, **{k: v for k, v in doc.items() if k not in ("about", "cases")}, "cases": {}}
    for cid, entry in sorted(doc["cases"].items()):
        ent = {}
        for key, val in entry.items():
            if key in ("tree", "suite"):
                val = _Flow(val)
            elif key in ("sources", "base_sources"):
                val = [{**f, **({"edits": [
                    {"lines": _FlowList(e["lines"]),
                     **({"new": [s if "text" in s else _Flow(s) for s in e["new"]]} if e.get("new") else {}),
                     **{k: v for k, v in e.items() if k not in ("lines", "new")}}
                    for e in f["edits"]]} if "edits" in f else {})} for f in val]
            ent[key] = val
        out["cases"][cid] = ent
    return out


def save(doc: dict) -> None:
    DATA.write_text(yaml.dump(_styled(doc), Dumper=_Dumper, sort_keys=False, width=1000, allow_unicode=True,
                              default_flow_style=False))


def pinned_revs(doc: dict | None = None) -> dict[str, list[str]]:
    """{repo: commits} that materialise.yaml and cases.yaml name (the cases' commits, the edits' revisions, pins)"""
    doc = doc or load()
    cases = {c["id"]: c for c in yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]}
    out: dict[str, set] = {}
    for case in cases.values():
        out.setdefault(case["repo"], set()).add(case["commit"])
    for cid, entry in doc["cases"].items():
        repo = cases[cid]["repo"] if cid in cases else None
        for f in entry.get("sources", []) + entry.get("base_sources", []):
            for e in f.get("edits", []):
                for s in e.get("new", []):
                    if "rev" in s:
                        out.setdefault(repo, set()).add(s["rev"])
    for repo, tags in (doc.get("pins") or {}).items():
        out.setdefault(repo, set()).update(tags.values())
    return {k: sorted(v) for k, v in out.items()}


def sha256(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


# ---- the edit language

def lines_of(text: str) -> list[str]:
    """lines with their '\\n' (split on '\\n' only, unlike str.splitlines)"""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _indent(line: str, k: int) -> str:
    if not k or not line.strip():
        return line
    if k > 0:
        return " " * k + line
    if not line.startswith(" " * -k):
        raise MaterialiseError(f"cannot dedent by {-k}: {line[:60]!r}")
    return line[-k:]


def transform(lines: list[str], seg: dict) -> list[str]:
    out = []
    for line in lines:
        for pat, repl in seg.get("sub", []):
            line = re.sub(pat, repl, line)
        out.append(_indent(line, seg.get("indent", 0)))
    return out


def segment_lines(seg: dict, base: list[str], repo: str | None) -> list[str]:
    if "text" in seg:
        return lines_of(seg["text"])
    a, b = seg["lines"]
    if "rev" in seg:
        src = lines_of(show(seg.get("repo", repo), seg["rev"], seg["path"]))
    else:
        src = base
    if not (1 <= a <= b <= len(src)):
        raise MaterialiseError(f"lines {a}-{b} out of range ({seg.get('path', 'the edited file')}: {len(src)} lines)")
    return transform(src[a - 1:b], seg)


def apply(base: list[str], edits: list[dict], repo: str | None = None) -> list[str]:
    """edits: [{lines: [a, b], new: [segments], sha256?}], 1-based inclusive ranges of base ([a, a-1]: insert
    before line a), in order and not overlapping, all against base; a segment without `rev` takes base's lines"""
    out, pos = [], 0
    for e in edits:
        a, b = e["lines"]
        if a - 1 < pos or b < a - 1 or b > len(base):
            raise MaterialiseError(f"edit at lines {a}-{b}: out of order or range ({len(base)} lines)")
        if "sha256" in e and sha256("".join(base[a - 1:b])) != e["sha256"]:
            raise MaterialiseError(f"lines {a}-{b} are not the recorded ones (sha256 {e['sha256'][:12]})")
        out += base[pos:a - 1]
        for seg in e.get("new", []):
            out += segment_lines(seg, base, repo)
        pos = b
    return out + base[pos:]


def materialise_file(entry: dict, installed: str | None, repo: str) -> str | None:
    """the edited file's text from the installed file's (checked against the recorded sha256s)"""
    if (sha256(installed) if installed is not None else None) != entry["installed"]:
        raise MaterialiseError(f"{entry['path']}: the installed file is not the one the edits were recorded against "
                               f"(sha256 {sha256(installed)[:12] if installed is not None else 'absent'}, recorded "
                               f"{str(entry['installed'])[:12]})")
    if entry["result"] is None:
        return None
    text = "".join(apply(lines_of(installed or ""), entry.get("edits", []), repo))
    if sha256(text) != entry["result"]:
        raise MaterialiseError(f"{entry['path']}: the edits give sha256 {sha256(text)[:12]}, recorded "
                               f"{entry['result'][:12]}")
    return text


# ---- describing a file as edits (record, screen.py --emit)

def _match(tline: str, sline: str) -> int | None:
    """indent k with _indent(sline, k) == tline, or None"""
    if not tline.strip() or not sline.strip():
        return 0 if tline == sline else None
    if tline.lstrip(" ") != sline.lstrip(" "):
        return None
    return (len(tline) - len(tline.lstrip(" "))) - (len(sline) - len(sline.lstrip(" ")))


class Source:
    """lines an edit may take: the installed file itself (ref {}) or an upstream file at a revision, raw or with
    renames"""

    def __init__(self, ref: dict, lines: list[str], renames: list[tuple[str, str]] = ()):
        self.ref, self.raw = ref, lines
        self.renames = [list(r) for r in renames]
        self.lines = transform(lines, {"sub": self.renames}) if renames else lines
        self.index: dict[str, list[int]] = {}
        for j, line in enumerate(self.lines):
            self.index.setdefault(line.strip(), []).append(j)

    def used_renames(self, a: int, b: int) -> list[list[str]]:
        used = []
        for line in self.raw[a:b]:
            for pat, repl in self.renames:
                new = re.sub(pat, repl, line)
                if new != line and [pat, repl] not in used:
                    used.append([pat, repl])
                line = new
        return [r for r in self.renames if r in used]


def _segments(run: list[str], sources: list[Source]) -> list[dict]:
    """the target lines `run` as segments: at each position the longest stretch one source gives (the earlier source
    on a tie), else one literal line"""
    segs: list[dict] = []
    pos = 0
    while pos < len(run):
        best = None   # (length, source, j, indent)
        for src in sources:
            for j in src.index.get(run[pos].strip(), ()):
                k = _match(run[pos], src.lines[j])
                if k is None:
                    continue
                n = 1
                while pos + n < len(run) and j + n < len(src.lines) and _indent_ok(run[pos + n], src.lines[j + n], k):
                    n += 1
                if best is None or n > best[0]:
                    best = (n, src, j, k)
        if best is None:
            if segs and "text" in segs[-1]:
                segs[-1]["text"] += run[pos]
            else:
                segs.append({"text": run[pos]})
            pos += 1
            continue
        n, src, j, k = best
        seg = {**src.ref, "lines": [j + 1, j + n]}
        used = src.used_renames(j, j + n)
        if used:
            seg["sub"] = used
        if k:
            seg["indent"] = k
        segs.append(seg)
        pos += n
    return segs


def _indent_ok(t: str, s: str, k: int) -> bool:
    try:
        return _indent(s, k) == t
    except MaterialiseError:
        return False


def describe(installed: str, target: str, sources: list[Source], repo: str | None = None) -> list[dict]:
    """edits turning installed into target; sources after the installed file itself, in order of preference"""
    a, b = lines_of(installed), lines_of(target)
    srcs = [Source({}, a), *sources]
    edits = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        e = {"lines": [i1 + 1, i2]}
        if j2 > j1:
            e["new"] = _segments(b[j1:j2], srcs)
        edits.append(e)
    if "".join(apply(a, edits, repo)) != target:   # describe is exact by construction: a check
        raise MaterialiseError("describe: the edits do not reproduce the target")
    return edits


def literal_lines(edits: list[dict]) -> int:
    return sum(len(lines_of(s["text"])) for e in edits for s in e.get("new", []) if "text" in s)


def _git_out(gd: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gd, *args], capture_output=True, text=True).stdout


def _sources_at(gd: str, rev: str, paths: list[str], renames, holding: str | None = None) -> list[Source]:
    """each of paths that exists at rev (and holds the line `holding`), raw and with the renames"""
    out = []
    for p in paths:
        data = _show(gd, rev, p)
        if data is None or (holding is not None and holding not in data.decode()):
            continue
        lines = lines_of(data.decode())
        out += [Source({"rev": rev, "path": p}, lines), Source({"rev": rev, "path": p}, lines, renames)]
    return out


def candidate_sources(repo: str, commit: str, paths: list[str], renames, path_renames: dict | None = None,
                      extra_lines: list[str] = ()) -> list[Source]:
    """the files of the case (and the .py files the commit touches) at the commit's parent and at the commit, then,
    for each of extra_lines still found nowhere, the files holding it at (or before) the last 3 revisions whose diff
    adds or removes it (git log -S)"""
    gd = str(git_dir(repo))
    parent = _git_out(gd, "rev-parse", f"{commit}^").strip()
    touched = [t for t in _git_out(gd, "diff", "--name-only", parent, commit).split() if t.endswith(".py")]
    old_paths = [old + p[len(new):] for p in paths for old, new in (path_renames or {}).items() if p.startswith(new)]
    want = list(dict.fromkeys([*paths, *old_paths, *touched]))
    out = _sources_at(gd, parent, want, renames) + _sources_at(gd, commit, want, renames)
    have = {l.strip() for s in out for l in s.lines}
    folders = sorted({str(Path(p).parent) for p in want})
    for line in dict.fromkeys(l.strip() for l in extra_lines):
        if not line or line in have or len(line) < 8:
            continue
        for rev in _git_out(gd, "log", "-n", "3", "--format=%H", "-S", line, commit, "--", *folders).split():
            changed = [p for p in _git_out(gd, "diff", "--name-only", f"{rev}^", rev).split() if p.endswith(".py")]
            for r in (rev, _git_out(gd, "rev-parse", f"{rev}^").strip()):
                found = _sources_at(gd, r, list(dict.fromkeys(want + changed)), renames, holding=line)
                out += found
                have |= {l.strip() for s in found for l in s.lines}
    return out


def record_file(repo: str, commit: str, path: str, installed: str | None, target: str | None, renames,
                path_renames: dict | None = None) -> dict:
    """the materialise.yaml entry of one file"""
    entry = {"path": path, "installed": sha256(installed) if installed is not None else None,
             "result": sha256(target) if target is not None else None}
    if target is None:
        return entry
    first = describe(installed or "", target, [])
    pending = [l for e in first for s in e.get("new", []) if "text" in s for l in lines_of(s["text"])]
    if pending:
        sources = candidate_sources(repo, commit, [path], renames, path_renames, pending)
        entry["edits"] = describe(installed or "", target, sources, repo)
    else:
        entry["edits"] = first
    return entry



def record_whole(repo: str, rev: str, upstream_paths: list[str], path: str, installed: str | None, target: str,
                 renames) -> dict | None:
    """the entry of a file that is an upstream file whole (a transplant's side): one edit that replaces every
    installed line by the upstream file's lines at rev, with the renames where they are needed; None when no path of
    upstream_paths gives target. Much shorter than record_file's line-by-line description of a file that shares
    little with the installed one."""
    gd = str(git_dir(repo))
    n = len(lines_of(installed or ""))
    for upath in upstream_paths:
        data = _show(gd, rev, upath)
        if data is None:
            continue
        m = len(lines_of(data.decode()))
        for sub in ([], [list(r) for r in renames]):
            seg = {"rev": rev, "path": upath, "lines": [1, m], **({"sub": sub} if sub else {})}
            entry = {"path": path, "installed": sha256(installed) if installed is not None else None,
                     "result": sha256(target), "edits": [{"lines": [1, n], **({"new": [seg]} if m else {})}]}
            try:
                if materialise_file(entry, installed, repo) == target:
                    return entry
            except MaterialiseError:
                continue
    return None

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--upstream", help="the upstream cache folder (default: $DLCI_UPSTREAM, else "
                        "$DLCI_CACHE_DIR/upstream, else ~/.cache/dlci/upstream)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", parents=[common], help="clone the upstream repositories into the cache (once)")
    f.add_argument("--from", dest="sources", action="append", default=[], metavar="REPO=URL_OR_GIT_DIR",
                   help=f"where to clone REPO ({', '.join(REPOS)}) from instead of GitHub")
    sub.add_parser("where", parents=[common], help="print the cache folder and what it holds")
    r = sub.add_parser("record", parents=[common], help="maintainer: record a case repository's edited files as edits")
    r.add_argument("case")
    r.add_argument("repo", type=Path, help="the case's repository (build.py's layout; branch main = installed "
                   "sources, the case branch = the edited files), or an already built one")
    args = ap.parse_args()
    set_root(args.upstream)
    try:
        if args.cmd == "fetch":
            sources = dict(s.split("=", 1) for s in args.sources)
            unknown = set(sources) - set(REPOS)
            if unknown:
                raise SystemExit(f"unknown repositories: {', '.join(sorted(unknown))} (known: {', '.join(REPOS)})")
            lines = fetch(sources)
            for line in lines:
                print(line)
            if any("; missing " in line for line in lines):
                return 1
        elif args.cmd == "where":
            print(root())
            for repo in REPOS:
                d = repo_dir(repo)
                print(f"  {repo}: {d if (d / 'HEAD').exists() else 'absent'}")
        elif args.cmd == "record":
            import build
            try:
                entry = build.record(args.case, args.repo)
            except build.BuildError as e:
                raise SystemExit(f"record: {e}")
            lit = sum(literal_lines(f.get("edits", [])) for f in entry["sources"])
            print(f"{args.case}: {len(entry['sources'])} file(s), "
                  f"{sum(len(f.get('edits', [])) for f in entry['sources'])} edit(s), {lit} literal line(s); trees "
                  f"base {entry['tree']['base'][:12]} head {entry['tree']['head'][:12]} recorded in {DATA.name}")
    except UpstreamMissing as e:
        raise SystemExit(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
