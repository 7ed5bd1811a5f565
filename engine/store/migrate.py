"""Migrations: ``sql/migrations/NNNN_*.sql``, forward only, each applied once in its own transaction, one
migrator at a time (``sql/queries/migrations.sql``)."""

from __future__ import annotations

import logging
from pathlib import Path

import asyncpg

from engine.store.base import FOREIGN, translate
from engine.store.queries import QUERIES_DIR, SQL_DIR, Queries

log = logging.getLogger(__name__)


def migration_files(sql_dir: Path = SQL_DIR) -> list[Path]:
    return sorted((sql_dir / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql"))


async def migrate(dsn: str, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply the migrations not yet applied, in order; the versions applied. Raises ``StoreError``."""
    try:
        return await _migrate(dsn, sql_dir)
    except FOREIGN as exc:
        raise translate(exc, "migrating the database") from exc


async def _migrate(dsn: str, sql_dir: Path) -> list[str]:
    q = Queries(QUERIES_DIR / "migrations.sql")
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
