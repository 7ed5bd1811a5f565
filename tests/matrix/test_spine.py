"""The spine end to end: a person mentions a bot in Element's place (matrix-nio), Synapse hands the line
to summon, a worker runs it, and the puppet answers — on real Synapse and real PostgreSQL."""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import asyncpg
import pytest

from appservice.app import Service
from appservice.matrix.tables.rooms import RoomTables
from tests.book import SCRIPT_KEY
from tests.matrix.people import Person
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


async def runs_for(sql: asyncpg.Pool, event_id: str) -> int:
    return int(await sql.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", event_id))


async def stored(sql: asyncpg.Pool, event_id: str) -> bool:
    return bool(await sql.fetchval("SELECT count(*) FROM room_events WHERE event_id = $1", event_id))


async def test_a_mention_in_a_room_gets_one_answer_from_the_puppet_as_a_reply(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "Helper: what is summon?", mention="helper",
                            script=[{"text": "A **bot** host.\n\n- one\n- two"}])
    answer = await alice.answer_to(room, asked)
    content = answer["content"]
    assert answer["sender"] == alice.puppet("helper")
    assert content["msgtype"] == "m.notice"
    assert content["body"].startswith("A **bot** host.")
    assert "<strong>bot</strong>" in content["formatted_body"]
    assert content["m.mentions"] == {"user_ids": [alice.user_id]}
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": asked}}
    # Exactly one: a second mention is answered, and the first still has one answer.
    fence = await alice.say(room, "and again", mention="helper", script=[{"text": "again"}])
    await alice.answer_to(room, fence)
    assert len(await alice.answers_to(room, asked)) == 1


async def test_a_mention_in_a_thread_is_answered_in_that_thread(people: People, service: Service,
                                                               sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    root = await alice.say(room, "Which editor should I use?")
    await alice.say(room, "I like small ones", thread=root)
    asked = await alice.say(room, "@Helper which are best for newbs?", mention="helper", thread=root,
                            script=[{"text": "nano"}])
    answer = await alice.answer_to(room, asked)
    rel = answer["content"]["m.relates_to"]
    assert (rel["rel_type"], rel["event_id"]) == ("m.thread", root)
    assert rel["m.in_reply_to"] == {"event_id": asked}
    # The bot was handed the thread (root and replies), not the main timeline.
    context = await sql.fetchval("SELECT context FROM agent_runs WHERE trigger_event = $1", asked)
    said = [line["said"] for line in context["lines"]]
    assert context["kind"] == "thread"
    assert said == ["Which editor should I use?", "I like small ones", "@Helper which are best for newbs?"]


async def test_a_pill_without_m_mentions_summons_like_an_older_client(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    puppet = alice.puppet("helper")
    asked = await alice.send(room, {
        "msgtype": "m.text", "body": "Helper: hi",
        "format": "org.matrix.custom.html",
        "formatted_body": f'<a href="https://matrix.to/#/{puppet}">Helper</a>: hi',
        SCRIPT_KEY: [{"text": "hello"}],
    })
    assert (await alice.answer_to(room, asked))["content"]["body"] == "hello"


async def test_no_mention_is_met_with_silence(people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")  # not a direct chat: a line must say whom it is for
    quiet = await alice.say(room, "just talking among ourselves about helpers", script=[{"text": "no"}])
    fence = await alice.say(room, "now you", mention="helper", script=[{"text": "yes"}])
    await alice.answer_to(room, fence)
    assert await stored(sql, quiet)  # heard, and deliberately not answered
    assert await runs_for(sql, quiet) == 0
    assert await alice.answers_to(room, quiet) == []


async def test_in_a_dm_with_a_bot_every_line_is_for_it(people: People, service: Service, sql: asyncpg.Pool) -> None:
    alice, bob = await people("alice"), await people("bob")
    dm = await alice.room_with("helper", direct=True)
    asked = await alice.say(dm, "what can you do?", script=[{"text": "Plenty."}])  # no mention: it is her DM
    answer = await alice.answer_to(dm, asked)
    assert answer["sender"] == alice.puppet("helper") and "Plenty." in answer["content"]["body"]
    theirs = await alice.say(dm, "!hookshot help", script=[{"text": "no"}])  # another bot's command, even here
    # Somebody else reads along: a line says whom it is for again.
    await alice.client.room_invite(dm, bob.user_id)
    await eventually(lambda: sql.fetchval("SELECT membership = 'invite' FROM room_members WHERE room_id = $1 "
                                          "AND user_id = $2", dm, bob.user_id), timeout=10)
    quiet = await alice.say(dm, "and this one?", script=[{"text": "no"}])
    fence = await alice.say(dm, "now you", mention="helper", script=[{"text": "yes"}])
    await alice.answer_to(dm, fence)
    assert await stored(sql, quiet) and await runs_for(sql, quiet) == 0 and await runs_for(sql, theirs) == 0


async def test_another_bots_notice_naming_ours_is_met_with_silence(people: People, service: Service,
                                                                  sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    other_bot = await people("otherbot")
    room = await alice.room_with("helper")
    await alice.client.room_invite(room, other_bot.user_id)
    await other_bot.client.join(room)
    notice = await other_bot.send(room, {"msgtype": "m.notice", "body": "Helper, the build failed",
                                         "m.mentions": {"user_ids": [alice.puppet("helper")]},
                                         SCRIPT_KEY: [{"text": "loop!"}]})
    fence = await alice.say(room, "still there?", mention="helper", script=[{"text": "yes"}])
    await alice.answer_to(room, fence)
    assert await stored(sql, notice)
    assert await runs_for(sql, notice) == 0
    assert await alice.answers_to(room, notice) == []


async def test_an_invite_to_an_encrypted_room_is_declined_with_the_reason(people: People, service: Service) -> None:
    alice = await people("alice")
    encryption = {"type": "m.room.encryption", "state_key": "",
                  "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
    resp = await alice.client.room_create(name="secret", invite=[alice.puppet("helper")], initial_state=[encryption])
    room = resp.room_id
    left = await alice.wait_membership(room, alice.puppet("helper"), "leave")
    assert "encrypted" in left.get("reason", "")
    assert alice.puppet("helper") not in await alice.members(room)


async def test_a_room_that_turns_encrypted_is_left_with_the_reason(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    await alice.client.room_put_state(room, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"})
    left = await alice.wait_membership(room, alice.puppet("helper"), "leave")
    assert "encrypted" in left.get("reason", "")
    async def left_recorded() -> bool:
        row = await service.store.of(RoomTables).get(room)
        return row is not None and row.encrypted and row.left_at is not None

    await eventually(left_recorded)
    # Nothing was posted into the encrypted room by the bot.
    assert await alice.notices_from(room, alice.puppet("helper")) == []


async def test_a_replayed_transaction_gets_no_second_answer(people: People, service: Service, stack: dict[str, str],
                                                             sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "once, please", mention="helper", script=[{"text": "once"}])
    await alice.answer_to(room, asked)
    event = next(e for e in await alice.events(room) if e["event_id"] == asked)
    event = {**event, "room_id": room}

    # The homeserver retries a transaction (same id), and sends the same event again in a new one.
    url = f"http://127.0.0.1:{stack['SUMMON_AS_PORT']}/_matrix/app/v1/transactions/"
    headers = {"Authorization": f"Bearer {stack['SUMMON_HS_TOKEN']}"}
    txn = f"replay-{uuid.uuid4().hex}"
    async with aiohttp.ClientSession() as http:
        # A hundred deliveries: the same transaction retried, and the same event in new transactions.
        for txn_id in [txn] * 50 + [f"{txn}-{n}" for n in range(50)]:
            async with http.put(url + txn_id, data=json.dumps({"events": [event]}), headers=headers) as resp:
                assert resp.status == 200
        async with http.put(url + "forged", data=json.dumps({"events": [event]}),
                            headers={"Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 403
            body: dict[str, Any] = await resp.json()
            assert body["errcode"] == "M_FORBIDDEN"

    fence = await alice.say(room, "and now", mention="helper", script=[{"text": "fence"}])
    await alice.answer_to(room, fence)
    assert await runs_for(sql, asked) == 1
    assert len(await alice.answers_to(room, asked)) == 1
    assert await sql.fetchval("SELECT count(*) FROM room_events WHERE event_id = $1", asked) == 1


async def test_puppets_are_registered_with_their_bots_names(people: People, service: Service) -> None:
    from nio import ProfileGetDisplayNameResponse

    alice = await people("alice")
    for bot in service.registry().bots.values():
        resp = await alice.client.get_displayname(bot.user_id)
        assert isinstance(resp, ProfileGetDisplayNameResponse), resp
        assert resp.displayname == bot.name
    # Registering again (a restart) is harmless: it is idempotent.
    await service.rooms.register_puppets()
    resp = await alice.client.get_displayname(alice.puppet("helper"))
    assert isinstance(resp, ProfileGetDisplayNameResponse) and resp.displayname == "Helper"


async def test_puppets_presence_says_when_no_provider_can_answer(people: People, service: Service) -> None:
    from nio import PresenceGetResponse

    alice = await people("alice")
    puppet = alice.puppet("helper")
    await alice.room_with("helper")  # presence is seen by those who share a room

    async def presence() -> tuple[str, str | None]:
        resp = await alice.client.get_presence(puppet)
        assert isinstance(resp, PresenceGetResponse), resp
        return resp.presence, resp.status_msg

    await service.rooms.set_presence(False)
    state, status = await presence()
    assert state == "unavailable" and status is not None and "provider" in status
    await service.rooms.set_presence(True)
    assert (await presence())[0] == "online"


async def test_a_run_that_fails_says_its_ending_and_the_providers_reason_to_the_asker(people: People, service: Service) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "Helper, tell me", mention="helper",
                            script=[{"error": "The model is overloaded right now.", "error_class": "provider"}])
    answer = await alice.answer_to(room, asked)
    words = service.registry().get("helper").ending("failed")  # type: ignore[union-attr]
    assert words
    assert answer["content"]["body"].startswith(words)
    assert "The model is overloaded right now." in answer["content"]["body"]
    assert answer["content"]["m.mentions"] == {"user_ids": [alice.user_id]}


async def test_cancel_in_the_room_stops_the_askers_run_and_says_so(people: People, service: Service,
                                                                  sql: asyncpg.Pool) -> None:
    alice = await people("alice")
    room = await alice.room_with("helper")
    asked = await alice.say(room, "Helper, think hard", mention="helper", script=[{"text": "too late", "delay": 5}])
    await eventually(lambda: sql.fetchval(
        "SELECT status = 'running' FROM agent_runs WHERE trigger_event = $1", asked))
    await alice.say(room, "!cancel")
    answer = await alice.answer_to(room, asked, timeout=20)
    assert answer["content"]["body"] == service.registry().get("helper").ending("cancelled")  # type: ignore[union-attr]
    assert await sql.fetchval("SELECT status FROM agent_runs WHERE trigger_event = $1", asked) == "cancelled"


async def test_a_long_run_shows_a_progress_line_that_goes_when_the_answer_lands(people: People, service: Service) -> None:
    from appservice.matrix.surface import PROGRESS_DELAY

    alice = await people("alice")
    room = await alice.room_with("helper")
    working = service.registry().strings.get("progress", "working")
    assert working
    service.surface.progress_delay = 0.3
    try:
        asked = await alice.say(room, "Helper, take your time", mention="helper",
                                script=[{"text": "done thinking", "delay": 3}])

        async def progress_line() -> dict[str, Any] | None:
            lines = await alice.answers_to(room, asked, progress=True)
            return lines[0] if lines else None

        line = await eventually(progress_line, timeout=10)
        assert line["sender"] == alice.puppet("helper")
        assert line["content"]["body"].startswith(working.format(bot="Helper"))
        assert line["content"]["m.mentions"] == {}
        answer = await alice.answer_to(room, asked)
        assert answer["content"]["body"] == "done thinking"

        async def removed() -> bool:
            event = next(e for e in await alice.events(room) if e["event_id"] == line["event_id"])
            return "redacted_because" in event.get("unsigned", {})

        await eventually(removed, timeout=10)
    finally:
        service.surface.progress_delay = PROGRESS_DELAY


async def test_a_stop_sign_on_the_progress_line_cancels_the_run(people: People, service: Service) -> None:
    from appservice.matrix.surface import PROGRESS_DELAY

    alice = await people("alice")
    room = await alice.room_with("helper")
    service.surface.progress_delay = 0.3
    try:
        asked = await alice.say(room, "Helper, go on", mention="helper", script=[{"text": "never said", "delay": 4}])

        async def progress_line() -> dict[str, Any] | None:
            lines = await alice.answers_to(room, asked, progress=True)
            return lines[0] if lines else None

        line = await eventually(progress_line, timeout=10)
        await alice.send(room, {"m.relates_to": {"rel_type": "m.annotation", "event_id": line["event_id"], "key": "🛑"}},
                         event_type="m.reaction")
        answer = await alice.answer_to(room, asked, timeout=20)
        assert answer["content"]["body"] == service.registry().get("helper").ending("cancelled")  # type: ignore[union-attr]
    finally:
        service.surface.progress_delay = PROGRESS_DELAY


async def test_a_working_bot_is_shown_typing_and_a_long_run_is_brought_up_to_date(
        people: People, service: Service) -> None:
    from appservice.matrix.surface import PROGRESS_DELAY, PROGRESS_EVERY, TYPING_DELAY

    alice = await people("alice")
    room = await alice.room_with("helper")
    strings = service.registry().strings
    still = (strings.get("progress", "still_working") or "").format(bot="Helper", minutes=1)
    assert still
    surface = service.surface
    surface.progress_delay, surface.progress_every, surface.typing_delay = 0.3, 1.0, 0.1
    try:
        asked = await alice.say(room, "Helper, slowly please", mention="helper",
                                script=[{"text": "done at last", "delay": 5}])

        async def typing() -> bool:
            await alice.client.sync(timeout=500)
            seen = alice.client.rooms.get(room)
            return seen is not None and alice.puppet("helper") in seen.typing_users

        await eventually(typing, timeout=10)  # the puppet types while the run works

        async def brought_up_to_date() -> bool:
            for event in await alice.events(room):
                content = event.get("content", {})
                if content.get("m.relates_to", {}).get("rel_type") == "m.replace" and \
                        content.get("m.new_content", {}).get("body", "").startswith(still):
                    return event["sender"] == alice.puppet("helper")
            return False

        await eventually(brought_up_to_date, timeout=10)  # the progress line, edited in place: still working
        answer = await alice.answer_to(room, asked, timeout=20)
        assert answer["content"]["body"] == "done at last"

        async def stopped_typing() -> bool:
            await alice.client.sync(timeout=500)
            seen = alice.client.rooms.get(room)
            return seen is not None and alice.puppet("helper") not in seen.typing_users

        await eventually(stopped_typing, timeout=10)
    finally:
        surface.progress_delay, surface.progress_every, surface.typing_delay = PROGRESS_DELAY, PROGRESS_EVERY, TYPING_DELAY


async def test_the_service_pings_the_homeserver_on_start(service: Service) -> None:
    # The ping proves the registration and makes Synapse retry queued transactions at once: it was answered.
    await eventually(lambda: service.metrics.registry.get_sample_value("summon_homeserver_ping_answered") == 1,
                     timeout=30)
