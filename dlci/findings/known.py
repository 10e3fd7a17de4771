"""Known issues: `.dlci.yml` entries that move matching findings into a "known" section instead of reporting them as
bugs to fix (they are still listed, with their link, and never fail the job).

```yaml
known_issues:
  - signature: "tvm.from_fx|compare|nn::ELU|*"   # fnmatch pattern over the finding's signature, and/or
    target: "tvm.from_*"                         # patterns over single fields: target, operator, symptom, oracle
    operator: "nn::ELU"
    link: https://github.com/apache/tvm/issues/NNNN
    note: the FX importer ignores nn.ELU(alpha)
```
An entry matches when every pattern it gives matches; it must give at least one pattern and a link or a note.
`dlci triage` lists findings with their signatures and prints entries ready to paste.
"""
from __future__ import annotations

import fnmatch
import glob
from dataclasses import dataclass

FIELDS = ("signature", "target", "operator", "symptom", "oracle")


class KnownIssueError(ValueError):
    """A malformed known_issues entry (reported as a configuration error)."""


@dataclass(frozen=True)
class KnownIssue:
    patterns: tuple[tuple[str, str], ...]   # (field, fnmatch pattern)
    link: str = ""
    note: str = ""

    def matches(self, finding) -> bool:
        """Every pattern matches its field of the finding (a Finding or its dict)."""
        get = finding.get if isinstance(finding, dict) else lambda k, d="": getattr(finding, k, d)
        return all(fnmatch.fnmatchcase(str(get(field, "") or ""), pattern) for field, pattern in self.patterns)

    def to_dict(self) -> dict:
        return {**dict(self.patterns), "link": self.link, "note": self.note}


def parse(entries: list, origin: str = ".dlci.yml") -> list[KnownIssue]:
    out = []
    for n, entry in enumerate(entries or [], start=1):
        where = f"{origin}: known_issues entry {n}"
        if not isinstance(entry, dict):
            raise KnownIssueError(f"{where} must be a mapping")
        unknown = sorted(set(entry) - set(FIELDS) - {"link", "note"})
        if unknown:
            raise KnownIssueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                                  f"{', '.join(FIELDS + ('link', 'note'))}")
        patterns = tuple((f, str(entry[f])) for f in FIELDS if entry.get(f) not in (None, ""))
        if not patterns:
            raise KnownIssueError(f"{where} needs at least one of {', '.join(FIELDS)}")
        if not entry.get("link") and not entry.get("note"):
            raise KnownIssueError(f"{where} needs a link or a note (say where the issue is tracked)")
        if any(not isinstance(entry.get(k, ""), str) for k in ("link", "note")):
            raise KnownIssueError(f"{where}: link and note must be strings")
        out.append(KnownIssue(patterns, entry.get("link", ""), entry.get("note", "")))
    return out


def match(finding, known: list[KnownIssue]) -> KnownIssue | None:
    """The first known issue the finding matches."""
    return next((issue for issue in known if issue.matches(finding)), None)


def suggestion(finding) -> dict:
    """A known_issues entry that matches this finding (and the same failure on other instances)."""
    # glob.escape: a signature holding [ ] * ? must match itself literally
    return {"signature": glob.escape(finding.signature), "link": "https://github.com/OWNER/REPO/issues/NNNN",
            "note": f"{finding.target}: {finding.symptom} on {finding.operator}"}
