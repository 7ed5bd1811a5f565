"""The door's rows on a real PostgreSQL: a grant minted is recorded (never its token), a session's claims
supersede each other, a turn is handed over or outlives its response exactly once, and a grant's ceilings
lower a run's limits and never raise them."""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta

import pytest

from appservice.config import Door as DoorConfig
from appservice.door.grants import verify
from appservice.door.issue import ceilings_of, issue
from appservice.door.surface import DoorSurface
from appservice.door.tables import DoorTables
from engine.content import AudienceFacts, Registry
from engine.core.limits import Ceilings
from engine.run.refusals import Refused
from engine.run.summon import Summoned, Summons, summon
from tests.door.conftest import KEYS, SERVER
from tests.store import TestStore

pytestmark = pytest.mark.db
PERSON = "@alice:localhost"


async def mint(db: TestStore, registry: Registry, door: DoorConfig, *, room: str | None = None,
               one_to_one: bool = False) -> tuple[str, str]:
    bot = registry.get("caller")
    assert bot is not None
    async with db.transaction("test_issue") as tx:
        token, grant = await issue(tx, door, server_name=SERVER, bot=bot, person=PERSON, room=room,
                                   now=datetime.now(UTC), minutes=10, minted_by="operator", one_to_one=one_to_one)
    return token, grant.id


async def test_a_grant_minted_is_recorded_and_its_token_is_not(db: TestStore, published: Registry,
                                                             door_config: DoorConfig) -> None:
    token, grant_id = await mint(db, published, door_config, room="!r:localhost")
    row = await db.of(DoorTables).grant(grant_id)
    assert row is not None
    assert (row.bot, row.person, row.room_id, row.key_id, row.minted_by) == (
        "caller", PERSON, "!r:localhost", "k1", "operator")
    assert (row.expires_at - row.issued_at).total_seconds() == 600
    grant = verify(token, KEYS, audience=f"summon-door:{SERVER}", now=datetime.now(UTC))
    assert grant.id == grant_id
    # The grant carries the bot's own ceilings, as its file says them.
    bot = published.get("caller")
    assert bot is not None and grant.ceilings == ceilings_of(bot)
    dumped = await db.pool.fetchval("SELECT string_agg(t::text, ' ') FROM door_grants t")
    assert token.rsplit(".", 1)[1] not in dumped and token not in dumped


async def test_a_newer_claim_supersedes_a_pending_one(db: TestStore, published: Registry,
                                                      door_config: DoorConfig) -> None:
    _, grant_id = await mint(db, published, door_config)
    async with db.transaction("t") as tx:
        session = await tx.of(DoorTables).open_session(grant_id, bot="caller", person=PERSON, expires_at=datetime.now(UTC))
    assert (session.room_id, session.claim) == (None, 0)
    first = await db.of(DoorTables).claim(grant_id, "!one:localhost")
    second = await db.of(DoorTables).claim(grant_id, "!two:localhost")
    # The first claim's check comes back after the second was made: it binds nothing.
    assert not await db.of(DoorTables).bind(grant_id, first, "!one:localhost", "One")
    assert not await db.of(DoorTables).refuse(grant_id, first)
    session_now = await db.of(DoorTables).session(grant_id)
    assert session_now is not None and (session_now.room_id, session_now.pending_room) == (None, "!two:localhost")
    assert await db.of(DoorTables).bind(grant_id, second, "!two:localhost", "Two")
    bound = await db.of(DoorTables).session(grant_id)
    assert bound is not None and (bound.room_id, bound.room_name, bound.pending_room) == ("!two:localhost", "Two", None)


