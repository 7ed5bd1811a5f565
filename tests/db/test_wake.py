"""Waking on events, on a real PostgreSQL: each hearing bot summoned with the facts on its run; only
bots in the room; ``serves:`` the whole gate; one run per bot per conversation at a time, under races."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from appservice.kinds import KINDS
from appservice.matrix.surface import RoomFacts
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry, compile_sources
from engine.run.events import wake
from engine.run.publish import publish
from engine.run.refusals import Refused
from engine.run.summon import Summoned
from tests.store import TestStore

pytestmark = pytest.mark.db

ROOM = "!lobby:localhost"
OTHER_ROOM = "!elsewhere:localhost"
ANN = "@ann:localhost"

GREETER = """---
name: Greeter
hears:
  - event: member.joined
    ask: Welcome them and point them at the rules.
  - event: site.purchase.paid
    ask: Thank them for the purchase.
---
You greet people.
"""

CASHIER = """---
name: Cashier
hears:
  - event: site.purchase.paid
    ask: Check the order went through.
---
You look after orders.
"""

# Only moderators may ask it (for:), but it runs for any member of the room (serves:).
DOORMAN = """---
name: Doorman
for: moderator
serves: member
hears:
  - event: member.left
    ask: Note that they left.
---
You keep the door.
"""


@pytest.fixture
async def registry(db: TestStore) -> Registry:
    result = compile_sources(
        {"bots/greeter.md": GREETER, "bots/cashier.md": CASHIER, "bots/doorman.md": DOORMAN},
        kinds=KINDS, server_name="localhost",
    )
    assert isinstance(result, Registry), result
    await publish(db, result)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    for room in (ROOM, OTHER_ROOM):
        await db.of(RoomTables).ensure(room)
    for slug in ("greeter", "cashier", "doorman"):
        await db.of(RoomTables).set_member(ROOM, f"@bot_{slug}:localhost", "join", None)
    await db.of(RoomTables).set_member(ROOM, ANN, "join", "Ann")
    return result


async def woken(db: TestStore, registry: Registry, event: str, occurrence: str, *, room_id: str | None = ROOM,
                subject: str | None = ANN, facts: dict[str, Any] | None = None,
                conversation: str = ROOM) -> list[Summoned | Refused]:
    async with db.transaction("test_wake") as tx:
        return await wake(tx, registry, event, surface=RoomFacts("localhost"), occurrence=occurrence,
                          place=room_id, subject=subject, facts=facts if facts is not None else {"user": subject},
                          conversation=conversation)


async def runs(db: TestStore) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.pool.fetch(
        "SELECT id, bot, surface, place, trigger_event, asked_by, subject, prompt, context, conversation, status"
        " FROM agent_runs ORDER BY bot, id")]


async def test_each_hearing_bot_is_summoned_with_its_ask_and_the_facts_on_the_run(
        db: TestStore, registry: Registry) -> None:
    facts = {"order": 12, "items": [{"sku": "tea", "qty": 2}], "subject": ANN, "room_id": ROOM}
    results = await woken(db, registry, "site.purchase.paid", "d-1", facts=facts, conversation="order-12")
    assert len(results) == 2 and all(isinstance(r, Summoned) for r in results)
    rows = await runs(db)
    assert [(r["bot"], r["prompt"]) for r in rows] == [
        ("cashier", "Check the order went through."), ("greeter", "Thank them for the purchase.")]
    for row in rows:
        assert row["surface"] == "rooms" and row["place"] == ROOM and row["status"] == "queued"
        assert row["asked_by"] is None and row["subject"] == ANN
        assert row["conversation"] == "order-12"
        assert row["trigger_event"] == f"event:site.purchase.paid:d-1:{row['bot']}"
        assert row["context"] == {"kind": "event", "event": "site.purchase.paid", "facts": facts, "lines": []}


async def test_an_undeclared_event_inserts_nothing(db: TestStore, registry: Registry) -> None:
    assert await woken(db, registry, "site.support.escalated", "d-1") == []
    assert await woken(db, registry, "room.created", "$create") == []
    assert await runs(db) == []


async def test_only_bots_joined_in_the_room_wake(db: TestStore, registry: Registry) -> None:
    assert await woken(db, registry, "member.joined", "$join1", room_id=OTHER_ROOM, conversation=OTHER_ROOM) == []
    await db.of(RoomTables).set_member(ROOM, "@bot_greeter:localhost", "leave", None)
    assert await woken(db, registry, "member.joined", "$join2") == []
    await db.of(RoomTables).set_member(ROOM, "@bot_greeter:localhost", "invite", None)
    assert await woken(db, registry, "member.joined", "$join3") == []
    assert await runs(db) == []
    await db.of(RoomTables).set_member(ROOM, "@bot_greeter:localhost", "join", None)
    assert [type(r) for r in await woken(db, registry, "member.joined", "$join4")] == [Summoned]


async def test_the_same_event_delivered_twice_wakes_once(db: TestStore, registry: Registry) -> None:
    first = await woken(db, registry, "member.joined", "$join")
    await db.pool.execute("UPDATE agent_runs SET status = 'done'")  # not busy: only the replay is refused
    again = await woken(db, registry, "member.joined", "$join")
    assert [type(r) for r in first] == [Summoned]
    assert again == [Refused("duplicate")]
    assert len(await runs(db)) == 1


async def test_one_run_per_bot_per_conversation_at_a_time(db: TestStore, registry: Registry) -> None:
    first = await woken(db, registry, "member.joined", "$join1")
    assert [type(r) for r in first] == [Summoned]
    assert await woken(db, registry, "member.joined", "$join2") == [Refused("busy")]
    await db.pool.execute("UPDATE agent_runs SET status = 'running'")
    assert await woken(db, registry, "member.joined", "$join3") == [Refused("busy")]
    # Another conversation is not held up, nor another bot in this one.
    other = await woken(db, registry, "site.purchase.paid", "d-1", conversation="order-12")
    assert [type(r) for r in other] == [Summoned, Summoned]
    paid_here = await woken(db, registry, "site.purchase.paid", "d-2", conversation=ROOM)
    assert paid_here == [Summoned(paid_here[0].run_id), Refused("busy")]
    assert len(await runs(db)) == 4
    # Once it is over, the next event in the conversation wakes the bot again.
    await db.pool.execute("UPDATE agent_runs SET status = 'done' WHERE bot = 'greeter' AND conversation = $1", ROOM)
    assert [type(r) for r in await woken(db, registry, "member.joined", "$join4")] == [Summoned]


async def test_racing_events_in_one_conversation_make_one_run(db: TestStore, registry: Registry) -> None:
    results = await asyncio.gather(*(woken(db, registry, "member.joined", f"$join{n}") for n in range(20)))
    flat = [r for rs in results for r in rs]
    assert sum(isinstance(r, Summoned) for r in flat) == 1
    assert {r.reason for r in flat if isinstance(r, Refused)} == {"busy"}
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 1


async def test_serves_is_the_whole_gate_for_a_run_nobody_asked_for(db: TestStore, registry: Registry) -> None:
    # Ann is a member, not a moderator: for: moderator would refuse her asking, but nobody asked.
    taken = await woken(db, registry, "member.left", "$left1")
    assert [type(r) for r in taken] == [Summoned]
    row = (await runs(db))[0]
    assert (row["bot"], row["subject"], row["asked_by"]) == ("doorman", ANN, None)
    # Someone who is not in the room is not served.
    stranger = await woken(db, registry, "member.left", "$left2", subject="@stranger:localhost",
                           conversation="elsewhere")
    assert stranger == [Refused("audience")]
    nobody = await woken(db, registry, "member.left", "$left3", subject=None, conversation="nowhere")
    assert nobody == [Refused("audience")]
    assert len(await runs(db)) == 1


async def test_no_provider_no_runs(db: TestStore, registry: Registry) -> None:
    await db.workers.forget("test-worker")
    assert await woken(db, registry, "member.joined", "$join") == [Refused("no_provider")]
    assert await runs(db) == []


async def test_nothing_wakes_in_an_encrypted_room(db: TestStore, registry: Registry) -> None:
    await db.of(RoomTables).mark_encrypted(ROOM)
    assert await woken(db, registry, "member.joined", "$join") == [Refused("encrypted")]
    assert await runs(db) == []


async def test_serves_reads_power_from_the_room(db: TestStore, registry: Registry) -> None:
    moderators_only = compile_sources({"bots/doorman.md": DOORMAN.replace("serves: member", "serves: moderator")},
                                      kinds=KINDS, server_name="localhost")
    assert isinstance(moderators_only, Registry)
    await db.of(RoomTables).set_power_levels(ROOM, {"users": {"@mod:localhost": 50}})
    await db.of(RoomTables).set_member(ROOM, "@mod:localhost", "join", None)
    assert await woken(db, moderators_only, "member.left", "$left1") == [Refused("audience")]
    served = await woken(db, moderators_only, "member.left", "$left2", subject="@mod:localhost", conversation="m")
    assert [type(r) for r in served] == [Summoned]
