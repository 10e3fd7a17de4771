"""The execution engine: long-lived sandboxed workers, crash/hang/OOM containment, streaming results.

One event loop in the calling thread multiplexes all workers' pipes (no threads), so results, stage messages,
timeouts, memory sampling and signals are handled in one place and nothing gathered is lost when a worker
dies or the run is interrupted.
"""
from __future__ import annotations

import os
import pickle
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import psutil

import dlci.exec.protocol as protocol
from dlci import cache
from dlci.exec import interp
from dlci.outcome import CRASH, INVALID, Outcome

LOG_TAIL_BYTES = 4096
_POLL_S = 0.05          # event-loop tick: bounds the latency of timeouts and signals
_MEM_SAMPLE_S = 0.08    # RSS sampling period of busy workers
_RECYCLE_FRACTION = 0.8  # an idle worker above this share of the memory limit is replaced before its next job
_MAX_START_FAILURES = 3
STARVED_LOOKAHEAD = 4  # how much further than the lookahead the engine looks for a job of its idle workers
_DUMP_GRACE_S = 0.2     # time a hung worker gets to dump its stacks before SIGKILL
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One thread per worker: 2 workers share 2 cores, and oversubscription makes timings noisy.
_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "VECLIB_MAXIMUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TVM_NUM_THREADS")
_SECRET_NAMES = {"GITHUB_TOKEN", "INPUT_TOKEN", "GH_TOKEN"}


@dataclass
class Job:
    id: str                # unique within a run
    func: str              # "module:function", called in the worker as func(*args, stage_hook=hook) -> dict
    args: tuple            # picklable
    instance_id: str = ""  # for building a crash Outcome when the worker dies
    op: str = ""
    target: str = ""
    timeout: float | None = None  # overrides the engine default
    affinity: str = ""     # jobs with the same affinity prefer the same worker
    twin: bool = False     # run by the twin workers (Engine(twin_env=...): the other revision of a pull request)
    first: bool = False    # goes ahead of the jobs already looked ahead (a test an outcome brought forward)


@dataclass
class RunInfo:
    completed: int = 0             # results delivered through on_result (crash results included)
    crashed_workers: int = 0       # workers that died unexpectedly or were killed for timeout/oom
    respawns: int = 0              # workers started to replace a dead one
    interrupted: bool = False      # SIGTERM/SIGINT, or the deadline left jobs undispatched
    reason: str = ""               # "SIGTERM", "SIGINT", "deadline", a stop()'s reason or ""
    busy_seconds: list = field(default_factory=list)     # per worker slot: time spent on jobs
    wall: float = 0.0
    startup_seconds: list = field(default_factory=list)  # per worker process started in this run: spawn->ready
    not_started: int = 0           # jobs pulled from the iterable but never dispatched
    unfinished: list = field(default_factory=list)       # ids of jobs killed by an interrupt (no result)
    recycled: int = 0              # idle workers replaced because their memory crept up
    retired: int = 0               # workers replaced after a device error poisoned their process (CUDA context)

    @property
    def wall_seconds(self) -> float:
        return self.wall


def is_secret_name(name: str) -> bool:
    up = name.upper()
    return (up in _SECRET_NAMES or up.startswith("ACTIONS_") or up.endswith("_TOKEN")
            or up.endswith("_SECRET"))


def worker_env(overrides: dict | None = None) -> dict:
    """Environment of a worker: inherited, single-threaded by default, quiet TF, no secrets."""
    env = dict(os.environ)
    for var in _THREAD_VARS:
        env[var] = "1"
    env["TF_NUM_INTEROP_THREADS"] = "2"  # 1 can deadlock TF graphs that block an inter-op thread
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    # inductor would otherwise fork a pool of compile workers per process: memory and cores we do not have
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # cuBLAS is deterministic only with a fixed workspace: the device oracle's deterministic re-run needs it (read
    # when CUDA starts in the worker; nothing on a CPU runner)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env["PYTHONUNBUFFERED"] = "1"  # a crash must not swallow what was printed just before it
    env.update({k: str(v) for k, v in (overrides or {}).items()})
    # the trust mark and the cache roots are this process's, whatever a revision's environment says
    for name in (cache.ENV, cache.UNTRUSTED_ENV, cache.UNTRUSTED_DIR_ENV, "DLCI_FORM_STORE"):
        if name in os.environ:
            env[name] = os.environ[name]
        else:
            env.pop(name, None)
    # the revision's paths first (its code must win over an installed copy), then the job modules the parent can
    # import; dlci itself comes from its bootstrap (dlci.exec.interp), whatever a revision puts on the path
    prefixes = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    extra = [p for p in sys.path if p and os.path.isdir(p) and not os.path.realpath(p).startswith(prefixes)]
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + extra + [_ROOT]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return {k: v for k, v in env.items() if not is_secret_name(k)}


