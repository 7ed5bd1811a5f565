"""The schedules a room's admins set with ``!bots schedule`` (``sql/queries/schedules.sql``): each speaks in its
own room on its maker's behalf, its clock kept with the bots' own (``bot_clock``, under ``room:<id>``), started
when it is made. The tick reads them as made schedules (``room_schedules``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.content import Schedule
from engine.run.ticks import MadeSchedule
from engine.store import Store
from engine.store.base import Family, maybe, rows

log = logging.getLogger(__name__)


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


class RoomScheduleTables(Family):
    __slots__ = ()

    async def make(self, *, room_id: str, bot: str, schedule: dict[str, Any], ask: str, made_by: str,
                   made_in: str) -> Made | None:
        """A room schedule with its clock started now; None when line ``made_in`` made one already."""
        return maybe(Made, await self._one("insert_room_schedule", room_id, bot, schedule, ask, made_by, made_in))

    async def count_in(self, room_id: str) -> int:
        return int(await self._value("count_room_schedules", room_id))

    async def in_room(self, room_id: str) -> list[RoomScheduleRow]:
        return rows(RoomScheduleRow, await self._all("room_schedules_here", room_id))

    async def unschedule(self, schedule_id: int, room_id: str) -> bool:
        """Remove room schedule ``schedule_id`` (and its clock) from ``room_id``; False when there is none."""
        return await self._one("delete_room_schedule", schedule_id, room_id) is not None

    async def everywhere(self) -> list[OwedRoomSchedule]:
        return rows(OwedRoomSchedule, await self._all("all_room_schedules"))


async def room_schedules(store: Store) -> list[MadeSchedule]:
    """Every room's schedules, for the tick; one that no longer reads is skipped, out loud."""
    made: list[MadeSchedule] = []
    for row in await store.of(RoomScheduleTables).everywhere():
        try:
            schedule = Schedule.model_validate(row.schedule)
        except ValueError:
            log.exception("room schedule %s no longer reads; skipped", row.id, extra={"room": row.room_id})
            continue
        made.append(MadeSchedule(row.bot, row.trigger, schedule, row.room_id, row.ask, row.made_by))
    return made
