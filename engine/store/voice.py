"""Voice notes heard and answers said (SPEC §12; ``sql/queries/voice.sql``): a stored voice note read back, its
transcript written as what it says, and the speech calls a run paid for."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.store.base import Family, maybe, rows


@dataclass(frozen=True, slots=True)
class StoredNote:
    event_id: str
    room_id: str
    sender: str
    event_type: str
    ts: int
    content: dict[str, Any]
    thread_root: str | None
    reply_to: str | None

    def event(self) -> dict[str, Any]:
        """The event as it arrived (enough of it to read again)."""
        return {"event_id": self.event_id, "room_id": self.room_id, "sender": self.sender, "type": self.event_type,
                "origin_server_ts": self.ts, "content": self.content}


@dataclass(frozen=True, slots=True)
class SpeechCall:
    kind: str  # transcription | speech
    units: float  # seconds heard, or characters said
    cost_usd: float
    at: datetime


class Voice(Family):
    __slots__ = ()

    async def note(self, event_id: str) -> StoredNote | None:
        return maybe(StoredNote, await self._one("voice_note", event_id))

    async def heard(self, event_id: str, said: str) -> None:
        await self._run("voice_note_heard", event_id, said)

    async def calls(self, run_id: int) -> list[SpeechCall]:
        """The run's paid speech calls, oldest first."""
        return rows(SpeechCall, await self._all("speech_calls_of", run_id))

    async def record_call(self, run_id: int, kind: str, units: float, cost_usd: float) -> None:
        """A paid speech call for the run, counted in its spend (reserved or settled, whichever it is now)."""
        await self._run("record_speech_call", run_id, kind, units, cost_usd)
        if cost_usd > 0:
            await self._run("add_speech_spend", run_id, cost_usd)
