"""What a bot is given: the conversation as the asker could read it, written onto the run row (SPEC §4).

- Summoned in a thread → the thread: its root and every reply. A thread whose root we never heard (it
  predates the bot being in the room) is fetched from the homeserver — the root and the thread's
  relations, as one of our puppets — and kept as lines, so the next summons finds it stored. The fetch
  (``ThreadBackfill``) happens *before* the appservice transaction begins, never while a room's row is
  locked: a slow homeserver holds up nothing but the transaction that needed it.
- Outside a thread → the room's main timeline: what was said and who came and went; a thread's replies
  are not folded in (a conversation somebody stepped aside to have, which the channel does not show).
- Only lines the asker could see: the room's history visibility and their membership *at each line*,
  read back from the state events we stored (``summon_can_see_v2``, migration 0020). "At each line" is in the
  order summon *heard* things, never by ``origin_server_ts``, which the sender's server sets (a backdated join
  shows nothing from before it arrived). A line fetched with a thread was said before we heard the room: it is
  shown under ``shared`` (the first visibility we heard, never more open) and withheld under ``joined`` and
  ``invited``, where nobody's membership at it is known.
- Each line as it reads now: its latest edit that still stands (a redacted edit gives back what it replaced).
- Bounded: at most ``lines`` lines are read, and the newest are kept within a token budget (about four
  characters a token); a thread keeps its root, which says what the thread is about.
- The framing words are strings (``### context``); senders go by their display name in the room, so a
  bridged sender reads as the name people see.

A thread that could not be fetched (or was not, in time) is marked ``incomplete`` (with the site's words
for it), never silently short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from appservice.matrix.delivery.offers import bare_number
from appservice.matrix.errors import MatrixError
from appservice.matrix.inbound.mentions import named_bots
from appservice.matrix.inbound.said import UNTRANSCRIBED, Line, read_event
from appservice.matrix.ours import Ours
from appservice.matrix.tables.lines import LineTables
from appservice.matrix.tables.rooms import RoomTables
from engine.content import Registry
from engine.content.commands import parse_command, strip_address
from engine.content.strings import Strings
from engine.core.prompt import CONTEXT_TOKENS
from engine.errors import StoreError
from engine.store import Store, Tx

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
PER_LINE_CHARS = 4  # the ": " and the newline a line costs besides its name and words
ELLIPSIS = "…"


@dataclass(frozen=True)
class ContextSettings:
    tokens: int = CONTEXT_TOKENS  # the budget: the newest lines that fit are kept (the engine's, for all)
    lines: int = 200  # at most this many lines are read
    fetch_seconds: float = 3.0  # the longest a thread fetch may hold up the appservice transaction
    fetch_events: int = 200  # at most this many replies are fetched


class ThreadFetch(Protocol):
    """A thread from the homeserver, as ``as_user`` may read it: the root's event first, then its replies
    oldest first (raw client events). Raises ``MatrixError``."""

    async def __call__(self, room_id: str, root: str, *, as_user: str, limit: int) -> list[dict[str, Any]]: ...


def cost(line: Mapping[str, Any]) -> int:
    """What a line costs in characters, as the transcript prints it."""
    return len(str(line.get("name") or "")) + len(str(line.get("said") or "")) + PER_LINE_CHARS


def within_budget(lines: Sequence[dict[str, Any]], tokens: int, *, keep_first: bool = False) -> list[dict[str, Any]]:
    """The newest lines that fit ``tokens`` (about four characters each), oldest first. The newest line is
    always kept (shortened if it alone is over), and with ``keep_first`` the first one too (a thread's
    root). Pure."""
    budget = max(0, tokens) * CHARS_PER_TOKEN
    if not lines:
        return []
    head: list[dict[str, Any]] = []
    rest = list(lines)
    if keep_first and len(rest) > 1:
        first = _shortened(rest.pop(0), budget // 2)
        head = [first]
        budget -= cost(first)
    kept: list[dict[str, Any]] = []
    for n, line in enumerate(reversed(rest)):
        if n == 0:
            line = _shortened(line, budget)
        elif cost(line) > budget:
            break
        kept.append(line)
        budget -= cost(line)
    return head + list(reversed(kept))


def _shortened(line: dict[str, Any], chars: int) -> dict[str, Any]:
    if cost(line) <= chars:
        return line
    room = max(0, chars - cost({**line, "said": ""}) - len(ELLIPSIS))
    return {**line, "said": str(line.get("said") or "")[:room] + ELLIPSIS}


def _line(event_id: str, sender: str, name: str, said: str, ts: int) -> dict[str, Any]:
    return {"event_id": event_id, "sender": sender, "name": name, "said": said, "ts": ts}


def _heard(said: str, strings: Strings) -> str:
    """A voice note nobody transcribed reads as the site's words for it (a transcribed one says its words)."""
    return (strings.get("context", "not_transcribed") or said) if said == UNTRANSCRIBED else said


