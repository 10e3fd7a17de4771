"""`dlci ops`: the operators and converters a diff touches, with the file:line that selected each (JSON)."""
from __future__ import annotations

import json

from dlci.commands.common import repository, split
from dlci.errors import ExitCode

NAME = "ops"
HELP = "operators and converters a diff touches (JSON, with the file:line of each)"


def add_arguments(parser) -> None:
    parser.add_argument("--repo", default=None, help="git repository (default: the one the command is run in)")
    parser.add_argument("--base", default="HEAD~1", help="base revision; the merge base with --head is used")
    parser.add_argument("--head", default="HEAD", help="head revision")
    parser.add_argument("--profiles", help="comma-separated profiles (default: every profile that recognises the repo)")


def run(args) -> int:
    from dlci import profiles
    from dlci.diff import GitRepo
    analysis = profiles.analyse(GitRepo(repository(args.repo), args.base, args.head),
                                only=split(args.profiles) if args.profiles else None)
    print(json.dumps(analysis.to_dict(canonical=True), indent=2))
    return ExitCode.CLEAN
