"""Redactions that redact (issue 12, item 4), on a real PostgreSQL: an edit never overwrites the line it edits,
so redacting the edit gives back what it replaced (the latest edit still standing, else the line's own words);
a redacted line leaves what runs kept of it — the stored contexts of finished and unfinished runs, the `heard`
steps that brought it in, the prompt of the run it summoned — and the unfinished run it summoned stops."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.tables.lines import LineTables
from engine.content import Registry
from engine.core.messages import HeardStep, dump_step
from engine.core.prompt import said_since
from tests.db.test_context import (
    ALICE,
    BOB,
    ROOM,
    context_of,
    feed,
    fetcher,
    member,
    opened,
    redaction,
    said,
    say,
)
from tests.db.test_ingest import pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
_n = itertools.count(1)


@pytest.fixture
def ingest(db: TestStore, published: Registry) -> Dispatcher:
    return pipeline(db, published)


def edit(target: dict[str, Any], body: str, sender: str = ALICE) -> dict[str, Any]:
    """An edit of ``target``, stamped after every edit made before it (the spec's order for edits)."""
    n = next(_n)
    return {"event_id": f"$edit{n}", "room_id": ROOM, "sender": sender, "type": "m.room.message",
            "origin_server_ts": 1_800_000_000_000 + n,
            "content": {"msgtype": "m.text", "body": f"* {body}", "m.new_content": {"msgtype": "m.text", "body": body},
                        "m.relates_to": {"rel_type": "m.replace", "event_id": target["event_id"]}}}


async def now_reads(db: TestStore, line: dict[str, Any]) -> list[str]:
    """The main timeline as alice reads it now (the context a summons would get)."""
    rows = await db.of(LineTables).timeline(ROOM, until=None, viewer=ALICE, limit=50)
    return [r.said for r in reversed(rows) if r.membership is None]


async def test_redacting_an_edit_gives_back_what_it_replaced(ingest: Dispatcher, db: TestStore) -> None:
    original = say("the meeting is at 3")
    first, second = edit(original, "the meeting is at 4"), edit(original, "the meeting is at 4, door code 7731")
    await feed(ingest, db, [*opened(), original, first, second])
    assert await now_reads(db, original) == ["the meeting is at 4, door code 7731"]
    await feed(ingest, db, [redaction(second, ALICE)])
    assert await now_reads(db, original) == ["the meeting is at 4"]  # the latest edit still standing
    await feed(ingest, db, [redaction(first, ALICE)])
    assert await now_reads(db, original) == ["the meeting is at 3"]  # no edit left: its own first words
    asked = say("Helper, when is it?", BOB, ask=True)
    await feed(ingest, db, [member(BOB, "join", "Bob"), asked])
    assert "7731" not in " ".join(said(await context_of(db, asked["event_id"])))


async def test_an_edit_arriving_before_its_line_still_counts(ingest: Dispatcher, db: TestStore) -> None:
    original = say("teh plan")
    await feed(ingest, db, [*opened(), edit(original, "the plan")])
    await feed(ingest, db, [original])
    assert await now_reads(db, original) == ["the plan"]


async def test_an_edit_by_someone_else_is_no_edit(ingest: Dispatcher, db: TestStore) -> None:
    original = say("alice's words")
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob"), original, edit(original, "bob's words", BOB)])
    assert await now_reads(db, original) == ["alice's words"]


async def test_a_redacted_line_leaves_every_stored_context(ingest: Dispatcher, db: TestStore) -> None:
    secret = say("my password is hunter2")
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob"), secret])
    finished = say("Helper, what was that?", BOB, ask=True)
    await feed(ingest, db, [finished])
    await db.pool.execute("UPDATE agent_runs SET status = 'done'")
    working = say("Helper, and now?", ask=True)
    await feed(ingest, db, [working])
    for asked in (finished, working):
        assert "my password is hunter2" in said(await context_of(db, asked["event_id"]))

    await feed(ingest, db, [redaction(secret, ALICE)])
    for asked in (finished, working):  # finished or not, no run keeps the words
        context = await context_of(db, asked["event_id"])
        assert "hunter2" not in str(context)
        assert said(context)[-1] == asked["content"]["body"]
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE cancel_requested") == 0  # not theirs


async def test_a_redacted_line_leaves_the_run_it_joined_and_what_it_heard(ingest: Dispatcher, db: TestStore) -> None:
    first = say("Helper, which laptop?", ask=True)
    await feed(ingest, db, [*opened(), first])
    await db.pool.execute("UPDATE agent_runs SET status = 'running'")
    joined = say("Helper, my card ends 4242", ask=True)
    after = say("Helper, and a bag?", ask=True)
    await feed(ingest, db, [joined])
    await feed(ingest, db, [after])
    run_id = await db.pool.fetchval("SELECT id FROM agent_runs")
    context = await db.runs.context(run_id)
    heard_text, count = said_since(context, 0)  # what the worker records when it brings them in
    assert "4242" in heard_text and count == 2
    await db.pool.execute("INSERT INTO agent_steps (run_id, seq, kind, payload, worker) VALUES ($1, 1, 'heard', $2, 'w')",
                          run_id, dump_step(HeardStep(heard_text, count)))

    await feed(ingest, db, [redaction(joined, ALICE)])
    context = await db.runs.context(run_id)
    assert "4242" not in str(context)
    # Still two lines heard (the worker counts them), the taken-back one empty.
    assert [line["said"] for line in context["later"]] == ["", "Helper, and a bag?"]
    step = await db.pool.fetchval("SELECT payload->>'text' FROM agent_steps WHERE run_id = $1", run_id)
    assert "4242" not in step and step.endswith("Alice: \nAlice: Helper, and a bag?")
    assert await db.pool.fetchval("SELECT status FROM agent_runs WHERE id = $1", run_id) == "running"


async def test_redacting_the_asking_line_stops_its_run_and_blanks_its_prompt(ingest: Dispatcher,
                                                                              db: TestStore) -> None:
    asked = say("Helper, is 0612 345 678 a good number to give out?", ask=True)
    await feed(ingest, db, [*opened(), asked])
    await feed(ingest, db, [redaction(asked, ALICE)])
    run = await db.pool.fetchrow("SELECT prompt, context, cancel_requested FROM agent_runs")
    assert run["cancel_requested"] is True
    assert run["prompt"] == ""
    assert "0612" not in str(run["context"])


async def test_redacting_an_edit_rewords_what_runs_kept(ingest: Dispatcher, db: TestStore) -> None:
    original = say("lunch at noon")
    slip = edit(original, "lunch at noon, my flat is 12B")
    await feed(ingest, db, [*opened(), original, slip])
    asked = say("Helper, when is lunch?", ask=True)
    await feed(ingest, db, [asked])
    assert "lunch at noon, my flat is 12B" in said(await context_of(db, asked["event_id"]))
    await feed(ingest, db, [redaction(slip, ALICE)])
    kept = said(await context_of(db, asked["event_id"]))
    assert "12B" not in " ".join(kept)
    assert "lunch at noon" in kept
    assert await db.pool.fetchval("SELECT cancel_requested FROM agent_runs") is False  # its question stands


async def test_a_redaction_without_the_power_changes_no_run(ingest: Dispatcher, db: TestStore) -> None:
    line = say("alice's plan")
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob"), line])
    asked = say("Helper, thoughts?", ask=True)
    await feed(ingest, db, [asked])
    await feed(ingest, db, [redaction(line, BOB)])
    assert "alice's plan" in said(await context_of(db, asked["event_id"]))


async def test_redacting_the_edit_bundled_with_a_fetched_line_gives_back_its_words(db: TestStore,
                                                                                   published: Registry) -> None:
    """A thread from before the bot came is fetched with each line's latest edit bundled (unsigned.m.relations):
    the edit is kept as an edit, so redacting it later works as for one we heard."""
    root = say("Old question", event_id="$fetchedroot")
    reply = say("my pin is 1234", thread="$fetchedroot")
    slip = edit(reply, "my pin is 1234, and my 2FA seed is JBSWY3DP")
    reply["unsigned"] = {"m.relations": {"m.replace": slip}}
    ingest = pipeline(db, published, thread_fetch=fetcher([root, reply]))
    await feed(ingest, db, opened())
    asked = say("Helper, what's up?", ask=True, thread="$fetchedroot")
    await feed(ingest, db, [asked])
    assert "my pin is 1234, and my 2FA seed is JBSWY3DP" in said(await context_of(db, asked["event_id"]))
    await feed(ingest, db, [redaction(slip, ALICE)])
    kept = said(await context_of(db, asked["event_id"]))
    assert "JBSWY3DP" not in " ".join(kept) and "my pin is 1234" in kept
