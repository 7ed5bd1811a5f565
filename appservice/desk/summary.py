"""The summary at the top of a conversation handed to people, so nobody has to repeat themselves.

Written by the bot that had it when its file says so (``handoff_summary:``; the desk's ``handoff_summary``
default): a run of that bot, asked by nobody, handed the conversation as the contact read it and the tickets its
runs raised, told to write it for the person taking over (``### desk summary_prompt``); its answer is a private
note marked as the bot's summary (``content_attributes.summary``) — in the staff API (and the conversation's
``meta.summary``), the webhooks and the staff thread. When the bot cannot write it — refused, failed, or no
provider — the desk writes the plain one from the record instead (``plain``, pure), marked as the desk's.
Either reads the conversation's own messages and tickets alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CUT = 300  # characters of any one part of the plain summary


@dataclass(frozen=True)
class Said:
    """A message as the summary reads it."""

    who: str  # contact | bot | person
    text: str


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= CUT else text[: CUT - 1].rstrip() + "…"


def plain(said: Sequence[Said], tickets: Sequence[str], *, template: str, nothing: str) -> str:
    """What the contact asked (their first words), what the bot answered (its last answer), what is still open
    (what they wrote after the last answer), and the tickets raised — in the site's ``template``."""
    asked = next((s.text for s in said if s.who == "contact"), "")
    answers = [n for n, s in enumerate(said) if s.who in ("bot", "person")]
    answered = said[answers[-1]].text if answers else ""
    after = said[answers[-1] + 1:] if answers else said
    still = " / ".join(s.text for s in after if s.who == "contact")
    return template.format(asked=_cut(asked) or nothing, answered=_cut(answered) or nothing,
                           open=_cut(still) or nothing, tickets=_cut(", ".join(tickets)) or nothing)
