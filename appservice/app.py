"""The composition root: builds the pool, store, model, compiled registry, clock and surfaces, and hands
them down through constructors. No module-level state, no import-time side effects."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, cast

import aiohttp
import asyncpg
from aiohttp import web
from mautrix.appservice import AppServiceAPI
from mautrix.appservice.state_store import ASStateStore
from mautrix.client.state_store import MemoryStateStore
from mautrix.errors import MatrixError as MautrixError
from mautrix.errors import MNotFound
from mautrix.types import RoomAlias, UserID
from mautrix.util.logging import TraceLogger

from appservice.config import Config, openapi_headers
from appservice.hooks import EventHooks
from appservice.matrix.commands import publish_command_state, publish_in_room
from appservice.matrix.context import HomeserverThreads
from appservice.matrix.followups import Followup, Join
from appservice.matrix.ingest import Ingest
from appservice.matrix.outbox import MatrixSender, Outbox
from appservice.matrix.rooms import Rooms
from appservice.matrix.staff import tell_staff
from appservice.matrix.surface import MatrixSurface
from appservice.matrix.transactions import TransactionEndpoint
from engine.clock import Clock, SystemClock
from engine.content import Registry
from engine.content import files as contentfiles
from engine.content.strings import Strings
from engine.content.watch import watch
from engine.errors import ContentError
from engine.providers.config import choose_answerer
from engine.run.publish import publish
from engine.run.summon import LIVENESS_SECONDS
from engine.run.ticks import run_ticks
from engine.run.worker import Worker, WorkerSettings
from engine.store.db import Database, migrate
from engine.tasks import TaskGroup
from engine.tools.base import ToolFn
from engine.tools.code import CodeTools
from engine.tools.fetch import FetchSettings, make_fetch
from engine.tools.openapi import OpenAPITools
from engine.tools.personal import make_about_me, make_raise_ticket, site_classes
from engine.tools.search import make_search_site
from engine.tools.site import SiteTools

log = logging.getLogger(__name__)

PRESENCE_SECONDS = 10.0


class StateStore(MemoryStateStore, ASStateStore):
    """mautrix's in-memory appservice state store (membership and power-level cache for intents)."""

    def __init__(self) -> None:
        MemoryStateStore.__init__(self)
        ASStateStore.__init__(self)


def compile_content(config: Config, encrypted_rooms: Collection[str] = ()) -> Registry:
    """The site's content over the kit's, compiled; every error raised as ``path:line: message``. A
    schedule `in:` one of ``encrypted_rooms`` is refused."""
    root = Path(config.content.dir)
    result = contentfiles.compile_content(root, server_name=config.homeserver.server_name,
                                          encrypted_rooms=encrypted_rooms)
    if isinstance(result, list):
        raise ContentError([contentfiles.where(root, e) for e in result])
    return result


async def encrypted_rooms(db: Database) -> list[str]:
    """Rooms known to be encrypted: no schedule may speak in them (refused when content compiles)."""
    return [r["room_id"] for r in await db.fetch("encrypted_rooms")]


