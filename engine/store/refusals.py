"""Refused summonses, kept for the operator (``sql/queries/refusals.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class RefusalRow:
    id: int
    bot: str
    surface: str
    place: str | None
    thread: str | None
    trigger_event: str | None
    asked_by: str | None
    reason: str
    detail: str | None
    created_at: datetime


class Refusals(Family):
    __slots__ = ()

    async def record(self, *, bot: str, surface: str, place: str | None, thread: str | None,
                     trigger_event: str | None, asked_by: str | None, reason: str, detail: str | None) -> None:
        await self._run("record_refusal", bot, surface, place, thread, trigger_event, asked_by, reason, detail)

    async def latest(self, place: str | None, bot: str | None, limit: int) -> list[RefusalRow]:
        return rows(RefusalRow, await self._all("inspect_refusals", place, bot, limit))

    async def prune(self, keep_seconds: float) -> int:
        return await self._run("prune_refusals", keep_seconds)

    async def lately(self, asked_by: str, reason: str, seconds: float) -> int:
        """How many of ``asked_by``'s summonses were refused for ``reason`` in the last ``seconds``, the one
        just recorded in this transaction included."""
        return int(await self._value("refused_lately", asked_by, reason, seconds))
