"""A press on a bot's choices (SPEC §4): a keycap reaction, a poll vote, or the asker replying with the
bare number. (Issue 7: recorded in ``bot_choices`` and taken once; this first cut hears none.)"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import asyncpg

from appservice.matrix.said import Line
from engine.content import Registry
from engine.store.db import Database

# A poll vote, under the stable and the unstable (MSC3381) type.
POLL_RESPONSES = frozenset({"m.poll.response", "org.matrix.msc3381.poll.response"})

Ask = Callable[..., Awaitable[Any]]


class Presses:
    def __init__(self, db: Database, registry: Callable[[], Registry], *, ask: Ask, server_name: str) -> None:
        self.db = db
        self.q = db.q
        self._registry = registry
        self.ask = ask
        self.server_name = server_name

    async def line(self, conn: asyncpg.Connection, line: Line, event: Mapping[str, Any]) -> bool:
        """A bare number answering a bot's offer: True when it was taken as a press (or told it was gone)."""
        return False

    async def reaction(self, conn: asyncpg.Connection, room_id: str, event: Mapping[str, Any]) -> bool:
        """A keycap on a bot's offer: True when it was a press."""
        return False

    async def poll_response(self, conn: asyncpg.Connection, room_id: str, event: Mapping[str, Any]) -> bool:
        """A vote on a bot's poll: True when it was a press."""
        return False
