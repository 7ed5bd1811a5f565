"""Remembered membership work on a real PostgreSQL: held while an attempt runs, taken by one process at a
time, backed off, given up in the end, and never rewritten once finished."""

from __future__ import annotations

import asyncio

import pytest

from appservice.matrix.rooms import MAX_ATTEMPTS, backoff
from appservice.matrix.tables.room_actions import RoomActionTables
from tests.store import TestStore

pytestmark = pytest.mark.db
ACTION = {"kind": "Join", "room_id": "!r:localhost", "user_id": "@bot_helper:localhost"}


async def remember(db: TestStore, hold: float) -> int:
    action_id = await db.of(RoomActionTables).remember("!r:localhost", ACTION, hold)
    assert action_id is not None
    return int(action_id)


async def test_an_action_held_by_its_first_attempt_is_not_claimed(db: TestStore) -> None:
    await remember(db, 60)
    assert await db.of(RoomActionTables).claim(1, 60) == []


async def test_a_due_action_is_claimed_by_exactly_one_of_many(db: TestStore) -> None:
    action_id = await remember(db, 0)
    claims = await asyncio.gather(*(db.of(RoomActionTables).claim(1, 60) for _ in range(10)))
    taken = [c for claim in claims for c in claim]
    assert len(taken) == 1 and taken[0].id == action_id and taken[0].action == ACTION and taken[0].attempts == 1
    assert await db.of(RoomActionTables).claim(1, 60) == []  # held now


async def test_failures_back_off_and_are_given_up_and_a_finished_action_is_never_rewritten(db: TestStore) -> None:
    action_id = await remember(db, 0)
    # The waits grow (RETRY_SECONDS × 4^(attempts before)) and the last attempt gives up.
    assert [backoff(n) for n in range(1, MAX_ATTEMPTS + 1)] == [15.0, 60.0, 240.0, 960.0, 3840.0, None]
    statuses = []
    for attempt in range(1, 4):
        await db.pool.execute("UPDATE room_actions SET next_attempt_at = now() WHERE id = $1", action_id)
        [claimed] = await db.of(RoomActionTables).claim(1, 60)
        assert claimed.attempts == attempt
        if attempt < 3:
            await db.of(RoomActionTables).retry(action_id, 15.0 * 4 ** (attempt - 1), "M_UNKNOWN: busy", claimed.attempts)
        else:
            await db.of(RoomActionTables).failed(action_id, "M_UNKNOWN: busy", claimed.attempts)
        statuses.append(await db.pool.fetchval("SELECT status FROM room_actions WHERE id = $1", action_id))
    assert statuses == ["pending", "pending", "failed"]
    await db.of(RoomActionTables).retry(action_id, 15.0, "again", 4)
    await db.of(RoomActionTables).failed(action_id, "again", 4)
    row = await db.pool.fetchrow("SELECT status, attempts, last_error FROM room_actions WHERE id = $1", action_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "M_UNKNOWN: busy")

    done = await remember(db, 0)
    await db.of(RoomActionTables).done(done, 1)
    await db.of(RoomActionTables).failed(done, "M_FORBIDDEN: already in", 2)
    assert await db.pool.fetchval("SELECT status FROM room_actions WHERE id = $1", done) == "done"


async def test_a_permanent_refusal_is_given_up_at_once(db: TestStore) -> None:
    action_id = await remember(db, 0)
    [claimed] = await db.of(RoomActionTables).claim(1, 60)
    await db.of(RoomActionTables).failed(action_id, "M_FORBIDDEN: not invited", claimed.attempts)
    row = await db.pool.fetchrow("SELECT status, attempts FROM room_actions WHERE id = $1", action_id)
    assert (row["status"], row["attempts"]) == ("failed", 1)
    assert await db.of(RoomActionTables).next_due() is None
