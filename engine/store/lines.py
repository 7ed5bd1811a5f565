"""What was said: a surface's delivered batches (each acted on once), the events stored once as lines, and the
context a bot is given — only the lines the asker could see (``sql/queries/lines.sql``)."""

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


class Lines(Family):
    __slots__ = ()

    async def record_transaction(self, txn_id: str, events: int) -> bool:
        """Remember a delivered batch by its id; False when it was seen before (a replay)."""
        return await self._value("record_transaction", txn_id, events) is not None

    async def store(self, *, event_id: str, room_id: str, sender: str, event_type: str, state_key: str | None,
                    ts: int, content: dict[str, Any], said: str, thread_root: str | None, reply_to: str | None,
                    replaces: str | None) -> bool:
        """Store an event once; True when it is new (only a new line may summon)."""
        return await self._value("store_event", event_id, room_id, sender, event_type, state_key, ts, content,
                                 said, thread_root, reply_to, replaces) is not None

    async def apply_edit(self, original: str, sender: str, said: str, ts: int) -> None:
        await self._run("apply_edit", original, sender, said, ts)

    async def redact(self, event_id: str, room_id: str) -> None:
        await self._run("redact_event", event_id, room_id)

    async def sender_of(self, event_id: str, room_id: str) -> str | None:
        sender = await self._value("event_sender", event_id, room_id)
        return None if sender is None else str(sender)

    async def thread(self, room_id: str, root: str, *, until_ts: int, viewer: str, limit: int) -> list[SeenLine]:
        """The thread as ``viewer`` could see it up to ``until_ts``: its root first, then replies newest first."""
        return rows(SeenLine, await self._all("context_thread", room_id, root, until_ts, viewer, limit))

    async def timeline(self, room_id: str, *, until_ts: int, viewer: str, limit: int) -> list[TimelineLine]:
        """The main timeline as ``viewer`` could see it up to ``until_ts``, newest first."""
        return rows(TimelineLine, await self._all("context_timeline", room_id, until_ts, viewer, limit))

    async def stored(self, event_id: str) -> bool:
        return bool(await self._value("context_stored", event_id))

    async def store_fetched(self, *, event_id: str, room_id: str, sender: str, event_type: str, ts: int,
                            content: dict[str, Any], said: str, thread_root: str | None, reply_to: str | None) -> None:
        """Keep an event fetched from the homeserver as a line (once); it summons nothing."""
        await self._run("context_store_fetched", event_id, room_id, sender, event_type, ts, content, said,
                        thread_root, reply_to)

    async def room_name(self, room_id: str) -> str:
        """What a person calls the room: its name, else its canonical alias, else its id."""
        return str(await self._value("context_room_name", room_id))
