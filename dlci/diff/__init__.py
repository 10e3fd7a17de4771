"""Git diff analysis: which lines of which files a pull request changes, read with the real ``git``.

``GitRepo(path, base, head)`` resolves both revisions and diffs ``head`` against the merge base of the two (the
PR's fork point), so commits that landed on the base branch after the fork never show up as PR changes.

Git runs in a scrubbed environment (no system/global config, empty HOME, C locale, no pager) and with explicit
options (``--no-ext-diff --no-color --no-textconv``, fixed prefixes, ``-U0``, rename/copy detection on), so the
user's or the repository's diff settings cannot change what is parsed. File names come from the NUL-separated
``--raw -z`` listing; line numbers come from the ``@@`` headers of the ``-U0`` patch, where every hunk is one
contiguous block of removed then added lines.

Text decoding (``GitRepo.text``): NUL byte in the first 8000 bytes => binary => None (git's own rule); otherwise
UTF-8 (a BOM is dropped), and when that fails latin-1, which maps every byte to one character and so keeps the
line structure git counted. "Undecodable" therefore never yields None; absent paths, trees and binary blobs do.
"""
from __future__ import annotations

from dlci.errors import UsageError

import fnmatch
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from dlci.diff import git

__all__ = ["DiffError", "Hunk", "FileChange", "Diff", "GitRepo", "diff", "match_path"]


class DiffError(UsageError):
    """bad revision, not a git repo, git failure: the CLI maps it to exit 2 with this message"""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int   # as in the @@ header (counts may be 0)


@dataclass
class FileChange:
    path: str                  # path at head; for deletions the base path
    old_path: str | None       # path at base; None when added
    status: str                # "added" | "modified" | "deleted" | "renamed" | "copied" | "type-changed"
    binary: bool = False
    added: list[int] = field(default_factory=list)     # sorted 1-based head line numbers added or changed
    removed: list[int] = field(default_factory=list)   # sorted 1-based base line numbers removed or changed
    hunks: list[Hunk] = field(default_factory=list)
    similarity: int | None = None   # rename/copy similarity percent
    # extras (not in the shared spec): file modes as git prints them ("100644", "120000", "160000"; None if absent)
    old_mode: str | None = None
    new_mode: str | None = None

    def touched_head_lines(self) -> set[int]:
        """added lines, plus for each pure deletion hunk the head lines on both sides of the deletion point
        (so a deleted statement still selects its enclosing function)"""
        lines = set(self.added)
        if self.status == "deleted":
            return lines
        for h in self.hunks:
            if h.new_count == 0 and h.old_count > 0:
                # with count 0 git gives the head line *after which* the base lines used to be
                lines.add(max(h.new_start, 1))
                lines.add(h.new_start + 1)
        return lines

    def deletion_points(self, head_text: str) -> dict[int, Hunk]:
        """Per pure deletion hunk, the first head line after the deletion point that holds code (not blank, not a
        comment): the statement a test runs where the deleted code used to run."""
        rows = head_text.splitlines()
        out = {}
        for h in self.hunks:
            if h.new_count == 0 and h.old_count > 0:
                n = h.new_start + 1
                while n <= len(rows) and (not rows[n - 1].strip() or rows[n - 1].lstrip().startswith("#")):
                    n += 1
                out[n if n <= len(rows) else h.new_start + 1] = h
        return out


@dataclass
class Diff:
    repo: str            # absolute repo path
    base: str            # sha of the merge base of (base, head)  -- the PR's true base
    base_ref: str        # what the user passed
    head: str            # sha
    files: list[FileChange]
    truncated: bool = False   # True when limits were hit (files beyond max_files/max_lines listed with no lines)
    notes: list[str] = field(default_factory=list)   # human-readable remarks

    def file(self, path: str) -> FileChange | None:
        """The change for a head path (or the base path of a deleted file)."""
        return next((f for f in self.files if f.path == path), None)

    @property
    def changed_lines(self) -> int:
        return sum(len(f.added) + len(f.removed) for f in self.files)


# --------------------------------------------------------------------------------------------------------------
# running git

