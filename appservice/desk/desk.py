"""The desk: what contacts and staff do to a conversation, each in the caller's transaction, with the
conversation's row taken first so its changes are made one at a time. Who has the conversation afterwards
is ``rules``' to say; asking a bot is ``asking``'s; every change is told through ``changes``.

A contact writes → the message is stored → a resolved conversation reopens → its bot answers (if it has
it), or a bot that is offered (``offer: ask``) offers itself once while the question is unanswered, and
the bots that hear ``support-message`` are woken — none of them after "talk to a person", until a human has
the conversation. With no usable provider no bot is offered or started (no provider, no bots): the conversation
is people's, and the contact is told once that a person will answer. Pressing a choice takes it once; a bot's choice is then said in the contact's name, as
their next words. Refusals are ``RequestRefused``: the status an API answers with, and words for whoever asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from appservice.config import DeskInbox
from appservice.desk import rules
from appservice.desk.asking import DeskAsking, contact_facts, contact_name
from appservice.desk.changes import Changes, Where, conversation_key
from appservice.desk.errors import RequestRefused
from appservice.desk.kind import HANDOFF_SUMMARY
from appservice.desk.rules import Resolution, Roster, State, Status
from appservice.desk.summary import Said, plain
from appservice.desk.tables import Contact, Conversation, DeskTables, Inbox, Message
from engine.content import Bot, Registry
from engine.run.refusals import Refused
from engine.run.summon import LIVENESS_SECONDS, Summoned
from engine.store import Families, Tx

log = logging.getLogger(__name__)

MAX_CHARS = 10_000  # of one message: a question, not a document
OFFER_PREFIX = "bot:"
NO_ASSISTANT = "no_assistant"  # the activity line of a conversation no bot can answer (no provider)
DAY = 86_400.0


# Why a conversation changed hands, for its figures: a handoff's cause (``outcomes.HANDOFF_CAUSES``), or the
# contact writing (a resolved conversation reopens).
Cause = Literal["contact", "bot", "said", "failure", "staff", "wrote"]


def _the_bots(state: State) -> bool:
    """Whether a bot has the conversation (a bot of ours, or an agent bot behind a webhook): people do not."""
    return state.status == "pending" and not state.people_have_it


@dataclass(frozen=True)
class InboxConfig:
    row: Inbox
    settings: DeskInbox


def state_of(c: Conversation) -> State:
    return State(status=c.status,  # type: ignore[arg-type]  # the table's CHECK keeps it one of three
                 handler_bot=c.handler_bot, assignee=c.assignee, bot_off=c.bot_off_at is not None,
                 resolution=c.resolution)  # type: ignore[arg-type]


class Desk:
    def __init__(self, registry: Callable[[], Registry], changes: Changes, asking: DeskAsking, *,
                 server_name: str, messages_per_minute: int, conversations_per_contact: int = 20,
                 handoff_summary: bool = True) -> None:
        self._registry = registry
        self.changes = changes
        self.asking = asking
        self.server_name = server_name
        self.messages_per_minute = messages_per_minute
        self.conversations_per_contact = conversations_per_contact
        self.handoff_summary = handoff_summary  # the desk's default when a bot's file does not say
        self.inboxes: dict[int, InboxConfig] = {}

    def add_inbox(self, row: Inbox, settings: DeskInbox) -> None:
        self.inboxes[row.id] = InboxConfig(row, settings)

    def inbox(self, identifier: str) -> InboxConfig | None:
        return next((i for i in self.inboxes.values() if i.row.identifier == identifier), None)

    def roster(self, inbox_id: int) -> Roster:
        inbox = self.inboxes.get(inbox_id)
        return rules.roster(self._registry().bots.values(), inbox.settings.bots if inbox is not None else ())

    def has_agent_bot(self, inbox_id: int) -> bool:
        """Whether a bot behind one of the inbox's webhooks answers its contacts (``agent_bot: true``)."""
        inbox = self.inboxes.get(inbox_id)
        return inbox is not None and any(hook.agent_bot for hook in inbox.settings.webhooks)

    async def has_assistant(self, db: Families, inbox_id: int) -> bool:
        """Whether a contact here may be answered by one of our bots: the inbox has one that answers or offers
        itself, and a provider can answer (no provider, no bots)."""
        roster = self.roster(inbox_id)
        return bool(roster.always or roster.ask) and await db.workers.provider_usable(LIVENESS_SECONDS)

    def bot(self, slug: str) -> Bot | None:
        return self._registry().get(slug)

    def words(self, key: str, **fields: str) -> str:
        text = self._registry().strings.get("desk", key) or ""
        return text.format(**fields) if fields else text

    # --- reading ------------------------------------------------------------------------------------------

    async def where(self, tx: Tx, conversation_id: int, *, lock: bool = True, runs: bool = True) -> Where:
        """The conversation, its row taken when ``lock`` — after its unfinished runs' rows (``runs``): a worker's
        finishing commit holds its run and then takes the conversation (``runs=False``, as it delivers), so
        everything takes them in that order and nothing waits on the other in a circle."""
        if lock and runs:
            await tx.of(DeskTables).lock_runs(conversation_key(conversation_id))
        conversation = await (tx.of(DeskTables).lock_conversation(conversation_id) if lock else tx.of(DeskTables).conversation(conversation_id))
        if conversation is None or conversation.inbox_id not in self.inboxes:
            raise RequestRefused(404, "no such conversation")
        contact = await tx.of(DeskTables).contact(conversation.contact_id)
        assert contact is not None  # a foreign key
        return Where(conversation, contact, self.inboxes[conversation.inbox_id].row)

    async def contacts_conversation(self, tx: Tx, contact: Contact, conversation_id: int, *, lock: bool = True) -> Where:
        """The contact's own conversation; another's is 404, exactly as one that does not exist (no probing)."""
        where = await self.where(tx, conversation_id, lock=lock)
        if where.contact.id != contact.id:
            raise RequestRefused(404, "no such conversation")
        return where

    # --- the state, changed and told ---------------------------------------------------------------------

    async def become(self, tx: Tx, where: Where, state: State, *, cause: Cause | None = None,
                     run_id: int | None = None) -> Where:
        """The conversation as ``state`` says, told; what it means for its figures recorded: a bot's conversation
        going to people is a handoff (``cause``: why), which gets its summary (``summarise``) and, like any move to
        people, a person found for it (``router``); a resolved one the contact wrote in again is reopened."""
        before = where.conversation
        if state == state_of(before):
            return where
        was = state_of(before)
        summarise: str | None = None
        if cause == "wrote" and was.status == "resolved" and state.status != "resolved":
            await self.record(tx, where, "reopened")
        elif cause is not None and cause != "wrote" and state.status == "open" and (
                was.status == "pending" or (state.bot_off and not was.bot_off)):
            # It goes to people: a person is found for it (``router``). Counted as a handoff only when it leaves a
            # bot — asking for a person before any bot had it is the contact's way in, not a bot's handoff.
            if _the_bots(was):
                await self.record(tx, where, "handed", cause=cause, bot=was.handler_bot, run_id=run_id)
                summarise = was.handler_bot
            await tx.of(DeskTables).mark_handed(before.id)
            log.info("desk conversation %s goes to people (%s)", before.id, cause,
                     extra={"room": where.key, "bot": was.handler_bot})
        after = await tx.of(DeskTables).save_conversation(before.id, status=state.status, handler_bot=state.handler_bot,
                                                assignee=state.assignee, bot_off=state.bot_off,
                                                resolution=state.resolution)
        now = where.now(after)
        await self.changes.status(tx, now, before)
        if summarise is not None:
            await self.summarise(tx, now, summarise, cause=cause)
        log.info("desk conversation %s: %s → %s", before.id, before.status, after.status,
                 extra={"room": where.key, "bot": after.handler_bot})
        return now

    async def record(self, tx: Tx, where: Where, kind: str, *, cause: str | None = None, bot: str | None = None,
                     by: str | None = None, run_id: int | None = None) -> None:
        """Something that happened to the conversation, as its figures count it (``appservice.desk.outcomes``)."""
        await tx.of(DeskTables).record_outcome(where.conversation.id, where.inbox.id, kind, cause=cause, bot=bot,
                                               by=by, run_id=run_id)

    # --- the summary at the top of a handoff (``summary``) -------------------------------------------------

    def summarises(self, bot: Bot) -> bool:
        said = HANDOFF_SUMMARY.of(bot)
        return self.handoff_summary if said is None else said

    async def summarise(self, tx: Tx, where: Where, slug: str | None, *, cause: str | None = None) -> None:
        """A conversation just handed to people gets its summary: by its bot when the bot's file (or the desk)
        says so — the desk's plain one when the bot cannot write it (refused, or its provider is what failed)."""
        bot = self.bot(slug) if slug else None
        if bot is None or not self.summarises(bot):
            return
        if cause != "failure":
            asked = await self.asking.summarise(tx, where, bot, self.words("summary_prompt"))
            if isinstance(asked, Summoned):
                return
        await self.plain_summary(tx, where, bot)

    async def plain_summary(self, tx: Tx, where: Where, bot: Bot | None) -> Message | None:
        """The desk's own summary, from the record (``summary.plain``), as a private note marked as the desk's
        (none when the site's strings have no ``summary_plain``: the desk has no words of its own)."""
        template = self.words("summary_plain")
        if not template:
            return None
        messages = await tx.of(DeskTables).last_messages(where.conversation.id, private=False, limit=50)
        said = [Said("contact" if m.sender_type == "contact" else "bot" if m.sender_type == "agent_bot" else "person",
                     m.content)
                for m in messages if m.message_type in ("incoming", "outgoing") and not m.content_attributes.get("ending")]
        text = plain(said, await tx.of(DeskTables).tickets_of(where.key), template=template,
                     nothing=self.words("summary_nothing"))
        return await self.say(tx, where, message_type="outgoing", content=text, sender_type="system", private=True,
                              attributes={"summary": "desk", **({"for_bot": bot.slug} if bot else {})})

    async def say(self, tx: Tx, where: Where, *, message_type: str, content: str, sender_type: str,
                  **fields: Any) -> Message:
        message = await tx.of(DeskTables).insert_message(where.conversation.id, message_type=message_type, content=content,
                                               sender_type=sender_type, **fields)
        assert message is not None  # only a contact's send carries an echo id
        await tx.of(DeskTables).touch(where.conversation.id)
        await self.changes.message(tx, where, message)
        return message

    async def activity(self, tx: Tx, where: Where, key: str, *, attributes: dict[str, Any] | None = None,
                       **fields: str) -> None:
        """One of the desk's own lines, in the site's words (none: nothing is said)."""
        words = self.words(key, **fields)
        if words:
            await self.say(tx, where, message_type="activity", content=words, sender_type="system",
                           attributes=attributes)

    async def told_who(self, tx: Tx, where: Where, name: str) -> None:
        """The contact is told who has their conversation now, and that they need not repeat anything."""
        await self.activity(tx, where, "assigned", attributes={"assigned": name}, name=name)

    async def promise(self, tx: Tx, where: Where, when: str | None) -> None:
        """Nobody can take it now: the contact is told when a person will answer (``when``: the next opening, in
        the inbox's time; None: as soon as one is free), and the promise is kept with the message."""
        if when is None:
            await self.activity(tx, where, "promise_soon", attributes={"promise": None})
        else:
            await self.activity(tx, where, "promise_at", attributes={"promise": when}, when=when)

    # --- contacts and conversations ----------------------------------------------------------------------

    async def start(self, tx: Tx, contact: Contact) -> Where:
        """A new conversation: its ``offer: always`` bot's, else people's. With no usable provider no bot can
        answer (no provider, no bots): people's at once, and a contact who would have had an assistant is told
        a person will answer. Refused when the contact holds as many as they may (open or pending, or started
        in the last day), counted under their row."""
        assert contact.inbox_id is not None
        await tx.of(DeskTables).lock_contact(contact.id)
        held = await tx.of(DeskTables).conversations_held(contact.id, DAY)
        if held >= self.conversations_per_contact:
            log.warning("contact %s holds %d conversations; a new one refused", contact.id, held)
            raise RequestRefused(429, self.words("too_many_new"))
        roster = self.roster(contact.inbox_id)
        facts = await contact_facts(tx, contact, self.server_name, private=True)
        always = roster.handler_for(facts)
        usable = await tx.workers.provider_usable(LIVENESS_SECONDS)
        state = rules.at_start(always if usable else None, agent_bot=self.has_agent_bot(contact.inbox_id))
        conversation = await tx.of(DeskTables).insert_conversation(contact.inbox_id, contact.id, status=state.status,
                                                         handler_bot=state.handler_bot)
        log.info("desk conversation %s started (%s)", conversation.id, conversation.status,
                 extra={"room": f"desk:{conversation.id}", "bot": conversation.handler_bot})
        where = Where(conversation, contact, self.inboxes[contact.inbox_id].row)
        await self.record(tx, where, "started", bot=conversation.handler_bot)
        if state.status == "open" and not (always or roster.offered_to(facts)):
            await tx.of(DeskTables).mark_handed(conversation.id)  # people's from the start: a person is found for it
        if not usable and (always or roster.offered_to(facts)):
            log.warning("desk conversation %s: no provider can answer; it goes to people", conversation.id,
                        extra={"room": where.key})
            await self._no_assistant(tx, where)
        return where

    async def write(self, tx: Tx, where: Where, content: str, *, echo_id: str | None = None) -> Message:
        """The contact wrote ``content``. The same ``echo_id`` again is the same message (nothing twice)."""
        text = content.strip()
        if not text:
            raise RequestRefused(422, "content is empty")
        if len(text) > MAX_CHARS:
            raise RequestRefused(413, f"a message is at most {MAX_CHARS} characters")
        if echo_id is not None:
            seen = await tx.of(DeskTables).message_by_echo(where.conversation.id, echo_id)
            if seen is not None:
                return seen
        await self.pace(tx, where)
        message = await tx.of(DeskTables).insert_message(
            where.conversation.id, message_type="incoming", content=text, sender_type="contact",
            sender_name=contact_name(where.contact, self._registry()), echo_id=echo_id)
        assert message is not None  # the echo id was free under the conversation's lock
        await tx.of(DeskTables).touch(where.conversation.id)
        await self.changes.message(tx, where, message)
        where = await self.become(tx, where, rules.written(state_of(where.conversation)), cause="wrote")
        await self.wake(tx, where, [message])
        return message

    async def pace(self, tx: Tx, where: Where) -> None:
        """Refused (429, in the site's words) when the contact is over their messages a minute."""
        await tx.of(DeskTables).lock_contact(where.contact.id)
        if await tx.of(DeskTables).sent_lately(where.contact.id, 60) >= self.messages_per_minute:
            log.warning("contact %s is over %d messages a minute; refused", where.contact.id, self.messages_per_minute,
                        extra={"room": where.key})
            raise RequestRefused(429, self.words("too_fast"))

    async def wake(self, tx: Tx, where: Where, asking: list[Message]) -> None:
        """What the contact's words start: the conversation's bot, or an offer of one; and the hearers."""
        state = state_of(where.conversation)
        if not state.bots_may_start:
            log.info("desk conversation %s: the contact asked for a person; no bot starts", where.conversation.id,
                     extra={"room": where.key})
            return
        registry = self._registry()
        roster = self.roster(where.inbox.id)
        handler = registry.get(state.handler_bot) if state.bots_answer and state.handler_bot else None
        if handler is not None:
            asked = await self.asking.ask(tx, where, handler, asking, asked=True)
            where = await self._unless_no_assistant(tx, where, asked)
        elif state.status == "open" and state.assignee is None:
            await self._offer(tx, where, roster)
        for bot in roster.hearers:
            if handler is None or bot.slug != handler.slug:
                await self.asking.ask(tx, where, bot, asking, asked=False)

    async def _unless_no_assistant(self, tx: Tx, where: Where, asked: Summoned | Refused) -> Where:
        """The conversation's bot could not be summoned because no provider can answer: the conversation goes
        to people (its bot kept, so the staff can send it back), and the contact is told a person will answer
        — once: it is people's now, and nothing asks its bot again."""
        if not (isinstance(asked, Refused) and asked.reason == "no_provider"):
            return where
        log.warning("desk conversation %s: no provider can answer; it goes to people", where.conversation.id,
                    extra={"room": where.key, "bot": where.conversation.handler_bot})
        where = await self.become(tx, where, rules.no_assistant(state_of(where.conversation)), cause="failure")
        await self._no_assistant(tx, where)
        return where

    async def _no_assistant(self, tx: Tx, where: Where) -> None:
        """A person will answer, in the site's words: marked as the desk's own line, so the staff see it too."""
        words = self.words(NO_ASSISTANT)
        if words:
            await self.say(tx, where, message_type="activity", content=words, sender_type="system",
                           attributes={"activity": NO_ASSISTANT})

    async def _offer(self, tx: Tx, where: Where, roster: Roster) -> None:
        """Offer the ``offer: ask`` bots once while the question is unanswered (a button per bot, not one
        under every message: routing is the desk's job, not the person's)."""
        facts = await contact_facts(tx, where.contact, self.server_name, private=True)
        bots = roster.offered_to(facts)
        if not bots or await tx.of(DeskTables).offered_since_answer(where.conversation.id):
            return
        if not await tx.workers.provider_usable(LIVENESS_SECONDS):
            log.info("desk conversation %s: no provider can answer; no assistant is offered", where.conversation.id,
                     extra={"room": where.key})
            return
        items = [{"title": self.words("offer_choice", bot=bot.name) or bot.name, "value": OFFER_PREFIX + bot.slug}
                 for bot in bots]
        await self.say(tx, where, message_type="template", content=self.words("offer"), sender_type="system",
                       content_type="input_select", attributes={"items": items})

    # --- presses ---------------------------------------------------------------------------------------

    async def press(self, tx: Tx, where: Where, message_id: int, value: str) -> Message | None:
        """The contact pressed choice ``value`` of message ``message_id``: taken once (a second press, in
        another tab too, gets None: it is gone — and is recorded all the same); a bot's offer of itself makes
        it the conversation's bot, and a choice under an answer is said in the contact's name, as their
        next words."""
        message = await tx.of(DeskTables).message(message_id)
        if message is None or message.conversation_id != where.conversation.id or message.private:
            raise RequestRefused(404, "no such message")
        if message.content_type != "input_select":
            raise RequestRefused(422, "this message offers no choices")
        items = [i for i in message.content_attributes.get("items") or [] if isinstance(i, dict)]
        item = next((i for i in items if i.get("value") == value), None)
        if item is None:
            raise RequestRefused(422, f"no choice {value!r} here (choices: {', '.join(str(i.get('value')) for i in items)})")
        taken = await tx.of(DeskTables).take_choice(message.id, value)
        await tx.of(DeskTables).record_press(message.id, where.contact.id, value, taken=taken is not None)
        if taken is None:
            return None
        await self.changes.message(tx, where, taken, created=False)
        if message.message_type == "template" and message.content_attributes.get("rating"):
            await self.rate(tx, where, int(value))
            return taken
        if message.message_type == "template" and value.startswith(OFFER_PREFIX):
            bot = self._registry().get(value[len(OFFER_PREFIX):])
            if bot is None:
                raise RequestRefused(410, "that assistant is not available any more")
            where = await self.become(tx, where, rules.chosen(state_of(where.conversation), bot.slug))
            asking = await tx.of(DeskTables).unanswered(where.conversation.id)
            if asking:
                asked = await self.asking.ask(tx, where, bot, asking, asked=True)
                await self._unless_no_assistant(tx, where, asked)
            return taken
        label = str(item.get("title") or value)
        await self.write(tx, where, label)
        return taken

    # --- the way out, and the end -----------------------------------------------------------------------

    async def talk_to_a_person(self, tx: Tx, where: Where, *, cause: Cause = "contact",
                               run_id: int | None = None) -> Where:
        """Not a request the bot is asked to honour: the bot is off here, the runs thinking are cancelled,
        and the choices on offer go (nobody is offered another lap of the assistant). The contact asking is
        one ``cause``; a bot handing over by its tool (``run_id``: that run goes on to say its last words) or by
        its words are the others that take this way."""
        state = state_of(where.conversation)
        if state.bot_off and state.status == "open":
            return where
        if run_id is not None:
            cancelled = await tx.of(DeskTables).cancel_other_runs(where.key, run_id)
        else:
            cancelled = await tx.runs.request_cancel(where.key, None, None)
        if cancelled:
            log.info("desk conversation %s: handed to people (%s); run(s) %s told to stop",
                     where.conversation.id, cause, cancelled, extra={"room": where.key})
        for gone in await tx.of(DeskTables).withdraw_choices(where.conversation.id):
            await self.changes.message(tx, where, gone, created=False)
        where = await self.become(tx, where, rules.talk_to_a_person(state), cause=cause, run_id=run_id)
        await self.activity(tx, where, "handed_over")
        return where

    async def feedback(self, tx: Tx, where: Where, message_id: int, helped: bool) -> Where:
        """Did that help? Yes: a confirmed resolution. No: a person."""
        message = await tx.of(DeskTables).message(message_id)
        if message is None or message.conversation_id != where.conversation.id:
            raise RequestRefused(404, "no such message")
        marked = await tx.of(DeskTables).set_feedback(message.id, "helped" if helped else "human")
        if marked is None:
            raise RequestRefused(422, "only a bot's answer is asked whether it helped")
        await self.changes.message(tx, where, marked, created=False)
        if not helped:
            return await self.talk_to_a_person(tx, where)
        return await self.become(tx, where, rules.helped(state_of(where.conversation)))

    async def resolve(self, tx: Tx, where: Where, how: Resolution | None) -> Where:
        """Resolved: ``confirmed`` (the contact said so), ``assumed`` (they left a bot's answer), or None (the
        staff: the resolution it had, if any). The contact is asked once per conversation how it went."""
        state = state_of(where.conversation)
        if state.status == "resolved" and state.resolution == (how or state.resolution):
            return where
        where = await self.become(tx, where, rules.resolved(state, how or state.resolution))
        await self.record(tx, where, "resolved", cause=how or state.resolution or "staff")
        await self.activity(tx, where, "resolved")
        await self._ask_rating(tx, where)
        return where

    async def _ask_rating(self, tx: Tx, where: Where) -> None:
        """How did it go, 1-5, as buttons: once per conversation, however often it is resolved."""
        question = self.words("rate")
        if not question or await tx.of(DeskTables).rating_asked(where.conversation.id):
            return
        items = [{"title": self.words(f"rate_{n}") or str(n), "value": str(n)} for n in range(1, 6)]
        await self.say(tx, where, message_type="template", content=question, sender_type="system",
                       content_type="input_select", attributes={"items": items, "rating": True})

    async def rate(self, tx: Tx, where: Where, value: int) -> bool:
        """The contact's one rating of the conversation; False when it was rated before."""
        rated = await tx.of(DeskTables).record_rating(where.conversation.id, where.inbox.id, value)
        if rated:
            log.info("desk conversation %s rated %d", where.conversation.id, value, extra={"room": where.key})
            await self.activity(tx, where, "rated")
        return rated

    async def resolve_idle(self, tx: Tx, conversation_id: int) -> None:
        """A bot's answer left without asking for more: an assumed resolution (unless it was confirmed)."""
        where = await self.where(tx, conversation_id)
        if where.conversation.status == "pending":
            await self.resolve(tx, where, where.conversation.resolution or "assumed")  # type: ignore[arg-type]

    # --- the staff ------------------------------------------------------------------------------------

    async def staff_says(self, tx: Tx, where: Where, content: str, *, staff: str, private: bool = False,
                         bot: str | None = None, matrix_event: str | None = None) -> Message:
        """A person on the staff wrote: a private note, or an answer to the contact — then they have it (the
        bot stops, the offers go: the question is answered)."""
        text = content.strip()
        if not text:
            raise RequestRefused(422, "content is empty")
        if len(text) > MAX_CHARS:
            raise RequestRefused(413, f"a message is at most {MAX_CHARS} characters")
        if private:
            return await self.say(tx, where, message_type="outgoing", content=text, sender_type="user",
                                  sender_name=staff, private=True)
        await self._people_take_it(tx, where)
        await self.record(tx, where, "person_answered", by=staff)
        # Where it was written (a staff room's event) is kept so it is not mirrored back there.
        attributes = {**({"drafted_by": bot} if bot else {}), **({"matrix_event": matrix_event} if matrix_event else {})}
        message = await self.say(tx, where, message_type="outgoing", content=text, sender_type="user",
                                 sender_name=staff, attributes=attributes or None)
        await self.become(tx, where, rules.staff_replied(state_of(where.conversation), staff), cause="staff")
        return message

    async def _people_take_it(self, tx: Tx, where: Where) -> None:
        await tx.runs.request_cancel(where.key, None, None)
        for gone in await tx.of(DeskTables).withdraw_choices(where.conversation.id):
            await self.changes.message(tx, where, gone, created=False)

    async def toggle(self, tx: Tx, where: Where, status: Status) -> Where:
        state = state_of(where.conversation)
        then = rules.toggled(state, status, self.roster(where.inbox.id).default_bot(),
                             agent_bot=self.has_agent_bot(where.inbox.id))
        if then is None:
            raise RequestRefused(422, "no bot works this inbox to hand the conversation to")
        if status == "open" and state.status == "pending":
            await tx.runs.request_cancel(where.key, None, None)
        if status == "resolved":
            return await self.resolve(tx, where, None)
        where = await self.become(tx, where, then, cause="staff")
        if status == "pending" and state.status != "pending":
            # Given back to the bot: it answers what is still unanswered.
            asking = await tx.of(DeskTables).unanswered(where.conversation.id)
            if asking:
                await self.wake(tx, where, asking)
        return where

    async def assign(self, tx: Tx, where: Where, staff: str | None) -> Where:
        if staff is not None and where.conversation.status == "pending":
            await tx.runs.request_cancel(where.key, None, None)
        return await self.become(tx, where, rules.assigned(state_of(where.conversation), staff), cause="staff")

    async def send_draft(self, tx: Tx, where: Where, message_id: int, *, staff: str, content: str | None = None,
                         matrix_event: str | None = None) -> Message:
        """A person sends a bot's draft to the contact — as it is, or in their own words."""
        draft = await self._draft(tx, where, message_id)
        settled = await tx.of(DeskTables).settle_draft(draft.id, "sent" if content is None else "edited", staff)
        if settled is None:
            raise RequestRefused(409, "this draft was already sent or discarded")
        await self.changes.message(tx, where, settled, created=False)
        return await self.staff_says(tx, where, draft.content if content is None else content, staff=staff,
                                     bot=draft.bot, matrix_event=matrix_event)

    async def discard_draft(self, tx: Tx, where: Where, message_id: int, *, staff: str) -> Message:
        draft = await self._draft(tx, where, message_id)
        settled = await tx.of(DeskTables).settle_draft(draft.id, "discarded", staff)
        if settled is None:
            raise RequestRefused(409, "this draft was already sent or discarded")
        await self.changes.message(tx, where, settled, created=False)
        return settled

    async def _draft(self, tx: Tx, where: Where, message_id: int) -> Message:
        draft = await tx.of(DeskTables).message(message_id)
        if draft is None or draft.conversation_id != where.conversation.id or draft.draft is None:
            raise RequestRefused(404, "no such draft")
        return draft
