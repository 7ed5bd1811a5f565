"""A person in a room, driving a real Matrix client (matrix-nio) against the real Synapse."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from nio import (
    AsyncClient,
    JoinedMembersResponse,
    RoomCreateResponse,
    RoomGetStateEventResponse,
    RoomMessagesResponse,
    RoomSendResponse,
)

from appservice.app import Service
from tests.book import BOOK, SCRIPT_KEY
from tests.support import eventually


@dataclass
class Person:
    client: AsyncClient
    service: Service

    @property
    def user_id(self) -> str:
        return str(self.client.user_id)

    def puppet(self, slug: str) -> str:
        bot = self.service.registry().get(slug)
        assert bot is not None
        return bot.user_id

    async def room_with(self, *slugs: str, initial_state: list[dict[str, Any]] | None = None,
                        direct: bool = False) -> str:
        """A new room with these bots invited (``direct``: as a direct chat, as Element's "Start chat" makes
        one); returns once every puppet has joined."""
        resp = await self.client.room_create(name=f"test {uuid.uuid4().hex[:6]}",
                                             invite=[self.puppet(s) for s in slugs],
                                             initial_state=initial_state or [], is_direct=direct)
        assert isinstance(resp, RoomCreateResponse), resp
        for s in slugs:
            await self.wait_membership(resp.room_id, self.puppet(s), "join")
        return str(resp.room_id)

    async def members(self, room_id: str) -> set[str]:
        resp = await self.client.joined_members(room_id)
        assert isinstance(resp, JoinedMembersResponse), resp
        return {m.user_id for m in resp.members}

    async def membership(self, room_id: str, user_id: str) -> dict[str, Any] | None:
        resp = await self.client.room_get_state_event(room_id, "m.room.member", user_id)
        return resp.content if isinstance(resp, RoomGetStateEventResponse) else None

    async def wait_membership(self, room_id: str, user_id: str, membership: str, timeout: float = 15) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            content = await self.membership(room_id, user_id)
            return content if content and content.get("membership") == membership else None
        result: dict[str, Any] = await eventually(check, timeout=timeout)
        return result

    async def send(self, room_id: str, content: dict[str, Any], event_type: str = "m.room.message") -> str:
        """Send ``content``; its ``SCRIPT_KEY`` (the tests' own, never sent) says to the stand-in's book what a run
        asked by this line says (none: the stand-in's own answer, whatever an earlier line with these words had)."""
        content = dict(content)
        turns = content.pop(SCRIPT_KEY, None)
        body = content.get("body")
        if event_type == "m.room.message" and isinstance(body, str) and content.get("msgtype") != "m.audio":
            # A command's run ends with the command's own words: its line is in the run before them.
            BOOK.say(body, turns, anywhere=body.startswith("!"))
        resp = await self.client.room_send(room_id, event_type, content)
        assert isinstance(resp, RoomSendResponse), resp
        return str(resp.event_id)

    async def say(self, room_id: str, body: str, *, mention: str | None = None,
                  thread: str | None = None, script: list[dict[str, Any]] | None = None) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": body,
                                   "m.mentions": {"user_ids": [self.puppet(mention)]} if mention else {}}
        if thread:
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread}
        if script is not None:
            content[SCRIPT_KEY] = script
        return await self.send(room_id, content)

    async def events(self, room_id: str) -> list[dict[str, Any]]:
        """The room's timeline, oldest first, as raw client events."""
        resp = await self.client.room_messages(room_id, limit=100)
        assert isinstance(resp, RoomMessagesResponse), resp
        return [e.source for e in reversed(resp.chunk)]

    async def notices_from(self, room_id: str, sender: str) -> list[dict[str, Any]]:
        return [e for e in await self.events(room_id)
                if e.get("sender") == sender and e.get("type") == "m.room.message"
                and e.get("content", {}).get("msgtype") == "m.notice"]

    async def answers_to(self, room_id: str, event_id: str, *, progress: bool = False) -> list[dict[str, Any]]:
        """Notices (from anyone) that reply to ``event_id``, in a thread or not. An answer mentions the
        asker; a progress line mentions nobody (``progress=True`` returns those instead)."""
        out = []
        for e in await self.events(room_id):
            content = e.get("content", {})
            rel = content.get("m.relates_to") or {}
            if content.get("msgtype") != "m.notice" or (rel.get("m.in_reply_to") or {}).get("event_id") != event_id:
                continue
            if bool((content.get("m.mentions") or {}).get("user_ids")) != progress:
                out.append(e)
        return out

    async def answer_to(self, room_id: str, event_id: str, timeout: float = 20) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            found = await self.answers_to(room_id, event_id)
            return found[0] if found else None
        result: dict[str, Any] = await eventually(check, timeout=timeout)
        return result
