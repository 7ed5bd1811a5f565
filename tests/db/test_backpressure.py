"""Backpressure, not collapse (issue 18): past ``limits.waiting_per_bot`` summonses waiting for one bot — queued
for a worker, or held and waiting for a provider's permit — a new one is refused in words ("busy, try again in
a minute"), through the real intake, on a real PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest

from engine.content import Registry
from engine.core.limits import Caps
from tests.db.test_ingest import HELPER, count, feed, message, pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db


def asking(n: int, sender: str, bot: str = HELPER) -> dict[str, Any]:
    return message(f"question {n}", sender=sender, mentions=[bot],
                   **{"m.relates_to": {"rel_type": "m.thread", "event_id": f"$root-{sender}-{n}"}})


async def test_past_the_depth_a_new_summons_is_refused_in_words(db: TestStore, published: Registry) -> None:
    await db.people.set_caps(Caps(waiting_per_bot=3))
    ingest = pipeline(db, published)
    # Three people's questions wait for Helper (no worker runs here).
    await feed(ingest, db, "t1", [asking(n, f"@p{n}:localhost") for n in range(3)])
    assert await count(db, "SELECT count(*) FROM agent_runs WHERE status = 'queued'") == 3
    late = asking(0, "@dora:localhost")
    await feed(ingest, db, "t2", [late])
    assert await count(db, "SELECT count(*) FROM agent_runs") == 3
    refusal = await db.pool.fetchrow("SELECT reason, detail FROM summon_refusals WHERE asked_by = '@dora:localhost'")
    assert (refusal["reason"], refusal["detail"]) == ("queue_full", "3 waiting for the bot")
    told = await db.pool.fetchrow("SELECT content FROM outbox WHERE txn_id = $1", f"summon.refused.{late['event_id']}")
    assert told is not None
    body = " ".join(told["content"]["body"].split())
    assert "Helper is busy right now" in body and "3 questions are already waiting" in body
    assert "try again in a minute" in body and told["content"]["m.mentions"] == {"user_ids": ["@dora:localhost"]}
    # Another bot's queue is its own.
    await feed(ingest, db, "t3", [asking(1, "@dora:localhost", "@bot_echo:localhost")])
    assert await count(db, "SELECT count(*) FROM agent_runs WHERE bot = 'echo'") == 1


async def test_a_run_waiting_for_a_providers_permit_counts_as_waiting(db: TestStore, published: Registry) -> None:
    await db.people.set_caps(Caps(waiting_per_bot=2))
    ingest = pipeline(db, published)
    await feed(ingest, db, "t1", [asking(n, f"@p{n}:localhost") for n in range(2)])
    # One is claimed and holds no slot in the queue any more: room for one more...
    claim = await db.runs.claim("w", 30)
    assert claim is not None
    assert await db.runs.waiting_for("helper") == 1
    # ...until it waits in line for a provider's permit.
    await db.providers.ask("openrouter", "w", claim.run.id, 100, lease_seconds=30, granted=False, look_within=20)
    assert await db.runs.waiting_for("helper") == 2
    await feed(ingest, db, "t2", [asking(0, "@erin:localhost")])
    assert await count(db, "SELECT count(*) FROM summon_refusals WHERE reason = 'queue_full'") == 1
    # A permit granted, the run no longer waits.
    await db.pool.execute("UPDATE provider_permits SET granted_at = now()")
    await feed(ingest, db, "t3", [asking(1, "@erin:localhost")])
    assert await count(db, "SELECT count(*) FROM agent_runs WHERE asked_by = '@erin:localhost'") == 1


async def test_the_default_depth_is_a_hundred_and_the_config_sets_it(db: TestStore) -> None:
    assert Caps().waiting_per_bot == 100
    await db.people.set_caps(Caps(waiting_per_bot=7))
    assert (await db.people.caps()).waiting_per_bot == 7
