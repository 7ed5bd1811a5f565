"""Slots sized for real model latency (issue 18): on default settings one worker awaits a hundred slow model
calls at once without holding a database connection, and a NOTIFY wakes one claim, not one per idle slot."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.clock import SystemClock
from engine.content import Registry
from engine.core.limits import DEFAULT_SLOTS
from engine.run.worker import CLAIM_BATCH, Worker, WorkerSettings
from engine.store.runs import Claim
from tests.book import stand_in
from tests.db.runs import insert_run
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import STAND_IN, eventually

pytestmark = pytest.mark.db

# Nothing but the runs touches the database meanwhile: no heartbeat, sweep or safety-net poll in the window.
QUIET = {"heartbeat_seconds": 600.0, "sweep_seconds": 600.0, "poll_seconds": 600.0}


class CountingWorker(Worker):
    claims = 0
    taken: list[int]

    async def claim_up_to(self, most: int) -> list[Claim]:
        self.claims += 1
        got = await super().claim_up_to(most)
        self.taken = [*getattr(self, "taken", []), len(got)]
        return got


def worker(db: TestStore, registry: Registry, **settings: Any) -> CountingWorker:
    clock = SystemClock()
    return CountingWorker(db, lambda: registry, stand_in(clock, reason="chosen"), {"rooms": RecordingSurface()},
                          clock, WorkerSettings(**{**QUIET, **settings}), worker_id="w-slots", status=STAND_IN)


async def in_use(db: TestStore) -> tuple[int, int]:
    """(connections the store's pool has handed out, this database's backends busy or in a transaction other
    than the one asking)."""
    busy = await db.pool.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')")
    # The question above took one of the pool's connections; it is back by now.
    return db.pool.get_size() - db.pool.get_idle_size(), int(busy)


async def test_the_pool_is_idle_while_a_hundred_runs_await_a_slow_model(db: TestStore, published: Registry) -> None:
    assert WorkerSettings().slots == DEFAULT_SLOTS >= 100
    ids = [await insert_run(db, script=[{"text": f"answer {n}", "delay": 6}]) for n in range(100)]
    w = worker(db, published)
    stop = asyncio.Event()
    task = asyncio.ensure_future(w.run(stop))
    try:
        # Every run has recorded its model call as started, and none has come back: all 100 await the model.
        started = "SELECT count(*) FROM agent_steps WHERE kind = 'model_started'"
        await eventually(lambda: _count(db, started, 100), timeout=20)
        assert await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE status = 'running'") == 100
        samples = []
        for _ in range(10):
            samples.append(await in_use(db))
            await asyncio.sleep(0.05)
        assert samples == [(0, 0)] * 10
        await eventually(lambda: _count(db, "SELECT count(*) FROM agent_runs WHERE status = 'done'", 100),
                         timeout=30)
    finally:
        stop.set()
        await task
    assert sorted(rid for rid, _ in w.surfaces["rooms"].delivered) == ids  # type: ignore[attr-defined]


async def _count(db: TestStore, sql: str, want: int) -> bool:
    return bool(await db.pool.fetchval(sql) == want)


async def test_a_notify_costs_one_claim_not_one_per_idle_slot(db: TestStore, published: Registry) -> None:
    w = worker(db, published, slots=256)  # as many idle slots as the default, said outright
    stop = asyncio.Event()
    task = asyncio.ensure_future(w.run(stop))
    try:
        await eventually(lambda: w.claims >= 1)  # the first look, at start
        await asyncio.sleep(0.3)
        before = w.claims
        run_id = await insert_run(db, script=[{"text": "hi"}])  # NOTIFYs
        await eventually(lambda: _count(db, f"SELECT count(*) FROM agent_runs WHERE id = {run_id} AND status = 'done'", 1))
        await asyncio.sleep(0.3)
        # One claim took the run, one more found nothing (and one for a wake that raced it): never 256.
        assert w.claims - before <= 4
    finally:
        stop.set()
        await task


async def test_a_burst_is_claimed_a_few_dozen_runs_to_a_statement(db: TestStore, published: Registry) -> None:
    """Twenty people at once, or two hundred: one claim per run was one round trip per run through a busy pool,
    and under load the runs queued behind the claimer (seconds, with 256 slots free). Up to CLAIM_BATCH runs
    are taken to a statement, the ones due first; the first claim finds the whole burst."""
    ids = [await insert_run(db, script=[{"text": f"answer {n}", "delay": 3}]) for n in range(100)]
    w = worker(db, published)
    stop = asyncio.Event()
    task = asyncio.ensure_future(w.run(stop))
    try:
        await eventually(lambda: _count(db, "SELECT count(*) FROM agent_runs WHERE status = 'running'", 100))
        assert w.taken[:4] == [CLAIM_BATCH, CLAIM_BATCH, CLAIM_BATCH, 100 - 3 * CLAIM_BATCH]
        assert w.claims <= 6  # and one or two finding nothing left
        await eventually(lambda: _count(db, "SELECT count(*) FROM agent_runs WHERE status = 'done'", 100),
                         timeout=30)
    finally:
        stop.set()
        await task
    assert sorted(rid for rid, _ in w.surfaces["rooms"].delivered) == ids  # type: ignore[attr-defined]
