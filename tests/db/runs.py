"""Helpers for db tests: a run inserted the way ``engine.run.summon`` inserts one."""

from __future__ import annotations

from typing import Any

from engine.store.db import Database


async def insert_run(db: Database, *, script: list[dict[str, Any]] | None, bot: str = "helper",
                     limits: dict[str, Any] | None = None, room_id: str = "!room:localhost",
                     trigger: str | None = None, max_attempts: int = 3) -> int:
    run_id = await db.fetchval(
        "insert_run", bot, "rooms", room_id, None, trigger, "@alice:localhost", "@alice:localhost",
        "hello", {"kind": "timeline", "lines": [{"name": "alice", "said": "hello"}]}, script,
        limits or {"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts,
    )
    assert run_id is not None
    return int(run_id)


async def steps_of(db: Database, run_id: int) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.pool.fetch(
        "SELECT seq, kind, worker, payload FROM agent_steps WHERE run_id = $1 ORDER BY seq", run_id)]
