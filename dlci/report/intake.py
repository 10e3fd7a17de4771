"""Results that dlci did not just write itself, read as hostile data.

A fork's uploaded artifact (report mode), the output of a scan that ran a pull request's code (the action's
sandboxed scan), a findings.json handed to ``dlci bisect --from`` or ``dlci triage``: each is read through this
module and nothing else. Before anything reads a field:

- every file is opened without following links, component by component from its results folder, and must be a
  regular file under its size cap (a link named ``findings.json`` or ``repro/F001.py`` pointing at
  ``/proc/self/environ`` or ``~/.ssh/id_rsa`` is refused, whatever it is swapped for meanwhile);
- the document is checked against :data:`SCHEMA` (types, lengths, counts) and against global caps on depth,
  string length and size;
- a reproducer path must be ``repro/<name>.py`` (``repro/tests/<name>.py`` for a test-style one).

Anything else raises :class:`IntakeError` (a usage error: exit 2) naming the file and the field; the caller posts
nothing from that results folder.
"""
from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from dlci.report.document import FILE, FORMAT_VERSION, Report, ReportError

MAX_DOCUMENT_BYTES = 16 << 20   # findings.json
MAX_SCRIPT_BYTES = 16 << 20     # one reproducer (a NaN search's embeds its weights: several hundred KB)
MAX_SCRIPTS_BYTES = 256 << 20   # all reproducers of one results folder
MAX_SIDE_FILE_BYTES = 64 << 10  # pr.json, shard.json
MAX_DEPTH = 24
MAX_VALUES = 2_000_000          # JSON values in one document
MAX_STRING = 200_000            # characters of any one string
MAX_FINDINGS = 5_000

# anchored with \Z: a `$` would accept a trailing newline (JSON Schema's pattern is Python's re.search here)
REPRO_PATH = r"^repro/[A-Za-z0-9_][A-Za-z0-9_.+-]{0,200}\.py\Z"
TEST_STYLE_PATH = r"^repro/tests/[A-Za-z0-9_][A-Za-z0-9_.+-]{0,200}\.py\Z"
KIND = r"^[A-Za-z0-9_.+-]{1,100}\Z"


class IntakeError(ReportError):
    """Untrusted results that are not what dlci writes: nothing of them is used (exit 2)."""


def _s(n: int) -> dict:
    return {"type": "string", "maxLength": n}


def _opt(schema: dict) -> dict:
    return {"anyOf": [{"type": "null"}, schema]}


_NAME, _TEXT, _LONG = _s(2_000), _s(20_000), _s(MAX_STRING)
_BOOL_OR_NULL = {"type": ["boolean", "null"]}
_OBJ = {"type": "object", "maxProperties": 500}
_NAMES = {"type": "array", "maxItems": 10_000, "items": _NAME}

FINDING = {
    "type": "object",
    "required": ["id", "oracle", "operator", "target", "symptom", "signature"],
    "properties": {
        "id": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,40}\Z"},
        "oracle": _NAME, "operator": _NAME, "target": _NAME, "target_version": _opt(_NAME), "symptom": _TEXT,
        "stage": _opt(_NAME), "signature": _TEXT, "message": _LONG, "traceback": _LONG, "log": _LONG,
        "instance_id": _NAME, "origin": _opt(_OBJ), "distance": _opt(_OBJ),
        "instances": _NAMES, "operators": _NAMES, "also_in": _NAMES,
        "new_in_pr": _BOOL_OR_NULL, "reaches_change": _BOOL_OR_NULL, "confirmed": _BOOL_OR_NULL,
        "repro_checked": _BOOL_OR_NULL, "repro_passes_on_base": _BOOL_OR_NULL, "test_style_checked": _BOOL_OR_NULL,
        "new_in_release": _BOOL_OR_NULL,
        "base": _opt(_OBJ), "introduced_by": _opt(_OBJ), "since": _opt(_OBJ), "against": _opt(_OBJ),
        "reduction": _opt(_OBJ), "rule": _opt(_OBJ),
        "known": _opt({"type": "object", "properties": {"link": _opt(_TEXT), "note": _opt(_TEXT)}}),
        "repro": {"anyOf": [{"const": ""}, {"type": "string", "pattern": REPRO_PATH}]},
        "test_style_repro": {"anyOf": [{"const": ""}, {"type": "string", "pattern": TEST_STYLE_PATH}]},
        "test_style": _NAME,
        "runners": {"type": "array", "maxItems": 100, "items": {"type": "string", "pattern": KIND}},
    },
}

