"""Nobody mints unlimited desk contacts, each a fresh spender (issue 24, item 4), through the desk's real HTTP:
contacts and conversations limited per client address (behind trusted proxies, the last untrusted hop) and per
inbox, conversations per contact, a spend cap per inbox that holds when every contact is new, a heard run
counted in the contact's live runs, abandoned guests pruned, and a public inbox with no cap refused at start."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from appservice.app import Service
from appservice.config import DeskInbox, parse_config
from appservice.desk.arrivals import client_address, origin_of
from appservice.desk.service import DeskService, refuse_uncapped
from engine.clock import SystemClock
from engine.core.limits import Caps
from engine.errors import ConfigError
from engine.tasks import TaskGroup
from tests.desk.conftest import Contact, DeskRig, desk_config, inboxes

pytestmark = pytest.mark.db

TOO_MANY = "Too many new conversations are being started from here"


def changed(name: str, **settings: Any) -> dict[str, DeskInbox]:
    """The test's inboxes, with inbox ``name``'s settings changed."""
    every = inboxes()
    return {**every, name: every[name].model_copy(update=settings)}


async def make_contact(desk: DeskRig, inbox: str = "always", *, via: str | None = None) -> tuple[int, Any]:
    """POST a contact (through a proxy that says it came from ``via``): the status and the body."""
    headers = {"X-Forwarded-For": via} if via is not None else {}
    async with desk.http.post(f"{desk.url}/public/api/v1/inboxes/{inbox}/contacts", json={}, headers=headers) as resp:
        return resp.status, await resp.json()


def contact_of(inbox: str, made: dict[str, Any]) -> Contact:
    return Contact(inbox, made["id"], made["source_id"], made["pubsub_token"])


async def start(desk: DeskRig, who: Contact, content: str | None = None, *, via: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {who.token}", **({"X-Forwarded-For": via} if via else {})}
    body = {"content": content} if content else {}
    async with desk.http.post(f"{desk.url}{desk.base(who)}/conversations", json=body, headers=headers) as resp:
        return resp.status, await resp.json()


@pytest.mark.desk_config(contacts_per_address_hour=3)
async def test_contacts_from_one_address_are_limited(desk: DeskRig, caplog: pytest.LogCaptureFixture) -> None:
    made = [await make_contact(desk) for _ in range(5)]
    assert [status for status, _ in made] == [200, 200, 200, 429, 429]
    assert TOO_MANY in made[3][1]["error"]
    assert "contacts made from origin" in caplog.text
    # An X-Forwarded-For from a caller that is no trusted proxy is the caller's own say: it counts for nothing.
    assert (await make_contact(desk, via="198.51.100.7"))[0] == 429
    # In every inbox: the address is over its limit, wherever it asks.
    assert (await make_contact(desk, "plain"))[0] == 429
    stored = await desk.db.pool.fetch("SELECT DISTINCT made_from FROM desk_contacts")
    # What is kept is a keyed hash, never the address.
    assert [r["made_from"] for r in stored] == [origin_of("127.0.0.1", desk.service.config.secret)]
    assert "127.0.0.1" not in stored[0]["made_from"]


@pytest.mark.desk_config(trusted_proxies=["127.0.0.1"], contacts_per_address_hour=2,
                         inboxes=changed("always", contacts_per_hour=5))
async def test_behind_a_trusted_proxy_each_client_and_the_inbox_are_limited(desk: DeskRig) -> None:
    # The last hop that is not a trusted proxy is the client; what it wrote before that is its own say.
    first = [await make_contact(desk, via=f"10.9.9.9, 203.0.113.{n}") for n in (1, 1, 1)]
    assert [status for status, _ in first] == [200, 200, 429]
    # Many addresses into one inbox: five an hour, then the inbox is full for everyone.
    many = [await make_contact(desk, via=f"198.51.100.{n}") for n in range(10)]
    assert [status for status, _ in many] == [200] * 3 + [429] * 7
    assert TOO_MANY in many[-1][1]["error"]
    # Another inbox is not held by it.
    assert (await make_contact(desk, "plain", via="198.51.100.99"))[0] == 200


@pytest.mark.desk_config(contacts_per_address_hour=4)
async def test_two_processes_count_the_same_rows_racing(desk: DeskRig) -> None:
    """Two `summon serve` processes' desks on one database: ten calls at once, alternating, and four contacts."""
    other = DeskService(desk.service.config, desk.db, desk.service._registry, SystemClock(), server_name="localhost")
    await other.load()
    stop, tasks = asyncio.Event(), TaskGroup("other-desk")
    await other.serve(tasks, stop)
    try:
        async def one(n: int) -> int:
            url = f"{desk.url if n % 2 else other.address}/public/api/v1/inboxes/always/contacts"
            async with desk.http.post(url, json={}) as resp:
                return resp.status
        statuses = await asyncio.gather(*(one(n) for n in range(10)))
    finally:
        stop.set()
        await other.close()
        await tasks.close(grace=5.0)
        await other.release()
    assert sorted(statuses) == [200] * 4 + [429] * 6
    assert await desk.db.pool.fetchval("SELECT count(*) FROM desk_contacts") == 4


