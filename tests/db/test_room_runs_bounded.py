"""`summon runs` for one room reads that room's newest runs, not its whole history: found by make bench-scale's
year-old database (tests/bench/year.py), where the busy room's `summon runs` grew with every run it had ever had
(the index by place handed over all of them to be sorted). Migration 0083 indexes runs by (place, id)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.content import Registry
from engine.store.queries import Queries
from tests.store import TestStore

pytestmark = pytest.mark.db

BUSY, QUIET = "!busy:localhost", "!quiet:localhost"


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for child in plan.get("Plans", []) for n in nodes(child))]


async def test_summon_runs_for_a_busy_room_reads_only_its_newest_runs(db: TestStore, published: Registry) -> None:
    await db.pool.execute(
        "INSERT INTO agent_runs (bot, surface, place, prompt, limits, status)"
        # The busy room's runs are its history (the oldest ids), then a year of everyone else's; the quiet room has
        # had five, spread out.
        " SELECT 'helper', 'rooms', CASE WHEN g <= 2000 THEN $1 WHEN g % 4000 = 2001 THEN $2"
        " ELSE '!other' || g || ':localhost' END, 'q', '{}'::jsonb, 'done' FROM generate_series(1, 20000) g", BUSY, QUIET)
    await db.pool.execute("VACUUM ANALYZE agent_runs")
    for room, runs in ((BUSY, 20), (QUIET, 5)):
        plan = await db.pool.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + Queries()["room_runs"], room, 20)
        plan = json.loads(plan) if isinstance(plan, str) else plan
        top = plan[0]["Plan"]
        # The runs it looked at: those it kept and those it read only to throw away, before any sort.
        looked = sum(n["Actual Rows"] + n.get("Rows Removed by Filter", 0) for n in nodes(top)
                     if n.get("Relation Name") == "agent_runs")
        assert looked == runs, (room, looked, [(n["Node Type"], n.get("Index Name"), n["Actual Rows"])
                                               for n in nodes(top)])
