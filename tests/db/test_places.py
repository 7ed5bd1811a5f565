"""What the engine asks of a run's place (``engine/store/places.py``), answered for Matrix rooms by
``appservice/matrix/places.py`` from the rooms the service keeps — and by nobody in a store opened without one."""

from __future__ import annotations

import pytest

from appservice.matrix.places import ROOM_PLACES
from appservice.matrix.tables.rooms import RoomTables
from engine.store.places import NO_PLACES
from tests.store import TestStore

pytestmark = pytest.mark.db
ROOM = "!places:localhost"


async def test_a_room_answers_its_rules_who_is_in_it_and_whether_it_is_sealed(db: TestStore) -> None:
    assert db.places is ROOM_PLACES  # the tests' store is opened as the service opens it
    assert await ROOM_PLACES.rules(db, ROOM) is None and not await ROOM_PLACES.sealed(db, ROOM)  # unknown: no say
    await db.of(RoomTables).ensure(ROOM)
    await db.of(RoomTables).set_member(ROOM, "@bot_a:localhost", "join", "A")
    await db.of(RoomTables).set_member(ROOM, "@bot_b:localhost", "leave", "B")
    await db.of(RoomTables).set_setting(ROOM, "quiet", {"from": "22:00", "to": "07:00"})
    async with db.transaction("t") as tx:
        assert tx.places is ROOM_PLACES  # a transaction asks what its store was given
        rules = await tx.places.rules(tx, ROOM)
        assert rules is not None and rules.settings == {"quiet": {"from": "22:00", "to": "07:00"}}
        assert await tx.places.present(tx, ROOM, ["@bot_a:localhost", "@bot_b:localhost", "@c:localhost"]) == {
            "@bot_a:localhost"}
    assert not await ROOM_PLACES.sealed(db, ROOM)
    await db.of(RoomTables).mark_encrypted(ROOM)
    assert await ROOM_PLACES.sealed(db, ROOM)


async def test_a_store_with_no_places_knows_nothing_of_any(db: TestStore) -> None:
    await db.of(RoomTables).ensure(ROOM)
    await db.of(RoomTables).mark_encrypted(ROOM)
    assert await NO_PLACES.rules(db, ROOM) is None
    assert not await NO_PLACES.sealed(db, ROOM)
    assert await NO_PLACES.present(db, ROOM, ["@bot_a:localhost"]) == frozenset()
    assert await NO_PLACES.read_by_all_since(db, ROOM) is None
