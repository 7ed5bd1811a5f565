"""When a schedule fires (SPEC §6): the occurrences of a compiled ``Schedule``, worked out from ``now``
handed in — no clock, no I/O (the tick in ``engine.run.ticks`` keeps the clock and does the firing).

The rule, in the schedule's ``zone`` (UTC when it names none):

- ``every: day | week | month`` fires once on each chosen local date, at ``at`` (midnight when it names
  none). ``every: day`` is every date (``on:`` narrows it to those weekdays); ``every: week`` is the
  ``on:`` days of each chosen week, Monday when it names none; ``every: month`` is the 1st of each
  chosen month — a fixed day, not the day the clock started, so a lost or restarted clock never moves it.
- ``interval: N`` keeps every Nth day, week or month counted from one fixed anchor, Monday 0001-01-01
  (``date.toordinal() == 1``), not from when the bot first woke: two services, a restart or a rebuilt
  clock all agree on which weeks are "every other". So ``every: week, interval: 2`` fires in the weeks
  whose Monday is an even number of weeks after the anchor (the week of Monday 2026-01-05 is one), and
  ``every: month, interval: 3`` in January, April, July and October.
- ``every: N minutes | N hours`` is elapsed time counted from each local midnight, so ``every: 15
  minutes`` is on the quarter hours and never fires twice or skips across a DST change (the count
  simply restarts at the next midnight; a period that does not divide the day ends it short).
- A local time a DST change skips fires as late as the gap (01:30 on a night clocks jump 01:00→02:00 is
  02:30); a time that happens twice fires the first time.
- ``until`` is the last local date that fires (inclusive); ``except`` dates are local dates that do not.

A schedule whose choices never meet (``every: day, interval: 7, on: [tuesday]`` only ever lands on one
weekday) has no occurrences: ``next_after`` says None rather than searching for ever.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterator

from engine.content import Schedule

_UTC = dt.UTC
_DAY = dt.timedelta(days=1)
_TICK = dt.timedelta(microseconds=1)
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Seven chosen periods in a row cycle a day-interval through every weekday, and each excepted date can
# spoil at most one period that would fire: looking further ahead than this finds nothing new.
_CYCLE = 7


def last_between(schedule: Schedule, since: dt.datetime, now: dt.datetime) -> dt.datetime | None:
    """The last occurrence ``t`` with ``since < t <= now`` (in UTC), or None when nothing is owed.

    Only the last: a service down for a week fires once, not seven times."""
    _aware(since, "since")
    _aware(now, "now")
    if now <= since:
        return None
    zone = _zone(schedule)
    count, unit = schedule.period
    interval = schedule.interval
    last_day = now.astimezone(zone).date()
    if schedule.until is not None:
        last_day = min(last_day, schedule.until)
    period = _period_of(unit, last_day)
    period -= period % interval
    while period >= 0:
        days = [d for d in _dates_in(schedule, unit, period) if d <= last_day and d not in schedule.except_]
        for day in reversed(days):
            t = _latest_on(schedule, zone, count, unit, day, now)
            if t is None:
                continue
            return t if t > since else None
        if _start_of(_first_day(unit, period), zone) <= since:
            return None
        period -= interval
    return None


def next_after(schedule: Schedule, after: dt.datetime) -> dt.datetime | None:
    """The first occurrence strictly after ``after`` (in UTC), or None when the schedule is over."""
    _aware(after, "after")
    zone = _zone(schedule)
    count, unit = schedule.period
    interval = schedule.interval
    period = _period_of(unit, after.astimezone(zone).date())
    period -= period % interval
    for _ in range(_CYCLE * (len(schedule.except_) + 2)):
        if schedule.until is not None and _first_day(unit, period) > schedule.until:
            return None
        for day in _dates_in(schedule, unit, period):
            if day in schedule.except_ or (schedule.until is not None and day > schedule.until):
                continue
            t = _earliest_on(schedule, zone, count, unit, day, after)
            if t is not None:
                return t
        period += interval
    return None


def occurrences(schedule: Schedule, since: dt.datetime, now: dt.datetime) -> Iterator[dt.datetime]:
    """Every occurrence ``t`` with ``since < t <= now``, oldest first (for explaining a schedule; the
    tick only ever fires ``last_between``)."""
    _aware(now, "now")
    t = next_after(schedule, since)
    while t is not None and t <= now:
        yield t
        t = next_after(schedule, t)


def _aware(moment: dt.datetime, name: str) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{name} must be an aware datetime (a naive one says no time zone), not {moment!r}")


def _zone(schedule: Schedule) -> dt.tzinfo:
    return zoneinfo.ZoneInfo(schedule.zone) if schedule.zone else _UTC


def _period_of(unit: str, day: dt.date) -> int:
    """The index of the day, week or month holding ``day``, counted from Monday 0001-01-01."""
    if unit == "week":
        return (day.toordinal() - 1) // 7
    if unit == "month":
        return (day.year - 1) * 12 + day.month - 1
    return day.toordinal() - 1


def _first_day(unit: str, period: int) -> dt.date:
    if unit == "week":
        return dt.date.fromordinal(period * 7 + 1)
    if unit == "month":
        return dt.date(period // 12 + 1, period % 12 + 1, 1)
    return dt.date.fromordinal(period + 1)


def _dates_in(schedule: Schedule, unit: str, period: int) -> list[dt.date]:
    """The local dates of one chosen period that the schedule fires on, oldest first."""
    first = _first_day(unit, period)
    if unit == "week":
        offsets = sorted(_WEEKDAYS.index(day) for day in schedule.on or ("monday",))
        return [first + dt.timedelta(days=offset) for offset in offsets]
    if unit == "day" and schedule.on and _WEEKDAYS[first.weekday()] not in schedule.on:
        return []
    return [first]


def _start_of(day: dt.date, zone: dt.tzinfo) -> dt.datetime:
    """The first instant of a local date (a midnight a DST change skips resolves to the change)."""
    return _instant(day, dt.time(0, 0), zone)


def _instant(day: dt.date, at: dt.time, zone: dt.tzinfo) -> dt.datetime:
    # fold=0: a skipped wall time is read with the offset before the change (so it lands as late as
    # the gap), and a repeated one is its first passing.
    return dt.datetime.combine(day, at, tzinfo=zone).astimezone(_UTC)


def _at(schedule: Schedule) -> dt.time:
    if schedule.at is None:
        return dt.time(0, 0)
    hours, minutes = schedule.at.split(":")
    return dt.time(int(hours), int(minutes))


def _step(count: int, unit: str) -> dt.timedelta:
    return dt.timedelta(hours=count) if unit == "hour" else dt.timedelta(minutes=count)


def _latest_on(
    schedule: Schedule, zone: dt.tzinfo, count: int, unit: str, day: dt.date, now: dt.datetime,
) -> dt.datetime | None:
    """The last occurrence on a local date that is not after ``now``."""
    if unit in ("day", "week", "month"):
        t = _instant(day, _at(schedule), zone)
        return t if t <= now else None
    start = _start_of(day, zone)
    latest = min(now, _start_of(day + _DAY, zone) - _TICK)
    if latest < start:
        return None
    step = _step(count, unit)
    return start + step * ((latest - start) // step)


def _earliest_on(
    schedule: Schedule, zone: dt.tzinfo, count: int, unit: str, day: dt.date, after: dt.datetime,
) -> dt.datetime | None:
    """The first occurrence on a local date that is after ``after``."""
    if unit in ("day", "week", "month"):
        t = _instant(day, _at(schedule), zone)
        return t if t > after else None
    start = _start_of(day, zone)
    step = _step(count, unit)
    t = start if after < start else start + step * ((after - start) // step + 1)
    return t if t < _start_of(day + _DAY, zone) else None
