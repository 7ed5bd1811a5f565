"""A pool of spend with a cap of its own, and runs nobody asked for counted in a person's live runs (issue 24,
item 4), through the real summons on a real PostgreSQL: a pool is bounded even when every asker is new and
under no ceiling yet; a run that counts for its subject takes its place, and its turn, among theirs."""

from __future__ import annotations

import asyncio

import pytest

from engine.content import AudienceFacts, Registry
from engine.core.limits import Caps
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from tests.store import TestStore

pytestmark = pytest.mark.db

GUEST = AudienceFacts(user_id=None, local_server="localhost", is_member=False)


def asked(who: str, n: int, *, pool: str | None = "site", daily: float | None = 1.0) -> Summons:
    return Summons(bot="helper", surface="rooms", prompt="hi", asked_by=who, facts=GUEST, place=f"!{who}:localhost",
                   trigger_event=f"$t-{who}-{n}", pool=pool, pool_daily=daily)


def heard(subject: str, n: int, *, counts: bool = True) -> Summons:
    return Summons(bot="helper", surface="rooms", prompt="hi", asked_by=None, subject=subject, facts=GUEST,
                   place=f"!{subject}:localhost", trigger_event=f"$h-{subject}-{n}", counts_live=counts)


async def one(db: TestStore, registry: Registry, s: Summons) -> Summoned | Refused:
    async with db.transaction("test_summon") as tx:
        return await summon(tx, registry, s)


async def test_a_pool_is_bounded_when_every_asker_is_new(db: TestStore, published: Registry) -> None:
    helper = published.get("helper")
    assert helper is not None and helper.limits.spend == 0.25
    # Forty people asking once each, all new (no ceiling holds them yet), no deployment cap: four fit the pool.
    results = await asyncio.gather(*(one(db, published, asked(f"contact:{n}", 0)) for n in range(40)))
    taken = [r for r in results if isinstance(r, Summoned)]
    refused = [r for r in results if isinstance(r, Refused)]
    assert len(taken) == 4 and {r.reason for r in refused} == {"budget"}
    over = refused[0].breach
    assert over is not None and over.window == "day" and over.frees_at is not None
    assert await db.pool.fetchval("SELECT sum(usd)::float8 FROM spend_ledger WHERE pool = 'site'") == pytest.approx(1.0)
    reasons = await db.pool.fetch("SELECT DISTINCT reason, detail FROM summon_refusals")
    assert [(r["reason"], r["detail"]) for r in reasons] == [("budget", "site's daily cap of 1 USD")]
    # Another pool, and spend from no pool, are not held by it.
    assert isinstance(await one(db, published, asked("contact:x", 0, pool="elsewhere")), Summoned)
    assert isinstance(await one(db, published, asked("contact:y", 0, pool=None, daily=None)), Summoned)
    # A run that ends settles to what it cost (nothing here) and frees its share at once.
    await db.people.settle(taken[0].run_id)
    assert isinstance(await one(db, published, asked("contact:z", 0)), Summoned)
    assert isinstance(await one(db, published, asked("contact:w", 0)), Refused)


async def test_a_run_nobody_asked_counts_in_its_subjects_live_runs(db: TestStore, published: Registry) -> None:
    await db.people.set_caps(Caps(live_runs_per_person=2))
    first = await one(db, published, asked("contact:1", 0, pool=None, daily=None))
    second = await one(db, published, heard("contact:1", 0))
    assert isinstance(first, Summoned) and isinstance(second, Summoned)
    # The heard run took its turn after the asked one, and the person's two places are taken.
    turns = await db.pool.fetch("SELECT id, turn, live_for FROM agent_runs ORDER BY id")
    assert [(r["turn"], r["live_for"]) for r in turns] == [(0, None), (1, "contact:1")]
    assert await db.runs.live_of("contact:1") == 2
    third = await one(db, published, heard("contact:1", 1))
    assert isinstance(third, Refused) and third.reason == "too_many" and third.live == 2
    again = await one(db, published, asked("contact:1", 1, pool=None, daily=None))
    assert isinstance(again, Refused) and again.reason == "too_many"
    # A run nobody asked that does not count (a schedule's, say) is as it was: outside anyone's live runs.
    assert isinstance(await one(db, published, heard("contact:1", 2, counts=False)), Summoned)
    assert await db.runs.live_of("contact:1") == 2
    # Someone else is not held up by it.
    assert isinstance(await one(db, published, heard("contact:2", 0)), Summoned)
