"""A contact's words ask a bot: the desk's side of the one door in (``engine.run.summon``), every refusal
made there.

A run is about the contact (``subject`` ``contact:<id>``: a personal tool answers for them, and their
ceilings count it). The conversation's own bot — offered and chosen, or ``offer: always`` — is asked by the
contact (``for:`` is its gate, and their conversation is read by them alone, so what is theirs may be looked
at); a bot that hears ``support-message`` is asked by nobody (``serves:`` is its gate). One run per bot per
conversation at a time: a message while it works joins that run, read before its next model call. The run
is handed the conversation as the contact reads it (no private notes), newest lines within the context's
budget. A refusal the contact can act on (a ceiling, too many questions at once, the day's cap, a full
waiting line) is told to them in the words every surface says it in (``refusal_words``), at most once a
minute each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from appservice.desk.changes import Changes, Where
from appservice.desk.tables import Contact, DeskTables, Inbox, Message
from engine.content import Bot, Registry
from engine.content.audience import AudienceFacts
from engine.core.messages import CHARS_PER_TOKEN
from engine.core.prompt import CONTEXT_TOKENS
from engine.errors import Conflict
from engine.run.refusals import TOLD, Refused, refusal_words
from engine.run.summon import Summoned, Summons, summon
from engine.store import Families, Tx

log = logging.getLogger(__name__)

SURFACE = "desk"
TRANSCRIPT_LINES = 50
TELL_EVERY_SECONDS = 60.0


SUMMARY = ":summary:"


def summary_trigger(where: Where, bot: str) -> str:
    """A summary run's trigger: one per handoff (the conversation's event number at it) and bot."""
    return f"{where.key}{SUMMARY}{where.conversation.seq}:{bot}"


def is_summary(trigger_event: str | None) -> bool:
    return SUMMARY in (trigger_event or "")


def contact_name(contact: Contact, registry: Registry) -> str:
    """What a contact is called: their own name, else the site's word for a contact with none (``### desk
    contact``), else their number — never words of the code's own."""
    return contact.name or registry.strings.get("desk", "contact") or f"#{contact.id}"


def inbox_pool(inbox: Inbox) -> str:
    """The pool of spend every run started from ``inbox`` reserves in (asked or heard)."""
    return f"desk:{inbox.name}"


def line_of(message: Message) -> dict[str, Any]:
    """A message as a run's context reads it: who said it and what."""
    return {"message_id": message.id, "sender": message.sender_type, "name": message.sender_name or "",
            "said": message.content}


def transcript(messages: list[Message], tokens: int = CONTEXT_TOKENS) -> list[dict[str, Any]]:
    """The newest lines that fit the context's budget, oldest first (a long conversation reaches the model bounded)."""
    budget = tokens * CHARS_PER_TOKEN
    kept: list[dict[str, Any]] = []
    for message in reversed(messages):
        budget -= len(message.content) + len(message.sender_name or "") + 2
        if kept and budget < 0:
            break
        kept.append(line_of(message))
    return list(reversed(kept))


async def contact_facts(db: Families, contact: Contact, server_name: str, *, private: bool) -> AudienceFacts:
    """Who a contact is: a signed-in one is their account (``authenticated``, and the site's classes); a
    guest is nobody in particular. ``private``: the place is their own conversation, read by them alone."""
    classes = await db.people.site_classes(contact.user_id) if contact.user_id is not None else frozenset()
    return AudienceFacts(user_id=contact.user_id, local_server=server_name, is_member=contact.user_id is not None,
                         site_classes=classes, private=private)


