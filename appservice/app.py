"""The composition root: builds the pool, store, model, compiled registry, clock and surfaces, and hands
them down through constructors. No module-level state, no import-time side effects.

Each surface has one builder (``appservice.matrix.build``, ``appservice.desk.build``, ``appservice.door.build``,
``appservice.members.build``) that makes its objects whole and returns its parts (``appservice.parts.Parts``):
the root gives the surfaces to the worker, mounts their routes on the appservice's HTTP app, serves them, spawns
their background tasks and tells them when content is published again. Everything opened — pool, clients,
listeners, the task group — is pushed onto one exit stack as it is opened, and ``stop`` closes that stack.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import aiohttp
from aiohttp import web
from mautrix.appservice import AppServiceAPI
from mautrix.appservice.state_store import ASStateStore
from mautrix.client.state_store import MemoryStateStore
from mautrix.types import UserID
from mautrix.util.logging import TraceLogger

from appservice.config import Config, code_sandbox, openapi_headers, provider_settings
from appservice.database import migrate_database, open_store
from appservice.door.build import build_door
from appservice.door.service import DoorListener
from appservice.door.tools import make_current_room
from appservice.kinds import KINDS
from appservice.matrix.build import build_matrix
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.delivery.staff import tell_staff
from appservice.matrix.tables.rooms import RoomTables
from appservice.metrics import Metrics
from appservice.parts import Parts, Shared, closing
from engine.clock import Clock, SystemClock
from engine.content import Bot, Registry
from engine.content import files as contentfiles
from engine.content.strings import Strings
from engine.content.watch import watch
from engine.errors import ConfigError, ContentError
from engine.memory.embedder import Embedder
from engine.memory.ready import recallable
from engine.memory.recall import Recall, RecallSettings
from engine.providers.base import Answerer
from engine.providers.config import choose_answerer
from engine.providers.mock import StandInBook, StandInModel
from engine.run.publish import buyable, publish
from engine.run.worker import Worker, WorkerSettings, new_worker_id
from engine.store import Store, Tx
from engine.tasks import TaskGroup
from engine.tools.base import ToolFn
from engine.tools.code import CodeTools
from engine.tools.fetch import FetchSettings, make_fetch
from engine.tools.openapi import OpenAPITools
from engine.tools.personal import make_about_me, make_raise_ticket, site_classes
from engine.tools.quarantine import Quarantine
from engine.tools.search import make_search_site
from engine.tools.site import SiteTools

if TYPE_CHECKING:  # the desk's and the member bots' modules are imported only where the config turns them on
    from appservice.desk.service import DeskService
    from appservice.desk.staff_room import StaffRoom
    from appservice.members.service import MemberBots

log = logging.getLogger(__name__)

class StateStore(MemoryStateStore, ASStateStore):
    """mautrix's in-memory appservice state store (membership and power-level cache for intents)."""

    def __init__(self) -> None:
        MemoryStateStore.__init__(self)
        ASStateStore.__init__(self)


def compile_content(config: Config, sealed_places: Collection[str] = ()) -> Registry:
    """The site's content over the kit's, compiled; every error raised as ``path:line: message``. A
    schedule `in:` one of ``sealed_places`` is refused."""
    root = Path(config.content.dir)
    result = contentfiles.compile_content(root, kinds=KINDS, server_name=config.homeserver.server_name,
                                          sealed_places=sealed_places, sandbox=code_sandbox(config, os.environ),
                                          puppet_prefix=config.appservice.puppet_prefix)
    if isinstance(result, list):
        raise ContentError([contentfiles.where(root, e) for e in result])
    return result


async def keep_puppet_prefix(store: Store, config: Config) -> None:
    """The deployment keeps the puppet prefix it started with (remembered in the database by the first start or
    publish): rooms know its puppets by those ids, so another is refused in words, before anything is done."""
    configured = config.appservice.puppet_prefix
    remembered = await store.profiles.puppet_prefix(configured)
    if remembered != configured:
        raise ConfigError(
            f"config: appservice.puppet_prefix: this deployment's puppets are @{remembered}<slug>, and rooms "
            f"know them by those ids, so it cannot become {configured!r}; set it back to {remembered!r} (a "
            "new prefix needs a new database)")