_COUNTS = {"type": "object", "maxProperties": 50,
           "additionalProperties": {"type": ["integer", "number"], "minimum": 0}}
_PLACE = {"type": "object", "required": ["file", "line"],
          "properties": {"file": _TEXT, "line": {"type": "integer", "minimum": 0, "maximum": 100_000_000},
                         "region": _opt(_TEXT)}}

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "findings", "stats"],
    "properties": {
        "version": {"const": FORMAT_VERSION},
        "findings": {"type": "array", "maxItems": MAX_FINDINGS, "items": FINDING},
        "stats": {
            "type": "object",
            "properties": {
                "tests_run": {"type": "integer", "minimum": 0}, "tests_valid": {"type": "integer", "minimum": 0},
                "seconds": {"type": "number", "minimum": 0},
                "per_target": {"type": "object", "maxProperties": 500, "additionalProperties": _COUNTS},
                "flaky": {"type": "array", "maxItems": MAX_FINDINGS,
                          "items": {"type": "object", "required": ["signature"],
                                    "properties": {"signature": _TEXT}}},
                "unreproduced": {"type": "array", "maxItems": MAX_FINDINGS,
                                 "items": {"type": "object", "properties": {"signature": _TEXT}}},
            },
        },
        "pr": _opt({
            "type": "object",
            "properties": {
                "base": _NAME, "head": _NAME, "operators": _NAMES,
                "touched": {"type": "array", "maxItems": 20_000, "items": {
                    **_PLACE, "required": ["operator", "file", "line"],
                    "properties": {**_PLACE["properties"], "operator": _NAME, "namespace": _opt(_NAME),
                                   "targets": _NAMES, "converter": _opt(_TEXT), "why": _opt(_TEXT)}}},
                "coverage": _opt({"type": "object", "properties": {
                    "unreached": {"type": "array", "maxItems": 20_000, "items": _PLACE}}}),
                "nothing_to_test": _opt(_TEXT),
            },
        }),
    },
}

SHARD_SCHEMA = {"type": "object", "properties": {"shard": {"type": "string", "pattern": KIND},
                                                 "kind": {"type": "string", "pattern": KIND}}}


@dataclass
class Results:
    """One validated results folder: its report, the reproducers it names (path -> text), its side files."""
    folder: Path
    report: Report
    scripts: dict[str, bytes] = field(default_factory=dict)
    shard: dict = field(default_factory=dict)
    pr_file: dict | None = None


