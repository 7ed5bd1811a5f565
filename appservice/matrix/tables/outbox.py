"""Every message to a surface, queued under a stable transaction id until it is sent (``sql/queries/outbox.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.store.base import Family, maybe, rows


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message taken to be sent."""

    id: int
    txn_id: str
    run_id: int | None
    room_id: str
    sender: str
    event_type: str
    content: dict[str, Any]
    attempts: int
    of_txn: str | None


@dataclass(frozen=True, slots=True)
class SentAs:
    """What became of a queued message: its event id once sent, and its status."""

    event_id: str | None
    status: str


class OutboxTables(Family):
    __slots__ = ()

    async def enqueue(self, *, txn_id: str, room_id: str, sender: str, event_type: str, content: dict[str, Any],
                      run_id: int | None = None, of_txn: str | None = None) -> bool:
        """Queue a message (a second enqueue of the same txn id is a no-op: False). With ``of_txn`` it edits,
        redacts or points at the earlier message queued under that id."""
        if of_txn is None:
            queued = await self._value("enqueue_outbox", txn_id, run_id, room_id, sender, event_type, content)
        else:
            queued = await self._value("enqueue_outbox_of", txn_id, run_id, room_id, sender, event_type, content,
                                       of_txn)
        return queued is not None

    async def enqueue_progress(self, *, txn_id: str, run_id: int, room_id: str, sender: str,
                               content: dict[str, Any], of_txn: str | None) -> bool:
        """Queue a run's progress line (or an edit of it) only while the run waits or runs; False otherwise (or
        when ``txn_id`` was queued before)."""
        return await self._value("enqueue_progress", txn_id, run_id, room_id, sender, content, of_txn) is not None

    async def undelivered(self, run_id: int, reason: str) -> bool:
        """Say on run ``run_id`` that its answer could not be delivered (a step of its own); False when it said
        so already."""
        return await self._value("outbox_undelivered_step", run_id, reason) is not None

    async def claim(self, batch: int, hide_seconds: float) -> list[Outgoing]:
        return rows(Outgoing, await self._all("claim_outbox", batch, hide_seconds))

    async def claim_these(self, txn_ids: list[str], hide_seconds: float) -> list[Outgoing]:
        """Take the messages queued under ``txn_ids`` that are due and first in their room's order."""
        return rows(Outgoing, await self._all("claim_outbox_these", txn_ids, hide_seconds))

    async def sent(self, outbox_id: int, event_id: str) -> None:
        await self._run("outbox_sent", outbox_id, event_id)

    async def retry(self, outbox_id: int, after_seconds: float, error: str) -> None:
        await self._run("outbox_retry", outbox_id, after_seconds, error)

    async def failed(self, outbox_id: int, error: str) -> None:
        await self._run("outbox_failed", outbox_id, error)

    async def next_due(self) -> float | None:
        """Seconds until the next pending message is due; None when nothing waits."""
        seconds = await self._value("next_outbox_due")
        return None if seconds is None else float(seconds)

    async def sent_as(self, txn_id: str) -> SentAs | None:
        return maybe(SentAs, await self._one("outbox_event_for_txn", txn_id))
