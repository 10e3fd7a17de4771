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
    """``schema`` or null. Null joins the schema's own types where it has them (every other keyword holds for null
    vacuously): an anyOf would validate each such field twice."""
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        return {**schema, "type": [*types, "null"]}
    return {"anyOf": [{"type": "null"}, schema]}


_NAME, _TEXT, _LONG = _s(2_000), _s(20_000), _s(MAX_STRING)
_BOOL_OR_NULL = {"type": ["boolean", "null"]}
_OBJ = {"type": "object", "maxProperties": 500}
_NAMES = {"type": "array", "maxItems": 10_000, "items": _NAME}

# What the renderers read (report.md, the comment, the check run's annotations) is typed here down to each field
# they index, format as a number or iterate: a document that passes is one they render (tests/test_hostile.py swaps
# every field of a full document for values of other types to hold this). Other keys pass as they are: nothing
# reads them.
_INT, _NUM = {"type": "integer", "minimum": 0}, {"type": "number", "minimum": 0}
_SCALAR = {"type": ["string", "number", "boolean", "null"], "maxLength": 20_000}
_TEXTS = {"type": "array", "maxItems": 10_000, "items": _TEXT}


def _obj(properties: dict, required: tuple = (), **more) -> dict:
    return {"type": "object", "maxProperties": 10_000, "properties": properties, "required": list(required), **more}


def _arr(items: dict, n: int = 20_000) -> dict:
    return {"type": "array", "maxItems": n, "items": items}


_TIMED = {"report": _TEXT}  # introduced_by, since: the sentence the bisection wrote
FINDING = _obj({
    "id": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]{1,40}\Z"},
    "oracle": _NAME, "operator": _NAME, "target": _NAME, "target_version": _opt(_NAME), "symptom": _TEXT,
    "stage": _opt(_NAME), "signature": _TEXT, "message": _LONG, "traceback": _LONG, "log": _LONG,
    "instance_id": _NAME, "origin": _obj({"source": _SCALAR, "test": _SCALAR}), "distance": _opt(_OBJ),
    "instances": _NAMES, "operators": _NAMES, "also_in": _NAMES,
    "new_in_pr": _BOOL_OR_NULL, "reaches_change": _BOOL_OR_NULL, "confirmed": _BOOL_OR_NULL,
    "repro_checked": _BOOL_OR_NULL, "repro_passes_on_base": _BOOL_OR_NULL, "test_style_checked": _BOOL_OR_NULL,
    "new_in_release": _BOOL_OR_NULL,
    "base": _opt(_obj({"status": _SCALAR, "symptom": _SCALAR, "changed": _BOOL_OR_NULL})),
    "introduced_by": _opt(_obj(_TIMED, ("report",))), "since": _opt(_obj(_TIMED, ("report",))),
    "against": _opt(_obj({"status": _SCALAR, "symptom": _SCALAR, "note": _SCALAR, "package": _SCALAR,
                          "version": _SCALAR, "changed": _BOOL_OR_NULL,
                          "reproducer": _opt(_obj({"verdict": _SCALAR, "reason": _SCALAR, "command": _TEXT},
                                                  ("verdict", "command")))})),
    "reduction": _opt(_obj({"changed": _BOOL_OR_NULL, "confirmed": _BOOL_OR_NULL,
                            "before": _obj({"operators": _SCALAR, "elements": _SCALAR}),
                            "after": _obj({"operators": _SCALAR, "elements": _SCALAR}),
                            "params_that_matter": _opt(_NAMES)}, ("before", "after"))),
    "rule": _opt(_obj({k: _TEXT for k in ("name", "category_title", "summary", "graph_a", "graph_b")},
                      ("name", "category_title", "summary", "graph_a", "graph_b"))),
    "graph": _opt(_obj({
        "node_types": _opt(_NAMES), "node": _SCALAR, "localised_to": _SCALAR, "operators": _SCALAR,
        "multi_operator": _BOOL_OR_NULL, "multi_operator_only": _BOOL_OR_NULL,
        "cut_after": _opt(_obj({"wrong": _SCALAR})),
        "each_operator_alone": _opt({"type": "object", "maxProperties": 10_000, "additionalProperties": _SCALAR}),
        "trace": _opt(_obj({"first_divergent": _SCALAR, "why": _SCALAR})),
        "parameters_that_matter": _opt(_NAMES),
        "share": _opt(_obj({"share": {"type": "number"}, "how": _SCALAR}))}, ("localised_to",))),
    "extra": _opt(_obj({"explains_graph_findings": _opt({"type": "array", "maxItems": 10_000})})),
    "known": _opt(_obj({"link": _opt(_TEXT), "note": _opt(_TEXT)})),
    "repro": {"anyOf": [{"const": ""}, {"type": "string", "pattern": REPRO_PATH}]},
    "test_style_repro": {"anyOf": [{"const": ""}, {"type": "string", "pattern": TEST_STYLE_PATH}]},
    "test_style": _NAME,
    "runners": {"type": "array", "maxItems": 100, "items": {"type": "string", "pattern": KIND}},
}, ("id", "oracle", "operator", "target", "symptom", "signature"))

