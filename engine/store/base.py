"""The store's machinery: the pool, named transactions, the typed handle a transaction is, and the one
place asyncpg's exceptions become ours.

Callers never see a connection. ``store.runs.claim(...)`` runs one statement on the pool (autocommit);
``async with store.transaction("finish_run") as tx: await tx.runs.finish(...)`` runs several in one
commit, and ``tx`` is what the caller hands on (to a surface delivering in the same commit, say).
``tx.savepoint()`` nests one: what fails inside it is undone and the rest of the transaction stands.

Every transaction has a name (as Synapse's ``run_interaction`` does), so a log line or a slow-transaction
warning says *what* was slow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeAlias, TypeVar

import asyncpg
import asyncpg.exceptions._base as asyncpg_base

from engine.errors import Conflict, StoreError, StoreRefused, StoreUnavailable
from engine.store.queries import Queries

log = logging.getLogger(__name__)

SLOW_SECONDS = 0.5

# What asyncpg (and the socket under it) raises; each is translated into the error tree at this edge.
FOREIGN = (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError)
# asyncpg's own refusals, raised before a statement is sent: a value it cannot encode (an integer out of range,
# a lone surrogate in a text). They are InterfaceErrors like a closed connection, but the same statement fails
# the same way every time: refused, never "try the whole transaction again" (which would be forever).
_REFUSED_HERE = (asyncpg_base.DataError, asyncpg_base.ClientConfigurationError,
                 asyncpg_base.UnsupportedClientFeatureError, asyncpg_base.UnsupportedServerFeatureError)
_GONE = (asyncpg.PostgresConnectionError, asyncpg.InterfaceError, asyncpg.InternalClientError,
         asyncpg.TransactionRollbackError, asyncpg.OperatorInterventionError, asyncpg.CannotConnectNowError,
         OSError)
_CONFLICT = (asyncpg.UniqueViolationError, asyncpg.ExclusionViolationError)

Executor: TypeAlias = "asyncpg.Pool | asyncpg.Connection"
R = TypeVar("R")
T = TypeVar("T")


def translate(exc: BaseException, what: str) -> StoreError:
    """asyncpg's (or the socket's) exception as ours; ``what`` says what was being done."""
    if isinstance(exc, _CONFLICT):
        return Conflict(f"{what}: {exc}")
    if isinstance(exc, _REFUSED_HERE):
        return StoreRefused(f"{what}: {type(exc).__name__}: {exc}")
    if isinstance(exc, _GONE):
        return StoreUnavailable(f"{what}: the database is unavailable ({type(exc).__name__}: {exc})")
    return StoreRefused(f"{what}: {type(exc).__name__}: {exc}")


async def _translated(call: Awaitable[T], what: str) -> T:
    try:
        return await call
    except FOREIGN as exc:
        raise translate(exc, what) from exc


def _fields(cls: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def row(cls: type[R], record: Mapping[str, Any]) -> R:
    """A typed row from a record: the dataclass's fields, by the columns' names (a query may return more)."""
    return cls(**{name: record[name] for name in _fields(cls)})


def rows(cls: type[R], records: list[Any]) -> list[R]:
    names = _fields(cls)
    return [cls(**{name: r[name] for name in names}) for r in records]


def maybe(cls: type[R], record: Mapping[str, Any] | None) -> R | None:
    return None if record is None else row(cls, record)


class Family:
    """One table family's statements, on the pool (autocommit) or on a transaction's connection. A
    subclass's methods call queries by name through ``_all``/``_one``/``_value``/``_run`` only (a test
    reads those names back to check that every query is used and every name used exists)."""

    __slots__ = ("_on", "_q")

    def __init__(self, on: Executor, queries: Queries) -> None:
        self._on = on
        self._q = queries

    async def _all(self, name: str, *args: Any) -> list[Any]:
        try:
            return list(await self._on.fetch(self._q[name], *args))
        except FOREIGN as exc:
            raise translate(exc, name) from exc

    async def _one(self, name: str, *args: Any) -> Any:
        try:
            return await self._on.fetchrow(self._q[name], *args)
        except FOREIGN as exc:
            raise translate(exc, name) from exc

    async def _value(self, name: str, *args: Any) -> Any:
        try:
            return await self._on.fetchval(self._q[name], *args)
        except FOREIGN as exc:
            raise translate(exc, name) from exc

    async def _run(self, name: str, *args: Any) -> int:
        """Run a statement; how many rows it touched (0 when the status names none)."""
        try:
            status = str(await self._on.execute(self._q[name], *args))
        except FOREIGN as exc:
            raise translate(exc, name) from exc
        last = status.rsplit(" ", 1)[-1]
        return int(last) if last.isdecimal() else 0


async def init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")
    await conn.set_type_codec("json", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def nothing_to_reset(conn: asyncpg.Connection) -> None:
    """What a connection given back to the pool needs undone beyond its open transaction (which asyncpg always
    rolls back first): nothing. summon leaves no session state on a pooled connection — its role and settings are
    ``SET LOCAL`` / ``set_config(..., true)``, its advisory locks transaction-level, a LISTEN on a pooled
    connection is removed before it is given back — so asyncpg's default reset (``pg_advisory_unlock_all(); CLOSE
    ALL; UNLISTEN *; RESET ALL``), a round trip on every release, is not sent: a statement run on its own was two
    round trips, a mention's transaction took three more than its work (tests/db/test_pool_reset.py)."""


async def create_pool(dsn: str, *, min_size: int, max_size: int, pooled: bool = False) -> asyncpg.Pool:
    """``pooled``: ``dsn`` goes through a pooler in transaction mode (PgBouncer), where one client's
    statements may run on different server connections, so no statement is prepared by name (asyncpg's
    cache off: each statement is parsed unnamed, in the round trip that runs it)."""
    cache = {"statement_cache_size": 0} if pooled else {}
    pool = await _translated(asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, init=init_connection,
                                                 reset=nothing_to_reset, **cache), "connecting to the database")
    assert pool is not None
    return pool


@asynccontextmanager
async def transaction(pool: asyncpg.Pool, name: str) -> AsyncIterator[asyncpg.Connection]:
    """A named transaction on a pooled connection: begun, then committed when the block ends, or rolled
    back when it raises. The block's own exception passes through untouched; the database's (at begin or
    commit) are translated."""
    started = time.monotonic()
    conn: asyncpg.Connection = await _translated(pool.acquire(), f"{name}: acquiring a connection")
    try:
        tr = conn.transaction()
        await _translated(tr.start(), f"{name}: begin")
        try:
            yield conn
        except BaseException:
            if not conn.is_closed():
                with contextlib.suppress(*FOREIGN):
                    await tr.rollback()
            raise
        await _translated(tr.commit(), f"{name}: commit")
    finally:
        try:
            await pool.release(conn)
        except FOREIGN as exc:  # the connection went bad; the pool has let it go
            log.debug("releasing the connection of %s failed: %s", name, exc)
    took = time.monotonic() - started
    if took > SLOW_SECONDS:
        log.warning("slow transaction %s took %.3fs", name, took, extra={"txn": name})


@asynccontextmanager
async def savepoint(conn: asyncpg.Connection, name: str) -> AsyncIterator[None]:
    tr = conn.transaction()
    await _translated(tr.start(), f"{name}: savepoint")
    try:
        yield
    except BaseException:
        if not conn.is_closed():
            with contextlib.suppress(*FOREIGN):
                await tr.rollback()
        raise
    await _translated(tr.commit(), f"{name}: release savepoint")
