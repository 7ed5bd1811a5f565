"""The desk's staff room (``sql/queries/desk_staff.sql``): each post the desk queued there — a conversation's
thread, a line, a bot's draft — by its outbox transaction id and, once sent, by its event id."""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.base import Family, maybe


@dataclass(frozen=True, slots=True)
class StaffPost:
    txn_id: str
    event_id: str | None
    conversation_id: int
    message_id: int | None
    kind: str


class DeskStaffTables(Family):
    __slots__ = ()

    async def remember(self, txn_id: str, conversation_id: int, message_id: int | None, kind: str) -> bool:
        """False when this post was remembered before (nothing is queued twice)."""
        return await self._value("desk_staff_remember", txn_id, conversation_id, message_id, kind) is not None

    async def thread(self, conversation_id: int) -> str | None:
        txn: str | None = await self._value("desk_staff_thread", conversation_id)
        return txn

    async def by_event(self, event_id: str) -> StaffPost | None:
        return maybe(StaffPost, await self._one("desk_staff_post_by_event", event_id))

    async def of_message(self, message_id: int) -> StaffPost | None:
        return maybe(StaffPost, await self._one("desk_staff_post_of_message", message_id))
