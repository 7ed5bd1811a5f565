"""What a bot is given, end to end on a real Synapse: a thread's follow-up arrives with its thread, the
channel does not see thread replies, a late joiner under `joined` history does not see what came before,
a thread from before the bot came is fetched from the homeserver, and a second mention while the first run
works joins it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from appservice.app import Service
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def run_for(sql: asyncpg.Pool, event_id: str) -> dict[str, Any]:
    row = await sql.fetchrow("SELECT id, status, context FROM agent_runs WHERE trigger_event = $1", event_id)
    assert row is not None, f"no run for {event_id}"
    return dict(row)


def said(context: dict[str, Any]) -> list[str]:
    return [line["said"] for line in context["lines"]]


async def test_a_follow_up_in_a_thread_is_answered_with_the_thread(people: People, service: Service,
                                                                  sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    bob = await people("bob")
    room = await alice.room_with("helper")
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.say(room, "anyone seen my charger?")
    root = await alice.say(room, "Which laptops are good for learning to code?")
    await bob.say(room, "A ThinkPad T14 or a MacBook Air", thread=root)
    await alice.say(room, "and Chromebooks?", thread=root)
    asked = await bob.say(room, "@Helper which are best for newbs?", mention="helper", thread=root,
                          script=[{"text": "The MacBook Air, for a newb."}])
    answer = await alice.answer_to(room, asked)
    assert answer["content"]["body"] == "The MacBook Air, for a newb."
    rel = answer["content"]["m.relates_to"]
    assert (rel["rel_type"], rel["event_id"]) == ("m.thread", root)
    context = (await run_for(sql, asked))["context"]
    assert context["kind"] == "thread"
    assert said(context) == ["Which laptops are good for learning to code?", "A ThinkPad T14 or a MacBook Air",
                             "and Chromebooks?", "@Helper which are best for newbs?"]
    assert context["header"].startswith("The thread in test ")  # the room's name, from its state
    names = {line["said"]: line["name"] for line in context["lines"]}
    assert names["A ThinkPad T14 or a MacBook Air"] == bob.user_id.split(":")[0][1:]  # bob's display name


async def test_a_channel_summons_does_not_see_thread_replies(people: People, service: Service,
                                                             sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    root = await alice.say(room, "Where shall we eat?")
    await alice.say(room, "the quiet place on the corner", thread=root)
    await alice.say(room, "meanwhile: the build is green")
    asked = await alice.say(room, "Helper, what is new?", mention="helper", script=[{"text": "green build"}])
    await alice.answer_to(room, asked)
    context = (await run_for(sql, asked))["context"]
    assert context["kind"] == "timeline"
    lines = said(context)
    assert "Where shall we eat?" in lines
    assert "meanwhile: the build is green" in lines
    assert "the quiet place on the corner" not in lines
    assert lines[-1] == "Helper, what is new?"


async def test_a_late_joiner_under_joined_history_is_not_given_what_came_before(people: People,
                                                                                 service: Service,
                                                                                 sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    bob = await people("bob")
    joined_only = {"type": "m.room.history_visibility", "state_key": "",
                   "content": {"history_visibility": "joined"}}
    room = await alice.room_with("helper", initial_state=[joined_only])
    await alice.say(room, "the surprise party is on Friday, don't tell bob")
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.say(room, "welcome bob!")
    asked = await bob.say(room, "Helper, what did I miss?", mention="helper", script=[{"text": "a welcome"}])
    await bob.answer_to(room, asked)
    lines = said((await run_for(sql, asked))["context"])
    assert "welcome bob!" in lines
    assert not any("surprise" in line for line in lines)
    # Alice, who was there, is given it.
    mine = await alice.say(room, "Helper, and for me?", mention="helper", script=[{"text": "the party"}])
    await alice.answer_to(room, mine)
    assert any("surprise" in line for line in said((await run_for(sql, mine))["context"]))


@pytest.fixture
async def fetching(service: Service) -> AsyncIterator[None]:
    """The service reads threads that predate it from the homeserver (the composition root's wiring)."""
    backfill = service.dispatcher.threads
    before = backfill.fetch_thread
    backfill.fetch_thread = service.homeserver.thread
    yield
    backfill.fetch_thread = before


async def test_a_thread_from_before_the_bot_came_is_fetched(people: People, service: Service, sql: asyncpg.Pool,
                                                            fetching: None) -> None:
    alice = await people("alice")
    room = await alice.room_with()
    root = await alice.say(room, "Old question: tabs or spaces?")
    await alice.say(room, "spaces, obviously", thread=root)
    await alice.client.room_invite(room, alice.puppet("helper"))
    await alice.wait_membership(room, alice.puppet("helper"), "join")
    # The adapter alone: the root, then the replies oldest first, as the puppet reads them.
    events = await service.homeserver.thread(room, root, as_user=alice.puppet("helper"), limit=50)
    assert [e["event_id"] for e in events][:1] == [root]
    assert [e["content"]["body"] for e in events] == ["Old question: tabs or spaces?", "spaces, obviously"]

    asked = await alice.say(room, "Helper, settle it?", mention="helper", thread=root, script=[{"text": "spaces"}])
    await alice.answer_to(room, asked)
    context = (await run_for(sql, asked))["context"]
    assert said(context) == ["Old question: tabs or spaces?", "spaces, obviously", "Helper, settle it?"]
    assert "incomplete" not in context


async def test_a_second_mention_while_the_first_run_thinks_joins_it(people: People, service: Service,
                                                                   sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    root = await alice.say(room, "Picking a laptop")
    first = await alice.say(room, "Helper, which is lightest?", mention="helper", thread=root,
                            script=[{"text": "The lightest is the Air.", "delay": 4},
                                    {"text": "The Air, and it is under 1000."}])

    async def running() -> bool:
        status = await sql.fetchval("SELECT status FROM agent_runs WHERE trigger_event = $1", first)
        return bool(status == "running")

    await eventually(running, timeout=15)
    second = await alice.say(room, "Helper, and under 1000?", mention="helper", thread=root,
                             script=[{"text": "a second run would say this"}])

    async def joined() -> dict[str, Any] | None:
        context = (await run_for(sql, first))["context"]
        return context if context.get("later") else None

    context = await eventually(joined, timeout=15)
    assert [line["said"] for line in context["later"]] == ["Helper, and under 1000?"]
    assert said(context)[-1] == "Helper, which is lightest?"
    # The first answer was still a draft when the asker said more: the model is asked again with both.
    answer = await alice.answer_to(room, first)
    assert answer["content"]["body"] == "The Air, and it is under 1000."
    runs = await sql.fetchval("SELECT count(*) FROM agent_runs WHERE place = $1", room)
    assert runs == 1
    kinds = [r["kind"] for r in await sql.fetch(
        "SELECT kind FROM agent_steps WHERE run_id = (SELECT id FROM agent_runs WHERE trigger_event = $1) "
        "ORDER BY seq", first)]
    assert kinds == ["model_started", "model", "heard", "model_started", "model", "answer"]
    assert await sql.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", second) == 0
