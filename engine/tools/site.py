"""The site's own tools behind one door (``ContentTools`` in ``engine.tools.base``): an OpenAPI tool's
operation through ``OpenAPITools``, a code tool through ``CodeTools`` (in a process of its own, never this
one). Built by the composition root."""

from __future__ import annotations

from typing import Any

from engine.content.parts import Tool
from engine.errors import ToolError
from engine.tools.base import RunRef
from engine.tools.code import CodeTools
from engine.tools.openapi import OpenAPITools


class SiteTools:
    def __init__(self, openapi: OpenAPITools, code: CodeTools) -> None:
        self.openapi = openapi
        self.code = code

    async def call(self, tool: Tool, operation: str | None, run: RunRef, arguments: dict[str, Any]) -> str:
        if tool.kind == "module":
            return await self.code.call(tool, run, arguments)
        allowed = next((op for op in tool.allowed if op.operation_id == operation), None)
        if allowed is None:  # the worker maps names from the offered set, so this is a bug, said plainly
            raise ToolError(f"{tool.name} has no operation {operation!r}")
        return await self.openapi.call(tool, allowed, arguments)

    async def aclose(self) -> None:
        await self.openapi.aclose()
        self.code.close()
