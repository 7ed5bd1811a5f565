"""The desk's own built-in: ``hand_to_people``, offered on the desk only (``engine.tools.base``).

A bot hands a conversation to people by this action, never by a sentence: the same change as the contact's *Talk
to a person* (the bot is off here, the other runs stop, the choices on offer go, the contact is told), counted as
the bot's handoff, with its reason in a note for the staff. The run that called it goes on to say its last words
to the contact (``DeskSurface.deliver``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from appservice.desk.desk import Desk, state_of
from appservice.desk.errors import RequestRefused
from appservice.desk.surface import conversation_of
from engine.errors import ToolError
from engine.store import Store
from engine.tools.base import RunRef, ToolFn

log = logging.getLogger(__name__)

MAX_REASON = 500


def make_hand_to_people(store: Store, desk: Callable[[], Desk | None]) -> ToolFn:
    async def hand_to_people(run: RunRef, arguments: dict[str, Any]) -> str:
        reason = arguments.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ToolError("Say why in `reason`: one line for the person who takes it over.")
        reason = " ".join(reason.split())[:MAX_REASON]
        here = desk()
        conversation_id = conversation_of(run.place)
        if here is None or run.surface != "desk" or conversation_id is None:
            raise ToolError("This is not a desk conversation, so there is nobody to hand it to.")
        async with store.transaction("desk_hand_to_people") as tx:
            try:
                where = await here.where(tx, conversation_id)
            except RequestRefused:
                raise ToolError("This conversation is gone.") from None
            state = state_of(where.conversation)
            if not state.bots_answer:
                return ("It is with people already: a person has this conversation. Say nothing more about "
                        "handing it over.")
            if state.handler_bot != run.bot:
                raise ToolError("This conversation is another bot's to hand over, not yours.")
            await here.say(tx, where, message_type="outgoing", content=reason, sender_type="agent_bot",
                           sender_name=_name(here, run.bot), bot=run.bot, run_id=run.id, private=True,
                           attributes={"handed_over": True})
            await here.talk_to_a_person(tx, where, cause="bot", run_id=run.id)
        log.info("run %s handed desk conversation %s to people: %s", run.id, conversation_id, reason,
                 extra={"run": run.id, "room": run.place, "bot": run.bot})
        return ("Done: the conversation is with people now, and the contact has been told a person will pick it up "
                "here. End with one short line to them; promise no time.")

    return hand_to_people


def _name(desk: Desk, bot: str) -> str:
    found = desk.bot(bot)
    return found.name if found is not None else bot
