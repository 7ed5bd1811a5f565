"""`!commands` on a real PostgreSQL, through ingest: a command asks its bot with the resolved prompt and
keeps its name and arguments on the run; a bad argument is answered naming the field; a person a
command does not admit finds it withheld; `!help` lists what this person may run here."""

from __future__ import annotations

import itertools
from typing import Any

import asyncpg
import pytest

from appservice.matrix.claimers.commands import help_text
from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.power import standing
from engine.content import Registry
from engine.content.commands import command_prompt
from tests.db.test_ingest import pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
ROOM = "!cmds:localhost"
ALICE, BOB, MOD = "@alice:localhost", "@bob:localhost", "@mod:localhost"
HELPER, ECHO, SERVICE = "@bot_helper:localhost", "@bot_echo:localhost", "@summon:localhost"
_ids = itertools.count(1)


def message(body: str, *, sender: str = BOB, mentions: list[str] | None = None, **content: Any) -> dict[str, Any]:
    n = next(_ids)
    c: dict[str, Any] = {"msgtype": "m.text", "body": body, **content}
    if mentions is not None:
        c["m.mentions"] = {"user_ids": mentions}
    return {"event_id": f"$c{n}", "room_id": ROOM, "sender": sender, "type": "m.room.message",
            "origin_server_ts": 1_700_000_000_000 + n, "content": c, "unsigned": {}}


def state(event_type: str, state_key: str, content: dict[str, Any], sender: str = ALICE) -> dict[str, Any]:
    n = next(_ids)
    return {"event_id": f"$s{n}", "room_id": ROOM, "sender": sender, "type": event_type, "state_key": state_key,
            "origin_server_ts": 1_700_000_000_000 + n, "content": content}


def member(user_id: str, name: str) -> dict[str, Any]:
    return state("m.room.member", user_id, {"membership": "join", "displayname": name}, sender=user_id)


ROOM_STATE = [
    state("m.room.create", "", {"room_version": "10", "creator": ALICE}),
    state("m.room.power_levels", "", {"users": {ALICE: 100, MOD: 50}, "users_default": 0}),
    member(ALICE, "Alice"), member(BOB, "Bob"), member(MOD, "Mo"), member(HELPER, "Helper"),
    member(ECHO, "Echo"), member(SERVICE, "summon"),
]


async def feed(ingest: Dispatcher, db: TestStore, events: list[dict[str, Any]]) -> None:
    await ingest.transaction(f"t{next(_ids)}", events)


async def runs(db: TestStore) -> list[asyncpg.Record]:
    return list(await db.pool.fetch("SELECT bot, asked_by, prompt, context, trigger_event FROM agent_runs ORDER BY id"))


async def replies(db: TestStore) -> list[asyncpg.Record]:
    return list(await db.pool.fetch("SELECT txn_id, sender, content FROM outbox ORDER BY id"))


@pytest.fixture
async def ingest(db: TestStore, published: Registry) -> Dispatcher:
    made = pipeline(db, published)
    await feed(made, db, ROOM_STATE)
    return made


async def test_a_command_asks_its_bot_with_the_resolved_prompt_and_keeps_its_arguments(
        ingest: Dispatcher, db: TestStore, published: Registry) -> None:
    said = message("!summarise since=2d")
    await feed(ingest, db, [message("we talked about the budget"), said])
    [run] = await runs(db)
    assert (run["bot"], run["asked_by"], run["trigger_event"]) == ("helper", BOB, said["event_id"])
    assert run["prompt"] == "!summarise since=2d"  # what the person said; the worker resolves what it asks
    asks = command_prompt(published.commands, published.strings, run["context"])
    assert asks is not None
    assert asks.startswith("Read what was said in this room over the last 2 days and write a short catch-up")
    assert run["context"]["command"] == {"name": "summarise", "args": {"since": "2d", "length": "short"}}
    assert run["context"]["kind"] == "timeline"  # the conversation rides along as for a mention
    assert await replies(db) == []


@pytest.mark.parametrize(("body", "args"), [
    ("!summarise", {"since": "1d", "length": "short"}),
    ("!summarise 1 week detailed", {"since": "1w", "length": "detailed"}),
    ("/summarise length=DETAILED 36h", {"since": "1d 12h", "length": "detailed"}),
    ("Helper: !summarise 3h", {"since": "3h", "length": "short"}),
])
async def test_arguments_by_position_name_and_default(ingest: Dispatcher, db: TestStore, body: str, args: dict[str, str]) -> None:
    await feed(ingest, db, [message(body)])
    [run] = await runs(db)
    assert run["context"]["command"]["args"] == args


async def test_an_msc4332_block_names_the_command_and_its_values(ingest: Dispatcher, db: TestStore) -> None:
    block = {"syntax": "summarise {since} {length}", "variables": {"since": "1 week", "length": "detailed"}}
    await feed(ingest, db, [message("!summarise 1 week detailed", mentions=[HELPER], **{"m.bot.command": block})])
    [run] = await runs(db)
    assert run["context"]["command"]["args"] == {"since": "1w", "length": "detailed"}


