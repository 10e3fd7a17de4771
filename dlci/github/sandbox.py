"""The action's scan runs a pull request's code; the action's own process holds the GitHub token. The two are kept
apart so that the PR's code can neither read the token nor act on the runner's behalf:

- the scan is a child process started with a clean environment (no token, no ``ACTIONS_*``/``INPUT_*`` variable, no
  ``GITHUB_ENV``/``GITHUB_OUTPUT``/``GITHUB_PATH``/``GITHUB_STEP_SUMMARY`` file to set later steps' environment),
  from a neutral working directory with ``PYTHONSAFEPATH=1``;
- it runs as another, unprivileged user: ``dlci-sandbox`` (the image creates it), else ``nobody`` when this
  process is root, so ``/proc/<this process>/environ`` and its memory are not its to read;
- this process makes itself non-dumpable, which closes the same files to processes of its own user too (the
  fallback where no second user exists, e.g. dlci installed with pip on a runner that is not root);
- the scan works on its own clone of the repository and writes into its own folder; this process reads the
  results back as hostile data (:mod:`dlci.report.intake`) after every process of the scan is gone.
"""
from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

USER_ENV = "DLCI_SANDBOX_USER"    # the user to run pull requests' code as (default dlci-sandbox)
MODE_ENV = "DLCI_SANDBOX"         # auto (default): another user where possible; require: refuse to run without one
DEFAULT_USER = "dlci-sandbox"
MARK = "DLCI_SANDBOX_RUN"         # in every sandboxed process's environment: how leftovers are found and killed

# what of this process's environment a scan may see: the locale, the path, thread and device settings, dlci's own
# settings (none of which holds a secret: dlci.exec.engine.is_secret_name is applied on top)
_PASSED = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "PYTHONPATH", "LD_LIBRARY_PATH",
           "NO_COLOR", "SOURCE_DATE_EPOCH")
_PASSED_PREFIXES = ("DLCI_", "OMP_", "MKL_", "OPENBLAS_", "TF_", "TVM_", "CUDA_", "NVIDIA_", "TORCH", "PYTORCH_",
                    "ORT_", "OV_", "OPENVINO_")


class SandboxError(RuntimeError):
    """The sandbox could not be set up (exit 3)."""


def make_undumpable() -> bool:
    """Close /proc/<pid>/environ, /proc/<pid>/mem and ptrace of this process to every unprivileged process,
    its own user's included (Linux's PR_SET_DUMPABLE). True when it took."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, SUID_DUMP_DISABLE
    except (OSError, AttributeError):
        return False


def drop_capabilities() -> None:
    """In a child before it execs: no capability left (bounding set emptied, so a root child execs without any)
    and no way to gain one (no_new_privs: setuid programs do not raise privileges). A root that cannot read another
    process's memory or environment once that process is non-dumpable."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):  # PR_CAPBSET_DROP; EINVAL past the kernel's last capability
        libc.prctl(24, cap, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    if libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()) != 0:  # _LINUX_CAPABILITY_VERSION_3
        raise OSError(ctypes.get_errno(), "capset failed")
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")


@dataclass
class Identity:
    uid: int | None   # None: this process's own user
    gid: int | None
    name: str
    why: str          # for the log: who runs the PR's code, and why that one
    drop_caps: bool = False  # same user as root: the child runs without any capability

    @property
    def separate(self) -> bool:
        return self.uid is not None


def identity() -> Identity:
    """Who runs the pull request's code: ``$DLCI_SANDBOX_USER`` (default dlci-sandbox); when it does not exist and
    this process is root, ``nobody``; else this process's own user (said in the log and in docs/action.md)."""
    wanted = os.environ.get(USER_ENV) or DEFAULT_USER
    root = os.geteuid() == 0
    for name in ([wanted] + (["nobody"] if root else [])):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if entry.pw_uid == os.geteuid():
            break
        if not root:
            return same_user(f"user {name} exists, but only root can switch to it")
        why = f"user {name}" if name == wanted else f"user nobody (no user {wanted} on this machine)"
        return Identity(entry.pw_uid, entry.pw_gid, name, why)
    return same_user(f"no separate user ({wanted} does not exist and this process is not root)")


