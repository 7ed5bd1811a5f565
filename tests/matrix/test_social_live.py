"""Social rules in bridged rooms (issue 28, docs/social.md), on the real Synapse with a fake bridge of the tests'
own (appservice/social/demo_bridge.py, make dev's too: a second appservice that makes rooms with m.bridge state and speaks as its
puppets) and matrix-nio staff: a rule drafts; ✅ sends to the same conversation; 🗑 sends nothing; a reply to the
draft sends its words instead; automatic sending happens only once switched on; a demoted author's rule pauses
and sends nothing; a DM line is never answered in the comment room, nor the other way round; the bot is given only
that conversation's bounded history; a replayed line makes one draft."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from nio import JoinResponse, RoomInviteResponse, RoomMessagesResponse, RoomSendResponse

from appservice.app import Service
from appservice.status import status
from tests.book import BOOK
from tests.matrix.conftest import SOCIAL_DRAFTS_PER_HOUR, SocialStaff
from tests.matrix.people import Person
from tests.support import eventually


@pytest.fixture(scope="module")
async def replier(service: Service) -> str:
    """The shipped bot published for the social surface, and only there (content/bots/replier.md): its puppet."""
    await eventually(lambda: service.registry().get("replier") is not None, timeout=60)
    bot = service.registry().get("replier")
    assert bot is not None and bot.surfaces == ("social",), bot
    return bot.user_id


async def _events(staff: SocialStaff, room_id: str) -> list[dict[str, Any]]:
    resp = await staff.client.room_messages(room_id, limit=200)
    assert isinstance(resp, RoomMessagesResponse), resp
    return [e.source for e in reversed(resp.chunk)]


async def _from(staff: SocialStaff, room_id: str, sender: str) -> list[dict[str, Any]]:
    return [e for e in await _events(staff, room_id)
            if e.get("sender") == sender and e.get("type") == "m.room.message"]


async def _said(staff: SocialStaff, room_id: str, text: str, sender: str | None = None) -> dict[str, Any]:
    """The first message in ``room_id`` (by ``sender``) whose body has ``text``, once there is one."""
    async def check() -> dict[str, Any] | None:
        return next((e for e in await _events(staff, room_id) if e.get("type") == "m.room.message"
                     and text in str(e.get("content", {}).get("body", ""))
                     and (sender is None or e.get("sender") == sender)), None)
    found: dict[str, Any] = await eventually(check, timeout=60)
    return found


async def _staff_says(staff: SocialStaff, room_id: str, body: str, **extra: Any) -> str:
    BOOK.say(body, None)
    resp = await staff.client.room_send(room_id, "m.room.message", {"msgtype": "m.text", "body": body, **extra})
    assert isinstance(resp, RoomSendResponse), resp
    return str(resp.event_id)


async def _answer(staff: SocialStaff, room_id: str, event_id: str, service: Service) -> str:
    """The service's notice answering ``event_id`` (a !rules line)."""
    async def check() -> str | None:
        for e in await _from(staff, room_id, service.service_user):
            rel = e.get("content", {}).get("m.relates_to") or {}
            if (rel.get("m.in_reply_to") or {}).get("event_id") == event_id:
                return str(e["content"]["body"])
        return None
    found: str = await eventually(check, timeout=60)
    return found


async def _bridged(staff: SocialStaff, service: Service, sql: asyncpg.Pool, *, kind: str,
                   guests: list[str]) -> str:
    """A room the fake bridge made (``m.bridge``, ``kind``), the staff member at power 50 in it, the service
    invited, and summon knowing it is bridged."""
    room = await staff.bridge.bridged_room(kind=kind, channel=f"{kind} {uuid.uuid4().hex[:4]}", guests=guests,
                                           invite=[str(staff.client.user_id), service.service_user],
                                           staff={str(staff.client.user_id): 50})
    assert isinstance(await staff.client.join(room), JoinResponse)
    # Generous waits: a loaded machine (the whole suite on two cores) takes its time to join and read the room.
    await eventually(lambda: _bridged_row(sql, room), timeout=60)
    # Its members are stored (the staff member's join included), so their power is known there.
    await eventually(lambda: _member(sql, room, str(staff.client.user_id)), timeout=60)
    return room


async def _bridged_row(sql: asyncpg.Pool, room: str) -> bool:
    return await sql.fetchval("SELECT bridged FROM social_rooms WHERE room_id = $1", room) is True