async def test_a_bad_argument_is_answered_by_the_bot_naming_the_field(ingest: Dispatcher, db: TestStore) -> None:
    said = message("!summarise since=banana")
    await feed(ingest, db, [said])
    assert await runs(db) == []
    [reply] = await replies(db)
    assert (reply["txn_id"], reply["sender"]) == (f"summon.cmd.{said['event_id']}", HELPER)
    content = reply["content"]
    assert "How far back" in content["body"] and "a span like 2d, 48h or 1 week" in content["body"]
    assert "banana" in content["body"]
    assert content["msgtype"] == "m.notice"
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": said["event_id"]}}
    assert content["m.mentions"] == {"user_ids": [BOB]}


async def test_a_bad_argument_in_a_thread_is_answered_in_it(ingest: Dispatcher, db: TestStore) -> None:
    root = message("a thread")
    said = message("!summarise since=2d lots", **{"m.relates_to": {"rel_type": "m.thread", "event_id": root["event_id"]}})
    await feed(ingest, db, [root, said])
    [reply] = await replies(db)
    rel = reply["content"]["m.relates_to"]
    assert (rel["rel_type"], rel["event_id"], rel["m.in_reply_to"]) == ("m.thread", root["event_id"], {"event_id": said["event_id"]})
    assert "How long" in reply["content"]["body"] and "one of short, detailed" in reply["content"]["body"]


async def test_an_unknown_field_lists_the_fields(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [message("!summarise topic=budget")])
    [reply] = await replies(db)
    assert "since (How far back), length (How long)" in reply["content"]["body"]


async def test_a_moderators_command_is_withheld_from_a_member(ingest: Dispatcher, db: TestStore,
                                                              published: Registry) -> None:
    await feed(ingest, db, [message("!triage")])
    assert await runs(db) == [] and await replies(db) == []  # as if it did not exist
    await feed(ingest, db, [message("!triage 2d", sender=MOD)])
    [run] = await runs(db)
    assert (run["bot"], run["asked_by"]) == ("helper", MOD)
    assert "over the last 2 days" in (command_prompt(published.commands, published.strings, run["context"]) or "")


async def test_a_word_that_is_no_command_is_just_a_line(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [message("!nothing here")])
    assert await runs(db) == [] and await replies(db) == []
    # …unless it names a bot: then it is a mention like any other.
    await feed(ingest, db, [message("!nothing here, Helper?", mentions=[HELPER])])
    [run] = await runs(db)
    assert (run["bot"], run["prompt"]) == ("helper", "!nothing here, Helper?")
    assert "command" not in run["context"]


async def test_a_command_said_to_another_bot_is_that_bots_line(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [message("Echo: !summarise 2d", mentions=[ECHO])])
    [run] = await runs(db)
    assert (run["bot"], run["prompt"]) == ("echo", "Echo: !summarise 2d")


async def test_a_command_whose_bot_is_not_in_the_room_is_just_a_line(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [state("m.room.member", HELPER, {"membership": "leave"}, sender=HELPER),
                            message("!summarise")])
    assert await runs(db) == [] and await replies(db) == []


def body_of(reply: asyncpg.Record) -> str:
    return str(reply["content"]["body"])


async def test_help_lists_what_this_person_may_run_here(ingest: Dispatcher, db: TestStore) -> None:
    member_asks, mod_asks = message("!help"), message("!help", sender=MOD)
    await feed(ingest, db, [member_asks, mod_asks])
    assert await runs(db) == []
    for_member, for_mod = await replies(db)
    assert (for_member["sender"], for_member["txn_id"]) == (SERVICE, f"summon.cmd.{member_asks['event_id']}")
    assert "!summarise" in body_of(for_member) and "!triage" not in body_of(for_member)
    assert "!summarise" in body_of(for_mod) and "!triage" in body_of(for_mod)
    assert "since: How far back — a span like 2d, 48h or 1 week (default 1d)" in body_of(for_member)
    assert "length: How long — one of short, detailed (default short)" in body_of(for_member)
    assert "Catch up on what has been said here" in body_of(for_member)
    # The bots they may ask here: Helper is for anyone, Echo for members (both are members).
    assert "Bots you can ask here (mention one): Echo, Helper" in body_of(for_member)


async def test_help_is_answered_by_a_bot_when_the_service_is_not_in_the_room(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [state("m.room.member", SERVICE, {"membership": "leave"}, sender=SERVICE),
                            message("!help")])
    [reply] = await replies(db)
    assert reply["sender"] == ECHO  # the first of our bots here, by slug


async def test_help_with_no_provider_lists_no_bots_and_says_why(ingest: Dispatcher, db: TestStore) -> None:
    await db.pool.execute("DELETE FROM provider_status")
    await feed(ingest, db, [message("!help")])
    [reply] = await replies(db)
    assert "No model provider is available right now" in body_of(reply)
    assert "Helper" not in body_of(reply) and "!summarise" not in body_of(reply)


def test_help_text_with_nothing_to_offer(published: Registry) -> None:
    facts = standing(BOB, {}, None, "10").facts("localhost", is_member=True)
    assert help_text(published, facts, {BOB: "Bob"}, usable=True) == "There is nothing here you can run or ask."