async def test_a_different_room_releases_the_bound_one_before_its_check(db: TestStore, published: Registry,
                                                                       door_config: DoorConfig) -> None:
    _, grant_id = await mint(db, published, door_config)
    async with db.transaction("t") as tx:
        await tx.of(DoorTables).open_session(grant_id, bot="caller", person=PERSON, expires_at=datetime.now(UTC))
    claim = await db.of(DoorTables).claim(grant_id, "!one:localhost")
    assert await db.of(DoorTables).bind(grant_id, claim, "!one:localhost", "One")
    # The same room announced again keeps its binding while it is checked…
    await db.of(DoorTables).claim(grant_id, "!one:localhost")
    same = await db.of(DoorTables).session(grant_id)
    assert same is not None and same.room_id == "!one:localhost"
    # …another releases it at once: until it is verified, the session is on the person's DM.
    claim = await db.of(DoorTables).claim(grant_id, "!two:localhost")
    released = await db.of(DoorTables).session(grant_id)
    assert released is not None and (released.room_id, released.room_name) == (None, None)
    assert await db.of(DoorTables).refuse(grant_id, claim)
    refused = await db.of(DoorTables).session(grant_id)
    assert refused is not None and (refused.room_id, refused.pending_room) == (None, None)


async def door_turn(db: TestStore, registry: Registry, grant_id: str) -> int:
    async with db.transaction("t") as tx:
        await tx.of(DoorTables).open_session(grant_id, bot="caller", person=PERSON, expires_at=datetime.now(UTC))
        result = await summon(tx, registry, Summons(
            bot="caller", surface="voice", prompt="hi", asked_by=PERSON, subject=PERSON,
            facts=AudienceFacts(user_id=PERSON, local_server=SERVER)))
        assert isinstance(result, Summoned), result
        await tx.of(DoorTables).insert_turn(result.run_id, grant_id, None)
    # Only the door's rows are under test: the run is over as far as the person's live runs go.
    await db.pool.execute("UPDATE agent_runs SET status = 'done' WHERE id = $1", result.run_id)
    return result.run_id


async def test_a_turn_is_handed_over_or_outlives_its_response_never_both(db: TestStore, published: Registry,
                                                                        door_config: DoorConfig) -> None:
    _, grant_id = await mint(db, published, door_config)
    # Handed over first: the response that gives up afterwards finds it finished (it answers after all).
    run_id = await door_turn(db, published, grant_id)
    async with db.transaction("finish") as tx:
        finished = await tx.of(DoorTables).finish_turn(run_id)
    assert finished is not None and finished.waiting and finished.grant_id == grant_id
    assert not await db.of(DoorTables).outlive(run_id)
    # Given up on first: the finishing commit sees nobody waits (it posts the answer to Matrix instead).
    run_id = await door_turn(db, published, grant_id)
    assert await db.of(DoorTables).outlive(run_id)
    async with db.transaction("finish") as tx:
        finished = await tx.of(DoorTables).finish_turn(run_id)
    assert finished is not None and not finished.waiting
    # At the same moment: the row lock puts one after the other, and they agree.
    for _ in range(5):
        run_id = await door_turn(db, published, grant_id)

        async def finish(run_id: int = run_id) -> bool:
            async with db.transaction("finish") as tx:
                done = await tx.of(DoorTables).finish_turn(run_id)
                await asyncio.sleep(0.01)
            assert done is not None
            return done.waiting

        waiting, outlived = await asyncio.gather(finish(), db.of(DoorTables).outlive(run_id))
        assert waiting != outlived


