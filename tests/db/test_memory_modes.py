"""What a run's prompt carries for each ``memory:`` (SPEC §11), on a real PostgreSQL with the real worker: none
(the question alone), thread (the conversation), person (and what this subject asked the bot before, oldest
first — the subject's, never the asker's; from a DM only where the person alone reads the answer)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from appservice.kinds import KINDS
from appservice.matrix.surface import RoomFacts
from engine.clock import SystemClock
from engine.content import Registry
from engine.content.audience import AudienceFacts
from engine.content.files import compile_content
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.store import Families
from tests.book import BOOK
from tests.db.test_said_in_private import room
from tests.db.test_tools import RecordingModel
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import STAND_IN

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]

ANN = "@ann:localhost"
BOB = "@bob:localhost"
STAFF = "@sam:localhost"
SERVICE = "@summon:localhost"
DM = "!dm:localhost"
GROUP = "!group:localhost"
ELSEWHERE = "!elsewhere:localhost"
THREAD_LINES = [{"name": "ann", "sender": ANN, "said": "the thread so far"},
                {"name": "ann", "sender": ANN, "said": "what was my dog called?"}]


def bot_file(memory: str) -> str:
    return f"---\nname: Rememberer\nsurfaces: [rooms, desk]\nmemory: {memory}\nanswers: directly\n---\nYou remember.\n"


async def registry_with(db: TestStore, tmp_path: Path, memory: str) -> Registry:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "rememberer.md").write_text(bot_file(memory))
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: chosen", providers=[])
    return registry


class DeskFacts(RecordingSurface):
    """The desk as the worker sees it: a contact's own conversation is read by them alone (the desk's rule)."""

    name = "desk"

    async def facts(self, db: Families, room_id: str | None, user_id: str | None, *,
                    site_classes: frozenset[str] = frozenset()) -> AudienceFacts:
        return AudienceFacts(user_id=user_id, local_server="localhost", private=(user_id or "").startswith("contact:"))


async def run_in(db: TestStore, *, room_id: str, asked_by: str | None, subject: str | None, prompt: str,
                 surface: str = "rooms", thread_root: str | None = None, context: dict[str, Any] | None = None,
                 answer: str | None = None) -> int:
    """A run of the rememberer; with ``answer``, one already answered (what the person asked before)."""
    BOOK.say(prompt, [{"text": "noted"}])
    run_id = await db.runs.insert(
        bot="rememberer", surface=surface, place=room_id, thread=thread_root, trigger_event=None,
        asked_by=asked_by, subject=subject, prompt=prompt,
        context=context if context is not None else {"kind": "timeline", "header": "What was said:", "lines": []},
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3,
    )
    assert run_id is not None
    if answer is not None:
        await db.pool.execute("UPDATE agent_runs SET status = 'done', answer = $2, finished_at = now() WHERE id = $1",
                              run_id, answer)
    return int(run_id)


async def opening_of(db: TestStore, registry: Registry, run_id: int, surface: RecordingSurface | None = None) -> str:
    """The first message the model was sent for ``run_id``."""
    model = RecordingModel()
    surface = surface or RecordingSurface()
    surface.room_facts = RoomFacts("localhost", service_user=SERVICE)
    clock = SystemClock()
    worker = Worker(db, lambda: registry, model, {surface.name: surface}, clock,
                    WorkerSettings(lease_seconds=30, poll_seconds=0.2), worker_id="memory-test", status=STAND_IN)
    assert await worker.work_once()
    assert model.requests, "the model was never asked"
    first = model.requests[0].messages[0]
    assert first.role == "user"
    return first.text


@pytest.fixture
async def history(db: TestStore) -> dict[str, int]:
    """Ann asked the bot twice before in her DM (oldest first), once in the group; Bob once in the group."""
    await room(db, DM, {ANN: "join", "@bot_rememberer:localhost": "join"})
    await room(db, GROUP, {ANN: "join", BOB: "join", "@bot_rememberer:localhost": "join"})
    await room(db, ELSEWHERE, {ANN: "join", "@bot_rememberer:localhost": "join"})
    return {}


async def asked_before(db: TestStore) -> None:
    await run_in(db, room_id=ELSEWHERE, asked_by=ANN, subject=ANN, prompt="my dog is called Biscuit",
                 answer="What a good name.")
    await run_in(db, room_id=ELSEWHERE, asked_by=ANN, subject=ANN, prompt="Biscuit is a beagle",
                 answer="Beagles are lovely.")
    await run_in(db, room_id=GROUP, asked_by=ANN, subject=ANN, prompt="I live in Lyon", answer="Nice city.")
    await run_in(db, room_id=GROUP, asked_by=BOB, subject=BOB, prompt="bob's secret plan", answer="Noted, Bob.")


async def test_none_carries_the_question_and_nothing_else(db: TestStore, tmp_path: Path, history: Any) -> None:
    registry = await registry_with(db, tmp_path, "none")
    await asked_before(db)
    run_id = await run_in(db, room_id=DM, asked_by=ANN, subject=ANN, prompt="what was my dog called?",
                          context={"kind": "timeline", "header": "What was said:", "lines": THREAD_LINES[:1]})
    assert await opening_of(db, registry, run_id) == "what was my dog called?"


async def test_thread_carries_the_conversation_and_nothing_from_before(
        db: TestStore, tmp_path: Path, history: Any) -> None:
    registry = await registry_with(db, tmp_path, "thread")
    await asked_before(db)
    run_id = await run_in(db, room_id=DM, asked_by=ANN, subject=ANN, prompt="what was my dog called?",
                          context={"kind": "timeline", "header": "What was said:", "lines": THREAD_LINES})
    text = await opening_of(db, registry, run_id)
    assert text == "What was said:\n\nann: the thread so far\nann: what was my dog called?"
    assert "Biscuit" not in text


async def test_person_carries_what_the_subject_asked_before_oldest_first(
        db: TestStore, tmp_path: Path, history: Any) -> None:
    registry = await registry_with(db, tmp_path, "person")
    await asked_before(db)
    run_id = await run_in(db, room_id=DM, asked_by=ANN, subject=ANN, prompt="what was my dog called?",
                          context={"kind": "timeline", "header": "What was said:", "lines": THREAD_LINES})
    text = await opening_of(db, registry, run_id)
    earlier, live = text.split("\n\nWhat was said:\n\n")
    lines = earlier.splitlines()
    assert lines[0] == "What they asked you before, in other conversations, oldest first:"
    assert [line.split(": ", 1)[1] for line in lines[1::2]] == [
        "my dog is called Biscuit", "Biscuit is a beagle", "I live in Lyon"]
    assert lines[2].strip() == "you answered: What a good name."
    assert "bob" not in text.lower()  # another person's history is never carried
    assert live == "ann: the thread so far\nann: what was my dog called?"


async def test_person_in_a_shared_room_carries_only_what_they_asked_there(
        db: TestStore, tmp_path: Path, history: Any) -> None:
    registry = await registry_with(db, tmp_path, "person")
    await asked_before(db)
    run_id = await run_in(db, room_id=GROUP, asked_by=ANN, subject=ANN, prompt="where do I live?",
                          thread_root="$t", context={"kind": "thread", "lines": []})
    text = await opening_of(db, registry, run_id)
    assert "I live in Lyon" in text
    assert "Biscuit" not in text  # said in a room only she reads: not repeated where Bob reads it


async def test_person_is_the_subject_never_the_asker(db: TestStore, tmp_path: Path, history: Any) -> None:
    """A desk run asked by a staff member about a customer carries the customer's history, not the staff's."""
    registry = await registry_with(db, tmp_path, "person")
    customer = "contact:41"
    await run_in(db, room_id="desk:1", surface="desk", asked_by=None, subject=customer,
                 prompt="my order 77 never came", answer="I am sorry; I have raised it.")
    await run_in(db, room_id="desk:2", surface="desk", asked_by=None, subject="contact:42",
                 prompt="another customer's refund", answer="Refunded.")
    await run_in(db, room_id=ELSEWHERE, asked_by=STAFF, subject=STAFF, prompt="the staff member's own question",
                 answer="Answered.")
    run_id = await run_in(db, room_id="desk:3", surface="desk", asked_by=STAFF, subject=customer,
                          prompt="did my order arrive?", context={"kind": "desk", "lines": []})
    text = await opening_of(db, registry, run_id, DeskFacts())
    assert "my order 77 never came" in text
    assert "another customer's refund" not in text
    assert "the staff member's own question" not in text


async def test_person_history_is_bounded_by_the_context_budget(db: TestStore, tmp_path: Path, history: Any) -> None:
    registry = await registry_with(db, tmp_path, "person")
    for n in range(40):
        await run_in(db, room_id=ELSEWHERE, asked_by=ANN, subject=ANN, prompt=f"question {n} " + "x" * 700,
                     answer="y" * 700)
    run_id = await run_in(db, room_id=DM, asked_by=ANN, subject=ANN, prompt="and now?")
    text = await opening_of(db, registry, run_id)
    assert "question 39 " in text and "question 0 " not in text  # the newest kept
    assert len(text) < 6000 * 4 + 200  # within the context's budget (about four characters a token)