def _log_tail(path: str, start: int, limit: int = LOG_TAIL_BYTES) -> str:
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            begin = max(start, end - limit)
            f.seek(begin)
            data = f.read(end - begin)
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    return ("[...]\n" + text) if begin > start else text


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class WorkerStartError(RuntimeError):
    pass


class _Worker:
    def __init__(self, slot: int, proc: subprocess.Popen, to_fd: int, from_fd: int, log_path: str):
        self.slot = slot
        self.proc = proc
        self.to_fd = to_fd
        self.from_fd = from_fd
        self.log_path = log_path
        self.state = "starting"   # starting -> idle <-> busy -> dead
        self.spawned_at = time.monotonic()
        self.frames = protocol.FrameBuffer()
        self.out = bytearray()    # bytes not yet accepted by the worker's pipe
        self.writing = False      # to_fd registered for EVENT_WRITE
        self.job: Job | None = None
        self.job_t0 = 0.0
        self.job_timeout = 0.0
        self.stage: str | None = None
        self.log_offset = 0
        self.last_affinity = ""
        self.last_rss = 0
        self.gpu_mb = 0           # GPU memory of the worker's processes when it was killed for it
        self.kill_reason = ""     # timeout / oom / interrupt / close / recycle / protocol / startup
        self.dump_sent = 0.0      # when the worker was asked for a stack dump before a timeout kill
        self.info: dict = {}
        try:
            self.ps = psutil.Process(proc.pid)
        except psutil.Error:
            self.ps = None

    def rss(self) -> int:
        """Summed RSS of the worker and its children: cheap, but counts pages shared with forked children twice."""
        return self._tree_memory(lambda p: p.memory_info().rss)

    def pss(self) -> int:
        """Summed proportional set size: shared pages counted once. Costly (reads smaps), so only used to
        confirm that a worker over the RSS limit really is over it (forked compile helpers share most pages)."""
        def one(p):
            try:
                return p.memory_full_info().pss
            except (AttributeError, psutil.AccessDenied):
                return p.memory_info().rss
        return self._tree_memory(one)

    def _tree_memory(self, measure) -> int:
        if self.ps is None:
            return 0
        try:
            total = measure(self.ps)
            for child in self.ps.children(recursive=True):
                try:
                    total += measure(child)
                except psutil.Error:
                    pass
            return total
        except psutil.Error:
            return 0


class _RunCtx:
    def __init__(self, on_result, nslots):
        self.on_result = on_result
        self.info = RunInfo(busy_seconds=[0.0] * nslots)


