"""A conversation's event stream: server-sent events a widget reads, resumed with ``Last-Event-ID``.

Every change to a conversation is an event numbered in commit order (``desk_events``), so a stream is a
reader of that log. A stream first reads what is after the number its reader has (its own catch-up), then
lives on what its conversation's feed hands it: one feed per conversation with open streams, woken by the one
LISTEN of the process, reads the log once per wake and hands the events to every stream of that
conversation — a thousand streams on one conversation cost one read a commit, not a thousand. Each stream
still sends only what is after its own last number, so a reader that reconnects with ``Last-Event-ID``
(EventSource does so by itself) gets exactly what it missed, nothing twice. When the LISTEN connection comes
back after a loss, every feed reads again (what was notified meanwhile is gone, what was committed is not).
The staff's private events are never on a contact's stream.

Streams are bounded: ``desk.streams_per_contact`` per contact and ``desk.streams_per_process`` in all (429
past either). A contact's stream ends when its token expires and when the contact's tokens are revoked
(the revocation NOTIFYs ``contact:<id>``; after the LISTEN comes back, one read asks which of the contacts
with streams open were revoked meanwhile); the widget comes back with a renewed token, or is refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from appservice.desk.errors import RequestRefused
from appservice.desk.tables import DeskEvent, DeskTables
from engine.clock import Clock
from engine.errors import StoreError
from engine.store import Store

log = logging.getLogger(__name__)

CHANNEL = "summon_desk"
REVOKED = "contact:"  # the NOTIFY payload that a contact's tokens were revoked
BATCH = 200
BEHIND = 2_000  # events held for a stream that does not keep up; past it, the stream reads for itself
KEEPALIVE_SECONDS = 15.0  # a comment line now and then keeps proxies from closing an idle stream
RETRY_MS = 1000  # how soon a browser reconnects after losing the stream


@dataclass(eq=False)
class Reader:
    """One open stream: what its feed has handed it and not yet sent."""

    conversation_id: int
    contact_id: int | None  # None: the staff's
    private: bool
    connected: Callable[[], bool]  # whether its reader is still there (aiohttp tells only at the next write)
    since: int | None  # when its token's chain began: a revocation at or after it ends the stream
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    pending: list[DeskEvent] = field(default_factory=list)
    behind: bool = False  # handed more than BEHIND: drop them, read from its own last number instead
    ended: bool = False
    closed: bool = False

    def hand(self, events: list[DeskEvent]) -> None:
        if len(self.pending) + len(events) > BEHIND:
            self.pending.clear()
            self.behind = True
        else:
            self.pending.extend(events)
        self.ready.set()

    def end(self) -> None:
        self.ended = True
        self.ready.set()


@dataclass(eq=False)
class Feed:
    """A conversation's one reader of the log, for every stream open on it."""

    head: int  # the last number read (or a number known to be at most the last committed)
    readers: set[Reader] = field(default_factory=set)
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None  # held here: the loop keeps only a weak reference to a task


