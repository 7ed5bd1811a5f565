"""A conversation's event stream: server-sent events a widget reads, resumed with ``Last-Event-ID``.

Every change to a conversation is an event numbered in commit order (``desk_events``), so a stream is a
reader of that log: it sends what is after the last number its reader has, then waits to be woken. One LISTEN
serves every stream in the process: a commit NOTIFYs the conversation's id and only that conversation's
streams read again; when the LISTEN connection comes back after a loss, every stream reads again (what was
notified meanwhile is gone, what was committed is not). A reader that reconnects with ``Last-Event-ID``
(EventSource does so by itself) gets exactly what it missed, nothing twice. The staff's private events are
never on a contact's stream.
"""

from __future__ import annotations

import asyncio
import json
import logging

from aiohttp import web

from engine.clock import Clock
from engine.store import Store

log = logging.getLogger(__name__)

CHANNEL = "summon_desk"
BATCH = 200
KEEPALIVE_SECONDS = 15.0  # a comment line now and then keeps proxies from closing an idle stream
RETRY_MS = 1000  # how soon a browser reconnects after losing the stream


class Streams:
    """Which streams wait on which conversation, woken by the one LISTEN."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.stopping = asyncio.Event()
        self._waiting: dict[int, set[asyncio.Event]] = {}

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.store.listen(CHANNEL, self.wake_all, stop, payload=self._heard)
        finally:
            self.stopping.set()
            self.wake_all()

    def _heard(self, payload: str) -> None:
        if payload.isdecimal():
            for event in self._waiting.get(int(payload), ()):
                event.set()
        else:
            self.wake_all()

    def wake_all(self) -> None:
        for events in self._waiting.values():
            for event in events:
                event.set()

    def subscribe(self, conversation_id: int) -> asyncio.Event:
        event = asyncio.Event()
        self._waiting.setdefault(conversation_id, set()).add(event)
        return event

    def unsubscribe(self, conversation_id: int, event: asyncio.Event) -> None:
        events = self._waiting.get(conversation_id)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiting[conversation_id]

    @property
    def open_streams(self) -> int:
        return sum(len(events) for events in self._waiting.values())


def last_event_id(request: web.Request) -> int:
    """Where a reader is: the ``Last-Event-ID`` header (EventSource's own resume), else ``?last_event_id=``."""
    given = request.headers.get("Last-Event-ID") or request.query.get("last_event_id") or "0"
    return int(given) if given.isdecimal() and len(given) <= 18 else 0


async def serve(streams: Streams, request: web.Request, conversation_id: int, *, private: bool = False,
                headers: dict[str, str] | None = None) -> web.StreamResponse:
    """Stream conversation ``conversation_id``'s events to ``request`` from its ``Last-Event-ID`` on, until
    the reader goes or the service stops."""
    last = last_event_id(request)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                           "X-Accel-Buffering": "no", **(headers or {})})
    await response.prepare(request)
    woken = streams.subscribe(conversation_id)  # before the first read: nothing committed after it is missed
    try:
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        while not streams.stopping.is_set():
            woken.clear()
            events = await streams.store.desk.events_after(conversation_id, last, private=private, limit=BATCH)
            for event in events:
                data = json.dumps(event.payload, ensure_ascii=False)
                await response.write(f"id: {event.seq}\nevent: {event.kind}\ndata: {data}\n\n".encode())
                last = event.seq
            if len(events) == BATCH:
                continue
            if not await streams.clock.wait(woken, KEEPALIVE_SECONDS):
                await response.write(b": keepalive\n\n")
    except ConnectionResetError:
        log.debug("stream of desk conversation %s closed by its reader", conversation_id)
    finally:
        streams.unsubscribe(conversation_id, woken)
    return response
