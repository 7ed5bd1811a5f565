"""The desk's outgoing webhooks (``sql/queries/desk_webhooks.sql``): deliveries queued in the commit that made
the change, claimed by the sender, posted, retried with backoff and recorded."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class Delivery:
    id: int
    delivery: UUID
    inbox_id: int
    url: str
    event: str
    conversation_id: int
    message_id: int | None
    body: str
    attempts: int


class DeskWebhookTables(Family):
    __slots__ = ()

    async def enqueue(self, *, inbox_id: int, url: str, body: str, event: str, conversation_id: int,
                      message_id: int | None) -> int:
        return int(await self._value("desk_enqueue_delivery", inbox_id, url, body, event, conversation_id, message_id))

    async def claim(self, batch: int, hide_seconds: float) -> list[Delivery]:
        return rows(Delivery, await self._all("desk_claim_deliveries", batch, hide_seconds))

    async def delivered(self, delivery_id: int, status: int) -> None:
        await self._run("desk_delivered", delivery_id, status)

    async def retry(self, delivery_id: int, status: int | None, error: str, after_seconds: float) -> None:
        await self._run("desk_delivery_retry", delivery_id, status, error, after_seconds)

    async def failed(self, delivery_id: int, status: int | None, error: str) -> None:
        await self._run("desk_delivery_failed", delivery_id, status, error)

    async def next_due(self) -> float | None:
        seconds = await self._value("desk_next_delivery_due")
        return None if seconds is None else float(seconds)