def read_file(root: Path, relative: str, limit: int) -> bytes:
    """The bytes of ``root/relative``, opened one component at a time without following any link, refusing
    anything that is not a regular file of at most ``limit`` bytes (checked on the open file, so nothing swapped
    in between the check and the read is read)."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise IntakeError(f"{root}: {relative!r} is not a plain path inside the results folder")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(str(root), flags | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise IntakeError(f"cannot open the results folder {root}: {e.strerror}") from None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags | getattr(os, "O_DIRECTORY", 0), dir_fd=fd)
            os.close(fd)
            fd = nxt
        nxt = os.open(parts[-1], flags | getattr(os, "O_NONBLOCK", 0), dir_fd=fd)
        os.close(fd)
        fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IntakeError(f"{root}/{relative} is not a regular file")
        if st.st_nlink != 1:  # a hard link to a file elsewhere (the runner's) is that file
            raise IntakeError(f"{root}/{relative} has {st.st_nlink} hard links (refused: only a file of its own)")
        if st.st_size > limit:
            raise IntakeError(f"{root}/{relative} is {st.st_size} bytes, over the {limit}-byte cap")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise IntakeError(f"{root}/{relative} grew over the {limit}-byte cap while read")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            raise IntakeError(f"{root}/{relative}: a link or a non-folder on the way (refused)") from None
        if e.errno == errno.ENOENT:
            raise IntakeError(f"cannot read {root}/{relative}: no such file") from None
        raise IntakeError(f"cannot read {root}/{relative}: {e.strerror}") from None
    finally:
        os.close(fd)


def exists(root: Path, relative: str) -> bool:
    """Whether ``root/relative`` is there at all (a link counts: reading it is refused, not skipped)."""
    return os.path.lexists(os.path.join(str(root), relative))


def _check_shape(value, origin: str) -> None:
    """Caps no schema keyword expresses: nesting depth, total values, the length of any string or key."""
    stack, count = [(value, 0)], 0
    while stack:
        v, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise IntakeError(f"{origin}: more than {MAX_VALUES} values")
        if depth > MAX_DEPTH:
            raise IntakeError(f"{origin}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(v, str):
            if len(v) > MAX_STRING:
                raise IntakeError(f"{origin}: a string of {len(v)} characters (cap {MAX_STRING})")
        elif isinstance(v, dict):
            for k, x in v.items():
                if len(k) > 2_000:
                    raise IntakeError(f"{origin}: a key of {len(k)} characters")
                stack.append((x, depth + 1))
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)


def _validate(doc, schema: dict, origin: str) -> None:
    import jsonschema
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise IntakeError(f"{origin}: {where}: {error.message[:300]}")


def parse(data: bytes, origin: str, schema: dict = SCHEMA):
    """JSON ``data`` checked against the caps and ``schema``."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise IntakeError(f"{origin} is not UTF-8 JSON: {str(e)[:200]}") from None
    except RecursionError:
        raise IntakeError(f"{origin}: nested deeper than {MAX_DEPTH} levels") from None
    _check_shape(doc, origin)
    _validate(doc, schema, origin)
    return doc


def read_report(path: str | os.PathLike) -> Report:
    """A findings.json (or a folder holding one) from elsewhere, validated (``dlci bisect --from``,
    ``dlci triage``)."""
    path = Path(path)
    folder, name = (path, FILE) if path.is_dir() else (path.parent, path.name)
    doc = parse(read_file(folder, name, MAX_DOCUMENT_BYTES), str(folder / name))
    return Report.from_dict(doc, str(folder / name))


def read_results(folder: str | os.PathLike, *, scripts: bool = True) -> Results:
    """A results folder (findings.json, repro/, shard.json, pr.json) from elsewhere, validated as a whole: its
    report, the bytes of every reproducer it names, its shard and pull-request files."""
    folder = Path(folder)
    origin = str(folder / FILE)
    doc = parse(read_file(folder, FILE, MAX_DOCUMENT_BYTES), origin)
    found = Results(folder=folder, report=Report.from_dict(doc, origin))
    total = 0
    for f in doc["findings"] if scripts else []:
        for key in ("repro", "test_style_repro"):
            rel = f.get(key) or ""
            if rel and rel not in found.scripts and exists(folder, rel):
                found.scripts[rel] = read_file(folder, rel, MAX_SCRIPT_BYTES)
                total += len(found.scripts[rel])
                if total > MAX_SCRIPTS_BYTES:
                    raise IntakeError(f"{folder}: reproducers over {MAX_SCRIPTS_BYTES} bytes in all")
    if exists(folder, "shard.json"):
        found.shard = parse(read_file(folder, "shard.json", MAX_SIDE_FILE_BYTES), str(folder / "shard.json"),
                            SHARD_SCHEMA)
    if exists(folder, "pr.json"):
        found.pr_file = parse(read_file(folder, "pr.json", MAX_SIDE_FILE_BYTES), str(folder / "pr.json"),
                              {"type": "object"})
    return found


def script_name(relative: str) -> str:
    """The file name of a validated reproducer path."""
    if not (re.search(REPRO_PATH, relative) or re.search(TEST_STYLE_PATH, relative)):
        raise IntakeError(f"{relative!r} is not a reproducer path")
    return relative.rsplit("/", 1)[-1]
