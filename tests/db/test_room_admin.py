"""``!bots …`` on a real PostgreSQL, through ingest: every sub-command, the power gate (room version 12
creators included), encrypted rooms (no scheduling, and not offered), and a room schedule that fires once
through the tick."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from typing import Any

import pytest

from appservice.matrix.claimers.admin import RoomAdmin
from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.inbound.followups import Followup, InvitePuppet, PuppetLeaves
from appservice.matrix.surface import RoomFacts
from appservice.matrix.tables.schedules import room_schedules
from engine.content import AudienceFacts, Registry
from engine.content.audience import parse_audience
from engine.run.refusals import Refused
from engine.run.summon import Summons, summon
from engine.run.ticks import schedule_tick
from tests.db.test_ingest import feed, pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
ROOM = "!admin:localhost"
SERVICE = "@summon:localhost"
ALICE = "@alice:localhost"  # the room's creator, at power level 100
BOB = "@bob:localhost"      # a member at the default level, 0
HELPER = "@bot_helper:localhost"
ECHO = "@bot_echo:localhost"
_ids = itertools.count(1)


def message(body: str, *, sender: str = ALICE, mentions: list[str] | None = None,
            thread: str | None = None) -> dict[str, Any]:
    n = next(_ids)
    content: dict[str, Any] = {"msgtype": "m.text", "body": body, "m.mentions": {"user_ids": mentions or []}}
    if thread:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread}
    return {"event_id": f"$a{n}", "room_id": ROOM, "sender": sender, "type": "m.room.message",
            "origin_server_ts": 1_700_000_000_000 + n, "content": content, "unsigned": {}}


def state(event_type: str, state_key: str, content: dict[str, Any], sender: str = ALICE) -> dict[str, Any]:
    n = next(_ids)
    return {"event_id": f"$s{n}", "room_id": ROOM, "sender": sender, "type": event_type, "state_key": state_key,
            "origin_server_ts": 1_700_000_000_000 + n, "content": content}


def member(user: str, membership: str = "join") -> dict[str, Any]:
    return state("m.room.member", user, {"membership": membership}, sender=user)


def room(*, version: str = "10", power: dict[str, Any] | None = None, joined: tuple[str, ...] = (SERVICE,),
         creators: list[str] | None = None) -> list[dict[str, Any]]:
    create: dict[str, Any] = {"room_version": version}
    if creators:
        create["additional_creators"] = creators
    levels = power if power is not None else {"users": {ALICE: 100}, "users_default": 0, "state_default": 50}
    return [state("m.room.create", "", create), state("m.room.power_levels", "", levels),
            member(ALICE), member(BOB), *[member(u) for u in joined]]


class Room:
    def __init__(self, ingest: Dispatcher, db: TestStore) -> None:
        self.ingest = ingest
        self.db = db
        self.txns = itertools.count(1)

    async def feed(self, *events: dict[str, Any]) -> list[Followup]:
        followups = await feed(self.ingest, self.db, f"txn{next(self.txns)}", list(events))
        assert followups is not None
        return followups

    async def say(self, body: str, **kw: Any) -> tuple[str, list[Followup]]:
        line = message(body, **kw)
        return line["event_id"], await self.feed(line)

    async def ask(self, body: str, **kw: Any) -> str:
        """Say ``body`` and return the service's reply to it (there must be exactly one)."""
        event_id, _ = await self.say(body, **kw)
        return await self.reply(event_id)

    async def reply(self, event_id: str) -> str:
        row = await self.db.pool.fetchrow(
            "SELECT sender, content FROM outbox WHERE txn_id = $1", f"summon.admin.{event_id}")
        assert row is not None, f"no reply to {event_id}"
        assert row["sender"] == SERVICE
        assert row["content"]["msgtype"] == "m.notice"
        return str(row["content"]["body"])

    async def settings(self) -> dict[str, Any]:
        return dict(await self.db.pool.fetchval("SELECT settings FROM rooms WHERE room_id = $1", ROOM))


@pytest.fixture
def ingest(db: TestStore, published: Registry) -> Dispatcher:
    return pipeline(db, published)


@pytest.fixture
async def here(ingest: Dispatcher, db: TestStore) -> Room:
    r = Room(ingest, db)
    await r.feed(*room())
    return r


