"""dlci.exec: real worker processes, real signals; job functions live in tests/exec_jobs.py."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from dlci.exec import Engine, Job, run_isolated, worker_env
from dlci.outcome import CRASH, INVALID, PASS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
J = "tests.exec_jobs:"


def job(name, func, *args, **kw):
    return Job(id=name, func=J + func, args=args, instance_id=f"inst-{name}", op="op", target="tgt", **kw)


def collect(engine, jobs, **kw):
    got = []
    info = engine.run(jobs, lambda j, r: got.append((j, r, time.monotonic())), **kw)
    return info, {j.id: r for j, r, _ in got}, got


def test_crashes_become_results_and_the_run_goes_on(tmp_path):
    jobs = [job("seg", "segfault"), job("ok1", "ok"), job("abort", "abort"), job("hang", "hang", timeout=1.0),
            job("oom", "eat_memory"), job("exit", "exit3"), job("bug", "raises"), job("ok2", "ok"), job("ok3", "ok")]
    with Engine(workers=2, timeout=20, memory_mb=300, log_dir=str(tmp_path)) as engine:
        info, res, _ = collect(engine, jobs)
    assert info.completed == len(jobs) and not info.interrupted
    assert set(res) == {j.id for j in jobs}

    seg = res["seg"]
    assert (seg["status"], seg["stage"], seg["symptom"]) == (CRASH, "compile", "SIGSEGV")
    assert seg["instance_id"] == "inst-seg" and seg["target"] == "tgt"
    assert "about to crash in convert" in seg["log"] and "Segmentation fault" in seg["log"]
    assert "exec_jobs.py" in seg["log"]  # faulthandler names the crashing frame

    ab = res["abort"]
    assert (ab["status"], ab["stage"], ab["symptom"]) == (CRASH, "run", "SIGABRT")
    assert "aborting now" in ab["log"]  # stdout of the job went to the log
    assert "about to crash" not in ab["log"]  # only what was written since this job started

    hang = res["hang"]
    assert (hang["status"], hang["stage"], hang["symptom"]) == (CRASH, "compile", "timeout")
    assert 1.0 <= hang["seconds"] < 4 and "in hang" in hang["log"]  # stack dumped before the kill

    oom = res["oom"]
    assert (oom["status"], oom["stage"], oom["symptom"]) == (CRASH, "run", "oom")
    assert "300 MB" in oom["message"]

    assert (res["exit"]["symptom"], res["exit"]["stage"]) == ("exit 3", "run")

    bug = res["bug"]
    assert (bug["status"], bug["stage"], bug["symptom"]) == (INVALID, "harness", "ValueError")
    assert "bug in dlci" in bug["message"] and "raise ValueError" in bug["traceback"]

    for name in ("ok1", "ok2", "ok3"):
        assert res[name]["status"] == PASS
    assert info.crashed_workers == 5  # the harness error did not cost a worker
    assert info.respawns >= 4
    assert os.path.exists(tmp_path / "worker-0.log")


def test_results_stream_in_completion_order():
    with Engine(workers=2, timeout=20) as engine:
        engine.start()
        t0 = time.monotonic()
        info, res, got = collect(engine, [job("slow", "sleep", 1.0), job("fast", "sleep", 0.05)])
    assert [j.id for j, _, _ in got] == ["fast", "slow"]
    assert got[0][2] - t0 < 0.6  # delivered while the slow one was still running
    assert info.completed == 2


def test_two_workers_run_in_parallel():
    with Engine(workers=2, timeout=20) as engine:
        engine.start()
        info, res, _ = collect(engine, [job(str(i), "sleep", 0.5) for i in range(4)])
    assert info.completed == 4
    assert info.wall < 1.6  # serial would be >= 2.0
    assert len({r["message"].split()[0] for r in res.values()}) == 2  # two worker pids
    assert all(b >= 0.9 for b in info.busy_seconds)


def test_stdout_garbage_does_not_break_the_protocol():
    with Engine(workers=1, timeout=20) as engine:
        info, res, _ = collect(engine, [job("noise", "garbage_stdout"), job("after", "ok")])
    assert res["noise"]["status"] == PASS and res["noise"]["instance_id"] == "noise"
    assert res["after"]["status"] == PASS and info.crashed_workers == 0


def test_secrets_do_not_reach_workers(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "s1")
    monkeypatch.setenv("ACTIONS_RUNTIME_TOKEN", "s2")
    monkeypatch.setenv("ACTIONS_CACHE_URL", "s3")
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.setenv("DLCI_HARMLESS", "kept")
    with Engine(workers=1, timeout=20, env={"MY_API_SECRET": "s4", "INPUT_TOKEN": "s5", "X_OK": "1"}) as engine:
        _, res, _ = collect(engine, [job("env", "environment")])
    keys = set(res["env"]["message"].split())
    assert not keys & {"GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_CACHE_URL", "MY_API_SECRET", "INPUT_TOKEN"}
    assert {"DLCI_HARMLESS", "X_OK"} <= keys
    assert res["env"]["traceback"] == "1|2"  # single-threaded, quiet TF
    env = worker_env({"GH_TOKEN": "x", "OMP_NUM_THREADS": "2"})
    assert "GH_TOKEN" not in env and env["OMP_NUM_THREADS"] == "2"  # explicit overrides win, secrets never


def test_warm_imports_happen_once_per_worker():
    with Engine(workers=2, timeout=20, warm_imports=("json", "tests.exec_jobs")) as engine:
        # sleeps first, so that both workers get started and used
        info, res, _ = collect(engine, [job("s1", "sleep", 0.5), job("s2", "sleep", 0.5)]
                               + [job(str(i), "modules") for i in range(6)])
        info2, res2, _ = collect(engine, [job("again", "modules")])
        assert len(engine.startup_log) == 2
    assert len(info.startup_seconds) == 2 and all(0 < s < 30 for s in info.startup_seconds)
    assert info2.startup_seconds == []  # the second run reused the warm workers
    for r in [r for k, r in res.items() if k[0] != "s"] + list(res2.values()):
        assert "json" in r["message"].split() and r["traceback"] == "1"


def test_deadline_stops_dispatching():
    with Engine(workers=2, timeout=20) as engine:
        engine.start()
        info, res, _ = collect(engine, (job(str(i), "sleep", 0.3) for i in range(20)),
                               deadline=time.monotonic() + 0.5)
    assert info.interrupted and info.reason == "deadline"
    assert 2 <= info.completed <= 6 and info.not_started >= 1
    assert all(r["status"] == PASS for r in res.values())  # running jobs were allowed to finish


def test_affinity_keeps_jobs_on_one_worker():
    jobs = [job(f"{a}{i}", "sleep", 0.05, affinity=a) for i in range(4) for a in "AB"]
    with Engine(workers=2, timeout=20) as engine:
        engine.start()
        _, res, _ = collect(engine, jobs)
    pids = {a: {r["message"].split()[0] for k, r in res.items() if k[0] == a} for a in "AB"}
    assert len(pids["A"]) == 1 and len(pids["B"]) == 1 and pids["A"] != pids["B"]


def test_a_job_marked_first_goes_ahead_of_the_jobs_already_looked_ahead():
    """The engine looks 16 jobs ahead; a job the caller marks ``first`` (a test an outcome brought forward) is run
    next, not after those 16."""
    def jobs():
        for i in range(24):
            yield job(f"j{i}", "sleep", 0.01, first=(i == 20))
    with Engine(workers=1, timeout=20) as engine:
        engine.start()
        _, _, got = collect(engine, jobs())
    order = [j.id for j, _, _ in got]
    assert len(order) == 24 and order.index("j20") < 8, order


def test_harness_errors_and_untrusted_frames(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    monkeypatch.setenv("DLCI_EVIL_MARKER", str(marker))
    jobs = [job("nodict", "not_a_dict"), job("nomodule", "nope"),
            Job("lambda", J + "ok", (lambda: 0,), "inst-lambda"), job("evil", "evil_frame"), job("ok", "ok")]
    with Engine(workers=1, timeout=20) as engine:
        info, res, _ = collect(engine, jobs)
    for name in ("nodict", "nomodule", "lambda", "evil"):
        assert (res[name]["status"], res[name]["stage"]) == (INVALID, "harness"), name
    assert res["evil"]["symptom"] == "protocol" and "disallowed" in res["evil"]["message"]
    assert not marker.exists()  # the forged pickle was never executed in the parent
    assert res["ok"]["status"] == PASS


def test_data_rlimit_backstop():
    # sampler effectively off: the RLIMIT_DATA backstop turns the runaway allocation into a MemoryError
    with Engine(workers=1, timeout=20, memory_mb=100_000, data_limit_mb=400) as engine:
        _, res, _ = collect(engine, [job("hog", "eat_memory")])
    assert res["hog"]["symptom"] == "MemoryError"


def test_run_isolated():
    assert run_isolated(job("one", "ok"), timeout=20)["status"] == PASS
    r = run_isolated(job("seg", "segfault"), timeout=20)
    assert (r["status"], r["symptom"], r["stage"]) == (CRASH, "SIGSEGV", "compile")


def test_real_torch_job():
    with Engine(workers=1, timeout=120) as engine:
        _, res, _ = collect(engine, [job("t", "torch_op")])
    r = res["t"]
    assert r["status"] == PASS, r
    assert float(r["message"]) == 6.0 and r["traceback"] == "1"  # relu(x-2).sum(); one intra-op thread


SIGTERM_SCRIPT = textwrap.dedent("""
    import json, sys, dataclasses
    from dlci.exec import Engine, Job
    out, report = sys.argv[1], sys.argv[2]
    jobs = [Job(str(i), "tests.exec_jobs:sleep", (0.3,)) for i in range(200)] + [Job("hang", "tests.exec_jobs:hang", ())]
    with open(out, "a") as f, Engine(workers=2, timeout=60) as engine:
        def on_result(job, r):
            f.write(json.dumps({"id": job.id, "status": r["status"], "pid": r["message"].split()[0]}) + "\\n")
            f.flush()
        info = engine.run(jobs, on_result)
    with open(report, "w") as f:
        json.dump(dataclasses.asdict(info), f)
