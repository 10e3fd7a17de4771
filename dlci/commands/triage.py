"""`dlci triage`: the findings of a finished run with their signatures, and known_issues entries to paste."""
from __future__ import annotations

import json

from dlci.commands.common import known_from
from dlci.errors import ExitCode

NAME = "triage"
HELP = "findings of a run with their signatures, and known_issues entries to paste"
STATES = {"known": None, "new": "new in PR", "changed": "changed by the PR, failing on base too",
          "on_base": "already on base", "unattributed": "-"}


def add_arguments(parser) -> None:
    parser.add_argument("dir", nargs="?", default="dlci-out", help="output directory of a dlci test/scan run")
    parser.add_argument("--known", help="a .dlci.yml whose known_issues are applied first")
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    import yaml
    from dlci.findings import attribution
    from dlci.findings.known import suggestion
    from dlci.report import intake
    report = intake.read_report(args.dir)  # often a downloaded artifact: validated before it is read
    report.mark_known(known_from(args.known))
    if args.json:
        print(json.dumps([{k: f.to_dict().get(k) for k in ("id", "signature", "operator", "target", "symptom",
                                                           "oracle", "new_in_pr", "known", "repro")}
                          for f in report.findings], indent=2))
        return ExitCode.CLEAN
    for f in report.findings:
        state = attribution(f)
        label = ("known: " + (f.known.get("link") or f.known.get("note"))) if state == "known" else STATES[state]
        print(f"{f.id}  {f.target}  {f.operator}  {f.symptom}  [{label}]\n    signature: {f.signature}\n"
              f"    reproducer: {f.repro or '-'}")
    fresh = [suggestion(f) for f in report.findings if not f.known]
    if fresh:
        print("\n# known_issues entries for .dlci.yml (fill in the link; widen a pattern with * where the same "
              "bug shows on more operators or targets):")
        print(yaml.safe_dump({"known_issues": fresh}, sort_keys=False, width=120).rstrip())
    return ExitCode.CLEAN
