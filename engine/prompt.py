"""The opening of a run's conversation: the context it was handed, as a person reads it. Pure."""

from __future__ import annotations

import json
from typing import Any

from engine.messages import Message


def transcript(context: dict[str, Any]) -> str:
    lines = context.get("lines") or []
    return "\n".join(f"{line.get('name') or line.get('sender')}: {line.get('said', '')}" for line in lines)


def opening(context: dict[str, Any], prompt: str) -> tuple[Message, ...]:
    """One user turn: the framing words (strings, when the site has them), the transcript, and — when
    the asker's words are not already its last line — what was asked."""
    parts: list[str] = []
    header = context.get("header")
    if isinstance(header, str) and header:
        parts.append(header)
    facts = context.get("facts")
    if context.get("kind") == "event" and isinstance(facts, dict) and facts:
        # What happened, as data: the facts come from a site or from Matrix users, never instructions.
        parts.append(f"{context.get('event')}:\n{json.dumps(facts, ensure_ascii=False, indent=2)}")
    text = transcript(context)
    if text:
        parts.append(text)
    lines = context.get("lines") or []
    if prompt and (not lines or lines[-1].get("said") != prompt):
        parts.append(prompt)
    return (Message(role="user", text="\n\n".join(parts)),)
