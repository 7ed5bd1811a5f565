"""What a bot is given, on a real PostgreSQL: the thread or the main timeline, only what the asker could see
(history visibility and membership at each line), within a token budget, in the room's display names; and
the etiquette around it (notices and bots never summon, a thread is answered only when asked, a second
mention joins the run still working)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from appservice.matrix.asking.context import ContextSettings, ThreadFetch
from appservice.matrix.dispatch import Dispatcher
from appservice.matrix.errors import MatrixError
from engine.content import Registry
from engine.core.prompt import opening, said_since
from tests.book import BOOK
from tests.db.test_ingest import pipeline
from tests.store import TestStore

pytestmark = pytest.mark.db
ROOM = "!ctx:localhost"
HELPER = "@bot_helper:localhost"
ALICE, BOB = "@alice:localhost", "@bob:localhost"
_n = itertools.count(1)


def _ts() -> int:
    return 1_700_000_000_000 + next(_n) * 10


def say(body: str, sender: str = ALICE, *, ask: bool = False, thread: str | None = None,
        msgtype: str = "m.text", event_id: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": msgtype, "body": body}
    if ask:
        content["m.mentions"] = {"user_ids": [HELPER]}
        BOOK.say(body, [{"text": "ok"}])
    if thread:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread}
    return {"event_id": event_id or f"$m{next(_n)}", "room_id": ROOM, "sender": sender, "type": "m.room.message",
            "origin_server_ts": _ts(), "content": content}


def member(user: str, membership: str, name: str | None = None) -> dict[str, Any]:
    content: dict[str, Any] = {"membership": membership}
    if name:
        content["displayname"] = name
    return {"event_id": f"$member{next(_n)}", "room_id": ROOM, "sender": user, "type": "m.room.member",
            "state_key": user, "origin_server_ts": _ts(), "content": content}


def visibility(value: str) -> dict[str, Any]:
    return {"event_id": f"$vis{next(_n)}", "room_id": ROOM, "sender": ALICE, "type": "m.room.history_visibility",
            "state_key": "", "origin_server_ts": _ts(), "content": {"history_visibility": value}}


def room_name(value: str) -> dict[str, Any]:
    return {"event_id": f"$name{next(_n)}", "room_id": ROOM, "sender": ALICE, "type": "m.room.name",
            "state_key": "", "origin_server_ts": _ts(), "content": {"name": value}}


async def feed(ingest: Dispatcher, db: TestStore, events: list[dict[str, Any]]) -> None:
    await ingest.transaction(f"t{next(_n)}", events)


async def context_of(db: TestStore, event_id: str) -> dict[str, Any]:
    run = await db.pool.fetchrow("SELECT context FROM agent_runs WHERE trigger_event = $1", event_id)
    assert run is not None, f"no run for {event_id}"
    context: dict[str, Any] = run["context"]
    return context


def said(context: dict[str, Any]) -> list[str]:
    return [line["said"] for line in context["lines"]]


MakeIngest = Callable[..., Dispatcher]


@pytest.fixture
def make_ingest(db: TestStore, published: Registry) -> MakeIngest:
    def make(**wiring: Any) -> Dispatcher:
        return pipeline(db, published, **wiring)
    return make


@pytest.fixture
def ingest(make_ingest: MakeIngest) -> Dispatcher:
    return make_ingest()


def opened(visible: str = "shared") -> list[dict[str, Any]]:
    """A room alice made, with its history visibility, and the helper in it (made first: what is said
    after it is added with ``opened() + [...]``, so the times run in order)."""
    return [member(ALICE, "join", "Alice"), visibility(visible), member(HELPER, "join", "Helper")]


# --- history visibility ---------------------------------------------------------------------------


async def test_joined_a_later_joiner_sees_nothing_from_before_their_join(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [*opened("joined"), say("before bob"), member(BOB, "join", "Bob"), say("after bob")])
    asked = say("Helper, what did I miss?", BOB, ask=True)
    alice_asks = say("Helper, and for me?", ask=True)
    await feed(ingest, db, [asked, alice_asks])
    bob = await context_of(db, asked["event_id"])
    assert "before bob" not in said(bob)
    assert said(bob)[-3:] == ["Bob joined.", "after bob", "Helper, what did I miss?"]
    assert "before bob" in said(await context_of(db, alice_asks["event_id"]))


async def test_invited_sees_from_the_invite(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [*opened("invited"), say("before the invite"), member(BOB, "invite"),
                            say("while invited"), member(BOB, "join", "Bob"), say("after joining")])
    asked = say("Helper?", BOB, ask=True)
    await feed(ingest, db, [asked])
    lines = said(await context_of(db, asked["event_id"]))
    assert "before the invite" not in lines
    assert ["while invited", "Bob joined.", "after joining"] == lines[-4:-1]


@pytest.mark.parametrize("visible", ["shared", "world_readable"])
async def test_shared_and_world_readable_show_everything(ingest: Dispatcher, db: TestStore, visible: str) -> None:
    await feed(ingest, db, [*opened(visible), say("long before bob"), member(BOB, "join", "Bob")])
    asked = say("Helper?", BOB, ask=True)
    await feed(ingest, db, [asked])
    assert "long before bob" in said(await context_of(db, asked["event_id"]))


@pytest.mark.parametrize(("visible", "sees_gap"), [("joined", False), ("invited", False), ("shared", True)])
async def test_a_leave_gap_is_hidden_unless_history_is_shared(ingest: Dispatcher, db: TestStore, visible: str,
                                                              sees_gap: bool) -> None:
    await feed(ingest, db, [*opened(visible), member(BOB, "join", "Bob"), say("while bob was here"),
                            member(BOB, "leave"), say("while bob was away"), member(BOB, "join", "Bob"),
                            say("bob is back")])
    asked = say("Helper?", BOB, ask=True)
    await feed(ingest, db, [asked])
    lines = said(await context_of(db, asked["event_id"]))
    assert "while bob was here" in lines
    assert "bob is back" in lines
    assert ("while bob was away" in lines) is sees_gap


async def test_visibility_is_read_as_it_was_at_each_line(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [*opened("shared"), say("said while shared"), visibility("joined"),
                            say("said while joined-only"), member(BOB, "join", "Bob"), visibility("shared"),
                            say("shared again")])
    asked = say("Helper?", BOB, ask=True)
    await feed(ingest, db, [asked])
    lines = said(await context_of(db, asked["event_id"]))
    assert "said while shared" in lines
    assert "said while joined-only" not in lines
    assert "shared again" in lines


MALLORY = "@mallory:localhost"  # the stamp below is what a remote server, or an appservice's ?ts=, may say


async def test_a_backdated_join_sees_nothing_from_before_it_arrived(ingest: Dispatcher, db: TestStore) -> None:
    """origin_server_ts is what the sender's server says (an appservice's ?ts= too): a join stamped as if it came
    first is still placed where it arrived, so under `joined` it opens nothing said before it."""
    await feed(ingest, db, [*opened("joined"), say("said before mallory came")])
    join = {**member(MALLORY, "join", "Mallory"), "origin_server_ts": 1}  # "I was here all along"
    await feed(ingest, db, [join, say("said after mallory came")])
    asked = say("Helper, what did I miss?", MALLORY, ask=True)
    await feed(ingest, db, [asked])
    lines = said(await context_of(db, asked["event_id"]))
    assert "said before mallory came" not in lines
    assert lines[-2:] == ["said after mallory came", "Helper, what did I miss?"]


async def test_a_lines_own_clock_does_not_move_it(ingest: Dispatcher, db: TestStore) -> None:
    """A context reads in the order the lines were heard, up to the asking line: a line stamped in the future is
    neither cut off nor moved."""
    early = {**say("said first, stamped years ahead"), "origin_server_ts": 4_000_000_000_000}
    await feed(ingest, db, [*opened(), early, say("said second")])
    asked = say("Helper, sum it up?", ask=True)
    await feed(ingest, db, [asked])
    assert said(await context_of(db, asked["event_id"]))[-3:] == [
        "said first, stamped years ahead", "said second", "Helper, sum it up?"]


async def test_a_rename_is_not_a_joining_and_leaving_is_told(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob"), member(BOB, "join", "Robert"), say("hi"),
                            member(BOB, "leave")])
    asked = say("Helper?", ask=True)
    await feed(ingest, db, [asked])
    lines = said(await context_of(db, asked["event_id"]))
    assert lines.count("Bob joined.") == 1
    assert "Robert joined." not in lines
    assert "Robert left." in lines


# --- thread and timeline --------------------------------------------------------------------------


async def test_a_thread_gets_its_root_and_replies_and_the_timeline_does_not(ingest: Dispatcher, db: TestStore) -> None:
    root = say("Which laptop should I buy?")
    await feed(ingest, db, [*opened(), say("lunch?"), root, say("a ThinkPad", BOB, thread=root["event_id"]),
                            say("a MacBook Air", thread=root["event_id"]), say("anyone for coffee?")])
    in_thread = say("@Helper which are best for newbs?", ask=True, thread=root["event_id"])
    await feed(ingest, db, [in_thread])
    thread = await context_of(db, in_thread["event_id"])
    assert thread["kind"] == "thread"
    assert said(thread) == ["Which laptop should I buy?", "a ThinkPad", "a MacBook Air",
                            "@Helper which are best for newbs?"]
    assert "incomplete" not in thread

    in_room = say("Helper, what are we talking about?", ask=True)
    await feed(ingest, db, [in_room])
    timeline = await context_of(db, in_room["event_id"])
    assert timeline["kind"] == "timeline"
    assert "Which laptop should I buy?" in said(timeline)
    assert "a ThinkPad" not in said(timeline)
    assert "@Helper which are best for newbs?" not in said(timeline)
    assert said(timeline)[-2:] == ["anyone for coffee?", "Helper, what are we talking about?"]


async def test_the_framing_words_and_display_names_come_from_the_room(ingest: Dispatcher, db: TestStore) -> None:
    bridged = "@telegram_123:localhost"
    await feed(ingest, db, [*opened(), room_name("Laptops"), member(bridged, "join", "Tom (Telegram)"),
                            say("hello from the bridge", bridged)])
    asked = say("Helper, who said hello?", ask=True)
    await feed(ingest, db, [asked])
    context = await context_of(db, asked["event_id"])
    assert context["header"] == "What was said in Laptops, oldest first:"
    names = {line["said"]: line["name"] for line in context["lines"]}
    assert names["hello from the bridge"] == "Tom (Telegram)"
    assert names["Helper, who said hello?"] == "Alice"
    text = opening(context, "Helper, who said hello?")[0].text
    assert text.startswith("What was said in Laptops, oldest first:\n\n")
    assert "Tom (Telegram) joined.\nTom (Telegram): hello from the bridge\nAlice: Helper, who said hello?" in text


async def test_the_budget_keeps_the_newest_lines(make_ingest: MakeIngest, db: TestStore) -> None:
    ingest = make_ingest(context=ContextSettings(tokens=60))
    words = [f"line number {n} " + "x" * 40 for n in range(20)]
    await feed(ingest, db, opened() + [say(w) for w in words])
    asked = say("Helper, sum it up", ask=True)
    await feed(ingest, db, [asked])
    context = await context_of(db, asked["event_id"])
    lines = said(context)
    assert lines[-1] == "Helper, sum it up"
    assert lines[:-1] == words[-len(lines) + 1:]
    assert 1 < len(lines) < 10
    assert context["dropped"] > 10
    assert sum(len(line["name"]) + len(line["said"]) + 4 for line in context["lines"]) <= 60 * 4


async def test_a_thread_over_budget_keeps_its_root(make_ingest: MakeIngest, db: TestStore) -> None:
    ingest = make_ingest(context=ContextSettings(tokens=50))
    root = say("The question the thread is about")
    await feed(ingest, db, [*opened(), root,
                            *(say(f"reply {n} " + "y" * 30, thread=root["event_id"]) for n in range(10))])
    asked = say("Helper?", ask=True, thread=root["event_id"])
    await feed(ingest, db, [asked])
    lines = said(await context_of(db, asked["event_id"]))
    assert lines[0] == "The question the thread is about"
    assert lines[-1] == "Helper?"
    assert lines[-2].startswith("reply 9 ")
    assert not any(line.startswith("reply 0 ") for line in lines)


# --- a thread that predates us ------------------------------------------------------------------


def fetcher(events: list[dict[str, Any]] | None = None, *, fails: bool = False, hangs: bool = False) -> ThreadFetch:
    import asyncio

    async def fetch(room_id: str, root: str, *, as_user: str, limit: int) -> list[dict[str, Any]]:
        assert as_user == HELPER
        if hangs:
            await asyncio.sleep(30)
        if fails:
            raise MatrixError("403 M_FORBIDDEN")
        return events or []
    return fetch


async def test_a_thread_from_before_we_came_is_fetched_and_kept(make_ingest: MakeIngest, db: TestStore) -> None:
    root = say("Old question, from before the bot came", event_id="$oldroot")
    reply = say("an old answer", BOB, thread="$oldroot")
    gone = {**say("redacted reply", thread="$oldroot"), "unsigned": {"redacted_because": {}}}
    edited = say("teh typo", thread="$oldroot")
    edited["unsigned"] = {"m.relations": {"m.replace": {
        "event_id": "$edit", "sender": ALICE, "type": "m.room.message", "origin_server_ts": _ts(),
        "content": {"msgtype": "m.text", "body": "* the typo", "m.new_content": {"msgtype": "m.text", "body": "the typo"},
                    "m.relates_to": {"rel_type": "m.replace", "event_id": edited["event_id"]}}}}}
    ingest = make_ingest(thread_fetch=fetcher([root, reply, gone, edited]))
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob")])
    # The state we read after joining says when everyone joined; the old lines are older than that.
    for event in (reply, gone, edited):
        event["origin_server_ts"] = root["origin_server_ts"] + 1
    asked = say("Helper, remind me?", ask=True, thread="$oldroot")
    await feed(ingest, db, [asked])
    context = await context_of(db, asked["event_id"])
    assert said(context) == ["Old question, from before the bot came", "an old answer", "the typo", "Helper, remind me?"]
    assert "incomplete" not in context
    assert await db.pool.fetchval("SELECT count(*) FROM room_events WHERE event_id = '$oldroot'") == 1
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 1  # fetched lines summon nothing


async def test_the_asking_line_the_homeserver_lists_in_the_thread_still_summons(make_ingest: MakeIngest,
                                                                              db: TestStore) -> None:
    # A real homeserver's thread listing already holds the line that asks (and any later line of the same
    # transaction): those are stored by their own handler, as news, so they still act.
    root = say("Old question, from before the bot came", event_id="$oldroot3")
    asked = say("Helper, settle it?", ask=True, thread="$oldroot3")
    again = say("Helper, and another thing?", BOB, ask=True, thread="$oldroot3")
    ingest = make_ingest(thread_fetch=fetcher([root, asked, again]))
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob")])
    await feed(ingest, db, [asked, again])
    assert said(await context_of(db, asked["event_id"])) == ["Old question, from before the bot came",
                                                             "Helper, settle it?"]
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = ANY($1::text[])",
                                  [asked["event_id"], again["event_id"]]) == 2


async def test_fetched_lines_the_asker_could_not_see_are_withheld(make_ingest: MakeIngest, db: TestStore) -> None:
    events = opened("joined")
    root = say("Before bob", event_id="$oldroot2")  # under joined, before bob joined: never fed to us
    events.append(member(BOB, "join", "Bob"))
    ingest = make_ingest(thread_fetch=fetcher([root]))
    await feed(ingest, db, events)
    asked = say("Helper?", BOB, ask=True, thread="$oldroot2")
    await feed(ingest, db, [asked])
    assert said(await context_of(db, asked["event_id"])) == ["Helper?"]


async def test_a_backdated_join_cannot_open_a_fetched_thread(make_ingest: MakeIngest, db: TestStore) -> None:
    """A line fetched with a thread was said before we heard the room, at a place we cannot know without trusting
    its sender's clock; under `joined` nobody's membership at it is known, so it is withheld from everyone —
    a join stamped as older than the thread included."""
    events = opened("joined")
    root = say("Before mallory", event_id="$oldroot4")
    join = {**member(MALLORY, "join", "Mallory"), "origin_server_ts": 1}
    ingest = make_ingest(thread_fetch=fetcher([root]))
    await feed(ingest, db, [*events, join])
    asked = say("Helper?", MALLORY, ask=True, thread="$oldroot4")
    await feed(ingest, db, [asked])
    assert said(await context_of(db, asked["event_id"])) == ["Helper?"]
    assert await db.pool.fetchval("SELECT fetched FROM room_events WHERE event_id = '$oldroot4'") is True


@pytest.mark.parametrize("how", ["fails", "hangs", "none"])
async def test_a_thread_that_cannot_be_fetched_is_marked_incomplete(make_ingest: MakeIngest, db: TestStore,
                                                                    how: str) -> None:
    fetch = {"fails": fetcher(fails=True), "hangs": fetcher(hangs=True), "none": None}[how]
    ingest = make_ingest(thread_fetch=fetch, context=ContextSettings(fetch_seconds=0.2))
    await feed(ingest, db, opened())
    asked = say("Helper?", ask=True, thread="$unknownroot")
    await feed(ingest, db, [asked])
    context = await context_of(db, asked["event_id"])
    assert context["incomplete"] is True
    assert context["note"].startswith("(The start of this thread could not be read")
    assert said(context) == ["Helper?"]
    assert context["note"] in opening(context, "Helper?")[0].text


# --- etiquette ------------------------------------------------------------------------------------


async def test_notices_and_bots_never_summon(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [
        *opened(),
        {**say("Helper, a notice"), "content": {"msgtype": "m.notice", "body": "Helper, a notice",
                                                 "m.mentions": {"user_ids": [HELPER]}}},
        say("Helper, from a bot", "@bot_echo:localhost", ask=True),
        say("Helper, from the service", "@summon:localhost", ask=True),
    ])
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 0


async def test_a_bot_asked_in_a_thread_answers_only_when_asked(ingest: Dispatcher, db: TestStore) -> None:
    root = say("Planning the trip")
    asked = say("Helper, what should we pack?", BOB, ask=True, thread=root["event_id"])
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob"), root, asked])
    await db.pool.execute("UPDATE agent_runs SET status = 'done'")
    await feed(ingest, db, [say("thanks, and the tickets?", BOB, thread=root["event_id"]),
                            say("I'll book them", thread=root["event_id"])])
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 1


async def test_a_second_mention_joins_the_run_still_working(ingest: Dispatcher, db: TestStore) -> None:
    root = say("Laptops")
    first = say("Helper, which is lightest?", ask=True, thread=root["event_id"])
    await feed(ingest, db, [*opened(), root, first])
    await db.pool.execute("UPDATE agent_runs SET status = 'running'")
    second = say("Helper, and under 1000?", ask=True, thread=root["event_id"])
    third = say("Helper, or second hand?", ask=True, thread=root["event_id"])
    await feed(ingest, db, [second])
    await feed(ingest, db, [third])
    runs = await db.pool.fetch("SELECT id, context FROM agent_runs")
    assert len(runs) == 1
    context = runs[0]["context"]
    assert said(context)[-1] == "Helper, which is lightest?"
    assert [line["said"] for line in context["later"]] == ["Helper, and under 1000?", "Helper, or second hand?"]
    assert context["later"][0]["name"] == "Alice"
    assert await db.runs.context(runs[0]["id"]) == context
    # The worker brings them in as a step of their own (said_since), after what the run has heard so far.
    text, count = said_since(context, 0)
    assert count == 2
    assert text == ("Said since, while you were working on it:\n"
                    "Alice: Helper, and under 1000?\nAlice: Helper, or second hand?")
    assert opening(context, "Helper, which is lightest?")[0].text.endswith("Alice: Helper, which is lightest?")

    # Someone else, another thread, or the run finished: a run of its own.
    await feed(ingest, db, [member(BOB, "join", "Bob")])
    bobs = say("Helper, me too?", BOB, ask=True, thread=root["event_id"])
    elsewhere = say("Helper, unrelated", ask=True)
    await feed(ingest, db, [bobs, elsewhere])
    await db.pool.execute("UPDATE agent_runs SET status = 'done'")
    after = say("Helper, one more?", ask=True, thread=root["event_id"])
    await feed(ingest, db, [after])
    for line in (bobs, elsewhere, after):
        await context_of(db, line["event_id"])
    assert await db.pool.fetchval("SELECT count(*) FROM agent_runs") == 4


def redaction(target: dict[str, Any], sender: str) -> dict[str, Any]:
    return {"event_id": f"$red{next(_n)}", "room_id": ROOM, "sender": sender, "type": "m.room.redaction",
            "redacts": target["event_id"], "origin_server_ts": _ts(), "content": {}}


async def test_redacting_the_visibility_event_does_not_open_the_history(ingest: Dispatcher, db: TestStore) -> None:
    """Matrix keeps `history_visibility` when its event is redacted; so do we."""
    room = opened("joined")
    await feed(ingest, db, [*room, say("secret before bob"), member(BOB, "join", "Bob"), redaction(room[1], ALICE)])
    asked = say("Helper, what did I miss?", BOB, ask=True)
    await feed(ingest, db, [asked])
    assert "secret before bob" not in said(await context_of(db, asked["event_id"]))


async def test_a_redaction_by_someone_without_the_power_is_not_applied(ingest: Dispatcher, db: TestStore) -> None:
    line = say("alice's own words")
    await feed(ingest, db, [*opened(), member(BOB, "join", "Bob"), line, redaction(line, BOB)])
    assert await db.pool.fetchval("SELECT redacted FROM room_events WHERE event_id = $1", line["event_id"]) is False
    await feed(ingest, db, [redaction(line, ALICE)])  # her own: applied
    assert await db.pool.fetchval("SELECT redacted FROM room_events WHERE event_id = $1", line["event_id"]) is True


async def test_an_unknown_visibility_value_hides_what_came_before(ingest: Dispatcher, db: TestStore) -> None:
    await feed(ingest, db, [*opened("members_only_please"), say("before bob"), member(BOB, "join", "Bob")])
    asked = say("Helper, what did I miss?", BOB, ask=True)
    await feed(ingest, db, [asked])
    assert "before bob" not in said(await context_of(db, asked["event_id"]))
