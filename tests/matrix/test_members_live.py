"""Member bots end to end (SPEC §10) on the real Synapse, with a matrix-nio person and a feed server on
loopback: asked for in a DM → discovery → the dry run → the bot's own room → the first edition with a card →
a tick → a second edition; all sources 403 → nothing made, told why; an outage → one notice, then silence
and a stretched interval, then recovery; "make it daily at 8" in the bot's room; "remove this bot" keeps the
room."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from appservice.app import Service
from appservice.members.book import Kept
from appservice.members.charter import AtSchedule, read_charter
from tests.matrix.people import Person
from tests.members.feedsite import FeedSite, feed_site
from tests.support import eventually

pytestmark = pytest.mark.matrix
People = Callable[[str], Awaitable[Person]]


@pytest.fixture(scope="module", autouse=True)
async def builder(service: Service, content_dir: Path) -> AsyncIterator[None]:
    """The site turns the kit's builder on (it is off until a bot extends it), and off again after."""
    path = content_dir / "bots" / "builder.md"
    path.write_text("---\nname: Builder\nextends: builder\n---\n")
    await eventually(lambda: service.registry().get("builder") is not None, timeout=10)
    yield
    path.unlink()
    await eventually(lambda: service.registry().get("builder") is None, timeout=10)


@pytest.fixture
async def site() -> AsyncIterator[FeedSite]:
    async with feed_site(slow_seconds=5.0) as s:
        yield s


def create(**arguments: Any) -> list[dict[str, Any]]:
    return [{"tool_calls": [{"id": "b1", "name": "create_bot", "arguments": arguments}]}, {"text": "Done."}]


async def charters(service: Service, owner: str) -> list[Kept]:
    assert service.members is not None
    return await service.members.book.owned_by(service.store, owner)


async def tool_result(sql: asyncpg.Pool, line: str) -> str:
    """What the builder's create_bot / remove_bot call, asked by ``line``, came back with."""
    async def check() -> str | None:
        row = await sql.fetchrow(
            "SELECT s.payload FROM agent_steps s JOIN agent_runs r ON r.id = s.run_id WHERE r.trigger_event = $1 "
            "AND s.kind = 'tool_result' ORDER BY s.seq DESC LIMIT 1", line)
        return None if row is None else str(row["payload"]["content"])
    result: str = await eventually(check, timeout=60)
    return result


async def editions(person: Person, room_id: str) -> list[dict[str, Any]]:
    return await person.notices_from(room_id, person.puppet("builder"))


async def owe_now(sql: asyncpg.Pool, charter_id: str, hours: float) -> None:
    """Set the scene: the bot's last edition was ``hours`` ago (its clock, as the tick reads it)."""
    await sql.execute("UPDATE bot_clock SET last_fired_at = now() - make_interval(secs => $2) WHERE trigger = $1",
                      f"member:{charter_id}", hours * 3600)


