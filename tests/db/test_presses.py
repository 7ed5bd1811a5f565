"""A bot's choices on a real PostgreSQL (SPEC §4): the offer recorded when the answer is stored, a press
taken once of many at the same moment, the asker's bare number, a press on a spent offer, and polls."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from appservice.matrix.delivery.offers import KEYCAPS
from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.surface import MatrixSurface
from appservice.matrix.tables.offers import OfferTables
from appservice.matrix.tables.outbox import OutboxTables
from appservice.matrix.tables.rooms import RoomTables
from engine.clock import SystemClock
from engine.content import Registry
from engine.surface import Answered, RunInfo
from engine.tasks import TaskGroup
from tests.db.test_ingest import pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
ROOM = "!choices:localhost"
ALICE = "@alice:localhost"
HELPER = "@bot_helper:localhost"
OFFER = "Which copy is it?\n\n- The paperback\n- The hardcover\n- Read the delivery policy -> https://example.org/refunds"
_ids = itertools.count(1)


def _event(event_type: str, sender: str, content: dict[str, Any]) -> dict[str, Any]:
    n = next(_ids)
    return {"event_id": f"$p{n}", "room_id": ROOM, "sender": sender, "type": event_type,
            "origin_server_ts": 1_700_000_000_000 + n, "content": content, "unsigned": {}}


def keycap(target: str, n: int, sender: str) -> dict[str, Any]:
    return _event("m.reaction", sender, {"m.relates_to": {"rel_type": "m.annotation", "event_id": target,
                                                          "key": KEYCAPS[n - 1]}})


def said(body: str, sender: str, *, reply_to: str | None = None, thread: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": "m.text", "body": body}
    if thread is not None:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread}
    elif reply_to is not None:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return _event("m.room.message", sender, content)


async def feed(ingest: Dispatcher, db: TestStore, events: list[dict[str, Any]]) -> None:
    await ingest.transaction(f"txn{next(_ids)}", events)


@pytest.fixture
def ingest(db: TestStore, published: Registry) -> Dispatcher:
    return pipeline(db, published)


@pytest.fixture
def surface(db: TestStore, published: Registry) -> MatrixSurface:
    return MatrixSurface(db, None, lambda: published, TaskGroup("test"), SystemClock(),  # type: ignore[arg-type]
                         server_name="localhost")


async def answered(db: TestStore, surface: MatrixSurface, text: str, *, thread: str | None = None,
                   asker: str = ALICE) -> tuple[int, str]:
    """A finished run of Helper's whose answer is ``text``, delivered and sent: (run id, answer event id)."""
    await db.of(RoomTables).ensure(ROOM)
    trigger = f"$ask{next(_ids)}"
    run_id = await db.runs.insert(
        bot="helper", surface="rooms", place=ROOM, thread=thread, trigger_event=trigger, asked_by=asker,
        subject=asker, prompt="which?", context={"kind": "timeline", "lines": []}, limits={"steps": 8, "spend": 0.25, "minutes": 5}, max_attempts=3)
    assert run_id is not None
    await db.pool.execute("UPDATE agent_runs SET status = 'done', answer = $2 WHERE id = $1", run_id, text)
    run = RunInfo(id=run_id, bot="helper", surface="rooms", place=ROOM, thread=thread, trigger_event=trigger,
                  asked_by=asker)
    async with db.transaction("finish") as tx:
        await surface.deliver(tx, run, Answered(text))
    return run_id, await sent(db, f"summon.run{run_id}.answer")


async def sent(db: TestStore, txn: str) -> str:
    """The outbox sent the message queued under ``txn``: it has an event id now."""
    row = await db.pool.fetchrow("SELECT id FROM outbox WHERE txn_id = $1", txn)
    assert row is not None, txn
    event_id = f"$sent.{txn}"
    await db.of(OutboxTables).sent(row["id"], event_id)
    return event_id


async def outbox(db: TestStore, like: str) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.pool.fetch(
        "SELECT txn_id, event_type, content, of_txn, sender FROM outbox WHERE txn_id LIKE $1 ORDER BY id", like)]


