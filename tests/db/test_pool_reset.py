"""A connection given back to the pool is reset by nothing but asyncpg's own rollback of an open transaction
(``engine.store.base.nothing_to_reset``): asyncpg's default reset query was a round trip on every release. That
is safe only while nothing summon does on a pooled connection outlives its transaction; these show both."""

from __future__ import annotations

import asyncpg
import pytest

from engine.store.base import create_pool, transaction

pytestmark = pytest.mark.db


async def test_a_released_connection_is_sent_nothing(dsn: str) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=1)
    try:
        sent: list[str] = []
        async with pool.acquire() as conn:
            conn.add_query_logger(lambda q: sent.append(q.query))
            await conn.fetchval("SELECT 1")
        async with transaction(pool, "twice") as conn:
            await conn.fetchval("SELECT 2")
        async with pool.acquire() as conn:
            await conn.fetchval("SELECT 3")
        assert sent == ["SELECT 1", "BEGIN;", "SELECT 2", "COMMIT;", "SELECT 3"]
    finally:
        await pool.close()


async def test_nothing_a_transaction_sets_reaches_the_next_on_the_same_connection(dsn: str) -> None:
    pool = await create_pool(dsn, min_size=1, max_size=1)
    try:
        async with transaction(pool, "as the tools") as conn:
            engine_role = await conn.fetchval("SELECT current_user")
            await conn.execute("SET LOCAL ROLE summon_tools")
            await conn.execute("SELECT set_config('summon.run', '42', true), pg_advisory_xact_lock(7)")
            assert await conn.fetchval("SELECT current_user") == "summon_tools"
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with transaction(pool, "failing") as conn:
                await conn.execute("SET LOCAL ROLE summon_tools")
                await conn.fetchval("SELECT 1 / 0")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT current_user") == engine_role
            assert (await conn.fetchval("SELECT current_setting('summon.run', true)") or "") == ""
            assert await conn.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == 0
            assert await conn.fetchval("SELECT pg_current_xact_id_if_assigned() IS NULL")
            # A transaction left open on a connection given back is rolled back by asyncpg all the same.
            await conn.execute("BEGIN; CREATE TABLE left_open (x int)")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT to_regclass('left_open') IS NULL")
    finally:
        await pool.close()