async def test_a_member_bot_is_made_by_asking_and_lives_in_its_own_room(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite) -> None:
    alice = await people("alice")
    dm = await alice.room_with("builder")
    line = await alice.say(dm, "make me a news digest every hour from the RSS and the Journal", script=create(
        name="Morning News", glyph="📰", schedule={"every": "1 hour"},
        prompt="Read each source and write a short digest of today's headlines.",
        sources=[site.url("/rss"), site.url("/journal/")]))
    said = await tool_result(sql, line)
    assert said.startswith("Made 📰 Morning News (bot_id mb_"), said
    [kept] = await charters(service, alice.user_id)
    charter = kept.charter
    assert charter.allow == (site.url("/rss"), site.url("/journal/feed.xml"))  # the page linked its feed
    assert charter.room_id is not None
    room = charter.room_id
    # Its room: alice is invited, the builder's puppet is named after the persona there, the room too.
    joined = await alice.client.join(room)  # the invite came with the room, before the builder answered
    assert getattr(joined, "room_id", None) == room, joined
    puppet = await alice.membership(room, alice.puppet("builder"))
    assert puppet is not None and puppet["displayname"] == "Morning News"
    first = (await eventually(lambda: editions(alice, room), timeout=30))[0]["content"]
    assert "<h3>📰 Morning News</h3>" in first["formatted_body"] and first["body"].startswith("📰 Morning News")
    assert "stand-in model" in first["body"]
    # The raw row says none of it.
    raw = repr(dict(await sql.fetchrow("SELECT * FROM member_bots WHERE id = $1", kept.id)))
    assert "Morning" not in raw and "127.0.0.1" not in raw and "digest" not in raw

    # The tick: an edition owed is an ordinary run, and posts as the second edition.
    await owe_now(sql, kept.id, 1.5)
    await eventually(lambda: _count(alice, room, 2), timeout=30)
    run = await sql.fetchrow("SELECT bot, surface, status, trigger_event FROM agent_runs WHERE surface = 'members' "
                             "AND trigger_event LIKE $1 ORDER BY id DESC LIMIT 1", f"member:{kept.id}:2%")
    assert run is not None and (run["bot"], run["surface"], run["status"]) == ("builder", "members", "done")

    # An outage: one notice, then silence, and the interval stretches; then it comes back.
    site.down = 503
    await owe_now(sql, kept.id, 1.5)
    await eventually(lambda: _count(alice, room, 3), timeout=30)
    notice = (await editions(alice, room))[-1]["content"]["body"]
    assert "could not make this edition" in notice and "keep trying" in notice and "503" in notice
    await owe_now(sql, kept.id, 1.5)  # one failure: owed two hours after the last try, not one
    await asyncio.sleep(2.0)
    assert await _failures(sql, kept.id, 1)
    await owe_now(sql, kept.id, 2.5)
    await eventually(lambda: _failures(sql, kept.id, 2), timeout=30)
    await owe_now(sql, kept.id, 3.0)  # two failures in a row: owed 4 hours after the last try, not 1
    await asyncio.sleep(2.0)
    assert await _failures(sql, kept.id, 2)
    assert len(await editions(alice, room)) == 3  # silence meanwhile
    site.down = 0
    await owe_now(sql, kept.id, 4.5)
    await eventually(lambda: _count(alice, room, 4), timeout=30)
    assert await _failures(sql, kept.id, 0)
    assert "<h3>📰 Morning News</h3>" in (await editions(alice, room))[-1]["content"]["formatted_body"]

    # In its own room, no mention: "make it daily at 8".
    line = await alice.say(room, "make it daily at 8", script=[
        {"tool_calls": [{"id": "c1", "name": "create_bot", "arguments": {
            "bot_id": kept.id, "schedule": {"at": "08:00", "tz": "Europe/Dublin"}}}]}, {"text": "Daily at 8 now."}])
    said = await tool_result(sql, line)
    assert said.startswith("Changed 📰 Morning News"), said
    [changed] = await charters(service, alice.user_id)
    assert changed.charter.schedule == AtSchedule(at="08:00", tz="Europe/Dublin")
    # Its run had the charter as standing context: by its id only, opened when the request was built.
    context = await sql.fetchval("SELECT context FROM agent_runs WHERE place = $1 AND surface = 'rooms' "
                                 "ORDER BY id DESC LIMIT 1", room)
    assert "note" not in context and context["standing"] == {"by": "charter", "id": kept.id, "edition": False}

    # Renaming the persona renames the room — unless a person named the room themselves.
    line = await alice.say(room, "rename it Evening Post", script=create(bot_id=kept.id, name="Evening Post"))
    assert "its room is renamed too" in await tool_result(sql, line)
    assert (await _room_name(alice, room)) == "Evening Post"
    assert (await alice.membership(room, alice.puppet("builder")) or {}).get("displayname") == "Evening Post"
    await alice.client.room_put_state(room, "m.room.name", {"name": "Our morning paper"})
    await eventually(lambda: _named(alice, room, "Our morning paper"), timeout=10)
    line = await alice.say(room, "call it Night Post", script=create(bot_id=kept.id, name="Night Post"))
    said = await tool_result(sql, line)
    assert said.startswith("Changed 📰 Night Post") and "renamed" not in said, said
    assert (await _room_name(alice, room)) == "Our morning paper"
    assert (await alice.membership(room, alice.puppet("builder")) or {}).get("displayname") == "Night Post"

    # Somebody else's line there never wakes it (nor anybody's, while another person reads along).
    dave = await people("dave")
    await alice.client.room_invite(room, dave.user_id)
    await eventually(lambda: _joined(dave, room), timeout=15)
    await alice.wait_membership(room, dave.user_id, "join")
    heard = await dave.say(room, "make it hourly again", script=create(bot_id=kept.id, schedule={"every": "1 hour"}))
    await asyncio.sleep(2.0)
    assert await sql.fetchval("SELECT count(*) FROM agent_runs WHERE trigger_event = $1", heard) == 0
    await dave.client.room_leave(room)
    await alice.wait_membership(room, dave.user_id, "leave")
    # "remove this bot": the charter and its clock go; the room and its history stay.
    line = await alice.say(room, "remove this bot", script=[
        {"tool_calls": [{"id": "r1", "name": "remove_bot", "arguments": {"bot_id": kept.id}}]}, {"text": "Removed."}])
    said = await tool_result(sql, line)
    assert said.startswith("Removed 📰 Night Post"), said
    assert await charters(service, alice.user_id) == []
    assert await sql.fetchval("SELECT count(*) FROM bot_clock WHERE trigger = $1", f"member:{kept.id}") == 0
    assert alice.user_id in await alice.members(room)
    gone = await eventually(lambda: _says(alice, room, "was removed"), timeout=15)
    assert gone.startswith("📰 Night Post was removed") and "This room and its history stay" in gone
    assert len(await editions(alice, room)) >= 5


