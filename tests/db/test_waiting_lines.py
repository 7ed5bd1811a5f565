"""A queue people can see (issue 18): a run that waits longer than a moment — queued for a worker's slot, or
held and waiting for a provider's permit — says so on its progress line, with how many are ahead of it,
edited in place (at most every so often) and put back to "working" when its wait is over; on a real
PostgreSQL, the lines as queued for the homeserver."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.matrix.delivery.render import progress_txn
from appservice.matrix.delivery.waiting import WaitingLines
from engine.clock import FakeClock
from engine.content import Registry
from tests.db.runs import insert_run
from tests.store import TestStore

pytestmark = pytest.mark.db


async def lines_of(db: TestStore, run_id: int) -> list[dict[str, Any]]:
    """The run's progress line and its edits, in order: (txn id, what it says, what it edits)."""
    return [{"txn": r["txn_id"], "says": r["content"].get("m.new_content", r["content"])["body"], "of": r["of_txn"]}
            for r in await db.pool.fetch("SELECT txn_id, content, of_txn FROM outbox WHERE run_id = $1 ORDER BY id",
                                         run_id)]


async def waited(db: TestStore, seconds: float) -> None:
    await db.pool.execute("UPDATE agent_runs SET created_at = created_at - make_interval(secs => $1)", seconds)
    await db.pool.execute("UPDATE provider_permits SET asked_at = asked_at - make_interval(secs => $1)", seconds)


async def test_runs_queued_for_a_slot_say_how_many_are_ahead_then_working(db: TestStore, published: Registry) -> None:
    clock = FakeClock()
    lines = WaitingLines(db, lambda: published, clock, shown_after=1.0, edit_every=10.0)
    ids = [await insert_run(db, script=[{"text": "hi"}]) for _ in range(3)]
    await lines.look()
    assert [await lines_of(db, i) for i in ids] == [[], [], []]  # not longer than a moment yet
    await waited(db, 2.0)
    await lines.look()
    said = [await lines_of(db, i) for i in ids]
    assert [s[0]["txn"] for s in said] == [progress_txn(i) for i in ids]
    assert said[0][0]["says"].startswith("Helper is answering others first — yours is next…")
    assert said[2][0]["says"].startswith("Helper is answering others first — yours is waiting, 2 ahead of it…")
    assert "🛑" in said[2][0]["says"]  # the line cancels, as a working line does
    # The first is taken by a worker: it no longer waits, and its line says it is being worked on.
    claim = await db.runs.claim("w", 30)
    assert claim is not None and claim.run.id == ids[0]
    await lines.look()
    first = await lines_of(db, ids[0])
    assert [(x["says"].split("…")[0], x["of"]) for x in first] == [
        ("Helper is answering others first — yours is next", None), ("Helper is working on it", progress_txn(ids[0]))]
    # The others moved up; their lines say so once it is time to bring them up to date (not on every look).
    assert len(await lines_of(db, ids[2])) == 1
    clock.advance(10.0)
    await lines.look()
    last = await lines_of(db, ids[2])
    assert [x["says"].split("…")[0] for x in last] == [
        "Helper is answering others first — yours is waiting, 2 ahead of it",
        "Helper is answering others first — yours is waiting, 1 ahead of it"]
    assert last[1]["of"] == progress_txn(ids[2])


async def test_a_run_waiting_for_a_providers_permit_says_so(db: TestStore, published: Registry) -> None:
    lines = WaitingLines(db, lambda: published, FakeClock(), shown_after=1.0)
    ids = [await insert_run(db, script=[{"text": "hi"}]) for _ in range(3)]
    for _ in ids:
        claim = await db.runs.claim("w", 30)
        assert claim is not None
    # Two wait in line for the same provider, one for another: each counts its own line.
    for run_id, gate in zip(ids, ["p", "p", "q"], strict=True):
        await db.providers.ask(gate, "w", run_id, 10, lease_seconds=30, granted=False, look_within=20)
    await waited(db, 2.0)
    await lines.look()
    said = [(await lines_of(db, i))[0]["says"].split("…")[0] for i in ids]
    assert said == ["Helper is answering others first — yours is next",
                    "Helper is answering others first — yours is waiting, 1 ahead of it",
                    "Helper is answering others first — yours is next"]
    # Granted: working again; cancelled while waiting: nothing more is said.
    await db.pool.execute("UPDATE provider_permits SET granted_at = now() WHERE run_id = $1", ids[0])
    await db.pool.execute("UPDATE agent_runs SET cancel_requested = true WHERE id = $1", ids[1])
    await lines.look()
    assert [x["says"].split("…")[0] for x in await lines_of(db, ids[0])][-1] == "Helper is working on it"
    assert len(await lines_of(db, ids[1])) == 1


async def test_what_waits_by_bot_and_by_provider_for_summon_status(db: TestStore, published: Registry) -> None:
    ids = [await insert_run(db) for _ in range(4)]
    await insert_run(db, bot="echo")
    claim = await db.runs.claim("w", 30)
    assert claim is not None and claim.run.id == ids[0]
    await db.providers.ask("p", "w", ids[0], 10, lease_seconds=30, granted=False, look_within=20)
    granted = await db.providers.ask("p", "w2", None, 50, lease_seconds=30, granted=True, look_within=20)
    await db.providers.pause("q", 30, "Rate limit reached")
    await waited(db, 3.0)
    queue = {q.bot: q for q in await db.runs.queue()}
    assert (queue["helper"].queued, queue["helper"].waiting_for_provider, queue["helper"].running) == (3, 1, 1)
    assert queue["helper"].oldest_queued is not None and queue["helper"].oldest_queued >= 3
    assert queue["helper"].oldest_waiting_for_provider is not None
    assert (queue["echo"].queued, queue["echo"].oldest_waiting_for_provider) == (1, None)
    states = {s.provider: s for s in await db.providers.status()}
    assert (states["p"].in_flight, states["p"].waiting, states["p"].requests_last_minute) == (1, 1, 1)
    assert states["p"].tokens_last_minute == 50 and states["p"].paused_for is None
    assert states["q"].paused_for is not None and states["q"].paused_reason == "Rate limit reached"
    await db.providers.release(granted, 70)
    assert {s.provider: s for s in await db.providers.status()}["p"].in_flight == 0
