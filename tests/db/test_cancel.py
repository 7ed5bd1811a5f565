"""Cancelling: `!cancel`, 🛑, moderators, and a tool requested before the cancel never running."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.matrix.dispatch import Dispatcher
from engine.clock import SystemClock
from engine.content import Registry
from engine.core.messages import ModelStep, Step
from engine.providers.mock import MockModel
from engine.run.hold import Hold
from engine.run.worker import Worker, WorkerSettings
from engine.surface import Ended, RunInfo
from tests.db.runs import insert_run, steps_of
from tests.db.test_ingest import HELPER, ROOM, feed, message, pipeline, state
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import STAND_IN

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
    await feed(ingest, db, "t0", [message("Helper?", mentions=[HELPER], **{"org.summon.script": [{"text": "too late"}]})])
    await feed(ingest, db, "t1", [message("!cancel")])
    surface = RecordingSurface()
    clock = SystemClock()
    await Worker(db, lambda: published, MockModel(clock), {"rooms": surface}, clock, WorkerSettings(),
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


class CancelAfterModelStep(Worker):
    hold_class = CancelAfterModelStepHold


async def test_a_tool_requested_before_the_cancel_never_runs(db: TestStore, published: Registry) -> None:
    await db.pool.execute("CREATE TABLE tickets_for_test (run_id bigint, subject text)")

    async def raise_ticket(run: RunInfo, arguments: dict[str, Any]) -> str:
        await db.pool.execute("INSERT INTO tickets_for_test VALUES ($1, $2)", run.id, arguments["subject"])
        return "ticket raised"

    run_id = await insert_run(db, script=[
        {"tool_calls": [{"id": "c1", "name": "raise_ticket", "arguments": {"subject": "refund"}}]},
        {"text": "I raised a ticket."},
    ])
    clock = SystemClock()
    surface = RecordingSurface()
    worker = CancelAfterModelStep(db, lambda: published, MockModel(clock), {"rooms": surface}, clock,
                                  WorkerSettings(), tools={"raise_ticket": raise_ticket}, worker_id="w", status=STAND_IN)
    await worker.work_once()
    assert await db.pool.fetchval("SELECT count(*) FROM tickets_for_test") == 0  # the effect does not exist
    steps = await steps_of(db, run_id)
    assert [s["kind"] for s in steps] == ["model_started", "model", "tool_call", "ending"]
    assert steps[-1]["payload"]["ending"] == "cancelled"
    assert surface.delivered == [(run_id, Ended("cancelled"))]