def same_user(why: str) -> Identity:
    """This process's own user (for root: without any capability), saying ``why`` no other user runs the code."""
    me = user_name()
    root = os.geteuid() == 0
    return Identity(None, None, me, f"{why}: the pull request's code runs as {me}"
                    + (" without any capability" if root else "") + ", and this process is not readable by it",
                    drop_caps=root)


def user_name() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


@dataclass
class Sandbox:
    """One scan's sandbox: its folder (home, repository clone, output), its identity and its environment."""
    who: Identity
    root: Path
    mark: str = field(default_factory=lambda: secrets.token_hex(8))

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
        """The scan's whole environment: what :data:`_PASSED` lets through, then the sandbox's own settings."""
        from dlci import cache
        from dlci.exec.engine import is_secret_name
        env = {k: v for k, v in os.environ.items()
               if (k in _PASSED or k.startswith(_PASSED_PREFIXES)) and not is_secret_name(k)}
        env.update({"HOME": str(self.home), "TMPDIR": str(self.home / "tmp"), "USER": self.who.name,
                    "LOGNAME": self.who.name, "PYTHONSAFEPATH": "1", "PYTHONUNBUFFERED": "1",
                    "PYTHONDONTWRITEBYTECODE": "1", cache.ENV: str(cache.base().resolve()),
                    cache.UNTRUSTED_ENV: "1", cache.UNTRUSTED_DIR_ENV: str(self.home / "cache"), MARK: self.mark})
        env.pop(MODE_ENV, None)
        env.pop(USER_ENV, None)
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

    def runs_here(self) -> str | None:
        """None when the scan's user can start dlci from where it is installed; else why not."""
        if not self.who.separate:
            return None
        from dlci.exec import interp
        try:
            proc = self._popen(interp.command("dlci", "--help"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out, _ = proc.communicate(timeout=300)
        except OSError as e:
            return f"user {self.who.name} cannot start {sys.executable}: {e.strerror}"
        except subprocess.TimeoutExpired:
            proc.kill()
            return f"user {self.who.name} could not start dlci within 300 s"
        if proc.returncode != 0:
            return (f"user {self.who.name} cannot start dlci ({sys.executable}): "
                    + out.decode("utf-8", "replace").strip()[-300:])
        return None

    def _popen(self, cmd: list[str], **kwargs) -> subprocess.Popen:
        extra = {}
        if self.who.separate:
            extra = {"user": self.who.uid, "group": self.who.gid, "extra_groups": [], "umask": 0o077}
        elif self.who.drop_caps:
            extra = {"preexec_fn": drop_capabilities}
        return subprocess.Popen(cmd, env=self.env(), cwd=str(self.home), stdin=subprocess.DEVNULL,
                                start_new_session=True, **extra, **kwargs)

    def run(self, cmd: list[str], say: Callable[[str], None], grace_s: float = 20.0) -> int:
        """Run ``cmd`` in the sandbox, its output passed to ``say`` line by line (redacted). On cancellation (a
        SIGINT/SIGTERM raising dlci.exec.cancel.Cancelled here) the scan gets SIGINT and ``grace_s`` seconds to
        write its partial report, then the exception goes on."""
        from dlci.exec import cancel
        from dlci import redact
        proc = self._popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            for raw in proc.stdout:
                say(redact.text(raw.decode("utf-8", "replace").rstrip("\n")))
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
        """Kill every process the scan left behind (a daemon that left the process group included): those carrying
        this sandbox's mark, and every process of a dedicated sandbox user. Returns how many."""
        killed = 0
        dedicated = self.who.separate and self.who.name != "nobody"
        needle = f"{MARK}={self.mark}".encode()
        for _ in range(3):  # what forks while being killed is met on the next pass
            found = 0
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    uid = os.stat(entry.path).st_uid
                    ours = (dedicated and uid == self.who.uid) or (
                        uid == (self.who.uid if self.who.separate else os.geteuid())
                        and needle in Path(entry.path, "environ").read_bytes())
                    if ours:
                        os.kill(int(entry.name), signal.SIGKILL)
                        found += 1
                except (OSError, ValueError):
                    continue
            killed += found
            if not found:
                break
            time.sleep(0.1)
        return killed

    def remove(self) -> None:
        self.kill_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
