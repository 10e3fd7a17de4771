"""The action's scan runs a pull request's code; the action's own process holds the GitHub token. The two are kept
apart so that the PR's code can neither read the token, nor change code the token holder runs, nor outlive the scan.

Who runs the PR's code (:func:`identity`), strictly in this order:

- **a dedicated user**: ``$DLCI_SANDBOX_USER`` (default ``dlci-sandbox``, which the image creates), when this
  process is root;
- **a transient uid**, when this process is root and no such user exists: a uid no account, group or process uses,
  chosen for this scan alone (nothing else runs under it, so its leftovers are exactly its processes);
- **this process's own user**, only where nothing it could reach holds a token (:func:`reachable_secrets`: the
  ``token`` input empty and no secret in this process's or its ancestors' environments) *and* either the runner is
  GitHub-hosted (a fresh virtual machine per job) or ``DLCI_SANDBOX=same-user`` says the runner is ephemeral. That is
  the unprivileged half of the split workflows (``workflows/dlci.yml``). Anything else is refused
  (:class:`SandboxRefused`, exit 2) with what to set up. Root without capabilities is never a sandbox: owner
  permission bits still let it rewrite root's files, the modules the token holder imports after the scan included.

A separate uid starts through :data:`_LAUNCH`: as root, in a mount namespace of its own where it sees the system and
nothing else of the machine (every other top-level folder, and any private folder on the way, replaced by an empty
one holding only the interpreter, dlci and its caches, read-only; the temporary folders fresh and empty; its own
folder writable); then it drops to the uid with no supplementary group, no capability and ``no_new_privs``. Where the kernel refuses a mount namespace (a container
without ``CAP_SYS_ADMIN``, such as the image) it drops to the uid all the same, and the probe (:meth:`runs_here`)
says whether that uid can start dlci.

The scan gets only the variables of :data:`_PASSED` (and those ``$DLCI_PASS_ENV`` names), then its own: home, cache,
the untrusted mark. Its results are read back as hostile data (:mod:`dlci.report.intake`) after every process of the
scan is gone: found by uid for a separate uid, as descendants of this process (a child subreaper, so a double fork
cannot leave the tree) for the same user.
"""
from __future__ import annotations

import grp
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

USER_ENV = "DLCI_SANDBOX_USER"    # the dedicated user to run pull requests' code as (default dlci-sandbox)
MODE_ENV = "DLCI_SANDBOX"         # auto (default) | require (a separate uid or nothing) | same-user (see above)
PASS_ENV = "DLCI_PASS_ENV"        # further variable names the runner's admin lets through to the scan
MODES = ("auto", "require", "same-user")
DEFAULT_USER = "dlci-sandbox"

# what of this process's environment a scan may see, by exact name: locale, path, thread and device settings,
# frameworks' switches, dlci's own knobs. Never a prefix: a secret named TF_API_KEY or DLCI_TOKEN must not pass
_PASSED = frozenset({
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "TZ", "TERM", "NO_COLOR", "SOURCE_DATE_EPOCH",
    "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONHASHSEED",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "CUBLAS_WORKSPACE_CONFIG",
    "TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL", "KERAS_BACKEND", "TVM_LIBRARY_PATH",
    "TORCHINDUCTOR_COMPILE_THREADS",
    "DLCI_GPU_MEMORY_MB", "DLCI_ALLOW_TF32", "DLCI_TARGET_MODULES", "DLCI_RULE_MODULES", "DLCI_EXPORT_CACHES",
    "DLCI_OPTIONAL_IMPORTS",
})
# variables of the run itself that the unprivileged split job has anyway: its artifact and cache service (writes go
# to this run's artifacts, which the poster treats as untrusted, and to caches scoped to the pull request's ref)
_RUN_SCOPED = frozenset({"ACTIONS_RUNTIME_TOKEN", "ACTIONS_RUNTIME_URL", "ACTIONS_CACHE_URL", "ACTIONS_RESULTS_URL",
                         "ACTIONS_CACHE_SERVICE_V2"})
