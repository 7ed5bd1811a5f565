"""Personal data is said only where its person alone reads it (SPEC §8; issue 12 §3), on a real Synapse: the
same bot, asked the same thing by the same person, looks at her own data in a DM with it and not in a room
somebody else reads."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from appservice.app import Service
from engine.tools.runner import UNKNOWN_TOOL
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]

BOT = "---\nname: Keeper\ntools: [about_me]\n---\nYou answer questions about the person's own account.\n"
SCRIPT = [{"tool_calls": [{"id": "c1", "name": "about_me", "arguments": {}}]}, {"text": "That is what I can say."}]


async def results(sql: asyncpg.Pool, trigger: str) -> list[dict[str, object]]:
    run_id = await sql.fetchval("SELECT id FROM agent_runs WHERE trigger_event = $1", trigger)
    rows = await sql.fetch("SELECT payload FROM agent_steps WHERE run_id = $1 AND kind = 'tool_result' ORDER BY seq",
                           run_id)
    return [dict(r["payload"]) for r in rows]


async def stored(sql: asyncpg.Pool, room: str, *members: str) -> None:
    """Summon has read the room's state and the members' joins (what the DM fact is made from)."""
    async def check() -> bool:
        created = await sql.fetchval("SELECT create_content IS NOT NULL FROM rooms WHERE room_id = $1", room)
        joined = await sql.fetchval("SELECT count(*) FROM room_members WHERE room_id = $1 AND user_id = ANY($2::text[])"
                                    " AND membership = 'join'", room, list(members))
        return bool(created) and joined == len(members)
    await eventually(check, timeout=15)


async def test_about_me_in_a_dm_but_not_in_a_room_others_read(
    people: People, service: Service, content_dir: Path, sql: asyncpg.Pool,
) -> None:
    bot_file = content_dir / "bots" / "keeper.md"
    bot_file.write_text(BOT)
    try:
        await eventually(lambda: service.registry().get("keeper") is not None, timeout=10)
        ann, bob = await people("ann"), await people("bob")

        dm = await ann.room_with("keeper")
        await stored(sql, dm, ann.user_id, ann.puppet("keeper"))
        asking = await ann.say(dm, "Keeper, what do you know about me?", mention="keeper", script=SCRIPT)
        await ann.answer_to(dm, asking)
        found = await results(sql, asking)
        assert not found[0]["is_error"]
        assert json.loads(str(found[0]["content"]))["profile"]["user_id"] == ann.user_id

        shared = await ann.room_with("keeper")
        await ann.client.room_invite(shared, bob.user_id)
        await bob.client.join(shared)
        await stored(sql, shared, ann.user_id, bob.user_id, ann.puppet("keeper"))
        asking = await ann.say(shared, "Keeper, what do you know about me?", mention="keeper", script=SCRIPT)
        await ann.answer_to(shared, asking)
        found = await results(sql, asking)
        assert found[0] == {**found[0], "is_error": True, "content": UNKNOWN_TOOL.format(name="about_me")}
    finally:
        bot_file.unlink(missing_ok=True)


async def test_a_dm_anybody_may_join_is_not_private_and_a_room_shared_meanwhile_is_not_told(
    people: People, service: Service, content_dir: Path, sql: asyncpg.Pool,
) -> None:
    bot_file = content_dir / "bots" / "keeper.md"
    bot_file.write_text(BOT)
    try:
        await eventually(lambda: service.registry().get("keeper") is not None, timeout=10)
        ann, bob = await people("ann"), await people("bob")
        # A room with only her and the bot in it, but public: anyone may join and read on.
        public = await ann.room_with("keeper", initial_state=[
            {"type": "m.room.join_rules", "state_key": "", "content": {"join_rule": "public"}}])
        await stored(sql, public, ann.user_id, ann.puppet("keeper"))
        asking = await ann.say(public, "Keeper, what do you know about me?", mention="keeper", script=SCRIPT)
        await ann.answer_to(public, asking)
        found = await results(sql, asking)
        assert found[0]["is_error"] and found[0]["content"] == UNKNOWN_TOOL.format(name="about_me")

        # Her DM, private when the run is taken; she invites somebody while it works: judged again at delivery.
        dm = await ann.room_with("keeper")
        await stored(sql, dm, ann.user_id, ann.puppet("keeper"))
        slow = [SCRIPT[0], {"text": "Your account: ORDERS AND ADDRESS.", "delay": 3}]
        asking = await ann.say(dm, "Keeper, what do you know about me?", mention="keeper", script=slow)
        found = await eventually(lambda: results(sql, asking), timeout=15)
        assert not found[0]["is_error"]  # about_me answered: the room was hers alone then
        await ann.client.room_invite(dm, bob.user_id)
        await eventually(lambda: sql.fetchval("SELECT membership = 'invite' FROM room_members WHERE room_id = $1 "
                                              "AND user_id = $2", dm, bob.user_id), timeout=10)
        answer = await ann.answer_to(dm, asking)
        body = answer["content"]["body"]
        assert "ORDERS AND ADDRESS" not in body and "others can read this room now" in body, body
    finally:
        bot_file.unlink(missing_ok=True)
