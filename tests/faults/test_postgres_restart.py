"""PostgreSQL restarted (or down for a few seconds) under a working worker: the worker's loop survives
the connection errors and every run still ends answered, once; and after the restart a new run still
wakes a worker by NOTIFY, not by a timer (SPEC §1: "A mention must not wait for a timer").

The worker is the real ``engine.run.worker.Worker`` in this process (its own pool on the test's database),
so its log records, tracebacks included, can be shown when it fails. The restart is the session's real
PostgreSQL, by pg_ctl, as synapse-dev/up runs it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Iterator
from typing import Any

import pytest

from engine.clock import SystemClock
from engine.content import Registry
from engine.errors import StoreUnavailable
from engine.run.worker import Worker, WorkerSettings
from engine.store import Store
from engine.store.runs import Run
from engine.surface import Answered
from tests.book import stand_in
from tests.db.runs import insert_run
from tests.db.test_worker import RecordingSurface
from tests.faults.support import Postgres, wait_for
from tests.store import TestStore
from tests.support import STAND_IN

pytestmark = pytest.mark.db


class Errors(logging.Handler):
    """The worker's ERROR records (a slot's or task's traceback), to show when a test fails."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def text(self) -> str:
        fmt = logging.Formatter("%(name)s: %(message)s")
        return "\n".join(fmt.format(r) for r in self.records)

    def crashed_tasks(self) -> list[str]:
        """Tasks that died (engine.tasks logs 'task X in Y failed'), as opposed to errors retried."""
        return [r.getMessage() for r in self.records if r.name == "engine.tasks"]


@pytest.fixture
def errors() -> Iterator[Errors]:
    handler = Errors()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


async def started_worker(dsn: str, registry: Registry, **settings: Any) -> tuple[Worker, RecordingSurface, Store]:
    db = await Store.connect(dsn, min_size=2, max_size=8)
    clock = SystemClock()
    surface = RecordingSurface()
    worker = Worker(db, lambda: registry, stand_in(clock), {"rooms": surface}, clock,
                    WorkerSettings(**settings), worker_id="survivor", status=STAND_IN)
    return worker, surface, db


async def stopped(task: asyncio.Task[None], stop: asyncio.Event, wdb: Store) -> None:
    """Stop the worker. Its shutdown after a restart raising StoreUnavailable (a lost connection, as the store
    translates it) is the subject of test_a_worker_stops_cleanly_after_a_postgres_restart, not of the other
    tests, so it is let pass here."""
    stop.set()
    try:
        with contextlib.suppress(StoreUnavailable):
            await asyncio.wait_for(task, 15)
    finally:
        await wdb.close()


def told(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


async def run_row(db: TestStore, run_id: int) -> Run | None:
    return await db.runs.get(run_id)


async def finished(db: TestStore, run_id: int) -> Run | None:
    row = await run_row(db, run_id)
    return row if row is not None and row.status in ("done", "failed", "cancelled") else None


async def steps(db: TestStore, run_id: int) -> list[tuple[int, str]]:
    return [(r["seq"], r["kind"]) for r in await db.pool.fetch(
        "SELECT seq, kind FROM agent_steps WHERE run_id = $1 ORDER BY seq", run_id)]


@pytest.mark.parametrize("outage", ["restart", "down-3s"])
async def test_a_run_in_flight_survives_postgres_going_away(db: TestStore, dsn: str, published: Registry,
                                                            postgres: Postgres, errors: Errors,
                                                            outage: str) -> None:
    """restart: `pg_ctl restart -m fast` while the model call (2 s) is in flight, every connection cut.
    down-3s: stopped for 3 s spanning the moment the worker records the answer, so that write fails."""
    began = time.monotonic()
    run_id = await insert_run(db, script=[
        {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}]},
        {"text": "survived the outage", "delay": 2},
    ])
    # The lease must outlast the 2 s model call (nothing renews it meanwhile); sweep and poll are quick so
    # a run whose worker dropped it is taken up again soon after PostgreSQL is back.
    worker, surface, wdb = await started_worker(dsn, published, slots=2, lease_seconds=4, sweep_seconds=0.5,
                                                poll_seconds=0.2)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        # The model turn and the tool are recorded, the next call is started; the worker now sits in the 2 s call.
        await wait_for(lambda: steps_at_least(db, run_id, 5), timeout=15, what="the first five steps")
        if outage == "restart":
            await asyncio.to_thread(postgres.restart)
        else:
            options = await asyncio.to_thread(postgres.stop)
            await asyncio.sleep(3)
            await asyncio.to_thread(postgres.start, options)
        back = time.monotonic()

        row = await wait_for(lambda: finished(db, run_id), timeout=30, interval=0.2, what="the run finished")
        assert (row.status, row.answer) == ("done", "survived the outage"), (row, errors.text())
        attempts = row.attempts
        # A call whose answer could not be recorded (the database was away) is closed at its estimate and made
        # again: what was done is the same, and nothing is recorded twice.
        assert await done(db, run_id) == ["model", "tool_call", "tool_result", "model", "answer"]
        assert surface.delivered == [(run_id, Answered("survived the outage"))]
        assert not task.done(), f"the worker's loop ended:\n{errors.text()}"
        assert errors.crashed_tasks() == [], errors.text()

        # And it goes on working: a run inserted now is answered by the same worker.
        after = await insert_run(db, script=[{"text": "still here"}])
        row = await wait_for(lambda: finished(db, after), timeout=15, what="a run after the outage")
        assert (row.status, row.answer) == ("done", "still here")
        assert errors.crashed_tasks() == [], errors.text()
        print(f"\n{outage}: answered {time.monotonic() - back:.1f}s after PostgreSQL was back; "
              f"attempts {attempts}; {len(errors.records)} error record(s); "
              f"{time.monotonic() - began:.1f}s in all")
    finally:
        await stopped(task, stop, wdb)