class Service:
    """``summon serve``: the appservice HTTP endpoint, the outbox sender, and N worker slots, in one
    asyncio process. With ``http=False`` it is ``summon worker``: worker slots and ticks only."""

    def __init__(self, config: Config, *, http: bool = True, clock: Clock | None = None,
                 accept_scripts: bool = False) -> None:
        self.config = config
        self.http = http
        self.clock = clock or SystemClock()
        self.accept_scripts = accept_scripts
        self.stop_event = asyncio.Event()
        self.tasks = TaskGroup("service")
        self._registry: Registry | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def registry(self) -> Registry:
        assert self._registry is not None, "the service has not started"
        return self._registry

    async def start(self) -> None:
        c = self.config
        await migrate(c.database.dsn)
        self.db = await Database.connect(c.database.dsn, min_size=c.database.pool_min, max_size=c.database.pool_max)
        self._registry = compile_content(c, await encrypted_rooms(self.db))
        await publish(self.db, self._registry)
        self._session = aiohttp.ClientSession()
        self.api = AppServiceAPI(
            base_url=c.homeserver.url, bot_mxid=UserID(f"@{c.appservice.sender_localpart}:{c.homeserver.server_name}"),
            token=c.appservice.as_token, log=cast(TraceLogger, logging.getLogger("mautrix")),
            state_store=StateStore(),
            client_session=self._session,
        )
        self.ingest = Ingest(
            self.db, self.registry, server_name=c.homeserver.server_name,
            service_user=f"@{c.appservice.sender_localpart}:{c.homeserver.server_name}",
            accept_scripts=self.accept_scripts, max_attempts=c.worker.max_attempts,
            fetch_thread=HomeserverThreads(self.api),
        )
        self.rooms = Rooms(self.db, self.api, self.ingest, self.registry, on_done=self._room_action_done)
        self.surface = MatrixSurface(self.db, self.api, self.registry, self.tasks)
        self.outbox = Outbox(self.db, MatrixSender(self._session, c.homeserver.url, c.appservice.as_token))
        w = c.worker
        # A chain of providers must answer well inside the lease, which no step renews meanwhile.
        self.answerer = choose_answerer(os.environ, self.clock, patience=min(60.0, w.lease_seconds * 2 / 3))
        self.site_tools = SiteTools(OpenAPITools(headers=openapi_headers(c, os.environ)),
                                    CodeTools(Path(c.content.dir)))
        self.worker = Worker(
            self.db, self.registry, self.answerer, {"rooms": self.surface}, self.clock,
            WorkerSettings(slots=w.slots, budget_seconds=w.budget_seconds, lease_seconds=w.lease_seconds,
                           sweep_seconds=w.sweep_seconds, poll_seconds=w.poll_seconds),
            tools=self._builtin_tools(), content_tools=self.site_tools, site_classes=self._site_classes,
            status=self.answerer.status(),
        )
        self.tasks.spawn(self.worker.run(self.stop_event), name="worker")
        self.tasks.spawn(watch(Path(c.content.dir), contentfiles.KIT_DIR, c.homeserver.server_name,
                               self.republish, self.content_errors,
                               encrypted_rooms=lambda: encrypted_rooms(self.db)), name="content-watch")
        if not self.http:
            return
        self.tasks.spawn(self.outbox.run(self.stop_event), name="outbox")
        await self.rooms.register_puppets()
        self.tasks.spawn(publish_command_state(self.api, self.db, self.registry()), name="command-state")
        self.tasks.spawn(self.rooms.resume(self.stop_event), name="room-actions")
        app = web.Application(client_max_size=c.appservice.max_body_size)
        TransactionEndpoint(c.appservice.hs_token, self.on_transaction, self.query_user).routes(app)
        EventHooks(self.db, self.registry, c.hooks.keys, self.clock).routes(app)
        # A short graceful shutdown: the homeserver keeps connections alive, and a transaction it did not
        # see acknowledged is simply sent again (we store nothing twice).
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, c.appservice.listen.host, c.appservice.listen.port).start()
        log.info("appservice listening on %s:%s", c.appservice.listen.host, c.appservice.listen.port)
        self.tasks.spawn(self.ping(), name="ping")
        self.tasks.spawn(self.presence(), name="presence")
        self.tasks.spawn(run_ticks(self.db, self.registry, self.clock, self.stop_event,
                                   resolve_room=self.resolve_room), name="schedule-ticks")

    async def resolve_room(self, alias: str) -> str | None:
        """A schedule's `in: #alias:server`, as the homeserver resolves it now."""
        try:
            return str((await self.api.bot_intent().resolve_room_alias(RoomAlias(alias))).room_id)
        except MNotFound:
            return None

    async def presence(self) -> None:
        """Puppets say whether anything can answer them: with no provider, no bots (SPEC §2)."""
        shown: bool | None = None
        while not self.stop_event.is_set():
            try:
                usable = bool(await self.db.fetchval("provider_usable", LIVENESS_SECONDS))
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError):
                log.warning("could not read the provider status (the database is unavailable)")
                usable = False
            if usable != shown:
                await self.rooms.set_presence(usable)
                shown = usable
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop_event.wait(), timeout=PRESENCE_SECONDS)

    async def ping(self) -> None:
        """Ping the homeserver: it proves the registration, and makes Synapse retry queued transactions
        at once instead of after its backoff. The homeserver may start after us: keep trying."""
        for attempt in range(60):
            try:
                await self.api.bot_intent().appservice_ping(self.config.appservice.id)
                log.info("homeserver ping answered")
                return
            except (MautrixError, aiohttp.ClientError, OSError) as exc:
                if attempt == 0:
                    log.warning("homeserver ping failed (%s); retrying", exc)
                await asyncio.sleep(1)
        log.error("the homeserver never answered our ping; is registration.yaml loaded by it?")

    async def republish(self, registry: Registry) -> None:
        """A changed content file that compiles goes live: published, swapped in, puppets renamed. An
        edit that does not compile never gets here; the last good registry stays live."""
        if self.http:
            await publish(self.db, registry)
        self._registry = registry
        if self.http:
            await self.rooms.register_puppets()
            await publish_command_state(self.api, self.db, registry)

    def content_errors(self, errors: list[str]) -> None:
        log.error("content has %d error(s); the last good content stays live", len(errors))

    async def on_transaction(self, txn_id: str, events: list[dict[str, Any]], ephemeral: list[dict[str, Any]]) -> bool:
        async with self.db.transaction("store_transaction") as conn:
            followups = await self.ingest.transaction(conn, txn_id, events)
            # Remembered with the events: a crash before the homeserver hears them loses nothing.
            remembered = await self.rooms.remember(conn, followups) if followups else []
        if followups is None:
            return False
        for action_id, f in remembered:
            self.tasks.spawn(self._carry_out(action_id, f), name=f"room-{type(f).__name__}")
        return True

    async def _carry_out(self, action_id: int, followup: Followup) -> None:
        await self.rooms.carry_out_remembered(action_id, followup)

    async def _room_action_done(self, followup: Followup) -> None:
        if isinstance(followup, Join) and followup.user_id != self.ingest.service_user:
            # A puppet that joined (at once, or on a retry) shows its commands there (MSC4332), where it may.
            await publish_in_room(self.api, self.db, self.registry(), followup.room_id, followup.user_id)

    async def query_user(self, user_id: str) -> bool:
        return any(b.user_id == user_id for b in self.registry().bots.values())

    def _builtin_tools(self) -> dict[str, ToolFn]:
        """The built-ins a bot may list (open_skill is the worker's own): search over what was published,
        the person's own facts, the one tool that writes, and the guarded fetch."""
        c = self.config
        service_user = f"@{c.appservice.sender_localpart}:{c.homeserver.server_name}"
        staff_room = c.tools.staff_room
        if staff_room is None and self._reaches("raise_ticket"):
            log.warning("raise_ticket is offered but no tools.staff_room is configured: tickets are raised and "
                        "nobody is told in Matrix")

        async def notify(conn: asyncpg.Connection, ticket: Mapping[str, Any]) -> None:
            if staff_room is not None:
                await tell_staff(conn, self.db.q, staff_room, service_user, ticket)

        def words() -> Strings:
            return self.registry().strings

        return {
            "search_site": make_search_site(self.db),
            "about_me": make_about_me(self.db, words),
            "raise_ticket": make_raise_ticket(self.db, words, notify),
            "fetch": make_fetch(FetchSettings(allow=tuple(c.tools.fetch_allow))),
        }

    def _reaches(self, tool: str) -> bool:
        """Whether any bot may be offered ``tool``, directly or through one of its skills."""
        registry = self.registry()
        return any(tool in bot.tools or any(tool in skill.tools for skill in registry.skills_of(bot))
                   for bot in registry.bots.values())

    async def _site_classes(self, user_id: str) -> frozenset[str]:
        async with self.db.pool.acquire() as conn:
            return await site_classes(conn, self.db.q, user_id)

    async def stop(self) -> None:
        self.stop_event.set()
        if hasattr(self, "outbox"):
            self.outbox.wake()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.tasks.close(grace=10.0)
        if self._session is not None:
            await self._session.close()
        if hasattr(self, "answerer"):
            await self.answerer.aclose()
        if hasattr(self, "site_tools"):
            await self.site_tools.aclose()
        if hasattr(self, "db"):
            await self.db.close()

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await self.stop_event.wait()
        finally:
            await self.stop()
