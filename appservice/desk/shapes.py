"""The desk's JSON, in Chatwoot's shapes (``../shared/notes/desk-facts.md`` §1.2), so a team that knows
Chatwoot recognises it and its client libraries' shapes fit. Pure.

Chatwoot's own quirks are kept where a client would read them: a webhook's top-level ``message_type`` is a
string while ``conversation.messages[].message_type`` is a number; times are unix seconds except a webhook
message's ``created_at`` (ISO). What is ours alone rides alongside, never in place of a Chatwoot field:
``bot`` (which bot wrote it, so a widget knows whether a person has answered yet), ``bot_off``,
``handler_bot``, ``resolution``, ``draft`` and ``feedback``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from appservice.desk.tables import Contact, Conversation, Inbox, Message

MESSAGE_TYPES = {"incoming": 0, "outgoing": 1, "activity": 2, "template": 3}
SENDER_TYPES = {"contact": "Contact", "user": "User", "agent_bot": "AgentBot"}
CHANNEL = "Channel::WebWidget"


def unix(at: datetime) -> int:
    return int(at.timestamp())


def iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def contact_json(contact: Contact) -> dict[str, Any]:
    return {"id": contact.id, "name": contact.name or "", "email": contact.email, "source_id": str(contact.source_id),
            "identifier": contact.user_id, "hmac_verified": contact.hmac_verified, "type": "contact"}


def sender_json(message: Message, contact_id: int | None = None) -> dict[str, Any] | None:
    if message.sender_type == "contact":
        return {"id": contact_id, "name": message.sender_name or "", "type": "contact"}
    if message.sender_type in ("user", "agent_bot"):
        return {"name": message.sender_name or "", "type": message.sender_type, "bot": message.bot}
    return None  # the desk's own lines (an activity, an offer) are nobody's


def attributes(message: Message) -> dict[str, Any]:
    """``content_attributes``: a choice's items with what was taken (``submitted_values``) or that it went."""
    attrs = dict(message.content_attributes)
    if message.content_type == "input_select":
        items = attrs.get("items") or []
        if message.taken_value is not None:
            attrs["submitted_values"] = [i for i in items if isinstance(i, dict) and i.get("value") == message.taken_value]
        if message.withdrawn_at is not None:
            attrs["withdrawn"] = True
    return attrs


def message_json(message: Message, contact_id: int | None = None) -> dict[str, Any]:
    """A message as the public API, the staff API and the event stream show it."""
    shown: dict[str, Any] = {
        "id": message.id,
        "content": message.content,
        "message_type": message.message_type,
        "content_type": message.content_type,
        "content_attributes": attributes(message),
        "created_at": unix(message.created_at),
        "conversation_id": message.conversation_id,
        "private": message.private,
        "status": message.status,
        "echo_id": message.echo_id,
        "sender": sender_json(message, contact_id),
        "attachments": [],
        "bot": message.bot,
    }
    if message.feedback is not None:
        shown["feedback"] = message.feedback
    if message.draft is not None:
        shown["draft"] = message.draft
    return shown


def webhook_message_json(message: Message, contact_id: int) -> dict[str, Any]:
    """A message inside a webhook's ``conversation.messages``: Chatwoot's numbered types."""
    return {
        "id": message.id, "content": message.content, "message_type": MESSAGE_TYPES[message.message_type],
        "created_at": unix(message.created_at), "conversation_id": message.conversation_id,
        "private": message.private, "status": message.status, "content_type": message.content_type,
        "content_attributes": attributes(message), "sender_type": SENDER_TYPES.get(message.sender_type),
        "sender_id": contact_id if message.sender_type == "contact" else None,
    }


def assignee_json(conversation: Conversation) -> dict[str, Any] | None:
    return {"name": conversation.assignee, "type": "user"} if conversation.assignee else None


