"""`!commands` end to end on real Synapse and PostgreSQL: a command asks its bot with the resolved prompt
and the answer arrives; a bad argument is answered with the field's help; `!help` differs for a
moderator and a member; MSC4332 command state appears where the puppet has the power to set it."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from nio import RoomCreateResponse, RoomGetStateEventResponse

from appservice.app import Service
from appservice.matrix.tables.rooms import RoomTables
from engine.content.commands import command_prompt
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def test_a_command_asks_its_bot_and_the_answer_arrives(people: People, service: Service,
                                                              sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "!summarise since=2d", script=[{"text": "Nothing much happened."}])
    answer = await alice.answer_to(room, asked)
    assert answer["sender"] == alice.puppet("helper")
    assert answer["content"]["body"] == "Nothing much happened."
    run = await sql.fetchrow("SELECT prompt, context FROM agent_runs WHERE trigger_event = $1", asked)
    assert run["prompt"] == "!summarise since=2d"  # the person's words; the worker resolved what it asked
    registry = service.registry()
    assert (command_prompt(registry.commands, registry.strings, run["context"]) or "").startswith(
        "Read what was said in this room over the last 2 days")
    assert run["context"]["command"] == {"name": "summarise", "args": {"since": "2d", "length": "short"}}


async def test_a_bad_argument_is_answered_with_the_fields_help(people: People, service: Service,
                                                               sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "!summarise since=banana", script=[{"text": "never"}])
    answer = await alice.answer_to(room, asked)
    body = answer["content"]["body"]
    assert answer["sender"] == alice.puppet("helper")
    assert "How far back" in body and "a span like 2d, 48h or 1 week" in body and "banana" in body
    assert await sql.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", asked) == 0


async def test_help_differs_for_a_moderator_and_a_member(people: People, service: Service) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await alice.room_with("helper")  # alice made it: she holds the room's power
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.wait_membership(room, bob.user_id, "join")
    for_alice = (await alice.answer_to(room, await alice.say(room, "!help")))["content"]["body"]
    for_bob = (await bob.answer_to(room, await bob.say(room, "!help")))["content"]["body"]
    assert "!summarise" in for_alice and "!summarise" in for_bob
    assert "!triage" in for_alice and "!triage" not in for_bob
    assert "Helper" in for_bob


async def command_state(person: Person, room: str, puppet: str) -> dict[str, Any] | None:
    resp = await person.client.room_get_state_event(room, "m.bot.commands", puppet)
    return resp.content if isinstance(resp, RoomGetStateEventResponse) else None


async def test_command_state_appears_where_the_puppet_has_power(people: People, service: Service) -> None:
    alice = await people("alice")
    puppet = alice.puppet("helper")
    resp = await alice.client.room_create(name=f"test {uuid.uuid4().hex[:6]}", invite=[puppet],
                                          power_level_override={"users": {puppet: 50}})
    assert isinstance(resp, RoomCreateResponse), resp
    room = str(resp.room_id)
    await alice.wait_membership(room, puppet, "join")

    async def known() -> bool:  # the service has stored the room's power levels and the puppet's join
        row = await service.store.of(RoomTables).get(room)
        joined = await service.store.of(RoomTables).member(room, puppet)
        return bool(row and row.power_levels and joined and joined.membership == "join")

    await eventually(known)
    assert await service.command_state.publish_in_room(service.registry(), room, puppet)
    state = await eventually(lambda: command_state(alice, room, puppet))
    assert state["sigil"] == "!"
    syntaxes = [c["syntax"] for c in state["commands"]]
    assert "summarise {since} {length}" in syntaxes
    assert not any(s.startswith("triage") for s in syntaxes)  # a moderator's command is not shown to all
    summarise = next(c for c in state["commands"] if c["syntax"].startswith("summarise"))
    assert summarise["description"] == {"m.text": [{"body": "Catch up on what has been said here"}]}
    assert "How far back" in summarise["variables"]["since"]["m.text"][0]["body"]
    # Publishing again changes nothing (the same content is not sent twice).
    assert await service.command_state.publish_in_room(service.registry(), room, puppet)


async def test_no_command_state_where_the_puppet_lacks_power(people: People, service: Service) -> None:
    alice = await people("alice")
    puppet = alice.puppet("helper")
    room = await alice.room_with("helper")

    async def known() -> bool:
        row = await service.store.of(RoomTables).get(room)
        return bool(row and row.power_levels)

    await eventually(known)
    assert not await service.command_state.publish_in_room(service.registry(), room, puppet)
    assert await command_state(alice, room, puppet) is None


async def test_a_command_that_names_a_tool_runs_the_tool_and_asks_no_model(
        people: People, service: Service, sql: asyncpg.Pool, content_dir: Any) -> None:
    command = content_dir / "commands" / "lookup.md"
    command.parent.mkdir(exist_ok=True)
    command.write_text("---\nhint: Search this site's docs\ntool: search_site\n"
                       "args:\n  - {name: query, kind: text, label: What to look for}\n---\n")
    try:
        await eventually(lambda: "lookup" in service.registry().commands, timeout=10)
        alice = await people("alice")
        room = await alice.room_with("helper")
        # A script the model would answer with, if anything asked it: nothing does.
        asked = await alice.say(room, "!lookup query=commands", script=[{"text": "THE MODEL WAS ASKED"}])
        answer = await alice.answer_to(room, asked)
        body = answer["content"]["body"]
        assert answer["sender"] == alice.puppet("helper")
        assert "THE MODEL WAS ASKED" not in body and "!summarise" in body, body  # found in the site's own pages
        run_id = await sql.fetchval("SELECT id FROM agent_runs WHERE trigger_event = $1", asked)
        steps = await sql.fetch("SELECT kind, payload FROM agent_steps WHERE run_id = $1 ORDER BY seq", run_id)
        assert [s["kind"] for s in steps] == ["tool_call", "tool_result", "answer"]
        assert steps[0]["payload"]["call"] == {"id": "command", "name": "search_site", "arguments": {"query": "commands"}}
    finally:
        command.unlink(missing_ok=True)