_COUNTS = {"type": "object", "maxProperties": 50, "additionalProperties": _NUM,
           "required": ["pass", "unsupported", "invalid", "crash", "inconsistency"]}
_PLACE = {"type": "object", "required": ["file", "line"],
          "properties": {"file": _TEXT, "line": {"type": "integer", "minimum": 0, "maximum": 100_000_000},
                         "region": _opt(_TEXT)}}
# a changed statement or a branch outcome of a changed function (dlci.directed): a branch is shown at its span
_GOAL = {**_PLACE, "required": ["file", "line", "kind"],
         "properties": {**_PLACE["properties"], "kind": _NAME, "condition": _SCALAR, "outcome": _SCALAR,
                        # a branch's line is where it goes (-1: out of the function); it is shown at its span
                        "line": {"type": "integer", "minimum": -1, "maximum": 100_000_000},
                        "span": {"type": "array", "minItems": 1, "maxItems": 2,
                                 "items": {"type": "integer", "minimum": 0}},
                        "closest": _opt(_obj({"test": _SCALAR, "target": _SCALAR})),
                        "distance": _opt({"type": "number"}), "skeleton": _SCALAR, "tests": _SCALAR,
                        "failing": _SCALAR, "values": _opt(_TEXTS)},
         "if": {"properties": {"kind": {"const": "branch"}}}, "then": {"required": ["span"]}}
_GRAPH_CHANGE = _obj({"target": _NAME, "inputs": _INT, "instance": _TEXT, "head_only": _TEXTS,
                      "base_only": _TEXTS, "differences": _TEXTS},
                     ("target", "inputs", "instance", "head_only", "base_only"))
_DIRECTED = _obj({
    "goals": _SCALAR, "reached": _SCALAR, "statements": _SCALAR, "statements_reached": _SCALAR,
    "search": _opt(_obj({"reached_by_search": _SCALAR, "mutants": _SCALAR, "seconds": _SCALAR,
                         "reaching_mutation": _opt({"type": "object", "maxProperties": 10_000,
                                                    "additionalProperties": _SCALAR}),
                         "divergence": _opt(_obj({"graph_changes": _opt(_arr(_GRAPH_CHANGE, 1_000))}))})),
    "unreached": _opt(_arr(_GOAL)), "reached_goals": _opt(_arr(_GOAL)),
}, ("goals", "reached", "statements", "statements_reached"))
_ON_A_TARGET = _obj({"operator": _NAME, "target": _NAME, "symptom": _TEXT, "instance": _TEXT, "test": _opt(_TEXT),
                     "status_on_base": _SCALAR, "instances": _opt(_NAMES)}, ("operator", "target", "symptom"))
