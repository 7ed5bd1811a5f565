"""Who takes a conversation handed to people, and when (pure: plain data and ``now`` in, a decision out).

An inbox may have **office hours** (a time zone, the days, the opening and closing time) and **staff** (Matrix
ids). Inside its hours, with a staff member present (their Matrix presence ``online``), a handoff is **assigned**
to one of them — round-robin among those present: the one routed a conversation longest ago (or never) — and
they are pinged in the conversation's staff thread. Outside its hours, or with nobody present, the conversation
waits ``open`` with a **promise**: when a person will answer (the next opening; "as soon as one is free" inside
hours with nobody present). An inbox with no staff listed routes nothing (as before: whoever reads the staff API
or the staff room takes it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
PRESENT = "online"  # a staff member whose client says they are here; "unavailable" (idle, away) and "offline" are not


@dataclass(frozen=True)
class Hours:
    zone: ZoneInfo
    days: frozenset[int]  # Monday 0 … Sunday 6
    opens: time
    closes: time  # after ``opens``: hours within one day

    def is_open(self, now: datetime) -> bool:
        here = now.astimezone(self.zone)
        return here.weekday() in self.days and self.opens <= here.time().replace(tzinfo=None) < self.closes

    def next_open(self, now: datetime) -> datetime:
        """The next moment it opens after ``now`` (``now`` itself when it is open)."""
        if self.is_open(now):
            return now
        here = now.astimezone(self.zone)
        for ahead in range(8):
            day = (here + timedelta(days=ahead)).date()
            opening = datetime.combine(day, self.opens, tzinfo=self.zone)
            if day.weekday() in self.days and opening > here:
                return opening
        raise ValueError("office hours with no day")  # days is never empty (the config refuses it)


@dataclass(frozen=True)
class Assign:
    staff: str


@dataclass(frozen=True)
class Promise:
    when: datetime | None  # None: inside hours, nobody present — as soon as one is free


def route(*, now: datetime, hours: Hours | None, staff: Sequence[str], presence: Mapping[str, str],
          last_routed: Mapping[str, datetime]) -> Assign | Promise | None:
    """Who takes a handed conversation: a present staff member, a promise, or None (no staff are listed)."""
    if not staff:
        return None
    if hours is not None and not hours.is_open(now):
        return Promise(hours.next_open(now))
    here = [s for s in staff if presence.get(s) == PRESENT]
    if not here:
        return Promise(None)
    # Round-robin: the present one routed longest ago; never routed comes first, then the listed order.
    never = datetime.min.replace(tzinfo=now.tzinfo)
    return Assign(min(here, key=lambda s: (last_routed.get(s, never), staff.index(s))))
