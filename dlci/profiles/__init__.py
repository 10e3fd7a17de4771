"""Profiles: which operators and converters a change touches, read from the repository's own tables.

``PROFILES`` maps names to Profile instances (one small module each, registered with :func:`register`).
:func:`analyse` runs every profile that recognises the repository; the ``generic`` profile (changed identifiers
matched against the known operator vocabulary) runs only when no specific profile recognised it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from dlci.diff import Diff, GitRepo
from dlci.profiles.base import Profile, ProfileResult, Touch

PROFILES: dict[str, Profile] = {}
FALLBACK = "generic"


def register(cls: type[Profile]) -> type[Profile]:
    """Class decorator: instantiate the profile and register it by name."""
    if not cls.name or cls.name in PROFILES and type(PROFILES[cls.name]) is not cls:
        raise ValueError(f"profile name {cls.name!r} missing or taken")
    PROFILES[cls.name] = cls()
    return cls


@dataclass
class Analysis:
    """The diff, what each profile made of it, and the operators selected (deduplicated, with reasons)."""
    diff: Diff
    profiles: list[str] = field(default_factory=list)
    touches: list[Touch] = field(default_factory=list)
    unmapped: list[dict] = field(default_factory=list)
    graph_level: list[dict] = field(default_factory=list)  # changes to code every graph runs (ProfileResult)
    seconds: float = 0.0

    def to_dict(self, canonical: bool = False) -> dict:
        """The analysis as JSON (ops.json); ``canonical``: each touch also names its canonical operator ids."""
        d = self.diff
        doc = {
            "repo": d.repo, "base": d.base, "base_ref": d.base_ref, "head": d.head,
            "profiles": self.profiles,
            "files_changed": len(d.files),
            "lines_changed": sum(len(f.added) + len(f.removed) for f in d.files),
            "truncated": d.truncated, "notes": list(d.notes),
            "operators": sorted({t.operator for t in self.touches}),
            "targets": sorted({x for t in self.touches for x in t.targets}),
            "touches": [t.to_dict() for t in self.touches],
            "unmapped": self.unmapped,
            "graph_level": self.graph_level,
            "seconds": round(self.seconds, 3),
        }
        if canonical:
            from dlci import operators
            for touch in doc["touches"]:
                touch["canonical"] = sorted(operators.canonical(touch["operator"], touch["namespace"]))
            doc["canonical_operators"] = sorted({c for t in doc["touches"] for c in t["canonical"]})
        return doc


def analyse(repo: GitRepo, only: list[str] | None = None) -> Analysis:
    """Diff ``repo`` (base = merge base) and map it to operators with every profile that recognises the repo."""
    registry()
    t0 = time.perf_counter()
    diff = repo.diff()
    result = Analysis(diff=diff)
    names = list(only) if only else [n for n in PROFILES if n != FALLBACK]
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise KeyError(f"unknown profile(s) {', '.join(unknown)}; known: {', '.join(sorted(PROFILES))}")
    # recognised at base or at head: a pull request that deletes a profile's marker files must not make its own
    # changes untested ("nothing to test"), nor need a base that already had them to add a frontend
    base_view = _AtRevision(repo, "base")
    chosen = [n for n in names if PROFILES[n].detect(repo) or PROFILES[n].detect(base_view)] if not only else names
    if not chosen and FALLBACK in PROFILES:
        chosen = [FALLBACK]
    seen = set()
    for name in chosen:
        part: ProfileResult = PROFILES[name].analyse(repo, diff)
        result.profiles.append(name)
        for t in part.touches:
            key = (t.operator, t.namespace, t.converter, t.file, t.line, t.targets)
            if key not in seen:
                seen.add(key)
                result.touches.append(t if t.profile else Touch(**{**t.to_dict(), "profile": name}))
        result.unmapped += [{**u, "profile": name} for u in part.unmapped]
        result.graph_level += [{**g, "profile": name} for g in part.graph_level + graph_level_changes(PROFILES[name], diff)]
    result.seconds = time.perf_counter() - t0
    return result


def mapped_by(repo: GitRepo, path: str, names: list[str]) -> list[Touch]:
    """The operators the base revision's ``path`` maps, by the profiles ``names``: what deleting the file would
    select (a file that no longer parses or imports at head breaks every one of them)."""
    from dlci.diff import FileChange, Hunk
    registry()
    text = repo.text(path, "base")
    if text is None:
        return []
    n = len(text.splitlines())
    change = FileChange(path=path, old_path=path, status="deleted", removed=list(range(1, n + 1)),
                        hunks=[Hunk(1, n, 0, 0)])
    diff = Diff(repo=repo.last_diff.repo if getattr(repo, "last_diff", None) else str(repo.path), base=repo.base,
                base_ref=repo.base, head=repo.head, files=[change])
    view = _WithoutFile(repo, path)
    out, seen = [], set()
    for name in names:
        for t in PROFILES[name].analyse(view, diff).touches:
            key = (t.operator, t.namespace, t.targets)
            if key not in seen:
                seen.add(key)
                out.append(t if t.profile else Touch(**{**t.to_dict(), "profile": name}))
    return out


class _AtRevision:
    """The repository read at another revision: what a profile's ``detect`` asks of "head" is answered at ``rev``."""

    def __init__(self, repo: GitRepo, rev: str):
        self._repo, self._rev = repo, rev

    def _at(self, rev: str) -> str:
        return self._rev if rev == "head" else rev

    def exists(self, relpath: str, rev: str = "head") -> bool:
        return self._repo.exists(relpath, self._at(rev))

    def glob(self, pattern: str, rev: str = "head") -> list[str]:
        return self._repo.glob(pattern, self._at(rev))

    def files(self, rev: str = "head") -> list[str]:
        return self._repo.files(self._at(rev))

    def text(self, relpath: str, rev: str = "head") -> str | None:
        return self._repo.text(relpath, self._at(rev))

    def blob(self, relpath: str, rev: str = "head") -> bytes | None:
        return self._repo.blob(relpath, self._at(rev))

    def __getattr__(self, name):
        return getattr(self._repo, name)


