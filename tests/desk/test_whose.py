"""Whose the desk's runs are: about the contact (``contact:<id>``, their account when signed in); their own
conversation is read by them alone, so their bot may look at what is theirs there — and a draft, which the
staff read, may not."""

from __future__ import annotations

import pytest

from engine.content.strings import Strings
from engine.tools.personal import make_about_me
from tests.desk.conftest import DeskRig

pytestmark = pytest.mark.db

ASK_ABOUT_ME = [{"tool_calls": [{"id": "c1", "name": "about_me", "arguments": {}}]}, {"text": "Looked."}]


async def test_a_contacts_own_conversation_is_private_to_them_alone(desk: DeskRig) -> None:
    ann = await desk.signed_in("always", "@ann:localhost")
    bob = await desk.contact("always")
    hers, his = await desk.conversation(ann), await desk.conversation(bob)
    surface = desk.service.surface
    facts = await surface.facts(desk.db, f"desk:{hers}", f"contact:{ann.id}")
    assert (facts.user_id, facts.private, facts.is_member) == ("@ann:localhost", True, True)
    assert (await surface.facts(desk.db, f"desk:{his}", f"contact:{ann.id}")).private is False
    guest = await surface.facts(desk.db, f"desk:{his}", f"contact:{bob.id}")
    assert (guest.user_id, guest.private, guest.is_member) == (None, True, False)
    assert (await surface.facts(desk.db, None, "@someone:localhost")).user_id is None


async def test_the_conversations_bot_may_look_at_whats_theirs_and_a_draft_may_not(desk: DeskRig) -> None:
    words = Strings()
    desk.worker.toolbox.tools["about_me"] = make_about_me(desk.db, lambda: words)
    ann = await desk.signed_in("personal", "@ann:localhost")
    conversation = await desk.conversation(ann)
    # Keeper (the conversation's bot, asked by Ann) and Noter (a hearer, drafting for the staff) both try it.
    await desk.say(ann, conversation, "what have I bought?", script=ASK_ABOUT_ME)
    await desk.work()
    results = await desk.db.pool.fetch(
        "SELECT r.bot, s.payload FROM agent_steps s JOIN agent_runs r ON r.id = s.run_id "
        "WHERE s.kind = 'tool_result' ORDER BY r.bot")
    by_bot = {r["bot"]: r["payload"] for r in results}
    assert by_bot["keeper"]["is_error"] is False
    assert by_bot["noter"]["is_error"] is True and "no tool named 'about_me'" in by_bot["noter"]["content"]
