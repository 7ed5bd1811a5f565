"""What a room's settings (``rooms.settings``, set by its admins with ``!bots …``) mean. Pure: the
stored value and ``now`` in, a decision out.

- ``choices``: ``reactions`` (keycaps, the default) or ``poll`` (a poll).
- ``bots``: the slugs enabled here. Absent = nobody has chosen, and every bot offered in rooms may
  answer; once an admin adds or removes one, only the listed bots answer here.
- ``quiet``: ``{from, to, zone?}`` — quiet hours, in which no bot wakes here by itself (a schedule, an
  event). A person who asks is still answered: quiet hours stop bots speaking unasked, not listening.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

CHOICES_DEFAULT = "reactions"

RoomRefusal = Literal["not_enabled", "quiet"]


@dataclass(frozen=True)
class Quiet:
    """Quiet hours, local to ``zone`` (UTC when None): from ``start`` up to ``end``, across midnight when
    ``end`` is earlier."""

    start: str
    end: str
    zone: str | None = None

    def as_setting(self) -> dict[str, str]:
        return {"from": self.start, "to": self.end, **({"zone": self.zone} if self.zone else {})}

    def __str__(self) -> str:
        return f"{self.start}-{self.end} {self.zone or 'UTC'}"


def choices(settings: Mapping[str, Any]) -> str:
    value = settings.get("choices")
    return value if value in ("reactions", "poll") else CHOICES_DEFAULT


def enabled_bots(settings: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The bots enabled here, or None when nobody has chosen (every offered bot may answer)."""
    value = settings.get("bots")
    if not isinstance(value, list):
        return None
    return tuple(slug for slug in value if isinstance(slug, str))


def enabled(settings: Mapping[str, Any], bot: str) -> bool:
    chosen = enabled_bots(settings)
    return chosen is None or bot in chosen


def with_bot(settings: Mapping[str, Any], bot: str, available: Iterable[str]) -> list[str]:
    """The enabled list once ``bot`` is added (nobody having chosen yet means every available bot was)."""
    chosen = enabled_bots(settings)
    current = list(available) if chosen is None else list(chosen)
    return sorted({*current, bot})


def without_bot(settings: Mapping[str, Any], bot: str, available: Iterable[str]) -> list[str]:
    chosen = enabled_bots(settings)
    current = list(available) if chosen is None else list(chosen)
    return sorted(slug for slug in set(current) if slug != bot)


def quiet(settings: Mapping[str, Any]) -> Quiet | None:
    """The stored quiet hours, or None when there are none (or they are not readable)."""
    value = settings.get("quiet")
    if not isinstance(value, Mapping):
        return None
    start, end, zone = value.get("from"), value.get("to"), value.get("zone")
    if not isinstance(start, str) or not isinstance(end, str):
        return None
    return Quiet(start, end, zone if isinstance(zone, str) else None)


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def is_quiet(hours: Quiet | None, now: dt.datetime) -> bool:
    """Whether ``now`` falls in the quiet hours (``from`` inclusive, ``to`` exclusive)."""
    if hours is None:
        return False
    local = now.astimezone(zoneinfo.ZoneInfo(hours.zone) if hours.zone else dt.UTC)
    minute = local.hour * 60 + local.minute
    start, end = _minutes(hours.start), _minutes(hours.end)
    if start < end:
        return start <= minute < end
    return minute >= start or minute < end


def room_refusal(settings: Mapping[str, Any], bot: str, *, asked: bool, now: dt.datetime) -> RoomRefusal | None:
    """Why this room will not have ``bot`` run here now, or None. ``asked``: a person asked (a run nobody
    asked for — a schedule, an event — also keeps the quiet hours)."""
    if not enabled(settings, bot):
        return "not_enabled"
    if not asked and is_quiet(quiet(settings), now):
        return "quiet"
    return None
