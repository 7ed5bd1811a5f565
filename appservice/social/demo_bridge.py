"""A fake social bridge, for ``make dev`` and the tests (docs/social.md): an appservice of its own, registered with
the throwaway Synapse before it starts (``SUMMON_EXTRA_REGISTRATIONS``), with a user namespace of its own
(``@fakebridge_.*``) and a bridge bot. It does what a real bridge (mautrix, hookshot) does to a room, through the
real client-server API: it makes a bridged room with ``m.bridge`` state (MSC2346) and speaks as its puppets by
masquerading (``?user_id=``). It takes no transactions (``url: null``): it never needs to hear anything. Nothing in
``summon serve`` uses it."""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import yaml

LOCALPART = "fakebridge_"
BOT = "fakebridge_bot"
PROTOCOL = {"id": "fakebook", "displayname": "Fakebook"}


def write_registration(folder: Path, server_name: str) -> tuple[Path, dict[str, str]]:
    """The fake bridge's registration file, and the keys an env gains to reach it (its token)."""
    token = "as_" + secrets.token_hex(16)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fakebridge.yaml"
    path.write_text(yaml.safe_dump({
        "id": "fakebridge", "url": None, "as_token": token, "hs_token": "hs_" + secrets.token_hex(16),
        "sender_localpart": BOT, "rate_limited": False,
        "namespaces": {"users": [{"exclusive": True, "regex": f"@{LOCALPART}.*:{server_name}"}],
                       "aliases": [], "rooms": []},
    }), encoding="utf-8")
    return path, {"SUMMON_FAKEBRIDGE_AS_TOKEN": token}


def namespace(server_name: str) -> str:
    return f"@{LOCALPART}.*:{server_name}"


class DemoBridge:
    def __init__(self, hs_url: str, token: str, server_name: str) -> None:
        self.hs_url = hs_url
        self.token = token
        self.server_name = server_name
        self.bot = f"@{BOT}:{server_name}"
        self._http: aiohttp.ClientSession | None = None
        self._state_keys: dict[str, str] = {}

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()

    async def _call(self, method: str, path: str, as_user: str | None, body: dict[str, Any] | None = None) -> Any:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        params = {"user_id": as_user} if as_user is not None else {}
        async with self._http.request(method, f"{self.hs_url}/_matrix/client/v3{path}", json=body,
                                      params=params, headers={"Authorization": f"Bearer {self.token}"}) as resp:
            data = await resp.json()
            assert resp.status == 200, (resp.status, data)
            return data

    async def puppet(self, name: str, display_name: str) -> str:
        """A puppet of a platform user (registered in the bridge's namespace), with the name people see."""
        localpart = f"{LOCALPART}{name}{uuid.uuid4().hex[:6]}"
        await self._call("POST", "/register", None, {"type": "m.login.application_service", "username": localpart})
        user = f"@{localpart}:{self.server_name}"
        await self._call("PUT", f"/profile/{quote(user)}/displayname", user, {"displayname": display_name})
        return user

    async def bridged_room(self, *, kind: str, channel: str, guests: list[str], invite: list[str],
                           staff: dict[str, int], state: str | None = "m.bridge") -> str:
        """A bridged room as a social bridge makes one: ``state`` (``m.bridge``, hookshot's ``uk.half-shot.bridge``,
        or None for a bridge that writes none) with ``com.beeper.room_type``: ``kind``, its guests joined,
        ``invite`` invited, and ``staff`` holding those power levels."""
        bridge = {"bridgebot": self.bot, "protocol": PROTOCOL,
                  "network": {"id": "fakebook", "displayname": "Fakebook"},
                  "channel": {"id": uuid.uuid4().hex[:8], "displayname": channel}, "com.beeper.room_type": kind}
        made = await self._call("POST", "/createRoom", None, {
            "name": channel, "preset": "private_chat", "invite": [*guests, *invite],
            "initial_state": [{"type": state, "state_key": f"fakebook://{channel}", "content": bridge}] if state else [],
            "power_level_content_override": {"users": staff},  # the bridge bot, its creator, holds every level
        })
        room_id = str(made["room_id"])
        self._state_keys[room_id] = f"fakebook://{channel}"
        for guest in guests:
            await self._call("POST", f"/join/{quote(room_id)}", guest, {})
        return room_id

    async def say(self, room_id: str, guest: str, body: str, *, thread: str | None = None) -> str:
        """``guest`` says ``body`` (in ``thread``, as a comment under a post), as the bridge relays it."""
        content: dict[str, Any] = {"msgtype": "m.text", "body": body}
        if thread is not None:
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": thread}}
        sent = await self._call("PUT", f"/rooms/{quote(room_id)}/send/m.room.message/{uuid.uuid4().hex}", guest,
                                content)
        return str(sent["event_id"])

    async def set_power(self, room_id: str, users: dict[str, int]) -> None:
        """The bridge bot (the room's creator) changes who holds what power there."""
        levels = await self._call("GET", f"/rooms/{quote(room_id)}/state/m.room.power_levels", None)
        levels["users"] = {**levels.get("users", {}), **users}
        await self._call("PUT", f"/rooms/{quote(room_id)}/state/m.room.power_levels", None, levels)

    async def unbridge(self, room_id: str) -> None:
        """The bridge lets the room go: its ``m.bridge`` state emptied, as a bridge does when it unbridges."""
        key = quote(self._state_keys[room_id], safe="")
        await self._call("PUT", f"/rooms/{quote(room_id)}/state/m.bridge/{key}", None, {})
