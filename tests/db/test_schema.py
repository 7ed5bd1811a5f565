"""A database built by the migrations equals the schema file (engine/store/sql/schema.txt).

When a migration changes the schema on purpose, regenerate the file with
``SUMMON_UPDATE_SCHEMA=1 make test`` and review the diff like any other change."""

from __future__ import annotations

import os

import pytest

from engine.store.migrate import migration_files
from engine.store.queries import QUERIES_DIR, SQL_DIR, Queries
from tests.store import TestStore

SCHEMA = SQL_DIR / "schema.txt"
MIGRATIONS = Queries(QUERIES_DIR / "migrations.sql")
PARTS = ("describe_columns", "describe_indexes", "describe_constraints", "describe_triggers", "describe_functions")


async def describe(db: TestStore) -> str:
    lines: list[str] = []
    for part in PARTS:
        lines += [r["line"] for r in await db.tests.fetch(part)]
    return "\n".join(lines) + "\n"


@pytest.mark.db
async def test_migrated_database_equals_schema_file(db: TestStore) -> None:
    actual = await describe(db)
    if os.environ.get("SUMMON_UPDATE_SCHEMA") == "1":
        SCHEMA.write_text(actual)
    expected = SCHEMA.read_text()
    assert actual == expected, "the migrations and engine/store/sql/schema.txt disagree (see the module docstring)"


@pytest.mark.db
async def test_every_migration_was_applied_in_order(db: TestStore) -> None:
    applied = [r["version"] for r in await db.pool.fetch(MIGRATIONS["applied_migrations"])]
    assert sorted(applied) == [p.stem for p in migration_files()]
    assert "schema_migrations" in await describe(db)
