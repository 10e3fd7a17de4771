"""The fake GitHub REST API (tests/fake_github) against real clients: PyGithub 2.10 and raw `requests`."""

import json
import re
import time

import pytest
import requests
from github import Auth, Github, GithubException

from fake_github import MAX_COMMENT_BODY, FakeGitHub, Spec
from fake_github.objects import Builder
from fake_github.spec import SUBSET_PATH, convert_schema

APP = {"Authorization": "token ghs_app"}
FORK = {"Authorization": "token ghs_fork"}
USER = {"Authorization": "Bearer ghp_user"}

EXPECTED_OPERATIONS = [
    "GET /repos/{owner}/{repo}",
    "GET /repos/{owner}/{repo}/pulls/{pull_number}",
    "GET /repos/{owner}/{repo}/issues/{issue_number}/comments",
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
    "GET /repos/{owner}/{repo}/issues/comments/{comment_id}",
    "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}",
    "DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}",
    "POST /repos/{owner}/{repo}/check-runs",
    "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
    "GET /repos/{owner}/{repo}/check-runs/{check_run_id}",
    "GET /user",
    "GET /rate_limit",
]


@pytest.fixture
def gh():
    with FakeGitHub() as fake:
        fake.add_repo("octo/proj", default_branch="main")
        fake.add_pull("octo/proj", 7, head_sha="a" * 40, base_sha="b" * 40, head_ref="fix-elu")
        fake.add_pull("octo/proj", 8, head_sha="c" * 40, base_sha="b" * 40, head_ref="patch-1",
                      head_repo="forker/proj")
        yield fake


def pygithub(fake, token="ghs_app"):
    # PyGithub spaces requests itself (0.25 s, writes 1 s): that is the client's business, not the fake's.
    return Github(base_url=fake.url, auth=Auth.Token(token), retry=None, timeout=10,
                  seconds_between_requests=None, seconds_between_writes=None)


def annotation(i=1, level="warning", **kw):
    return {"path": "python/tvm/relax/frontend/torch/base.py", "start_line": i, "end_line": i,
            "annotation_level": level, "message": f"finding {i}", **kw}


def kinds(fake):
    return [v.kind for v in fake.violations]


# ------------------------------------------------------------------------------------------------- subset
def test_subset_is_the_declared_operations_with_their_components():
    doc = json.loads(SUBSET_PATH.read_text())
    header = doc["x-dlci-subset"]
    assert re.fullmatch(r"@octokit/openapi@\d+\.\d+\.\d+", header["source"])
    assert header["operations"] == EXPECTED_OPERATIONS
    spec = Spec()
    assert sorted(op.key for op in spec.operations) == sorted(EXPECTED_OPERATIONS)
    # Every $ref resolves inside the subset (transitive closure).
    text = SUBSET_PATH.read_text()
    for ref in set(re.findall(r'"\$ref": "#/components/(\w+)/([^"]+)"', text)):
        assert ref[1] in doc["components"][ref[0]], ref
    assert len(text) < 400_000


def test_openapi_dialect_conversion():
    spec = Spec()
    # oneOf of three nullable branches: null matches all three, so OpenAPI's intent needs hoisting.
    value = convert_schema({"oneOf": [{"type": "string", "nullable": True}, {"type": "integer", "nullable": True}]})
    for ok in (None, "x", 3):
        assert spec.errors("t1", value, ok) == []
    assert spec.errors("t1", value, 1.5)
    # nullable + enum (check-run conclusion).
    conclusion = convert_schema({"type": "string", "nullable": True, "enum": ["success", "failure"]})
    assert spec.errors("t2", conclusion, None) == []
    assert spec.errors("t2", conclusion, "stale")
    # date-time format is checked (jsonschema skips it without optional packages).
    dt = convert_schema({"type": "string", "format": "date-time"})
    assert spec.errors("t3", dt, "2024-05-01T10:00:00Z") == []
    assert spec.errors("t3", dt, "2024-05-01 10:00")