def graph_level_changes(profile: Profile, diff: Diff) -> list[dict]:
    """The changed files under a profile's graph-level code (``Profile.graph_code``), one entry each with the first
    changed line and the targets that reach it."""
    import fnmatch
    from dlci.targets import reaching
    out = []
    for ch in diff.files:
        for pattern, component in profile.graph_code:
            if fnmatch.fnmatch(ch.path, pattern) or (ch.old_path and fnmatch.fnmatch(ch.old_path, pattern)):
                lines = sorted(ch.touched_head_lines()) or sorted(ch.removed)
                out.append({"file": ch.path, "line": lines[0] if lines else 0, "component": component,
                            "why": f"graph-level code ({pattern})", "targets": list(reaching(component))})
                break
    return out


def registry() -> dict[str, Profile]:
    """Import every profile module (registration happens on import)."""
    import importlib
    import pkgutil
    import dlci.profiles as pkg
    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.name.startswith("_") and mod.name != "base":
            importlib.import_module(f"dlci.profiles.{mod.name}")
    return PROFILES


class _WithoutFile(_AtRevision):
    """The repository with one file gone at head (what :func:`mapped_by` asks the profiles about)."""

    def __init__(self, repo: GitRepo, path: str):
        super().__init__(repo, "head")
        self._gone = path

    def exists(self, relpath: str, rev: str = "head") -> bool:
        return not (rev == "head" and relpath == self._gone) and self._repo.exists(relpath, rev)

    def text(self, relpath: str, rev: str = "head") -> str | None:
        return None if rev == "head" and relpath == self._gone else self._repo.text(relpath, rev)

    def blob(self, relpath: str, rev: str = "head") -> bytes | None:
        return None if rev == "head" and relpath == self._gone else self._repo.blob(relpath, rev)

    def files(self, rev: str = "head") -> list[str]:
        return [f for f in self._repo.files(rev) if not (rev == "head" and f == self._gone)]

    def glob(self, pattern: str, rev: str = "head") -> list[str]:
        return [f for f in self._repo.glob(pattern, rev) if not (rev == "head" and f == self._gone)]
