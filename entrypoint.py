#!/usr/bin/env python3
"""GitHub Action entry point (docker action): reads INPUT_* and the event, runs dlci, posts the results.

Modes (input ``mode``):
  single  one job: scan the PR, then comment, check run, job summary and outputs
  plan    cheap: diff -> touched operators -> a matrix of shards (runner kind x target) for ``strategy.matrix``
  run     one shard of the plan (input ``shard``): scan with that shard's targets; results stay in ``out`` for
          upload as an artifact, nothing is posted
  report  merge the shards found under ``shards-dir`` (or a fork's uploaded results) and post
Exit codes: 0 clean, 1 findings counted by ``fail-on``, 2 bad input or event file, 3 internal or GitHub API error.
A fork's read-only token is not an error: the results go to the job summary and ``out`` (for a workflow_run poster).
"""
from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlci.errors import ExitCode, InfrastructureError, UsageError  # noqa: E402
from dlci.exec import cancel  # noqa: E402
from dlci.findings import is_new  # noqa: E402
from dlci.github import runner as R  # noqa: E402
from dlci.report.document import Report  # noqa: E402

# every input action.yml declares (tests keep the two in step)
INPUTS = ("mode", "token", "base", "head", "repo-path", "budget", "targets", "sources", "fail-on", "out", "shard",
          "shards-dir", "runner-labels", "comment", "check-run", "check-name", "workers")
MODES = ("single", "plan", "run", "report")


def _settings() -> dict:
    mode = R.get_input("mode", "single")
    if mode not in MODES:
        raise R.EventError(f"input mode must be one of {', '.join(MODES)}, got {mode!r}")
    fail_on = R.get_input("fail-on", "new")
    if fail_on not in ("any", "new", "never"):
        raise R.EventError(f"input fail-on must be any, new or never, got {fail_on!r}")
    workers = R.get_input("workers", "2")
    if not workers.isdigit() or int(workers) < 1:
        raise R.EventError(f"input workers must be a positive integer, got {workers!r}")
    return {"mode": mode, "fail_on": fail_on, "workers": workers, "out": Path(R.get_input("out", "dlci-out")),
            "budget": R.get_float("budget", "600"), "comment": R.get_bool("comment", True),
            "check_run": R.get_bool("check-run", True), "check_name": R.get_input("check-name", "dlci"),
            "repo_path": R.get_input("repo-path", "."), "targets": R.get_input("targets"),
            "sources": R.get_input("sources"), "token": R.get_input("token")}


def _revisions(s: dict):
    """(PullRequest or None, base, head): the event's PR unless base/head inputs say otherwise."""
    base, head = R.get_input("base"), R.get_input("head")
    pr = None
    name, payload = R.read_event()
    if name in ("pull_request", "pull_request_target", "merge_group"):
        pr = R.pull_request(name, payload)
    elif not (base and head):
        raise R.EventError(f"event {name or '(none)'} has no pull request: give the base and head inputs")
    return pr, base or pr.base_sha, head or pr.head_sha


def _scan(s: dict, base: str, head: str, targets: str | None) -> tuple[int, Report | None]:
    """Run dlci's scan of the PR; (exit code, report). An internal failure still returns the partial report the
    scan wrote, so that what was found gets posted."""
    from dlci.campaign import RunOptions
    from dlci.commands.common import say, split
    from dlci.scan import ScanRequest, scan
    code = ExitCode.CLEAN
    with R.group("dlci scan"), R.commands_off():  # framework logs are untrusted: no workflow commands in them
        try:
            options = RunOptions(out=s["out"], budget=s["budget"], workers=int(s["workers"]), fail_on="never",
                                 sources=split(s["sources"]) if s["sources"] else None, progress=say)
            report = scan(ScanRequest(repo=Path(s["repo_path"]), base=base, head=head,
                                      targets=split(targets) if targets else None, options=options))
            return (ExitCode.INTERNAL if report.interrupted else ExitCode.CLEAN), report
        except UsageError as e:
            say(f"error: {e}")
            return ExitCode.USAGE, None
        except InfrastructureError as e:
            say(f"error: {e}")
            code = ExitCode.INTERNAL
        except (Exception, KeyboardInterrupt, cancel.Cancelled):
            say("internal error or cancelled:\n" + traceback.format_exc()[-3000:])
            code = ExitCode.INTERNAL
    partial = s["out"] / "findings.json"
    return code, Report.read(partial) if partial.is_file() else None


