"""Strangers do not spend the operator's money, and one person's flood does not starve everyone (issue 12,
item 2), on a real PostgreSQL through the real intake and the real summons: whose invites are taken, the
shipped bots' ceilings, at most N live runs a person, the deployment's daily cap, a fair claim."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from appservice.matrix.inbound.followups import Decline, Join
from engine.content import AudienceFacts, Registry
from engine.core.limits import Caps
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from tests.db.test_ingest import HELPER, ROOM, count, feed, message, pipeline, state
from tests.store import TestStore

pytestmark = pytest.mark.db


def invite(user: str, *, by: str) -> dict[str, Any]:
    return state("m.room.member", user, {"membership": "invite"}, sender=by)


async def test_invites_are_taken_from_our_own_server_only_by_default(db: TestStore, published: Registry) -> None:
    local = pipeline(db, published)
    assert await feed(local, db, "t1", [invite(HELPER, by="@alice:localhost")]) == [Join(ROOM, HELPER)]
    assert await feed(local, db, "t2", [invite(HELPER, by="@mallory:elsewhere.example")]) == [
        Decline(ROOM, HELPER, "not_local")]
    # The service user too: a stranger's room admin could otherwise `!bots add` every bot in.
    assert await feed(local, db, "t3", [invite("@summon:localhost", by="@mallory:elsewhere.example")]) == [
        Decline(ROOM, "@summon:localhost", "not_local")]


async def test_invites_from_any_server_or_from_the_servers_listed(db: TestStore, published: Registry) -> None:
    anyone = pipeline(db, published, invites="any")
    assert await feed(anyone, db, "t1", [invite(HELPER, by="@mallory:elsewhere.example")]) == [Join(ROOM, HELPER)]
    listed = pipeline(db, published, invites=("partner.example",))
    assert await feed(listed, db, "t2", [invite(HELPER, by="@pat:partner.example")]) == [Join(ROOM, HELPER)]
    assert await feed(listed, db, "t3", [invite(HELPER, by="@alice:localhost")]) == [
        Decline(ROOM, HELPER, "not_listed")]
    # One of ours inviting (`!bots add` by the service user) was itself let in under the policy.
    assert await feed(listed, db, "t4", [invite(HELPER, by="@summon:localhost")]) == [Join(ROOM, HELPER)]


def test_every_shipped_bot_carries_per_person_ceilings(registry: Registry) -> None:
    assert registry.bots
    for bot in registry.bots.values():
        assert bot.limits.per, f"{bot.slug} ships with no limits.per: anyone it serves may spend without bound"
        assert all(usd > 0 for usd in bot.limits.per.values())


def threaded(n: int, sender: str) -> dict[str, Any]:
    """A mention in a thread of its own (in one thread, a second mention joins the live run instead)."""
    return message(f"Helper, question {n}", sender=sender, mentions=[HELPER],
                   **{"m.relates_to": {"rel_type": "m.thread", "event_id": f"$root-{sender}-{n}"}})


async def test_a_person_has_at_most_three_live_runs_and_is_told_why_once_a_minute(
    db: TestStore, published: Registry,
) -> None:
    ingest = pipeline(db, published)
    lines = [threaded(n, "@alice:localhost") for n in range(5)]
    await feed(ingest, db, "t1", lines)
    assert await count(db, "SELECT count(*) FROM agent_runs WHERE asked_by = '@alice:localhost'") == 3
    reasons = [r["reason"] for r in await db.pool.fetch("SELECT reason FROM summon_refusals ORDER BY id")]
    assert reasons == ["too_many", "too_many"]
    told = await db.pool.fetch("SELECT txn_id, content FROM outbox WHERE txn_id LIKE 'summon.refused.%'")
    # Told once, on the first refused line; the next within the minute is refused without a word.
    assert [t["txn_id"] for t in told] == [f"summon.refused.{lines[3]['event_id']}"]
    assert "3 questions waiting" in told[0]["content"]["body"] and "Helper" in told[0]["content"]["body"]
    # Somebody else is not held up by it.
    await feed(ingest, db, "t2", [threaded(0, "@bob:localhost")])
    assert await count(db, "SELECT count(*) FROM agent_runs WHERE asked_by = '@bob:localhost'") == 1
    # One of Alice's runs ending frees a place.
    await db.pool.execute("UPDATE agent_runs SET status = 'done' WHERE id = (SELECT min(id) FROM agent_runs)")
    await feed(ingest, db, "t3", [threaded(9, "@alice:localhost")])
    assert await count(db, "SELECT count(*) FROM agent_runs WHERE asked_by = '@alice:localhost'") == 4


def summons(who: str, n: int, bot: str = "helper") -> Summons:
    return Summons(bot=bot, surface="rooms", prompt="hi", asked_by=who,
                   facts=AudienceFacts(user_id=who, local_server="localhost", is_member=True),
                   place="!r:localhost", trigger_event=f"$t-{who}-{n}")


async def one(db: TestStore, registry: Registry, s: Summons) -> Summoned | Refused:
    async with db.transaction("test_summon") as tx:
        return await summon(tx, registry, s)


async def test_the_claim_serves_everyones_first_before_anyones_second(db: TestStore, published: Registry) -> None:
    await db.people.set_caps(Caps(live_runs_per_person=20))
    flood = [await one(db, published, summons("@alice:localhost", n, "echo")) for n in range(10)]
    assert all(isinstance(r, Summoned) for r in flood)
    bob = await one(db, published, summons("@bob:localhost", 0, "echo"))
    carol = await one(db, published, summons("@carol:localhost", 0, "echo"))
    bob2 = await one(db, published, summons("@bob:localhost", 1, "echo"))
    assert isinstance(bob, Summoned) and isinstance(carol, Summoned) and isinstance(bob2, Summoned)
    order = []
    while (claim := await db.runs.claim("w", 30)) is not None:
        order.append(claim.run.id)
    ids = [r.run_id for r in flood if isinstance(r, Summoned)]
    # Alice's 10th waiting run does not go before Bob's or Carol's 1st; Bob's 2nd goes with Alice's 2nd.
    assert order[:3] == [ids[0], bob.run_id, carol.run_id]
    assert order[3:5] == [ids[1], bob2.run_id]
    assert order[5:] == ids[2:]


async def test_the_deployments_daily_cap_is_checked_before_a_run_exists(db: TestStore, published: Registry) -> None:
    helper = published.get("helper")
    assert helper is not None and helper.limits.spend == 0.25
    await db.people.set_caps(Caps(daily_spend=1.0))
    results = await asyncio.gather(*(one(db, published, summons(f"@p{n}:localhost", 0)) for n in range(40)))
    taken = [r for r in results if isinstance(r, Summoned)]
    refused = [r for r in results if isinstance(r, Refused)]
    # Every run reserves its own limit (0.25) until it ends: exactly four fit under 1.00, whoever asks.
    assert len(taken) == 4 and {r.reason for r in refused} == {"budget"}
    over = refused[0].breach
    assert over is not None and over.window == "day" and over.frees_at is not None
    assert await db.pool.fetchval("SELECT sum(usd)::float8 FROM spend_ledger") == pytest.approx(1.0)
    # A run that ends settles to what it cost (nothing, here), and frees its share of the day at once.
    await db.people.settle(taken[0].run_id)
    assert isinstance(await one(db, published, summons("@late:localhost", 0)), Summoned)
    assert isinstance(await one(db, published, summons("@later:localhost", 0)), Refused)
    # Said to the person in words, with when it frees up.
    ingest = pipeline(db, published)
    line = threaded(0, "@dave:localhost")
    await feed(ingest, db, "t1", [line])
    told = await db.pool.fetchval("SELECT content->>'body' FROM outbox WHERE txn_id = $1",
                                  f"summon.refused.{line['event_id']}")
    assert told is not None and "spent what it may in a day" in told and "UTC" in told