""")


NESTED_SIGTERM_SCRIPT = textwrap.dedent("""
    import json, sys, dataclasses
    from dlci.exec import Engine, Job
    out, report = sys.argv[1], sys.argv[2]
    inner = Engine(workers=1, timeout=60)
    def jobs():  # each job is made after a check in another engine (a mutant's eager check), where time goes
        for i in range(200):
            inner.run([Job(f"check-{i}", "tests.exec_jobs:sleep", (0.5,))], lambda _j, _r: None)
            yield Job(str(i), "tests.exec_jobs:sleep", (0.01,))
    with open(out, "a") as f, Engine(workers=1, timeout=60) as engine:
        def on_result(job, r):
            f.write(json.dumps({"id": job.id}) + "\\n")
            f.flush()
        info = engine.run(jobs(), on_result)
    inner.close()
    with open(report, "w") as f:
        json.dump(dataclasses.asdict(info), f)
""")


def test_sigterm_during_a_run_inside_a_run_stops_both(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(NESTED_SIGTERM_SCRIPT)
    out, report = tmp_path / "results.jsonl", tmp_path / "report.json"
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(report)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and not (out.exists() and len(out.read_text().splitlines()) >= 2):
            time.sleep(0.05)
        time.sleep(0.2)  # inside the inner run's half-second job
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0
    info = json.loads(report.read_text())
    assert info["interrupted"] and info["reason"] == "SIGTERM" and info["completed"] < 20, info


def test_sigterm_returns_promptly_with_what_was_gathered(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SIGTERM_SCRIPT)
    out, report = tmp_path / "results.jsonl", tmp_path / "report.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(report)], cwd=ROOT, env=env)
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if out.exists() and len(out.read_text().splitlines()) >= 4:
                break
            time.sleep(0.05)
        else:
            pytest.fail("no results streamed")
        workers = [c.pid for c in psutil.Process(proc.pid).children()]
        assert len(workers) == 2
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rc = proc.wait(10)
        assert time.monotonic() - t0 < 3
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 0
    info = json.loads(report.read_text())
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert info["interrupted"] and info["reason"] == "SIGTERM"
    assert info["completed"] == len(lines) >= 4 and len(lines) < 200
    assert all(r["status"] == PASS for r in lines)
    time.sleep(0.2)
    assert not [p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]


def test_worker_death_between_runs_and_failing_startup():
    with Engine(workers=1, timeout=20) as engine:
        _, res, _ = collect(engine, [job("a", "ok")])
        os.kill(int(res["a"]["message"]), signal.SIGKILL)
        time.sleep(0.1)
        info, res2, _ = collect(engine, [job("b", "ok")])
        assert res2["b"]["status"] == PASS and res2["b"]["message"] != res["a"]["message"]
        assert info.respawns == 1

    from dlci.exec import WorkerStartError
    with Engine(workers=1, timeout=20, warm_imports=("tests.exec_crash_import",)) as engine:
        with pytest.raises(WorkerStartError, match="SIGSEGV"):
            engine.run([job("c", "ok")], lambda j, r: None)


def test_on_result_error_propagates_and_engine_survives():
    def boom(j, r):
        raise KeyError("caller bug")

    with Engine(workers=1, timeout=20) as engine:
        with pytest.raises(KeyError):
            engine.run([job("a", "ok"), job("b", "sleep", 5.0)], boom)
        info, res, _ = collect(engine, [job("c", "ok")])
        assert res["c"]["status"] == PASS


def test_a_worker_over_the_rss_limit_but_not_the_pss_limit_keeps_its_job():
    # 220 MB shared with a forked child: RSS summed over the tree ~ 2 x 220 MB + 2 interpreters, PSS ~ 220 MB + one
    # interpreter; the limit lies between them. The worker is neither killed for OOM nor reaped as a dead one.
    with Engine(workers=1, timeout=30, memory_mb=380) as engine:
        info, res, _ = collect(engine, [job("shared", "fork_shared", 220, 2.0), job("after", "ok")])
    assert res["shared"]["status"] == PASS, (res["shared"]["symptom"], res["shared"]["message"])
    assert res["shared"]["message"] == "220"
    assert info.respawns == 0 and info.crashed_workers == 0


def test_a_worker_whose_device_poisoned_it_is_replaced_after_that_one_test(tmp_path):
    """A sticky CUDA error (illegal memory access, device-side assert) costs the test that caused it; the worker's
    process is unusable after it, so the next test gets a fresh worker, never a retry of the same one."""
    jobs = [job("before", "ok", affinity="a"), job("bad", "poisoned", affinity="a"), job("after", "ok", affinity="a")]
    with Engine(workers=1, timeout=20, log_dir=str(tmp_path)) as engine:
        info, res, _ = collect(engine, jobs)
    assert res["bad"]["status"] == CRASH and res["bad"]["retire_worker"]
    assert res["before"]["message"] == res["bad"]["message"] != res["after"]["message"]  # pids
    assert (info.retired, info.crashed_workers, info.completed) == (1, 0, 3)


def test_gpu_workers_spread_over_the_visible_devices_with_a_memory_share(tmp_path, monkeypatch):
    """With the runner's devices given (CUDA_VISIBLE_DEVICES), each worker slot sees one of them and its share of the
    device memory (the per-process cap the device targets set); a runner's own CUDA_VISIBLE_DEVICES is what is split,
    so runners sharing a host never see each other's GPUs. Real workers, no GPU needed."""
    from dlci.exec.engine import gpu_slot_env
    assert gpu_slot_env(0, ["0"], 80000, 2) == {"DLCI_GPU_MEMORY_MB": "36000"}  # one device: shared, kept as is
    assert gpu_slot_env(3, ["2", "5"], 80000, 4) == {"CUDA_VISIBLE_DEVICES": "5", "DLCI_GPU_MEMORY_MB": "36000"}
    assert gpu_slot_env(1, [], None, 2) == {}
    names = ("CUDA_VISIBLE_DEVICES", "DLCI_GPU_MEMORY_MB", "CUBLAS_WORKSPACE_CONFIG")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,7")
    with Engine(workers=2, timeout=20, log_dir=str(tmp_path), gpus=["3", "7"], gpu_memory_mb=16000) as engine:
        engine.start()
        _, res, _ = collect(engine, [job(f"e{k}", "env_values", names) for k in range(4)])
    seen = {r["message"]: json.loads(r["log"]) for r in res.values()}  # pid -> its environment
    assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in seen.values()) == ["3", "7"]
    assert {e["DLCI_GPU_MEMORY_MB"] for e in seen.values()} == {"14400"}
    assert {e["CUBLAS_WORKSPACE_CONFIG"] for e in seen.values()} == {":4096:8"}  # deterministic cuBLAS possible


