"""The schedule tick on a real PostgreSQL: the clock kept on the bot, the last occurrence fired once."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest

from appservice.kinds import KINDS
from appservice.matrix.surface import RoomFacts
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import FakeClock
from engine.content import Registry, ScheduleTrigger, compile_sources
from engine.run.publish import publish
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from engine.run.ticks import run_ticks, schedule_tick, trigger_key
from engine.store import Tx
from tests.store import TestStore

pytestmark = pytest.mark.db

MORNING = """---
name: Morning
hears:
  - mention
  - schedule: {every: day, at: '08:00', zone: Europe/Dublin}
    in: '!general:localhost'
    ask: Say good morning.
---
You greet the room.
"""

UTC = dt.UTC
MONDAY = dt.datetime(2026, 1, 5, 7, 0, tzinfo=UTC)  # 07:00 in Dublin, an hour before it is owed


async def no_alias(room: str) -> str | None:
    if room.startswith("!"):
        return room  # a room id is resolved as itself
    raise AssertionError(f"a room id needs no alias lookup, but {room} was looked up")


ROOMS = RoomFacts("localhost")


@pytest.fixture
async def morning(db: TestStore) -> Registry:
    registry = compile_sources({"bots/morning.md": MORNING}, kinds=KINDS, server_name="localhost")
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    return registry


def key_of(registry: Registry) -> str:
    [trigger] = [t for t in registry.bots["morning"].hears if isinstance(t, ScheduleTrigger)]
    return trigger_key(trigger)


async def tick(db: TestStore, registry: Registry, now: dt.datetime) -> list[int]:
    return await schedule_tick(db, registry, now, surface=ROOMS, resolve_room=no_alias)


async def clock(db: TestStore) -> list[tuple[str, dt.datetime, dt.datetime]]:
    rows = await db.pool.fetch("SELECT bot, last_fired_at, started_at FROM bot_clock ORDER BY bot, trigger")
    return [(r["bot"], r["last_fired_at"], r["started_at"]) for r in rows]


async def runs(db: TestStore) -> list[dict[str, object]]:
    rows = await db.pool.fetch(
        "SELECT bot, surface, place, trigger_event, asked_by, prompt, context, status FROM agent_runs ORDER BY id")
    return [dict(r) for r in rows]


async def test_a_bot_that_never_fired_starts_its_clock_at_now_and_fires_nothing(
    db: TestStore, morning: Registry,
) -> None:
    # 09:00 in Dublin: today's 08:00 is past, but a new clock never fires for the past.
    now = MONDAY + dt.timedelta(hours=2)
    assert await tick(db, morning, now) == []
    assert await clock(db) == [("morning", now, now)]
    assert await runs(db) == []
    # Ticking again at the same moment is nothing owed: nothing changes.
    assert await tick(db, morning, now + dt.timedelta(seconds=60)) == []
    assert await clock(db) == [("morning", now, now)]


async def test_a_day_later_it_fires_once_and_keeps_the_clock(db: TestStore, morning: Registry) -> None:
    await tick(db, morning, MONDAY)
    assert await tick(db, morning, MONDAY + dt.timedelta(minutes=59)) == []
    fired = await tick(db, morning, MONDAY + dt.timedelta(hours=1))
    assert len(fired) == 1
    owed = dt.datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    key = key_of(morning)
    assert await runs(db) == [{
        "bot": "morning", "surface": "rooms", "place": "!general:localhost",
        "trigger_event": f"schedule:morning:{key}:{owed.isoformat()}", "asked_by": None,
        "prompt": "Say good morning.", "context": {"kind": "schedule", "occurrence": owed.isoformat(), "lines": []},
        "status": "queued",
    }]
    assert await clock(db) == [("morning", owed, MONDAY)]
    # The next minute owes nothing; the next morning owes one more.
    assert await tick(db, morning, MONDAY + dt.timedelta(hours=1, minutes=1)) == []
    assert len(await tick(db, morning, MONDAY + dt.timedelta(days=1, hours=1))) == 1
    assert len(await runs(db)) == 2


async def test_a_week_down_fires_once_with_the_last_occurrence(db: TestStore, morning: Registry) -> None:
    await tick(db, morning, MONDAY)
    later = MONDAY + dt.timedelta(days=7, hours=5)
    fired = await tick(db, morning, later)
    assert len(fired) == 1
    last = dt.datetime(2026, 1, 12, 8, 0, tzinfo=UTC)
    [run] = await runs(db)
    assert run["context"] == {"kind": "schedule", "occurrence": last.isoformat(), "lines": []}
    assert await clock(db) == [("morning", last, MONDAY)]
    assert await tick(db, morning, later + dt.timedelta(minutes=1)) == []


async def test_two_ticks_at_once_fire_once(db: TestStore, morning: Registry) -> None:
    await tick(db, morning, MONDAY)
    now = MONDAY + dt.timedelta(hours=3)
    results = await asyncio.gather(*(tick(db, morning, now) for _ in range(8)))
    assert sorted(len(r) for r in results) == [0] * 7 + [1]
    assert len(await runs(db)) == 1


async def test_two_ticks_that_both_start_a_clock_start_it_once(db: TestStore, morning: Registry) -> None:
    results = await asyncio.gather(*(tick(db, morning, MONDAY + dt.timedelta(hours=3)) for _ in range(8)))
    assert results == [[]] * 8
    assert len(await clock(db)) == 1
    assert await runs(db) == []


async def test_a_held_clock_is_skipped_not_waited_for(db: TestStore, morning: Registry) -> None:
    await tick(db, morning, MONDAY)
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM bot_clock FOR UPDATE")
        # Another service holds the row: this tick neither fires nor blocks.
        assert await asyncio.wait_for(tick(db, morning, MONDAY + dt.timedelta(hours=3)), 5) == []
    assert len(await tick(db, morning, MONDAY + dt.timedelta(hours=3))) == 1


async def test_a_refused_summons_still_counts_as_fired(
    db: TestStore, morning: Registry, caplog: pytest.LogCaptureFixture,
) -> None:
    await tick(db, morning, MONDAY)
    await db.workers.forget("test-worker")  # no provider, no bots
    with caplog.at_level(logging.WARNING, logger="engine.run.ticks"):
        assert await tick(db, morning, MONDAY + dt.timedelta(hours=2)) == []
    assert await runs(db) == []
    assert await clock(db) == [("morning", dt.datetime(2026, 1, 5, 8, 0, tzinfo=UTC), MONDAY)]
    assert "refused: no_provider" in caplog.text
    # A provider back later does not bring the refused morning back.
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    assert await tick(db, morning, MONDAY + dt.timedelta(hours=3)) == []


async def test_a_room_that_turned_encrypted_is_refused_and_counts_as_fired(
    db: TestStore, morning: Registry,
) -> None:
    await tick(db, morning, MONDAY)
    await db.of(RoomTables).ensure("!general:localhost")
    await db.of(RoomTables).mark_encrypted("!general:localhost")
    assert await db.of(RoomTables).encrypted() == ["!general:localhost"]
    assert await tick(db, morning, MONDAY + dt.timedelta(hours=2)) == []
    assert await runs(db) == []
    assert (await clock(db))[0][1] == dt.datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


ALIASED = MORNING.replace("'!general:localhost'", "'#general:localhost'")


async def test_an_alias_is_resolved_and_an_unknown_one_still_counts_as_fired(
    db: TestStore, caplog: pytest.LogCaptureFixture,
) -> None:
    registry = compile_sources({"bots/morning.md": ALIASED}, kinds=KINDS, server_name="localhost")
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    asked: list[str] = []

    async def resolve(alias: str) -> str | None:
        asked.append(alias)
        return "!resolved:localhost" if len(asked) == 1 else None

    await schedule_tick(db, registry, MONDAY, surface=ROOMS, resolve_room=resolve)
    assert asked == []  # nothing owed, nothing resolved
    assert len(await schedule_tick(db, registry, MONDAY + dt.timedelta(hours=2), surface=ROOMS, resolve_room=resolve)) == 1
    assert [r["place"] for r in await runs(db)] == ["!resolved:localhost"]
    with caplog.at_level(logging.ERROR, logger="engine.run.ticks"):
        assert await schedule_tick(db, registry, MONDAY + dt.timedelta(days=1, hours=2), surface=ROOMS, resolve_room=resolve) == []
    assert asked == ["#general:localhost", "#general:localhost"]
    assert "#general:localhost cannot be found" in caplog.text
    assert (await clock(db))[0][1] == dt.datetime(2026, 1, 6, 8, 0, tzinfo=UTC)


async def test_the_clock_is_advanced_before_the_summons(db: TestStore, morning: Registry) -> None:
    await tick(db, morning, MONDAY)
    seen: list[dt.datetime] = []

    async def watching(tx: Tx, registry: Registry, s: Summons) -> Summoned | Refused:
        held = await tx.schedules.clock_for_update("morning", key_of(registry))  # the tick's own lock: ours
        assert held is not None
        seen.append(held.last_fired_at)
        return await summon(tx, registry, s)

    await schedule_tick(db, morning, MONDAY + dt.timedelta(hours=2), surface=ROOMS, resolve_room=no_alias,
                        summon_fn=watching)
    assert seen == [dt.datetime(2026, 1, 5, 8, 0, tzinfo=UTC)]


async def test_a_summons_that_fails_rolls_the_clock_back_for_the_next_tick(db: TestStore, morning: Registry) -> None:
    await tick(db, morning, MONDAY)

    async def broken(tx: Tx, registry: Registry, s: Summons) -> Summoned | Refused:
        # The database refuses a statement mid-summons (a step for a run that does not exist).
        await tx.runs.insert_step(-1, 1, "model", {}, owner="nobody")
        raise AssertionError("unreachable")

    now = MONDAY + dt.timedelta(hours=2)
    assert await schedule_tick(db, morning, now, surface=ROOMS, resolve_room=no_alias, summon_fn=broken) == []
    assert await clock(db) == [("morning", MONDAY, MONDAY)]
    assert len(await tick(db, morning, now)) == 1


async def test_run_ticks_ticks_until_stopped(db: TestStore, morning: Registry) -> None:
    clock_ = FakeClock(MONDAY)
    stop = asyncio.Event()
    task = asyncio.create_task(run_ticks(db, lambda: morning, clock_, stop, every=0.01, surface=ROOMS,
                                         resolve_room=no_alias))
    for _ in range(200):
        if await clock(db):
            break
        await asyncio.sleep(0.01)
    # "now" is the database's: a morning is owed once the clock last fired before it (two days back: a daily
    # schedule owes at least one morning whatever the time of year; only the last one fires).
    await db.pool.execute("UPDATE bot_clock SET last_fired_at = last_fired_at - interval '2 days'")
    for _ in range(200):
        if await runs(db):
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert len(await runs(db)) == 1


async def test_prune_forgets_old_deliveries_and_refusals_and_keeps_recent_ones(db: TestStore) -> None:
    from engine.run.ticks import prune

    await db.pool.execute(
        "INSERT INTO hook_deliveries (delivery, signature, key_id, event, received_at) VALUES "
        "('old', 's1', 'k', 'site.x', now() - interval '2 days'), ('new', 's2', 'k', 'site.x', now())")
    await db.pool.execute(
        "INSERT INTO summon_refusals (bot, surface, reason, created_at) VALUES "
        "('helper', 'rooms', 'audience', now() - interval '31 days'), ('helper', 'rooms', 'audience', now())")
    assert await prune(db) == 2
    assert [r["delivery"] for r in await db.pool.fetch("SELECT delivery FROM hook_deliveries")] == ["new"]
    assert await db.pool.fetchval("SELECT count(*) FROM summon_refusals") == 1
    assert await prune(db) == 0
