"""One handler at a time (SPEC §9): offer off, ask and always; drafts for the staff; the way out ("talk to a
person" writes bot_off_at, cancels the run already thinking, and nothing starts a bot there again until a human
has it); a failing bot hands the conversation to people; resolved and reopened; choices taken once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.book import BOOK
from tests.desk.conftest import STAFF_KEY, DeskRig

pytestmark = pytest.mark.db


async def runs_in(desk: DeskRig, conversation: int) -> list[dict[str, Any]]:
    # A handoff's summary run is its own matter (tests/desk/test_outcomes.py): not counted here.
    rows = await desk.db.pool.fetch("SELECT id, bot, status, ending, asked_by, subject, cancel_requested "
                                    "FROM agent_runs WHERE place = $1 AND trigger_event NOT LIKE '%:summary:%' "
                                    "ORDER BY id", f"desk:{conversation}")
    return [dict(r) for r in rows]


async def state(desk: DeskRig, conversation: int) -> dict[str, Any]:
    row = await desk.row("SELECT status, handler_bot, assignee, bot_off_at IS NOT NULL AS bot_off, resolution "
                         "FROM desk_conversations WHERE id = $1", conversation)
    return dict(row)


async def test_offer_off_starts_nothing_and_people_have_it(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "hello?")
    assert await runs_in(desk, conversation) == []
    assert (await state(desk, conversation))["status"] == "open"


async def test_offer_always_answers_every_message_directly(desk: DeskRig) -> None:
    ann = await desk.contact("always", name="Ann")
    conversation = await desk.conversation(ann)
    assert await state(desk, conversation) == {"status": "pending", "handler_bot": "clerk", "assignee": None,
                                               "bot_off": False, "resolution": None}
    await desk.say(ann, conversation, "When do you open?", script=[{"text": "At nine."}])
    assert await desk.work() == 1
    [run] = await runs_in(desk, conversation)
    assert (run["bot"], run["status"], run["asked_by"], run["subject"]) == (
        "clerk", "done", f"contact:{ann.id}", f"contact:{ann.id}")
    answer = (await desk.messages(ann, conversation))[-1]
    assert (answer["message_type"], answer["content"], answer["bot"], answer["private"]) == (
        "outgoing", "At nine.", "clerk", False)
    assert answer["sender"] == {"name": "Clerk", "type": "agent_bot", "bot": "clerk"}


async def test_a_message_while_the_bot_works_joins_its_run(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "First question", script=[{"text": "Both answered."}])
    await desk.say(ann, conversation, "and a second")
    assert len(await runs_in(desk, conversation)) == 1  # one run per bot per conversation
    await desk.work()
    context = await desk.db.pool.fetchval("SELECT context FROM agent_runs WHERE place = $1", f"desk:{conversation}")
    assert [line["said"] for line in context["later"]] == ["and a second"]


async def test_offer_ask_offers_once_and_the_chosen_bot_has_it(desk: DeskRig) -> None:
    ann = await desk.contact("ask")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Can I change my plan?")
    await desk.say(ann, conversation, "Anyone?")
    offers = [m for m in await desk.messages(ann, conversation) if m["message_type"] == "template"]
    assert len(offers) == 1  # once while the question is unanswered, not under every message
    offer = offers[0]
    assert offer["content_type"] == "input_select"
    assert offer["content_attributes"]["items"] == [{"title": "Ask Guide", "value": "bot:guide"}]
    assert await runs_in(desk, conversation) == []
    BOOK.say("Anyone?", [{"text": "Yes, under Plans."}])  # the chosen bot is asked what waits unanswered
    pressed = await desk.call("PATCH", f"{desk.base(ann)}/conversations/{conversation}/messages/{offer['id']}",
                              token=ann.token, body={"submitted_values": [{"value": "bot:guide"}]})
    assert pressed["content_attributes"]["submitted_values"] == [{"title": "Ask Guide", "value": "bot:guide"}]
    assert (await state(desk, conversation))["status"] == "pending"
    await desk.work()
    [run] = await runs_in(desk, conversation)
    prompt = await desk.db.pool.fetchval("SELECT prompt FROM agent_runs WHERE id = $1", run["id"])
    assert prompt == "Can I change my plan?\nAnyone?"  # the unanswered question, whole
    assert (await desk.messages(ann, conversation))[-1]["content"] == "Yes, under Plans."
    # From now on it answers what they write, without another press.
    await desk.say(ann, conversation, "Thanks, and refunds?", script=[{"text": "Within 30 days."}])
    await desk.work()
    assert (await desk.messages(ann, conversation))[-1]["content"] == "Within 30 days."
    again = await desk.call("PATCH", f"{desk.base(ann)}/conversations/{conversation}/messages/{offer['id']}",
                            token=ann.token, body={"submitted_values": {"value": "bot:guide"}}, expect=409)
    assert again == {"error": "That one was already chosen."}


async def test_a_hearer_drafts_a_private_note_the_staff_send_or_discard(desk: DeskRig) -> None:
    ann = await desk.contact("drafts")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Refund please", script=[{"text": "I can start a refund for you."}])
    await desk.work()
    [run] = await runs_in(desk, conversation)
    assert (run["bot"], run["asked_by"], run["subject"]) == ("drafter", None, f"contact:{ann.id}")
    assert [m["content"] for m in await desk.messages(ann, conversation)] == ["Refund please"]  # not theirs to see
    [draft] = [m for m in await desk.staff_messages(conversation) if m.get("draft")]
    assert (draft["private"], draft["draft"], draft["content"]) == (True, "pending", "I can start a refund for you.")
    sent = await desk.call("POST", desk.staff_path(conversation, f"/messages/{draft['id']}/send_draft"),
                           staff=STAFF_KEY, body={"sender_name": "Bea"})
    assert sent["content"] == "I can start a refund for you." and sent["sender"]["name"] == "Bea"
    assert [m["content"] for m in await desk.messages(ann, conversation)][-1] == "I can start a refund for you."
    await desk.call("POST", desk.staff_path(conversation, f"/messages/{draft['id']}/send_draft"), staff=STAFF_KEY,
                    body={}, expect=409)
    # The next draft is thrown away.
    await desk.say(ann, conversation, "And shipping?", script=[{"text": "Free over 50."}])
    await desk.work()
    second = next(m for m in await desk.staff_messages(conversation) if m.get("draft") == "pending")
    discarded = await desk.call("POST", desk.staff_path(conversation, f"/messages/{second['id']}/discard_draft"),
                                staff=STAFF_KEY)
    assert discarded["draft"] == "discarded"
    assert "Free over 50." not in [m["content"] for m in await desk.messages(ann, conversation)]


async def test_serves_is_the_only_gate_of_a_run_nobody_asked_for(desk: DeskRig) -> None:
    guest = await desk.contact("members")
    conversation = await desk.conversation(guest)
    await desk.say(guest, conversation, "hi")
    assert await runs_in(desk, conversation) == []
    refused = await desk.db.pool.fetchval("SELECT reason FROM summon_refusals WHERE place = $1",
                                          f"desk:{conversation}")
    assert refused == "audience"
    member = await desk.signed_in("members", "@ann:localhost")
    theirs = await desk.conversation(member)
    await desk.say(member, theirs, "hi", script=[{"text": "Hello, member."}])
    assert [r["bot"] for r in await runs_in(desk, theirs)] == ["member"]


async def test_talk_to_a_person_cancels_the_run_thinking_and_no_bot_starts_again(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "help", script=[{"text": "Never said."}])
    out = await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/toggle_status", token=ann.token,
                          body={"status": "open"})
    assert out["payload"] == {"success": True, "current_status": "open", "conversation_id": conversation}
    assert (await state(desk, conversation))["bot_off"] is True
    [run] = await runs_in(desk, conversation)
    assert run["cancel_requested"]
    await desk.work()
    [run] = await runs_in(desk, conversation)
    assert (run["status"], run["ending"]) == ("cancelled", "cancelled")
    said = [m["content"] for m in await desk.messages(ann, conversation)]
    assert "Never said." not in said
    assert said[-1] == ("A person will pick this up here and can read everything above, so there is no need to repeat "
                        "anything. You can keep writing.")
    # Nothing starts a bot here again until a human has it…
    await desk.say(ann, conversation, "hello?")
    assert len(await runs_in(desk, conversation)) == 1
    # …and the staff sending it back to the bot is what turns it on again.
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=STAFF_KEY,
                    body={"status": "pending"})
    assert (await state(desk, conversation))["bot_off"] is False
    await desk.work()
    assert [r["status"] for r in await runs_in(desk, conversation)] == ["cancelled", "done"]


async def test_a_failing_bot_hands_the_conversation_to_people(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "help", script=[{"error": "upstream exploded", "error_class": "request"}])
    await desk.work()
    [run] = await runs_in(desk, conversation)
    assert run["status"] == "failed"
    assert await state(desk, conversation) == {"status": "open", "handler_bot": "clerk", "assignee": None,
                                               "bot_off": True, "resolution": None}
    public = await desk.messages(ann, conversation)
    assert public[-1]["content"].startswith("Something went wrong") and public[-1]["bot"] == "clerk"
    assert not any("upstream exploded" in m["content"] for m in public)
    notes = [m for m in await desk.staff_messages(conversation) if m["private"]]
    assert any("upstream exploded" in m["content"] for m in notes)  # the reason is the staff's
    await desk.say(ann, conversation, "still there?")
    assert len(await runs_in(desk, conversation)) == 1


async def test_choices_are_buttons_taken_once_and_said_as_the_contacts_words(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Which format?", script=[
        {"text": "Which copy is it?\n\n- The paperback\n- The hardcover\n- Delivery policy -> https://example.org/d"}])
    await desk.work()
    answer = (await desk.messages(ann, conversation))[-1]
    assert answer["content"] == "Which copy is it?" and answer["content_type"] == "input_select"
    assert [i["title"] for i in answer["content_attributes"]["items"]] == ["The paperback", "The hardcover"]
    assert answer["content_attributes"]["links"] == [{"title": "Delivery policy", "url": "https://example.org/d"}]
    path = f"{desk.base(ann)}/conversations/{conversation}/messages/{answer['id']}"
    BOOK.say("The hardcover", [{"text": "Hardcover it is."}])  # a choice is said as the contact's next words
    await desk.call("PATCH", path, token=ann.token, body={"submitted_values": [{"value": "2"}]})
    await desk.call("PATCH", path, token=ann.token, body={"submitted_values": [{"value": "1"}]}, expect=409)
    presses = await desk.db.pool.fetch("SELECT value, taken FROM desk_presses ORDER BY id")
    assert [(p["value"], p["taken"]) for p in presses] == [("2", True), ("1", False)]
    said = await desk.messages(ann, conversation)
    assert ("incoming", "The hardcover") in [(m["message_type"], m["content"]) for m in said]
    await desk.work()
    assert (await desk.messages(ann, conversation))[-1]["content"] == "Hardcover it is."
    await desk.call("PATCH", path, token=ann.token, body={"submitted_values": [{"value": "9"}]}, expect=422)


async def test_did_that_help_records_confirmed_and_asks_for_a_person(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "q", script=[{"text": "a"}])
    await desk.work()
    answer = (await desk.messages(ann, conversation))[-1]
    path = f"{desk.base(ann)}/conversations/{conversation}"
    await desk.call("POST", f"{path}/messages/{answer['id']}/feedback", token=ann.token, body={"helped": True})
    assert (await state(desk, conversation))["resolution"] == "confirmed"
    done = await desk.call("POST", f"{path}/toggle_status", token=ann.token, body={"status": "resolved"})
    assert done["payload"]["current_status"] == "resolved"
    assert (await state(desk, conversation))["resolution"] == "confirmed"
    # Writing again reopens it (to its bot), and un-counts the resolution.
    await desk.say(ann, conversation, "one more thing", script=[{"text": "b"}])
    assert await state(desk, conversation) == {"status": "pending", "handler_bot": "clerk", "assignee": None,
                                               "bot_off": False, "resolution": None}
    await desk.work()
    second = (await desk.messages(ann, conversation))[-1]
    await desk.call("POST", f"{path}/messages/{second['id']}/feedback", token=ann.token, body={"helped": False})
    assert (await state(desk, conversation))["bot_off"] is True
    feedback = await desk.db.pool.fetch("SELECT feedback FROM desk_messages WHERE bot = 'clerk' ORDER BY id")
    assert [f["feedback"] for f in feedback] == ["helped", "human"]
    # Only a bot's answer is asked whether it helped.
    mine = next(m for m in await desk.messages(ann, conversation) if m["message_type"] == "incoming")
    await desk.call("POST", f"{path}/messages/{mine['id']}/feedback", token=ann.token, body={"helped": True}, expect=422)


@pytest.mark.desk_config(idle_minutes=0.001)
async def test_a_bots_answer_left_alone_is_an_assumed_resolution(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "q", script=[{"text": "a"}])
    await desk.work()
    await desk.db.pool.execute("UPDATE desk_conversations SET updated_at = now() - interval '1 minute'")
    # The desk's own loop looks every 15 ms at this setting, so it (or this call) resolves it: not counted here.
    await desk.service.resolve_idle()
    seen = await state(desk, conversation)
    assert (seen["status"], seen["resolution"]) == ("resolved", "assumed")
    # A conversation people have is never resolved for being quiet.
    bob = await desk.contact("plain")
    theirs = await desk.conversation(bob)
    await desk.say(bob, theirs, "hello")
    await desk.db.pool.execute("UPDATE desk_conversations SET updated_at = now() - interval '1 minute'")
    assert await desk.service.resolve_idle() == 0
    await asyncio.sleep(0.1)  # the loop's turns too
    assert (await state(desk, theirs))["status"] != "resolved"


async def test_staff_taking_a_conversation_silences_the_bot(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "q", script=[{"text": "never"}])
    await desk.call("POST", desk.staff_path(conversation, "/assignments"), staff=STAFF_KEY,
                    body={"assignee_id": "bea"})
    assert (await state(desk, conversation))["status"] == "open"
    await desk.work()
    assert [r["ending"] for r in await runs_in(desk, conversation)] == ["cancelled"]
    await desk.say(ann, conversation, "hello?")
    assert len(await runs_in(desk, conversation)) == 1
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=STAFF_KEY,
                    body={"status": "pending"})
    assert (await state(desk, conversation))["assignee"] is None
    plain = await desk.contact("plain")
    theirs = await desk.conversation(plain)
    refused = await desk.call("POST", desk.staff_path(theirs, "/toggle_status"), staff=STAFF_KEY,
                              body={"status": "pending"}, expect=422)
    assert "no bot" in refused["error"]


@pytest.mark.desk_config(messages_per_minute=3)
async def test_a_flood_is_refused_in_words(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    for n in range(3):
        await desk.say(ann, conversation, f"message {n}")
    refused = await desk.say(ann, conversation, "message 3", expect=429)
    assert refused == {"error": "You are writing faster than we can read. Wait a minute, then send it again."}
    other = await desk.conversation(ann)  # the rate is the contact's, over every conversation
    await desk.say(ann, other, "here instead", expect=429)
    assert len(await desk.messages(ann, conversation)) == 3


async def test_a_contact_over_the_bots_ceiling_is_told_in_words(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.db.pool.execute("INSERT INTO spenders (who) VALUES ($1)", f"contact:{ann.id}")
    await desk.db.pool.execute(
        "INSERT INTO spend_ledger (who, bot, usd, at, reserved) VALUES ($1, 'clerk', 5, now(), false)",
        f"contact:{ann.id}")
    await desk.say(ann, conversation, "q", script=[{"text": "a"}])
    assert await runs_in(desk, conversation) == []
    told = (await desk.messages(ann, conversation))[-1]
    assert told["message_type"] == "activity" and "Clerk may spend on you this day" in told["content"]


async def test_a_contact_writing_while_the_bots_answer_commits_never_deadlocks(desk: DeskRig) -> None:
    """The worker's finishing commit holds its run's row and then the conversation's; a contact's message
    takes the conversation's runs before the conversation, so the two wait for each other in one order."""
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "first", script=[{"text": "Answer."}])
    claim = await desk.db.runs.claim("racer", 30)
    assert claim is not None
    from engine.surface import Answered, RunInfo

    async with desk.db.transaction("finish_run") as tx:
        await tx.runs.fence(claim.run.id, "racer", 30)  # the finish's first write: the run's row is held
        writing = asyncio.ensure_future(desk.say(ann, conversation, "second"))
        await asyncio.sleep(0.5)  # the contact's request is inside its transaction, waiting its turn
        await desk.service.surface.deliver(tx, RunInfo.of(claim.run), Answered("Answer."))
        await tx.runs.finish(claim.run.id, "racer", status="done", ending=None, reason=None, answer="Answer.")
    said = await asyncio.wait_for(writing, 10)
    assert said["content"] == "second"
    contents = [m["content"] for m in await desk.messages(ann, conversation)]
    assert contents == ["first", "Answer.", "second"]
