"""Membership work for the homeserver, remembered until it is done (``sql/queries/room_actions.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.store.base import Family, maybe


@dataclass(frozen=True, slots=True)
class RoomAction:
    id: int
    action: Any


class RoomActions(Family):
    __slots__ = ()

    async def remember(self, room_id: str, action: dict[str, Any], first_try_seconds: float) -> int:
        """Remember an action; it is due for a retry only after ``first_try_seconds``."""
        return int(await self._value("remember_room_action", room_id, action, first_try_seconds))

    async def claim(self, hold_seconds: float) -> RoomAction | None:
        """The next due action, held for ``hold_seconds``."""
        return maybe(RoomAction, await self._one("claim_room_action", hold_seconds))

    async def done(self, action_id: int) -> None:
        await self._run("room_action_done", action_id)

    async def failed(self, action_id: int, error: str, *, retry_seconds: float, permanent: bool,
                     max_attempts: int) -> str | None:
        """Record a failure; the action's status after it (``failed`` once given up)."""
        status = await self._value("room_action_failed", action_id, error, retry_seconds, permanent, max_attempts)
        return None if status is None else str(status)

    async def prune(self, keep_seconds: float) -> int:
        return await self._run("prune_room_actions", keep_seconds)
