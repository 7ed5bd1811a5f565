"""No provider, no bots — on the desk too (issue 25 item 1): with no usable provider no bot is offered, a
conversation goes to people at once (``open``), the contact is told a person will answer, the inbox tells the
widget there is no assistant, and the staff (their API, their room, the webhooks) see an open conversation with
that line. A conversation whose bot can no longer be summoned for it goes to people the same way, told once.
Real PostgreSQL, the desk's real HTTP listener; "no usable provider" is the worker's heartbeat saying so."""

from __future__ import annotations

from typing import Any

import pytest

from appservice.desk.staff_room import StaffRoom
from tests.desk.conftest import STAFF_KEY, DeskRig
from tests.support import eventually

pytestmark = pytest.mark.db
NO_ASSISTANT = "No assistant can answer right now. A person will answer you here."
STAFF_ROOM = "!staff:localhost"


async def no_provider(desk: DeskRig) -> None:
    """The test's worker beats that it cannot answer model calls (no key, buying not switched on)."""
    await desk.db.workers.beat("desk-test", usable=False, mode="none: no_key", providers=[])


async def state(desk: DeskRig, conversation: int) -> dict[str, Any]:
    row = await desk.row("SELECT status, handler_bot, bot_off_at IS NOT NULL AS bot_off FROM desk_conversations "
                         "WHERE id = $1", conversation)
    return dict(row)


async def runs(desk: DeskRig, conversation: int) -> int:
    return int(await desk.db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE place = $1",
                                           f"desk:{conversation}"))


def told(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["message_type"] == "activity"]


async def test_the_inbox_tells_the_widget_whether_an_assistant_is_there(desk: DeskRig) -> None:
    base = "/public/api/v1/inboxes/"
    assert [(await desk.call("GET", base + name))["assistant"] for name in ("always", "ask", "plain")] == [
        True, True, False]
    await no_provider(desk)
    assert [(await desk.call("GET", base + name))["assistant"] for name in ("always", "ask", "plain")] == [
        False, False, False]


async def test_with_no_provider_an_always_conversation_is_peoples_at_once_and_says_so(desk: DeskRig) -> None:
    await no_provider(desk)
    ann = await desk.contact("always", name="Ann")
    conversation = await desk.conversation(ann)
    assert await state(desk, conversation) == {"status": "open", "handler_bot": None, "bot_off": False}
    await desk.say(ann, conversation, "Is my order shipped?")
    assert await runs(desk, conversation) == 0
    assert told(await desk.messages(ann, conversation)) == [NO_ASSISTANT]
    # The staff see it as any open conversation, with the line.
    shown = await desk.call("GET", desk.staff_path(conversation), staff=STAFF_KEY)
    assert shown["status"] == "open"
    staff_sees = [(m["message_type"], m["content"]) for m in await desk.staff_messages(conversation)]
    assert staff_sees == [("activity", NO_ASSISTANT), ("incoming", "Is my order shipped?")]


async def test_with_no_provider_no_bot_is_offered(desk: DeskRig) -> None:
    await no_provider(desk)
    ann = await desk.contact("ask")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Can someone help?")
    messages = await desk.messages(ann, conversation)
    assert [m for m in messages if m["message_type"] == "template"] == []  # no "Ask Guide"
    assert told(messages) == [NO_ASSISTANT]
    assert (await state(desk, conversation))["status"] == "open"


async def test_a_conversation_whose_bot_cannot_be_summoned_goes_to_people_told_once(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    assert (await state(desk, conversation))["status"] == "pending"  # the provider was there when it began
    await no_provider(desk)
    await desk.say(ann, conversation, "hello?")
    await desk.say(ann, conversation, "anyone?")
    assert await runs(desk, conversation) == 0
    # People have it; its bot stays its bot (the staff can send it back) and nobody asked for a person.
    assert await state(desk, conversation) == {"status": "open", "handler_bot": "clerk", "bot_off": False}
    assert told(await desk.messages(ann, conversation)) == [NO_ASSISTANT]
    reason = await desk.db.pool.fetchval("SELECT reason FROM summon_refusals WHERE place = $1 ORDER BY id LIMIT 1",
                                         f"desk:{conversation}")
    assert reason == "no_provider"


async def test_the_staff_room_is_told_a_conversation_no_bot_can_answer(desk: DeskRig,
                                                                      desk_registry: Any) -> None:
    desk.service.changes.watch(StaffRoom(desk.service.desk, lambda: desk_registry, room_id=STAFF_ROOM,
                                         service_user="@summon:localhost"))
    await no_provider(desk)
    ann = await desk.contact("always", name="Ann")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Is my order shipped?")
    bodies = [r["body"] for r in await desk.db.pool.fetch(
        "SELECT content->>'body' AS body FROM outbox WHERE room_id = $1 ORDER BY id", STAFF_ROOM)]
    assert bodies[0].startswith(f"💬 Conversation {conversation} with Ann")
    assert bodies[1:] == [NO_ASSISTANT, "Ann: Is my order shipped?"]


@pytest.mark.webhooks
async def test_the_webhooks_see_an_open_conversation_with_the_line(desk: DeskRig) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await no_provider(desk)
    await desk.say(ann, conversation, "hello?")
    receiver = desk.receiver
    await eventually(lambda: receiver.events("conversation_opened"))
    opened = receiver.events("conversation_opened")[0].json
    assert (opened["id"], opened["status"], opened["bot_off"]) == (conversation, "open", False)

    def the_line() -> list[dict[str, Any]]:
        return [r.json for r in receiver.events("message_created") if r.json["content"] == NO_ASSISTANT]

    [line] = await eventually(the_line)
    assert line["conversation"]["status"] == "open"
