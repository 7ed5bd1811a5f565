"""What a run may use, on a real PostgreSQL with the real worker: the model is offered exactly the
offered set, a skill's body arrives only through open_skill, a skill's tools only after it was opened,
and a tool it was not offered is answered as one that does not exist."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from appservice.kinds import KINDS
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import SystemClock
from engine.content import Registry
from engine.content.files import compile_content
from engine.core.messages import ModelRequest, ModelStep
from engine.providers.base import Watch
from engine.providers.mock import MockModel, StandInModel
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.tools.base import BUILTIN_SPECS, RunRef
from engine.tools.runner import UNKNOWN_TOOL
from tests.book import BOOK, told
from tests.db.runs import insert_run, steps_of
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import STAND_IN

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]

CLERK = """---
name: Clerk
skills: [refunds-and-returns, for-mods]
---
You are the clerk.
"""
REFUNDS = """---
description: Open this before saying anything about money going back.
tools: [search_site]
---
REFUND POLICY BODY: never promise a refund.
"""
FOR_MODS = """---
description: How moderators close a thread.
for: moderator
---
MODS BODY.
"""


class RecordingModel(StandInModel):
    """The stand-in with the tests' book, remembering every request it was sent."""

    def __init__(self) -> None:
        clock = SystemClock()
        super().__init__(BOOK, MockModel(clock), clock)
        self.requests: list[ModelRequest] = []

    async def answer(self, request: ModelRequest, *, turn: int, allowance: float | None = None,
                     run_id: int | None = None, watch: Watch | None = None) -> list[ModelStep]:
        self.requests.append(request)
        return await super().answer(request, turn=turn, allowance=allowance, run_id=run_id, watch=watch)


@pytest.fixture
async def clerk(db: TestStore, tmp_path: Path) -> Registry:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "clerk.md").write_text(CLERK)
    (root / "skills" / "refunds-and-returns.md").write_text(REFUNDS)
    (root / "skills" / "for-mods.md").write_text(FOR_MODS)
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    return registry


def worker(db: TestStore, registry: Registry, model: StandInModel, tools: dict[str, Any]) -> Worker:
    clock = SystemClock()
    builtins = {name: fn for name, fn in tools.items() if name in BUILTIN_SPECS}
    harness = {name: fn for name, fn in tools.items() if name not in BUILTIN_SPECS}
    return Worker(db, lambda: registry, model, {"rooms": RecordingSurface()}, clock,
                  WorkerSettings(lease_seconds=30, poll_seconds=0.2), tools=builtins, harness=harness,
                  worker_id="w", status=STAND_IN)


def call(n: int, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"c{n}", "name": tool, "arguments": arguments}]}


async def test_skills_are_lines_until_opened_and_their_tools_come_after(db: TestStore, clerk: Registry) -> None:
    searched: list[tuple[RunRef, dict[str, Any]]] = []

    async def search_site(run: RunRef, arguments: dict[str, Any]) -> str:
        searched.append((run, arguments))
        return "Refunds take 14 days."

    model = RecordingModel()
    run_id = await insert_run(db, bot="clerk", script=[
        call(1, "search_site", query="refunds"),           # not offered yet: the skill is not open
        call(2, "open_skill", name="refunds-and-returns"),
        call(3, "search_site", query="refunds"),           # offered now
        {"text": "Refunds take 14 days."},
    ])
    await worker(db, clerk, model, {"search_site": search_site}).work_once()

    steps = await steps_of(db, run_id)
    results = [s["payload"] for s in steps if s["kind"] == "tool_result"]
    assert results[0]["content"] == UNKNOWN_TOOL.format(name="search_site") and results[0]["is_error"]
    assert results[1]["content"].startswith("REFUND POLICY BODY") and not results[1]["is_error"]
    assert results[2]["content"] == "Refunds take 14 days." and not results[2]["is_error"]
    assert len(searched) == 1
    run, arguments = searched[0]
    assert arguments == {"query": "refunds"}
    assert run.id == run_id and run.bot == "clerk"
    assert not hasattr(run, "asked_by") and not hasattr(run, "subject")  # a tool is given the run, no person

    first, _, third, _ = model.requests
    assert [t.name for t in first.tools] == ["open_skill"]
    assert {t.name for t in third.tools} == {"open_skill", "search_site"}
    # The skills line is in the prompt; the body is not (the asker is no moderator: for-mods is withheld).
    assert "refunds-and-returns: Open this before saying anything about money going back." in first.system
    assert "REFUND POLICY BODY" not in first.system
    assert "for-mods" not in first.system


