"""Responses waiting for their runs. A run may finish in any worker on any machine; its finishing commit
NOTIFYs ``summon_door`` (the door surface's ``deliver``), and this wakes, reads which of the runs waited for
have ended — all of them in one statement — and hands each its ending. A slow poll is the safety net (a
notification sent while the listening connection was down, a run ended without a delivery)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from appservice.door.tables import DoorTables, EndedRun
from engine.clock import Clock
from engine.errors import StoreError
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

CHANNEL = "summon_door"


@dataclass
class _Waiter:
    event: asyncio.Event = field(default_factory=asyncio.Event)
    ended: EndedRun | None = None


class Waiters:
    def __init__(self, store: Store, clock: Clock, *, poll_seconds: float = 2.0) -> None:
        self.store = store
        self.clock = clock
        self.poll_seconds = poll_seconds
        self._waiting: dict[int, list[_Waiter]] = {}
        self._poke = asyncio.Event()

    def start(self, tasks: TaskGroup, stop: asyncio.Event) -> None:
        tasks.spawn(self.store.listen(CHANNEL, self._poke.set, stop), name="door-listen")
        tasks.spawn(self._check_when_poked(stop), name="door-waiters")

    async def wait(self, run_id: int, seconds: float) -> EndedRun | None:
        """The run's ending once it has one, or None after ``seconds`` (or when cancelled from outside)."""
        waiter = _Waiter()
        self._waiting.setdefault(run_id, []).append(waiter)
        self._poke.set()  # it may have ended already
        try:
            await self.clock.wait(waiter.event, seconds)
        finally:
            left = [w for w in self._waiting.get(run_id, []) if w is not waiter]
            if left:
                self._waiting[run_id] = left
            else:
                self._waiting.pop(run_id, None)
        return waiter.ended

    def close(self) -> None:
        """Wake the checker so it sees the stop at once."""
        self._poke.set()

    async def _check_when_poked(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.clock.wait(self._poke, self.poll_seconds)
            self._poke.clear()
            if not self._waiting:
                continue
            try:
                ended = await self.store.of(DoorTables).ended(list(self._waiting))
            except StoreError:
                log.warning("could not read which door turns ended (the database is unavailable); will try again")
                continue
            for row in ended:
                for waiter in self._waiting.pop(row.id, []):
                    waiter.ended = row
                    waiter.event.set()
