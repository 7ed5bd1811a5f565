"""``Store`` (the pool, named transactions, LISTEN) and ``Tx`` (a transaction, as a typed handle). Both
carry every table family: on the store each statement is its own (autocommit); on a ``Tx`` they share its
commit. Nothing outside ``engine/store/`` sees a connection."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import cached_property
from typing import TypeVar, cast

import asyncpg

from engine.clock import Clock, SystemClock
from engine.store import base
from engine.store.base import FOREIGN, Executor, Family
from engine.store.content import Content
from engine.store.health import Health
from engine.store.hooks import Hooks
from engine.store.memories import Memories
from engine.store.people import People
from engine.store.places import NO_PLACES, Places
from engine.store.profiles import Profiles
from engine.store.providers import Providers
from engine.store.queries import Queries
from engine.store.refusals import Refusals
from engine.store.runs import Runs
from engine.store.schedules import Schedules
from engine.store.search import Search
from engine.store.workers import Workers

log = logging.getLogger(__name__)

# A LISTEN connection is asked a trivial query this often (seconds), and replaced when no answer comes this soon.
LISTEN_CHECK = 30.0
LISTEN_TIMEOUT = 10.0


F = TypeVar("F", bound=Family)


class Families:
    """Every table family, on one executor (the pool, or a transaction's connection): the engine's as attributes,
    a surface's own (its module in its own folder, its queries by name like any other) by ``of``."""

    _on: Executor
    _q: Queries
    places: Places  # what the surface that keeps the runs' places says of them (engine.store.places)

    def of(self, family: type[F]) -> F:
        """A surface's own family on this executor, made once here: ``tx.of(DeskTables).conversation(7)``."""
        made: dict[type[Family], Family] = self.__dict__.setdefault("_theirs", {})
        found = made.get(family)
        if found is None:
            found = made[family] = family(self._on, self._q)
        return cast(F, found)

    @cached_property
    def runs(self) -> Runs:
        return Runs(self._on, self._q)





    @cached_property
    def people(self) -> People:
        return People(self._on, self._q)

    @cached_property
    def schedules(self) -> Schedules:
        return Schedules(self._on, self._q)

    @cached_property
    def content(self) -> Content:
        return Content(self._on, self._q)

    @cached_property
    def search(self) -> Search:
        return Search(self._on, self._q)

    @cached_property
    def hooks(self) -> Hooks:
        return Hooks(self._on, self._q)

    @cached_property
    def refusals(self) -> Refusals:
        return Refusals(self._on, self._q)

    @cached_property
    def workers(self) -> Workers:
        return Workers(self._on, self._q)

    @cached_property
    def health(self) -> Health:
        return Health(self._on, self._q)

    @cached_property
    def profiles(self) -> Profiles:
        return Profiles(self._on, self._q)

    @cached_property
    def providers(self) -> Providers:
        return Providers(self._on, self._q)

    @cached_property
    def memories(self) -> Memories:
        return Memories(self._on, self._q)



class Tx(Families):
    """One named transaction. Hand it on to whatever must write in the same commit."""

    def __init__(self, conn: asyncpg.Connection, queries: Queries, name: str, places: Places = NO_PLACES) -> None:
        self._on = conn
        self._q = queries
        self.name = name
        self.places = places
        self._taken: set[str] = set()

    async def take_once(self, key: str, take: Callable[[], Awaitable[object]]) -> None:
        """``take`` (a row lock, say) once a transaction for ``key``: a homeserver transaction's hundred events
        in one room take its row once. (A savepoint rolled back gives back the row locks taken inside it, and
        this forgets them too.)"""
        if key not in self._taken:
            await take()
            self._taken.add(key)

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[Tx]:
        """A nested transaction: what raises inside is undone, and the rest of this one stands."""
        taken = set(self._taken)
        try:
            async with base.savepoint(self._on, self.name):
                yield self
        except BaseException:
            self._taken = taken
            raise


class Store(Families):
    def __init__(self, pool: asyncpg.Pool, queries: Queries, dsn: str | None = None, *,
                 clock: Clock | None = None, places: Places = NO_PLACES, listen_check: float = LISTEN_CHECK,
                 listen_timeout: float = LISTEN_TIMEOUT) -> None:
        """``listen_check``: seconds between the checks that a LISTEN connection still answers; one that gives no
        answer within ``listen_timeout`` is replaced (see ``listen``)."""
        self._pool = pool
        self.listen_check = listen_check
        self.listen_timeout = listen_timeout
        self._on = pool
        self._q = queries
        self.places = places
        self.dsn = dsn
        self.clock = clock or SystemClock()  # how long LISTEN waits before it tries again

    @classmethod
    async def connect(cls, dsn: str, *, min_size: int = 2, max_size: int = 10, clock: Clock | None = None,
                      pooled: bool = False, listen_dsn: str | None = None, places: Places = NO_PLACES,
                      listen_check: float = LISTEN_CHECK, listen_timeout: float = LISTEN_TIMEOUT) -> Store:
        """Raises ``StoreUnavailable`` when the database cannot be reached. ``pooled``: ``dsn`` is a pooler's
        in transaction mode (no named prepared statements); ``listen_dsn``: where LISTEN connects instead — a
        LISTEN lives as long as its session, which a transaction-mode pooler does not keep."""
        pool = await base.create_pool(dsn, min_size=min_size, max_size=max_size, pooled=pooled)
        return cls(pool, Queries(), listen_dsn or dsn, clock=clock, places=places, listen_check=listen_check,
                   listen_timeout=listen_timeout)

    async def close(self, timeout: float = 10.0) -> None:
        try:
            await asyncio.wait_for(self._pool.close(), timeout)
        except TimeoutError:
            log.error("database connections were still in use after %.0fs; closing them hard", timeout)
            self._pool.terminate()

    @asynccontextmanager
    async def transaction(self, name: str) -> AsyncIterator[Tx]:
        async with base.transaction(self._pool, name) as conn:
            yield Tx(conn, self._q, name, self.places)

    async def listen(self, channel: str, wake: Callable[[], None], stop: asyncio.Event, *,
                     payload: Callable[[str], None] | None = None) -> None:
        """LISTEN on ``channel`` and call ``wake`` on every NOTIFY (or ``payload`` with the notification's
        payload, when given), until ``stop`` — surviving the database going away: a lost connection is
        replaced (with backoff), and ``wake`` is called once on every (re)connection, since notifications
        sent while nobody listened are gone.

        A connection can also die without a word: a NAT entry evicted, a firewall dropping without a reset, a
        half-open TCP connection. Nothing then tells asyncpg it is gone, NOTIFYs simply stop, and only the
        workers' poll would find new runs, for good (make chaos, half-open-listen). So every ``listen_check``
        seconds the connection is asked a trivial query; no answer within ``listen_timeout`` and it is replaced
        as a lost one is."""
        def heard(*args: object) -> None:
            if payload is not None and len(args) == 4 and isinstance(args[3], str):
                payload(args[3])
            else:
                wake()

        delay = 0.5
        while not stop.is_set():
            lost = asyncio.Event()
            silent = False
            conn: asyncpg.Connection | None = None
            try:
                # A connection of its own, not the pool's: it lives as long as the listening does.
                conn = await asyncpg.connect(self.dsn) if self.dsn else await self._pool.acquire()
                conn.add_termination_listener(lambda *_, lost=lost: lost.set())
                await conn.add_listener(channel, heard)
                delay = 0.5
                wake()
                stopping = asyncio.ensure_future(stop.wait())
                dropped = asyncio.ensure_future(lost.wait())
                try:
                    while not (await asyncio.wait({stopping, dropped}, timeout=self.listen_check,
                                                  return_when=asyncio.FIRST_COMPLETED))[0]:
                        if not await self._answers(conn):
                            log.warning("the LISTEN connection for %s gave no answer within %gs; replacing it",
                                        channel, self.listen_timeout)
                            silent = True
                            lost.set()
                finally:
                    stopping.cancel()
                    dropped.cancel()
                if lost.is_set() and not silent:
                    log.warning("lost the LISTEN connection for %s; reconnecting", channel)
            except FOREIGN as exc:
                log.warning("cannot LISTEN on %s (%s); retrying in %.1fs", channel, exc, delay)
            finally:
                if conn is not None:
                    if self.dsn or silent:
                        conn.terminate()
                    if not self.dsn:
                        with contextlib.suppress(*FOREIGN):
                            await conn.remove_listener(channel, heard)
                        with contextlib.suppress(*FOREIGN):
                            await self._pool.release(conn)
            if not stop.is_set() and (lost.is_set() or conn is None):
                await self.clock.wait(stop, delay)
                delay = min(delay * 2, 10.0)

    async def _answers(self, conn: asyncpg.Connection) -> bool:
        """Whether ``conn`` answers a trivial query within ``listen_timeout``; one that does not is terminated
        here, its query still waiting (so the query's error is taken here, not left to be logged unseen)."""
        q = self._q
        check = asyncio.ensure_future(conn.fetchval(q["listen_alive"]))
        if not (await asyncio.wait({check}, timeout=self.listen_timeout))[0]:
            conn.terminate()
            with contextlib.suppress(Exception):
                await check
            return False
        try:
            check.result()
        except FOREIGN:
            return False
        return True
