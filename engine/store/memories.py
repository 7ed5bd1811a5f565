"""What a bot remembers of a person (SPEC §11; ``sql/queries/memories.sql``): what they asked it before.

Every read starts from a run and resolves its person in SQL from the run row (its subject — on the desk the
customer, never the staff member who asked): no method takes a person, so there is none to pass wrongly."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.base import Family, rows

Vector = list[float]


def vector_text(vector: Vector) -> str:
    """pgvector's text form of a vector: how it crosses the wire (asyncpg has no codec for the type)."""
    return "[" + ",".join(f"{v:.6g}" for v in vector) + "]"


@dataclass(frozen=True, slots=True)
class AskedBefore:
    """One earlier question of the run's person to the same bot, and its answer."""

    prompt: str
    answer: str
    created_at: datetime
    place: str | None


@dataclass(frozen=True, slots=True)
class Memory:
    """Something a person told a bot."""

    id: int
    said: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Recalled:
    said: str
    at: datetime
    distance: float


class Memories(Family):
    __slots__ = ()

    async def asked_before(self, run_id: int, *, limit: int, same_room: bool) -> list[AskedBefore]:
        """What run ``run_id``'s person asked its bot in earlier answered runs outside this conversation,
        newest first (at most ``limit``); with ``same_room``, only in the run's own room."""
        return rows(AskedBefore, await self._all("asked_before", run_id, limit, same_room))

    # --- person+recall: the memories table (pgvector) ---------------------------------------------------

    async def ready(self) -> str | None:
        """None when memories can be kept (the table stands, or was made now); else why not, in one line."""
        why = await self._value("memories_ready")
        return None if why is None else str(why)

    async def remember(self, run_id: int, said: str, vector: Vector) -> int | None:
        """What finished run ``run_id``'s person said, kept as that run's (no argument names a person)."""
        found = await self._value("remember", run_id, said, vector_text(vector))
        return None if found is None else int(found)

    async def recall(self, bot: str, vector: Vector, *, floor: float, count: int, place: str | None,
                     since: datetime | None = None) -> list[Recalled]:
        """In a transaction answering for a run's person as the tools role (``people.become`` + ``as_tools``):
        what they told ``bot`` nearest to ``vector``, within cosine distance ``floor``, at most ``count``; with
        ``place``, only what was said there, and with ``since``, only since then."""
        return rows(Recalled, await self._all("recall", bot, vector_text(vector), floor, count, place, since))

    async def of(self, person: str, bot: str, limit: int) -> list[Memory]:
        """What ``person`` told ``bot``, newest first: their own ``!memories``."""
        return rows(Memory, await self._all("memories_of", person, bot, limit))

    async def forget(self, person: str, bot: str, memory_id: int) -> bool:
        return await self._value("forget_memory", person, bot, memory_id) is not None

    async def forget_all(self, person: str, bot: str) -> int:
        return await self._run("forget_memories", person, bot)
