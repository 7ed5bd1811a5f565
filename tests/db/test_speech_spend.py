"""Speech in the spend ledger (issue 19's draw and settle, beside issue 15's voice notes and issue 24's gates), on
a real PostgreSQL.

A hearing is paid for before any run exists, and whether or not one comes of it: it holds its worst case on the
asker's ledger under a row of its own — counted by their ceilings and the deployment's cap — lowers it to the
note's own bound in the commit that marks the call as begun, and settles it to what the call cost; a run asked
with its words is settled to its own calls, so the hearing is counted once. The marker is the only way to the
call: a second attempt gets no row back, and a call cut off before its answer was recorded is given up at its
worst case and never made again. The summons's gates can be asked before anything is paid, with what is about
to be paid counted beside the run's own limit. An answer said aloud after its run was settled adds to it."""

from __future__ import annotations

import pytest

from appservice.matrix.voice_tables import VoiceTables
from engine.content import AudienceFacts, Registry
from engine.core.limits import Caps
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, would_refuse
from tests.db.test_spend import WHO, ask, thrifty  # noqa: F401 (a fixture)
from tests.store import TestStore

pytestmark = pytest.mark.db
NOTE = "$voice-note"


async def ledger(db: TestStore, run_id: int) -> dict[str, object]:
    row = await db.pool.fetchrow("SELECT usd::float8 AS usd, spent::float8 AS spent, drawn::float8 AS drawn, "
                                 "reserved FROM spend_ledger WHERE run_id = $1", run_id)
    assert row is not None
    return dict(row)


async def held(db: TestStore, event_id: str = NOTE) -> dict[str, object]:
    row = await db.pool.fetchrow("SELECT h.state, l.who, l.bot, l.run_id, l.usd::float8 AS usd, l.spent::float8 AS "
                                 "spent, l.reserved FROM voice_hearings h JOIN spend_ledger l ON l.id = h.ledger_id "
                                 "WHERE h.event_id = $1", event_id)
    assert row is not None
    return dict(row)


async def test_speech_is_counted_while_reserved_at_the_settle_and_after_it(
        db: TestStore, thrifty: Registry) -> None:  # noqa: F811
    summoned = await ask(db, thrifty, "What did I just say?")
    assert isinstance(summoned, Summoned)
    run_id = summoned.run_id
    async with db.transaction("test_said") as tx:
        await tx.of(VoiceTables).record_call(run_id, "speech", 20, 0.0002)
    assert await ledger(db, run_id) == {"usd": pytest.approx(0.01), "spent": pytest.approx(0.0002), "drawn": 0,
                                        "reserved": True}
    # A model call in flight draws its worst case on top of what was said.
    await db.people.draw(run_id, 0.0099)
    assert (await ledger(db, run_id))["usd"] == pytest.approx(0.0101)
    await db.people.spend(run_id, 0.003)
    await db.pool.execute("INSERT INTO agent_steps (run_id, seq, kind, payload, cost_usd, worker) "
                          "VALUES ($1, 1, 'model', '{}', 0.003, 'w')", run_id)
    await db.people.settle(run_id)
    assert await ledger(db, run_id) == {"usd": pytest.approx(0.0032), "spent": pytest.approx(0.0032), "drawn": 0,
                                        "reserved": False}
    await db.of(VoiceTables).record_call(run_id, "speech", 100, 0.0015)  # the answer said aloud, after the settle
    assert await ledger(db, run_id) == {"usd": pytest.approx(0.0047), "spent": pytest.approx(0.0047), "drawn": 0,
                                        "reserved": False}


async def test_a_hearing_holds_its_worst_case_settles_to_its_call_and_is_counted_once(
        db: TestStore, thrifty: Registry) -> None:  # noqa: F811
    await db.people.lock_spender(WHO)  # the spender's row, as the gates make it
    assert await db.of(VoiceTables).hold(NOTE, room_id="!room:localhost", sender=WHO, bot="thrifty", usd=0.06)
    assert not await db.of(VoiceTables).hold(NOTE, room_id="!room:localhost", sender=WHO, bot="thrifty", usd=0.06)
    assert await held(db) == {"state": "held", "who": WHO, "bot": "thrifty", "run_id": None, "usd": 0.06, "spent": 0,
                              "reserved": True}
    # Counted before anything is paid: by the person's windows and the deployment's day.
    assert sum(s.usd for s in await db.people.ledger(WHO, "thrifty")) == pytest.approx(0.06)
    assert await db.people.deployment_spent() == pytest.approx(0.06)
    assert await db.of(VoiceTables).in_flight(WHO, 600) == 1
    # The marker, then the call: a second attempt gets no row back and must not call.
    assert await db.of(VoiceTables).call(NOTE, seconds=2.0, usd=0.0002)
    assert not await db.of(VoiceTables).call(NOTE, seconds=2.0, usd=0.0002)
    assert (await held(db))["usd"] == pytest.approx(0.0002)  # lowered to the note's own bound
    assert await db.of(VoiceTables).settle(NOTE, outcome="answered", seconds=2.0, usd=0.0002, heard="hello", state="heard")
    assert not await db.of(VoiceTables).settle(NOTE, outcome="answered", seconds=2.0, usd=0.0002, heard="hello", state="heard")
    assert await held(db) == {"state": "heard", "who": WHO, "bot": "thrifty", "run_id": None, "usd": 0.0002,
                              "spent": 0.0002, "reserved": False}
    calls = await db.pool.fetch("SELECT kind, units::float8 AS units, cost_usd::float8 AS cost, outcome, run_id "
                                "FROM speech_calls WHERE event_id = $1", NOTE)
    assert [dict(c) for c in calls] == [{"kind": "transcription", "units": 2.0, "cost": 0.0002, "outcome": "answered",
                                         "run_id": None}]
    # The run its words ask is settled to its own calls: the hearing stays on its own row, counted once.
    summoned = await ask(db, thrifty, "hello", n=1)
    assert isinstance(summoned, Summoned)
    await db.of(VoiceTables).asked(NOTE, run_id=summoned.run_id)
    await db.people.settle(summoned.run_id)
    assert (await ledger(db, summoned.run_id))["usd"] == 0
    assert [c.kind for c in await db.of(VoiceTables).calls(summoned.run_id)] == ["transcription"]
    assert await db.of(VoiceTables).in_flight(WHO, 600) == 0
    assert await db.people.deployment_spent() == pytest.approx(0.0002)


