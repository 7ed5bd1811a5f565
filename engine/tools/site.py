"""The site's own tools behind one door (``ContentTools`` in ``engine.tools.base``): an OpenAPI tool's
operation through ``OpenAPITools``, a code tool through ``CodeTools`` (in a process of its own, never this
one). Built by the composition root.

An operation whose tool file names a ``subject:`` parameter is handed the run's subject — the account
``agent_subject_v1`` resolves from the run row (``db``), never anything the model said."""

from __future__ import annotations

import logging
from typing import Any

from engine.content.parts import Tool
from engine.errors import ToolError
from engine.store import Families
from engine.tools.base import RunRef
from engine.tools.code import CodeTools
from engine.tools.openapi import OpenAPITools

log = logging.getLogger(__name__)


class SiteTools:
    def __init__(self, openapi: OpenAPITools, code: CodeTools, *, db: Families | None = None) -> None:
        self.openapi = openapi
        self.code = code
        self.db = db

    async def call(self, tool: Tool, operation: str | None, run: RunRef, arguments: dict[str, Any]) -> str:
        if tool.kind == "module":
            return await self.code.call(tool, run, arguments)
        allowed = next((op for op in tool.allowed if op.operation_id == operation), None)
        if allowed is None:  # the worker maps names from the offered set, so this is a bug, said plainly
            raise ToolError(f"{tool.name} has no operation {operation!r}")
        subject = None
        if any(param.subject for param in allowed.params):
            if self.db is None:
                log.error("tool %s fills its subject from the run, and this worker cannot read runs", tool.name,
                          extra={"run": run.id, "bot": run.bot})
                raise ToolError(f"{tool.name} is not available right now.")
            about = await self.db.people.subject(run.id)
            subject = about.user_id if about is not None else None
        return await self.openapi.call(tool, allowed, arguments, subject=subject)

    async def aclose(self) -> None:
        await self.openapi.aclose()
        self.code.close()
