"""What the desk brings to content (``engine.content.kinds``): a bot file's ``offer:`` (the bot offers itself to
a contact) and ``answers:`` (draft, or directly), ``hears: support-message`` (every message a contact writes
wakes it), content commands and tools that ``needs: desk``, and the words of ``### desk``. Each key is
refused on a bot that is not on the desk."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from engine.content.kinds import Key, Kind, Refuse
from engine.core.messages import ToolSpec

NAME = "desk"
SUPPORT_MESSAGE = "support-message"
Offer = Literal["off", "ask", "always"]
Answers = Literal["draft", "directly"]
OFFER: Key[Offer] = Key("offer", Offer, "off")
ANSWERS: Key[Answers | None] = Key("answers", Answers | None, None)
# Whether the bot writes the summary at the top of a conversation it hands to people (None: the desk's default,
# ``desk.handoff_summary``).
HANDOFF_SUMMARY: Key[bool | None] = Key("handoff_summary", bool | None, None)
_PER = "a per-person ceiling must hold (windows: minute, hour, day, week, month)"


def answers_on_desk(bot: object) -> Answers:
    """On the desk a bot drafts unless its file says ``answers: directly``."""
    return ANSWERS.of(bot) or "draft"


def hears_support_messages(bot: object) -> bool:
    """Whether a contact writing on the desk wakes it (``hears: support-message``): one run per bot per
    conversation, asked by nobody, so ``serves:`` is its gate."""
    return SUPPORT_MESSAGE in getattr(bot, "hears", ())


def _desk_only(values: Mapping[str, Any], refuse: Refuse) -> None:
    surfaces = values["surfaces"]
    shown = ", ".join(surfaces)
    offer = values["offer"]
    if offer != "off" and NAME not in surfaces:
        refuse(("offer", "surfaces"), f"offer: {offer} offers the bot on the desk, but it is not on the desk (surfaces: {shown})")
    if offer != "off" and not values["limits"].per:
        refuse(("offer", "limits"), f"offer: {offer} needs limits.per: an offered bot answers people by itself, so {_PER}")
    if SUPPORT_MESSAGE in values["hears"]:
        if NAME not in surfaces:
            refuse(("hears", "surfaces"), f"hears: support-message wakes the bot on the desk, but it is not on the desk (surfaces: {shown})")
        elif not values["limits"].per:
            refuse(("hears", "limits"), "hears: support-message needs limits.per: the bot answers every message a contact"
                   f" writes by itself, so {_PER}")
    if values["handoff_summary"] is not None and NAME not in surfaces:
        refuse(("handoff_summary", "surfaces"), "handoff_summary: is about handing a desk conversation over, but the "
               f"bot is not on the desk (surfaces: {shown})")
    if values["answers"] is not None and NAME not in surfaces:
        refuse(("answers", "surfaces"), f"answers: is how the bot answers on the desk, but it is not on the desk (surfaces: {shown})")


HAND_TO_PEOPLE = ToolSpec(
    "hand_to_people",
    "Hand this conversation to a person on the staff, now: you stop answering here and they take it from what is "
    "already written. Use it when something needs doing rather than explaining, when money back is asked for, "
    "when somebody is upset, or when they ask for a person — never just say you are handing it over. Then end "
    "with one short line to them.",
    {"type": "object",
     "properties": {"reason": {"type": "string",
                               "description": "One line for the person who takes over: why it needs a person."}},
     "required": ["reason"], "additionalProperties": False},
)

DESK = Kind(
    NAME,
    keys=(OFFER, ANSWERS, HANDOFF_SUMMARY),
    rules=(_desk_only,),
    tools=(HAND_TO_PEOPLE,),
    commands=True,
    needed=True,
    triggers=(SUPPORT_MESSAGE,),
    strings={
        # The desk's own words: the framing of a desk run's transcript ({inbox}: the inbox's title; ``contact`` is
        # what a contact with no name is called), a bot's offer of itself, the check after an answer, the way
        # out, what the widget shows (the composer, the bot writing), what a contact is told when refused, and
        # how the staff room in Matrix mirrors a conversation (a thread per conversation, drafts to send or drop);
        # ``too_many_new``: over the limits on new contacts and conversations (from one address, in one inbox, held by
        # one contact).
        "desk": {
            "context": ("inbox",), "contact": (),
            "offer": (), "offer_choice": ("bot",),
            "did_it_help": (), "helped": (), "human": (), "anything_else": (), "more": (), "done": (),
            "handed_over": (), "resolved": (), "typing": ("bot",), "placeholder": (), "send": (),
            "too_fast": (), "gone": (),
            "staff_thread": ("id", "contact", "inbox"),
            "staff_draft": ("bot",), "staff_sent": ("name",), "staff_edited": ("name",),
            "staff_discarded": ("name",), "staff_handover": (), "staff_resolved": (),
            # No usable provider: no assistant here, a person answers; the widget's commands menu (its button, a
            # command's run button, a span's units, back to the list) and a command refused after "talk to a person".
            "no_assistant": (), "commands": (), "run_command": (), "back": (), "commands_off": (),
            "unit_minutes": (), "unit_hours": (), "unit_days": (), "unit_weeks": (),
            "too_many_new": (),
            "too_many_streams": (),
            # After a resolution the contact is asked once how it went (``rate``, its buttons ``rate_1`` … ``rate_5``;
            # ``rated`` thanks them); ``handover_phrases``: what a bot saying it hands over says (``|`` between them) —
            # one that says so without its hand_to_people tool is handed over all the same.
            "rate": (), "rate_1": (), "rate_2": (), "rate_3": (), "rate_4": (), "rate_5": (), "rated": (),
            "handover_phrases": (),
            # Who takes a handoff (office hours, staff, presence): ``assigned`` tells the contact who has it now,
            # ``promise_at`` when a person will answer (outside hours), ``promise_soon`` inside hours with nobody
            # present; ``staff_assigned`` pings the staff member in the conversation's staff thread.
            "assigned": ("name",), "promise_at": ("when",), "promise_soon": (), "staff_assigned": ("name",),
            # The summary at the top of a handoff: what its bot is told to write (``summary_prompt``), and the desk's
            # own when the bot cannot (``summary_plain``; ``summary_nothing`` for a part with nothing in it).
            "summary_prompt": (), "summary_plain": ("asked", "answered", "open", "tickets"), "summary_nothing": (),
        },
    },
)
