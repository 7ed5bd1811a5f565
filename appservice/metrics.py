"""/metrics: the one registry of every figure summon exports, in Prometheus's text format, on a listener of
its own (``metrics.listen``; off unless set).

Two kinds of figure:
- **counted by this process** as it works (the engine tells a ``Meter``; the Matrix side calls ``transaction``):
  runs started and finished, refusals, claim and step latency, fallbacks, spend, transactions taken in,
  worker slots busy. Each process counts its own; sum them across processes.
- **read from the database at each scrape** (one statement, ``store.health.snapshot``): the queue and its
  oldest waiting run, the outbox and its oldest unsent message, the workers beating and whether any can
  answer model calls. They are the deployment's, the same from every process (take the max, not the sum).

Add a figure here, and nowhere else: a counter or histogram in ``__init__`` and the method that moves it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from engine.errors import StoreError
from engine.run.summon import LIVENESS_SECONDS
from engine.store import Store

log = logging.getLogger(__name__)

# Seconds: from a claim statement (~1 ms) to a model call (~tens of seconds).
LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
EVENTS = (1, 2, 5, 10, 20, 50, 100)


class Metrics:
    """The registry, and the ``Meter`` the engine tells (``engine/meter.py``)."""

    def __init__(self, *, slots: int = 0) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.runs_started = Counter("summon_runs_started", "Runs claimed for the first time.", ["bot"], registry=r)
        self.runs_finished = Counter("summon_runs_finished", "Runs ended, by ending (answered, cancelled, failed, "
                                     "out_of_steps, …).", ["bot", "ending"], registry=r)
        self.refusals = Counter("summon_refusals", "Summonses refused, by reason.", ["reason"], registry=r)
        self.claim_seconds = Histogram("summon_claim_seconds", "The claim statement, for claims that took a run.",
                                       buckets=LATENCY, registry=r)
        self.queue_wait_seconds = Histogram("summon_queue_wait_seconds", "From a run's summons to its first claim.",
                                            buckets=LATENCY, registry=r)
        self.step_seconds = Histogram("summon_step_seconds", "A step, from the run's previous step to its commit "
                                      "(a model step: the model call).", ["kind", "provider"], buckets=LATENCY,
                                      registry=r)
        self.fallbacks = Counter("summon_provider_fallbacks", "A provider's failure after which the chain moved on, "
                                 "by the failure's class.", ["provider", "reason"], registry=r)
        self.spend = Counter("summon_spend_usd", "What model calls cost, in USD.", ["bot"], registry=r)
        self.undelivered_answers = Counter("summon_answers_undelivered", "Runs whose answer or ending the homeserver "
                                           "refused for good, or was given up on after retries.", ["bot"], registry=r)
        self.transaction_seconds = Histogram("summon_transaction_seconds", "Taking in one homeserver transaction "
                                             "(stored, summonses made, committed).", buckets=LATENCY, registry=r)
        self.transaction_events = Histogram("summon_transaction_events", "Events in one homeserver transaction.",
                                            buckets=EVENTS, registry=r)
        self.slots = Gauge("summon_worker_slots", "Worker slots in this process.", registry=r)
        self.slots_busy = Gauge("summon_worker_slots_busy", "Worker slots holding a run now.", registry=r)
        self.slots.set(slots)
        self.homeserver_ping = Gauge("summon_homeserver_ping_answered", "1 once the homeserver answered this "
                                     "process's ping on start (it has the registration), 0 until then.", registry=r)
        # Read from the database at each scrape.
        self.database_up = Gauge("summon_database_up", "1 when the last scrape could read the database.",
                                 registry=r)
        self.queue_depth = Gauge("summon_queue_depth", "Runs waiting to be claimed.", registry=r)
        self.queue_oldest = Gauge("summon_queue_oldest_seconds", "Age of the oldest waiting run (0: none waits).",
                                  registry=r)
        self.running = Gauge("summon_runs_running", "Runs being worked on.", registry=r)
        self.outbox_depth = Gauge("summon_outbox_depth", "Messages waiting to be sent to the homeserver.",
                                  registry=r)
        self.outbox_oldest = Gauge("summon_outbox_oldest_seconds", "Age of the oldest unsent message (0: none).",
                                   registry=r)
        self.workers_alive = Gauge("summon_workers_alive", f"Workers that beat in the last {LIVENESS_SECONDS:.0f} s.",
                                   registry=r)
        self.provider_usable = Gauge("summon_provider_usable", "1 when a worker that beats can answer model calls "
                                     "(no provider, no bots).", registry=r)
        # What a surface reads at each scrape into gauges of its own on this registry (``read_also``).
        self._readers: list[Callable[[], Awaitable[None]]] = []

    # --- the engine's Meter -------------------------------------------------------------------------

    def run_started(self, bot: str) -> None:
        self.runs_started.labels(bot).inc()

    def run_finished(self, bot: str, ending: str) -> None:
        self.runs_finished.labels(bot, ending).inc()

    def refused(self, reason: str) -> None:
        self.refusals.labels(reason).inc()

    def claimed(self, seconds: float, waited: float | None) -> None:
        self.claim_seconds.observe(seconds)
        if waited is not None:
            self.queue_wait_seconds.observe(max(0.0, waited))

    def step(self, kind: str, provider: str | None, seconds: float) -> None:
        self.step_seconds.labels(kind, provider or "").observe(seconds)

    def fallback(self, provider: str, reason: str) -> None:
        self.fallbacks.labels(provider, reason).inc()

    def spent(self, bot: str, usd: float) -> None:
        self.spend.labels(bot).inc(usd)

    def slot(self, busy: bool) -> None:
        if busy:
            self.slots_busy.inc()
        else:
            self.slots_busy.dec()

    # --- the Matrix side ----------------------------------------------------------------------------

    def undelivered(self, bot: str) -> None:
        self.undelivered_answers.labels(bot).inc()

    def transaction(self, seconds: float, events: int) -> None:
        self.transaction_seconds.observe(seconds)
        self.transaction_events.observe(events)

    # --- the scrape -----------------------------------------------------------------------------------

    async def read_database(self, store: Store) -> None:
        try:
            s = await store.health.snapshot(LIVENESS_SECONDS)
        except StoreError as exc:
            log.warning("metrics: could not read the database: %s", exc)
            self.database_up.set(0)
            return
        self.database_up.set(1)
        self.queue_depth.set(s.queued)
        self.queue_oldest.set(s.oldest_queued_seconds or 0.0)
        self.running.set(s.running)
        self.outbox_depth.set(s.outbox_pending)
        self.outbox_oldest.set(s.oldest_unsent_seconds or 0.0)
        self.workers_alive.set(s.workers_alive)
        self.provider_usable.set(1 if s.workers_usable else 0)

    def read_also(self, reader: Callable[[], Awaitable[None]]) -> None:
        """A surface's own figures, read at each scrape (the desk's outcomes: ``appservice.desk.metrics``)."""
        self._readers.append(reader)

    async def scrape(self, store: Store) -> bytes:
        await self.read_database(store)
        for reader in self._readers:
            await reader()
        return generate_latest(self.registry)

    async def listen(self, store: Store, host: str, port: int) -> tuple[web.AppRunner, int]:
        """Serve ``GET /metrics`` on ``host:port`` (0: any free port); the runner, and the port bound."""
        async def metrics(_: web.Request) -> web.Response:
            body = await self.scrape(store)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        server = site._server  # aiohttp keeps the bound sockets here; the port matters when 0 was asked
        sockets = getattr(server, "sockets", None) or []
        bound = int(sockets[0].getsockname()[1]) if sockets else port
        log.info("metrics listening on %s:%s", host, bound)
        return runner, bound
