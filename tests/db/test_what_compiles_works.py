"""What compiles must work (issue 12 §14) and what a failed run says in a room (§8), on a real PostgreSQL with
the Matrix surface's real intake: ``hears:`` decides whether naming a bot summons it, and the ending a room
reads carries the provider's sentence with its links, addresses, ids and keys taken out — while the run keeps
the whole sentence."""

from __future__ import annotations

import pytest

from appservice.kinds import KINDS
from appservice.matrix.claimers.commands import help_text
from appservice.matrix.power import standing
from appservice.matrix.surface import MatrixSurface
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import read_kit
from engine.core.redact import MARK
from engine.run.publish import publish
from engine.surface import Ended, RunInfo
from engine.tasks import TaskGroup
from tests.db.test_ingest import ROOM, feed, message, pipeline
from tests.db.test_worker import RecordingSurface, make_worker, run_row
from tests.store import TestStore

pytestmark = pytest.mark.db

SCHEDULED = "@bot_digest:localhost"
ASKED = "@bot_helper:localhost"
SOURCES = {
    # Wakes on its schedule only: naming it in a room is no summons.
    "bots/digest.md": "---\nname: Digest\nhears:\n  - schedule: {every: day, at: '08:00'}\n    in: '!room:localhost'\n"
                      "    ask: The news.\n---\nYou send the news.\n",
    # No hears: at all — the default, a mention.
    "bots/helper.md": "---\nname: Helper\n---\nYou help.\n",
    # Says so outright, beside an event.
    "bots/greeter.md": "---\nname: Greeter\nhears:\n  - mention\n  - event: member.joined\n    ask: Welcome them.\n"
                       "---\nYou greet.\n",
}


@pytest.fixture
async def bots(db: TestStore) -> Registry:
    registry = compile_sources(SOURCES, kinds=KINDS, server_name="localhost", kit=read_kit())
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    return registry


async def asked(db: TestStore) -> list[str]:
    return [r["bot"] for r in await db.pool.fetch("SELECT bot FROM agent_runs ORDER BY id")]


async def test_a_bot_that_does_not_hear_mentions_is_not_summoned_by_one(db: TestStore, bots: Registry) -> None:
    ingest = pipeline(db, bots)
    await feed(ingest, db, "t1", [message("Digest, what is new?", mentions=[SCHEDULED])])
    assert await asked(db) == []
    assert not bots.bots["digest"].hears_mentions


def test_help_names_only_the_bots_a_mention_summons(bots: Registry) -> None:
    """"Bots you can ask here (mention one)" lists no bot a mention would not summon."""
    facts = standing("@alice:localhost", {}, None, "10").facts("localhost", is_member=True)
    here = {"@alice:localhost": "Alice", SCHEDULED: "Digest", ASKED: "Helper"}
    text = help_text(bots, facts, here, usable=True)
    assert text is not None and "Helper" in text and "Digest" not in text


async def test_the_default_hears_mentions(db: TestStore, bots: Registry) -> None:
    assert bots.bots["helper"].hears == ("mention",) and bots.bots["helper"].hears_mentions
    assert bots.bots["greeter"].hears_mentions
    ingest = pipeline(db, bots)
    await feed(ingest, db, "t1", [message("Helper, hi", mentions=[ASKED]),
                                  message("Greeter, hi", mentions=["@bot_greeter:localhost"])])
    assert await asked(db) == ["helper", "greeter"]


async def test_the_first_named_bot_that_hears_mentions_is_summoned(db: TestStore, bots: Registry) -> None:
    ingest = pipeline(db, bots)
    await feed(ingest, db, "t1", [message("Digest and Helper: which one answers?", mentions=[SCHEDULED, ASKED])])
    assert await asked(db) == ["helper"]


# --- a failed run's ending, as the room reads it (issue 12 §8) ------------------------------------------------

LEAKY = ("Incorrect API key provided: sk-proj-abc12****xyz9 (organization org-Q1w2E3r4T5y6U7i8) at "
         "https://gateway.corp.internal:8443/v1/chat/completions from 10.20.30.40. Check your key.")


async def test_the_room_hears_the_providers_sentence_redacted_and_the_run_keeps_it_whole(
        db: TestStore, published: Registry) -> None:
    """The real worker fails the run with the provider's words (kept whole on the row, for ``summon runs``); the
    Matrix surface queues the ending in the outbox with the asker's copy of the sentence redacted."""
    from tests.db.runs import insert_run

    recording = RecordingSurface()
    run_id = await insert_run(db, script=[{"error": LEAKY, "error_class": "provider"}])
    await make_worker(db, published, recording, worker_id="w").work_once()
    assert (await run_row(db, run_id))["reason"] == LEAKY
    assert recording.delivered == [(run_id, Ended("failed", LEAKY))]

    await db.of(RoomTables).ensure(ROOM)
    surface = MatrixSurface(db, None, lambda: published, TaskGroup("test"), SystemClock(),  # type: ignore[arg-type]
                            server_name="localhost")
    run = RunInfo(id=run_id, bot="helper", surface="rooms", place=ROOM, thread=None, trigger_event="$ask",
                  asked_by="@alice:localhost")
    async with db.transaction("finish") as tx:
        await surface.deliver(tx, run, Ended("failed", LEAKY))
    content = await db.pool.fetchval("SELECT content FROM outbox WHERE txn_id = $1", f"summon.run{run_id}.ending")
    body = content["body"]
    assert published.bots["helper"].ending("failed") in body  # type: ignore[operator]
    assert body.endswith(f"Incorrect API key provided: {MARK} (organization {MARK}) at {MARK} from {MARK}."
                         " Check your key.")
    for secret in ("sk-proj", "org-Q1w2", "corp.internal", "8443", "10.20.30.40", "https://"):
        assert secret not in body and secret not in content.get("formatted_body", "")
    assert (await run_row(db, run_id))["reason"] == LEAKY  # what was said changed nothing stored