async def test_a_grants_ceilings_lower_the_run_and_never_raise_it(db: TestStore, published: Registry) -> None:
    async def ask(ceilings: Ceilings, who: str) -> Summoned | Refused:
        async with db.transaction("t") as tx:
            return await summon(tx, published, Summons(
                bot="caller", surface="voice", prompt="hi", asked_by=who, subject=who,
                facts=AudienceFacts(user_id=who, local_server=SERVER), ceilings=ceilings))

    lower = await ask(Ceilings(steps=2, spend=0.01, minutes=1.0, per={}), "@a:localhost")
    higher = await ask(Ceilings(steps=99, spend=9.0, minutes=99.0, per={"hour": 99.0}), "@b:localhost")
    assert isinstance(lower, Summoned) and isinstance(higher, Summoned)
    limits = {r["id"]: r["limits"] for r in await db.pool.fetch("SELECT id, limits FROM agent_runs")}
    assert limits[lower.run_id] == {"steps": 2, "spend": 0.01, "minutes": 1.0}
    assert limits[higher.run_id] == {"steps": 6, "spend": 0.05, "minutes": 2.0}  # the bot's own
    reserved = await db.pool.fetchval("SELECT usd::float8 FROM spend_ledger WHERE run_id = $1", lower.run_id)
    assert reserved == 0.01
    # A window the bot's file does not name holds too: a minute's 0.015 takes one run of 0.01, not two.
    tight = Ceilings(steps=6, spend=0.01, minutes=2.0, per={"minute": 0.015})
    assert isinstance(await ask(tight, "@c:localhost"), Summoned)
    second = await ask(tight, "@c:localhost")
    assert isinstance(second, Refused) and second.reason == "ceiling"
    assert second.breach is not None and second.breach.window == "minute"


async def test_sessions_and_grants_are_pruned_a_day_after_they_expire_and_their_runs_stay(
    db: TestStore, published: Registry, door_config: DoorConfig,
) -> None:
    from appservice.door.tables import forget_door_sessions as prune

    _, old = await mint(db, published, door_config)
    _, fresh = await mint(db, published, door_config)
    run_id = await door_turn(db, published, old)
    async with db.transaction("t") as tx:
        await tx.of(DoorTables).open_session(fresh, bot="caller", person=PERSON, expires_at=datetime.now(UTC))
    await db.pool.execute("UPDATE door_sessions SET expires_at = now() - interval '25 hours' WHERE grant_id = $1", old)
    await db.pool.execute("UPDATE door_grants SET expires_at = now() - interval '25 hours' WHERE id = $1", old)
    assert await prune(db) == 2
    assert await db.of(DoorTables).session(old) is None and await db.of(DoorTables).grant(old) is None
    assert await db.of(DoorTables).turn(run_id) is None  # the door's row of the turn went with its session…
    assert await db.runs.get(run_id) is not None  # …the run is a run, and stays
    assert await db.of(DoorTables).session(fresh) is not None and await db.of(DoorTables).grant(fresh) is not None


async def test_a_line_typed_in_the_room_never_joins_a_voice_turn_bound_there(db: TestStore,
                                                                             published: Registry) -> None:
    facts = AudienceFacts(user_id=PERSON, local_server=SERVER, is_member=True)
    async with db.transaction("t") as tx:
        voice = await summon(tx, published, Summons(bot="caller", surface="voice", prompt="hi", asked_by=PERSON,
                                                    subject=PERSON, facts=facts, place="!r:localhost"))
    assert isinstance(voice, Summoned)
    line = {"event_id": "$typed", "sender": PERSON, "name": "alice", "said": "Caller, also this"}
    async with db.transaction("t") as tx:
        typed = await summon(tx, published, Summons(bot="caller", surface="rooms", prompt=line["said"],
                                                    asked_by=PERSON, facts=facts, place="!r:localhost",
                                                    trigger_event="$typed", later=line))
    # It expects its answer in the room, not in somebody's ear: a run of its own.
    assert isinstance(typed, Summoned) and not typed.joined and typed.run_id != voice.run_id
    assert (await db.runs.context(voice.run_id)).get("later") is None


