"""Room administration: ``!bots …`` to the service's own user, gated by power level (SPEC §5).
(Issue 7; this first cut hears none.)"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import asyncpg

from appservice.matrix.said import Line
from engine.content import Registry
from engine.store.db import Database


class RoomAdmin:
    def __init__(self, db: Database, registry: Callable[[], Registry], *, server_name: str,
                 service_user: str) -> None:
        self.db = db
        self.q = db.q
        self._registry = registry
        self.server_name = server_name
        self.service_user = service_user

    async def heard(self, conn: asyncpg.Connection, line: Line, event: Mapping[str, Any],
                    followups: list[Any]) -> bool:
        """True when ``line`` was a `!bots …` for the service (carried out, or refused out loud)."""
        return False
