"""Reading an OpenAPI document's operations, so a tool's allow-list is checked when it is compiled:
a bad spec fails the build rather than a run. The text is handed in; fetching it is the caller's."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from engine.content.parts import Operation

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


@dataclass(frozen=True)
class Unavailable:
    """A referenced file or url that could not be read, and why (the caller's words)."""

    reason: str


@dataclass(frozen=True)
class Spec:
    base_url: str | None
    operations: dict[str, Operation]


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
    operations: dict[str, Operation] = {}
    for path, item in paths.items():
        if not isinstance(item, dict):
            continue
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict) or not isinstance(operation.get("operationId"), str):
                continue
            summary = operation.get("summary") or operation.get("description")
            operations[operation["operationId"]] = Operation(
                operation_id=operation["operationId"],
                method=method.upper(),
                path=str(path),
                summary=summary.strip().split("\n")[0] if isinstance(summary, str) and summary.strip() else None,
            )
    return Spec(base_url=_base_url(document), operations=operations)


def _base_url(document: dict[str, object]) -> str | None:
    servers = document.get("servers")
    if isinstance(servers, list) and servers and isinstance(servers[0], dict):
        url = servers[0].get("url")
        return url if isinstance(url, str) else None
    host = document.get("host")
    if isinstance(host, str):
        schemes = document.get("schemes")
        scheme = schemes[0] if isinstance(schemes, list) and schemes and isinstance(schemes[0], str) else "https"
        base = document.get("basePath")
        return f"{scheme}://{host}{base if isinstance(base, str) else ''}"
    return None