def conversation_json(conversation: Conversation, contact: Contact, messages: list[Message]) -> dict[str, Any]:
    """A conversation (public and staff alike; the staff's ``messages`` carry private notes too)."""
    return {
        "id": conversation.id,
        "inbox_id": conversation.inbox_id,
        "status": conversation.status,
        "can_reply": True,
        "contact": contact_json(contact),
        "messages": [message_json(m, contact.id) for m in messages],
        "meta": {"sender": contact_json(contact), "assignee": assignee_json(conversation),
                 "agent_bot": conversation.handler_bot,
                 # The summary at the top of a handoff (staff only: only their messages carry private notes).
                 **({"summary": summary_json(found)} if (found := latest_summary(messages)) else {})},
        "handler_bot": conversation.handler_bot,
        "bot_off": conversation.bot_off_at is not None,
        "resolution": conversation.resolution,
        "created_at": unix(conversation.created_at),
        "timestamp": unix(conversation.updated_at),
        # The number of its last event: a reader that has these messages streams from here (Last-Event-ID).
        "last_event_id": conversation.seq,
    }


def latest_summary(messages: list[Message]) -> Message | None:
    return next((m for m in reversed(messages) if m.private and m.content_attributes.get("summary")), None)


def summary_json(message: Message) -> dict[str, Any]:
    return {"message_id": message.id, "content": message.content, "by": message.content_attributes.get("summary"),
            "bot": message.bot, "created_at": unix(message.created_at)}


def status_json(conversation: Conversation) -> dict[str, Any]:
    """What a status change says on the event stream."""
    return {"conversation_id": conversation.id, "status": conversation.status,
            "handler_bot": conversation.handler_bot, "bot_off": conversation.bot_off_at is not None,
            "assignee": assignee_json(conversation), "resolution": conversation.resolution}


def _webhook_conversation(conversation: Conversation, contact: Contact, inbox: Inbox,
                          messages: list[Message]) -> dict[str, Any]:
    return {
        "id": conversation.id, "inbox_id": inbox.id, "channel": CHANNEL, "can_reply": True,
        "status": conversation.status,
        "additional_attributes": {},
        "contact_inbox": {"contact_id": contact.id, "inbox_id": inbox.id, "source_id": str(contact.source_id),
                          "hmac_verified": contact.hmac_verified},
        "messages": [webhook_message_json(m, contact.id) for m in messages],
        "meta": {"sender": contact_json(contact), "assignee": assignee_json(conversation)},
        "unread_count": 0, "agent_last_seen_at": 0, "contact_last_seen_at": 0,
        "timestamp": unix(conversation.updated_at),
        "handler_bot": conversation.handler_bot, "bot_off": conversation.bot_off_at is not None,
        "resolution": conversation.resolution,
    }


def webhook_message(event: str, message: Message, conversation: Conversation, contact: Contact, inbox: Inbox,
                    account: dict[str, Any]) -> dict[str, Any]:
    """``message_created`` / ``message_updated``: the message at the top level (Chatwoot's §1.2(a))."""
    return {
        "event": event,
        "id": message.id,
        "content": message.content,
        "created_at": iso(message.created_at),
        "message_type": message.message_type,
        "content_type": message.content_type,
        "private": message.private,
        "content_attributes": attributes(message),
        "source_id": None,
        "sender": sender_json(message, contact.id),
        "inbox": {"id": inbox.id, "name": inbox.title},
        "conversation": _webhook_conversation(conversation, contact, inbox, [message]),
        "account": account,
        "bot": message.bot,
    }


def webhook_conversation(event: str, conversation: Conversation, contact: Contact, inbox: Inbox,
                         messages: list[Message], account: dict[str, Any]) -> dict[str, Any]:
    """``conversation_opened`` / ``conversation_resolved`` / ``conversation_status_changed``: the conversation
    object at the top level."""
    return {"event": event, **_webhook_conversation(conversation, contact, inbox, messages),
            "inbox": {"id": inbox.id, "name": inbox.title}, "account": account}
