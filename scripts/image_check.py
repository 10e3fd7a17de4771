#!/usr/bin/env python3
"""Build the action's CPU image where no image registry is reachable, and run its entrypoint against the fake GitHub.

    sudo .venv/bin/python scripts/image_check.py [--work DIR] [--tag dlci:check] [--skip-build] [--json OUT]

Too slow for the test suite (the build installs the whole pinned stack and prewarms the harvests: ~15-30 minutes on
2 shared cores), so it is a script; docs/action.md quotes its last result. Needs root (dockerd, debootstrap,
chroot) and Debian's `docker.io` and `debootstrap` packages.

1. the base image: Debian bookworm (Python 3.11, the Python of the pinned wheels) from `debootstrap` into a folder,
   `docker import`ed as ``dlci-base:bookworm`` (python:3.11-slim cannot be pulled here);
2. torch: the CPU wheel of the pin, served from a local folder (``--torch-wheels``, default: pip's find-links) as
   a one-package index on 127.0.0.1, because the PyTorch index may be unreachable: the Dockerfile's TORCH_INDEX;
3. ``docker build --network host --build-arg BASE_IMAGE=... --build-arg TORCH_INDEX=...`` (everything else comes
   from PyPI, as on a runner);
4. the entrypoint, in the image, as GitHub starts a docker action (workspace mounted at /github/workspace, the event
   file, INPUT_*, GITHUB_*), on the bundled sample pull request, against tests/fake_github on the host: it must post
   one comment and one check run, write its outputs, exit 1 (the sample's new bug, fail-on new), and the fake must
   have seen no request GitHub would refuse.
Prints (and with --json writes) what happened: image size, build seconds, the entrypoint's exit code, outputs,
the comment's first lines.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
DOCKER = shutil.which("docker", path="/usr/bin") or "docker"  # Debian's client matches its daemon
BASE_TAG = "dlci-base:bookworm"
# what python:3.11-slim has and a minimal Debian lacks: pip, venv, headers (inductor compiles against Python.h)
BASE_PACKAGES = "python3,python3-pip,python3-venv,python3-dev,python-is-python3,ca-certificates,netbase"
MIRROR = "http://deb.debian.org/debian"
REPO, PR = "octo/tvm", 7


def log(msg: str) -> None:
    print(f"[image_check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def docker(*args: str, check: bool = True, capture: bool = False, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the classic builder: Debian's docker.io has no buildx
    return subprocess.run([DOCKER, *args], check=check, text=True, env=env,
                          capture_output=capture, **kw)


def base_image(work: Path) -> None:
    """Debian bookworm with Python 3.11 from debootstrap, imported as BASE_TAG (kept between runs)."""
    if docker("image", "inspect", BASE_TAG, check=False, capture=True).returncode == 0:
        log(f"base {BASE_TAG} exists")
        return
    rootfs = work / "rootfs"
    if not (rootfs / "usr/bin/python3").exists():
        log(f"debootstrap bookworm into {rootfs}")
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}", "bookworm", str(rootfs),
                        MIRROR], check=True)
    # the host's locally added CAs (a TLS-inspecting proxy, as on these machines): without them pip inside the
    # build cannot reach PyPI; a runner without such a proxy has none to add
    local_cas = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    for ca in local_cas:
        shutil.copy(ca, rootfs / "usr/local/share/ca-certificates" / ca.name)
    # python3-dev may be missing from a folder made by an earlier run with fewer packages
    install = ("apt-get update -q && apt-get install -y --no-install-recommends " + BASE_PACKAGES.replace(",", " ")
               + " && update-ca-certificates && apt-get clean && rm -rf /var/lib/apt/lists/*")
    subprocess.run(["chroot", str(rootfs), "sh", "-c", install], check=True, stdout=subprocess.DEVNULL)
    log(f"docker import {rootfs} as {BASE_TAG}")
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    subprocess.run([DOCKER, "import", "--change", "ENV LANG=C.UTF-8",
                    "--change", 'CMD ["python3"]', "-", BASE_TAG], stdin=tar.stdout, check=True, env=env)
    tar.wait()


def torch_index(wheels: Path, work: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    """A PEP 503 index holding only the torch wheels of ``wheels``, served on 127.0.0.1 (the build's network is the
    host's)."""
    found = sorted(wheels.glob("torch-*.whl"))
    if not found:
        raise SystemExit(f"no torch wheel in {wheels} (--torch-wheels)")
    idx = work / "torch-index"
    shutil.rmtree(idx, ignore_errors=True)
    (idx / "simple" / "torch").mkdir(parents=True)
    links = []
    for w in found:
        os.symlink(w.resolve(), idx / "simple" / "torch" / w.name)
        links.append(f'<a href="{w.name}">{w.name}</a><br>')
    (idx / "simple" / "torch" / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")
    (idx / "simple" / "index.html").write_text('<html><body><a href="torch/">torch</a></body></html>')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(idx))
    handler.log_message = lambda *a, **k: None  # quiet
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/simple", server


def build(tag: str, index: str) -> float:
    t0 = time.monotonic()
    log(f"docker build -t {tag} (TORCH_INDEX={index})")
    docker("build", "--network", "host", "--build-arg", f"BASE_IMAGE={BASE_TAG}",
           "--build-arg", f"TORCH_INDEX={index}", "-t", tag, str(ROOT))
    return time.monotonic() - t0


def run_entrypoint(tag: str, work: Path) -> dict:
    """The action's container on the sample PR, as GitHub starts a docker action, against the fake GitHub."""
    from dlci import samples
    from fake_github import FakeGitHub
    ws = work / "workspace"
    shutil.rmtree(ws, ignore_errors=True)
    repo, base, head = samples.build(samples.DEFAULT, ws / "repo")
    home = work / "github"
    shutil.rmtree(home, ignore_errors=True)
    (home / "workflow").mkdir(parents=True)
    event = {"action": "synchronize", "number": PR,
             "pull_request": {"number": PR, "head": {"sha": head, "repo": {"full_name": REPO}},
                              "base": {"sha": base, "repo": {"full_name": REPO}}},
             "repository": {"full_name": REPO}}
    (home / "workflow" / "event.json").write_text(json.dumps(event))
    for name in ("output", "summary"):
        (home / name).write_text("")
    fake = FakeGitHub().start()
    try:
        fake.add_repo(REPO)
        fake.add_pull(REPO, PR, head_sha=head, base_sha=base, head_repo=REPO)
        env = {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "pull_request",
               "GITHUB_EVENT_PATH": "/github/workflow/event.json", "GITHUB_WORKSPACE": "/github/workspace",
               "GITHUB_OUTPUT": "/github/file_commands/output", "GITHUB_STEP_SUMMARY": "/github/file_commands/summary",
               "GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": "1", "GITHUB_SERVER_URL": "https://github.com",
               "GITHUB_API_URL": fake.url, "INPUT_TOKEN": "ghs_app", "INPUT_REPO-PATH": "repo",
               "INPUT_BUDGET": "300", "INPUT_OUT": "dlci-out", "INPUT_MODE": "single"}
        args = ["run", "--rm", "--network", "host", "-w", "/github/workspace",
                "-v", f"{ws}:/github/workspace", "-v", f"{home / 'workflow'}:/github/workflow:ro",
                "-v", f"{home}:/github/file_commands"]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        log(f"docker run {tag} (mode single on {samples.DEFAULT}, fake GitHub at {fake.url})")
        t0 = time.monotonic()
        proc = docker(*args, tag, check=False, capture=True, timeout=3600)
        seconds = time.monotonic() - t0
        comments = fake.comments_on(REPO, PR)
        runs = fake.check_runs_for(REPO, head)
        outputs = (home / "output").read_text()
        return {"exit_code": proc.returncode, "seconds": round(seconds, 1),
                "comments": len(comments), "comment_head": comments[0].body.splitlines()[:6] if comments else [],
                "check_runs": [{"conclusion": r.conclusion, "annotations": len(r.annotations)} for r in runs],
                "outputs": outputs.strip().splitlines()[:12], "violations": [str(v) for v in fake.violations],
                "log_tail": (proc.stdout + proc.stderr)[-3000:],
                "ok": proc.returncode == 1 and len(comments) == 1 and len(runs) == 1 and not fake.violations}
    finally:
        fake.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/var/tmp/dlci-image-check", help="folder for the rootfs and the workspace")
    ap.add_argument("--tag", default="dlci:check")
    ap.add_argument("--torch-wheels", default=os.environ.get("PIP_FIND_LINKS", "/opt/wheels"),
                    help="folder holding the CPU torch wheel of the pin")
    ap.add_argument("--skip-build", action="store_true", help="use the image already tagged --tag")
    ap.add_argument("--json", help="also write the result here")
    ns = ap.parse_args()
    work = Path(ns.work)
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"tag": ns.tag}
    if not ns.skip_build:
        base_image(work)
        index, server = torch_index(Path(ns.torch_wheels), work)
        try:
            result["build_seconds"] = round(build(ns.tag, index), 1)
        finally:
            server.shutdown()
    size = docker("image", "inspect", "--format", "{{.Size}}", ns.tag, capture=True).stdout.strip()
    result["image_bytes"] = int(size)
    result["entrypoint"] = run_entrypoint(ns.tag, work)
    text = json.dumps(result, indent=2)
    print(text)
    if ns.json:
        Path(ns.json).write_text(text)
    return 0 if result["entrypoint"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
