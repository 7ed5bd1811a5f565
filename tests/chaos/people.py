"""The people of the chaos run: users of an appservice of their own (``@chaos_*``, registered beside summon's in
Synapse), who make rooms, invite the bot and mention it through the homeserver's client API — as ``?user_id=``
masquerade, so hundreds of people cost no logins — and see every event of their rooms pushed to them by Synapse
as appservice transactions. What they saw is the measure: each mention's answers (a notice from the bot replying
to it and mentioning its asker), by the events' own ``origin_server_ts``."""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import yaml
from aiohttp import web

PREFIX = "chaos_"


def registration(path: Path, *, port: int, server_name: str) -> dict[str, str]:
    """Write the people's appservice registration for Synapse to load; its tokens."""
    tokens = {"as_token": "chaos_as_" + secrets.token_hex(16), "hs_token": "chaos_hs_" + secrets.token_hex(16)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "id": "chaos-people", "url": f"http://127.0.0.1:{port}", **tokens, "sender_localpart": f"{PREFIX}people",
        "rate_limited": False,
        "namespaces": {"users": [{"exclusive": True, "regex": f"@{PREFIX}.*:{server_name}"}], "rooms": [],
                       "aliases": []},
    }))
    return tokens


@dataclass
class Mention:
    event_id: str
    person: str
    sent: float  # wall clock, when the send was begun
    answers: list[float] = field(default_factory=list)  # origin_server_ts of each answer, seconds

    @property
    def latency(self) -> float | None:
        return self.answers[0] - self.sent if self.answers else None


