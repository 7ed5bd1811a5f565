"""What a person sees of the service itself on a real Synapse: what belongs to no bot in particular (`!help`,
`!cancel`, `!bots …`, a typo of a command) is answered by the service's own user, under the display name the
config gives it; another bot's `!command` gets silence."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from nio import RoomCreateResponse

from appservice.app import Service
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def service_room(alice: Person, service: Service, *slugs: str) -> str:
    """A room alice made with the service's user and these bots in it (as `make dev`'s demo room is)."""
    ours = [service.service_user, *(alice.puppet(s) for s in slugs)]
    resp = await alice.client.room_create(name=f"face {uuid.uuid4().hex[:6]}", invite=ours)
    assert isinstance(resp, RoomCreateResponse), resp
    for user_id in ours:
        await alice.wait_membership(str(resp.room_id), user_id, "join")
    return str(resp.room_id)


async def test_help_is_answered_by_the_service_user_under_its_own_name(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "echo", "helper")
    answer = await alice.answer_to(room, await alice.say(room, "!help"))
    assert answer["sender"] == service.service_user  # not Echo, the first bot in the room
    assert "!summarise" in answer["content"]["body"]
    member = await alice.membership(room, service.service_user)
    assert member is not None and member.get("displayname") == "Summon"  # set at start, from the config


async def test_bots_is_answered_by_the_service_user(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    answer = await alice.answer_to(room, await alice.say(room, "!bots list"))
    assert answer["sender"] == service.service_user
    assert "Helper" in answer["content"]["body"]


async def test_cancel_is_answered_even_when_nothing_runs(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    answer = await alice.answer_to(room, await alice.say(room, "!cancel"))
    assert answer["sender"] == service.service_user
    assert answer["content"]["body"] == "Nothing of yours is running here, so there is nothing to stop."


async def test_cancel_says_how_many_runs_it_stopped(people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    # A run that waits on a slow model turn, so it is still going when the cancel comes.
    asked = await alice.say(room, "Helper, take your time", mention="helper", script=[{"text": "slow", "delay": 30}])
    await eventually(lambda: sql.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", asked))
    answer = await alice.answer_to(room, await alice.say(room, "!cancel"))
    assert answer["sender"] == service.service_user
    assert answer["content"]["body"] == "Told 1 run(s) here to stop."


async def test_a_typo_is_pointed_at_the_command_and_another_bots_command_gets_silence(
        people: People, service: Service) -> None:
    alice = await people("alice")
    room = await service_room(alice, service, "helper")
    typo = await alice.answer_to(room, await alice.say(room, "!sumarise since=2d"))
    assert typo["sender"] == service.service_user
    assert typo["content"]["body"] == ("No `!sumarise` here — did you mean `!summarise`? `!help` lists what you "
                                       "can run.")
    theirs = await alice.say(room, "!hookshot help")
    # Lines are taken in the order they were said: once a later line is answered, the earlier one was heard.
    await alice.answer_to(room, await alice.say(room, "!help"))
    assert await alice.answers_to(room, theirs) == []


async def test_a_typo_of_a_command_withheld_from_the_person_gets_silence(people: People, service: Service) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await service_room(alice, service, "helper")
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.wait_membership(room, bob.user_id, "join")
    # !triage is for moderators: a member is never told it is there, not even as a spelling hint.
    near = await bob.say(room, "!triag")
    await bob.answer_to(room, await bob.say(room, "!help"))
    assert await bob.answers_to(room, near) == []
    mine = await alice.answer_to(room, await alice.say(room, "!triag"))
    assert "did you mean `!triage`?" in mine["content"]["body"]
