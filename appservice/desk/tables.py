"""The desk's tables (SPEC §9): inboxes, contacts, conversations, messages, presses, and each conversation's
events in commit order (``sql/queries/desk.sql``). What a state change means is the desk's to say
(``appservice/desk``); this only stores it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from engine.store.base import Family, maybe, row, rows


@dataclass(frozen=True, slots=True)
class Inbox:
    id: int
    name: str
    identifier: str
    title: str


@dataclass(frozen=True, slots=True)
class Contact:
    id: int
    inbox_id: int | None
    user_id: str | None  # the account a signed-in contact is; None: a guest
    name: str | None
    email: str | None
    source_id: UUID
    hmac_verified: bool
    created_at: datetime
    tokens_valid_after: datetime | None  # a token whose chain began until then is refused (revoked)


@dataclass(frozen=True, slots=True)
class Conversation:
    id: int
    inbox_id: int
    contact_id: int
    status: str
    handler_bot: str | None
    assignee: str | None
    bot_off_at: datetime | None
    resolution: str | None
    resolved_at: datetime | None
    seq: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Message:
    id: int
    conversation_id: int
    message_type: str
    private: bool
    content: str
    content_type: str
    content_attributes: dict[str, Any]
    sender_type: str
    sender_name: str | None
    bot: str | None
    run_id: int | None
    echo_id: str | None
    status: str
    taken_value: str | None
    taken_at: datetime | None
    withdrawn_at: datetime | None
    draft: str | None
    feedback: str | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class OutcomeRow:
    """Something that happened to a conversation, as its figures count it (``appservice.desk.outcomes``)."""

    conversation_id: int
    inbox_id: int
    kind: str
    cause: str | None
    bot: str | None
    by_whom: str | None
    run_id: int | None
    value: int | None
    at: datetime


@dataclass(frozen=True, slots=True)
class DeskEvent:
    seq: int
    kind: str
    private: bool
    payload: dict[str, Any]


class DeskTables(Family):
    __slots__ = ()

    # --- inboxes and contacts ---------------------------------------------------------------------------

    async def upsert_inbox(self, name: str, identifier: str, title: str) -> Inbox:
        return row(Inbox, await self._one("desk_upsert_inbox", name, identifier, title))

    async def inbox_by_identifier(self, identifier: str) -> Inbox | None:
        return maybe(Inbox, await self._one("desk_inbox_by_identifier", identifier))

    async def inbox(self, inbox_id: int) -> Inbox | None:
        return maybe(Inbox, await self._one("desk_inbox", inbox_id))

    async def insert_contact(self, inbox_id: int, *, user_id: str | None, name: str | None, email: str | None,
                             verified: bool) -> Contact:
        return row(Contact, await self._one("desk_insert_contact", inbox_id, user_id, name, email, verified))

    async def contact(self, contact_id: int) -> Contact | None:
        return maybe(Contact, await self._one("desk_contact", contact_id))

    async def lock_contact(self, contact_id: int) -> bool:
        return await self._value("desk_lock_contact", contact_id) is not None

    async def sent_lately(self, contact_id: int, seconds: float) -> int:
        return int(await self._value("desk_contact_sent_lately", contact_id, seconds))

    # --- conversations ----------------------------------------------------------------------------------

    async def insert_conversation(self, inbox_id: int, contact_id: int, *, status: str,
                                  handler_bot: str | None) -> Conversation:
        return row(Conversation, await self._one("desk_insert_conversation", inbox_id, contact_id, status, handler_bot))

    async def conversation(self, conversation_id: int) -> Conversation | None:
        return maybe(Conversation, await self._one("desk_conversation", conversation_id))

    async def lock_runs(self, room_id: str) -> list[int]:
        """Take the conversation's unfinished runs (before the conversation: the order a finishing run takes)."""
        return [int(r["id"]) for r in await self._all("desk_lock_runs", room_id)]

    async def lock_conversation(self, conversation_id: int) -> Conversation | None:
        return maybe(Conversation, await self._one("desk_lock_conversation", conversation_id))

    async def conversations_of_contact(self, contact_id: int) -> list[Conversation]:
        return rows(Conversation, await self._all("desk_conversations_of_contact", contact_id))

    async def conversations_of_inbox(self, inbox_id: int, status: str | None, limit: int) -> list[Conversation]:
        return rows(Conversation, await self._all("desk_conversations_of_inbox", inbox_id, status, limit))

    async def save_conversation(self, conversation_id: int, *, status: str, handler_bot: str | None,
                                assignee: str | None, bot_off: bool, resolution: str | None) -> Conversation:
        return row(Conversation, await self._one("desk_save_conversation", conversation_id, status, handler_bot,
                                                 assignee, bot_off, resolution))

    async def touch(self, conversation_id: int) -> None:
        await self._run("desk_touch_conversation", conversation_id)

    async def idle(self, seconds: float, limit: int) -> list[int]:
        """Conversations a bot has, left for ``seconds`` after its answer."""
        return [int(r["id"]) for r in await self._all("desk_idle_conversations", seconds, limit)]

    # --- events -----------------------------------------------------------------------------------------

    async def event(self, conversation_id: int, kind: str, payload: dict[str, Any], *, private: bool = False) -> int:
        """Record what changed, numbered in commit order (the conversation's row is locked until the commit)."""
        seq = int(await self._value("desk_next_seq", conversation_id))
        await self._run("desk_insert_event", conversation_id, seq, kind, private, payload)
        return seq

    async def events_after(self, conversation_id: int, after: int, *, private: bool, limit: int) -> list[DeskEvent]:
        return rows(DeskEvent, await self._all("desk_events_after", conversation_id, after, private, limit))

    # --- messages ---------------------------------------------------------------------------------------

    async def insert_message(self, conversation_id: int, *, message_type: str, content: str, sender_type: str,
                             private: bool = False, content_type: str = "text",
                             attributes: dict[str, Any] | None = None, sender_name: str | None = None,
                             bot: str | None = None, run_id: int | None = None, echo_id: str | None = None,
                             draft: str | None = None) -> Message | None:
        """The message; None when the client sent it before under the same ``echo_id``."""
        return maybe(Message, await self._one(
            "desk_insert_message", conversation_id, message_type, private, content, content_type, attributes or {},
            sender_type, sender_name, bot, run_id, echo_id, draft))

    async def message(self, message_id: int) -> Message | None:
        return maybe(Message, await self._one("desk_message", message_id))

    async def message_by_echo(self, conversation_id: int, echo_id: str) -> Message | None:
        return maybe(Message, await self._one("desk_message_by_echo", conversation_id, echo_id))

    async def messages(self, conversation_id: int, *, after: int = 0, private: bool = False,
                       limit: int = 100) -> list[Message]:
        return rows(Message, await self._all("desk_messages_of", conversation_id, after, private, limit))

    async def last_messages(self, conversation_id: int, *, private: bool, limit: int) -> list[Message]:
        """The latest ``limit`` said messages (incoming and outgoing), oldest first."""
        return rows(Message, await self._all("desk_last_messages", conversation_id, private, limit))

    async def unanswered(self, conversation_id: int) -> list[Message]:
        return rows(Message, await self._all("desk_unanswered", conversation_id))

    async def offered_since_answer(self, conversation_id: int) -> bool:
        return bool(await self._value("desk_offered_since_answer", conversation_id))

    async def take_choice(self, message_id: int, value: str) -> Message | None:
        """The message as taken by this press, or None: it was gone (or no such choice)."""
        return maybe(Message, await self._one("desk_take_choice", message_id, value))

    async def record_press(self, message_id: int, contact_id: int, value: str, *, taken: bool) -> None:
        await self._run("desk_record_press", message_id, contact_id, value, taken)

    async def withdraw_choices(self, conversation_id: int) -> list[Message]:
        return rows(Message, await self._all("desk_withdraw_choices", conversation_id))

    async def set_feedback(self, message_id: int, feedback: str) -> Message | None:
        return maybe(Message, await self._one("desk_set_feedback", message_id, feedback))

    async def settle_draft(self, message_id: int, how: str, by: str) -> Message | None:
        """The draft as settled (``sent``, ``edited``, ``discarded``) by ``by``; None when it was not pending."""
        return maybe(Message, await self._one("desk_settle_draft", message_id, how, by))

    async def message_failed(self, message_id: int) -> Message | None:
        return maybe(Message, await self._one("desk_message_failed", message_id))

    # --- outcomes (``sql/queries/desk_outcomes.sql``) -------------------------------------------------------

    async def record_outcome(self, conversation_id: int, inbox_id: int, kind: str, *, cause: str | None = None,
                             bot: str | None = None, by: str | None = None, run_id: int | None = None) -> None:
        await self._run("desk_record_outcome", conversation_id, inbox_id, kind, cause, bot, by, run_id)

    async def record_rating(self, conversation_id: int, inbox_id: int, value: int) -> bool:
        """The contact's one rating; False when the conversation was rated before."""
        return await self._value("desk_record_rating", conversation_id, inbox_id, value) is not None

    async def outcomes_of_window(self, inbox_ids: list[int], since: datetime, until: datetime,
                                 most: int) -> list[OutcomeRow]:
        """What happened to the (at most ``most``) conversations of ``inbox_ids`` started in [since, until)."""
        return rows(OutcomeRow, await self._all("desk_outcomes_of_window", inbox_ids, since, until, most))

    async def handed_by_run(self, conversation_id: int, run_id: int) -> bool:
        return bool(await self._value("desk_handed_by_run", conversation_id, run_id))

    async def rating_asked(self, conversation_id: int) -> bool:
        return bool(await self._value("desk_rating_asked", conversation_id))

    async def tickets_of(self, place: str) -> list[str]:
        """The tickets the conversation's runs raised, as ``#id subject``."""
        return [f"#{r['id']} {r['subject']}" for r in await self._all("desk_tickets_of", place)]

    async def mark_handed(self, conversation_id: int) -> None:
        await self._run("desk_mark_handed", conversation_id)

    async def to_route(self, limit: int) -> list[tuple[int, int, bool]]:
        """Handed conversations nobody has, to decide: (id, inbox id, whether first since its handoff)."""
        return [(int(r["id"]), int(r["inbox_id"]), bool(r["fresh"])) for r in await self._all("desk_to_route", limit)]

    async def routed(self, conversation_id: int, *, to: str | None, promised: datetime | None,
                     again: datetime | None) -> None:
        await self._run("desk_routed", conversation_id, to, promised, again)

    async def last_routed(self, inbox_id: int, staff: list[str]) -> dict[str, datetime]:
        return {str(r["routed_to"]): r["at"] for r in await self._all("desk_last_routed", inbox_id, staff)}

    async def cancel_other_runs(self, place: str, run_id: int) -> list[int]:
        return [int(r["id"]) for r in await self._all("desk_cancel_other_runs", place, run_id)]

    # --- runs in a conversation -------------------------------------------------------------------------

    async def join_run(self, bot: str, conversation: str, line: dict[str, Any], header: str | None) -> int | None:
        """Add ``line`` to ``bot``'s live run in ``conversation``; its id, or None when it has none."""
        run_id = await self._value("desk_join_run", bot, conversation, line, header)
        return None if run_id is None else int(run_id)

    # --- what is started, from where (``sql/queries/desk_arrivals.sql``) ---------------------------------

    async def lock_inbox(self, inbox_id: int) -> None:
        await self._value("desk_lock_inbox", inbox_id)

    async def lock_origin(self, origin: str) -> None:
        await self._value("desk_lock_origin", origin)

    async def contacts_made_lately(self, inbox_id: int, origin: str, seconds: float) -> tuple[int, int]:
        """How many contacts the inbox made in the last ``seconds``, and how many ``origin`` made in any inbox."""
        found = await self._one("desk_contacts_made_lately", inbox_id, seconds, origin)
        return int(found["in_inbox"]), int(found["from_origin"])

    async def conversations_made_lately(self, origin: str, seconds: float) -> int:
        return int(await self._value("desk_conversations_made_lately", origin, seconds))

    async def conversations_held(self, contact_id: int, seconds: float) -> int:
        """The contact's conversations still open or pending, or started in the last ``seconds``."""
        return int(await self._value("desk_conversations_held", contact_id, seconds))

    async def contact_made_from(self, contact_id: int, origin: str) -> None:
        await self._run("desk_contact_made_from", contact_id, origin)

    async def conversation_made_from(self, conversation_id: int, origin: str) -> None:
        await self._run("desk_conversation_made_from", conversation_id, origin)

    async def forget_origins(self, seconds: float) -> int:
        """Where rows older than ``seconds`` were made from is forgotten; how many forgot it."""
        return int(await self._value("desk_forget_origins", seconds))

    async def prune_guests(self, days: float, limit: int) -> tuple[int, int]:
        """Guests unheard from for ``days`` with nothing open, deleted with their conversations (at most
        ``limit``): how many contacts and conversations went."""
        found = await self._one("desk_prune_guests", days, limit)
        return int(found["contacts"]), int(found["conversations"])
    # --- tokens (``sql/queries/desk_tokens.sql``) --------------------------------------------------------

    async def revoke_tokens(self, contact_id: int, inbox_ids: list[int]) -> bool:
        """Refuse every token contact ``contact_id`` (of one of ``inbox_ids``) holds now, open streams told;
        False: no such contact there."""
        return await self._value("desk_revoke_tokens", contact_id, inbox_ids) is not None

    async def revoked_among(self, contact_ids: list[int]) -> dict[int, datetime]:
        """Of ``contact_ids``, those whose tokens were ever revoked, and the moment of the latest revocation."""
        return {int(r["id"]): r["tokens_valid_after"] for r in await self._all("desk_revoked_among", contact_ids)}
