"""What a bot remembers of a person (SPEC §11; ``sql/queries/memories.sql``): what they asked it before.

Every read starts from a run and resolves its person in SQL from the run row (its subject — on the desk the
customer, never the staff member who asked): no method takes a person, so there is none to pass wrongly."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class AskedBefore:
    """One earlier question of the run's person to the same bot, and its answer."""

    prompt: str
    answer: str
    created_at: datetime
    room_id: str | None


class Memories(Family):
    __slots__ = ()

    async def asked_before(self, run_id: int, *, limit: int, same_room: bool) -> list[AskedBefore]:
        """What run ``run_id``'s person asked its bot in earlier answered runs outside this conversation,
        newest first (at most ``limit``); with ``same_room``, only in the run's own room."""
        return rows(AskedBefore, await self._all("asked_before", run_id, limit, same_room))
