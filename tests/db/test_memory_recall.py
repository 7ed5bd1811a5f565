"""memory: person+recall on a real PostgreSQL with pgvector and the shipped embedding model (SPEC §11): the worker
remembers what the person said after an answer (never for anybody else), a later run recalls by meaning — a
related remark recalled, an unrelated one not —, row security keeps every other person's memories out, the
person lists and forgets their own, and a database that cannot keep them refuses the bot at publish in one line
while every other bot runs."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from appservice.kinds import KINDS
from appservice.matrix.claimers.memories import MemoryCommands
from appservice.matrix.ours import Ours
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.content.files import compile_content
from engine.errors import StoreRefused
from engine.memory.ready import recallable
from engine.run.publish import publish
from engine.store import Store
from tests.db.test_ingest import feed, message, pipeline
from tests.db.test_memory_modes import opening_of, run_in
from tests.db.test_said_in_private import room
from tests.store import TestStore

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]
ANN = "@ann:localhost"
BOB = "@bob:localhost"
DM = "!room:localhost"  # test_ingest's room: Ann's DM with the bot
GROUP = "!group:localhost"
BOT_USER = "@bot_rememberer:localhost"
RECALLED = "What they told you before that may bear on this, oldest first:"


async def recall_registry(db: TestStore, tmp_path: Path) -> Registry:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "rememberer.md").write_text(
        "---\nname: Rememberer\nsurfaces: [rooms, desk]\nmemory: person+recall\nanswers: directly\n---\nYou remember.\n")
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    assert await publish(db, registry) and "rememberer" in (await recallable(db, registry))[0].bots
    await db.workers.beat("test-worker", usable=True, mode="stand-in: chosen", providers=[])
    await room(db, DM, {ANN: "join", BOT_USER: "join"})
    await room(db, GROUP, {ANN: "join", BOB: "join", BOT_USER: "join"})
    return registry


async def told(db: TestStore, registry: Registry, person: str, said: str, *, room_id: str = DM) -> int:
    """``person`` says ``said`` to the bot and it answers: the worker remembers it."""
    run_id = await run_in(db, room_id=room_id, asked_by=person, subject=person, prompt=said)
    await opening_of(db, registry, run_id)
    return run_id


async def memories(db: TestStore) -> list[asyncpg.Record]:
    return await db.pool.fetch("SELECT person, bot, said, place, run_id FROM memories ORDER BY id")


async def test_the_worker_remembers_what_the_person_said_after_the_answer(db: TestStore, tmp_path: Path) -> None:
    registry = await recall_registry(db, tmp_path)
    run_id = await told(db, registry, ANN, "My dog is called Biscuit.")
    assert [tuple(m) for m in await memories(db)] == [(ANN, "rememberer", "My dog is called Biscuit.", DM, run_id)]
    # Asked about somebody else (a desk staff member about a customer): nothing is remembered for anybody.
    other = await run_in(db, room_id="desk:1", surface="desk", asked_by="@sam:localhost", subject="contact:9",
                         prompt="the staff member's words", context={"kind": "desk", "lines": []})
    from tests.db.test_memory_modes import DeskFacts
    await opening_of(db, registry, other, DeskFacts())
    assert len(await memories(db)) == 1


async def test_recall_by_meaning_a_related_remark_recalled_an_unrelated_one_not(db: TestStore, tmp_path: Path) -> None:
    registry = await recall_registry(db, tmp_path)
    for said in ("My dog is called Biscuit.", "I'm learning Spanish for a trip to Madrid.",
                 "Our wifi password is on the fridge."):
        await told(db, registry, ANN, said)
    await told(db, registry, BOB, "My dog is called Rex.")  # Bob's: never Ann's to recall
    asked = await run_in(db, room_id=DM, asked_by=ANN, subject=ANN, prompt="What was my dog's name again?")
    text = await opening_of(db, registry, asked)
    recalled = text.split(RECALLED, 1)[1].split("\n\n", 1)[0]
    assert "My dog is called Biscuit." in recalled
    assert "Spanish" not in recalled and "Rex" not in recalled
    unrelated = await run_in(db, room_id=DM, asked_by=ANN, subject=ANN, prompt="Explain how photosynthesis works.")
    assert RECALLED not in await opening_of(db, registry, unrelated)  # nothing beats something unrelated


async def test_a_shared_room_recalls_only_what_was_said_there(db: TestStore, tmp_path: Path) -> None:
    registry = await recall_registry(db, tmp_path)
    await told(db, registry, ANN, "My dog is called Biscuit.")  # in her DM
    asked = await run_in(db, room_id=GROUP, asked_by=ANN, subject=ANN, prompt="What was my dog's name again?",
                         thread_root="$t")
    assert "Biscuit" not in await opening_of(db, registry, asked)


async def test_a_shared_room_does_not_repeat_what_was_said_before_somebody_joined(
        db: TestStore, tmp_path: Path) -> None:
    registry = await recall_registry(db, tmp_path)
    await told(db, registry, ANN, "My dog is called Biscuit.", room_id=GROUP)  # said in the group, before Cal came
    asked = await run_in(db, room_id=GROUP, asked_by=ANN, subject=ANN, prompt="What was my dog's name again?",
                         thread_root="$t1")
    assert "Biscuit" in await opening_of(db, registry, asked)  # everybody reading it now was there
    await db.of(RoomTables).set_member(GROUP, "@cal:localhost", "join", None)  # Cal joins: that line was never theirs
    later = await run_in(db, room_id=GROUP, asked_by=ANN, subject=ANN, prompt="What was my dog's name again?",
                         thread_root="$t2")
    assert "Biscuit" not in await opening_of(db, registry, later)


async def test_row_security_another_person_reads_nothing_and_no_tool_writes(db: TestStore, tmp_path: Path) -> None:
    registry = await recall_registry(db, tmp_path)
    await told(db, registry, ANN, "My dog is called Biscuit.")
    await told(db, registry, BOB, "I live in Lyon.")
    about_bob = await run_in(db, room_id=DM, asked_by=BOB, subject=BOB, prompt="hello")
    async with db.pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval("SELECT agent_become_v1($1)", about_bob)
        await conn.execute("SET LOCAL ROLE summon_tools")
        assert [r["said"] for r in await conn.fetch("SELECT said FROM memories")] == ["I live in Lyon."]
    async with db.pool.acquire() as conn, conn.transaction():
        await conn.execute("SET LOCAL ROLE summon_tools")
        assert await conn.fetch("SELECT said FROM memories") == []  # answering for nobody: nothing
    for write in ("INSERT INTO memories (person, bot, said, embedding) VALUES ('@ann:localhost', 'rememberer', "
                  "'I said nothing of the kind', array_fill(0.1, ARRAY[384])::vector)",
                  "UPDATE memories SET said = 'words in her mouth'",
                  f"SELECT agent_remember_v1({about_bob}, 'words in her mouth', array_fill(0.1, ARRAY[384])::vector)"):
        async with db.pool.acquire() as conn:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                async with conn.transaction():
                    assert await conn.fetchval("SELECT agent_become_v1($1)", about_bob)
                    await conn.execute("SET LOCAL ROLE summon_tools")
                    await conn.execute(write)
    assert len(await memories(db)) == 2


async def test_memories_and_forget_are_the_persons_own(db: TestStore, tmp_path: Path) -> None:
    registry = await recall_registry(db, tmp_path)
    for said in ("My dog is called Biscuit.", "I live in Lyon.", "I am allergic to peanuts."):
        await told(db, registry, ANN, said)
    await told(db, registry, BOB, "Bob's own secret.")
    ingest = pipeline(db, registry, memories=MemoryCommands(
        lambda: registry, Ours(lambda: registry, server_name="localhost", service_user="@summon:localhost"),
        server_name="localhost", service_user="@summon:localhost"))

    async def say(body: str, room_id: str = DM) -> str:
        event = {**message(body, sender=ANN), "room_id": room_id}
        await feed(ingest, db, f"t{uuid.uuid4().hex}", [event])
        reply = await db.pool.fetchval("SELECT content->>'body' FROM outbox WHERE txn_id = $1",
                                       f"memories.{event['event_id']}")
        assert reply is not None, f"no answer to {body}"
        return str(reply)

    listed = await say("!memories")
    assert listed.index("1. I am allergic to peanuts.") < listed.index("2. I live in Lyon.") < listed.index(
        "3. My dog is called Biscuit.")  # newest first
    assert "Bob" not in listed
    assert "forgotten: I live in Lyon." in await say("!forget 2")
    assert [m["said"] for m in await memories(db) if m["person"] == ANN] == [
        "My dog is called Biscuit.", "I am allergic to peanuts."]
    assert "no memory 7" in await say("!forget 7")
    assert "(2)" in await say("!forget all")
    assert [m["said"] for m in await memories(db)] == ["Bob's own secret."]  # Bob's stay
    assert "remembers nothing" in await say("!memories")
    assert "direct messages" in await say("!memories", room_id=GROUP)  # others read the group: not listed there


async def test_a_database_that_cannot_keep_memories_refuses_the_bot_at_publish(
        db: TestStore, dsn: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A role that may not create pgvector (pgvector is not a trusted extension) in a database without it: the
    person+recall bot is refused in one line; every other bot is published."""
    registry = await recall_registry(db, tmp_path)
    # As a database that never had pgvector: no memories table, no writer, no extension.
    await db.pool.execute("DROP TABLE memories; DROP EXTENSION vector CASCADE")
    role = f"nosuper_{uuid.uuid4().hex[:8]}"
    await db.pool.execute(f"CREATE ROLE {role} LOGIN IN ROLE summon_tools")
    await db.pool.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
    await db.pool.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
    await db.pool.execute(f"GRANT CREATE ON SCHEMA public TO {role}")
    await db.pool.execute(f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {role}")
    store = await Store.connect(dsn.replace("postgres@", f"{role}@"), min_size=1, max_size=2)
    try:
        kept, refused = await recallable(store, registry)
        assert "rememberer" not in kept.bots and set(kept.bots) == set(registry.bots) - {"rememberer"}
        assert refused == [
            f"{registry.bots['rememberer'].source_path}: memory: person+recall is refused: pgvector is installed but "
            "this role may not create it (a superuser runs: CREATE EXTENSION vector); every other bot runs"]
        with pytest.raises(StoreRefused):
            await store.memories.remember(1, "x", [0.0] * 384)
    finally:
        await store.close()
        await db.pool.execute(f"DROP OWNED BY {role}")
        await db.pool.execute(f"DROP ROLE {role}")
    # Where pgvector can be had, publishing makes the table, and the bot runs.
    assert "rememberer" in (await recallable(db, registry))[0].bots
    assert await db.pool.fetchval("SELECT to_regclass('public.memories') IS NOT NULL")
    _: Any = caplog


async def test_memories_are_listed_in_a_dm_with_a_puppet_of_another_prefix(db: TestStore, tmp_path: Path) -> None:
    """appservice.puppet_prefix (issue 20): a deployment whose puppets are @ai_…; a DM with one is still the
    person's alone, so !memories answers there (the prefix reaches the room's facts)."""
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "rememberer.md").write_text(
        "---\nname: Rememberer\nsurfaces: [rooms]\nmemory: person+recall\n---\nYou remember.\n")
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None, puppet_prefix="ai_")
    assert isinstance(registry, Registry), registry
    assert registry.bots["rememberer"].user_id == "@ai_rememberer:localhost"
    assert await publish(db, registry)
    await room(db, DM, {ANN: "join", "@ai_rememberer:localhost": "join"})
    ingest = pipeline(db, registry, memories=MemoryCommands(
        lambda: registry, Ours(lambda: registry, server_name="localhost", service_user="@summon:localhost",
                               puppet_prefix="ai_"),
        server_name="localhost", service_user="@summon:localhost"))
    event = {**message("!memories", sender=ANN), "room_id": DM}
    await feed(ingest, db, f"t{uuid.uuid4().hex}", [event])
    reply = await db.pool.fetchval("SELECT content->>'body' FROM outbox WHERE txn_id = $1",
                                   f"memories.{event['event_id']}")
    assert reply is not None and "remembers nothing" in reply, reply
