"""The door on the real Synapse: a person starts one with their own Matrix session; the room a voice session
names is bound only once the person and the bot are both found joined; a newer claim supersedes a pending one;
``current_room`` answers from the binding at the moment it is asked; and work that outlives its turn is posted
to its room only after re-checking membership — to the person's DM with the bot once they have left."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import openai
import pytest
from aiohttp import ClientSession, web

from appservice.app import Service
from appservice.config import provider_settings
from appservice.door.binding import Binding
from appservice.door.grants import verify
from engine.providers.config import choose_answerer
from engine.providers.prices import parse_prices
from tests.matrix.conftest import DOOR_KEYS
from tests.matrix.people import Person
from tests.providers.fake_provider import FakeProvider, openai_text, openai_tools
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]
PRICES = parse_prices({"prices": {"first": {"gpt-test": {"input": 0.000001, "output": 0.000002}}}})


def door_url(service: Service) -> str:
    assert service.door is not None and service.door.port
    return f"http://127.0.0.1:{service.door.port}/v1"


async def call(service: Service, path: str, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with ClientSession() as http, http.post(f"{door_url(service)}{path}", json=body,
                                                  headers={"Authorization": f"Bearer {token}"}) as resp:
        return resp.status, await resp.json()


async def start(service: Service, person: Person, **body: Any) -> str:
    status, answer = await call(service, "/door/start", str(person.client.access_token), {"bot": "helper", **body})
    assert status == 200, answer
    return str(answer["grant"])


async def claim(service: Service, grant: str, room: str | None, name: str | None = None) -> dict[str, Any]:
    status, ack = await call(service, "/session/context", grant,
                             {"type": "session.context", "version": 1, "room_id": room, "room_name": name})
    assert status == 200, ack
    return ack


async def turn(service: Service, grant: str, said: str = "Hello?") -> dict[str, Any]:
    async with openai.AsyncOpenAI(base_url=door_url(service), api_key=grant, max_retries=0, timeout=60) as client:
        done = await client.chat.completions.create(model="helper", messages=[{"role": "user", "content": said}])
    return {"text": done.choices[0].message.content, **(done.model_extra or {})["summon"]}


async def group_room(alice: Person, bob: Person) -> str:
    """A room alice, bob and Helper are all in (others read along)."""
    room = await alice.room_with("helper")
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.wait_membership(room, bob.user_id, "join")
    return room


async def known_joined(sql: asyncpg.Pool, room: str, *users: str) -> None:
    async def check() -> bool:
        rows = await sql.fetch("SELECT user_id FROM room_members WHERE room_id = $1 AND membership = 'join'", room)
        return set(users) <= {r["user_id"] for r in rows}
    await eventually(check, timeout=15)


class GatedProvider(FakeProvider):
    """The fake provider, holding each answer until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.arrived = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.Response:
        self.arrived.set()
        await self.gate.wait()
        return await super()._handle(request)


@pytest.fixture
async def fake(service: Service) -> AsyncIterator[GatedProvider]:
    """The service's workers buy from a (gated) fake provider for the length of a test."""
    provider = GatedProvider()
    await provider.start()
    env = {"SUMMON_PROVIDERS": "first", "SUMMON_PROVIDER_FIRST_KIND": "openai",
           "SUMMON_PROVIDER_FIRST_URL": provider.openai_url, "SUMMON_PROVIDER_FIRST_KEY": "sk-first",
           "SUMMON_PROVIDER_FIRST_MODEL": "gpt-test", "AGENTS_LIVE": "1"}
    answerer = choose_answerer(provider_settings(env), service.clock, prices=PRICES)
    before = service.worker.answerer
    service.worker.answerer = answerer
    try:
        yield provider
    finally:
        provider.gate.set()
        service.worker.answerer = before
        await answerer.aclose()
        await provider.close()


