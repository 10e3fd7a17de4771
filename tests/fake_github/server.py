"""FakeGitHub: a stateful local GitHub REST API that checks every request and response against GitHub's OpenAPI."""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from .objects import (
    Builder,
    CheckRun,
    Identity,
    IssueComment,
    PullRequest,
    Repo,
    User,
    now,
)
from .spec import Operation, Spec

# Limits GitHub enforces beyond (or besides) what its OpenAPI description says.
MAX_COMMENT_BODY = 65536
MAX_CHECK_TEXT = 65535
MAX_ANNOTATIONS_PER_REQUEST = 50
ANNOTATION_LEVELS = ("notice", "warning", "failure")
MAX_PER_PAGE = 100
DEFAULT_PER_PAGE = 30
DEFAULT_API_VERSION = "2022-11-28"

SECONDARY_RATE_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {request_id}."
)
SECONDARY_RATE_LIMIT_DOCS = (
    "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api"
    "#about-secondary-rate-limits"
)
PRIMARY_RATE_LIMIT_DOCS = (
    "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-rate-limits"
)

DEFAULT_TOKENS: dict[str, Identity] = {
    # GITHUB_TOKEN / installation token of a same-repo PR: may write comments and check runs.
    "ghs_app": Identity(login="github-actions[bot]", kind="app", write=True),
    # GITHUB_TOKEN of a pull_request from a fork: read-only.
    "ghs_fork": Identity(login="github-actions[bot]", kind="app", write=False),
    # A personal access token: GET /user works; check runs need a GitHub App (403).
    "ghp_user": Identity(login="octocat", kind="user", write=True),
}

WRITE_METHODS = ("POST", "PATCH", "PUT", "DELETE")
_SECONDARY_RATE_LIMIT_BODY = object()  # Fault.body placeholder: GitHub's message with this request's id


# ------------------------------------------------------------------------------------------------ records
@dataclass
class Violation:
    """A request or response that real GitHub would not have accepted / sent."""

    kind: str  # unknown-operation | invalid-request | unknown-parameter | limit | invalid-response | ...
    method: str
    path: str
    message: str
    status: int | None = None

    def __str__(self) -> str:
        return f"[{self.kind}] {self.method} {self.path} -> {self.status}: {self.message}"


@dataclass
class RecordedRequest:
    method: str
    path: str  # as requested, without the query string
    query: dict[str, list[str]]
    headers: dict[str, str]  # minus Authorization
    body: Any  # parsed JSON, the raw text if it did not parse, None without a body
    time: float  # time.monotonic() on arrival: spacing between writes, retry back-off
    timestamp: float  # time.time() on arrival
    operation: str | None = None  # "POST /repos/{owner}/{repo}/check-runs"
    login: str | None = None  # identity of the token, if any
    status: int | None = None  # what the client got
    fault: str | None = None  # description of the injected fault that answered it
    response: Any = None  # the JSON the client got

    @property
    def is_write(self) -> bool:
        return self.method in WRITE_METHODS


@dataclass
class Fault:
    method: str  # "*" for any
    path: str | None  # concrete path, path template, or None for any
    status: int = 502
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # dict -> JSON; str -> sent as is (text/html); None -> default message for the status
    apply: bool = False  # perform the request, then answer with the fault (the client sees a failure)
    times: int = 1
    delay: float = 0.0  # seconds before answering
    disconnect: bool = False  # close the connection without answering

    def matches(self, method: str, path: str, op: Operation | None) -> bool:
        if self.method not in ("*", method):
            return False
        if self.path is None:
            return True
        return self.path == path or (op is not None and self.path == op.template)

    def describe(self) -> str:
        what = "disconnect" if self.disconnect else str(self.status)
        return f"{what}{' (applied)' if self.apply else ''}"


