"""Member bots, wired (docs/member-bots.md): the sealed charters, the feeds, the builder's tools, the
``members`` surface, the rooms where the builder is talked to without a mention, and the clock's tick."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from appservice.config import Members
from appservice.matrix.asking.asking import Asking
from appservice.matrix.delivery.homeserver import Homeserver
from appservice.matrix.ours import PUPPET_PREFIX, Ours
from appservice.members.book import Book
from appservice.members.building import Builder, BuildSettings
from appservice.members.charter import CharterRules
from appservice.members.feeds import Feeds
from appservice.members.rooms import MemberRooms
from appservice.members.runs import OPENER, SURFACE, charter_opener
from appservice.members.seal import Keyring
from appservice.members.surface import MembersSurface
from appservice.members.ticks import member_tick
from appservice.members.tools import make_card, make_charter_fetch, on_surface
from engine.clock import Clock
from engine.content import Registry
from engine.errors import StoreError
from engine.store import Store
from engine.surface import Opener
from engine.tools.base import ToolFn
from engine.tools.fetch import FetchSettings
from engine.tools.quarantine import Quarantine

log = logging.getLogger(__name__)


class MemberBots:
    def __init__(self, config: Members, store: Store, registry: Callable[[], Registry], homeserver: Homeserver,
                 clock: Clock, quarantine: Quarantine, *, server_name: str, service_user: str,
                 puppet_prefix: str = PUPPET_PREFIX) -> None:
        self.config = config
        self.puppet_prefix = puppet_prefix
        self.store = store
        self._registry = registry
        self.clock = clock
        self.server_name = server_name
        self.service_user = service_user
        self.rules = CharterRules(floor_seconds=config.min_every_seconds,
                                  loopback_for_tests=config.loopback_feeds_for_tests)
        self.book = Book(Keyring.parse(config.keys), self.rules)
        self.feeds = Feeds(FetchSettings(allow_loopback_http_for_tests=config.loopback_feeds_for_tests,
                                         max_bytes=2 * 1024 * 1024), self.rules, quarantine)
        self.surface = MembersSurface(self.book, registry, server_name=server_name, host=config.builder)
        self.builder = Builder(store, self.book, self.feeds, registry, homeserver, clock, BuildSettings(
            host=config.builder, server_name=server_name, rules=self.rules, admins=frozenset(config.admins),
            max_per_person=config.max_per_person, dry_run_seconds=config.dry_run_seconds))

    def openers(self) -> dict[str, Opener]:
        """What member bots keep sealed off their runs' rows: the charter, opened when a request is built."""
        return {OPENER: charter_opener(self.store, self.book)}

    def tools(self, fetch: ToolFn | None) -> dict[str, ToolFn]:
        """The builder's built-ins, and ``fetch`` for everyone: a member bot's run gets its charter's."""
        return {
            **self.builder.tools(),
            "card": make_card(self.store, self.book),
            "fetch": on_surface(SURFACE, make_charter_fetch(self.store, self.book, self.feeds), fetch),
        }

    def own_rooms(self, asking: Asking) -> MemberRooms:
        ours = Ours(self._registry, server_name=self.server_name, service_user=self.service_user,
                    puppet_prefix=self.puppet_prefix)
        return MemberRooms(asking, self.book, self._registry, ours, host=self.config.builder,
                           server_name=self.server_name, service_user=self.service_user)

    async def tick(self) -> list[int]:
        return await member_tick(self.store, self.book, self._registry(), host=self.config.builder,
                                 refused=self.surface.refused)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick every ``tick_seconds`` until ``stop`` (``summon serve`` only); each tick also gives the builder
        back its persona's name in any bot's room where a change to its own profile took it away."""
        while not stop.is_set():
            try:
                await self.tick()
            except StoreError:
                log.exception("member bots' tick failed; will try again")
            await self.builder.keep_faces()
            await self.clock.wait(stop, self.config.tick_seconds)
