"""Per-person ceilings on a real PostgreSQL: checked before the run exists, safe under concurrency."""

from __future__ import annotations

import asyncio

import pytest

from appservice.kinds import KINDS
from engine.content import AudienceFacts, Registry, compile_sources
from engine.run.publish import publish
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from tests.store import TestStore

pytestmark = pytest.mark.db

CAPPED = """---
name: Capped
limits:
  steps: 4
  spend: 0.01
  minutes: 1
  per:
    day: 0.05
    minute: 0.03
---
You are a bot with a small allowance.
"""


@pytest.fixture
async def capped(db: TestStore) -> Registry:
    registry = compile_sources({"bots/capped.md": CAPPED}, kinds=KINDS, server_name="localhost")
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    return registry


def summons(n: int, who: str = "@greedy:localhost") -> Summons:
    return Summons(bot="capped", surface="rooms", prompt="hi", asked_by=who,
                   facts=AudienceFacts(user_id=who, local_server="localhost", is_member=True),
                   place="!r:localhost", trigger_event=f"$t{who}{n}")


async def one(db: TestStore, registry: Registry, s: Summons) -> Summoned | Refused:
    async with db.transaction("test_summon") as tx:
        return await summon(tx, registry, s)


async def test_concurrent_summonses_never_take_the_ledger_over_the_ceiling(db: TestStore, capped: Registry) -> None:
    results = await asyncio.gather(*(one(db, capped, summons(n)) for n in range(200)))
    taken = [r for r in results if isinstance(r, Summoned)]
    refused = [r for r in results if isinstance(r, Refused)]
    # The tightest window is a minute at 0.03 with 0.01 reserved per run: exactly three get through.
    assert len(taken) == 3 and len(refused) == 197
    assert {r.reason for r in refused} == {"ceiling"}
    assert await db.pool.fetchval("SELECT sum(usd)::float8 FROM spend_ledger") <= 0.03 + 1e-9
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 3
    # The refusal says which window and when it frees up.
    breach = refused[0].breach
    assert breach is not None and breach.window == "minute" and breach.frees_at is not None


async def test_a_ceiling_is_per_person(db: TestStore, capped: Registry) -> None:
    for n in range(3):
        assert isinstance(await one(db, capped, summons(n)), Summoned)
    assert isinstance(await one(db, capped, summons(9)), Refused)
    assert isinstance(await one(db, capped, summons(0, who="@other:localhost")), Summoned)


async def test_a_finished_run_settles_its_reservation_to_what_it_cost(db: TestStore, capped: Registry) -> None:
    result = await one(db, capped, summons(0))
    assert isinstance(result, Summoned)
    await db.pool.execute(
        "INSERT INTO agent_steps (run_id, seq, kind, payload, cost_usd, worker) VALUES ($1, 1, 'model', '{}', 0.002, 'w')",
        result.run_id)
    await db.people.settle(result.run_id)
    row = await db.pool.fetchrow("SELECT usd::float8 AS usd, reserved FROM spend_ledger WHERE run_id = $1", result.run_id)
    assert (row["usd"], row["reserved"]) == (0.002, False)


async def test_a_person_over_the_ceiling_is_told_which_window_and_when_it_frees(db: TestStore) -> None:
    from engine.content.files import KIT_DIR, read_content
    from tests.db.test_ingest import feed, message, pipeline

    # The kit's strings carry the words.
    registry = compile_sources({"bots/capped.md": CAPPED}, kinds=KINDS, server_name="localhost", kit=read_content(KIT_DIR))
    assert isinstance(registry, Registry), registry
    await publish(db, registry)
    await db.workers.beat("test-worker", usable=True, mode="stand-in: no key", providers=[])
    ingest = pipeline(db, registry)
    # Four questions in four threads (in one thread, a second mention would join the live run instead).
    lines = [message(f"Capped, question {n}", mentions=["@bot_capped:localhost"],
                     **{"m.relates_to": {"rel_type": "m.thread", "event_id": f"$root{n}"}}) for n in range(4)]
    await feed(ingest, db, "t1", lines)
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 3
    told = await db.pool.fetchrow("SELECT sender, content FROM outbox WHERE txn_id = $1",
                                  f"summon.refused.{lines[3]['event_id']}")
    assert told is not None and told["sender"] == "@bot_capped:localhost"
    body = told["content"]["body"]
    assert "Capped" in body and "minute" in body and "UTC" in body
    assert told["content"]["m.relates_to"] == {"rel_type": "m.thread", "event_id": "$root3", "is_falling_back": False,
                                               "m.in_reply_to": {"event_id": lines[3]["event_id"]}}