async def presses(db: TestStore) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.pool.fetch(
        "SELECT chooser, choice, how, event_id, taken, run_id FROM bot_choices ORDER BY id")]


async def runs_asked(db: TestStore, prompt: str) -> list[dict[str, Any]]:
    return [dict(r) for r in await db.pool.fetch(
        "SELECT id, asked_by, prompt, trigger_event, thread FROM agent_runs WHERE prompt = $1", prompt)]


async def test_an_offer_is_recorded_when_the_answer_is_stored_and_shown_numbered_with_keycaps(
        db: TestStore, surface: MatrixSurface) -> None:
    run_id, answer = await answered(db, surface, OFFER)
    offer = await db.of(OfferTables).of_run(run_id)
    assert offer is not None
    assert offer.words == "Which copy is it?"
    assert [c["label"] for c in offer.choices] == ["The paperback", "The hardcover"]
    assert offer.links == [{"label": "Read the delivery policy", "url": "https://example.org/refunds"}]
    assert (offer.style, offer.asked_by, offer.taken_at) == ("reactions", ALICE, None)
    assert (offer.answer_txn, offer.answer_event) == (f"summon.run{run_id}.answer", answer)
    queued = await outbox(db, f"summon.run{run_id}.%")
    body = queued[0]["content"]["body"]
    assert body.startswith("Which copy is it?\n\n1. The paperback\n2. The hardcover")
    assert "[Read the delivery policy](https://example.org/refunds)" in body
    assert "<ol>" in queued[0]["content"]["formatted_body"]
    keys = [(r["event_type"], r["of_txn"], r["content"]["m.relates_to"]) for r in queued[1:]]
    assert keys == [("m.reaction", f"summon.run{run_id}.answer", {"rel_type": "m.annotation", "key": k})
                    for k in KEYCAPS[:2]]
    assert all(r["sender"] == HELPER for r in queued)

    # An answer without choices is unchanged, and offers nothing.
    plain, _ = await answered(db, surface, "- just\n- a list")
    assert await db.of(OfferTables).of_run(plain) is None
    assert [r["content"]["body"] for r in await outbox(db, f"summon.run{plain}.%")] == ["- just\n- a list"]


async def test_twenty_presses_at_once_one_is_taken_the_rest_are_told_it_is_gone(
        ingest: Dispatcher, db: TestStore, surface: MatrixSurface, published: Registry) -> None:
    run_id, answer = await answered(db, surface, OFFER)
    people = [f"@p{n}:localhost" for n in range(20)]
    await feed(ingest, db, [_event("m.room.member", p, {"membership": "join", "displayname": f"P{n}"})
                            | {"state_key": p} for n, p in enumerate(people)])
    reactions = [keycap(answer, 1 + n % 2, p) for n, p in enumerate(people)]
    await asyncio.gather(*(feed(ingest, db, [r]) for r in reactions))
    await feed(ingest, db, [reactions[0]])  # delivered again: still one press

    offer = await db.of(OfferTables).of_run(run_id)
    assert offer is not None and offer.taken_by in people
    rows = await presses(db)
    assert len(rows) == 20
    winners = [r for r in rows if r["taken"]]
    assert len(winners) == 1 and winners[0]["chooser"] == offer.taken_by
    assert winners[0]["choice"] == offer.taken_choice
    label = ["The paperback", "The hardcover"][offer.taken_choice - 1]
    runs = await runs_asked(db, label)
    assert len(runs) == 1 and runs[0]["id"] == winners[0]["run_id"]
    assert (runs[0]["asked_by"], runs[0]["trigger_event"]) == (offer.taken_by, winners[0]["event_id"])

    gone = await outbox(db, "summon.gone.%")
    assert len(gone) == 19
    name = f"P{people.index(offer.taken_by)}"
    words = published.strings.get("choices", "gone")
    assert words
    assert gone[0]["content"]["body"] == words.format(bot="Helper", choice=label, name=name)
    assert {g["content"]["m.mentions"]["user_ids"][0] for g in gone} == set(people) - {offer.taken_by}

    # The spent set is marked: the answer edited, the keycaps taken away.
    spent = await outbox(db, f"summon.run{run_id}.answer.spent")
    assert len(spent) == 1 and spent[0]["of_txn"] == f"summon.run{run_id}.answer"
    assert f"✅ {offer.taken_choice}. {label} — taken by {name}" in spent[0]["content"]["body"]
    removed = await outbox(db, f"summon.run{run_id}.key%.gone")
    assert [(r["event_type"], r["of_txn"]) for r in removed] == [
        ("m.room.redaction", f"summon.run{run_id}.key{k}") for k in (1, 2)]

    # The run a keycap summoned answers under the offer, not to the reaction.
    pressed = runs[0]["id"]
    async with db.transaction("finish") as tx:
        await surface.deliver(tx, RunInfo(id=pressed, bot="helper", surface="rooms", place=ROOM, thread=None,
                                            trigger_event=winners[0]["event_id"], asked_by=offer.taken_by),
                              Answered("Paperbacks ship tomorrow."))
    reply = (await outbox(db, f"summon.run{pressed}.answer"))[0]["content"]
    assert reply["m.relates_to"] == {"m.in_reply_to": {"event_id": answer}}


