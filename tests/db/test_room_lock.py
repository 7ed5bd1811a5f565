"""Everything stored about a room takes the room's row first (so two transactions touching one room queue up
rather than deadlock); a homeserver transaction's many events in one room take it once, and a savepoint rolled
back — which gives back the row locks taken inside it — is not mistaken for still holding it."""

from __future__ import annotations

import asyncpg
import pytest

from appservice.matrix.tables.rooms import RoomTables, take_room
from engine.content import Registry
from tests.db.test_ingest import count, feed, message, pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db


async def locked_elsewhere(db: TestStore, room_id: str) -> bool:
    """Whether another connection finds the room's row taken."""
    async with db.pool.acquire() as other, other.transaction():
        try:
            await other.fetchval("SELECT room_id FROM rooms WHERE room_id = $1 FOR UPDATE NOWAIT", room_id)
        except asyncpg.LockNotAvailableError:
            return True
        return False


async def test_a_room_taken_in_a_savepoint_rolled_back_is_taken_again(db: TestStore) -> None:
    for room in ("!a:localhost", "!b:localhost"):
        await db.of(RoomTables).ensure(room)
    async with db.transaction("t") as tx:
        await take_room(tx, "!a:localhost")
        with pytest.raises(RuntimeError):
            async with tx.savepoint():
                await take_room(tx, "!b:localhost")
                assert await locked_elsewhere(db, "!b:localhost")
                raise RuntimeError("this event fails")
        assert not await locked_elsewhere(db, "!b:localhost")  # the rollback gave it back
        await take_room(tx, "!b:localhost")
        assert await locked_elsewhere(db, "!b:localhost")  # taken again, not skipped as held
        await take_room(tx, "!a:localhost")
        assert await locked_elsewhere(db, "!a:localhost")
    assert not await locked_elsewhere(db, "!a:localhost")


async def test_a_room_first_heard_of_gets_its_row_and_its_events(db: TestStore, published: Registry) -> None:
    ingest = pipeline(db, published)
    await feed(ingest, db, "t1", [{**message(f"line {n}"), "room_id": "!new:localhost"} for n in range(3)])
    assert await count(db, "SELECT count(*) FROM rooms WHERE room_id = '!new:localhost'") == 1
    assert await count(db, "SELECT count(*) FROM room_events WHERE room_id = '!new:localhost'") == 3