def test_gpu_memory_per_process_from_nvidia_smi_output():
    from dlci.exec.engine import parse_compute_apps
    text = "12345, 1530\n12345, 20\n777, [N/A]\n\n4242, 80000\n"
    assert parse_compute_apps(text) == {12345: 1550, 4242: 80000}


def test_a_hung_twin_job_neither_starves_this_revisions_workers_nor_outlasts_the_deadline():
    """A base revision's compile that hangs to its timeout held the one twin worker; every job looked ahead was a
    twin's, so this revision's workers idled for two minutes, and the search's window waited for the hung job
    (onnx-cumsum-reverse: testing 152 s of a 102 s window, no reproducer checked). This revision's workers look
    further for their jobs, and at the deadline a running twin job is stopped, not waited for."""
    with Engine(workers=1, timeout=60, env={"DLCI_SIDE": "head"}, twin_env={"DLCI_SIDE": "base"}) as engine:
        jobs = [job("b-hang", "sleep", 30, twin=True)] + [job(f"b{i}", "ok", twin=True) for i in range(40)] + \
               [job(f"h{i}", "ok") for i in range(3)]
        t0 = time.monotonic()
        info, res, got = collect(engine, jobs, deadline=t0 + 8)
        took = time.monotonic() - t0
    assert all(res[f"h{i}"]["status"] == PASS for i in range(3))
    assert all(at - t0 < 8 for j, _, at in got if not j.twin)  # not after the hung twin's 30 s
    assert took < 15, took
    assert "b-hang" not in res and "b-hang" in info.unfinished and info.reason == "deadline"


