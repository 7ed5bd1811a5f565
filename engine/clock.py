"""The one clock a process keeps. Code that waits or measures is handed a Clock; the pure core is handed `now`.

Every time that is *stored* comes from the database (``now()``, ``clock_timestamp()``): leases, runs, steps,
schedules' clocks. Many processes on many machines share one PostgreSQL, and only its clock is the same for
all of them. So what a stored time is compared against comes from the database too — the worker reads it
with every fenced write and the tick with every tick — and ``decide`` is never handed a mix of the two.

A process's Clock is for what is never stored: how long to wait (``sleep``, ``wait``), how long something
took (``monotonic``), and a signature's age against the sender's clock (``now``). No code outside this
module sleeps or times a wait with asyncio directly (a test reads the source to hold that).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...
    def monotonic(self) -> float: ...
    async def sleep(self, seconds: float) -> None: ...
    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        """Wait until ``event`` is set or ``seconds`` have passed; whether it was set."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), max(0.0, seconds))
        return event.is_set()


class FakeClock:
    """A clock tests move by hand; ``sleep`` and ``wait`` advance it instead of waiting."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    async def sleep(self, seconds: float) -> None:
        self.advance(seconds)
        await asyncio.sleep(0)

    async def wait(self, event: asyncio.Event, seconds: float) -> bool:
        if not event.is_set():
            self.advance(seconds)
        await asyncio.sleep(0)
        return event.is_set()
