"""Paid but unrecorded model calls (issue 12, item 11), on a real PostgreSQL with the real worker: a model call
is recorded as started, with what it may cost, before it is made, so a crash or a lost lease after a paid call
is counted — by the run, the person's ceilings and the deployment's cap — and never silently paid again; and a
tool result reaches the model within the context's token budget."""

from __future__ import annotations

from typing import Any

import pytest

from engine.content import AudienceFacts, Registry
from engine.core.messages import CHARS_PER_TOKEN, ModelStartedStep
from engine.core.prompt import CONTEXT_TOKENS
from engine.run.summon import Summoned, Summons, summon
from engine.tools.base import RunRef
from tests.book import BOOK
from tests.db.runs import insert_run, steps_of
from tests.db.test_tools import RecordingModel, worker
from tests.db.test_worker import RecordingSurface, make_worker
from tests.store import TestStore

pytestmark = pytest.mark.db
BUDGET = CONTEXT_TOKENS * CHARS_PER_TOKEN


async def test_a_call_paid_before_a_crash_is_counted_at_its_estimate_and_settled(
    db: TestStore, published: Registry,
) -> None:
    who = "@alice:localhost"
    BOOK.say("hello", [{"text": "Hello.", "cost_usd": 0.05}])
    async with db.transaction("test_summon") as tx:
        summoned = await summon(tx, published, Summons(
            bot="helper", surface="rooms", prompt="hello", asked_by=who, place="!room:localhost",
            facts=AudienceFacts(user_id=who, local_server="localhost", is_member=True), trigger_event="$ask"))
    assert isinstance(summoned, Summoned)
    # Worker A claims the run, records the call as started, makes it (and pays) — and dies before the answer
    # is recorded.
    a = make_worker(db, published, RecordingSurface(), worker_id="a")
    claim = await db.runs.claim("a", 30.0)
    assert claim is not None and claim.run.id == summoned.run_id
    await a.holding(claim).record([], ModelStartedStep(0.05))
    await db.pool.execute("UPDATE agent_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
                          summoned.run_id)
    b = make_worker(db, published, RecordingSurface(), worker_id="b")
    assert await b.sweep() == 1
    assert await b.work_once()
    steps = await steps_of(db, summoned.run_id)
    assert [(s["kind"], s["worker"]) for s in steps] == [
        ("model_started", "a"), ("model", "b"), ("model_started", "b"), ("model", "b"), ("answer", "b")]
    assert steps[1]["payload"]["interrupted"] and steps[1]["payload"]["cost_usd"] == 0.05
    assert steps[2]["payload"]["estimate_usd"] == 0.05  # the call made again is reserved again, too
    # Both calls count: what the run cost, and what the person's ceilings and the deployment's cap see.
    ledger = await db.pool.fetchrow("SELECT who, usd::float8 AS usd, reserved FROM spend_ledger WHERE run_id = $1",
                                    summoned.run_id)
    assert (ledger["who"], ledger["usd"], ledger["reserved"]) == (who, pytest.approx(0.10), False)


async def test_a_tool_result_reaches_the_model_within_the_contexts_budget(db: TestStore, published: Registry) -> None:
    async def dump(run: RunRef, arguments: dict[str, Any]) -> str:
        return "".join(f"row {n}: {'x' * 40}\n" for n in range(20_000))  # about 900 KB

    model = RecordingModel()
    run_id = await insert_run(db, script=[
        {"tool_calls": [{"id": "c1", "name": "dump", "arguments": {}}]}, {"text": "There are many rows."},
    ])
    await worker(db, published, model, {"dump": dump}).work_once()
    [result] = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert len(result["content"]) <= BUDGET and result["content"].startswith("row 0: ")
    assert result["content"].endswith("more characters not shown]")
    [seen] = [m for m in model.requests[1].messages if m.role == "tool"]
    assert seen.text == result["content"]