async def outbox_count(db: TestStore) -> int:
    return int(await db.pool.fetchval("SELECT count(*) FROM outbox WHERE txn_id LIKE 'summon.admin.%'"))


# --- who may, and where -----------------------------------------------------------------------------

async def test_a_non_admin_is_refused_in_one_line_naming_the_level(here: Room, db: TestStore) -> None:
    event_id, followups = await here.say("!bots add helper", sender=BOB)
    body = await here.reply(event_id)
    assert "power level 50" in body and "yours is 0" in body
    assert followups == []
    assert await here.settings() == {}


async def test_the_level_is_the_rooms_state_default(ingest: Dispatcher, db: TestStore) -> None:
    r = Room(ingest, db)
    await r.feed(*room(power={"users": {ALICE: 100, BOB: 10}, "state_default": 10}))
    assert "choices: poll" in await r.ask("!bots set choices poll", sender=BOB)


async def test_room_version_12_creators_count_whatever_the_levels_say(ingest: Dispatcher, db: TestStore) -> None:
    # In v12 creators cannot be listed in `users` at all: alice (the creator) and bob (an additional
    # creator) are both at users_default 0, and both may.
    r = Room(ingest, db)
    await r.feed(*room(version="12", power={"users": {}, "users_default": 0}, creators=[BOB]))
    assert "choices: poll" in await r.ask("!bots set choices poll")
    assert "choices: reactions" in await r.ask("!bots set choices reactions", sender=BOB)
    carol = "@carol:localhost"
    await r.feed(member(carol))
    assert "power level 50" in await r.ask("!bots set choices poll", sender=carol)


async def test_before_version_12_a_creator_is_only_as_powerful_as_the_levels_say(ingest: Dispatcher, db: TestStore) -> None:
    r = Room(ingest, db)
    await r.feed(*room(version="11", power={"users": {}, "users_default": 0}))
    assert "power level 50" in await r.ask("!bots set choices poll")


async def test_a_line_where_the_service_is_not_is_not_for_it(ingest: Dispatcher, db: TestStore) -> None:
    r = Room(ingest, db)
    await r.feed(*room(joined=(HELPER,)))
    await r.say("!bots list")
    assert await outbox_count(db) == 0
    # Mentioning the service's user addresses it anyway.
    assert "Helper" in await r.ask("!bots list", mentions=[SERVICE])


async def test_a_reply_is_a_notice_in_the_thread_replying_to_the_line(here: Room, db: TestStore) -> None:
    event_id, _ = await here.say("!bots set choices", thread="$root")
    content = await db.pool.fetchval("SELECT content FROM outbox WHERE txn_id = $1", f"summon.admin.{event_id}")
    assert content["m.relates_to"] == {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": False,
                                       "m.in_reply_to": {"event_id": event_id}}
    assert content["m.mentions"] == {"user_ids": [ALICE]}


async def test_a_replayed_line_is_answered_once(here: Room, db: TestStore) -> None:
    line = message("!bots list")
    await here.feed(line)
    await here.feed(line)
    assert await outbox_count(db) == 1


# --- the sub-commands -------------------------------------------------------------------------------

async def test_usage_and_an_unknown_sub_command(here: Room) -> None:
    usage = await here.ask("!bots")
    for form in ("list", "add <bot>", "set choices reactions|poll", "schedule <bot>", "runs", "spend", "cancel <run>"):
        assert form in usage
    bad = await here.ask("!bots frob")
    assert "frob" in bad and "list, add, remove" in bad and "`list`" in bad


async def test_list_shows_what_is_offered_and_what_is_here(here: Room) -> None:
    await here.feed(member(HELPER))
    body = await here.ask("!bots list")
    assert "- 🛟 **Helper** (`helper`) — You are Helper, a friendly general-purpose assistant in a Matrix chat." in body
    assert "in this room" in body.split("**Helper**")[1].split("\n")[0]
    assert "**Echo** (`echo`)" in body and "in this room" not in body.split("**Echo**")[1].split("\n")[0]
    assert "bots: helper (allowed: echo, helper)" in body


