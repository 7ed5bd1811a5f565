"""Reading an OpenAPI document's operations, so a tool's allow-list is checked when it is compiled:
a bad spec fails the build rather than a run. The text is handed in; fetching it is the caller's.

Each operation also carries what a model is offered for it: one JSON Schema object of its arguments
(its path, query and header parameters, and its JSON request body — a body that is an object with
properties is offered field by field, any other body as one ``body`` argument), and for each argument
where it goes (``Param``). ``$ref``s into the document are resolved; a reference around a circle, or
deeper than ``MAX_REFS``, is described rather than followed. What cannot be offered (a required form
body, an external ``$ref``) is a *problem* of that operation, refused only if a tool allows it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.content.parts import Operation, Param, Where
from engine.errors import ContentFault

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# How many $refs deep a schema is followed, and how deep it is described at all (a YAML alias can
# make a structure that contains itself).
MAX_REFS = 12
MAX_DEPTH = 40
# Both OpenAI and Anthropic require a tool's name to match ``^[a-zA-Z0-9_-]{1,64}$``; Anthropic asks
# the same of an argument's name, with '.' allowed.
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_NOT_IN_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_NOT_IN_ARGUMENT = re.compile(r"[^a-zA-Z0-9_.-]")
# OpenAPI's words that are not JSON Schema (or say nothing to a model about what to send).
_DROPPED = frozenset({"nullable", "example", "xml", "externalDocs", "discriminator", "readOnly", "writeOnly"})
_SUBSCHEMAS = ("items", "not", "additionalProperties", "contains", "propertyNames")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_PLACES: dict[str, Where] = {"path": "path", "query": "query", "header": "header"}
# A Swagger 2 parameter carries its schema's words on itself.
_SWAGGER_SCHEMA_KEYS = (
    "type", "format", "items", "enum", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "multipleOf",
)


@dataclass(frozen=True)
class Unavailable:
    """A referenced file or url that could not be read, and why (the caller's words)."""

    reason: str


@dataclass(frozen=True)
class Spec:
    base_url: str | None
    operations: dict[str, Operation]
    # operationId → why it cannot be offered to a model (refused only if a tool allows it).
    problems: dict[str, str] = field(default_factory=dict)


def tool_name(file: str, operation_id: str | None = None) -> str:
    """The name a model calls a tool by: ``{file}_{operationId}`` (a code tool: its file's name), with
    anything a provider refuses turned into ``_``; a name over 64 characters keeps its start and a
    short hash of the whole, so two long names stay apart."""
    whole = file if operation_id is None else f"{file}_{operation_id}"
    name = _NOT_IN_TOOL_NAME.sub("_", whole)
    if len(name) > 64:
        name = f"{name[:55]}_{hashlib.sha256(whole.encode()).hexdigest()[:8]}"
    return name


def read_spec(text: str) -> Spec | str:
    """The operations an OpenAPI 3 (or Swagger 2) document declares, or why it is not one."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at its line {mark.line + 1}" if mark is not None else ""
        return f"it is not JSON or YAML{where}"
    if not isinstance(document, dict):
        return "it is not an OpenAPI document (not a mapping)"
    if not isinstance(document.get("openapi") or document.get("swagger"), str):
        return "it is not an OpenAPI document (no 'openapi' or 'swagger' version)"
    paths = document.get("paths")
    if not isinstance(paths, dict):
        return "it declares no paths"
    refs = _Refs(document)
    operations: dict[str, Operation] = {}
    problems: dict[str, str] = {}
    for path, item in paths.items():
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict) or not isinstance(operation.get("operationId"), str):
                continue
            operation_id: str = operation["operationId"]
            summary = operation.get("summary") or operation.get("description")
            try:
                parameters, params = _arguments(refs, item.get("parameters"), operation)
            except _Bad as exc:
                problems[operation_id] = str(exc)
                parameters, params = _object({}, []), ()
            operations[operation_id] = Operation(
                operation_id=operation_id,
                method=method.upper(),
                path=str(path),
                summary=summary.strip().split("\n")[0] if isinstance(summary, str) and summary.strip() else None,
                parameters=parameters,
                params=params,
            )
    return Spec(base_url=_base_url(document), operations=operations, problems=problems)


class _Bad(ContentFault):
    """Why one operation cannot be offered to a model."""


class _Refs:
    """Local ``$ref``s (``#/components/…``) resolved against the document."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def target(self, ref: object) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise _Bad(f"it refers to {ref!r}, and only references inside the spec (#/…) are followed")
        node: Any = self.document
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise _Bad(f"its $ref {ref} points at nothing in the spec")
        return node

    def deref(self, node: Any) -> Any:
        """A parameter or request body that is itself a ``$ref`` (a chain of them, not a circle)."""
        seen: list[str] = []
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if ref in seen or len(seen) >= MAX_REFS:
                raise _Bad(f"its $ref {ref} goes around a circle")
            seen.append(ref)
            node = self.target(ref)
        return node

    def schema(self, node: Any, refs: tuple[str, ...] = (), depth: int = 0) -> dict[str, Any]:
        """An OpenAPI schema → JSON Schema a model is given: ``$ref``s inlined, ``nullable`` made a
        type, read-only properties (the API's to fill) and OpenAPI's own words left out."""
        if node is True or node is None:
            return {}
        if node is False:
            return {"not": {}}
        if not isinstance(node, dict):
            raise _Bad(f"a schema is {type(node).__name__}, not a mapping")
        if depth > MAX_DEPTH:
            return {"description": "(nested too deep to describe here)"}
        if "$ref" in node:
            ref = node["$ref"]
            target = self.target(ref)
            name = str(ref).rsplit("/", 1)[-1]
            if ref in refs or len(refs) >= MAX_REFS:
                out: dict[str, Any] = {"description": f"a {name}, shaped as described above"}
                if isinstance(target, dict) and isinstance(target.get("type"), str):
                    out["type"] = target["type"]
                return out
            return self.schema(target, (*refs, ref), depth + 1)
        out = {}
        for key, value in node.items():
            if key in _DROPPED:
                continue
            if key == "properties" and isinstance(value, dict):
                out[key] = {
                    str(name): self.schema(sub, refs, depth + 1)
                    for name, sub in value.items()
                    if not (isinstance(sub, dict) and sub.get("readOnly") is True)
                }
            elif key in _SUBSCHEMAS and isinstance(value, dict):
                out[key] = self.schema(value, refs, depth + 1)
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.schema(sub, refs, depth + 1) for sub in value]
            else:
                out[key] = value
        if "properties" in out and isinstance(out.get("required"), list):
            kept = [name for name in out["required"] if name in out["properties"]]
            if kept:
                out["required"] = kept
            else:
                del out["required"]
        if node.get("nullable") is True and isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        return out


def _arguments(refs: _Refs, shared: object, operation: dict[str, Any]) -> tuple[dict[str, Any], tuple[Param, ...]]:
    """One operation's arguments as a model is offered them, and where each goes."""
    declared: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(shared if isinstance(shared, list) else []), *(operation.get("parameters") or [])]:
        parameter = refs.deref(raw)
        if not isinstance(parameter, dict) or not isinstance(parameter.get("name"), str):
            raise _Bad("it has a parameter without a name")
        declared[parameter["name"], str(parameter.get("in"))] = parameter  # the operation's own wins

    properties: dict[str, Any] = {}
    params: list[Param] = []

    def add(key: str, where: Where, required: bool, schema: dict[str, Any]) -> None:
        name = _NOT_IN_ARGUMENT.sub("_", key)[:64] or "_"
        if name in properties:
            raise _Bad(f"two of its arguments would both be called '{name}'")
        properties[name] = schema
        params.append(Param(name=name, key=key, where=where, required=required))

    body: tuple[Any, bool, str | None] | None = None
    for (key, where), parameter in declared.items():
        required = where == "path" or parameter.get("required") is True
        description = parameter.get("description")
        if where == "body":  # Swagger 2
            body = (parameter.get("schema"), required, description if isinstance(description, str) else None)
            continue
        place = _PLACES.get(where)
        if place is None:
            if required:
                raise _Bad(f"it needs a {where} parameter '{key}', and only path, query and header ones are sent")
            continue  # an optional cookie or form field is simply not offered
        if "schema" in parameter:
            schema = refs.schema(parameter["schema"])
        elif isinstance(parameter.get("content"), dict) and parameter["content"]:
            schema = refs.schema(next(iter(parameter["content"].values())).get("schema"))
        else:
            schema = refs.schema({k: parameter[k] for k in _SWAGGER_SCHEMA_KEYS if k in parameter})
        if isinstance(description, str) and description.strip() and "description" not in schema:
            schema = {"description": description.strip(), **schema}
        add(key, place, required, schema)

    request = refs.deref(operation.get("requestBody"))
    if isinstance(request, dict):
        body = _json_body(request)
    if body is not None:
        raw, required, description = body
        schema = refs.schema(raw)
        fields = schema.get("properties")
        flat = (
            schema.get("type", "object") == "object"
            and isinstance(fields, dict)
            and fields
            and not any(key in schema for key in (*_SCHEMA_LISTS, "additionalProperties", "not"))
            and not any(_NOT_IN_ARGUMENT.sub("_", str(key))[:64] in properties for key in fields)
        )
        if flat:
            assert isinstance(fields, dict)
            needed = set(schema.get("required") or ())
            for key, sub in fields.items():
                add(str(key), "field", required and key in needed, sub)
        else:
            if description and "description" not in schema:
                schema = {"description": description, **schema}
            add("body", "body", required, schema)
    return _object(properties, [p.name for p in params if p.required]), tuple(params)


