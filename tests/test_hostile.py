"""Hostile pull requests against the real entrypoint and the fake GitHub: a fork's artifact naming files outside
itself or carrying mentions and fence breakers, a pull request whose converter hunts for the token, a `.dlci.yml`
that tries to set its own verdict, and the smaller ways in (pull_request_target, plan-mode log lines)."""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_github import FakeGitHub
from test_entrypoint import PR, REPO, pr_event, run_action

ROOT = Path(__file__).resolve().parent.parent

# a finding shaped like dlci's, with every string field a pull request can set made hostile
HOSTILE = "`@octo/maintainers ping ``` ## injected\n<img src=x onerror=alert(1)> see #12 GH-3 https://evil.example"


def _finding(repro: str, **over) -> dict:
    return {"id": "F001", "oracle": "crash", "operator": "aten::elu" + HOSTILE, "target": "tvm.from_fx",
            "target_version": "0.27", "symptom": "crash " + HOSTILE, "stage": "convert", "signature": "sig" + HOSTILE,
            "message": "boom\n```\n@octo/maintainers look\n```\n" + HOSTILE, "instance_id": "i1", "origin": {},
            "instances": ["i1"], "operators": ["aten::elu"], "also_in": [], "new_in_pr": True,
            "base": {"status": "pass"}, "repro": repro, "repro_checked": True, "repro_passes_on_base": True, **over}


def _artifact(dest: Path, head: str, repro: str = "repro/F001_tvm_from_fx_elu.py", **over) -> Path:
    """A fork's uploaded results: findings.json, a reproducer, pr.json naming PR 7 at ``head``."""
    dest.mkdir(parents=True)
    (dest / "repro").mkdir()
    (dest / "repro" / "F001_tvm_from_fx_elu.py").write_text("print('REPRODUCED')\n# ``` @octo/maintainers\n")
    doc = {"version": 1, "findings": [_finding(repro, **over)],
           "stats": {"tests_run": 3, "tests_valid": 3, "seconds": 1.0, "flaky": [{"signature": "@octo/x #5"}],
                     "per_target": {"tvm.from_fx": {"pass": 2, "unsupported": 0, "invalid": 0, "crash": 1,
                                                    "inconsistency": 0}}},
           "pr": {"base": "a" * 40, "head": head, "operators": ["elu"],
                  "touched": [{"operator": "elu.default", "namespace": "aten", "converter": "self._elu",
                               "file": "python/tvm/relax/frontend/torch/base_fx_graph_translator.py", "line": 466,
                               "why": "@octo/maintainers #9", "targets": ["tvm.from_fx"], "profile": "tvm"}]}}
    (dest / "findings.json").write_text(json.dumps(doc))
    (dest / "pr.json").write_text(json.dumps({"number": PR, "head_sha": head, "repo": REPO}))
    return dest


def _workflow_run(head: str) -> dict:
    return {"action": "completed", "repository": {"full_name": REPO},
            "workflow_run": {"head_sha": head, "event": "pull_request", "conclusion": "success"}}


def _posted(fake: FakeGitHub, head: str) -> str:
    """Everything the action sent to GitHub: comments, check runs and their annotations."""
    parts = [c.body for c in fake.comments_on(REPO, PR)]
    for run in fake.check_runs_for(REPO, head):
        parts.append(json.dumps(run.output))
        parts.append(json.dumps(run.annotations))
    return "\n".join(parts)


def _written(folder: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def _outside_code(markdown: str) -> str:
    """The text of a comment outside code blocks and code spans (where GitHub links mentions and references)."""
    text = re.sub(r"(?ms)^ *(`{3,})[^\n]*\n.*?^ *\1`*\s*$", "", markdown)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)


@pytest.fixture()
def fake():
    f = FakeGitHub().start()
    f.add_repo(REPO)
    yield f
    f.stop()


# -- 1. the fork-safe poster posts nothing of its runner's files ------------------------------------------------------

@pytest.mark.parametrize("how", ["absolute", "dotdot", "linked_script", "linked_findings", "linked_repro_dir"])
def test_a_fork_artifact_naming_files_outside_itself_is_refused_and_nothing_is_posted(tmp_path, fake, how):
    head = "c" * 40
    fake.add_pull(REPO, PR, head_sha=head, base_sha="a" * 40, head_repo="forker/tvm")
    secret = tmp_path / "runner-secret"
    secret.write_text("RUNNER_SECRET_" + secrets.token_hex(8))
    shards = tmp_path / "dlci-fork"
    if how == "absolute":
        art = _artifact(shards, head, repro=str(secret))
    elif how == "dotdot":
        art = _artifact(shards, head, repro="repro/../../runner-secret")
    else:
        art = _artifact(shards, head)
        if how == "linked_script":
            script = art / "repro" / "F001_tvm_from_fx_elu.py"
            script.unlink()
            script.symlink_to(secret)
        elif how == "linked_findings":
            doc = art / "findings.json"
            real = tmp_path / "elsewhere.json"
            shutil.move(doc, real)
            doc.symlink_to(real)
        else:
            shutil.rmtree(art / "repro")
            (tmp_path / "fake-repro").mkdir()
            shutil.copy(secret, tmp_path / "fake-repro" / "F001_tvm_from_fx_elu.py")
            (art / "repro").symlink_to(tmp_path / "fake-repro")
    out = tmp_path / "out"
    code, log, outputs, summary = run_action(tmp_path / "run", fake, _workflow_run(head),
                                             {"token": "ghs_app", "mode": "report", "shards-dir": str(shards),
                                              "out": str(out)}, event_name="workflow_run")
    assert code == 2, log[-3000:]
    assert "::error" in log
    assert fake.comments_on(REPO, PR) == [] and fake.check_runs_for(REPO, head) == []
    leaked = secret.read_text()
    assert leaked not in log and leaked not in summary and leaked not in json.dumps(outputs)
    assert not out.exists() or leaked not in _written(out)
    fake.assert_no_violations()


