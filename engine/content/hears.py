"""What wakes a bot (``hears:``): a mention, a schedule, an event, or a word a surface adds — each refused at compile time
unless the system would act on it, because a file that says ``hears: schedule`` and means nothing is
worse than one that says nothing (SPEC §3, §6).

The schedule is only parsed and checked here; when it fires is ``engine.content.schedule`` (another job).
Which time zones exist and which site events a deployment posts are handed in through the
validation context (``zones``, ``site_events``), so the compile itself reads nothing.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Collection, Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    Discriminator,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictInt,
    Tag,
    ValidationInfo,
    model_validator,
)

from engine.content.base import Strict, Text, unique

TRIGGERS = ("mention", "schedule", "event")
# Triggers written as a bare word: somebody names it. A surface may add its own (``engine.content.kinds``:
# a word the compile is told in its context as ``triggers``), each waking a bot on that surface.
PLAIN_TRIGGERS = ("mention",)
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Events a surface raises are its own (``engine.content.kinds``: a Kind's ``events``, told the compile in its
# context as ``events``, by what the author calls the surface). A site's own events (posted to the inbound
# webhook) are written ``site.<name>``: the prefix is what lets a typo in a surface's event be refused rather
# than becoming a site event that never comes.
# Events SPEC §6 names that nothing raises yet: refused by name until something does, so a bot that
# says it wakes on one is not published to wait forever. (None now.)
NOT_RAISED: tuple[str, ...] = ()
SITE_PREFIX = "site."
_SITE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*(?:\.[a-z0-9][a-z0-9_-]*)*")
_EVERY = re.compile(r"(day|week|month)|([1-9][0-9]*) +(minutes?|hours?)")
_AT = re.compile(r"([01][0-9]|2[0-3]):[0-5][0-9]")
_ROOM = re.compile(r"[!#][^:\s]+:[A-Za-z0-9.\-\[\]]+(?::[0-9]+)?")
# A tag pydantic puts into an error's location; ``explain`` drops the ones that start with "~".
TAG = "~"


@functools.cache
def system_zones() -> frozenset[str]:
    """The IANA zones this Python knows: the default when the caller hands in none."""
    return frozenset(zoneinfo.available_timezones())


def _every(value: object) -> str:
    if not isinstance(value, str) or not _EVERY.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not how often (day, week, month, 'N minutes' or 'N hours')")
    return re.sub(r" +", " ", value.strip())


def _at(value: object) -> str:
    if not isinstance(value, str) or not _AT.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not a time of day: write it in quotes, like '08:00'")
    return value.strip()


def _weekdays(value: object) -> tuple[str, ...]:
    days = (value,) if isinstance(value, str) else value
    if not isinstance(days, list | tuple) or not days:
        raise ValueError(f"{value!r} is not a list of days of the week, like [monday, friday]")
    for day in days:
        if day not in WEEKDAYS:
            raise ValueError(f"'{day}' is not a day of the week ({', '.join(WEEKDAYS)})")
    return unique(tuple(days))


def _zone(value: object, info: ValidationInfo) -> str:
    context = info.context if isinstance(info.context, dict) else {}
    zones: Collection[str] = context.get("zones") or system_zones()
    if not isinstance(value, str) or value not in zones:
        raise ValueError(f"{value!r} is not an IANA time zone (like Europe/Dublin or UTC)")
    return value


def _day(value: object) -> dt.date:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError(f"a date is written 2025-12-25, not {value!r}")


def _days(value: object) -> tuple[dt.date, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    return unique(tuple(_day(item) for item in items))


def _room(value: object) -> str:
    if not isinstance(value, str) or not _ROOM.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not a room: write its id '!id:server' or an alias '#name:server'")
    return value.strip()


def _event(value: object, info: ValidationInfo) -> str:
    context = info.context if isinstance(info.context, dict) else {}
    declared: Collection[str] | None = context.get("site_events")
    raised: Mapping[str, tuple[str, ...]] = context.get("events") or {}
    shown = "; ".join(f"{called} events: {', '.join(names)}" for called, names in raised.items()) or "no surface raises any"
    name = value.strip() if isinstance(value, str) else value
    if any(name in names for names in raised.values()):
        return str(name)
    if name in NOT_RAISED:
        raise ValueError(
            f"'{name}' is not raised yet, so nothing would ever wake the bot ({shown};"
            " a site's own events are written site.<name>)"
        )
    if isinstance(name, str) and name.startswith(SITE_PREFIX) and _SITE_NAME.fullmatch(name[len(SITE_PREFIX):]):
        if declared is None or name in declared:
            return name
        known = ", ".join(sorted(declared)) or "none"
        raise ValueError(f"'{name}' is not a site event this deployment posts (site events: {known})")
    raise ValueError(
        f"unknown event {value!r} ({shown}; a site's own events are written site.<name>, like site.purchase.paid)"
    )


def _iso(day: dt.date) -> str:
    return day.isoformat()


Day = Annotated[dt.date, PlainValidator(_day), PlainSerializer(_iso)]


class Schedule(Strict):
    """``every`` is required; ``at`` and ``on`` narrow it; ``interval`` skips (every 2nd week)."""

    model_config = Strict.model_config | {"validate_by_name": True, "validate_by_alias": True}

    every: Annotated[str, PlainValidator(_every)]
    on: Annotated[tuple[str, ...], PlainValidator(_weekdays), PlainSerializer(list)] = ()
    at: Annotated[str, PlainValidator(_at)] | None = None
    zone: Annotated[str, PlainValidator(_zone)] | None = None
    interval: Annotated[StrictInt, Field(gt=0)] = 1
    until: Day | None = None
    except_: Annotated[tuple[dt.date, ...], PlainValidator(_days), PlainSerializer(lambda v: [_iso(d) for d in v])] = (
        Field(default=(), alias="except")
    )

    @property
    def period(self) -> tuple[int, str]:
        """``(count, unit)``: ``every: 15 minutes`` is ``(15, "minute")``, ``every: week`` ``(1, "week")``."""
        match = _EVERY.fullmatch(self.every)
        assert match is not None
        if match.group(1):
            return 1, match.group(1)
        return int(match.group(2)), match.group(3).rstrip("s")

    @model_validator(mode="after")
    def _fits(self) -> Schedule:
        _, unit = self.period
        if unit in ("minute", "hour"):
            if self.at is not None:
                raise ValueError(f"at: a time of day goes with every: day, week or month, not '{self.every}'")
            if self.interval != 1:
                raise ValueError(f"interval: '{self.every}' already says how often; leave interval out")
        if self.on and unit not in ("day", "week"):
            raise ValueError(f"on: days of the week go with every: day or week, not '{self.every}'")
        return self


class ScheduleTrigger(Strict):
    """``- schedule: {…}`` with ``in:`` (the room it speaks in) and ``ask:`` (what it wakes up to do)."""

    model_config = Strict.model_config | {"validate_by_name": True, "validate_by_alias": True}

    schedule: Schedule
    in_: Annotated[str, PlainValidator(_room)] = Field(alias="in")
    ask: Text

    @model_validator(mode="before")
    @classmethod
    def _complete(cls, data: Any) -> Any:
        if isinstance(data, dict):
            missing = [key for key in ("in", "ask") if key not in data]
            if missing:
                raise ValueError(
                    "a schedule needs in: (the room it speaks in) and ask: (what it wakes up to do);"
                    f" this one has no {' and no '.join(key + ':' for key in missing)}"
                )
        return data


class EventTrigger(Strict):
    """``- event: <name>`` with ``ask:``; it wakes where the event happened, with its facts as context."""

    event: Annotated[str, PlainValidator(_event)]
    ask: Text

    @model_validator(mode="before")
    @classmethod
    def _complete(cls, data: Any) -> Any:
        if isinstance(data, dict) and "ask" not in data:
            raise ValueError("an event needs ask: (what it wakes up to do)")
        return data


def _surfaces_words(info: ValidationInfo) -> tuple[str, ...]:
    context = info.context if isinstance(info.context, dict) else {}
    return tuple(context.get("triggers") or ())


def _mention(value: object, info: ValidationInfo) -> str:
    words = (*PLAIN_TRIGGERS, *_surfaces_words(info))
    if isinstance(value, str) and value in words:
        return value
    if value in ("schedule", "event"):
        raise ValueError(
            f"trigger '{value}' needs its details: write it as a mapping, like"
            f" '- {value}: …' with ask: (and in: for a schedule)"
        )
    raise ValueError(f"unknown trigger {value!r} (known: {', '.join((*TRIGGERS, *_surfaces_words(info)))})")


def _unknown(value: object, info: ValidationInfo) -> EventTrigger:
    known = ", ".join((*TRIGGERS, *_surfaces_words(info)))
    if isinstance(value, dict):
        raise ValueError(f"a trigger names one of {known}, not {', '.join(map(str, value)) or 'nothing'}")
    raise ValueError(f"unknown trigger {value!r} (known: {known})")


def _which(value: Any) -> str:
    if isinstance(value, str):
        return TAG + "mention"
    if isinstance(value, ScheduleTrigger) or (isinstance(value, dict) and "schedule" in value):
        return TAG + "schedule"
    if isinstance(value, EventTrigger) or (isinstance(value, dict) and "event" in value):
        return TAG + "event"
    return TAG + "unknown"


Trigger = Annotated[
    Annotated[str, PlainValidator(_mention), Tag(TAG + "mention")]
    | Annotated[ScheduleTrigger, Tag(TAG + "schedule")]
    | Annotated[EventTrigger, Tag(TAG + "event")]
    # Never a value: this branch only says why a trigger is none of the three.
    | Annotated[EventTrigger, PlainValidator(_unknown), Tag(TAG + "unknown")],
    Discriminator(_which),
]


def _once_mentioned(triggers: tuple[Any, ...]) -> tuple[Any, ...]:
    for word in dict.fromkeys(trigger for trigger in triggers if isinstance(trigger, str)):
        if sum(1 for trigger in triggers if trigger == word) > 1:
            raise ValueError(f"'{word}' is listed twice")
    return triggers


Hears = Annotated[tuple[Trigger, ...], AfterValidator(_once_mentioned)]
