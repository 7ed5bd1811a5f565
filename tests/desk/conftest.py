"""The desk on a real PostgreSQL, over real HTTP: the desk's own listener (port 0) with its public and
staff APIs and event streams, and a real worker on the scripted model, stepped by the test (``desk.work()``)
or left running (``desk.running()``). Only the model is scripted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from appservice.config import Desk as DeskConfig
from appservice.config import DeskInbox, DeskOfficeHours, DeskWebhook
from appservice.desk.service import DeskService
from appservice.desk.tokens import identity_token
from appservice.desk.tools import make_hand_to_people
from appservice.kinds import KINDS
from engine.clock import SystemClock
from engine.content import Registry, compile_sources
from engine.content.files import read_kit
from engine.run.publish import publish
from engine.run.worker import Worker, WorkerSettings
from engine.tasks import TaskGroup
from tests.book import BOOK, stand_in
from tests.store import TestStore
from tests.support import STAND_IN

BOTS = {
    # The conversation's bot from the start.
    "bots/clerk.md": "---\nname: Clerk\nsurfaces: [desk]\noffer: always\nlimits: {per: {day: 1}}\n---\nYou answer.\n",
    # Offers itself once while a question is unanswered.
    "bots/guide.md": "---\nname: Guide\nsurfaces: [desk]\noffer: ask\nlimits: {per: {day: 1}}\n---\nYou guide.\n",
    # Drafts for the staff on every message.
    "bots/drafter.md": ("---\nname: Drafter\nsurfaces: [desk]\nhears: [support-message]\nlimits: {per: {day: 1}}\n"
                        "---\nYou draft.\n"),
    # Drafts only for signed-in contacts.
    "bots/member.md": ("---\nname: Member\nsurfaces: [desk]\nhears: [support-message]\nserves: authenticated\n"
                       "limits: {per: {day: 1}}\n---\nYou help members.\n"),
    # Looks at the contact's own account: offered where the contact alone reads the answer.
    "bots/keeper.md": ("---\nname: Keeper\nsurfaces: [desk]\noffer: always\ntools: [about_me]\n"
                       "limits: {per: {day: 1}}\n---\nYou look things up.\n"),
    "bots/noter.md": ("---\nname: Noter\nsurfaces: [desk]\nhears: [support-message]\ntools: [about_me]\n"
                      "limits: {per: {day: 1}}\n---\nYou draft.\n"),
    # Hands the conversation to people by its tool.
    "bots/passer.md": ("---\nname: Passer\nsurfaces: [desk]\noffer: always\n"
                       "tools: [hand_to_people]\nlimits: {per: {day: 1}}\n---\nYou pass it on when you must.\n"),
}
STAFF_KEY = "staff-key-" + "s" * 20
HANDOFF_KEY = "handoff-key-" + "h" * 20
STAFFED_KEY = "staffed-key-" + "t" * 20
STAFF = ("@sam:localhost", "@kim:localhost", "@lee:localhost")
IDENTITY = "identity-" + "i" * 20
SECRET = "desk-secret-" + "x" * 32


HOOK_SECRET = "hook-secret-" + "h" * 20


def inboxes(hook: str | None = None) -> dict[str, DeskInbox]:
    """The test's inboxes; with ``hook`` (a receiver's url) each posts its events there, and ``agent``'s
    receiver is its agent bot."""
    def inbox(title: str, bots: tuple[str, ...], key: str = STAFF_KEY, agent_bot: bool = False) -> DeskInbox:
        webhooks = (DeskWebhook(url=hook, secret=HOOK_SECRET, agent_bot=agent_bot),) if hook else ()
        return DeskInbox(title=title, staff_key=key, identity_secret=IDENTITY, bots=bots, webhooks=webhooks)
    return {
        "agent": inbox("Agent", (), agent_bot=True),
        "plain": inbox("Plain", ()),
        "always": inbox("Always", ("clerk",)),
        "ask": inbox("Ask", ("guide",)),
        "drafts": inbox("Drafts", ("drafter",)),
        "members": inbox("Members", ("member",)),
        "personal": inbox("Personal", ("keeper", "noter")),
        "other": inbox("Other", ("clerk",), key="other-key-" + "o" * 20),
        # Its bot hands over by its tool, to its staff (always open: the widget's test routes it).
        "handoff": DeskInbox(title="Handoff", staff_key=HANDOFF_KEY, identity_secret=IDENTITY, bots=("passer",),
                             staff=STAFF),
        # Handoffs here go to its staff: office hours Monday to Friday, 9 to 17:30 in Dublin.
        "staffed": DeskInbox(title="Staffed", staff_key=STAFFED_KEY, identity_secret=IDENTITY, bots=("clerk",),
                             staff=STAFF, office_hours=DeskOfficeHours(timezone="Europe/Dublin", opens="09:00",
                                                                       closes="17:30")),
    }


def desk_config(hook: str | None = None, **changes: Any) -> DeskConfig:
    base: dict[str, Any] = {"listen": {"host": "127.0.0.1", "port": 0}, "secret": SECRET, "inboxes": inboxes(hook)}
    return DeskConfig.model_validate({**base, **changes})


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data


class Receiver:
    """A site's webhook receiver on a port of its own: it records every post and answers with the statuses
    queued in ``answers`` (then 200)."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answers: list[int] = []
        self.arrived = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._post)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/hook"

    async def _post(self, request: web.Request) -> web.Response:
        self.received.append(Received(dict(request.headers), await request.read()))
        self.arrived.set()
        return web.Response(status=self.answers.pop(0) if self.answers else 200)

    def events(self, name: str) -> list[Received]:
        return [r for r in self.received if r.json.get("event") == name]

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()



