"""The site-event webhook over HTTP, on a real PostgreSQL: who may post (401, 403), for which rooms (403),
what (400, 413 while the body streams in), an event nobody hears (202, recorded, nothing woken), a heard
one (202 with its runs), and a replay (200, nothing new)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from appservice.config import HookKey
from appservice.hooks import DELIVERY, KEY, MAX_BODY, SIGNATURE, TIMESTAMP, EventHooks, sign
from appservice.kinds import KINDS
from appservice.matrix.surface import RoomFacts
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import FakeClock
from engine.content import Registry, compile_sources
from engine.run.publish import publish
from tests.store import TestStore

pytestmark = pytest.mark.db

ROOM = "!shop:localhost"
NOW = 1_800_000_000
SECRET = "shop-secret-0123456789abcdef"
KEYS = {"shop": HookKey(secret=SECRET, events=("site.purchase.*", "site.support.*"), rooms=(ROOM,))}
PAID = "site.purchase.paid"

CASHIER = """---
name: Cashier
hears:
  - event: site.purchase.paid
    ask: Check the order went through.
---
You look after orders.
"""

ClientMaker = Callable[..., Awaitable[TestClient[web.Request, web.Application]]]


@pytest.fixture
async def client(db: TestStore, aiohttp_client: ClientMaker) -> TestClient[web.Request, web.Application]:
    registry = compile_sources({"bots/cashier.md": CASHIER}, kinds=KINDS, server_name="localhost")
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    await db.of(RoomTables).ensure(ROOM)
    await db.of(RoomTables).set_member(ROOM, "@bot_cashier:localhost", "join", None)
    app = web.Application()
    EventHooks(db, lambda: registry, KEYS, FakeClock(datetime.fromtimestamp(NOW, UTC)), RoomFacts("localhost")).routes(app)
    return await aiohttp_client(app)


FACTS = {"room_id": ROOM, "subject": "@ann:localhost", "order": {"id": 12, "total": "9.50"}}


def signed(body: bytes, *, ts: int = NOW, delivery: str | None = None, secret: str = SECRET,
           key: str = "shop", event: str = PAID) -> dict[str, str]:
    return {KEY: key, TIMESTAMP: str(ts), DELIVERY: delivery or str(uuid.uuid4()),
            SIGNATURE: sign(secret, str(ts), event, body), "Content-Type": "application/json"}


async def stored(db: TestStore) -> tuple[int, int]:
    runs = await db.pool.fetchval("SELECT count(*) FROM agent_runs")
    deliveries = await db.pool.fetchval("SELECT count(*) FROM hook_deliveries")
    return runs, deliveries


async def post(client: TestClient[Any, Any], name: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    response = await client.post(f"/hooks/events/{name}", data=body, headers=headers)
    return response.status, await response.json()


BODY = json.dumps(FACTS).encode()


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        (signed(BODY, secret="not-the-secret-0123456789"), 401),
        (signed(BODY, ts=NOW - 301), 401),
        (signed(BODY, ts=NOW + 301), 401),
        (signed(BODY, key="nobody"), 401),
        ({k: v for k, v in signed(BODY).items() if k != SIGNATURE}, 401),
        (signed(b"{}"), 401),  # a signature for another body
        (signed(BODY, event="site.support.escalated"), 401),  # for another event the key may post
    ],
    ids=["bad_signature", "stale", "future", "unknown_key", "unsigned", "signature_of_another_body",
         "signature_for_another_event"],
)
async def test_who_cannot_post_gets_401_and_nothing_is_stored(
        client: TestClient[Any, Any], db: TestStore, headers: dict[str, str], status: int) -> None:
    code, answer = await post(client, "site.purchase.paid", BODY, headers)
    assert code == status and "error" in answer
    assert await stored(db) == (0, 0)


async def test_a_key_not_scoped_to_the_event_is_403(client: TestClient[Any, Any], db: TestStore) -> None:
    body = json.dumps(FACTS).encode()
    code, answer = await post(client, "site.refund.issued", body, signed(body, event="site.refund.issued"))
    assert code == 403 and "site.refund.issued" in answer["error"]
    assert await stored(db) == (0, 0)


async def test_a_key_not_scoped_to_the_room_is_403(client: TestClient[Any, Any], db: TestStore) -> None:
    await db.of(RoomTables).ensure("!other:localhost")
    await db.of(RoomTables).set_member("!other:localhost", "@bot_cashier:localhost", "join", None)
    body = json.dumps({**FACTS, "room_id": "!other:localhost"}).encode()
    code, answer = await post(client, PAID, body, signed(body))
    assert code == 403 and "!other:localhost" in answer["error"]
    assert await stored(db) == (0, 0)


async def test_a_body_past_the_cap_is_refused_while_it_streams(client: TestClient[Any, Any], db: TestStore) -> None:
    # No Content-Length, and the sender stalls after passing the cap: refused then, not after the whole
    # body (which never comes) is buffered.
    sent_past_cap = asyncio.Event()
    finished = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield b'{"room_id": "' + b"x" * (MAX_BODY + 16 * 1024)
        sent_past_cap.set()
        try:
            await asyncio.wait_for(asyncio.Event().wait(), 10)
        except TimeoutError:
            pass
        finished.set()
        yield b'"}'

    headers = {**signed(b""), "Content-Type": "application/json"}
    response = await asyncio.wait_for(client.post(f"/hooks/events/{PAID}", data=body(), headers=headers), 20)
    assert response.status == 413 and "larger than" in (await response.json())["error"]
    assert sent_past_cap.is_set() and not finished.is_set()
    assert await stored(db) == (0, 0)


@pytest.mark.parametrize("body", [b"{not json", b"[]", json.dumps({"subject": "@ann:localhost"}).encode()],
                         ids=["not_json", "not_an_object", "no_room"])
async def test_a_bad_body_is_400(client: TestClient[Any, Any], db: TestStore, body: bytes) -> None:
    code, _ = await post(client, PAID, body, signed(body))
    assert code == 400
    assert await stored(db) == (0, 0)


async def test_only_site_events_are_posted_here(client: TestClient[Any, Any], db: TestStore) -> None:
    code, _ = await post(client, "member.joined", BODY, signed(BODY))
    assert code == 404
    assert await stored(db) == (0, 0)


async def test_an_event_nobody_hears_is_recorded_and_wakes_nothing(client: TestClient[Any, Any], db: TestStore) -> None:
    headers = signed(BODY, event="site.purchase.refunded")
    code, answer = await post(client, "site.purchase.refunded", BODY, headers)
    assert code == 202 and answer["runs"] == []
    assert await stored(db) == (0, 1)  # every verified delivery is recorded
    row = await db.pool.fetchrow("SELECT delivery, key_id, event FROM hook_deliveries")
    assert row is not None and tuple(row) == (headers[DELIVERY], "shop", "site.purchase.refunded")
    code, answer = await post(client, "site.purchase.refunded", BODY, headers)
    assert code == 200 and answer["replayed"] is True
    assert await stored(db) == (0, 1)


async def test_a_heard_event_wakes_its_bot_with_the_body_as_facts(client: TestClient[Any, Any], db: TestStore) -> None:
    headers = signed(BODY)
    code, answer = await post(client, "site.purchase.paid", BODY, headers)
    assert code == 202 and len(answer["runs"]) == 1 and answer["refused"] == []
    run = await db.runs.get(answer["runs"][0])
    assert run is not None
    assert (run.bot, run.place, run.subject, run.asked_by) == ("cashier", ROOM, "@ann:localhost", None)
    assert run.context["facts"] == FACTS
    assert run.trigger_event == f"event:site.purchase.paid:{headers[DELIVERY]}:cashier"
    assert run.conversation == "@ann:localhost"


async def test_a_replayed_delivery_wakes_nothing_new(client: TestClient[Any, Any], db: TestStore) -> None:
    headers = signed(BODY)
    first, _ = await post(client, "site.purchase.paid", BODY, headers)
    await db.pool.execute("UPDATE agent_runs SET status = 'done'")  # not busy: only the replay holds it back
    code, answer = await post(client, "site.purchase.paid", BODY, headers)
    assert (first, code) == (202, 200) and answer["replayed"] is True
    # The same signed request under a fresh delivery id is the same message, replayed.
    code, answer = await post(client, "site.purchase.paid", BODY, {**headers, DELIVERY: str(uuid.uuid4())})
    assert code == 200 and answer["replayed"] is True
    assert await stored(db) == (1, 1)


async def test_a_second_event_while_the_first_run_is_queued_is_busy(client: TestClient[Any, Any], db: TestStore) -> None:
    again = json.dumps({**FACTS, "order": {"id": 13}}).encode()
    await post(client, "site.purchase.paid", BODY, signed(BODY))
    code, answer = await post(client, "site.purchase.paid", again, signed(again))
    assert code == 202 and answer["runs"] == [] and answer["refused"] == ["busy"]
    assert await stored(db) == (1, 2)
