"""The desk with its staff in Matrix, on the real Synapse, with a real browser as the customer: the widget
(Playwright driving Debian's Chromium) asks → the bot's answer streams in → a choice is pressed → did that
help? → talk to a person → a staff member replies from the staff room's thread (matrix-nio) and the reply
appears in the widget. And drafts: a bot's draft arrives in the thread with ✅ and 🗑, and a staff member
sends it, sends their own version (a reply to the draft), or discards it."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from nio import JoinedMembersResponse, PresenceSetResponse, RoomMessagesResponse, RoomSendResponse

from appservice.app import Service
from appservice.desk.tables import DeskTables
from tests.book import BOOK
from tests.conftest import TEST_RUN
from tests.matrix.conftest import DeskStaff
from tests.support import eventually

pytestmark = pytest.mark.matrix
SHOTS = TEST_RUN / "screenshots"
SERVICE_USER = "@summon:localhost"


async def staff_events(staff: DeskStaff) -> list[dict[str, Any]]:
    resp = await staff.client.room_messages(staff.room_id, limit=200)
    assert isinstance(resp, RoomMessagesResponse), resp
    return [e.source for e in reversed(resp.chunk)]


async def joined(staff: DeskStaff, user_id: str) -> bool:
    resp = await staff.client.joined_members(staff.room_id)
    return isinstance(resp, JoinedMembersResponse) and user_id in {m.user_id for m in resp.members}


def in_thread(event: dict[str, Any], root: str) -> bool:
    rel = event.get("content", {}).get("m.relates_to") or {}
    return rel.get("rel_type") == "m.thread" and rel.get("event_id") == root


async def thread_of(staff: DeskStaff, conversation: int) -> str:
    async def root() -> str | None:
        for e in await staff_events(staff):
            if e.get("sender") == SERVICE_USER and f"Conversation {conversation} " in e.get("content", {}).get("body", ""):
                return str(e["event_id"])
        return None
    found: str = await eventually(root, timeout=20)
    return found


async def in_thread_from(staff: DeskStaff, root: str, sender: str, containing: str) -> dict[str, Any]:
    async def look() -> dict[str, Any] | None:
        for e in await staff_events(staff):
            if in_thread(e, root) and e.get("sender") == sender and containing in e["content"].get("body", ""):
                return e
        return None
    found: dict[str, Any] = await eventually(look, timeout=20)
    return found


async def edit_of(staff: DeskStaff, event_id: str, containing: str) -> dict[str, Any]:
    """The edit of ``event_id`` whose new words contain ``containing`` (a draft's notice marked settled)."""
    async def look() -> dict[str, Any] | None:
        for e in await staff_events(staff):
            content = e.get("content", {})
            rel = content.get("m.relates_to") or {}
            if rel.get("rel_type") == "m.replace" and rel.get("event_id") == event_id and \
                    containing in (content.get("m.new_content") or {}).get("body", ""):
                return e
        return None
    found: dict[str, Any] = await eventually(look, timeout=20)
    return found


async def reply_in_thread(staff: DeskStaff, root: str, text: str, *, to: str | None = None) -> str:
    relates: dict[str, Any] = {"rel_type": "m.thread", "event_id": root, "is_falling_back": to is None,
                               "m.in_reply_to": {"event_id": to or root}}
    resp = await staff.client.room_send(staff.room_id, "m.room.message",
                                        {"msgtype": "m.text", "body": text, "m.relates_to": relates})
    assert isinstance(resp, RoomSendResponse), resp
    return str(resp.event_id)


class Scripts:
    def __init__(self) -> None:
        self.queued: list[list[dict[str, Any]]] = []

    async def route(self, route: Any) -> None:
        request = route.request
        if request.method in ("POST", "PATCH") and self.queued and request.post_data:
            # Put in the stand-in's book by the words the page sends (the page knows nothing of scripts).
            BOOK.say(str(json.loads(request.post_data).get("content")), self.queued.pop(0))
        await route.continue_()


async def test_the_widget_to_a_staff_reply_from_the_matrix_room(service: Service, desk_staff: DeskStaff,
                                                                browser: Any) -> None:
    assert service.desk is not None
    support = service.registry().get("support")
    assert support is not None
    await eventually(lambda: joined(desk_staff, SERVICE_USER), timeout=20)
    await eventually(lambda: joined(desk_staff, support.user_id), timeout=20)
    context = await browser.new_context(viewport={"width": 390, "height": 780})
    page = await context.new_page()
    scripts = Scripts()
    await page.route("**/conversations/*/messages", scripts.route)
    await page.route("**/conversations/*/messages/*", scripts.route)
    try:
        await page.goto(f"{service.desk.address}/desk/widget?inbox=web")
        await page.click("#summon-bubble")
        await page.fill("#summon-input", "Where is my <b>order</b>?")
        await page.keyboard.press("Enter")
        # Support offers itself once while the question waits for a person.
        offer = page.locator("li.msg.template")
        await offer.get_by_role("button", name="Ask Support").wait_for()
        # The bot chosen is asked what waits unanswered; a choice pressed is said as the customer's next words.
        BOOK.say("Where is my <b>order</b>?", [{"text": "Which order is it?\n\n- The book\n- The mug"}])
        await offer.get_by_role("button", name="Ask Support").click()
        answer = page.locator("li.msg.outgoing.bot").filter(has_text="Which order is it?")
        await answer.wait_for()
        await page.wait_for_selector("#summon-check:not([hidden])")
        BOOK.say("The mug", [{"text": "The mug shipped this morning."}])
        await answer.get_by_role("button", name="The mug").click()
        await page.locator("li.msg.bot").filter(has_text="The mug shipped this morning.").wait_for()
        await page.wait_for_selector("#summon-check:not([hidden])")
        assert await page.inner_text("#summon-check-words") == "Did that help?"
        await page.locator("#summon-check-buttons").get_by_role("button", name="Talk to a person").click()
        await page.locator("li.msg.activity").filter(has_text="A person will pick this up here").wait_for()
        conversation = int(await page.evaluate("JSON.parse(localStorage.getItem('summon-desk:web')).conversation"))

        # The staff room has the conversation as a thread: the customer's lines (escaped), the bot's answers by
        # its puppet, the handover.
        root = await thread_of(desk_staff, conversation)
        line = await in_thread_from(desk_staff, root, SERVICE_USER, "Where is my <b>order</b>?")
        assert "&lt;b&gt;order&lt;/b&gt;" in line["content"]["formatted_body"]
        await in_thread_from(desk_staff, root, support.user_id, "The mug shipped this morning.")
        await in_thread_from(desk_staff, root, SERVICE_USER, "The customer asked for a person.")

        # A staff member answers in the thread: it reaches the widget, in their name, and they have it.
        await reply_in_thread(desk_staff, root, "Hi, I'm Bea — I've found your mug.")
        reply = page.locator("li.msg.outgoing").filter(has_text="I've found your mug.")
        await reply.wait_for(timeout=20_000)
        assert await reply.locator(".who").inner_text() == "Bea from support"
        SHOTS.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(SHOTS / "desk-widget-staff-reply.png"))
        async with service.store.transaction("check") as tx:
            row = await tx.of(DeskTables).conversation(conversation)
        assert row is not None and (row.status, row.assignee) == ("open", "Bea from support")
    finally:
        await context.close()