@pytest.fixture
def desk_registry() -> Registry:
    registry = compile_sources(BOTS, kinds=KINDS, server_name="localhost", kit=read_kit())
    assert isinstance(registry, Registry), registry
    return registry


@dataclass
class Contact:
    inbox: str
    id: int
    source_id: str
    token: str


@dataclass
class DeskRig:
    """The desk as a test drives it: HTTP to its listener, the worker stepped by hand."""

    db: TestStore
    service: DeskService
    worker: Worker
    http: aiohttp.ClientSession
    stop: asyncio.Event
    tasks: TaskGroup
    receiver: Receiver
    _running: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.service.address

    # --- HTTP --------------------------------------------------------------------------------------------

    async def call(self, method: str, path: str, *, token: str | None = None, staff: str | None = None,
                   body: Any = None, expect: int | None = 200) -> Any:
        headers = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if staff is not None:
            headers["api_access_token"] = staff
        async with self.http.request(method, self.url + path, json=body, headers=headers) as resp:
            data = await resp.json(content_type=None) if resp.status != 204 else None
            if expect is not None:
                assert resp.status == expect, (resp.status, data)
            return data

    async def contact(self, inbox: str = "always", **body: Any) -> Contact:
        made = await self.call("POST", f"/public/api/v1/inboxes/{inbox}/contacts", body=body)
        return Contact(inbox, made["id"], made["source_id"], made["pubsub_token"])

    async def signed_in(self, inbox: str, account: str) -> Contact:
        """A contact the site signed in as ``account`` (an identifier_token good for ten minutes)."""
        expires = int(time.time()) + 600
        return await self.contact(inbox, identifier=account,
                                  identifier_token=identity_token(IDENTITY, inbox, account, expires))

    def base(self, who: Contact) -> str:
        return f"/public/api/v1/inboxes/{who.inbox}/contacts/{who.source_id}"

    async def conversation(self, who: Contact) -> int:
        made = await self.call("POST", self.base(who) + "/conversations", token=who.token, body={})
        return int(made["id"])

    async def say(self, who: Contact, conversation: int, content: str, *, script: list[dict[str, Any]] | None = None,
                  expect: int = 200, **extra: Any) -> Any:
        body = {"content": content, **extra}
        BOOK.say(content, script)
        return await self.call("POST", f"{self.base(who)}/conversations/{conversation}/messages", token=who.token,
                               body=body, expect=expect)

    async def messages(self, who: Contact, conversation: int) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self.call(
            "GET", f"{self.base(who)}/conversations/{conversation}/messages", token=who.token)
        return result

    async def shown(self, who: Contact, conversation: int) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("GET", f"{self.base(who)}/conversations/{conversation}",
                                                 token=who.token)
        return result

    def staff_path(self, conversation: int, tail: str = "") -> str:
        return f"/api/v1/accounts/1/conversations/{conversation}{tail}"

    async def staff_messages(self, conversation: int) -> list[dict[str, Any]]:
        result = await self.call("GET", self.staff_path(conversation, "/messages"), staff=STAFF_KEY)
        return list(result["payload"])

    # --- the worker --------------------------------------------------------------------------------------

    async def work(self) -> int:
        """Hold every claimable run to its end; how many were held."""
        held = 0
        while await self.worker.work_once():
            held += 1
        return held

    def running(self) -> None:
        """Leave the worker running (woken by NOTIFY), as in `summon serve`."""
        self._running.append(asyncio.ensure_future(self.worker.run(self.stop)))

    async def row(self, sql: str, *args: Any) -> Any:
        return await self.db.pool.fetchrow(sql, *args)


@pytest.fixture
async def desk(db: TestStore, desk_registry: Registry, request: pytest.FixtureRequest) -> AsyncIterator[DeskRig]:
    marker = request.node.get_closest_marker("desk_config")
    receiver = Receiver()
    await receiver.start()
    hook = receiver.url if request.node.get_closest_marker("webhooks") else None
    config = desk_config(hook, **(marker.kwargs if marker else {}))
    clock = SystemClock()
    await publish(db, desk_registry)
    await db.workers.beat("desk-test", usable=True, mode="stand-in: chosen", providers=[])
    service = DeskService(config, db, lambda: desk_registry, clock, server_name="localhost")
    await service.load()
    service.retry_after = (0.05, 0.1)  # three attempts, quickly
    worker = Worker(db, lambda: desk_registry, stand_in(clock), {"desk": service.surface}, clock,
                    WorkerSettings(lease_seconds=30, poll_seconds=0.2), worker_id="desk-test", status=STAND_IN,
                    tools={"hand_to_people": make_hand_to_people(db, lambda: service.desk)}, surface_tools=KINDS.tools)
    stop = asyncio.Event()
    tasks = TaskGroup("desk-test")
    await service.serve(tasks, stop)
    http = aiohttp.ClientSession()
    rig = DeskRig(db, service, worker, http, stop, tasks, receiver)
    try:
        yield rig
    finally:
        stop.set()
        await http.close()
        await service.close()
        for task in rig._running:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
        await tasks.close(grace=5.0)
        await service.release()
        await receiver.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "desk_config(**settings): the desk's configuration for this test")
    config.addinivalue_line("markers", "webhooks: every inbox posts its events to the test's receiver")
