"""``!name args`` read as fields, never as a syntax (SPEC §5). Pure: text and data in, values out.

A line is a command when it starts with ``!name`` (or ``/name``: clients that do not know a slash
command send it on as text). Its arguments are the command's fields, named (``since=2d``,
``topic="a b"``) or positional in declared order, each read by its kind: a span (``2d``, ``48h``,
``1 week``), a choice (one of its choices, any case), a person (``@user:server``, ``me``, a display
name of someone in the room — the caller hands the people in — or whatever the surface reads as a
reference to one: ``person_ref``), a boolean, a number, text (the last text field takes the rest of the line). What is absent
takes its default. What does not fit is a ``Problem`` naming the field — never a guess: no prefix
of a choice, no nearest name, no first of two people who share one.

The words a person reads (what a field accepts, the help) are in ``engine.content.command_words``; how a
surface's clients draw commands is the surface's own. The words a *model* reads when a prompt is resolved (a span as "2 days") are
the prompt's own language and live here.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.content import Arg, Command, Strings
from engine.content.parts import PLACEHOLDER, parse_span

SECTION = "commands"

_COMMAND = re.compile(r"[!/]([A-Za-z][A-Za-z0-9_-]*)(?:\s+(.*))?", re.DOTALL)
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u201e": "\u201c"}
_USER_ID = re.compile(r"@[^\s:]+:[^\s:][^\s]*")
_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_BOOLEANS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False}
# How many words one value may run over: "1 day 12 hours", "Ann Marie Lee".
_SPAN_WORDS = 6
_NAME_WORDS = 5
_UNITS = (("week", 7 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60))
_SHORT = {"week": "w", "day": "d", "hour": "h", "minute": "m"}


# A surface's reader of its own references to a person (a link, a pill): the user id, or None.
PersonRef = Callable[[str], str | None]


@dataclass(frozen=True)
class Person:
    """Someone a person argument named: their user id, and the name the room shows (if known)."""

    user_id: str
    name: str | None = None


Value = dt.timedelta | bool | int | float | str | Person


@dataclass(frozen=True)
class Problem:
    """Why a command's arguments were not taken. ``field`` is the argument's name (or the unknown
    name that was given); ``value`` what was written; ``matches`` the people a name could be."""

    why: Literal["bad", "missing", "unknown", "twice", "too_many", "ambiguous"]
    field: str | None = None
    value: str | None = None
    matches: tuple[Person, ...] = ()


# --- the line ----------------------------------------------------------------------------------


def parse_command(text: str) -> tuple[str, str] | None:
    """``!name rest`` or ``/name rest`` → (name in lower case, rest); None when it is not a command.
    ``!!x`` and ``//x`` (a client's escape for a literal slash) are not commands."""
    match = _COMMAND.fullmatch(text.strip())
    if match is None:
        return None
    return match.group(1).lower(), (match.group(2) or "").strip()


def strip_address(text: str, names: Iterable[str]) -> str:
    """The line without a leading address to one of ``names`` ("Helper: !summarise", "@bot_x:hs !x"),
    so a command said to a bot by name reads like one said to the room."""
    stripped = text.strip()
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        match = re.match(rf"@?{re.escape(name)}(?![\w-])[:,]?\s+", stripped, re.IGNORECASE)
        if match is not None:
            return stripped[match.end():]
    return stripped


def without_address(text: str, names: Iterable[str]) -> str:
    """What a person said to a bot, without their address to it at either end ("Recall Bot: my dog is
    Biscuit", "my dog is Biscuit, @Recall Bot"): the words themselves, as a memory keeps and compares them."""
    said = strip_address(text, names)
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        match = re.search(rf"[\s,;:]*@?{re.escape(name)}[\s.!?]*$", said, re.IGNORECASE)
        if match is not None and match.start() > 0:
            said = said[:match.start()]
            break
    return said.strip() or text.strip()


# --- the arguments -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    key: str | None  # name= in front of it
    value: str  # without the name= and the quotes
    quoted: bool
    value_start: int  # where the value begins in the line (after name= and the opening quote)


