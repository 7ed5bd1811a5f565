"""``!name args`` read as fields (engine/content/commands.py): tables of lines, what they parse to, and what a
person is told when an argument does not fit — never a guess."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from appservice.kinds import KINDS
from appservice.matrix.claimers.msc4332 import command_state, from_block, may_send_state
from appservice.matrix.inbound.htmltext import person_link
from appservice.matrix.tables.rooms import Room
from engine.content import Arg, Command, Strings
from engine.content.command_words import explain
from engine.content.commands import (
    Person,
    Problem,
    args_json,
    parse_args,
    parse_command,
    read_person,
    resolve_prompt,
    span_text,
    span_words,
    strip_address,
)
from engine.content.strings import parse_strings

KIT_STRINGS = Path(__file__).resolve().parents[2] / "engine" / "content" / "kit" / "strings.md"
ASKER = "@alice:hs"
MEMBERS: dict[str, str | None] = {
    ASKER: "Alice",
    "@bob:hs": "Bob",
    "@ann1:hs": "Ann",
    "@ann2:hs": "Ann",
    "@annlee:hs": "Ann Marie Lee",
    "@carol:other": None,
}


def strings() -> Strings:
    result = parse_strings("strings.md", KIT_STRINGS.read_text(encoding="utf-8"), KINDS.sections)
    assert isinstance(result, Strings), result
    return result


def command(*args: Arg, prompt: str = "go", name: str = "summarise") -> Command:
    return Command(name=name, prompt=prompt, source_path=f"commands/{name}.md", bot="helper", args=args)


SINCE = Arg(name="since", kind="span", label="How far back", default="1d")
LENGTH = Arg(name="length", kind="choice", label="How long", choices=("short", "detailed", "very long"),
             default="short")
WHO = Arg(name="who", kind="person", label="Whom", default="me")
LOUD = Arg(name="loud", kind="boolean", label="Out loud", default=False)
COUNT = Arg(name="count", kind="number", label="How many", default=3)
TOPIC = Arg(name="topic", kind="text", label="About", default="everything")
NEEDED = Arg(name="topic", kind="text", label="About")
SUMMARISE = command(SINCE, LENGTH, prompt="Read what was said since {since} and write a {length} catch-up.")
EVERYTHING = command(SINCE, LENGTH, WHO, LOUD, COUNT, TOPIC, name="everything")
H, D, W = dt.timedelta(hours=1), dt.timedelta(days=1), dt.timedelta(weeks=1)


@pytest.mark.parametrize(("text", "expected"), [
    ("!summarise", ("summarise", "")),
    ("!summarise since=2d", ("summarise", "since=2d")),
    ("  !Summarise   2d short  ", ("summarise", "2d short")),
    ("/summarise 2d", ("summarise", "2d")),
    ("!recap-for-mods 1 week", ("recap-for-mods", "1 week")),
    ("!summarise\nsince=2d", ("summarise", "since=2d")),
    ("!help", ("help", "")),
    ("summarise 2d", None),
    ("!", None),
    ("! summarise", None),
    ("!!summarise", None),
    ("//summarise", None),
    ("!2d", None),
    ("hello !summarise", None),
    ("", None),
])
def test_parse_command(text: str, expected: tuple[str, str] | None) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Helper: !summarise 2d", "!summarise 2d"),
    ("helper, !summarise", "!summarise"),
    ("@Helper !summarise", "!summarise"),
    ("@bot_helper:hs: !summarise", "!summarise"),
    ("@bot_helper:hs !summarise", "!summarise"),
    ("Helpers !summarise", "Helpers !summarise"),
    ("!summarise", "!summarise"),
    ("Echo: !summarise", "Echo: !summarise"),
])
def test_a_leading_address_to_a_bot_is_set_aside(text: str, expected: str) -> None:
    assert strip_address(text, ["Helper", "@bot_helper:hs"]) == expected


OK_CASES: list[tuple[Command, str, dict[str, Any]]] = [
    # Defaults fill what is absent.
    (SUMMARISE, "", {"since": D, "length": "short"}),
    # Named, any order, any case for a choice.
    (SUMMARISE, "since=2d", {"since": 2 * D, "length": "short"}),
    (SUMMARISE, "length=DETAILED since=48h", {"since": 48 * H, "length": "detailed"}),
    (SUMMARISE, "SINCE=3h", {"since": 3 * H, "length": "short"}),
    # Positional, in declared order; a span may run over words.
    (SUMMARISE, "2d", {"since": 2 * D, "length": "short"}),
    (SUMMARISE, "2d detailed", {"since": 2 * D, "length": "detailed"}),
    (SUMMARISE, "1 week", {"since": W, "length": "short"}),
    (SUMMARISE, "1 week detailed", {"since": W, "length": "detailed"}),
    (SUMMARISE, "1 day 12 hours", {"since": D + 12 * H, "length": "short"}),
    (SUMMARISE, "1d 12h Detailed", {"since": D + 12 * H, "length": "detailed"}),
    (SUMMARISE, "since=1 week", {"since": W, "length": "short"}),
    (SUMMARISE, 'since="2 weeks" length=short', {"since": 2 * W, "length": "short"}),
    (SUMMARISE, "90m", {"since": dt.timedelta(minutes=90), "length": "short"}),
    # A choice of several words, quoted or not.
    (SUMMARISE, "2d very long", {"since": 2 * D, "length": "very long"}),
    (SUMMARISE, 'length="Very Long"', {"since": D, "length": "very long"}),
    # Named and positional mixed: positionals fill what is left, in order.
    (SUMMARISE, "length=detailed 5h", {"since": 5 * H, "length": "detailed"}),
    (SUMMARISE, "5h length=detailed", {"since": 5 * H, "length": "detailed"}),
    # Every kind.
    (EVERYTHING, "", {"since": D, "length": "short", "who": Person(ASKER, "Alice"), "loud": False,
                      "count": 3, "topic": "everything"}),
    (EVERYTHING, "who=@bob:hs", {"who": Person("@bob:hs", "Bob")}),
    (EVERYTHING, "who=Bob", {"who": Person("@bob:hs", "Bob")}),
    (EVERYTHING, "who=bob", {"who": Person("@bob:hs", "Bob")}),
    (EVERYTHING, "who=@Bob", {"who": Person("@bob:hs", "Bob")}),
    (EVERYTHING, "who=me", {"who": Person(ASKER, "Alice")}),
    (EVERYTHING, "who=https://matrix.to/#/@bob:hs", {"who": Person("@bob:hs", "Bob")}),
    (EVERYTHING, "who=https://matrix.to/#/%40bob%3Ahs?via=hs", {"who": Person("@bob:hs", "Bob")}),
    (EVERYTHING, "who=@carol:other", {"who": Person("@carol:other", None)}),
    (EVERYTHING, "who=carol", {"who": Person("@carol:other", None)}),  # the user name, when no display name
    (EVERYTHING, "who=@stranger:elsewhere", {"who": Person("@stranger:elsewhere", None)}),
    (EVERYTHING, "who=Ann Marie Lee loud=yes", {"who": Person("@annlee:hs", "Ann Marie Lee"), "loud": True}),
    (EVERYTHING, '2d short "Ann Marie Lee" on', {"who": Person("@annlee:hs", "Ann Marie Lee"), "loud": True}),
    (EVERYTHING, "2d short ann marie lee", {"who": Person("@annlee:hs", "Ann Marie Lee")}),
    (EVERYTHING, "loud=TRUE", {"loud": True}),
    (EVERYTHING, "loud=off", {"loud": False}),
    (EVERYTHING, "loud=no", {"loud": False}),
    (EVERYTHING, "count=12", {"count": 12}),
    (EVERYTHING, "count=-2", {"count": -2}),
    (EVERYTHING, "count=2.5", {"count": 2.5}),
    (EVERYTHING, "count=2.0", {"count": 2.0}),
    # The last text field takes the rest of the line, up to a field given by name.
    (EVERYTHING, "1d short me no 4 the budget, and what = next", {"topic": "the budget, and what = next"}),
    (EVERYTHING, "topic=the budget loud=yes", {"topic": "the budget", "loud": True}),
    (EVERYTHING, 'topic="the budget" 2d', {"topic": "the budget", "since": 2 * D}),
    (EVERYTHING, "topic=“smart quotes”", {"topic": "smart quotes"}),
    (command(NEEDED, SINCE), "budget 2d", {"topic": "budget", "since": 2 * D}),  # a text before the last: one word
    (command(NEEDED, SINCE), '"the budget" 2d', {"topic": "the budget", "since": 2 * D}),
    (command(NEEDED), "whatever=5 is fine", None),  # unknown name= : see the problems
]


@pytest.mark.parametrize(("cmd", "raw", "expected"), [c for c in OK_CASES if c[2] is not None])
def test_arguments_parse_by_kind(cmd: Command, raw: str, expected: dict[str, Any]) -> None:
    # A person given as a matrix.to link is read the way the Matrix surface reads one (``person_link``).
    result = parse_args(cmd, raw, people=MEMBERS, asker=ASKER, person_ref=person_link)
    assert not isinstance(result, Problem), result
    assert list(result) == [a.name for a in cmd.args]  # declared order, every field
    assert {k: result[k] for k in expected} == expected


PROBLEMS: list[tuple[Command, str, Problem]] = [
    (SUMMARISE, "since=banana", Problem("bad", "since", "banana")),
    (SUMMARISE, "banana", Problem("bad", "since", "banana")),
    (SUMMARISE, "since=", Problem("bad", "since", "")),
    (SUMMARISE, "since=0d", Problem("bad", "since", "0d")),
    (SUMMARISE, "short", Problem("bad", "since", "short")),  # positional in declared order: no guessing
    (SUMMARISE, "2d medium", Problem("bad", "length", "medium")),
    (SUMMARISE, "2d deta", Problem("bad", "length", "deta")),  # no prefixes
    (SUMMARISE, "2d short extra", Problem("too_many", None, "extra")),
    (SUMMARISE, "topic=x", Problem("unknown", "topic", "x")),
    (SUMMARISE, "since=2d since=3d", Problem("twice", "since", "3d")),
    (SUMMARISE, "2d since=3d", Problem("twice", "since", "3d")),
    (EVERYTHING, "who=Ann", Problem("ambiguous", "who", "Ann", (Person("@ann1:hs", "Ann"), Person("@ann2:hs", "Ann")))),
    (EVERYTHING, "who=Zed", Problem("bad", "who", "Zed")),
    (EVERYTHING, "who=@nobody", Problem("bad", "who", "@nobody")),
    (EVERYTHING, "loud=maybe", Problem("bad", "loud", "maybe")),
    (EVERYTHING, "count=three", Problem("bad", "count", "three")),
    (EVERYTHING, "count=1e9", Problem("bad", "count", "1e9")),
    (EVERYTHING, "count=nan", Problem("bad", "count", "nan")),
    (command(NEEDED), "", Problem("missing", "topic")),
    (command(), "anything", Problem("too_many", None, "anything")),
    (command(NEEDED), "whatever=5 is fine", Problem("unknown", "whatever", "5")),
]


@pytest.mark.parametrize(("cmd", "raw", "expected"), PROBLEMS)
def test_a_bad_argument_is_a_problem_naming_the_field(cmd: Command, raw: str, expected: Problem) -> None:
    assert parse_args(cmd, raw, people=MEMBERS, asker=ASKER) == expected


@pytest.mark.parametrize(("cmd", "problem", "says"), [
    (SUMMARISE, Problem("bad", "since", "banana"),
     "**How far back** (since) takes a span like 2d, 48h or 1 week — not “banana”."),
    (SUMMARISE, Problem("bad", "length", "medium"),
     "**How long** (length) takes one of short, detailed, very long — not “medium”."),
    (SUMMARISE, Problem("unknown", "topic", "x"),
     "!summarise has no field “topic”. Its fields: since (How far back), length (How long)."),
    (SUMMARISE, Problem("too_many", None, "extra"),
     "“extra” is more than !summarise takes. Its fields: since (How far back), length (How long)."),
    (command(), Problem("too_many", None, "x"), "“x” is more than !summarise takes. Its fields: nothing after its name."),
    (SUMMARISE, Problem("twice", "since", "3d"), "**How far back** (since) was given twice."),
    (command(NEEDED), Problem("missing", "topic"), "**About** (topic) is needed: any text."),
    (EVERYTHING, Problem("ambiguous", "who", "Ann", (Person("@ann1:hs", "Ann"), Person("@ann2:hs", "Ann"))),
     "“Ann” could be Ann (@ann1:hs), Ann (@ann2:hs). Name one of them by their @name:server."),
    (EVERYTHING, Problem("bad", "loud", "maybe"), "**Out loud** (loud) takes yes or no — not “maybe”."),
    (EVERYTHING, Problem("bad", "count", "x"), "**How many** (count) takes a number — not “x”."),
])
def test_what_a_person_is_told(cmd: Command, problem: Problem, says: str) -> None:
    assert explain(problem, cmd, strings()) == says


def test_a_long_value_is_quoted_back_short_and_on_one_line() -> None:
    # What was pasted after !name is named, not shown again whole (found by the fuzz: tests/fuzz).
    said = explain(Problem("too_many", None, "word\n" * 5000), command(), strings())
    assert said == "“word word word word word word word word word word word word…” is more than !summarise takes. " \
                   "Its fields: nothing after its name."


def test_with_no_words_nothing_is_said() -> None:
    assert explain(Problem("bad", "since", "x"), SUMMARISE, Strings()) is None


@pytest.mark.parametrize(("raw", "prompt"), [
    ("", "Read what was said since 1 day and write a short catch-up."),
    ("since=2d", "Read what was said since 2 days and write a short catch-up."),
    ("1 week detailed", "Read what was said since 1 week and write a detailed catch-up."),
    ("36h", "Read what was said since 1 day 12 hours and write a short catch-up."),
])
def test_resolve_prompt_fills_the_placeholders_in_words(raw: str, prompt: str) -> None:
    args = parse_args(SUMMARISE, raw, people=MEMBERS, asker=ASKER)
    assert not isinstance(args, Problem)
    assert resolve_prompt(SUMMARISE, args) == prompt


def test_resolve_prompt_of_every_kind() -> None:
    cmd = command(WHO, LOUD, COUNT, TOPIC, prompt="{who} {loud} {count} {topic} {unknown} {{x}}")
    args = parse_args(cmd, "Bob yes 7 the rest", people=MEMBERS, asker=ASKER)
    assert not isinstance(args, Problem)
    assert resolve_prompt(cmd, args) == "Bob (@bob:hs) yes 7 the rest {unknown} {{x}}"


@pytest.mark.parametrize(("span", "said", "typed"), [
    (D, "1 day", "1d"),
    (2 * D, "2 days", "2d"),
    (W, "1 week", "1w"),
    (D + 12 * H, "1 day 12 hours", "1d 12h"),
    (dt.timedelta(minutes=90), "1 hour 30 minutes", "1h 30m"),
    (dt.timedelta(minutes=1), "1 minute", "1m"),
])
def test_spans_in_words_and_as_typed(span: dt.timedelta, said: str, typed: str) -> None:
    assert span_words(span) == said
    assert span_text(span) == typed


def test_args_json_can_be_typed_again() -> None:
    args = parse_args(EVERYTHING, "36h detailed Bob on 2 the budget", people=MEMBERS, asker=ASKER)
    assert not isinstance(args, Problem)
    stored = args_json(args)
    assert stored == {"since": "1d 12h", "length": "detailed", "who": "@bob:hs", "loud": True, "count": 2,
                      "topic": "the budget"}
    again = parse_args(EVERYTHING, {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in stored.items()},
                       people=MEMBERS, asker=ASKER)
    assert again == args


@pytest.mark.parametrize(("block", "expected"), [
    ({"syntax": "summarise {since} {length}", "variables": {"since": "2d", "length": "short"}},
     ("summarise", {"since": "2d", "length": "short"})),
    ({"syntax": "!Summarise {since}", "variables": {"since": "1 week"}}, ("summarise", {"since": "1 week"})),
    ({"syntax": "help"}, ("help", {})),
    ({"syntax": ""}, None),
    ({"variables": {}}, None),
    ("summarise", None),
])
def test_an_msc4332_block(block: object, expected: tuple[str, dict[str, str]] | None) -> None:
    assert from_block(block) == expected


def test_named_values_from_a_block_are_one_value_each() -> None:
    assert parse_args(SUMMARISE, {"since": "1 week", "length": "Very Long"}, people=MEMBERS, asker=ASKER) == {
        "since": W, "length": "very long"}
    assert parse_args(SUMMARISE, {"when": "2d"}, people=MEMBERS, asker=ASKER) == Problem("unknown", "when", "2d")


@pytest.mark.parametrize(("text", "expected"), [
    ("me", Person(ASKER, "Alice")),
    ("ME", Person(ASKER, "Alice")),
    ("@bob:hs", Person("@bob:hs", "Bob")),
    ("Bob", Person("@bob:hs", "Bob")),
    ("https://matrix.to/#/@bob:hs", Person("@bob:hs", "Bob")),
    ("ann", (Person("@ann1:hs", "Ann"), Person("@ann2:hs", "Ann"))),
    ("ann1", Person("@ann1:hs", "Ann")),
    ("", None),
    ("@", None),
    ("nobody", None),
])
def test_read_person(text: str, expected: object) -> None:
    assert read_person(text, MEMBERS, ASKER, person_link) == expected


def test_a_link_is_a_person_only_where_the_surface_reads_it_so() -> None:
    assert read_person("https://matrix.to/#/@bob:hs", MEMBERS, ASKER) is None
    assert person_link("https://matrix.to/#/@bob:hs please") is None


def test_command_state_is_the_msc4332_shape() -> None:
    cmd = Command(name="summarise", prompt="x", source_path="commands/summarise.md", bot="helper",
                  hint="Catch up", args=(SINCE, NEEDED, TOPIC.model_copy(update={"name": "more"})))
    state = command_state([cmd, command(name="bare")], strings())
    assert state["sigil"] == "!"
    first, bare = state["commands"]
    assert first["syntax"] == 'summarise {since} "{topic}" {more}'
    assert first["description"] == {"m.text": [{"body": "Catch up"}]}
    assert first["variables"]["since"] == {
        "m.text": [{"body": "since: How far back — a span like 2d, 48h or 1 week (default 1d)"}]}
    assert bare == {"syntax": "bare", "variables": {}, "description": {"m.text": [{"body": "!bare"}]}}


PL = {"users": {"@bot:hs": 50, "@mod:hs": 50, "@admin:hs": 100}, "users_default": 0, "state_default": 50,
      "events": {"m.bot.commands": 100}}


@pytest.mark.parametrize(("user", "event_type", "levels", "version", "expected"), [
    ("@bot:hs", "org.matrix.msc4332.commands", PL, "10", True),  # state_default 50
    ("@bot:hs", "m.bot.commands", PL, "10", False),  # the room asks 100 for this one
    ("@admin:hs", "m.bot.commands", PL, "10", True),
    ("@member:hs", "org.matrix.msc4332.commands", PL, "10", False),
    ("@member:hs", "m.bot.commands", {"users_default": 50}, "10", True),  # state_default 50, everyone 50
    ("@member:hs", "m.bot.commands", {"state_default": "0"}, "1", True),  # old rooms: strings
    ("@creator:hs", "m.bot.commands", PL, "12", True),  # v12 creators hold all power
    ("@creator:hs", "m.bot.commands", PL, "10", False),
    ("@creator:hs", "m.bot.commands", None, "10", True),  # no power levels: the creator only
    ("@bot:hs", "m.bot.commands", None, "10", False),
])
def test_may_send_state(user: str, event_type: str, levels: dict[str, Any] | None, version: str, expected: bool) -> None:
    create = {"creator": "@creator:hs"} if version != "12" else {}
    room = Room(room_id="!r:hs", encrypted=False, left_at=None, room_version=version, create_content=create,
                create_sender="@creator:hs", power_levels=levels, history_visibility=None, settings={})
    assert may_send_state(user, event_type, room) is expected


def test_args_read_back_resolve_the_same_prompt() -> None:
    from engine.content.commands import args_from_json

    args = parse_args(EVERYTHING, "36h detailed Bob on 2 the budget", people=MEMBERS, asker=ASKER)
    assert not isinstance(args, Problem)
    back = args_from_json(EVERYTHING, args_json(args))
    assert {k: v for k, v in back.items() if k != "who"} == {k: v for k, v in args.items() if k != "who"}
    assert back["who"] == Person("@bob:hs")  # the id is kept; the name is the room's to show


@pytest.mark.parametrize(("said", "words"), [
    ("Recall Bot: my dog is Biscuit.", "my dog is Biscuit."),
    ("@bot_recall:localhost my dog is Biscuit", "my dog is Biscuit"),
    ("my dog is Biscuit, @Recall Bot", "my dog is Biscuit"),
    ("my dog is Biscuit", "my dog is Biscuit"),
    ("Recall Bot", "Recall Bot"),  # nothing but the address: kept, not emptied
])
def test_what_was_said_to_a_bot_is_read_without_the_address(said: str, words: str) -> None:
    from engine.content.commands import without_address

    assert without_address(said, ("Recall Bot", "@bot_recall:localhost")) == words
