"""A transaction that can never succeed (issue 12, item 10), on a real PostgreSQL: it is not answered 500 forever.
An event the database (or asyncpg, before it sends anything) refuses is kept in `rejected_events` with its
reason and the rest stored; a failure outside every event's savepoint is counted durably, by the transaction
id's digest, and after `GIVE_UP_AFTER` attempts the transaction is stored without what fails and acknowledged;
should even that keep failing, its events are recorded as rejected and it is acknowledged. A database that is
away never counts."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from appservice.matrix.dispatch import GIVE_UP_AFTER, LAST_TRIES, txn_digest
from appservice.matrix.inbound.transactions import TransactionEndpoint
from appservice.matrix.tables.lines import LineTables
from engine.content import Registry
from engine.errors import StoreRefused, StoreUnavailable
from tests.db.test_ingest import HELPER, count, feed, message, pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
TOKEN = "hs-token-0123456789abcdef"
ClientMaker = Callable[..., Awaitable[TestClient[web.Request, web.Application]]]


async def stored(db: TestStore) -> set[str]:
    return {r["event_id"] for r in await db.pool.fetch("SELECT event_id FROM room_events")}


async def rejected(db: TestStore) -> dict[str, str]:
    return {r["event_id"]: r["reason"] for r in await db.pool.fetch("SELECT event_id, reason FROM rejected_events")}


async def test_an_event_the_driver_refuses_is_rejected_and_the_rest_stored(db: TestStore, published: Registry) -> None:
    """asyncpg refuses a timestamp past a bigint before sending it (an InterfaceError, like a closed
    connection): it used to read as "the database went away", so the transaction was answered 500 forever."""
    huge = {**message("stamped past the end of time"), "origin_server_ts": 2**63}
    lonely = message("a lone surrogate \ud800 in it")
    fine = message("Helper, still here?", mentions=[HELPER])
    assert await feed(pipeline(db, published), db, "t1", [huge, lonely, fine]) == []
    assert await stored(db) == {fine["event_id"]}
    assert await count(db, "SELECT count(*) FROM agent_runs") == 1  # the rest acted on as ever
    reasons = await rejected(db)
    assert set(reasons) == {huge["event_id"], lonely["event_id"]}
    assert reasons[huge["event_id"]].startswith("StoreRefused: store_event: DataError")
    kept = await db.pool.fetchval("SELECT event FROM rejected_events WHERE event_id = $1", lonely["event_id"])
    assert "\\ud800" in kept  # as received, escaped so the database takes it


async def test_a_bad_event_after_good_ones_undoes_the_pass_at_once_and_the_rest_are_stored_once(
    db: TestStore, published: Registry, caplog: pytest.LogCaptureFixture,
) -> None:
    """The events are stored at once, without a savepoint each; one that fails after others were stored (and a
    bot summoned) rolls that pass back whole, and the transaction is stored again with a savepoint an event:
    the good ones stored and acted on once, the bad one rejected, in the same request."""
    ask = message("Helper, first?", mentions=[HELPER])
    huge = {**message("stamped past the end of time"), "origin_server_ts": 2**63}
    after = message("and after it")
    ingest = pipeline(db, published)
    with caplog.at_level(logging.WARNING, logger="appservice.matrix.dispatch"):
        assert await feed(ingest, db, "t-mixed", [ask, huge, after]) == []
    assert await stored(db) == {ask["event_id"], after["event_id"]}
    assert await count(db, "SELECT count(*) FROM agent_runs") == 1  # summoned once, not once a pass
    assert set(await rejected(db)) == {huge["event_id"]}
    assert any("storing it again with each event in a savepoint" in r.getMessage() for r in caplog.records)
    assert await count(db, "SELECT count(*) FROM as_transaction_failures") == 0  # nothing for the homeserver to retry
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="appservice.matrix.dispatch"):
        assert await feed(ingest, db, "t-fine", [message("fine"), message("also fine")]) == []
    assert not [r for r in caplog.records if "storing it again" in r.getMessage()]
    assert await count(db, "SELECT count(*) FROM room_events") == 4


async def test_a_failure_outside_every_savepoint_gives_up_after_a_few_attempts(
    db: TestStore, published: Registry, caplog: pytest.LogCaptureFixture,
) -> None:
    """The transaction id itself is what the database refuses (a NUL), so no savepoint around an event helps.
    Counted across restarts (a new pipeline for every attempt), then stored without it and acknowledged."""
    txn = "t\x00nul"
    fine = message("Helper, anyone?", mentions=[HELPER])
    for attempt in range(1, GIVE_UP_AFTER + 1):
        with pytest.raises(StoreRefused):
            await feed(pipeline(db, published), db, txn, [fine])
        assert await db.of(LineTables).transaction_failures(txn_digest(txn)) == attempt
    assert await stored(db) == set()
    with caplog.at_level(logging.ERROR, logger="appservice.matrix.dispatch"):
        assert await feed(pipeline(db, published), db, txn, [fine]) == []
    assert await stored(db) == {fine["event_id"]}
    assert await count(db, "SELECT count(*) FROM agent_runs") == 1
    # Its id could not be remembered, so its count stays: sent again, it is stored carefully at once.
    assert any("its id cannot be remembered" in r.getMessage() for r in caplog.records)
    # The homeserver, not having heard, may send it again: stored once, summoned once.
    assert await feed(pipeline(db, published), db, txn, [fine]) == []
    assert await count(db, "SELECT count(*) FROM agent_runs") == 1


async def test_when_storing_carefully_fails_too_the_events_are_rejected_and_it_is_acknowledged(
    db: TestStore, published: Registry, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bug outside every savepoint, where storing carefully cannot leave it out either (forgetting the
    failures, which only a careful attempt does)."""
    ingest = pipeline(db, published)

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug that fails every time")

    monkeypatch.setattr(ingest.threads, "keep", broken)
    monkeypatch.setattr(LineTables, "forget_transaction_failures", broken)
    events = [message("one"), message("two")]
    for _ in range(GIVE_UP_AFTER + LAST_TRIES):
        with pytest.raises(RuntimeError):
            await feed(ingest, db, "t-doomed", events)
    assert await feed(ingest, db, "t-doomed", events) == []  # acknowledged: the homeserver moves on
    assert await stored(db) == set()
    reasons = await rejected(db)
    assert set(reasons) == {e["event_id"] for e in events}
    assert all(r == f"the transaction could not be stored in {GIVE_UP_AFTER + LAST_TRIES} attempts"
               for r in reasons.values())