def test_a_fork_artifact_with_mentions_and_fence_breakers_is_posted_inert(tmp_path, fake):
    head = "d" * 40
    fake.add_pull(REPO, PR, head_sha=head, base_sha="a" * 40, head_repo="forker/tvm")
    shards = tmp_path / "dlci-fork"
    _artifact(shards, head)
    code, log, outputs, summary = run_action(tmp_path / "run", fake, _workflow_run(head),
                                             {"token": "ghs_app", "mode": "report", "shards-dir": str(shards),
                                              "out": str(tmp_path / "out")}, event_name="workflow_run")
    assert code == 1, log[-3000:]
    comments = fake.comments_on(REPO, PR)
    assert comments, log[-4000:]  # the action's log says why nothing was posted
    body = comments[0].body
    assert "NEW IN THIS PR" in body and "print('REPRODUCED')" in body  # the reproducer is shown
    for text in (body, summary):
        prose = _outside_code(text)
        assert not re.search(r"@[A-Za-z0-9]", prose), re.findall(r".{20}@[A-Za-z0-9].{20}", prose)
        assert not re.search(r"(?<![&\w])#\d", prose) and "<img" not in prose
        assert not re.search(r"(?m)^#+ injected", text)  # no heading opened by the message
    run = fake.check_runs_for(REPO, head)[0]
    for note in run.annotations:
        assert not re.search(r"@[A-Za-z0-9]", note["title"] + note["message"])
    fake.assert_no_violations()


# -- 2 and 3. a pull request's code hunts for the token, and its .dlci.yml tries to set the verdict -------------------

HUNT = '''

def _dlci_hunt():
    """A hostile converter: looks for the token in every process's environment it can read, its ancestors'
    first; tries to change code the token holder imports after the scan; leaves a daemon behind (new session, empty
    environment); raises what it found and did (reversed, so that a plain redaction of the value would not hide
    it)."""
    import importlib.util
    import os
    import sys
    found, tried = [], 0
    pid, chain = os.getpid(), []
    while pid > 1:
        chain.append(pid)
        try:
            pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    pids = chain + [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for p in pids:
        try:
            data = open(f"/proc/{p}/environ", "rb").read()
        except OSError:
            continue
        tried += 1
        for item in data.split(b"\\0"):
            name, _, value = item.partition(b"=")
            if name in (b"INPUT_TOKEN", b"ACTIONS_RUNTIME_TOKEN", b"GITHUB_TOKEN") and value:
                found.append(value.decode()[::-1])
    for var in ("GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY"):
        if os.environ.get(var):
            with open(os.environ[var], "a") as f:
                f.write("pwned=by-the-pr\\n")
    print("::set-output name=verdict::pwned")
    wrote = []
    modules = [importlib.util.find_spec(m) for m in ("jinja2", "github", "requests")]
    paths = [m.origin for m in modules if m is not None and m.origin]
    if "dlci" in sys.modules:
        here = os.path.dirname(sys.modules["dlci"].__file__)
        paths += [os.path.join(here, "github", "comment.py"), os.path.join(here, "github", "api.py")]
    for path in paths:
        try:
            with open(path, "a"):
                wrote.append(os.path.basename(path))
        except OSError:
            pass
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve("/bin/sh", ["/bin/sh", "-c", "sleep 900", "dlci-hunt-daemon"], {})
        os._exit(0)
    os.waitpid(pid, 0)
    # the message stays the same from run to run (dlci confirms a crash by its message)
    raise RuntimeError(f"hunted the environments it could read ({'some' if tried else 'none'}): "
                       + (",".join(found) if found else "found nothing") + "; could write "
                       + (",".join(wrote) if wrote else "none of the holder's code"))
'''

POLICY = """\
python_path: [python]
env:
  TVM_LIBRARY_PATH: "{site_packages}/tvm/lib"
known_issues:
  - signature: "*"
    note: nothing to see here
targets: [tvm.from_onnx]
rules: [none]
"""


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


def _hostile_pr(dest: Path) -> tuple[Path, str, str]:
    """The ELU sample, with a head commit whose converter hunts for the token and whose .dlci.yml silences all."""
    from dlci import samples
    from dlci.diff import git
    repo, base, _ = samples.build("tvm-elu-minimum", dest)
    conv = repo / "python/tvm/relax/frontend/torch/base_fx_graph_translator.py"
    text = conv.read_text()
    marker = "        # alpha * min(0, exp(x) - 1) + max(0, x)\n"
    assert text.count(marker) == 1
    conv.write_text(text.replace(marker, "        _dlci_hunt()\n" + marker) + HUNT)
    (repo / ".dlci.yml").write_text(POLICY)
    who = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x.invalid", "GIT_COMMITTER_NAME": "x",
           "GIT_COMMITTER_EMAIL": "x@x.invalid"}
    assert git.run(repo, "commit", "-q", "-am", "hostile", extra_env=who).returncode == 0
    head = git.run(repo, "rev-parse", "HEAD").stdout.strip()
    return repo, base, head


