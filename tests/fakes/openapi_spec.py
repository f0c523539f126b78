"""Checks HTTP requests against GitHub's published OpenAPI 3.0 description."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DOC_URI = "urn:github:openapi"
NO_BODY = object()


@dataclass(frozen=True)
class Operation:
    """One documented method + path template, with what a request to it must carry."""

    operation_id: str
    method: str
    template: str
    pattern: re.Pattern[str]
    path_names: tuple[str, ...]  # the template's `{names}`, in the order the groups capture
    literal_segments: int
    parameters: tuple[dict[str, Any], ...]
    body_pointer: str | None  # JSON pointer to the application/json request schema
    body_required: bool


@dataclass
class CheckedRequest:
    """What a request matched, its decoded parameters, and every way it breaks the spec."""

    operation: Operation | None
    path_params: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def make_nullable_explicit(node: Any) -> None:
    """Rewrite OpenAPI 3.0 `nullable: true` into JSON Schema, in place, everywhere in `node`.

    OpenAPI 3.0 (unlike 3.1 and JSON Schema) spells "may be null" as a sibling keyword.
    """
    if isinstance(node, list):
        for item in node:
            make_nullable_explicit(item)
        return
    if not isinstance(node, dict):
        return
    for value in node.values():
        make_nullable_explicit(value)
    if node.get("nullable") is not True:
        return
    del node["nullable"]
    if isinstance(node.get("type"), str) and not any(k in node for k in ("oneOf", "anyOf")):
        node["type"] = [node["type"], "null"]
        if "enum" in node and None not in node["enum"]:
            node["enum"] = [*node["enum"], None]
        return
    inner = dict(node)
    node.clear()
    node["anyOf"] = [inner, {"type": "null"}]


def _segment_regex(segment: str) -> str:
    """`{owner}` becomes a group; literal text (`compare`, `{basehead}`'s dots) stays."""
    parts = re.split(r"\{([^}]+)\}", segment)
    return "".join(
        re.escape(part) if index % 2 == 0 else "([^/]+)"
        for index, part in enumerate(parts)
    )


def _escape(segment: str) -> str:
    return segment.replace("~", "~0").replace("/", "~1")


class OpenApiSpec:
    """The operations of one OpenAPI description, indexed for matching requests."""

    def __init__(self, doc: dict[str, Any]) -> None:
        make_nullable_explicit(doc)
        self.doc = doc
        self.registry = Registry().with_resource(
            DOC_URI, Resource.from_contents(doc, default_specification=DRAFT202012)
        )
        self.operations: list[Operation] = []
        for template, item in doc["paths"].items():
            for method, op in item.items():
                if method in ("get", "post", "put", "patch", "delete", "head"):
                    self.operations.append(self._operation(template, method, item, op))
        # prefer `/issues/comments` over `/issues/{issue_number}` when both match
        self.operations.sort(key=lambda op: -op.literal_segments)
        self._validators: dict[str, Draft202012Validator] = {}

    @classmethod
    def load(cls, path: Path) -> OpenApiSpec:
        return cls(json.loads(path.read_text()))

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        """Follow a local `$ref` (parameters, request bodies) to the object it names."""
        while "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def _operation(
        self, template: str, method: str, item: dict[str, Any], op: dict[str, Any]
    ) -> Operation:
        params = [self.resolve(p) for p in (*item.get("parameters", ()), *op.get("parameters", ()))]
        segments = template.strip("/").split("/")
        regex = "/".join(_segment_regex(s) for s in segments)
        body_pointer, body_required = None, False
        if "requestBody" in op:
            body = self.resolve(op["requestBody"])
            body_required = bool(body.get("required"))
            if "application/json" in body.get("content", {}):
                body_pointer = self._pointer_to_json_schema(template, method, op["requestBody"])
        return Operation(
            operation_id=op["operationId"],
            method=method.upper(),
            template=template,
            pattern=re.compile("^/" + regex + "$"),
            path_names=tuple(re.findall(r"\{([^}]+)\}", template)),
            literal_segments=sum("{" not in s for s in segments),
            parameters=tuple(params),
            body_pointer=body_pointer,
            body_required=body_required,
        )

    @staticmethod
    def _pointer_to_json_schema(template: str, method: str, body: dict[str, Any]) -> str:
        tail = "/content/application~1json/schema"
        if "$ref" in body:
            return str(body["$ref"]) + tail
        return f"#/paths/{_escape(template)}/{method}/requestBody{tail}"

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        for op in self.operations:
            if op.method != method:
                continue
            found = op.pattern.match(path)
            if found:
                # match on the raw path, so an encoded `/` (%2F) stays inside its segment
                values = map(unquote, found.groups())
                return op, dict(zip(op.path_names, values, strict=True))
        return None

    def check(
        self, method: str, path: str, query: dict[str, list[str]], body: Any = NO_BODY
    ) -> CheckedRequest:
        """Match a request (raw, percent-encoded path) and list every way it breaks the spec."""
        matched = self.match(method, path)
        if matched is None:
            return CheckedRequest(None, problems=[f"{method} {path}: no documented operation"])
        op, path_params = matched
        checked = CheckedRequest(op, path_params)
        checked.problems += self._check_params(op, path_params, query)
        if body is not NO_BODY:
            checked.problems += self._check_body(op, body)
        elif op.body_required:
            checked.problems.append("request body is required")
        return checked

    def _check_params(
        self, op: Operation, path_params: dict[str, str], query: dict[str, list[str]]
    ) -> list[str]:
        problems = []
        documented = {p["name"] for p in op.parameters if p["in"] == "query"}
        for name in sorted(set(query) - documented):
            problems.append(f"query parameter {name!r} is not documented")
        for param in op.parameters:
            where, name = param["in"], param["name"]
            if where == "path":
                value = path_params.get(name)
            elif where == "query":
                value = query[name][-1] if name in query else None
            else:
                continue
            if value is None:
                if param.get("required"):
                    problems.append(f"{where} parameter {name!r} is required")
                continue
            problems += _check_scalar(f"{where} parameter {name!r}", value, param.get("schema", {}))
        return problems

    def _check_body(self, op: Operation, body: Any) -> list[str]:
        if op.body_pointer is None:
            return ["this operation takes no JSON body"]
        return self._validate(op.body_pointer, body, "body")

    def check_response(self, op: Operation, status: int, body: Any) -> list[str]:
        """Check a response the fake sends against the schema documented for that status."""
        responses = self.doc["paths"][op.template][op.method.lower()]["responses"]
        if status == 404 and "404" not in responses:
            # GitHub answers 404 for whatever it cannot find (or the token cannot see) on
            # every route, documented there or not (a run id that does not exist, on
            # actions/cancel-workflow-run), with its usual error body.
            return self._validate("#/components/schemas/basic-error", body, "response")
        if str(status) not in responses:
            return [f"{op.operation_id}: status {status} is not documented"]
        response = responses[str(status)]
        if "application/json" not in self.resolve(response).get("content", {}):
            return [] if body is None else [f"{op.operation_id}: {status} has no documented body"]
        if "$ref" in response:
            pointer = response["$ref"]
        else:
            pointer = f"#/paths/{_escape(op.template)}/{op.method.lower()}/responses/{status}"
        return self._validate(pointer + "/content/application~1json/schema", body, "response")

    def _validate(self, pointer: str, instance: Any, label: str) -> list[str]:
        validator = self._validators.get(pointer)
        if validator is None:
            schema = {"$ref": DOC_URI + pointer}
            validator = Draft202012Validator(schema, registry=self.registry)
            self._validators[pointer] = validator
        return [
            f"{label}{''.join(f'[{p!r}]' for p in error.absolute_path)}: {error.message}"
            for error in validator.iter_errors(instance)
        ]


def _check_scalar(label: str, value: str, schema: dict[str, Any]) -> list[str]:
    """Check one path or query string against its (simple) parameter schema."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    typed: Any = value
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", value):
            return [f"{label}: {value!r} is not an integer"]
        typed = int(value)
    elif kind == "boolean":
        if value not in ("true", "false"):
            return [f"{label}: {value!r} is not a boolean"]
        typed = value == "true"
    if "enum" in schema and typed not in schema["enum"]:
        return [f"{label}: {value!r} is not one of {schema['enum']}"]
    return []