_PR = _obj({
    "base": _NAME, "head": _NAME, "operators": _NAMES, "profiles": _opt(_NAMES), "policy_changed": _opt(_NAMES),
    "test_gap": _opt(_TEXT), "out": _opt(_TEXT), "nothing_to_test": _opt(_TEXT),
    "targets_not_installed": _opt(_NAMES), "operators_without_material": _opt(_NAMES),
    "touched": _arr({**_PLACE, "required": ["operator", "file", "line", "namespace", "targets", "why"],
                     "properties": {**_PLACE["properties"], "operator": _NAME, "namespace": _opt(_NAME),
                                    "targets": _NAMES, "converter": _opt(_TEXT), "why": _opt(_TEXT)}}),
    "coverage": _opt(_obj({"changed_statements": _SCALAR, "reached_statements": _SCALAR,
                           "instances_reaching": _SCALAR,
                           "unreached": _arr({**_PLACE, "required": ["file", "line", "region"]})})),
    "directed": _opt(_DIRECTED),
    "bisect": _opt(_obj({"asked": _opt(_NAMES), "seconds": _NUM, "budget_s": _NUM,
                         "lines": _opt(_TEXTS), "error": _opt(_TEXT)})),
    "fixed": _opt(_arr({**_ON_A_TARGET, "required": ["operator", "target", "symptom", "instance",
                                                     "status_on_base"]}, 5_000)),
    "still_failing": _opt(_arr(_ON_A_TARGET, 5_000)),
    "fuzz": _opt(_obj({"share": {"type": "number"}, "targets": _NAMES, "why": _TEXT}, ("share", "targets", "why"))),
    "fuzz_already_on_base": _opt(_arr(_obj({"operator": _opt(_NAME), "target": _opt(_NAME),
                                            "symptom": _opt(_TEXT)}), MAX_FINDINGS)),
    "graph_level": _opt(_arr({**_PLACE, "required": ["file", "line", "why"],
                              "properties": {**_PLACE["properties"], "why": _TEXT}})),
    "unmapped": _opt(_arr({**_PLACE, "required": ["file", "line", "why"],
                           "properties": {**_PLACE["properties"], "why": _TEXT}})),
    # a checkout command and the environment to run a reproducer in, or the environment alone
    "head_run": _opt({"anyOf": [_TEXT, {"type": "array", "minItems": 2, "maxItems": 2, "items": _TEXT}]}),
}, ("base", "head"))
_FUZZ_STATS = _obj({"coverage": _opt({"type": "object", "maxProperties": 100, "additionalProperties": {"type": "number"}}),
                    "networks": _opt(_OBJ), "strategy": _opt(_OBJ), "corpus": _opt(_OBJ),
                    "timeline": _opt(_arr(_obj({"t": {"type": "number"}, "OLC": {"type": "number"}},
                                               ("t", "OLC")), 100_000))})
_EVOLVE_STATS = _obj({
    "strategy": _SCALAR, "first_failure_seconds": _opt({"type": "number"}),
    "seeds": _opt(_arr(_obj({"seed": _SCALAR, "genes": _SCALAR, "gene_elements": _SCALAR, "candidates": _SCALAR,
                             "best_fitness": _SCALAR,
                             "found": _opt({"type": "object", "maxProperties": 1_000, "additionalProperties": _obj(
                                 {"candidate": _SCALAR, "seconds": {"type": "number"}, "operator": _SCALAR},
                                 ("candidate", "seconds", "operator"))})},
                            ("seed", "genes", "gene_elements", "candidates", "best_fitness")), 10_000))})
_STRINGS_BY_NAME = {"type": "object", "maxProperties": 1_000, "additionalProperties": _TEXT}

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["version", "findings", "stats"],
    "properties": {
        "version": {"const": FORMAT_VERSION},
        "findings": {"type": "array", "maxItems": MAX_FINDINGS, "items": FINDING},
        "stats": _obj({
            "tests_run": _INT, "tests_valid": _INT, "seconds": _NUM, "operators": _SCALAR, "instances": _SCALAR,
            "interrupted": _BOOL_OR_NULL,
            "per_target": {"type": "object", "maxProperties": 500, "additionalProperties": _COUNTS},
            "flaky": _arr(_obj({"signature": _TEXT}, ("signature",)), MAX_FINDINGS),
            "unreproduced": _arr(_obj({"signature": _TEXT, "not_reproduced_because": _opt(_TEXT)},
                                      ("signature",)), MAX_FINDINGS),
            "targets_not_on_runner": _opt(_STRINGS_BY_NAME), "devices": _opt(_STRINGS_BY_NAME),
            "device_notes": _opt(_STRINGS_BY_NAME), "not_reproduced_in_budget": _opt(_NAMES),
            "fuzz": _opt(_FUZZ_STATS), "evolve": _opt(_EVOLVE_STATS),
        }, ("tests_run", "tests_valid", "seconds")),
        "pr": _opt(_PR),
        # dlci test --against: the older release every finding ran under again
        "against": _opt(_obj({"line": _TEXT, "package": _NAME, "installed": _NAME, "version": _NAME,
                              "delta": _TEXTS}, ("line", "package", "installed", "version", "delta"))),
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
