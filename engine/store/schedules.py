"""Schedules and their clocks: a bot's own (``bot_clock``) and those a room's admins set
(``sql/queries/schedules.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store.base import Family, maybe, rows


@dataclass(frozen=True, slots=True)
class ScheduleClock:
    last_fired_at: datetime
    started_at: datetime


@dataclass(frozen=True, slots=True)
class Made:
    """A room schedule just made, and the database's now."""

    id: int
    now: datetime


@dataclass(frozen=True, slots=True)
class RoomScheduleRow:
    id: int
    bot: str
    schedule: dict[str, Any]
    ask: str
    made_by: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class OwedRoomSchedule:
    """A room schedule for the tick, with the key its clock is kept under."""

    id: int
    room_id: str
    bot: str
    schedule: dict[str, Any]
    ask: str
    made_by: str
    trigger: str


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

    async def make_in_room(self, *, room_id: str, bot: str, schedule: dict[str, Any], ask: str, made_by: str,
                           made_in: str) -> Made | None:
        """A room schedule with its clock started now; None when line ``made_in`` made one already."""
        return maybe(Made, await self._one("insert_room_schedule", room_id, bot, schedule, ask, made_by, made_in))

    async def count_in_room(self, room_id: str) -> int:
        return int(await self._value("count_room_schedules", room_id))

    async def in_room(self, room_id: str) -> list[RoomScheduleRow]:
        return rows(RoomScheduleRow, await self._all("room_schedules_here", room_id))

    async def unschedule(self, schedule_id: int, room_id: str) -> bool:
        """Remove room schedule ``schedule_id`` (and its clock) from ``room_id``; False when there is none."""
        return await self._one("delete_room_schedule", schedule_id, room_id) is not None

    async def all_in_rooms(self) -> list[OwedRoomSchedule]:
        return rows(OwedRoomSchedule, await self._all("all_room_schedules"))