class People:
    def __init__(self, *, hs_url: str, tokens: dict[str, str], port: int, server_name: str, puppet: str) -> None:
        self.hs = hs_url.rstrip("/")
        self.tokens = tokens
        self.port = port
        self.server_name = server_name
        self.puppet = puppet
        self.rooms: dict[str, list[str]] = {}  # room -> people in it
        self.room_of: dict[str, str] = {}
        self.busy: set[str] = set()  # people with a mention not yet answered (a second would join that run)
        self.mentions: dict[str, Mention] = {}
        self.bot_joined: set[str] = set()
        self.send_failures = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._seen_txns: set[str] = set()
        self._early: dict[str, list[float]] = {}

    # --- the appservice side: what Synapse pushes to the people ----------------------------------

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {self.tokens['as_token']}"},
                                              timeout=aiohttp.ClientTimeout(total=30))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_put("/_matrix/app/v1/transactions/{txn}", self._transaction)
        app.router.add_post("/_matrix/app/v1/ping", self._ok)
        app.router.add_get("/_matrix/app/v1/users/{user}", self._ok)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None
        return self._session

    def _authorised(self, request: web.Request) -> bool:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), self.tokens["hs_token"].encode())

    async def _ok(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.json_response({"errcode": "M_FORBIDDEN"}, status=403)
        return web.json_response({})

    async def _transaction(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.json_response({"errcode": "M_FORBIDDEN"}, status=403)
        txn = request.match_info["txn"]
        body = await request.json()
        if txn not in self._seen_txns:  # Synapse retries a transaction it got no answer for: count it once
            self._seen_txns.add(txn)
            for event in body.get("events", []):
                self._on_event(event)
        return web.json_response({})

    def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("sender") != self.puppet:
            return
        content = event.get("content") or {}
        if event.get("type") == "m.room.member" and content.get("membership") == "join":
            self.bot_joined.add(event["room_id"])
            return
        if event.get("type") != "m.room.message":
            return
        relates = content.get("m.relates_to") or {}
        if relates.get("rel_type") == "m.replace":
            return  # an edit of a progress line, not an answer
        asked = (relates.get("m.in_reply_to") or {}).get("event_id")
        if not asked or not (content.get("m.mentions") or {}).get("user_ids"):
            return  # a progress line (it mentions nobody)
        mention = self.mentions.get(asked)
        if mention is None:  # answered before the mention's own PUT returned to us
            self._early.setdefault(asked, []).append(event["origin_server_ts"] / 1000)
            return
        mention.answers.append(event["origin_server_ts"] / 1000)
        self.busy.discard(mention.person)

    # --- the client side: what the people do ----------------------------------------------------

    async def _call(self, method: str, path: str, user: str, body: dict[str, Any], *,
                    retry_until: float | None = None) -> dict[str, Any]:
        """A client-API call as ``user``; a refused connection or a 5xx is tried again (same path, so the same
        transaction id) until ``retry_until`` (time.monotonic), else raised."""
        while True:
            try:
                async with self.session.request(method, self.hs + path, params={"user_id": user},
                                                json=body) as resp:
                    data: dict[str, Any] = await resp.json(content_type=None)
                    if resp.status == 200 or data.get("errcode") == "M_USER_IN_USE":
                        return data
                    if resp.status < 500 and resp.status != 429:
                        raise RuntimeError(f"{method} {path} as {user}: {resp.status} {data}")
                    error = f"{resp.status} {data}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = repr(exc)
            if retry_until is None or time.monotonic() > retry_until:
                raise RuntimeError(f"{method} {path} as {user}: {error}")
            await asyncio.sleep(0.5)

    async def gather(self, rooms: int, per_room: int) -> None:
        """``rooms`` rooms of ``per_room`` people each, the bot invited into each and joined."""
        sem = asyncio.Semaphore(8)

        async def user(localpart: str) -> str:
            async with sem:
                await self._call("POST", "/_matrix/client/v3/register", f"@{localpart}:{self.server_name}",
                                 {"type": "m.login.application_service", "username": localpart},
                                 retry_until=time.monotonic() + 60)
            return f"@{localpart}:{self.server_name}"

        async def room(k: int) -> None:
            people = [await user(f"{PREFIX}{k}_{n}") for n in range(per_room)]
            made = await self._call("POST", "/_matrix/client/v3/createRoom", people[0],
                                    {"preset": "public_chat", "name": f"chaos {k}", "invite": [self.puppet]},
                                    retry_until=time.monotonic() + 60)
            room_id = made["room_id"]
            for p in people[1:]:
                async with sem:
                    await self._call("POST", f"/_matrix/client/v3/join/{quote(room_id, safe='')}", p, {},
                                     retry_until=time.monotonic() + 60)
            self.rooms[room_id] = people
            for p in people:
                self.room_of[p] = room_id

        await asyncio.gather(*(room(k) for k in range(rooms)))
        deadline = time.monotonic() + 120
        while len(self.bot_joined & set(self.rooms)) < rooms:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bot joined {len(self.bot_joined & set(self.rooms))} of {rooms} rooms")
            await asyncio.sleep(0.2)

    def free(self) -> list[str]:
        return [p for p in self.room_of if p not in self.busy]

    async def mention(self, person: str, n: int, *, retry_for: float = 180) -> Mention | None:
        """``person`` mentions the bot; the mention, once the homeserver took it (None: it never did)."""
        self.busy.add(person)
        room = self.room_of[person]
        txn = uuid.uuid4().hex
        sent = time.time()
        content = {"msgtype": "m.text", "body": f"Helper, question {n}: how do I start?",
                   "m.mentions": {"user_ids": [self.puppet]}}
        try:
            data = await self._call("PUT", f"/_matrix/client/v3/rooms/{quote(room, safe='')}/send/m.room.message/{txn}",
                                    person, content, retry_until=time.monotonic() + retry_for)
        except RuntimeError:
            self.send_failures += 1
            self.busy.discard(person)
            return None
        mention = Mention(str(data["event_id"]), person, sent)
        # An answer can arrive before the PUT returns (the bot is quick): check what was seen meanwhile.
        mention.answers.extend(self._early.pop(mention.event_id, []))
        if mention.answers:
            self.busy.discard(person)
        self.mentions[mention.event_id] = mention
        return mention