_TOKEN_VALUE = re.compile(rb"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")
_TMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # fresh and empty in the scan's mount namespace
# the top-level folders the scan sees as they are in its mount namespace: the system (programs, libraries,
# configuration, devices, the resolver under /run). Every other one (/home, /root, /opt, /srv, /mnt, the runner's
# own folders wherever they are) is replaced by an empty folder holding only what the scan must read
_SYSTEM = frozenset({"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "proc", "sys", "dev", "run",
                     "var", "boot"})


class SandboxError(RuntimeError):
    """The sandbox could not be set up (exit 3)."""


class SandboxRefused(RuntimeError):
    """No safe way to run the pull request's code here (exit 2): the message says what to set up."""


def make_undumpable() -> bool:
    """Close /proc/<pid>/environ, /proc/<pid>/mem and ptrace of this process to every unprivileged process,
    its own user's included (Linux's PR_SET_DUMPABLE). True when it took."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Orphans of this process's descendants are re-parented to it (PR_SET_CHILD_SUBREAPER), so a double fork
    cannot leave its tree: what the scan leaves is found as this process's descendants."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_secret_name(name: str) -> bool:
    from dlci.exec.engine import is_secret_name as secret
    return secret(name)


def reachable_secrets() -> list[str]:
    """Secrets this process's user can read: in this process's environment and in its ancestors' (the step's
    shell, the runner), by name (``*_TOKEN``, ``*_SECRET``, ``ACTIONS_*``...) or by value (a GitHub token's shape).
    The run's own artifact and cache service variables do not count (:data:`_RUN_SCOPED`). Empty: nothing a process
    of this user could read holds a token."""
    found = []

    def look(env: dict[bytes, bytes], whose: str) -> None:
        for name, value in env.items():
            text = name.decode("utf-8", "replace")
            if not value or text in _RUN_SCOPED:
                continue
            if is_secret_name(text) or _TOKEN_VALUE.search(value):
                found.append(f"{text} ({whose})")
    look({k.encode(): v.encode() for k, v in os.environ.items()}, "this process")
    for pid in _ancestors(os.getpid()):
        try:
            data = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:  # another user's process, or a non-dumpable one: closed to the scan's user as to us
            continue
        env = dict(item.partition(b"=")[::2] for item in data.split(b"\0") if b"=" in item)
        look(env, f"process {pid} {_comm(pid)}")
    return sorted(set(found))


def _ancestors(pid: int) -> list[int]:
    chain = []
    while True:
        parent = _ppid(pid)
        if parent is None or parent <= 1 or parent in chain:
            return chain
        chain.append(parent)
        pid = parent


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _comm(pid: int) -> str:
    try:
        return "(" + Path(f"/proc/{pid}/comm").read_text().strip()[:40] + ")"
    except OSError:
        return ""


@dataclass
class Identity:
    kind: str        # dedicated | transient | same
    uid: int
    gid: int
    name: str
    why: str         # for the log: who runs the PR's code, and why that one

    @property
    def separate(self) -> bool:
        return self.kind != "same"


def mode() -> str:
    value = os.environ.get(MODE_ENV, "").strip() or "auto"
    if value not in MODES:
        raise SandboxRefused(f"{MODE_ENV}={value!r}: must be one of {', '.join(MODES)}")
    return value


def identity() -> Identity:
    """A separate uid where this process can switch to one (root): the dedicated user, else a transient uid; else
    this process's own user (which :func:`refusal` then judges)."""
    if os.geteuid() == 0:
        wanted = os.environ.get(USER_ENV) or DEFAULT_USER
        try:
            entry = pwd.getpwnam(wanted)
        except KeyError:
            entry = None
        if entry is not None and entry.pw_uid != 0:
            return Identity("dedicated", entry.pw_uid, entry.pw_gid, wanted, f"user {wanted}")
        uid = transient_uid()
        return Identity("transient", uid, uid, f"dlci-{uid}",
                        f"transient uid {uid} (no user {wanted} on this machine; no account or process uses it)")
    return same_user("this process is not root, so it cannot switch to another user")


def same_user(why: str) -> Identity:
    return Identity("same", os.geteuid(), os.getegid(), user_name(), why)


def user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def transient_uid() -> int:
    """A uid (and gid of the same number) that no account, group or running process uses, inside the ids this
    user namespace maps (a container's may map only 65,536)."""
    used = {p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()} | set(_process_uids())
    low, high = _uid_range()
    for _ in range(1000):
        uid = low + secrets.randbelow(high - low)
        if uid not in used:
            return uid
    raise SandboxError(f"no free uid in [{low}, {high})")


def _uid_range() -> tuple[int, int]:
    spans = []
    try:
        for line in Path("/proc/self/uid_map").read_text().splitlines():
            inside, _outside, count = (int(x) for x in line.split())
            spans.append((inside, inside + count))
    except (OSError, ValueError):
        spans = [(0, 65536)]
    for lo, hi in ((1 << 20, 1 << 31), (20000, 65534)):  # far from accounts' ids; else below nobody
        for a, b in spans:
            if min(hi, b) - max(lo, a) > 1000:
                return max(lo, a), min(hi, b)
    raise SandboxError("this user namespace maps no range of uids to give the scan")


def _process_uids():
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                yield entry.stat(follow_symlinks=False).st_uid
            except OSError:
                continue


def refusal(problem: str, secrets_found: list[str], wanted_mode: str) -> str | None:
    """Why the PR's code must not run as this process's own user here (None: it may), naming what to set up.
    ``problem``: why no separate uid runs it."""
    ephemeral = os.environ.get("RUNNER_ENVIRONMENT") == "github-hosted" or wanted_mode == "same-user"
    if wanted_mode != "require" and not secrets_found and ephemeral:
        return None
    why = problem
    if secrets_found:
        why += "; and a process of this user can read " + ", ".join(secrets_found[:6]) + (
            " ..." if len(secrets_found) > 6 else "")
    elif wanted_mode == "require":
        why += f" ({MODE_ENV}=require)"
    else:
        why += ("; nothing here holds a token, but this is not a GitHub-hosted runner: on a runner that outlives "
                "the job, code running as this user can change what its later jobs run")
    python = os.path.realpath(sys.executable)
    return (f"refusing to run the pull request's code as {user_name()}: {why}. Set up one of: (1) the image: "
            f"`uses: dlci/dlci@v1` (a docker action; the scan runs as its user {DEFAULT_USER}); (2) a separate "
            f"user: run dlci as root, which runs the code as user {DEFAULT_USER} if it exists (`useradd --system "
            f"--no-create-home {DEFAULT_USER}`), else as a transient uid; that uid must be able to start {python} "
            "and read dlci's installation (install it outside private home folders, e.g. `python3 -m venv "
            "/opt/dlci`), or root must be allowed mount namespaces (then dlci shows the scan only what it needs of a "
            "private folder); (3) the split (docs/action.md, 'Trust'): scan in an unprivileged pull_request job "
            "with `token: \"\"`, `permissions: contents: read` and no secrets, on a GitHub-hosted runner or an "
            f"ephemeral self-hosted one with {MODE_ENV}=same-user, and post from a workflow_run job "
            "(workflows/dlci.yml + workflows/dlci-post.yml)")


# Started as root in the scan's own process (argv: the spec as JSON); a mount namespace where it can have one, then
# the uid, then the scan. Plain Python and ctypes: it runs before the uid can be trusted with anything.
_LAUNCH = r"""
import ctypes, json, os, sys
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18

def call(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, what + ": " + os.strerror(err))

def mount(source, target, fstype, flags, data=None):
    call(libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                    data.encode() if data else None), "mount " + target)

if spec["namespace"] and libc.unshare(0x00020000) == 0:  # CLONE_NEWNS
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    held = [(os.open(path, os.O_PATH | os.O_DIRECTORY), path, ro) for path, ro in spec["keep"]]
    for folder in spec["hide"]:
        mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=%s" % spec["modes"].get(folder, "0755"))
    for fd, path, ro in sorted(held, key=lambda h: len(h[1])):
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount("/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC)
        if ro:
            mount("none", path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
os.setgroups([])
os.setresgid(spec["gid"], spec["gid"], spec["gid"])
os.setresuid(spec["uid"], spec["uid"], spec["uid"])
call(libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
os.umask(0o077)
os.chdir(spec["cwd"])
os.execve(spec["argv"][0], spec["argv"], spec["env"])
"""


@dataclass
class Sandbox:
    """One scan's sandbox: its folder (home, repository clone, output), its identity and its environment."""
    who: Identity
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def out(self) -> Path:
        return self.root / "out"

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @classmethod
    def create(cls, who: Identity | None = None) -> "Sandbox":
        who = who or identity()
        root = Path(tempfile.mkdtemp(prefix="dlci-sandbox-"))
        os.chmod(root, 0o711)  # the scan's user may enter, not list; what it owns inside is its own
        box = cls(who, root)
        for d in (box.home, box.home / "tmp", box.home / "cache", box.out):
            d.mkdir(parents=True, exist_ok=True)
            box._own(d)
        return box

    def _own(self, path: Path) -> None:
        if self.who.separate:
            os.chown(path, self.who.uid, self.who.gid, follow_symlinks=False)

    def env(self) -> dict[str, str]:
        """The scan's whole environment: the variables :data:`_PASSED` and ``$DLCI_PASS_ENV`` name (never a secret),
        then the sandbox's own (cache roots and the untrusted mark are dlci's, never inherited)."""
        from dlci import cache
        extra = {n.strip() for n in os.environ.get(PASS_ENV, "").split(",") if n.strip()}
        env = {k: v for k, v in os.environ.items()
               if (k in _PASSED or k in extra) and not is_secret_name(k) and not k.startswith("DLCI_CACHE")
               and not _TOKEN_VALUE.search(v.encode("utf-8", "replace"))}
        env.update({"HOME": str(self.home), "TMPDIR": str(self.home / "tmp"), "USER": self.who.name,
                    "LOGNAME": self.who.name, "PYTHONSAFEPATH": "1", "PYTHONUNBUFFERED": "1",
                    "PYTHONDONTWRITEBYTECODE": "1", cache.ENV: str(cache.base().resolve()),
                    cache.UNTRUSTED_ENV: "1", cache.UNTRUSTED_DIR_ENV: str(self.home / "cache"),
                    "DLCI_FORM_STORE": str(self.home / "cache" / "forms")})
        return env

    def clone(self, repo: Path, revisions: list[str]) -> list[str]:
        """Clone ``repo`` into the sandbox (git with hooks off; objects shared by hard links where the file system
        allows, so nothing is copied twice) and return the commits that ``revisions`` name, resolved here: the
        scan gets commits, never a ref the clone might resolve otherwise."""
        from dlci.diff import git
        shas = []
        for rev in revisions:
            r = git.run(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", timeout=120)
            if r.returncode != 0 or not r.stdout.strip():
                raise SandboxError(f"unknown revision {rev!r} in {repo}")
            shas.append(r.stdout.strip())
        r = git.run(None, "clone", "--quiet", "--no-checkout", str(repo), str(self.repo))
        if r.returncode != 0:
            raise SandboxError(f"cannot clone {repo} into the sandbox: {r.stderr.strip()[-500:]}")
        for sha in shas:  # every object was copied or linked: a commit only the source's detached HEAD names too
            if git.run(self.repo, "cat-file", "-e", f"{sha}^{{commit}}", timeout=120).returncode != 0:
                raise SandboxError(f"commit {sha[:12]} is missing from the sandbox's clone of {repo}")
        if self.who.separate:  # the clone is the scan's; hard-linked objects stay as they are (read-only, shared)
            for dirpath, dirnames, filenames in os.walk(self.repo):
                self._own(Path(dirpath))
                for name in filenames:
                    p = Path(dirpath) / name
                    if os.lstat(p).st_nlink == 1:
                        self._own(p)
        return shas

    # -- starting the scan ---------------------------------------------------------------------------------------
    def _launch_spec(self, cmd: list[str]) -> dict:
        """What :data:`_LAUNCH` does: the folders to hide (every top-level folder but the system's, the temporary
        ones, private folders on the way to what the scan must read), what to keep in them (read-only but for the
        sandbox's own folder), the uid, the command. So the pull request's code sees the system, Python, dlci, its
        caches and its own folder: none of the runner's files (its work folder, its home, its configuration)."""
        from dlci import cache
        from dlci.exec import interp
        env = self.env()
        searched = [p for name in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH") for p in env.get(name, "").split(":")]
        needed = {os.path.realpath(p) for p in (os.path.dirname(os.path.realpath(sys.executable)), sys.prefix,
                                                sys.base_prefix, sys.exec_prefix, interp.ROOT, *sys.path,
                                                cache.base(), *searched) if p and os.path.isdir(p)}
        hide = set(_TMP_FOLDERS) | {os.path.join("/", e) for e in os.listdir("/") if e not in _SYSTEM}
        for path in needed:
            hide.update(_private_ancestors(path))
        hide = {h for h in hide if os.path.isdir(h) and not os.path.islink(h)}
        hide = {h for h in hide if not any(h != o and _inside(h, o) for o in hide)}  # a hidden folder's own
        root = os.path.realpath(self.root)
        # kept: what lies strictly inside a hidden folder (a hidden folder itself stays hidden: a script's own
        # folder on sys.path may be /tmp)
        needed = {p for p in needed if any(_inside(p, h) and p != h for h in hide)}
        keep = [(p, True) for p in sorted(needed) if not any(q != p and _inside(p, q) for q in needed)]
        keep = [(p, ro) for p, ro in keep if not _inside(p, root)] + [(root, False)]
        modes = {h: "1777" for h in _TMP_FOLDERS}
        return {"namespace": True, "hide": sorted(hide, key=len), "keep": keep, "modes": modes,
                "uid": self.who.uid, "gid": self.who.gid, "cwd": str(self.home), "argv": cmd, "env": env}

    def _popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        if self.who.separate:
            spec = self._launch_spec(cmd)
            launcher = [sys.executable, "-I", "-c", _LAUNCH, json.dumps(spec)]
            return subprocess.Popen(launcher, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                    cwd="/", stdin=subprocess.DEVNULL, start_new_session=True, **kwargs)
        return subprocess.Popen(cmd, env=self.env(), cwd=str(self.home), stdin=subprocess.DEVNULL,
                                start_new_session=True, **kwargs)

    def runs_here(self) -> str | None:
        """None when the scan's user can start dlci from where it is installed; else why not."""
        from dlci.exec import interp
        try:
            proc = self._popen(interp.command("dlci", "--help"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out, _ = proc.communicate(timeout=300)
        except OSError as e:
            return f"{self.who.why} cannot start {sys.executable}: {e.strerror}"
        except subprocess.TimeoutExpired:
            proc.kill()
            return f"{self.who.why} could not start dlci within 300 s"
        finally:
            self.kill_leftovers()
        if proc.returncode != 0:
            return (f"{self.who.why} cannot start dlci ({os.path.realpath(sys.executable)}): "
                    + out.decode("utf-8", "replace").strip()[-300:])
        return None

    def run(self, cmd: list[str], say: Callable[[str], None], grace_s: float = 20.0) -> int:
        """Run ``cmd`` in the sandbox, its output passed to ``say`` line by line (redacted). On cancellation (a
        SIGINT/SIGTERM raising dlci.exec.cancel.Cancelled here) the scan gets SIGINT and ``grace_s`` seconds to
        write its partial report, then the exception goes on. Whatever way it ends, nothing of it is left."""
        from dlci.exec import cancel
        from dlci import redact
        proc = self._popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            _relay(proc, lambda raw: say(redact.text(raw.decode("utf-8", "replace").rstrip("\n"))))
            return proc.wait()
        except cancel.Cancelled:
            _signal_group(proc, signal.SIGINT)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
            raise
        finally:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()
            self.kill_leftovers()

    def kill_leftovers(self) -> int:
        """Kill every process the scan left behind, however it detached (new session, double fork, cleared
        environment): every process of a separate uid; every descendant of this process for the same user (this
        process is a subreaper, so orphans of the scan come back to it). Returns how many."""
        killed = 0
        for _ in range(20):  # what forks while being killed is met on the next pass
            pids = _processes_of_uid(self.who.uid) if self.who.separate else _descendants(os.getpid())
            pids = [p for p in pids if p != os.getpid()]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    continue
            _reap()
            killed += len(pids)
            if not pids:
                break
            time.sleep(0.05)
        return killed

    def remove(self) -> None:
        self.kill_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)
        if self.who.kind == "transient":  # without a namespace of its own it may have written the shared temp folders
            _remove_owned(self.who.uid)


def _relay(proc: subprocess.Popen, line: Callable[[bytes], None], quiet_s: float = 1.0,
           after_exit_s: float = 10.0) -> None:
    """Pass ``proc``'s output on line by line until it has exited and its pipe is quiet (or ``after_exit_s`` after
    it exited, however much is still written): a daemon it left holding the pipe (which would keep it open for
    ever, or write to it for ever) does not hold up the holder; it is killed next."""
    import selectors
    fd = proc.stdout.fileno()
    pending = b""
    quiet_since = exited_at = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            chunk = os.read(fd, 1 << 16) if sel.select(timeout=0.2) else None
            if chunk == b"":  # every writer closed the pipe
                break
            if proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > after_exit_s:
                    break
            if chunk:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    line(raw)
                quiet_since = None
            elif exited_at is not None:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > quiet_s:
                    break
    if pending:
        line(pending)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _private_ancestors(path: str) -> list[str]:
    """Folders on the way to ``path`` that another user cannot pass through (no o+x)."""
    found, current = [], "/"
    for part in Path(path).parts[1:]:
        current = os.path.join(current, part)
        try:
            st = os.stat(current)
        except OSError:
            break
        if stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IXOTH:
            found.append(current)
    return found


def _processes_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                status = Path(entry.path, "status").read_text()
            except OSError:
                continue
            m = re.search(r"^Uid:\s+(\d+)\s+(\d+)\s+(\d+)", status, re.M)
            if m and uid in {int(x) for x in m.groups()}:
                pids.append(int(entry.name))
    return pids


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            parent = _ppid(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], list(children.get(pid, []))
    while stack:
        p = stack.pop()
        found.append(p)
        stack.extend(children.get(p, []))
    return found


def _reap() -> None:
    """Collect the exit of orphans re-parented to this process (a subreaper), so they do not stay as zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _remove_owned(uid: int) -> None:
    """Files and folders a transient uid left at the top of the shared temporary folders."""
    for folder in _TMP_FOLDERS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def prepare(say: Callable[[str], None], holds: list[str] = ()) -> Sandbox:
    """The sandbox the scan runs in, or :class:`SandboxRefused` saying what to set up. ``holds``: the secrets this
    process holds itself (the token it read and removed from its environment)."""
    wanted = mode()
    undumpable = make_undumpable()
    become_subreaper()
    box = Sandbox.create()
    problem = box.runs_here() if box.who.separate else box.who.why
    if problem is None:
        say(f"sandbox: {box.who.why}; a clean environment, its own clone and output folder")
        return box
    box.remove()
    why = refusal(problem, list(holds) + reachable_secrets(), wanted)
    if why is not None:
        raise SandboxRefused(why)
    box = Sandbox.create(same_user(problem))
    say(f"sandbox: the pull request's code runs as {box.who.name} ({problem}); nothing a process of this user can "
        "read holds a token"
        + ("" if undumpable else " (this process could not make itself non-dumpable)")
        + "; a clean environment, its own clone and output folder")
    return box