async def done(db: TestStore, run_id: int) -> list[str]:
    """What the run did, in order: its steps, less the starts of model calls and the calls closed as interrupted."""
    return [r["kind"] for r in await db.pool.fetch(
        "SELECT kind FROM agent_steps WHERE run_id = $1 AND kind <> 'model_started'"
        " AND NOT (kind = 'model' AND coalesce((payload->>'interrupted')::boolean, false)) ORDER BY seq", run_id)]


async def steps_at_least(db: TestStore, run_id: int, n: int) -> bool:
    return len(await steps(db, run_id)) >= n


async def test_after_a_postgres_restart_a_new_run_still_wakes_a_worker_by_notify(
        db: TestStore, dsn: str, published: Registry, postgres: Postgres, errors: Errors) -> None:
    """With the poll at an hour, only NOTIFY can wake the worker. It does before the restart; after it, the
    LISTEN connection is gone and, unless the worker listens again, a mention waits for the timer."""
    worker, surface, wdb = await started_worker(dsn, published, slots=1, lease_seconds=30, poll_seconds=3600,
                                                sweep_seconds=3600)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        await asyncio.sleep(0.5)  # the worker found nothing and waits for a NOTIFY
        before = await insert_run(db, script=[{"text": "before"}])
        await wait_for(lambda: finished(db, before), timeout=10, what="the run before the restart")

        await asyncio.to_thread(postgres.restart)
        # Give the worker every chance to notice and listen again (its heartbeat is 10 s).
        await wait_for(lambda: db.pool.fetchval("SELECT 1"), timeout=30, what="PostgreSQL back")
        await asyncio.sleep(1)

        after = await insert_run(db, script=[{"text": "after"}])
        try:
            await wait_for(lambda: finished(db, after), timeout=15, what="the run after the restart, by NOTIFY")
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}: after a PostgreSQL restart the worker no longer hears NOTIFY (its LISTEN connection "
                f"died and is never replaced); a new run now waits for the poll ({worker.settings.poll_seconds:.0f}s "
                f"here, poll_seconds in production). Worker errors:\n{errors.text()}") from None
        assert [rid for rid, _ in surface.delivered] == [before, after]
    finally:
        await stopped(task, stop, wdb)


async def test_a_worker_stops_cleanly_after_a_postgres_restart(db: TestStore, dsn: str, published: Registry,
                                                               postgres: Postgres, errors: Errors) -> None:
    """A worker told to stop after PostgreSQL came back stops without raising and takes its provider status
    down ("a worker that stops takes its word back"), as it does without a restart."""
    worker, _surface, wdb = await started_worker(dsn, published, slots=1, lease_seconds=30, poll_seconds=0.2,
                                                 sweep_seconds=0.5)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    said = "SELECT count(*) FROM provider_status WHERE worker = 'survivor'"
    try:
        await wait_for(lambda: db.pool.fetchval(said), timeout=10, what="the worker's provider status")
        await asyncio.to_thread(postgres.restart)
        # It keeps working across the restart.
        run_id = await wait_for(lambda: insert_run(db, script=[{"text": "after"}]), timeout=30, what="an insert")
        await wait_for(lambda: finished(db, run_id), timeout=15, what="a run after the restart")
    finally:
        stop.set()
        try:
            outcome: BaseException | None = None
            try:
                await asyncio.wait_for(task, 15)
            except Exception as exc:
                outcome = exc
        finally:
            await wdb.close()
    assert outcome is None, "the worker's run() raised on stopping after the restart:\n" + told(outcome)
    assert await db.pool.fetchval(said) == 0, "the stopped worker still says it can answer"


async def test_the_outbox_sender_stops_cleanly_after_a_postgres_restart(db: TestStore, postgres: Postgres) -> None:
    """The outbox sender holds a LISTEN connection the same way the worker does."""
    import aiohttp

    from appservice.matrix.outbox import MatrixSender, Outbox

    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, "http://127.0.0.1:9", "a" * 20), SystemClock())
        stop = asyncio.Event()
        task = asyncio.create_task(outbox.run(stop))
        outcome: BaseException | None = None
        try:
            await asyncio.sleep(0.5)
            await asyncio.to_thread(postgres.restart)
            await wait_for(lambda: db.pool.fetchval("SELECT 1"), timeout=30, what="PostgreSQL back")
        finally:
            stop.set()
            outbox.wake()
            try:
                await asyncio.wait_for(task, 15)
            except Exception as exc:
                outcome = exc
    assert outcome is None, "the outbox's run() raised on stopping after the restart:\n" + told(outcome)