# ----------------------------------------------------------------------------------------------- PyGithub
def test_pygithub_session_comment_and_check_run(gh):
    g = pygithub(gh)
    repo = g.get_repo("octo/proj")
    assert (repo.full_name, repo.default_branch, repo.private) == ("octo/proj", "main", False)

    pr = repo.get_pull(7)
    assert (pr.head.sha, pr.head.ref, pr.base.sha, pr.base.ref) == ("a" * 40, "fix-elu", "b" * 40, "main")
    fork_pr = repo.get_pull(8)
    assert fork_pr.head.repo.full_name == "forker/proj" and fork_pr.base.repo.full_name == "octo/proj"

    assert list(pr.get_issue_comments()) == []
    comment = pr.create_issue_comment("<!-- dlci -->\nfirst")
    assert comment.user.login == "github-actions[bot]" and comment.user.type == "Bot"
    assert comment.html_url.endswith(f"/octo/proj/pull/7#issuecomment-{comment.id}")
    comment.edit("<!-- dlci -->\nsecond")
    [again] = pr.get_issue_comments()
    assert again.id == comment.id and again.body == "<!-- dlci -->\nsecond"
    assert gh.comments_on("octo/proj", 7)[0].body.endswith("second")

    run = repo.create_check_run(name="dlci", head_sha="a" * 40, status="in_progress",
                                output={"title": "Scanning", "summary": "running",
                                        "annotations": [annotation(i) for i in range(1, 51)]})
    assert run.status == "in_progress" and run.conclusion is None
    assert run.output.annotations_count == 50
    assert [p.number for p in run.pull_requests] == [7]
    run.edit(conclusion="failure", output={"title": "2 new findings", "summary": "## dlci\n...",
                                           "text": "details", "annotations": [annotation(51, "failure")]})
    fetched = repo.get_check_run(run.id)
    assert (fetched.status, fetched.conclusion) == ("completed", "failure")
    assert fetched.output.title == "2 new findings" and fetched.output.annotations_count == 51
    assert fetched.completed_at is not None
    [state] = gh.check_runs_for("octo/proj", "a" * 40)
    assert len(state.annotations) == 51 and state.annotations[-1]["annotation_level"] == "failure"

    comment.delete()
    assert gh.comments_on("octo/proj", 7) == []
    assert g.get_rate_limit().resources.core.limit == 5000
    with pytest.raises(GithubException) as exc:
        g.get_user().login  # noqa: B018 (an installation token cannot read /user)
    assert exc.value.status == 403
    assert pygithub(gh, "ghp_user").get_user().login == "octocat"
    assert gh.violations == []
    assert {r.operation for r in gh.requests} >= set(EXPECTED_OPERATIONS) - {
        "GET /repos/{owner}/{repo}/issues/comments/{comment_id}"}


def test_pygithub_finds_a_comment_on_page_two(gh):
    for i in range(40):
        gh.add_comment("octo/proj", 7, f"human comment {i}", user="reviewer")
    mine = gh.add_comment("octo/proj", 7, "<!-- dlci -->\nreport", user="github-actions[bot]")
    for i in range(5):
        gh.add_comment("octo/proj", 7, f"late comment {i}", user="reviewer")
    pr = pygithub(gh).get_repo("octo/proj").get_pull(7)
    found = [c for c in pr.get_issue_comments() if c.body.startswith("<!-- dlci -->")]
    assert [c.id for c in found] == [mine.id]
    pages = [r for r in gh.requests if r.operation == "GET /repos/{owner}/{repo}/issues/{issue_number}/comments"]
    assert len(pages) == 2 and pages[1].path.startswith("/repositories/")  # followed GitHub's Link header
    assert gh.violations == []


def test_pagination_link_header(gh):
    for i in range(7):
        gh.add_comment("octo/proj", 7, f"c{i}")
    url = f"{gh.url}/repos/octo/proj/issues/7/comments"
    first = requests.get(url, headers=APP, params={"per_page": 3})
    assert [c["body"] for c in first.json()] == ["c0", "c1", "c2"]
    assert set(first.links) == {"next", "last"}
    assert "page=3" in first.links["last"]["url"] and "per_page=3" in first.links["last"]["url"]
    second = requests.get(first.links["next"]["url"], headers=APP)
    assert [c["body"] for c in second.json()] == ["c3", "c4", "c5"]
    assert set(second.links) == {"prev", "next", "last", "first"}
    last = requests.get(second.links["next"]["url"], headers=APP)
    assert [c["body"] for c in last.json()] == ["c6"] and "next" not in last.links
    many = requests.get(url, headers=APP, params={"per_page": 500})  # GitHub caps per_page at 100
    assert len(many.json()) == 7 and "Link" not in many.headers
    assert gh.violations == []


