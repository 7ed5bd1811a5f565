"""The runs this worker is making a model call for, told the moment one is asked to stop.

Every way a run is asked to stop sets its ``cancel_requested``; a running run's flag going up NOTIFYs
``summon_cancel`` with its id (migration 0076), and the one listening connection here sets the stop of the call
under way, which aborts it (``engine.providers.base.Watch``): its HTTP call is closed, so the generation and the
bill stop where the provider supports it, instead of the call finishing, paid for, while the cancel waits for the
next step. Notifications sent while the listening connection was down are gone: on every (re)connection the
flags of every call under way are read from their rows instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from engine.errors import StoreError
from engine.store import Store

log = logging.getLogger(__name__)

CHANNEL = "summon_cancel"


class Cancels:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._calls: dict[int, asyncio.Event] = {}
        self._checks: set[asyncio.Task[None]] = set()

    async def listen(self, stop: asyncio.Event) -> None:
        """Hear the runs asked to stop, until ``stop``."""
        await self.store.listen(CHANNEL, self._reconnected, stop, payload=self._heard)

    @contextmanager
    def watching(self, run_id: int) -> Iterator[asyncio.Event]:
        """The stop of run ``run_id``'s call, set when the run is asked to stop while this is open."""
        stop = asyncio.Event()
        self._calls[run_id] = stop
        try:
            yield stop
        finally:
            if self._calls.get(run_id) is stop:
                del self._calls[run_id]

    def _heard(self, payload: str) -> None:
        try:
            run_id = int(payload)
        except ValueError:
            log.warning("a cancel notification that names no run: %r", payload[:80])
            return
        stop = self._calls.get(run_id)
        if stop is not None:
            log.info("run %s was asked to stop during its model call; stopping the call", run_id,
                     extra={"run": run_id})
            stop.set()

    def _reconnected(self) -> None:
        if not self._calls:
            return
        check = asyncio.ensure_future(self._read_flags(list(self._calls)))
        self._checks.add(check)
        check.add_done_callback(self._checks.discard)

    async def _read_flags(self, run_ids: list[int]) -> None:
        try:
            cancelled = await self.store.runs.cancel_requested_of(run_ids)
        except StoreError:
            log.warning("could not read whether the runs with calls under way were asked to stop; their next "
                        "step reads it")
            return
        for run_id in cancelled:
            self._heard(str(run_id))
