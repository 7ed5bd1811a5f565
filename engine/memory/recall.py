"""Reading what a run's bot remembers of its person, by its ``memory:`` — once, when a worker takes the run.

Whose memory is the run's subject's, resolved in SQL from the run row (``engine/store/memories.py``): nothing
here carries a person. Where the run is read by others besides that person (a shared room), only what they
asked in that same room is carried — what they asked the bot in a DM stays out of a room others read (SPEC §8,
"said only where the subject alone reads it"); the run's surface says which it is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.content.commands import without_address
from engine.core.memory import Asked, Recalled, uses_person, uses_recall
from engine.errors import MemoryUnavailable, StoreError
from engine.memory.embedder import Embedder
from engine.store import Store
from engine.store.runs import Run
from engine.surface import SurfaceFacts

log = logging.getLogger(__name__)

# How many earlier questions are read at most (the prompt keeps the newest that fit its budget).
EARLIER_RUNS = 50


# What is recalled, by default: chosen on tests/memory/recall_pairs.yaml with the shipped model (the test there
# measures it). A related remark lies within 0.124-0.246 of its question (cosine distance), an unrelated one
# within 0.220-0.313: at 0.215 no unrelated pair is recalled and 13 of 15 related ones are — recalling nothing
# beats recalling something unrelated. Five: every right memory in that set that passes the floor is among the
# five nearest; more only adds others.
RECALL_FLOOR = 0.215
RECALL_COUNT = 5


@dataclass(frozen=True)
class RecallSettings:
    floor: float = RECALL_FLOOR
    count: int = RECALL_COUNT


@dataclass(frozen=True)
class Remembered:
    """What the run opens with besides its conversation; ``tells``: what the run asks is the person's own words
    (they asked it themselves), so the answer may remember them."""

    earlier: tuple[Asked, ...] = ()
    recalled: tuple[Recalled, ...] = field(default=())
    tells: bool = False


class Recall:
    """person+recall's reads and writes: the embedder (loaded on first use) and the settings."""

    def __init__(self, embedder: Embedder | None = None, settings: RecallSettings | None = None) -> None:
        self.embedder = embedder or Embedder()
        self.settings = settings or RecallSettings()

    async def recalled(self, store: Store, row: Run, *, private: bool,
                       names: Sequence[str] = ()) -> tuple[Recalled, ...]:
        """What the run's person told its bot nearest in meaning to what the run asks (their words, without
        their address to the bot: ``names``), read as the tools role answering for that person (row security
        keeps everybody else's out)."""
        vector = await self.embedder.query(without_address(row.prompt, names))
        # Where others read along, only what was said in this room since all of them came in: a line from before
        # somebody joined is not repeated to them.
        since = await store.places.read_by_all_since(store, row.place) if not private and row.place else None
        async with store.transaction("recall") as tx:
            if not await tx.people.become(row.id):
                return ()
            await tx.people.as_tools()
            found = await tx.memories.recall(row.bot, vector, floor=self.settings.floor, count=self.settings.count,
                                             place=None if private else row.place, since=since)
        return tuple(Recalled(f.said, f.at) for f in found)

    async def remember(self, store: Store, row: Run, *, names: Sequence[str] = ()) -> None:
        """What the person said in finished run ``row``, kept as that run's (the worker, after an answer): their
        words without their address to the bot (``names``) — "Recall Bot:" in every memory would make unrelated
        remarks look alike."""
        said = without_address(row.prompt, names)
        if not said:
            return
        vector = await self.embedder.passage(said[:4000])
        await store.memories.remember(row.id, said[:4000], vector)


async def private_to_subject(store: Store, surface: SurfaceFacts | None, row: Run) -> bool:
    """Whether what the run says is read by its person alone, as its surface says (a room whose only human is
    them; their own desk conversation). Anything less than sure is not private."""
    if surface is None:
        return False
    subject = await store.people.subject(row.id)
    who = row.subject or (subject.user_id if subject is not None else None)
    if who is None:
        return False
    facts = await surface.facts(store, row.place, who)
    return facts.private


async def remembered(store: Store, surface: SurfaceFacts | None, row: Run, memory: str,
                     recall: Recall | None = None, *, names: Sequence[str] = ()) -> Remembered:
    """What ``row``'s bot remembers of its person under ``memory``; nothing (logged) when it cannot be read —
    the run still answers from its conversation."""
    if not uses_person(memory):
        return Remembered()
    try:
        private = await private_to_subject(store, surface, row)
        found = await store.memories.asked_before(row.id, limit=EARLIER_RUNS, same_room=not private)
        subject = await store.people.subject(row.id)
    except StoreError as exc:
        log.warning("run %s: what its person asked before could not be read (%s); answering without it",
                    row.id, exc, extra={"run": row.id, "bot": row.bot})
        return Remembered()
    earlier = tuple(Asked(a.prompt, a.answer, a.created_at) for a in found)
    # Their own words: they asked it (a desk contact writing asks nobody; a staff member asking about them does
    # not speak for them).
    tells = subject is not None and (subject.is_asker or (row.asked_by is None and subject.contact_id is not None))
    recalled: tuple[Recalled, ...] = ()
    if uses_recall(memory) and recall is not None:
        try:
            recalled = await recall.recalled(store, row, private=private, names=names)
        except (StoreError, MemoryUnavailable) as exc:
            log.warning("run %s: nothing could be recalled (%s); answering without it", row.id, exc,
                        extra={"run": row.id, "bot": row.bot})
    return Remembered(earlier=earlier, recalled=recalled, tells=tells)