class Engine:
    """A pool of sandboxed worker processes; see the package docstring for the contract."""

    def __init__(self, workers: int = 2, timeout: float = 60.0, memory_mb: int = 2500,
                 warm_imports: Sequence[str] = (), env: dict | None = None, log_dir: str | None = None,
                 data_limit_mb: int | None = None, gpus: Sequence[str] = (), gpu_memory_mb: int | None = None,
                 twin_env: dict | None = None, twin_workers: int | None = None):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers
        # the twin workers run the other revision of a pull request beside this one (jobs marked ``twin``): the
        # paired runs of a divergence search, in one engine and one loop; slots workers.. are theirs
        # (twin_workers without twin_env: slots whose environment set_twin_env gives before the first twin job)
        self.twin_workers = (1 if twin_env is not None else 0) if twin_workers is None else twin_workers
        self._twin_env = worker_env(twin_env) if twin_env is not None else None
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.warm_imports = tuple(warm_imports)
        # RLIMIT_DATA backstop (0: none); well above the sampled limit so the sampler normally wins
        self.data_limit_mb = (2 * memory_mb + 2048) if data_limit_mb is None else data_limit_mb
        self._env = worker_env(env)
        # GPU workers (a campaign with device targets): the runner's devices spread over the slots, each worker's
        # share of device memory enforced in the worker (DLCI_GPU_MEMORY_MB) and sampled here (nvidia-smi)
        self.gpus, self.gpu_memory_mb = list(gpus), gpu_memory_mb
        self._gpu_sampler = GpuMemory() if gpu_memory_mb else None
        self._own_log_dir = log_dir is None
        self.log_dir = tempfile.mkdtemp(prefix="dlci-exec-") if log_dir is None else log_dir
        os.makedirs(self.log_dir, exist_ok=True)
        slots = workers + self.twin_workers
        self._slots: list[_Worker | None] = [None] * slots
        self._ever_spawned = [False] * slots
        self._start_failures = [0] * slots
        self._sel = selectors.DefaultSelector()
        self._ctx: _RunCtx | None = None
        self._signal: int | None = None
        self._stop: str | None = None  # stop(): why every run ends now, from any thread
        self._last_mem = 0.0
        self._closed = False
        self.startup_log: list[dict] = []  # every worker start: slot, seconds, worker-side info

    # -- public ---------------------------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def start(self, wait: bool = True, timeout: float = 300.0) -> list[float]:
        """Start all workers now (instead of on demand); returns their startup seconds once ready."""
        self._check_open()
        for slot in range(len(self._slots)):
            if self._slots[slot] is None:
                self._spawn(slot)
        if wait:
            end = time.monotonic() + timeout
            while any(w is not None and w.state == "starting" for w in self._slots):
                if time.monotonic() > end:
                    raise WorkerStartError("workers did not become ready in time")
                self._pump(_POLL_S)
        return [w.info.get("startup_wall", 0.0) for w in self._slots if w is not None]

    def set_twin_env(self, env: dict) -> None:
        """The twin workers' environment (the other revision's), given once it is known; their slots start on their
        first job."""
        if not self.twin_workers:
            raise ValueError("an engine without twin slots")
        self._twin_env = worker_env(env)

    def run(self, jobs: Iterable[Job], on_result: Callable[[Job, dict], None], *,
            deadline: float | None = None, grace: float | None = None) -> RunInfo:
        """Run jobs, calling ``on_result(job, outcome_dict)`` as each completes; see RunInfo. ``grace``: a job still
        running this many seconds after the deadline is stopped, unfinished (no outcome); by default it runs to its
        own timeout."""
        self._check_open()
        t0 = time.monotonic()
        ctx = self._ctx = _RunCtx(on_result, len(self._slots))
        info = ctx.info
        it = iter(jobs)
        exhausted = False
        pending: deque[Job] = deque()
        lookahead = max(16, 8 * self.workers)
        dispatching = True
        self._signal = None
        restore = self._install_handlers()
        clean = False
        try:
            while True:
                if self._signal is not None or self._stop is not None:
                    info.interrupted = True
                    info.reason = _signal_name(self._signal) if self._signal is not None else self._stop
                    self._kill_all("interrupt")
                    break
                if dispatching and deadline is not None and time.monotonic() >= deadline:
                    dispatching = False
                    if not pending and not exhausted:
                        try:
                            pending.append(next(it))  # only to learn whether anything was left out
                        except StopIteration:
                            exhausted = True
                    if pending:
                        info.interrupted, info.reason = True, "deadline"
                    # a twin job answers the search that asked for it, whose window this deadline ends: one still
                    # running (a base compile that hangs to its timeout) is not waited for
                    for w in list(self._slots):
                        if w is not None and w.state == "busy" and self._is_twin(w.slot):
                            self._kill(w, "interrupt")
                            self._reap(w)
                if not dispatching and grace is not None and time.monotonic() >= deadline + grace:
                    # a hang that started before the deadline must not hold what comes after it to its timeout
                    for w in list(self._slots):
                        if w is not None and w.state == "busy":
                            info.interrupted, info.reason = True, "deadline"
                            self._kill(w, "interrupt")
                            self._reap(w)
                if dispatching:
                    # this revision's workers idle while every job looked ahead is a twin's (one twin worker busy
                    # for minutes): look further for one of theirs
                    while not exhausted and (len(pending) < lookahead or len(pending) < STARVED_LOOKAHEAD * lookahead
                                             and self._own_starved(pending)):
                        try:
                            job = next(it)
                            (pending.appendleft if job.first else pending.append)(job)
                        except StopIteration:
                            exhausted = True
                    self._ensure_workers(pending)
                    self._dispatch(pending)
                busy = any(w is not None and w.state == "busy" for w in self._slots)
                if not busy and (not dispatching or (exhausted and not pending)):
                    break
                self._pump(_POLL_S)
            clean = True
        finally:
            restore()
            if not clean:  # on_result raised or similar: drop what is running, keep the engine usable
                self._ctx = None
                self._kill_all("interrupt")
            self._ctx = None
        info.not_started = len(pending)
        info.wall = time.monotonic() - t0
        return info

    def stop(self, reason: str) -> None:
        """End the running (and every later) ``run`` now, its jobs killed: a caller's other thread learnt that the
        results would be worthless (the code under test is not the revision's)."""
        self._stop = reason

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for w in self._slots:
            if w is not None and w.state in ("idle", "starting"):
                try:
                    os.write(w.to_fd, protocol.encode(("exit",)))
                except OSError:
                    pass
        end = time.monotonic() + 1.0
        for w in list(self._slots):
            if w is None:
                continue
            try:
                w.proc.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self._kill(w, "close")
            self._reap(w)
        self._sel.close()
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __del__(self):
        try:
            if not self._closed:
                self.close()
        except Exception:
            pass

    # -- workers ----------------------------------------------------------------------------------------
    def _check_open(self):
        if self._closed:
            raise RuntimeError("engine is closed")

    def _spawn(self, slot: int) -> _Worker:
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        log_path = os.path.join(self.log_dir, f"worker-{slot}.log")
        with open(log_path, "ab") as log:
            log.write(f"=== dlci worker slot {slot} starting at {time.strftime('%H:%M:%S')} ===\n".encode())
            log.flush()
            cmd = interp.command("dlci.exec.worker", "--in", str(p2c_r), "--out", str(c2p_w),
                                 "--warm", ",".join(self.warm_imports), "--data-limit-mb", str(self.data_limit_mb))
            try:
                # own session: the whole group can be killed, and a terminal's Ctrl-C reaches only the parent
                # fork+exec of a fresh interpreter (never a bare fork: CUDA state does not survive one)
                env = self._twin_env if self._is_twin(slot) else self._env
                env = {**env, **gpu_slot_env(slot % self.workers, self.gpus, self.gpu_memory_mb, self.workers)} \
                    if self.gpus or self.gpu_memory_mb else env
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                        pass_fds=(p2c_r, c2p_w), env=interp.env(env), start_new_session=True,
                                        cwd=interp.neutral_dir())
            finally:
                os.close(p2c_r)
                os.close(c2p_w)
        os.set_blocking(c2p_r, False)
        os.set_blocking(p2c_w, False)
        w = _Worker(slot, proc, p2c_w, c2p_r, log_path)
        self._sel.register(c2p_r, selectors.EVENT_READ, (w, "r"))
        if self._ever_spawned[slot] and self._ctx is not None:
            self._ctx.info.respawns += 1
        self._ever_spawned[slot] = True
        self._slots[slot] = w
        return w

    def _own_starved(self, pending: deque) -> bool:
        """A slot of this revision's workers is idle (or not started: they start for a job) and no job of its kind is
        pending."""
        return not any(not job.twin for job in pending) and any(
            (w is None or w.state == "idle") and not self._is_twin(slot) for slot, w in enumerate(self._slots))

    def _is_twin(self, slot: int) -> bool:
        return slot >= self.workers

    def _ensure_workers(self, pending) -> None:
        # lazy: only start a worker for a job that is waiting and has no idle/starting worker (of its side) to go to
        for twin in (False, True):
            waiting = sum(1 for job in pending if job.twin == twin)
            ready = sum(1 for w in self._slots if w is not None and self._is_twin(w.slot) == twin
                        and w.state in ("idle", "starting") and not w.kill_reason)
            need = waiting - ready
            for slot in range(len(self._slots)):
                if need <= 0:
                    break
                if self._slots[slot] is None and self._is_twin(slot) == twin:
                    self._spawn(slot)
                    need -= 1

    def _kill(self, w: _Worker, reason: str) -> None:
        if not w.kill_reason:
            w.kill_reason = reason
        try:
            os.killpg(w.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            w.proc.kill()
        except OSError:
            pass

    def _kill_all(self, reason: str) -> None:
        for w in list(self._slots):
            if w is not None:
                self._kill(w, reason)
                self._reap(w)

    def _reap(self, w: _Worker) -> None:
        """Finish a worker that died or was killed: drain its pipe, build the crash result, free the slot."""
        if w.state == "dead":
            return
        self._drain(w)  # a result sent just before death still counts as a result
        if w.state == "dead":
            return
        try:
            rc = w.proc.wait(2.0)
        except subprocess.TimeoutExpired:  # EOF but alive (closed its own pipe): not usable anymore
            self._kill(w, w.kill_reason or "protocol")
            rc = w.proc.wait()
        try:
            os.killpg(w.proc.pid, signal.SIGKILL)  # leftovers the job forked
        except (ProcessLookupError, PermissionError):
            pass
        prev_state = w.state
        w.state = "dead"
        for fd in (w.from_fd, w.to_fd):
            try:
                self._sel.unregister(fd)
            except (KeyError, ValueError):
                pass
            os.close(fd)
        self._slots[w.slot] = None
        ctx = self._ctx
        if w.kill_reason in ("interrupt", "close", "recycle", "retire"):
            if w.job is not None and ctx is not None:
                ctx.info.unfinished.append(w.job.id)
            return
        if rc < 0:
            symptom = _signal_name(-rc)
        else:
            symptom = f"exit {rc}"
        if w.kill_reason in ("timeout", "oom"):
            symptom = w.kill_reason
        if prev_state == "starting":
            self._start_failures[w.slot] += 1
            if self._start_failures[w.slot] >= _MAX_START_FAILURES:
                raise WorkerStartError(f"worker slot {w.slot} failed to start {_MAX_START_FAILURES} times "
                                       f"({symptom}):\n{_log_tail(w.log_path, 0)}")
            return
        if ctx is not None:
            ctx.info.crashed_workers += 1
        job = w.job
        if job is None or ctx is None:
            return
        seconds = time.monotonic() - w.job_t0
        ctx.info.busy_seconds[w.slot] += seconds
        where = f" in stage {w.stage!r}" if w.stage else ""
        if symptom == "timeout":
            message = f"no result after {w.job_timeout:g} s{where}; worker killed"
        elif symptom == "oom" and w.gpu_mb:
            message = (f"worker GPU memory {w.gpu_mb} MB exceeded its {self._gpu_limit(w.slot)} MB share{where}; "
                       "killed")
        elif symptom == "oom":
            message = f"worker memory {w.last_rss >> 20} MB exceeded the {self.memory_mb} MB limit{where}; killed"
        elif rc < 0:
            message = f"worker killed by {symptom}{where}"
        else:
            message = f"worker exited with status {rc}{where}"
        if w.kill_reason == "protocol":
            status, stage, symptom = INVALID, "harness", "protocol"
            message = w.info.get("protocol_error", "worker broke the protocol")
        else:
            status, stage = CRASH, w.stage
        result = Outcome(job.instance_id, job.op, job.target, status=status, stage=stage, symptom=symptom,
                         message=message, log=_log_tail(w.log_path, w.log_offset), seconds=seconds).to_dict()
        self._deliver(job, result)

    # -- jobs -------------------------------------------------------------------------------------------
    def _dispatch(self, pending: deque) -> None:
        if (not self.twin_workers or self._twin_env is None) and any(job.twin for job in pending):
            # a caller's bug (no twin slot, or its environment not given yet): said, never waited for
            for job in [j for j in pending if j.twin]:
                pending.remove(job)
                self._deliver(job, Outcome(job.instance_id, job.op, job.target, status=INVALID, stage="harness",
                                           symptom="no twin workers",
                                           message="a twin job on an engine without twin_env").to_dict())
        # poll(): a worker that died while idle (e.g. between runs) must not be handed a job
        idle = [w for w in self._slots
                if w is not None and w.state == "idle" and not w.kill_reason and w.proc.poll() is None]
        if not idle or not pending:
            return
        # a worker's caches are worth most for the affinity it just ran
        for w in idle:
            if w.last_affinity and pending:
                for i, job in enumerate(pending):
                    if job.affinity == w.last_affinity and job.twin == self._is_twin(w.slot):
                        del pending[i]
                        self._start_job(w, job)
                        break
        for w in idle:
            if w.state != "idle" or not pending:
                continue
            mine = [i for i, job in enumerate(pending) if job.twin == self._is_twin(w.slot)]
            if not mine:
                continue
            # leave jobs another worker has warm caches for to that worker
            held = {x.last_affinity for x in self._slots if x is not None and x is not w and x.last_affinity}
            pick = next((i for i in mine if not pending[i].affinity or pending[i].affinity not in held), mine[0])
            job = pending[pick]
            del pending[pick]
            self._start_job(w, job)

    def _start_job(self, w: _Worker, job: Job) -> None:
        meta = {"instance_id": job.instance_id, "op": job.op, "target": job.target}
        try:
            blob = pickle.dumps(job.args, protocol=protocol.PROTOCOL)
        except Exception as exc:  # a dlci bug: report it and keep the worker
            self._deliver(job, Outcome(job.instance_id, job.op, job.target, status=INVALID, stage="harness",
                                       symptom=type(exc).__name__,
                                       message=f"job arguments not picklable: {exc}").to_dict())
            return
        w.job, w.state, w.stage, w.dump_sent = job, "busy", None, 0.0
        w.job_t0 = time.monotonic()
        w.job_timeout = self.timeout if job.timeout is None else job.timeout
        try:
            w.log_offset = os.path.getsize(w.log_path)
        except OSError:
            w.log_offset = 0
        w.last_affinity = job.affinity
        w.out += protocol.encode(("job", job.id, job.func, blob, meta))
        self._flush(w)

    def _deliver(self, job: Job, result: dict) -> None:
        ctx = self._ctx
        if ctx is None:
            return
        ctx.info.completed += 1
        ctx.on_result(job, result)

    # -- event loop -------------------------------------------------------------------------------------
    def _flush(self, w: _Worker) -> None:
        while w.out:
            try:
                n = os.write(w.to_fd, w.out)
            except BlockingIOError:
                break
            except (BrokenPipeError, OSError):
                w.out.clear()  # the read side will see the death
                break
            del w.out[:n]
        want = bool(w.out)
        if want != w.writing:
            if want:
                self._sel.register(w.to_fd, selectors.EVENT_WRITE, (w, "w"))
            else:
                self._sel.unregister(w.to_fd)
            w.writing = want

    def _drain(self, w: _Worker) -> bool:
        """Read what is available; returns False at EOF."""
        while True:
            try:
                data = os.read(w.from_fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            for msg in w.frames.feed(data):
                self._on_message(w, msg)
                if w.state == "dead":
                    return False

    def _on_message(self, w: _Worker, msg) -> None:
        if isinstance(msg, protocol.ProtocolError) or not isinstance(msg, tuple) or not msg:
            w.info["protocol_error"] = str(msg)
            self._kill(w, "protocol")
            return
        kind = msg[0]
        if kind == "stage" and len(msg) == 3:
            if w.job is not None and msg[1] == w.job.id:
                w.stage = msg[2]
        elif kind == "result" and len(msg) == 4:
            _, job_id, result, _seconds = msg
            # a complete result counts even if the worker is being killed (interrupt, oom race) --
            # unless the worker already broke the protocol
            if w.job is None or job_id != w.job.id or w.kill_reason == "protocol":
                return
            job = w.job
            w.job, w.state = None, "idle"
            ctx = self._ctx
            if ctx is not None:
                ctx.info.busy_seconds[w.slot] += time.monotonic() - w.job_t0
            if (not w.kill_reason and w.last_rss > _RECYCLE_FRACTION * (self.memory_mb << 20)
                    and w.pss() > _RECYCLE_FRACTION * (self.memory_mb << 20)):
                self._kill(w, "recycle")  # memory crept up (caches, leaks): a fresh worker is cheaper
                if ctx is not None:
                    ctx.info.recycled += 1
            if not isinstance(result, dict):
                result = Outcome(job.instance_id, job.op, job.target, status=INVALID, stage="harness",
                                 symptom="protocol", message="worker sent a non-dict result").to_dict()
            elif not w.kill_reason and _poisoned(result):
                # a CUDA error (illegal memory access, device-side assert) leaves the process's context unusable:
                # it cost that one test; the next one gets a fresh worker
                self._kill(w, "retire")
                if ctx is not None:
                    ctx.info.retired += 1
            self._deliver(job, result)
        elif kind == "ready" and len(msg) == 2:
            info = dict(msg[1]) if isinstance(msg[1], dict) else {}
            info["startup_wall"] = time.monotonic() - w.spawned_at
            w.info.update(info)
            w.state = "idle"
            self._start_failures[w.slot] = 0
            self.startup_log.append({"slot": w.slot, **info})
            if self._ctx is not None:
                self._ctx.info.startup_seconds.append(info["startup_wall"])

    def _pump(self, timeout: float) -> None:
        try:
            events = self._sel.select(timeout)
        except InterruptedError:
            events = []
        for key, _mask in events:
            w, kind = key.data
            if w.state == "dead":
                continue
            if kind == "w":
                self._flush(w)
            elif not self._drain(w):
                self._reap(w)
        self._check_workers()

    def _gpu_limit(self, slot: int) -> int:
        return int(gpu_slot_env(slot % self.workers, self.gpus, self.gpu_memory_mb,
                                self.workers).get("DLCI_GPU_MEMORY_MB", 0))

    def _check_gpu_memory(self, now: float) -> None:
        """Kill a busy worker whose processes hold more GPU memory than its share (allocators the per-process cap
        in the worker does not cover: TVM's, OpenVINO's, a library's own)."""
        usage = self._gpu_sampler.sample(now)
        if not usage:
            return
        for w in list(self._slots):
            if w is None or w.state != "busy" or w.ps is None:
                continue
            try:
                pids = [w.proc.pid] + [c.pid for c in w.ps.children(recursive=True)]
            except psutil.Error:
                continue
            used = sum(usage.get(pid, 0) for pid in pids)
            if used > self._gpu_limit(w.slot) > 0:
                w.gpu_mb = used
                self._kill(w, "oom")
                self._reap(w)

    def _check_workers(self) -> None:
        now = time.monotonic()
        sample = now - self._last_mem >= _MEM_SAMPLE_S
        if sample:
            self._last_mem = now
            if self._gpu_sampler is not None:
                self._check_gpu_memory(now)
        for w in list(self._slots):
            if w is None or w.state == "dead":
                continue
            if w.kill_reason or w.proc.poll() is not None:
                self._reap(w)  # also catches a death whose EOF is held back by a forked grandchild
                continue
            if w.state == "busy":
                if now - w.job_t0 > w.job_timeout:
                    self._drain(w)
                    if w.state != "busy":
                        continue
                    if not w.dump_sent:
                        # faulthandler in the worker writes every thread's stack to the log: where it hung
                        w.dump_sent = now
                        try:
                            os.kill(w.proc.pid, signal.SIGUSR1)
                        except ProcessLookupError:
                            pass
                    elif now - w.dump_sent > _DUMP_GRACE_S:
                        self._kill(w, "timeout")
                        self._reap(w)
                    continue
                if sample:
                    w.last_rss = w.rss()
                    if w.last_rss > (self.memory_mb << 20):
                        w.last_rss = w.pss()  # the RSS sum over-counts forked children: confirm with PSS
                        if w.last_rss > (self.memory_mb << 20):
                            self._kill(w, "oom")
                            self._reap(w)  # only a worker killed here: one under the PSS limit keeps its job
            elif w.state == "starting" and now - w.spawned_at > max(300.0, self.timeout):
                self._kill(w, "startup")
                self._reap(w)

    # -- signals ----------------------------------------------------------------------------------------
    def _install_handlers(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {}

        def handler(signum, frame):
            self._signal = signum
            outer = previous.get(signum)
            if getattr(outer, "dlci_engine", False):  # a run inside another's (a mutant's eager check): both stop
                outer(signum, frame)

        handler.dlci_engine = True
        for sig in (signal.SIGTERM, signal.SIGINT):
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN:  # e.g. started under nohup: keep ignoring
                continue
            previous[sig] = old
            signal.signal(sig, handler)

        def restore():
            for sig, old in previous.items():
                signal.signal(sig, old if old is not None else signal.SIG_DFL)

        return restore


class GpuMemory:
    """GPU memory per process id, from ``nvidia-smi --query-compute-apps`` (at most every PERIOD_S seconds; an
    empty answer where there is no nvidia-smi, or inside a container whose process ids the driver does not show)."""
    PERIOD_S = 2.0

    def __init__(self):
        self.smi = shutil.which("nvidia-smi")
        self.last, self.usage = 0.0, {}

    def sample(self, now: float) -> dict[int, int]:
        if self.smi is None or now - self.last < self.PERIOD_S:
            return self.usage if self.smi else {}
        self.last = now
        try:
            out = subprocess.run([self.smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            return {}
        self.usage = parse_compute_apps(out)
        return self.usage


def parse_compute_apps(text: str) -> dict[int, int]:
    """``pid, used_memory`` lines (MiB) -> {pid: MiB}; lines nvidia-smi cannot fill ("[N/A]") are skipped."""
    usage: dict[int, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            usage[int(parts[0])] = usage.get(int(parts[0]), 0) + int(parts[1])
    return usage


def _poisoned(result: dict) -> bool:
    """Did the test (or a member of a batch) leave its worker's process unusable (Outcome.retire_worker)?"""
    return bool(result.get("retire_worker")) or any(
        isinstance(m, dict) and m.get("retire_worker") for m in result.get("batch_outcomes") or ())


def gpu_slot_env(slot: int, visible: list[str], gpu_memory_mb: int | None, workers: int) -> dict:
    """What one worker slot is told about the GPUs: the runner's visible devices (CUDA_VISIBLE_DEVICES, or all the
    driver shows) spread over the slots, one device each, and its share of that device's memory
    (DLCI_GPU_MEMORY_MB, the device targets' per-process cap: part of the OOM check). With one device every slot
    shares it and keeps CUDA_VISIBLE_DEVICES as it was."""
    env = {}
    if len(visible) > 1:
        env["CUDA_VISIBLE_DEVICES"] = visible[slot % len(visible)]
    if gpu_memory_mb:
        n = max(1, len(visible))
        sharing = sum(1 for s in range(workers) if s % n == slot % n)  # the slots on this slot's device
        env["DLCI_GPU_MEMORY_MB"] = str(max(256, int(gpu_memory_mb * 0.9) // sharing))
    return env


def run_isolated(job: Job, timeout: float | None = None, memory_mb: int = 2500, *,
                 env: dict | None = None, log_dir: str | None = None) -> dict:
    """One job in one fresh process: the naive baseline, and a confirmation re-run of a crash."""
    results: list[dict] = []
    if timeout is None:
        timeout = job.timeout if job.timeout is not None else 60.0
    with Engine(workers=1, timeout=timeout, memory_mb=memory_mb, env=env, log_dir=log_dir) as engine:
        info = engine.run([Job(**{**job.__dict__, "timeout": timeout})], lambda _j, r: results.append(r))
    if not results:
        raise InterruptedError(f"run_isolated({job.id}) interrupted ({info.reason})")
    return results[0]