# ---------------------------------------------------------------------------------------- invalid requests
@pytest.mark.parametrize(
    "path_suffix, body, kind, needle",
    [
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40,
                        "output": {"title": "t", "summary": "s", "annotations": [annotation(level="error")]}},
         "invalid-request", "annotation_level"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40,
                        "output": {"title": "t", "summary": "s", "annotations": [annotation(i) for i in range(51)]}},
         "invalid-request", "too long"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40, "output": {"title": "t", "summary": "x" * 65536}},
         "invalid-request", "summary"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40, "output": {"summary": "no title"}},
         "invalid-request", "title"),
        ("check-runs", {"head_sha": "a" * 40}, "invalid-request", "name"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40, "conclusion": "stale"}, "limit", "stale"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40, "status": "completed"}, "limit", "conclusion"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40, "started_at": "yesterday"},
         "invalid-request", "started_at"),
        ("check-runs", {"name": "dlci", "head_sha": "a" * 40, "output": {"title": "t", "summary": "s",
                        "annotations": [{**annotation(), "end_line": 3, "start_column": 1}]}}, "limit", "column"),
        ("check-runs", {"name": "dlci", "head_sha": "f" * 40}, "invalid-request", "No commit found"),
        ("issues/7/comments", {"body": "x" * (MAX_COMMENT_BODY + 1)}, "limit", "Validation Failed"),
        ("issues/7/comments", {"body": "   "}, "limit", "Validation Failed"),
        ("issues/7/comments", {"text": "wrong field"}, "invalid-request", "body"),
        ("issues/7/comments", None, "invalid-request", "nil is not an object"),
    ],
)
def test_invalid_bodies_are_rejected_with_422(gh, path_suffix, body, kind, needle):
    r = requests.post(f"{gh.url}/repos/octo/proj/{path_suffix}", headers=APP, json=body)
    assert r.status_code == 422, r.text
    assert needle in r.text
    payload = r.json()
    assert payload["documentation_url"].startswith("https://docs.github.com/")
    assert [v.kind for v in gh.violations] == [kind], gh.violations
    assert gh.comments_on("octo/proj", 7) == [] and gh.check_runs_for("octo/proj") == []


def test_comment_at_the_limit_is_accepted_and_too_long_error_is_github_shaped(gh):
    url = f"{gh.url}/repos/octo/proj/issues/7/comments"
    assert requests.post(url, headers=APP, json={"body": "x" * MAX_COMMENT_BODY}).status_code == 201
    r = requests.post(url, headers=APP, json={"body": "x" * 70_000})
    assert r.json()["errors"][0]["message"] == "Body is too long (maximum is 65536 characters)"
    assert kinds(gh) == ["limit"]


def test_check_run_update_rules(gh):
    created = requests.post(f"{gh.url}/repos/octo/proj/check-runs", headers=APP,
                            json={"name": "dlci", "head_sha": "a" * 40}).json()
    assert (created["status"], created["conclusion"], created["output"]["title"]) == ("queued", None, None)
    url = created["url"]
    assert url.startswith(gh.url)
    r = requests.patch(url, headers=APP, json={"status": "completed"})  # conclusion required
    assert r.status_code == 422
    r = requests.patch(url, headers=APP, json={"output": {"title": "t", "summary": "s",
                                                          "annotations": [annotation(i) for i in range(51)]}})
    assert r.status_code == 422
    for n in range(3):  # 3 x 50 annotations in batches, as the Checks API requires
        r = requests.patch(url, headers=APP, json={"output": {"title": "t", "summary": "s", "annotations": [
            annotation(i) for i in range(50 * n + 1, 50 * n + 51)]}})
        assert r.status_code == 200 and r.json()["output"]["annotations_count"] == 50 * (n + 1)
    done = requests.patch(url, headers=APP, json={"conclusion": "success"}).json()
    assert done["status"] == "completed" and done["completed_at"]
    assert kinds(gh) == ["invalid-request", "invalid-request"]


def test_unknown_operations_and_parameters_are_violations(gh):
    r = requests.get(f"{gh.url}/repos/octo/proj/check-runs/1/annotations", headers=APP)
    assert r.status_code == 404 and r.json()["message"] == "Not Found"
    r = requests.put(f"{gh.url}/repos/octo/proj/issues/comments/1", headers=APP, json={"body": "x"})
    assert r.status_code == 404
    assert kinds(gh) == ["unknown-operation", "unknown-operation"]
    assert "other methods" in gh.violations[1].message

    gh.violations.clear()
    r = requests.get(f"{gh.url}/repos/octo/proj/issues/7/comments", headers=APP, params={"perpage": 100})
    assert r.status_code == 200 and kinds(gh) == ["unknown-parameter"]  # GitHub ignores it: likely a typo
    gh.violations.clear()
    r = requests.get(f"{gh.url}/repos/octo/proj/issues/7/comments", headers=APP, params={"per_page": "lots"})
    assert r.status_code == 422 and kinds(gh) == ["invalid-request"]
    gh.violations.clear()
    r = requests.get(f"{gh.url}/repos/octo/proj/pulls/seven", headers=APP)
    assert r.status_code == 404 and kinds(gh) == ["invalid-request"]
    gh.violations.clear()
    r = requests.post(f"{gh.url}/repos/octo/proj/issues/7/comments", headers={**APP, "Content-Type":
                      "application/json"}, data="{not json")
    assert r.status_code == 400 and r.json()["message"] == "Problems parsing JSON"
    gh.violations.clear()
    r = requests.get(f"{gh.url}/repos/octo/proj", headers={**APP, "X-GitHub-Api-Version": "2019-01-01"})
    assert r.status_code == 400 and kinds(gh) == ["invalid-request"]


