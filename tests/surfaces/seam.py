"""The seam, proven: summon → claim → steps → answer delivered, through the in-memory surface, on a real
PostgreSQL, in a process of its own that never imports the Matrix surface (``appservice``) nor mautrix.

Run as ``python -m tests.surfaces.seam <dsn>``: it prints one JSON object (what was delivered, the run's
steps, and whether any Matrix module was imported) for ``tests/db/test_surface_seam.py`` to check.
"""

from __future__ import annotations

import asyncio
import json
import sys

from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.run.publish import publish
from engine.run.summon import Summoned
from engine.run.worker import Worker, WorkerSettings
from engine.store import Store
from engine.surface import Answered
from engine.tools.base import RunRef
from tests.book import stand_in
from tests.support import STAND_IN
from tests.surfaces.memory import MemorySurface

BOT = """---
name: Clerk
surfaces: [desk]
---
You answer questions at the counter.
"""
SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"what": "hours"}}]},
    {"text": "We open at nine."},
]


async def lookup(run: RunRef, arguments: dict[str, object]) -> str:
    return f"{arguments.get('what')}: 09:00-17:00 (run {run.id} on {run.surface})"


async def main(dsn: str) -> dict[str, object]:
    registry = compile_sources({"bots/clerk.md": BOT}, server_name="memory")
    assert isinstance(registry, Registry), registry
    clock = SystemClock()
    store = await Store.connect(dsn, min_size=1, max_size=4, clock=clock)
    surface = MemorySurface("desk")
    worker = Worker(store, lambda: registry, stand_in(clock), {surface.name: surface}, clock,
                    WorkerSettings(slots=1, poll_seconds=0.2), harness={"lookup": lookup}, worker_id="seam", status=STAND_IN)
    stop = asyncio.Event()
    try:
        await publish(store, registry)
        await store.workers.beat(worker.id, usable=True, mode="stand-in", providers=[])
        summoned = await surface.ask(store, registry, bot="clerk", who="ann", said="When do you open?",
                                     where="counter:1", script=SCRIPT)
        assert isinstance(summoned, Summoned), summoned
        running = asyncio.create_task(worker.run(stop))
        outcome = await surface.answer_for(summoned.run_id)
        stop.set()
        await asyncio.wait_for(running, 10)
        steps = await store.runs.steps(summoned.run_id)
    finally:
        await store.close()
    return {
        "run": summoned.run_id,
        "answer": outcome.text if isinstance(outcome, Answered) else None,
        "delivered_to": [run.surface for run, _ in surface.delivered],
        "working": surface.working_on,
        "steps": [step["kind"] for step in steps],
        "tool_result": next((s.get("content") for s in steps if s["kind"] == "tool_result"), None),
        "matrix_modules": sorted(m for m in sys.modules if m.split(".")[0] in ("appservice", "mautrix", "nio")),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
