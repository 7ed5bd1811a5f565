"""When a schedule fires (engine.content.schedule): pure, from ``now`` handed in."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from engine.content import Schedule
from engine.content.schedule import last_between, next_after, occurrences

UTC = dt.UTC


def rule(**fields: Any) -> Schedule:
    return Schedule.model_validate(fields)


def at(text: str) -> dt.datetime:
    """An instant written in UTC: '2026-03-29 07:00'."""
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


DAILY_DUBLIN = rule(every="day", at="08:00", zone="Europe/Dublin")


# (schedule, since, now, the last occurrence owed or None)
CASES = [
    pytest.param(DAILY_DUBLIN, "2026-03-28 07:59", "2026-03-28 08:00", "2026-03-28 08:00", id="daily-dublin-winter"),
    # Clocks go forward at 01:00 UTC on 29 March 2026: 08:00 in Dublin is now 07:00 UTC.
    pytest.param(DAILY_DUBLIN, "2026-03-28 08:00", "2026-03-29 07:00", "2026-03-29 07:00", id="daily-dublin-summer"),
    pytest.param(DAILY_DUBLIN, "2026-03-28 08:00", "2026-03-29 06:59", None, id="daily-dublin-not-yet"),
    # ... and back at 01:00 UTC on 25 October 2026.
    pytest.param(DAILY_DUBLIN, "2026-10-24 07:00", "2026-10-25 09:00", "2026-10-25 08:00", id="daily-dublin-autumn"),
    pytest.param(rule(every="week", on=["monday"], at="08:00"), "2026-01-05 08:00", "2026-01-12 07:59", None,
                 id="weekly-not-yet"),
    pytest.param(rule(every="week", on=["monday"], at="08:00"), "2026-01-05 08:00", "2026-01-14 12:00",
                 "2026-01-12 08:00", id="weekly-monday"),
    pytest.param(rule(every="week", at="09:30"), "2026-01-01 00:00", "2026-01-11 00:00", "2026-01-05 09:30",
                 id="weekly-defaults-to-monday"),
    pytest.param(rule(every="15 minutes"), "2026-01-01 10:00", "2026-01-01 10:14", None, id="15-minutes-not-yet"),
    pytest.param(rule(every="15 minutes"), "2026-01-01 10:00", "2026-01-01 10:44", "2026-01-01 10:30",
                 id="15-minutes"),
    pytest.param(rule(every="2 hours"), "2026-01-01 10:00", "2026-01-01 13:59", "2026-01-01 12:00", id="2-hours"),
    # Counted from each local midnight: midnight in Kolkata is 18:30 UTC.
    pytest.param(rule(every="2 hours", zone="Asia/Kolkata"), "2026-01-01 10:00", "2026-01-01 13:00",
                 "2026-01-01 12:30", id="2-hours-local"),
    # Every month is on the 1st.
    pytest.param(rule(every="month", at="09:00"), "2026-01-01 09:00", "2026-02-15 00:00", "2026-02-01 09:00",
                 id="monthly-on-the-1st"),
    pytest.param(rule(every="month", at="09:00"), "2026-02-01 09:00", "2026-02-28 23:59", None,
                 id="monthly-nothing-owed"),
    # Every other month from January: January, March, May...
    pytest.param(rule(every="month", interval=2), "2026-01-01 00:00", "2026-04-30 00:00", "2026-03-01 00:00",
                 id="every-other-month"),
    # Every other week: weeks counted from Monday 0001-01-01; the week of Monday 5 January 2026 is one.
    pytest.param(rule(every="week", interval=2, on=["monday"], at="08:00"), "2026-01-05 08:00",
                 "2026-01-18 23:59", None, id="every-other-week-skips"),
    pytest.param(rule(every="week", interval=2, on=["monday"], at="08:00"), "2026-01-05 08:00",
                 "2026-01-19 08:00", "2026-01-19 08:00", id="every-other-week-fires"),
    pytest.param(rule(every="day", until="2026-01-10", at="08:00"), "2026-01-09 00:00", "2026-01-20 00:00",
                 "2026-01-10 08:00", id="until-is-the-last-day"),
    pytest.param(rule(every="day", until="2026-01-10", at="08:00"), "2026-01-10 08:00", "2026-01-20 00:00", None,
                 id="until-then-nothing"),
    pytest.param(rule(every="day", at="08:00", **{"except": ["2026-12-25"]}), "2026-12-24 08:00",
                 "2026-12-25 23:00", None, id="except-a-date"),
    pytest.param(rule(every="day", at="08:00", **{"except": ["2026-12-25"]}), "2026-12-24 07:00",
                 "2026-12-25 23:00", "2026-12-24 08:00", id="except-falls-back-to-the-day-before"),
    pytest.param(rule(every="day", on=["saturday", "sunday"], at="10:00"), "2026-01-09 00:00",
                 "2026-01-12 12:00", "2026-01-11 10:00", id="day-on-weekends"),
    # Exclusive at since (already fired), inclusive at now.
    pytest.param(DAILY_DUBLIN, "2026-01-05 08:00", "2026-01-05 08:00", None, id="since-equals-now"),
    pytest.param(DAILY_DUBLIN, "2026-01-05 08:00", "2026-01-06 07:59", None, id="since-is-the-occurrence"),
    pytest.param(DAILY_DUBLIN, "2026-01-05 08:00", "2026-01-05 08:00:30", None, id="nothing-owed"),
    # A week down says good morning once: the last one.
    pytest.param(DAILY_DUBLIN, "2026-01-05 08:00", "2026-01-12 09:00", "2026-01-12 08:00", id="a-week-down"),
]


@pytest.mark.parametrize(("schedule", "since", "now", "owed"), CASES)
def test_last_between(schedule: Schedule, since: str, now: str, owed: str | None) -> None:
    assert last_between(schedule, at(since), at(now)) == (at(owed) if owed else None)


def test_a_week_down_is_seven_occurrences_of_which_one_is_owed() -> None:
    missed = list(occurrences(DAILY_DUBLIN, at("2026-01-05 08:00"), at("2026-01-12 09:00")))
    assert missed == [at(f"2026-01-{day:02d} 08:00") for day in range(6, 13)]
    assert last_between(DAILY_DUBLIN, at("2026-01-05 08:00"), at("2026-01-12 09:00")) == missed[-1]


def test_daily_in_dublin_is_eight_local_across_the_spring_change() -> None:
    fired = list(occurrences(DAILY_DUBLIN, at("2026-03-27 00:00"), at("2026-03-31 00:00")))
    assert fired == [at("2026-03-27 08:00"), at("2026-03-28 08:00"), at("2026-03-29 07:00"), at("2026-03-30 07:00")]
    assert {t.astimezone(ZoneInfo("Europe/Dublin")).strftime("%H:%M") for t in fired} == {"08:00"}


def test_a_time_the_clocks_skip_fires_as_late_as_the_gap() -> None:
    # In Dublin 01:00-02:00 does not exist on 29 March 2026; 01:30 fires at 02:30 local (01:30 UTC).
    nightly = rule(every="day", at="01:30", zone="Europe/Dublin")
    assert next_after(nightly, at("2026-03-28 12:00")) == at("2026-03-29 01:30")
    # ... and a time that happens twice (01:30 on 25 October) fires the first time only.
    assert list(occurrences(nightly, at("2026-10-24 12:00"), at("2026-10-25 12:00"))) == [at("2026-10-25 00:30")]


def test_every_15_minutes_neither_skips_nor_repeats_across_a_change() -> None:
    quarter = rule(every="15 minutes", zone="Europe/Dublin")
    fired = list(occurrences(quarter, at("2026-10-24 23:00"), at("2026-10-25 03:00")))
    assert len(fired) == 16
    assert all(later - earlier == dt.timedelta(minutes=15) for earlier, later in itertools.pairwise(fired))


def test_every_7_minutes_restarts_at_midnight() -> None:
    sevens = rule(every="7 minutes")
    assert list(occurrences(sevens, at("2026-01-01 23:50"), at("2026-01-02 00:08"))) == [
        at("2026-01-01 23:55"), at("2026-01-02 00:00"), at("2026-01-02 00:07"),
    ]


def test_next_after() -> None:
    weekly = rule(every="week", on=["friday", "monday"], at="08:00")
    assert next_after(weekly, at("2026-01-05 08:00")) == at("2026-01-09 08:00")
    assert next_after(weekly, at("2026-01-05 07:59")) == at("2026-01-05 08:00")
    assert next_after(weekly, at("2026-01-09 08:00")) == at("2026-01-12 08:00")
    monthly = rule(every="month", at="09:00", zone="Europe/Dublin")
    assert next_after(monthly, at("2026-06-01 08:00")) == at("2026-07-01 08:00")


def test_next_after_skips_excepted_dates_and_stops_at_until() -> None:
    christmas = rule(every="day", at="08:00", until="2026-12-26", **{"except": ["2026-12-25"]})
    assert next_after(christmas, at("2026-12-24 08:00")) == at("2026-12-26 08:00")
    assert next_after(christmas, at("2026-12-26 08:00")) is None


def test_a_schedule_whose_choices_never_meet_has_no_occurrence() -> None:
    # Every 7th day is always the same weekday (a Monday, counted from Monday 0001-01-01).
    never = rule(every="day", interval=7, on=["tuesday"])
    assert next_after(never, at("2026-01-01 00:00")) is None
    assert last_between(never, at("2025-01-01 00:00"), at("2026-01-01 00:00")) is None
    mondays = rule(every="day", interval=7, on=["monday"])
    assert next_after(mondays, at("2026-01-01 00:00")) == at("2026-01-05 00:00")


def test_every_other_week_is_the_same_weeks_whenever_you_ask() -> None:
    fortnightly = rule(every="week", interval=2, on=["wednesday"])
    from_january = list(occurrences(fortnightly, at("2026-01-01 00:00"), at("2026-03-01 00:00")))
    from_february = list(occurrences(fortnightly, at("2026-02-01 00:00"), at("2026-03-01 00:00")))
    assert from_january[0] == at("2026-01-07 00:00")
    assert all(b - a == dt.timedelta(weeks=2) for a, b in itertools.pairwise(from_january))
    assert from_february == [t for t in from_january if t >= at("2026-02-01 00:00")]
    # ISO week numbers would break the rhythm at a 53-week year (2026 has one); the anchor does not.
    across = list(occurrences(fortnightly, at("2026-12-01 00:00"), at("2027-01-31 00:00")))
    assert len(across) >= 4
    assert all(b - a == dt.timedelta(weeks=2) for a, b in itertools.pairwise(across))


def test_last_between_agrees_with_occurrences() -> None:
    schedules = [DAILY_DUBLIN, rule(every="3 hours", zone="America/New_York"),
                 rule(every="week", on=["tuesday", "thursday"], at="17:45", zone="Australia/Sydney", interval=3),
                 rule(every="month", interval=5, at="23:30", zone="Pacific/Auckland")]
    start = at("2026-01-01 00:00")
    for schedule in schedules:
        for hours in range(0, 24 * 400, 37):
            now = start + dt.timedelta(hours=hours)
            since = now - dt.timedelta(days=20)
            every = list(occurrences(schedule, since, now))
            assert last_between(schedule, since, now) == (every[-1] if every else None), (schedule, now)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="aware datetime"):
        last_between(DAILY_DUBLIN, dt.datetime(2026, 1, 1), at("2026-01-02 00:00"))
    with pytest.raises(ValueError, match="aware datetime"):
        next_after(DAILY_DUBLIN, dt.datetime(2026, 1, 1))


def test_every_nth_month_counts_from_january() -> None:
    def months(interval: int) -> list[int]:
        fired = occurrences(rule(every="month", interval=interval), at("2025-12-15 00:00"), at("2026-12-31 00:00"))
        return [t.month for t in fired]

    assert months(1) == list(range(1, 13))
    assert months(2) == [1, 3, 5, 7, 9, 11]
    assert months(3) == [1, 4, 7, 10]


def test_an_excepted_day_falls_back_to_the_last_occurrence_before_it() -> None:
    quarter = rule(every="15 minutes", zone="Europe/Dublin", **{"except": ["2026-07-02"]})
    # 23:45 on 1 July in Dublin (summer) is 22:45 UTC; nothing on 2 July.
    assert last_between(quarter, at("2026-07-01 00:00"), at("2026-07-02 15:00")) == at("2026-07-01 22:45")
    assert next_after(quarter, at("2026-07-01 22:45")) == at("2026-07-02 23:00")
