"""A run's text as the model says it, told to whoever listens (a surface that answers as it comes).

Each piece is one NOTIFY on ``summon_pieces``: ``{"run", "attempt", "turn", "seq", "text"}`` (``turn``: which of
the run's model calls said it; ``seq`` counts from 1 within the call; ``attempt``: the run's, so a listener can
tell a retried run's words from the first try's). Nothing is stored: the answer itself is recorded as ever, and a
listener that missed a piece fills in from it when the run ends. Text that arrives while a piece is being told goes
in the next one, so a fast database passes each word on at once and a slow one gathers them.
"""

from __future__ import annotations

import asyncio
import json
import logging

from engine.errors import StoreError
from engine.store import Store

log = logging.getLogger(__name__)

CHANNEL = "summon_pieces"
# A NOTIFY payload is at most 8000 bytes: a piece's text at up to four bytes a character, JSON's escapes and the
# rest of the object fit under it.
MOST_CHARS = 1000


class Pieces:
    def __init__(self, store: Store, run_id: int, *, attempt: int, turn: int) -> None:
        self.store = store
        self.run_id = run_id
        self.attempt = attempt
        self.turn = turn
        self.seq = 0
        self._waiting: list[str] = []
        self._telling: asyncio.Task[None] | None = None
        self._broken = False

    def __call__(self, text: str) -> None:
        """Hear ``text``; told at once unless a piece is being told (then with the next)."""
        if self._broken or not text:
            return
        self._waiting.append(text)
        if self._telling is None:
            self._telling = asyncio.ensure_future(self._tell())

    async def close(self) -> None:
        """Once everything heard has been told (or given up on)."""
        if self._telling is not None:
            await asyncio.shield(self._telling)

    async def _tell(self) -> None:
        try:
            while self._waiting:
                text = "".join(self._waiting)
                self._waiting.clear()
                for start in range(0, len(text), MOST_CHARS):
                    self.seq += 1
                    await self.store.runs.tell_piece(CHANNEL, json.dumps({
                        "run": self.run_id, "attempt": self.attempt, "turn": self.turn, "seq": self.seq,
                        "text": text[start:start + MOST_CHARS]}, ensure_ascii=False))
        except StoreError as exc:
            # The listener fills in from the answer when the run ends; nothing more is told for this call.
            log.warning("run %s: its words could not be told as they came (%s); they go with the answer",
                        self.run_id, exc, extra={"run": self.run_id})
            self._broken = True
            self._waiting.clear()
        finally:
            self._telling = None
