"""The loop on a real PostgreSQL with the real worker code and a scripted model."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import yaml

from appservice.matrix.surface import RoomFacts
from engine.clock import SystemClock
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import ModelStep
from engine.errors import LeaseLost
from engine.providers.mock import MockModel, StandInModel
from engine.run.worker import Worker, WorkerSettings
from engine.store import Families, Tx
from engine.surface import Answered, Ended, Opened, Outcome, RunInfo
from engine.tools.base import BUILTIN_SPECS
from tests.book import BOOK, stand_in, told
from tests.db.runs import insert_run, steps_of
from tests.store import TestStore
from tests.support import STAND_IN, eventually

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]


class RecordingSurface:
    """The rooms surface as a worker sees it, recording what it is handed: who a person is comes from the
    room as stored (``RoomFacts``, as the Matrix surface reads it); deliveries are kept in memory."""

    name = "rooms"

    def __init__(self) -> None:
        self.delivered: list[tuple[int, Outcome]] = []
        self.typing: list[tuple[int, bool]] = []
        self.room_facts = RoomFacts("localhost")

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        return await self.room_facts.facts(db, room_id, user_id, site_classes=site_classes)

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        self.delivered.append((run.id, outcome))

    async def published(self, registry: Registry) -> None:
        pass

    async def working(self, run: RunInfo, on: bool) -> None:
        self.typing.append((run.id, on))


def make_worker(db: TestStore, registry: Registry, surface: RecordingSurface, *, worker_id: str,
                tools: dict[str, Any] | None = None, **settings: Any) -> Worker:
    """A worker whose hands are ``tools``: a built-in's implementation by its name, any other name a test's
    own tool (the harness, offered to every run)."""
    clock = SystemClock()
    builtins = {name: fn for name, fn in (tools or {}).items() if name in BUILTIN_SPECS}
    harness = {name: fn for name, fn in (tools or {}).items() if name not in BUILTIN_SPECS}
    return Worker(db, lambda: registry, stand_in(clock), {"rooms": surface}, clock,
                  WorkerSettings(**{"lease_seconds": 30, "poll_seconds": 0.2, **settings}),
                  tools=builtins, harness=harness, worker_id=worker_id, status=STAND_IN)


async def run_row(db: TestStore, run_id: int) -> asyncpg.Record:
    row = await db.pool.fetchrow("SELECT * FROM agent_runs WHERE id = $1", run_id)
    assert row is not None
    return row


async def test_a_run_that_answers(db: TestStore, published: Registry) -> None:
    surface = RecordingSurface()
    run_id = await insert_run(db, script=[{"text": "Hello **there**", "tokens_in": 10, "tokens_out": 3}])
    assert await make_worker(db, published, surface, worker_id="w1").work_once()
    row = await run_row(db, run_id)
    assert (row["status"], row["answer"], row["ending"]) == ("done", "Hello **there**", None)
    assert [s["kind"] for s in await steps_of(db, run_id)] == ["model_started", "model", "answer"]
    assert surface.delivered == [(run_id, Answered("Hello **there**"))]
    assert surface.typing == [(run_id, True), (run_id, False)]


async def test_a_run_that_calls_a_tool(db: TestStore, published: Registry) -> None:
    effects: list[dict[str, Any]] = []

    async def add_row(run: RunInfo, arguments: dict[str, Any]) -> str:
        effects.append({"run": run.id, **arguments})
        return "row added"

    run_id = await insert_run(db, script=[
        {"tool_calls": [{"id": "c1", "name": "add_row", "arguments": {"x": 1}}]},
        {"text": "I added it."},
    ])
    surface = RecordingSurface()
    await make_worker(db, published, surface, worker_id="w1", tools={"add_row": add_row}).work_once()
    assert effects == [{"run": run_id, "x": 1}]
    steps = await steps_of(db, run_id)
    assert [s["kind"] for s in steps] == ["model_started", "model", "tool_call", "tool_result", "model_started",
                                          "model", "answer"]
    assert steps[3]["payload"]["content"] == "row added"
    assert (await run_row(db, run_id))["answer"] == "I added it."


async def test_an_unknown_tool_is_answered_as_an_error_and_the_run_goes_on(db: TestStore, published: Registry) -> None:
    run_id = await insert_run(db, script=[
        {"tool_calls": [{"id": "c1", "name": "nope", "arguments": {}}]}, {"text": "ok"},
    ])
    await make_worker(db, published, RecordingSurface(), worker_id="w1").work_once()
    steps = await steps_of(db, run_id)
    assert steps[3]["payload"]["is_error"] is True and "nope" in steps[3]["payload"]["content"]
    assert (await run_row(db, run_id))["status"] == "done"


async def test_two_workers_race_for_one_run(db: TestStore, published: Registry) -> None:
    run_id = await insert_run(db, script=[{"text": "one", "delay": 0.2}])
    a = make_worker(db, published, RecordingSurface(), worker_id="a")
    b = make_worker(db, published, RecordingSurface(), worker_id="b")
    claimed = await asyncio.gather(a.work_once(), b.work_once())
    assert sorted(claimed) == [False, True]
    steps = await steps_of(db, run_id)
    assert [s["seq"] for s in steps] == [1, 2, 3]
    assert len({s["worker"] for s in steps}) == 1
    assert (await run_row(db, run_id))["attempts"] == 1


async def test_many_runs_two_workers_each_answered_once(db: TestStore, published: Registry) -> None:
    ids = [await insert_run(db, script=[{"text": f"answer {n}"}]) for n in range(20)]
    surfaces = [RecordingSurface(), RecordingSurface()]
    workers = [make_worker(db, published, s, worker_id=f"w{n}") for n, s in enumerate(surfaces)]

    async def drain(w: Worker) -> None:
        while await w.work_once():
            pass

    await asyncio.gather(*(drain(w) for w in workers))
    delivered = sorted(rid for s in surfaces for rid, _ in s.delivered)
    assert delivered == sorted(ids)
    for rid in ids:
        assert [s["seq"] for s in await steps_of(db, rid)] == [1, 2, 3]


async def test_a_worker_that_lost_its_lease_writes_nothing(db: TestStore, published: Registry) -> None:
    run_id = await insert_run(db, script=[{"text": "from b"}])
    stale = make_worker(db, published, RecordingSurface(), worker_id="stale")
    claim = await db.runs.claim("stale", 30.0)
    assert claim is not None and claim.run.id == run_id
    # Its lease runs out (a long GC pause, say); the sweep re-queues and another worker finishes.
    await db.pool.execute("UPDATE agent_runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", run_id)
    b = make_worker(db, published, RecordingSurface(), worker_id="b")
    assert await b.sweep() == 1
    assert await b.work_once()
    with pytest.raises(LeaseLost):
        await stale.holding(claim).record([], ModelStep(text="late"))
    steps = await steps_of(db, run_id)
    assert {s["worker"] for s in steps} == {"b"}
    assert [s["seq"] for s in steps] == [1, 2, 3]


async def test_a_run_past_its_budget_is_handed_back_and_finished_at_once(db: TestStore, published: Registry) -> None:
    script = [{"tool_calls": [{"id": f"c{n}", "name": "noop", "arguments": {}}]} for n in range(5)]
    run_id = await insert_run(db, script=[*script, {"text": "done"}], limits={"steps": 20, "spend": 1, "minutes": 5})

    async def noop(run: RunInfo, arguments: dict[str, Any]) -> str:
        return "ok"

    heard: list[str] = []

    def hear(*args: Any) -> None:
        heard.append(args[3])

    listener = await db.pool.acquire()
    await listener.add_listener("summon_runs", hear)
    try:
        w = make_worker(db, published, RecordingSurface(), worker_id="w", tools={"noop": noop}, budget_seconds=0)
        holds = 0
        while await w.work_once():
            holds += 1
        assert (await run_row(db, run_id))["status"] == "done"
        # Every hand-back re-queued the run and NOTIFY'd (the trigger), so no step waited for a tick.
        assert holds > 1
        await eventually(lambda: len(heard) >= holds - 1)
        assert set(heard) == {str(run_id)}
    finally:
        await listener.remove_listener("summon_runs", hear)
        await db.pool.release(listener)


async def test_a_failed_model_call_fails_the_run_with_the_providers_words(db: TestStore, published: Registry) -> None:
    surface = RecordingSurface()
    run_id = await insert_run(db, script=[{"error": "model is overloaded", "error_class": "provider"}])
    await make_worker(db, published, surface, worker_id="w").work_once()
    row = await run_row(db, run_id)
    assert (row["status"], row["ending"], row["reason"]) == ("failed", "failed", "model is overloaded")
    assert surface.delivered == [(run_id, Ended("failed", "model is overloaded"))]


async def test_the_sweep_never_requeues_a_cancelled_run_and_fails_a_worn_out_one(db: TestStore, published: Registry) -> None:
    cancelled = await insert_run(db, script=[{"text": "x"}])
    worn = await insert_run(db, script=[{"text": "x"}], max_attempts=1)
    for _ in range(2):
        assert await db.runs.claim("dead", 30.0) is not None
    await db.pool.execute("UPDATE agent_runs SET cancel_requested = true WHERE id = $1", cancelled)
    await db.pool.execute("UPDATE agent_runs SET lease_expires_at = now() - interval '1 second'")
    surface = RecordingSurface()
    assert await make_worker(db, published, surface, worker_id="w").sweep() == 2
    assert (await run_row(db, cancelled))["status"] == "cancelled"
    assert (await run_row(db, worn))["status"] == "failed"
    assert sorted(surface.delivered, key=lambda d: d[0]) == [(cancelled, Ended("cancelled")), (worn, Ended("failed"))]


async def test_notify_wakes_a_waiting_worker_without_a_poll(db: TestStore, published: Registry) -> None:
    surface = RecordingSurface()
    w = make_worker(db, published, surface, worker_id="w", poll_seconds=3600, sweep_seconds=3600)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    try:
        await asyncio.sleep(0.3)  # the worker has found nothing and waits (for an hour, were it polling)
        run_id = await insert_run(db, script=[{"text": "woken"}])
        await eventually(lambda: surface.delivered, timeout=10)
        assert surface.delivered == [(run_id, Answered("woken"))]
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


SLOW_SECOND: list[dict[str, Any]] = [
    {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {}}]},
    {"text": "finished by the second worker", "delay": 30, "cost_usd": 0.01},
]


async def test_a_worker_killed_mid_run_is_finished_by_another(db: TestStore, dsn: str, published: Registry,
                                                              tmp_path: Path) -> None:
    run_id = await insert_run(db, script=SLOW_SECOND)
    config = {
        "homeserver": {"url": "http://127.0.0.1:9", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:9", "as_token": "a" * 20, "hs_token": "h" * 20},
        "database": {"dsn": dsn},
        "worker": {"slots": 1, "lease_seconds": 1, "sweep_seconds": 3600, "poll_seconds": 0.2},
        "content": {"dir": str(REPO / "content")},
    }
    path = tmp_path / "summon.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (tmp_path / "worker.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "tests.book_worker", str(path)],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # The first worker records the model turn and the tool, starts the next model call (recorded with
        # what it may cost) and sits in it for 30 s.
        await eventually(lambda: _count(db, run_id, 5), timeout=30)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
    first = {s["worker"] for s in await steps_of(db, run_id)}
    assert len(first) == 1
    assert (await run_row(db, run_id))["status"] == "running"

    # A second worker sweeps the expired lease, claims the run and finishes it; the scripted delay is short now.
    said = told("hello", [SLOW_SECOND[0], {**SLOW_SECOND[1], "delay": 0}])
    await db.pool.execute("UPDATE agent_runs SET prompt = $2, context = jsonb_set(context, '{lines,0,said}', to_jsonb($2::text)) "
                          "WHERE id = $1", run_id, said)
    second = make_worker(db, published, RecordingSurface(), worker_id="second")
    await eventually(lambda: _swept(second), timeout=10)
    assert await second.work_once()
    row = await run_row(db, run_id)
    assert (row["status"], row["answer"], row["attempts"]) == ("done", "finished by the second worker", 2)
    steps = await steps_of(db, run_id)
    assert [s["kind"] for s in steps] == ["model_started", "model", "tool_call", "tool_result", "model_started",
                                          "model", "model_started", "model", "answer"]
    assert [s["worker"] for s in steps[5:]] == ["second"] * 4
    assert {s["worker"] for s in steps[:5]} == first
    # The call the first worker started (and may have paid for) is closed at its estimate, not forgotten:
    # the run's cost counts it and the call made again.
    assert steps[5]["payload"]["interrupted"] is True and steps[5]["payload"]["cost_usd"] == 0.01
    assert await db.pool.fetchval("SELECT sum(cost_usd)::float8 FROM agent_steps WHERE run_id = $1", run_id) == 0.02


async def _count(db: TestStore, run_id: int, n: int) -> bool:
    return len(await steps_of(db, run_id)) >= n


async def _swept(worker: Worker) -> bool:
    return await worker.sweep() > 0


async def test_a_worker_says_on_its_heartbeat_whether_it_can_answer(db: TestStore, published: Registry) -> None:
    from engine.providers.base import ProviderStatus

    clock = SystemClock()
    w = Worker(db, lambda: published, stand_in(clock), {}, clock, WorkerSettings(heartbeat_seconds=0.1),
               worker_id="beating", status=ProviderStatus(True, "live", ("openrouter", "anthropic")))
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    try:
        row = await eventually(lambda: db.pool.fetchrow("SELECT * FROM provider_status WHERE worker = 'beating'"))
        assert (row["usable"], row["mode"], row["providers"]) == (True, "live", ["openrouter", "anthropic"])
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    # A worker that stops takes its word back.
    assert await db.pool.fetchval("SELECT count(*) FROM provider_status WHERE worker = 'beating'") == 0


async def test_words_that_join_while_the_model_thinks_are_heard_before_the_answer_goes(
    db: TestStore, published: Registry,
) -> None:
    """A line that joins the live run while its last model call is out makes that answer a draft: the
    worker sees it under the finishing commit's row lock, records it, and asks the model again."""
    surface = RecordingSurface()
    run_id = await insert_run(db, script=[{"text": "The Air.", "delay": 1.0},
                                          {"text": "The Air, and it is under 1000."}])
    worker = make_worker(db, published, surface, worker_id="w")
    holding = asyncio.ensure_future(worker.work_once())
    await eventually(lambda: _running(db, run_id), timeout=10)
    joined = await db.runs.join_live(bot="helper", surface="rooms", asked_by="@alice:localhost", place="!room:localhost",
                                      thread=None,
                                      line={"name": "alice", "sender": "@alice:localhost", "said": "and under 1000?"},
                                      header="Said since:")
    assert joined == run_id
    await holding
    kinds = [s["kind"] for s in await steps_of(db, run_id)]
    assert kinds == ["model_started", "model", "heard", "model_started", "model", "answer"]
    heard = (await steps_of(db, run_id))[2]["payload"]
    assert heard == {"kind": "heard", "text": "Said since:\nalice: and under 1000?", "count": 1}
    assert surface.delivered == [(run_id, Answered("The Air, and it is under 1000."))]


