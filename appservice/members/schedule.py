"""When a member bot's next edition is owed (SPEC §10), worked out from ``now`` handed in. Pure.

- ``{at, tz}``: once a day at that local time — the house's daily schedule (``engine.content.schedule``), so a
  service down for a week posts once, and a DST change lands as it does for any bot. Failures never move
  it: a daily bot keeps its day.
- ``{every}``: elapsed time since the last edition was attempted. After ``n`` failed editions in a row the
  interval stretches to ``2**n`` times itself (2×, 4×, 8×…), capped at a day, so an outage is not
  hammered; a success puts it back.
"""

from __future__ import annotations

import datetime as dt

from appservice.members.charter import AtSchedule, EverySchedule
from engine.content import Schedule
from engine.content.schedule import last_between, next_after

DAY = dt.timedelta(days=1)


def _daily(schedule: AtSchedule) -> Schedule:
    return Schedule.model_validate({"every": "day", "at": schedule.at, "zone": schedule.tz})


def step(schedule: EverySchedule, failures: int) -> dt.timedelta:
    """How long after the last attempt the next one is owed, stretched by the failures in a row."""
    base = dt.timedelta(seconds=schedule.seconds)
    if failures <= 0:
        return base
    return min(base * (1 << min(failures, 16)), max(DAY, base))


def owed(schedule: AtSchedule | EverySchedule, last: dt.datetime, failures: int, now: dt.datetime) -> dt.datetime | None:
    """The occurrence to fire now (the last one owed since ``last``), or None when nothing is owed."""
    if isinstance(schedule, AtSchedule):
        return last_between(_daily(schedule), last, now)
    gap = step(schedule, failures)
    if now < last + gap:
        return None
    return last + gap * ((now - last) // gap)


def next_edition(schedule: AtSchedule | EverySchedule, last: dt.datetime, failures: int) -> dt.datetime | None:
    """When the next edition is owed after ``last`` (for telling the member)."""
    if isinstance(schedule, AtSchedule):
        return next_after(_daily(schedule), last)
    return last + step(schedule, failures)
