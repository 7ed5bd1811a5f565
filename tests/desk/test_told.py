"""Every refusal is said on every surface alike (issue 25 item 3): the desk tells a contact what Matrix and the
door tell a person, in the same words (``engine.run.refusals.refusal_words``, ``TOLD``) — a full waiting line too."""

from __future__ import annotations

import pytest

from tests.desk.conftest import DeskRig

pytestmark = pytest.mark.db


async def test_a_contact_is_told_the_bots_waiting_line_is_full(desk: DeskRig) -> None:
    bea = await desk.contact("always")
    await desk.say(bea, await desk.conversation(bea), "first", script=[{"text": "a"}])  # waits: nothing works it
    await desk.db.pool.execute("UPDATE deployment_caps SET waiting_per_bot = 1")
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "me too", script=[{"text": "b"}])
    assert await desk.db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE place = $1", f"desk:{conversation}") == 0
    told = (await desk.messages(ann, conversation))[-1]
    assert told["message_type"] == "activity"
    assert told["content"].startswith("Clerk is busy right now — 1 questions are already waiting for it.")
    await desk.say(ann, conversation, "again?")  # told once a minute, not line by line
    assert [m["message_type"] for m in await desk.messages(ann, conversation)] == ["incoming", "activity", "incoming"]
