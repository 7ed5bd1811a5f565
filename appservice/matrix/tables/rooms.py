"""The rooms we are in and who is in them: their state as we keep it, and the settings their admins set
(``sql/queries/rooms.sql``). A room's state is stored as the surface hands it over; what it *means* (who is a
moderator) is the surface's to say."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store import Tx
from engine.store.base import Family, maybe, rows


@dataclass(frozen=True, slots=True)
class Room:
    """A room's row: whether it is encrypted, the state we rely on, and its admins' settings."""

    room_id: str
    encrypted: bool
    left_at: datetime | None
    room_version: str | None
    create_content: dict[str, Any] | None
    create_sender: str | None
    power_levels: dict[str, Any] | None
    history_visibility: str | None
    settings: dict[str, Any]
    join_rule: str | None = None  # who may join without an invite, as last stored (None: never seen)
    direct: bool = False  # one of our puppets was invited to it as a direct chat (is_direct)


@dataclass(frozen=True, slots=True)
class Member:
    membership: str
    display_name: str | None
    updated_at: datetime | None = None  # when a membership event of theirs was last stored


@dataclass(frozen=True, slots=True)
class Membership:
    user_id: str
    membership: str


@dataclass(frozen=True, slots=True)
class Person:
    user_id: str
    display_name: str | None


@dataclass(frozen=True, slots=True)
class RoomSettings:
    """A room's settings, whether it is encrypted, and the database's now (quiet hours are read against it)."""

    settings: dict[str, Any]
    encrypted: bool
    now: datetime


class RoomTables(Family):
    __slots__ = ()

    async def ensure(self, room_id: str) -> None:
        await self._run("ensure_room", room_id)

    async def lock(self, room_id: str) -> None:
        """Take the room's row for the rest of the transaction (everything stored about a room queues up)."""
        await self._value("lock_room", room_id)

    async def take(self, room_id: str) -> None:
        """The room's row, made the first time we hear from it, taken for the rest of the transaction: one
        statement when it exists (the usual case), three the first time."""
        if await self._value("lock_room", room_id) is None:
            await self._run("ensure_room", room_id)
            await self._value("lock_room", room_id)

    async def get(self, room_id: str) -> Room | None:
        return maybe(Room, await self._one("get_room", room_id))

    async def mark_encrypted(self, room_id: str) -> bool:
        """True only the first time."""
        return await self._value("mark_room_encrypted", room_id) is not None

    async def mark_left(self, room_id: str) -> None:
        await self._run("mark_room_left", room_id)

    async def mark_joined(self, room_id: str) -> None:
        await self._run("mark_room_joined", room_id)

    async def set_create(self, room_id: str, content: dict[str, Any], sender: str | None, version: str) -> None:
        await self._run("set_room_create", room_id, content, sender, version)

    async def set_power_levels(self, room_id: str, content: dict[str, Any]) -> None:
        await self._run("set_room_power_levels", room_id, content)

    async def mark_direct(self, room_id: str) -> None:
        await self._run("mark_room_direct", room_id)

    async def set_join_rule(self, room_id: str, rule: str) -> None:
        await self._run("set_room_join_rule", room_id, rule)

    async def set_history_visibility(self, room_id: str, visibility: str) -> None:
        await self._run("set_room_history_visibility", room_id, visibility)

    async def set_member(self, room_id: str, user_id: str, membership: str, display_name: str | None) -> None:
        await self._run("upsert_member", room_id, user_id, membership, display_name)

    async def member(self, room_id: str, user_id: str) -> Member | None:
        return maybe(Member, await self._one("get_member", room_id, user_id))

    async def ours(self, room_id: str, user_ids: list[str]) -> list[Membership]:
        """Which of ``user_ids`` (ours) are joined or invited."""
        return rows(Membership, await self._all("our_members", room_id, user_ids))

    async def readers(self, room_id: str) -> list[Membership]:
        """Everyone who reads what is said there from now on: joined, or invited (they read it on joining)."""
        return rows(Membership, await self._all("room_readers", room_id))

    async def direct_readers(self, room_id: str, most: int) -> list[Membership]:
        """At most ``most`` of the room's readers when it is a direct chat (none otherwise): a DM is told from a
        room without reading a big room whole."""
        return rows(Membership, await self._all("room_direct_readers", room_id, most))

    async def read_by_all_since(self, room_id: str) -> datetime | None:
        """Since when everybody who reads the room now has been in it (the latest join or invite among them)."""
        value = await self._value("room_read_by_all_since", room_id)
        return value if isinstance(value, datetime) else None

    async def people(self, room_id: str) -> list[Person]:
        """Who is joined now, with the display name the room shows."""
        return rows(Person, await self._all("room_people", room_id))

    async def joined_by(self, user_id: str) -> list[str]:
        """The readable rooms ``user_id`` (a puppet) is joined to that we are still in."""
        return [str(r["room_id"]) for r in await self._all("rooms_joined_by", user_id)]

    async def encrypted(self) -> list[str]:
        return [str(r["room_id"]) for r in await self._all("encrypted_rooms")]

    async def settings_now(self, room_id: str) -> RoomSettings | None:
        return maybe(RoomSettings, await self._one("room_settings_now", room_id))

    async def set_setting(self, room_id: str, key: str, value: Any) -> dict[str, Any]:
        """The room's settings after ``key`` is set to ``value``."""
        settings = await self._value("set_room_setting", room_id, key, value)
        return settings if isinstance(settings, dict) else {}

    async def clear_setting(self, room_id: str, key: str) -> dict[str, Any]:
        settings = await self._value("clear_room_setting", room_id, key)
        return settings if isinstance(settings, dict) else {}


async def take_room(tx: Tx, room_id: str) -> None:
    """The room's row taken once a transaction (``Tx.take_once``): a homeserver transaction's hundred events in one
    room take it once, and a savepoint rolled back forgets it was taken."""
    await tx.take_once(f"room:{room_id}", lambda: tx.of(RoomTables).take(room_id))