def test_missing_resources_are_plain_404s(gh):
    for path in ("/repos/octo/nope", "/repos/octo/proj/pulls/99", "/repos/octo/proj/issues/comments/5",
                 "/repos/octo/proj/check-runs/5", "/repos/octo/proj/issues/99/comments"):
        r = requests.get(gh.url + path, headers=APP)
        assert r.status_code == 404, path
    assert gh.violations == []  # a deleted comment is not the client's fault


# ---------------------------------------------------------------------------------------------------- auth
def test_tokens(gh):
    url = f"{gh.url}/repos/octo/proj/issues/7/comments"
    r = requests.get(url)
    assert r.status_code == 401 and r.json()["message"] == "Requires authentication"
    r = requests.get(url, headers={"Authorization": "token ghs_nope"})
    assert r.status_code == 401 and r.json()["message"] == "Bad credentials"

    assert requests.get(url, headers=FORK).status_code == 200  # a fork PR's token can read
    r = requests.post(url, headers=FORK, json={"body": "hello"})
    assert r.status_code == 403
    assert r.json()["message"] == "Resource not accessible by integration"
    assert r.json()["documentation_url"].startswith("https://docs.github.com/")
    assert r.headers["x-accepted-github-permissions"] == "issues=write"
    r = requests.post(f"{gh.url}/repos/octo/proj/check-runs", headers=FORK, json={"name": "dlci", "head_sha": "a" * 40})
    assert r.status_code == 403 and r.headers["x-accepted-github-permissions"] == "checks=write"
    assert gh.comments_on("octo/proj", 7) == [] and gh.check_runs_for("octo/proj") == []

    r = requests.post(f"{gh.url}/repos/octo/proj/check-runs", headers=USER, json={"name": "dlci", "head_sha": "a" * 40})
    assert r.status_code == 403 and "GitHub App" in r.json()["message"]
    assert requests.get(f"{gh.url}/user", headers=USER).json()["user_view_type"] == "private"

    gh.add_repo("octo/secret", private=True)
    gh.add_token("ghs_other", "github-actions[bot]", repos=["octo/proj"])
    assert requests.get(f"{gh.url}/repos/octo/secret", headers={"Authorization": "token ghs_other"}).status_code == 404
    assert requests.get(f"{gh.url}/repos/octo/secret", headers=APP).json()["private"] is True
    assert gh.violations == []


def test_response_headers_and_primary_rate_limit(gh):
    r = requests.get(f"{gh.url}/repos/octo/proj", headers=APP)
    assert r.headers["Content-Type"] == "application/json; charset=utf-8"
    assert re.fullmatch(r"[0-9A-F]{4}(:[0-9A-F]{6}){3}:[0-9A-F]{8}", r.headers["X-GitHub-Request-Id"])
    assert r.headers["X-RateLimit-Limit"] == "5000" and r.headers["X-RateLimit-Resource"] == "core"
    remaining = int(r.headers["X-RateLimit-Remaining"])
    assert int(r.headers["X-RateLimit-Reset"]) > time.time()
    r = requests.get(f"{gh.url}/repos/octo/proj", headers=APP)
    assert int(r.headers["X-RateLimit-Remaining"]) == remaining - 1
    assert int(r.headers["X-RateLimit-Used"]) == 5000 - remaining + 1

    gh.set_rate_limit("ghs_app", remaining=0)
    r = requests.get(f"{gh.url}/repos/octo/proj", headers=APP)
    assert r.status_code == 403 and r.headers["X-RateLimit-Remaining"] == "0"
    assert "rate limit exceeded" in r.json()["message"]
    assert requests.get(f"{gh.url}/rate_limit", headers=APP).json()["resources"]["core"]["remaining"] == 0
    assert gh.violations == []