async def test_a_bare_number_is_a_press_only_from_the_asker(
        ingest: Dispatcher, db: TestStore, surface: MatrixSurface) -> None:
    _, answer = await answered(db, surface, OFFER)
    bob_says = said("2", "@bob:localhost", reply_to=answer)
    await feed(ingest, db, [bob_says])
    assert await presses(db) == []
    assert await db.pool.fetchval("SELECT count(*) FROM room_events WHERE event_id = $1", bob_says["event_id"]) == 1
    assert await runs_asked(db, "The hardcover") == []

    alice_says = said("2", ALICE, reply_to=answer)
    await feed(ingest, db, [alice_says])
    [press] = await presses(db)
    assert (press["chooser"], press["choice"], press["how"], press["taken"]) == (ALICE, 2, "number", True)
    [run] = await runs_asked(db, "The hardcover")
    assert (run["asked_by"], run["trigger_event"]) == (ALICE, alice_says["event_id"])
    # The asker's number summoned one run: a number is not also read as a mention or a command.
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", alice_says["event_id"]) == 1


async def test_a_bare_number_in_the_offers_thread(ingest: Dispatcher, db: TestStore, surface: MatrixSurface) -> None:
    root = said("which copy?", ALICE)
    await feed(ingest, db, [root])
    await answered(db, surface, OFFER, thread=root["event_id"])
    elsewhere = said("1", ALICE)  # the main timeline is not the offer's thread
    await feed(ingest, db, [elsewhere])
    assert await presses(db) == []
    in_thread = said("1.", ALICE, thread=root["event_id"])
    await feed(ingest, db, [in_thread])
    [run] = await runs_asked(db, "The paperback")
    assert (run["trigger_event"], run["thread"]) == (in_thread["event_id"], root["event_id"])


async def test_a_press_after_the_offer_is_spent_is_recorded_and_told(
        ingest: Dispatcher, db: TestStore, surface: MatrixSurface) -> None:
    _, answer = await answered(db, surface, OFFER)
    await feed(ingest, db, [said("1", ALICE, reply_to=answer)])
    late = keycap(answer, 2, "@bob:localhost")
    await feed(ingest, db, [late])
    rows = await presses(db)
    assert [(r["chooser"], r["how"], r["taken"]) for r in rows] == [(ALICE, "number", True),
                                                                   ("@bob:localhost", "reaction", False)]
    assert len(await runs_asked(db, "The paperback")) == 1
    assert await runs_asked(db, "The hardcover") == []
    [gone] = await outbox(db, "summon.gone.%")
    assert gone["content"]["m.mentions"] == {"user_ids": ["@bob:localhost"]}
    assert "The paperback" in gone["content"]["body"]
    # The asker pressing again what they took is not told anything.
    await feed(ingest, db, [keycap(answer, 1, ALICE)])
    assert len(await outbox(db, "summon.gone.%")) == 1