async def _running(db: TestStore, run_id: int) -> bool:
    row = await db.runs.get(run_id)
    return row is not None and row.status == "running"


async def test_an_answer_is_said_when_words_join_but_the_run_may_not_ask_again(
    db: TestStore, published: Registry,
) -> None:
    surface = RecordingSurface()
    run_id = await insert_run(db, limits={"steps": 1, "spend": 0.25, "minutes": 5},
                              script=[{"text": "The Air.", "delay": 1.0}, {"text": "never asked"}])
    worker = make_worker(db, published, surface, worker_id="w")
    holding = asyncio.ensure_future(worker.work_once())
    await eventually(lambda: _running(db, run_id), timeout=10)
    await db.runs.join_live(bot="helper", surface="rooms", asked_by="@alice:localhost", place="!room:localhost", thread=None,
                            line={"name": "alice", "sender": "@alice:localhost", "said": "and under 1000?"},
                            header=None)
    await holding
    assert [s["kind"] for s in await steps_of(db, run_id)] == ["model_started", "model", "answer"]
    assert surface.delivered == [(run_id, Answered("The Air."))]


class RecordingModel(StandInModel):
    """The stand-in, keeping every request it was sent."""

    def __init__(self) -> None:
        clock = SystemClock()
        super().__init__(BOOK, MockModel(clock), clock)
        self.requests: list[Any] = []

    async def answer(self, request: Any, **kwargs: Any) -> Any:
        self.requests.append(request)
        return await super().answer(request, **kwargs)