async def test_a_person_starts_a_door_with_their_own_session(people: People, service: Service,
                                                             sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    grant = await start(service, alice)
    got = verify(grant, DOOR_KEYS, audience=f"summon-door:{service.config.homeserver.server_name}",
                 now=service.clock.now())
    assert (got.person, got.bot, got.minted_by, got.room) == (alice.user_id, "helper", "start", None)
    # The person's access token was asked about once and kept nowhere.
    token = str(alice.client.access_token)
    kept = await sql.fetchval("SELECT count(*) FROM door_grants g WHERE g::text LIKE '%' || $1 || '%'", token)
    assert kept == 0
    # A token the homeserver does not take gets no grant.
    status, answer = await call(service, "/door/start", "syt_not_a_real_token", {"bot": "helper"})
    assert status == 401 and answer["error"]["code"] == "invalid_session"
    status, answer = await call(service, "/door/start", token, {"bot": "echo"})
    assert status == 404 and answer["error"]["code"] == "model_not_found"  # echo is not on the voice surface
    # The grant opens the door: an ordinary run, answered (by the stand-in the tests choose).
    said = await turn(service, grant)
    assert said["text"] and said["room"] is None
    row = await sql.fetchrow("SELECT surface, asked_by, subject, status FROM agent_runs WHERE id = $1", said["run"])
    assert dict(row) == {"surface": "voice", "asked_by": alice.user_id, "subject": alice.user_id, "status": "done"}


async def test_a_room_is_bound_once_both_are_found_joined(people: People, service: Service,
                                                          sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    grant = await start(service, alice)
    ack = await claim(service, grant, room, "Standup")
    assert ack == {"type": "session.context.ack", "version": 1, "room_id": room, "room_name": "Standup",
                   "bound": True, "surface": "room"}
    said = await turn(service, grant)
    assert said["room"] == {"id": room, "name": "Standup"}
    assert await sql.fetchval("SELECT place FROM agent_runs WHERE id = $1", said["run"]) == room
    # Named again, nothing changes; the DM (no room) unbinds it.
    assert (await claim(service, grant, room, "Standup"))["bound"] is True
    assert await claim(service, grant, None) == {"type": "session.context.ack", "version": 1, "room_id": None,
                                                 "room_name": None, "bound": False, "surface": "dm"}
    assert (await turn(service, grant))["room"] is None


async def test_a_room_the_person_or_the_bot_is_not_in_is_refused_and_said_so(people: People,
                                                                              service: Service) -> None:
    alice, bob = await people("alice"), await people("bob")
    bobs = await bob.room_with("helper")  # alice is not in it
    grant = await start(service, alice)
    ack = await claim(service, grant, bobs, "Bob's")
    assert (ack["bound"], ack["surface"], ack["room_id"], ack["reason"]) == (False, "refused", None,
                                                                            "person_not_joined")
    # A room without the bot: our state has never heard of it, so the homeserver is asked (the puppet may not
    # read it: it is not in it).
    lonely = await alice.room_with()
    ack = await claim(service, grant, lonely)
    assert (ack["bound"], ack["reason"]) == (False, "bot_not_joined")
    said = await turn(service, grant)
    assert said["room"] is None  # left on the person's DM


async def test_a_grant_for_one_room_claims_it_and_no_other(people: People, service: Service) -> None:
    alice = await people("alice")
    room, other = await alice.room_with("helper"), await alice.room_with("helper")
    grant = await start(service, alice, room_id=room)
    said = await turn(service, grant)  # its first turn claims the grant's room, verified like any claim
    assert said["room"] is not None and said["room"]["id"] == room
    status, answer = await call(service, "/session/context", grant, {"room_id": other})
    assert status == 401 and answer["error"]["code"] == "invalid_grant"


async def test_the_start_route_mints_a_grant_for_a_room_only_when_both_are_in_it(people: People, service: Service,
                                                                                sql: asyncpg.Pool) -> None:
    alice, bob = await people("alice"), await people("bob")
    bobs = await bob.room_with("helper")  # alice is not in it
    lonely = await alice.room_with()  # the bot is not in it
    token = str(alice.client.access_token)
    before = await sql.fetchval("SELECT count(*) FROM door_grants")
    for room, reason in ((bobs, "person_not_joined"), (lonely, "bot_not_joined")):
        status, answer = await call(service, "/door/start", token, {"bot": "helper", "room_id": room})
        assert status == 403, answer
        assert (answer["error"]["code"], answer["error"]["param"]) == (reason, "room_id")
    status, answer = await call(service, "/door/start", token, {"bot": "helper", "room_id": "not-a-room"})
    assert status == 400 and answer["error"]["param"] == "room_id"
    assert await sql.fetchval("SELECT count(*) FROM door_grants") == before  # no grant minted for any of them
    ours = await alice.room_with("helper")
    grant = await start(service, alice, room_id=ours)
    assert (await turn(service, grant))["room"]["id"] == ours


async def test_a_newer_claim_supersedes_a_pending_one_and_another_room_is_released_first(
    people: People, service: Service, sql: asyncpg.Pool,
) -> None:
    alice = await people("alice")
    first, second = await alice.room_with("helper"), await alice.room_with("helper")
    await known_joined(sql, second, alice.user_id)
    grant = await start(service, alice)
    assert (await claim(service, grant, second))["bound"] is True
    # Our state forgets alice in the first room, so its claim asks the homeserver — held at the gate.
    await known_joined(sql, first, alice.user_id)
    await sql.execute("DELETE FROM room_members WHERE room_id = $1 AND user_id = $2", first, alice.user_id)
    assert service.door is not None
    binding: Binding = service.door.endpoint.binding
    real = binding.homeserver
    assert real is not None
    gate, asked = asyncio.Event(), asyncio.Event()

    class Held:
        async def state_event(self, user_id: str, room_id: str, event_type: str, state_key: str) -> Any:
            asked.set()
            await gate.wait()
            return await real.state_event(user_id, room_id, event_type, state_key)

    binding.homeserver = Held()
    try:
        pending = asyncio.ensure_future(claim(service, grant, first, "First"))
        await asyncio.wait_for(asked.wait(), 10)
        # Another room releases the bound one before its check: while it is checked, nothing is bound.
        session = await sql.fetchrow("SELECT room_id, pending_room FROM door_sessions WHERE person = $1",
                                     alice.user_id)
        assert (session["room_id"], session["pending_room"]) == (None, first)
        # A newer claim while the first is pending: it is known joined, and bound at once…
        assert (await claim(service, grant, second, "Second"))["bound"] is True
        gate.set()
        # …and the first one's verdict (alice is joined there) binds nothing: it was superseded.
        late = await pending
        assert (late["bound"], late["reason"]) == (False, "superseded")
    finally:
        binding.homeserver = real
        gate.set()
    assert (await turn(service, grant))["room"] == {"id": second, "name": "Second"}


async def test_current_room_answers_from_the_binding_at_the_moment_it_is_asked(
    people: People, service: Service, fake: GatedProvider,
) -> None:
    alice = await people("alice")
    first, second = await alice.room_with("helper"), await alice.room_with("helper")
    grant = await start(service, alice)
    assert (await claim(service, grant, first, "First"))["bound"] is True
    fake.queue("openai", openai_tools(("call_1", "current_room", "{}")), openai_text("We are in Second."))
    asking = asyncio.ensure_future(turn(service, grant, "Which room are we in?"))
    await asyncio.wait_for(fake.arrived.wait(), 20)
    # The person moves while the model thinks; the tool, asked afterwards, says where they are now.
    assert (await claim(service, grant, second, "Second"))["bound"] is True
    fake.gate.set()
    said = await asking
    assert said["text"] == "We are in Second."
    assert said["room"] == {"id": first, "name": "First"}  # the turn's origin stays where it began
    tool = next(m for m in fake.received("openai")[1].body["messages"] if m["role"] == "tool")
    assert json.loads(tool["content"])["room"] == {"id": second, "name": "Second"}


async def outlived_turn(service: Service, fake: GatedProvider, grant: str, words: str) -> dict[str, Any]:
    assert service.door is not None
    replies = service.door.endpoint.replies
    fake.queue("openai", openai_text(words))
    before = replies.wait_seconds
    replies.wait_seconds = 0.5
    try:
        return await turn(service, grant, "Look into it and tell me later.")
    finally:
        replies.wait_seconds = before


async def test_work_that_outlives_its_turn_is_posted_to_its_room(people: People, service: Service,
                                                                 fake: GatedProvider, sql: asyncpg.Pool) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await group_room(alice, bob)
    await known_joined(sql, room, alice.user_id, bob.user_id)
    grant = await start(service, alice)
    assert (await claim(service, grant, room, "Team"))["bound"] is True
    said = await outlived_turn(service, fake, grant, "Here is what I found.")
    assert said["outlived"] is True and said["posted_to"] == "room"
    assert said["text"] == "This is taking a while. I will post the answer in Team when it is ready."
    fake.gate.set()

    async def posted() -> list[dict[str, Any]]:
        return [e for e in await alice.notices_from(room, alice.puppet("helper"))
                if e["content"]["body"] == "Here is what I found."]
    [notice] = await eventually(posted, timeout=30)
    assert notice["content"]["m.mentions"] == {"user_ids": [alice.user_id]}
    assert await sql.fetchval("SELECT delivered_to FROM door_turns WHERE run_id = $1", said["run"]) == room


async def test_work_that_outlives_its_turn_goes_to_the_dm_once_the_person_has_left(
    people: People, service: Service, fake: GatedProvider, sql: asyncpg.Pool,
) -> None:
    alice, bob = await people("alice"), await people("bob")
    dm = await alice.room_with("helper")  # alice and Helper alone: her DM with it
    room = await group_room(alice, bob)
    await known_joined(sql, room, alice.user_id, bob.user_id)
    await known_joined(sql, dm, alice.user_id, alice.puppet("helper"))
    grant = await start(service, alice)
    assert (await claim(service, grant, room, "Team"))["bound"] is True
    said = await outlived_turn(service, fake, grant, "Your private findings.")
    assert said["posted_to"] == "room"  # where it would go now
    # She leaves the room before the answer is ready: it is re-checked, and goes to her DM instead.
    await alice.client.room_leave(room)

    async def left() -> bool:
        return await sql.fetchval("SELECT membership FROM room_members WHERE room_id = $1 AND user_id = $2",
                                  room, alice.user_id) == "leave"
    await eventually(left, timeout=15)
    fake.gate.set()

    async def in_dm() -> list[dict[str, Any]]:
        return [e for e in await alice.notices_from(dm, alice.puppet("helper"))
                if e["content"]["body"] == "Your private findings."]
    await eventually(in_dm, timeout=30)
    assert await sql.fetchval("SELECT delivered_to FROM door_turns WHERE run_id = $1", said["run"]) == dm
    assert [e for e in await bob.notices_from(room, alice.puppet("helper"))
            if e["content"]["body"] == "Your private findings."] == []
