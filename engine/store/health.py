"""The deployment's health at a glance: the queue, the outbox, the workers (``sql/queries/health.sql``).
Read by ``summon status`` and by /metrics at every scrape, so it is one statement over partial indexes."""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.base import Family, row


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What waits and who works, as the database sees it now (ages in seconds; None when nothing waits)."""

    queued: int
    oldest_queued_seconds: float | None
    running: int
    outbox_pending: int
    oldest_unsent_seconds: float | None
    workers_alive: int
    workers_usable: int
    # What the freshest heartbeat answers with (``live``, ``stand-in: chosen``, ``no provider: no key``);
    # None when no worker beats at all.
    provider_mode: str | None


class Health(Family):
    __slots__ = ()

    async def snapshot(self, liveness_seconds: float) -> Snapshot:
        """The queue, the outbox and the workers that beat within ``liveness_seconds``."""
        return row(Snapshot, await self._one("health_snapshot", liveness_seconds))