@pytest.mark.slow
def test_a_pull_request_hunting_for_the_token_finds_nothing_and_cannot_set_its_own_verdict(tmp_path, fake):
    pytest.importorskip("tvm")
    from dlci import cache
    repo, base, head = _hostile_pr(tmp_path / "repo")
    token = "ghs_" + secrets.token_hex(18)
    fake.add_token(token, "github-actions[bot]", kind="app", write=True)
    fake.add_pull(REPO, PR, head_sha=head, base_sha=base, head_repo=REPO)
    trusted_before = {p: p.stat().st_mtime for p in cache.base().rglob("*")} if cache.base().is_dir() else {}
    started = time.time()
    # the pull request committed links where the output goes: the folder is dlci's, the runner's files stay out
    elsewhere = tmp_path / "runner-files"
    elsewhere.mkdir()
    (elsewhere / "F001_tvm_from_fx_elu.py").write_text("RUNNER_FILE_" + secrets.token_hex(8))
    (repo / "dlci-out").mkdir()
    (repo / "dlci-out" / "repro").symlink_to(elsewhere)
    (repo / "dlci-out" / "findings.json").symlink_to("/proc/self/environ")
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    out = repo / "dlci-out"
    # as root without a dlci-sandbox user, Python under a private folder (/root here), and the step's shell holding
    # the token (the entrypoint's parent)
    code, log, outputs, summary = run_action(tmp_path / "run", fake, pr_event(base, head),
                                             {"token": token, "repo-path": str(repo), "budget": "100",
                                              "out": "dlci-out"}, cwd=repo, shell=True)
    # the base's policy decided: the bug is new in the PR, not "known", on the targets the diff reaches
    assert code == 1, log[-4000:]
    doc = json.loads((out / "findings.json").read_text())
    news = [f for f in doc["findings"] if f["new_in_pr"] and not f.get("known")]
    assert news and {f["target"] for f in news} & {"tvm.from_fx", "tvm.from_exported_program"}, doc["findings"]
    assert "known_issues" in doc["pr"]["policy_changed"] and "targets" in doc["pr"]["policy_changed"]
    comments = fake.comments_on(REPO, PR)
    assert comments, log[-4000:]  # the action's log says why nothing was posted
    body = comments[0].body
    assert "Policy:" in body and "base revision's policy was applied" in body
    # the hostile code ran, found no token anywhere and could change none of the holder's code
    assert any("found nothing; could write none of the holder's code" in f["message"] for f in news), \
        [f["message"][:300] for f in news]
    assert "sandbox: transient uid" in log or "sandbox: user" in log, log[-3000:]
    # nothing of the pull request's processes survives the job
    alive = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).count("dlci-hunt-daemon")]
    assert alive == [], [_cmdline(p) for p in alive]
    # the committed links were replaced, never followed
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before
    assert not (out / "repro").is_symlink() and not (out / "findings.json").is_symlink()
    posted = _posted(fake, head)
    for secret in (token, token[::-1]):
        assert secret not in posted and secret not in log and secret not in summary
        assert secret not in json.dumps(outputs) and secret not in _written(out)
    # no workflow command or output file reached from the PR's code
    assert "pwned" not in json.dumps(outputs) and outputs.get("verdict") != "pwned"
    assert "pwned" not in (tmp_path / "run" / "github_output").read_text()
    # the untrusted run wrote nothing where a trusted run reads
    if cache.base().is_dir():
        # (what other untrusted runs on this machine write beside it, under untrusted/, is no trusted entry)
        fresh = [p for p in cache.base().rglob("*") if p.stat().st_mtime >= started and p not in trusted_before
                 and "untrusted" not in p.relative_to(cache.base()).parts]
        assert fresh == [], fresh[:5]
    fake.assert_no_violations()


# -- the smaller ways in ------------------------------------------------------------------------------------------------

def test_single_mode_refuses_pull_request_target(tmp_path, fake):
    code, log, _, _ = run_action(tmp_path, fake, pr_event("a" * 40, "b" * 40), {"token": "ghs_app"},
                                 event_name="pull_request_target")
    assert code == 2 and "refuses pull_request_target" in log
    assert fake.writes() == []



LEAVES_A_DAEMON = """
import os, sys, time
if os.fork() == 0:   # a process of a session of its own, holding this command's stdout and stderr
    os.setsid()
    os.execvp("sleep", ["sleep", "60", MARK])
print("the command's own output", flush=True)
time.sleep(float(sys.argv[1]))
"""


