"""Membership work for the homeserver, remembered until it is done (``sql/queries/room_actions.sql``): one of the
delivery queues (``engine/run/delivery.py``), claimed and settled as the others are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class RoomAction:
    id: int
    action: Any
    attempts: int


class RoomActionTables(Family):
    __slots__ = ()

    async def remember(self, room_id: str, action: dict[str, Any], first_try_seconds: float) -> int:
        """Remember an action (the caller makes its first attempt at once); it is due for a retry only after
        ``first_try_seconds``."""
        return int(await self._value("remember_room_action", room_id, action, first_try_seconds))

    async def claim(self, batch: int, hide_seconds: float) -> list[RoomAction]:
        """Up to ``batch`` due actions, each held for ``hide_seconds``."""
        return rows(RoomAction, await self._all("claim_room_actions", batch, hide_seconds))

    async def done(self, action_id: int, attempts: int) -> None:
        """Carried out, on attempt ``attempts`` (a finished action is never rewritten)."""
        await self._run("room_action_done", action_id, attempts)

    async def retry(self, action_id: int, after_seconds: float, error: str, attempts: int) -> None:
        await self._run("room_action_retry", action_id, after_seconds, error, attempts)

    async def failed(self, action_id: int, error: str, attempts: int) -> None:
        await self._run("room_action_failed", action_id, error, attempts)

    async def next_due(self) -> float | None:
        """Seconds until the next pending action is due; None when nothing waits."""
        seconds = await self._value("next_room_action_due")
        return None if seconds is None else float(seconds)

    async def prune(self, keep_seconds: float) -> int:
        return await self._run("prune_room_actions", keep_seconds)
