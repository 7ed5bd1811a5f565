"""Cancelling: `!cancel`, 🛑, moderators, a tool requested before the cancel never running, and a model call under
way stopped at once."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from appservice.kinds import KINDS
from appservice.matrix.dispatch import Dispatcher
from engine.clock import SystemClock
from engine.content import Registry
from engine.content.files import compile_content
from engine.core.messages import ModelStep, Step
from engine.run.hold import Hold
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.surface import Ended
from engine.tools.personal import make_raise_ticket
from tests.book import BOOK, stand_in
from tests.db.runs import insert_run, steps_of
from tests.db.test_ingest import HELPER, ROOM, feed, message, pipeline, state
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import STAND_IN

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.db


@pytest.fixture
def ingest(db: TestStore, published: Registry) -> Dispatcher:
    return pipeline(db, published)


async def cancel_flags(db: TestStore) -> dict[str, bool]:
    rows = await db.pool.fetch("SELECT asked_by, cancel_requested FROM agent_runs")
    return {r["asked_by"]: r["cancel_requested"] for r in rows}


async def two_runs(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, "setup", [
        state("m.room.create", "", {"room_version": "10", "creator": "@alice:localhost"}),
        state("m.room.power_levels", "", {"users": {"@alice:localhost": 100, "@mod:localhost": 50}, "users_default": 0}),
        message("Helper?", mentions=[HELPER], sender="@bob:localhost"),
        message("Helper!", mentions=[HELPER], sender="@carol:localhost"),
    ])


async def test_cancel_stops_only_the_senders_own_run(ingest: Dispatcher, db: TestStore) -> None:
    await two_runs(ingest, db)
    await feed(ingest, db, "t1", [message("!cancel", sender="@bob:localhost")])
    assert await cancel_flags(db) == {"@bob:localhost": True, "@carol:localhost": False}


async def test_a_moderator_may_cancel_anyones(ingest: Dispatcher, db: TestStore) -> None:
    await two_runs(ingest, db)
    await feed(ingest, db, "t1", [message("/cancel", sender="@mod:localhost")])
    assert await cancel_flags(db) == {"@bob:localhost": True, "@carol:localhost": True}


async def test_a_stop_reaction_on_the_asking_line_cancels_that_run(ingest: Dispatcher, db: TestStore) -> None:
    await two_runs(ingest, db)
    carol_line = await db.pool.fetchval("SELECT trigger_event FROM agent_runs WHERE asked_by = '@carol:localhost'")
    react = {"event_id": "$react", "room_id": ROOM, "sender": "@bob:localhost", "type": "m.reaction",
             "origin_server_ts": 2, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": carol_line, "key": "🛑"}}}
    await feed(ingest, db, "t1", [react])  # bob may not stop carol's
    assert await cancel_flags(db) == {"@bob:localhost": False, "@carol:localhost": False}
    await feed(ingest, db, "t2", [{**react, "event_id": "$react2", "sender": "@carol:localhost"}])
    assert await cancel_flags(db) == {"@bob:localhost": False, "@carol:localhost": True}


async def test_a_cancelled_queued_run_ends_cancelled_when_claimed(ingest: Dispatcher, db: TestStore, published: Registry) -> None:
    BOOK.say("Helper?", [{"text": "too late"}])
    await feed(ingest, db, "t0", [message("Helper?", mentions=[HELPER])])
    await feed(ingest, db, "t1", [message("!cancel")])
    surface = RecordingSurface()
    clock = SystemClock()
    await Worker(db, lambda: published, stand_in(clock), {"rooms": surface}, clock, WorkerSettings(),
                 worker_id="w", status=STAND_IN).work_once()
    row = await db.pool.fetchrow("SELECT id, status, ending, answer FROM agent_runs")
    assert (row["status"], row["ending"], row["answer"]) == ("cancelled", "cancelled", None)
    assert surface.delivered == [(row["id"], Ended("cancelled"))]
    assert [s["kind"] for s in await steps_of(db, row["id"])] == ["ending"]


class CancelAfterModelStepHold(Hold):
    """Somebody says !cancel right after the model asked for a tool (and before the tool call is
    recorded): the cancel lands between two commits."""

    async def record(self, steps: list[Step], step: Step, *, unless_cancelled: bool = False) -> bool:
        cancelled = await super().record(steps, step, unless_cancelled=unless_cancelled)
        if isinstance(step, ModelStep) and step.tool_calls:
            store = self.store
            assert isinstance(store, TestStore)
            await store.pool.execute("UPDATE agent_runs SET cancel_requested = true WHERE id = $1", self.run.id)
        return cancelled


async def test_a_tool_requested_before_the_cancel_never_runs(db: TestStore, tmp_path: Path) -> None:
    # The real raise_ticket, for a bot that has it: the ticket it would raise does not exist afterwards.
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "clerk.md").write_text("---\nname: Clerk\ntools: [raise_ticket]\n---\nYou raise tickets.\n")
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    script = [{"tool_calls": [{"id": "c1", "name": "raise_ticket",
                               "arguments": {"subject": "Refund", "body": "Wants the money back."}}]},
              {"text": "I raised a ticket."}]
    clock = SystemClock()
    tools = {"raise_ticket": make_raise_ticket(db, lambda: registry.strings)}
    # Not cancelled, the same run raises its ticket: the tool is real and reachable.
    uncancelled = await insert_run(db, script=script, bot="clerk")
    await Worker(db, lambda: registry, stand_in(clock), {"rooms": RecordingSurface()}, clock, WorkerSettings(),
                 tools=tools, worker_id="w0", status=STAND_IN).work_once()
    assert await db.pool.fetchval("SELECT count(*) FROM tickets") == 1
    assert (await db.pool.fetchrow("SELECT answer FROM agent_runs WHERE id = $1", uncancelled))["answer"] == \
        "I raised a ticket."
    # Cancelled after the model asked for it and before it ran: no second ticket.
    run_id = await insert_run(db, script=script, bot="clerk")
    surface = RecordingSurface()
    worker = Worker(db, lambda: registry, stand_in(clock), {"rooms": surface}, clock,
                    WorkerSettings(), tools=tools, worker_id="w", status=STAND_IN, hold=CancelAfterModelStepHold)
    await worker.work_once()
    assert await db.pool.fetchval("SELECT count(*) FROM tickets") == 1  # the effect does not exist
    steps = await steps_of(db, run_id)
    assert [s["kind"] for s in steps] == ["model_started", "model", "tool_call", "ending"]
    assert steps[-1]["payload"]["ending"] == "cancelled"
    assert surface.delivered == [(run_id, Ended("cancelled"))]


async def test_cancel_stops_the_model_call_under_way_not_at_the_next_step(
        ingest: Dispatcher, db: TestStore, published: Registry) -> None:
    """`!cancel` while the model is answering (a 20 s answer): the call is stopped within a second — the cancel
    is heard by the worker (NOTIFY summon_cancel) and the call's stop set — not finished and paid for first."""
    BOOK.say("Helper, slowly?", [{"text": "never said", "delay": 20, "cost_usd": 0.002}])
    clock = SystemClock()
    surface = RecordingSurface()
    worker = Worker(db, lambda: published, stand_in(clock), {"rooms": surface}, clock,
                    WorkerSettings(poll_seconds=0.2), worker_id="w-cancel", status=STAND_IN)
    stop = asyncio.Event()
    running = asyncio.ensure_future(worker.run(stop))
    try:
        await feed(ingest, db, "t0", [message("Helper, slowly?", mentions=[HELPER])])
        started = time.monotonic()
        while not await db.pool.fetchval("SELECT count(*) FROM agent_steps WHERE kind = 'model_started'"):
            assert time.monotonic() - started < 10, "the run never made its call"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # the call is under way
        asked = time.monotonic()
        await feed(ingest, db, "t1", [message("!cancel")])
        while await db.pool.fetchval("SELECT status FROM agent_runs") != "cancelled":
            assert time.monotonic() - asked < 3, "the call went on after the cancel"
            await asyncio.sleep(0.02)
        assert time.monotonic() - asked < 1.0
    finally:
        stop.set()
        await running
    run_id = await db.pool.fetchval("SELECT id FROM agent_runs")
    kinds = [(s["kind"], s["payload"].get("interrupted")) for s in await steps_of(db, run_id)]
    assert kinds == [("model_started", None), ("model", True), ("ending", None)]
    assert surface.delivered == [(run_id, Ended("cancelled"))]