async def test_a_withheld_skill_cannot_be_opened(db: TestStore, clerk: Registry) -> None:
    model = RecordingModel()
    run_id = await insert_run(db, bot="clerk", script=[call(1, "open_skill", name="for-mods"), {"text": "ok"}])
    await worker(db, clerk, model, {}).work_once()
    results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert results[0]["is_error"] and "MODS BODY" not in results[0]["content"]
    assert results[0]["content"] == "There is no skill named 'for-mods'."


async def test_a_moderator_is_offered_the_moderators_skill(db: TestStore, clerk: Registry) -> None:
    room = "!modroom:localhost"
    await db.of(RoomTables).ensure(room)
    await db.of(RoomTables).set_power_levels(room, {"users": {"@alice:localhost": 100}})
    await db.of(RoomTables).set_member(room, "@alice:localhost", "join", "Alice")
    model = RecordingModel()
    run_id = await insert_run(db, bot="clerk", room_id=room, script=[call(1, "open_skill", name="for-mods"),
                                                                     {"text": "ok"}])
    await worker(db, clerk, model, {}).work_once()
    assert "for-mods: How moderators close a thread." in model.requests[0].system
    results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert results[0]["content"].startswith("MODS BODY") and not results[0]["is_error"]


async def test_a_run_nobody_asked_for_gets_nothing_with_an_audience(db: TestStore, clerk: Registry) -> None:
    room = "!modroom2:localhost"
    await db.of(RoomTables).ensure(room)
    model = RecordingModel()
    run_id = await db.runs.insert(
        bot="clerk", surface="rooms", place=room, thread=None, trigger_event=None, asked_by=None,
        subject=None, prompt=told("good morning", [{"text": "morning"}]), context={"kind": "event"},
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3,
    )
    await worker(db, clerk, model, {}).work_once()
    assert run_id is not None
    assert "refunds-and-returns" in model.requests[0].system
    assert "for-mods" not in model.requests[0].system


async def test_a_tool_that_fails_with_words_for_the_model_is_an_error_result(db: TestStore, clerk: Registry) -> None:
    from engine.errors import ToolError

    async def search_site(run: RunRef, arguments: dict[str, Any]) -> str:
        raise ToolError("Nothing on this site matches 'zebra'.")

    run_id = await insert_run(db, bot="clerk", script=[
        call(1, "open_skill", name="refunds-and-returns"), call(2, "search_site", query="zebra"), {"text": "no"},
    ])
    await worker(db, clerk, RecordingModel(), {"search_site": search_site}).work_once()
    results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert results[1] == {**results[1], "content": "Nothing on this site matches 'zebra'.", "is_error": True}


async def test_a_skills_tool_named_in_the_same_turn_as_opening_it_was_not_offered(db: TestStore, clerk: Registry) -> None:
    searched: list[dict[str, Any]] = []

    async def search_site(run: RunRef, arguments: dict[str, Any]) -> str:
        searched.append(arguments)
        return "found"

    run_id = await insert_run(db, bot="clerk", script=[
        {"tool_calls": [{"id": "c1", "name": "open_skill", "arguments": {"name": "refunds-and-returns"}},
                        {"id": "c2", "name": "search_site", "arguments": {"query": "refunds"}}]},
        {"text": "ok"},
    ])
    await worker(db, clerk, RecordingModel(), {"search_site": search_site}).work_once()
    results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert not results[0]["is_error"]
    assert results[1]["is_error"] and results[1]["content"] == UNKNOWN_TOOL.format(name="search_site")
    assert searched == []


@pytest.mark.parametrize(("name", "asked"), [
    ("summarise", "Read what was said in this room over the last 2 days and write a short catch-up"),
    ("withdrawn", "!withdrawn since=2d"),  # a command gone since: it asks what the person said
])
async def test_the_worker_resolves_a_commands_prompt_from_the_name_and_the_arguments(
    db: TestStore, published: Registry, name: str, asked: str,
) -> None:
    model = RecordingModel()
    context = {"kind": "timeline", "lines": [{"name": "alice", "said": f"!{name} since=2d"}],
               "command": {"name": name, "args": {"since": "2d", "length": "short"}}}
    run_id = await db.runs.insert(
        bot="helper", surface="rooms", place="!room:localhost", thread=None, trigger_event=None,
        asked_by="@alice:localhost", subject=None, prompt=f"!{name} since=2d", context=context,
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3)
    await worker(db, published, model, {}).work_once()
    assert run_id is not None and len(model.requests) == 1
    opening = model.requests[0].messages[0].text
    assert asked in opening
    assert opening.startswith(f"alice: !{name} since=2d")
