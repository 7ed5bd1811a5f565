"""What was said: a surface's delivered batches (each acted on once), the events stored once as lines (in the
order they were heard: ``seq``), redactions carried into what runs kept of a line, and the context a bot is
given — only the lines the asker could see, each as it reads now (``sql/queries/lines.sql``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.store.base import Family, rows


@dataclass(frozen=True, slots=True)
class SeenLine:
    """A line as the asker could see it: who said it (by the name the room shows), what, and when."""

    event_id: str
    sender: str
    name: str
    said: str
    ts: int


@dataclass(frozen=True, slots=True)
class TimelineLine:
    """A line of a room's main timeline: said, or somebody coming or going (``membership``, ``subject``)."""

    event_id: str
    sender: str
    name: str
    said: str
    ts: int
    membership: str | None
    subject: str | None


@dataclass(frozen=True, slots=True)
class Redacted:
    """A line just redacted: ``replaces`` names the line it edited (None: it was no edit)."""

    event_id: str
    replaces: str | None


class LineTables(Family):
    __slots__ = ()

    async def record_transaction(self, txn_id: str, events: int) -> bool:
        """Remember a delivered batch by its id; False when it was seen before (a replay)."""
        return await self._value("record_transaction", txn_id, events) is not None

    async def record_first_try(self, txn_id: str, events: int, digest: str) -> tuple[int, bool]:
        """How many attempts at a batch failed before (by its id's digest) and, when none did, whether it is
        new (remembered now; False: a replay); a batch with failures is not remembered here. One statement."""
        row = await self._one("record_first_try", txn_id, events, digest)
        assert row is not None
        return int(row["failures"]), bool(row["new"])

    async def peek_transaction(self, txn_id: str, digest: str) -> tuple[int, bool]:
        """How many attempts at a batch failed before, and whether its id is remembered (a replay); nothing
        written."""
        row = await self._one("peek_transaction", txn_id, digest)
        assert row is not None
        return int(row["failures"]), bool(row["seen"])

    async def transaction_failures(self, digest: str) -> int:
        """How many attempts at a batch (by its id's digest) failed in a way a retry does not mend."""
        return int(await self._value("transaction_failures", digest))

    async def count_transaction_failure(self, digest: str, error: str) -> int:
        """Count one more such failed attempt (in its own commit); how many there have been."""
        return int(await self._value("count_transaction_failure", digest, error))

    async def forget_transaction_failures(self, digest: str) -> None:
        await self._run("forget_transaction_failures", digest)

    async def reject(self, *, digest: str | None, event_id: str | None, room_id: str | None, reason: str,
                     event: str) -> None:
        """Keep an event that could not be stored (as escaped JSON text) with why, for an operator to see."""
        await self._run("reject_event", digest, event_id, room_id, reason, event)

    async def store(self, *, event_id: str, room_id: str, sender: str, event_type: str, state_key: str | None,
                    ts: int, content: dict[str, Any], said: str, thread_root: str | None, reply_to: str | None,
                    replaces: str | None) -> bool:
        """Store an event once; True when it is new (only a new line may summon)."""
        return await self._value("store_event", event_id, room_id, sender, event_type, state_key, ts, content,
                                 said, thread_root, reply_to, replaces) is not None

    async def redact(self, event_id: str, room_id: str) -> Redacted | None:
        """Blank a line for good; what it was (None: not stored, or redacted before)."""
        record = await self._one("redact_event", event_id, room_id)
        return None if record is None else Redacted(event_id=event_id, replaces=record["replaces"])

    async def now_reads(self, event_id: str, room_id: str) -> str:
        """What a line reads as now: its latest edit that still stands, else its own words ('' for none)."""
        return str(await self._value("line_now_reads", event_id, room_id))

    async def cancel_runs_asked_by(self, event_id: str, room_id: str) -> list[int]:
        """Ask the unfinished run a line summoned to stop (the line was redacted)."""
        return [int(r["id"]) for r in await self._all("cancel_runs_asked_by", event_id, room_id)]

    async def scrub_from_runs(self, event_id: str, room_id: str) -> list[int]:
        """Take a redacted line out of every run's stored context in its room (finished runs too), the
        ``heard`` steps that brought it in, and the prompt of the run it summoned; the runs touched."""
        await self._run("scrub_redacted_heard", event_id, room_id)
        return [int(r["id"]) for r in await self._all("scrub_redacted_line", event_id, room_id)]

    async def reword_in_runs(self, event_id: str, room_id: str, said: str) -> list[int]:
        """Every run's stored copy of a line reads ``said`` now ('' takes it out); the runs touched."""
        return [int(r["id"]) for r in await self._all("reword_line_in_runs", event_id, room_id, said)]

    async def sender_of(self, event_id: str, room_id: str) -> str | None:
        sender = await self._value("event_sender", event_id, room_id)
        return None if sender is None else str(sender)

    async def thread(self, room_id: str, root: str, *, until: str | None, viewer: str, limit: int) -> list[SeenLine]:
        """The thread as ``viewer`` could see it up to the line ``until`` (in the order we heard it; None:
        up to now): its root first, then replies newest first."""
        return rows(SeenLine, await self._all("context_thread", room_id, root, until, viewer, limit))

    async def timeline(self, room_id: str, *, until: str | None, viewer: str, limit: int) -> list[TimelineLine]:
        """The main timeline as ``viewer`` could see it up to the line ``until`` (None: up to now), newest
        first."""
        return rows(TimelineLine, await self._all("context_timeline", room_id, until, viewer, limit))

    async def stored(self, event_id: str) -> bool:
        return bool(await self._value("context_stored", event_id))

    async def store_fetched(self, *, event_id: str, room_id: str, sender: str, event_type: str, ts: int,
                            content: dict[str, Any], said: str, thread_root: str | None, reply_to: str | None,
                            replaces: str | None = None) -> None:
        """Keep an event fetched from the homeserver (a line, or an edit of one) once; it summons nothing."""
        await self._run("context_store_fetched", event_id, room_id, sender, event_type, ts, content, said,
                        thread_root, reply_to, replaces)

    async def room_name(self, room_id: str) -> str:
        """What a person calls the room: its name, else its canonical alias, else its id."""
        return str(await self._value("context_room_name", room_id))
