"""Schedules' clocks (``bot_clock``, ``sql/queries/schedules.sql``): a bot's own, and those of the schedules a
surface keeps (made by the people on it), under keys of the surface's choosing."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.base import Family, maybe


@dataclass(frozen=True, slots=True)
class ScheduleClock:
    last_fired_at: datetime
    started_at: datetime


class Schedules(Family):
    __slots__ = ()

    async def now(self) -> datetime:
        """The database's time: the one clock schedules are read against (and every stored time comes from)."""
        now: datetime = await self._value("database_now")
        return now

    async def clock_for_update(self, bot: str, key: str) -> ScheduleClock | None:
        """Lock one schedule's clock for this tick; None when absent, or another tick holds it."""
        return maybe(ScheduleClock, await self._one("clock_for_update", bot, key))

    async def start_clock(self, bot: str, key: str, now: datetime) -> bool:
        """Start a schedule's clock at ``now`` (it never fires for the past); True when this started it."""
        return await self._value("start_clock", bot, key, now) is not None

    async def advance_clock(self, bot: str, key: str, occurrence: datetime) -> None:
        await self._run("advance_clock", bot, key, occurrence)
