"""Remembered membership work on a real PostgreSQL: held while an attempt runs, taken by one process at a
time, backed off, given up in the end, and never rewritten once finished."""

from __future__ import annotations

import asyncio

import pytest

from tests.store import TestStore

pytestmark = pytest.mark.db
ACTION = {"kind": "Join", "room_id": "!r:localhost", "user_id": "@bot_helper:localhost"}


async def remember(db: TestStore, hold: float) -> int:
    action_id = await db.room_actions.remember("!r:localhost", ACTION, hold)
    assert action_id is not None
    return int(action_id)


async def test_an_action_held_by_its_first_attempt_is_not_claimed(db: TestStore) -> None:
    await remember(db, 60)
    assert await db.room_actions.claim(60) is None


async def test_a_due_action_is_claimed_by_exactly_one_of_many(db: TestStore) -> None:
    action_id = await remember(db, 0)
    claims = await asyncio.gather(*(db.room_actions.claim(60) for _ in range(10)))
    taken = [c for c in claims if c is not None]
    assert len(taken) == 1 and taken[0].id == action_id and taken[0].action == ACTION
    assert await db.room_actions.claim(60) is None  # held now


async def test_failures_back_off_and_are_given_up_and_a_finished_action_is_never_rewritten(db: TestStore) -> None:
    action_id = await remember(db, 0)
    statuses = [await db.room_actions.failed(action_id, "M_UNKNOWN: busy", retry_seconds=15.0, permanent=False,
                                                max_attempts=3)
                for _ in range(3)]
    assert statuses == ["pending", "pending", "failed"]
    assert await db.room_actions.failed(action_id, "again", retry_seconds=15.0, permanent=False, max_attempts=3) is None
    row = await db.pool.fetchrow("SELECT status, attempts, last_error FROM room_actions WHERE id = $1", action_id)
    assert (row["status"], row["attempts"], row["last_error"]) == ("failed", 3, "M_UNKNOWN: busy")

    done = await remember(db, 0)
    await db.room_actions.done(done)
    assert await db.room_actions.failed(done, "M_FORBIDDEN: already in", retry_seconds=15.0, permanent=True,
                                         max_attempts=3) is None
    assert await db.pool.fetchval("SELECT status FROM room_actions WHERE id = $1", done) == "done"


async def test_a_permanent_refusal_is_given_up_at_once(db: TestStore) -> None:
    action_id = await remember(db, 0)
    assert await db.room_actions.failed(action_id, "M_FORBIDDEN: not invited", retry_seconds=15.0,
                                        permanent=True, max_attempts=6) == "failed"
