"""The action's output folder (input ``out``): made fresh before anything is written, written only by this process.

The folder usually lies in the workspace, where a pull request can commit anything: a link named ``dlci-out`` (or
``dlci-out/repro``, or ``dlci-out/repro/F009.py``) pointing at the runner's files. So:

- every component of the path below the workspace must be a real folder (a link there is refused: exit 2);
- whatever is at the folder itself is removed, without following links, and a new empty folder made, at the start
  of every mode, before any early return (an upload step after a failed run finds an empty folder, never the PR's);
- every file is written through the folder's descriptor, by name, refusing links (``O_NOFOLLOW``) and replacing
  what is there, never reading it.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from dlci.github.runner import EventError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _links_on_the_way(path: Path, workspace: Path) -> str | None:
    """The first component of ``path`` that is a link (below ``workspace`` when the path lies in it)."""
    path = Path(os.path.abspath(path))
    workspace = Path(os.path.abspath(workspace))
    start = workspace if path == workspace or workspace in path.parents else Path(path.anchor)
    current = start
    for part in path.relative_to(start).parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode) and (current != path):
            return str(current)
    return None


class OutputFolder:
    """A fresh output folder and the only way the action writes into it."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def fresh(cls, path: str | os.PathLike, workspace: str | os.PathLike | None = None) -> "OutputFolder":
        path = Path(path)
        link = _links_on_the_way(path, Path(workspace or os.getcwd()))
        if link is not None:
            raise EventError(f"the output folder {path} lies behind a link ({link}): refusing to write there "
                             "(a pull request can commit links; give `out` a path of real folders)")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)  # fd-based on Linux: links inside are removed, never followed
            else:
                os.unlink(path)  # a link or a file where the folder goes
        path.mkdir(parents=True)
        return cls(path)

    def _folder_fd(self, parts: list[str]) -> int:
        fd = os.open(self.path, _DIR_FLAGS)
        try:
            for part in parts:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def write(self, relative: str, data: bytes) -> Path:
        """Write ``relative`` (plain names joined by ``/``) with ``data``, replacing whatever is there."""
        parts = [p for p in relative.split("/") if p]
        if not parts or any(p in (".", "..") for p in parts):
            raise ValueError(f"not a plain relative path: {relative!r}")
        fd = self._folder_fd(parts[:-1])
        try:
            try:
                os.unlink(parts[-1], dir_fd=fd)
            except FileNotFoundError:
                pass
            out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                          dir_fd=fd)
            with os.fdopen(out, "wb") as f:
                f.write(data)
        finally:
            os.close(fd)
        return self.path / relative

    def write_report(self, report, scripts: dict[str, bytes]) -> None:
        """findings.json, report.md and the reproducers the report names."""
        for rel, data in scripts.items():
            self.write(rel, data)
        for name, data in report.files().items():
            self.write(name, data)
