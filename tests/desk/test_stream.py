"""A conversation's event stream (server-sent events): answers, edits and status changes arrive live; a reader
that comes back with ``Last-Event-ID`` gets exactly what it missed; the staff's private events never reach
the contact's stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from appservice.desk import tokens
from appservice.desk.tables import DeskTables as DeskFamily
from tests.desk.conftest import SECRET, STAFF_KEY, Contact, DeskRig

pytestmark = pytest.mark.db


@dataclass
class Event:
    id: int
    kind: str
    data: dict[str, Any]


class Reader:
    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp

    async def next(self, timeout: float = 10.0) -> Event:
        fields: dict[str, str] = {}
        while True:
            raw = await asyncio.wait_for(self.resp.content.readline(), timeout)
            assert raw, "the stream ended"
            line = raw.decode().rstrip("\n")
            if not line:
                if "data" in fields:
                    return Event(int(fields["id"]), fields["event"], json.loads(fields["data"]))
                fields = {}
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value

    async def until(self, kind: str, timeout: float = 10.0) -> list[Event]:
        seen: list[Event] = []
        while not seen or seen[-1].kind != kind:
            seen.append(await self.next(timeout))
        return seen


@asynccontextmanager
async def stream(desk: DeskRig, path: str, *, headers: dict[str, str] | None = None,
                 expect: int = 200) -> AsyncIterator[Reader]:
    async with desk.http.get(desk.url + path, headers=headers or {}) as resp:
        assert resp.status == expect, await resp.text()
        if expect == 200:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
        yield Reader(resp)


async def test_the_bots_answer_streams_in_and_a_reader_resumes_where_it_was(desk: DeskRig) -> None:
    desk.running()
    ann = await desk.contact("always")
    conversation = await desk.conversation(ann)
    events = f"{desk.base(ann)}/conversations/{conversation}/events?token={ann.token}"
    async with stream(desk, events) as reader:
        await desk.say(ann, conversation, "When do you open?", script=[{"text": "At nine."}])
        seen = await reader.until("message_created")
        assert seen[-1].data["content"] == "When do you open?"
        seen = await reader.until("message_created")
        answer = seen[-1]
        assert (answer.data["content"], answer.data["bot"]) == ("At nine.", "clerk")
        assert ("typing", True) in [(e.kind, e.data.get("on")) for e in seen]
        ids = [e.id for e in seen]
        assert ids == sorted(ids)
    last = answer.id
    # Meanwhile (the reader gone): the contact asks for a person.
    await desk.call("POST", f"{desk.base(ann)}/conversations/{conversation}/toggle_status", token=ann.token,
                    body={"status": "open"})
    async with stream(desk, events, headers={"Last-Event-ID": str(last)}) as reader:
        missed = await reader.until("message_created")
    assert missed[0].id > last  # nothing twice
    kinds = [e.kind for e in missed]
    assert "conversation_status_changed" in kinds
    status = next(e for e in missed if e.kind == "conversation_status_changed").data
    assert (status["status"], status["bot_off"]) == ("open", True)
    assert missed[-1].data["message_type"] == "activity"


async def test_private_events_never_reach_the_contacts_stream(desk: DeskRig) -> None:
    ann = await desk.contact("drafts")
    conversation = await desk.conversation(ann)
    await desk.say(ann, conversation, "q", script=[{"text": "a draft for the staff"}])
    await desk.work()
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY,
                    body={"content": "a note", "private": True})
    await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY,
                    body={"content": "Answered."})
    async with stream(desk, f"{desk.base(ann)}/conversations/{conversation}/events?token={ann.token}") as reader:
        seen = await reader.until("conversation_status_changed")
    contents = [e.data.get("content") for e in seen if e.kind.startswith("message")]
    assert contents == ["q", "Answered."]
    async with stream(desk, desk.staff_path(conversation, "/events"), headers={"api_access_token": STAFF_KEY}) as r:
        staff_seen = await r.until("conversation_status_changed")
    staff_contents = [e.data.get("content") for e in staff_seen if e.kind == "message_created"]
    assert staff_contents == ["q", "a draft for the staff", "a note", "Answered."]


async def test_a_stream_is_the_contacts_own(desk: DeskRig) -> None:
    ann, bob = await desk.contact("always"), await desk.contact("always")
    hers = await desk.conversation(ann)
    async with stream(desk, f"{desk.base(bob)}/conversations/{hers}/events?token={bob.token}", expect=404):
        pass
    async with stream(desk, f"{desk.base(ann)}/conversations/{hers}/events?token=forged", expect=401):
        pass
    async with stream(desk, f"{desk.base(ann)}/conversations/{hers}/events", expect=401):
        pass


# --- bounded streams (issue 24 item 7) -------------------------------------------------------------------


def _events(desk: DeskRig, who: Contact, conversation: int, token: str | None = None) -> str:
    return f"{desk.base(who)}/conversations/{conversation}/events?token={token or who.token}"


@pytest.mark.desk_config(streams_per_contact=2, streams_per_process=3)
async def test_streams_are_capped_per_contact_and_per_process(desk: DeskRig) -> None:
    ann, bob, cy = await desk.contact("plain"), await desk.contact("plain"), await desk.contact("plain")
    hers, his, theirs = await desk.conversation(ann), await desk.conversation(bob), await desk.conversation(cy)
    too_many = desk_registry_words(desk)["too_many_streams"]
    async with stream(desk, _events(desk, ann, hers)), stream(desk, _events(desk, ann, hers)):
        async with stream(desk, _events(desk, ann, hers), expect=429) as refused:
            assert await refused.resp.json() == {"error": too_many}
        async with stream(desk, _events(desk, bob, his)):  # the third of the process
            async with stream(desk, _events(desk, cy, theirs), expect=429):
                pass
            assert desk.service.streams.open_streams == 3
    # Closed by their readers, they are counted no more.
    async with stream(desk, _events(desk, cy, theirs)), stream(desk, _events(desk, cy, theirs)):
        async with stream(desk, _events(desk, ann, hers)):
            pass


def desk_registry_words(desk: DeskRig) -> dict[str, str]:
    return {key: desk.service.desk.words(key) for key in ("too_many_streams",)}


@pytest.mark.desk_config(streams_per_contact=1000)
async def test_a_commit_costs_one_read_however_many_streams_wait(desk: DeskRig, monkeypatch: pytest.MonkeyPatch) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    reads = [0]
    real = DeskFamily.events_after

    async def counted(self: DeskFamily, *args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(DeskFamily, "events_after", counted)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http, \
            contextlib.AsyncExitStack() as streams:
        readers = []
        for _ in range(STREAMS):
            resp = await streams.enter_async_context(http.get(desk.url + _events(desk, ann, conversation)))
            assert resp.status == 200
            readers.append(Reader(resp))
        # Every stream live (its own catch-up read done): the first message reaches them all.
        await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY, body={"content": "one"})
        for reader in readers:
            assert (await reader.until("message_created"))[-1].data["content"] == "one"
        reads[0] = 0
        await desk.call("POST", desk.staff_path(conversation, "/messages"), staff=STAFF_KEY, body={"content": "two"})
        for reader in readers:
            assert (await reader.until("message_created"))[-1].data["content"] == "two"
        print(f"desk_events reads for one commit with {STREAMS} streams open: {reads[0]}")
        assert reads[0] <= 2  # one a wake (a second wake may land while the first reads)


STREAMS = 200


async def test_a_stream_ends_at_its_tokens_expiry(desk: DeskRig) -> None:
    ann = await desk.contact("plain")
    conversation = await desk.conversation(ann)
    inbox = desk.service.desk.inbox("plain")
    assert inbox is not None
    now = int(time.time())
    brief = tokens.mint(SECRET, inbox.row.id, ann.id, now, now + 2)
    async with stream(desk, _events(desk, ann, conversation, brief)) as reader:
        assert await _ends(reader)


async def test_revoking_a_contacts_tokens_ends_their_open_streams(desk: DeskRig) -> None:
    ann, bob = await desk.contact("plain"), await desk.contact("plain")
    hers, his = await desk.conversation(ann), await desk.conversation(bob)
    async with stream(desk, _events(desk, ann, hers)) as reader, stream(desk, _events(desk, bob, his)) as other:
        await desk.call("POST", f"/api/v1/accounts/1/contacts/{ann.id}/revoke_tokens", staff=STAFF_KEY)
        assert await _ends(reader)
        await desk.call("POST", desk.staff_path(his, "/messages"), staff=STAFF_KEY, body={"content": "still here"})
        assert (await other.until("message_created"))[-1].data["content"] == "still here"
    async with stream(desk, _events(desk, ann, hers), expect=401):
        pass


async def _ends(reader: Reader) -> bool:
    """Whether the stream ends (its last byte read) within ten seconds, whatever comes before."""
    while await asyncio.wait_for(reader.resp.content.readline(), 10):
        pass
    return True


async def test_a_revocation_notified_while_the_listen_was_down_still_ends_the_stream(desk: DeskRig) -> None:
    ann, bob = await desk.contact("plain"), await desk.contact("plain")
    hers, his = await desk.conversation(ann), await desk.conversation(bob)
    async with stream(desk, _events(desk, ann, hers)) as reader, stream(desk, _events(desk, bob, his)) as other:
        # The revocation's NOTIFY is lost (nobody hears it), then the LISTEN connection drops and comes back.
        await desk.db.pool.execute("ALTER TABLE desk_contacts DISABLE TRIGGER desk_contacts_tokens_revoked")
        await desk.call("POST", f"/api/v1/accounts/1/contacts/{ann.id}/revoke_tokens", staff=STAFF_KEY)
        await desk.db.pool.execute("ALTER TABLE desk_contacts ENABLE TRIGGER desk_contacts_tokens_revoked")
        dropped = await desk.db.pool.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query ILIKE 'LISTEN%summon_desk%'")
        assert dropped >= 1
        assert await _ends(reader)
        await desk.call("POST", desk.staff_path(his, "/messages"), staff=STAFF_KEY, body={"content": "still here"})
        assert (await other.until("message_created"))[-1].data["content"] == "still here"
