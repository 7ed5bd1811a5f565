"""When a member bot's edition is owed, and how failures stretch an interval (capped at a day) but never
move a daily bot's day. Pure."""

from __future__ import annotations

import datetime as dt

from appservice.members.charter import AtSchedule, EverySchedule, read_charter
from appservice.members.schedule import next_edition, owed, step

T0 = dt.datetime(2026, 12, 1, 6, 0, tzinfo=dt.UTC)


def every(text: str) -> EverySchedule:
    c = read_charter({"name": "N", "schedule": {"every": text}, "prompt": "p", "owner": "@a:x", "author": "@a:x"})
    assert isinstance(c.schedule, EverySchedule)
    return c.schedule


def test_an_interval_is_owed_once_it_has_passed_and_only_the_last() -> None:
    s = every("30 minutes")
    assert owed(s, T0, 0, T0 + dt.timedelta(minutes=29)) is None
    assert owed(s, T0, 0, T0 + dt.timedelta(minutes=30)) == T0 + dt.timedelta(minutes=30)
    # Down for a day: one edition, not forty-eight.
    assert owed(s, T0, 0, T0 + dt.timedelta(hours=24, minutes=5)) == T0 + dt.timedelta(hours=24)


def test_failures_stretch_an_interval_two_four_eight_times_capped_at_a_day() -> None:
    s = every("2 hours")
    assert [step(s, n) / dt.timedelta(hours=1) for n in range(6)] == [2, 4, 8, 16, 24, 24]
    assert owed(s, T0, 1, T0 + dt.timedelta(hours=3)) is None
    assert owed(s, T0, 1, T0 + dt.timedelta(hours=4)) == T0 + dt.timedelta(hours=4)


def test_a_daily_bot_keeps_its_day_whatever_fails() -> None:
    s = AtSchedule(at="08:00", tz="Europe/Dublin")
    due = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)  # Dublin is on UTC in December
    for failures in (0, 1, 5):
        assert owed(s, T0, failures, due - dt.timedelta(minutes=1)) is None
        assert owed(s, T0, failures, due + dt.timedelta(minutes=1)) == due
    assert next_edition(s, due, 3) == due + dt.timedelta(days=1)
    summer = AtSchedule(at="08:00", tz="Europe/Dublin")
    july = dt.datetime(2026, 7, 1, 0, 0, tzinfo=dt.UTC)
    assert next_edition(summer, july, 0) == dt.datetime(2026, 7, 1, 7, 0, tzinfo=dt.UTC)  # IST is UTC+1
