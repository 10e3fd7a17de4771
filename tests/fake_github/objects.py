"""State of the fake GitHub and the JSON objects GitHub would send for it.

Every builder returns a full object (all the fields the OpenAPI schema requires, the optional ones real GitHub
sends for this kind of token), with API URLs pointing at the fake (clients such as PyGithub follow an object's
``url`` to edit or delete it) and web URLs (``html_url``) at https://github.com.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

WEB = "https://github.com"


def iso(ts: datetime | None) -> str | None:
    if ts is None:
        return None
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def node_id(prefix: str, number: int) -> str:
    return f"{prefix}_kwDO{base64.b64encode(number.to_bytes(8, 'big')).decode().rstrip('=')}"


# ------------------------------------------------------------------------------------------------------ state
@dataclass
class User:
    login: str
    id: int
    type: str = "User"  # User | Bot | Organization
    name: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime(2015, 3, 1, tzinfo=timezone.utc))


@dataclass
class Identity:
    """Who a token authenticates as and what it may do."""

    login: str
    kind: str = "app"  # "app" (installation token / GITHUB_TOKEN, ghs_...) or "user" (PAT, ghp_...)
    write: bool = True
    repos: frozenset[str] | None = None  # full names readable with this token; None: all
    rate_limit: int = 5000


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    default_branch: str = "main"
    private: bool = False
    fork_of: str | None = None  # full name of the parent
    description: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    commits: set[str] = field(default_factory=set)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class PullRequest:
    repo: str  # base repository, full name
    number: int
    id: int
    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str
    head_repo: str  # full name (the fork for a fork PR)
    user: str
    title: str = "Change things"
    body: str | None = None
    state: str = "open"
    draft: bool = False
    merge_commit_sha: str | None = None
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class IssueComment:
    repo: str
    issue_number: int
    id: int
    body: str
    user: str
    created_at: datetime = field(default_factory=now)
    updated_at: datetime = field(default_factory=now)


@dataclass
class CheckRun:
    repo: str
    id: int
    name: str
    head_sha: str
    app_login: str
    status: str = "queued"
    conclusion: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    details_url: str | None = None
    external_id: str = ""
    output: dict[str, Any] = field(default_factory=lambda: {"title": None, "summary": None, "text": None})
    annotations: list[dict[str, Any]] = field(default_factory=list)
    images: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    check_suite_id: int = 0


# ---------------------------------------------------------------------------------------------- JSON objects
GITHUB_ACTIONS_APP = {
    "id": 15368,
    "client_id": "Iv1.05c79e9ad1f6bdfa",
    "slug": "github-actions",
    "node_id": "MDM6QXBwMTUzNjg=",
    "name": "GitHub Actions",
    "description": "Automate your workflow from idea to production",
    "external_url": "https://help.github.com/en/actions",
    "html_url": "https://github.com/apps/github-actions",
    "created_at": "2018-07-30T09:30:17Z",
    "updated_at": "2024-04-10T20:33:16Z",
    "permissions": {
        "actions": "write",
        "checks": "write",
        "contents": "write",
        "deployments": "write",
        "issues": "write",
        "metadata": "read",
        "pull_requests": "write",
        "statuses": "write",
    },
    "events": ["check_run", "check_suite", "issue_comment", "pull_request", "push", "workflow_dispatch"],
}


class Builder:
    """Turns state into GitHub JSON; `api` is the fake's base URL."""

    def __init__(self, api: str, users: dict[str, User], repos: dict[str, Repo]):
        self.api = api
        self.users = users
        self.repos = repos

    # ----------------------------------------------------------------------------------------- users
    def simple_user(self, login: str) -> dict:
        u = self.users[login]
        api_u = f"{self.api}/users/{quote(login)}"
        if u.type == "Bot":
            avatar = f"https://avatars.githubusercontent.com/in/{GITHUB_ACTIONS_APP['id']}?v=4"
            html = f"{WEB}/apps/{quote(login.removesuffix('[bot]'))}"
        else:
            avatar = f"https://avatars.githubusercontent.com/u/{u.id}?v=4"
            html = f"{WEB}/{quote(login)}"
        return {
            "login": login,
            "id": u.id,
            "node_id": node_id({"Bot": "BOT", "Organization": "O"}.get(u.type, "U"), u.id),
            "avatar_url": avatar,
            "gravatar_id": "",
            "url": api_u,
            "html_url": html,
            "followers_url": f"{api_u}/followers",
            "following_url": f"{api_u}/following{{/other_user}}",
            "gists_url": f"{api_u}/gists{{/gist_id}}",
            "starred_url": f"{api_u}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{api_u}/subscriptions",
            "organizations_url": f"{api_u}/orgs",
            "repos_url": f"{api_u}/repos",
            "events_url": f"{api_u}/events{{/privacy}}",
            "received_events_url": f"{api_u}/received_events",
            "type": u.type,
            "user_view_type": "public",
            "site_admin": False,
        }

    def private_user(self, login: str) -> dict:
        """GET /user for a personal access token (schema private-user)."""
        u = self.users[login]
        obj = self.simple_user(login)
        obj.update(
            {
                "user_view_type": "private",
                "name": u.name,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "hireable": None,
                "bio": None,
                "twitter_username": None,
                "notification_email": None,
                "public_repos": sum(r.owner == login for r in self.repos.values() if not r.private),
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": iso(u.created_at),
                "updated_at": iso(u.created_at),
                "private_gists": 0,
                "total_private_repos": sum(r.owner == login for r in self.repos.values() if r.private),
                "owned_private_repos": sum(r.owner == login for r in self.repos.values() if r.private),
                "disk_usage": 0,
                "collaborators": 0,
                "two_factor_authentication": True,
                "plan": {"name": "free", "space": 976562499, "collaborators": 0, "private_repos": 10000},
            }
        )
        return obj

    # ------------------------------------------------------------------------------------------ repos
    def repository(self, full_name: str, *, full: bool = False, permissions: dict | None = None) -> dict:
        """Schema `repository` (full=False: PR head/base) or `full-repository` (GET /repos/{owner}/{repo})."""
        r = self.repos[full_name]
        a = f"{self.api}/repos/{full_name}"
        created = iso(r.created_at)
        obj: dict[str, Any] = {
            "id": r.id,
            "node_id": node_id("R", r.id),
            "name": r.name,
            "full_name": full_name,
            "private": r.private,
            "owner": self.simple_user(r.owner),
            "html_url": f"{WEB}/{full_name}",
            "description": r.description,
            "fork": r.fork_of is not None,
            "url": a,
            "forks_url": f"{a}/forks",
            "keys_url": f"{a}/keys{{/key_id}}",
            "collaborators_url": f"{a}/collaborators{{/collaborator}}",
            "teams_url": f"{a}/teams",
            "hooks_url": f"{a}/hooks",
            "issue_events_url": f"{a}/issues/events{{/number}}",
            "events_url": f"{a}/events",
            "assignees_url": f"{a}/assignees{{/user}}",
            "branches_url": f"{a}/branches{{/branch}}",
            "tags_url": f"{a}/tags",
            "blobs_url": f"{a}/git/blobs{{/sha}}",
            "git_tags_url": f"{a}/git/tags{{/sha}}",
            "git_refs_url": f"{a}/git/refs{{/sha}}",
            "trees_url": f"{a}/git/trees{{/sha}}",
            "statuses_url": f"{a}/statuses/{{sha}}",
            "languages_url": f"{a}/languages",
            "stargazers_url": f"{a}/stargazers",
            "contributors_url": f"{a}/contributors",
            "subscribers_url": f"{a}/subscribers",
            "subscription_url": f"{a}/subscription",
            "commits_url": f"{a}/commits{{/sha}}",
            "git_commits_url": f"{a}/git/commits{{/sha}}",
            "comments_url": f"{a}/comments{{/number}}",
            "issue_comment_url": f"{a}/issues/comments{{/number}}",
            "contents_url": f"{a}/contents/{{+path}}",
            "compare_url": f"{a}/compare/{{base}}...{{head}}",
            "merges_url": f"{a}/merges",
            "archive_url": f"{a}/{{archive_format}}{{/ref}}",
            "downloads_url": f"{a}/downloads",
            "issues_url": f"{a}/issues{{/number}}",
            "pulls_url": f"{a}/pulls{{/number}}",
            "milestones_url": f"{a}/milestones{{/number}}",
            "notifications_url": f"{a}/notifications{{?since,all,participating}}",
            "labels_url": f"{a}/labels{{/name}}",
            "releases_url": f"{a}/releases{{/id}}",
            "deployments_url": f"{a}/deployments",
            "created_at": created,
            "updated_at": created,
            "pushed_at": created,
            "git_url": f"git://github.com/{full_name}.git",
            "ssh_url": f"git@github.com:{full_name}.git",
            "clone_url": f"{WEB}/{full_name}.git",
            "svn_url": f"{WEB}/{full_name}",
            "homepage": None,
            "size": 1024,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": "Python",
            "has_issues": True,
            "has_projects": True,
            "has_downloads": True,
            "has_wiki": True,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": 0,
            "license": {
                "key": "apache-2.0",
                "name": "Apache License 2.0",
                "spdx_id": "Apache-2.0",
                "url": f"{self.api}/licenses/apache-2.0",
                "node_id": "MDc6TGljZW5zZTI=",
            },
            "allow_forking": True,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "private" if r.private else "public",
            "forks": 0,
            "open_issues": 0,
            "watchers": 0,
            "default_branch": r.default_branch,
        }
        if permissions is not None:
            obj["permissions"] = permissions
        if full:
            obj.update({"network_count": 0, "subscribers_count": 0, "custom_properties": {}})
            if r.fork_of is not None and r.fork_of in self.repos:
                parent = self.repository(r.fork_of)
                obj["parent"] = parent
                obj["source"] = parent
        return obj

    # ---------------------------------------------------------------------------------- pull requests
    def _branch(self, repo: str, ref: str, sha: str) -> dict:
        owner = self.repos[repo].owner
        return {
            "label": f"{owner}:{ref}",
            "ref": ref,
            "sha": sha,
            "user": self.simple_user(owner),
            "repo": self.repository(repo),
        }

    def pull_request(self, pr: PullRequest, comments: int) -> dict:
        a = f"{self.api}/repos/{pr.repo}"
        html = f"{WEB}/{pr.repo}/pull/{pr.number}"
        return {
            "url": f"{a}/pulls/{pr.number}",
            "id": pr.id,
            "node_id": node_id("PR", pr.id),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": f"{a}/issues/{pr.number}",
            "commits_url": f"{a}/pulls/{pr.number}/commits",
            "review_comments_url": f"{a}/pulls/{pr.number}/comments",
            "review_comment_url": f"{a}/pulls/comments{{/number}}",
            "comments_url": f"{a}/issues/{pr.number}/comments",
            "statuses_url": f"{a}/statuses/{pr.head_sha}",
            "number": pr.number,
            "state": pr.state,
            "locked": False,
            "title": pr.title,
            "user": self.simple_user(pr.user),
            "body": pr.body,
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": iso(pr.created_at),
            "updated_at": iso(pr.updated_at),
            "closed_at": None,
            "merged_at": None,
            "merge_commit_sha": pr.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._branch(pr.head_repo, pr.head_ref, pr.head_sha),
            "base": self._branch(pr.repo, pr.base_ref, pr.base_sha),
            "_links": {
                "self": {"href": f"{a}/pulls/{pr.number}"},
                "html": {"href": html},
                "issue": {"href": f"{a}/issues/{pr.number}"},
                "comments": {"href": f"{a}/issues/{pr.number}/comments"},
                "review_comments": {"href": f"{a}/pulls/{pr.number}/comments"},
                "review_comment": {"href": f"{a}/pulls/comments{{/number}}"},
                "commits": {"href": f"{a}/pulls/{pr.number}/commits"},
                "statuses": {"href": f"{a}/statuses/{pr.head_sha}"},
            },
            "author_association": self.association(pr.repo, pr.user),
            "auto_merge": None,
            "draft": pr.draft,
            "merged": False,
            "mergeable": True,
            "rebaseable": True,
            "mergeable_state": "clean",
            "merged_by": None,
            "comments": comments,
            "review_comments": 0,
            "maintainer_can_modify": pr.head_repo != pr.repo,
            "commits": 1,
            "additions": 10,
            "deletions": 2,
            "changed_files": 1,
        }

    def association(self, repo: str, login: str) -> str:
        if self.repos[repo].owner == login:
            return "OWNER"
        if self.users[login].type == "Bot":
            return "NONE"
        return "CONTRIBUTOR"

    # --------------------------------------------------------------------------------------- comments
    def issue_comment(self, c: IssueComment, is_pull: bool) -> dict:
        a = f"{self.api}/repos/{c.repo}"
        kind = "pull" if is_pull else "issues"
        return {
            "id": c.id,
            "node_id": node_id("IC", c.id),
            "url": f"{a}/issues/comments/{c.id}",
            "html_url": f"{WEB}/{c.repo}/{kind}/{c.issue_number}#issuecomment-{c.id}",
            "body": c.body,
            "user": self.simple_user(c.user),
            "created_at": iso(c.created_at),
            "updated_at": iso(c.updated_at),
            "issue_url": f"{a}/issues/{c.issue_number}",
            "author_association": self.association(c.repo, c.user),
            "performed_via_github_app": None,
            "reactions": {
                "url": f"{a}/issues/comments/{c.id}/reactions",
                "total_count": 0,
                "+1": 0,
                "-1": 0,
                "laugh": 0,
                "hooray": 0,
                "confused": 0,
                "heart": 0,
                "rocket": 0,
                "eyes": 0,
            },
        }

    # ------------------------------------------------------------------------------------- check runs
    def check_run(self, cr: CheckRun, pulls: list[PullRequest]) -> dict:
        a = f"{self.api}/repos/{cr.repo}"
        html = f"{WEB}/{cr.repo}/runs/{cr.id}"
        app = dict(GITHUB_ACTIONS_APP)
        app["owner"] = self.simple_user("github")
        return {
            "id": cr.id,
            "name": cr.name,
            "node_id": node_id("CR", cr.id),
            "head_sha": cr.head_sha,
            "external_id": cr.external_id,
            "url": f"{a}/check-runs/{cr.id}",
            "html_url": html,
            "details_url": cr.details_url if cr.details_url is not None else html,
            "status": cr.status,
            "conclusion": cr.conclusion,
            "started_at": iso(cr.started_at),
            "completed_at": iso(cr.completed_at),
            "output": {
                "title": cr.output.get("title"),
                "summary": cr.output.get("summary"),
                "text": cr.output.get("text"),
                "annotations_count": len(cr.annotations),
                "annotations_url": f"{a}/check-runs/{cr.id}/annotations",
            },
            "check_suite": {"id": cr.check_suite_id},
            "app": app,
            "pull_requests": [
                {
                    "url": f"{a}/pulls/{pr.number}",
                    "id": pr.id,
                    "number": pr.number,
                    "head": {"ref": pr.head_ref, "sha": pr.head_sha, "repo": self._mini_repo(pr.head_repo)},
                    "base": {"ref": pr.base_ref, "sha": pr.base_sha, "repo": self._mini_repo(pr.repo)},
                }
                for pr in pulls
            ],
        }

    def _mini_repo(self, full_name: str) -> dict:
        r = self.repos[full_name]
        return {"id": r.id, "url": f"{self.api}/repos/{full_name}", "name": r.name}

    # ------------------------------------------------------------------------------------- rate limit
    @staticmethod
    def rate_limit(core: dict) -> dict:
        def other(limit: int) -> dict:
            return {"limit": limit, "remaining": limit, "reset": core["reset"], "used": 0}

        return {
            "resources": {
                "core": core,
                "search": other(30),
                "graphql": other(5000),
                "integration_manifest": other(5000),
                "code_search": other(10),
            },
            "rate": core,
        }
