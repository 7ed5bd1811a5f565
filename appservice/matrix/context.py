"""What a bot is given: the conversation as the asker could read it, written onto the run row (SPEC §4).

- Summoned in a thread → the thread: its root and every reply. A thread whose root we never heard (it
  predates the bot being in the room) is fetched from the homeserver — the root and the thread's
  relations, as the bot's puppet — and kept as lines, so the next summons finds it stored.
- Outside a thread → the room's main timeline: what was said and who came and went; a thread's replies
  are not folded in (a conversation somebody stepped aside to have, which the channel does not show).
- Only lines the asker could see: the room's history visibility and their membership *at each line*,
  read back from the state events we stored (``summon_can_see_v1``, migration 0013).
- Bounded: at most ``lines`` lines are read, and the newest are kept within a token budget (about four
  characters a token); a thread keeps its root, which says what the thread is about.
- The framing words are strings (``### context``); senders go by their display name in the room, so a
  bridged sender reads as the name people see.

Ingest runs inside the database transaction that acknowledges the homeserver's transaction, so a fetch is
bounded by ``fetch_seconds``; one that fails or runs out of time is logged and the context is marked
``incomplete`` (with the site's words for it), never silently short.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import asyncpg
from mautrix.api import Method, Path
from mautrix.appservice import AppServiceAPI
from mautrix.errors import MatrixError as MautrixError
from mautrix.types import UserID

from appservice.matrix.said import Line, read_event
from engine.content.strings import Strings
from engine.errors import MatrixError
from engine.store.queries import Queries

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
PER_LINE_CHARS = 4  # the ": " and the newline a line costs besides its name and words
ELLIPSIS = "…"


@dataclass(frozen=True)
class ContextSettings:
    tokens: int = 6000  # the budget: the newest lines that fit are kept
    lines: int = 200  # at most this many lines are read
    fetch_seconds: float = 3.0  # the longest a thread fetch may hold the ingest transaction
    fetch_events: int = 200  # at most this many replies are fetched


class ThreadFetch(Protocol):
    """A thread from the homeserver, as ``as_user`` may read it: the root's event first, then its replies
    oldest first (raw client events). Raises ``MatrixError``."""

    async def __call__(self, room_id: str, root: str, *, as_user: str, limit: int) -> list[dict[str, Any]]: ...


class HomeserverThreads:
    """``ThreadFetch`` over the client-server API: ``GET /rooms/{room}/event/{root}`` and
    ``GET /v1/rooms/{room}/relations/{root}/m.thread`` (newest first, paged), as a puppet."""

    def __init__(self, api: AppServiceAPI) -> None:
        self.api = api

    async def __call__(self, room_id: str, root: str, *, as_user: str, limit: int) -> list[dict[str, Any]]:
        as_puppet = self.api.user(UserID(as_user))
        replies: list[dict[str, Any]] = []
        try:
            first = await as_puppet.request(Method.GET, Path.v3.rooms[room_id].event[root], retry_count=0)
            token: str | None = None
            while len(replies) < limit:
                params: dict[str, Any] = {"dir": "b", "limit": str(min(100, limit - len(replies)))}
                if token:
                    params["from"] = token
                page = await as_puppet.request(Method.GET, Path.v1.rooms[room_id].relations[root]["m.thread"],
                                               query_params=params, retry_count=0)
                chunk = page.get("chunk") if isinstance(page, dict) else None
                if not isinstance(chunk, list) or not chunk:
                    break
                replies.extend(e for e in chunk if isinstance(e, dict))
                token = page.get("next_batch")
                if not isinstance(token, str):
                    break
        except (MautrixError, aiohttp.ClientError, OSError, ValueError) as exc:
            raise MatrixError(f"could not read the thread {root} in {room_id}: {exc}") from exc
        root_event = first if isinstance(first, dict) else {}
        return [root_event, *reversed(replies)]


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


def _line(row: Mapping[str, Any], said: str | None = None, name: str | None = None) -> dict[str, Any]:
    return {"event_id": row["event_id"], "sender": row["sender"], "name": name or row["name"],
            "said": row["said"] if said is None else said, "ts": row["ts"]}


class ContextReader:
    """Reads what a bot is given for a line, in the ingest transaction."""

    def __init__(self, q: Queries, settings: ContextSettings | None = None, fetch: ThreadFetch | None = None) -> None:
        self.q = q
        self.settings = settings or ContextSettings()
        self.fetch = fetch

    async def read(self, conn: asyncpg.Connection, line: Line, strings: Strings, *, as_user: str) -> dict[str, Any]:
        """The conversation as ``line``'s sender reads it: the thread when asked in one, else the main
        timeline."""
        room_name = str(await conn.fetchval(self.q["context_room_name"], line.room_id))
        context: dict[str, Any]
        if line.thread_root:
            context = await self._thread(conn, line, line.thread_root, strings, as_user)
        else:
            context = await self._timeline(conn, line, strings)
        header = strings.get("context", "thread" if line.thread_root else "room")
        if header:
            context["header"] = header.format(room=room_name)
        return context

    async def _thread(self, conn: asyncpg.Connection, line: Line, root: str, strings: Strings,
                      as_user: str) -> dict[str, Any]:
        complete = True
        if not await conn.fetchval(self.q["context_stored"], root):
            complete = await self._fetch_thread(conn, line, root, as_user)
        rows = await conn.fetch(self.q["context_thread"], line.room_id, root, line.ts, line.sender, self.settings.lines)
        has_root = bool(rows) and rows[0]["event_id"] == root
        ordered = ([rows[0]] if has_root else []) + list(reversed(rows[1:] if has_root else rows))
        lines = [_line(r) for r in ordered]
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

    async def _timeline(self, conn: asyncpg.Connection, line: Line, strings: Strings) -> dict[str, Any]:
        rows = await conn.fetch(self.q["context_timeline"], line.room_id, line.ts, line.sender, self.settings.lines)
        lines: list[dict[str, Any]] = []
        for r in reversed(rows):
            if r["membership"] is None or r["said"]:
                lines.append(_line(r))
                continue
            # Who came and went, in the site's words; with none, nothing is said.
            words = strings.get("context", "joined" if r["membership"] == "join" else "left")
            if words:
                lines.append({**_line(r, words.format(name=r["subject"]), name=r["subject"]), "member": True})
        kept = within_budget(lines, self.settings.tokens)
        context: dict[str, Any] = {"kind": "timeline", "lines": kept}
        if len(kept) < len(lines):
            context["dropped"] = len(lines) - len(kept)
        return context

    async def _fetch_thread(self, conn: asyncpg.Connection, line: Line, root: str, as_user: str) -> bool:
        """Fetch a thread we have not stored and keep its lines; False when it could not be read."""
        if self.fetch is None:
            log.warning("the thread %s is not stored and nothing can fetch it; its context is incomplete", root,
                        extra={"room": line.room_id})
            return False
        try:
            events = await asyncio.wait_for(
                self.fetch(line.room_id, root, as_user=as_user, limit=self.settings.fetch_events),
                self.settings.fetch_seconds,
            )
        except (TimeoutError, MatrixError) as exc:
            log.warning("the thread %s could not be fetched (%s); its context is incomplete", root,
                        exc or "timed out", extra={"room": line.room_id})
            return False
        try:
            async with conn.transaction():  # a savepoint: a bad fetched event never loses the asking line
                for raw in events:
                    await self._keep(conn, line.room_id, root, raw)
        except (asyncpg.DataError, ValueError, TypeError) as exc:
            log.warning("the thread %s was fetched but could not be kept (%s); its context is incomplete", root,
                        exc, extra={"room": line.room_id})
            return False
        return True

    async def _keep(self, conn: asyncpg.Connection, room_id: str, root: str, raw: Mapping[str, Any]) -> None:
        fetched = read_event({**raw, "room_id": room_id})
        if fetched is None or fetched.is_state or fetched.replaces or fetched.redacts:
            return
        if fetched.event_id != root and fetched.thread_root != root:
            return
        text = _latest_edit(raw, fetched) or fetched.text
        await conn.execute(self.q["context_store_fetched"], fetched.event_id, room_id, fetched.sender,
                           fetched.event_type, fetched.ts, dict(raw.get("content") or {}), text,
                           fetched.thread_root, fetched.reply_to)


def _latest_edit(raw: Mapping[str, Any], original: Line) -> str | None:
    """The text of the edit the homeserver bundles with an event (``unsigned.m.relations.m.replace``), when
    it is a valid edit of it."""
    unsigned = raw.get("unsigned")
    relations = unsigned.get("m.relations") if isinstance(unsigned, Mapping) else None
    edit = relations.get("m.replace") if isinstance(relations, Mapping) else None
    if not isinstance(edit, Mapping) or "content" not in edit:
        return None
    line = read_event({**edit, "room_id": original.room_id})
    if line is None or line.replaces != original.event_id or line.sender != original.sender:
        return None
    return line.text
