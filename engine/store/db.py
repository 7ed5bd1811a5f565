"""The database: one asyncpg pool, migrations, and named transactions.

Every transaction has a name (as Synapse's ``run_interaction`` does), so a log line or a slow-query
warning says *what* was slow.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg

from engine.errors import StoreError
from engine.store.queries import SQL_DIR, Queries

log = logging.getLogger(__name__)

SLOW_SECONDS = 0.5


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


class Database:
    def __init__(self, pool: asyncpg.Pool, queries: Queries, dsn: str | None = None) -> None:
        self.pool = pool
        self.q = queries
        self.dsn = dsn

    @classmethod
    async def connect(cls, dsn: str, *, min_size: int = 2, max_size: int = 10) -> Database:
        try:
            pool = await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, init=_init_connection)
        except (OSError, asyncpg.PostgresError) as exc:
            raise StoreError(f"cannot connect to the database: {exc}") from exc
        assert pool is not None
        return cls(pool, Queries(), dsn)

    async def close(self, timeout: float = 10.0) -> None:
        try:
            await asyncio.wait_for(self.pool.close(), timeout)
        except TimeoutError:
            log.error("database connections were still in use after %.0fs; closing them hard", timeout)
            self.pool.terminate()

    @asynccontextmanager
    async def transaction(self, name: str) -> AsyncIterator[asyncpg.Connection]:
        started = time.monotonic()
        async with self.pool.acquire() as conn, conn.transaction():
            yield conn
        took = time.monotonic() - started
        if took > SLOW_SECONDS:
            log.warning("slow transaction %s took %.3fs", name, took, extra={"txn": name})

    async def listen(self, channel: str, wake: Callable[[], None], stop: asyncio.Event) -> None:
        """LISTEN on ``channel`` and call ``wake`` on every NOTIFY, until ``stop`` — surviving the database
        going away: a lost connection is replaced (with backoff), and ``wake`` is called once on every
        (re)connection, since notifications sent while nobody listened are gone."""
        def heard(*_: object) -> None:
            wake()

        delay = 0.5
        while not stop.is_set():
            lost = asyncio.Event()
            conn: asyncpg.Connection | None = None
            try:
                # A connection of its own, not the pool's: it lives as long as the listening does.
                conn = await asyncpg.connect(self.dsn) if self.dsn else await self.pool.acquire()
                conn.add_termination_listener(lambda *_, lost=lost: lost.set())
                await conn.add_listener(channel, heard)
                delay = 0.5
                wake()
                stopping = asyncio.ensure_future(stop.wait())
                dropped = asyncio.ensure_future(lost.wait())
                try:
                    await asyncio.wait({stopping, dropped}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stopping.cancel()
                    dropped.cancel()
                if lost.is_set():
                    log.warning("lost the LISTEN connection for %s; reconnecting", channel)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError) as exc:
                log.warning("cannot LISTEN on %s (%s); retrying in %.1fs", channel, exc, delay)
            finally:
                if conn is not None:
                    if self.dsn:
                        conn.terminate()
                    else:
                        with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError):
                            await conn.remove_listener(channel, heard)
                            await self.pool.release(conn)
            if not stop.is_set() and (lost.is_set() or conn is None):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
                delay = min(delay * 2, 10.0)

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        return list(await self.pool.fetch(self.q[query], *args))

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        return await self.pool.fetchrow(self.q[query], *args)

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self.pool.fetchval(self.q[query], *args)

    async def execute(self, query: str, *args: Any) -> str:
        return str(await self.pool.execute(self.q[query], *args))


def migration_files(sql_dir: Path = SQL_DIR) -> list[Path]:
    return sorted((sql_dir / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql"))


async def migrate(dsn: str, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply the migrations not yet applied, in order, each in its own transaction. Forward only."""
    q = Queries(sql_dir / "queries.sql")
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(q["migration_lock"])
        await conn.execute(q["migrations_table"])
        done = {r["version"] for r in await conn.fetch(q["applied_migrations"])}
        applied: list[str] = []
        for path in migration_files(sql_dir):
            version = path.stem
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(path.read_text(encoding="utf-8"))
                await conn.execute(q["record_migration"], version)
            log.info("applied migration %s", version)
            applied.append(version)
        return applied
    finally:
        await conn.close()