@pytest.mark.parametrize("runs_for", [0.0, 30.0])
def test_a_process_left_in_a_session_of_its_own_does_not_hold_a_check_up(runs_for):
    """Code under test (a reproducer, an import, a reduction's introspection) can leave a daemon that keeps the
    command's output open: dlci's checks end when the command ends, or at its timeout, not when the daemon does
    (a token-hunting PR's daemons once made a scan wait 10 minutes). The output so far is kept either way."""
    from dlci.exec import cancel
    mark = "dlci-test-daemon-" + secrets.token_hex(4)
    cmd = [sys.executable, "-c", LEAVES_A_DAEMON.replace("MARK", repr(mark)), str(runs_for)]
    t0 = time.monotonic()
    try:
        if runs_for:
            with pytest.raises(subprocess.TimeoutExpired) as e:
                cancel.run(cmd, timeout=3)
            assert "the command's own output" in e.value.output
        else:
            proc = cancel.run(cmd, timeout=30)
            assert proc.returncode == 0 and "the command's own output" in proc.stdout
        assert time.monotonic() - t0 < 15
    finally:
        for p in Path("/proc").iterdir():
            if p.name.isdigit() and mark in _cmdline(p):
                os.kill(int(p.name), 9)


CHATTERING_DAEMON = """
import os, sys, time
if os.fork() == 0:   # a process of a session of its own that writes to the scan's output for ever
    os.setsid()
    os.execvp("sh", ["sh", "-c", "while :; do echo still here; sleep 0.1; done", MARK])
print("the command's own output", flush=True)
"""


