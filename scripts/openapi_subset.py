#!/usr/bin/env python3
"""Cut the GitHub REST API OpenAPI description down to the operations dlci uses.

Downloads the npm package ``@octokit/openapi`` (version and integrity pinned below; the npm registry tarball
is fetched directly, no node/npm needed), reads ``package/generated/api.github.com.json`` (the OpenAPI 3.0.3
description of api.github.com, with ``$ref``s, not the ``.deref`` variant), keeps only the operations listed in
``OPERATIONS`` and every ``#/components/...`` entry they reference transitively, and writes
``tests/fake_github/api.github.com.subset.json`` (sorted keys, deterministic).

Examples (``example``/``examples`` and ``#/components/examples``) are dropped: they are not normative and make up
most of the size.  Descriptions are kept.

Usage::

    python scripts/openapi_subset.py                 # download the pinned tarball
    python scripts/openapi_subset.py --tarball X.tgz # use a tarball already on disk (e.g. from `npm pack`)
    python scripts/openapi_subset.py --check         # exit 1 if the committed subset is out of date
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
TARBALL_URL = f"https://registry.npmjs.org/{PACKAGE}/-/openapi-{VERSION}.tgz"
# `npm view @octokit/openapi@23.0.2 dist.integrity`
INTEGRITY = "sha512-pV8M7L9GY23AybNvTmo2nyjmpmnt6+2sRE/tqr0ZLQcPS4lnw7u5eZGNmwRNkBC3D7gZXbFx5AHzLUVRBXGDhg=="
MEMBER = "package/generated/api.github.com.json"

# (METHOD, path template) of every REST operation dlci (and its tests' fake server) uses.
OPERATIONS: list[tuple[str, str]] = [
    ("GET", "/repos/{owner}/{repo}"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("POST", "/repos/{owner}/{repo}/check-runs"),
    ("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("GET", "/user"),
    ("GET", "/rate_limit"),
]

# Components kept even when no kept operation references them: the fake server answers errors (401/403/404/422)
# on operations whose description declares no such response, and validates those bodies against these.
EXTRA_COMPONENTS = [
    "#/components/schemas/basic-error",
    "#/components/schemas/validation-error",
    "#/components/schemas/validation-error-simple",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fake_github" / "api.github.com.subset.json"
HEADER_KEY = "x-dlci-subset"


def fetch_tarball(path: str | None) -> bytes:
    if path:
        data = Path(path).read_bytes()
    else:
        with urllib.request.urlopen(TARBALL_URL, timeout=120) as resp:  # noqa: S310 (pinned https URL)
            data = resp.read()
    algo, _, want = INTEGRITY.partition("-")
    got = base64.b64encode(hashlib.new(algo, data).digest()).decode()
    if got != want:
        raise SystemExit(f"integrity mismatch for {PACKAGE}@{VERSION}: got {algo}-{got}")
    return data


def load_description(tarball: bytes) -> dict:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        member = tar.extractfile(MEMBER)
        if member is None:
            raise SystemExit(f"{MEMBER} not found in the tarball")
        return json.load(member)


def _strip_examples(node):
    """Drop non-normative examples (inline and referenced)."""
    if isinstance(node, dict):
        return {k: _strip_examples(v) for k, v in node.items() if k not in ("example", "examples")}
    if isinstance(node, list):
        return [_strip_examples(v) for v in node]
    return node


def _refs(node, out: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.add(ref)
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)


def _pointer_get(doc: dict, ref: str):
    if not ref.startswith("#/"):
        raise SystemExit(f"external $ref not supported: {ref}")
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def make_subset(doc: dict) -> dict:
    paths: dict[str, dict] = {}
    for method, template in OPERATIONS:
        item = doc["paths"].get(template)
        if item is None or method.lower() not in item:
            raise SystemExit(f"operation {method} {template} not in {PACKAGE}@{VERSION}")
        out_item = paths.setdefault(template, {})
        if "parameters" in item:  # path-level parameters apply to every operation of the path
            out_item["parameters"] = item["parameters"]
        out_item[method.lower()] = item[method.lower()]
    paths = _strip_examples(paths)

    # Transitive closure over #/components/... references.
    components: dict[str, dict] = {}
    pending: set[str] = set(EXTRA_COMPONENTS)
    _refs(paths, pending)
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        if not ref.startswith("#/components/"):
            raise SystemExit(f"unexpected $ref outside components: {ref}")
        parts = ref[len("#/components/"):].split("/")
        if len(parts) != 2:
            raise SystemExit(f"unexpected nested component $ref: {ref}")
        kind, name = parts
        target = _strip_examples(_pointer_get(doc, ref))
        components.setdefault(kind, {})[name] = target
        _refs(target, pending)

    return {
        HEADER_KEY: {
            "source": f"{PACKAGE}@{VERSION}",
            "source_file": MEMBER.removeprefix("package/"),
            "source_integrity": INTEGRITY,
            "generator": "scripts/openapi_subset.py",
            "operations": [f"{m} {p}" for m, p in OPERATIONS],
            "notes": "examples dropped; components are the transitive closure of the kept operations' $refs "
            "plus schemas/basic-error, schemas/validation-error, schemas/validation-error-simple",
        },
        "openapi": doc["openapi"],
        "info": doc["info"],
        "servers": doc.get("servers", []),
        "paths": paths,
        "components": components,
    }


def render(subset: dict) -> str:
    return json.dumps(subset, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tarball", help="path to octokit-openapi-<ver>.tgz instead of downloading it")
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    args = ap.parse_args(argv)

    text = render(make_subset(load_description(fetch_tarball(args.tarball))))
    out = Path(args.out)
    if args.check:
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            print(f"{out} is out of date; run scripts/openapi_subset.py", file=sys.stderr)
            return 1
        print(f"{out} is up to date")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({len(text.encode()) // 1024} KiB, {len(OPERATIONS)} operations)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