async def _member(sql: asyncpg.Pool, room: str, user: str) -> bool:
    return await sql.fetchval("SELECT membership FROM room_members WHERE room_id = $1 AND user_id = $2",
                              room, user) == "join"


async def _rule(staff: SocialStaff, service: Service, sql: asyncpg.Pool, room: str, phrase: str, kind: str,
                to: str, replier: str) -> int:
    said = await _staff_says(staff, room, f'!rules add replier "{phrase}" on {kind} to {to}')
    answer = await _answer(staff, room, said, service)
    assert "is written" in answer, answer
    rule = await sql.fetchval("SELECT id FROM social_rules WHERE room_id = $1 AND phrase = $2", room, phrase)
    assert isinstance(rule, int)
    assert f"#{rule}" in answer
    await eventually(lambda: _member(sql, room, replier), timeout=60)  # the bot was invited, and joined
    return rule


async def _drafts(sql: asyncpg.Pool, rule: int) -> list[tuple[str | None, str]]:
    return [(r["text"], r["status"]) for r in
            await sql.fetch("SELECT text, status FROM social_drafts WHERE rule_id = $1 ORDER BY id", rule)]


async def _status(sql: asyncpg.Pool, rule: int, status: str, n: int = 1) -> bool:
    return sum(1 for _, s in await _drafts(sql, rule) if s == status) >= n


async def _react(staff: SocialStaff, event_id: str, key: str) -> None:
    resp = await staff.client.room_send(staff.room_id, "m.reaction", {"m.relates_to": {
        "rel_type": "m.annotation", "event_id": event_id, "key": key}})
    assert isinstance(resp, RoomSendResponse), resp


async def _replier_lines(staff: SocialStaff, room: str, replier: str) -> list[dict[str, Any]]:
    return await _from(staff, room, replier)


