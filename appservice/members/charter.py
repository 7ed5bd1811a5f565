"""A member bot's charter (SPEC §10): persona, schedule, task, what it may fetch, where it posts, whose it is.
Pure: validated by pydantic, with errors said as one line per field the builder can repair and relay.

The rules that depend on the deployment (the interval floor, whether a test's loopback feed server may be
named) come in as the validation context (``CharterRules``), never from a global.
"""

from __future__ import annotations

import ipaddress
import re
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from engine.tools.addresses import address_allowed, plain_loopback

FLOOR_SECONDS = 15 * 60  # the interval floor in production (SPEC §10); a setting lowers it for tests and demos
MAX_TOOL_CALLS = 16
# Sites one bot follows: each is a page read and up to four advertised feeds tried when it is made.
MAX_SOURCES = 10
USER_ID = re.compile(r"^@[^:\s]+:\S+$")


@dataclass(frozen=True)
class CharterRules:
    """What the deployment allows a charter: the shortest interval, and (tests only) loopback http feeds."""

    floor_seconds: int = FLOOR_SECONDS
    loopback_for_tests: bool = False


def _rules(info: ValidationInfo) -> CharterRules:
    context = info.context
    rules = context.get("rules") if isinstance(context, dict) else None
    return rules if isinstance(rules, CharterRules) else CharterRules()


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


_AT = re.compile(r"^([01]?[0-9]|2[0-3]):([0-5][0-9])$")
_EVERY = re.compile(r"^(\d+)\s*(m|min|mins|minute|minutes|h|hr|hrs|hour|hours)$", re.IGNORECASE)


class AtSchedule(_Strict):
    """Once a day at a local time: ``{"at": "08:00", "tz": "Europe/Dublin"}``."""

    at: str
    tz: str = "UTC"

    @field_validator("at")
    @classmethod
    def _at(cls, value: str) -> str:
        match = _AT.fullmatch(value)
        if match is None:
            raise ValueError(f"{value!r} is not a time of day; write it as HH:MM on a 24-hour clock, like 08:00")
        return f"{int(match.group(1)):02d}:{match.group(2)}"

    @field_validator("tz")
    @classmethod
    def _tz(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not a time zone; name one like Europe/Dublin or America/New_York") from None
        return value


class EverySchedule(_Strict):
    """Every so often: ``{"every": "2 hours"}`` or ``{"every": "30 minutes"}``, counted from the last edition."""

    every: str

    @field_validator("every", mode="before")
    @classmethod
    def _every(cls, value: object, info: ValidationInfo) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = f"{value} minutes"
        if not isinstance(value, str):
            raise ValueError("every: say how often, like '30 minutes' or '2 hours'")
        match = _EVERY.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"{value!r} is not an interval; say it like '30 minutes' or '2 hours'")
        count = int(match.group(1))
        seconds = count * (3600 if match.group(2).lower().startswith("h") else 60)
        floor = _rules(info).floor_seconds
        if seconds < floor:
            raise ValueError(f"every {value.strip()} is more often than this server allows; the shortest is "
                             f"{_span(floor)}")
        if seconds > 7 * 86_400:
            raise ValueError(f"every {value.strip()} is longer than a week; for a daily bot say a time of day instead")
        return f"{seconds // 60} minutes"

    @property
    def seconds(self) -> int:
        return int(self.every.split()[0]) * 60


def _span(seconds: int) -> str:
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours} hour{'s' if hours != 1 else ''}"
    if seconds % 60 == 0:
        minutes = seconds // 60
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds} seconds"


def allow_entry_refusal(entry: str, rules: CharterRules) -> str | None:
    """Why a fetch allow-list entry is refused, in words; None when it is a plain https prefix of a public site."""
    try:
        parts = urlsplit(entry)
        host = (parts.hostname or "").lower()
        _ = parts.port
    except ValueError:
        return f"{entry!r} is not an address I can read"
    loopback = rules.loopback_for_tests and _is_plain_loopback(host)
    if parts.scheme != "https" and not (loopback and parts.scheme == "http"):
        return f"{entry!r} is not an https address (only https:// sites can be read)"
    if not host:
        return f"{entry!r} names no site"
    if parts.username is not None or parts.password is not None:
        return f"{entry!r} has a user name or password in it"
    if parts.query or parts.fragment:
        return f"{entry!r} is an address prefix: it takes no ?query or #fragment"
    if host == "localhost" or host.endswith(".localhost"):
        return f"{entry!r} is this machine (loopback), which a bot may not read" if not loopback else None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    why = address_allowed(host)
    if why is not None and not loopback:
        return f"{entry!r} is not a public address: {why}"
    return None


def _is_plain_loopback(host: str) -> bool:
    return host == "localhost" or plain_loopback(host)


