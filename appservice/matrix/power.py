"""A person's standing in a Matrix room, read from its ``m.room.power_levels`` and ``m.room.create`` the way
the spec does — never a hard-coded 100 — and handed to the engine as facts (``AudienceFacts``: a member? a
moderator? an admin?), never as an event. Room version 12 creators count as admins. ``facts_in_room`` is pure;
``facts_now`` reads the room as stored (its members, its join rule) to ask the same of a room by id."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from appservice.matrix.ours import PUPPET_PREFIX, in_our_namespace
from appservice.matrix.tables.rooms import Room, RoomTables
from engine.content.audience import AudienceFacts
from engine.store import Families

# Matrix's own defaults (client-server spec, m.room.power_levels).
USERS_DEFAULT = 0
STATE_DEFAULT = 50
MODERATION_DEFAULT = 50
# Without a power_levels event the creator holds 100 and changing state needs it.
NO_POWER_LEVELS_CREATOR = 100


@dataclass(frozen=True)
class Standing:
    """Where ``user_id`` stands by a room's power levels: their level, the levels a moderator and an admin
    need there, and whether they are one of the room's (version 12) creators."""

    user_id: str | None
    power_level: int = USERS_DEFAULT
    moderator_level: int = MODERATION_DEFAULT
    admin_level: int = NO_POWER_LEVELS_CREATOR
    is_creator: bool = False

    @property
    def is_admin(self) -> bool:
        # An admin can change who holds power: the level the power levels event itself needs.
        return self.user_id is not None and (self.is_creator or self.power_level >= self.admin_level)

    @property
    def is_moderator(self) -> bool:
        # A moderator can both remove people and remove what they said.
        return self.user_id is not None and (self.is_admin or self.power_level >= self.moderator_level)

    def holds(self, level: int) -> bool:
        """Whether they may do what needs ``level`` (creators of v12 rooms hold every level)."""
        return self.is_creator or self.power_level >= level

    def facts(self, local_server: str, *, is_member: bool = True,
              site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        return AudienceFacts(user_id=self.user_id, local_server=local_server, is_member=is_member,
                             is_moderator=self.is_moderator, is_admin=self.is_admin, site_classes=site_classes)


def room_version_has_creators(room_version: str) -> bool:
    """Room version 12 (and later numbered versions) make the creators all-powerful.
    ``org.matrix.hydra.11`` is the unstable version of the same rules."""
    if room_version.isdigit():
        return int(room_version) >= 12
    return room_version == "org.matrix.hydra.11"


def standing(
    user_id: str | None,
    power_levels_content: Mapping[str, Any] | None,
    create_content: Mapping[str, Any] | None,
    room_version: str,
    *,
    create_sender: str | None = None,
) -> Standing:
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
        return Standing(user_id, power, MODERATION_DEFAULT, NO_POWER_LEVELS_CREATOR, is_creator)

    levels = power_levels_content
    users = levels.get("users")
    users = users if isinstance(users, Mapping) else {}
    events = levels.get("events")
    events = events if isinstance(events, Mapping) else {}
    users_default = _level(levels.get("users_default"), USERS_DEFAULT)
    state_default = _level(levels.get("state_default"), STATE_DEFAULT)
    power = _level(users.get(user_id), users_default) if user_id is not None else USERS_DEFAULT
    moderator_level = max(
        _level(levels.get("kick"), MODERATION_DEFAULT), _level(levels.get("redact"), MODERATION_DEFAULT)
    )
    admin_level = _level(events.get("m.room.power_levels"), state_default)
    return Standing(user_id, power, moderator_level, admin_level, is_creator)


def standing_in(user_id: str | None, room: Room) -> Standing:
    """``standing`` read off a stored room row."""
    return standing(user_id, room.power_levels, room.create_content, room.room_version or "1",
                    create_sender=room.create_sender)


def facts_in_room(user_id: str | None, room: Room, local_server: str, *, is_member: bool = True,
                  site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
    """What the engine is told about ``user_id`` in a stored room."""
    return standing_in(user_id, room).facts(local_server, is_member=is_member, site_classes=site_classes)


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


# The join rules under which nobody joins without being let in by a member (the spec's "invite", and "private",
# which it reserves and treats as invite).
INVITE_ONLY = frozenset({"invite", "private"})


async def facts_now(db: Families, room_id: str | None, user_id: str | None, *, server_name: str,
                    service_user: str | None = None, site_classes: frozenset[str] = frozenset(),
                    puppet_prefix: str = PUPPET_PREFIX) -> AudienceFacts:
    """A person as the room knows them now: a member? a moderator or an admin, by the room's own power
    levels? Is the room theirs alone (``private``)? With no room (or nobody), just who they are."""
    room = await db.of(RoomTables).get(room_id) if room_id is not None else None
    if user_id is None or room is None:
        return AudienceFacts(user_id=user_id, local_server=server_name, site_classes=site_classes)
    member = await db.of(RoomTables).member(room.room_id, user_id)
    joined = member is not None and member.membership == "join"
    facts = facts_in_room(user_id, room, server_name, is_member=joined, site_classes=site_classes)
    if joined and await _theirs_alone(db, room, user_id, server_name=server_name, service_user=service_user,
                                      puppet_prefix=puppet_prefix):
        facts = replace(facts, private=True)
    return facts


async def _theirs_alone(db: Families, room: Room, user_id: str, *, server_name: str, service_user: str | None,
                        puppet_prefix: str) -> bool:
    """Whether ``user_id`` is the only human who reads what is said in ``room`` (a DM with a bot), from the
    members as stored: every other joined or invited member is one of ours (a puppet, the service user).
    Anything less than sure is not private: a room whose state we never read (no creation stored, no join
    rule), one we left, a world-readable one (anyone may read it without joining), and one anybody may join
    or knock on without an invite (``public``, ``knock``, ``restricted``: who reads it is not fixed)."""
    if room.create_content is None or room.left_at is not None or room.history_visibility == "world_readable":
        return False
    if room.join_rule not in INVITE_ONLY:
        return False
    readers = await db.of(RoomTables).readers(room.room_id)
    people = {r.user_id for r in readers
              if not in_our_namespace(r.user_id, server_name=server_name, service_user=service_user,
                                      puppet_prefix=puppet_prefix)}
    return people == {user_id}
