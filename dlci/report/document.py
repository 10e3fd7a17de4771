"""findings.json: the document every command writes and every reader reads, through :class:`Report` only.

The contract (``version`` 1): ``{"version": 1, "findings": [...], "stats": {...}}`` plus ``pr`` in PR mode; each
finding has at least ``id``, ``oracle``, ``operator``, ``target``, ``symptom``, ``signature``, ``new_in_pr``,
``repro`` (see :class:`dlci.findings.Finding`); ``stats`` at least ``tests_run``, ``tests_valid``, ``seconds``,
``per_target``. Unknown keys are kept, so a newer writer's fields survive an older reader's rewrite.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dlci.errors import UsageError
from dlci.findings import Finding, counted

FORMAT_VERSION = 1
FILE = "findings.json"


class ReportError(UsageError):
    """A file that is not a dlci findings.json."""


@dataclass
class Report:
    findings: list[Finding]
    stats: dict
    pr: dict | None = None
    version: int = FORMAT_VERSION
    extra: dict = field(default_factory=dict)  # other top-level keys (kept as they are)

    # -- the JSON contract --------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        doc = {"version": self.version, "findings": [f.to_dict() for f in self.findings], "stats": self.stats}
        if self.pr is not None:
            doc["pr"] = self.pr
        doc.update(self.extra)
        return doc

    @classmethod
    def from_dict(cls, doc: dict, origin: str = FILE) -> "Report":
        if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list) \
                or not isinstance(doc.get("stats"), dict):
            raise ReportError(f"{origin} is not a dlci findings.json (no findings list and stats)")
        if doc.get("version") != FORMAT_VERSION:
            raise ReportError(f"{origin}: findings.json version {doc.get('version')!r}, this dlci reads "
                              f"{FORMAT_VERSION}")
        try:
            findings = [Finding.from_dict(f) for f in doc["findings"]]
        except (TypeError, KeyError) as e:
            raise ReportError(f"{origin}: a finding lacks a required field ({e})") from None
        rest = {k: v for k, v in doc.items() if k not in ("version", "findings", "stats", "pr")}
        return cls(findings=findings, stats=doc["stats"], pr=doc.get("pr"), version=doc["version"], extra=rest)

    @classmethod
    def read(cls, path: str | os.PathLike) -> "Report":
        """A findings.json, or the output directory holding one."""
        path = Path(path)
        if path.is_dir():
            path = path / FILE
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise ReportError(f"cannot read {path}: {e.strerror or e}") from None
        except ValueError as e:
            raise ReportError(f"{path} is not JSON: {e}") from None
        return cls.from_dict(doc, str(path))

    def files(self, markdown: Callable[[dict], str] | None = None) -> dict[str, bytes]:
        """findings.json and report.md as bytes, redacted (no token ever lands in a file)."""
        from dlci.report import render_markdown
        from dlci import redact
        doc = redact.data(json.loads(json.dumps(self.to_dict(), default=str)))
        return {FILE: (json.dumps(doc, indent=2) + "\n").encode("utf-8", "backslashreplace"),
                "report.md": redact.text((markdown or render_markdown)(doc)).encode("utf-8", "backslashreplace")}

    def write(self, out: str | os.PathLike, markdown: Callable[[dict], str] | None = None) -> None:
        """findings.json (atomically: readers never see half a file) and report.md into ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        files = self.files(markdown)
        tmp = out / (FILE + ".tmp")
        for path in (tmp, out / "report.md"):  # replaced, never written through a link left there
            path.unlink(missing_ok=True)
        tmp.write_bytes(files[FILE])
        os.replace(tmp, out / FILE)
        (out / "report.md").write_bytes(files["report.md"])

    # -- policy -------------------------------------------------------------------------------------------------
    def counted(self, policy: str) -> int:
        """How many findings the --fail-on policy counts (dlci.findings.counted)."""
        return counted(self.findings, policy)

    def mark_known(self, known: list) -> int:
        """Mark the findings that match a known issue (.dlci.yml known_issues); returns how many matched."""
        from dlci.findings.known import match
        hits = 0
        for f in self.findings:
            issue = match(f, known)
            if issue is not None:
                f.known = {"link": issue.link, "note": issue.note}
                hits += 1
        return hits

    @property
    def interrupted(self) -> bool:
        return bool(self.stats.get("interrupted"))