async def test_a_turn_is_given_only_the_earlier_turns_asked_where_the_session_is_now(
        db: TestStore, published: Registry, door_config: DoorConfig) -> None:
    from appservice.door.asking import DoorAsking
    from appservice.door.grants import new_grant

    _, grant_id = await mint(db, published, door_config)
    for prompt, answer, origin in (("in the DM", "dm answer", None), ("in the room", "ROOM SECRET", "!room:localhost")):
        async with db.transaction("t") as tx:
            await tx.of(DoorTables).open_session(grant_id, bot="caller", person=PERSON, expires_at=datetime.now(UTC))
            result = await summon(tx, published, Summons(
                bot="caller", surface="voice", prompt=prompt, asked_by=PERSON, subject=PERSON, place=origin,
                facts=AudienceFacts(user_id=PERSON, local_server=SERVER)))
            assert isinstance(result, Summoned)
            await tx.of(DoorTables).insert_turn(result.run_id, grant_id, origin)
        await db.pool.execute("UPDATE agent_runs SET status = 'done', answer = $2 WHERE id = $1", result.run_id, answer)
    # The session is on the DM again: what was answered in the room stays there.
    assert [t.answer for t in await db.of(DoorTables).past_turns(grant_id, 12, None)] == ["dm answer"]
    assert [t.answer for t in await db.of(DoorTables).past_turns(grant_id, 12, "!room:localhost")] == ["ROOM SECRET"]
    surface = DoorSurface(lambda: published, server_name=SERVER, service_user=f"@summon:{SERVER}")
    session = await db.of(DoorTables).session(grant_id)
    assert session is not None
    bot = published.get("caller")
    assert bot is not None
    grant = new_grant(bot="caller", person=PERSON, room=None, audience="a", ceilings=ceilings_of(bot),
                      now=datetime.now(UTC), minutes=5, minted_by="operator")
    context = DoorAsking(db, lambda: published, surface).context(
        published, grant, session, await db.of(DoorTables).past_turns(grant_id, 12, session.room_id), "and now?")
    assert "ROOM SECRET" not in repr(context)


async def test_no_room_is_the_persons_alone_only_when_the_front_end_said_one_to_one(
        db: TestStore, published: Registry, door_config: DoorConfig) -> None:
    surface = DoorSurface(lambda: published, server_name=SERVER, service_user=f"@summon:{SERVER}")
    _, kitchen = await mint(db, published, door_config)
    later = datetime.now(UTC) + timedelta(minutes=10)
    async with db.transaction("t") as tx:
        await tx.of(DoorTables).open_session(kitchen, bot="caller", person=PERSON, expires_at=later)
        assert not (await surface.facts(tx, None, PERSON)).private  # a speakerphone: whoever is near hears
    await db.pool.execute("DELETE FROM door_sessions WHERE grant_id = $1", kitchen)
    _, headset = await mint(db, published, door_config, one_to_one=True)
    async with db.transaction("t") as tx:
        await tx.of(DoorTables).open_session(headset, bot="caller", person=PERSON, expires_at=later, one_to_one=True)
        assert (await surface.facts(tx, None, PERSON)).private
        assert not (await surface.facts(tx, None, "@bob:localhost")).private  # nobody else's session is theirs


def test_a_grant_says_whether_its_session_is_one_to_one_and_an_older_grant_reads_as_not() -> None:
    import json

    from appservice.door.grants import _b64, _sign, new_grant
    from appservice.door.grants import mint as sign

    ceilings = Ceilings(steps=2, spend=0.1, minutes=1, per={})
    now = datetime.now(UTC)
    grant = new_grant(bot="caller", person=PERSON, room=None, audience="aud", ceilings=ceilings, now=now,
                      minutes=5, minted_by="start", one_to_one=True)
    assert verify(sign(grant, "k1", KEYS["k1"]), KEYS, audience="aud", now=now).one_to_one
    old = new_grant(bot="caller", person=PERSON, room=None, audience="aud", ceilings=ceilings, now=now, minutes=5,
                    minted_by="start")
    payload = json.loads(base64.urlsafe_b64decode(sign(old, "k1", KEYS["k1"]).split(".")[2] + "=="))
    del payload["one"]
    signed = f"sg1.k1.{_b64(json.dumps(payload).encode())}"
    assert not verify(f"{signed}.{_b64(_sign(KEYS['k1'], signed))}", KEYS, audience="aud", now=now).one_to_one