def _tokens(raw: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(raw)
    unclosed: set[str] = set()  # closing quotes not found from some point on: none comes later either
    while i < n:
        if raw[i].isspace():
            i += 1
            continue
        start, key = i, None
        named = _KEY.match(raw, i)
        if named is not None:
            key, i = named.group(1).lower(), named.end()
        if i < n and raw[i] in _QUOTES and _QUOTES[raw[i]] not in unclosed:
            close = raw.find(_QUOTES[raw[i]], i + 1)
            if close == -1:
                unclosed.add(_QUOTES[raw[i]])  # so a line of lone quotes is read once, not once a quote
            else:
                out.append(_Token(start, close + 1, key, raw[i + 1:close], True, i + 1))
                i = close + 1
                continue
        j = i
        while j < n and not raw[j].isspace():
            j += 1
        out.append(_Token(start, j, key, raw[i:j], False, i))
        i = j
    return out


def parse_args(command: Command, raw: str | Mapping[str, str], *, people: Mapping[str, str | None],
               asker: str, person_ref: PersonRef | None = None) -> dict[str, Value] | Problem:
    """The command's arguments from what followed its name (or from named values a client sent apart),
    in declared order, defaults applied — or the first ``Problem``. ``people`` maps the room's
    people (user id → display name); ``asker`` is who ran it ("me"); ``person_ref`` reads the surface's
    own references to a person."""
    by_name = {arg.name: arg for arg in command.args}
    if isinstance(raw, Mapping):
        # Named values a client sent apart from the text: each is one value, as if quoted.
        tokens = [_Token(0, 0, name.lower(), value, True, 0) for name, value in raw.items()]
        raw = ""
    else:
        tokens = _tokens(raw)
    given: dict[str, Value] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.key is not None:
            arg = by_name.get(token.key)
            if arg is None:
                return Problem("unknown", token.key, token.value)
            if arg.name in given:
                return Problem("twice", arg.name, token.value)
            rest = True
        else:
            pending = [a for a in command.args if a.name not in given]
            if not pending:
                return Problem("too_many", None, token.value)
            arg, rest = pending[0], len(pending) == 1
        stop = next((k for k in range(i + 1, len(tokens)) if tokens[k].key in by_name), len(tokens))
        taken = _take(arg, tokens, i, stop, raw, rest=rest, people=people, asker=asker, person_ref=person_ref)
        if isinstance(taken, Problem):
            return taken
        given[arg.name], i = taken
    out: dict[str, Value] = {}
    for arg in command.args:
        if arg.name in given:
            out[arg.name] = given[arg.name]
        elif arg.default is None:
            return Problem("missing", arg.name)
        else:
            out[arg.name] = _default(arg, people, asker)
    return out


def _take(arg: Arg, tokens: Sequence[_Token], i: int, stop: int, raw: str, *, rest: bool,
          people: Mapping[str, str | None], asker: str, person_ref: PersonRef | None) -> tuple[Value, int] | Problem:
    first = tokens[i]
    if arg.kind == "text":
        if first.quoted or not rest:
            return first.value, i + 1
        # The last text field takes the rest of the line, up to a field given by name.
        return raw[first.value_start:tokens[stop - 1].end].strip(), stop
    if arg.kind in ("boolean", "number") or first.quoted:
        found = _read(arg, first.value, people, asker, person_ref)
        if found is None:
            return Problem("bad", arg.name, first.value)
        if isinstance(found, tuple):
            return Problem("ambiguous", arg.name, first.value, found)
        return found, i + 1
    most = {"span": _SPAN_WORDS, "person": _NAME_WORDS}.get(arg.kind) or max(len(c.split()) for c in arg.choices)
    # The longest run of words that reads as this kind: "1 week", "Ann Marie Lee", "very long".
    for length in range(min(most, stop - i), 0, -1):
        if any(t.quoted for t in tokens[i + 1:i + length]):
            continue
        words = " ".join([first.value, *(raw[t.start:t.end] for t in tokens[i + 1:i + length])])
        found = _read(arg, words, people, asker, person_ref)
        if isinstance(found, tuple):
            return Problem("ambiguous", arg.name, words, found)
        if found is not None:
            return found, i + length
    return Problem("bad", arg.name, first.value)


def _read(arg: Arg, text: str, people: Mapping[str, str | None], asker: str,
          person_ref: PersonRef | None) -> Value | tuple[Person, ...] | None:
    text = text.strip()
    match arg.kind:
        case "span":
            return parse_span(text.lower())
        case "choice":
            return next((c for c in arg.choices if c.casefold() == text.casefold()), None)
        case "boolean":
            return _BOOLEANS.get(text.lower())
        case "number":
            if not _NUMBER.fullmatch(text):
                return None
            number = float(text)
            if not math.isfinite(number):
                return None
            return int(number) if number.is_integer() and "." not in text else number
        case "person":
            return read_person(text, people, asker, person_ref)
        case _:
            return text


def read_person(text: str, people: Mapping[str, str | None], asker: str,
                person_ref: PersonRef | None = None) -> Person | tuple[Person, ...] | None:
    """A person as a line names them: ``me``, ``@user:server``, a reference the surface reads as one
    (``person_ref``), or the display name (or user name) of someone in the room. Two people of that name
    → both, so the caller asks which; nobody → None."""
    text = text.strip()
    if text.lower() == "me":
        return Person(asker, people.get(asker))
    referred = person_ref(text) if person_ref is not None else None
    if referred is not None:
        text = referred
    if _USER_ID.fullmatch(text):
        return Person(text, people.get(text))
    name = (text[1:] if text.startswith("@") else text).casefold()
    if not name:
        return None
    for same in (
        [uid for uid, shown in people.items() if shown and shown.casefold() == name],
        [uid for uid in people if uid[1:].split(":", 1)[0].casefold() == name],
    ):
        if len(same) == 1:
            return Person(same[0], people.get(same[0]))
        if same:
            return tuple(Person(uid, people.get(uid)) for uid in sorted(same))
    return None


def _default(arg: Arg, people: Mapping[str, str | None], asker: str) -> Value:
    value = arg.default
    match arg.kind:
        case "span":
            span = parse_span(str(value))
            assert span is not None  # the compile checked it
            return span
        case "person":
            who = asker if value == "me" else str(value)
            return Person(who, people.get(who))
        case _:
            return value  # type: ignore[no-any-return]


# --- values as a model and a worker read them --------------------------------------------------


def _span_parts(span: dt.timedelta) -> list[tuple[int, str]]:
    """A span as whole units, largest first: 36 hours → [(1, "day"), (12, "hour")]."""
    seconds, parts = int(span.total_seconds()), []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            parts.append((count, unit))
    return parts


def span_words(span: dt.timedelta) -> str:
    """``2 days``, ``1 week``, ``1 day 12 hours``: a span as a prompt says it."""
    return " ".join(f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in _span_parts(span)) or "0 minutes"


def span_text(span: dt.timedelta) -> str:
    """``2d``, ``1d 12h``: a span as it is typed (and read back by ``parse_span``)."""
    return " ".join(f"{n}{_SHORT[unit]}" for n, unit in _span_parts(span)) or "0m"


def words(value: Value) -> str:
    if isinstance(value, dt.timedelta):
        return span_words(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Person):
        return f"{value.name} ({value.user_id})" if value.name else value.user_id
    return str(value)


def resolve_prompt(command: Command, args: Mapping[str, Value]) -> str:
    """The command's body with each ``{name}`` filled in as words (a span as "2 days")."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return words(args[name]) if name in args else match.group(0)

    return PLACEHOLDER.sub(fill, command.prompt)


def args_json(args: Mapping[str, Value]) -> dict[str, Any]:
    """The arguments as a run's context keeps them: each as it could be typed again by name (a span
    as ``2d``, a person as their user id), so the worker resolves the prompt itself
    (``command_prompt``)."""
    out: dict[str, Any] = {}
    for name, value in args.items():
        if isinstance(value, dt.timedelta):
            out[name] = span_text(value)
        elif isinstance(value, Person):
            out[name] = value.user_id
        else:
            out[name] = value
    return out


def args_from_json(command: Command, stored: Mapping[str, Any]) -> dict[str, Value]:
    """``args_json`` read back, by each field's kind (what does not read is left out, and its
    placeholder stays as written)."""
    out: dict[str, Value] = {}
    for arg in command.args:
        value = stored.get(arg.name)
        if arg.kind == "span" and isinstance(value, str):
            span = parse_span(value)
            if span is not None:
                out[arg.name] = span
        elif arg.kind == "person" and isinstance(value, str):
            out[arg.name] = Person(value)
        elif arg.kind == "person" and isinstance(value, Mapping) and isinstance(value.get("user_id"), str):
            name = value.get("name")
            out[arg.name] = Person(value["user_id"], name if isinstance(name, str) else None)
        elif isinstance(value, bool | int | float | str):
            out[arg.name] = value
    return out


def command_prompt(commands: Mapping[str, Command], strings: Strings, context: Mapping[str, Any]) -> str | None:
    """What a command's run asks its bot, resolved by the worker from the command as published and the
    arguments the run keeps (a client sends only the name and the arguments). None: the run is no
    command's, or its command is gone."""
    asked = context.get("command")
    if not isinstance(asked, Mapping) or not isinstance(asked.get("name"), str):
        return None
    command = commands.get(asked["name"])
    if command is None:
        return None
    if command.bot is None:
        return None  # a tool command asks no model: its run runs the tool (``engine.core.loop``)
    stored = asked.get("args")
    return resolve_prompt(command, args_from_json(command, stored if isinstance(stored, Mapping) else {}))


__all__ = [
    "SECTION", "Person", "PersonRef", "Problem", "Value", "args_from_json", "args_json", "command_prompt",
    "parse_args", "parse_command", "read_person", "resolve_prompt", "span_text", "span_words",
    "strip_address", "words",
]