def _schedule_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        return "at" if "at" in value else "every" if "every" in value else None
    return "at" if isinstance(value, AtSchedule) else "every" if isinstance(value, EverySchedule) else None


ScheduleField = Annotated[
    Annotated[AtSchedule, Tag("at")] | Annotated[EverySchedule, Tag("every")],
    Discriminator(_schedule_kind, custom_error_type="schedule",
                  custom_error_message='say when it posts: {"at": "08:00", "tz": "Europe/Dublin"} or '
                                       '{"every": "2 hours"}'),
]


class Charter(_Strict):
    """What a member bot is. ``owner`` is whom it is for, ``author`` who wrote it; ``room_id`` is its own
    room (set when it is born)."""

    v: Literal[1] = 1
    name: Annotated[str, Field(min_length=1, max_length=64)]
    glyph: Annotated[str, Field(min_length=1, max_length=8)] = "🤖"
    schedule: ScheduleField
    prompt: Annotated[str, Field(min_length=1, max_length=4000)]
    tools: tuple[Literal["fetch", "card"], ...] = ("fetch", "card")
    allow: tuple[str, ...] = ()
    sources: tuple[Annotated[str, Field(min_length=1, max_length=200)], ...] = ()
    card: bool = True
    max_tool_calls: Annotated[int, Field(ge=1, le=MAX_TOOL_CALLS)] = 6
    owner: str
    author: str
    room_id: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if any(ch in value for ch in "\n\r\t"):
            raise ValueError("a name is one line")
        return value

    @field_validator("glyph")
    @classmethod
    def _glyph(cls, value: str) -> str:
        if any(ch.isspace() for ch in value) or any(ch.isalnum() for ch in value):
            raise ValueError(f"{value!r} is not a glyph; give one emoji, like 📰")
        return value

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        rules = _rules(info)
        if len(value) > 20:
            raise ValueError(f"{len(value)} sources is too many; a bot may read at most 20")
        for entry in value:
            why = allow_entry_refusal(entry, rules)
            if why is not None:
                raise ValueError(why)
        return tuple(dict.fromkeys(value))

    @field_validator("sources")
    @classmethod
    def _sources(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > MAX_SOURCES:
            raise ValueError(f"{len(value)} sources is too many; a bot may follow at most {MAX_SOURCES} sites")
        return tuple(dict.fromkeys(value))

    @field_validator("owner", "author")
    @classmethod
    def _user(cls, value: str) -> str:
        if not USER_ID.fullmatch(value):
            raise ValueError(f"{value!r} is not a Matrix user id (@name:server)")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(value))

    @property
    def fetches(self) -> tuple[str, ...]:
        """The prefixes its runs may fetch: none unless it has the fetch tool (no allow-list, no network)."""
        return self.allow if "fetch" in self.tools else ()

    def sealable(self) -> bytes:
        return self.model_dump_json(exclude_none=False).encode()


def read_charter(data: Any, rules: CharterRules | None = None) -> Charter:
    """A charter from what the builder (or the store) handed over; raises ``ValueError`` whose message is one
    line per field that is wrong (``charter_errors``)."""
    try:
        if isinstance(data, bytes | str):
            return Charter.model_validate_json(data, context={"rules": rules or CharterRules()})
        return Charter.model_validate(data, context={"rules": rules or CharterRules()})
    except ValidationError as exc:
        raise ValueError(charter_errors(exc.errors(include_url=False))) from None


def charter_errors(errors: Iterable[Any]) -> str:
    """Pydantic's errors as lines a person (and the builder) can act on: ``schedule.every: …``."""
    lines: list[str] = []
    for error in errors:
        loc = list(error.get("loc", ()))
        if len(loc) > 2 and loc[0] == "schedule" and loc[1] in ("at", "every"):
            del loc[1]  # the discriminator's tag: "schedule.every", not "schedule.every.every"
        where = ".".join(str(part) for part in loc)
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        if error.get("type") == "extra_forbidden":
            message = "is not part of a charter"
        elif error.get("type") == "missing":
            message = "is missing"
        line = f"{where}: {message}" if where else message
        if line not in lines:
            lines.append(line)
    return "; ".join(lines)


# --- who may do what to a charter -------------------------------------------------------------------------

def may_make_for(by: str, owner: str) -> bool:
    """A member makes bots for themselves: the builder never makes one owned by somebody else."""
    return by == owner


def may_overwrite(*, author: str, owner: str, by: str) -> bool:
    """Overwrite: its author or its owner."""
    return by in (author, owner)


def may_remove(*, author: str, owner: str, by: str, admin: bool) -> bool:
    """Delete: its author, its owner, or a server admin (moderation without reading it)."""
    return admin or by in (author, owner)
