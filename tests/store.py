"""The store as tests use it: exactly the engine's ``Store``, plus what only a test may do — run its own SQL
on the raw pool (``pool``, to set a scene or check a row) and the queries that live with the tests
(``tests``: ``tests/sql/queries.sql``, e.g. reading the schema back)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg

from appservice.matrix.places import ROOM_PLACES
from engine.store import Store
from engine.store.base import create_pool
from engine.store.queries import Queries

TEST_QUERIES = Path(__file__).resolve().parent / "sql"


class TestQueries:
    """The test-only queries, run by name on the raw pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool
        self._q = Queries(TEST_QUERIES)

    async def fetch(self, name: str, *args: Any) -> list[asyncpg.Record]:
        return list(await self._pool.fetch(self._q[name], *args))

    async def fetchval(self, name: str, *args: Any) -> Any:
        return await self._pool.fetchval(self._q[name], *args)


class TestStore(Store):
    __test__ = False  # not a test class, whatever its name says

    @classmethod
    async def open(cls, dsn: str, *, min_size: int = 1, max_size: int = 8) -> TestStore:
        return cls(await create_pool(dsn, min_size=min_size, max_size=max_size), Queries(), dsn, places=ROOM_PLACES)

    @property
    def pool(self) -> asyncpg.Pool:
        return self._pool

    @property
    def tests(self) -> TestQueries:
        return TestQueries(self._pool)
