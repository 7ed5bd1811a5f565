"""A summons in a long thread reads about as many of its lines as it keeps, not the whole thread: found by make
bench-scale's year-old database (tests/bench/year.py), where the context read of a 5,000-line thread touched
10,667 pages — every reply, read to be sorted for the newest 50."""

from __future__ import annotations

import json

import pytest

from engine.store.queries import Queries
from tests.store import TestStore

pytestmark = pytest.mark.db

ROOM, ROOT = "!long:localhost", "$root:localhost"


async def test_the_context_of_a_long_thread_reads_only_its_newest_lines(db: TestStore) -> None:
    await db.pool.execute(
        "INSERT INTO room_events (event_id, room_id, sender, event_type, ts, content, said, thread_root)"
        " SELECT CASE WHEN g = 0 THEN $2 ELSE '$reply' || g || ':localhost' END, $1, '@p' || (g % 20) || ':localhost',"
        " 'm.room.message', 1000 + g, '{}'::jsonb, 'line ' || g, CASE WHEN g = 0 THEN NULL ELSE $2 END"
        " FROM generate_series(0, 4000) g", ROOM, ROOT)
    await db.pool.execute("VACUUM ANALYZE room_events")
    sql = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + Queries()["context_thread"]
    plan = await db.pool.fetchval(sql, ROOM, ROOT, None, "@p1:localhost", 50)
    plan = json.loads(plan) if isinstance(plan, str) else plan
    top = plan[0]["Plan"]
    pages = top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0)
    lines = await db.pool.fetch(Queries()["context_thread"], ROOM, ROOT, None, "@p1:localhost", 50)
    assert lines[0]["event_id"] == ROOT and [r["said"] for r in lines[1:4]] == ["line 4000", "line 3999", "line 3998"]
    assert len(lines) == 50
    # ~50 lines and their edits looked up, by index: a few hundred pages; the whole thread was thousands.
    assert pages < 1000, pages
