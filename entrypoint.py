#!/usr/bin/env python3
"""GitHub Action entry point: reads INPUT_*, runs `dlci test`, writes GITHUB_OUTPUT and the job summary.

Minimal for now (explicit operators); PR scanning, the sticky comment and check annotations build on this.
"""
import json
import os
import sys
from pathlib import Path

from dlci.cli import EXIT_USAGE, main


def _input(name: str, default: str) -> str:
    return os.environ.get(f"INPUT_{name.upper()}", "").strip() or default


def run() -> int:
    out = _input("out", "dlci-out")
    args = ["test", "--ops", _input("ops", "all"), "--targets", _input("targets", "all"),
            "--budget", _input("budget", "600"), "--out", out, "--fail-on", _input("fail-on", "any")]
    try:
        float(args[6])
    except ValueError:
        print(f"::error::input budget must be a number of seconds, got {args[6]!r}")
        return EXIT_USAGE
    code = main(args)
    findings = Path(out) / "findings.json"
    if findings.exists():
        doc = json.loads(findings.read_text())
        from dlci.report import verdict
        if os.environ.get("GITHUB_OUTPUT"):
            with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as fh:
                fh.write(f"verdict={verdict(doc)}\nfindings={len(doc['findings'])}\n")
        if os.environ.get("GITHUB_STEP_SUMMARY"):
            report = (Path(out) / "report.md").read_text(encoding="utf-8")
            with open(os.environ["GITHUB_STEP_SUMMARY"], "a", encoding="utf-8") as fh:
                fh.write(report[: 1024 * 1024 - 1024])
    return code


if __name__ == "__main__":
    sys.exit(run())
