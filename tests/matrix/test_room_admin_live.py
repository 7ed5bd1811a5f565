"""``!bots …`` to the service's own user on a real Synapse: a room's moderators add bots, nobody else does,
and every reply shows the current value and the allowed ones."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from nio import RoomCreateResponse

from appservice.app import Service
from tests.matrix.people import Person

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def admin_room(alice: Person, service: Service, *others: Person) -> str:
    """A room alice made (so she holds power level 100) with the service's user in it, and ``others``."""
    service_user = service.service_user
    resp = await alice.client.room_create(name="admin test", invite=[service_user, *(p.user_id for p in others)])
    assert isinstance(resp, RoomCreateResponse), resp
    room = str(resp.room_id)
    await alice.wait_membership(room, service_user, "join")
    for person in others:
        await person.client.join(room)
        await alice.wait_membership(room, person.user_id, "join")
    return room


async def test_a_non_moderator_cannot_add_a_bot(people: People, service: Service) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await admin_room(alice, service, bob)
    asked = await bob.say(room, "!bots add helper")
    reply = await bob.answer_to(room, asked)
    assert reply["sender"] == service.service_user
    assert reply["content"]["msgtype"] == "m.notice"
    assert "power level 50" in reply["content"]["body"]
    await asyncio.sleep(1)  # what would have followed the commit has had its time
    assert await alice.membership(room, alice.puppet("helper")) is None  # never invited


async def test_a_moderator_adds_a_bot_and_its_puppet_joins(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await admin_room(alice, service)
    asked = await alice.say(room, "!bots add helper")
    await alice.wait_membership(room, alice.puppet("helper"), "join")
    reply = await alice.answer_to(room, asked)
    assert "bots: helper (allowed: " in reply["content"]["body"]


async def test_set_choices_replies_with_the_current_and_allowed_values(people: People, service: Service,
                                                                      sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await admin_room(alice, service)
    asked = await alice.say(room, "!bots set choices poll")
    reply = await alice.answer_to(room, asked)
    assert reply["content"]["body"] == "choices: poll (allowed: reactions, poll)"
    assert reply["content"]["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}
    settings = await sql.fetchval("SELECT settings FROM rooms WHERE room_id = $1", room)
    assert settings["choices"] == "poll"
