"""The desk's API in Chatwoot's shapes: a contact, a conversation, messages both ways, the staff's view of
them, private notes kept from the contact, and a send repeated under the same echo id stored once."""

from __future__ import annotations

import pytest

from tests.desk.conftest import STAFF_KEY, DeskRig

pytestmark = pytest.mark.db


async def test_a_contact_writes_and_the_staff_answer_in_chatwoots_shapes(desk: DeskRig) -> None:
    inbox = await desk.call("GET", "/public/api/v1/inboxes/plain")
    assert inbox["name"] == "Plain" and inbox["words"]["human"] == "Talk to a person"
    made = await desk.call("POST", "/public/api/v1/inboxes/plain/contacts", body={"name": "Ann", "email": "a@x.org"})
    assert set(made) >= {"id", "source_id", "pubsub_token", "name", "email"} and made["name"] == "Ann"
    ann = await desk.contact("plain", name="Ann")
    started = await desk.call("POST", desk.base(ann) + "/conversations", token=ann.token, body={})
    assert started["status"] == "open" and started["messages"] == [] and started["contact"]["name"] == "Ann"
    conversation = started["id"]
    said = await desk.say(ann, conversation, "Where is my order?", echo_id="e-1")
    assert said["message_type"] == "incoming" and said["sender"] == {"id": ann.id, "name": "Ann", "type": "contact"}
    again = await desk.say(ann, conversation, "Where is my order?", echo_id="e-1")
    assert again["id"] == said["id"]  # the same send, once
    # The staff see it, answer it, and note something only they read.
    listed = await desk.call("GET", "/api/v1/accounts/1/conversations?status=open", staff=STAFF_KEY)
    assert conversation in [c["id"] for c in listed["data"]["payload"]]
    answer = await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY,
                             body={"content": "It ships today.", "message_type": "outgoing", "sender_name": "Bea"})
    assert answer["message_type"] == "outgoing" and answer["sender"]["type"] == "user"
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY,
                    body={"content": "VIP customer", "private": True})
    seen = [(m["message_type"], m["content"]) for m in await desk.messages(ann, conversation)]
    assert seen == [("incoming", "Where is my order?"), ("outgoing", "It ships today.")]
    staff_seen = [(m["content"], m["private"]) for m in await desk.staff_messages(conversation)]
    assert ("VIP customer", True) in staff_seen
    shown = await desk.shown(ann, conversation)
    assert shown["meta"]["assignee"] == {"name": "Bea", "type": "user"}  # answering takes it


async def test_empty_and_oversized_messages_are_refused_in_words(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    assert (await desk.say(ann, conversation, "   ", expect=422)) == {"error": "content is empty"}
    refused = await desk.say(ann, conversation, "x" * 10_001, expect=413)
    assert "10000" in refused["error"]
    assert await desk.messages(ann, conversation) == []


async def test_a_contact_lists_only_their_own_conversations(desk: DeskRig) -> None:
    ann, bob = await desk.contact("plain"), await desk.contact("plain")
    mine = {await desk.conversation(ann), await desk.conversation(ann)}
    await desk.conversation(bob)
    listed = await desk.call("GET", desk.base(ann) + "/conversations", token=ann.token)
    assert {c["id"] for c in listed} == mine