class Streams:
    """The process's open streams by conversation (each conversation's feed) and by contact, woken by the one
    LISTEN."""

    def __init__(self, store: Store, clock: Clock, *, per_contact: int = 4, per_process: int = 1000,
                 words: Callable[[str], str] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.per_contact = per_contact
        self.per_process = per_process
        self._words = words or (lambda key: "")
        self.stopping = asyncio.Event()
        self._feeds: dict[int, Feed] = {}
        self._contacts: dict[int, set[Reader]] = {}
        self._open = 0
        self._rechecking: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.store.listen(CHANNEL, self._connected, stop, payload=self._heard)
        finally:
            self.stopping.set()
            self.wake_all()

    def _heard(self, payload: str) -> None:
        if payload.isdecimal():
            feed = self._feeds.get(int(payload))
            if feed is not None:
                feed.woken.set()
        elif payload.startswith(REVOKED) and payload[len(REVOKED):].isdecimal():
            revoked = self._contacts.get(int(payload[len(REVOKED):]), set())
            if revoked:
                log.info("desk: %d stream(s) ended, their contact's tokens revoked", len(revoked))
            for reader in list(revoked):
                reader.end()
        else:
            self.wake_all()

    def _connected(self) -> None:
        """The LISTEN is (back) up: whatever was notified while it was down is gone, so every feed reads and
        the revocations are asked for."""
        self.wake_all()
        if self._contacts:
            self._rechecking = asyncio.ensure_future(self._recheck(list(self._contacts)))

    async def _recheck(self, contact_ids: list[int]) -> None:
        try:
            revoked = await self.store.of(DeskTables).revoked_among(contact_ids)
        except StoreError as exc:
            log.warning("desk: could not ask which streaming contacts were revoked (%s)", exc)
            return
        for contact_id, moment in revoked.items():
            for reader in list(self._contacts.get(contact_id, ())):
                if reader.since is not None and reader.since <= moment.timestamp():
                    reader.end()

    def wake_all(self) -> None:
        for feed in self._feeds.values():
            feed.woken.set()
            for reader in feed.readers:
                reader.ready.set()

    def open(self, conversation_id: int, head: int, *, contact_id: int | None, private: bool,
             connected: Callable[[], bool] = lambda: True, since: int | None = None) -> Reader:
        """A new stream on ``conversation_id`` (whose last number is at least ``head``), joined to its feed;
        ``RequestRefused`` (429) past the contact's or the process's cap — counting only streams whose
        reader is still connected (one that went is let go here, not at its next keepalive)."""
        theirs = self._contacts.get(contact_id, set()) if contact_id is not None else set()
        if self._open >= self.per_process or len(theirs) >= self.per_contact:
            self._let_go(theirs if len(theirs) >= self.per_contact else
                         {r for feed in self._feeds.values() for r in feed.readers})
        if self._open >= self.per_process or len(theirs) >= self.per_contact:
            log.warning("desk: a stream on conversation %s refused: %d open (%d of contact %s)", conversation_id,
                        self._open, len(theirs), contact_id)
            raise RequestRefused(429, self._words("too_many_streams"))
        reader = Reader(conversation_id, contact_id, private, connected, since)
        feed = self._feeds.get(conversation_id)
        if feed is None:
            feed = self._feeds[conversation_id] = Feed(head)
            feed.task = asyncio.ensure_future(self._feed(conversation_id, feed))
        feed.readers.add(reader)
        if contact_id is not None:
            self._contacts.setdefault(contact_id, set()).add(reader)
        self._open += 1
        return reader

    def _let_go(self, readers: set[Reader]) -> None:
        for reader in [r for r in readers if not r.connected()]:
            reader.end()
            self.close(reader)

    def close(self, reader: Reader) -> None:
        if reader.closed:
            return
        reader.closed = True
        self._open -= 1
        if reader.contact_id is not None:
            theirs = self._contacts.get(reader.contact_id, set())
            theirs.discard(reader)
            if not theirs:
                self._contacts.pop(reader.contact_id, None)
        feed = self._feeds.get(reader.conversation_id)
        if feed is not None:
            feed.readers.discard(reader)
            if not feed.readers:
                del self._feeds[reader.conversation_id]
                feed.woken.set()  # its task sees no readers and ends

    @property
    def open_streams(self) -> int:
        return self._open

    async def _feed(self, conversation_id: int, feed: Feed) -> None:
        """Read the conversation's log once each wake, from the feed's head, and hand it to every stream."""
        try:
            while feed.readers and not self.stopping.is_set():
                await feed.woken.wait()
                feed.woken.clear()
                while feed.readers:
                    events = await self.store.of(DeskTables).events_after(conversation_id, feed.head, private=True, limit=BATCH)
                    if events:
                        feed.head = events[-1].seq
                        for reader in list(feed.readers):
                            reader.hand(events)
                    if len(events) < BATCH:
                        break
        except StoreError as exc:  # its streams end; their readers come back with Last-Event-ID
            log.warning("desk: the feed of conversation %s stopped (%s); its streams end", conversation_id, exc)
            for reader in list(feed.readers):
                reader.end()


def last_event_id(request: web.Request) -> int:
    """Where a reader is: the ``Last-Event-ID`` header (EventSource's own resume), else ``?last_event_id=``."""
    given = request.headers.get("Last-Event-ID") or request.query.get("last_event_id") or "0"
    return int(given) if given.isascii() and given.isdecimal() and len(given) <= 18 else 0


async def serve(streams: Streams, request: web.Request, conversation_id: int, head: int, *,
                contact_id: int | None = None, since: int | None = None, until: float | None = None,
                private: bool = False, headers: dict[str, str] | None = None) -> web.StreamResponse:
    """Stream conversation ``conversation_id``'s events to ``request`` from its ``Last-Event-ID`` on, until
    the reader goes, the service stops, ``until`` (the token's expiry, unix seconds) or the token is revoked."""
    # Joined before the first read: nothing committed after it is missed.
    reader = streams.open(conversation_id, head, contact_id=contact_id, private=private, since=since,
                          connected=lambda: request.transport is not None and not request.transport.is_closing())
    try:
        last = last_event_id(request)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no", **(headers or {})})
        await response.prepare(request)
        await response.write(f"retry: {RETRY_MS}\n\n".encode())

        async def send(events: list[DeskEvent]) -> None:
            nonlocal last
            for event in events:
                if event.seq > last and (private or not event.private):
                    data = json.dumps(event.payload, ensure_ascii=False)
                    await response.write(f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode())
                    last = event.seq

        await _catch_up(streams, conversation_id, lambda: last, private, send)
        while not streams.stopping.is_set() and not reader.ended:
            left = KEEPALIVE_SECONDS if until is None else until - streams.clock.now().timestamp()
            if left <= 0:
                log.debug("stream of desk conversation %s ended at its token's expiry", conversation_id)
                break
            if not await streams.clock.wait(reader.ready, min(KEEPALIVE_SECONDS, left)):
                if until is None or until > streams.clock.now().timestamp():
                    await response.write(b": keepalive\n\n")
                continue
            reader.ready.clear()
            handed, reader.pending = reader.pending, []
            if reader.behind:
                reader.behind = False
                await _catch_up(streams, conversation_id, lambda: last, private, send)
            else:
                await send(handed)
    except ConnectionResetError:
        log.debug("stream of desk conversation %s closed by its reader", conversation_id)
    finally:
        streams.close(reader)
    return response


async def _catch_up(streams: Streams, conversation_id: int, last: Callable[[], int], private: bool,
                    send: Callable[[list[DeskEvent]], Awaitable[None]]) -> None:
    """A stream's own reads: what is after its last number, batch by batch, until it is level with the log."""
    while True:
        events = await streams.store.of(DeskTables).events_after(conversation_id, last(), private=private, limit=BATCH)
        await send(events)
        if len(events) < BATCH:
            return