def test_the_client_address_is_the_last_hop_no_trusted_proxy_wrote() -> None:
    from ipaddress import ip_network
    proxies = (ip_network("10.0.0.0/8"), ip_network("fd00::/8"))
    assert client_address("10.1.1.1", "1.2.3.4, 5.6.7.8, 10.2.2.2", proxies) == "5.6.7.8"
    assert client_address("192.0.2.1", "1.2.3.4", proxies) == "192.0.2.1"
    assert client_address("10.1.1.1", None, proxies) == "10.1.1.1"
    assert client_address("10.1.1.1", "10.3.3.3, 10.4.4.4", proxies) == "10.3.3.3"
    assert client_address("127.0.0.1", "1.2.3.4", ()) == "127.0.0.1"
    # One IPv6 host is its /64: every address in it is one origin.
    assert origin_of("2001:db8:1:2::1", "k" * 32) == origin_of("2001:db8:1:2:ffff::9", "k" * 32)
    assert origin_of("2001:db8:1:2::1", "k" * 32) != origin_of("2001:db8:1:3::1", "k" * 32)


@pytest.mark.desk_config(conversations_per_contact=3)
async def test_conversations_per_contact_are_capped(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    started = [await start(desk, ann) for _ in range(4)]
    assert [status for status, _ in started] == [200, 200, 200, 429]
    assert TOO_MANY in started[3][1]["error"]
    # Resolving one does not free a place the same day: the day's starts count as well as the open ones.
    await desk.call("POST", f"{desk.base(ann)}/conversations/{started[0][1]['id']}/toggle_status", token=ann.token,
                    body={"status": "resolved"})
    assert (await start(desk, ann))[0] == 429
    # A day later, the resolved one no longer counts.
    await desk.db.pool.execute("UPDATE desk_conversations SET created_at = now() - interval '2 days' WHERE id = $1",
                               started[0][1]["id"])
    assert (await start(desk, ann))[0] == 200
    bob = await desk.contact("plain")
    assert (await start(desk, bob))[0] == 200


@pytest.mark.desk_config(conversations_per_address_hour=3)
async def test_conversations_from_one_address_are_limited(desk: DeskRig) -> None:
    ann, bob = await desk.contact("plain"), await desk.contact("plain")
    assert [(await start(desk, ann))[0] for _ in range(2)] == [200, 200]
    assert [(await start(desk, bob))[0] for _ in range(2)] == [200, 429]
    assert await desk.db.pool.fetchval("SELECT count(*) FROM desk_conversations") == 3


@pytest.mark.desk_config(inboxes=changed("always", daily_spend=1.2))
async def test_an_inboxs_spend_is_bounded_when_every_contact_is_new(desk: DeskRig) -> None:
    # The clerk reserves its own spend limit (0.50 USD) per run until it ends: two fit under 1.20 a day.
    results = []
    for n in range(4):
        status, made = await make_contact(desk)
        assert status == 200
        who = contact_of("always", made)
        status, conversation = await start(desk, who, f"question {n}")
        assert status == 200
        results.append((who, conversation["id"]))
    runs = await desk.db.pool.fetch("SELECT asked_by FROM agent_runs ORDER BY id")
    assert len(runs) == 2
    assert await desk.db.pool.fetchval("SELECT sum(usd)::float8 FROM spend_ledger WHERE pool = 'desk:always'") == \
        pytest.approx(1.0)
    refusals = await desk.db.pool.fetch("SELECT reason, detail FROM summon_refusals ORDER BY id")
    assert [(r["reason"], r["detail"]) for r in refusals] == [("budget", "desk:always's daily cap of 1.2 USD")] * 2
    # The contact is told, as the deployment's cap is told: in the site's words, with when it frees up.
    who, conversation = results[2]
    told = [m["content"] for m in await desk.messages(who, conversation) if m["message_type"] == "activity"]
    assert len(told) == 1 and "spent what it may in a day" in told[0] and "UTC" in told[0]
    # Another inbox has its own (here: none but the deployment's).
    ann = await desk.contact("other")
    await start(desk, ann, "hello")
    assert await desk.db.pool.fetchval("SELECT count(*) FROM agent_runs") == 3


async def test_a_heard_run_counts_in_the_contacts_live_runs(desk: DeskRig) -> None:
    await desk.db.people.set_caps(Caps(live_runs_per_person=1))
    ann = await desk.signed_in("personal", "@ann:localhost")
    status, _ = await start(desk, ann, "what did I order?")
    assert status == 200
    # The keeper (asked) takes the contact's one place; the noter (hearing) is refused, not started beside it.
    runs = await desk.db.pool.fetch("SELECT bot, asked_by, live_for FROM agent_runs ORDER BY id")
    assert [r["bot"] for r in runs] == ["keeper"]
    refused = await desk.db.pool.fetch("SELECT bot, reason FROM summon_refusals")
    assert [(r["bot"], r["reason"]) for r in refused] == [("noter", "too_many")]


async def test_heard_runs_take_their_turn(desk: DeskRig) -> None:
    bob = await desk.contact("drafts")
    first, second = await start(desk, bob, "one"), await start(desk, bob, "two")
    assert first[0] == second[0] == 200
    runs = await desk.db.pool.fetch("SELECT turn, asked_by, live_for FROM agent_runs ORDER BY id")
    # Nobody asked the drafter, but its runs are the contact's: the second waits behind everyone's first.
    assert [(r["turn"], r["asked_by"], r["live_for"]) for r in runs] == [
        (0, None, f"contact:{bob.id}"), (1, None, f"contact:{bob.id}")]


@pytest.mark.desk_config(guests_kept_days=30)
async def test_abandoned_guests_are_pruned(desk: DeskRig) -> None:
    gone, still_open, member, recent = (await desk.contact("plain"), await desk.contact("plain"),
                                        await desk.signed_in("plain", "@mia:localhost"), await desk.contact("plain"))
    for who in (gone, still_open, member, recent):
        conversation = await desk.conversation(who)
        await desk.say(who, conversation, "hello?")
        if who is not still_open:
            await desk.call("POST", f"{desk.base(who)}/conversations/{conversation}/toggle_status", token=who.token,
                            body={"status": "resolved"})
    old = timedelta(days=31)
    for who in (gone, still_open, member):
        await desk.db.pool.execute("UPDATE desk_contacts SET created_at = created_at - $2::interval WHERE id = $1", who.id, old)
        await desk.db.pool.execute(
            "UPDATE desk_messages SET created_at = created_at - $2::interval WHERE conversation_id IN "
            "(SELECT id FROM desk_conversations WHERE contact_id = $1)", who.id, old)
    assert await desk.service.prune() == (1, 1)
    # The pruned guest is gone (its token names nobody); the open one, the signed-in one and the recent one stay.
    await desk.call("GET", desk.base(gone), token=gone.token, expect=404)
    for who in (still_open, member, recent):
        await desk.call("GET", desk.base(who), token=who.token)
    assert await desk.db.pool.fetchval("SELECT count(*) FROM desk_conversations WHERE contact_id = $1", gone.id) == 0
    # Where old rows were made from is forgotten; the recent one's is kept while the hourly limits read it.
    kept = await desk.db.pool.fetch("SELECT id FROM desk_contacts WHERE made_from IS NOT NULL ORDER BY id")
    assert [r["id"] for r in kept] == [recent.id]


def test_a_public_inbox_with_no_cap_is_refused_at_start() -> None:
    config = desk_config()
    with pytest.raises(ConfigError, match=r"^config: desk\.inboxes\.always\.daily_spend: inbox always "):
        refuse_uncapped(config, None)
    refuse_uncapped(config, 50.0)  # the deployment's cap bounds it
    capped = {name: inbox.model_copy(update={"daily_spend": 5.0}) for name, inbox in config.inboxes.items()}
    refuse_uncapped(config.model_copy(update={"inboxes": capped}), None)
    # An inbox no bot works (people only) spends nothing.
    people = {"plain": config.inboxes["plain"]}
    refuse_uncapped(config.model_copy(update={"inboxes": people}), None)


async def test_summon_serve_refuses_an_uncapped_public_inbox_before_anything_else() -> None:
    raw: dict[str, Any] = {
        "homeserver": {"url": "http://127.0.0.1:1", "server_name": "localhost"},
        "appservice": {"address": "http://127.0.0.1:1", "as_token": "a" * 32, "hs_token": "h" * 32},
        "database": {"dsn": "postgresql://nobody@127.0.0.1:1/none"},
        "desk": {"secret": "s" * 32, "inboxes": {"web": {"title": "Web", "staff_key": "k" * 16}}},
    }
    with pytest.raises(ConfigError, match=r"desk\.inboxes\.web\.daily_spend"):
        await Service(parse_config(raw, {})).start()