async def test_a_rule_drafts_and_send_goes_to_the_same_dm(service: Service, social_staff: SocialStaff,
                                                          sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    alice = await staff.bridge.puppet("alice", "Alice Fakebook")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[alice])
    shown = await _answer(staff, dm, await _staff_says(staff, dm, "!rules"), service)
    assert "a private DM on Fakebook" in shown and staff.bridge.bot in shown, shown
    rule = await _rule(staff, service, sql, dm, "where is my refund", "dm", "private", replier)
    status_here = await _answer(staff, dm, await _staff_says(staff, dm, "!bots status"), service)
    assert "a private DM on Fakebook" in status_here and "where is my refund" in status_here, status_here
    assert "choices:" in status_here, status_here  # the room's own settings, as !bots says them

    line = "Hi! Where is my refund??"
    BOOK.say(line, [{"text": "Your refund left us on Monday."}])
    asked = await staff.bridge.say(dm, alice, line)
    draft = await _said(staff, staff.room_id, "Your refund left us on Monday.", service.service_user)
    body = draft["content"]["body"]
    assert f"rule #{rule}" in body and "private reply" in body, body
    assert await _replier_lines(staff, dm, replier) == []  # a draft is not sent

    await _react(staff, draft["event_id"], "✅")
    sent = await _said(staff, dm, "Your refund left us on Monday.", replier)
    assert sent["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == asked  # where the line was said
    await eventually(lambda: _status(sql, rule, "sent"), timeout=60)
    await _said(staff, staff.room_id, "Sent by Sam from social", service.service_user)
    history = [r["what"] for r in await sql.fetch("SELECT what FROM social_history WHERE rule_id = $1 ORDER BY id", rule)]
    assert history == ["written", "drafted", "sent"]
    run = await sql.fetchrow("SELECT surface, place, asked_by, subject, live_for FROM agent_runs WHERE id = "
                             "(SELECT run_id FROM social_drafts WHERE rule_id = $1)", rule)
    assert (run["surface"], run["place"], run["asked_by"]) == ("social", dm, None)  # a guest asks nothing
    # The conversation is what its ceilings (limits.per) and its live runs count against, as a person's are.
    assert run["subject"] == run["live_for"] == f"social:{dm}|"
    assert await sql.fetchval("SELECT count(*) FROM spend_ledger WHERE who = $1", f"social:{dm}|") >= 1
    shown_status = {line.part: line.says for line in await status(service.config)}
    assert "bridged room(s)" in shown_status["social"] and "rule(s) live" in shown_status["social"]


async def test_discard_sends_nothing_and_a_reply_sends_its_own_words_in_the_comment_thread(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    page, bob, carol = (await staff.bridge.puppet("page", "The Shop"), await staff.bridge.puppet("bob", "Bob"),
                        await staff.bridge.puppet("carol", "Carol"))
    post_room = await _bridged(staff, service, sql, kind="comments", guests=[page, bob, carol])
    rule = await _rule(staff, service, sql, post_room, "refund", "comment", "public", replier)
    post = await staff.bridge.say(post_room, page, "Our summer sale starts today!")

    BOOK.say("Is there a refund if it breaks?", [{"text": "Yes, within a year."}])
    await staff.bridge.say(post_room, bob, "Is there a refund if it breaks?", thread=post)
    first = await _said(staff, staff.room_id, "Yes, within a year.", service.service_user)
    assert "public reply: visible to everyone on Fakebook" in first["content"]["body"]
    await _react(staff, first["event_id"], "🗑️")
    await _said(staff, staff.room_id, "Discarded by Sam from social", service.service_user)
    assert await _drafts(sql, rule) == [("Yes, within a year.", "discarded")]

    BOOK.say("refund for mine too please", [{"text": "Happy to help, Carol."}])
    carol_asked = await staff.bridge.say(post_room, carol, "refund for mine too please", thread=post)
    second = await _said(staff, staff.room_id, "Happy to help, Carol.", service.service_user)
    root = second["content"]["m.relates_to"]["event_id"]
    await _staff_says(staff, staff.room_id, "Carol, we have sent you a new one.", **{"m.relates_to": {
        "rel_type": "m.thread", "event_id": root, "is_falling_back": False,
        "m.in_reply_to": {"event_id": second["event_id"]}}})
    sent = await _said(staff, post_room, "Carol, we have sent you a new one.", replier)
    relates = sent["content"]["m.relates_to"]
    assert relates["rel_type"] == "m.thread" and relates["event_id"] == post  # in the post's own thread
    assert relates["m.in_reply_to"]["event_id"] == carol_asked
    await eventually(lambda: _status(sql, rule, "edited"), timeout=60)
    bodies = [e["content"]["body"] for e in await _replier_lines(staff, post_room, replier)]
    assert bodies == ["Carol, we have sent you a new one."]  # the discarded and the replaced draft: never sent


async def test_automatic_sending_only_after_it_is_switched_on(service: Service, social_staff: SocialStaff,
                                                              sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    dana = await staff.bridge.puppet("dana", "Dana")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[dana])
    rule = await _rule(staff, service, sql, dm, "refund", "dm", "private", replier)
    BOOK.say("refund status?", [{"text": "Checking your refund now."}])
    await staff.bridge.say(dm, dana, "refund status?")
    await _said(staff, staff.room_id, "Checking your refund now.", service.service_user)
    assert await _drafts(sql, rule) == [("Checking your refund now.", "pending")]

    answer = await _answer(staff, dm, await _staff_says(staff, dm, f"!rules auto {rule} on"), service)
    assert "without review" in answer and "sends automatically" in answer, answer
    listed = await _answer(staff, dm, await _staff_says(staff, dm, "!rules"), service)
    assert f"#{rule}" in listed and "sends automatically" in listed and "private reply" in listed, listed
    BOOK.say("any news on the refund", [{"text": "It was sent this morning."}])
    await staff.bridge.say(dm, dana, "any news on the refund")
    await _said(staff, dm, "It was sent this morning.", replier)  # no ✅: sent by itself
    await _said(staff, staff.room_id, "Sent automatically", service.service_user)
    assert await _drafts(sql, rule) == [("Checking your refund now.", "pending"), ("It was sent this morning.", "sent")]
    bodies = [e["content"]["body"] for e in await _replier_lines(staff, dm, replier)]
    assert bodies == ["It was sent this morning."]  # the draft from before waits for a person still


async def test_a_demoted_authors_rule_pauses_and_sends_nothing(service: Service, social_staff: SocialStaff,
                                                              sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    erin = await staff.bridge.puppet("erin", "Erin")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[erin])
    rule = await _rule(staff, service, sql, dm, "refund", "dm", "private", replier)
    BOOK.say("I want a refund", [{"text": "Sorry to hear that, Erin."}])
    await staff.bridge.say(dm, erin, "I want a refund")
    draft = await _said(staff, staff.room_id, "Sorry to hear that, Erin.", service.service_user)

    await staff.bridge.set_power(dm, {str(staff.client.user_id): 0})

    async def demoted() -> bool:
        levels = await sql.fetchval("SELECT power_levels FROM rooms WHERE room_id = $1", dm)
        return (levels or {}).get("users", {}).get(str(staff.client.user_id)) == 0
    await eventually(demoted, timeout=60)
    await _react(staff, draft["event_id"], "✅")
    held = await _said(staff, staff.room_id, f"Rule #{rule} is paused and nothing was sent", service.service_user)
    assert "no longer holds the power" in held["content"]["body"]
    state = await sql.fetchrow("SELECT state, paused_why FROM social_rules WHERE id = $1", rule)
    assert state["state"] == "paused" and str(staff.client.user_id) in state["paused_why"]
    assert await _drafts(sql, rule) == [("Sorry to hear that, Erin.", "held")]
    assert await _replier_lines(staff, dm, replier) == []

    BOOK.say("refund please, anyone?", [{"text": "Should never be written."}])
    await staff.bridge.say(dm, erin, "refund please, anyone?")
    # The homeserver sends the room's events in order: once this is answered, Erin's line was heard.
    refused = await _answer(staff, dm, await _staff_says(staff, dm, f"!rules resume {rule}"), service)
    assert "power level 50" in refused and "yours is 0" in refused, refused
    assert len(await _drafts(sql, rule)) == 1  # a paused rule drafts nothing
    assert await sql.fetchval("SELECT state FROM social_rules WHERE id = $1", rule) == "paused"


async def test_a_dm_is_answered_only_in_the_dm_and_a_comment_only_in_its_thread(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    frank, page = await staff.bridge.puppet("frank", "Frank"), await staff.bridge.puppet("page", "The Shop")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[frank])
    post_room = await _bridged(staff, service, sql, kind="comments", guests=[frank, page])
    # Each destination is its own answer: a DM rule cannot reply in public, a comment rule cannot reply privately.
    for room, wrong in ((dm, '"refund" on dm to public'), (dm, '"refund" on comment to public'),
                        (post_room, '"refund" on comment to private'), (post_room, '"refund" on dm to private')):
        refused = await _answer(staff, room, await _staff_says(staff, room, f"!rules add replier {wrong}"), service)
        assert "cannot be" in refused and "allowed:" in refused, refused
    assert await sql.fetchval("SELECT count(*) FROM social_rules WHERE room_id IN ($1, $2)", dm, post_room) == 0
    dm_rule = await _rule(staff, service, sql, dm, "refund", "dm", "private", replier)
    post_rule = await _rule(staff, service, sql, post_room, "refund", "comment", "public", replier)
    post = await staff.bridge.say(post_room, page, "New arrivals this week")

    BOOK.say("refund me privately", [{"text": "Private answer for Frank."}])
    await staff.bridge.say(dm, frank, "refund me privately")
    first = await _said(staff, staff.room_id, "Private answer for Frank.", service.service_user)
    assert "private reply" in first["content"]["body"]
    await _react(staff, first["event_id"], "✅")
    await _said(staff, dm, "Private answer for Frank.", replier)

    BOOK.say("refund me in public", [{"text": "Public answer for Frank."}])
    await staff.bridge.say(post_room, frank, "refund me in public", thread=post)
    second = await _said(staff, staff.room_id, "Public answer for Frank.", service.service_user)
    assert "public reply: visible to everyone on Fakebook" in second["content"]["body"]
    await _react(staff, second["event_id"], "✅")
    await _said(staff, post_room, "Public answer for Frank.", replier)

    assert [e["content"]["body"] for e in await _replier_lines(staff, dm, replier)] == ["Private answer for Frank."]
    assert [e["content"]["body"] for e in await _replier_lines(staff, post_room, replier)] == ["Public answer for Frank."]
    assert await _drafts(sql, dm_rule) == [("Private answer for Frank.", "sent")]
    assert await _drafts(sql, post_rule) == [("Public answer for Frank.", "sent")]


async def test_the_bot_is_given_only_that_conversations_bounded_history(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    gina, hal, page = (await staff.bridge.puppet("gina", "Gina"), await staff.bridge.puppet("hal", "Hal"),
                       await staff.bridge.puppet("page", "The Shop"))
    post_room = await _bridged(staff, service, sql, kind="comments", guests=[gina, hal, page])
    rule = await _rule(staff, service, sql, post_room, "refund", "comment", "public", replier)
    post_a = await staff.bridge.say(post_room, page, "Post A: our new kettle")
    post_b = await staff.bridge.say(post_room, page, "Post B: our new toaster")
    await staff.bridge.say(post_room, hal, "other-thread words from Hal", thread=post_b)
    await staff.bridge.say(post_room, page, "main-timeline words")
    for n in range(6):
        await staff.bridge.say(post_room, gina, f"kettle comment {n} " + "x" * 40, thread=post_a)
    await _staff_says(staff, post_room, "staff-only note: Gina is a VIP",
                      **{"m.relates_to": {"rel_type": "m.thread", "event_id": post_a}})
    await _said(staff, post_room, "staff-only note")
    BOOK.say("so where is the refund", [{"text": "On its way, Gina."}])
    asked = await staff.bridge.say(post_room, gina, "so where is the refund", thread=post_a)
    await eventually(lambda: _status(sql, rule, "pending"), timeout=60)

    context = await sql.fetchval("SELECT context FROM agent_runs WHERE id = "
                                 "(SELECT run_id FROM social_drafts WHERE rule_id = $1)", rule)
    lines = context["lines"]
    said = [line["said"] for line in lines]
    assert said[-1] == "so where is the refund" and lines[-1]["event_id"] == asked
    assert all("other-thread" not in s and "main-timeline" not in s and "staff-only" not in s for s in said), said
    assert {line["sender"] for line in lines} <= {gina, page}  # only this thread's guests
    assert len(lines) <= 5  # history_lines (4) and the line itself
    assert sum(len(line["said"]) + len(line.get("name") or "") + 4 for line in lines) <= 600  # history_chars
    assert "kettle comment 5" in " ".join(said)  # the newest history is what is kept


async def test_a_replayed_line_makes_one_draft_and_a_flood_is_capped(service: Service, social_staff: SocialStaff,
                                                                     sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    ivy = await staff.bridge.puppet("ivy", "Ivy")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[ivy])
    rule = await _rule(staff, service, sql, dm, "where is my refund", "dm", "private", replier)
    for _ in range(4):  # the bridge replays the line (and Ivy says it again): one line to the rule
        await staff.bridge.say(dm, ivy, "Where is my refund?")
    await staff.bridge.say(dm, ivy, "where is my REFUND")
    # The homeserver sends the room's events in order: once this is answered, every line above was heard.
    await _answer(staff, dm, await _staff_says(staff, dm, f"!rules history {rule}"), service)
    assert len(await _drafts(sql, rule)) == 1
    await eventually(lambda: _status(sql, rule, "pending"), timeout=60)

    for n in range(SOCIAL_DRAFTS_PER_HOUR + 2):  # a flood of different lines: at most drafts_per_hour drafts
        await staff.bridge.say(dm, ivy, f"where is my refund number {n}")
    history = await _answer(staff, dm, await _staff_says(staff, dm, f"!rules history {rule}"), service)
    assert "capped" in history and "drafted" in history, history
    assert await _capped(sql, rule, 3)  # 1 + 5 drafts, then 3 over the hour's ceiling
    assert len(await _drafts(sql, rule)) == SOCIAL_DRAFTS_PER_HOUR


async def _capped(sql: asyncpg.Pool, rule: int, n: int) -> bool:
    return await sql.fetchval("SELECT count(*) FROM social_history WHERE rule_id = $1 AND what = 'capped'",
                              rule) == n


async def test_bad_rules_are_refused_in_words_and_nothing_is_stored(service: Service, social_staff: SocialStaff,
                                                                    sql: asyncpg.Pool, replier: str) -> None:
    staff = social_staff
    jo = await staff.bridge.puppet("jo", "Jo")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[jo])
    for written, says in (('"" on dm to private', "**phrase**"), ('"the" on dm to private', "only common words"),
                          ('"ok" on dm to private', "shorter than 3"), ('"refund" on dm', "**to**"),
                          ('"refund" on email to private', "**on**")):
        refused = await _answer(staff, dm, await _staff_says(staff, dm, f"!rules add replier {written}"), service)
        assert says in refused and "allowed:" in refused, refused
    for bot in ("nobody", "echo"):  # unknown; published, but not for the social surface
        refused = await _answer(staff, dm, await _staff_says(staff, dm, f'!rules add {bot} "refund" on dm to private'),
                                service)
        assert "**bot**" in refused and "replier" in refused, refused
    assert await sql.fetchval("SELECT count(*) FROM social_rules WHERE room_id = $1", dm) == 0
    # The guest cannot write rules, nor ask a bot directly: a puppet's line is the social surface's alone.
    await staff.bridge.say(dm, jo, '!rules add replier "refund" on dm to private')
    listed = await _answer(staff, dm, await _staff_says(staff, dm, "!rules"), service)
    assert "No rules here yet." in listed, listed
    assert await sql.fetchval("SELECT count(*) FROM social_rules WHERE room_id = $1", dm) == 0
    plain = await _answer(staff, staff.room_id, await _staff_says(staff, staff.room_id, "!rules pause 999999"), service)
    assert "There is no rule #999999" in plain, plain


async def test_a_rule_pauses_when_its_room_is_unbridged_or_its_bot_unpublished(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool, replier: str, content_dir: Path) -> None:
    staff = social_staff
    kim = await staff.bridge.puppet("kim", "Kim")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[kim])
    rule = await _rule(staff, service, sql, dm, "refund", "dm", "private", replier)
    BOOK.say("refund for Kim", [{"text": "Kim, it is on its way."}])
    await staff.bridge.say(dm, kim, "refund for Kim")
    draft = await _said(staff, staff.room_id, "Kim, it is on its way.", service.service_user)
    await staff.bridge.unbridge(dm)
    await eventually(lambda: _unbridged(sql, dm), timeout=60)
    await _react(staff, draft["event_id"], "✅")
    await _said(staff, staff.room_id, "the room is no longer bridged", service.service_user)
    assert await sql.fetchval("SELECT state FROM social_rules WHERE id = $1", rule) == "paused"
    assert await _replier_lines(staff, dm, replier) == []

    # The bot unpublished for the social surface: an automatic rule elsewhere pauses before it sends.
    lee = await staff.bridge.puppet("lee", "Lee")
    other = await _bridged(staff, service, sql, kind="dm", guests=[lee])
    auto = await _rule(staff, service, sql, other, "refund", "dm", "private", replier)
    await _answer(staff, other, await _staff_says(staff, other, f"!rules auto {auto} on"), service)
    path = content_dir / "bots" / "replier.md"
    shipped = path.read_text(encoding="utf-8")
    path.write_text(shipped.replace("surfaces: [social]", "surfaces: [rooms]"), encoding="utf-8")
    try:
        await eventually(lambda: "social" not in service.registry().bots["replier"].surfaces, timeout=60)
        BOOK.say("refund for Lee", [{"text": "Should never be written."}])
        await staff.bridge.say(other, lee, "refund for Lee")
        # Authority is asked before the model: the rule pauses, no bot is asked, nothing is sent.
        await _said(staff, staff.room_id, "is no longer published for the social surface", service.service_user)
        assert await sql.fetchval("SELECT state FROM social_rules WHERE id = $1", auto) == "paused"
        assert await _drafts(sql, auto) == [(None, "held")]
        assert await _replier_lines(staff, other, replier) == []
    finally:
        path.write_text(shipped, encoding="utf-8")
        await eventually(lambda: "social" in service.registry().bots["replier"].surfaces, timeout=60)


async def _unbridged(sql: asyncpg.Pool, room: str) -> bool:
    return await sql.fetchval("SELECT bridged FROM social_rooms WHERE room_id = $1", room) is False


async def test_a_draft_sent_by_someone_without_the_power_keeps_waiting(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool, replier: str,
        people: Callable[[str], Awaitable[Person]]) -> None:
    staff = social_staff
    max_ = await staff.bridge.puppet("max", "Max")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[max_])
    rule = await _rule(staff, service, sql, dm, "refund", "dm", "private", replier)
    intern = await people("intern")  # in the review room, not a moderator of the bridged room
    invited = await staff.client.room_invite(staff.room_id, intern.user_id)
    assert isinstance(invited, RoomInviteResponse), invited
    assert isinstance(await intern.client.join(staff.room_id), JoinResponse)
    await staff.bridge.say(dm, staff.bridge.bot, "Bridge notice: refund sync finished")  # the bridge bot's own
    BOOK.say("refund for Max?", [{"text": "Max, your refund is done."}])
    await staff.bridge.say(dm, max_, "refund for Max?")
    draft = await _said(staff, staff.room_id, "Max, your refund is done.", service.service_user)
    resp = await intern.client.room_send(staff.room_id, "m.reaction", {"m.relates_to": {
        "rel_type": "m.annotation", "event_id": draft["event_id"], "key": "✅"}})
    assert isinstance(resp, RoomSendResponse), resp
    await _said(staff, staff.room_id, f"Not sent: {intern.user_id} does not hold the power", service.service_user)
    assert await _drafts(sql, rule) == [("Max, your refund is done.", "pending")]  # one draft: the bot's line is none
    assert await sql.fetchval("SELECT state FROM social_rules WHERE id = $1", rule) == "active"
    await _react(staff, draft["event_id"], "✅")
    await _said(staff, dm, "Max, your refund is done.", replier)