class _Reply(Exception):
    """Raised inside handlers to answer with an error."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None, violation: str | None = None):
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.violation = violation  # kind, when the client is at fault


# ------------------------------------------------------------------------------------------------- server
class FakeGitHub:
    """A local, stateful GitHub REST API for tests (see tests/fake_github/__init__.py)."""

    def __init__(
        self,
        tokens: dict[str, Identity] | None = None,
        *,
        link_style: str = "repositories",
        strict_shas: bool = True,
        spec: Spec | None = None,
    ):
        self.spec = spec or _shared_spec()
        self.tokens: dict[str, Identity] = dict(DEFAULT_TOKENS if tokens is None else tokens)
        assert link_style in ("repositories", "repos"), link_style
        self.link_style = link_style
        self.strict_shas = strict_shas
        self.lock = threading.RLock()
        self.users: dict[str, User] = {}
        self.repos: dict[str, Repo] = {}
        self.issues: dict[str, set[int]] = {}  # plain issues (not PRs) per repo
        self.pulls: dict[tuple[str, int], PullRequest] = {}
        self.comments: dict[int, IssueComment] = {}
        self.check_runs: dict[int, CheckRun] = {}
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self.faults: list[Fault] = []
        self._rate: dict[str, dict[str, int]] = {}  # login -> limit/remaining/reset/used
        self._ids = itertools.count(1_000_001)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""
        self.add_user("github", type="Organization", id=9919, name="GitHub")
        self.add_user("github-actions[bot]", type="Bot", id=41898282)
        for ident in self.tokens.values():
            self._ensure_user(ident.login)

    # -------------------------------------------------------------------------------------- lifecycle
    def start(self) -> FakeGitHub:
        if self._server is not None:
            return self
        fake = self

        class Handler(_Handler):
            pass

        Handler.fake = fake
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def builder(self) -> Builder:
        return Builder(self.url, self.users, self.repos)

    # ------------------------------------------------------------------------------------------ state
    def _new_id(self) -> int:
        return next(self._ids)

    def add_user(self, login: str, *, type: str = "User", id: int | None = None, name: str | None = None) -> User:
        with self.lock:
            user = User(login=login, id=id or self._new_id(), type=type, name=name)
            self.users[login] = user
            return user

    def _ensure_user(self, login: str) -> User:
        if login not in self.users:
            self.add_user(login, type="Bot" if login.endswith("[bot]") else "User")
        return self.users[login]

    def add_token(self, token: str, login: str, *, kind: str = "app", write: bool = True,
                  repos: Iterable[str] | None = None, rate_limit: int = 5000) -> Identity:
        with self.lock:
            ident = Identity(login=login, kind=kind, write=write,
                             repos=None if repos is None else frozenset(repos), rate_limit=rate_limit)
            self.tokens[token] = ident
            self._ensure_user(login)
            return ident

    def add_repo(self, full_name: str, *, default_branch: str = "main", private: bool = False,
                 fork_of: str | None = None, description: str | None = None) -> Repo:
        owner, name = full_name.split("/")
        with self.lock:
            self._ensure_user(owner)
            repo = Repo(owner=owner, name=name, id=self._new_id(), default_branch=default_branch,
                        private=private, fork_of=fork_of, description=description)
            self.repos[full_name] = repo
            self.issues.setdefault(full_name, set())
            return repo

    def add_commit(self, full_name: str, sha: str) -> None:
        with self.lock:
            self.repos[full_name].commits.add(sha)

    def add_issue(self, full_name: str, number: int) -> None:
        with self.lock:
            self.issues[full_name].add(number)

    def add_pull(self, full_name: str, number: int, *, head_sha: str | None = None, base_sha: str | None = None,
                 head_ref: str = "feature", base_ref: str | None = None, head_repo: str | None = None,
                 user: str | None = None, title: str = "Change things", body: str | None = None,
                 draft: bool = False) -> PullRequest:
        """A pull request into `full_name`; `head_repo` (e.g. "forker/r", added if unknown) makes it a fork PR."""
        with self.lock:
            repo = self.repos[full_name]
            head_repo = head_repo or full_name
            if head_repo not in self.repos:
                self.add_repo(head_repo, fork_of=full_name, default_branch=repo.default_branch)
            user = user or self.repos[head_repo].owner
            self._ensure_user(user)
            pr = PullRequest(
                repo=full_name, number=number, id=self._new_id(),
                head_sha=head_sha or secrets.token_hex(20), base_sha=base_sha or secrets.token_hex(20),
                head_ref=head_ref, base_ref=base_ref or repo.default_branch, head_repo=head_repo,
                user=user, title=title, body=body, draft=draft, merge_commit_sha=secrets.token_hex(20),
            )
            self.pulls[(full_name, number)] = pr
            repo.commits.update({pr.head_sha, pr.base_sha, pr.merge_commit_sha})
            self.repos[head_repo].commits.add(pr.head_sha)
            return pr

    def add_comment(self, full_name: str, issue_number: int, body: str, *, user: str = "octocat",
                    created_at: datetime | None = None) -> IssueComment:
        with self.lock:
            self._ensure_user(user)
            ts = created_at or now()
            c = IssueComment(repo=full_name, issue_number=issue_number, id=self._new_id(), body=body, user=user,
                             created_at=ts, updated_at=ts)
            self.comments[c.id] = c
            return c

    def comments_on(self, full_name: str, issue_number: int) -> list[IssueComment]:
        with self.lock:
            return sorted((c for c in self.comments.values()
                           if c.repo == full_name and c.issue_number == issue_number), key=lambda c: c.id)

    def check_runs_for(self, full_name: str, head_sha: str | None = None) -> list[CheckRun]:
        with self.lock:
            return sorted((r for r in self.check_runs.values()
                           if r.repo == full_name and head_sha in (None, r.head_sha)), key=lambda r: r.id)

    def set_rate_limit(self, token: str, *, remaining: int, reset_in: int = 3600) -> None:
        """Primary rate limit of a token's identity; at 0 requests get GitHub's 403 'API rate limit exceeded'."""
        with self.lock:
            ident = self.tokens[token]
            st = self._rate_state(ident)
            st["remaining"] = remaining
            st["used"] = st["limit"] - remaining
            st["reset"] = int(time.time()) + reset_in

    # ----------------------------------------------------------------------------------------- faults
    def fail_next(self, method: str = "*", path: str | None = None, status: int = 502, *,
                  headers: dict[str, str] | None = None, body: Any = None, apply: bool = False, times: int = 1,
                  delay: float = 0.0, disconnect: bool = False) -> Fault:
        """Answer the next `times` matching requests with `status` (or drop the connection).

        `path` is a concrete path ("/repos/o/r/issues/1/comments"), an operation template
        ("/repos/{owner}/{repo}/issues/{issue_number}/comments") or None (any). With `apply=True` the request is
        carried out first (the comment is created...) and the client still sees the failure.
        """
        fault = Fault(method=method.upper(), path=path, status=status, headers=dict(headers or {}), body=body,
                      apply=apply, times=times, delay=delay, disconnect=disconnect)
        with self.lock:
            self.faults.append(fault)
        return fault

    def fail_next_secondary_rate_limit(self, method: str = "*", path: str | None = None, *, retry_after: int = 60,
                                       status: int = 403, apply: bool = False, times: int = 1) -> Fault:
        """GitHub's secondary rate limit: 403 (or 429) with `retry-after` and the well-known message."""
        return self.fail_next(method, path, status, headers={"retry-after": str(retry_after)},
                              body=_SECONDARY_RATE_LIMIT_BODY, apply=apply, times=times)

    @property
    def pending_faults(self) -> list[Fault]:
        with self.lock:
            return [f for f in self.faults if f.times > 0]

    def _take_fault(self, method: str, path: str, op: Operation | None) -> Fault | None:
        for f in self.faults:
            if f.times > 0 and f.matches(method, path, op):
                f.times -= 1
                if f.times == 0:
                    self.faults.remove(f)
                return f
        return None

    # ------------------------------------------------------------------------------------------- logs
    def writes(self) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.is_write]

    def requests_to(self, method: str, path_or_template: str) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self.requests if r.method == method.upper()
                    and path_or_template in (r.path, (r.operation or " ").split(" ", 1)[1])]

    def clear_log(self) -> None:
        with self.lock:
            self.requests.clear()
            self.violations.clear()

    def assert_no_violations(self) -> None:
        with self.lock:
            if self.violations:
                raise AssertionError("GitHub API violations:\n" + "\n".join(str(v) for v in self.violations))

    def _violate(self, kind: str, method: str, path: str, message: str, status: int | None) -> None:
        self.violations.append(Violation(kind=kind, method=method, path=path, message=message, status=status))

    # ------------------------------------------------------------------------------------- rate limit
    def _rate_state(self, ident: Identity) -> dict[str, int]:
        st = self._rate.get(ident.login)
        if st is None or st["reset"] <= time.time():
            st = {"limit": ident.rate_limit, "remaining": ident.rate_limit, "used": 0,
                  "reset": int(time.time()) + 3600}
            self._rate[ident.login] = st
        return st

    # ------------------------------------------------------------------------------------ request flow
    def _handle(self, h: _Handler, method: str) -> None:
        arrived, wall = time.monotonic(), time.time()
        split = urlsplit(h.path)
        path = split.path
        query = parse_qs(split.query, keep_blank_values=True)
        raw = h.read_body()
        headers = {k: v for k, v in h.headers.items() if k.lower() != "authorization"}
        body: Any = None
        body_ok = True
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body, body_ok = raw.decode("utf-8", "replace"), False
        rec = RecordedRequest(method=method, path=path, query=query, headers=headers, body=body,
                              time=arrived, timestamp=wall)
        request_id = "%04X:%06X:%06X:%06X:%08X" % tuple(secrets.randbits(b) for b in (16, 24, 24, 24, 32))

        with self.lock:
            self.requests.append(rec)
            try:
                status, payload, extra, op, fault = self._process(h, method, path, query, body, body_ok, rec,
                                                                  request_id)
            except Exception:  # a bug in the fake: fail loudly, never hang the client
                self._violate("fake-error", method, path, traceback.format_exc(), 500)
                status, payload, extra, op, fault = 500, _error("Internal Server Error",
                                                                "https://docs.github.com/rest", 500), {}, None, None
            rec.status = status
            rec.login = h.identity.login if h.identity is not None else None
            rec.response = payload
            rec.fault = fault.describe() if fault else None
        if fault is not None and fault.delay:
            time.sleep(fault.delay)
        if fault is not None and fault.disconnect:
            h.close_connection = True
            return
        h.reply(status, payload, extra, request_id)

    def _process(self, h: _Handler, method: str, path: str, query: dict, body: Any, body_ok: bool,
                 rec: RecordedRequest, request_id: str):
        """-> (status, payload, headers, operation, fault). Called with the lock held."""
        # GitHub serves /repositories/{id}/... as well as /repos/{owner}/{repo}/... (its Link headers use it).
        canonical = path
        if path.startswith("/repositories/"):
            parts = path.split("/", 3)
            repo = next((r for r in self.repos.values() if str(r.id) == parts[2]), None)
            if repo is not None:
                canonical = f"/repos/{repo.full_name}" + (f"/{parts[3]}" if len(parts) > 3 else "")
        op, params, path_known = self.spec.route(method, canonical)
        rec.operation = op.key if op else None
        docs = op.docs_url if op else "https://docs.github.com/rest"

        problem: _Reply | None = None
        if op is None:
            problem = _Reply(404, _error("Not Found", docs, 404), violation="unknown-operation")
            detail = "no such operation in the OpenAPI description" + (
                " (the path exists for other methods)" if path_known else "")
            self._violate("unknown-operation", method, path, detail, 404)
        else:
            problem = self._validate_request(op, method, path, params, query, body, body_ok, h, docs)

        fault = self._take_fault(method, canonical, op)
        if fault is not None and not fault.apply:
            return (*self._fault_reply(fault, request_id, docs), op, fault)
        if problem is not None:
            status, payload, extra = problem.status, problem.body, problem.headers
        else:
            status, payload, extra = self._dispatch(h, op, method, path, params, query, body, docs)
        if fault is not None:  # applied: the write happened, the client sees the failure
            return (*self._fault_reply(fault, request_id, docs), op, fault)
        if op is not None:
            self._validate_response(op, method, path, status, payload)
        return status, payload, extra, op, None

    def _fault_reply(self, fault: Fault, request_id: str, docs: str) -> tuple[int, Any, dict]:
        body = fault.body
        if body is _SECONDARY_RATE_LIMIT_BODY:
            body = {"message": SECONDARY_RATE_LIMIT_MESSAGE.format(request_id=request_id),
                    "documentation_url": SECONDARY_RATE_LIMIT_DOCS, "status": str(fault.status)}
        elif body is None:
            body = _error(_DEFAULT_FAULT_MESSAGES.get(fault.status, "Server Error"), docs, fault.status)
        return fault.status, body, dict(fault.headers)

    # ------------------------------------------------------------------------------ request validation
    def _validate_request(self, op: Operation, method: str, path: str, params: dict[str, str], query: dict,
                          body: Any, body_ok: bool, h: _Handler, docs: str) -> _Reply | None:
        def bad(kind: str, status: int, message: str, payload: dict | None = None) -> _Reply:
            self._violate(kind, method, path, message, status)
            return _Reply(status, payload or _error(message, docs, status), violation=kind)

        if not h.headers.get("User-Agent"):
            msg = ("Request forbidden by administrative rules. "
                   "Please make sure your request has a User-Agent header "
                   "(https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). "
                   "Check https://developer.github.com for other possible causes.")
            return bad("missing-user-agent", 403, msg)
        version = h.headers.get("X-GitHub-Api-Version")
        if version is not None and version not in self.api_versions:
            return bad("invalid-request", 400, f"API version '{version}' is not supported.")

        # Path parameters: a value of the wrong type does not route at GitHub -> 404.
        for p in op.parameters:
            if p.location != "path":
                continue
            value = _coerce(params.get(p.name, ""), p.schema)
            errs = self.spec.errors(f"{op.key} path {p.name}", p.schema, value)
            if errs:
                return bad("invalid-request", 404, f"path parameter {p.name}={params.get(p.name)!r}: {errs[0]}",
                           _error("Not Found", docs, 404))
        # Query parameters: unknown ones are ignored by GitHub (a typo?), invalid ones -> 422.
        declared = {p.name: p for p in op.parameters if p.location == "query"}
        for name, values in query.items():
            p = declared.get(name)
            if p is None:
                self._violate("unknown-parameter", method, path, f"query parameter {name!r} is not declared "
                              "(GitHub ignores it)", None)
                continue
            for v in values:
                errs = self.spec.errors(f"{op.key} query {name}", p.schema, _coerce(v, p.schema))
                if errs:
                    return bad("invalid-request", 422, f"Invalid request.\n\nquery parameter {name}={v!r}: "
                               f"{errs[0]}")
        # Body.
        if op.request_schema is None:
            return None
        if not body_ok:
            return bad("invalid-request", 400, "Problems parsing JSON")
        if body is None:
            if op.request_required:
                return bad("invalid-request", 422, "Invalid request.\n\nFor 'links/0/schema', nil is not an object.")
            return None
        errs = self.spec.errors(f"{op.key} body", op.request_schema, body)
        if errs:
            return bad("invalid-request", 422, "Invalid request.\n\n" + "\n".join(errs))
        return self._check_limits(op, method, path, body, docs, bad)

    def _check_limits(self, op: Operation, method: str, path: str, body: dict, docs: str,
                      bad: Callable[..., _Reply]) -> _Reply | None:
        """GitHub's limits, whether or not (this version of) the description states them."""
        if op.operation_id in ("issues/create-comment", "issues/update-comment"):
            text = body.get("body", "")
            if len(text) > MAX_COMMENT_BODY:
                return bad("limit", 422, f"comment body has {len(text)} characters", _validation_failed(
                    "IssueComment", "body", f"Body is too long (maximum is {MAX_COMMENT_BODY} characters)", docs))
            if not text.strip():
                return bad("limit", 422, "comment body is blank",
                           _validation_failed("IssueComment", "body", "Body cannot be blank", docs))
        if op.operation_id in ("checks/create", "checks/update"):
            if body.get("conclusion") == "stale":
                return bad("limit", 422, "Invalid request.\n\nYou cannot change a check run conclusion to stale.")
            if op.operation_id == "checks/create" and body.get("status") == "completed" \
                    and "conclusion" not in body:
                return bad("limit", 422, "Invalid request.\n\nWhen status is completed, conclusion is required.")
            output = body.get("output") or {}
            for key in ("summary", "text"):
                if len(output.get(key) or "") > MAX_CHECK_TEXT:
                    return bad("limit", 422, f"Invalid request.\n\noutput.{key} is too long "
                               f"(maximum is {MAX_CHECK_TEXT} characters).")
            annotations = output.get("annotations") or []
            if len(annotations) > MAX_ANNOTATIONS_PER_REQUEST:
                return bad("limit", 422, f"Invalid request.\n\nOnly {MAX_ANNOTATIONS_PER_REQUEST} annotations "
                           f"are allowed per request ({len(annotations)} sent).")
            for i, a in enumerate(annotations):
                if a.get("annotation_level") not in ANNOTATION_LEVELS:
                    return bad("limit", 422, f"Invalid request.\n\noutput.annotations[{i}].annotation_level "
                               f"{a.get('annotation_level')!r} is not one of {list(ANNOTATION_LEVELS)}.")
                if a["end_line"] < a["start_line"] or a["start_line"] < 1:
                    return bad("limit", 422, f"Invalid request.\n\noutput.annotations[{i}]: start_line must be "
                               ">= 1 and end_line >= start_line.")
                if ("start_column" in a or "end_column" in a) and a["start_line"] != a["end_line"]:
                    return bad("limit", 422, f"Invalid request.\n\noutput.annotations[{i}]: start_column and "
                               "end_column are only allowed when start_line equals end_line.")
        return None

    @property
    def api_versions(self) -> set[str]:
        return {DEFAULT_API_VERSION} | self.spec.breaking_change_versions

    # ----------------------------------------------------------------------------- response validation
    def _validate_response(self, op: Operation, method: str, path: str, status: int, payload: Any) -> None:
        key, schema, declared = self.spec.response_schema(op, status)
        if schema is None:
            if not declared:
                self._violate("invalid-response", method, path, f"status {status} is not declared for {op.key}",
                              status)
            elif payload is not None:
                self._violate("invalid-response", method, path, f"status {status} must have no body", status)
            return
        errs = self.spec.errors(key, schema, payload)
        if errs:
            self._violate("invalid-response", method, path, "; ".join(errs), status)

    # ------------------------------------------------------------------------------------- operations
    def _dispatch(self, h: _Handler, op: Operation, method: str, path: str, params: dict, query: dict,
                  body: Any, docs: str) -> tuple[int, Any, dict]:
        try:
            ident = self._authenticate(h, docs)
            handler = _OPERATIONS[op.operation_id]
            extra: dict[str, str] = {}
            if ident is not None and op.operation_id != "rate-limit/get":
                st = self._rate_state(ident)
                if st["remaining"] <= 0:
                    raise _Reply(403, {"message": f"API rate limit exceeded for {ident.login}.",
                                       "documentation_url": PRIMARY_RATE_LIMIT_DOCS, "status": "403"})
                st["remaining"] -= 1
                st["used"] += 1
            result = handler(self, ident, op, params, query, body, docs)
            status, payload = result[0], result[1]
            if len(result) > 2:
                extra.update(result[2])
            return status, payload, extra
        except _Reply as r:
            if r.violation:
                self._violate(r.violation, method, path, str(r.body.get("message") if isinstance(r.body, dict)
                                                            else r.body), r.status)
            return r.status, r.body, r.headers

    def _authenticate(self, h: _Handler, docs: str) -> Identity:
        auth = h.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if not auth:
            raise _Reply(401, _error("Requires authentication", docs, 401))
        if scheme.lower() not in ("token", "bearer") or token.strip() not in self.tokens:
            raise _Reply(401, _error("Bad credentials", docs, 401))
        ident = self.tokens[token.strip()]
        h.identity = ident
        return ident

    def _repo(self, ident: Identity, params: dict, docs: str) -> Repo:
        full = f"{params['owner']}/{params['repo']}"
        repo = next((r for name, r in self.repos.items() if name.lower() == full.lower()), None)
        if repo is None or (ident.repos is not None and repo.full_name not in ident.repos):
            raise _Reply(404, _error("Not Found", docs, 404))
        return repo

    @staticmethod
    def _need_write(ident: Identity, docs: str, permission: str) -> None:
        if not ident.write:
            raise _Reply(403, _error("Resource not accessible by integration", docs, 403),
                         {"x-accepted-github-permissions": f"{permission}=write"})

    def _is_pull(self, repo: str, number: int) -> bool:
        return (repo, number) in self.pulls

    def _issue_exists(self, repo: str, number: int) -> bool:
        return self._is_pull(repo, number) or number in self.issues.get(repo, set())

    # The operations, keyed by operationId in _OPERATIONS below.
    def op_get_repo(self, ident, op, params, query, body, docs):
        repo = self._repo(ident, params, docs)
        perms = {"admin": False, "maintain": False, "push": ident.write, "triage": ident.write, "pull": True}
        return 200, self.builder.repository(repo.full_name, full=True, permissions=perms)

    def op_get_pull(self, ident, op, params, query, body, docs):
        repo = self._repo(ident, params, docs)
        pr = self.pulls.get((repo.full_name, int(params["pull_number"])))
        if pr is None:
            raise _Reply(404, _error("Not Found", docs, 404))
        return 200, self.builder.pull_request(pr, len(self.comments_on(repo.full_name, pr.number)))

    def op_list_comments(self, ident, op, params, query, body, docs):
        repo = self._repo(ident, params, docs)
        number = int(params["issue_number"])
        if not self._issue_exists(repo.full_name, number):
            raise _Reply(404, _error("Not Found", docs, 404))
        items = self.comments_on(repo.full_name, number)
        if "since" in query:
            since = datetime.fromisoformat(query["since"][-1].replace("Z", "+00:00"))
            items = [c for c in items if c.updated_at >= since]
        per_page = min(int(query.get("per_page", [DEFAULT_PER_PAGE])[-1]), MAX_PER_PAGE)
        per_page = per_page if per_page > 0 else DEFAULT_PER_PAGE
        page = max(int(query.get("page", ["1"])[-1]), 1)
        last = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page: page * per_page]
        is_pull = self._is_pull(repo.full_name, number)
        payload = [self.builder.issue_comment(c, is_pull) for c in chunk]
        headers = {}
        if last > 1:
            base = (f"{self.url}/repositories/{repo.id}" if self.link_style == "repositories"
                    else f"{self.url}/repos/{repo.full_name}") + f"/issues/{number}/comments"
            keep = {k: v[-1] for k, v in query.items() if k in ("per_page", "since")}

            def link(p: int, rel: str) -> str:
                return f'<{base}?{urlencode({**keep, "page": p})}>; rel="{rel}"'

            links = []
            if page > 1:
                links.append(link(min(page - 1, last), "prev"))
            if page < last:
                links += [link(page + 1, "next"), link(last, "last")]
            if page > 1:
                links.append(link(1, "first"))
            headers["Link"] = ", ".join(links)
        return 200, payload, headers

    def op_create_comment(self, ident, op, params, query, body, docs):
        repo = self._repo(ident, params, docs)
        number = int(params["issue_number"])
        if not self._issue_exists(repo.full_name, number):
            raise _Reply(404, _error("Not Found", docs, 404))
        self._need_write(ident, docs, "issues")
        c = self.add_comment(repo.full_name, number, body["body"], user=ident.login)
        url = f"{self.url}/repos/{repo.full_name}/issues/comments/{c.id}"
        return 201, self.builder.issue_comment(c, self._is_pull(repo.full_name, number)), {"Location": url}

    def _comment(self, ident, params, docs) -> IssueComment:
        repo = self._repo(ident, params, docs)
        c = self.comments.get(int(params["comment_id"]))
        if c is None or c.repo != repo.full_name:
            raise _Reply(404, _error("Not Found", docs, 404))
        return c

    def op_get_comment(self, ident, op, params, query, body, docs):
        c = self._comment(ident, params, docs)
        return 200, self.builder.issue_comment(c, self._is_pull(c.repo, c.issue_number))

    def op_update_comment(self, ident, op, params, query, body, docs):
        c = self._comment(ident, params, docs)
        self._need_write(ident, docs, "issues")
        c.body = body["body"]
        c.updated_at = max(now(), c.updated_at)
        return 200, self.builder.issue_comment(c, self._is_pull(c.repo, c.issue_number))

    def op_delete_comment(self, ident, op, params, query, body, docs):
        c = self._comment(ident, params, docs)
        self._need_write(ident, docs, "issues")
        del self.comments[c.id]
        return 204, None

    def _check_run_json(self, cr: CheckRun) -> dict:
        pulls = [pr for pr in self.pulls.values()
                 if pr.repo == cr.repo and pr.head_repo == cr.repo and pr.head_sha == cr.head_sha
                 and pr.state == "open"]
        return self.builder.check_run(cr, pulls)

    def _apply_check_fields(self, cr: CheckRun, body: dict) -> None:
        for key in ("name", "details_url", "external_id"):
            if key in body:
                setattr(cr, key, body[key])
        for key in ("started_at", "completed_at"):
            if key in body:
                setattr(cr, key, datetime.fromisoformat(body[key].replace("Z", "+00:00")))
        if "status" in body:
            cr.status = body["status"]
        if "conclusion" in body:
            cr.conclusion = body["conclusion"]
            cr.status = "completed"
        if cr.status == "completed" and cr.completed_at is None:
            cr.completed_at = now()
        if cr.status != "queued" and cr.started_at is None:
            cr.started_at = now()
        output = body.get("output")
        if output:
            for key in ("title", "summary", "text"):
                if key in output:
                    cr.output[key] = output[key]
            cr.annotations.extend(output.get("annotations") or [])
            cr.images.extend(output.get("images") or [])
        if "actions" in body:
            cr.actions = list(body["actions"])

    def _need_app(self, ident: Identity, docs: str) -> None:
        if ident.kind != "app":
            raise _Reply(403, _error("You must authenticate via a GitHub App.", docs, 403))

    def op_create_check_run(self, ident, op, params, query, body, docs):
        repo = self._repo(ident, params, docs)
        self._need_app(ident, docs)
        self._need_write(ident, docs, "checks")
        if self.strict_shas and body["head_sha"] not in repo.commits:
            raise _Reply(422, _error(f"No commit found for SHA: {body['head_sha']}", docs, 422),
                         violation="invalid-request")
        cr = CheckRun(repo=repo.full_name, id=self._new_id(), name=body["name"], head_sha=body["head_sha"],
                      app_login=ident.login, check_suite_id=self._new_id(), started_at=now())
        self._apply_check_fields(cr, body)
        self.check_runs[cr.id] = cr
        return 201, self._check_run_json(cr)

    def _check_run(self, ident, params, docs) -> CheckRun:
        repo = self._repo(ident, params, docs)
        cr = self.check_runs.get(int(params["check_run_id"]))
        if cr is None or cr.repo != repo.full_name:
            raise _Reply(404, _error("Not Found", docs, 404))
        return cr

    def op_get_check_run(self, ident, op, params, query, body, docs):
        return 200, self._check_run_json(self._check_run(ident, params, docs))

    def op_update_check_run(self, ident, op, params, query, body, docs):
        cr = self._check_run(ident, params, docs)
        self._need_app(ident, docs)
        self._need_write(ident, docs, "checks")
        self._apply_check_fields(cr, body)
        return 200, self._check_run_json(cr)

    def op_get_user(self, ident, op, params, query, body, docs):
        if ident.kind == "app":
            raise _Reply(403, _error("Resource not accessible by integration", docs, 403))
        return 200, self.builder.private_user(ident.login)

    def op_rate_limit(self, ident, op, params, query, body, docs):
        st = self._rate_state(ident)
        return 200, self.builder.rate_limit(dict(st))