def test_a_job_still_running_past_the_deadline_and_its_grace_is_stopped_without_an_outcome():
    """A mutant that hangs in this revision's worker held a scan's search window to the test timeout, 100 s past its
    end, and left no time to re-run the findings on base (onnx-cumsum-reverse missed). With a grace, a job still
    running that long after the deadline is stopped, unfinished: no outcome, so no finding of the harness's making;
    the jobs that finished in time keep theirs."""
    with Engine(workers=2, timeout=60) as engine:
        jobs = [job("hang", "sleep", 30)] + [job(f"h{i}", "ok") for i in range(3)]
        t0 = time.monotonic()
        info, res, _ = collect(engine, jobs, deadline=t0 + 4, grace=2)
        took = time.monotonic() - t0
    assert all(res[f"h{i}"]["status"] == PASS for i in range(3))
    assert took < 12, took
    assert "hang" not in res and "hang" in info.unfinished and info.reason == "deadline"


def test_twin_jobs_run_in_the_other_revisions_environment_beside_this_ones():
    """A divergence search's twin jobs go to the twin workers (the base revision's environment), the others to the
    engine's own, in one run; an engine without twin workers answers a twin job as a harness error."""
    with Engine(workers=1, timeout=30, env={"DLCI_SIDE": "head"}, twin_env={"DLCI_SIDE": "base"}) as engine:
        jobs = [job(f"h{i}", "env_values", ["DLCI_SIDE"]) for i in range(3)] + \
               [job(f"b{i}", "env_values", ["DLCI_SIDE"], twin=True) for i in range(3)]
        info, res, _ = collect(engine, jobs)
    assert info.completed == 6
    sides = {k: json.loads(r["log"])["DLCI_SIDE"] for k, r in res.items()}
    assert sides == {**{f"h{i}": "head" for i in range(3)}, **{f"b{i}": "base" for i in range(3)}}
    assert len({res[f"h{i}"]["message"] for i in range(3)} & {res[f"b{i}"]["message"] for i in range(3)}) == 0
    with Engine(workers=1, timeout=30) as engine:
        _, res, _ = collect(engine, [job("b", "env_values", ["DLCI_SIDE"], twin=True), job("h", "ok")])
    assert res["b"]["status"] == INVALID and res["h"]["status"] == PASS