async def test_a_call_cut_off_is_never_made_again_and_is_counted_at_its_worst(
        db: TestStore, thrifty: Registry) -> None:  # noqa: F811
    await db.people.lock_spender(WHO)
    await db.of(VoiceTables).hold(NOTE, room_id="!room:localhost", sender=WHO, bot="thrifty", usd=0.06)
    assert await db.of(VoiceTables).call(NOTE, seconds=30.0, usd=0.003)
    # Not yet: an attempt may still be making it.
    assert not await db.of(VoiceTables).lose(NOTE, call_seconds=60)
    found = await db.of(VoiceTables).hearing(NOTE, call_seconds=60)
    assert found is not None and (found.state, found.cut_off) == ("calling", False)
    await db.pool.execute("UPDATE voice_hearings SET called_at = now() - interval '2 minutes' WHERE event_id = $1", NOTE)
    found = await db.of(VoiceTables).hearing(NOTE, call_seconds=60)
    assert found is not None and found.cut_off
    assert await db.of(VoiceTables).lose(NOTE, call_seconds=60)
    assert not await db.of(VoiceTables).lose(NOTE, call_seconds=60)
    assert await held(db) == {"state": "lost", "who": WHO, "bot": "thrifty", "run_id": None, "usd": 0.003,
                              "spent": 0.003, "reserved": False}
    call = await db.pool.fetchrow("SELECT units::float8 AS units, cost_usd::float8 AS cost, outcome FROM speech_calls "
                                  "WHERE event_id = $1", NOTE)
    assert dict(call) == {"units": 30.0, "cost": 0.003, "outcome": "unknown"}
    # Its late answer changes nothing, and nothing calls again.
    assert not await db.of(VoiceTables).settle(NOTE, outcome="answered", seconds=30.0, usd=0.003, heard="late", state="heard")
    assert not await db.of(VoiceTables).call(NOTE, seconds=30.0, usd=0.003)
    assert await db.pool.fetchval("SELECT count(*) FROM speech_calls WHERE event_id = $1", NOTE) == 1


async def test_a_note_let_go_before_its_call_pays_nothing(db: TestStore, thrifty: Registry) -> None:  # noqa: F811
    await db.people.lock_spender(WHO)
    await db.of(VoiceTables).hold(NOTE, room_id="!room:localhost", sender=WHO, bot="thrifty", usd=0.06)
    assert await db.of(VoiceTables).release(NOTE, state="refused", why="too_long")
    assert not await db.of(VoiceTables).release(NOTE, state="refused", why="too_long")
    assert await held(db) == {"state": "refused", "who": WHO, "bot": "thrifty", "run_id": None, "usd": 0, "spent": 0,
                              "reserved": False}
    assert not await db.of(VoiceTables).call(NOTE, seconds=1.0, usd=0.0001)
    assert await db.pool.fetchval("SELECT count(*) FROM speech_calls WHERE event_id = $1", NOTE) == 0


async def gates(db: TestStore, registry: Registry, **also: float) -> Refused | None:
    async with db.transaction("test_would_refuse") as tx:
        return await would_refuse(tx, registry, Summons(
            bot="thrifty", surface="rooms", prompt="", asked_by=WHO, place="!room:localhost",
            facts=AudienceFacts(user_id=WHO, local_server="localhost", is_member=True), trigger_event="$note"),
            also_reserve=also.get("reserve", 0.0), also_live=int(also.get("live", 0)))


async def test_the_gates_are_asked_before_paying_with_what_is_about_to_be_paid_counted(
        db: TestStore, thrifty: Registry) -> None:  # noqa: F811
    # Thrifty may spend 0.05 a day on a person, 0.01 a run; 0.03 spent leaves room for a run, not for a run and
    # a hearing whose worst case is 0.02.
    await db.people.lock_spender(WHO)
    await db.pool.execute("INSERT INTO spend_ledger (who, bot, usd, spent, reserved) VALUES ($1, 'thrifty', 0.03, 0.03, "
                          "false)", WHO)
    assert await gates(db, thrifty) is None
    over = await gates(db, thrifty, reserve=0.02)
    assert over is not None and over.reason == "ceiling" and over.breach is not None and over.breach.window == "day"
    # Live runs: the sender's hearings in flight count as theirs.
    too_many = await gates(db, thrifty, live=3)
    assert too_many is not None and (too_many.reason, too_many.live) == ("too_many", 3)
    # The deployment's day: 0.015 more fits a run (0.01), not a run and a hearing of 0.01.
    await db.people.set_caps(Caps(daily_spend=0.045))
    assert await gates(db, thrifty) is None
    budget = await gates(db, thrifty, reserve=0.01)
    assert budget is not None and budget.reason == "budget"
    # Nothing was inserted; each refusal is a matter of record.
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0
    reasons = [r["reason"] for r in await db.pool.fetch("SELECT reason FROM summon_refusals ORDER BY id")]
    assert reasons == ["ceiling", "too_many", "budget"]
