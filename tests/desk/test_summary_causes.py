"""The summary at the top of a handoff, on every cause a conversation goes to people by (issue 31 item 2): the
contact asking, the bot's tool, the bot saying so, a failure, the staff taking it — each leaves one summary for
the staff (the bot's, or the desk's when the bot could not write it), and the staff page shows the figures only
with an inbox's staff key."""

from __future__ import annotations

from typing import Any

import pytest

from tests.book import BOOK
from tests.desk.conftest import HANDOFF_KEY, STAFF_KEY, DeskRig

pytestmark = pytest.mark.db
SUMMARY_PROMPT = "say nothing you do not see above."  # how the kit's summary_prompt ends: the book's key


async def summaries(desk: DeskRig, conversation: int, key: str) -> list[dict[str, Any]]:
    staff = await desk.call("GET", desk.staff_path(conversation, "/messages"), staff=key)
    return [m for m in staff["payload"] if m["content_attributes"].get("summary")]


@pytest.mark.parametrize("cause", ["contact", "bot", "said", "failure", "staff"])
async def test_every_handoff_cause_leaves_one_summary_for_the_staff(desk: DeskRig, cause: str) -> None:
    inbox, key = ("handoff", HANDOFF_KEY) if cause == "bot" else ("always", STAFF_KEY)
    who = await desk.contact(inbox)
    conversation = await desk.conversation(who)
    BOOK.say(SUMMARY_PROMPT, [{"text": f"Summary for the staff ({cause})."}])
    script: list[dict[str, Any]] = {
        "contact": [{"text": "Here is what I know."}],
        "bot": [{"tool_calls": [{"id": "h1", "name": "hand_to_people", "arguments": {"reason": "needs a person"}}]},
                {"text": "A colleague takes it from here."}],
        "said": [{"text": "I'll transfer you to a colleague now."}],
        "failure": [{"error": "down", "error_class": "provider"}],
        "staff": [{"text": "Here is what I know."}],
    }[cause]
    await desk.say(who, conversation, f"My question ({cause})", script=script)
    await desk.work()
    if cause == "contact":
        await desk.call("POST", f"{desk.base(who)}/conversations/{conversation}/toggle_status", token=who.token,
                        body={"status": "open"})
    elif cause == "staff":
        await desk.call("POST", desk.staff_path(conversation, "/assignments"), staff=key, body={"assignee_id": "sam"})
    await desk.work()
    handed = await desk.row("SELECT cause FROM desk_outcomes WHERE conversation_id = $1 AND kind = 'handed'",
                            conversation)
    assert handed["cause"] == cause
    [summary] = await summaries(desk, conversation, key)
    if cause == "failure":  # the bot's own failure: the desk writes it, from the record
        assert summary["content_attributes"]["summary"] == "desk" and "My question (failure)" in summary["content"]
    else:
        assert (summary["content_attributes"]["summary"], summary["content"]) == (
            "bot", f"Summary for the staff ({cause}).")
    assert summary["private"] is True


async def test_the_staff_page_shows_the_figures_only_with_a_staff_key(desk: DeskRig, browser: Any) -> None:
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "Hello there", script=[{"text": "Hi."}])
    await desk.work()
    context = await browser.new_context()
    page = await context.new_page()
    try:
        await page.goto(f"{desk.url}/desk/staff/report")
        await page.fill("#key", "not-the-key-" + "x" * 10)
        await page.click("button[type=submit]")
        await page.locator("#error").filter(has_text="staff key").wait_for()
        assert await page.locator("#outcomes").count() == 0
        await page.fill("#key", STAFF_KEY)
        await page.click("button[type=submit]")
        row = page.locator("#outcomes tr.inbox").filter(has_text="always")
        await row.wait_for()
        cells = await row.locator("td").all_inner_texts()
        assert cells[:3] == ["always", "1", "1 (100%)"]  # one conversation, answered by its bot alone
        assert await page.locator("#outcomes tr.bot").filter(has_text="clerk").count() == 1
    finally:
        await context.close()