async def columns_holding(sql: asyncpg.Pool, needle: str) -> list[str]:
    """Every text and JSON column of every table (summon's), as ``table.column``, where ``needle`` appears."""
    found = []
    for column in await sql.fetch(
            "SELECT table_name, column_name FROM information_schema.columns c JOIN information_schema.tables t "
            "USING (table_schema, table_name) WHERE table_schema = 'public' AND t.table_type = 'BASE TABLE' "
            "AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'ARRAY', 'bytea')"):
        table, name = column["table_name"], column["column_name"]
        hits = await sql.fetchval(f'SELECT count(*) FROM "{table}" WHERE strpos("{name}"::text, $1) > 0', needle)
        if hits:
            found.append(f"{table}.{name}")
    return found


async def test_the_charters_words_are_in_no_table_after_a_birth_and_an_edition(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite) -> None:
    frank = await people("frank")
    dm = await frank.room_with("builder")
    task = "Summarise the quokka wire tersely, zebra style"
    line = await frank.say(dm, "make me the usual", script=create(
        name="Quokka Wire", schedule={"every": "1 hour"}, prompt=task, sources=[site.url("/journal/")]))
    said = await tool_result(sql, line)
    assert said.startswith("Made 🤖 Quokka Wire"), said
    [kept] = await charters(service, frank.user_id)
    room = kept.charter.room_id
    assert room is not None
    await frank.client.join(room)
    await owe_now(sql, kept.id, 1.5)
    await eventually(lambda: _count(frank, room, 2), timeout=30)
    # The task and the charter's note (its sites, its fetch list) are sealed: no row of any table holds them — but
    # the person's own line that asked for the bot. (What an edition posts — its card may list what it read — is
    # its room's, like any message.)
    scripted = {"room_events.content"}
    for words in (task, "Its task:", "Its sources, as named", "What it may fetch"):
        assert set(await columns_holding(sql, words)) - scripted == set(), words
    # What the edition's run was handed: the charter's id, not its words.
    context = await sql.fetchval("SELECT context FROM agent_runs WHERE surface = 'members' AND trigger_event LIKE $1 "
                                 "ORDER BY id DESC LIMIT 1", f"member:{kept.id}:2%")
    assert context["standing"] == {"by": "charter", "id": kept.id, "edition": True} and "note" not in context


async def test_all_sources_refusing_makes_nothing_and_says_why(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite) -> None:
    bob = await people("bob")
    dm = await bob.room_with("builder")
    rooms_before = await sql.fetchval("SELECT count(*) FROM rooms")
    line = await bob.say(dm, "a digest from the forbidden site", script=create(
        name="Closed News", schedule={"every": "1 hour"}, prompt="Digest.", sources=[site.url("/forbidden/")]))
    said = await tool_result(sql, line)
    assert said.startswith("Nothing was made: none of its sources could be reached") and "403" in said, said
    assert await charters(service, bob.user_id) == []
    assert await sql.fetchval("SELECT count(*) FROM rooms") == rooms_before