_OPERATIONS: dict[str, Callable] = {
    "repos/get": FakeGitHub.op_get_repo,
    "pulls/get": FakeGitHub.op_get_pull,
    "issues/list-comments": FakeGitHub.op_list_comments,
    "issues/create-comment": FakeGitHub.op_create_comment,
    "issues/get-comment": FakeGitHub.op_get_comment,
    "issues/update-comment": FakeGitHub.op_update_comment,
    "issues/delete-comment": FakeGitHub.op_delete_comment,
    "checks/create": FakeGitHub.op_create_check_run,
    "checks/get": FakeGitHub.op_get_check_run,
    "checks/update": FakeGitHub.op_update_check_run,
    "users/get-authenticated": FakeGitHub.op_get_user,
    "rate-limit/get": FakeGitHub.op_rate_limit,
}

_DEFAULT_FAULT_MESSAGES = {
    401: "Bad credentials",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Validation Failed",
    429: "API rate limit exceeded",
    500: "Internal Server Error",
    502: "Server Error",
    503: "Service Unavailable",
    504: "We couldn't respond to your request in time. Sorry about that. Please try resubmitting your request "
         "and contact us if the problem persists.",
}


def _error(message: str, docs: str, status: int) -> dict:
    return {"message": message, "documentation_url": docs, "status": str(status)}


