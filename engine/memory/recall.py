"""Reading what a run's bot remembers of its person, by its ``memory:`` — once, when a worker takes the run.

Whose memory is the run's subject's, resolved in SQL from the run row (``engine/store/memories.py``): nothing
here carries a person. Where the run is read by others besides that person (a shared room), only what they
asked in that same room is carried — what they asked the bot in a DM stays out of a room others read (SPEC §8,
"said only where the subject alone reads it"); the run's surface says which it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from engine.core.memory import Asked, Recalled, uses_person
from engine.errors import StoreError
from engine.store import Store
from engine.store.runs import Run
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

# How many earlier questions are read at most (the prompt keeps the newest that fit its budget).
EARLIER_RUNS = 50


@dataclass(frozen=True)
class Remembered:
    """What the run opens with besides its conversation."""

    earlier: tuple[Asked, ...] = ()
    recalled: tuple[Recalled, ...] = field(default=())


async def private_to_subject(store: Store, surface: SurfaceFacts | None, row: Run) -> bool:
    """Whether what the run says is read by its person alone, as its surface says (a room whose only human is
    them; their own desk conversation). Anything less than sure is not private."""
    if surface is None:
        return False
    subject = await store.people.subject(row.id)
    who = row.subject or (subject.user_id if subject is not None else None)
    if who is None:
        return False
    facts = await surface.facts(store, row.room_id, who)
    return facts.private


async def remembered(store: Store, surface: SurfaceFacts | None, row: Run, memory: str) -> Remembered:
    """What ``row``'s bot remembers of its person under ``memory``; nothing (logged) when the database cannot
    say — the run still answers from its conversation."""
    if not uses_person(memory):
        return Remembered()
    try:
        private = await private_to_subject(store, surface, row)
        found = await store.memories.asked_before(row.id, limit=EARLIER_RUNS, same_room=not private)
    except StoreError as exc:
        log.warning("run %s: what its person asked before could not be read (%s); answering without it",
                    row.id, exc, extra={"run": row.id, "bot": row.bot})
        return Remembered()
    return Remembered(earlier=tuple(Asked(a.prompt, a.answer, a.created_at) for a in found))
