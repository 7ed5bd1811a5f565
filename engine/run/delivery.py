"""The one delivery queue: what must reach someone outside, kept in a table until it has, tried again with
backoff while the receiver says "later", and kept with the reason once it says "never" (or the attempts run out).

Every queue is the same shape (``Queue``): ``claim`` takes up to a batch of due rows, oldest first, skipping rows
another process holds, counting the attempt and hiding each for a lease (a process that dies mid-send leaves it
to be taken again when the lease runs out); ``next_due`` says when the next one falls due. What differs is what
is sent and how it is recorded: a ``Sender`` sends one item and says how it went (``Sent``, ``Refused``, or None
when it recorded the outcome itself), and records each outcome as its queue does; a ``Backoff`` says how long the
next wait is after an attempt, or that it is the last.

``DeliveryLoop`` runs one queue: woken by NOTIFY on insert (its channel, when it has one) or when the next item
falls due, it claims a batch and hands each to the sender — items that share an order key one after another in
claim order, the rest at the same time — until stop. ``deliver`` is the fast path: items a caller has just
claimed itself (a freshly committed answer) go the same way without waiting for the loop. It names no surface.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from engine.clock import Clock
from engine.errors import StoreError

log = logging.getLogger(__name__)

# With nothing pending the loop waits on NOTIFY; this is only the safety net for a NOTIFY that never comes — but a
# LISTEN connection can die without a word (half-open), and until it is found out (engine/store/store.py, listen:
# within 40 s) every answer waits for this net: at 60 s, make chaos's half-open-listen saw a p99 of 62 s. It is
# no longer than the workers' own poll (worker.poll_seconds, 5 s by default): a check costs one read of a
# partial index, a fifth of a second's worth of nothing.
IDLE_SECONDS = 5.0
MIN_WAIT = 0.01  # a retry falling due now is still waited for on the clock, never spun on
UNAVAILABLE_WAIT = 1.0  # the database is unavailable: try again after this long


class Item(Protocol):
    """A claimed row: its id, and the attempts made so far counting this one."""

    @property
    def id(self) -> int: ...

    @property
    def attempts(self) -> int: ...


T = TypeVar("T", bound=Item)
T_contra = TypeVar("T_contra", bound=Item, contravariant=True)


@dataclass(frozen=True, slots=True)
class Sent:
    """The receiver took it (``detail``: what it answered, e.g. the event id or the HTTP status)."""

    detail: Any = None


@dataclass(frozen=True, slots=True)
class Refused:
    """The receiver did not take it: why, whether it may later (``retryable``), when it asked to be tried again
    (``wait``, seconds: instead of the backoff's), and what it answered (``detail``)."""

    error: str
    retryable: bool
    wait: float | None = None
    detail: Any = None


Outcome = Sent | Refused | None  # None: the sender recorded the outcome itself


class Queue(Protocol[T]):
    async def claim(self, batch: int, hide_seconds: float) -> list[T]: ...

    async def next_due(self) -> float | None: ...


class Sender(Protocol[T_contra]):
    async def send(self, item: T_contra) -> Outcome: ...

    async def done(self, item: T_contra, sent: Sent) -> None: ...

    async def retry(self, item: T_contra, after: float, refused: Refused) -> None: ...

    async def failed(self, item: T_contra, refused: Refused, *, gave_up: bool) -> None:
        """Never to be sent: refused for good, or (``gave_up``) still refused as "later" on the last attempt."""
        ...


Backoff = Callable[[int], "float | None"]  # attempts so far -> the wait before the next, or None: that was the last
Listen = Callable[[str, Callable[[], None], asyncio.Event], Awaitable[None]]


class DeliveryLoop(Generic[T]):
    """One queue's loop (see the module's docstring). ``order``: items with the same key are sent one after
    another, in claim order (None: each on its own)."""

    def __init__(self, name: str, queue: Queue[T], sender: Sender[T], backoff: Backoff, clock: Clock, *,
                 listen: Listen | None = None, channel: str | None = None, batch: int = 100,
                 hide_seconds: float = 30.0, idle_seconds: float = IDLE_SECONDS,
                 order: Callable[[T], Hashable] | None = None) -> None:
        self.name = name
        self.queue = queue
        self._sender = sender
        self.backoff = backoff
        self.clock = clock
        self._listen = listen
        self.channel = channel
        self.batch = batch
        self.hide_seconds = hide_seconds
        self.idle_seconds = idle_seconds
        self._order = order
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver what is due until ``stop``: woken by NOTIFY on insert, and otherwise when the next falls due."""
        listening = None
        if self._listen is not None and self.channel is not None:
            listening = asyncio.ensure_future(self._listen(self.channel, self.wake, stop))
        waking = asyncio.ensure_future(self._wake_on(stop))
        try:
            while not stop.is_set():
                self._wake.clear()
                try:
                    if await self.deliver_due():
                        continue
                    wait = await self.queue.next_due()
                except StoreError:
                    log.warning("%s: the database is unavailable; retrying in %gs", self.name, UNAVAILABLE_WAIT)
                    wait = UNAVAILABLE_WAIT
                # Nothing waits: sleep until NOTIFY (an insert, or the LISTEN connection coming back) wakes us;
                # the long safety net only covers a notification lost some way we do not know of.
                timeout = self.idle_seconds if wait is None else max(MIN_WAIT, min(self.idle_seconds, wait))
                await self.clock.wait(self._wake, timeout)
        finally:
            for task in (listening, waking):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def _wake_on(self, stop: asyncio.Event) -> None:
        """A stop ends the wait at once (not after the safety net)."""
        await stop.wait()
        self._wake.set()

    async def deliver_due(self) -> int:
        """Claim a batch and deliver it; how many were claimed."""
        items = await self.queue.claim(self.batch, self.hide_seconds)
        await self.deliver(items)
        return len(items)

    async def deliver(self, items: Sequence[T]) -> None:
        """Deliver items already claimed: those sharing an order key in turn, the rest at the same time."""
        if len(items) == 1:
            await self.deliver_one(items[0])
            return
        groups: dict[Hashable, list[T]] = {}
        for item in items:
            groups.setdefault(self._order(item) if self._order is not None else ("item", item.id), []).append(item)

        async def in_order(group: list[T]) -> None:
            for item in group:
                await self.deliver_one(item)

        await asyncio.gather(*(in_order(group) for group in groups.values()))

    async def deliver_one(self, item: T) -> bool:
        """Send one claimed item and record how it went; True when it was sent."""
        outcome = await self._sender.send(item)
        if outcome is None:
            return False
        if isinstance(outcome, Sent):
            await self._sender.done(item, outcome)
            return True
        if outcome.retryable:
            wait = self.backoff(item.attempts)
            if wait is not None:
                await self._sender.retry(item, outcome.wait if outcome.wait is not None else wait, outcome)
                return False
        await self._sender.failed(item, outcome, gave_up=outcome.retryable)
        return False
