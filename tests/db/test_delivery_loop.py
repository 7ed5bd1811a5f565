"""The one delivery loop (engine/run/delivery.py) on a real PostgreSQL, over one of its queues (the room actions'
table) with a scripted sender: a refusal "later" backs off by the backoff's waits and is given up on the last
attempt, a refusal "never" is given up at once, the receiver's own wait wins over the backoff, items sharing an
order key go one after another, the loop is woken when a retry falls due, and it stops at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from appservice.matrix.tables.room_actions import RoomAction, RoomActionTables
from engine.clock import SystemClock
from engine.run.delivery import DeliveryLoop, Outcome, Refused, Sent
from tests.store import TestStore

pytestmark = pytest.mark.db


@dataclass
class Scripted:
    """Answers each send from ``script`` (by attempt), and records each outcome in the queue's table."""

    db: TestStore
    script: Callable[[RoomAction], Outcome]
    said: list[tuple[str, int, int, float | None, bool | None]] = field(default_factory=list)
    active: int = 0
    most: int = 0

    async def send(self, item: RoomAction) -> Outcome:
        self.active += 1
        self.most = max(self.most, self.active)
        await asyncio.sleep(0.01)
        self.active -= 1
        return self.script(item)

    async def done(self, item: RoomAction, sent: Sent) -> None:
        self.said.append(("done", item.id, item.attempts, None, None))
        await self.db.of(RoomActionTables).done(item.id, item.attempts)

    async def retry(self, item: RoomAction, after: float, refused: Refused) -> None:
        self.said.append(("retry", item.id, item.attempts, after, None))
        await self.db.of(RoomActionTables).retry(item.id, after, refused.error, item.attempts)

    async def failed(self, item: RoomAction, refused: Refused, *, gave_up: bool) -> None:
        self.said.append(("failed", item.id, item.attempts, None, gave_up))
        await self.db.of(RoomActionTables).failed(item.id, refused.error, item.attempts)


def three_tries(attempts: int) -> float | None:
    return None if attempts >= 3 else 0.05 * attempts


def loop(db: TestStore, sender: Scripted, **kw: object) -> DeliveryLoop[RoomAction]:
    return DeliveryLoop("test queue", db.of(RoomActionTables), sender, three_tries, SystemClock(), hide_seconds=30.0,
                        **kw)  # type: ignore[arg-type]


async def remember(db: TestStore, room: str = "!r:localhost") -> int:
    return await db.of(RoomActionTables).remember(room, {"kind": "Join", "room_id": room, "user_id": "@b:localhost"}, 0)


async def row(db: TestStore, action_id: int) -> tuple[str, int, str | None]:
    r = await db.pool.fetchrow("SELECT status, attempts, last_error FROM room_actions WHERE id = $1", action_id)
    return r["status"], r["attempts"], r["last_error"]


async def test_a_refusal_later_backs_off_and_is_given_up_on_the_last_attempt(db: TestStore) -> None:
    action_id = await remember(db)
    sender = Scripted(db, lambda item: Refused("503 busy", retryable=True))
    queue = loop(db, sender)
    assert await queue.deliver_due() == 1
    assert await queue.deliver_due() == 0, "hidden for the backoff's wait"
    for _ in range(2):
        await asyncio.sleep(0.15)
        assert await queue.deliver_due() == 1
    assert sender.said == [("retry", action_id, 1, 0.05, None), ("retry", action_id, 2, 0.1, None),
                           ("failed", action_id, 3, None, True)]
    assert await row(db, action_id) == ("failed", 3, "503 busy")
    assert await db.of(RoomActionTables).next_due() is None


async def test_a_refusal_never_is_given_up_at_once_and_a_sent_item_is_done(db: TestStore) -> None:
    never, sent = await remember(db, "!never:localhost"), await remember(db, "!sent:localhost")
    sender = Scripted(db, lambda item: Sent("$e") if item.id == sent else Refused("M_FORBIDDEN", retryable=False))
    assert await loop(db, sender).deliver_due() == 2
    assert sorted(sender.said) == [("done", sent, 1, None, None), ("failed", never, 1, None, False)]
    assert await row(db, never) == ("failed", 1, "M_FORBIDDEN")
    assert await row(db, sent) == ("done", 1, None)


async def test_the_receivers_wait_wins_over_the_backoff(db: TestStore) -> None:
    action_id = await remember(db)
    sender = Scripted(db, lambda item: Refused("429", retryable=True, wait=7.0))
    await loop(db, sender).deliver_due()
    assert sender.said == [("retry", action_id, 1, 7.0, None)]
    due = await db.of(RoomActionTables).next_due()
    assert due is not None and 6.0 < due <= 7.0


async def test_items_sharing_an_order_key_go_one_after_another_the_rest_at_once(db: TestStore) -> None:
    for room in ("!a:localhost", "!b:localhost", "!c:localhost"):
        await remember(db, room)
    apart = Scripted(db, lambda item: Sent())
    assert await loop(db, apart).deliver_due() == 3
    assert apart.most == 3
    for room in ("!a:localhost", "!b:localhost", "!c:localhost"):
        await remember(db, room)
    together = Scripted(db, lambda item: Sent())
    assert await loop(db, together, order=lambda item: "one key").deliver_due() == 3
    assert together.most == 1
    ids = [i for kind, i, *_ in together.said]
    assert ids == sorted(ids), "in claim order"


async def test_the_loop_is_woken_when_a_retry_falls_due_and_stops_at_once(db: TestStore) -> None:
    action_id = await remember(db)
    sender = Scripted(db, lambda item: Sent() if item.attempts == 2 else Refused("busy", retryable=True))
    queue = loop(db, sender, idle_seconds=60.0)
    stop = asyncio.Event()
    running = asyncio.ensure_future(queue.run(stop))
    try:
        loop_ = asyncio.get_running_loop()
        until = loop_.time() + 5
        while len(sender.said) < 2 and loop_.time() < until:
            await asyncio.sleep(0.02)
        assert [s[0] for s in sender.said] == ["retry", "done"], "the retry was due in 0.05 s, not the idle 60 s"
        assert await row(db, action_id) == ("done", 2, None)
    finally:
        stop.set()
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(running, 5)
    assert asyncio.get_running_loop().time() - started < 1.0, "a stop ends the idle wait at once"