class Service:
    """``summon serve``: the appservice HTTP endpoint, the outbox sender, and N worker slots, in one
    asyncio process. With ``http=False`` it is ``summon worker``: worker slots and ticks only.

    ``stand_in``: the stand-in model's book (``engine.providers.mock.StandInModel``), given only by a trusted caller
    (the tests and the demo), never by ``summon serve``: a run it has turns for is answered by them."""

    def __init__(self, config: Config, *, http: bool = True, clock: Clock | None = None,
                 stand_in: StandInBook | None = None, env: Mapping[str, str] | None = None) -> None:
        self.config = config
        self.env = os.environ if env is None else env  # the speech endpoints' settings (SUMMON_STT_*, SUMMON_TTS_*)
        self.http = http
        self.clock = clock or SystemClock()
        self.stand_in = stand_in
        self.stop_event = asyncio.Event()
        self.tasks = TaskGroup("service")
        # What start opens, each pushed as it is opened: stop closes it in the reverse order (listeners, then the
        # tasks, then what the tasks used, the pool last). A start that fails closes what it had opened.
        self.stack = AsyncExitStack()
        self._registry: Registry | None = None
        self.door: DoorListener | None = None
        self.members: MemberBots | None = None
        self.desk: DeskService | None = None
        self.staff_room: StaffRoom | None = None
        self.metrics = Metrics(slots=config.worker.slots)
        # Bots refused because a model they may be sent to has no price (buying on): their puppets say so.
        self.unpriced: dict[str, Bot] = {}
        # Where fetched pages and feeds are parsed: children of their own, started on first use.
        self.quarantine = Quarantine()
        self._on_publish: tuple[Callable[[Registry], Awaitable[None]], ...] = ()

    def registry(self) -> Registry:
        assert self._registry is not None, "the service has not started"
        return self._registry

    async def start(self) -> None:
        """Start everything; should any part fail to start, what had started is stopped and closed again."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        c = self.config
        if self.http and c.desk is not None:
            from appservice.desk.service import refuse_uncapped

            refuse_uncapped(c.desk, c.limits.daily_spend)
        await migrate_database(c.database)
        self.store = await open_store(c.database, clock=self.clock)
        closing(self.stack, "the database pool", self.store.close)
        closing(self.stack, "the fetch quarantine", self.quarantine.close)
        await keep_puppet_prefix(self.store, c)
        # What answers model calls, chosen first: with buying on, a bot whose model has no price is refused (no
        # spend limit could hold against it) — that bot, never the service. A chain of providers must answer
        # well inside the lease; its limits are kept with every other worker.
        worker_id = new_worker_id()
        self.answerer = choose_answerer(provider_settings(os.environ), self.clock,
                                        patience=min(60.0, c.worker.lease_seconds * 2 / 3),
                                        store=self.store, worker_id=worker_id)
        closing(self.stack, "the model providers' clients", self.answerer.aclose)
        registry, _ = await recallable(self.store, compile_content(c, await self.store.of(RoomTables).encrypted()))
        self._registry, self.unpriced, _ = buyable(registry, self.answerer.unpriced)
        await publish(self.store, self._registry)
        if self.http:
            # The deployment's caps, read by every summons (only a process that takes summonses writes them).
            await self.store.people.set_caps(c.limits.caps())
        self.site_tools = SiteTools(OpenAPITools(headers=openapi_headers(c, os.environ)),
                                    CodeTools(Path(c.content.dir), sandbox=code_sandbox(c, os.environ)), db=self.store)
        closing(self.stack, "the site tools' clients", self.site_tools.aclose)
        session = aiohttp.ClientSession()
        closing(self.stack, "the homeserver's HTTP session", session.close)
        self.service_user = f"@{c.appservice.sender_localpart}:{c.homeserver.server_name}"
        self.api = AppServiceAPI(
            base_url=c.homeserver.url, bot_mxid=UserID(self.service_user), token=c.appservice.as_token,
            log=cast(TraceLogger, logging.getLogger("mautrix")), state_store=StateStore(), client_session=session,
        )
        self.homeserver = Homeserver(self.api)
        shared = Shared(config=c, store=self.store, registry=self.registry, clock=self.clock, tasks=self.tasks,
                        stop=self.stop_event, stack=self.stack,
                        service_user=self.service_user, metrics=self.metrics)
        # Every process that finishes runs delivers desk answers; only `serve` listens for the desk.
        desk = members = None
        if c.desk is not None:
            from appservice.desk.build import build_desk

            desk = await build_desk(shared, homeserver=self.homeserver)
        if c.members is not None:
            from appservice.members.build import build_members

            members = build_members(shared, self.quarantine, homeserver=self.homeserver)
        social = None
        if c.social is not None:
            from appservice.social.build import build_social

            social = build_social(shared)
        # Pushed after what the tasks use, so closed before it: a loop told to stop gets a moment to finish.
        closing(self.stack, "the background tasks", lambda: self.tasks.close(grace=10.0))
        matrix = build_matrix(shared, homeserver=self.homeserver, on_transaction=self.on_transaction, query_user=self.query_user, http=session,
                              env=self.env, unpriced=lambda: self.unpriced,
                              elsewhere=desk.staff_room if desk is not None else None,
                              own_rooms=members.bots.own_rooms if members is not None else None,
                              also=(social.rooms,) if social is not None else ())
        # The door's surface is in every process with workers, so a door turn is handed over wherever it ran.
        door = build_door(shared, homeserver=self.homeserver, http=self.http)
        self.command_state, self.surface, self.outbox = matrix.command_state, matrix.surface, matrix.outbox
        self.speech, self.dispatcher, self.rooms, self.avatars = matrix.speech, matrix.dispatcher, matrix.rooms, \
            matrix.avatars
        self.door_surface, self.door = door.surface, door.listener
        if desk is not None:
            self.desk, self.staff_room = desk.service, desk.staff_room
        if members is not None:
            self.members = members.bots
        parts: list[Parts] = [matrix.parts, *([desk.parts] if desk else []), *([members.parts] if members else []),
                              door.parts, *([social.parts] if social else [])]
        self._on_publish = tuple(p.on_publish for p in parts if p.on_publish is not None)
        if self.answerer.limiter is not None:
            # Provider limits kept with every other worker: hear permits handed back anywhere.
            self.tasks.spawn(self.answerer.limiter.run(self.stop_event), name="provider-limits")
        w = c.worker
        # The demo and the tests: the stand-in answers what its book has turns for, before whatever was chosen.
        answerer: Answerer = (self.answerer if self.stand_in is None
                              else StandInModel(self.stand_in, self.answerer, self.clock))
        self.worker = Worker(
            self.store, self.registry, answerer, {p.surface.name: p.surface for p in parts if p.surface},
            self.clock,
            WorkerSettings(slots=w.slots, budget_seconds=w.budget_seconds, lease_seconds=w.lease_seconds,
                           sweep_seconds=w.sweep_seconds, poll_seconds=w.poll_seconds),
            tools=self._builtin_tools(), surface_tools=KINDS.tools, content_tools=self.site_tools,
            site_classes=self._site_classes,
            status=self.answerer.status(), meter=self.metrics, worker_id=worker_id,
            openers=self.members.openers() if self.members is not None else None,
            recall=Recall(Embedder(threads=c.memory.embed_threads),
                          RecallSettings(floor=c.memory.recall_floor, count=c.memory.recall_count)),
            streamed=[p.surface.name for p in parts if p.surface and p.streams],
            handed={p.surface.name: p.handed for p in parts if p.surface and p.handed},
        )
        self.tasks.spawn(self.worker.run(self.stop_event), name="worker")
        if c.metrics.listen is not None:
            metrics_runner, _ = await self.metrics.listen(self.store, c.metrics.listen.host, c.metrics.listen.port)
            closing(self.stack, "the metrics listener", metrics_runner.cleanup)
        self.tasks.spawn(watch(Path(c.content.dir), contentfiles.KIT_DIR, c.homeserver.server_name,
                               self.republish, self.content_errors,
                               kinds=KINDS, sealed_places=self.store.of(RoomTables).encrypted, clock=self.clock,
                               sandbox=code_sandbox(c, os.environ), puppet_prefix=c.appservice.puppet_prefix,
                               stop=self.stop_event),
                         name="content-watch")
        if self.http:
            await self._serve(parts)

    async def _serve(self, parts: list[Parts]) -> None:
        """``summon serve``: each surface served, the appservice's endpoint listening, the background started."""
        c = self.config
        for p in parts:
            await p.serve()
        app = web.Application(client_max_size=c.appservice.max_body_size)
        for p in parts:
            if p.routes is not None:
                p.routes(app)
        # A short graceful shutdown: the homeserver keeps connections alive, and a transaction it did not
        # see acknowledged is simply sent again (we store nothing twice).
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        closing(self.stack, "the appservice listener", runner.cleanup)
        await web.TCPSite(runner, c.appservice.listen.host, c.appservice.listen.port).start()
        log.info("appservice listening on %s:%s", c.appservice.listen.host, c.appservice.listen.port)
        for p in parts:
            for name, run in p.background:
                self.tasks.spawn(run(), name=name)

    async def republish(self, registry: Registry) -> None:
        """A changed content file that compiles goes live: published, swapped in, puppets renamed. An
        edit that does not compile never gets here; the last good registry stays live — as it does when, with
        buying on, a bot whose model has no price is refused (that bot alone)."""
        registry, self.unpriced, lines = buyable(registry, self.answerer.unpriced)
        if lines:
            self.content_errors(lines)
        registry, _ = await recallable(self.store, registry)
        if self.http:
            await publish(self.store, registry)
        self._registry = registry
        if self.http:
            for published in self._on_publish:
                await published(registry)

    def content_errors(self, errors: list[str]) -> None:
        log.error("content has %d error(s); the last good content stays live", len(errors))

    async def on_transaction(self, txn_id: str, events: list[dict[str, Any]], ephemeral: list[dict[str, Any]]) -> bool:
        started = self.clock.monotonic()
        remembered = await self.dispatcher.transaction(txn_id, events)
        self.metrics.transaction(self.clock.monotonic() - started, len(events))
        if remembered is None:
            return False
        for action_id, f in remembered:
            self.tasks.spawn(self.rooms.carry_out_remembered(action_id, f), name=f"room-{type(f).__name__}")
        return True

    async def query_user(self, user_id: str) -> bool:
        return any(b.user_id == user_id for b in self.registry().bots.values())

    def _builtin_tools(self) -> dict[str, ToolFn]:
        """The built-ins a bot may list (open_skill is the worker's own): search over what was published,
        the person's own facts, the one tool that writes, the guarded fetch, and the door's current_room."""
        c = self.config
        staff_room = c.tools.staff_room
        if staff_room is None and self._reaches("raise_ticket"):
            log.warning("raise_ticket is offered but no tools.staff_room is configured: tickets are raised and "
                        "nobody is told in Matrix")

        async def notify(tx: Tx, ticket: Mapping[str, Any]) -> None:
            if staff_room is not None:
                await tell_staff(tx, staff_room, self.service_user, ticket)

        def words() -> Strings:
            return self.registry().strings

        tools = {
            "search_site": make_search_site(self.store, words),
            "about_me": make_about_me(self.store, words),
            "raise_ticket": make_raise_ticket(self.store, words, notify),
            "fetch": make_fetch(FetchSettings(allow=tuple(c.tools.fetch_allow)), self.quarantine),
            "current_room": make_current_room(self.store),
        }
        if self.config.desk is not None:
            from appservice.desk.tools import make_hand_to_people

            tools["hand_to_people"] = make_hand_to_people(self.store, lambda: self.desk.desk if self.desk else None)
        if self.members is not None:
            tools.update(self.members.tools(tools["fetch"]))
        return tools

    def _reaches(self, tool: str) -> bool:
        """Whether any bot may be offered ``tool``, directly or through one of its skills."""
        registry = self.registry()
        return any(tool in bot.tools or any(tool in skill.tools for skill in registry.skills_of(bot))
                   for bot in registry.bots.values())

    async def _site_classes(self, user_id: str) -> frozenset[str]:
        return await site_classes(self.store, user_id)

    async def stop(self) -> None:
        """Tell every loop to stop, then close what start opened, newest first (each step said in the log)."""
        log.info("stopping")
        self.stop_event.set()
        await self.stack.aclose()
        log.info("stopped")

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await self.stop_event.wait()
        finally:
            await self.stop()
