"""Escaping for everything dlci posts: the PR comment, the check run, the job summary and report.md.

Operator names, file names, messages, commit subjects, known-issue links, targets... come from the pull request (and,
for a ``workflow_run`` poster, from a fork's artifact): they are hostile. Each value goes through one of:

- :func:`code`  an inline code span (preferred for names: GitHub links no mention or reference inside code);
- :func:`prose` text among markdown (HTML, markdown punctuation, mentions, references and bare URLs made inert);
- :func:`fence` a fenced code block (multi-line text: messages, reproducers);
- :func:`html`  text inside a raw HTML block (``<summary>``), where markdown escapes are not read;
- :func:`plain` fields GitHub shows as plain text (check-run title, annotation title and message).

None of them trusts its input to be a string: anything is ``str()``-ed, ``None`` is empty.
"""
from __future__ import annotations

import re

ZWSP = "\u200b"          # zero-width space: keeps ``@team`` / ``#123`` readable but no longer a mention/reference
ZWSP_ENTITY = "&#8203;"  # the same in markdown/HTML source (invisible in the raw file too)
ELLIPSIS = "…"

# C0/C1 controls (newlines and tabs included), line/paragraph separators and bidi overrides ("Trojan Source")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_RUN = re.compile(rf"(?:{_CONTROL.pattern}|\s)+")
_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _text(value) -> str:
    return "" if value is None else str(value)


def _one_line(value) -> str:
    """Every run of whitespace and control characters becomes one space: no value starts a markdown block."""
    return _CONTROL_RUN.sub(" ", _text(value)).strip()


def _cap(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:max(limit - 1, 0)] + ELLIPSIS


def code(text, limit: int | None = 200, *, cell: bool = False) -> str:
    """An inline code span no character of ``text`` can close: its delimiter is one backtick longer than the
    longest run inside (CommonMark closes a span only at a run of exactly the same length). ``cell=True`` inside a
    table row: GFM splits cells at ``|`` before it reads code spans, and reads ``\\|`` there as ``|``; its row
    scanner pairs a backslash with the next punctuation first, so a backslash run before ``|`` is made even (a rare
    extra backslash shows, the cell holds)."""
    t = _cap(_one_line(text), limit)
    delimiter = "`" * (1 + max((len(run) for run in re.findall(r"`+", t)), default=0))
    if not t:
        t = " "  # `` is no code span; "` `" shows one space
    elif t.startswith("`") or t.endswith("`"):
        t = f" {t} "  # a space each side is stripped again by the renderer; it keeps the delimiter apart
    if cell:
        t = re.sub(r"(\\*)\|", lambda m: m.group(1) + "\\" * (len(m.group(1)) % 2) + "\\|", t)
    return f"{delimiter}{t}{delimiter}"


# one pass over the raw text, so no replacement is escaped again (an entity's "#8203" is no reference)
_PROSE = re.compile(
    # at the start of a line or of a list item's text: an ordered list ("1. ", not "0.27"), a list, a thematic break
    # or setext underline, a link reference definition or task-list box ("-1.5" is left as it is)
    r"(?P<ordered>^\d{1,9}[.)](?=\s|$))"
    r"|(?P<start>^[-+](?=[\s\-+]|$)|^[=\[])"
    r"|(?P<hash>^#|#(?=\d))"                  # a heading; #123, owner/repo#123 (issue references)
    r"|(?P<gh>(?<![^\W_])gh-(?=\d))"          # GH-123
    r"|(?P<mention>@)"                        # @user, @org/team, an e-mail address (autolinked)
    r"|(?P<url>:(?=//)|(?<![^\W_])www(?=\.))"  # bare http://..., www.... (GFM autolinks them)
    r"|(?P<html>[&<>])"                       # tags, comments, entities (&#64; would render as a live "@")
    r"|(?P<link>(?<=\])\()"                   # [text](url), ![image](url): the "(" right after "]"
    r"|(?P<underscore>(?<![^\W_])_|_(?![^\W_]))"  # _emphasis_; snake_case inside a word opens none: kept
    r"|(?P<always>[\\`*~|$])",                # escapes, code spans, emphasis, strikethrough, table cells, math
    re.IGNORECASE)
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _prose_token(m: re.Match) -> str:
    s = m.group(0)
    if m.group("ordered"):
        return s[:-1] + "\\" + s[-1]  # "1\." : the number stays, the list marker goes
    if m.group("hash"):
        return ("\\#" if m.start() == 0 else "#") + (ZWSP_ENTITY if m.string[m.end():m.end() + 1].isdigit() else "")
    if m.group("gh") or m.group("mention") or m.group("url"):
        return s + ZWSP_ENTITY
    if m.group("html"):
        return _HTML[s]
    return "\\" + s


def prose(text, limit: int | None = 300) -> str:
    """PR text shown among markdown, on one line, reading as written but inert: no tag, link, image, emphasis, table
    cell, heading or list; no mention (``@&#8203;team``), issue reference (``#&#8203;123``) or autolinked URL.
    ``limit`` counts the characters of the text, before escaping. Safe at the start of a line or list item."""
    return _PROSE.sub(_prose_token, _cap(_one_line(text), limit))


def fence(text, lang: str = "") -> str:
    """A fenced code block (no trailing newline) that no line of ``text`` can close: the backtick fence is longer
    than any backtick run inside, at least 3. A bare CR would end a line too: made a newline."""
    t = _CONTROL_BUT_NEWLINE.sub(lambda m: "\n" if m.group(0) == "\r" else " ",
                                 _text(text).replace("\r\n", "\n")).rstrip("\n")
    bar = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", t)), default=0))
    return f"{bar}{_one_line(lang).replace('`', '')}\n{t}\n{bar}"


_INERT_IN_HTML = re.compile(r"@|#(?=\d)|(?<![^\W_])gh-(?=\d)|:(?=//)|(?<![^\W_])www(?=\.)", re.IGNORECASE)


def html(text, limit: int | None = 200) -> str:
    """Text inside a raw HTML block (e.g. ``<summary>``): markdown is not read there, HTML entities are."""
    t = _cap(_one_line(text), limit)
    t = t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    return _INERT_IN_HTML.sub(lambda m: m.group(0) + ZWSP_ENTITY, t)


def plain(text, limit: int | None = 255, *, multiline: bool = False) -> str:
    """A field GitHub shows as plain text (check-run title, annotation title/message): no control character, one
    line unless ``multiline``, no mention (a literal U+200B after ``@``: no entity is decoded there)."""
    if multiline:
        t = _CONTROL_BUT_NEWLINE.sub("", re.sub(r"\r\n?", "\n", _text(text))).strip()
    else:
        t = _one_line(text)
    return _cap(t.replace("@", "@" + ZWSP), limit)
