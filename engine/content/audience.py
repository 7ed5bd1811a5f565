"""The audience grammar (``for:``, ``serves:``, a tool's or skill's ``for:``) and its evaluation.

An expression is one class or a list of classes; a list admits whoever any one of them admits.
Evaluation is pure: the caller reads the room (power levels, membership) and the site's people
tables into ``AudienceFacts``; ``admits`` only compares. Moderator and admin come from the room's
own power levels — never a hard-coded 100 — and room version 12 creators count as admins.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The classes that stand alone, and the ones that take an argument after a colon.
PLAIN = ("anyone", "authenticated", "local", "member", "moderator", "admin", "customer", "subscribed")
ARGUED = {
    "user": "user:@name:server",
    "server": "server:<name>",
    "tier": "tier:<slug>",
    "role": "role:<name>",
    "bought": "bought:<product>",
}
# Classes the site's people tables decide; the caller lists a person's in ``site_classes``.
SITE_KINDS = frozenset({"customer", "subscribed", "tier", "role", "bought"})
KNOWN = ", ".join([*PLAIN, *ARGUED.values()])

_USER_ID = re.compile(r"@[^\s:]+:[^\s:][^\s]*")
_SERVER = re.compile(r"[A-Za-z0-9.\-]+(?::[0-9]+)?|\[[0-9A-Fa-f:.]+\](?::[0-9]+)?")
_SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
_WORD = re.compile(r"\S+")
_ARG_SHAPES = {"user": _USER_ID, "server": _SERVER, "tier": _SLUG, "role": _WORD, "bought": _WORD}

# Matrix's own defaults (client-server spec, m.room.power_levels).
USERS_DEFAULT = 0
STATE_DEFAULT = 50
MODERATION_DEFAULT = 50
# Without a power_levels event the creator holds 100 and changing state needs it.
NO_POWER_LEVELS_CREATOR = 100


class AudienceError(ValueError):
    """An expression that does not parse. ``index`` is the first bad list item, if it was a list."""

    def __init__(self, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.index = index


@dataclass(frozen=True)
class Term:
    kind: str
    arg: str | None = None

    def __str__(self) -> str:
        return self.kind if self.arg is None else f"{self.kind}:{self.arg}"


@dataclass(frozen=True)
class Audience:
    """Any of ``terms`` admits. ``listed`` remembers whether the author wrote a list, for writing back."""

    terms: tuple[Term, ...]
    listed: bool = False

    def expression(self) -> str | list[str]:
        """The expression as an author writes it."""
        if len(self.terms) == 1 and not self.listed:
            return str(self.terms[0])
        return [str(term) for term in self.terms]

    def __str__(self) -> str:
        return ", ".join(str(term) for term in self.terms)


@dataclass(frozen=True)
class AudienceFacts:
    """What is known about the person asking, gathered by the caller. ``user_id`` None is nobody
    (an unsigned desk guest)."""

    user_id: str | None
    local_server: str
    is_member: bool = False
    power_level: int = USERS_DEFAULT
    moderator_level: int = MODERATION_DEFAULT
    admin_level: int = NO_POWER_LEVELS_CREATOR
    is_creator: bool = False
    site_classes: frozenset[str] = frozenset()

    @property
    def server(self) -> str | None:
        return server_of(self.user_id) if self.user_id is not None else None

    @property
    def is_admin(self) -> bool:
        return self.user_id is not None and (self.is_creator or self.power_level >= self.admin_level)

    @property
    def is_moderator(self) -> bool:
        return self.user_id is not None and (self.is_admin or self.power_level >= self.moderator_level)


def server_of(user_id: str) -> str:
    """The server part of ``@local:server`` (everything after the first colon)."""
    _, _, server = user_id.partition(":")
    return server


def parse_term(text: str) -> Term:
    word = text.strip()
    if word in PLAIN:
        return Term(word)
    kind, colon, arg = word.partition(":")
    if colon and kind in ARGUED:
        if not _ARG_SHAPES[kind].fullmatch(arg):
            raise AudienceError(f"'{word}' is not a valid audience class: write it as {ARGUED[kind]}")
        return Term(kind, arg)
    raise AudienceError(f"unknown audience class '{word}' (known: {KNOWN})")


def parse_audience(value: object) -> Audience:
    """An expression (a class, or a list of them) → ``Audience``. Raises ``AudienceError``."""
    if isinstance(value, Audience):
        return value
    if isinstance(value, str):
        return Audience((parse_term(value),))
    if isinstance(value, list | tuple):
        if not value:
            raise AudienceError("an empty list admits no one: leave the key out to mean anyone, or name who")
        terms: list[Term] = []
        unknown: list[str] = []
        first_bad: int | None = None
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise AudienceError(f"an audience class is a word like 'member', not {item!r}", index)
            try:
                terms.append(parse_term(item))
            except AudienceError as exc:
                if first_bad is None:
                    first_bad = index
                if not str(exc).startswith("unknown"):
                    raise AudienceError(str(exc), index) from None
                unknown.append(item.strip())
        if unknown:
            names = ", ".join(f"'{name}'" for name in unknown)
            plural = "es" if len(unknown) > 1 else ""
            raise AudienceError(f"unknown audience class{plural} {names} (known: {KNOWN})", first_bad)
        return Audience(tuple(terms), listed=True)
    raise AudienceError(f"an audience is a class like 'member' or a list of them, not {value!r}")


def admits(audience: Audience | None, facts: AudienceFacts) -> bool:
    """Whether ``audience`` admits the person ``facts`` describe. None (unset) admits anyone the
    surface already allows."""
    if audience is None:
        return True
    return any(_admits_term(term, facts) for term in audience.terms)


def _admits_term(term: Term, facts: AudienceFacts) -> bool:
    match term.kind:
        case "anyone":
            return True
        case "authenticated":
            return facts.user_id is not None
        case "local":
            return facts.server == facts.local_server
        case "member":
            return facts.user_id is not None and facts.is_member
        case "moderator":
            return facts.is_moderator
        case "admin":
            return facts.is_admin
        case "user":
            return facts.user_id == term.arg
        case "server":
            return facts.server == term.arg
        case _ if term.kind in SITE_KINDS:
            return str(term) in facts.site_classes
    raise AssertionError(f"audience term {term} has no rule")  # parse_term admits only known kinds


def room_version_has_creators(room_version: str) -> bool:
    """Room version 12 (and later numbered versions) make the creators all-powerful.
    ``org.matrix.hydra.11`` is the unstable version of the same rules."""
    if room_version.isdigit():
        return int(room_version) >= 12
    return room_version == "org.matrix.hydra.11"


def facts_from_power_levels(
    user_id: str | None,
    power_levels_content: Mapping[str, Any] | None,
    create_content: Mapping[str, Any] | None,
    room_version: str,
    is_member: bool,
    local_server: str,
    site_classes: frozenset[str] = frozenset(),
    *,
    create_sender: str | None = None,
) -> AudienceFacts:
    """Read a room's ``m.room.power_levels`` and ``m.room.create`` the way the Matrix spec does.

    ``create_sender`` is the sender of ``m.room.create``: the creator in room versions 11+ (which
    dropped ``content.creator``) and, with ``content.additional_creators``, the creators of v12.
    """
    create = create_content or {}
    creator = create.get("creator") if isinstance(create.get("creator"), str) else create_sender
    creators: set[str] = set()
    if room_version_has_creators(room_version):
        if create_sender is not None:
            creators.add(create_sender)
        extra = create.get("additional_creators")
        if isinstance(extra, list):
            creators.update(item for item in extra if isinstance(item, str))
    is_creator = user_id is not None and user_id in creators

    if power_levels_content is None:
        power = NO_POWER_LEVELS_CREATOR if user_id is not None and user_id in (creator, *creators) else 0
        return AudienceFacts(
            user_id=user_id,
            local_server=local_server,
            is_member=is_member,
            power_level=power,
            moderator_level=MODERATION_DEFAULT,
            admin_level=NO_POWER_LEVELS_CREATOR,
            is_creator=is_creator,
            site_classes=site_classes,
        )

    levels = power_levels_content
    users = levels.get("users")
    users = users if isinstance(users, Mapping) else {}
    events = levels.get("events")
    events = events if isinstance(events, Mapping) else {}
    users_default = _level(levels.get("users_default"), USERS_DEFAULT)
    state_default = _level(levels.get("state_default"), STATE_DEFAULT)
    power = _level(users.get(user_id), users_default) if user_id is not None else USERS_DEFAULT
    # A moderator can both remove people and remove what they said.
    moderator_level = max(
        _level(levels.get("kick"), MODERATION_DEFAULT), _level(levels.get("redact"), MODERATION_DEFAULT)
    )
    # An admin can change who holds power: the level the power levels event itself needs.
    admin_level = _level(events.get("m.room.power_levels"), state_default)
    return AudienceFacts(
        user_id=user_id,
        local_server=local_server,
        is_member=is_member,
        power_level=power,
        moderator_level=moderator_level,
        admin_level=admin_level,
        is_creator=is_creator,
        site_classes=site_classes,
    )


def facts_in_room(user_id: str | None, room: Mapping[str, Any], local_server: str, *, is_member: bool = True,
                  site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
    """``facts_from_power_levels`` read off a stored room row (its power levels, creation and version)."""
    return facts_from_power_levels(
        user_id, room["power_levels"], room["create_content"], room["room_version"] or "1", is_member,
        local_server, site_classes, create_sender=room["create_sender"],
    )


def state_level(power_levels_content: Mapping[str, Any] | None, event_type: str | None = None) -> int:
    """The level a room asks of whoever sends ``event_type`` state (its ``events`` entry, else
    ``state_default``); with no power levels event, only the creator's 100 will do."""
    if power_levels_content is None:
        return NO_POWER_LEVELS_CREATOR
    events = power_levels_content.get("events")
    needed = events.get(event_type) if isinstance(events, Mapping) and event_type is not None else None
    return _level(needed, _level(power_levels_content.get("state_default"), STATE_DEFAULT))


def redact_level(power_levels_content: Mapping[str, Any] | None) -> int:
    """The level a room asks of whoever removes somebody else's event (``redact``, 50 by default)."""
    return _level((power_levels_content or {}).get("redact"), MODERATION_DEFAULT)


def _level(value: object, default: int) -> int:
    """A power level as rooms store it: an integer, or (in old room versions) a string of one."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return default
    return default