def test_the_sandbox_relay_stops_soon_after_the_scan_ends_however_a_daemon_it_left_writes():
    """The sandboxed scan's output is relayed until the scan has ended and its pipe is quiet, and no longer than
    a bound after it ended: a daemon that writes on (never quiet) does not keep the holder reading; it is killed
    next (Sandbox.kill_leftovers)."""
    from dlci.github.sandbox import _relay
    mark = "dlci-test-chatter-" + secrets.token_hex(4)
    proc = subprocess.Popen([sys.executable, "-c", CHATTERING_DAEMON.replace("MARK", repr(mark))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    lines: list[bytes] = []
    t0 = time.monotonic()
    try:
        _relay(proc, lines.append, after_exit_s=2.0)
        assert time.monotonic() - t0 < 12 and proc.poll() == 0
        # two writers share the pipe, so the OS may interleave their bytes within a line: look for each inside
        assert any(b"the command's own output" in raw for raw in lines), lines[:5]
        assert any(b"still here" in raw for raw in lines), lines[:5]
    finally:
        proc.stdout.close()
        for q in Path("/proc").iterdir():
            if q.name.isdigit() and mark in _cmdline(q):
                os.kill(int(q.name), 9)


def _in_child(script: str, env: dict, tmp_path: Path, parent_shell: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", script]
    if parent_shell:  # a shell that stays the child's parent, holding what the step's shell would hold
        cmd = ["/bin/sh", "-c", '"$0" -c "$1"; rc=$?; exit $rc', sys.executable, script]
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, cwd=str(tmp_path),
                          timeout=300)


SANDBOX_PROBE = """
import sys
from dlci.github import sandbox as SB
box = SB.Sandbox.create(SB.same_user("a test") if sys.argv[1:] == ["same"] else None)
lines = []
probe = ("cat /proc/$PPID/environ >/dev/null 2>&1 && echo HOLDER-READABLE || echo HOLDER-CLOSED; "
         "grep -qa ghs_ /proc/[0-9]*/environ 2>/dev/null && echo TOKEN-SEEN || echo TOKEN-UNSEEN; "
         "(setsid sh -c 'sleep 600' dlci-probe-daemon &); env | cut -d= -f1 | sort")
box.run(["/bin/sh", "-c", probe], lines.append)
left = box.kill_leftovers()
box.remove()
print(box.who.kind)
print("\\n".join(lines))
"""


def test_a_sandboxed_scan_reads_no_token_passes_no_secret_and_leaves_no_process(tmp_path):
    """The scan's uid (a transient one: root without a dlci-sandbox user here) cannot read the holder or the step's
    shell; its environment is the allow-list; a daemon it starts in a new session does not survive it."""
    if os.geteuid() != 0:
        pytest.skip("a separate uid needs root")
    env = {"INPUT_TOKEN": "ghs_" + "x" * 36, "GITHUB_OUTPUT": str(tmp_path / "o"), "ACTIONS_RUNTIME_TOKEN": "t",
           "GITHUB_ENV": str(tmp_path / "e"), "DLCI_SANDBOX_USER": "no-such-user-here", "TF_API_KEY": "k1",
           "DLCI_TOKEN_EXTRA": "k2", "TORCH_HUB_SECRET": "k3", "OMP_NUM_THREADS": "1", "MY_SETTING": "v",
           "DLCI_PASS_ENV": "MY_SETTING", "DLCI_UNTRUSTED": "0", "PYTHONPATH": str(ROOT)}
    script = "import dlci.github.sandbox as SB; SB.make_undumpable(); SB.become_subreaper()\n" + SANDBOX_PROBE
    proc = _in_child(script, env, tmp_path, parent_shell=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "transient", lines
    assert "HOLDER-CLOSED" in lines and "TOKEN-UNSEEN" in lines, lines
    names = set(lines[3:])
    assert not names & {"INPUT_TOKEN", "GITHUB_OUTPUT", "GITHUB_ENV", "ACTIONS_RUNTIME_TOKEN", "TF_API_KEY",
                        "DLCI_TOKEN_EXTRA", "TORCH_HUB_SECRET", "DLCI_PASS_ENV"}, names
    assert {"PYTHONSAFEPATH", "HOME", "DLCI_UNTRUSTED", "OMP_NUM_THREADS", "MY_SETTING"} <= names
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and "dlci-probe-daemon" in _cmdline(p)]


def test_under_its_own_user_the_scans_orphans_come_back_and_die(tmp_path):
    """The same-user case (the unprivileged job of the split): a daemon in a new session, its parent gone, is still
    a descendant of the subreaper holder and is killed with the scan."""
    script = "import dlci.github.sandbox as SB; SB.become_subreaper()\n" + SANDBOX_PROBE
    proc = subprocess.run([sys.executable, "-c", script, "same"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(tmp_path), timeout=300)
    assert proc.returncode == 0 and proc.stdout.splitlines()[0] == "same", proc.stderr[-2000:]
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and "dlci-probe-daemon" in _cmdline(p)]


def test_no_separate_uid_and_a_reachable_token_is_refused_with_what_to_set_up(tmp_path):
    """Where the PR's code would run as the token holder's user, dlci refuses (exit 2) unless nothing that user can
    read holds a token and the runner is ephemeral; the message names the image, a separate user and the split. The
    token is found in the step's shell (the parent), not only in dlci's own environment."""
    script = ("import json\nfrom dlci.github import sandbox as SB\n"
              "found = SB.reachable_secrets()\n"
              "print(json.dumps([found, SB.refusal('this process is not root', found, 'auto'),"
              " SB.refusal('x', [], 'auto'), SB.refusal('x', [], 'same-user'), SB.refusal('x', [], 'require')]))\n")
    proc = _in_child(script, {"PYTHONPATH": str(ROOT), "SHELL_HELD": "ghp_" + "a" * 36}, tmp_path,
                     parent_shell=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found, refused, no_token, opted_in, required = json.loads(proc.stdout)
    assert any(f.startswith("SHELL_HELD (process ") for f in found), found  # the shell's copy, by its value
    for text in (refused, no_token, required):
        assert text and "refusing to run the pull request's code" in text
        assert "uses: dlci/dlci@v1" in text and "useradd --system" in text and "dlci-post.yml" in text
    assert "SHELL_HELD" in refused and "GitHub-hosted" in no_token
    assert opted_in is None  # no token anywhere and the runner said to be ephemeral


def test_a_revision_cannot_set_dlcis_own_settings_and_the_workers_keep_them(monkeypatch, tmp_path):
    from dlci import cache
    from dlci.config import Config, ConfigError
    from dlci.exec.engine import worker_env
    for name in ("DLCI_UNTRUSTED", "DLCI_CACHE_DIR", "dlci_untrusted_cache_dir"):
        with pytest.raises(ConfigError, match=f"env.{name}"):
            Config.parse(f"env: {{{name}: '0'}}")
    monkeypatch.setenv(cache.UNTRUSTED_ENV, "1")
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    monkeypatch.delenv(cache.UNTRUSTED_DIR_ENV, raising=False)
    env = worker_env({cache.UNTRUSTED_ENV: "0", cache.ENV: "/elsewhere", cache.UNTRUSTED_DIR_ENV: "/x", "A": "b"})
    assert env[cache.UNTRUSTED_ENV] == "1" and env[cache.ENV] == str(tmp_path) and env["A"] == "b"
    assert cache.UNTRUSTED_DIR_ENV not in env


# -- the output folder and what is read back -----------------------------------------------------------------------

def test_an_output_folder_behind_a_link_is_refused_before_anything_is_written(tmp_path, fake):
    from dlci import samples
    repo, base, head = samples.build("tvm-elu-minimum", tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / "sub").symlink_to(elsewhere)
    code, log, _, _ = run_action(tmp_path / "run", fake, pr_event(base, head),
                                 {"mode": "plan", "repo-path": str(repo), "out": "sub/dlci-out"}, cwd=repo)
    assert code == 2 and "lies behind a link" in log, log[-2000:]
    assert list(elsewhere.iterdir()) == []


def test_report_mode_renders_what_intake_read_and_replaces_committed_links(tmp_path, fake):
    """Links left in the output folder (a findings.json and a reproducer pointing at the runner's files) are removed,
    never read or written through; the comment shows the artifact's own reproducer."""
    head = "e" * 40
    fake.add_pull(REPO, PR, head_sha=head, base_sha="a" * 40, head_repo="forker/tvm")
    secret = tmp_path / "runner-secret"
    secret.write_text("RUNNER_SECRET_" + secrets.token_hex(8))
    shards = tmp_path / "dlci-results"
    _artifact(shards, head)
    out = tmp_path / "out"
    (out / "repro").mkdir(parents=True)
    (out / "repro" / "F001_tvm_from_fx_elu.py").symlink_to(secret)
    (out / "findings.json").symlink_to(secret)
    (out / "comment.md").symlink_to(secret)
    code, log, outputs, summary = run_action(tmp_path / "run", fake, _workflow_run(head),
                                             {"token": "ghs_app", "mode": "report", "shards-dir": str(shards),
                                              "out": str(out)}, event_name="workflow_run")
    assert code == 1, log[-3000:]
    body = fake.comments_on(REPO, PR)[0].body
    assert "print('REPRODUCED')" in body and secret.read_text() not in body + summary
    assert secret.read_text().startswith("RUNNER_SECRET_")  # nothing written through the links
    assert not any(p.is_symlink() for p in out.rglob("*"))


@pytest.mark.parametrize("how", ["deep", "newline", "hardlink", "retyped"])
def test_malformed_results_exit_2_with_the_file_named(tmp_path, fake, how):
    head = "f" * 40
    fake.add_pull(REPO, PR, head_sha=head, base_sha="a" * 40, head_repo="forker/tvm")
    shards = tmp_path / "dlci-results"
    art = _artifact(shards, head, **({"repro": "repro/F001_tvm_from_fx_elu.py\n"} if how == "newline" else {}))
    if how == "deep":
        (art / "findings.json").write_text("[" * 100_000 + "]" * 100_000)
    elif how == "retyped":  # a field the job summary reads, of a type dlci never writes
        doc = _every_section(head)
        doc["pr"]["directed"]["search"]["divergence"]["graph_changes"][0]["differences"] = 5
        (art / "findings.json").write_text(json.dumps(doc))
    elif how == "hardlink":
        outside = tmp_path / "runner-secret"
        outside.write_text("RUNNER_SECRET")
        script = art / "repro" / "F001_tvm_from_fx_elu.py"
        script.unlink()
        os.link(outside, script)
    code, log, _, _ = run_action(tmp_path / "run", fake, _workflow_run(head),
                                 {"token": "ghs_app", "mode": "report", "shards-dir": str(shards),
                                  "out": str(tmp_path / "out")}, event_name="workflow_run")
    assert code == 2 and "Traceback" not in log, log[-3000:]
    assert "findings.json" in log or "F001_tvm_from_fx_elu.py" in log
    assert fake.writes() == []


def test_plan_mode_prints_the_pull_requests_file_names_with_workflow_commands_off(tmp_path, fake):
    from dlci import samples
    from dlci.github import runner as R
    repo, base, head = samples.build("tvm-elu-minimum", tmp_path / "repo")
    code, log, outputs, _ = run_action(tmp_path / "run", fake, pr_event(base, head),
                                       {"mode": "plan", "repo-path": str(repo), "out": str(tmp_path / "plan")})
    assert code == 0, log[-2000:]
    stop = re.search(r"^::stop-commands ?::(\S+)$", log, re.M)
    assert stop and log.index(stop.group(0)) < log.index("plan: ") and f"::{stop.group(1)}::" in log
    assert R.log_line("a.py\n::set-output name=matrix::x") == "a.py\\x0a::set-output name=matrix::x"


def test_install_and_env_placeholders_are_checked_with_the_key_named():
    from dlci.config import Config, ConfigError
    for text, key in (('install: "echo {"', "install"), ('env: {A: "{HOME}"}', "env.A"),
                      ('install: "{prefix.__class__}"', "install")):
        with pytest.raises(ConfigError, match=re.escape(key)):
            Config.parse(text)
    assert Config.parse('install: "pip install --target {prefix} x {{literal}}"').install.endswith("{{literal}}")


def test_an_untrusted_run_writes_its_cache_apart_and_a_poisoned_entry_is_refused(tmp_path, monkeypatch):
    from dlci import cache
    from dlci.sources import UntrustedCacheEntry, check_call
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    monkeypatch.delenv(cache.UNTRUSTED_ENV, raising=False)
    monkeypatch.delenv(cache.UNTRUSTED_DIR_ENV, raising=False)
    assert cache.root() == tmp_path and cache.roots() == [tmp_path]
    monkeypatch.setenv(cache.UNTRUSTED_ENV, "1")
    assert cache.root() == tmp_path / "untrusted" and cache.roots() == [tmp_path / "untrusted", tmp_path]
    check_call({"kind": "torch_fn", "fn": "torch.nn.functional.elu"})
    check_call({"kind": "torch_fn", "fn": "torch.Tensor.__radd__"})
    check_call({"kind": "keras_layer", "cls": "keras.layers.Conv2D"})
    for bad in ("os.system", "torch.os.system", "torch.load", "torch.hub.load", "torch.__builtins__.eval",
                "builtins.exec", "tf.io.write_file", "tf.raw_ops.WriteFile", "keras.layers.Lambda", "torch..x"):
        with pytest.raises(UntrustedCacheEntry):
            check_call({"kind": "torch_fn", "fn": bad})


def test_worktrees_a_killed_run_left_are_removed_by_the_next(tmp_path):
    from dlci import samples
    from dlci.checkout import OWNER_FILE, Checkout
    from dlci.diff import git
    repo, base, head = samples.build("tvm-elu-minimum", tmp_path / "repo")
    killed = tmp_path / "dlci-scan-killed"
    left = Checkout.create(repo, head, killed, "head")
    (killed / OWNER_FILE).write_text("999999999 0\n")  # the run that made it is gone (SIGKILL: nothing cleaned up)
    alive = Checkout.create(repo, base, tmp_path / "dlci-scan-now", "base")
    listed = git.run(repo, "worktree", "list", "--porcelain").stdout
    assert str(left.path) not in listed and not killed.exists()
    assert str(alive.path) in listed  # this run's own worktree stays
    alive.remove()


def test_a_file_name_that_is_not_utf8_does_not_stop_the_report(tmp_path):
    from dlci.diff import git
    from dlci.report.document import Report
    repo = tmp_path / "repo"
    repo.mkdir()
    who = {"GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x.invalid", "GIT_COMMITTER_NAME": "x",
           "GIT_COMMITTER_EMAIL": "x@x.invalid"}
    git.run(repo, "init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n")
    git.run(repo, "add", "-A")
    git.run(repo, "commit", "-q", "-m", "base", extra_env=who)
    os.mkdir(os.path.join(os.fsencode(repo), b"conv\xe9"))
    with open(os.path.join(os.fsencode(repo), b"conv\xe9", b"op\xff.py"), "w") as f:
        f.write("def f():\n    return 2\n")
    git.run(repo, "add", "-A")
    git.run(repo, "commit", "-q", "-m", "head", extra_env=who)
    proc = subprocess.run([sys.executable, "-m", "dlci", "ops", "--repo", str(repo), "--base", "HEAD~1",
                           "--head", "HEAD"], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name = os.fsdecode(b"conv\xe9/op\xff.py")
    Report(findings=[], stats={"tests_run": 0, "tests_valid": 0, "seconds": 0.0, "per_target": {}},
           pr={"base": "a" * 40, "head": "b" * 40, "touched": [], "unmapped": [{"file": name, "line": 1, "region": None,
                                                                              "why": "x"}]}).write(tmp_path / "out")
    assert "conv" in (tmp_path / "out" / "report.md").read_text()


def test_the_scans_uid_sees_the_system_python_and_dlci_but_none_of_the_runners_files(tmp_path):
    """In its mount namespace the scan sees the system, Python, dlci and its own folder: a file the runner keeps in
    its temporary folder or its home, world-readable or not, is not there; Python still starts."""
    if os.geteuid() != 0:
        pytest.skip("a separate uid needs root")
    marker = "RUNNER_FILE_" + secrets.token_hex(6)
    in_tmp = tmp_path / "runner-file"
    in_home = Path.home() / f".dlci-test-runner-file-{secrets.token_hex(4)}"
    try:
        for f in (in_tmp, in_home):
            f.write_text(marker)
            f.chmod(0o644)
        probe = f"cat {in_tmp} {in_home} 2>/dev/null; echo; {sys.executable} -c 'print(6*7)'"
        script = ("import dlci.github.sandbox as SB\n"
                  "box = SB.Sandbox.create()\n"
                  "lines = []\n"
                  f"box.run(['/bin/sh', '-c', {probe!r}], lines.append)\n"
                  "box.remove()\n"
                  "print('\\n'.join(lines))\n")
        proc = _in_child(script, {"PYTHONPATH": str(ROOT)}, tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert marker not in proc.stdout and "42" in proc.stdout, proc.stdout
    finally:
        in_home.unlink(missing_ok=True)


def _every_section(head: str = "f" * 40) -> dict:
    """A findings.json with every section and field the renderers read (report.md, the comment, the annotations)."""
    goal = {"file": "python/tvm/relax/frontend/onnx/onnx_frontend.py", "line": 120, "kind": "statement",
            "function": "Resize._impl", "condition": "", "outcome": "", "span": [120, 120], "tests": 4,
            "failing": 0, "values": ["(1, 3, 4, 4)", "None"],
            "closest": {"test": "test_resize_nearest", "target": "tvm.from_onnx"}, "distance": 2.5,
            "skeleton": "def test_resize(): ..."}
    branch = {**goal, "kind": "branch", "line": -1, "span": [118, 118], "condition": "if mode == 'nearest'",
              "outcome": "false"}
    on_base = _finding("", id="F002", new_in_pr=False, base={"status": "crash", "symptom": "crash", "changed": True},
                       graph={"node_types": ["Shape", "Resize"], "node": "n1", "localised_to": "onnx::Resize",
                              "multi_operator": True, "multi_operator_only": True, "operators": 2,
                              "cut_after": {"wrong": "n1"}, "each_operator_alone": {"0:Shape": "pass"},
                              "trace": {"used": True, "first_divergent": "1:Resize"},
                              "parameters_that_matter": ["scales"], "share": {"share": 0.8, "how": "reset"}},
                       oracle="inconsistency", reduction={"changed": True, "confirmed": True,
                                                          "before": {"operators": 11, "elements": 90},
                                                          "after": {"operators": 1, "elements": 4},
                                                          "params_that_matter": ["scales"]},
                       rule={"name": "r", "category_title": "c", "summary": "s", "graph_a": "a", "graph_b": "b"},
                       introduced_by={"report": "abc1234 a subject"}, since={"report": "onnx 1.17"},
                       extra={"explains_graph_findings": [{"symptom": "crash", "stage": "run", "instance": "g1"}]},
                       known={"link": "https://example.invalid/1", "note": "n"},
                       against={"status": "crash", "symptom": "s", "package": "onnx", "version": "1.16",
                                "changed": True, "reproducer": {"verdict": "bad", "command": "python F002.py"}},
                       new_in_release=False)
    return {
        "version": 1, "findings": [_finding("repro/F001_tvm_from_fx_elu.py"), on_base],
        "stats": {"tests_run": 3, "tests_valid": 3, "seconds": 1.0, "operators": 2, "instances": 3,
                  "interrupted": False, "flaky": [{"signature": "s1"}],
                  "unreproduced": [{"signature": "s2", "not_reproduced_because": "why"}],
                  "per_target": {"tvm.from_fx": {"pass": 2, "unsupported": 1, "invalid": 0, "crash": 1,
                                                 "inconsistency": 0}},
                  "targets_not_on_runner": {"tvm.cuda": "no GPU"}, "devices": {"tvm.cuda": "cpu"},
                  "device_notes": {"tvm.cuda": "n"}, "not_reproduced_in_budget": ["F003"],
                  "fuzz": {"coverage": {"OTC": 0.5, "OLC": 0.25}, "networks": {"kept": 3}, "strategy": {"strategy": "mcts"},
                           "corpus": {"blocks": 4}, "timeline": [{"t": float(t), "OLC": t / 10} for t in range(4)]},
                  "evolve": {"strategy": "ga", "first_failure_seconds": 3.0,
                             "seeds": [{"seed": "m.py", "genes": 2, "gene_elements": 8, "candidates": 5,
                                        "best_fitness": 0.5, "found": {"tvm.from_fx": {
                                            "candidate": 3, "seconds": 2.0, "operator": "aten::elu"}}}]}},
        "against": {"line": "onnx 1.17 against 1.16", "package": "onnx", "installed": "1.17", "version": "1.16",
                    "delta": ["onnx==1.16"]},
        "pr": {"base": "a" * 40, "head": head, "operators": ["elu"], "profiles": ["tvm"],
               "policy_changed": ["fail_on"], "test_gap": "a gap", "out": "dlci-out",
               "nothing_to_test": "nothing", "targets_not_installed": ["openvino.onnx"],
               "operators_without_material": ["aten::new_op"],
               "touched": [{"operator": "elu.default", "namespace": "aten", "converter": "self._elu",
                            "file": "python/tvm/relax/frontend/torch/base_fx_graph_translator.py", "line": 466,
                            "why": "changed", "targets": ["tvm.from_fx"], "profile": "tvm"}],
               "coverage": {"changed_statements": 3, "reached_statements": 1, "instances_reaching": 2,
                            "unreached": [{"file": "a.py", "line": 3, "region": "f"}]},
               "directed": {"goals": 4, "reached": 2, "statements": 3, "statements_reached": 1,
                            "search": {"reached_by_search": 1, "mutants": 9, "seconds": 3.5,
                                       "reaching_mutation": {"a.py:3": "size_0"},
                                       "divergence": {"graph_changes": [
                                           {"target": "torch.onnx", "inputs": 2, "instance": "i1",
                                            "head_only": ["Resize(x)"], "base_only": ["Resize(x) mode='floor'"],
                                            "differences": ["Resize: mode head unset, base 'floor'"]},
                                           {"target": "torch.onnx", "inputs": 1, "instance": "i2",
                                            "head_only": ["Cast(x)"], "base_only": []}]}},
                            "unreached": [goal, branch], "reached_goals": [goal, branch]},
               "bisect": {"asked": ["commits"], "seconds": 3.0, "budget_s": 60.0, "lines": ["l1"], "error": "e"},
               "fixed": [{"operator": "aten::elu", "target": "tvm.from_fx", "status_on_base": "crash",
                          "symptom": "crash", "instance": "i9", "instances": ["i9"], "test": "test_elu"}],
               "still_failing": [{"operator": "aten::elu", "target": "tvm.from_fx", "symptom": "crash"}],
               "fuzz": {"share": 0.2, "targets": ["tvm.from_onnx"], "why": "graph code changed"},
               "fuzz_already_on_base": [{"operator": "onnx::Resize", "target": "tvm.from_onnx", "symptom": "crash"}],
               "graph_level": [{"file": "b.py", "line": 4, "why": "w"}],
               "unmapped": [{"file": "c.py", "line": 5, "region": "r", "why": "w"}],
               "head_run": ["git checkout f", "PYTHONPATH=python"]}}


def _renders(doc: dict) -> None:
    """Everything the action renders from an adopted document: report.md, the comment, the check run."""
    from dlci.github import api, comment
    from dlci.report import render_markdown
    render_markdown(doc)
    comment.render(doc, {})
    comment.verdict_line(doc)
    api.annotations(doc)


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _places(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _places(v, (*path, i))


_GONE = object()
_RETYPED = (_GONE, None, 2.5, "x", [], ["x", 1], {"a": 1})  # an empty list: a span, a head_run to unpack


def test_every_field_a_renderer_reads_is_checked_before_it_is_read():
    """A results folder written under the scan's user (or a fork's artifact) with any one field of a full document
    swapped for another type, or removed, is refused by intake (exit 2, the field named) or renders as it is: it
    never breaks the report, the job summary or the comment after intake passed it."""
    import copy
    from dlci.report import intake
    from dlci.report.document import Report, ReportError
    full = _every_section()
    _renders(Report.from_dict(intake.parse(json.dumps(full).encode(), "findings.json")).to_dict())
    broke = []
    for path in list(_places(full))[1:]:
        for value in _RETYPED:
            doc = copy.deepcopy(full)
            parent = doc
            for key in path[:-1]:
                parent = parent[key]
            if value is _GONE:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
            try:
                adopted = Report.from_dict(intake.parse(json.dumps(doc).encode(), "findings.json")).to_dict()
            except ReportError as e:  # IntakeError is one: what the action says, exit 2
                assert "findings.json" in str(e)
                continue
            try:
                _renders(adopted)
            except Exception as e:  # noqa: BLE001 - any exception is the failure this test looks for
                broke.append(f"{'/'.join(map(str, path))} = {value if value is not _GONE else '(removed)'!r}: "
                             f"{type(e).__name__}: {e}")
    assert not broke, "\n".join(broke[:40]) + f"\n({len(broke)} in all)"