class ContextReader:
    """Reads what a bot is given for a line, in the appservice transaction, from what is stored."""

    def __init__(self, settings: ContextSettings | None = None) -> None:
        self.settings = settings or ContextSettings()

    async def read(self, tx: Tx, line: Line, strings: Strings) -> dict[str, Any]:
        """The conversation as ``line``'s sender reads it: the thread when asked in one, else the main
        timeline."""
        room_name = await tx.of(LineTables).room_name(line.room_id)
        context: dict[str, Any]
        if line.thread_root:
            context = await self._thread(tx, line, line.thread_root, strings)
        else:
            context = await self._timeline(tx, line, strings)
        header = strings.get("context", "thread" if line.thread_root else "room")
        if header:
            context["header"] = header.format(room=room_name)
        return context

    async def _thread(self, tx: Tx, line: Line, root: str, strings: Strings) -> dict[str, Any]:
        # The root is stored unless the thread predates us and could not be fetched (``ThreadBackfill``).
        complete = await tx.of(LineTables).stored(root)
        if not complete:
            log.warning("the thread %s is not stored and could not be fetched; its context is incomplete", root,
                        extra={"room": line.room_id})
        rows = await tx.of(LineTables).thread(line.room_id, root, until=line.event_id, viewer=line.sender,
                                     limit=self.settings.lines)
        has_root = bool(rows) and rows[0].event_id == root
        ordered = ([rows[0]] if has_root else []) + list(reversed(rows[1:] if has_root else rows))
        lines = [_line(r.event_id, r.sender, r.name, _heard(r.said, strings), r.ts) for r in ordered]
        kept = within_budget(lines, self.settings.tokens, keep_first=has_root)
        context: dict[str, Any] = {"kind": "thread", "lines": kept}
        if len(kept) < len(lines):
            context["dropped"] = len(lines) - len(kept)
        if not complete:
            context["incomplete"] = True
            note = strings.get("context", "incomplete")
            if note:
                context["note"] = note
        return context

    async def _timeline(self, tx: Tx, line: Line, strings: Strings) -> dict[str, Any]:
        rows = await tx.of(LineTables).timeline(line.room_id, until=line.event_id, viewer=line.sender,
                                       limit=self.settings.lines)
        lines: list[dict[str, Any]] = []
        for r in reversed(rows):
            if r.membership is None or r.said:
                lines.append(_line(r.event_id, r.sender, r.name, _heard(r.said, strings), r.ts))
                continue
            # Who came and went, in the site's words; with none, nothing is said.
            words = strings.get("context", "joined" if r.membership == "join" else "left")
            if words:
                lines.append({**_line(r.event_id, r.sender, r.subject or r.name,
                                      words.format(name=r.subject), r.ts), "member": True})
        kept = within_budget(lines, self.settings.tokens)
        context: dict[str, Any] = {"kind": "timeline", "lines": kept}
        if len(kept) < len(lines):
            context["dropped"] = len(lines) - len(kept)
        return context


Fetched = dict[tuple[str, str], list[dict[str, Any]]]  # (room, root) → the thread's raw events


