"""The GitHub REST API description (a subset, see scripts/openapi_subset.py) as routes and JSON Schema validators.

GitHub publishes OpenAPI 3.0.3.  Its schema dialect differs from JSON Schema 2020-12, so schemas are converted:

* ``nullable: true`` becomes ``type: [T, "null"]`` (and ``null`` joins an ``enum``: GitHub writes
  ``{type: string, nullable: true, enum: [...]}`` for check-run ``conclusion`` and means null is allowed);
  without a ``type`` it becomes ``anyOf: [{type: null}, ...]``.
* ``oneOf`` whose branches are *all* nullable (``validation-error.errors[].value``) would reject ``null``, which
  matches every branch: the null is hoisted out of the branches.
* ``discriminator`` (``GET /user``: private-user | public-user by ``user_view_type``) is honoured when the
  property is present, otherwise the plain ``oneOf`` decides.
* OpenAPI-only keywords (``discriminator``, ``example``, ``x-*`` ...) are dropped.
* ``format`` is checked for ``date-time``, ``uri``, ``email``, ``int64`` and ``timestamp`` (jsonschema's own
  date-time/uri checkers need optional packages and are silently skipped without them).

Operation-local ``$ref``s (``#/components/...``) are rewritten to point into the registered components document.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SUBSET_PATH = Path(__file__).with_name("api.github.com.subset.json")
COMPONENTS_URI = "urn:dlci:github-openapi"

_OPENAPI_ONLY = {"nullable", "discriminator", "example", "examples", "xml", "externalDocs"}

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


# --------------------------------------------------------------------------------------------------- formats
FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _DATE_TIME.match(value):
        raise ValueError(f"{value!r} is not an RFC 3339 date-time")
    datetime.fromisoformat(value.replace("z", "Z").replace("t", "T").replace("Z", "+00:00"))
    return True


@FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    parts = urlsplit(value)
    return bool(parts.scheme) and (bool(parts.netloc) or parts.scheme in ("mailto", "urn"))


@FORMATS.checks("email")
def _is_email(value: object) -> bool:
    return not isinstance(value, str) or ("@" in value and " " not in value)


@FORMATS.checks("int64")
def _is_int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@FORMATS.checks("timestamp")
def _is_timestamp(value: object) -> bool:
    return not isinstance(value, int) or value >= 0


# ---------------------------------------------------------------------------------------------- messages
def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(err: Any) -> str:
    return "/" + "/".join(str(p) for p in err.absolute_path)


def _describe(err: Any) -> str:
    """One line per error, without dumping a 70k-character instance."""
    kind, inst, limit = err.validator, err.instance, err.validator_value
    if kind in ("maxItems", "minItems"):
        what = f"has {len(inst)} items, {'maximum' if kind == 'maxItems' else 'minimum'} is {limit}"
        return f"{_where(err)}: {'is too long' if kind == 'maxItems' else 'is too short'} ({what})"
    if kind in ("maxLength", "minLength"):
        what = f"{len(inst)} characters, {'maximum' if kind == 'maxLength' else 'minimum'} is {limit}"
        return f"{_where(err)}: {'is too long' if kind == 'maxLength' else 'is too short'} ({what})"
    if kind == "enum":
        return f"{_where(err)}: {_short(inst)} is not one of {limit}"
    if kind == "type":
        return f"{_where(err)}: {_short(inst)} is not of type {limit}"
    if kind == "format":
        return f"{_where(err)}: {_short(inst)} is not a valid {limit}"
    if kind in ("anyOf", "oneOf") and err.context:
        deepest = max(err.context, key=lambda e: len(e.absolute_path))
        return f"{_where(err)}: matches no allowed variant; closest: {_describe(deepest)}"
    msg = err.message
    return f"{_where(err)}: {msg if len(msg) <= 200 else msg[:197] + '...'}"


# ------------------------------------------------------------------------------------------ schema conversion
def _types(schema: dict) -> list:
    t = schema.get("type")
    return [] if t is None else (list(t) if isinstance(t, list) else [t])


def _admits_null(schema: dict) -> bool:
    return "null" in _types(schema) or (
        "anyOf" in schema and any(s.get("type") == "null" for s in schema["anyOf"] if isinstance(s, dict))
    )


def _without_null(schema: dict) -> dict:
    """The schema with its own admission of null removed (inverse of what `convert_schema` adds)."""
    s = dict(schema)
    if "null" in _types(s):
        rest = [t for t in _types(s) if t != "null"]
        s["type"] = rest[0] if len(rest) == 1 else rest
        if "enum" in s:
            s["enum"] = [v for v in s["enum"] if v is not None]
    elif "anyOf" in s:
        branches = [b for b in s["anyOf"] if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(branches) == 1 and set(s) == {"anyOf"}:
            return branches[0]
        s["anyOf"] = branches
    return s


def convert_schema(schema: Any, ref_base: str = "") -> Any:
    """OpenAPI 3.0 Schema Object -> JSON Schema 2020-12 (see the module docstring)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _OPENAPI_ONLY or key.startswith("x-"):
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions"):
            out[key] = {name: convert_schema(sub, ref_base) for name, sub in value.items()}
        elif key in ("items", "not", "additionalProperties", "unevaluatedProperties") and isinstance(value, dict):
            out[key] = convert_schema(value, ref_base)
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            out[key] = [convert_schema(sub, ref_base) for sub in value]
        elif key == "$ref":
            out[key] = ref_base + value if value.startswith("#") else value
        else:
            out[key] = value

    disc = schema.get("discriminator")
    if disc and "oneOf" in out and disc.get("mapping"):
        prop = disc["propertyName"]
        by_value = [
            {"properties": {prop: {"const": k}}, "$ref": (ref_base + ref if ref.startswith("#") else ref)}
            for k, ref in sorted(disc["mapping"].items())
        ]
        plain = out.pop("oneOf")
        out["if"] = {"type": "object", "required": [prop]}
        out["then"] = {"anyOf": by_value}
        out["else"] = {"oneOf": plain}

    if "oneOf" in out and sum(_admits_null(b) for b in out["oneOf"]) > 1:
        out["oneOf"] = [_without_null(b) for b in out["oneOf"]]
        out = {"anyOf": [{"type": "null"}, out]}

    if schema.get("nullable") is True:
        if "type" in out:
            types = _types(out)
            if "null" not in types:
                out["type"] = types + ["null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = list(out["enum"]) + [None]
        elif not _admits_null(out):
            out = {"anyOf": [{"type": "null"}, out]}
    return out


def _convert_components(components: dict) -> dict:
    out = dict(components)
    out["schemas"] = {name: convert_schema(s) for name, s in components.get("schemas", {}).items()}
    for kind in ("parameters", "headers"):
        out[kind] = {
            name: {**p, "schema": convert_schema(p["schema"])} if "schema" in p else p
            for name, p in components.get(kind, {}).items()
        }
    return out


# ------------------------------------------------------------------------------------------------ operations
@dataclass
class Parameter:
    name: str
    location: str  # path | query | header
    required: bool
    schema: dict


@dataclass
class Operation:
    method: str
    template: str
    operation_id: str
    docs_url: str
    parameters: list[Parameter]
    request_schema: dict | None
    request_required: bool
    responses: dict[str, dict]  # status -> resolved Response Object
    regex: re.Pattern = field(repr=False)
    raw: dict = field(repr=False)

    @property
    def key(self) -> str:
        return f"{self.method} {self.template}"

    def match(self, path: str) -> dict[str, str] | None:
        m = self.regex.fullmatch(path)
        return m.groupdict() if m else None


def _template_regex(template: str) -> re.Pattern:
    pattern = ""
    for part in re.split(r"(\{[^}]+\})", template):
        if part.startswith("{"):
            pattern += f"(?P<{part[1:-1]}>[^/]+)"
        else:
            pattern += re.escape(part)
    return re.compile(pattern)


class Spec:
    """The kept operations of the subset, with compiled validators."""

    def __init__(self, path: Path = SUBSET_PATH):
        self.doc = json.loads(path.read_text(encoding="utf-8"))
        self.header = self.doc.get("x-dlci-subset", {})
        self.components = _convert_components(self.doc["components"])
        resource = Resource.from_contents(
            {"$id": COMPONENTS_URI, "components": self.components}, default_specification=DRAFT202012
        )
        self.registry = Registry().with_resource(COMPONENTS_URI, resource)
        self.operations: list[Operation] = []
        for template, item in self.doc["paths"].items():
            shared = item.get("parameters", [])
            for method, op in item.items():
                if method == "parameters":
                    continue
                self.operations.append(self._operation(method.upper(), template, op, shared))
        # Most literal characters first: a literal segment beats a parameter.
        self.operations.sort(key=lambda o: -len(re.sub(r"\{[^}]+\}", "", o.template)))
        self._validators: dict[str, Draft202012Validator] = {}
        self._converted: dict[str, dict] = {}

    def _resolve(self, obj: dict) -> dict:
        seen = 0
        while "$ref" in obj:
            ref = obj["$ref"]
            assert ref.startswith("#/components/"), ref
            kind, name = ref[len("#/components/"):].split("/")
            obj = self.doc["components"][kind][name]
            seen += 1
            assert seen < 10, ref
        return obj

    def _operation(self, method: str, template: str, op: dict, shared: list) -> Operation:
        params = {}
        for p in [*shared, *op.get("parameters", [])]:
            p = self._resolve(p)
            params[(p["in"], p["name"])] = Parameter(
                name=p["name"],
                location=p["in"],
                required=bool(p.get("required")),
                schema=convert_schema(p.get("schema", {}), COMPONENTS_URI),
            )
        body = op.get("requestBody")
        request_schema = None
        if body:
            body = self._resolve(body)
            media = body.get("content", {}).get("application/json")
            if media and "schema" in media:
                request_schema = convert_schema(media["schema"], COMPONENTS_URI)
        return Operation(
            method=method,
            template=template,
            operation_id=op.get("operationId", ""),
            docs_url=op.get("externalDocs", {}).get("url", "https://docs.github.com/rest"),
            parameters=list(params.values()),
            request_schema=request_schema,
            request_required=bool(body and body.get("required")),
            responses={status: self._resolve(r) for status, r in op.get("responses", {}).items()},
            regex=_template_regex(template),
            raw=op,
        )

    # --------------------------------------------------------------------------------------- lookups
    def route(self, method: str, path: str) -> tuple[Operation | None, dict[str, str], bool]:
        """(operation, path params, path_known). path_known: some operation has this path (other method)."""
        path_known = False
        for op in self.operations:
            params = op.match(path)
            if params is None:
                continue
            if op.method == method:
                return op, params, True
            path_known = True
        return None, {}, path_known

    def operation(self, key: str) -> Operation:
        for op in self.operations:
            if op.key == key:
                return op
        raise KeyError(key)

    def validator(self, cache_key: str, schema: dict) -> Draft202012Validator:
        v = self._validators.get(cache_key)
        if v is None:
            v = Draft202012Validator(schema, registry=self.registry, format_checker=FORMATS)
            self._validators[cache_key] = v
        return v

    def errors(self, cache_key: str, schema: dict, instance: Any, limit: int = 5) -> list[str]:
        """Short human-readable validation errors (empty when valid)."""
        errors = sorted(self.validator(cache_key, schema).iter_errors(instance), key=lambda e: list(e.path))
        return [_describe(err) for err in errors[:limit]]

    @cached_property
    def breaking_change_versions(self) -> set[str]:
        """API versions named by `x-github-breaking-changes` (besides the default 2022-11-28)."""
        versions: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                versions.update(c["version"] for c in node.get("x-github-breaking-changes", []))
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(self.doc)
        return versions

    @cached_property
    def fallback_error_schema(self) -> dict:
        """Error bodies for statuses an operation does not declare (GitHub answers 401/403/404/422 anywhere)."""
        return {
            "anyOf": [
                {"$ref": f"{COMPONENTS_URI}#/components/schemas/basic-error"},
                {"$ref": f"{COMPONENTS_URI}#/components/schemas/validation-error"},
            ],
            "required": ["message"],
        }

    def response_schema(self, op: Operation, status: int) -> tuple[str, dict | None, bool]:
        """(cache key, JSON schema of the body or None for no body, declared)."""
        resp = op.responses.get(str(status)) or op.responses.get(f"{str(status)[0]}XX") or op.responses.get("default")
        if resp is None:
            if status >= 400:
                return "fallback-error", self.fallback_error_schema, False
            return f"{op.key} {status}", None, False
        media = resp.get("content", {}).get("application/json")
        if media is None or "schema" not in media:
            return f"{op.key} {status}", None, True
        key = f"{op.key} {status}"
        if key not in self._converted:
            self._converted[key] = convert_schema(media["schema"], COMPONENTS_URI)
        return key, self._converted[key], True
