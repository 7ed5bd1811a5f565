"""Matrix rooms as the places runs are in (``engine.store.places.Places``): a room's admins' settings (``!bots``),
whose puppets are joined, whether it is encrypted, and since when everybody reading it now has been in it — read
from the rooms the service keeps (``rooms``, ``room_members``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from appservice.matrix.tables.rooms import RoomTables
from engine.store import Families
from engine.store.places import PlaceRules


class RoomPlaces:
    async def rules(self, db: Families, place: str) -> PlaceRules | None:
        room = await db.of(RoomTables).settings_now(place)
        return PlaceRules(room.settings, room.now) if room is not None else None

    async def present(self, db: Families, place: str, users: Sequence[str]) -> frozenset[str]:
        return frozenset(r.user_id for r in await db.of(RoomTables).ours(place, list(users)) if r.membership == "join")

    async def sealed(self, db: Families, place: str) -> bool:
        room = await db.of(RoomTables).get(place)
        return room is not None and room.encrypted

    async def read_by_all_since(self, db: Families, place: str) -> datetime | None:
        return await db.of(RoomTables).read_by_all_since(place)


ROOM_PLACES = RoomPlaces()
