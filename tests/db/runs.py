"""Helpers for db tests: a run inserted the way ``engine.run.summon`` inserts one."""

from __future__ import annotations

from typing import Any

from tests.book import told
from tests.store import TestStore


async def insert_run(db: TestStore, *, script: list[dict[str, Any]] | None = None, bot: str = "helper",
                     limits: dict[str, Any] | None = None, room_id: str = "!room:localhost",
                     trigger: str | None = None, max_attempts: int = 3) -> int:
    """``script``: what the tests' stand-in answers the run by (written into what was asked: ``tests.book.told``)."""
    said = told("hello", script)
    run_id = await db.runs.insert(
        bot=bot, surface="rooms", place=room_id, thread=None, trigger_event=trigger,
        asked_by="@alice:localhost", subject="@alice:localhost", prompt=said,
        context={"kind": "timeline", "lines": [{"name": "alice", "said": said}]},
        limits=limits or {"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=max_attempts,
    )
    assert run_id is not None
    return run_id


async def steps_of(db: TestStore, run_id: int) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.pool.fetch(
        "SELECT seq, kind, worker, payload FROM agent_steps WHERE run_id = $1 ORDER BY seq", run_id)]
