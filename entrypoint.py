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
from dlci.github.output import OutputFolder  # noqa: E402
from dlci.report.document import Report  # noqa: E402

# every input action.yml declares (tests keep the two in step)
INPUTS = ("mode", "token", "base", "head", "repo-path", "budget", "targets", "sources", "fail-on", "out", "shard",
          "shards-dir", "runner-labels", "comment", "check-run", "check-name", "workers")
MODES = ("single", "plan", "run", "report")


def _settings() -> dict:
    from dlci import redact
    from dlci.exec.engine import is_secret_name
    token = R.get_input("token")
    for name, value in list(os.environ.items()):  # the token and every other secret this step was given
        if name == "INPUT_TOKEN" or is_secret_name(name):
            redact.register(value)
            # no child of this process (git, the sandbox's launcher, helpers) inherits them: only the posting code
            # has the token, from these settings
            del os.environ[name]
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
            "sources": R.get_input("sources"), "token": token}


def _revisions(s: dict):
    """(PullRequest or None, base, head): the event's PR unless base/head inputs say otherwise."""
    base, head = R.get_input("base"), R.get_input("head")
    pr = None
    name, payload = R.read_event()
    if name == "pull_request_target" and s["mode"] in ("single", "run"):
        # pull_request_target runs in the base repository's context, with a token that can write and its secrets,
        # on the base's workflow: scanning the PR's head there hands all of that to the PR's code
        raise R.EventError("mode {} refuses pull_request_target: that event runs with the base repository's "
                           "write token and secrets, and dlci would run the pull request's code in it. Run "
                           "dlci on pull_request (for forks, the fork-safe pair dlci-fork-run.yml + "
                           "dlci-fork-post.yml posts with a write token without running their code)"
                           .format(s["mode"]))
    if name in ("pull_request", "pull_request_target", "merge_group"):
        pr = R.pull_request(name, payload)
    elif not (base and head):
        raise R.EventError(f"event {name or '(none)'} has no pull request: give the base and head inputs")
    return pr, base or pr.base_sha, head or pr.head_sha


def _scan(s: dict, out: OutputFolder, base: str, head: str, targets: str | None) -> tuple[int, Report | None, dict]:
    """Run dlci's scan of the PR in a sandbox (dlci.github.sandbox: another uid, a clean environment, its own
    clone and output folder); (exit code, report, reproducers). The scan's results are read back as untrusted data.
    An internal failure still returns the partial report the scan wrote, so that what was found gets posted."""
    from dlci.commands.common import say
    from dlci.exec import interp
    from dlci.github import sandbox as SB
    _load_posting_code()
    try:
        box = SB.prepare(say, ["the token input (this process)"] if s["token"] else [])
    except SB.SandboxRefused as e:
        raise R.EventError(f"dlci: {e}") from None
    code = ExitCode.CLEAN
    try:
        with R.group("dlci scan"), R.commands_off():  # framework logs are untrusted: no workflow commands in them
            try:
                base_sha, head_sha = box.clone(Path(s["repo_path"]), [base, head])
                cmd = interp.command("dlci", "scan", "--repo", str(box.repo), "--base", base_sha, "--head", head_sha,
                                     "--out", str(box.out), "--budget", str(s["budget"]), "--workers", s["workers"],
                                     "--fail-on", "never", *(["--sources", s["sources"]] if s["sources"] else []),
                                     *(["--targets", targets] if targets else []))
                rc = box.run(cmd, lambda line: print(line, flush=True))
                code = {0: ExitCode.CLEAN, 1: ExitCode.CLEAN, 2: ExitCode.USAGE}.get(rc, ExitCode.INTERNAL)
            except SB.SandboxError as e:
                say(f"error: {e}")
                code = ExitCode.INTERNAL
            except (Exception, KeyboardInterrupt, cancel.Cancelled):
                say("internal error or cancelled:\n" + traceback.format_exc()[-3000:])
                code = ExitCode.INTERNAL
            box.kill_leftovers()
            report, scripts = _adopt(box, out, Path(s["repo_path"]))
    finally:
        box.remove()
    if report is not None and report.interrupted:
        code = ExitCode.INTERNAL
    return code, report, scripts


def _load_posting_code() -> None:
    """Import and read everything the posting code needs before the pull request's code runs: nothing is loaded
    from disk after it (defence in depth; the scan's uid cannot write these files in the first place)."""
    import github  # noqa: F401
    import github_action_utils  # noqa: F401
    import jsonschema  # noqa: F401
    import requests  # noqa: F401
    from dlci.github import api, comment  # noqa: F401
    from dlci.report import intake, render_markdown  # noqa: F401
    comment._env().get_template("comment.md.j2")


