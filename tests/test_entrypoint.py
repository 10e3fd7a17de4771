"""The action's entrypoint as GitHub runs it: a subprocess with INPUT_*, an event file, GITHUB_OUTPUT and the job
summary, talking to a local fake GitHub that validates every request against GitHub's OpenAPI description."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test here runs the action's real scan (or reuses one)

pytest.importorskip("tvm")

from dlci import samples  # noqa: E402
from fake_github import FakeGitHub  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REPO = "octo/tvm"
PR = 7


def pr_event(base: str, head: str, *, fork: bool = False) -> dict:
    """A pull_request webhook payload with the fields GitHub sends that dlci reads (and some it does not)."""
    head_repo = "forker/tvm" if fork else REPO
    return {
        "action": "synchronize", "number": PR,
        "pull_request": {
            "number": PR, "state": "open", "title": "Simplify ELU lowering", "draft": False,
            "head": {"sha": head, "ref": "pr/elu", "label": f"{head_repo.split('/')[0]}:pr/elu",
                     "repo": {"full_name": head_repo, "fork": fork}},
            "base": {"sha": base, "ref": "main", "label": "octo:main", "repo": {"full_name": REPO, "fork": False}},
            "user": {"login": "contributor", "type": "User"},
        },
        "repository": {"full_name": REPO, "name": "tvm", "owner": {"login": "octo"}, "private": False},
        "sender": {"login": "contributor", "type": "User"},
    }


def run_action(tmp: Path, fake: FakeGitHub, event: dict | None, inputs: dict, *, event_name="pull_request",
               cwd: Path | None = None, shell: bool = False) -> tuple[int, str, dict, str]:
    """The real entrypoint as the runner starts it; ``shell``: from a shell that stays its parent and holds the
    step's environment, token included (as a `run:` step's shell would)."""
    tmp.mkdir(parents=True, exist_ok=True)
    event_path = tmp / "event.json"
    if isinstance(event, dict):
        event_path.write_text(json.dumps(event))
    elif isinstance(event, str):
        event_path.write_text(event)
    output, summary = tmp / "github_output", tmp / "step_summary"
    output.write_text("")
    summary.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env.update({"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event_path),
                "GITHUB_API_URL": fake.url, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
                "GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": "1234", "GITHUB_SERVER_URL": "https://github.com",
                "DLCI_GITHUB_WRITE_SPACING": "0.2", "DLCI_GITHUB_MAX_WAIT": "2", "DLCI_GITHUB_RETRY_WAIT": "0.2"})
    env.update({f"INPUT_{k.upper()}": str(v) for k, v in inputs.items()})
    cmd = [sys.executable, str(ROOT / "entrypoint.py")]
    if shell:
        cmd = ["/bin/sh", "-c", '"$0" "$1"; rc=$?; exit $rc', *cmd]
    proc = subprocess.run(cmd, cwd=str(cwd or tmp), env=env, capture_output=True, text=True, timeout=1500)
    outputs = {}
    lines = output.read_text().splitlines()
    i = 0
    while i < len(lines):  # name<<DELIM ... DELIM, as github-action-utils writes them
        if "<<" in lines[i]:
            name, delim = lines[i].split("<<", 1)
            j = lines.index(delim, i + 1)
            outputs[name] = "\n".join(lines[i + 1:j])
            i = j + 1
        else:
            name, _, value = lines[i].partition("=")
            outputs[name] = value
            i += 1
    return proc.returncode, proc.stdout + proc.stderr, outputs, summary.read_text()


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return samples.build("tvm-elu-minimum", tmp_path_factory.mktemp("sample") / "repo")


@pytest.fixture(scope="module")
def first_scan(sample, tmp_path_factory):
    """One real single-mode run (the expensive part); later tests reuse its results through mode=report."""
    repo, base, head = sample
    tmp = tmp_path_factory.mktemp("single")
    fake = FakeGitHub().start()
    fake.add_repo(REPO)
    fake.add_pull(REPO, PR, head_sha=head, base_sha=base, head_repo=REPO)
    code, log, outputs, summary = run_action(tmp, fake, pr_event(base, head),
                                             {"token": "ghs_app", "repo-path": str(repo), "budget": "150",
                                              "out": str(tmp / "out")})
    yield {"fake": fake, "tmp": tmp, "code": code, "log": log, "outputs": outputs, "summary": summary,
           "base": base, "head": head, "repo": repo}
    fake.stop()


def _shards(first, dest: Path) -> Path:
    shard = dest / "shards" / "results-cpu"
    shutil.copytree(first["tmp"] / "out", shard)
    return dest / "shards"


def test_single_mode_posts_one_comment_check_run_summary_and_outputs(first_scan):
    fake, code = first_scan["fake"], first_scan["code"]
    assert code == 1, first_scan["log"][-3000:]  # a new bug, fail-on new
    comments = fake.comments_on(REPO, PR)
    assert len(comments) == 1
    body = comments[0].body
    assert "NEW IN THIS PR" in body and "tvm.from_" in body and "```python" in body
    assert "fails on this PR, passes on base" in body and "selected by `python/tvm/relax/frontend/torch/" in body
    runs = fake.check_runs_for(REPO, first_scan["head"])
    assert len(runs) == 1 and runs[0].conclusion == "failure"
    assert any(a["annotation_level"] == "failure" and a["path"].endswith("base_fx_graph_translator.py")
               for a in runs[0].annotations)
    out = first_scan["outputs"]
    assert out["new-findings"] == "1" and out["comment-id"] == str(comments[0].id)
    assert out["check-run-id"] == str(runs[0].id) and "new bug" in out["verdict"]
    assert "dlci report" in first_scan["summary"]
    # untrusted output ran with workflow commands switched off, and switched back on after
    log = first_scan["log"]
    stop = re.search(r"^::stop-commands ?::(\S+)$", log, re.M)
    assert stop and log.index(stop.group(0)) < log.index("dlci: diff ")  # before the scan printed anything
    assert f"::{stop.group(1)}::" in log[stop.end():]
    fake.assert_no_violations()


def test_the_sample_bug_is_new_in_the_pr_with_a_reproducer_that_fails_on_head_only(first_scan):
    """What the scan behind the comment found (the sample breaks ELU in TVM's FX translator): new on ELU, passing on
    base, the changed statements reached, and a reproducer that passes on the installed (base) TVM standalone."""
    out = first_scan["tmp"] / "out"
    doc = json.loads((out / "findings.json").read_text())
    news = [f for f in doc["findings"] if f["new_in_pr"]]
    assert news, doc["findings"] or doc["stats"]
    for f in doc["findings"]:
        if not f["new_in_pr"]:
            # the directed search's mutants may show TVM 0.27's own ELU bugs (a bfloat16 input through FX), and
            # the fuzz share graphs of several operators: those fail on the base revision too, and must say so
            assert f["new_in_pr"] is False and f["base"]["status"] != "pass", f
            continue
        assert f["operator"] in ("aten::elu", "nn::ELU") and f["target"].startswith("tvm.from_")
        assert f["base"]["status"] == "pass"
        assert f["repro_checked"] is True and f["repro_passes_on_base"] is True
        assert f["reaches_change"] is True
    pr = doc["pr"]
    assert pr["operators"] == ["elu"]
    assert {t["file"] for t in pr["touched"]} == {"python/tvm/relax/frontend/torch/base_fx_graph_translator.py"}
    assert pr["coverage"]["reached_statements"] > 0
    assert json.loads((out / "ops.json").read_text())["operators"]
    report = (out / "report.md").read_text()
    assert "new in this PR" in report and "base_fx_graph_translator.py" in report
    # the reproducer is standalone: against the installed TVM (the base code) it passes
    repro = out / news[0]["repro"]
    assert subprocess.run([sys.executable, str(repro)], capture_output=True).returncode == 0


def test_second_run_updates_the_same_comment(first_scan, tmp_path):
    """A later run on the same PR whose results differ (here: one more test counted) edits our comment in place,
    and a user's comment quoting our marker is not taken for ours. The later run publishes through mode=report:
    the comment is written by the same code in both modes, and a second real scan would only cost minutes."""
    fake = first_scan["fake"]
    before = fake.comments_on(REPO, PR)[0]
    before_body = before.body  # the fake edits the comment object in place
    fake.add_comment(REPO, PR, "<!-- dlci:sticky-comment --> a user quoting our marker", user="octocat")
    fake.clear_log()
    shards = _shards(first_scan, tmp_path)
    findings = shards / "results-cpu" / "findings.json"
    doc = json.loads(findings.read_text())
    doc["stats"]["tests_run"] = doc["stats"].get("tests_run", 0) + 1
    findings.write_text(json.dumps(doc))
    code, log, outputs, _ = run_action(tmp_path, fake, pr_event(first_scan["base"], first_scan["head"]),
                                       {"token": "ghs_app", "mode": "report", "shards-dir": str(shards),
                                        "out": str(tmp_path / "merged")})
    assert code == 1, log[-3000:]
    ours = [c for c in fake.comments_on(REPO, PR) if c.user == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0].id == before.id and outputs["comment-id"] == str(before.id)
    assert "NEW IN THIS PR" in ours[0].body and ours[0].body != before_body
    writes = [r.method for r in fake.writes() if "/comments" in r.path]
    assert writes == ["PATCH"], (writes, log[-2000:])
    fake.assert_no_violations()


def test_unchanged_results_do_not_rewrite_the_comment(first_scan, tmp_path):
    fake = first_scan["fake"]
    shards = _shards(first_scan, tmp_path)
    inputs = {"token": "ghs_app", "mode": "report", "shards-dir": str(shards), "out": str(tmp_path / "merged"),
              "check-run": "false"}
    run_action(tmp_path / "a", fake, pr_event(first_scan["base"], first_scan["head"]), inputs)
    fake.clear_log()
    code, log, _, _ = run_action(tmp_path / "b", fake, pr_event(first_scan["base"], first_scan["head"]), inputs)
    assert code == 1 and "unchanged" in log
    assert fake.writes() == []


def test_retried_create_never_duplicates_and_rate_limits_are_waited_out(first_scan, tmp_path):
    fake = FakeGitHub().start()
    try:
        fake.add_repo(REPO)
        fake.add_pull(REPO, PR, head_sha=first_scan["head"], base_sha=first_scan["base"], head_repo=REPO)
        # the create is written but the client sees a 502; then the check run meets a secondary rate limit
        fake.fail_next("POST", f"/repos/{REPO}/issues/{PR}/comments", status=502, apply=True)
        fake.fail_next_secondary_rate_limit("POST", f"/repos/{REPO}/check-runs", retry_after=1)
        fake.fail_next("GET", f"/repos/{REPO}/issues/{PR}/comments", status=429, headers={"Retry-After": "1"})
        code, log, outputs, _ = run_action(tmp_path, fake, pr_event(first_scan["base"], first_scan["head"]),
                                           {"token": "ghs_app", "mode": "report",
                                            "shards-dir": str(_shards(first_scan, tmp_path)),
                                            "out": str(tmp_path / "merged")})
        assert code in (1, 3), log[-3000:]
        assert len(fake.comments_on(REPO, PR)) == 1
        writes = fake.writes()
        gaps = [b.time - a.time for a, b in zip(writes, writes[1:])]
        assert all(g >= 0.15 for g in gaps), gaps  # writes are spaced
        fake.assert_no_violations()
    finally:
        fake.stop()


def test_read_only_token_degrades_to_summary_and_artifact(first_scan, tmp_path):
    fake = FakeGitHub().start()
    try:
        fake.add_repo(REPO)
        fake.add_pull(REPO, PR, head_sha=first_scan["head"], base_sha=first_scan["base"], head_repo="forker/tvm")
        code, log, outputs, summary = run_action(
            tmp_path, fake, pr_event(first_scan["base"], first_scan["head"], fork=True),
            {"token": "ghs_fork", "mode": "report", "shards-dir": str(_shards(first_scan, tmp_path)),
             "out": str(tmp_path / "merged")})
        assert code == 1, log[-3000:]  # the policy's verdict, not an error
        assert "cannot write" in log
        assert fake.comments_on(REPO, PR) == []
        assert "dlci report" in summary and (tmp_path / "merged" / "comment.md").is_file()
        fake.assert_no_violations()
    finally:
        fake.stop()


def test_workflow_run_poster_checks_the_untrusted_pr_file(first_scan, tmp_path):
    fake = first_scan["fake"]
    shards = _shards(first_scan, tmp_path)
    event = {"action": "completed", "workflow_run": {"head_sha": "f" * 40, "event": "pull_request"},
             "repository": {"full_name": REPO}}
    code, log, _, _ = run_action(tmp_path, fake, event, {"token": "ghs_app", "mode": "report",
                                                         "shards-dir": str(shards), "out": str(tmp_path / "m")},
                                 event_name="workflow_run")
    assert code == 2 and "refusing to post" in log  # pr.json names another head than the run


def test_workflow_run_poster_posts_for_the_pr_the_artifact_names_only_if_its_head_matches(first_scan, tmp_path):
    fake = first_scan["fake"]
    fake.add_pull(REPO, 9, head_sha="9" * 40, base_sha=first_scan["base"], head_repo="other/tvm")
    event = {"action": "completed", "repository": {"full_name": REPO},
             "workflow_run": {"head_sha": first_scan["head"], "event": "pull_request", "conclusion": "success"}}
    shards = _shards(first_scan, tmp_path / "ok")
    code, log, outputs, _ = run_action(tmp_path / "ok", fake, event, {"token": "ghs_app", "mode": "report",
                                                                     "shards-dir": str(shards),
                                                                     "out": str(tmp_path / "ok" / "m")},
                                       event_name="workflow_run")
    assert code == 1, log[-2000:]
    assert outputs["comment-id"] == str(fake.comments_on(REPO, PR)[0].id)
    # a fork rewrites pr.json to aim at PR 9 (whose head is not the run's commit): refused, nothing posted there
    shards = _shards(first_scan, tmp_path / "bad")
    pr_file = next(shards.rglob("pr.json"))
    pr_file.write_text(json.dumps({**json.loads(pr_file.read_text()), "number": 9}))
    code, log, _, _ = run_action(tmp_path / "bad", fake, event, {"token": "ghs_app", "mode": "report",
                                                                "shards-dir": str(shards),
                                                                "out": str(tmp_path / "bad" / "m")},
                                 event_name="workflow_run")
    assert code == 2 and "refusing to post" in log
    assert fake.comments_on(REPO, 9) == []
    fake.assert_no_violations()


def test_plan_mode_outputs_a_matrix(first_scan, tmp_path):
    code, log, outputs, _ = run_action(
        tmp_path, first_scan["fake"], pr_event(first_scan["base"], first_scan["head"]),
        {"mode": "plan", "repo-path": str(first_scan["repo"]), "out": str(tmp_path / "plan"),
         "runner-labels": json.dumps({"cpu": ["ubuntu-latest"], "arm64": ["self-hosted", "arm64"]})})
    assert code == 0, log[-2000:]
    matrix = json.loads(outputs["matrix"])
    shards = {(s["kind"], s["targets"]) for s in matrix["include"]}
    assert shards == {(k, t) for k in ("cpu", "arm64") for t in ("tvm.from_exported_program", "tvm.from_fx")}


@pytest.mark.parametrize("event, inputs, message", [
    ("{not json", {}, "not valid JSON"),
    ({"pull_request": {"number": 7}}, {}, "lacks pull_request"),
    (None, {"mode": "bogus"}, "input mode must be"),
    (None, {"budget": "soon"}, "input budget must be a number"),
    (None, {"comment": "maybe"}, "input comment must be true or false"),
])
def test_bad_event_or_input_is_a_clear_error_with_exit_2(first_scan, tmp_path, event, inputs, message):
    if event is None:
        event = pr_event(first_scan["base"], first_scan["head"])
    code, log, _, _ = run_action(tmp_path, first_scan["fake"], event, {"token": "ghs_app", **inputs})
    assert code == 2, log[-2000:]
    assert "::error" in log and message in log
