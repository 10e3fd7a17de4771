"""Secrets out of everything dlci writes or posts: the comment, the check run and its annotations, the job summary,
step outputs, findings.json and report.md, reproducers, the log lines of a sandboxed scan.

A second line of defence: the pull request's code cannot read the token in the first place (dlci.github.sandbox).
Redacted are the values :func:`register` was given (the action's token, in the forms it takes in a git config or
an Authorization header) and anything shaped like a GitHub token.
"""
from __future__ import annotations

import base64
import re
import urllib.parse

MASK = "***"
# GitHub's token formats: ghp_ (classic PAT), gho_ (OAuth), ghu_ (user-to-server), ghs_ (app installation, the
# job token), ghr_ (refresh), github_pat_ (fine-grained PAT); long enough not to catch ordinary words
PATTERN = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{40,255})\b")
_secrets: list[str] = []


def register(secret: str | None) -> None:
    """Redact ``secret`` (and its base64 and URL-encoded forms) from now on; values under 8 characters are not
    secrets worth the false positives."""
    if not secret or len(secret) < 8:
        return
    forms = {secret, urllib.parse.quote(secret, safe=""),
             base64.b64encode(secret.encode()).decode(),
             base64.b64encode(f"x-access-token:{secret}".encode()).decode()}
    for form in sorted(forms, key=len, reverse=True):
        if form not in _secrets:
            _secrets.append(form)
    _secrets.sort(key=len, reverse=True)


def text(s: str) -> str:
    for secret in _secrets:
        if secret in s:
            s = s.replace(secret, MASK)
    return PATTERN.sub(MASK, s)


def data(value):
    """``value`` (JSON-like: dicts, lists, strings) with every string, keys included, redacted."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {text(k) if isinstance(k, str) else k: data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(data(v) for v in value)
    return value


def data_bytes(b: bytes) -> bytes:
    """A file's bytes redacted (as UTF-8 text, undecodable bytes kept)."""
    return text(b.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