async def test_a_dry_run_that_reads_nothing_makes_nothing_and_says_why(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite) -> None:
    erin = await people("erin")
    dm = await erin.room_with("builder")
    rooms_before = await sql.fetchval("SELECT count(*) FROM rooms")
    line = await erin.say(dm, "a digest of the flaky site", script=create(
        name="Flaky News", schedule={"every": "1 hour"}, prompt="Digest.", sources=[site.url("/flaky/")]))
    said = await tool_result(sql, line)
    assert said.startswith("Nothing was made: its first edition none of its sources could be read"), said
    assert "403" in said and site.hits["/flaky/"] == 2  # found at discovery, refused at the dry run
    dry = await sql.fetchrow("SELECT status, place FROM agent_runs WHERE surface = 'members' AND trigger_event LIKE "
                             "'member:%:dry' ORDER BY id DESC LIMIT 1")
    assert dry is not None and dry["status"] == "done" and dry["place"] is None
    assert await charters(service, erin.user_id) == []
    assert await sql.fetchval("SELECT count(*) FROM rooms") == rooms_before
    assert await sql.fetchval("SELECT count(*) FROM bot_clock WHERE trigger LIKE 'member:%'") == \
        await sql.fetchval("SELECT count(*) FROM member_bots")


async def test_making_a_bot_keeps_one_deadline_however_slow_its_sites(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite, monkeypatch: pytest.MonkeyPatch) -> None:
    assert service.members is not None
    builder = service.members.builder
    monkeypatch.setattr(builder, "settings", replace(builder.settings, create_seconds=1.5))
    dave = await people("dave")
    dm = await dave.room_with("builder")
    started = time.monotonic()
    line = await dave.say(dm, "a digest of three slow sites", script=create(
        name="Slow News", schedule={"every": "1 hour"}, prompt="Digest.", sources=[site.url(f"/slow/{n}") for n in range(3)]))
    said = await tool_result(sql, line)
    assert said.startswith("Nothing was made: none of its sources could be reached"), said
    assert said.count("could not be read within 1.5s") == 3, said
    assert time.monotonic() - started < 15
    assert await charters(service, dave.user_id) == []


async def test_a_person_keeps_at_most_the_bots_the_server_allows(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite, monkeypatch: pytest.MonkeyPatch) -> None:
    assert service.members is not None
    builder = service.members.builder
    monkeypatch.setattr(builder, "settings", replace(builder.settings, max_per_person=1))
    hana = await people("hana")
    async with service.store.transaction("test") as tx:  # one bot of hers already (members.max_per_person: 1)
        await service.members.book.create(tx, read_charter({
            "name": "Hana's First", "schedule": {"every": "1 hour"}, "prompt": "Digest.", "owner": hana.user_id,
            "author": hana.user_id, "room_id": "!elsewhere:localhost"}), by=hana.user_id,
            clock_at=await tx.schedules.now(), host="builder")
    dm = await hana.room_with("builder")
    rooms_before = await sql.fetchval("SELECT count(*) FROM rooms")
    line = await hana.say(dm, "another one please", script=create(
        name="Hana's Second", schedule={"every": "1 hour"}, prompt="Digest.", sources=[site.url("/rss")]))
    said = await tool_result(sql, line)
    assert said.startswith("Nothing was made: you already have 1 bots, the most one person may keep here"), said
    assert [k.charter.name for k in await charters(service, hana.user_id)] == ["Hana's First"]
    assert await sql.fetchval("SELECT count(*) FROM rooms") == rooms_before and "/rss" not in site.hits


async def test_a_schedule_faster_than_the_floor_is_refused_in_a_sentence(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite) -> None:
    carol = await people("carol")
    dm = await carol.room_with("builder")
    line = await carol.say(dm, "every 10 seconds please", script=create(
        name="Fast", schedule={"every": "0 minutes"}, prompt="Digest.", sources=[site.url("/rss")]))
    said = await tool_result(sql, line)
    assert "schedule.every" in said and "more often than this server allows" in said, said
    assert await charters(service, carol.user_id) == []


