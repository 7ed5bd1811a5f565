"""Personal data is said only where the person it is about alone reads it (SPEC §8; issue 12 §3, §7), on a real
PostgreSQL with the real worker: the Matrix surface says whether a room is private to a person (from the members
as stored), the worker offers a personal tool only to a run about the person who alone reads the answer, and an
OpenAPI tool's subject comes from the run row."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from appservice.kinds import KINDS
from appservice.matrix.surface import RoomFacts
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import SystemClock
from engine.content import Registry
from engine.content.files import compile_content
from engine.content.strings import Strings
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.store.runs import Run
from engine.tools.base import RunRef
from engine.tools.code import CodeTools
from engine.tools.openapi import OpenAPITools
from engine.tools.personal import make_about_me
from engine.tools.runner import UNKNOWN_TOOL, ToolRunner
from engine.tools.site import SiteTools
from tests.book import BOOK
from tests.db.runs import steps_of
from tests.db.test_tools import RecordingModel, call
from tests.db.test_worker import RecordingSurface
from tests.store import TestStore
from tests.support import STAND_IN
from tests.tools.shop_api import Shop, serve

pytestmark = pytest.mark.db
REPO = Path(__file__).resolve().parents[2]

ANN = "@ann:localhost"
BOB = "@bob:localhost"
SERVICE = "@summon:localhost"
CLERK_USER = "@bot_clerk:localhost"
DM = "!dm:localhost"
GROUP = "!group:localhost"
CLERK = """---
name: Clerk
tools: [about_me, search_site]
---
You are the clerk.
"""


async def room(db: TestStore, room_id: str, members: dict[str, str], *, visibility: str = "shared",
               created: bool = True, join_rule: str | None = "invite") -> None:
    """A room as the Matrix surface stores it: its creation, join rule, history visibility and members."""
    await db.of(RoomTables).ensure(room_id)
    if created:
        await db.of(RoomTables).set_create(room_id, {"room_version": "11"}, ANN, "11")
    if join_rule is not None:
        await db.of(RoomTables).set_join_rule(room_id, join_rule)
    await db.of(RoomTables).set_history_visibility(room_id, visibility)
    for user_id, membership in members.items():
        await db.of(RoomTables).set_member(room_id, user_id, membership, None)


def facts_reader() -> RoomFacts:
    return RoomFacts("localhost", service_user=SERVICE)


@pytest.mark.parametrize(("rule", "private"), [
    ("invite", True), ("private", True), ("public", False), ("knock", False), ("restricted", False),
    ("knock_restricted", False), (None, False),  # a join rule never seen: not sure, so not private
])
async def test_a_room_anybody_may_join_is_nobodys_alone(db: TestStore, rule: str | None, private: bool) -> None:
    await room(db, DM, {ANN: "join", CLERK_USER: "join"}, join_rule=rule)
    assert (await facts_reader().facts(db, DM, ANN)).private is private


@pytest.mark.parametrize(
    ("members", "visibility", "created", "private"),
    [
        ({ANN: "join", CLERK_USER: "join"}, "shared", True, True),                     # a DM with the bot
        ({ANN: "join", CLERK_USER: "join", "@bot_echo:localhost": "join", SERVICE: "join"}, "shared", True, True),
        ({ANN: "join", CLERK_USER: "join", BOB: "join"}, "shared", True, False),       # somebody else reads it
        ({ANN: "join", CLERK_USER: "join", BOB: "invite"}, "shared", True, False),     # …or will, on joining
        ({ANN: "join", CLERK_USER: "join", BOB: "leave"}, "shared", True, True),       # left: reads no more
        ({ANN: "join", CLERK_USER: "join", "@telegram_42:localhost": "join"}, "shared", True, False),  # a bridged person
        ({ANN: "join", CLERK_USER: "join"}, "world_readable", True, False),           # anyone may read it
        ({ANN: "join", CLERK_USER: "join"}, "shared", False, False),                  # its state never read
        ({ANN: "invite", CLERK_USER: "join"}, "shared", True, False),                 # not in it (yet)
    ],
    ids=["dm", "dm-with-our-users", "shared", "invited", "left", "bridged", "world-readable", "unknown", "not-joined"],
)
async def test_the_surface_says_whether_a_room_is_the_persons_alone(
        db: TestStore, members: dict[str, str], visibility: str, created: bool, private: bool) -> None:
    await room(db, DM, members, visibility=visibility, created=created)
    facts = await facts_reader().facts(db, DM, ANN)
    assert facts.private is private
    assert facts.user_id == ANN


async def test_the_service_user_counts_as_a_person_unless_the_surface_knows_it(db: TestStore) -> None:
    await room(db, DM, {ANN: "join", CLERK_USER: "join", SERVICE: "join"})
    assert (await facts_reader().facts(db, DM, ANN)).private
    assert not (await RoomFacts("localhost").facts(db, DM, ANN)).private  # unknown to it: a reader, so not private


@pytest.fixture
async def clerk(db: TestStore, tmp_path: Path) -> Registry:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "bots" / "clerk.md").write_text(CLERK)
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await room(db, DM, {ANN: "join", CLERK_USER: "join"})
    await room(db, GROUP, {ANN: "join", BOB: "join", CLERK_USER: "join"})
    return registry


async def a_run(db: TestStore, *, room_id: str, asked_by: str | None, subject: str | None,
                script: list[dict[str, Any]] | None = None) -> int:
    BOOK.say("what have I bought?", script)
    run_id = await db.runs.insert(
        bot="clerk", surface="rooms", place=room_id, thread=None, trigger_event=None, asked_by=asked_by,
        subject=subject, prompt="what have I bought?", context={"kind": "timeline", "lines": []},
        limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3,
    )
    assert run_id is not None
    return int(run_id)


async def row_of(db: TestStore, run_id: int) -> Run:
    row = await db.runs.get(run_id)
    assert row is not None
    return row


@pytest.mark.parametrize(
    ("where", "asked_by", "subject", "private"),
    [
        (DM, ANN, None, True),      # a mention in her DM: about her, read by her alone
        (DM, ANN, ANN, True),
        (DM, ANN, BOB, False),      # asked in her DM, but about somebody else
        (GROUP, ANN, None, False),  # the room reads it
    ],
)
async def test_the_worker_keeps_private_only_for_a_run_about_its_asker(
        db: TestStore, clerk: Registry, where: str, asked_by: str, subject: str | None, private: bool) -> None:
    runner = ToolRunner(lambda: clerk, {"rooms": facts_reader()}, db)  # type: ignore[dict-item]
    run_id = await a_run(db, room_id=where, asked_by=asked_by, subject=subject)
    facts = await runner.asker(await row_of(db, run_id))
    assert facts is not None and facts.private is private
    offer = runner.offer(RunRef(run_id, "clerk", "rooms", where), [], facts)
    assert ("about_me" in offer.names) is private


def clerk_worker(db: TestStore, registry: Registry, model: RecordingModel) -> Worker:
    def words() -> Strings:
        return registry.strings

    return Worker(db, lambda: registry, model, {"rooms": RecordingSurface()}, SystemClock(),
                  WorkerSettings(lease_seconds=30, poll_seconds=0.2),
                  tools={"about_me": make_about_me(db, words)}, worker_id="w", status=STAND_IN)


ASKS_ABOUT_ME = [call(1, "about_me"), {"text": "Here is what I know."}]


async def test_about_me_is_answered_in_a_dm(db: TestStore, clerk: Registry) -> None:
    model = RecordingModel()
    run_id = await a_run(db, room_id=DM, asked_by=ANN, subject=None, script=ASKS_ABOUT_ME)
    await clerk_worker(db, clerk, model).work_once()
    results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert not results[0]["is_error"]
    assert json.loads(results[0]["content"])["profile"]["user_id"] == ANN
    assert "about_me" in {t.name for t in model.requests[0].tools}
    assert (clerk.strings.get("tools", "private_elsewhere") or "?") not in model.requests[0].system


async def test_about_me_is_withheld_in_a_shared_room_and_the_bot_may_offer_a_dm(db: TestStore, clerk: Registry) -> None:
    model = RecordingModel()
    run_id = await a_run(db, room_id=GROUP, asked_by=ANN, subject=None, script=ASKS_ABOUT_ME)
    await clerk_worker(db, clerk, model).work_once()
    results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
    assert results[0] == {**results[0], "content": UNKNOWN_TOOL.format(name="about_me"), "is_error": True}
    assert "about_me" not in {t.name for t in model.requests[0].tools}
    elsewhere = clerk.strings.get("tools", "private_elsewhere")
    assert elsewhere and elsewhere in model.requests[0].system  # the kit's words: offer a direct message


async def test_a_member_joined_run_about_the_joiner_is_offered_nothing_personal(db: TestStore, clerk: Registry) -> None:
    """An event's run is about the joiner while everyone in the room reads its answer: nobody asked, so nothing
    personal — even where the joiner happens to be alone with the bot."""
    for where in (GROUP, DM):
        model = RecordingModel()
        run_id = await a_run(db, room_id=where, asked_by=None, subject=ANN, script=ASKS_ABOUT_ME)
        await clerk_worker(db, clerk, model).work_once()
        results = [s["payload"] for s in await steps_of(db, run_id) if s["kind"] == "tool_result"]
        assert results[0]["content"] == UNKNOWN_TOOL.format(name="about_me") and results[0]["is_error"]


# --- an OpenAPI tool's subject, resolved from the run (issue 12 §7) -------------------------------------------


@pytest.fixture
async def shop() -> AsyncIterator[Shop]:
    async with serve() as running:
        yield running


def orders_tool(shop: Shop, tmp_path: Path) -> Registry:
    spec = (REPO / "tests" / "tools" / "shop.yaml").read_text(encoding="utf-8")
    root = tmp_path / "site"
    (root / "tools").mkdir(parents=True)
    (root / "bots").mkdir()
    (root / "tools" / "shop.yaml").write_text(spec.replace("{port: {default: '1'}}", f"{{port: {{default: '{shop.port}'}}}}"))
    (root / "tools" / "orders.md").write_text("---\nopenapi: tools/shop.yaml\noperations: [ordersOf]\nsubject: user\n---\n")
    (root / "bots" / "clerk.md").write_text("---\nname: Clerk\ntools: [orders]\n---\nYou are the clerk.\n")
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    return registry


@pytest.mark.parametrize(
    ("asked_by", "subject", "whose"),
    [(ANN, None, ANN), (BOB, ANN, ANN), (BOB, None, BOB)],
    ids=["asker", "subject-not-asker", "other-asker"],
)
async def test_site_tools_fill_the_subject_from_the_run_row(
        db: TestStore, shop: Shop, tmp_path: Path, asked_by: str, subject: str | None, whose: str) -> None:
    registry = orders_tool(shop, tmp_path)
    await publish(db, registry)
    run_id = await a_run(db, room_id=DM, asked_by=asked_by, subject=subject)
    async with OpenAPITools(timeout=2.0) as api:
        site = SiteTools(api, CodeTools(tmp_path), db=db)
        out = json.loads(await site.call(registry.tools["orders"], "ordersOf", RunRef(run_id, "clerk", "rooms", DM), {}))
    assert out["user"] == whose
    assert len(shop.seen) == 1


async def test_a_desk_run_about_nobody_sends_nothing(db: TestStore, shop: Shop, tmp_path: Path) -> None:
    from engine.errors import ToolError

    registry = orders_tool(shop, tmp_path)
    await publish(db, registry)
    run_id = int(await db.runs.insert(  # type: ignore[arg-type]
        bot="clerk", surface="desk", place=None, thread=None, trigger_event=None, asked_by=BOB, subject=None,
        prompt="x", context={}, limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3))
    async with OpenAPITools(timeout=2.0) as api:
        site = SiteTools(api, CodeTools(tmp_path), db=db)
        with pytest.raises(ToolError, match="there is nobody to look this up for"):
            await site.call(registry.tools["orders"], "ordersOf", RunRef(run_id, "clerk", "desk"), {})
    assert shop.seen == []


async def test_a_builtins_own_file_is_published_as_the_builtins(db: TestStore, tmp_path: Path) -> None:
    root = tmp_path / "content"
    shutil.copytree(REPO / "content", root)
    (root / "tools").mkdir(exist_ok=True)
    (root / "tools" / "fetch.md").write_text("---\nfor: moderator\n---\nOnly moderators have pages read.\n")
    (root / "bots" / "clerk.md").write_text("---\nname: Clerk\ntools: [fetch]\n---\nYou are the clerk.\n")
    registry = compile_content(root, kinds=KINDS, server_name="localhost", fetch_spec=None)
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    row = await db.pool.fetchrow("SELECT kind, compiled FROM tools WHERE name = 'fetch'")
    assert row is not None and row["kind"] == "builtin" and row["compiled"]["for"] == "moderator"


async def test_a_finished_run_is_about_nobody(db: TestStore, clerk: Registry) -> None:
    run_id = await a_run(db, room_id=DM, asked_by=ANN, subject=None)
    about = await db.people.subject(run_id)
    assert about is not None and (about.user_id, about.contact_id, about.is_asker) == (ANN, None, True)
    await db.pool.execute("UPDATE agent_runs SET status = 'done' WHERE id = $1", run_id)
    assert await db.people.subject(run_id) is None
