"""The seam, proven: a surface the engine has never heard of — the ``counter``, neither rooms, desk, voice nor
members — registers itself here, outside ``engine/``, with one built-in tool (``opening_hours``) and one
string section (``### counter``) of its own; a bot on it is compiled, summoned, claimed, stepped (the
tool, then the model's answer) and its answer delivered, signed with the section's words — on a real
PostgreSQL, in a process of its own that never imports the service (``appservice``), mautrix or nio.

Run as ``python -m tests.surfaces.seam <dsn>``: it prints one JSON object (what was delivered, the run's
steps, and which service or Matrix modules were imported) for ``tests/db/test_surface_seam.py`` to check.
docs/adding-a-surface.md walks it.
"""

from __future__ import annotations

import asyncio
import json
import sys

from engine.clock import SystemClock
from engine.content import Kind, Kinds, Registry, compile_sources
from engine.core.messages import ToolSpec
from engine.run.publish import publish
from engine.run.summon import Summoned
from engine.run.worker import Worker, WorkerSettings
from engine.store import Store, Tx
from engine.surface import Answered, Outcome, RunInfo
from engine.tools.base import RunRef
from tests.book import stand_in
from tests.support import STAND_IN
from tests.surfaces.memory import MemorySurface

# --- what the counter brings: registered at this composition root, never in engine/ -------------------------

OPENING_HOURS = ToolSpec(
    "opening_hours",
    "When the counter is open on a given day. Ask it whenever somebody asks when they can come by.",
    {"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"], "additionalProperties": False},
)
COUNTER = Kind("counter", tools=(OPENING_HOURS,), strings={"counter": {"signed": ("clerk",)}})
KINDS = Kinds((COUNTER,))


async def opening_hours(run: RunRef, arguments: dict[str, object]) -> str:
    return f"{arguments.get('what')}: 09:00-17:00 (run {run.id} on {run.surface})"


class Counter(MemorySurface):
    """The in-memory surface, signing each answer with its own section's words (``### counter`` ``signed``)."""

    def __init__(self, registry: Registry) -> None:
        super().__init__("counter")
        self.registry = registry

    async def deliver(self, tx: Tx, run: RunInfo, outcome: Outcome) -> None:
        signed = self.registry.strings.get("counter", "signed") or ""
        if isinstance(outcome, Answered):
            outcome = Answered(f"{outcome.text}\n{signed.format(clerk=run.bot)}")
        await super().deliver(tx, run, outcome)


CONTENT = {
    "bots/clerk.md": "---\nname: Clerk\nsurfaces: [counter]\ntools: [opening_hours]\n---\n"
                     "You answer questions at the counter.\n",
    "strings.md": "## bots\n### counter\n- signed: — {clerk}, at the counter\n",
}
SCRIPT = [
    {"tool_calls": [{"id": "c1", "name": "opening_hours", "arguments": {"what": "hours"}}]},
    {"text": "We open at nine."},
]


async def main(dsn: str) -> dict[str, object]:
    registry = compile_sources(CONTENT, kinds=KINDS, server_name="memory")
    assert isinstance(registry, Registry), registry
    clock = SystemClock()
    store = await Store.connect(dsn, min_size=1, max_size=4, clock=clock)
    surface = Counter(registry)
    worker = Worker(store, lambda: registry, stand_in(clock), {surface.name: surface}, clock,
                    WorkerSettings(slots=1, poll_seconds=0.2), tools={"opening_hours": opening_hours},
                    surface_tools=KINDS.tools, worker_id="seam", status=STAND_IN)
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
        # The same bot on a surface that did not bring the tool: compiled, but never offered it.
        "refused_elsewhere": _elsewhere(),
    }


def _elsewhere() -> list[str]:
    """A bot naming ``opening_hours`` on a deployment whose surfaces do not bring it: refused by name."""
    refused = compile_sources({"bots/clerk.md": CONTENT["bots/clerk.md"].replace("counter", "kiosk")},
                              kinds=Kinds((Kind("kiosk"),)), server_name="memory")
    return [str(error) for error in refused] if isinstance(refused, list) else []


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
