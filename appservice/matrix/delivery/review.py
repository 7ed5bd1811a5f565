"""What a staff room that reviews a bot's drafts is made of, for every surface that has one (the desk's staff room,
the social surface's review place): the two keys a draft is pressed with, someone else's words quoted as written,
and a post in a conversation's thread."""

from __future__ import annotations

import html
from typing import Any

SEND = "✅"
DISCARD = "🗑"
VARIATION = "\ufe0f"  # 🗑️ and 🗑 are one key to a person; clients send either


def contact_line(name: str, text: str) -> dict[str, Any]:
    """A contact's words as a notice: their own text, escaped — whatever HTML they wrote shows as written."""
    formatted = f"<b>{html.escape(name)}</b>: {html.escape(text)}".replace("\n", "<br>")
    return {"msgtype": "m.notice", "body": f"{name}: {text}", "format": "org.matrix.custom.html",
            "formatted_body": formatted, "m.mentions": {}}


def in_thread(content: dict[str, Any]) -> dict[str, Any]:
    """In the conversation's thread: the root's event id is filled in by the outbox once the root is sent."""
    return {**content, "m.relates_to": {"rel_type": "m.thread", "event_id": None, "is_falling_back": True,
                                        "m.in_reply_to": {"event_id": None}}}