async def test_our_own_keycaps_and_keycaps_elsewhere_are_not_presses(
        ingest: Dispatcher, db: TestStore, surface: MatrixSurface) -> None:
    _, answer = await answered(db, surface, OFFER)
    await feed(ingest, db, [keycap(answer, 1, HELPER), keycap("$not-an-offer", 1, ALICE),
                            keycap(answer, 3, ALICE)])  # three: the offer has two choices
    assert await presses(db) == []
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE prompt LIKE 'The %'") == 0


async def test_a_refused_press_leaves_the_offer_to_be_had(
        ingest: Dispatcher, db: TestStore, surface: MatrixSurface) -> None:
    run_id, answer = await answered(db, surface, OFFER)
    await db.pool.execute("UPDATE rooms SET encrypted = true WHERE room_id = $1", ROOM)
    await feed(ingest, db, [keycap(answer, 1, "@bob:localhost")])
    offer = await db.of(OfferTables).of_run(run_id)
    assert offer is not None and offer.taken_at is None
    assert [r["taken"] for r in await presses(db)] == [False]


@pytest.mark.parametrize("prefix", ["unstable", "stable"])
async def test_a_room_that_chooses_polls_gets_a_poll_and_a_vote_takes_it(
        prefix: str, ingest: Dispatcher, db: TestStore, surface: MatrixSurface, published: Registry) -> None:
    await db.of(RoomTables).ensure(ROOM)
    await db.pool.execute("""UPDATE rooms SET settings = '{"choices": "poll"}' WHERE room_id = $1""", ROOM)
    run_id, _answer = await answered(db, surface, OFFER)
    queued = await outbox(db, f"summon.run{run_id}.%")
    assert [r["event_type"] for r in queued] == ["m.room.message", "org.matrix.msc3381.poll.start"]
    poll = queued[1]["content"]
    start = poll["org.matrix.msc3381.poll.start"]
    assert start["question"]["org.matrix.msc1767.text"] == "Which copy is it?"
    assert [(a["id"], a["org.matrix.msc1767.text"]) for a in start["answers"]] == [
        ("1", "The paperback"), ("2", "The hardcover")]
    fallback = "Which copy is it?\n1. The paperback\n2. The hardcover"
    assert (poll["org.matrix.msc1767.text"], poll["body"]) == (fallback, fallback)
    poll_event = await sent(db, f"summon.run{run_id}.poll")

    def vote(sender: str, answer: str) -> dict[str, Any]:
        rel = {"rel_type": "m.reference", "event_id": poll_event}
        if prefix == "stable":
            return _event("m.poll.response", sender, {"m.relates_to": rel, "m.selections": [answer]})
        return _event("org.matrix.msc3381.poll.response", sender,
                      {"m.relates_to": rel, "org.matrix.msc3381.poll.response": {"answers": [answer]}})

    await feed(ingest, db, [vote("@bob:localhost", "2"), vote("@carol:localhost", "1")])
    assert [(r["chooser"], r["how"], r["taken"]) for r in await presses(db)] == [
        ("@bob:localhost", "vote", True), ("@carol:localhost", "vote", False)]
    [run] = await runs_asked(db, "The hardcover")
    assert run["asked_by"] == "@bob:localhost"
    assert len(await outbox(db, "summon.gone.%")) == 1
    [end] = await outbox(db, f"summon.run{run_id}.poll.end")
    assert (end["event_type"], end["of_txn"]) == ("org.matrix.msc3381.poll.end", f"summon.run{run_id}.poll")
    assert end["content"]["m.relates_to"] == {"rel_type": "m.reference"}
    assert "org.matrix.msc3381.poll.end" in end["content"]
    assert await outbox(db, f"summon.run{run_id}.key%") == []
