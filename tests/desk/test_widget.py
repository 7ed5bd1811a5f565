"""The widget in a real headless browser (Playwright driving Debian's Chromium), on a phone-width screen and
by keyboard: ask → the bot's answer streams in → press a choice → did that help? → talk to a person → a staff
reply appears live; what a contact writes is shown as text, never as HTML; a reload sets no check."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_RUN
from tests.desk.conftest import STAFF_KEY, DeskRig

pytestmark = pytest.mark.db
SHOTS = TEST_RUN / "screenshots"
PHONE = {"width": 390, "height": 780}


class Scripts:
    """Scripted model turns slipped into the widget's own requests (the page knows nothing of scripts)."""

    def __init__(self) -> None:
        self.queued: list[list[dict[str, Any]]] = []

    async def route(self, route: Any) -> None:
        request = route.request
        if request.method in ("POST", "PATCH") and self.queued and request.post_data:
            body = json.loads(request.post_data)
            body["org.summon.script"] = self.queued.pop(0)
            await route.continue_(post_data=json.dumps(body))
            return
        await route.continue_()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport=PHONE)
    made = await context.new_page()
    yield made
    await context.close()


def shot(name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS / name


async def test_ask_choose_did_that_help_talk_to_a_person_and_a_staff_reply(desk: DeskRig, page: Any) -> None:
    desk.running()
    scripts = Scripts()
    await page.route("**/conversations/*/messages", scripts.route)
    await page.route("**/conversations/*/messages/*", scripts.route)
    await page.goto(f"{desk.url}/desk/widget?inbox=always")
    # By keyboard: the bubble takes focus with Tab and opens with Enter; the composer has focus.
    await page.keyboard.press("Tab")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#summon-panel:not([hidden])")
    assert await page.evaluate("document.activeElement.id") == "summon-input"
    await page.wait_for_function("document.querySelector('#summon-title').textContent === 'Always'")
    scripts.queued.append([{"text": "Which copy is it?\n\n- The paperback\n- The hardcover"}])
    await page.keyboard.type("Is my book shipped?")
    await page.keyboard.press("Enter")
    answer = page.locator("li.msg.outgoing.bot").filter(has_text="Which copy is it?")
    await answer.wait_for()
    assert await answer.locator(".choices button").all_inner_texts() == ["The paperback", "The hardcover"]
    # An answer watched arriving asks whether it helped.
    await page.wait_for_selector("#summon-check:not([hidden])")
    assert await page.inner_text("#summon-check-words") == "Did that help?"
    scripts.queued.append([{"text": "The hardcover ships today."}])
    await answer.get_by_role("button", name="The hardcover").click()
    await page.locator("li.msg.incoming").filter(has_text="The hardcover").wait_for()
    await page.locator("li.msg.outgoing.bot").filter(has_text="The hardcover ships today.").wait_for()
    assert await answer.locator(".choices button.taken").inner_text() == "The hardcover"
    assert await answer.locator(".choices button:disabled").count() == 2
    await page.screenshot(path=str(shot("widget-answer.png")))
    # Did that help? → Talk to a person.
    await page.locator("#summon-check-buttons").get_by_role("button", name="Talk to a person").click()
    await page.locator("li.msg.activity").filter(has_text="A person will pick this up here.").wait_for()
    await page.wait_for_selector("#summon-person", state="hidden")
    conversation = int(await page.evaluate(
        "JSON.parse(localStorage.getItem('summon-desk:always')).conversation"))
    row = await desk.row("SELECT status, bot_off_at IS NOT NULL AS off FROM desk_conversations WHERE id = $1",
                         conversation)
    assert (row["status"], row["off"]) == ("open", True)
    # A person on the staff answers; it appears at once.
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY,
                    body={"content": "Hi, I'm Bea — it's on its way.", "sender_name": "Bea"})
    staff = page.locator("li.msg.outgoing").filter(has_text="it's on its way")
    await staff.wait_for()
    assert await staff.locator(".who").inner_text() == "Bea"
    # What a contact writes is text, never HTML.
    await page.fill("#summon-input", '<img src=x onerror="window.pwned=1"><b>bold</b>')
    await page.keyboard.press("Enter")
    mine = page.locator("li.msg.incoming").filter(has_text="<b>bold</b>")
    await mine.wait_for()
    assert await page.locator("#summon-log img, #summon-log b").count() == 0
    assert await page.evaluate("window.pwned") is None
    await page.screenshot(path=str(shot("widget-staff-reply.png")))
    # The panel fits a phone's width, and Escape closes it.
    box = await page.locator("#summon-panel").bounding_box()
    assert box is not None and box["width"] <= PHONE["width"]
    await page.keyboard.press("Escape")
    await page.wait_for_selector("#summon-panel", state="hidden")


async def test_a_first_load_sets_no_check(desk: DeskRig, page: Any) -> None:
    desk.running()
    scripts = Scripts()
    await page.route("**/conversations/*/messages", scripts.route)
    await page.goto(f"{desk.url}/desk/widget?inbox=always")
    await page.click("#summon-bubble")
    scripts.queued.append([{"text": "Hello there."}])
    await page.fill("#summon-input", "hi")
    await page.click("#summon-send")
    await page.locator("li.msg.bot").filter(has_text="Hello there.").wait_for()
    await page.wait_for_selector("#summon-check:not([hidden])")
    await page.reload()
    await page.click("#summon-bubble")
    await page.locator("li.msg.bot").filter(has_text="Hello there.").wait_for()
    assert await page.locator("li.msg").count() == 2  # the same conversation, the same contact
    assert await page.is_hidden("#summon-check")  # an answer from before is not asked about again
