"""What a bot is given: the conversation as the asker could read it, written onto the run row (SPEC §4).

Summoned in a thread → the thread's root and every reply; outside a thread → the room's main timeline
(thread replies are not folded in).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from appservice.matrix.said import Line
from engine.store.queries import Queries

CONTEXT_LINES = 30


async def read_context(conn: asyncpg.Connection, q: Queries, line: Line) -> dict[str, Any]:
    """The conversation as the asker reads it: the thread when asked in one, else the main timeline."""
    if line.thread_root:
        rows = await conn.fetch(q["context_thread"], line.room_id, line.thread_root, line.ts)
        kind = "thread"
    else:
        rows = list(reversed(await conn.fetch(q["context_timeline"], line.room_id, line.ts, CONTEXT_LINES)))
        kind = "timeline"
    return {
        "kind": kind,
        "lines": [{"event_id": r["event_id"], "sender": r["sender"], "name": r["name"],
                   "said": r["said"], "ts": r["ts"]} for r in rows],
    }
