"""A site's tools as a model is offered them (pure): each OpenAPI operation a tool allows is one tool
for the model, named ``{file}_{operationId}``; a code tool is one, named by its file. Its words are the
tool file's ``description:`` and the operation's summary — prompt, not documentation — and its
arguments the JSON Schema the compile worked out (``engine.content.openapi``, ``engine.content.code``) —
less the parameter a tool file names as its ``subject:``, which the run fills and the model never sees.
A built-in's own file (``kind: builtin``) is the built-in: it has no schema of its own here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from engine.content.openapi import tool_name
from engine.content.parts import Operation, Tool
from engine.core.messages import ToolSpec

__all__ = ["content_specs", "describe", "model_parameters", "resolve", "tool_name"]


def content_specs(tool: Tool) -> tuple[tuple[ToolSpec, str | None], ...]:
    """Each model-facing tool of one tool file, with the operationId it calls (None: a code tool).
    The schemas are copies: a provider adapter may change what it is handed without touching the
    compiled content."""
    if tool.kind == "builtin":
        return ()
    if tool.kind == "module":
        return ((ToolSpec(tool_name(tool.name), tool.description or tool.doc or "", copy.deepcopy(tool.parameters)), None),)
    return tuple(
        (
            ToolSpec(tool_name(tool.name, op.operation_id), describe(tool, op), model_parameters(op)),
            op.operation_id,
        )
        for op in tool.allowed
    )


def model_parameters(operation: Operation) -> dict[str, Any]:
    """The operation's arguments as the model is offered them: a copy of the compiled schema without the
    parameters the run fills (the subject), so the model can neither see nor name whose data it is."""
    schema = copy.deepcopy(operation.parameters)
    filled = {param.name for param in operation.params if param.subject}
    if not filled:
        return schema
    properties = schema.get("properties")
    if isinstance(properties, dict):
        for name in filled:
            properties.pop(name, None)
    required = schema.get("required")
    if isinstance(required, list):
        kept = [name for name in required if name not in filled]
        if kept:
            schema["required"] = kept
        else:
            del schema["required"]
    return schema


def describe(tool: Tool, operation: Operation) -> str:
    """The tool file's description and the operation's summary; with neither, the operation as the
    API names it (``GET /pets/{id}``), which is at least true."""
    said = [part.strip() for part in (tool.description, operation.summary) if part and part.strip()]
    if not said:
        return f"{operation.method} {operation.path}"
    if len(said) == 2 and said[0][-1] not in ".!?:;":
        said[0] += "."
    return " ".join(said)


def resolve(registry_tools: Mapping[str, Tool], model_name: str) -> tuple[Tool, Operation | None] | None:
    """The tool (and operation) a model meant by the name it called, or None if no content tool has it.
    The worker still refuses any name it did not offer this run; this only maps a name back."""
    for name, tool in registry_tools.items():
        if tool.kind == "builtin":
            continue
        if tool.kind == "module":
            if tool_name(name) == model_name:
                return tool, None
            continue
        for operation in tool.allowed:
            if tool_name(name, operation.operation_id) == model_name:
                return tool, operation
    return None