async def test_a_rule_written_in_the_review_room_for_a_bridged_room_is_governed_there(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool, replier: str,
        people: Callable[[str], Awaitable[Person]]) -> None:
    staff = social_staff
    nia = await staff.bridge.puppet("nia", "Nia")
    dm = await _bridged(staff, service, sql, kind="dm", guests=[nia])
    written = f'!rules add replier "refund" on dm to private in {dm}'
    answer = await _answer(staff, staff.room_id, await _staff_says(staff, staff.room_id, written), service)
    assert "is written" in answer and "private reply" in answer, answer
    rule = await sql.fetchrow("SELECT id, room_id, governed_in FROM social_rules WHERE room_id = $1", dm)
    assert (rule["room_id"], rule["governed_in"]) == (dm, staff.room_id)
    await eventually(lambda: _member(sql, dm, replier), timeout=60)
    BOOK.say("refund for Nia", [{"text": "Nia, done."}])
    await staff.bridge.say(dm, nia, "refund for Nia")
    draft = await _said(staff, staff.room_id, "Nia, done.", service.service_user)
    await _react(staff, draft["event_id"], "✅")
    await _said(staff, dm, "Nia, done.", replier)
    # Someone in the review room without the power there writes nothing; in a bridged room, `in` is refused.
    intern = await people("intern")
    assert isinstance(await staff.client.room_invite(staff.room_id, intern.user_id), RoomInviteResponse)
    assert isinstance(await intern.client.join(staff.room_id), JoinResponse)
    said = await intern.say(staff.room_id, f'!rules add replier "money back" on dm to private in {dm}')
    refused = await _answer(staff, staff.room_id, said, service)
    assert "power level 50" in refused, refused
    elsewhere = await _answer(staff, dm, await _staff_says(staff, dm, f'!rules add replier "money" on dm to private in {dm}'),
                              service)
    assert "**in**" in elsewhere and "only in the review room" in elsewhere, elsewhere
    assert await sql.fetchval("SELECT count(*) FROM social_rules WHERE room_id = $1", dm) == 1