def _adopt(box, out: OutputFolder, repo: Path) -> tuple[Report | None, dict]:
    """The sandboxed scan's results, validated (dlci.report.intake), redacted and written into ``out`` by this
    process; (None, {}) when the scan left no findings.json, or one that does not pass validation."""
    from dlci import redact
    from dlci.commands.common import say
    from dlci.report import intake
    if not intake.exists(box.out, "findings.json"):
        return None, {}
    try:
        results = intake.read_results(box.out)
    except intake.IntakeError as e:
        say(f"error: the scan's results are not dlci's (nothing of them is posted): {e}")
        return None, {}
    # the scan saw its own clone and folder: the report names the repository and output the user knows
    moved = {str(box.repo): str(repo.resolve()), str(box.out.resolve()): str(out.path.resolve()),
             str(box.out): str(out.path.resolve())}

    def place(v):
        if isinstance(v, str):
            for old, new in moved.items():
                v = v.replace(old, new)
            return v
        if isinstance(v, dict):
            return {k: place(x) for k, x in v.items()}
        return [place(x) for x in v] if isinstance(v, list) else v
    report = Report.from_dict(redact.data(place(results.report.to_dict())))
    scripts = {rel: redact.data_bytes(data) for rel, data in results.scripts.items()}
    for name, cap in (("ops.json", 16 << 20), ("results.jsonl", 64 << 20)):
        if intake.exists(box.out, name):
            try:
                out.write(name, redact.data_bytes(intake.read_file(box.out, name, cap)))
            except intake.IntakeError as e:
                say(f"not kept: {e}")
    out.write_report(report, scripts)
    return report, scripts


def _fresh_output(s: dict) -> OutputFolder:
    """The output folder, made fresh (dlci.github.output). In mode report it must not hold the results it reads."""
    if s["mode"] == "report":
        shards = Path(os.path.abspath(R.get_input("shards-dir", "dlci-shards")))
        out = Path(os.path.abspath(s["out"]))
        if shards == out or out in shards.parents:
            raise R.EventError(f"input out ({s['out']}) must not hold shards-dir ({shards}): it is emptied first")
    return OutputFolder.fresh(s["out"])


def _post(s: dict, out: OutputFolder, report: Report, scripts: dict, repo: str | None, number: int | None,
          head_sha: str | None) -> dict:
    """Comment, check run, job summary, outputs: rendered from the validated report and the reproducers' bytes
    intake returned, never from files read again. Returns the outputs written."""
    from dlci import redact
    from dlci.github import comment as C
    from dlci.report import render_markdown
    doc = redact.data(report.to_dict())  # every text posted or written passes redaction, and again at the end
    details = None
    if os.environ.get("GITHUB_SERVER_URL") and os.environ.get("GITHUB_REPOSITORY") and os.environ.get("GITHUB_RUN_ID"):
        details = (f"{os.environ['GITHUB_SERVER_URL']}/{os.environ['GITHUB_REPOSITORY']}/actions/runs/"
                   f"{os.environ['GITHUB_RUN_ID']}")
    body = redact.text(C.render(doc, scripts, details_url=details, version=_version()))
    out.write("comment.md", body.encode("utf-8"))
    R.write_summary(redact.text(render_markdown(doc)))
    outputs = {"verdict": C.verdict_line(doc), "findings": len(report.findings),
               "new-findings": sum(1 for f in report.findings if is_new(f)), "comment-id": "",
               "check-run-id": "", "report-path": str(out.path / "report.md")}
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
            gap = bool((doc.get("pr") or {}).get("test_gap"))  # untested changed code: neutral, never a pass
            conclusion = "failure" if n_counted else ("neutral" if report.findings or gap else "success")
            notes, left_out = api.annotations(doc)
            notes = redact.data(notes)
            outputs["check-run-id"] = poster.check_run(
                head_sha, s["check_name"], conclusion, C.verdict_line(doc), body, notes,
                text=f"{left_out} more annotation(s) not shown (at most {api.ANNOTATIONS_TOTAL} per check run)."
                if left_out else "")
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
    from dlci import redact
    api_error = outputs.pop("api-error", False)
    R.set_outputs({k: redact.text(str(v)) for k, v in outputs.items()})
    if scan_code not in (ExitCode.CLEAN, ExitCode.FINDINGS) or api_error:
        return ExitCode.INTERNAL
    return ExitCode.FINDINGS if report.counted(s["fail_on"]) else ExitCode.CLEAN


def mode_single(s: dict, out: OutputFolder) -> int:
    pr, base, head = _revisions(s)
    code, report, scripts = _scan(s, out, base, head, s["targets"] or None)
    if report is None:
        return code or ExitCode.INTERNAL
    _write_pr_file(out, pr, head)
    outputs = _post(s, out, report, scripts, pr.repo if pr else os.environ.get("GITHUB_REPOSITORY"),
                    pr.number if pr else None, head)
    return _finish(s, report, outputs, code)


