"""Migration 0020 on a database that already holds lines (issue 12, items 4 and 5): what was stored before keeps
the order it was judged by (its time, then its id) as its arrival number, new lines are numbered after it, and
an original an edit overwrote — its own words lost — no longer reads as the words of an edit."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from engine.store.migrate import migrate, migration_files

pytestmark = pytest.mark.db
ARRIVAL = "0020_arrival_order"


@pytest.fixture
async def blank(stack: dict[str, str]) -> AsyncIterator[str]:
    admin_dsn = f"postgresql://postgres@127.0.0.1:{stack['SUMMON_PG_PORT']}/postgres"
    name = f"m_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\'')
    finally:
        await admin.close()
    yield admin_dsn.rsplit("/", 1)[0] + f"/{name}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def migrations_up_to(folder: Path, last: str) -> Path:
    """A copy of engine/store/sql/ whose migrations stop at ``last`` (inclusive)."""
    (folder / "migrations").mkdir(parents=True, exist_ok=True)
    for path in migration_files():
        if path.stem <= last:
            shutil.copy(path, folder / "migrations" / path.name)
    return folder


async def test_lines_stored_before_keep_their_order_and_lose_no_privacy(blank: str, tmp_path: Path) -> None:
    before = max(p.stem for p in migration_files() if p.stem < ARRIVAL)
    await migrate(blank, migrations_up_to(tmp_path / "sql", before))
    conn = await asyncpg.connect(blank)
    try:
        insert = ("INSERT INTO room_events (event_id, room_id, sender, event_type, state_key, ts, content, said, "
                  "replaces, edited_ts) VALUES ($1, '!r', '@a', $2, $3, $4, '{}', $5, $6, $7)")
        await conn.execute(insert, "$late", "m.room.message", None, 300, "a later line", None, None)
        await conn.execute(insert, "$original", "m.room.message", None, 100, "the edit's words", None, 250)
        await conn.execute(insert, "$edit", "m.room.message", None, 250, "the edit's words", "$original", None)
        await conn.execute(insert, "$join", "m.room.member", "@a", 50, "", None, None)
        await migrate(blank, migrations_up_to(tmp_path / "sql", ARRIVAL))
        rows = await conn.fetch("SELECT event_id, said FROM room_events ORDER BY seq")
        assert [r["event_id"] for r in rows] == ["$join", "$original", "$edit", "$late"]
        # The original's own words were lost to the overwrite: it reads as its standing edit, or as nothing.
        assert {r["event_id"]: r["said"] for r in rows}["$original"] == ""
        await conn.execute("INSERT INTO room_events (event_id, room_id, sender, event_type, ts, content) "
                           "VALUES ('$new', '!r', '@a', 'm.room.message', 1, '{}')")
        assert await conn.fetchval("SELECT max(seq) FROM room_events") == await conn.fetchval(
            "SELECT seq FROM room_events WHERE event_id = '$new'") == 5
    finally:
        await conn.close()
