"""The member bots' clock on the real PostgreSQL (SPEC §10): a ``bot_clock`` row per charter, so it survives a
restart; the next occurrence is armed in the same commit as the run is summoned; a service down for a day
fires once; two ticks at once fire once; a charter that will not open is skipped while the others run; a
removed bot's clock goes with it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from appservice.kinds import KINDS
from appservice.members.book import Book
from appservice.members.charter import read_charter
from appservice.members.runs import charter_opener
from appservice.members.seal import Keyring, new_key
from appservice.members.tables import MemberTables
from appservice.members.ticks import member_tick
from engine.content import AudienceFacts, Registry, compile_sources
from engine.content.files import read_kit
from engine.core.limits import Caps
from engine.run.publish import publish
from engine.run.refusals import Refused
from engine.run.summon import Summons, summon
from tests.store import TestStore

pytestmark = pytest.mark.db
ALICE = "@alice:localhost"
KEY = f"k1:{new_key()}"


async def hosted(db: TestStore) -> Registry:
    registry = compile_sources({"bots/builder.md": "---\nname: Builder\nextends: builder\n---\n"},
                               kinds=KINDS, server_name="localhost", kit=read_kit())
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: chosen", providers=[])
    return registry


async def made(db: TestStore, book: Book, **over: Any) -> str:
    data: dict[str, Any] = {"name": "Morning News", "schedule": {"every": "1 hour"}, "prompt": "A digest.",
                            "sources": ["rte.ie"], "allow": ["https://www.rte.ie/feeds/"], "owner": ALICE,
                            "author": ALICE, "room_id": "!news:localhost"}
    data.update(over)
    async with db.transaction("t") as tx:
        return await book.create(tx, read_charter(data), by=ALICE, clock_at=await tx.schedules.now(), host="builder")


async def owed(db: TestStore, charter_id: str, hours: float) -> None:
    await db.pool.execute("UPDATE bot_clock SET last_fired_at = now() - make_interval(secs => $2) WHERE trigger = $1",
                          f"member:{charter_id}", hours * 3600)


async def test_an_owed_edition_is_an_ordinary_run_with_its_clock_armed_first(db: TestStore) -> None:
    registry = await hosted(db)
    book = Book(Keyring.parse([KEY]))
    charter_id = await made(db, book)
    assert await member_tick(db, book, registry, host="builder") == []  # just born: its first edition was the dry run
    await owed(db, charter_id, 25)  # down for a day: one edition, not twenty-five
    [run_id] = await member_tick(db, book, registry, host="builder")
    run = await db.runs.get(run_id)
    assert run is not None and (run.bot, run.surface, run.asked_by, run.subject, run.place) == (
        "builder", "members", None, ALICE, "!news:localhost")
    assert run.context["charter"] == charter_id and "note" not in run.context  # the charter stays sealed
    opened = await charter_opener(db, book)(run.context)  # opened only when the model's request is built
    assert opened is not None and "Morning News" in opened.note and "writing one of its editions now" in opened.note
    assert opened.tools == frozenset({"fetch", "card"})  # its charter's tools, not all the builder's
    fired = await db.pool.fetchval("SELECT last_fired_at FROM bot_clock WHERE trigger = $1", f"member:{charter_id}")
    assert run.trigger_event == f"member:{charter_id}:{fired.isoformat()}"
    assert await member_tick(db, book, registry, host="builder") == []  # armed: nothing more is owed
    # A restart (a new process: a new book, the same database) owes nothing either.
    assert await member_tick(db, Book(Keyring.parse([KEY])), registry, host="builder") == []


async def test_two_ticks_at_once_fire_an_edition_once(db: TestStore) -> None:
    registry = await hosted(db)
    book = Book(Keyring.parse([KEY]))
    charter_id = await made(db, book)
    await owed(db, charter_id, 2)
    first, second = await asyncio.gather(member_tick(db, book, registry, host="builder"),
                                         member_tick(db, book, registry, host="builder"))
    assert len(first) + len(second) == 1
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE surface = 'members'") == 1


async def test_a_charter_that_will_not_open_is_skipped_and_the_others_run(db: TestStore) -> None:
    registry = await hosted(db)
    book = Book(Keyring.parse([KEY]))
    broken, fine = await made(db, book), await made(db, book, name="Evening News")
    await db.pool.execute("UPDATE member_bots SET sealed = $2 WHERE id = $1", broken, b"\x00" * 40)
    await owed(db, broken, 2)
    await owed(db, fine, 2)
    [run_id] = await member_tick(db, book, registry, host="builder")
    run = await db.runs.get(run_id)
    assert run is not None and run.context["charter"] == fine


async def test_failures_stretch_an_interval_bot_in_the_database(db: TestStore) -> None:
    registry = await hosted(db)
    book = Book(Keyring.parse([KEY]))
    charter_id = await made(db, book)
    assert await db.of(MemberTables).failed(charter_id) == 1
    assert await db.of(MemberTables).failed(charter_id) == 2
    await owed(db, charter_id, 3)  # 2 failures in a row: owed 4 hours after the last try
    assert await member_tick(db, book, registry, host="builder") == []
    assert await db.of(MemberTables).succeeded(charter_id) == 2
    assert len(await member_tick(db, book, registry, host="builder")) == 1


async def test_the_builder_off_runs_nothing(db: TestStore) -> None:
    registry = await hosted(db)
    book = Book(Keyring.parse([KEY]))
    charter_id = await made(db, book)
    await owed(db, charter_id, 2)
    assert await member_tick(db, book, Registry.of("localhost", []), host="builder") == []
    assert len(await member_tick(db, book, registry, host="builder")) == 1


async def test_an_edition_is_never_turned_away_by_the_builders_waiting_line(db: TestStore) -> None:
    """Many member bots due at the same minute: the waiting line's cap turns away people (who can ask again),
    never an edition (it would be lost) — and the editions do make the line as long as it is."""
    registry = await hosted(db)
    await db.people.set_caps(Caps(waiting_per_bot=2))
    book = Book(Keyring.parse([KEY]))
    charters = [await made(db, book, room_id=f"!news{n}:localhost") for n in range(3)]
    for charter_id in charters:
        await owed(db, charter_id, 2)
    fired = await member_tick(db, book, registry, host="builder")
    assert len(fired) == 3  # past the cap of two
    assert await db.pool.fetchval("SELECT count(*) FROM summon_refusals WHERE reason = 'queue_full'") == 0
    async with db.transaction("t") as tx:
        asked = await summon(tx, registry, Summons(
            bot="builder", surface="rooms", prompt="make me a bot", asked_by=ALICE, place="!dm:localhost",
            facts=AudienceFacts(user_id=ALICE, local_server="localhost", private=True)))
    assert isinstance(asked, Refused) and (asked.reason, asked.waiting) == ("queue_full", 3)


async def test_with_no_provider_an_edition_is_skipped_and_its_owner_told_once(db: TestStore) -> None:
    from appservice.members.surface import MembersSurface

    registry = await hosted(db)
    await db.workers.beat("test-worker", usable=False, mode="no provider: no key", providers=[])
    book = Book(Keyring.parse([KEY]))
    surface = MembersSurface(book, lambda: registry, server_name="localhost", host="builder")
    charter_id = await made(db, book)
    await owed(db, charter_id, 1.5)
    assert await member_tick(db, book, registry, host="builder", refused=surface.refused) == []
    notices = await db.pool.fetch("SELECT room_id, sender, content FROM outbox ORDER BY id")
    assert len(notices) == 1 and notices[0]["room_id"] == "!news:localhost"
    assert notices[0]["sender"] == "@bot_builder:localhost"
    assert "no model provider can answer here right now" in notices[0]["content"]["body"]
    assert await db.pool.fetchval("SELECT failures FROM member_bots WHERE id = $1", charter_id) == 1
    await owed(db, charter_id, 3)  # still nothing can answer: skipped again, said no more
    assert await member_tick(db, book, registry, host="builder", refused=surface.refused) == []
    assert await db.pool.fetchval("SELECT count(*) FROM outbox") == 1
    assert await db.pool.fetchval("SELECT failures FROM member_bots WHERE id = $1", charter_id) == 2