async def test_a_bridge_is_known_by_hookshots_state_or_by_its_puppets_alone(
        service: Service, social_staff: SocialStaff, sql: asyncpg.Pool) -> None:
    staff = social_staff
    olly = await staff.bridge.puppet("olly", "Olly")
    people = [str(staff.client.user_id), service.service_user]
    hookshot = await staff.bridge.bridged_room(kind="comments", channel="hookshot feed", guests=[olly], invite=people,
                                               staff={str(staff.client.user_id): 50}, state="uk.half-shot.bridge")
    bare = await staff.bridge.bridged_room(kind="dm", channel="no state", guests=[olly], invite=people,
                                           staff={str(staff.client.user_id): 50}, state=None)
    for room in (hookshot, bare):
        assert isinstance(await staff.client.join(room), JoinResponse)
        await eventually(lambda room=room: _bridged_row(sql, room), timeout=60)
    rows = {r["room_id"]: r for r in await sql.fetch(
        "SELECT room_id, bridge, network, conversation, known_by FROM social_rooms WHERE room_id IN ($1, $2)",
        hookshot, bare)}
    assert (rows[hookshot]["known_by"], rows[hookshot]["conversation"], rows[hookshot]["bridge"]) == (
        "state", "comments", staff.bridge.bot)
    # No state at all: bridged because a puppet of a configured bridge is a member; a group, as nothing says more.
    assert (rows[bare]["known_by"], rows[bare]["conversation"], rows[bare]["network"]) == ("members", "group", "Fakebook")
    await eventually(lambda: _member(sql, bare, str(staff.client.user_id)), timeout=60)
    shown = await _answer(staff, bare, await _staff_says(staff, bare, "!rules"), service)
    assert "a group conversation on Fakebook" in shown and "known by its members" in shown, shown
