"""The opening of a run's conversation: the context it was handed, as a person reads it. Pure.

A context (written on the run row by the surface) is ``{"kind", "header"?, "note"?, "lines": [...],
"later"?: [...], "later_header"?}``: each line ``{"name", "sender", "said", "member"?}``. ``later`` holds
lines the asker added while the run was still being worked on (a second mention joins the live run
rather than starting another); they reach the model as steps, under their own framing words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engine.core.messages import CHARS_PER_TOKEN, Message

# The token budget a run's context is given (the surfaces keep the newest lines that fit it); the lines that
# join a live run and each tool result get the same, so nothing reaches the model unbounded.
CONTEXT_TOKENS = 6000


def _said(line: dict[str, Any]) -> str:
    # A membership line ("Alice joined.") is already a sentence about its person.
    if line.get("member"):
        return str(line.get("said", ""))
    return f"{line.get('name') or line.get('sender')}: {line.get('said', '')}"


def transcript(context: dict[str, Any], key: str = "lines") -> str:
    lines: Sequence[Any] = context.get(key) or []
    return "\n".join(_said(line) for line in lines if isinstance(line, dict))


def opening(context: dict[str, Any], prompt: str) -> tuple[Message, ...]:
    """One user turn: the framing words (strings, when the site has them), the transcript, and — when the
    asker's words are not already its last line — what was asked. (What they said since comes as steps:
    ``said_since``.)"""
    parts: list[str] = []
    # What the bot remembers of the person (``engine.core.memory``) comes first: the live conversation sits
    # nearest the question.
    remembered = context.get("remembered")
    if isinstance(remembered, str) and remembered:
        parts.append(remembered)
    header = context.get("header")
    if isinstance(header, str) and header:
        parts.append(header)
    note = context.get("note")
    if isinstance(note, str) and note:
        parts.append(note)
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


def later_of(context: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines that joined the run after it was asked (a second mention while it worked)."""
    return [line for line in (context.get("later") or []) if isinstance(line, dict)]


def said_since(context: dict[str, Any], already: int, tokens: int = CONTEXT_TOKENS) -> tuple[str, int]:
    """The ``later`` lines after the first ``already`` (what the asker added while the run worked), framed
    by their words, and how many there are. They reach the model as a step of their own (``HeardStep``),
    in the order they were heard — the newest that fit ``tokens`` (the context's budget), the newest one
    shortened if it alone is over: a flood of joining lines reaches the model bounded."""
    later = later_of(context)[already:]
    if not later:
        return "", 0
    header = context.get("later_header")
    header = header if isinstance(header, str) and header else ""
    budget = max(0, tokens * CHARS_PER_TOKEN - len(header))
    kept: list[str] = []
    for line in reversed(later):
        said = _said(line)
        if kept and len(said) + 1 > budget:
            break
        kept.append(capped(said, budget // CHARS_PER_TOKEN) if not kept else said)
        budget -= len(kept[-1]) + 1
    text = "\n".join(reversed(kept))
    return (f"{header}\n{text}" if header else text), len(later)


def capped(text: str, tokens: int = CONTEXT_TOKENS) -> str:
    """``text`` within ``tokens`` (about four characters a token): cut at the end, saying how much was cut,
    so the model knows it did not see it all."""
    limit = max(0, tokens) * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    keep = max(0, limit - 64)  # room for the note (it is shorter than that)
    return text[:keep] + f"\n[… {len(text) - keep} more characters not shown]"
