"""The desk, wired: its core, the surface the engine delivers to, and — in ``summon serve`` — its own
listener (the widget, the public and staff APIs, the event streams), the outgoing webhooks' sender, the
tick that resolves conversations left after a bot's answer, and the sweep that prunes abandoned guests and
forgets where old contacts came from. ``summon serve`` refuses a public inbox nothing caps the spend of
(``refuse_uncapped``).

``summon worker`` builds the same core and surface (a desk answer is delivered by whichever worker finishes
the run) but serves nothing.
"""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import aiohttp
from aiohttp import web

from appservice.config import Desk as DeskConfig
from appservice.desk.arrivals import DAY, Arrivals
from appservice.desk.asking import DeskAsking
from appservice.desk.changes import Changes
from appservice.desk.desk import Desk
from appservice.desk.outcomes import Report
from appservice.desk.public import CORS, PublicAPI
from appservice.desk.report import DEFAULT_DAYS, outcome_report
from appservice.desk.router import Look, Router
from appservice.desk.staff_api import StaffAPI
from appservice.desk.stream import Streams
from appservice.desk.surface import DeskSurface
from appservice.desk.tables import DeskTables
from appservice.desk.web import MAX_BODY, refusals
from appservice.desk.webhooks import RETRY_AFTER, Webhooks, WebhookSender
from engine.clock import Clock
from engine.content import Registry
from engine.errors import ConfigError, StoreError
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
IDLE_BATCH = 100
PRUNE_BATCH = 500
PRUNE_EVERY_SECONDS = 3600.0


def refuse_uncapped(config: DeskConfig, daily_spend: float | None) -> None:
    """A public inbox — one a bot works, answering anyone who makes a contact — must have a cap on what it
    spends, its own (``daily_spend``) or the deployment's: each new contact is a new spender, under no
    ceiling yet, so without one a program asking once per contact spends without bound. No default is guessed
    for someone else's money: ``summon serve`` refuses to start, in one line naming the inbox."""
    if daily_spend is not None:
        return
    for name, inbox in config.inboxes.items():
        if inbox.daily_spend is None and (inbox.bots is None or inbox.bots):
            raise ConfigError(f"config: desk.inboxes.{name}.daily_spend: inbox {name} is answered by bots for anyone, "
                              "and nothing caps what it spends: set it (USD a day), or limits.daily_spend")


