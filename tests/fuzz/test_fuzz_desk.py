"""Fuzz: the desk's public API (the widget's side), over real HTTP to the desk's own listener on a real
PostgreSQL — whatever a browser or anyone else sends: hostile path and query values (ids of 40 digits,
negative, unicode digits, text), headers (tokens malformed, forged, expired, of another inbox or another key;
``Last-Event-ID``), and bodies (wrong types, lone surrogates and NULs, huge, nested, not JSON). Every answer
is below 500 with its refusal in one clear line, and every case within 100 ms.

The desk runs in a thread of its own, on its own event loop, so each case is one plain request from here;
the case's time is the process's CPU time, the desk's handling included."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yarl import URL

from appservice.desk import tokens
from appservice.desk.service import DeskService
from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import read_kit
from engine.run.publish import publish
from engine.tasks import TaskGroup
from tests.desk.conftest import BOTS, IDENTITY, SECRET, desk_config
from tests.fuzz.budget import FUZZ, clear, outcome, within_budget
from tests.store import TestStore

pytestmark = pytest.mark.db

T = TypeVar("T")
TARGET = "desk public API"


@dataclass(frozen=True)
class Known:
    """A contact the desk made, and its conversation and a message in it: what valid values are drawn from."""

    inbox: str
    contact_id: int
    source_id: str
    token: str
    conversation: int
    message: int


class DeskThread:
    """The desk served on a loop in a thread of its own; ``request`` sends one request and waits."""

    def __init__(self, dsn: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-desk", daemon=True)
        self._thread.start()
        self.known: list[Known] = []
        self.inbox_ids: dict[str, int] = {}
        self._call(self._start(dsn))

    def _call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=30)

    async def _start(self, dsn: str) -> None:
        registry = compile_sources(BOTS, kinds=KINDS, server_name="localhost", kit=read_kit())
        assert isinstance(registry, Registry), registry
        self.store = await TestStore.open(dsn, min_size=1, max_size=8)
        await publish(self.store, registry)
        self.stop = asyncio.Event()
        self.service = DeskService(desk_config(), self.store, lambda: registry, SystemClock(), server_name="localhost")
        await self.service.load()
        self.tasks = TaskGroup("fuzz-desk")
        await self.service.serve(self.tasks, self.stop)
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        for inbox in ("plain", "always"):
            self.inbox_ids[inbox] = self.service.desk.inbox(inbox).row.id  # type: ignore[union-attr]
            async with self.http.post(f"{self.service.address}/public/api/v1/inboxes/{inbox}/contacts", json={}) as r:
                made = await r.json()
            base = f"{self.service.address}/public/api/v1/inboxes/{inbox}/contacts/{made['source_id']}"
            auth = {"Authorization": f"Bearer {made['pubsub_token']}"}
            async with self.http.post(f"{base}/conversations", json={"content": "hello"}, headers=auth) as r:
                conversation = await r.json()
            self.known.append(Known(inbox, made["id"], made["source_id"], made["pubsub_token"], conversation["id"],
                                    conversation["messages"][0]["id"]))

    def request(self, method: str, path: str, headers: dict[str, str],
                body: bytes | None) -> tuple[int, str, bytes]:
        return self._call(self._request(method, path, headers, body))

    async def _request(self, method: str, path: str, headers: dict[str, str],
                       body: bytes | None) -> tuple[int, str, bytes]:
        url = URL(self.service.address + path, encoded=True)
        async with self.http.request(method, url, headers=headers, data=body) as resp:
            if resp.content_type == "text/event-stream":
                return resp.status, resp.content_type, b""  # a stream opened: its status says; leaving closes it
            return resp.status, resp.content_type, await resp.read()

    def close(self) -> None:
        async def stop() -> None:
            self.stop.set()
            await self.http.close()
            await self.service.close()
            await self.tasks.close(grace=5.0)
            await self.service.release()
            await self.store.close()
        self._call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


@pytest.fixture
def desk_thread(dsn: str) -> Iterator[DeskThread]:
    rig = DeskThread(dsn)
    try:
        yield rig
    finally:
        rig.close()


# --- what is drawn ------------------------------------------------------------------------------------------

NUMBERS = st.sampled_from(["9" * 40, "9" * 19, "9" * 18, "-1", "0", "00", "1", "٣", "１", "1.5", "1e3", "0x1", " 1",
                           "", "%00", "%2F", "NaN", "é"]) | st.integers(-(2**70), 2**70).map(str) | st.text(max_size=8)
UUIDS = st.sampled_from(["00000000-0000-0000-0000-000000000000", "not-a-uuid", "9" * 40, "", "{}", "%00"]) | \
    st.uuids().map(str)
INBOXES = st.sampled_from(["plain", "always", "other", "nope", "", "%00", "é" * 70, "9" * 40])
ROUTES = st.sampled_from([
    ("GET", ""), ("POST", "/contacts"), ("GET", "/contacts/{c}"), ("POST", "/contacts/{c}/token"),
    ("GET", "/contacts/{c}/conversations"), ("POST", "/contacts/{c}/conversations"),
    ("GET", "/contacts/{c}/conversations/{v}"), ("GET", "/contacts/{c}/conversations/{v}/messages"),
    ("POST", "/contacts/{c}/conversations/{v}/messages"), ("PATCH", "/contacts/{c}/conversations/{v}/messages/{m}"),
    ("POST", "/contacts/{c}/conversations/{v}/messages/{m}/feedback"),
    ("POST", "/contacts/{c}/conversations/{v}/toggle_status"), ("GET", "/contacts/{c}/conversations/{v}/events"),
])
# Values of every JSON kind, cheap to draw, with the strings Postgres or a codec might choke on.
SMALL = st.sampled_from([None, True, False, 0, -1, 2**64, -(2**70), 1.5, 1e308, "", "x", "\x00", "a\x00b", "\ud800",
                         "é", "\U0001f600", "9" * 40, "open", "resolved", "pending", [], ["x"], {}, {"value": "1"},
                         [{"value": 1}], {"value": None}, "x" * 300])
FIELDS = st.sampled_from(["content", "echo_id", "name", "email", "identifier", "identifier_token", "identifier_hash",
                          "status", "helped", "submitted_values", "org.summon.script", "x"])
BODIES = st.dictionaries(FIELDS, SMALL | st.text(max_size=40), max_size=5)


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes | None:
    shape = draw(st.sampled_from(["json", "json", "json", "signed in", "none", "huge", "nested", "noise",
                                  "not an object"]))
    if shape == "json":
        return json.dumps(draw(BODIES)).encode()
    if shape == "signed in":  # the site's word for who the contact is: good, expired, of another inbox or account
        expires = int(time.time()) + draw(st.sampled_from([600, -1, 2 * 86_400]))
        signed = tokens.identity_token(IDENTITY, draw(st.sampled_from(["plain", "always", "other"])), "@fuzz:localhost",
                                       expires)
        return json.dumps({"identifier": draw(st.sampled_from(["@fuzz:localhost", "@other:localhost"])),
                           draw(st.sampled_from(["identifier_token", "identifier_hash"])): signed}).encode()
    if shape == "none":
        return None
    if shape == "huge":
        return json.dumps({"content": "x" * draw(st.sampled_from([20_001, 65_000, 70_000]))}).encode()
    if shape == "nested":
        depth = draw(st.integers(1, 5_000))
        return b'{"content": ' + b"[" * depth + b"]" * draw(st.integers(0, depth)) + b"}"
    if shape == "not an object":
        return draw(st.sampled_from([b"[]", b"1", b'"x"', b"null", b"NaN", b'{"content": Infinity}']))
    return draw(st.binary(max_size=200))


@st.composite
def token_for(draw: st.DrawFn, rig: DeskThread, known: Known) -> str | None:
    """A token as a caller might hold it: the contact's own, another's, forged, expired, malformed."""
    now = int(time.time())
    inbox = rig.inbox_ids[known.inbox]
    shape = draw(st.sampled_from(["own", "own", "own", "other", "expired", "forged", "unknown key", "old since",
                                  "v1", "junk", "none"]))
    if shape == "own":
        return known.token
    if shape == "other":
        return rig.known[0].token if known is not rig.known[0] else rig.known[-1].token
    if shape == "expired":
        return tokens.mint(SECRET, inbox, known.contact_id, now - 20, now - 10)
    if shape == "forged":
        return known.token[:-4] + draw(st.sampled_from(["0000", "ffff", "zzzz", "", "00000"]))
    if shape == "unknown key":
        return tokens.mint("a-key-the-desk-never-had-" + "k" * 10, inbox, known.contact_id, now, now + 600)
    if shape == "old since":
        return tokens.mint(SECRET, inbox, known.contact_id, now - 400 * 86_400, now + 600)
    if shape == "v1":
        return f"v1.{inbox}.{known.contact_id}.{now + 600}." + "0" * 64
    if shape == "junk":
        return draw(st.text(max_size=40).filter(lambda t: t.isprintable() and t.isascii()) |
                    st.sampled_from(["v2." + "9" * 400, "v2." * 100, "." * 50]))
    return None


@st.composite
def requests(draw: st.DrawFn, rig: DeskThread) -> tuple[str, str, dict[str, str], bytes | None]:
    known = draw(st.sampled_from(rig.known))
    method, template = draw(ROUTES)
    inbox = known.inbox if draw(st.integers(0, 7)) else draw(INBOXES)
    contact = known.source_id if draw(st.integers(0, 5)) else draw(UUIDS | st.sampled_from([k.source_id for k in rig.known]))
    conversation = str(known.conversation) if draw(st.integers(0, 3)) else draw(NUMBERS)
    message = str(known.message) if draw(st.integers(0, 3)) else draw(NUMBERS)
    path = f"/public/api/v1/inboxes/{quote(inbox, safe='')}" + template.format(
        c=quote(contact, safe=""), v=quote(conversation, safe=""), m=quote(message, safe=""))
    query = draw(st.dictionaries(st.sampled_from(["after", "token", "last_event_id", "x"]),
                                 NUMBERS | st.sampled_from([known.token]), max_size=2))
    if query:
        path += "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())
    headers: dict[str, str] = {}
    token = draw(token_for(rig, known))
    if token is not None:
        headers[draw(st.sampled_from(["Authorization", "Authorization", "X-Contact-Token"]))] = (
            f"Bearer {token}" if draw(st.integers(0, 5)) else token)
    if draw(st.booleans()):
        headers["Last-Event-ID"] = draw(NUMBERS.filter(lambda v: v.isprintable() and v.isascii()))
    if draw(st.booleans()):
        headers["Content-Type"] = draw(st.sampled_from(["application/json", "text/plain", "multipart/form-data",
                                                        "application/json; charset=latin-1"]))
    return method, path, headers, draw(raw_bodies()) if method != "GET" else None


# The desk is one for every case (a fixture the cases share on purpose: its contacts are the valid values).
DESK_FUZZ = settings(FUZZ, suppress_health_check=[*FUZZ.suppress_health_check, HealthCheck.function_scoped_fixture])


@DESK_FUZZ
@given(data=st.data())
def test_any_request_to_the_public_api_is_answered_below_500_in_time(desk_thread: DeskThread,
                                                                    data: st.DataObject) -> None:
    method, path, headers, body = data.draw(requests(desk_thread))
    status, kind, answer = within_budget(TARGET, lambda: desk_thread.request(method, path, headers, body),
                                   len(path) + len(body or b""))
    outcome(TARGET, str(status))
    assert status < 500, (method, path, headers, body, answer[:300])
    if status >= 400 and kind == "application/json":  # (a path no route has is aiohttp's own 404 or 405)
        refused = json.loads(answer)
        assert clear(refused["error"]), refused