async def test_the_builder_keeps_each_bots_name_in_its_room_when_its_own_profile_changes(
        service: Service, people: People, sql: asyncpg.Pool, site: FeedSite, content_dir: Path) -> None:
    # The homeserver carries a change to the builder's own avatar or name into every room it is in, some time
    # later, as a fresh membership with its global name: each member bot's room is given its persona back.
    frank = await people("frank")
    dm = await frank.room_with("builder")
    line = await frank.say(dm, "a digest every hour from the RSS", script=create(
        name="Frank's Paper", schedule={"every": "1 hour"}, prompt="Digest.", sources=[site.url("/rss")]))
    said = await tool_result(sql, line)
    assert said.startswith("Made"), said
    [kept] = await charters(service, frank.user_id)
    room = kept.charter.room_id
    assert room is not None and await _joined(frank, room)
    puppet = frank.puppet("builder")
    assert (await frank.membership(room, puppet) or {}).get("displayname") == "Frank's Paper"
    path = content_dir / "bots" / "builder.md"
    original = path.read_text()
    try:
        # Its avatar set: the homeserver's fresh membership says "Builder", with the new avatar.
        path.write_text("---\nname: Builder\nextends: builder\navatar: mxc://localhost/keepfaces\n---\n")
        await eventually(lambda: _stomped(frank, room, puppet, "Builder", "mxc://localhost/keepfaces"), timeout=20)
        await eventually(lambda: _member_name(frank, room, puppet, "Frank's Paper"), timeout=15)
        member = await frank.membership(room, puppet) or {}
        assert member.get("avatar_url") == "mxc://localhost/keepfaces"  # its new face, the bot's name
        # Its name changed: "Maker" everywhere, but the bot's room shows the bot.
        path.write_text("---\nname: Maker\nextends: builder\navatar: mxc://localhost/keepfaces\n---\n")
        await eventually(lambda: _stomped(frank, room, puppet, "Maker"), timeout=20)
        await eventually(lambda: _member_name(frank, room, puppet, "Frank's Paper"), timeout=15)
    finally:
        path.write_text(original)
        await eventually(lambda: _global_name(frank, puppet, "Builder"), timeout=15)


async def _stomped(person: Person, room: str, user_id: str, name: str, avatar: str | None = None) -> bool:
    """The homeserver's own membership for ``user_id`` with its global ``name`` (and ``avatar``) is in the room's
    timeline."""
    return any(e.get("type") == "m.room.member" and e.get("state_key") == user_id
               and e.get("content", {}).get("displayname") == name and e.get("content", {}).get("membership") == "join"
               and (avatar is None or e.get("content", {}).get("avatar_url") == avatar)
               for e in await person.events(room))


async def _member_name(person: Person, room: str, user_id: str, name: str) -> bool:
    return (await person.membership(room, user_id) or {}).get("displayname") == name


async def _global_name(person: Person, user_id: str, name: str) -> bool:
    return getattr(await person.client.get_displayname(user_id), "displayname", None) == name


async def _count(person: Person, room: str, n: int) -> bool:
    return len(await editions(person, room)) >= n


async def _failures(sql: asyncpg.Pool, charter_id: str, n: int) -> bool:
    return await sql.fetchval("SELECT failures FROM member_bots WHERE id = $1", charter_id) == n


async def _joined(person: Person, room: str) -> bool:
    return getattr(await person.client.join(room), "room_id", None) == room


async def _room_name(person: Person, room: str) -> str | None:
    resp = await person.client.room_get_state_event(room, "m.room.name", "")
    content = getattr(resp, "content", None)
    return content.get("name") if isinstance(content, dict) else None


async def _named(person: Person, room: str, name: str) -> bool:
    return await _room_name(person, room) == name


async def _says(person: Person, room: str, words: str) -> str | None:
    """A notice of the builder's in ``room`` that says ``words`` (its answers are notices there too)."""
    return next((str(e["content"]["body"]) for e in await editions(person, room) if words in e["content"]["body"]),
                None)
