"""The floor: the smallest appservice that answers a mention, on summon's registration and port.

It joins when a puppet is invited and, for every message that mentions a puppet, PUTs an ``m.notice``
replying to it, as that puppet, at once. No database, no queue: what is left of the latency is Synapse,
the network and the client. ``seen``/``replied`` record when (``time.monotonic``) each mention arrived and
when its reply's PUT returned, keyed by the mention's event id, for the benchmark's breakdown.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
import uuid
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

log = logging.getLogger(__name__)


class EchoAS:
    def __init__(self, *, hs_url: str, as_token: str, hs_token: str, host: str, port: int,
                 puppets: list[str], as_id: str = "summon", delay: float = 0.0) -> None:
        """``delay``: seconds each reply waits before it is sent (a model's latency, for a load's floor)."""
        self.hs = hs_url.rstrip("/")
        self.as_id = as_id
        self.headers = {"Authorization": f"Bearer {as_token}"}
        self.hs_token = hs_token.encode()
        self.host, self.port = host, port
        self.puppets = set(puppets)
        self.delay = delay
        self.joined: set[str] = set()
        self.seen: dict[str, float] = {}
        self.replied: dict[str, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None

    # --- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(headers=self.headers)
        for puppet in self.puppets:  # the homeserver acts only as appservice users that exist
            await self._register(puppet)
        app = web.Application()
        app.router.add_put("/_matrix/app/v1/transactions/{txn}", self.transaction)
        app.router.add_post("/_matrix/app/v1/ping", self.ping)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        # Synapse backs off an appservice it found down; a ping makes it deliver at once.
        async with self.session.post(f"{self.hs}/_matrix/client/v1/appservice/{quote(self.as_id, safe='')}/ping",
                                     json={"transaction_id": f"bench-{uuid.uuid4().hex}"}) as resp:
            if resp.status != 200:
                raise RuntimeError(f"echo AS: the homeserver's ping failed: {resp.status} {await resp.text()}")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the echo AS has not started"
        return self._session

    # --- the appservice API ----------------------------------------------------------------------

    def _authorised(self, request: web.Request) -> bool:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self.hs_token)

    async def ping(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.json_response({"errcode": "M_FORBIDDEN"}, status=403)
        return web.json_response({})

    async def transaction(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.json_response({"errcode": "M_FORBIDDEN"}, status=403)
        now = time.monotonic()
        body = await request.json()
        for event in body.get("events", []):
            self._on_event(event, now)
        return web.json_response({})

    def _on_event(self, event: dict[str, Any], now: float) -> None:
        content = event.get("content") or {}
        room, sender = event.get("room_id"), event.get("sender")
        if (event.get("type") == "m.room.member" and event.get("state_key") in self.puppets
                and content.get("membership") == "invite"):
            self._spawn(self._join(room, event["state_key"]))
        elif event.get("type") == "m.room.message" and sender not in self.puppets \
                and content.get("msgtype") != "m.notice":
            named = (content.get("m.mentions") or {}).get("user_ids") or []
            for puppet in self.puppets.intersection(named):
                self.seen[event["event_id"]] = now
                self._spawn(self._reply(room, event["event_id"], puppet))

    # --- what it says to the homeserver ----------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _register(self, puppet: str) -> None:
        localpart = puppet[1:].split(":", 1)[0]
        async with self.session.post(f"{self.hs}/_matrix/client/v3/register",
                                     json={"type": "m.login.application_service", "username": localpart}) as resp:
            if resp.status != 200 and (await resp.json()).get("errcode") != "M_USER_IN_USE":
                raise RuntimeError(f"echo AS: cannot register {puppet}: {resp.status} {await resp.text()}")

    async def _join(self, room: str, puppet: str) -> None:
        async with self.session.post(f"{self.hs}/_matrix/client/v3/join/{quote(room, safe='')}",
                                     params={"user_id": puppet}, json={}) as resp:
            if resp.status != 200:
                log.error("echo AS: %s could not join %s: %s", puppet, room, await resp.text())
            else:
                self.joined.add(room)

    async def _reply(self, room: str, event_id: str, puppet: str) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)
        content = {"msgtype": "m.notice", "body": "pong", "m.relates_to": {"m.in_reply_to": {"event_id": event_id}}}
        url = f"{self.hs}/_matrix/client/v3/rooms/{quote(room, safe='')}/send/m.room.message/{uuid.uuid4().hex}"
        async with self.session.put(url, params={"user_id": puppet}, json=content) as resp:
            if resp.status != 200:
                log.error("echo AS: reply to %s failed: %s", event_id, await resp.text())
                return
        self.replied[event_id] = time.monotonic()
