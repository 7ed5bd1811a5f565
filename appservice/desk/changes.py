"""What changed in a desk conversation, said once and heard by everything that follows it — in the
transaction that made the change, so a change and its telling stand or fall together.

Every change is an event of the conversation (``desk_events``, numbered in commit order): what the
widget's event stream replays and resumes from. The watchers — the outgoing webhooks, the staff room in
Matrix — are handed the same change, and queue what they will send in the same commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from appservice.desk.shapes import message_json, status_json
from appservice.desk.tables import Contact, Conversation, DeskTables, Inbox, Message
from engine.store import Tx

MESSAGE_CREATED = "message_created"
MESSAGE_UPDATED = "message_updated"
STATUS_CHANGED = "conversation_status_changed"
TYPING = "typing"


@dataclass(frozen=True)
class Where:
    """A conversation as it stands, with its contact and its inbox."""

    conversation: Conversation
    contact: Contact
    inbox: Inbox

    @property
    def key(self) -> str:
        """The conversation as the engine knows it: its runs' ``room_id`` and ``conversation``."""
        return conversation_key(self.conversation.id)

    @property
    def contact_key(self) -> str:
        """The contact as the engine knows them: the runs' subject (``agent_subject_v1``), the ceilings' person."""
        return contact_key(self.contact.id)

    def now(self, conversation: Conversation) -> Where:
        return Where(conversation, self.contact, self.inbox)


def conversation_key(conversation_id: int) -> str:
    return f"desk:{conversation_id}"


def contact_key(contact_id: int) -> str:
    return f"contact:{contact_id}"


class Watcher(Protocol):
    async def message(self, tx: Tx, where: Where, message: Message, *, created: bool) -> None:
        """A message was written (``created``) or changed (a choice taken or withdrawn, a draft settled)."""

    async def status(self, tx: Tx, where: Where, before: Conversation) -> None:
        """The conversation changed hands or state: ``where`` as it is now, ``before`` as it was."""


def changed_hands(before: Conversation, after: Conversation) -> bool:
    return ((before.status, before.handler_bot, before.assignee, before.bot_off_at is None, before.resolution)
            != (after.status, after.handler_bot, after.assignee, after.bot_off_at is None, after.resolution))


class Changes:
    def __init__(self, watchers: list[Watcher] | None = None) -> None:
        self.watchers: list[Watcher] = list(watchers or [])

    def watch(self, watcher: Watcher) -> None:
        self.watchers.append(watcher)

    async def message(self, tx: Tx, where: Where, message: Message, *, created: bool = True) -> None:
        kind = MESSAGE_CREATED if created else MESSAGE_UPDATED
        await tx.of(DeskTables).event(message.conversation_id, kind, message_json(message, where.contact.id),
                            private=message.private)
        for watcher in self.watchers:
            await watcher.message(tx, where, message, created=created)

    async def status(self, tx: Tx, where: Where, before: Conversation) -> None:
        if not changed_hands(before, where.conversation):
            return
        await tx.of(DeskTables).event(where.conversation.id, STATUS_CHANGED, status_json(where.conversation))
        for watcher in self.watchers:
            await watcher.status(tx, where, before)

    async def typing(self, tx: Tx, conversation_id: int, bot: str, name: str, on: bool) -> None:
        """A bot is (or stopped) working on an answer the contact will read."""
        await tx.of(DeskTables).event(conversation_id, TYPING, {"conversation_id": conversation_id, "bot": bot, "name": name,
                                                      "on": on})
