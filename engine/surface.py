"""The one door out: what a surface implements so the engine can deliver to it.

``deliver`` runs inside the transaction that finishes the run, so an answer is stored and queued for
delivery in one commit (nothing answered is lost, nothing is delivered for a run that did not finish).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg

from engine.core.messages import Ending


@dataclass(frozen=True)
class RunInfo:
    """What a surface needs to know about a run to deliver to it."""

    id: int
    bot: str
    surface: str
    room_id: str | None
    thread_root: str | None
    trigger_event: str | None
    asked_by: str | None

    @classmethod
    def from_row(cls, row: asyncpg.Record | dict[str, Any]) -> RunInfo:
        return cls(
            id=row["id"], bot=row["bot"], surface=row["surface"], room_id=row["room_id"],
            thread_root=row["thread_root"], trigger_event=row["trigger_event"], asked_by=row["asked_by"],
        )


@dataclass(frozen=True)
class Answered:
    text: str


@dataclass(frozen=True)
class Ended:
    ending: Ending
    reason: str = ""


Outcome = Answered | Ended


class Surface(Protocol):
    name: str

    async def deliver(self, conn: asyncpg.Connection, run: RunInfo, outcome: Outcome) -> None:
        """Queue the answer or the ending for delivery, in the caller's transaction."""

    async def working(self, run: RunInfo, on: bool) -> None:
        """Show (or stop showing) that the bot is working on the run. Best effort."""