async def test_add_invites_the_puppet_and_enables_the_bot(here: Room) -> None:
    event_id, followups = await here.say("!bots add Helper")
    assert followups == [InvitePuppet(ROOM, HELPER, SERVICE)]
    body = await here.reply(event_id)
    assert "Helper is invited" in body and "bots: helper (allowed: echo, helper)" in body
    assert (await here.settings())["bots"] == ["echo", "helper"]
    # Already here: nothing to invite.
    await here.feed(member(HELPER))
    event_id, followups = await here.say("!bots add helper")
    assert followups == []
    assert "already here" in await here.reply(event_id)


async def test_remove_makes_the_puppet_leave_and_the_bot_stop_answering_here(here: Room, db: TestStore) -> None:
    await here.feed(member(HELPER), member(ECHO))
    event_id, followups = await here.say("!bots remove helper")
    assert followups == [PuppetLeaves(ROOM, HELPER, f"removed with !bots by {ALICE}")]
    body = await here.reply(event_id)
    assert "no longer answers here" in body and "bots: echo (allowed: echo, helper)" in body
    assert (await here.settings())["bots"] == ["echo"]
    # Named anyway (the puppet has not left yet): refused, not enabled in this room. Echo still answers.
    await here.say("Helper, are you there?", mentions=[HELPER])
    await here.say("Echo, are you there?", mentions=[ECHO])
    assert [r["bot"] for r in await db.pool.fetch("SELECT bot FROM agent_runs")] == ["echo"]
    # Once it has left, removing it again says so, and makes nobody leave.
    await here.feed(member(HELPER, "leave"))
    event_id, followups = await here.say("!bots remove helper")
    assert followups == [] and "was not answering here" in await here.reply(event_id)


async def test_set_choices_replies_with_the_current_and_allowed_values(here: Room) -> None:
    assert await here.ask("!bots set choices") == "choices: reactions (allowed: reactions, poll)"
    assert await here.ask("!bots set choices poll") == "choices: poll (allowed: reactions, poll)"
    assert (await here.settings())["choices"] == "poll"
    bad = await here.ask("!bots set choices polls")
    assert "choices" in bad and "reactions, poll" in bad and "polls" in bad and "!bots" in bad
    assert (await here.settings())["choices"] == "poll"


async def test_quiet_hours_keep_bots_from_waking_by_themselves(here: Room, db: TestStore, published: Registry) -> None:
    hour = (await db.pool.fetchval("SELECT now()")).astimezone(dt.UTC).hour
    window = f"{(hour - 1) % 24:02d}:00-{(hour + 2) % 24:02d}:00"
    assert await here.ask(f"!bots set quiet {window}") == (
        f"quiet: {window} UTC (allowed: <from>-<to> [zone] (like 22:00-07:00 Europe/Dublin), or off)")
    unasked = Summons(bot="helper", surface="rooms", prompt="Good morning", asked_by=None,
                      facts=AudienceFacts(user_id=None, local_server="localhost"), place=ROOM,
                      trigger_event="schedule:x")
    async with db.transaction("t") as tx:
        assert await summon(tx, published, unasked) == Refused("quiet")
    # A person asking is still answered.
    await here.say("Helper?", mentions=[HELPER])
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 1
    assert (await here.ask("!bots set quiet off")).startswith("quiet: off")
    assert "quiet" not in await here.settings()


async def test_schedule_list_and_unschedule(here: Room, db: TestStore) -> None:
    body = await here.ask('!bots schedule helper every monday at 08:00 ask "Say good morning."')
    n = await db.pool.fetchval("SELECT id FROM room_schedules")
    assert f"Scheduled #{n}: Helper every week on monday at 08:00 (UTC), asked “Say good morning.”. Next: " in body
    row = await db.pool.fetchrow("SELECT room_id, bot, schedule, ask, made_by FROM room_schedules")
    assert dict(row) == {"room_id": ROOM, "bot": "helper", "schedule": {"every": "week", "on": ["monday"], "at": "08:00"},
                         "ask": "Say good morning.", "made_by": ALICE}
    # Its clock starts as it is made: it never fires for the past.
    assert await db.pool.fetchval("SELECT count(*) FROM bot_clock WHERE bot = 'helper' AND trigger = $1", f"room:{n}") == 1
    listed = await here.ask("!bots schedules")
    assert f"#{n} Helper every week on monday at 08:00 (UTC): “Say good morning.”" in listed
    bad = await here.ask(f"!bots unschedule {n + 100}")
    assert f"#{n}" in bad and str(n + 100) in bad
    assert "Unscheduled" in await here.ask(f"!bots unschedule {n}")
    assert await db.pool.fetchval("SELECT count(*) FROM room_schedules") == 0
    assert await db.pool.fetchval("SELECT count(*) FROM bot_clock") == 0
    assert await here.ask("!bots schedules") == "Nothing is scheduled here."