DRAFTER = """---
name: Drafter
surfaces: [desk]
hears: [support-message]
limits: {per: {day: 1}}
---
You draft answers for the staff.
"""


async def test_drafts_in_the_staff_room_are_sent_edited_or_discarded(service: Service, desk_staff: DeskStaff,
                                                                     content_dir: Path) -> None:
    assert service.desk is not None
    path = content_dir / "bots" / "drafter.md"
    path.write_text(DRAFTER, encoding="utf-8")
    try:
        await eventually(lambda: service.registry().get("drafter") is not None, timeout=20)
        drafter = service.registry().get("drafter")
        assert drafter is not None
        await eventually(lambda: joined(desk_staff, drafter.user_id), timeout=20)
        base = f"{service.desk.address}/public/api/v1/inboxes/web"
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{base}/contacts", json={"name": "Dan"}) as resp:
                dan = await resp.json()
            headers = {"Authorization": f"Bearer {dan['pubsub_token']}"}
            path_c = f"{base}/contacts/{dan['source_id']}/conversations"
            async with http.post(path_c, json={}, headers=headers) as resp:
                conversation = (await resp.json())["id"]

            async def ask(text: str, draft: str) -> None:
                BOOK.say(text, [{"text": draft}])
                async with http.post(f"{path_c}/{conversation}/messages", headers=headers,
                                     json={"content": text}) as resp:
                    assert resp.status == 200, await resp.text()

            async def seen() -> list[str]:
                async with http.get(f"{path_c}/{conversation}/messages", headers=headers) as resp:
                    return [m["content"] for m in await resp.json()]

            await ask("Can I return it?", "Yes, within 30 days.")
            root = await thread_of(desk_staff, conversation)
            first = await in_thread_from(desk_staff, root, drafter.user_id, "Yes, within 30 days.")
            assert "react ✅ to send it" in first["content"]["body"]
            await desk_staff.client.room_send(desk_staff.room_id, "m.reaction", {"m.relates_to": {
                "rel_type": "m.annotation", "event_id": first["event_id"], "key": "✅"}})
            await eventually(lambda: _has(seen, "Yes, within 30 days."), timeout=20)

            await ask("And the shipping?", "Shipping is on us.")
            second = await in_thread_from(desk_staff, root, drafter.user_id, "Shipping is on us.")
            await reply_in_thread(desk_staff, root, "Return shipping is free, yes.", to=second["event_id"])
            await eventually(lambda: _has(seen, "Return shipping is free, yes."), timeout=20)

            await ask("Thanks!", "You're welcome!")
            third = await in_thread_from(desk_staff, root, drafter.user_id, "You're welcome!")
            await desk_staff.client.room_send(desk_staff.room_id, "m.reaction", {"m.relates_to": {
                "rel_type": "m.annotation", "event_id": third["event_id"], "key": "🗑️"}})
            edit = await edit_of(desk_staff, third["event_id"], "Discarded by Bea from support")
            assert edit["sender"] == drafter.user_id
            said = await seen()
            assert "Shipping is on us." not in said and "You're welcome!" not in said
            drafts = await _drafts(service, conversation)
            assert drafts == [("Yes, within 30 days.", "sent"), ("Shipping is on us.", "edited"),
                              ("You're welcome!", "discarded")]
    finally:
        path.unlink(missing_ok=True)


