"""Workers' heartbeats: whether anything can answer model calls (``sql/queries/workers.sql``)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.store.base import Family, row


@dataclass(frozen=True, slots=True)
class ProviderState:
    """Whether anything can answer model calls, and what the freshest heartbeat answers with (``mode``:
    e.g. ``no provider: no key``; None when no worker beats at all)."""

    usable: bool
    mode: str | None


class Workers(Family):
    __slots__ = ()

    async def beat(self, worker: str, *, usable: bool, mode: str, providers: list[str]) -> None:
        await self._run("record_provider_status", worker, usable, mode, providers)

    async def forget(self, worker: str) -> None:
        await self._run("forget_provider_status", worker)

    async def provider_usable(self, liveness_seconds: float) -> bool:
        """Whether any worker said, within ``liveness_seconds``, that it can answer model calls."""
        return bool(await self._value("provider_usable", liveness_seconds))

    async def provider_state(self, liveness_seconds: float) -> ProviderState:
        """``provider_usable``, and when nothing is, why (what the freshest heartbeat said)."""
        return row(ProviderState, await self._one("provider_state", liveness_seconds))
