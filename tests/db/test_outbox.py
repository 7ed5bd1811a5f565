"""The outbox sender against a homeserver that answers 429 and 500 before taking the message.

A real Synapse does not rate-limit appservice users (`rate_limited: false`), so these answers are
provoked with a small homeserver stand-in on loopback that speaks the client-server API's send
endpoint and error bodies; everything else (the table, the claim, the retry bookkeeping) is real."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from appservice.matrix.outbox import MatrixSender, Outbox
from appservice.matrix.surface import MatrixSurface
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import SystemClock
from engine.content import Registry
from engine.surface import Answered, RunInfo
from engine.tasks import TaskGroup
from tests.db.runs import insert_run
from tests.store import TestStore
from tests.support import eventually

pytestmark = pytest.mark.db


class FakeHomeserver:
    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.looked = 0
        self.delay = 0.0  # seconds each send takes (a busy homeserver)
        self.in_flight = 0
        self.most_in_flight = 0

    async def messages(self, request: web.Request) -> web.Response:
        """Before a retry the sender looks for its own earlier message: none landed here."""
        self.looked += 1
        return web.json_response({"chunk": [], "start": "t0"})

    async def send(self, request: web.Request) -> web.Response:
        self.requests.append({
            "path": request.path, "user_id": request.query.get("user_id"),
            "auth": request.headers.get("Authorization"), "body": await request.json(),
            "at": asyncio.get_running_loop().time(),
        })
        if self.delay:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await asyncio.sleep(self.delay)
            self.in_flight -= 1
        status, body = self.answers.pop(0) if self.answers else (200, {"event_id": "$sent"})
        return web.json_response(body, status=status)


@pytest.fixture
async def homeserver() -> AsyncIterator[tuple[FakeHomeserver, str]]:
    fake = FakeHomeserver([])
    app = web.Application()
    app.router.add_put("/_matrix/client/v3/rooms/{room}/send/{type}/{txn}", fake.send)
    app.router.add_get("/_matrix/client/v3/rooms/{room}/messages", fake.messages)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield fake, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def enqueue(db: TestStore, txn: str, run_id: int | None = None) -> None:
    async with db.transaction("test_enqueue") as tx:
        await tx.of(OutboxTables).enqueue(txn_id=txn, room_id="!r:localhost", sender="@bot_helper:localhost",
                                event_type="m.room.message", content={"msgtype": "m.notice", "body": "hi"},
                                run_id=run_id)


async def drain(outbox: Outbox, db: TestStore, *, until: float) -> None:
    loop = asyncio.get_running_loop()
    while loop.time() < until:
        await outbox.deliver_due()
        row = await db.pool.fetchrow("SELECT status FROM outbox LIMIT 1")
        if row is not None and row["status"] != "pending":
            return
        await asyncio.sleep(0.05)


async def test_a_429_waits_what_the_homeserver_asked_then_sends_once(db: TestStore, homeserver: tuple[FakeHomeserver, str]) -> None:
    fake, url = homeserver
    fake.answers = [(429, {"errcode": "M_LIMIT_EXCEEDED", "error": "slow down", "retry_after_ms": 700})]
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        await enqueue(db, "t-429")
        await drain(outbox, db, until=asyncio.get_running_loop().time() + 10)
    row = await db.pool.fetchrow("SELECT status, event_id, attempts FROM outbox WHERE txn_id = 't-429'")
    assert (row["status"], row["event_id"], row["attempts"]) == ("sent", "$sent", 2)
    assert len(fake.requests) == 2
    assert fake.requests[1]["at"] - fake.requests[0]["at"] >= 0.65  # it honoured retry_after_ms
    # The same transaction id both times: the homeserver can tell a retry from a new message.
    assert fake.requests[0]["path"] == fake.requests[1]["path"]
    assert fake.requests[0]["path"].endswith("/t-429")
    assert fake.requests[0]["user_id"] == "@bot_helper:localhost"
    assert fake.requests[0]["auth"] == "Bearer as_token_xxxxxxxxxxxx"
    assert fake.requests[0]["body"]["org.summon.txn"] == "t-429"  # the marker a lost reply is found by
    assert fake.looked == 1  # it looked for an earlier landing before sending again


async def test_5xx_and_an_unreachable_homeserver_back_off_and_retry(db: TestStore, homeserver: tuple[FakeHomeserver, str]) -> None:
    fake, url = homeserver
    fake.answers = [(502, {}), (500, {"errcode": "M_UNKNOWN", "error": "oops"})]
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        await enqueue(db, "t-5xx")
        await drain(outbox, db, until=asyncio.get_running_loop().time() + 15)
        row = await db.pool.fetchrow("SELECT status, attempts FROM outbox WHERE txn_id = 't-5xx'")
        assert (row["status"], row["attempts"]) == ("sent", 3)

        unreachable = Outbox(db, MatrixSender(session, "http://127.0.0.1:9", "as_token_xxxxxxxxxxxx"), SystemClock())
        await enqueue(db, "t-down")
        await unreachable.deliver_due()
    row = await db.pool.fetchrow("SELECT status, last_error, next_attempt_at > now() AS later FROM outbox WHERE txn_id = 't-down'")
    assert row["status"] == "pending" and row["later"] and "unreachable" in row["last_error"]


async def test_a_refusal_for_good_is_kept_with_its_reason(db: TestStore, homeserver: tuple[FakeHomeserver, str]) -> None:
    fake, url = homeserver
    fake.answers = [(403, {"errcode": "M_FORBIDDEN", "error": "not in room"})]
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        await enqueue(db, "t-403")
        await outbox.deliver_due()
    row = await db.pool.fetchrow("SELECT status, last_error FROM outbox WHERE txn_id = 't-403'")
    assert row["status"] == "failed" and "M_FORBIDDEN" in row["last_error"]
    assert len(fake.requests) == 1


async def test_nothing_pending_is_not_due_now(db: TestStore) -> None:
    """An empty outbox (or one whose messages all went out or failed) has nothing due: None, not 0 — a 0
    had the sender spin about a hundred times a second while idle (issue 12, item 12)."""
    assert await db.of(OutboxTables).next_due() is None
    await enqueue(db, "t-done")
    assert await db.of(OutboxTables).next_due() == 0.0
    await db.pool.execute("UPDATE outbox SET status = 'sent' WHERE txn_id = 't-done'")
    assert await db.of(OutboxTables).next_due() is None


class CountingOutbox(Outbox):
    rounds = 0

    async def deliver_due(self) -> int:
        self.rounds += 1
        return await super().deliver_due()


async def test_an_idle_sender_waits_for_notify_and_still_sends_at_once(
    db: TestStore, homeserver: tuple[FakeHomeserver, str],
) -> None:
    fake, url = homeserver
    stop = asyncio.Event()
    async with aiohttp.ClientSession() as session:
        outbox = CountingOutbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        sending = asyncio.ensure_future(outbox.run(stop))
        try:
            await asyncio.sleep(1.5)
            # Once on start and once when LISTEN connects (notifications from before it are gone); then
            # nothing until something is queued.
            idle_rounds = outbox.rounds
            assert idle_rounds <= 3, f"an idle outbox looked {idle_rounds} times in 1.5 s"
            await enqueue(db, "t-notify")
            loop = asyncio.get_running_loop()
            until = loop.time() + 5
            while not fake.requests and loop.time() < until:
                await asyncio.sleep(0.02)
            assert [r["body"]["org.summon.txn"] for r in fake.requests] == ["t-notify"]
            assert outbox.rounds - idle_rounds <= 3
        finally:
            stop.set()
            outbox.wake()
            await sending


async def held_run(db: TestStore, room: str) -> RunInfo:
    await db.of(RoomTables).ensure(room)
    run_id = await db.runs.insert(
        bot="helper", surface="rooms", place=room, thread=None, trigger_event=f"$ask-{room}",
        asked_by="@alice:localhost", subject="@alice:localhost", prompt="hi", context={"kind": "timeline", "lines": []},
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3)
    assert run_id is not None
    return RunInfo(id=run_id, bot="helper", surface="rooms", place=room, thread=None,
                   trigger_event=f"$ask-{room}", asked_by="@alice:localhost")


async def test_a_freshly_committed_answer_is_sent_at_once_under_its_stable_txn_id(
        db: TestStore, published: Registry, homeserver: tuple[FakeHomeserver, str]) -> None:
    # The fast path: when a run is let go after the commit that queued its answer, the answer goes to the
    # homeserver at once — no sender loop runs here to find it — and its row is the durable record.
    fake, url = homeserver
    tasks = TaskGroup("test")
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        surface = MatrixSurface(db, None, lambda: published, tasks, SystemClock(),  # type: ignore[arg-type]
                                server_name="localhost", typing_delay=60, progress_delay=60,
                                hand_over=outbox.send_now)
        run = await held_run(db, "!fast:localhost")
        await surface.working(run, True)
        async with db.transaction("finish_run") as tx:
            await surface.deliver(tx, run, Answered("at once"))
        await surface.working(run, False)

        async def sent() -> Any:
            return await db.pool.fetchrow("SELECT status, event_id, attempts FROM outbox WHERE txn_id = $1",
                                          f"summon.run{run.id}.answer")

        row = await eventually(lambda: _sent_row(sent), timeout=5)
        assert (row["status"], row["event_id"], row["attempts"]) == ("sent", "$sent", 1)
        assert [r["path"].rsplit("/", 1)[1] for r in fake.requests] == [f"summon.run{run.id}.answer"]

        # Another run's message (or one of no run) still unsent in the room does not hold a fresh answer back:
        # twenty people answered at once in one room are each sent at once.
        second = await held_run(db, "!busy:localhost")
        await enqueue_in(db, "!busy:localhost", "t-other")
        await surface.working(second, True)
        async with db.transaction("finish_run") as tx:
            await surface.deliver(tx, second, Answered("not behind the other one"))
        await surface.working(second, False)

        async def second_sent() -> Any:
            return await db.pool.fetchrow("SELECT status, event_id, attempts FROM outbox WHERE txn_id = $1",
                                          f"summon.run{second.id}.answer")

        row = await eventually(lambda: _sent_row(second_sent), timeout=5)
        assert row["status"] == "sent"
        assert await db.pool.fetchval("SELECT status FROM outbox WHERE txn_id = 't-other'") == "pending"

        # An earlier message of its own run still unsent keeps its place: the fresh one waits for the loop.
        third = await held_run(db, "!order:localhost")
        await enqueue_in(db, "!order:localhost", "t-earlier", run_id=third.id)
        await surface.working(third, True)
        async with db.transaction("finish_run") as tx:
            await surface.deliver(tx, third, Answered("after the earlier one"))
        await surface.working(third, False)
        await asyncio.sleep(0.3)
        rows = await db.pool.fetch("SELECT txn_id, status FROM outbox WHERE room_id = '!order:localhost' ORDER BY id")
        assert [(r["txn_id"], r["status"]) for r in rows] == [("t-earlier", "pending"),
                                                              (f"summon.run{third.id}.answer", "pending")]
        assert await outbox.deliver_due() == 3  # and t-other
        paths = [r["path"].rsplit("/", 1)[1] for r in fake.requests]
        assert paths.index("t-earlier") < paths.index(f"summon.run{third.id}.answer")
    await tasks.close(grace=1.0)


async def _sent_row(fetch: Any) -> Any:
    row = await fetch()
    return row if row is not None and row["status"] == "sent" else None


async def enqueue_in(db: TestStore, room: str, txn: str, run_id: int | None = None) -> None:
    async with db.transaction("test_enqueue") as tx:
        await tx.of(OutboxTables).enqueue(txn_id=txn, room_id=room, sender="@bot_helper:localhost",
                                event_type="m.room.message", content={"msgtype": "m.notice", "body": "earlier"},
                                run_id=run_id)


async def test_answers_to_many_people_in_one_room_go_out_together_each_runs_in_order(
    db: TestStore, published: Registry, homeserver: tuple[FakeHomeserver, str],
) -> None:
    """Twenty people answered at once in one busy room (issue 18): different runs' messages are sent at the
    same time — one after another, the last answer would wait for nineteen sends first — while each run's own
    messages, and a room's messages that belong to no run, keep their order."""
    fake, url = homeserver
    fake.delay = 0.3
    runs = [await insert_run(db, room_id="!r:localhost") for _ in range(8)]
    for run_id in runs:
        await enqueue(db, f"t-{run_id}-a", run_id)
        await enqueue(db, f"t-{run_id}-b", run_id)
    await enqueue(db, "t-none-a")
    await enqueue(db, "t-none-b")
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        assert await outbox.deliver_due() == 18
    assert await db.pool.fetchval("SELECT count(*) FROM outbox WHERE status = 'sent'") == 18
    assert fake.most_in_flight == 9  # eight runs and the room's own messages, each at once
    order = [r["body"]["org.summon.txn"] for r in fake.requests]
    for first, second in [*((f"t-{r}-a", f"t-{r}-b") for r in runs), ("t-none-a", "t-none-b")]:
        assert order.index(first) < order.index(second)
        sent = {r["body"]["org.summon.txn"]: r["at"] for r in fake.requests}
        assert sent[second] - sent[first] >= 0.29  # the second waited for the first's send to return


