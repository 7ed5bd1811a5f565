"""``!bots …`` parsed (engine.core.admin_words) and what a room's settings mean (engine.core.room_settings): tables."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import pytest

from appservice.matrix.claimers import admin_words as w
from appservice.matrix.power import state_level
from engine.content import Schedule
from engine.core import room_settings as rs

BOTS = {"helper": "Helper", "echo": "Echo"}
ROOT = Path(__file__).resolve().parents[2]


def sched(**fields: object) -> Schedule:
    return Schedule.model_validate(fields)


@pytest.mark.parametrize(("line", "expected"), [
    ("!bots", w.Usage()),
    ("/bots help", w.Usage()),
    ("!bots list", w.ListBots()),
    ("!bots status", w.Status()),
    ("!BOTS LIST", w.ListBots()),
    ("!bots runs", w.Runs()),
    ("!bots spend", w.Spend()),
    ("!bots schedules", w.ListSchedules()),
    ("!bots add helper", w.AddBot("helper")),
    ("!bots add Helper", w.AddBot("helper")),
    ("!bots add @Echo:", w.AddBot("echo")),
    ("!bots remove @bot_echo:localhost", w.RemoveBot("echo")),
    ("!bots set choices poll", w.SetChoices("poll")),
    ("!bots set choices Reactions", w.SetChoices("reactions")),
    ("!bots set choices", w.SetChoices(None)),
    ("!bots set quiet 22:00-07:00", w.SetQuiet(rs.Quiet("22:00", "07:00"))),
    ("!bots set quiet 22-7 Europe/Dublin", w.SetQuiet(rs.Quiet("22:00", "07:00", "Europe/Dublin"))),
    ("!bots set quiet 9:30 - 12:00", w.Bad("quiet", "9:30 - 12:00", w.QUIET_FORM)),
    ("!bots set quiet off", w.SetQuiet("off")),
    ("!bots set quiet", w.SetQuiet(None)),
    ("!bots unschedule 3", w.Unschedule(3)),
    ("!bots unschedule #3", w.Unschedule(3)),
    ("!bots cancel 12", w.Cancel(12)),
])
def test_lines_that_read(line: str, expected: w.BotsCommand) -> None:
    assert w.parse(line, BOTS) == expected


@pytest.mark.parametrize(("line", "field", "given"), [
    ("!bots frob", "sub-command", "frob"),
    ("!bots list everything", "list", "everything"),
    ("!bots add", "bot", ""),
    ("!bots add nobody", "bot", "nobody"),
    ("!bots add helper echo", "bot", "helper echo"),
    ("!bots set colour blue", "setting", "colour"),
    ("!bots set", "setting", ""),
    ("!bots set choices polls", "choices", "polls"),
    ("!bots set choices poll reactions", "choices", "poll reactions"),
    ("!bots set quiet 7-7", "quiet", "7-7"),
    ("!bots set quiet 25:00-07:00", "quiet", "25:00-07:00"),
    ("!bots set quiet 22-7 Mars/Olympus", "quiet", "22-7 Mars/Olympus"),
    ("!bots unschedule", "n", ""),
    ("!bots unschedule one", "n", "one"),
    ("!bots cancel 0", "run", "0"),
    ("!bots schedule nobody every day ask hi", "bot", "nobody"),
    ("!bots schedule helper every day", "ask", ""),
    ('!bots schedule helper every day ask ""', "ask", ""),
    ('!bots schedule helper every fortnight ask "hi"', "when", "every fortnight"),
    ('!bots schedule helper at 08:00 ask "hi"', "when", "at 08:00"),
    ('!bots schedule helper every 15 minutes at 08:00 ask "hi"', "when", "every 15 minutes at 08:00"),
    ('!bots schedule helper every monday on friday ask "hi"', "when", "every monday on friday"),
    ('!bots schedule helper every day at 8pm ask "hi"', "when", "every day at 8pm"),
    ('!bots schedule helper every day zone Mars/Olympus ask "hi"', "when", "every day zone Mars/Olympus"),
    ('!bots schedule helper every month on monday ask "hi"', "when", "every month on monday"),
    ('!bots schedule helper every day sometimes ask "hi"', "when", "every day sometimes"),
    ('!bots schedule helper every 99999999999 days ask "hi"', "when", "every 99999999999 days"),
    ("!bots cancel ²", "run", "²"),
    ("!bots unschedule ²", "n", "²"),
])
def test_bad_fields_name_the_field_and_what_was_given(line: str, field: str, given: str) -> None:
    bad = w.parse(line, BOTS)
    assert isinstance(bad, w.Bad), bad
    assert (bad.field, bad.given) == (field, given)
    assert bad.allowed


def test_a_bad_bot_is_answered_with_the_bots_there_are() -> None:
    assert w.parse("!bots add nobody", BOTS) == w.Bad("bot", "nobody", "helper, echo")
    assert w.parse("!bots add nobody", {}) == w.Bad("bot", "nobody", "none")


def test_a_bad_schedule_says_why_in_the_grammars_own_words() -> None:
    bad = w.parse('!bots schedule helper every 15 minutes at 08:00 ask "hi"', BOTS)
    assert isinstance(bad, w.Bad)
    assert bad.why is not None and "a time of day goes with every: day, week or month" in bad.why


@pytest.mark.parametrize(("line", "schedule", "ask"), [
    ('!bots schedule helper every monday at 08:00 ask "Say good morning."',
     sched(every="week", on=["monday"], at="08:00"), "Say good morning."),
    ("!bots schedule Helper every monday and thursday at 8:00 zone Europe/Dublin ask “What is new?”",
     sched(every="week", on=["monday", "thursday"], at="08:00", zone="Europe/Dublin"), "What is new?"),
    ("!bots schedule helper every mon, fri ask: what's up", sched(every="week", on=["monday", "friday"]), "what's up"),
    ('!bots schedule helper every day at 09:30 ask "Standup?"', sched(every="day", at="09:30"), "Standup?"),
    ('!bots schedule helper every weekdays at 09:30 ask "Standup?"',
     sched(every="day", on=["monday", "tuesday", "wednesday", "thursday", "friday"], at="09:30"), "Standup?"),
    ('!bots schedule helper every 2 weeks on friday at 16:00 ask "Retro"',
     sched(every="week", on=["friday"], at="16:00", interval=2), "Retro"),
    ('!bots schedule helper every other month ask "Bills"', sched(every="month", interval=2), "Bills"),
    ('!bots schedule helper every 15 minutes ask "Tick"', sched(every="15 minutes"), "Tick"),
    ('!bots schedule helper every hour ask "Tick"', sched(every="1 hours"), "Tick"),
    ('!bots schedule helper every day at 07:00 in Europe/Paris until 2026-12-31 except 2026-12-25 ask "Hi"',
     sched(every="day", at="07:00", zone="Europe/Paris", until="2026-12-31", **{"except": ["2026-12-25"]}), "Hi"),
    ('!bots schedule helper every=week on=tuesday at=09:30 ask "Named fields"',
     sched(every="week", on=["tuesday"], at="09:30"), "Named fields"),
    ("!bots schedule helper every day ask Tell us a joke, with an ask in it",
     sched(every="day"), "Tell us a joke, with an ask in it"),
])
def test_schedules_read_into_the_recurrence_grammar(line: str, schedule: Schedule, ask: str) -> None:
    assert w.parse(line, BOTS) == w.AddSchedule("helper", schedule, ask)


@pytest.mark.parametrize(("schedule", "said"), [
    (sched(every="week", on=["monday"], at="08:00"), "every week on monday at 08:00 (UTC)"),
    (sched(every="week", on=["friday"], interval=2, zone="Europe/Dublin"), "every 2 weeks on friday (Europe/Dublin)"),
    (sched(every="15 minutes"), "every 15 minutes (UTC)"),
    (sched(every="day", until="2026-12-31"), "every day (UTC) until 2026-12-31"),
])
def test_a_schedule_is_said_back_in_words(schedule: Schedule, said: str) -> None:
    assert w.schedule_words(schedule) == said


def test_a_schedule_said_back_reads_as_the_same_schedule() -> None:
    for line in ("every week on monday at 08:00", "every 2 weeks on friday", "every 15 minutes", "every day"):
        parsed = w.parse(f"!bots schedule helper {line} ask hi", BOTS)
        assert isinstance(parsed, w.AddSchedule)
        again = w.parse(f"!bots schedule helper {w.schedule_words(parsed.schedule).split(' (')[0]} ask hi", BOTS)
        assert again == parsed


def test_stored_fields_are_what_a_bots_file_would_write() -> None:
    assert w.schedule_setting(sched(every="week", on=["monday"], at="08:00")) == {
        "every": "week", "on": ["monday"], "at": "08:00"}


@pytest.mark.parametrize(("text", "is_it"), [
    ("!bots", True), ("!bots list", True), ("/bots add x", True), ("  !Bots list", True),
    ("!botsy", False), ("!bot list", False), ("hello !bots", False), ("", False),
])
def test_what_is_a_bots_line(text: str, is_it: bool) -> None:
    assert w.is_bots_line(text) is is_it


def test_scheduling_is_not_offered_in_an_encrypted_room() -> None:
    assert set(w.offered(False)) == set(w.SUBCOMMANDS)
    assert not set(w.offered(True)) & {"schedule", "schedules", "unschedule"}
    assert "list" in w.offered(True)


# --- settings --------------------------------------------------------------------------------------

NOON = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(("settings", "bot", "asked", "now", "refused"), [
    ({}, "helper", True, NOON, None),
    ({"bots": ["helper"]}, "helper", True, NOON, None),
    ({"bots": ["echo"]}, "helper", True, NOON, "not_enabled"),
    ({"bots": []}, "helper", False, NOON, "not_enabled"),
    ({"quiet": {"from": "11:00", "to": "13:00"}}, "helper", False, NOON, "quiet"),
    ({"quiet": {"from": "11:00", "to": "13:00"}}, "helper", True, NOON, None),  # a person asking is answered
    ({"quiet": {"from": "22:00", "to": "07:00"}}, "helper", False, NOON, None),
    ({"quiet": {"from": "22:00", "to": "07:00"}}, "helper", False, NOON.replace(hour=23), "quiet"),
    ({"quiet": {"from": "22:00", "to": "07:00"}}, "helper", False, NOON.replace(hour=6, minute=59), "quiet"),
    ({"quiet": {"from": "22:00", "to": "07:00"}}, "helper", False, NOON.replace(hour=7), None),
    # 12:00 UTC is 21:00 in Tokyo: quiet there from 21:00.
    ({"quiet": {"from": "21:00", "to": "06:00", "zone": "Asia/Tokyo"}}, "helper", False, NOON, "quiet"),
    ({"quiet": "nonsense", "bots": "nonsense"}, "helper", False, NOON, None),
])
def test_room_refusals(settings: dict[str, object], bot: str, asked: bool, now: dt.datetime,
                       refused: str | None) -> None:
    assert rs.room_refusal(settings, bot, asked=asked, now=now) == refused


def test_enabled_bots_start_from_everything_offered() -> None:
    assert rs.with_bot({}, "helper", ["echo", "helper"]) == ["echo", "helper"]
    assert rs.without_bot({}, "helper", ["echo", "helper"]) == ["echo"]
    assert rs.with_bot({"bots": ["echo"]}, "helper", ["echo", "helper", "third"]) == ["echo", "helper"]
    assert rs.without_bot({"bots": ["echo"]}, "echo", ["echo", "helper"]) == []


def test_choices_default_to_reactions() -> None:
    assert rs.choices({}) == "reactions"
    assert rs.choices({"choices": "poll"}) == "poll"
    assert rs.choices({"choices": "smoke signals"}) == "reactions"


@pytest.mark.parametrize(("power_levels", "needed"), [
    (None, 100),                      # no power levels: only the creator
    ({}, 50),                         # the spec's default state_default
    ({"state_default": 0}, 0),
    ({"state_default": 75}, 75),
    ({"state_default": "60"}, 60),    # old room versions stored levels as strings
    ({"state_default": True}, 50),
])
def test_the_level_needed_is_the_rooms_state_default(power_levels: dict[str, object] | None, needed: int) -> None:
    assert state_level(power_levels) == needed


@pytest.mark.parametrize("module", ["appservice/matrix/claimers/admin_words.py", "engine/core/room_settings.py"])
def test_the_words_and_the_settings_are_pure(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"os", "pathlib", "socket", "asyncio", "aiohttp", "asyncpg", "httpx", "mautrix", "time",
                           "appservice"}
