"""A long tool call keeps its lease, and a side-effecting one is done once (issue 24, item 6; SPEC §15), on a real
PostgreSQL with the real worker.

On main the lease (90 s) was renewed only by step writes, and a tool (``create_bot`` waits up to 180 s for its
dry run) writes none while it runs: the sweep re-queued the run, the next holder told the model the call was
interrupted, and the model called it again while the first call finished — two bots, two rooms, two dry runs.
Here the lease is renewed while a tool runs (fenced: a renewal that finds the run taken stops the tool), and a
tool with side effects is keyed by run and call id, so the next holder returns the first result. About 5 s."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.clock import SystemClock
from engine.content import Registry
from engine.core.messages import ModelRequest, ModelStep, ToolCall, ToolSpec
from engine.errors import LeaseLost
from engine.providers.base import Watch
from engine.providers.mock import MockModel
from engine.run.hold import INTERRUPTED
from engine.run.worker import Worker, WorkerSettings
from engine.tools.base import BUILTIN_SPECS, Offered, RunRef, SideEffects
from engine.tools.runner import ToolRunner
from tests.db.runs import insert_run, steps_of
from tests.db.test_worker import RecordingSurface, run_row
from tests.store import TestStore
from tests.support import STAND_IN, eventually

pytestmark = pytest.mark.db


class Retrier(MockModel):
    """A model that does what the issue saw one do: it asks for ``make_it``; told the call was interrupted, it
    asks again; told what it made, it says so."""

    async def answer(self, request: ModelRequest, *, turn: int, allowance: float | None = None,
                     run_id: int | None = None, watch: Watch | None = None) -> list[ModelStep]:
        results = [m for m in request.messages if m.role == "tool"]
        if not results or results[-1].text == INTERRUPTED:
            call = ToolCall(f"c{len(results) + 1}", "make_it", {})
            return [ModelStep(tool_calls=(call,), provider=self.name, model="mock")]
        return [ModelStep(text=f"done: {results[-1].text}", provider=self.name, model="mock")]


def worker(db: TestStore, registry: Registry, worker_id: str, tools: dict[str, Any], *,
           surface: RecordingSurface | None = None, **settings: Any) -> Worker:
    clock = SystemClock()
    return Worker(db, lambda: registry, Retrier(clock), {"rooms": surface or RecordingSurface()}, clock,
                  WorkerSettings(**{"lease_seconds": 30, "poll_seconds": 0.1, **settings}), harness=tools,
                  worker_id=worker_id, status=STAND_IN)


KINDS = ["model_started", "model", "tool_call", "tool_result", "model_started", "model", "answer"]


async def test_a_tool_that_takes_longer_than_the_lease_is_done_once(db: TestStore, published: Registry) -> None:
    made: list[int] = []

    async def make_it(run: RunRef, arguments: dict[str, Any]) -> str:
        made.append(run.id)
        await asyncio.sleep(2.5)  # 2.5 leases
        return f"made #{len(made)}"

    surface = RecordingSurface()
    # Two workers, each sweeping every 0.2 s: on main, either took the run once the 1 s lease ran out.
    workers = [worker(db, published, name, {"make_it": make_it}, surface=surface, lease_seconds=1,
                      sweep_seconds=0.2) for name in ("a", "b")]
    run_id = await insert_run(db)
    stop = asyncio.Event()
    loops = [asyncio.ensure_future(w.run(stop)) for w in workers]
    try:
        await eventually(lambda: _finished(db, run_id), timeout=30)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*loops), 10)
    assert made == [run_id]  # done once
    row = await run_row(db, run_id)
    assert (row["status"], row["answer"], row["attempts"]) == ("done", "done: made #1", 1)  # finished once
    steps = await steps_of(db, run_id)
    assert [s["kind"] for s in steps] == KINDS
    assert len({s["worker"] for s in steps}) == 1
    assert [run for run, _ in surface.delivered] == [run_id]


async def test_a_side_effecting_call_whose_run_was_taken_is_not_done_again_by_the_next_holder(
    db: TestStore, published: Registry,
) -> None:
    made: list[int] = []

    async def make_it(run: RunRef, arguments: dict[str, Any]) -> str:
        made.append(run.id)
        # The sweep takes the run while the tool works (its worker stalled past the lease, say): what the tool
        # did is done, and its worker finds out only when it records the result.
        await db.pool.execute(
            "UPDATE agent_runs SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL WHERE id = $1", run.id)
        return f"made #{len(made)}"

    tools = {"make_it": SideEffects(make_it)}
    run_id = await insert_run(db)
    assert await worker(db, published, "a", tools).work_once()  # its result's step is refused: LeaseLost
    assert [s["kind"] for s in await steps_of(db, run_id)] == KINDS[:3]
    assert (await run_row(db, run_id))["status"] == "queued"

    assert await worker(db, published, "b", tools).work_once()
    assert made == [run_id]  # not made again
    steps = await steps_of(db, run_id)
    assert [s["kind"] for s in steps] == KINDS
    result = steps[3]
    assert result["worker"] == "b" and result["payload"]["content"] == "made #1"  # its first result, not "interrupted"
    assert not result["payload"]["interrupted"] and not result["payload"]["is_error"]
    assert (await run_row(db, run_id))["answer"] == "done: made #1"


async def test_the_runner_keys_a_side_effecting_call_by_run_and_call_id(db: TestStore, published: Registry) -> None:
    made: list[str] = []
    looked: list[str] = []

    async def make_it(run: RunRef, arguments: dict[str, Any]) -> str:
        made.append(arguments["what"])
        return f"made {arguments['what']} (#{len(made)})"

    async def look(run: RunRef, arguments: dict[str, Any]) -> str:
        looked.append("x")
        return f"looked {len(looked)} times"

    run_id = await insert_run(db)
    claim = await db.runs.claim("w", 30)
    assert claim is not None and claim.run.id == run_id
    toolbox = ToolRunner(lambda: published, {}, db, harness={"make_it": SideEffects(make_it), "look": look})
    ref = RunRef(run_id, "helper", "rooms")
    offer = Offered(tools=(ToolSpec("make_it", "Makes it."), ToolSpec("look", "Looks.")))
    assert await toolbox.run(ref, offer, "make_it", {"what": "a bot"}, call_id="c1", holder="w") == (
        "made a bot (#1)", False)
    # The same call again: its first result, nothing made. Another call: made.
    assert await toolbox.run(ref, offer, "make_it", {"what": "a bot"}, call_id="c1", holder="w") == (
        "made a bot (#1)", False)
    assert await toolbox.run(ref, offer, "make_it", {"what": "a room"}, call_id="c2", holder="w") == (
        "made a room (#2)", False)
    assert made == ["a bot", "a room"]
    assert await toolbox.first_result(run_id, "c1") == ("made a bot (#1)", False)
    assert await toolbox.first_result(run_id, "c9") is None
    # A tool without side effects is simply run each time, and keeps no record.
    for _ in range(2):
        await toolbox.run(ref, offer, "look", {}, call_id="c3", holder="w")
    assert looked == ["x", "x"]
    assert await db.pool.fetchval("SELECT array_agg(call_id ORDER BY call_id) FROM tool_calls") == ["c1", "c2"]
    # Only the lease's holder begins one.
    with pytest.raises(LeaseLost):
        await toolbox.run(ref, offer, "make_it", {"what": "more"}, call_id="c4", holder="somebody else")
    assert made == ["a bot", "a room"]
    assert "make_it" not in BUILTIN_SPECS


async def test_a_tool_whose_run_was_taken_is_stopped_at_the_next_renewal(db: TestStore, published: Registry) -> None:
    started = asyncio.Event()
    outcome: list[str] = []

    async def make_it(run: RunRef, arguments: dict[str, Any]) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            outcome.append("stopped")
            raise
        outcome.append("finished")
        return "made"

    run_id = await insert_run(db)
    held = asyncio.ensure_future(worker(db, published, "a", {"make_it": SideEffects(make_it)},
                                        lease_seconds=0.9).work_once())
    await asyncio.wait_for(started.wait(), 10)
    await db.pool.execute("UPDATE agent_runs SET lease_owner = 'thief', lease_expires_at = now() + interval '1 minute'"
                          " WHERE id = $1", run_id)
    # The next renewal (every 0.3 s) finds the run taken: the tool is stopped there, and so is the hold.
    assert await asyncio.wait_for(held, 10)
    assert outcome == ["stopped"]
    assert [s["kind"] for s in await steps_of(db, run_id)] == KINDS[:3]  # nothing written after it
    row = await run_row(db, run_id)
    assert row["lease_owner"] == "thief"
    # Begun and never reported back: a holder after it says so rather than doing it again.
    assert await db.pool.fetchval("SELECT finished_at IS NULL FROM tool_calls WHERE run_id = $1", run_id)


async def _finished(db: TestStore, run_id: int) -> bool:
    return (await run_row(db, run_id))["status"] in ("done", "failed", "cancelled")