async def test_a_sealed_standing_note_is_opened_for_the_request_and_never_stored(
        db: TestStore, published: Registry) -> None:
    opened: list[Any] = []

    async def open_note(context: Any) -> Opened | None:
        opened.append(dict(context["standing"]))
        return Opened("THE NOTE KEPT SEALED OFF THE ROW")

    model = RecordingModel()
    BOOK.say("hello", [{"text": "ok"}])
    run_id = await db.runs.insert(
        bot="helper", surface="rooms", place="!room:localhost", thread=None, trigger_event=None,
        asked_by="@alice:localhost", subject="@alice:localhost", prompt="hello",
        context={"kind": "timeline", "lines": [{"name": "alice", "said": "hello"}],
                 "standing": {"by": "sealed", "id": "x1"}},
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3)
    assert run_id is not None
    worker = Worker(db, lambda: published, model, {"rooms": RecordingSurface()}, SystemClock(),
                    WorkerSettings(lease_seconds=30, poll_seconds=0.2), worker_id="w1",
                    openers={"sealed": open_note}, status=STAND_IN)
    assert await worker.work_once()
    assert opened == [{"by": "sealed", "id": "x1"}]
    assert "THE NOTE KEPT SEALED OFF THE ROW" in model.requests[0].messages[0].text
    raw = await db.pool.fetchval("SELECT context::text FROM agent_runs WHERE id = $1", run_id)
    steps = await db.pool.fetchval("SELECT string_agg(payload::text, ' ') FROM agent_steps WHERE run_id = $1", run_id)
    assert "SEALED OFF" not in raw and "SEALED OFF" not in steps


def test_a_worker_says_whether_a_provider_is_usable_or_is_not_built() -> None:
    # The old default counted a worker built without a status as the usable stand-in: "no provider, no bots"
    # one call site away from failing open.
    clock = SystemClock()
    with pytest.raises(TypeError, match="status"):
        Worker(None, lambda: None, stand_in(clock), {}, clock, WorkerSettings())  # type: ignore[arg-type, call-arg]
