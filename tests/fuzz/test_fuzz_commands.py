"""Fuzz: the command-argument parser — any command a site may declare, any line a person may type after
``!name`` (or any named values a client sends apart): no exception, every case within 100 ms, and a line
that does not fit is a ``Problem`` the person is told about in the site's words, in one clear line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from appservice.kinds import KINDS
from appservice.matrix.inbound.htmltext import person_link
from engine.content import Arg, Command, Strings
from engine.content.command_words import explain
from engine.content.commands import Person, Problem, args_json, parse_args, parse_command, strip_address
from engine.content.strings import parse_strings
from tests.fuzz.budget import FUZZ, clear, outcome, within_budget

KIT_STRINGS = Path(__file__).resolve().parents[2] / "engine" / "content" / "kit" / "strings.md"
ASKER = "@alice:hs"
MEMBERS: dict[str, str | None] = {ASKER: "Alice", "@bob:hs": "Bob", "@ann1:hs": "Ann", "@ann2:hs": "Ann",
                                  "@annlee:hs": "Ann Marie Lee", "@carol:other": None}
NAMES = ["@summon:hs", "@bot_helper:hs", "Helper"]


def _strings() -> Strings:
    read = parse_strings("strings.md", KIT_STRINGS.read_text(encoding="utf-8"), KINDS.sections)
    assert isinstance(read, Strings), read
    return read


STRINGS = _strings()
CHOICES = st.lists(st.sampled_from(["short", "detailed", "very long", "Yes", "no", "a b c", "x"]), min_size=1,
                   max_size=4, unique=True)


@st.composite
def args(draw: st.DrawFn, name: str) -> Arg:
    kind = draw(st.sampled_from(["span", "choice", "person", "boolean", "number", "text"]))
    choices = tuple(draw(CHOICES)) if kind == "choice" else ()
    default: Any = None
    if draw(st.booleans()):
        default = {"span": "1d", "choice": choices[0] if choices else None, "person": "me", "boolean": False,
                   "number": 3, "text": "everything"}[kind]
    return Arg(name=name, kind=kind, label=name.title(), choices=choices, default=default)


@st.composite
def commands(draw: st.DrawFn) -> Command:
    names = draw(st.lists(st.sampled_from(["since", "who", "length", "loud", "count", "topic", "n_2"]),
                          max_size=4, unique=True))
    return Command(name="summarise", prompt="go", source_path="commands/summarise.md", bot="helper",
                   args=tuple(draw(args(name)) for name in names))


_PIECES = st.sampled_from([
    " ", "  ", "\t", "\n", "since=", "who=", "length=", "topic=", "count=", "loud=", "nope=", "=", '"', "'",
    "\u201c", "\u201d", "\u2018", "\u2019", "\u201e", "2d", "48h", "1 week", "1 day 12 hours", "0m", "99999999999w",
    "me", "@bob:hs", "@nobody:hs", "Ann", "Ann Marie Lee", "Bob", "https://matrix.to/#/@bob:hs",
    "https://matrix.to/#/%40carol%3Aother", "short", "very long", "VERY LONG", "yes", "off", "3", "-2.5", "1e309",
    "nan", "inf", ".5", "9" * 400, "!", "/", "é", "\U0001f600", "\x00",
])
LINES = st.one_of(st.lists(_PIECES, max_size=40).map("".join), st.text(max_size=200))
NAMED = st.dictionaries(st.sampled_from(["since", "who", "length", "topic", "count", "loud", "nope", "WHO"]),
                        LINES, max_size=4)


def _read(command: Command, raw: str | dict[str, str]) -> Any:
    return parse_args(command, raw, people=MEMBERS, asker=ASKER, person_ref=person_link)


@FUZZ
@given(commands(), st.one_of(LINES, NAMED))
def test_any_arguments_are_read_or_explained_clearly_in_time(command: Command, raw: str | dict[str, str]) -> None:
    size = len(raw) if isinstance(raw, str) else sum(len(v) for v in raw.values())
    read = within_budget("command-argument parser", lambda: _read(command, raw), size)
    if isinstance(read, Problem):
        outcome("command-argument parser", f"problem: {read.why}")
        words = explain(read, command, STRINGS)
        assert words is not None, read
        assert words.strip() and "Traceback" not in words
        first = words.splitlines()[0]
        assert clear(first), words
        return
    outcome("command-argument parser", "read")
    assert set(read) == {arg.name for arg in command.args}
    for arg in command.args:
        value = read[arg.name]
        if arg.kind == "person":
            assert isinstance(value, Person) and value.user_id.startswith("@")
        elif arg.kind == "choice":
            assert value in arg.choices
    assert isinstance(args_json(read), dict)


@FUZZ
@given(st.one_of(LINES, LINES.map(lambda rest: "!summarise " + rest), LINES.map(lambda rest: "Helper: /x" + rest)))
def test_any_line_is_read_as_a_command_or_not_in_time(line: str) -> None:
    said = within_budget("command line", lambda: parse_command(strip_address(line, NAMES)), len(line))
    outcome("command line", "a command" if said is not None else "not a command")
    if said is not None:
        name, rest = said
        assert name == name.lower() and rest == rest.strip()
