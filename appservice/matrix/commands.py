"""``!name args`` (or ``/name`` sent through as text): a command from ``content/commands`` (SPEC §5).
(Issue 7: arguments parsed as fields, ``!help``, MSC4332 state; this first cut hears none.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import asyncpg

from appservice.matrix.said import Line
from engine.content import Registry
from engine.store.db import Database

Ask = Callable[..., Awaitable[Any]]


class Commands:
    def __init__(self, db: Database, registry: Callable[[], Registry], *, ask: Ask, server_name: str,
                 service_user: str) -> None:
        self.db = db
        self.q = db.q
        self._registry = registry
        self.ask = ask
        self.server_name = server_name
        self.service_user = service_user

    async def heard(self, conn: asyncpg.Connection, line: Line, event: Mapping[str, Any],
                    followups: list[Any]) -> bool:
        """True when ``line`` was a command (run, or answered with why not)."""
        return False