async def test_a_bad_schedule_names_the_field_and_keeps_nothing(here: Room, db: TestStore) -> None:
    body = await here.ask('!bots schedule helper every 15 minutes at 08:00 ask "hi"')
    assert "when" in body and "a time of day goes with every: day, week or month" in body
    assert await db.pool.fetchval("SELECT count(*) FROM room_schedules") == 0


async def test_an_encrypted_room_has_no_scheduling_and_is_not_offered_it(here: Room, db: TestStore) -> None:
    await db.pool.execute("UPDATE rooms SET encrypted = true WHERE room_id = $1", ROOM)
    usage = await here.ask("!bots")
    assert "schedule" not in usage and "list" in usage
    for line in ('!bots schedule helper every day ask "hi"', "!bots schedules", "!bots unschedule 1"):
        assert "encrypted" in await here.ask(line)
    assert await db.pool.fetchval("SELECT count(*) FROM room_schedules") == 0


async def test_a_room_schedule_fires_once_through_the_tick(here: Room, db: TestStore, published: Registry) -> None:
    await here.ask('!bots schedule helper every day at 08:00 ask "Say good morning."')
    n = await db.pool.fetchval("SELECT id FROM room_schedules")
    now = (await db.pool.fetchval("SELECT now()")).astimezone(dt.UTC)

    async def no_alias(room: str) -> str | None:
        if room.startswith("!"):
            return room  # a room's id is what it is
        raise AssertionError(room)

    # Three days later (down for two of them): the last occurrence fires, once.
    later = now + dt.timedelta(days=3)
    started = await schedule_tick(db, published, later, surface=RoomFacts("localhost"), resolve_room=no_alias, made=(room_schedules,))
    assert len(started) == 1
    run = await db.pool.fetchrow(
        "SELECT bot, place, prompt, asked_by, subject, trigger_event FROM agent_runs WHERE id = $1", started[0])
    assert (run["bot"], run["place"], run["prompt"], run["asked_by"]) == ("helper", ROOM, "Say good morning.", None)
    assert run["subject"] == ALICE  # on its maker's behalf: their ceilings count it
    assert run["trigger_event"].startswith(f"schedule:helper:room:{n}:")
    assert await schedule_tick(db, published, later + dt.timedelta(minutes=1), surface=RoomFacts("localhost"),
                               resolve_room=no_alias, made=(room_schedules,)) == []
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 1


async def test_a_room_schedule_may_not_come_round_too_often_nor_pile_up(here: Room, db: TestStore) -> None:
    body = await here.ask('!bots schedule helper every 5 minutes ask "ping"')
    assert "at most every 15 minutes" in body
    assert await db.pool.fetchval("SELECT count(*) FROM room_schedules") == 0
    for n in range(20):
        await here.ask(f'!bots schedule helper every {15 + n} minutes ask "ping {n}"')
    assert await db.pool.fetchval("SELECT count(*) FROM room_schedules") == 20
    assert "at most 20" in await here.ask('!bots schedule helper every day ask "one more"')
    assert await db.pool.fetchval("SELECT count(*) FROM room_schedules") == 20


async def test_a_room_schedule_asks_only_a_bot_its_maker_may_ask(here: Room, db: TestStore, published: Registry) -> None:
    # The maker loses their standing after setting it: it wakes nothing, and counts as fired.
    await here.ask('!bots schedule helper every day at 08:00 ask "Say good morning."')
    now = (await db.pool.fetchval("SELECT now()")).astimezone(dt.UTC)
    capped = published.bots["helper"].model_copy(update={"audience": parse_audience("user:@someone-else:localhost")})
    registry = Registry.of(published.server_name, [capped], skills=published.skills.values(),
                           strings=published.strings)

    async def no_alias(room: str) -> str | None:
        if room.startswith("!"):
            return room  # a room's id is what it is
        raise AssertionError(room)

    assert await schedule_tick(db, registry, now + dt.timedelta(days=1), surface=RoomFacts("localhost"),
                               resolve_room=no_alias, made=(room_schedules,)) == []
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0