class DeskAsking:
    def __init__(self, registry: Callable[[], Registry], changes: Changes, *, server_name: str,
                 max_attempts: int = 3) -> None:
        self._registry = registry
        self.changes = changes
        self.server_name = server_name
        self.max_attempts = max_attempts
        # Each inbox's own cap on what its runs spend in any 24 hours (USD), by inbox id, as the inboxes load.
        self.daily_spend: dict[int, float] = {}

    async def ask(self, tx: Tx, where: Where, bot: Bot, asking: list[Message], *, asked: bool,
                  command: dict[str, Any] | None = None) -> Summoned | Refused:
        """Ask ``bot`` about ``asking`` (what the contact wrote and nobody answered yet): join its live run
        here, else summon it. ``asked``: the contact asks it (the conversation's bot), else nobody does.
        ``command``: the contact ran a command (its name and arguments, as a run's context keeps them) — a run
        of its own, never joined to one at work, which the worker resolves as Matrix's commands."""
        registry = self._registry()
        header = registry.strings.get("context", "later")
        for n, message in enumerate(asking if command is None else []):
            joined = await tx.of(DeskTables).join_run(bot.slug, where.key, line_of(message), header)
            if joined is None:
                break
            if n == len(asking) - 1:
                log.info("message %s joined run %s", message.id, joined, extra={"bot": bot.slug, "room": where.key})
                return Summoned(joined, joined=True)
        lines = transcript(await tx.of(DeskTables).last_messages(where.conversation.id, private=False, limit=TRANSCRIPT_LINES))
        framing = registry.strings.get("desk", "context")
        context: dict[str, Any] = {"kind": "desk", "lines": lines}
        if framing:
            context["header"] = framing.format(inbox=where.inbox.title)
        if command is not None:
            context["command"] = command
        facts = await contact_facts(tx, where.contact, self.server_name, private=True)
        summons = Summons(
            bot=bot.slug, surface=SURFACE, prompt="\n".join(m.content for m in asking),
            asked_by=where.contact_key if asked else None, subject=where.contact_key, facts=facts,
            place=where.key, trigger_event=f"{where.key}:{asking[-1].id}:{bot.slug}", context=context,
            pool=inbox_pool(where.inbox), pool_daily=self.daily_spend.get(where.inbox.id),
            counts_live=True,
        )
        try:
            async with tx.savepoint():  # a lost race for the conversation undoes this run, not the message
                result = await summon(tx, registry, summons, max_attempts=self.max_attempts)
                if isinstance(result, Summoned):
                    await tx.runs.mark_conversation(result.run_id, where.key)
        except Conflict:
            joined = await tx.of(DeskTables).join_run(bot.slug, where.key, line_of(asking[-1]), header)
            log.info("a run of %s started in %s meanwhile; the message joined it", bot.slug, where.key,
                     extra={"bot": bot.slug, "room": where.key})
            return Summoned(joined, joined=True) if joined is not None else Refused("busy")
        if isinstance(result, Refused):
            log.info("desk message %s: %s refused (%s)", asking[-1].id, bot.slug, result.reason,
                     extra={"bot": bot.slug, "room": where.key})
            if asked and result.reason in TOLD:
                await self._tell(tx, where, bot, result)
        return result

    async def summarise(self, tx: Tx, where: Where, bot: Bot, prompt: str) -> Summoned | Refused:
        """Ask ``bot`` for the summary of a conversation just handed to people (``appservice.desk.summary``): asked by
        nobody, about the contact, handed the conversation as the contact read it and the tickets its runs raised;
        not the conversation's one live run (it never joins nor blocks the bot's other work there)."""
        registry = self._registry()
        lines = transcript(await tx.of(DeskTables).last_messages(where.conversation.id, private=False,
                                                                 limit=TRANSCRIPT_LINES))
        context: dict[str, Any] = {"kind": "desk", "lines": lines,
                                   "tickets": await tx.of(DeskTables).tickets_of(where.key)}
        framing = registry.strings.get("desk", "context")
        if framing:
            context["header"] = framing.format(inbox=where.inbox.title)
        facts = await contact_facts(tx, where.contact, self.server_name, private=False)
        summons = Summons(
            bot=bot.slug, surface=SURFACE, prompt=prompt, asked_by=None, subject=where.contact_key, facts=facts,
            place=where.key, trigger_event=summary_trigger(where, bot.slug), context=context,
            pool=inbox_pool(where.inbox), pool_daily=self.daily_spend.get(where.inbox.id),
        )
        async with tx.savepoint():
            result = await summon(tx, registry, summons, max_attempts=self.max_attempts)
        if isinstance(result, Refused):
            log.info("the handoff summary of %s by %s was refused (%s)", where.key, bot.slug, result.reason,
                     extra={"bot": bot.slug, "room": where.key})
        return result

    async def _tell(self, tx: Tx, where: Where, bot: Bot, refused: Refused) -> None:
        """Tell the contact why nothing answers, in the site's words — the same as every surface's
        (``refusal_words``; none: nothing) — once a minute per reason."""
        text = refusal_words(refused, self._registry().strings, bot.name)
        if not text or await tx.refusals.lately(where.contact_key, refused.reason, TELL_EVERY_SECONDS) > 1:
            return
        message = await tx.of(DeskTables).insert_message(where.conversation.id, message_type="activity", content=text,
                                               sender_type="system", bot=bot.slug)
        if message is not None:
            await self.changes.message(tx, where, message)