def _post(s: dict, report: Report, repo: str | None, number: int | None, head_sha: str | None) -> dict:
    """Comment, check run, job summary, outputs. Returns the outputs written."""
    from dlci.github import comment as C
    from dlci.report import render_markdown
    doc = report.to_dict()
    details = None
    if os.environ.get("GITHUB_SERVER_URL") and os.environ.get("GITHUB_REPOSITORY") and os.environ.get("GITHUB_RUN_ID"):
        details = (f"{os.environ['GITHUB_SERVER_URL']}/{os.environ['GITHUB_REPOSITORY']}/actions/runs/"
                   f"{os.environ['GITHUB_RUN_ID']}")
    body = C.render(doc, s["out"], details_url=details, version=_version())
    (s["out"] / "comment.md").write_text(body, encoding="utf-8")
    R.write_summary(render_markdown(doc))
    outputs = {"verdict": C.verdict_line(doc), "findings": len(report.findings),
               "new-findings": sum(1 for f in report.findings if is_new(f)), "comment-id": "",
               "check-run-id": "", "report-path": str(s["out"] / "report.md")}
    if not s["token"] or not repo or (not s["comment"] and not s["check_run"]):
        return outputs
    from github import GithubException
    from dlci.github import api
    poster = api.Poster(_client(s), repo, log=lambda m: print(m, flush=True),
                        retry_wait=float(os.environ.get("DLCI_GITHUB_RETRY_WAIT", "2.0")))
    try:
        R.start_group("post to GitHub")
        if s["comment"] and number:
            cid, action = poster.upsert_comment(number, body)
            outputs["comment-id"] = cid
            print(f"PR comment {cid}: {action}", flush=True)
        if s["check_run"] and head_sha:
            n_counted = report.counted(s["fail_on"])
            conclusion = "failure" if n_counted else ("neutral" if report.findings else "success")
            outputs["check-run-id"] = poster.check_run(head_sha, s["check_name"], conclusion, C.verdict_line(doc),
                                                       body, api.annotations(doc))
    except api.ReadOnlyToken as e:
        R.warning("the token cannot write to this repository (a fork's pull request?): results are in the job "
                  f"summary and in {s['out']} for a workflow_run poster ({str(e)[:200]})")
    except GithubException as e:
        R.error(f"GitHub API error after retries: {e.status} {str(e.data)[:300]}")
        outputs["api-error"] = True
    finally:
        R.end_group()
    return outputs


def _client(s: dict):
    """PyGithub on GITHUB_API_URL (GitHub Enterprise Server too); the waits are tunable for tests."""
    from dlci.github import api
    return api.client(s["token"], os.environ.get("GITHUB_API_URL", "https://api.github.com"),
                      max_wait=float(os.environ.get("DLCI_GITHUB_MAX_WAIT", "60")),
                      write_spacing=float(os.environ.get("DLCI_GITHUB_WRITE_SPACING", "1.0")))


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("dlci")
    except Exception:
        return ""


def _finish(s: dict, report: Report, outputs: dict, scan_code: int) -> int:
    api_error = outputs.pop("api-error", False)
    R.set_outputs(outputs)
    if scan_code not in (ExitCode.CLEAN, ExitCode.FINDINGS) or api_error:
        return ExitCode.INTERNAL
    return ExitCode.FINDINGS if report.counted(s["fail_on"]) else ExitCode.CLEAN


def mode_single(s: dict) -> int:
    pr, base, head = _revisions(s)
    code, report = _scan(s, base, head, s["targets"] or None)
    if report is None:
        return code or ExitCode.INTERNAL
    _write_pr_file(s["out"], pr, head)
    outputs = _post(s, report, pr.repo if pr else os.environ.get("GITHUB_REPOSITORY"), pr.number if pr else None,
                    head)
    return _finish(s, report, outputs, code)


def mode_plan(s: dict) -> int:
    from dlci import profiles
    from dlci.diff import DiffError, GitRepo
    from dlci.github.shards import parse_runner_labels, plan
    _pr, base, head = _revisions(s)
    runners = parse_runner_labels(R.get_input("runner-labels"))
    try:
        analysis = profiles.analyse(GitRepo(s["repo_path"], base, head))
    except DiffError as e:
        raise R.EventError(str(e)) from None
    wanted = {t.strip() for t in s["targets"].split(",") if t.strip()} if s["targets"] else None
    planned = plan(analysis.touches, runners, wanted)
    matrix = planned["matrix"]
    s["out"].mkdir(parents=True, exist_ok=True)
    (s["out"] / "plan.json").write_text(json.dumps({**planned, "ops": analysis.to_dict()}, indent=2))
    R.set_outputs({"matrix": json.dumps(matrix), "verdict": f"{len(matrix['include'])} shard(s)"})
    print(f"plan: {len(analysis.touches)} touched converter entries -> {len(matrix['include'])} shard(s)")
    for shard in planned["shards"]:  # why each shard exists: what it tests and where that code runs
        print(f"  {shard['shard']} on {shard['runner']}: {shard['why'][0]}"
              + (f" (+{len(shard['why']) - 1} more)" if len(shard["why"]) > 1 else ""))
    for miss in planned["unrouted"]:
        print(f"  not planned ({miss['reason']}): {miss['touches'][0]}"
              + (f" (+{len(miss['touches']) - 1} more)" if len(miss["touches"]) > 1 else ""))
    return ExitCode.CLEAN


