"""The charter as a pydantic model (SPEC §10): what it accepts, and every refusal said as a line the builder
can relay and repair. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.members.charter import (
    Charter,
    CharterRules,
    EverySchedule,
    may_make_for,
    may_overwrite,
    may_remove,
    read_charter,
)

ME = "@alice:localhost"


def charter(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "Morning News", "glyph": "📰", "schedule": {"at": "08:00", "tz": "Europe/Dublin"},
        "prompt": "Fetch today's headlines from each source and write a short digest.",
        "tools": ["fetch", "card"], "allow": ["https://www.rte.ie/feeds/rss/"], "sources": ["rte.ie"],
        "owner": ME, "author": ME,
    }
    base.update(over)
    return base


def refusal(data: dict[str, Any], rules: CharterRules | None = None) -> str:
    with pytest.raises(ValueError) as caught:
        read_charter(data, rules)
    return str(caught.value)


def test_a_daily_charter_reads() -> None:
    c = read_charter(charter(schedule={"at": "8:05", "tz": "Europe/Dublin"}))
    assert c.schedule.model_dump() == {"at": "08:05", "tz": "Europe/Dublin"}
    assert c.max_tool_calls == 6 and c.card is True
    assert c.fetches == ("https://www.rte.ie/feeds/rss/",)


def test_an_interval_charter_reads_and_says_it_in_minutes() -> None:
    c = read_charter(charter(schedule={"every": "2 hours"}))
    assert isinstance(c.schedule, EverySchedule)
    assert c.schedule.seconds == 7200


def test_no_fetch_tool_no_network() -> None:
    assert read_charter(charter(tools=["card"])).fetches == ()


def test_a_schedule_faster_than_the_floor_is_refused_in_words() -> None:
    said = refusal(charter(schedule={"every": "5 minutes"}))
    assert "schedule.every" in said and "more often than this server allows" in said and "15 minutes" in said


def test_a_setting_lowers_the_floor() -> None:
    c = read_charter(charter(schedule={"every": "1 minute"}), CharterRules(floor_seconds=60))
    assert isinstance(c.schedule, EverySchedule) and c.schedule.seconds == 60


@pytest.mark.parametrize(("entry", "words"), [
    ("http://www.rte.ie/feeds/", "not an https address"),
    ("https://127.0.0.1/feed", "not a public address"),
    ("https://10.0.0.8/feed", "a private address"),
    ("https://[::1]/feed", "loopback"),
    ("https://169.254.169.254/latest", "metadata"),
    ("https://localhost/feed", "loopback"),
    ("https://example.org/feed?x=1", "takes no ?query"),
    ("https://user:pw@example.org/", "user name or password"),
    ("ftp://example.org/", "not an https address"),
    ("rte.ie", "not an https address"),
])
def test_an_allow_list_entry_that_is_not_a_public_https_prefix_is_refused(entry: str, words: str) -> None:
    said = refusal(charter(allow=[entry]))
    assert said.startswith("allow") and words in said


def test_loopback_http_only_for_tests() -> None:
    rules = CharterRules(loopback_for_tests=True)
    assert read_charter(charter(allow=["http://127.0.0.1:8123/feed"]), rules).allow == ("http://127.0.0.1:8123/feed",)
    assert "not a public address" in refusal(charter(allow=["https://10.1.1.1/"]), rules)


@pytest.mark.parametrize(("over", "words"), [
    ({"schedule": {"at": "25:00", "tz": "UTC"}}, "schedule.at: '25:00' is not a time of day"),
    ({"schedule": {"at": "08:00", "tz": "Mars/Olympus"}}, "is not a time zone"),
    ({"schedule": {"every": "often"}}, "is not an interval"),
    ({"name": ""}, "name:"),
    ({"glyph": "abc"}, "is not a glyph"),
    ({"tools": ["shell"]}, "tools.0"),
    ({"max_tool_calls": 17}, "max_tool_calls"),
    ({"owner": "alice"}, "is not a Matrix user id"),
    ({"colour": "red"}, "colour: is not part of a charter"),
])
def test_each_mistake_is_one_line_naming_the_field(over: dict[str, Any], words: str) -> None:
    assert words in refusal(charter(**over))


def test_a_missing_prompt_is_said() -> None:
    data = charter()
    del data["prompt"]
    assert refusal(data) == "prompt: is missing"


def test_a_charter_round_trips_through_its_sealable_form() -> None:
    c = read_charter(charter(room_id="!r:localhost"))
    assert read_charter(c.sealable()) == c
    assert isinstance(c, Charter)


def test_ownership_rules() -> None:
    assert may_make_for(ME, ME) and not may_make_for(ME, "@bob:localhost")
    assert may_overwrite(author=ME, owner="@bob:localhost", by=ME)
    assert may_overwrite(author="@bob:localhost", owner=ME, by=ME)
    assert not may_overwrite(author=ME, owner=ME, by="@bob:localhost")
    assert may_remove(author=ME, owner=ME, by="@root:localhost", admin=True)
    assert not may_remove(author=ME, owner=ME, by="@bob:localhost", admin=False)