async def test_a_database_that_is_away_is_never_counted(db: TestStore, published: Registry,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = pipeline(db, published)

    async def away(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("the database is unavailable (a test)")

    monkeypatch.setattr(ingest.threads, "keep", away)
    for _ in range(GIVE_UP_AFTER + LAST_TRIES + 1):
        with pytest.raises(StoreUnavailable):
            await feed(ingest, db, "t-later", [message("wait for me")])
    assert await db.of(LineTables).transaction_failures(txn_digest("t-later")) == 0
    assert await rejected(db) == {}
    monkeypatch.undo()
    await feed(ingest, db, "t-later", [message("wait for me")])  # the database back: stored at once
    assert len(await stored(db)) == 1


async def test_a_failing_step_outside_the_events_is_left_out_when_stored_carefully(
    db: TestStore, published: Registry, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ingest = pipeline(db, published)

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("keeping fetched threads is broken")

    monkeypatch.setattr(ingest.threads, "keep", broken)
    asked = message("Helper, now?", mentions=[HELPER])
    for _ in range(GIVE_UP_AFTER):
        with pytest.raises(RuntimeError):
            await feed(ingest, db, "t-careful", [asked])
    assert await feed(ingest, db, "t-careful", [asked]) == []
    assert await stored(db) == {asked["event_id"]}
    assert await count(db, "SELECT count(*) FROM agent_runs") == 1
    assert await db.of(LineTables).transaction_failures(txn_digest("t-careful")) == 0


async def test_a_failure_that_goes_away_is_forgotten_once_stored(db: TestStore, published: Registry,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ingest = pipeline(db, published)

    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("fixed by the next deploy")

    monkeypatch.setattr(ingest.threads, "keep", broken)
    patience = message("patience")
    with pytest.raises(RuntimeError):
        await feed(ingest, db, "t-mended", [patience])
    assert await db.of(LineTables).transaction_failures(txn_digest("t-mended")) == 1
    monkeypatch.undo()
    assert await feed(ingest, db, "t-mended", [patience]) == []
    assert await db.of(LineTables).transaction_failures(txn_digest("t-mended")) == 0
    assert await rejected(db) == {}


async def test_the_homeserver_hears_500_a_few_times_then_200(db: TestStore, published: Registry,
                                                             aiohttp_client: ClientMaker) -> None:
    ingest = pipeline(db, published)

    async def handler(txn_id: str, events: list[dict[str, Any]], ephemeral: list[dict[str, Any]]) -> bool:
        return await ingest.transaction(txn_id, events) is not None

    async def nobody(user_id: str) -> bool:
        return False

    app = web.Application()
    TransactionEndpoint(TOKEN, handler, nobody).routes(app)
    client = await aiohttp_client(app)
    fine = message("hello")
    statuses = []
    for _ in range(GIVE_UP_AFTER + 1):
        response = await client.put("/_matrix/app/v1/transactions/t%00nul", json={"events": [fine]},
                                    headers={"Authorization": f"Bearer {TOKEN}"})
        statuses.append(response.status)
    assert statuses == [500] * GIVE_UP_AFTER + [200]
    assert await stored(db) == {fine["event_id"]}
