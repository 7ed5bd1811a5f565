"""The Matrix events a bot may wake on (SPEC §6), end to end on the real Synapse: a room made with the bot in it
(``room.created``), a reaction on the bot's own line (``reaction`` — not a keycap press, not a stop sign), and a
person leaving (``member.left``). Each wakes the bot once, with the event's facts on the run, and its answer
arrives in the room."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from appservice.app import Service
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]

GREETER = """---
name: Greeter
hears:
  - mention
  - event: room.created
    ask: Welcome everyone to the new room.
  - event: reaction
    ask: Thank them for the reaction.
  - event: member.left
    ask: Say goodbye to them.
---
You greet people.
"""


async def event_runs(sql: asyncpg.Pool, room: str, event: str) -> list[asyncpg.Record]:
    return list(await sql.fetch("SELECT id, subject, context, status FROM agent_runs WHERE place = $1 AND "
                                "trigger_event LIKE $2 ORDER BY id", room, f"event:{event}:%"))


async def test_a_new_room_a_reaction_and_a_leaving_each_wake_the_bot_once(
        people: People, service: Service, content_dir: Path, sql: asyncpg.Pool) -> None:
    bot_file = content_dir / "bots" / "greeter.md"
    bot_file.write_text(GREETER)
    try:
        await eventually(lambda: service.registry().get("greeter") is not None, timeout=10)
        alice, bob = await people("alice"), await people("bob")
        room = await alice.room_with("greeter")
        created: list[Any] = await eventually(lambda: event_runs(sql, room, "room.created"), timeout=15)
        assert len(created) == 1 and created[0]["subject"] == alice.user_id
        assert created[0]["context"]["facts"]["creator"] == alice.user_id
        await eventually(lambda: alice.notices_from(room, alice.puppet("greeter")), timeout=20)

        asked = await alice.say(room, "hello", mention="greeter", script=[{"text": "Hello, Alice."}])
        answer = await alice.answer_to(room, asked)
        await alice.client.room_send(room, "m.reaction", {"m.relates_to": {
            "rel_type": "m.annotation", "event_id": answer["event_id"], "key": "👍"}})
        reacted: list[Any] = await eventually(lambda: event_runs(sql, room, "reaction"), timeout=15)
        assert len(reacted) == 1 and reacted[0]["subject"] == alice.user_id
        assert reacted[0]["context"]["facts"]["key"] == "👍" and "Hello, Alice." in reacted[0]["context"]["facts"]["said"]
        # A reaction on a person's own line is not the bot's to hear.
        await alice.client.room_send(room, "m.reaction", {"m.relates_to": {
            "rel_type": "m.annotation", "event_id": asked, "key": "🎉"}})

        await alice.client.room_invite(room, bob.user_id)
        await bob.client.join(room)
        await eventually(lambda: sql.fetchval("SELECT membership = 'join' FROM room_members WHERE room_id = $1 AND "
                                              "user_id = $2", room, bob.user_id), timeout=10)
        await bob.client.room_leave(room)
        left: list[Any] = await eventually(lambda: event_runs(sql, room, "member.left"), timeout=15)
        assert len(left) == 1 and left[0]["subject"] == bob.user_id
        assert left[0]["context"]["facts"]["membership"] == "leave"
        assert len(await event_runs(sql, room, "reaction")) == 1  # the 🎉 on her own line woke nobody
        assert len(await event_runs(sql, room, "room.created")) == 1
    finally:
        bot_file.unlink(missing_ok=True)