async def test_the_tick_skips_a_withdrawn_bots_room_schedule_and_one_that_no_longer_reads(
        here: Room, db: TestStore, published: Registry, caplog: pytest.LogCaptureFixture) -> None:
    await here.ask('!bots schedule helper every day at 08:00 ask "Say good morning."')
    await here.ask('!bots schedule helper every day at 09:00 ask "Say good day."')
    first, second = [r["id"] for r in await db.pool.fetch("SELECT id FROM room_schedules ORDER BY id")]
    made = await room_schedules(db)
    assert [(m.bot, m.key, m.in_, m.ask) for m in made] == [
        ("helper", f"room:{first}", ROOM, "Say good morning."), ("helper", f"room:{second}", ROOM, "Say good day.")]
    # One no longer reads (a schedule stored by an older release, say): skipped, out loud; the other stays.
    await db.pool.execute("UPDATE room_schedules SET schedule = '{\"every\": \"fortnight-ish\"}' WHERE id = $1", first)
    with caplog.at_level(logging.ERROR):
        made = await room_schedules(db)
    assert [m.key for m in made] == [f"room:{second}"]
    assert any(f"room schedule {first} no longer reads" in r.getMessage() for r in caplog.records)
    now = (await db.pool.fetchval("SELECT now()")).astimezone(dt.UTC)

    async def no_alias(room: str) -> str | None:
        return room

    # Its bot withdrawn: nothing fires, and its clock is left as it was (it wakes when the bot is back).
    others = Registry.of(published.server_name, [b for b in published.bots.values() if b.slug != "helper"],
                         skills=published.skills.values(), strings=published.strings)
    clocks = await db.pool.fetch("SELECT trigger, last_fired_at FROM bot_clock ORDER BY trigger")
    assert await schedule_tick(db, others, now + dt.timedelta(days=2), surface=RoomFacts("localhost"),
                               resolve_room=no_alias, made=(room_schedules,)) == []
    assert await db.pool.fetch("SELECT trigger, last_fired_at FROM bot_clock ORDER BY trigger") == clocks
    assert len(await schedule_tick(db, published, now + dt.timedelta(days=2), surface=RoomFacts("localhost"),
                                   resolve_room=no_alias, made=(room_schedules,))) == 1


async def test_runs_spend_and_cancel(here: Room, db: TestStore) -> None:
    assert await here.ask("!bots runs") == "No runs here yet."
    await here.say("Helper, what is new?", mentions=[HELPER])
    run_id = await db.pool.fetchval("SELECT id FROM agent_runs")
    await db.pool.execute(
        "INSERT INTO agent_steps (run_id, seq, kind, payload, cost_usd, worker) VALUES ($1, 1, 'model', '{}', 0.0125, 'w')",
        run_id)
    runs = await here.ask("!bots runs")
    assert f"run {run_id} · Helper · queued · $0.0125 · " in runs and f"asked by {ALICE}" in runs
    spend = await here.ask("!bots spend")
    assert "Spent here: $0.0125 today, $0.0125 this month." in spend
    assert "Helper: $0.0125 today, $0.0125 this month" in spend
    bad = await here.ask("!bots cancel 99999")
    assert "99999" in bad and f"(allowed: {run_id})" in bad  # what it accepts: the unfinished runs here
    assert await here.ask(f"!bots cancel {run_id}") == f"Run {run_id} is told to stop."
    assert await db.pool.fetchval("SELECT cancel_requested FROM agent_runs WHERE id = $1", run_id) is True
    # A run in another room is not this room's to cancel.
    await db.pool.execute("UPDATE agent_runs SET place = '!elsewhere:localhost', cancel_requested = false")
    assert "none" in await here.ask(f"!bots cancel {run_id}")
    assert await db.pool.fetchval("SELECT cancel_requested FROM agent_runs WHERE id = $1", run_id) is False


async def test_an_add_whose_reply_fails_invites_nobody_and_changes_nothing(
    here: Room, ingest: Dispatcher, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a line decides for the homeserver counts only if acting on the line stood: the settings roll
    back with the failure, and so does the invite."""
    async def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the reply could not be queued")

    monkeypatch.setattr(RoomAdmin, "_reply", broken)
    before = await here.settings()
    _, followups = await here.say("!bots add helper")
    assert followups == []
    assert await here.settings() == before
