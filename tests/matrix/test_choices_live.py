"""A bot's choices end to end (SPEC §4), on real Synapse and real PostgreSQL with matrix-nio people: an
answer that ends in choices shows them numbered with the puppet's keycaps; two people pressing at once,
one takes it; the asker's bare number; a room that chooses polls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from appservice.app import Service
from appservice.matrix.delivery.offers import KEYCAPS
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]
OFFER = "Which copy is it?\n\n- The paperback\n- The hardcover"


def relates(event: dict[str, Any]) -> dict[str, Any]:
    rel = event.get("content", {}).get("m.relates_to")
    return rel if isinstance(rel, dict) else {}


def redacted(event: dict[str, Any]) -> bool:
    return "redacted_because" in event.get("unsigned", {})


async def keycaps_on(person: Person, room: str, event_id: str, sender: str) -> list[dict[str, Any]]:
    return [e for e in await person.events(room)
            if e.get("type") == "m.reaction" and e.get("sender") == sender
            and relates(e).get("rel_type") == "m.annotation" and relates(e).get("event_id") == event_id]


async def run_prompts(sql: asyncpg.Pool, event_id: str) -> list[str]:
    return [r["prompt"] for r in await sql.fetch(
        "SELECT prompt FROM agent_runs WHERE trigger_event = $1", event_id)]


async def with_bob(alice: Person, bob: Person, room: str) -> None:
    await alice.client.room_invite(room, bob.user_id)
    await bob.client.join(room)
    await alice.wait_membership(room, bob.user_id, "join")


async def test_an_answer_with_choices_shows_them_numbered_with_the_puppets_keycaps(
        people: People, service: Service) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "Helper, I want to return my book", mention="helper", script=[{"text": OFFER}])
    answer = await alice.answer_to(room, asked)
    assert answer["content"]["body"] == "Which copy is it?\n\n1. The paperback\n2. The hardcover"
    assert "<ol>" in answer["content"]["formatted_body"]

    async def keys() -> list[str] | None:
        found = await keycaps_on(alice, room, answer["event_id"], alice.puppet("helper"))
        return sorted(relates(e)["key"] for e in found) if len(found) == 2 else None

    assert await eventually(keys) == sorted(KEYCAPS[:2])


async def test_two_people_pressing_at_once_one_takes_it_and_the_other_is_told_it_is_gone(
        people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await alice.room_with("helper")
    await with_bob(alice, bob, room)
    puppet = alice.puppet("helper")
    asked = await alice.say(room, "Helper, which copy?", mention="helper", script=[{"text": OFFER}])
    answer = (await alice.answer_to(room, asked))["event_id"]
    await eventually(lambda: keycaps_on(alice, room, answer, puppet))

    def press(n: int) -> dict[str, Any]:
        return {"m.relates_to": {"rel_type": "m.annotation", "event_id": answer, "key": KEYCAPS[n - 1]}}

    pressed = await asyncio.gather(alice.send(room, press(1), "m.reaction"), bob.send(room, press(2), "m.reaction"))

    offer = await eventually(lambda: sql.fetchrow(
        "SELECT * FROM bot_offers WHERE answer_event = $1 AND taken_at IS NOT NULL", answer))
    winner = 0 if offer["taken_by"] == alice.user_id else 1
    loser = (alice, bob)[1 - winner]
    label = ("The paperback", "The hardcover")[winner]
    assert offer["taken_choice"] == winner + 1
    assert await run_prompts(sql, pressed[winner]) == [label]
    assert await run_prompts(sql, pressed[1 - winner]) == []

    async def told() -> list[dict[str, Any]]:
        return [e for e in await alice.notices_from(room, puppet)
                if (e["content"].get("m.mentions") or {}).get("user_ids") == [loser.user_id]]

    [gone] = await eventually(told)
    assert label in gone["content"]["body"]

    async def edited() -> dict[str, Any] | None:
        return next((e for e in await alice.events(room) if e.get("sender") == puppet
                     and relates(e) == {"rel_type": "m.replace", "event_id": answer}), None)

    edit = await eventually(edited)
    assert f"✅ {winner + 1}. {label} — taken by" in edit["content"]["m.new_content"]["body"]

    async def keycaps_removed() -> bool:
        events = await alice.events(room)
        ours = [e for e in events if e.get("type") == "m.reaction" and e.get("sender") == puppet]
        return len(ours) == 2 and all(redacted(e) for e in ours)

    await eventually(keycaps_removed)
    # The bot answers the one who took it, under the offer.
    taken_by = (alice, bob)[winner]
    reply = await eventually(lambda: _answers_mentioning(alice, room, answer, taken_by.user_id), timeout=20)
    assert reply[0]["sender"] == puppet


async def _answers_mentioning(person: Person, room: str, event_id: str, user_id: str) -> list[dict[str, Any]]:
    return [e for e in await person.answers_to(room, event_id)
            if (e["content"].get("m.mentions") or {}).get("user_ids") == [user_id]]


async def test_the_askers_bare_number_in_the_thread_summons_the_bot_with_the_offers_words(
        people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    root = await alice.say(room, "About my order")
    asked = await alice.say(room, "Helper, which copy do I have?", mention="helper", thread=root,
                            script=[{"text": OFFER}])
    await alice.answer_to(room, asked)
    number = await alice.say(room, "2", thread=root)
    await eventually(lambda: run_prompts(sql, number))
    assert await run_prompts(sql, number) == ["The hardcover"]
    row = await sql.fetchrow(
        "SELECT asked_by, thread FROM agent_runs WHERE trigger_event = $1", number)
    assert (row["asked_by"], row["thread"]) == (alice.user_id, root)
    press = await sql.fetchrow("SELECT how, taken FROM bot_choices WHERE event_id = $1", number)
    assert (press["how"], press["taken"]) == ("number", True)


async def test_a_room_that_chooses_polls_gets_a_poll_and_a_vote_takes_it(
        people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice, bob = await people("alice"), await people("bob")
    room = await alice.room_with("helper")
    await with_bob(alice, bob, room)
    await sql.execute("""UPDATE rooms SET settings = settings || '{"choices": "poll"}' WHERE room_id = $1""",
                      room)
    puppet = alice.puppet("helper")
    asked = await alice.say(room, "Helper, which copy?", mention="helper", script=[{"text": OFFER}])
    await alice.answer_to(room, asked)

    async def poll() -> dict[str, Any] | None:
        return next((e for e in await alice.events(room) if e.get("sender") == puppet
                     and e.get("type") == "org.matrix.msc3381.poll.start"), None)

    start = await eventually(poll)
    answers = start["content"]["org.matrix.msc3381.poll.start"]["answers"]
    assert [a["org.matrix.msc1767.text"] for a in answers] == ["The paperback", "The hardcover"]
    assert await keycaps_on(alice, room, start["event_id"], puppet) == []

    vote = await bob.send(room, {"m.relates_to": {"rel_type": "m.reference", "event_id": start["event_id"]},
                                 "org.matrix.msc3381.poll.response": {"answers": [answers[0]["id"]]}},
                          "org.matrix.msc3381.poll.response")
    await eventually(lambda: run_prompts(sql, vote))
    assert await run_prompts(sql, vote) == ["The paperback"]

    async def ended() -> dict[str, Any] | None:
        return next((e for e in await alice.events(room) if e.get("sender") == puppet
                     and e.get("type") == "org.matrix.msc3381.poll.end"), None)

    end = await eventually(ended)
    assert relates(end) == {"rel_type": "m.reference", "event_id": start["event_id"]}
