"""What a bot is given besides the question, by its ``memory:`` (SPEC §11). Pure.

- ``none`` — the question and nothing else: the conversation the surface handed over is dropped (what the
  asker added while the run worked stays: that is the question too, and an event's facts are its question).
- ``thread`` — the conversation it is in, as the surface handed it. The default.
- ``person`` — and what this subject asked the bot before, in other conversations, oldest first, so the live
  conversation sits nearest the question; the newest that fit what the conversation leaves of the budget.
- ``person+recall`` — and what they told the bot, found by meaning (the recalled memories), oldest first.

The memories themselves are read by the worker (``engine/memory/``) from the run, never from a person.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.core.messages import CHARS_PER_TOKEN
from engine.core.prompt import CONTEXT_TOKENS, capped, transcript

MEMORIES = ("none", "thread", "person", "person+recall")
# What one earlier question or answer may take of the budget, so one long answer cannot crowd out the rest.
ENTRY_TOKENS = 200
# The history is given what the conversation leaves of the context's budget, and never less than this share of
# it: a long thread must not leave the person's history with nothing.
LEAST_TOKENS = CONTEXT_TOKENS // 4
# Framing words when a site's strings have none.
EARLIER = "What they asked you before, in other conversations, oldest first:"
ANSWERED = "you answered"
RECALLED = "What they told you before that may bear on this, oldest first:"


@dataclass(frozen=True)
class Asked:
    """An earlier question of this person to this bot, and the answer it had."""

    said: str
    answer: str
    at: datetime


@dataclass(frozen=True)
class Recalled:
    """Something this person told this bot before, found by meaning."""

    said: str
    at: datetime


def uses_person(memory: str) -> bool:
    return memory in ("person", "person+recall")


def uses_recall(memory: str) -> bool:
    return memory == "person+recall"


def with_memory(context: dict[str, Any], memory: str, *, earlier: Sequence[Asked] = (),
                recalled: Sequence[Recalled] = (), words: Mapping[str, str] | None = None,
                tokens: int = CONTEXT_TOKENS) -> dict[str, Any]:
    """The context a run opens with under ``memory``: ``earlier`` newest first as read, ``recalled`` in any
    order; both are ignored by the memories that do not carry them."""
    words = words or {}
    if memory == "none":
        kept = ("kind", "event", "facts", "later", "later_header", "command")
        return {key: context[key] for key in kept if key in context}
    if not uses_person(memory):
        return context
    parts: list[str] = []
    if recalled and uses_recall(memory):
        said = [f"- {r.at:%Y-%m-%d}: {capped(r.said, ENTRY_TOKENS)}" for r in sorted(recalled, key=lambda r: r.at)]
        parts.append("\n".join([words.get("recalled") or RECALLED, *said]))
    if earlier:
        left = tokens - len(transcript(context)) // CHARS_PER_TOKEN - sum(len(p) for p in parts) // CHARS_PER_TOKEN
        history = _newest_within(earlier, max(LEAST_TOKENS, left), words.get("answered") or ANSWERED)
        if history:
            parts.insert(0, "\n".join([words.get("earlier") or EARLIER, *history]))
    if not parts:
        return context
    return {**context, "remembered": "\n\n".join(parts)}


def _newest_within(earlier: Sequence[Asked], tokens: int, answered: str) -> list[str]:
    """The newest entries that fit ``tokens``, oldest first."""
    budget = tokens * CHARS_PER_TOKEN
    kept: list[str] = []
    for asked in earlier:
        entry = (f"- {asked.at:%Y-%m-%d}: {capped(asked.said, ENTRY_TOKENS)}\n"
                 f"  {answered}: {capped(asked.answer, ENTRY_TOKENS)}")
        if len(entry) + 1 > budget:
            break
        kept.append(entry)
        budget -= len(entry) + 1
    return list(reversed(kept))
