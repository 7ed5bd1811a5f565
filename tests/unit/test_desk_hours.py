"""Who takes a handoff, and when (``appservice.desk.hours``): office hours in the inbox's time zone, presence,
round-robin among those present."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from appservice.desk.hours import Assign, Hours, Promise, route

DUBLIN = ZoneInfo("Europe/Dublin")
WEEKDAYS = Hours(DUBLIN, frozenset(range(5)), time(9), time(17, 30))
STAFF = ["@sam:x", "@kim:x", "@lee:x"]
# Wednesday 2 December 2026, 10:00 in Dublin (GMT in winter: 10:00 UTC).
WEDNESDAY = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def test_open_and_closed_are_read_in_the_inboxes_time_zone() -> None:
    assert WEEKDAYS.is_open(WEDNESDAY)
    assert not WEEKDAYS.is_open(WEDNESDAY.replace(hour=8, minute=59))
    assert not WEEKDAYS.is_open(WEDNESDAY.replace(hour=17, minute=30))
    summer = Hours(DUBLIN, frozenset(range(5)), time(9), time(17, 30))
    # 1 July (IST, UTC+1): 08:30 UTC is 09:30 in Dublin — open.
    assert summer.is_open(datetime(2026, 7, 1, 8, 30, tzinfo=UTC))


def test_the_next_opening_skips_the_weekend() -> None:
    friday_evening = datetime(2026, 12, 4, 18, 0, tzinfo=UTC)
    assert WEEKDAYS.next_open(friday_evening) == datetime(2026, 12, 7, 9, 0, tzinfo=DUBLIN)
    early = WEDNESDAY.replace(hour=7)
    assert WEEKDAYS.next_open(early) == datetime(2026, 12, 2, 9, 0, tzinfo=DUBLIN)


def test_outside_hours_the_contact_is_promised_the_next_opening() -> None:
    saturday = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    decided = route(now=saturday, hours=WEEKDAYS, staff=STAFF, presence=dict.fromkeys(STAFF, "online"),
                    last_routed={})
    assert decided == Promise(datetime(2026, 12, 7, 9, 0, tzinfo=DUBLIN))


def test_inside_hours_with_nobody_online_it_is_as_soon_as_one_is_free() -> None:
    presence = {"@sam:x": "offline", "@kim:x": "unavailable"}  # away is not here; lee said nothing
    assert route(now=WEDNESDAY, hours=WEEKDAYS, staff=STAFF, presence=presence, last_routed={}) == Promise(None)


def test_the_present_staff_member_routed_longest_ago_takes_it() -> None:
    presence = {"@sam:x": "online", "@kim:x": "offline", "@lee:x": "online"}
    assert route(now=WEDNESDAY, hours=WEEKDAYS, staff=STAFF, presence=presence, last_routed={}) == Assign("@sam:x")
    last = {"@sam:x": WEDNESDAY - timedelta(minutes=1)}
    assert route(now=WEDNESDAY, hours=WEEKDAYS, staff=STAFF, presence=presence, last_routed=last) == Assign("@lee:x")
    last = {"@sam:x": WEDNESDAY - timedelta(minutes=1), "@lee:x": WEDNESDAY - timedelta(minutes=5)}
    assert route(now=WEDNESDAY, hours=WEEKDAYS, staff=STAFF, presence=presence, last_routed=last) == Assign("@lee:x")


def test_no_hours_is_always_open_and_no_staff_routes_nothing() -> None:
    night = WEDNESDAY.replace(hour=3)
    assert route(now=night, hours=None, staff=STAFF, presence={"@kim:x": "online"}, last_routed={}) == Assign("@kim:x")
    assert route(now=night, hours=WEEKDAYS, staff=[], presence={}, last_routed={}) is None