def _json_body(request: dict[str, Any]) -> tuple[Any, bool, str | None] | None:
    required = request.get("required") is True
    content = request.get("content")
    description = request.get("description")
    said = description.strip() if isinstance(description, str) and description.strip() else None
    if not isinstance(content, dict) or not content:
        return None
    for media, entry in content.items():
        kind = str(media).split(";")[0].strip().lower()
        if kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json")):
            return (entry.get("schema") if isinstance(entry, dict) else None), required, said
    if required:
        raise _Bad(f"its request body is {', '.join(map(str, content))}, and only JSON bodies are sent")
    return None


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _base_url(document: dict[str, object]) -> str | None:
    servers = document.get("servers")
    if isinstance(servers, list) and servers and isinstance(servers[0], dict):
        url = servers[0].get("url")
        if not isinstance(url, str):
            return None
        variables = servers[0].get("variables")
        if isinstance(variables, dict):
            for name, variable in variables.items():
                if isinstance(variable, dict) and "default" in variable:
                    url = url.replace("{" + str(name) + "}", str(variable["default"]))
        return url
    host = document.get("host")
    if isinstance(host, str):
        schemes = document.get("schemes")
        scheme = schemes[0] if isinstance(schemes, list) and schemes and isinstance(schemes[0], str) else "https"
        base = document.get("basePath")
        return f"{scheme}://{host}{base if isinstance(base, str) else ''}"
    return None
