"""The homeserver, as the rest of the Matrix surface calls it: every call mautrix makes for us, with what
mautrix, aiohttp or the socket raise translated once, here, into ``appservice.matrix.errors.MatrixError`` (its HTTP
status and errcode kept, so a caller can tell "never" from "not now"). Nothing else in the surface
catches a mautrix exception.

(Sending a message is ``outbox.MatrixSender``: a plain PUT, since mautrix drops a 429's body.)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
from mautrix.api import HTTPAPI, Method, Path
from mautrix.appservice import AppServiceAPI
from mautrix.errors import MatrixError as MautrixError
from mautrix.errors import MatrixRequestError
from mautrix.types import ContentURI, PresenceState, RoomAlias, RoomID, UserID
from mautrix.util.logging import TraceLogger

from appservice.matrix.errors import MatrixError

log = logging.getLogger(__name__)


@asynccontextmanager
async def _translated(what: str) -> AsyncIterator[None]:
    try:
        yield
    except MatrixRequestError as exc:
        status = getattr(exc, "http_status", None)
        errcode = getattr(exc, "errcode", None)
        raise MatrixError(f"{what}: {exc}", status=status or None, errcode=errcode) from exc
    except MautrixError as exc:  # could not reach it, or an answer that is not one
        raise MatrixError(f"{what}: {type(exc).__name__}: {exc}") from exc
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
        raise MatrixError(f"{what}: the homeserver is unreachable ({type(exc).__name__}: {exc})") from exc


class Homeserver:
    def __init__(self, api: AppServiceAPI) -> None:
        self.api = api

    # --- puppets -----------------------------------------------------------------------------------

    async def register(self, user_id: str, display_name: str | None = None) -> None:
        """Register ``user_id`` (idempotent) and give it ``display_name`` when it has another."""
        intent = self.api.intent(UserID(user_id))
        async with _translated(f"registering {user_id}"):
            await intent.ensure_registered()
            if display_name is not None and await intent.get_displayname(UserID(user_id)) != display_name:
                await intent.set_displayname(display_name, check_current=False)

    async def upload(self, user_id: str, data: bytes, content_type: str, filename: str) -> str:
        """``data`` uploaded to the homeserver's media repository by ``user_id``; its mxc:// uri."""
        async with _translated(f"uploading {filename}"):
            return str(await self.api.intent(UserID(user_id)).upload_media(data, content_type, filename))

    async def set_avatar(self, user_id: str, mxc: str) -> bool:
        """Give ``user_id`` the avatar ``mxc`` unless it has it already (True when it was changed)."""
        intent = self.api.intent(UserID(user_id))
        async with _translated(f"setting {user_id}'s avatar"):
            if await intent.get_avatar_url(UserID(user_id)) == mxc:
                return False
            await intent.set_avatar_url(ContentURI(mxc), check_current=False)
            return True

    async def set_presence(self, user_id: str, online: bool, status: str | None) -> None:
        state = PresenceState.ONLINE if online else PresenceState.UNAVAILABLE
        async with _translated(f"setting {user_id}'s presence"):
            await self.api.intent(UserID(user_id)).set_presence(state, status, ignore_cache=True)

    async def presence_of(self, as_user: str, user_id: str) -> tuple[str, str | None]:
        """``user_id``'s presence (online, unavailable, offline) as ``as_user`` sees it, and their display name."""
        intent = self.api.intent(UserID(as_user))
        async with _translated(f"reading {user_id}'s presence"):
            presence = await intent.get_presence(UserID(user_id))
        name: str | None = None
        try:
            async with _translated(f"reading {user_id}'s name"):
                name = await intent.get_displayname(UserID(user_id))
        except MatrixError as exc:
            log.debug("no display name for %s: %s", user_id, exc)
        return str(presence.presence.value), name

    # --- media ----------------------------------------------------------------------------------------

    async def download(self, user_id: str, mxc: str, max_bytes: int) -> bytes:
        """A file through authenticated media (Matrix v1.11), as ``user_id``; read no further than
        ``max_bytes`` (past it: ``MatrixError`` with errcode ``M_TOO_LARGE``)."""
        data = bytearray()
        async with _translated(f"downloading {mxc} as {user_id}"):
            url = self.api.get_download_url(mxc, authenticated=True)
            async with self.api.session.get(url, params={"user_id": user_id},
                                            headers={"Authorization": f"Bearer {self.api.token}"}) as resp:
                if resp.status != 200:
                    body = await resp.text()
                    raise MatrixError(f"downloading {mxc}: {resp.status} {body[:200]}", status=resp.status)
                async for chunk in resp.content.iter_chunked(65536):
                    data += chunk
                    if len(data) > max_bytes:
                        raise MatrixError(f"downloading {mxc}: over {max_bytes} bytes", status=413,
                                          errcode="M_TOO_LARGE")
        return bytes(data)

    # --- membership --------------------------------------------------------------------------------

    async def join(self, user_id: str, room_id: str) -> None:
        intent = self.api.intent(UserID(user_id))
        async with _translated(f"{user_id} joining {room_id}"):
            await intent.ensure_registered()
            await intent.join_room_by_id(RoomID(room_id))

    async def leave(self, user_id: str, room_id: str, reason: str | None = None) -> None:
        async with _translated(f"{user_id} leaving {room_id}"):
            await self.api.intent(UserID(user_id)).leave_room(RoomID(room_id), reason=reason)

    async def invite(self, by: str, room_id: str, user_id: str) -> None:
        async with _translated(f"{by} inviting {user_id} to {room_id}"):
            await self.api.intent(UserID(user_id)).ensure_registered()
            await self.api.intent(UserID(by)).invite_user(RoomID(room_id), UserID(user_id))

    async def create_room(self, user_id: str, *, name: str, invite: list[str], topic: str | None = None,
                          initial_state: list[dict[str, Any]] | None = None) -> str:
        """A private room made by ``user_id`` (a member bot's own room), inviting ``invite``; its id."""
        body: dict[str, Any] = {"name": name, "invite": invite, "preset": "private_chat", "is_direct": False,
                                "initial_state": initial_state or []}
        if topic:
            body["topic"] = topic
        async with _translated(f"{user_id} creating a room"):
            intent = self.api.intent(UserID(user_id))
            await intent.ensure_registered()
            made = await intent.api.request(Method.POST, Path.v3.createRoom, body)
        return str(made["room_id"])

    # --- reading -----------------------------------------------------------------------------------

    async def room_state(self, user_id: str, room_id: str) -> list[dict[str, Any]]:
        """The room's current state, as ``user_id`` reads it: raw events, each with its room id."""
        async with _translated(f"reading {room_id}'s state"):
            state = await self.api.intent(UserID(user_id)).get_state(RoomID(room_id))
        events: list[dict[str, Any]] = []
        for ev in state:
            raw = ev.serialize()
            raw.setdefault("room_id", room_id)
            events.append(raw)
        return events

    async def state_event(self, user_id: str, room_id: str, event_type: str, state_key: str) -> Any:
        """One state event's content as ``user_id`` reads it; None when there is none."""
        async with _translated(f"reading {event_type} in {room_id}"):
            try:
                return await self.api.intent(UserID(user_id)).api.request(
                    Method.GET, Path.v3.rooms[room_id].state[event_type][state_key])
            except MatrixRequestError as exc:
                if getattr(exc, "http_status", None) == 404:
                    return None
                raise

    async def set_state_event(self, user_id: str, room_id: str, event_type: str, state_key: str,
                              content: dict[str, Any]) -> None:
        async with _translated(f"setting {event_type} in {room_id}"):
            await self.api.intent(UserID(user_id)).api.request(
                Method.PUT, Path.v3.rooms[room_id].state[event_type][state_key], content)

    async def thread(self, room_id: str, root: str, *, as_user: str, limit: int) -> list[dict[str, Any]]:
        """A thread as ``as_user`` may read it: the root's event first, then its replies oldest first (raw
        client events): ``GET /rooms/{room}/event/{root}`` and ``GET /v1/rooms/{room}/relations/{root}/m.thread``
        (newest first, paged)."""
        as_puppet = self.api.user(UserID(as_user))
        replies: list[dict[str, Any]] = []
        async with _translated(f"reading the thread {root} in {room_id}"):
            first = await as_puppet.request(Method.GET, Path.v3.rooms[room_id].event[root], retry_count=0)
            token: str | None = None
            while len(replies) < limit:
                params: dict[str, Any] = {"dir": "b", "limit": str(min(100, limit - len(replies)))}
                if token:
                    params["from"] = token
                page = await as_puppet.request(Method.GET, Path.v1.rooms[room_id].relations[root]["m.thread"],
                                               query_params=params, retry_count=0)
                chunk = page.get("chunk") if isinstance(page, dict) else None
                if not isinstance(chunk, list) or not chunk:
                    break
                replies.extend(e for e in chunk if isinstance(e, dict))
                token = page.get("next_batch")
                if not isinstance(token, str):
                    break
        root_event = first if isinstance(first, dict) else {}
        return [root_event, *reversed(replies)]

    async def resolve_alias(self, alias: str) -> str | None:
        """A ``#alias:server``'s room id now (None: no such alias); a ``!id:server`` is itself."""
        if alias.startswith("!"):
            return alias
        async with _translated(f"resolving {alias}"):
            try:
                return str((await self.api.bot_intent().resolve_room_alias(RoomAlias(alias))).room_id)
            except MatrixRequestError as exc:
                if getattr(exc, "http_status", None) == 404:
                    return None
                raise

    async def whoami(self, access_token: str) -> str:
        """Whose ``access_token`` (a person's own, handed to the door's start route) is, as the homeserver says:
        ``GET /account/whoami`` with it, once, never retried; the token is kept nowhere."""
        api = HTTPAPI(self.api.base_url, access_token, client_session=self.api.session, default_retry_count=0,
                      log=cast(TraceLogger, logging.getLogger("mautrix.whoami")))
        async with _translated("asking the homeserver whose session this is"):
            answer = await api.request(Method.GET, Path.v3.account.whoami, retry_count=0)
        user_id = answer.get("user_id") if isinstance(answer, dict) else None
        if not isinstance(user_id, str):
            raise MatrixError("asking the homeserver whose session this is: no user_id in its answer")
        return user_id

    # --- the rest ----------------------------------------------------------------------------------

    async def typing(self, user_id: str, room_id: str, timeout_ms: int) -> None:
        async with _translated(f"typing in {room_id}"):
            await self.api.intent(UserID(user_id)).set_typing(RoomID(room_id), timeout=timeout_ms)

    async def ping(self, appservice_id: str) -> None:
        async with _translated("pinging the homeserver"):
            await self.api.bot_intent().appservice_ping(appservice_id)
