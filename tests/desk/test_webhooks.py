"""The desk's outgoing webhooks: Chatwoot's events and envelopes, signed as Chatwoot signs them
(sha256=HMAC(secret, "{ts}.{body}"), the timestamp, a delivery id kept across retries), retried with backoff
while the receiver fails, recorded, and — when the receiver is the conversation's agent bot and cannot be
handed the contact's message — the conversation handed to people."""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid

import pytest

from tests.desk.conftest import HOOK_SECRET, STAFF_KEY, DeskRig
from tests.support import eventually

pytestmark = [pytest.mark.db, pytest.mark.webhooks]


def signed(received_headers: dict[str, str], body: bytes) -> bool:
    ts = received_headers["X-Chatwoot-Timestamp"]
    expected = "sha256=" + hmac.new(HOOK_SECRET.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(received_headers["X-Chatwoot-Signature"], expected)


async def test_events_are_posted_signed_in_chatwoots_envelopes(desk: DeskRig) -> None:
    receiver = desk.receiver
    ann = await desk.contact("always", name="Ann")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "hi", script=[{"text": "Hello!"}])
    await desk.work()
    await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/toggle_status", token=ann.token,
                    body={"status": "open"})
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=STAFF_KEY,
                    body={"status": "resolved"})
    await eventually(lambda: receiver.events("conversation_resolved"))
    for post in receiver.received:
        assert signed(post.headers, post.body), post.headers
        assert abs(int(post.headers["X-Chatwoot-Timestamp"]) - time.time()) < 60
        uuid.UUID(post.headers["X-Chatwoot-Delivery"])
    created = [r.json for r in receiver.events("message_created")]
    first = created[0]
    assert (first["content"], first["message_type"], first["sender"]["type"]) == ("hi", "incoming", "contact")
    assert first["conversation"]["messages"][0]["message_type"] == 0  # Chatwoot's quirk: a number in there
    assert first["conversation"]["status"] == "pending" and first["inbox"]["name"] == "Always"
    assert first["conversation"]["contact_inbox"]["source_id"] == ann.source_id
    assert any(c["content"] == "Hello!" and c["sender"]["type"] == "agent_bot" for c in created)
    opened = receiver.events("conversation_opened")[0].json
    assert (opened["id"], opened["status"], opened["bot_off"]) == (conversation, "open", True)
    assert receiver.events("conversation_resolved")[0].json["status"] == "resolved"
    assert first["created_at"].endswith("Z")  # a webhook message's time is ISO, its conversation's unix

    async def settled() -> set[tuple[str, int, int]]:
        rows = await desk.db.pool.fetch("SELECT status, attempts, last_status FROM desk_deliveries")
        found = {(r["status"], r["attempts"], r["last_status"]) for r in rows}
        return found if all(status != "pending" for status, _, _ in found) else set()

    assert await eventually(settled) == {("delivered", 1, 200)}


async def test_a_failing_receiver_is_retried_under_the_same_delivery_id(desk: DeskRig) -> None:
    receiver = desk.receiver
    receiver.answers = [500, 503]
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "hello")
    desk.running()  # the sender runs in the service: retries wake it when due
    await eventually(lambda: len(receiver.received) >= 3, timeout=10)
    assert len({r.headers["X-Chatwoot-Delivery"] for r in receiver.received}) == 1
    assert len({r.body for r in receiver.received}) == 1

    # The third request is answered 200 before its sender records it: read the row once it says so.
    async def delivered() -> object:
        return await desk.row("SELECT status, attempts, last_status, last_error FROM desk_deliveries "
                              "WHERE status = 'delivered'")

    row = await eventually(delivered, timeout=10)
    assert (row["status"], row["attempts"], row["last_status"], row["last_error"]) == ("delivered", 3, 200, None)


async def test_a_receiver_that_never_answers_is_given_up_and_recorded(desk: DeskRig) -> None:
    receiver = desk.receiver
    receiver.answers = [500, 500, 500]
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "hello")

    async def given_up() -> object:
        return await desk.row("SELECT status, attempts, last_status FROM desk_deliveries WHERE status = 'failed'")

    row = await eventually(given_up, timeout=10)
    assert (row["attempts"], row["last_status"]) == (3, 500)
    # The conversation is untouched: this receiver answers nobody.
    assert (await desk.shown(ann, conversation))["status"] == "open"


async def test_an_unreachable_agent_bot_hands_the_conversation_to_people(desk: DeskRig) -> None:
    receiver = desk.receiver
    receiver.answers = [502]
    ann = await desk.contact("agent")
    conversation = await desk.conversation(ann)
    assert (await desk.shown(ann, conversation))["status"] == "pending"  # an agent bot's, as Chatwoot has it
    said = await desk.say(ann, conversation, "anyone?")

    async def handed_over() -> dict[str, object] | None:
        shown = await desk.shown(ann, conversation)
        return shown if shown["status"] == "open" else None

    shown = await eventually(handed_over, timeout=10)
    assert shown["bot_off"] is True
    mine = next(m for m in shown["messages"] if m["id"] == said["id"])
    assert mine["status"] == "failed"


async def test_a_handoffs_summary_is_posted_to_the_webhooks_as_a_private_note(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Where is order 9?", script=[{"error": "down", "error_class": "provider"}])
    await desk.work()
    desk.running()

    def summary() -> list[dict[str, object]]:
        return [r.json for r in desk.receiver.events("message_created")
                if (r.json.get("content_attributes") or {}).get("summary")]

    [posted] = await eventually(summary, timeout=10)
    assert posted["private"] is True and "Asked: Where is order 9?" in str(posted["content"])
