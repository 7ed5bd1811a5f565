"""``!bots …``: a room admin's words to the service (SPEC §5), parsed. Pure: text in, a sub-command out.

Arguments are fields, not a syntax. Each sub-command names what it takes, and a bad one comes back as
``Bad`` — the field, what was given and what it accepts — never a guess. A schedule is said in words
(``every monday at 08:00 ask "…"``) and taken apart into the recurrence grammar's own fields
(``engine.content.Schedule``), which then checks them exactly as it checks a bot's file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from engine.content import Schedule
from engine.content.hears import WEEKDAYS, system_zones
from engine.core.room_settings import Quiet

PREFIXES = ("!bots", "/bots")
CHOICES = ("reactions", "poll")
SETTINGS = ("choices", "quiet")
SUBCOMMANDS = ("list", "add", "remove", "set", "schedule", "schedules", "unschedule", "runs", "spend", "cancel",
               "status")
# A bot cannot speak by itself into a room it cannot read: these are not offered in an encrypted room.
SCHEDULING = frozenset({"schedule", "schedules", "unschedule"})
# How each sub-command is written, for the usage and for a bad field.
FORMS = {
    "list": "list",
    "add": "add <bot>",
    "remove": "remove <bot>",
    "set": "set choices reactions|poll · set quiet <from>-<to> [zone]|off",
    "schedule": 'schedule <bot> every <day|week|month|monday…|N minutes|N hours> [on <days>] [at HH:MM]'
                ' [zone <zone>] [until YYYY-MM-DD] ask "…"',
    "schedules": "schedules",
    "unschedule": "unschedule <n>",
    "runs": "runs",
    "spend": "spend",
    "cancel": "cancel <run>",
    "status": "status",
}
QUIET_FORM = "<from>-<to> [zone] (like 22:00-07:00 Europe/Dublin), or off"
WHEN_FORM = ("every <day|week|month|monday…|weekdays|N minutes|N hours|N days|N weeks|N months>, then"
             " optionally on <days>, at HH:MM, zone <zone>, until YYYY-MM-DD, except YYYY-MM-DD")

_TIME = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")
_QUIET = re.compile(r"([0-9:]+)\s*-\s*([0-9:]+)")
_ASK = re.compile(r"(?:^|\s)ask:?(?:\s+|$)", re.IGNORECASE)
_QUOTES = {'"': '"', "“": "”", "'": "'", "‘": "’", "«": "»"}  # the quotes phones type too
_WHEN_KEYS = ("every", "on", "at", "zone", "in", "until", "except")


@dataclass(frozen=True)
class Usage:
    """Bare ``!bots`` (or ``!bots help``): what may be said here."""


@dataclass(frozen=True)
class Bad:
    """A field that could not be read: ``field`` (a sub-command's part), what was ``given``, and what it
    accepts; ``why`` says more when the grammar has more to say."""

    field: str
    given: str
    allowed: str
    why: str | None = None


@dataclass(frozen=True)
class ListBots:
    pass


@dataclass(frozen=True)
class Status:
    """What the room is to the service: its bots, its settings, and what other surfaces say of it (a bridge)."""


@dataclass(frozen=True)
class AddBot:
    bot: str


@dataclass(frozen=True)
class RemoveBot:
    bot: str


@dataclass(frozen=True)
class SetChoices:
    value: str | None  # None: only show the current value


@dataclass(frozen=True)
class SetQuiet:
    value: Quiet | Literal["off"] | None  # None: only show the current value


@dataclass(frozen=True)
class AddSchedule:
    bot: str
    schedule: Schedule
    ask: str


@dataclass(frozen=True)
class ListSchedules:
    pass


@dataclass(frozen=True)
class Unschedule:
    n: int


@dataclass(frozen=True)
class Runs:
    pass


@dataclass(frozen=True)
class Spend:
    pass


@dataclass(frozen=True)
class Cancel:
    run: int


BotsCommand = (Usage | Bad | ListBots | Status | AddBot | RemoveBot | SetChoices | SetQuiet | AddSchedule | ListSchedules
               | Unschedule | Runs | Spend | Cancel)


def is_bots_line(text: str) -> bool:
    """Whether ``text`` is a ``!bots …`` line (or ``/bots …``, as clients send an unknown slash command)."""
    head = text.strip().split(maxsplit=1)
    return bool(head) and head[0].lower() in PREFIXES


def offered(encrypted: bool) -> tuple[str, ...]:
    """The sub-commands said in the usage here: scheduling is not offered in an encrypted room."""
    return tuple(name for name in SUBCOMMANDS if not (encrypted and name in SCHEDULING))


def parse(text: str, bots: Mapping[str, str]) -> BotsCommand:
    """A ``!bots …`` line → what it asks. ``bots`` is slug → name of the bots that may be named (the
    ones offered in rooms); a bot is named by its slug, its name, or its puppet's user id."""
    words = text.strip().split()
    if not words or words[0].lower() not in PREFIXES:
        raise ValueError(f"not a !bots line: {text!r}")
    if len(words) == 1 or words[1].lower() in ("help", "?"):
        return Usage()
    sub, args = words[1].lower(), words[2:]
    match sub:
        case "list" | "status" | "runs" | "spend" | "schedules":
            if args:
                return Bad(sub, " ".join(args), f"nothing after {sub}", None)
            plain: dict[str, BotsCommand] = {"list": ListBots(), "status": Status(), "runs": Runs(), "spend": Spend(),
                                             "schedules": ListSchedules()}
            return plain[sub]
        case "add" | "remove":
            if len(args) != 1:
                return Bad("bot", " ".join(args), _bot_names(bots))
            slug = resolve_bot(args[0], bots)
            if slug is None:
                return Bad("bot", args[0], _bot_names(bots))
            return AddBot(slug) if sub == "add" else RemoveBot(slug)
        case "set":
            return _set(args)
        case "schedule":
            rest = text.strip().split(maxsplit=3)[3] if len(words) > 3 else ""
            return _schedule(args[0] if args else "", rest, bots)
        case "unschedule" | "cancel":
            field = "n" if sub == "unschedule" else "run"
            number = args[0].lstrip("#") if len(args) == 1 else ""
            if not number.isdecimal() or int(number) < 1:
                return Bad(field, " ".join(args), "a number, as listed" if sub == "unschedule" else "a run's number")
            return Unschedule(int(number)) if sub == "unschedule" else Cancel(int(number))
    return Bad("sub-command", words[1], ", ".join(SUBCOMMANDS))


def resolve_bot(word: str, bots: Mapping[str, str]) -> str | None:
    """The slug a person meant: ``helper``, ``Helper``, ``@Helper`` or ``@bot_helper:server``."""
    said = word.strip().rstrip(":,").lower()
    if said.startswith("@bot_") and ":" in said:
        said = said[len("@bot_"):].split(":", 1)[0]
    said = said.lstrip("@")
    for slug, name in bots.items():
        if said in (slug.lower(), name.lower()):
            return slug
    return None


def _bot_names(bots: Mapping[str, str]) -> str:
    return ", ".join(bots) or "none"


def _set(args: list[str]) -> BotsCommand:
    if not args:
        return Bad("setting", "", ", ".join(SETTINGS))
    name, values = args[0].lower(), args[1:]
    if name == "choices":
        if not values:
            return SetChoices(None)
        if len(values) == 1 and values[0].lower() in CHOICES:
            return SetChoices(values[0].lower())
        return Bad("choices", " ".join(values), ", ".join(CHOICES))
    if name == "quiet":
        if not values:
            return SetQuiet(None)
        if len(values) == 1 and values[0].lower() in ("off", "none"):
            return SetQuiet("off")
        quiet = parse_quiet(" ".join(values))
        return quiet if isinstance(quiet, Bad) else SetQuiet(quiet)
    return Bad("setting", args[0], ", ".join(SETTINGS))


def parse_quiet(text: str) -> Quiet | Bad:
    """``22:00-07:00`` or ``22:00-07:00 Europe/Dublin`` (``22-7`` reads as whole hours)."""
    span, _, zone = text.strip().partition(" ")
    zone = zone.strip()
    match = _QUIET.fullmatch(span)
    start = _clock_time(match.group(1)) if match else None
    end = _clock_time(match.group(2)) if match else None
    if start is None or end is None or start == end:
        return Bad("quiet", text.strip(), QUIET_FORM)
    if zone and zone not in system_zones():
        return Bad("quiet", text.strip(), QUIET_FORM, f"{zone!r} is not an IANA time zone (like Europe/Dublin or UTC)")
    return Quiet(start, end, zone or None)


def _clock_time(word: str) -> str | None:
    """``8:00``, ``08:00`` or ``8`` → ``08:00``; None when it is no time of day."""
    if word.isdecimal() and int(word) < 24:
        return f"{int(word):02d}:00"
    match = _TIME.fullmatch(word)
    return f"{int(match.group(1)):02d}:{match.group(2)}" if match else None


def _schedule(bot_word: str, rest: str, bots: Mapping[str, str]) -> BotsCommand:
    slug = resolve_bot(bot_word, bots) if bot_word else None
    if slug is None:
        return Bad("bot", bot_word, _bot_names(bots))
    found = _ASK.search(rest)
    if found is None:
        return Bad("ask", "", 'what it wakes up to do, after the word ask, in quotes: ask "Say good morning."')
    ask = _unquote(rest[found.end():])
    if not ask:
        return Bad("ask", "", 'what it wakes up to do, after the word ask, in quotes: ask "Say good morning."')
    when = rest[:found.start()].strip()
    fields = schedule_fields(when)
    if isinstance(fields, Bad):
        return fields
    try:
        schedule = Schedule.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"] if not str(part).startswith("~"))
        why = str(error["msg"]).removeprefix("Value error, ")
        return Bad("when", when, WHEN_FORM, f"{where}: {why}" if where else why)
    return AddSchedule(slug, schedule, ask)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text


def schedule_fields(when: str) -> dict[str, Any] | Bad:
    """``every monday and thursday at 08:00 zone Europe/Dublin`` → the recurrence grammar's fields
    (``{every: week, on: [monday, thursday], at: '08:00', zone: Europe/Dublin}``). Only the words are
    read here; whether they make a schedule is the grammar's to say."""
    tokens = [t for t in re.split(r"[\s,]+", when.strip()) if t and t.lower() != "and"]
    tokens = [part for t in tokens for part in _key_value(t)]
    fields: dict[str, Any] = {}
    i = 0

    def bad(why: str) -> Bad:
        return Bad("when", when, WHEN_FORM, why)

    while i < len(tokens):
        key = tokens[i].lower()
        if key not in _WHEN_KEYS:
            return bad(f"'{tokens[i]}' is none of {', '.join(_WHEN_KEYS)}")
        if key == "on" and "on" in fields:
            return bad("the days are said once: 'every monday' or 'every week on monday'")
        if key in fields or (key == "in" and "zone" in fields):
            return bad(f"'{key}' is said twice")
        j = i + 1
        while j < len(tokens) and tokens[j].lower() not in _WHEN_KEYS:
            j += 1
        values = tokens[i + 1:j]
        if not values:
            return bad(f"'{key}' needs a value")
        i = j
        if key == "every":
            every = _every(values)
            if isinstance(every, str):
                return bad(every)
            if "on" in every and "on" in fields:
                return bad("the days are said once: 'every monday' or 'every week on monday'")
            fields.update(every)
        elif key == "on":
            days = [_weekday(v) for v in values]
            if None in days:
                return bad(f"'on' takes days of the week ({', '.join(WEEKDAYS)})")
            fields["on"] = list(dict.fromkeys(d for d in days if d))
        elif key == "at":
            at = _clock_time(values[0]) if len(values) == 1 else None
            fields["at"] = at or " ".join(values)
        elif key in ("zone", "in"):
            fields["zone"] = " ".join(values)
        elif key == "until":
            fields["until"] = " ".join(values)
        else:
            fields["except"] = values
    if "every" not in fields:
        return bad("say how often, starting with every")
    return fields


def _key_value(token: str) -> list[str]:
    """``at=08:00`` and ``on:monday`` are the same as ``at 08:00`` (fields may be named)."""
    for sep in ("=", ":"):
        key, found, value = token.partition(sep)
        if found and key.lower() in _WHEN_KEYS and value and not _TIME.fullmatch(token):
            return [key, value]
    return [token]


def _weekday(word: str) -> str | None:
    w = word.lower()
    for day in WEEKDAYS:
        if w in (day, day + "s", day[:3]):
            return day
    return None


def _every(values: list[str]) -> dict[str, Any] | str:
    """``every``'s words → fields, or why not."""
    first = values[0].lower()
    days = [_weekday(v) for v in values]
    if all(days):
        return {"every": "week", "on": list(dict.fromkeys(d for d in days if d))}
    if first in ("weekday", "weekdays") and len(values) == 1:
        return {"every": "day", "on": list(WEEKDAYS[:5])}
    if first == "other" and len(values) == 2:
        values = ["2", values[1]]
        first = "2"
    if len(values) == 1:
        unit = first.rstrip("s") if first != "daily" else "day"
        if unit in ("day", "week", "month"):
            return {"every": unit}
        if unit in ("minute", "hour"):
            return {"every": f"1 {unit}s"}
        return f"'every {values[0]}' is not how often"
    if len(values) == 2 and first.isdecimal() and len(first) > 4:
        return f"'every {' '.join(values)}' is further apart than a schedule goes (at most 9999)"
    if len(values) == 2 and first.isdecimal() and int(first) > 0:
        unit = values[1].lower().rstrip("s")
        if unit in ("minute", "hour"):
            return {"every": f"{int(first)} {unit}s"}
        if unit in ("day", "week", "month"):
            return {"every": unit, **({"interval": int(first)} if int(first) > 1 else {})}
    return f"'every {' '.join(values)}' is not how often"


def schedule_words(schedule: Schedule) -> str:
    """A schedule said back in the words it could have been written in."""
    count, unit = schedule.period
    if unit in ("minute", "hour"):
        said = f"every {count} {unit}s"
    elif schedule.interval > 1:
        said = f"every {schedule.interval} {unit}s"
    else:
        said = f"every {unit}"
    if schedule.on:
        said += " on " + ", ".join(schedule.on)
    if schedule.at:
        said += f" at {schedule.at}"
    said += f" ({schedule.zone or 'UTC'})"
    if schedule.until:
        said += f" until {schedule.until.isoformat()}"
    if schedule.except_:
        said += " except " + ", ".join(d.isoformat() for d in schedule.except_)
    return said


def schedule_setting(schedule: Schedule) -> dict[str, Any]:
    """The fields as stored (as a bot's file would write them: only what differs from nothing)."""
    return schedule.model_dump(mode="json", by_alias=True, exclude_defaults=True)