class DeskService:
    def __init__(self, config: DeskConfig, store: Store, registry: Callable[[], Registry], clock: Clock, *,
                 server_name: str, max_attempts: int = 3, look: Look | None = None) -> None:
        """``look``: a staff member's presence and name, asked of the homeserver (None: nobody is known to be
        present, so a handoff in an inbox with staff is promised, never assigned)."""
        self.config = config
        self.store = store
        self._registry = registry
        self.clock = clock
        self.changes = Changes()
        self.asking = DeskAsking(registry, self.changes, server_name=server_name, max_attempts=max_attempts)
        self.desk = Desk(registry, self.changes, self.asking, server_name=server_name,
                         messages_per_minute=config.messages_per_minute,
                         conversations_per_contact=config.conversations_per_contact,
                         handoff_summary=config.handoff_summary)
        self.surface = DeskSurface(self.desk, store, registry, self.changes, server_name=server_name)
        self.changes.watch(Webhooks(self.desk, account_id=config.account_id))
        self.streams = Streams(store, clock, per_contact=config.streams_per_contact,
                               per_process=config.streams_per_process, words=self.desk.words)
        self.retry_after: tuple[float, ...] = RETRY_AFTER
        self.router = Router(store, self.desk, clock, look)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.sender: WebhookSender | None = None
        self.port: int | None = None

    async def load(self) -> None:
        """The configured inboxes, in the database and in the core (every process that delivers needs them)."""
        for name, inbox in self.config.inboxes.items():
            row = await self.store.of(DeskTables).upsert_inbox(name, inbox.identifier or name, inbox.title)
            self.desk.add_inbox(row, inbox)
            if inbox.daily_spend is not None:
                self.asking.daily_spend[row.id] = inbox.daily_spend
        known = set(self._registry().bots)
        for name, inbox in self.config.inboxes.items():
            for slug in inbox.bots or ():
                if slug not in known:
                    log.warning("desk inbox %s lists bot %r, which is not published: it works nothing", name, slug)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._cors, refusals])
        PublicAPI(self.store, self.desk, self.streams, self._registry, self.clock, secret=self.config.secret,
                  token_days=self.config.token_days,
                  arrivals=Arrivals(self.config, self.desk.words), old_secrets=self.config.old_secrets,
                  token_max_days=self.config.token_max_days).routes(app)
        StaffAPI(self.store, self.desk, self.streams, self.clock, account_id=self.config.account_id).routes(app)
        app.router.add_get("/desk/widget", self.widget)
        app.router.add_get("/desk/staff/report", self.report_page)
        app.router.add_static("/desk/static", STATIC)
        return app

    async def serve(self, tasks: TaskGroup, stop: asyncio.Event) -> None:
        """Listen on ``desk.listen`` (port 0: any free port, then ``self.port``), with the streams' LISTEN and
        the idle tick running until ``stop``."""
        tasks.spawn(self.streams.run(stop), name="desk-streams")
        tasks.spawn(self._idle(stop), name="desk-idle")
        tasks.spawn(self._prune(stop), name="desk-prune")
        if self.router.look is not None and any(inbox.staff for inbox in self.config.inboxes.values()):
            tasks.spawn(self.router.run(stop), name="desk-route")
        self._session = aiohttp.ClientSession()
        self.sender = WebhookSender(self.store, self.desk, self._session, self.clock, retry_after=self.retry_after)
        tasks.spawn(self.sender.run(stop), name="desk-webhooks")
        # Streams are long-lived: a short graceful shutdown, and they end when the LISTEN stops.
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.listen.host, self.config.listen.port)
        await site.start()
        server = site._server  # aiohttp keeps the bound socket here; port 0 is only known after binding
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self.config.listen.port
        log.info("desk listening on %s:%s (widget at /desk/widget)", self.config.listen.host, self.port)

    @property
    def address(self) -> str:
        return f"http://{self.config.listen.host}:{self.port or self.config.listen.port}"

    async def close(self) -> None:
        """Stop serving (the service's stop event is set): the streams end, the sender stops waiting."""
        self.streams.stopping.set()
        self.streams.wake_all()
        if self.sender is not None:
            self.sender.wake()
        if self._runner is not None:
            await self._runner.cleanup()

    async def release(self) -> None:
        """After its tasks have ended: the webhooks' connections."""
        if self._session is not None:
            await self._session.close()

    async def widget(self, request: web.Request) -> web.Response:
        """The widget's page, naming its inbox (``?inbox=``, else the first configured)."""
        identifier = request.query.get("inbox") or next(
            (i.row.identifier for i in self.desk.inboxes.values()), "")
        page = (STATIC / "widget.html").read_text(encoding="utf-8")
        page = page.replace("{{inbox}}", html.escape(identifier, quote=True))
        return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-cache"})

    async def outcomes(self) -> tuple[Report, dict[int, str]]:
        """The outcome figures of every inbox (the last 30 days' conversations): what /metrics shows."""
        now = self.clock.now()
        names = {inbox.row.id: inbox.row.name for inbox in self.desk.inboxes.values()}
        made = await outcome_report(self.store, sorted(names), since=now - timedelta(days=DEFAULT_DAYS), until=now,
                                    now=now)
        return made, names

    async def report_page(self, request: web.Request) -> web.Response:
        """The staff page of outcome figures: a form for the staff key; the figures come from the staff API."""
        page = (STATIC / "report.html").read_text(encoding="utf-8")
        page = page.replace("{{account}}", html.escape(str(self.config.account_id), quote=True))
        return web.Response(text=page, content_type="text/html", headers={"Cache-Control": "no-cache"})

    async def _idle(self, stop: asyncio.Event) -> None:
        """Resolve (as assumed) the conversations a bot's answer was left in for ``idle_minutes``."""
        every = min(60.0, self.config.idle_minutes * 60 / 4)
        while not stop.is_set():
            try:
                await self.resolve_idle()
            except StoreError:
                log.warning("desk: could not resolve idle conversations (the database is unavailable)")
            await self.clock.wait(stop, every)

    async def resolve_idle(self) -> int:
        ids = await self.store.of(DeskTables).idle(self.config.idle_minutes * 60, IDLE_BATCH)
        for conversation_id in ids:
            async with self.store.transaction("desk_resolve_idle") as tx:
                await self.desk.resolve_idle(tx, conversation_id)
        if ids:
            log.info("desk: %d conversation(s) left after a bot's answer resolved as assumed", len(ids))
        return len(ids)

    @web.middleware
    async def _cors(self, request: web.Request, handler: Callable[[web.Request], object]) -> web.StreamResponse:
        """Sites that embed the widget from elsewhere (``desk.origins``) may call the public API."""
        origin = request.headers.get("Origin")
        if origin is None or origin not in self.config.origins or not request.path.startswith("/public/"):
            return await handler(request)  # type: ignore[no-any-return,misc]
        headers = {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
                   "Access-Control-Allow-Headers": "Authorization, Content-Type, Last-Event-ID",
                   "Access-Control-Allow-Methods": "GET, POST, PATCH, OPTIONS"}
        if request.method == "OPTIONS":
            return web.Response(status=204, headers=headers)
        request[CORS] = headers  # an event stream sends its headers itself, before its first byte
        response: web.StreamResponse = await handler(request)  # type: ignore[misc]
        if not response.prepared:
            response.headers.update(headers)
        return response

    async def _prune(self, stop: asyncio.Event) -> None:
        """Hourly: prune the guests nobody has heard from in ``guests_kept_days``, and forget where old contacts
        and conversations were made from."""
        while not stop.is_set():
            try:
                await self.prune()
            except StoreError:
                log.warning("desk: could not prune abandoned guests (the database is unavailable)")
            await self.clock.wait(stop, PRUNE_EVERY_SECONDS)

    async def prune(self) -> tuple[int, int]:
        """One sweep; how many guests and conversations went."""
        forgot = await self.store.of(DeskTables).forget_origins(DAY)
        contacts = conversations = 0
        while True:
            async with self.store.transaction("desk_prune_guests") as tx:
                gone, ended = await tx.of(DeskTables).prune_guests(self.config.guests_kept_days, PRUNE_BATCH)
            contacts, conversations = contacts + gone, conversations + ended
            if gone < PRUNE_BATCH:
                break
        if contacts or forgot:
            log.info("desk: %d abandoned guest(s) pruned with %d conversation(s); %d row(s) forgot where they were "
                     "made from", contacts, conversations, forgot)
        return contacts, conversations