class ThreadBackfill:
    """Threads a summoning line is in that we never heard from the start, fetched from the homeserver
    before the appservice transaction begins (``fetch``), then kept as lines inside it (``keep``)."""

    def __init__(self, fetch: ThreadFetch | None, registry: Callable[[], Registry], ours: Ours,
                 settings: ContextSettings | None = None) -> None:
        self.fetch_thread = fetch
        self._registry = registry
        self.ours = ours
        self.settings = settings or ContextSettings()

    async def fetch(self, store: Store, events: Sequence[Mapping[str, Any]]) -> Fetched:
        """Every unstored thread a line among ``events`` may summon in, fetched (each bounded by
        ``fetch_seconds``, all at once). Outside any transaction: nothing is locked while it waits."""
        wanted: dict[tuple[str, str], str] = {}
        for event in events:
            line = read_event(event) if _in_a_thread(event) else None
            if line is None or line.thread_root is None or (line.room_id, line.thread_root) in wanted:
                continue
            if not self._may_summon(line):
                continue
            try:
                if await store.of(LineTables).stored(line.thread_root):
                    continue
                reader = await self._reader(store, line)
            except StoreError as exc:
                log.warning("could not check whether thread %s is stored (%s)", line.thread_root, exc,
                            extra={"room": line.room_id})
                continue
            if reader is None:
                log.warning("the thread %s is not stored and none of ours may read it", line.thread_root,
                            extra={"room": line.room_id})
                continue
            wanted[(line.room_id, line.thread_root)] = reader
        if not wanted:
            return {}
        if self.fetch_thread is None:
            log.warning("%d thread(s) not stored and nothing can fetch them; their context is incomplete",
                        len(wanted))
            return {}
        found = await asyncio.gather(*(self._one(room, root, reader) for (room, root), reader in wanted.items()))
        # The homeserver lists the transaction's own lines too (the asking line is in the thread by now):
        # those are stored by their handler, as news, never kept here first as old.
        own = {event.get("event_id") for event in events}
        return {key: [raw for raw in thread if raw.get("event_id") not in own]
                for key, thread in zip(wanted, found, strict=True) if thread is not None}

    async def _one(self, room_id: str, root: str, reader: str) -> list[dict[str, Any]] | None:
        assert self.fetch_thread is not None
        try:
            return await asyncio.wait_for(
                self.fetch_thread(room_id, root, as_user=reader, limit=self.settings.fetch_events),
                self.settings.fetch_seconds,
            )
        except (TimeoutError, MatrixError) as exc:
            log.warning("the thread %s could not be fetched (%s); its context is incomplete", root,
                        exc or "timed out", extra={"room": room_id})
            return None

    def _may_summon(self, line: Line) -> bool:
        """A line that names a bot, is a command, or presses a choice by its number (what may read a
        context); other lines never need the thread."""
        if line.is_notice or line.replaces or line.redacts or self.ours(line.sender) or not line.text.strip():
            return False
        registry = self._registry()
        names = [self.ours.service_user, *(n for b in registry.bots.values() for n in (b.user_id, b.name))]
        return (bool(named_bots(line, self.ours.puppets())) or parse_command(strip_address(line.text, names)) is not None
                or bare_number(line.text) is not None)

    async def _reader(self, store: Store, line: Line) -> str | None:
        """Who reads the thread: the puppet the line names, else one of ours in the room."""
        named = named_bots(line, self.ours.puppets())
        if named:
            return named[0]
        joined = await store.of(RoomTables).ours(line.room_id, [p.user_id for p in self.ours.puppets()])
        return next((m.user_id for m in joined if m.membership == "join"), None)

    async def keep(self, tx: Tx, fetched: Fetched) -> None:
        """Keep what was fetched as lines (once, by event id); a thread that cannot be kept is logged and
        its context is incomplete."""
        for (room_id, root), events in fetched.items():
            try:
                async with tx.savepoint():  # a bad fetched event never loses the transaction
                    for raw in events:
                        await _keep(tx, room_id, root, raw)
            except (StoreError, ValueError, TypeError) as exc:
                log.warning("the thread %s was fetched but could not be kept (%s); its context is incomplete",
                            root, exc, extra={"room": room_id})


def _in_a_thread(event: Mapping[str, Any]) -> bool:
    """A message in a thread (read cheaply: most lines are not, and are read once, by their handler)."""
    content = event.get("content")
    relates = content.get("m.relates_to") if isinstance(content, Mapping) else None
    return (event.get("type") == "m.room.message" and isinstance(relates, Mapping)
            and relates.get("rel_type") == "m.thread")


async def _keep(tx: Tx, room_id: str, root: str, raw: Mapping[str, Any]) -> None:
    fetched = read_event({**raw, "room_id": room_id})
    if fetched is None or fetched.is_state or fetched.replaces or fetched.redacts:
        return
    if fetched.event_id != root and fetched.thread_root != root:
        return
    await tx.of(LineTables).store_fetched(event_id=fetched.event_id, room_id=room_id, sender=fetched.sender,
                                 event_type=fetched.event_type, ts=fetched.ts, content=dict(raw.get("content") or {}),
                                 said=fetched.text, thread_root=fetched.thread_root, reply_to=fetched.reply_to)
    edit = _latest_edit(raw, fetched)
    if edit is not None:
        # Kept as an edit of its own, as one we heard would be: the line reads as it, and redacting it later
        # gives the line back its own words.
        bundled = _bundled(raw)
        await tx.of(LineTables).store_fetched(event_id=edit.event_id, room_id=room_id, sender=edit.sender,
                                     event_type=edit.event_type, ts=edit.ts,
                                     content=dict(bundled.get("content") or {}) if bundled else {},
                                     said=edit.text, thread_root=None, reply_to=None, replaces=fetched.event_id)


def _bundled(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    unsigned = raw.get("unsigned")
    relations = unsigned.get("m.relations") if isinstance(unsigned, Mapping) else None
    edit = relations.get("m.replace") if isinstance(relations, Mapping) else None
    return edit if isinstance(edit, Mapping) and "content" in edit else None


def _latest_edit(raw: Mapping[str, Any], original: Line) -> Line | None:
    """The edit the homeserver bundles with an event (``unsigned.m.relations.m.replace``), when it is a valid
    edit of it."""
    edit = _bundled(raw)
    if edit is None:
        return None
    line = read_event({**edit, "room_id": original.room_id})
    if line is None or line.replaces != original.event_id or line.sender != original.sender:
        return None
    if line.event_type != original.event_type:
        return None
    return line
