"""The composition root: builds the pool, store, model, compiled registry, clock and surfaces, and hands
them down through constructors. No module-level state, no import-time side effects.

The Matrix surface is wired here, one collaborator into the next, none calling back into its caller:

    TransactionEndpoint (HTTP: the homeserver's token, the body)
      → Dispatcher (one DB transaction: the durable txn id, a savepoint per event, by kind to:)
          StateHandler · LineHandler (Cancels, RoomAdmin, Presses, Commands, then a mention) · Presses · Cancels
          each asking a bot through Asking (engine.run.summon, every refusal)
      → Rooms (after the commit: what the homeserver must be told, remembered until done)
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Collection, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
from aiohttp import web
from mautrix.appservice import AppServiceAPI
from mautrix.appservice.state_store import ASStateStore
from mautrix.client.state_store import MemoryStateStore
from mautrix.types import UserID
from mautrix.util.logging import TraceLogger

from appservice.config import Config, code_sandbox, openapi_headers, provider_settings, speech_from_env
from appservice.database import migrate_database, open_store
from appservice.desk.service import DeskService, refuse_uncapped
from appservice.desk.staff_room import StaffRoom
from appservice.door.service import DoorListener
from appservice.door.surface import DoorSurface
from appservice.door.tools import make_current_room
from appservice.hooks import EventHooks
from appservice.matrix.admin import RoomAdmin
from appservice.matrix.asking import Asking
from appservice.matrix.avatar_art import EMOJI_FONT
from appservice.matrix.avatars import Avatars, Face
from appservice.matrix.cancels import Cancels
from appservice.matrix.command_state import CommandState
from appservice.matrix.commands import Commands
from appservice.matrix.context import ContextReader, ContextSettings, ThreadBackfill, ThreadFetch
from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.followups import Followup, Join
from appservice.matrix.homeserver import Homeserver
from appservice.matrix.lines import LineHandler, OwnMemories, OwnRooms, RoomWork, VoiceNotes
from appservice.matrix.memories import MemoryCommands
from appservice.matrix.ours import PUPPET_PREFIX, Ours
from appservice.matrix.outbox import MatrixSender, Outbox
from appservice.matrix.presses import Presses
from appservice.matrix.rooms import Rooms
from appservice.matrix.staff import tell_staff
from appservice.matrix.state import Invites, StateHandler
from appservice.matrix.surface import MatrixSurface
from appservice.matrix.transactions import TransactionEndpoint
from appservice.matrix.undelivered import Undelivered
from appservice.matrix.voice import Hearing, Speaking
from appservice.matrix.waiting import WaitingLines
from appservice.members.service import MemberBots
from appservice.metrics import Metrics
from engine.clock import Clock, SystemClock
from engine.content import Bot, Registry
from engine.content import files as contentfiles
from engine.content.strings import Strings
from engine.content.watch import watch
from engine.errors import ConfigError, ContentError, MatrixError, StoreError
from engine.memory.embedder import Embedder
from engine.memory.ready import recallable
from engine.memory.recall import Recall, RecallSettings
from engine.meter import Meter
from engine.providers.base import Answerer
from engine.providers.config import choose_answerer
from engine.providers.mock import StandInBook, StandInModel
from engine.run.publish import buyable, publish
from engine.run.summon import LIVENESS_SECONDS
from engine.run.ticks import run_ticks
from engine.run.worker import Worker, WorkerSettings, new_worker_id
from engine.speech.endpoints import Speech
from engine.store import Store, Tx
from engine.surface import Surface, SurfaceFacts
from engine.tasks import TaskGroup
from engine.tools.base import ToolFn
from engine.tools.code import CodeTools
from engine.tools.fetch import FetchSettings, make_fetch
from engine.tools.openapi import OpenAPITools
from engine.tools.personal import make_about_me, make_raise_ticket, site_classes
from engine.tools.quarantine import Quarantine
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
                                          encrypted_rooms=encrypted_rooms, sandbox=code_sandbox(config, os.environ),
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


def new_asking(registry: Callable[[], Registry], *, server_name: str, max_attempts: int = 3,
               meter: Meter | None = None, context: ContextSettings | None = None) -> Asking:
    """How a bot is asked in Matrix (every refusal, then the run), shared by lines, presses and voice notes."""
    return Asking(registry, ContextReader(context), server_name=server_name, max_attempts=max_attempts, meter=meter)


@dataclass(frozen=True)
class MatrixParts:
    """The Matrix surface, built whole (``build_matrix``): each part complete when it is made."""

    homeserver: Homeserver
    command_state: CommandState
    surface: MatrixSurface
    dispatcher: Dispatcher
    rooms: Rooms
    avatars: Avatars
    outbox: Outbox
    speech: Speech


def build_matrix(config: Config, *, store: Store, registry: Callable[[], Registry], homeserver: Homeserver,
                 session: aiohttp.ClientSession, tasks: TaskGroup, clock: Clock, metrics: Metrics, service_user: str,
                 env: Mapping[str, str], elsewhere: RoomWork | None,
                 own_rooms: Callable[[Asking], OwnRooms] | None) -> MatrixParts:
    """The Matrix surface, in the order its parts need each other: the speech endpoints (one per process, so a
    fallen endpoint stays fallen), the outbox (which says answers aloud through them), the surface (which hands
    the outbox what a run queued), the one ``Asking``, voice notes heard through it, the dispatcher, the rooms."""
    c = config
    server = c.homeserver.server_name
    command_state = CommandState(store, homeserver)
    # Voice notes heard and answers said (SPEC §12).
    speech = Speech(speech_from_env(env), clock, timeout_seconds=c.speech.timeout_seconds,
                    fallen_seconds=c.speech.fallen_seconds)
    outbox = Outbox(store, MatrixSender(session, c.homeserver.url, c.appservice.as_token), clock,
                    undelivered=Undelivered(registry, service_user=service_user, metrics=metrics),
                    speaking=Speaking(store, homeserver, speech))
    surface = MatrixSurface(store, homeserver, registry, tasks, clock, server_name=server, service_user=service_user,
                            commands=command_state, puppet_prefix=c.appservice.puppet_prefix,
                            hand_over=outbox.send_now, speaks=speech.settings.speaks)
    ours = Ours(registry, server_name=server, service_user=service_user, puppet_prefix=c.appservice.puppet_prefix)
    asking = new_asking(registry, server_name=server, max_attempts=c.worker.max_attempts, meter=metrics)
    hearing = Hearing(store, homeserver, registry, ours, asking, speech,
                      max_bytes=int(c.speech.max_mib * 1024 * 1024), max_seconds=c.speech.max_seconds,
                      at_once=c.speech.hearings_at_once, per_minute=c.speech.hearings_per_minute,
                      floor_kbps=c.speech.floor_kbps)
    dispatcher = wire_dispatcher(
        store, registry, server_name=server, service_user=service_user, facts=surface,
        max_attempts=c.worker.max_attempts, thread_fetch=homeserver.thread,
        invites=c.appservice.invites, elsewhere=elsewhere, meter=metrics, puppet_prefix=c.appservice.puppet_prefix,
        own_rooms=own_rooms, asking=asking, voice=hearing,
        memories=MemoryCommands(registry, ours, server_name=server, service_user=service_user),
    )

    async def done(followup: Followup) -> None:
        if isinstance(followup, Join) and followup.user_id != service_user:
            # A puppet that joined (at once, or on a retry) shows its commands there (MSC4332), where it may.
            await command_state.publish_in_room(registry(), followup.room_id, followup.user_id)

    rooms = Rooms(store, homeserver, dispatcher, ours, registry, clock, on_done=done, voice=hearing)
    # The emoji font where scripts/emoji-font put it, unless SUMMON_EMOJI_FONT names another (as for the script).
    avatars = Avatars(store, homeserver, registry, Path(c.content.dir),
                      service=Face(service_user, c.appservice.display_name, None, c.appservice.avatar),
                      emoji_font=Path(os.environ.get("SUMMON_EMOJI_FONT") or EMOJI_FONT))
    return MatrixParts(homeserver=homeserver, command_state=command_state, surface=surface, dispatcher=dispatcher,
                       rooms=rooms, avatars=avatars, outbox=outbox, speech=speech)


def wire_dispatcher(
    store: Store, registry: Callable[[], Registry], *, server_name: str, service_user: str, facts: SurfaceFacts,
    max_attempts: int = 3, thread_fetch: ThreadFetch | None = None,
    context: ContextSettings | None = None, invites: Invites = "local", elsewhere: RoomWork | None = None,
    own_rooms: Callable[[Asking], OwnRooms] | None = None, meter: Meter | None = None,
    puppet_prefix: str = PUPPET_PREFIX, asking: Asking | None = None, voice: VoiceNotes | None = None,
    memories: OwnMemories | None = None,
) -> Dispatcher:
    """How a homeserver's transaction is taken in: the dispatcher and the handlers behind it, each handed
    its collaborators (``facts``: who a person is in a room; ``thread_fetch``: the homeserver's threads;
    ``elsewhere``: a room another surface works from, the desk's staff room; ``asking``: the one way a bot is
    asked, when the caller shares it (voice notes ask through it too); ``voice``: who hears voice notes;
    ``memories``: the person's own memory commands)."""
    ours = Ours(registry, server_name=server_name, service_user=service_user, puppet_prefix=puppet_prefix)
    if asking is None:
        asking = new_asking(registry, server_name=server_name, max_attempts=max_attempts, meter=meter,
                            context=context)
    cancels = Cancels(ours, server_name=server_name)
    presses = Presses(registry, ours, asking)
    lines = LineHandler(
        registry, ours, asking=asking, cancels=cancels, presses=presses,
        admin=RoomAdmin(registry, server_name=server_name, service_user=service_user),
        commands=Commands(registry, asking, server_name=server_name, service_user=service_user),
        elsewhere=elsewhere, own_rooms=own_rooms(asking) if own_rooms is not None else None,
        voice=voice, memories=memories,
    )
    return Dispatcher(store, state=StateHandler(registry, ours, facts, invites=invites), lines=lines, presses=presses,
                      cancels=cancels, threads=ThreadBackfill(thread_fetch, registry, ours, context))


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
        # Everything started is closed through this one stack, last started first (``stop``).
        self._exits = AsyncExitStack()
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

    def registry(self) -> Registry:
        assert self._registry is not None, "the service has not started"
        return self._registry

    async def start(self) -> None:
        """Start everything; should any part fail to start, what had started is closed again (``stop``)."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        c = self.config
        if self.http and c.desk is not None:
            refuse_uncapped(c.desk, c.limits.daily_spend)
        await migrate_database(c.database)
        self.store = await open_store(c.database, clock=self.clock)
        self._exits.push_async_callback(self.store.close)
        self._exits.push_async_callback(self.quarantine.close)
        await keep_puppet_prefix(self.store, self.config)
        # What answers model calls, chosen first: with buying on, a bot whose model has no price is refused (no
        # spend limit could hold against it) — that bot, never the service. A chain of providers must answer
        # well inside the lease; its limits are kept with every other worker.
        worker_id = new_worker_id()
        self.answerer = choose_answerer(provider_settings(os.environ), self.clock,
                                        patience=min(60.0, c.worker.lease_seconds * 2 / 3),
                                        store=self.store, worker_id=worker_id)
        self._exits.push_async_callback(self.answerer.aclose)
        registry, _ = await recallable(self.store, compile_content(c, await self.store.rooms.encrypted()))
        self._registry, self.unpriced, _ = buyable(registry, self.answerer.unpriced)
        await publish(self.store, self._registry)
        if self.http:
            # The deployment's caps, read by every summons (only a process that takes summonses writes them).
            await self.store.people.set_caps(c.limits.caps())
        self._session = aiohttp.ClientSession()
        self._exits.push_async_callback(self._session.close)
        self.service_user = f"@{c.appservice.sender_localpart}:{c.homeserver.server_name}"
        self.api = AppServiceAPI(
            base_url=c.homeserver.url, bot_mxid=UserID(self.service_user), token=c.appservice.as_token,
            log=cast(TraceLogger, logging.getLogger("mautrix")), state_store=StateStore(),
            client_session=self._session,
        )
        if c.desk is not None:
            # Every process that finishes runs delivers desk answers; only `serve` listens for the desk.
            self.desk = DeskService(c.desk, self.store, self.registry, self.clock, server_name=c.homeserver.server_name,
                                    max_attempts=c.worker.max_attempts)
            await self.desk.load()
            self._exits.push_async_callback(self.desk.release)  # after its tasks have ended: the webhooks' session
            if c.desk.staff_room is not None:
                self.staff_room = StaffRoom(self.desk.desk, self.registry, room_id=c.desk.staff_room,
                                            service_user=self.service_user)
                self.desk.changes.watch(self.staff_room)
        self.homeserver = Homeserver(self.api)
        if c.members is not None:
            self.members = MemberBots(c.members, self.store, self.registry, self.homeserver, self.clock,
                                      self.quarantine, server_name=c.homeserver.server_name,
                                      service_user=self.service_user,
                                      puppet_prefix=c.appservice.puppet_prefix)
        matrix = build_matrix(c, store=self.store, registry=self.registry, homeserver=self.homeserver,
                              session=self._session, tasks=self.tasks, clock=self.clock, metrics=self.metrics,
                              service_user=self.service_user, env=self.env,
                              elsewhere=self.staff_room,
                              own_rooms=self.members.own_rooms if self.members is not None else None)
        self.command_state, self.surface, self.dispatcher = matrix.command_state, matrix.surface, matrix.dispatcher
        self.rooms, self.avatars, self.outbox, self.speech = matrix.rooms, matrix.avatars, matrix.outbox, matrix.speech
        surfaces: dict[str, Surface] = {self.surface.name: self.surface}
        if self.desk is not None:
            surfaces[self.desk.surface.name] = self.desk.surface
        if self.members is not None:
            surfaces[self.members.surface.name] = self.members.surface
        w = c.worker
        if self.answerer.limiter is not None:
            # Provider limits kept with every other worker: hear permits handed back anywhere.
            self.tasks.spawn(self.answerer.limiter.run(self.stop_event), name="provider-limits")
        self.site_tools = SiteTools(OpenAPITools(headers=openapi_headers(c, os.environ)),
                                    CodeTools(Path(c.content.dir), sandbox=code_sandbox(c, os.environ)), db=self.store)
        self._exits.push_async_callback(self.site_tools.aclose)
        # The tasks end (given a grace to finish on their own) before what they use closes, and after what feeds
        # them has stopped (the listeners pushed below close first).
        self._exits.push_async_callback(self.tasks.close, grace=10.0)
        if self.desk is not None:
            self._exits.push_async_callback(self.desk.close)
        # The door's surface is in every process with workers, so a door turn is handed over wherever it ran.
        self.door_surface = DoorSurface(self.registry, server_name=c.homeserver.server_name,
                                        service_user=self.service_user, puppet_prefix=c.appservice.puppet_prefix)
        surfaces[self.door_surface.name] = self.door_surface
        # The demo and the tests: the stand-in answers what its book has turns for, before whatever was chosen.
        answerer: Answerer = (self.answerer if self.stand_in is None
                              else StandInModel(self.stand_in, self.answerer, self.clock))
        self.worker = Worker(
            self.store, self.registry, answerer, surfaces, self.clock,
            WorkerSettings(slots=w.slots, budget_seconds=w.budget_seconds, lease_seconds=w.lease_seconds,
                           sweep_seconds=w.sweep_seconds, poll_seconds=w.poll_seconds),
            tools=self._builtin_tools(), content_tools=self.site_tools, site_classes=self._site_classes,
            status=self.answerer.status(), meter=self.metrics, worker_id=worker_id,
            openers=self.members.openers() if self.members is not None else None,
            recall=Recall(Embedder(threads=c.memory.embed_threads),
                          RecallSettings(floor=c.memory.recall_floor, count=c.memory.recall_count)),
        )
        self.tasks.spawn(self.worker.run(self.stop_event), name="worker")
        if c.metrics.listen is not None:
            metrics_runner, _ = await self.metrics.listen(self.store, c.metrics.listen.host, c.metrics.listen.port)
            self._exits.push_async_callback(metrics_runner.cleanup)
        self.tasks.spawn(watch(Path(c.content.dir), contentfiles.KIT_DIR, c.homeserver.server_name,
                               self.republish, self.content_errors,
                               encrypted_rooms=self.store.rooms.encrypted, clock=self.clock,
                               sandbox=code_sandbox(c, os.environ), puppet_prefix=c.appservice.puppet_prefix,
                               stop=self.stop_event),
                         name="content-watch")
        if not self.http:
            return
        self.tasks.spawn(self.outbox.run(self.stop_event), name="outbox")
        self._exits.callback(self.outbox.wake)
        await self.rooms.register_puppets()
        await self.rooms.register_service(c.appservice.display_name)
        await self.avatars.set_all()
        self.tasks.spawn(self.surface.published(self.registry()), name="command-state")
        self.tasks.spawn(self.rooms.resume(self.stop_event), name="room-actions")
        # A run that waits (for a slot or a provider's permit) says so on its progress line.
        self.waiting_lines = WaitingLines(self.store, self.registry, self.clock)
        self.tasks.spawn(self.waiting_lines.run(self.stop_event), name="waiting-lines")
        app = web.Application(client_max_size=c.appservice.max_body_size)
        TransactionEndpoint(c.appservice.hs_token, self.on_transaction, self.query_user).routes(app)
        EventHooks(self.store, self.registry, c.hooks.keys, self.clock, self.surface).routes(app)
        # A short graceful shutdown: the homeserver keeps connections alive, and a transaction it did not
        # see acknowledged is simply sent again (we store nothing twice).
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        self._exits.push_async_callback(runner.cleanup)
        await web.TCPSite(runner, c.appservice.listen.host, c.appservice.listen.port).start()
        log.info("appservice listening on %s:%s", c.appservice.listen.host, c.appservice.listen.port)
        if c.door is not None and c.door.listen is not None:
            self.door = DoorListener(
                c.door, store=self.store, registry=self.registry, clock=self.clock, surface=self.door_surface,
                tasks=self.tasks, server_name=c.homeserver.server_name, service_user=self.service_user,
                homeserver=self.homeserver, whoami=self.homeserver.whoami, max_attempts=c.worker.max_attempts)
            self._exits.push_async_callback(self.door.stop)
            await self.door.start(self.stop_event)
        self.tasks.spawn(self.ping(), name="ping")
        self.tasks.spawn(self.presence(), name="presence")
        self.tasks.spawn(run_ticks(self.store, self.registry, self.clock, self.stop_event, surface=self.surface,
                                   resolve_room=self.homeserver.resolve_alias), name="schedule-ticks")
        if self.members is not None:
            self.tasks.spawn(self.members.run(self.stop_event), name="member-bots-ticks")
        if self.desk is not None:
            await self.desk.serve(self.tasks, self.stop_event)
            if self.staff_room is not None:
                self.tasks.spawn(self._desk_puppets(), name="desk-staff-room")

    async def presence(self) -> None:
        """Puppets say whether anything can answer them: with no provider, no bots (SPEC §2)."""
        shown: tuple[bool, str | None, tuple[str, ...]] | None = None
        while not self.stop_event.is_set():
            refused = tuple(sorted(self.unpriced))
            try:
                state = await self.store.workers.provider_state(LIVENESS_SECONDS)
                now = (state.usable, None if state.usable else state.mode, refused)
            except StoreError:
                log.warning("could not read the provider status (the database is unavailable)")
                now = (False, None, refused)
            if now != shown:
                await self.rooms.set_presence(now[0], now[1], refused=list(self.unpriced.values()))
                shown = now
            await self.clock.wait(self.stop_event, PRESENCE_SECONDS)

    async def _desk_puppets(self) -> None:
        """The desk's bots into its staff room, so their answers and drafts go there by them."""
        assert self.desk is not None and self.staff_room is not None
        slugs = sorted({bot.slug for inbox in self.desk.desk.inboxes.values()
                        for bot in self.desk.desk.roster(inbox.row.id).all()})
        await self.staff_room.invite_puppets(self.homeserver, slugs)

    async def ping(self) -> None:
        """Ping the homeserver: it proves the registration, and makes Synapse retry queued transactions
        at once instead of after its backoff. The homeserver may start after us: keep trying."""
        for attempt in range(60):
            try:
                await self.homeserver.ping(self.config.appservice.id)
                log.info("homeserver ping answered")
                self.metrics.homeserver_ping.set(1)
                return
            except MatrixError as exc:
                if attempt == 0:
                    log.warning("homeserver ping failed (%s); retrying", exc)
                await self.clock.sleep(1)
        log.error("the homeserver never answered our ping; is registration.yaml loaded by it?")

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
            await self.rooms.register_puppets()
            await self.avatars.set_all()  # a changed avatar file, or glyph, changes the puppet's avatar
            await self.surface.published(registry)
            if self.staff_room is not None:
                await self._desk_puppets()

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
        """Tell every loop to stop, then close what was started, last first (one exit stack)."""
        self.stop_event.set()
        await self._exits.aclose()

    async def serve_forever(self) -> None:
        await self.start()
        try:
            await self.stop_event.wait()
        finally:
            await self.stop()
