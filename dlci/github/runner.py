"""The Actions runner side: inputs, the event payload, outputs, the job summary, and workflow-command safety.

Inputs come as ``INPUT_<NAME>`` (GitHub upper-cases the name and keeps dashes). Everything the tested code prints is
untrusted: while it runs, workflow commands are switched off with ``::stop-commands::<random token>`` so a line like
``::set-output`` or ``::add-mask`` in a framework's log cannot act on the workflow.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

SUMMARY_LIMIT = 1024 * 1024  # GitHub's job-summary limit per step
_SHA = re.compile(r"^[0-9a-f]{40}\Z")  # \Z: `$` would accept a trailing newline


class EventError(Exception):
    """A malformed or unsupported event payload or input: reported with ::error::, exit 2."""


def get_input(name: str, default: str = "") -> str:
    value = os.environ.get(f"INPUT_{name.upper()}", "")
    return value.strip() if value.strip() else default


def get_bool(name: str, default: bool) -> bool:
    value = get_input(name, "true" if default else "false").lower()
    if value not in ("true", "false"):
        raise EventError(f"input {name} must be true or false, got {value!r}")
    return value == "true"


def get_float(name: str, default: str) -> float:
    value = get_input(name, default)
    try:
        number = float(value)
    except ValueError:
        raise EventError(f"input {name} must be a number, got {value!r}") from None
    if number <= 0:
        raise EventError(f"input {name} must be positive, got {value!r}")
    return number


@dataclass
class PullRequest:
    repo: str            # owner/name of the base repository (where the comment goes)
    number: int
    base_sha: str
    head_sha: str
    fork: bool


def read_event() -> tuple[str, dict]:
    name = os.environ.get("GITHUB_EVENT_NAME", "")
    path = os.environ.get("GITHUB_EVENT_PATH", "")
    if not path:
        raise EventError("GITHUB_EVENT_PATH is not set: dlci's action runs inside a GitHub Actions job")
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise EventError(f"cannot read the event file {path}: {e}") from None
    except ValueError as e:
        raise EventError(f"the event file {path} is not valid JSON: {e}") from None
    except RecursionError:
        raise EventError(f"the event file {path} is nested too deeply to be an event") from None
    if not isinstance(payload, dict):
        raise EventError(f"the event file {path} does not hold a JSON object")
    return name, payload


def pull_request(name: str, payload: dict) -> PullRequest:
    """The PR of a pull_request event (the only event whose payload dlci trusts for base/head)."""
    if name not in ("pull_request", "pull_request_target", "merge_group"):
        raise EventError(f"event {name or '(none)'} carries no pull request; run dlci on pull_request, or give "
                         "base and head inputs")
    pr = payload.get("pull_request")
    try:
        number = int(pr["number"])
        base, head = str(pr["base"]["sha"]), str(pr["head"]["sha"])
        repo = str(payload["repository"]["full_name"])
        head_repo = (pr["head"].get("repo") or {}).get("full_name")
    except (TypeError, KeyError, ValueError):
        raise EventError("the pull_request event lacks pull_request.number/base.sha/head.sha or "
                         "repository.full_name") from None
    for label, sha in (("base", base), ("head", head)):
        if not _SHA.match(sha):
            raise EventError(f"pull_request.{label}.sha is not a commit sha: {sha!r}")
    return PullRequest(repo=repo, number=number, base_sha=base, head_sha=head, fork=head_repo not in (None, repo))


def validate_pr_file(data: object) -> tuple[int, str]:
    """The PR number and head sha a fork's run left in its artifact (untrusted: checked strictly)."""
    if not isinstance(data, dict):
        raise EventError("pr.json in the results artifact is not an object")
    number, head = data.get("number"), data.get("head_sha")
    if not isinstance(number, int) or number <= 0 or not isinstance(head, str) or not _SHA.match(head):
        raise EventError("pr.json in the results artifact needs a positive integer number and a 40-hex head_sha")
    return number, head


def set_outputs(values: dict) -> None:
    """Step outputs through GITHUB_OUTPUT (github-action-utils writes multi-line values safely)."""
    if not os.environ.get("GITHUB_OUTPUT"):
        return
    from github_action_utils import set_output
    for key, value in values.items():
        set_output(key, value)


def write_summary(markdown: str) -> None:
    if not os.environ.get("GITHUB_STEP_SUMMARY"):
        return
    if len(markdown.encode("utf-8")) > SUMMARY_LIMIT - 1024:
        cut = markdown.encode("utf-8")[:SUMMARY_LIMIT - 2048].decode("utf-8", errors="ignore")
        markdown = cut + "\n\n_(cut at GitHub's 1 MiB job-summary limit; the full report is in the artifact)_\n"
    from github_action_utils import append_job_summary
    append_job_summary(markdown)


def error(message: str) -> None:
    import github_action_utils as gau
    gau.error(message)


def warning(message: str) -> None:
    import github_action_utils as gau
    gau.warning(message)


def start_group(title: str) -> None:
    import github_action_utils as gau
    gau.start_group(title)


def end_group() -> None:
    import github_action_utils as gau
    gau.end_group()


def group(title: str):
    import github_action_utils as gau
    return gau.group(title)


def log_line(text: str) -> str:
    """``text`` as one line of the log: control characters (a newline starting a workflow command) escaped."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029]", lambda m: f"\\x{ord(m.group()):02x}", text)


def commands_off():
    """While untrusted output is printed, the runner ignores workflow commands (a fresh random token each time)."""
    import secrets

    import github_action_utils as gau
    return gau.stop_commands(secrets.token_hex(16))
