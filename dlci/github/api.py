"""Talking to GitHub (PyGithub): the sticky comment, the check run with annotations, and what to do when refused.

- Retries: 429 / 5xx / secondary-rate-limit 403 are retried by PyGithub's GithubRetry with waits capped at
  ``max_wait``; creates (POST) are never retried blindly: a create that failed is followed by a fresh look for the
  comment (it may have been written before the error), so a retry never leaves two comments.
- Writes are spaced (``seconds_between_writes``) as GitHub asks of integrations.
- A read-only token (a fork's ``pull_request`` run) gets 403 "Resource not accessible by integration": that is not an
  error of the run; the caller falls back to the job summary and the artifact for a ``workflow_run`` poster.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from dlci.github.comment import MARKER
from dlci.report.escape import plain

DEFAULT_BOT = "github-actions[bot]"
ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit per check-run create/update
SUMMARY_LIMIT = 65_535       # check-run output.summary / output.text
ANNOTATIONS_TOTAL = 200      # per check run: more would bury the ones that matter (the rest are counted, not sent)
ANNOTATION_TITLE_LIMIT = 255
ANNOTATION_MESSAGE_LIMIT = 4_000  # GitHub allows 64 KiB; a finding's message is in the report in full


class ReadOnlyToken(Exception):
    """The token may not write here (fork PR, missing permissions)."""


def _is_permission_error(e) -> bool:
    data = getattr(e, "data", None) or {}
    message = str(data.get("message", "")) if isinstance(data, dict) else str(data)
    return getattr(e, "status", None) in (401, 403, 404) and "rate limit" not in message.lower()


def _is_transient(e) -> bool:
    status = getattr(e, "status", None)
    data = getattr(e, "data", None) or {}
    message = str(data.get("message", "")) if isinstance(data, dict) else str(data)
    return status in (429, 500, 502, 503, 504) or (status == 403 and "rate limit" in message.lower())


def client(token: str, base_url: str, *, max_wait: float = 60.0, write_spacing: float = 1.0):
    """A PyGithub client with capped retries (POST excluded: creates are retried by hand, see module doc)."""
    from github import Auth, Github
    from github.GithubRetry import GithubRetry
    retry = GithubRetry(total=5, backoff_factor=min(1.0, max_wait / 8), secondary_rate_wait=max_wait,
                        max_rate_limit_wait=max_wait, status_forcelist=[429, *range(500, 600)],
                        allowed_methods={"GET", "HEAD", "PATCH", "PUT", "DELETE"}, backoff_max=max_wait,
                        respect_retry_after_header=True)
    return Github(base_url=base_url.rstrip("/"), auth=Auth.Token(token), retry=retry, timeout=30,
                  seconds_between_requests=0.0, seconds_between_writes=write_spacing)


@dataclass
class Poster:
    gh: object
    repo_name: str
    bot_login: str = DEFAULT_BOT
    log: object = print
    create_tries: int = 3
    retry_wait: float = 2.0

    def _repo(self):
        return self.gh.get_repo(self.repo_name, lazy=True)

    def _identity(self) -> str:
        """Who we are: a PAT can ask; the job token (an app installation) cannot and is github-actions[bot]."""
        from github import GithubException
        try:
            return self.gh.get_user().login
        except GithubException:
            return self.bot_login

    def find_comment(self, number: int, login: str):
        """Our comment on the PR: it carries the marker and was written by us (anyone can paste a marker)."""
        issue = self._repo().get_issue(number)
        for comment in issue.get_comments():
            if MARKER in (comment.body or "") and comment.user is not None and comment.user.login == login:
                return comment
        return None

    def upsert_comment(self, number: int, body: str) -> tuple[int | None, str]:
        """Create or update the one dlci comment; returns (comment id, "created" | "updated" | "unchanged")."""
        from github import GithubException
        login = self._identity()
        try:
            existing = self.find_comment(number, login)
            if existing is not None:
                if existing.body == body:
                    return existing.id, "unchanged"
                existing.edit(body)
                return existing.id, "updated"
            issue = self._repo().get_issue(number)
        except GithubException as e:
            if _is_permission_error(e):
                raise ReadOnlyToken(str(e)) from None
            raise
        for attempt in range(1, self.create_tries + 1):
            try:
                return issue.create_comment(body).id, "created"
            except GithubException as e:
                if _is_permission_error(e):
                    raise ReadOnlyToken(str(e)) from None
                if not _is_transient(e) or attempt == self.create_tries:
                    raise
                self.log(f"creating the comment failed ({e.status}); checking whether it was written anyway")
                time.sleep(self.retry_wait * attempt)
                written = self.find_comment(number, login)
                if written is not None:  # the write went through before the error: update, never duplicate
                    if written.body != body:
                        written.edit(body)
                    return written.id, "created"
        raise AssertionError("unreachable")

    def check_run(self, head_sha: str, name: str, conclusion: str, title: str, summary: str,
                  annotations: list[dict], text: str = "") -> int:
        """A completed check run; annotations sent 50 per request (the first with the create, the rest appended)."""
        from github import GithubException
        output = {"title": title[:255], "summary": summary[:SUMMARY_LIMIT]}
        if text:
            output["text"] = text[:SUMMARY_LIMIT]
        batches = [annotations[i:i + ANNOTATIONS_PER_REQUEST]
                   for i in range(0, len(annotations), ANNOTATIONS_PER_REQUEST)] or [[]]
        try:
            run = self._repo().create_check_run(name=name, head_sha=head_sha, status="completed",
                                                conclusion=conclusion,
                                                output={**output, "annotations": batches[0]})
            for batch in batches[1:]:
                run.edit(output={**output, "annotations": batch})
        except GithubException as e:
            if _is_permission_error(e):
                raise ReadOnlyToken(str(e)) from None
            raise
        return run.id


def _annotation_path(path) -> str | None:
    """A path GitHub can place an annotation on: relative to the repository, no ``..``, no control character, no
    backslash. Anything else (a hostile findings document) is not annotated."""
    if not isinstance(path, str) or not path or len(path) > 1000 or path.startswith("/") \
            or any(ord(c) < 32 or ord(c) == 127 or c == "\\" for c in path):
        return None
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)


def _annotation(path, line, level: str, title: str, message: str) -> dict | None:
    path = _annotation_path(path)
    try:
        line = int(line)
    except (TypeError, ValueError):
        return None
    if path is None or line < 1:
        return None
    return {"path": path, "start_line": line, "end_line": line, "annotation_level": level,
            "title": plain(title, ANNOTATION_TITLE_LIMIT),
            "message": plain(message, ANNOTATION_MESSAGE_LIMIT, multiline=True)}


def annotations(doc: dict, limit: int = ANNOTATIONS_TOTAL) -> tuple[list[dict], int]:
    """Check-run annotations at the changed converter lines: failure for a new finding that the line selected,
    notice for one already on base and for a changed line no test reached. Returns (at most ``limit`` annotations,
    how many more there were): the caller says that some were left out. Titles and messages are the PR's text:
    plain, no mention; an annotation whose path is not a plain relative path is dropped."""
    from dlci import operators
    pr = doc.get("pr") or {}
    out, seen = [], set()
    for f in doc["findings"]:
        mine = operators.instance_ops(f["operator"])
        targets = {f["target"], *(f.get("also_in") or ())}
        for t in pr.get("touched") or []:
            if not operators.canonical(t["operator"], t["namespace"]) & mine:
                continue
            if t.get("targets") and not targets & set(t["targets"]):
                continue
            key = (t["file"], t["line"], f["id"])
            if key in seen:
                continue
            seen.add(key)
            new = f.get("new_in_pr")
            note = _annotation(t["file"], t["line"],
                               # only a new finding is the changed line's fault; an old bug there is worth a notice
                               "failure" if new else "notice",
                               f"{f['id']}: {f['operator']} {f['symptom']} through {f['target']}",
                               ("New in this PR. " if new else
                                "Changed by this PR (fails on the base revision too, otherwise). "
                                if (f.get("base") or {}).get("changed") else
                                "Already on the base revision. " if new is False else "")
                               + f"{f['oracle']} at {f.get('stage')}: {f.get('message', '')}")
            if note is not None:
                out.append(note)
                break  # one line per finding: the first converter line that selected it
    for gap in (pr.get("coverage") or {}).get("unreached") or []:
        note = _annotation(gap["file"], gap["line"], "notice", "Changed line not reached by any dlci test",
                           f"No operator instance ran this changed line of {gap['region'] or 'the module'}; "
                           "consider a test that does.")
        if note is not None:
            out.append(note)
    return out[:limit], max(0, len(out) - limit)