def _validation_failed(resource: str, field_: str, message: str, docs: str) -> dict:
    return {"message": "Validation Failed",
            "errors": [{"resource": resource, "code": "custom", "field": field_, "message": message}],
            "documentation_url": docs, "status": "422"}


def _coerce(value: str, schema: dict) -> Any:
    """A path/query string as the type its schema declares (left as is when it does not parse)."""
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "integer" in types:
        try:
            return int(value)
        except ValueError:
            return value
    if "number" in types:
        try:
            return float(value)
        except ValueError:
            return value
    if "boolean" in types and value in ("true", "false"):
        return value == "true"
    return value


_SPEC: Spec | None = None
_SPEC_LOCK = threading.Lock()


def _shared_spec() -> Spec:
    global _SPEC
    with _SPEC_LOCK:
        if _SPEC is None:
            _SPEC = Spec()
        return _SPEC


# ------------------------------------------------------------------------------------------------ handler
class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stalls
    server_version = "github.com"
    sys_version = ""
    identity: Identity | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (quiet)
        pass

    def version_string(self) -> str:
        return "github.com"

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _any(self) -> None:
        self.identity = None
        self.fake._handle(self, self.command)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _any

    def reply(self, status: int, payload: Any, extra: dict[str, str], request_id: str) -> None:
        if payload is None:
            data = b""
            ctype = None
        elif isinstance(payload, str):
            data = payload.encode()
            ctype = "text/html; charset=utf-8"
        else:
            data = json.dumps(payload).encode()
            ctype = "application/json; charset=utf-8"
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-GitHub-Request-Id", request_id)
        self.send_header("X-GitHub-Media-Type", "github.v3; format=json")
        self.send_header("X-GitHub-Api-Version-Selected",
                         self.headers.get("X-GitHub-Api-Version") or DEFAULT_API_VERSION)
        self.send_header("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
        self.send_header("Cache-Control", "private, max-age=60, s-maxage=60")
        if status == 200 and self.command == "GET" and data:
            self.send_header("ETag", 'W/"%s"' % hashlib.sha256(data).hexdigest())
        lower = {k.lower() for k in extra}
        ident = self.identity
        if ident is not None and "x-ratelimit-remaining" not in lower:
            with self.fake.lock:
                st = dict(self.fake._rate_state(ident))
            self.send_header("X-RateLimit-Limit", str(st["limit"]))
            self.send_header("X-RateLimit-Remaining", str(max(st["remaining"], 0)))
            self.send_header("X-RateLimit-Reset", str(st["reset"]))
            self.send_header("X-RateLimit-Used", str(st["used"]))
            self.send_header("X-RateLimit-Resource", "core")
        for k, v in extra.items():
            self.send_header(k, v)
        try:
            self.end_headers()
            if data:
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True
