"""Workers' heartbeats: whether anything can answer model calls (``sql/queries/workers.sql``)."""

from __future__ import annotations

from engine.store.base import Family


class Workers(Family):
    __slots__ = ()

    async def beat(self, worker: str, *, usable: bool, mode: str, providers: list[str]) -> None:
        await self._run("record_provider_status", worker, usable, mode, providers)

    async def forget(self, worker: str) -> None:
        await self._run("forget_provider_status", worker)

    async def provider_usable(self, liveness_seconds: float) -> bool:
        """Whether any worker said, within ``liveness_seconds``, that it can answer model calls."""
        return bool(await self._value("provider_usable", liveness_seconds))
