"""Who has a desk conversation, and what each thing that happens to it changes. Pure: plain data in and out.

One handler at a time (SPEC §9, the seed's "How a bot is offered on a desk"): a conversation is its bot's
(``pending``) or people's (``open``), or ``resolved``. Its bot is the one that answers it while it is pending
— an ``offer: always`` bot from the start, an ``offer: ask`` bot once the contact chose it — and stays its bot
when people take it, so the staff can send it back (``pending``). "Talk to a person" is not a request the bot
is asked to honour: it writes ``bot_off`` and the desk starts no bot there until a human has the conversation
(it is assigned) or the staff send it back. A bot that fails hands the conversation to people the same way.
Writing to a resolved conversation reopens it, and un-counts its resolution.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from appservice.desk.kind import OFFER, hears_support_messages
from engine.content import Bot, admits
from engine.content.audience import AudienceFacts

Status = Literal["open", "pending", "resolved"]
Resolution = Literal["confirmed", "assumed"]
STATUSES: tuple[Status, ...] = ("open", "pending", "resolved")


@dataclass(frozen=True)
class State:
    status: Status
    handler_bot: str | None = None
    assignee: str | None = None
    bot_off: bool = False
    resolution: Resolution | None = None

    @property
    def bots_answer(self) -> bool:
        """Whether the conversation's bot answers what the contact writes: it is pending and not turned off."""
        return self.status == "pending" and self.handler_bot is not None and not self.bot_off

    @property
    def bots_may_start(self) -> bool:
        """Whether any bot may start here: not after "talk to a person", until a human has it."""
        return not self.bot_off or self.assignee is not None

    @property
    def people_have_it(self) -> bool:
        return self.assignee is not None or self.bot_off


def at_start(always: str | None, *, agent_bot: bool = False) -> State:
    """A new conversation: its ``offer: always`` bot's; else an agent bot's behind a webhook (the inbox has
    one: Chatwoot makes such conversations ``pending``); else people's."""
    if always is not None:
        return State("pending", handler_bot=always)
    return State("pending") if agent_bot else State("open")


def written(state: State) -> State:
    """The contact wrote: a resolved conversation opens again (to its bot if the bot still has it), and a
    resolution is un-counted (they came back for more)."""
    if state.status != "resolved":
        return replace(state, resolution=None)
    status: Status = "pending" if state.handler_bot is not None and not state.bot_off and state.assignee is None else "open"
    return replace(state, status=status, resolution=None)


def chosen(state: State, bot: str) -> State:
    """The contact chose the bot a desk offered: it has the conversation from now on."""
    return replace(state, status="pending", handler_bot=bot, bot_off=False, resolution=None)


def talk_to_a_person(state: State) -> State:
    """The way out: people have it, and no bot starts here until a human has it."""
    return replace(state, status="open", bot_off=True, resolution=None)


def bot_failed(state: State) -> State:
    """A bot that could not answer hands the conversation to people, as if they had asked for a person."""
    return replace(state, status="open", bot_off=True)


def no_assistant(state: State) -> State:
    """No provider can answer: people have it. Its bot stays its bot (the staff can send it back), and it is not
    turned off — nobody asked for a person, so nothing says they did."""
    return replace(state, status="open")


def staff_replied(state: State, staff: str) -> State:
    """A person on the staff answered: they have it (assigned to them unless it already was to somebody)."""
    return replace(state, status="open", assignee=state.assignee or staff, resolution=None)


def assigned(state: State, staff: str | None) -> State:
    """Assigning a person silences the bot (Chatwoot resets its agent bot when a human is assigned)."""
    status: Status = "open" if staff is not None and state.status == "pending" else state.status
    return replace(state, status=status, assignee=staff)


def toggled(state: State, status: Status, bot: str | None, *, agent_bot: bool = False) -> State | None:
    """The staff set the status. ``pending`` gives it (back) to ``bot`` — its own, else the inbox's, else
    the inbox's agent bot behind a webhook — and clears "talk to a person"; None when there is no bot to give
    it to."""
    if status == "pending":
        handler = state.handler_bot or bot
        if handler is None and not agent_bot:
            return None
        return replace(state, status="pending", handler_bot=handler, bot_off=False, assignee=None)
    if status == "resolved":
        return resolved(state, state.resolution)
    return replace(state, status="open")


def resolved(state: State, how: Resolution | None) -> State:
    return replace(state, status="resolved", resolution=how)


def helped(state: State) -> State:
    """"Yes, thanks": a confirmed resolution, whatever happens to the conversation next."""
    return replace(state, resolution="confirmed")


# --- which bots work a conversation -------------------------------------------------------------------------


@dataclass(frozen=True)
class Roster:
    """The desk bots of one inbox, by how the desk starts them."""

    always: tuple[Bot, ...] = ()
    ask: tuple[Bot, ...] = ()
    hearers: tuple[Bot, ...] = ()

    def handler_for(self, facts: AudienceFacts) -> str | None:
        """The ``offer: always`` bot of a new conversation: the first whose ``for:`` admits the contact."""
        return next((bot.slug for bot in self.always if admits(bot.audience, facts)), None)

    def offered_to(self, facts: AudienceFacts) -> list[Bot]:
        """The ``offer: ask`` bots the contact may choose."""
        return [bot for bot in self.ask if admits(bot.audience, facts)]

    def all(self) -> tuple[Bot, ...]:
        """Every bot the desk may start here, each once."""
        seen: dict[str, Bot] = {}
        for bot in (*self.always, *self.ask, *self.hearers):
            seen.setdefault(bot.slug, bot)
        return tuple(seen.values())

    def default_bot(self) -> str | None:
        """The bot the staff send a conversation back to when it never had one: the inbox's first offered."""
        first = (*self.always, *self.ask)
        return first[0].slug if first else None


def roster(bots: Iterable[Bot], only: tuple[str, ...] | None) -> Roster:
    """The bots on the desk (``only``: the inbox's own list, in its order; None: every desk bot, by slug)."""
    desk = {bot.slug: bot for bot in bots if "desk" in bot.surfaces}
    chosen_bots = [desk[slug] for slug in only if slug in desk] if only is not None else [desk[s] for s in sorted(desk)]
    return Roster(
        always=tuple(b for b in chosen_bots if OFFER.of(b) == "always"),
        ask=tuple(b for b in chosen_bots if OFFER.of(b) == "ask"),
        hearers=tuple(b for b in chosen_bots if hears_support_messages(b)),
    )
