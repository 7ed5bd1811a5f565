"""Speech in the spend ledger (issue 19's draw and settle, beside issue 15's voice notes): a hearing is bought
before its run exists, so it is counted as spent — on top of any model call's draw — in the commit that reserves
the run; the run's end settles to its model calls plus its speech; an answer said after that adds to the settled
row, ``usd`` and ``spent`` alike."""

from __future__ import annotations

import pytest

from engine.content import Registry
from engine.run.summon import Summoned
from tests.db.test_spend import ask, thrifty  # noqa: F401 (a fixture)
from tests.store import TestStore

pytestmark = pytest.mark.db


async def ledger(db: TestStore, run_id: int) -> dict[str, object]:
    row = await db.pool.fetchrow("SELECT usd::float8 AS usd, spent::float8 AS spent, drawn::float8 AS drawn, "
                                 "reserved FROM spend_ledger WHERE run_id = $1", run_id)
    assert row is not None
    return dict(row)


async def test_speech_is_counted_while_reserved_at_the_settle_and_after_it(
        db: TestStore, thrifty: Registry) -> None:  # noqa: F811
    summoned = await ask(db, thrifty, "What did I just say?")
    assert isinstance(summoned, Summoned)
    run_id = summoned.run_id
    async with db.transaction("test_heard") as tx:
        await tx.voice.record_call(run_id, "transcription", 2.0, 0.0002)
    assert await ledger(db, run_id) == {"usd": pytest.approx(0.01), "spent": pytest.approx(0.0002), "drawn": 0,
                                        "reserved": True}
    # A model call in flight draws its worst case on top of what the hearing spent.
    await db.people.draw(run_id, 0.0099)
    assert (await ledger(db, run_id))["usd"] == pytest.approx(0.0101)
    await db.people.spend(run_id, 0.003)
    await db.pool.execute("INSERT INTO agent_steps (run_id, seq, kind, payload, cost_usd, worker) "
                          "VALUES ($1, 1, 'model', '{}', 0.003, 'w')", run_id)
    await db.people.settle(run_id)
    assert await ledger(db, run_id) == {"usd": pytest.approx(0.0032), "spent": pytest.approx(0.0032), "drawn": 0,
                                        "reserved": False}
    await db.voice.record_call(run_id, "speech", 100, 0.0015)  # the answer said aloud, after the settle
    assert await ledger(db, run_id) == {"usd": pytest.approx(0.0047), "spent": pytest.approx(0.0047), "drawn": 0,
                                        "reserved": False}
