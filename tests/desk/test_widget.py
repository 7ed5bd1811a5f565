"""The widget in a real headless browser (Playwright driving Debian's Chromium), on a phone-width screen and
by keyboard: ask → the bot's answer streams in → press a choice → did that help? → talk to a person → a staff
reply appears live; what a contact writes is shown as text, never as HTML; a reload sets no check."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from appservice.desk.router import Router, Seen
from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import read_kit
from tests.book import BOOK
from tests.conftest import TEST_RUN
from tests.desk.conftest import BOTS, HANDOFF_KEY, STAFF_KEY, DeskRig

pytestmark = pytest.mark.db
SHOTS = TEST_RUN / "screenshots"
PHONE = {"width": 390, "height": 780}


class Scripts:
    """Scripted model turns for what the widget sends next, put in the stand-in's book as the page sends it (the
    page and its requests know nothing of scripts): a message by its words, a press by the choice it names, a
    command by its name."""

    def __init__(self) -> None:
        self.queued: list[list[dict[str, Any]]] = []
        self.choices: dict[str, str] = {}  # a choice's value: its title, said as the contact's words

    async def route(self, route: Any) -> None:
        request = route.request
        if request.method in ("POST", "PATCH") and self.queued and request.post_data:
            body = json.loads(request.post_data)
            submitted = body.get("submitted_values")
            value = submitted[0].get("value") if isinstance(submitted, list) and submitted else None
            if "/commands/" in request.url:  # a command's run ends with its own words, after the contact's line
                BOOK.say("/" + request.url.rsplit("/", 1)[-1], self.queued.pop(0), anywhere=True)
            else:
                said = body.get("content") or self.choices.get(str(value), str(value))
                BOOK.say(str(said), self.queued.pop(0))
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
    scripts.choices["2"] = "The hardcover"
    await answer.get_by_role("button", name="The hardcover").click()
    await page.locator("li.msg.incoming").filter(has_text="The hardcover").wait_for()
    await page.locator("li.msg.outgoing.bot").filter(has_text="The hardcover ships today.").wait_for()
    assert await answer.locator(".choices button.taken").inner_text() == "The hardcover"
    assert await answer.locator(".choices button:disabled").count() == 2
    await page.screenshot(path=str(shot("widget-answer.png")))
    # Did that help? → Talk to a person.
    await page.locator("#summon-check-buttons").get_by_role("button", name="Talk to a person").click()
    await page.locator("li.msg.activity").filter(has_text="A person will pick this up here").wait_for()
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


# --- no provider, commands, and the way out (issue 25 items 1, 5, 10) ----------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs"
COMMANDS = {
    "commands/recap.md": (
        "---\nhint: A recap of your conversation\nbot: clerk\nsurfaces: [desk]\nargs:\n"
        "  - {name: since, kind: span, label: How far back, default: 1d}\n"
        "  - {name: length, kind: choice, label: How long, choices: [short, detailed], default: short}\n"
        "  - {name: urgent, kind: boolean, label: Urgent, default: false}\n"
        "---\nRecap the last {since}, {length}. Urgent: {urgent}.\n"),
}


@pytest.fixture
def desk_registry() -> Registry:
    registry = compile_sources({**BOTS, **COMMANDS}, kinds=KINDS, server_name="localhost", kit=read_kit())
    assert isinstance(registry, Registry), registry
    return registry


async def answered_with_choices(desk: DeskRig, page: Any) -> Any:
    """The widget of ``always`` open, a question asked and answered with two choices, watched arriving."""
    desk.running()
    scripts = Scripts()
    await page.route("**/conversations/*/messages", scripts.route)
    await page.goto(f"{desk.url}/desk/widget?inbox=always")
    await page.click("#summon-bubble")
    scripts.queued.append([{"text": "Which copy is it?\n\n- The paperback\n- The hardcover"}])
    await page.fill("#summon-input", "Is my book shipped?")
    await page.keyboard.press("Enter")
    answer = page.locator("li.msg.outgoing.bot").filter(has_text="Which copy is it?")
    await answer.wait_for()
    await page.wait_for_selector("#summon-check:not([hidden])")
    return answer


async def conversation_of(page: Any, inbox: str = "always") -> int:
    return int(await page.evaluate(f"JSON.parse(localStorage.getItem('summon-desk:{inbox}')).conversation"))


async def test_talk_to_a_person_withdraws_the_choices_on_offer(desk: DeskRig, page: Any) -> None:
    answer = await answered_with_choices(desk, page)
    assert await answer.locator(".choices button:disabled").count() == 0
    await page.locator("#summon-check-buttons").get_by_role("button", name="Talk to a person").click()
    await page.locator("li.msg.activity").filter(has_text="A person will pick this up here").wait_for()
    # Withdrawn, not taken: every choice goes, none is marked as the one chosen.
    await page.wait_for_function(
        "document.querySelectorAll('li.msg.bot .choices button:disabled').length === 2")
    assert await answer.locator(".choices button.taken").count() == 0
    assert await page.is_hidden("#summon-check")
    await page.screenshot(path=str(shot("widget-withdrawn.png")))


async def test_anything_else_no_thats_everything_resolves(desk: DeskRig, page: Any) -> None:
    await answered_with_choices(desk, page)
    await page.locator("#summon-check-buttons").get_by_role("button", name="Yes, thanks").click()
    await page.wait_for_function(
        "document.querySelector('#summon-check-words').textContent === 'Anything else I can help you with?'")
    assert await page.locator("#summon-check-buttons button").all_inner_texts() == [
        "Yes, one more thing", "No, that's everything"]
    await page.locator("#summon-check-buttons").get_by_role("button", name="No, that's everything").click()
    await page.locator("li.msg.activity").filter(has_text="Marked as sorted.").wait_for()
    assert await page.is_hidden("#summon-check")
    row = await desk.row("SELECT status, resolution FROM desk_conversations WHERE id = $1",
                         await conversation_of(page))
    assert (row["status"], row["resolution"]) == ("resolved", "confirmed")
    await page.screenshot(path=str(shot("widget-resolved.png")))


async def test_with_no_provider_the_widget_shows_no_assistant(desk: DeskRig, page: Any) -> None:
    await desk.db.workers.beat("desk-test", usable=False, mode="none: no_key", providers=[])
    await page.goto(f"{desk.url}/desk/widget?inbox=always")
    await page.click("#summon-bubble")
    await page.locator("li.msg.activity").filter(has_text="A person will answer you here.").wait_for()
    await page.fill("#summon-input", "Is my order shipped?")
    await page.keyboard.press("Enter")
    await page.locator("li.msg.incoming").filter(has_text="Is my order shipped?").wait_for()
    assert await page.is_hidden("#summon-person")  # no "Talk to a person": a person has it
    assert await page.is_hidden("#summon-commands-toggle")  # no bot, so no command to run
    assert await page.locator("li.msg.template, li.msg.bot").count() == 0  # no assistant is offered
    row = await desk.row("SELECT status, handler_bot FROM desk_conversations WHERE id = $1",
                         await conversation_of(page))
    assert (row["status"], row["handler_bot"]) == ("open", None)
    await page.screenshot(path=str(DOCS / "desk-no-provider.png"))


async def test_a_command_from_the_widget_menu_with_typed_controls(desk: DeskRig, page: Any) -> None:
    desk.running()
    scripts = Scripts()
    await page.route("**/conversations/*/commands/*", scripts.route)
    await page.goto(f"{desk.url}/desk/widget?inbox=always")
    await page.click("#summon-bubble")
    await page.wait_for_selector("#summon-commands-toggle:not([hidden])")
    await page.click("#summon-commands-toggle")
    menu = page.locator("#summon-commands .menu button")
    assert await menu.all_inner_texts() == ["/recap\nA recap of your conversation"]
    await menu.first.click()
    form = page.locator("#summon-commands form.command")
    # The fields as controls: a span as a number and a unit, a choice as a list, a boolean as a switch.
    since = form.locator(".field[data-kind=span]")
    assert await since.locator("input[type=number]").input_value() == "1"
    assert await since.locator("select").input_value() == "d"
    assert await since.locator("select option").all_inner_texts() == ["minutes", "hours", "days", "weeks"]
    assert await form.locator(".field[data-kind=choice] select option").all_inner_texts() == ["short", "detailed"]
    switch = form.get_by_role("switch", name="Urgent")
    assert not await switch.is_checked()
    await since.locator("input[type=number]").fill("2")
    await since.locator("select").select_option("h")
    await form.locator(".field[data-kind=choice] select").select_option("detailed")
    await switch.check()
    await page.screenshot(path=str(DOCS / "desk-command.png"))
    scripts.queued.append([{"text": "In the last 2 hours you asked about your order; it ships today."}])
    await form.get_by_role("button", name="Run").click()
    await page.locator("li.msg.incoming").filter(has_text="/recap since=2h length=detailed urgent=true").wait_for()
    await page.locator("li.msg.outgoing.bot").filter(has_text="it ships today.").wait_for()
    assert await page.is_hidden("#summon-commands")
    await page.screenshot(path=str(shot("widget-command-answered.png")))
    # The staff see the command in the conversation.
    said = [m["content"] for m in await desk.staff_messages(await conversation_of(page))]
    assert said[0] == "/recap since=2h length=detailed urgent=true"


async def test_a_bot_hands_over_by_its_tool_the_widget_says_who_has_it_then_a_rating(desk: DeskRig,
                                                                                      page: Any) -> None:
    desk.running()
    scripts = Scripts()
    await page.route("**/conversations/*/messages", scripts.route)
    await page.route("**/conversations/*/messages/*", scripts.route)
    await page.goto(f"{desk.url}/desk/widget?inbox=handoff")
    await page.click("#summon-bubble")
    scripts.queued.append([
        {"tool_calls": [{"id": "h1", "name": "hand_to_people", "arguments": {"reason": "A refund is asked for."}}]},
        {"text": "A colleague takes it from here."},
    ])
    await page.fill("#summon-input", "I want my money back for order 12")
    await page.keyboard.press("Enter")
    await page.locator("li.msg.outgoing.bot").filter(has_text="A colleague takes it from here.").wait_for()
    await page.locator("li.msg.activity").filter(has_text="A person will pick this up here").wait_for()
    conversation = await conversation_of(page, "handoff")
    # The desk finds a person: Sam is online (the presence is the test's; the live Matrix test asks Synapse).
    async def online(user_id: str) -> Seen:
        return Seen("online" if user_id == "@sam:localhost" else "offline", "Sam")
    assert await Router(desk.db, desk.service.desk, SystemClock(), online).once() == 1
    await page.locator("li.msg.activity").filter(has_text="Sam has this conversation now").wait_for()
    assert await page.is_hidden("#summon-person")  # a person has it: no "Talk to a person"
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=HANDOFF_KEY,
                    body={"content": "Hi, Sam here: the refund is on its way.", "sender_name": "Sam"})
    await page.locator("li.msg.outgoing").filter(has_text="the refund is on its way").wait_for()
    await page.screenshot(path=str(DOCS / "desk-handoff.png"))
    # Resolved by the staff: the contact is asked once how it went, and rates it.
    await desk.call("POST", desk.staff_path(conversation, "/toggle_status"), staff=HANDOFF_KEY,
                    body={"status": "resolved"})
    question = page.locator("li.msg.template").filter(has_text="How did we do?")
    await question.wait_for()
    assert await question.locator(".choices button").all_inner_texts() == ["1", "2", "3", "4", "5"]
    await question.get_by_role("button", name="4").click()
    await page.locator("li.msg.activity").filter(has_text="Thank you for rating").wait_for()
    assert await question.locator(".choices button:disabled").count() == 5
    await page.screenshot(path=str(DOCS / "desk-rating.png"))
    rated = await desk.row("SELECT value FROM desk_outcomes WHERE conversation_id = $1 AND kind = 'rated'",
                           conversation)
    assert rated["value"] == 4