def mode_plan(s: dict, out: OutputFolder) -> int:
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
    out.write("plan.json", json.dumps({**planned, "ops": analysis.to_dict()}, indent=2).encode())
    R.set_outputs({"matrix": json.dumps(matrix), "verdict": f"{len(matrix['include'])} shard(s)"})
    # the reasons name the PR's files: a file name holding a newline and "::set-env" must stay one plain line
    with R.commands_off():
        print(f"plan: {len(analysis.touches)} touched converter entries -> {len(matrix['include'])} shard(s)")
        for shard in planned["shards"]:  # why each shard exists: what it tests and where that code runs
            print(R.log_line(f"  {shard['shard']} on {shard['runner']}: {shard['why'][0]}"
                             + (f" (+{len(shard['why']) - 1} more)" if len(shard["why"]) > 1 else "")))
        for miss in planned["unrouted"]:
            print(R.log_line(f"  not planned ({miss['reason']}): {miss['touches'][0]}"
                             + (f" (+{len(miss['touches']) - 1} more)" if len(miss["touches"]) > 1 else "")))
    return ExitCode.CLEAN


def mode_run(s: dict, out: OutputFolder) -> int:
    shard = R.get_input("shard")
    if not shard:
        raise R.EventError("mode run needs the shard input (from the plan's matrix: ${{ matrix.shard }})")
    kind, _, target = shard.partition("-")  # <kind>-<target>[+<target>...] (dlci.github.shards.plan)
    targets = target.replace("+", ",") if target and target != "none" else (s["targets"] or None)
    pr, base, head = _revisions(s)
    code, report, _scripts = _scan(s, out, base, head, targets)
    out.write("shard.json", json.dumps({"shard": shard, "kind": kind}).encode())
    _write_pr_file(out, pr, head)
    if report is None:
        return code or ExitCode.INTERNAL
    R.set_outputs({"verdict": f"shard {shard}: {len(report.findings)} finding(s)", "findings": len(report.findings),
                   "report-path": str(out.path / "report.md")})
    return ExitCode.CLEAN if code in (ExitCode.CLEAN, ExitCode.FINDINGS) else code


MAX_SHARDS = 64  # result folders one report merges


def _result_folders(shards_dir: Path) -> list[Path]:
    """The folders holding a findings.json under ``shards_dir`` (links are not followed; a findings.json that is a
    link counts, and intake refuses it)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(shards_dir, followlinks=False):
        dirnames.sort()
        if "findings.json" in filenames or "findings.json" in dirnames:
            found.append(Path(dirpath))
        if len(found) > MAX_SHARDS:
            raise R.EventError(f"more than {MAX_SHARDS} result folders under shards-dir {shards_dir}")
    return found


def mode_report(s: dict, out: OutputFolder) -> int:
    from dlci.github.shards import merge
    from dlci.report import intake
    shards_dir = Path(R.get_input("shards-dir", "dlci-shards"))
    dirs = _result_folders(shards_dir) if shards_dir.is_dir() and not shards_dir.is_symlink() else []
    if not dirs:
        raise R.EventError(f"no shard results (findings.json) under shards-dir {shards_dir}")
    # a shard ran the pull request's code and a fork uploads its own artifact: all of it is validated before
    # anything reads it, and one folder that fails validation means nothing is posted (IntakeError: exit 2)
    results = [intake.read_results(d) for d in dirs]
    report, scripts = merge(results)
    out.write_report(report, scripts)
    name, payload = R.read_event()
    if name in ("pull_request", "pull_request_target", "merge_group"):
        pr = R.pull_request(name, payload)
        repo, number, head = pr.repo, pr.number, pr.head_sha
    else:  # workflow_run after a fork's run: the PR comes from the (untrusted) artifact, checked against GitHub
        files = [r.pr_file for r in results if r.pr_file is not None]
        if not files:
            raise R.EventError("no pr.json in the shard results: cannot tell which pull request to report on")
        number, head = R.validate_pr_file(files[0])
        run_head = ((payload.get("workflow_run") or {}).get("head_sha"))
        if run_head != head:
            raise R.EventError("pr.json names a head commit other than the workflow run's: refusing to post")
        repo = (payload.get("repository") or {}).get("full_name") or os.environ.get("GITHUB_REPOSITORY")
        _check_pr_head(s, repo, number, head)
    outputs = _post(s, out, report, scripts, repo, number, head)
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


def _write_pr_file(out: OutputFolder, pr, head: str) -> None:
    if pr is not None:
        out.write("pr.json", json.dumps({"number": pr.number, "head_sha": head, "repo": pr.repo}).encode())


def run() -> int:
    cancel.install()  # a cancelled workflow run (SIGINT, then SIGTERM) still posts what it found
    try:
        settings = _settings()
        # before anything else, so that no early return leaves what a pull request committed there
        out = _fresh_output(settings)
        return {"single": mode_single, "plan": mode_plan, "run": mode_run, "report": mode_report}[settings["mode"]](
            settings, out)
    except (R.EventError, UsageError) as e:
        R.error(str(e))
        return ExitCode.USAGE
    except Exception:
        R.error("internal error: " + traceback.format_exc()[-3000:])
        return ExitCode.INTERNAL


if __name__ == "__main__":
    sys.exit(run())