_STATUS = {"A": "added", "M": "modified", "D": "deleted", "R": "renamed", "C": "copied", "T": "type-changed"}
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# options that pin git's diff output whatever the configuration says
_CONFIG = ("core.quotepath=off", "diff.noprefix=false", "diff.mnemonicPrefix=false", "diff.relative=false",
           "diff.renames=true", "diff.renameLimit=5000", "diff.interHunkContext=0", "diff.suppressBlankEmpty=false",
           "color.ui=never", "color.diff=never", "core.attributesFile=/dev/null", "core.pager=cat",
           "core.fsmonitor=false")
# order matters: a --find-renames/-M *after* -C switches copy detection back off
_DIFF_OPTS = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-relative", "--find-renames", "-M", "-C",
              "--src-prefix=a/", "--dst-prefix=b/", "--inter-hunk-context=0", "--ignore-submodules=none")

def _git_env() -> dict[str, str]:
    return git.env()


def _git_cmd(args: list[str] | tuple[str, ...]) -> list[str]:
    return git.command(args, config=_CONFIG)


def _decode_path(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _encode_path(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


_C_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13,
              ord('"'): 34, ord("\\"): 92}


def _unquote(b: bytes) -> tuple[bytes, int]:
    """Parse a C-quoted name as git writes it (``"a/x\\ty"``) at the start of ``b``; return (bytes, length used)."""
    assert b[:1] == b'"'
    out, i = bytearray(), 1
    while i < len(b):
        c = b[i]
        if c == 0x22:
            return bytes(out), i + 1
        if c == 0x5C and i + 1 < len(b):
            n = b[i + 1]
            if 0x30 <= n <= 0x37:
                out.append(int(b[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_C_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out), len(b)


def _header_name(b: bytes) -> bytes:
    """A name in a ``rename from``/``copy to`` line: quoted or verbatim."""
    return _unquote(b)[0] if b.startswith(b'"') else b


def _git_pair(rest: bytes) -> tuple[bytes, bytes] | None:
    """The two names of ``diff --git a/X b/Y`` (prefixes kept). Unquoted names containing spaces are only
    ambiguous when X != Y, i.e. for renames/copies, whose ``rename from``/``to`` lines are used instead."""
    if rest.startswith(b'"'):
        a, n = _unquote(rest)
        tail = rest[n + 1:]
        return a, (_unquote(tail)[0] if tail.startswith(b'"') else tail)
    if rest.endswith(b'"'):
        i = rest.rfind(b' "b/')
        if i >= 0:
            return rest[:i], _unquote(rest[i + 1:])[0]
    if (len(rest) - 1) % 2 == 0:
        half = (len(rest) - 1) // 2
        a, b = rest[:half], rest[half + 1:]
        if a[2:] == b[2:] and rest[half:half + 1] == b" ":
            return a, b
    i = rest.find(b" b/")
    return (rest[:i], rest[i + 1:]) if i >= 0 else None


def _strip_prefix(b: bytes, prefix: bytes) -> bytes:
    return b[len(prefix):] if b.startswith(prefix) else b


@dataclass
class _Section:
    """What one ``diff --git`` section of the patch says about a file pair."""
    key: tuple[str, str]
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)


def _parse_patch(stream) -> list[_Section]:
    """Walk a ``-U0`` patch line by line. Hunk bodies are skipped by count (their lines can start with anything,
    including ``diff --git``); only headers are interpreted."""
    sections: list[_Section] = []
    cur: _Section | None = None
    pending = 0   # body lines of the current hunk still to skip
    src = dst = None
    for raw in stream:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if pending:
            if line.startswith(b"\\"):   # "\ No newline at end of file" is not counted in the header
                continue
            pending -= 1
            continue
        if line.startswith(b"diff --git "):
            pair = _git_pair(line[11:]) or (b"", b"")
            src, dst = _strip_prefix(pair[0], b"a/"), _strip_prefix(pair[1], b"b/")
            cur = _Section((_decode_path(src), _decode_path(dst)))
            sections.append(cur)
            continue
        if cur is None:
            continue
        if line.startswith(b"@@ "):
            m = _HUNK.match(line)
            if m:
                h = Hunk(int(m[1]), int(m[2]) if m[2] is not None else 1,
                         int(m[3]), int(m[4]) if m[4] is not None else 1)
                cur.hunks.append(h)
                pending = h.old_count + h.new_count
        elif line.startswith((b"rename from ", b"copy from ")):
            src = _header_name(line.split(b" ", 2)[2])
            cur.key = (_decode_path(src), cur.key[1])
        elif line.startswith((b"rename to ", b"copy to ")):
            dst = _header_name(line.split(b" ", 2)[2])
            cur.key = (cur.key[0], _decode_path(dst))
        elif line.startswith(b"Binary files ") or line == b"GIT binary patch":
            cur.binary = True
    return sections


@dataclass
class _RawEntry:
    status: str
    score: int | None
    old_mode: str
    new_mode: str
    src: str
    dst: str


def _parse_raw(out: bytes) -> list[_RawEntry]:
    """``git diff --raw -z``: ``:om nm osha nsha S[score]\\0path\\0`` (two paths for renames/copies)."""
    parts = out.split(b"\0")
    entries, i = [], 0
    while i < len(parts):
        head = parts[i]
        if not head.startswith(b":"):
            i += 1
            continue
        fields = head[1:].split(b" ")
        letters = fields[4].decode()
        letter, score = letters[0], (int(letters[1:]) if letters[1:].isdigit() else None)
        if letter in "RC":
            src, dst = parts[i + 1], parts[i + 2]
            i += 3
        else:
            src = dst = parts[i + 1]
            i += 2
        entries.append(_RawEntry(letter, score, fields[0].decode(), fields[1].decode(),
                                 _decode_path(src), _decode_path(dst)))
    return entries


def match_path(pattern: str, path: str) -> bool:
    """Glob-style match of a repo-relative path: ``*``, ``?`` and ``[...]`` stay inside one directory,
    ``**`` spans any number of directories (``a/**/b.py`` also matches ``a/b.py``)."""
    return _glob_regex(pattern).fullmatch(path) is not None


_glob_cache: dict[str, re.Pattern] = {}


def _glob_regex(pattern: str) -> re.Pattern:
    rx = _glob_cache.get(pattern)
    if rx is None:
        out, i, n = [], 0, len(pattern)
        while i < n:
            c = pattern[i]
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            elif pattern.startswith("**", i):
                out.append(".*")
                i += 2
            elif c == "*":
                out.append("[^/]*")
                i += 1
            elif c == "?":
                out.append("[^/]")
                i += 1
            elif c == "[":
                j = pattern.find("]", i + 2)
                if j < 0:
                    out.append(re.escape(c))
                    i += 1
                else:
                    # fnmatch's class syntax, kept from crossing "/"
                    body = fnmatch.translate(pattern[i:j + 1])
                    body = body[len("(?s:"):-len(")\\Z")]
                    out.append(f"(?!/){body}")
                    i = j + 1
            else:
                out.append(re.escape(c))
                i += 1
        rx = _glob_cache[pattern] = re.compile("".join(out), re.S)
    return rx


# --------------------------------------------------------------------------------------------------------------
# the repository


class GitRepo:
    """A git repository with two revisions of interest; reads are cached."""

    def __init__(self, path: str | Path, base: str = "HEAD~1", head: str = "HEAD"):
        p = Path(path).expanduser()
        if not p.is_dir():
            raise DiffError(f"not a git repository: {path} (no such directory)")
        self._env = _git_env()
        top = self._run(["rev-parse", "--show-toplevel"], cwd=p, check=False)
        if top.returncode != 0:
            bare = self._run(["rev-parse", "--is-bare-repository"], cwd=p, check=False)
            if bare.returncode == 0 and bare.stdout.strip() == b"true":
                gd = self._run(["rev-parse", "--absolute-git-dir"], cwd=p).stdout
                self.path = Path(_decode_path(gd.rstrip(b"\n")))
            else:
                raise DiffError(f"not a git repository: {path} ({_msg(top)})")
        else:
            self.path = Path(_decode_path(top.stdout.rstrip(b"\n"))).resolve()
        self.base_ref, self.head_ref = base, head
        self._revs: dict[str, str] = {}
        self.head = self.resolve(head)
        base_sha = self.resolve(base)
        mb = self._run(["merge-base", base_sha, self.head], check=False)
        if mb.returncode != 0 or not mb.stdout.strip():
            shallow = self._run(["rev-parse", "--is-shallow-repository"], check=False).stdout.strip() == b"true"
            hint = " (shallow clone: fetch more history)" if shallow else ""
            raise DiffError(f"no merge base between {base} and {head} in {self.path}{hint}")
        self.base = mb.stdout.split()[0].decode()
        self.base_tip = base_sha   # extra: where the base ref itself points
        self._texts: dict[tuple[str, str], str | None] = {}
        self._files: dict[str, list[str]] = {}
        self._file_sets: dict[str, frozenset[str]] = {}
        self._revs.update(head=self.head, base=self.base)
        self._batch: subprocess.Popen | None = None
        self._lock = threading.Lock()

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _run(self, args: list[str], *, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        try:
            r = subprocess.run(_git_cmd(args), cwd=cwd or self.path, env=self._env, capture_output=True,
                               stdin=subprocess.DEVNULL, timeout=git.TIMEOUT_S)
        except FileNotFoundError as e:
            raise DiffError("git is not installed (or not on PATH)") from e
        except subprocess.TimeoutExpired:
            raise DiffError(f"git {' '.join(args[:2])} ran past {git.TIMEOUT_S:.0f} s in {cwd or self.path}") from None
        if check and r.returncode != 0:
            raise DiffError(f"git {' '.join(args[:2])} failed in {cwd or self.path}: {_msg(r)}")
        return r

    def resolve(self, rev: str) -> str:
        """The commit sha of a revision (DiffError if unknown)."""
        if rev in self._revs:
            return self._revs[rev]
        if not rev or rev.startswith("-"):
            raise DiffError(f"bad revision {rev!r}")
        r = self._run(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], check=False)
        if r.returncode != 0 or not r.stdout.strip():
            raise DiffError(f"unknown revision {rev!r} in {self.path}")
        sha = r.stdout.strip().decode()
        self._revs[rev] = sha
        return sha

    def close(self) -> None:
        """Stop the ``git cat-file --batch`` helper, if one was started."""
        with self._lock:
            proc, self._batch = self._batch, None
            if proc is not None:
                try:
                    proc.stdin.close()   # EOF on stdin ends cat-file --batch
                    proc.wait(timeout=5)
                except Exception:   # noqa: BLE001 - best effort at shutdown
                    proc.kill()
                    proc.wait()
                finally:
                    proc.stdout.close()

    def __enter__(self) -> GitRepo:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:   # noqa: BLE001 - interpreter shutdown
            pass

    # -- reading files ------------------------------------------------------------------------------------------
    def blob(self, relpath: str, rev: str = "head") -> bytes | None:
        """Raw bytes of a file at a revision; None if absent or not a file (extra, not in the shared spec)."""
        sha = self.resolve(rev)
        spec = _encode_path(f"{sha}:{relpath}")
        if b"\n" in spec:   # the batch protocol is line based; such names take a process of their own
            r = self._run(["cat-file", "-t", spec.decode("utf-8", "surrogateescape")], check=False)
            if r.stdout.strip() != b"blob":
                return None
            return self._run(["cat-file", "blob", spec.decode("utf-8", "surrogateescape")]).stdout
        with self._lock:
            if self._batch is None or self._batch.poll() is not None:
                self._batch = subprocess.Popen(_git_cmd(["cat-file", "--batch"]), cwd=self.path, env=self._env,
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL)
            proc = self._batch
            proc.stdin.write(spec + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().rstrip(b"\n")
            if not header:
                self._batch = None
                proc.kill()
                proc.wait()
                proc.stdout.close()
                raise DiffError(f"git cat-file stopped unexpectedly in {self.path}")
            if header.endswith((b" missing", b" ambiguous")):   # "<spec> missing": the spec may hold spaces
                return None
            _oid, kind, size = header.split(b" ")
            data = proc.stdout.read(int(size))
            proc.stdout.read(1)   # the LF after the contents
            return data if kind == b"blob" else None

    def text(self, relpath: str, rev: str = "head") -> str | None:
        """rev is "head", "base" or a sha; None if absent/binary (see the module doc for decoding)."""
        key = (self.resolve(rev), relpath)
        if key not in self._texts:
            self._texts[key] = _decode_text(self.blob(relpath, rev))
        return self._texts[key]

    def files(self, rev: str = "head") -> list[str]:
        """All tracked paths at rev."""
        sha = self.resolve(rev)
        if sha not in self._files:
            out = self._run(["ls-tree", "-r", "--name-only", "-z", "--full-tree", sha]).stdout
            self._files[sha] = [_decode_path(p) for p in out.split(b"\0") if p]
        return self._files[sha]

    def exists(self, relpath: str, rev: str = "head") -> bool:
        sha = self.resolve(rev)
        if sha not in self._file_sets:
            self._file_sets[sha] = frozenset(self.files(sha))
        return relpath in self._file_sets[sha]

    def glob(self, pattern: str, rev: str = "head") -> list[str]:
        """Tracked paths at rev matching ``pattern`` (see :func:`match_path`: ``**`` crosses directories)."""
        rx = _glob_regex(pattern)
        return [p for p in self.files(rev) if rx.fullmatch(p)]

    # -- the diff -----------------------------------------------------------------------------------------------
    def diff(self, *, max_files: int = 5000, max_lines: int = 200_000) -> Diff:
        """head against the merge base. Files beyond ``max_files``, or from the file whose lines would pass
        ``max_lines`` on, are listed without lines and the diff is marked truncated."""
        revs = [self.base, self.head]
        raw = self._run(["diff", "--raw", "-z", "--no-abbrev", *_DIFF_OPTS, *revs, "--"]).stdout
        entries = _parse_raw(raw)
        sections: dict[tuple[str, str], list[_Section]] = {}
        if entries:
            for s in self._patch(revs):
                sections.setdefault(s.key, []).append(s)
        files, notes, budget, binaries, dropped, reason = [], [], max_lines, 0, 0, ""
        for i, e in enumerate(entries):
            status = _STATUS.get(e.status, "modified")
            ch = FileChange(path=e.dst, old_path=None if status == "added" else e.src, status=status,
                            similarity=e.score if e.status in "RC" else None,
                            old_mode=None if e.old_mode == "000000" else e.old_mode,
                            new_mode=None if e.new_mode == "000000" else e.new_mode)
            found = sections.get((e.src, e.dst), [])   # a type change comes as a deletion plus an addition
            ch.binary = any(s.binary for s in found)
            hunks = [h for s in found for h in s.hunks]
            size = sum(h.old_count + h.new_count for h in hunks)
            if ch.binary:
                binaries += 1
            if i >= max_files or size > budget:
                reason = reason or (f"max_files={max_files}" if i >= max_files else f"max_lines={max_lines}")
                budget = 0   # everything after the cut is listed without lines too
                dropped += 1
            else:
                budget -= size
                ch.hunks = sorted(hunks, key=lambda h: (h.new_start, h.old_start))
                ch.added = sorted({n for h in hunks for n in range(h.new_start, h.new_start + h.new_count)})
                ch.removed = sorted({n for h in hunks for n in range(h.old_start, h.old_start + h.old_count)})
            files.append(ch)
        if binaries:
            notes.append(f"{binaries} binary file{'s' if binaries != 1 else ''} (no line information)")
        if reason:
            notes.append(f"diff truncated at {reason}: {dropped} of {len(entries)} files listed without lines")
        return Diff(repo=str(self.path), base=self.base, base_ref=self.base_ref, head=self.head, files=files,
                    truncated=bool(reason), notes=notes)

    def _patch(self, revs: list[str]) -> list[_Section]:
        """Stream the ``-U0`` patch (a huge diff is never held in memory as a whole)."""
        cmd = _git_cmd(["diff", "-p", "-U0", *_DIFF_OPTS, *revs, "--"])
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, cwd=self.path, env=self._env, stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL)
            with proc.stdout:
                sections = _parse_patch(proc.stdout)
            if proc.wait() != 0:
                err.seek(0)
                raise DiffError(f"git diff failed in {self.path}: {err.read().decode('utf-8', 'replace').strip()}")
        return sections


def _msg(r: subprocess.CompletedProcess) -> str:
    text = (r.stderr or b"").decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else f"exit {r.returncode}"


def _decode_text(data: bytes | None) -> str | None:
    if data is None or b"\0" in data[:8000]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def diff(repo_path: str | Path, base: str, head: str, **limits) -> Diff:
    """``GitRepo(repo_path, base, head).diff(**limits)``."""
    with GitRepo(repo_path, base, head) as repo:
        return repo.diff(**limits)
