"""The desk as the engine sees it: an ``engine.surface.Surface`` (``facts``, ``deliver``, ``working``,
``published``), and nothing of Matrix or HTTP — a ``summon worker`` process delivers desk answers with it too.

- ``facts``: a contact is their account when signed in (``authenticated``, the site's classes), else nobody in
  particular; their own conversation is read by them alone (``private``), so what is theirs may be looked at
  there.
- ``deliver`` (in the run's finishing commit): the conversation's bot answers the contact directly — cut
  once into words and choices (buttons, taken once); a bot that hears ``support-message`` drafts a private note
  for the staff unless its file says ``answers: directly`` and nobody on the staff has the conversation. An
  answer that arrives after people took the conversation is kept as a draft rather than said over them. A run
  that ends without an answer it owed the contact says so in the bot's words (the reason in a note for the
  staff) and hands the conversation to people; a cancelled one says nothing (somebody asked it to stop).
- ``working``: the contact sees the bot writing (an event on their stream), for an answer they will read.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import replace

from appservice.desk import rules
from appservice.desk.asking import contact_facts, is_summary
from appservice.desk.changes import Changes, Where
from appservice.desk.desk import Desk, state_of
from appservice.desk.errors import RequestRefused
from appservice.desk.kind import answers_on_desk
from appservice.desk.said import phrases, says_it_hands_over
from appservice.desk.tables import DeskTables
from engine.content import Bot, Registry
from engine.content.audience import AudienceFacts
from engine.core import choices
from engine.core.redact import redact
from engine.errors import StoreError
from engine.store import Families, Store, Tx
from engine.surface import Answered, Outcome, RunInfo

log = logging.getLogger(__name__)

_CONVERSATION = re.compile(r"desk:([0-9]{1,18})")
_CONTACT = re.compile(r"contact:([0-9]{1,18})")


def conversation_of(room_id: str | None) -> int | None:
    match = _CONVERSATION.fullmatch(room_id or "")
    return int(match.group(1)) if match else None


class DeskSurface:
    name = "desk"

    def __init__(self, desk: Desk, store: Store, registry: Callable[[], Registry], changes: Changes, *,
                 server_name: str) -> None:
        self.desk = desk
        self.store = store
        self._registry = registry
        self.changes = changes
        self.server_name = server_name

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        match = _CONTACT.fullmatch(user_id or "")
        contact = await db.of(DeskTables).contact(int(match.group(1))) if match else None
        if contact is None:
            return AudienceFacts(user_id=None, local_server=self.server_name, site_classes=site_classes)
        conversation_id = conversation_of(room_id)
        conversation = await db.of(DeskTables).conversation(conversation_id) if conversation_id is not None else None
        facts = await contact_facts(db, contact, self.server_name,
                                    private=conversation is not None and conversation.contact_id == contact.id)
        return replace(facts, site_classes=facts.site_classes | site_classes)

    async def published(self, registry: Registry) -> None:
        """Nothing to show: the widget reads the offered bots with each conversation."""

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        conversation_id = conversation_of(run.place)
        bot = self._registry().get(run.bot)
        if conversation_id is None or bot is None:
            log.error("run %s cannot be delivered: its conversation or its bot is gone", run.id, extra={"run": run.id})
            return
        try:
            where = await self.desk.where(tx, conversation_id, runs=False)  # this run's row is held already
        except RequestRefused:
            log.error("run %s cannot be delivered: conversation %s is gone", run.id, conversation_id,
                      extra={"run": run.id})
            return
        if is_summary(run.trigger_event):
            await self._summary(tx, where, run, bot, outcome)
            return
        state = state_of(where.conversation)
        owed = run.asked_by is not None  # the conversation's bot, answering the contact who asked it
        # A bot that handed the conversation over by its tool says its last words to the contact all the same.
        handed_it = owed and await tx.of(DeskTables).handed_by_run(where.conversation.id, run.id)
        if owed:
            direct = (state.bots_answer and state.handler_bot == run.bot) or handed_it
        else:
            direct = answers_on_desk(bot) == "directly" and not state.people_have_it and state.status != "resolved"
        if isinstance(outcome, Answered):
            if direct:
                await self._answer(tx, where, run, bot.name, outcome.text)
                if not handed_it and state.bots_answer and says_it_hands_over(outcome.text, self._phrases()):
                    # Words are not a handoff, but the contact was told one: it happens, counted apart.
                    log.warning("run %s said it hands the conversation over without its tool; handing it over",
                                run.id, extra={"run": run.id, "room": where.key})
                    await self.desk.talk_to_a_person(tx, where, cause="said", run_id=run.id)
            else:
                await self._draft(tx, where, run, bot.name, outcome.text)
            return
        if outcome.ending == "cancelled":
            log.info("run %s in %s was cancelled; nothing is said", run.id, where.key, extra={"run": run.id})
            return
        words = bot.ending(outcome.ending) or ""
        reason = redact(outcome.reason) if outcome.reason else ""
        if not direct:
            note = "\n\n".join(part for part in (words, reason) if part) or outcome.ending
            await self.desk.say(tx, where, message_type="outgoing", content=note, sender_type="agent_bot",
                                sender_name=bot.name, bot=bot.slug, run_id=run.id, private=True)
            return
        if words:  # the bot's words for an ending (marked: not an answer, for the summary and the figures)
            await self.desk.say(tx, where, message_type="outgoing", content=words, sender_type="agent_bot",
                                sender_name=bot.name, bot=bot.slug, run_id=run.id,
                                attributes={"ending": outcome.ending})
        if reason:  # the reason is the staff's (SPEC §1: on the desk, in the staff view)
            await self.desk.say(tx, where, message_type="outgoing", content=reason, sender_type="agent_bot",
                                sender_name=bot.name, bot=bot.slug, run_id=run.id, private=True)
        log.warning("run %s ended %s on the desk: conversation %s goes to people", run.id, outcome.ending,
                    where.conversation.id, extra={"run": run.id, "room": where.key})
        await self.desk.become(tx, where, rules.bot_failed(state), cause="failure", run_id=run.id)

    async def _summary(self, tx: Tx, where: Where, run: RunInfo, bot: Bot, outcome: Outcome) -> None:
        """A handoff's summary: the bot's answer as a private note marked as its summary; when it could not
        write one, the desk's plain one."""
        if isinstance(outcome, Answered) and outcome.text.strip():
            await self.desk.say(tx, where, message_type="outgoing", content=outcome.text, sender_type="agent_bot",
                                sender_name=bot.name, bot=bot.slug, run_id=run.id, private=True,
                                attributes={"summary": "bot"})
            return
        log.info("run %s wrote no summary of %s (%s); the desk writes its own", run.id, where.key,
                 getattr(outcome, "ending", "nothing said"), extra={"run": run.id, "room": where.key})
        await self.desk.plain_summary(tx, where, bot)

    def _phrases(self) -> list[str]:
        return phrases(self._registry().strings.get("desk", "handover_phrases") or "")

    async def _answer(self, tx: Tx, where: Where, run: RunInfo, name: str, text: str) -> None:
        """Cut once, here: an answer that ends in choices carries them apart from its words (buttons)."""
        await self.desk.record(tx, where, "bot_answered", bot=run.bot, run_id=run.id)
        cut = choices.cut(text)
        if not cut.offers:
            await self.desk.say(tx, where, message_type="outgoing", content=text, sender_type="agent_bot",
                                sender_name=name, bot=run.bot, run_id=run.id)
            return
        items = [{"title": c.label, "value": str(n), **({"detail": c.detail} if c.detail else {})}
                 for n, c in enumerate(cut.choices, start=1)]
        links = [{"title": link.label, "url": link.url} for link in cut.links]
        await self.desk.say(tx, where, message_type="outgoing", content=cut.words, sender_type="agent_bot",
                            sender_name=name, bot=run.bot, run_id=run.id, content_type="input_select",
                            attributes={"items": items, **({"links": links} if links else {})})

    async def _draft(self, tx: Tx, where: Where, run: RunInfo, name: str, text: str) -> None:
        """A private note for the staff to send, rewrite or throw away."""
        await self.desk.say(tx, where, message_type="outgoing", content=text, sender_type="agent_bot",
                            sender_name=name, bot=run.bot, run_id=run.id, private=True, draft="pending")

    async def working(self, run: RunInfo, on: bool) -> None:
        conversation_id = conversation_of(run.place)
        bot = self._registry().get(run.bot)
        if conversation_id is None or bot is None or run.asked_by is None:
            return  # a draft is the staff's: the contact is not shown anybody writing
        try:
            async with self.store.transaction("desk_typing") as tx:
                await tx.of(DeskTables).lock_conversation(conversation_id)
                await self.changes.typing(tx, conversation_id, bot.slug, bot.name, on)
        except StoreError as exc:  # a courtesy; it must not stop the run
            log.debug("typing for run %s failed: %s", run.id, exc)