async def test_a_runs_message_waits_while_an_earlier_one_of_its_run_backs_off(
    db: TestStore, published: Registry, homeserver: tuple[FakeHomeserver, str],
) -> None:
    """The loop keeps a run's order through a retry: while the run's first message backs off after a failed
    send, its second (due) is not sent past it; another run's message in the room goes out meanwhile."""
    fake, url = homeserver
    backing = await insert_run(db, room_id="!r:localhost")
    other = await insert_run(db, room_id="!r:localhost")
    await enqueue(db, "t-first", backing)
    await enqueue(db, "t-second", backing)
    await enqueue(db, "t-elsewhere", other)
    await db.pool.execute("UPDATE outbox SET attempts = 1, next_attempt_at = clock_timestamp() + interval '1 hour' "
                          "WHERE txn_id = 't-first'")
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        assert await outbox.deliver_due() == 1
        assert [r["body"]["org.summon.txn"] for r in fake.requests] == ["t-elsewhere"]
        await db.pool.execute("UPDATE outbox SET next_attempt_at = clock_timestamp() WHERE txn_id = 't-first'")
        assert await outbox.deliver_due() == 2
    order = [r["body"]["org.summon.txn"] for r in fake.requests]
    assert order.index("t-first") < order.index("t-second")


async def test_an_answer_refused_for_good_says_so_on_its_run_and_the_room_is_told_once(
        db: TestStore, published: Registry, homeserver: tuple[FakeHomeserver, str]) -> None:
    from appservice.inspect import runs_report
    from appservice.matrix.undelivered import Undelivered
    from appservice.metrics import Metrics

    fake, url = homeserver
    fake.answers = [(403, {"errcode": "M_FORBIDDEN", "error": "User @bot_helper:localhost not in room"})]
    run_id = await insert_run(db)
    await db.pool.execute("UPDATE agent_runs SET status = 'done', answer = 'the answer' WHERE id = $1", run_id)
    metrics = Metrics()
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock(),
                        undelivered=Undelivered(lambda: published, service_user="@summon:localhost", metrics=metrics))
        async with db.transaction("t") as tx:
            await tx.of(OutboxTables).enqueue(txn_id=f"summon.run{run_id}.answer", room_id="!r:localhost",
                                    sender="@bot_helper:localhost", event_type="m.room.message",
                                    content={"msgtype": "m.notice", "body": "the answer",
                                             "m.relates_to": {"m.in_reply_to": {"event_id": "$asked"}},
                                             "m.mentions": {"user_ids": ["@alice:localhost"]}}, run_id=run_id)
        await outbox.deliver_due()
        await outbox.deliver_due()  # the room is told, by the service's own user
    steps = await db.pool.fetch("SELECT kind, payload FROM agent_steps WHERE run_id = $1 ORDER BY seq", run_id)
    assert [s["kind"] for s in steps][-1:] == ["undelivered"] and "M_FORBIDDEN" in steps[-1]["payload"]["reason"]
    told = [r for r in fake.requests if r["user_id"] == "@summon:localhost"]
    assert len(told) == 1 and "Helper's answer could not be posted here" in told[0]["body"]["body"]
    assert told[0]["body"]["m.relates_to"] == {"m.in_reply_to": {"event_id": "$asked"}}
    report = "\n".join(await runs_report(db, run_id=run_id, room=None, bot=None, limit=1))
    assert f"run {run_id}" in report and "not delivered: 403 M_FORBIDDEN" in report, report
    assert metrics.registry.get_sample_value("summon_answers_undelivered_total", {"bot": "helper"}) == 1
    # Said once: the same failure seen again records nothing more.
    async with db.transaction("t") as tx:
        assert not await tx.of(OutboxTables).undelivered(run_id, "again")


async def test_a_message_still_refused_as_try_again_after_a_day_of_it_is_given_up_on(
        db: TestStore, homeserver: tuple[FakeHomeserver, str]) -> None:
    from appservice.matrix.outbox import GIVE_UP_ATTEMPTS

    fake, url = homeserver
    fake.answers = [(502, {})]
    async with aiohttp.ClientSession() as session:
        outbox = Outbox(db, MatrixSender(session, url, "as_token_xxxxxxxxxxxx"), SystemClock())
        await enqueue(db, "t-day")
        await db.pool.execute("UPDATE outbox SET attempts = $1 WHERE txn_id = 't-day'", GIVE_UP_ATTEMPTS - 1)
        await outbox.deliver_due()
    row = await db.pool.fetchrow("SELECT status, last_error FROM outbox WHERE txn_id = 't-day'")
    assert row["status"] == "failed" and row["last_error"].startswith(f"gave up after {GIVE_UP_ATTEMPTS} attempts")
