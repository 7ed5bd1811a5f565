"""Voice notes heard and answers said (SPEC §12, §15; ``sql/queries/voice.sql``): a stored voice note read back, its
hearing (held once every gate passed, its worst case reserved; called, settled, asked — the marker that a note is
never transcribed twice), its transcript written as what it says, and the speech calls paid for.

A hearing's transitions are each one statement conditional on the state it leaves, so a retry, a racing attempt
and a late answer cannot both take the same step: whoever gets no row back stops."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from engine.store.base import Family, maybe, rows

HearingState = Literal["held", "calling", "heard", "asked", "refused", "failed", "lost"]
CallOutcome = Literal["answered", "refused", "unknown"]


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
class Hearing:
    event_id: str
    room_id: str
    sender: str
    bot: str
    state: HearingState
    why: str | None
    seconds: float | None  # the note's duration bound, once it was measured for its call
    heard: str | None  # the transcript, once it came back
    run_id: int | None
    reserved_usd: float | None  # what its ledger row holds now: the worst case, or what it settled at
    cut_off: bool | None  # being called for longer than a call can take: its attempt is gone


@dataclass(frozen=True, slots=True)
class SpeechCall:
    kind: str  # transcription | speech
    units: float  # seconds heard, or characters said
    cost_usd: float
    at: datetime


class VoiceTables(Family):
    __slots__ = ()

    async def note(self, event_id: str) -> StoredNote | None:
        return maybe(StoredNote, await self._one("voice_note", event_id))

    async def heard(self, event_id: str, said: str) -> None:
        await self._run("voice_note_heard", event_id, said)

    # --- hearings ------------------------------------------------------------------------------------

    async def hearing(self, event_id: str, *, call_seconds: float) -> Hearing | None:
        """The note's hearing; ``cut_off`` when its call was begun more than ``call_seconds`` ago."""
        return maybe(Hearing, await self._one("voice_hearing", event_id, call_seconds))

    async def lately(self, sender: str, seconds: float, why: str) -> tuple[int, int]:
        """The sender's voice notes in the last ``seconds``: all of them, and those refused for ``why``."""
        found = await self._one("voice_hearings_lately", sender, seconds, why)
        return int(found["notes"]), int(found["refused"])

    async def in_flight(self, sender: str, seconds: float) -> int:
        """The sender's hearings begun in the last ``seconds`` that have not yet asked (nor ended)."""
        return int(await self._value("voice_hearings_in_flight", sender, seconds))

    async def hold(self, event_id: str, *, room_id: str, sender: str, bot: str, usd: float) -> bool:
        """The note's hearing begins, ``usd`` (its worst case) reserved on the sender's ledger for ``bot``; False
        when it already has one (nothing reserved again)."""
        if await self._value("begin_voice_hearing", event_id, room_id, sender, bot, "held", None) is None:
            return False
        await self._run("reserve_voice_hearing", event_id, usd, bot)
        return True

    async def refuse(self, event_id: str, *, room_id: str, sender: str, bot: str, why: str) -> bool:
        """The note is refused before anything is held or paid (a gate, a claim, the sender's rate); False when it
        already has a hearing."""
        return await self._value("begin_voice_hearing", event_id, room_id, sender, bot, "refused", why) is not None

    async def raise_hold(self, event_id: str, *, usd: float) -> None:
        """A held note needs more reserved than it held (``usd`` in all), before the gates are asked again."""
        await self._run("raise_voice_hearing", event_id, usd)

    async def call(self, event_id: str, *, seconds: float, usd: float) -> bool:
        """The marker before the paid call (its own commit): True when this hearing may make it; False when it
        was begun before, or ended — it must not be made again."""
        return bool(await self._value("call_voice_hearing", event_id, seconds, usd))

    async def settle(self, event_id: str, *, outcome: CallOutcome, seconds: float, usd: float, heard: str | None,
                     state: HearingState, why: str | None = None) -> bool:
        """The call came back: recorded as a paid call, its reservation settled to ``usd``, the hearing ``state``.
        False when it was no longer being called (given up as lost meanwhile: the worst case stands)."""
        return bool(await self._value("settle_voice_hearing", event_id, outcome, seconds, usd, heard, state, why))

    async def lose(self, event_id: str, *, call_seconds: float) -> bool:
        """A call begun more than ``call_seconds`` ago whose answer was never recorded: given up, never made
        again — recorded at its worst case, settled so. False when it was not such a call."""
        return bool(await self._value("lose_voice_hearing", event_id, call_seconds))

    async def release(self, event_id: str, *, state: HearingState, why: str) -> bool:
        """The note is not heard after all, before anything was paid: its reservation let go."""
        return bool(await self._value("release_voice_hearing", event_id, state, why))

    async def asked(self, event_id: str, *, run_id: int | None, refused: str | None = None) -> None:
        """The note's words were taken to its bot: the run they asked (or joined), or why it was refused."""
        await self._run("voice_hearing_asked", event_id, "asked" if refused is None else "refused", run_id, refused)

    # --- paid calls ----------------------------------------------------------------------------------

    async def calls(self, run_id: int) -> list[SpeechCall]:
        """The run's paid speech calls, oldest first: the transcription it was asked with, and answers said."""
        return rows(SpeechCall, await self._all("speech_calls_of", run_id))

    async def record_call(self, run_id: int, kind: str, units: float, cost_usd: float) -> None:
        """A paid speech call for the run (an answer said), counted in its spend (reserved or settled, whichever
        it is now)."""
        await self._run("record_speech_call", run_id, kind, units, cost_usd)
        if cost_usd > 0:
            await self._run("add_speech_spend", run_id, cost_usd)