async def _has(seen: Any, text: str) -> bool:
    return text in await seen()


async def _drafts(service: Service, conversation: int) -> list[tuple[str, str]]:
    async with service.store.transaction("check") as tx:
        messages = await tx.of(DeskTables).messages(conversation, private=True)
    return [(m.content, m.draft or "") for m in messages if m.draft]


async def handed_to_people(service: Service, name: str) -> int:
    """A contact of the "staffed" inbox chooses Support, then asks for a person: its conversation's id."""
    assert service.desk is not None
    base = f"{service.desk.address}/public/api/v1/inboxes/staffed"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/contacts", json={"name": name}) as resp:
            made = await resp.json()
        headers = {"Authorization": f"Bearer {made['pubsub_token']}"}
        path = f"{base}/contacts/{made['source_id']}/conversations"
        async with http.post(path, json={}, headers=headers) as resp:
            conversation = int((await resp.json())["id"])
        words = f"{name} needs the refund team"
        BOOK.say(words, [{"text": "Let me look into that."}])
        async with http.post(f"{path}/{conversation}/messages", json={"content": words}, headers=headers) as resp:
            assert resp.status == 200
        async with http.get(f"{path}/{conversation}/messages", headers=headers) as resp:
            offer = next(m for m in await resp.json() if m["message_type"] == "template")
        async with http.patch(f"{path}/{conversation}/messages/{offer['id']}", headers=headers,
                              json={"submitted_values": [{"value": "bot:support"}]}) as resp:
            assert resp.status == 200, await resp.text()

        async def answered() -> bool:
            async with http.get(f"{path}/{conversation}/messages", headers=headers) as resp:
                return any(m["content"] == "Let me look into that." for m in await resp.json())
        await eventually(answered, timeout=20)
        async with http.post(f"{path}/{conversation}/toggle_status", json={"status": "open"}, headers=headers) as resp:
            assert resp.status == 200
    return conversation


async def test_a_handoff_goes_to_the_staff_member_who_is_online_and_pings_them(service: Service, desk_staff: DeskStaff,
                                                                               sql: Any) -> None:
    bea, cal = desk_staff.client, desk_staff.second
    assert isinstance(await bea.set_presence("online"), PresenceSetResponse)
    assert isinstance(await cal.set_presence("offline"), PresenceSetResponse)

    async def assignee(conversation: int) -> str | None:
        row = await sql.fetchrow("SELECT assignee FROM desk_conversations WHERE id = $1", conversation)
        return None if row is None else row["assignee"]

    support = service.registry().get("support")
    assert support is not None
    BOOK.say("say nothing you do not see above.", [{"text": "Ann wants the refund team; nothing else is open."}])
    first = await handed_to_people(service, "Ann")
    await eventually(lambda: _is(assignee(first), bea.user_id), timeout=20)
    root = await thread_of(desk_staff, first)
    ping = await in_thread_from(desk_staff, root, SERVICE_USER, "this conversation is yours")
    assert ping["content"]["m.mentions"] == {"user_ids": [bea.user_id]}
    assert "Bea from support" in ping["content"]["body"]
    # The bot's summary of the handoff is in the thread too, by its puppet, as a note for the staff.
    summary = await in_thread_from(desk_staff, root, support.user_id, "Ann wants the refund team")
    assert summary["content"]["body"].startswith("📝")
    # Bea goes offline and Cal comes online: the next handoff is Cal's, never the offline one's.
    assert isinstance(await bea.set_presence("offline"), PresenceSetResponse)
    assert isinstance(await cal.set_presence("online"), PresenceSetResponse)
    second = await handed_to_people(service, "Bo")
    await eventually(lambda: _is(assignee(second), cal.user_id), timeout=30)
    assert await assignee(first) == bea.user_id  # the first stays with whom it was given


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return bool(await value == expected)
