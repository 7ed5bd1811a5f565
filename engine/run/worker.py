"""The worker: ``slots`` runs at a time, each claimed with one short autocommit statement and then held by
id (``engine/run/hold.py``) until it is done or its wall-clock budget is spent; woken by NOTIFY; beating
every few seconds to say whether it can answer model calls; and sweeping up the runs of workers that died.
Handing a run back releases the lease; the status change NOTIFYs, so the next worker starts at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engine.clock import Clock
from engine.content import Registry
from engine.errors import LeaseLost, StoreError
from engine.memory.recall import Recall
from engine.providers.base import Answerer, ProviderStatus
from engine.run.hold import Hold
from engine.store import Store
from engine.store.runs import Claim
from engine.surface import Ended, RunInfo, Surface
from engine.tasks import TaskGroup
from engine.tools.base import ContentTools, ToolFn
from engine.tools.runner import SiteClasses, ToolRunner

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerSettings:
    slots: int = 2
    budget_seconds: float = 60.0
    lease_seconds: float = 90.0
    sweep_seconds: float = 10.0
    poll_seconds: float = 5.0
    sweep_batch: int = 1000
    heartbeat_seconds: float = 10.0


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    hold_class: type[Hold] = Hold  # how a claimed run is held (a test or a bench may watch it more closely)

    def __init__(
        self,
        store: Store,
        registry: Callable[[], Registry],
        answerer: Answerer,
        surfaces: Mapping[str, Surface],
        clock: Clock,
        settings: WorkerSettings,
        *,
        tools: Mapping[str, ToolFn] | None = None,
        harness: Mapping[str, ToolFn] | None = None,
        content_tools: ContentTools | None = None,
        site_classes: SiteClasses | None = None,
        worker_id: str | None = None,
        status: ProviderStatus | None = None,
        recall: Recall | None = None,
    ) -> None:
        """``tools``, ``content_tools`` and ``site_classes`` are the run's hands (``engine.tools.runner``);
        ``harness`` are a test's or a bench's own tools, offered to every run (never in production)."""
        self.store = store
        self._registry = registry
        self.answerer = answerer
        self.surfaces = surfaces
        self.clock = clock
        self.settings = settings
        self.toolbox = ToolRunner(registry, surfaces, store, tools=tools, harness=harness,
                                  content_tools=content_tools, site_classes=site_classes)
        self.id = worker_id or new_worker_id()
        self.status = status or ProviderStatus(usable=True, mode="stand-in")
        # person+recall's embedder and settings; its model loads on first use (never when no bot recalls).
        self.recall = recall or Recall()
        self._wake = asyncio.Event()
        self._generation = 0

    # --- the long-running parts --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and hold runs with ``slots`` concurrent slots, woken by NOTIFY, until ``stop`` is set."""
        try:
            async with TaskGroup("worker") as group:
                group.spawn(self.store.listen("summon_runs", self._poke, stop), name="worker-listen")
                for n in range(self.settings.slots):
                    group.spawn(self._slot(n, stop), name=f"worker-slot-{n}")
                group.spawn(self._sweeper(stop), name="worker-sweep")
                group.spawn(self._heartbeat(stop), name="worker-heartbeat")
                await stop.wait()
                self._poke()
        finally:
            try:
                await self.store.workers.forget(self.id)
            except StoreError:
                log.warning("could not take this worker's provider status down; it will go stale")

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        """Say on start and every heartbeat whether this worker can answer model calls (SPEC §2)."""
        s = self.status
        while not stop.is_set():
            try:
                await self.store.workers.beat(self.id, usable=s.usable, mode=s.mode, providers=list(s.providers))
            except StoreError:
                log.warning("could not record the provider status (the database is unavailable)")
            await self.clock.wait(stop, self.settings.heartbeat_seconds)

    def _poke(self) -> None:
        self._generation += 1
        self._wake.set()

    async def _slot(self, n: int, stop: asyncio.Event) -> None:
        while not stop.is_set():
            seen = self._generation
            try:
                held = await self.work_once()
            except StoreError:
                log.warning("worker slot %s: the database is unavailable; retrying in 1s", n)
                await self.clock.sleep(1)
                continue
            if held or stop.is_set():
                continue
            if self._generation != seen:
                continue
            self._wake.clear()
            await self.clock.wait(self._wake, self.settings.poll_seconds)

    async def _sweeper(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sweep()
            except StoreError:
                log.warning("lease sweep failed (the database is unavailable); will try again")
            await self.clock.wait(stop, self.settings.sweep_seconds)

    # --- one claim, one run -----------------------------------------------------------------------

    async def work_once(self) -> bool:
        """Claim one run and hold it. False when nothing was claimable."""
        claim = await self.store.runs.claim(self.id, self.settings.lease_seconds)
        if claim is None:
            return False
        try:
            await self.hold(claim)
        except LeaseLost as exc:
            log.warning("%s; stopping work on it", exc, extra={"run": claim.run.id})
        return True

    async def hold(self, claim: Claim) -> None:
        await self.holding(claim)()

    def holding(self, claim: Claim) -> Hold:
        """How this worker holds a claimed run."""
        return self.hold_class(
            claim, store=self.store, registry=self._registry, answerer=self.answerer,
            surface=self.surfaces.get(claim.run.surface), toolbox=self.toolbox, clock=self.clock, owner=self.id,
            lease_seconds=self.settings.lease_seconds, budget_seconds=self.settings.budget_seconds,
            recall=self.recall,
        )

    # --- the sweep ------------------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Re-queue runs whose worker died; a cancelled or worn-out one is ended where it was asked."""
        async with self.store.transaction("sweep_expired") as tx:
            rows = await tx.runs.sweep(self.settings.sweep_batch)
            for r in rows:
                if r.status in ("cancelled", "failed"):
                    await tx.people.settle(r.id)
                    full = await tx.runs.get(r.id)
                    assert full is not None
                    info = RunInfo.of(full)
                    surface = self.surfaces.get(info.surface)
                    if surface is not None:
                        await surface.deliver(tx, info, Ended("cancelled" if r.status == "cancelled" else "failed"))
        if rows:
            log.info("sweep: %d expired lease(s) handled", len(rows))
        return len(rows)
