"""The door, put together: its surface (always there, so any worker hands door turns over), and — where
``door.listen`` is set — its listener, each part handed its collaborators."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from appservice.config import Door as DoorConfig
from appservice.door.asking import DoorAsking
from appservice.door.binding import Binding, MemberState
from appservice.door.http import DoorEndpoint
from appservice.door.replies import Replies
from appservice.door.surface import DoorSurface
from appservice.door.waiting import Waiters
from engine.clock import Clock
from engine.content import Registry
from engine.store import Store
from engine.tasks import TaskGroup

log = logging.getLogger(__name__)


class DoorListener:
    def __init__(self, config: DoorConfig, *, store: Store, registry: Callable[[], Registry], clock: Clock,
                 surface: DoorSurface, tasks: TaskGroup, server_name: str, service_user: str,
                 homeserver: MemberState | None, whoami: Callable[[str], Awaitable[str]] | None,
                 max_attempts: int = 3) -> None:
        self.config = config
        self.tasks = tasks
        self.waiters = Waiters(store, clock)
        self.endpoint = DoorEndpoint(
            config, server_name=server_name, service_user=service_user, store=store, registry=registry,
            clock=clock, asking=DoorAsking(store, registry, surface, max_attempts=max_attempts),
            binding=Binding(store, registry, homeserver, check_seconds=config.check_seconds),
            replies=Replies(store, registry, clock, self.waiters, surface, tasks, wait_seconds=config.wait_seconds,
                            keepalive_seconds=config.keepalive_seconds),
            whoami=whoami, puppet_prefix=surface.puppet_prefix,
        )
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self, stop: asyncio.Event) -> None:
        """Listen on ``door.listen`` (port 0: any free port, said in ``port``)."""
        listen = self.config.listen
        assert listen is not None
        self.waiters.start(self.tasks, stop)
        app = web.Application(client_max_size=self.config.max_body_size + 1024)
        self.endpoint.routes(app)
        # A response whose client went away is cancelled (and cancels its run), not left making an answer.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, listen.host, listen.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) if server is not None else None
        self.port = sockets[0].getsockname()[1] if sockets else listen.port
        log.info("the door is listening on %s:%s", listen.host, self.port)

    async def stop(self) -> None:
        self.waiters.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