# -------------------------------------------------------------------------------------------------- faults
def test_429_with_retry_after_then_success(gh):
    url = f"{gh.url}/repos/octo/proj/issues/7/comments"
    gh.fail_next("POST", "/repos/octo/proj/issues/7/comments", status=429, headers={"Retry-After": "1"})
    r = requests.post(url, headers=APP, json={"body": "report"})
    assert r.status_code == 429 and r.headers["Retry-After"] == "1"
    assert gh.comments_on("octo/proj", 7) == []
    assert requests.post(url, headers=APP, json={"body": "report"}).status_code == 201
    assert len(gh.comments_on("octo/proj", 7)) == 1
    first, second = gh.writes()
    assert (first.status, first.fault, second.status, second.fault) == (429, "429", 201, None)
    assert second.time > first.time
    assert gh.pending_faults == [] and gh.violations == []


def test_applied_502_makes_a_naive_retry_duplicate_the_comment(gh):
    url = f"{gh.url}/repos/octo/proj/issues/7/comments"
    gh.fail_next("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", status=502, apply=True)
    r = requests.post(url, headers=APP, json={"body": "<!-- dlci --> report"})
    assert r.status_code == 502 and r.json()["message"] == "Server Error"
    assert len(gh.comments_on("octo/proj", 7)) == 1  # the write happened
    requests.post(url, headers=APP, json={"body": "<!-- dlci --> report"})
    assert len(gh.comments_on("octo/proj", 7)) == 2  # what a client that does not re-list first ends up with


def test_secondary_rate_limit_and_other_faults(gh):
    url = f"{gh.url}/repos/octo/proj/check-runs"
    gh.fail_next_secondary_rate_limit("POST", "/repos/octo/proj/check-runs", retry_after=2, times=2)
    for _ in range(2):
        r = requests.post(url, headers=APP, json={"name": "dlci", "head_sha": "a" * 40})
        assert r.status_code == 403 and r.headers["retry-after"] == "2"
        assert r.json()["message"].startswith("You have exceeded a secondary rate limit")
        assert r.headers["X-GitHub-Request-Id"] in r.json()["message"]
    assert requests.post(url, headers=APP, json={"name": "dlci", "head_sha": "a" * 40}).status_code == 201

    gh.fail_next("GET", None, status=503, body="<html>Unicorn!</html>")
    r = requests.get(f"{gh.url}/repos/octo/proj", headers=APP)
    assert r.status_code == 503 and r.headers["Content-Type"].startswith("text/html")

    gh.fail_next("GET", "/repos/octo/proj", disconnect=True)
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{gh.url}/repos/octo/proj", headers=APP)

    gh.fail_next("GET", "/repos/octo/proj", status=504, delay=0.3)
    with pytest.raises(requests.Timeout):
        requests.get(f"{gh.url}/repos/octo/proj", headers=APP, timeout=0.1)
    assert requests.get(f"{gh.url}/repos/octo/proj", headers=APP).status_code == 200
    assert gh.violations == []


def test_request_log_drops_authorization(gh):
    requests.post(f"{gh.url}/repos/octo/proj/issues/7/comments", headers=APP, json={"body": "hi"})
    [rec] = gh.requests
    assert "Authorization" not in rec.headers and "authorization" not in {k.lower() for k in rec.headers}
    assert rec.body == {"body": "hi"} and rec.login == "github-actions[bot]"
    assert rec.operation == "POST /repos/{owner}/{repo}/issues/{issue_number}/comments"
    assert rec.status == 201 and rec.response["body"] == "hi"
    assert gh.requests_to("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments") == [rec]


# ----------------------------------------------------------------------------------- response self-checks
def test_a_response_github_would_not_send_is_a_violation(gh, monkeypatch):
    real = Builder.issue_comment

    def broken(self, c, is_pull):
        obj = real(self, c, is_pull)
        del obj["user"]
        obj["created_at"] = "last tuesday"
        return obj

    monkeypatch.setattr(Builder, "issue_comment", broken)
    r = requests.post(f"{gh.url}/repos/octo/proj/issues/7/comments", headers=APP, json={"body": "hi"})
    assert r.status_code == 201
    [v] = gh.violations
    assert v.kind == "invalid-response" and "'user' is a required property" in v.message
    assert "created_at" in v.message


def test_a_bug_in_the_fake_answers_500_and_is_recorded(gh, monkeypatch):
    def boom(self, *args):
        raise RuntimeError("fake bug")

    monkeypatch.setattr(Builder, "pull_request", boom)
    r = requests.get(f"{gh.url}/repos/octo/proj/pulls/7", headers=APP)
    assert r.status_code == 500
    [v] = gh.violations
    assert v.kind == "fake-error" and "fake bug" in v.message
