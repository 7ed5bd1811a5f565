"""The worker: ``slots`` runs at a time, claimed by short autocommit statements and each then held by
id (``engine/run/hold.py``) until it is done or its wall-clock budget is spent; woken by NOTIFY; beating
every few seconds to say whether it can answer model calls; and sweeping up the runs of workers that died.
Handing a run back releases the lease; the status change NOTIFYs, so the next worker starts at once.

Slots are cheap: a held run holds no database connection while it awaits a model or a tool, only while it
writes a step. So the default is sized for model calls that take seconds (``DEFAULT_SLOTS``, measured with
``python -m tests.bench.slots``), and one claimer takes runs while a slot is free — a NOTIFY costs one claim,
not one per idle slot, and a burst of runs is taken up to ``CLAIM_BATCH`` to a statement, not one by one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from engine.clock import Clock
from engine.content import Registry
from engine.core.limits import DEFAULT_SLOTS
from engine.errors import LeaseLost, StoreError
from engine.memory.recall import Recall
from engine.meter import NO_METER, Meter
from engine.providers.base import Answerer, ProviderStatus
from engine.run.cancels import Cancels
from engine.run.hold import Hold
from engine.store import Store
from engine.store.runs import Claim
from engine.surface import Ended, Opener, RunInfo, Surface
from engine.tasks import TaskGroup
from engine.tools.base import ContentTools, Handed, ToolFn
from engine.tools.runner import SiteClasses, ToolRunner

log = logging.getLogger(__name__)

CLAIM_BATCH = 32  # runs one claim takes at most: a burst is taken in a few statements, and one worker
# still leaves the rest of a long queue to the others


@dataclass(frozen=True)
class WorkerSettings:
    slots: int = DEFAULT_SLOTS
    budget_seconds: float = 60.0
    lease_seconds: float = 90.0
    sweep_seconds: float = 10.0
    poll_seconds: float = 5.0
    sweep_batch: int = 1000
    heartbeat_seconds: float = 10.0


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
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
        surface_tools: Collection[str] = (),
        harness: Mapping[str, ToolFn] | None = None,
        content_tools: ContentTools | None = None,
        site_classes: SiteClasses | None = None,
        worker_id: str | None = None,
        status: ProviderStatus,
        recall: Recall | None = None,
        meter: Meter | None = None,
        openers: Mapping[str, Opener] | None = None,
        hold: type[Hold] = Hold,
        streamed: Collection[str] = (),
        handed: Mapping[str, Handed] | None = None,
    ) -> None:
        """``status``: whether a provider is usable here (``Answerer.status()``), said on every heartbeat.
        ``tools``, ``content_tools`` and ``site_classes`` are the run's hands (``engine.tools.runner``; the
        surfaces' own built-ins among ``tools`` are those ``surface_tools`` names);
        ``harness`` are a test's or a bench's own tools, offered to every run (never in production);
        ``openers`` open what surfaces keep sealed off a run's context (``engine.surface.Opener``); ``hold``: how
        a claimed run is held (a test or a bench may pass one that watches it more closely); ``streamed``: the
        surfaces that answer as it comes (their runs' words are told as the model says them); ``handed``: by surface,
        the tools it hands to its asker's own client to run (``engine.tools.base.Handed``)."""
        self.store = store
        self._registry = registry
        self.answerer = answerer
        self.surfaces = surfaces
        self.clock = clock
        self.settings = settings
        self.toolbox = ToolRunner(registry, surfaces, store, tools=tools, harness=harness,
                                  content_tools=content_tools, site_classes=site_classes,
                                  surface_tools=surface_tools, handed=handed)
        self.id = worker_id or new_worker_id()
        # Whether this worker can answer model calls, as its heartbeat says: required, since a default would be a
        # guess — and the old guess, "usable as the stand-in", is the one SPEC §2 forbids.
        self.status = status
        # person+recall's embedder and settings; its model loads on first use (never when no bot recalls).
        self.recall = recall or Recall()
        self.meter = meter or NO_METER
        self.openers = dict(openers or {})
        self._hold = hold
        self.streamed = frozenset(streamed)
        # A run asked to stop while its model call is made has the call aborted (heard while ``run`` runs).
        self.cancels = Cancels(store)
        self._wake = asyncio.Event()
        self._generation = 0

    # --- the long-running parts --------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and hold up to ``slots`` runs at once, woken by NOTIFY, until ``stop`` is set."""
        try:
            async with TaskGroup("worker") as group:
                group.spawn(self.store.listen("summon_runs", self._poke, stop), name="worker-listen")
                group.spawn(self.cancels.listen(stop), name="worker-cancels")
                group.spawn(self._claimer(stop, group), name="worker-claim")
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

    async def _claimer(self, stop: asyncio.Event, group: TaskGroup) -> None:
        """One claim at a time while a slot is free; each run claimed is held in a task of its own, which
        frees its slot when it ends. Nothing claimable: wait for a NOTIFY (or the safety-net poll)."""
        free = asyncio.Semaphore(self.settings.slots)
        while not stop.is_set():
            await free.acquire()
            # As many free slots as there are (up to CLAIM_BATCH), taken without waiting: a burst of summonses
            # is claimed in a few statements rather than one round trip per run, which under load was the queue.
            taken = 1
            while taken < CLAIM_BATCH and not free.locked():
                await free.acquire()
                taken += 1
            seen = self._generation
            asked = self.clock.monotonic()
            try:
                claims = await self.claim_up_to(taken)
            except StoreError:
                for _ in range(taken):
                    free.release()
                log.warning("worker: the database is unavailable; claiming again in 1s")
                await self.clock.sleep(1)
                continue
            took = self.clock.monotonic() - asked
            for claim in claims:
                self._metered(claim, took)
                group.spawn(self._held(claim, free), name=f"worker-run-{claim.run.id}")
            for _ in range(taken - len(claims)):
                free.release()
            if claims or stop.is_set() or self._generation != seen:
                continue
            self._wake.clear()
            await self.clock.wait(self._wake, self.settings.poll_seconds)

    async def _held(self, claim: Claim, free: asyncio.Semaphore) -> None:
        self.meter.slot(True)
        try:
            await self.hold(claim)
        except LeaseLost as exc:
            log.warning("%s; stopping work on it", exc, extra={"run": claim.run.id})
        except StoreError as exc:
            # The lease runs out and the sweep hands the run to a worker that can reach the database.
            log.warning("run %s: the database is unavailable (%s); leaving it to the sweep", claim.run.id, exc,
                        extra={"run": claim.run.id})
        finally:
            self.meter.slot(False)
            free.release()

    async def _sweeper(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sweep()
            except StoreError:
                log.warning("lease sweep failed (the database is unavailable); will try again")
            await self.clock.wait(stop, self.settings.sweep_seconds)

    # --- one claim, one run -----------------------------------------------------------------------

    async def claim(self) -> Claim | None:
        """Claim the next run (one short autocommit statement); None when nothing is claimable."""
        return await self.store.runs.claim(self.id, self.settings.lease_seconds)

    async def claim_up_to(self, most: int) -> list[Claim]:
        """Claim up to ``most`` runs, the ones due first (one short autocommit statement)."""
        return await self.store.runs.claim_up_to(self.id, self.settings.lease_seconds, most)

    async def work_once(self) -> bool:
        """Claim one run and hold it. False when nothing was claimable."""
        asked = self.clock.monotonic()
        claim = await self.claim()
        if claim is None:
            return False
        self._metered(claim, self.clock.monotonic() - asked)
        self.meter.slot(True)
        try:
            await self.hold(claim)
        except LeaseLost as exc:
            log.warning("%s; stopping work on it", exc, extra={"run": claim.run.id})
        finally:
            self.meter.slot(False)
        return True

    def _metered(self, claim: Claim, took: float) -> None:
        """What a claim tells /metrics: how long the claim took and, the first time, how long the run waited."""
        first = claim.run.attempts == 1
        self.meter.claimed(took, (claim.now - claim.run.created_at).total_seconds() if first else None)
        if first:
            self.meter.run_started(claim.run.bot)

    async def hold(self, claim: Claim) -> None:
        await self.holding(claim)()

    def holding(self, claim: Claim) -> Hold:
        """How this worker holds a claimed run."""
        return self._hold(
            claim, store=self.store, registry=self._registry, answerer=self.answerer,
            surface=self.surfaces.get(claim.run.surface), toolbox=self.toolbox, clock=self.clock, owner=self.id,
            lease_seconds=self.settings.lease_seconds, budget_seconds=self.settings.budget_seconds,
            recall=self.recall, meter=self.meter, openers=self.openers, cancels=self.cancels,
            streams=claim.run.surface in self.streamed,
        )

    # --- the sweep ------------------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Re-queue runs whose worker died; a cancelled or worn-out one is ended where it was asked."""
        ended: list[tuple[str, str]] = []
        async with self.store.transaction("sweep_expired") as tx:
            rows = await tx.runs.sweep(self.settings.sweep_batch)
            for r in rows:
                if r.status in ("cancelled", "failed"):
                    await tx.people.settle(r.id)
                    full = await tx.runs.get(r.id)
                    assert full is not None
                    ended.append((full.bot, r.status))
                    info = RunInfo.of(full)
                    surface = self.surfaces.get(info.surface)
                    if surface is not None:
                        await surface.deliver(tx, info, Ended("cancelled" if r.status == "cancelled" else "failed"))
        for bot, ending in ended:
            self.meter.run_finished(bot, ending)
        if rows:
            log.info("sweep: %d expired lease(s) handled", len(rows))
        return len(rows)