def mode_run(s: dict) -> int:
    shard = R.get_input("shard")
    if not shard:
        raise R.EventError("mode run needs the shard input (from the plan's matrix: ${{ matrix.shard }})")
    kind, _, target = shard.partition("-")  # <kind>-<target>[+<target>...] (dlci.github.shards.plan)
    targets = target.replace("+", ",") if target and target != "none" else (s["targets"] or None)
    pr, base, head = _revisions(s)
    code, report = _scan(s, base, head, targets)
    s["out"].mkdir(parents=True, exist_ok=True)
    (s["out"] / "shard.json").write_text(json.dumps({"shard": shard, "kind": kind}))
    _write_pr_file(s["out"], pr, head)
    if report is None:
        return code or ExitCode.INTERNAL
    R.set_outputs({"verdict": f"shard {shard}: {len(report.findings)} finding(s)", "findings": len(report.findings),
                   "report-path": str(s["out"] / "report.md")})
    return ExitCode.CLEAN if code in (ExitCode.CLEAN, ExitCode.FINDINGS) else code


def mode_report(s: dict) -> int:
    from dlci.github.shards import merge
    shards_dir = Path(R.get_input("shards-dir", "dlci-shards"))
    dirs = sorted({p.parent for p in shards_dir.rglob("findings.json")}) if shards_dir.is_dir() else []
    if not dirs:
        raise R.EventError(f"no shard results (findings.json) under shards-dir {shards_dir}")
    report = merge(dirs, s["out"])
    report.write(s["out"])
    name, payload = R.read_event()
    if name in ("pull_request", "pull_request_target", "merge_group"):
        pr = R.pull_request(name, payload)
        repo, number, head = pr.repo, pr.number, pr.head_sha
    else:  # workflow_run after a fork's run: the PR comes from the (untrusted) artifact, checked against GitHub
        files = sorted(shards_dir.rglob("pr.json"))
        if not files:
            raise R.EventError("no pr.json in the shard results: cannot tell which pull request to report on")
        number, head = R.validate_pr_file(json.loads(files[0].read_text(encoding="utf-8")))
        run_head = ((payload.get("workflow_run") or {}).get("head_sha"))
        if run_head != head:
            raise R.EventError("pr.json names a head commit other than the workflow run's: refusing to post")
        repo = (payload.get("repository") or {}).get("full_name") or os.environ.get("GITHUB_REPOSITORY")
        _check_pr_head(s, repo, number, head)
    outputs = _post(s, report, repo, number, head)
    return _finish(s, report, outputs, ExitCode.CLEAN)


def _check_pr_head(s: dict, repo: str, number: int, head: str) -> None:
    """A fork controls its own run and so its artifact: the PR it names must really have that head commit, or a
    fork could send its results to someone else's pull request."""
    if not s["token"]:
        return
    from github import GithubException
    try:
        actual = _client(s).get_repo(repo, lazy=True).get_pull(number).head.sha
    except GithubException as e:
        raise R.EventError(f"cannot look up pull request #{number} named by pr.json: {e.status}") from None
    if actual != head:
        raise R.EventError(f"pr.json names pull request #{number}, whose head is {actual[:12]}, not the run's "
                           f"{head[:12]}: refusing to post")


def _write_pr_file(out: Path, pr, head: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if pr is not None:
        (out / "pr.json").write_text(json.dumps({"number": pr.number, "head_sha": head, "repo": pr.repo}))


def run() -> int:
    cancel.install()  # a cancelled workflow run (SIGINT, then SIGTERM) still posts what it found
    try:
        settings = _settings()
        return {"single": mode_single, "plan": mode_plan, "run": mode_run, "report": mode_report}[settings["mode"]](
            settings)
    except (R.EventError, UsageError) as e:
        R.error(str(e))
        return ExitCode.USAGE
    except Exception:
        R.error("internal error: " + traceback.format_exc()[-3000:])
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(run())
