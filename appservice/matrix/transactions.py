"""The appservice API endpoint, owned here rather than by mautrix's stock handler, so that:

- the homeserver's token is compared in constant time, from the Bearer header or the legacy query
  parameter (both must match when both are given), and a bad one gets 403 ``M_FORBIDDEN``;
- the transaction id and every new event are stored in **one** database transaction before the 200
  (mautrix acknowledges before its handlers run and remembers txn ids only in memory);
- a replayed transaction stores and summons nothing new, across restarts.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

# Receives the events of a transaction not seen before; returns after they are stored, or raises.
TransactionHandler = Callable[[str, list[dict[str, Any]], list[dict[str, Any]]], Awaitable[bool]]
UserQuery = Callable[[str], Awaitable[bool]]


def _error(status: int, errcode: str, message: str) -> web.Response:
    return web.json_response({"errcode": errcode, "error": message}, status=status)


class TransactionEndpoint:
    def __init__(self, hs_token: str, handler: TransactionHandler, query_user: UserQuery) -> None:
        self._token = hs_token.encode()
        self._handler = handler
        self._query_user = query_user

    def routes(self, app: web.Application) -> None:
        for prefix in ("/_matrix/app/v1", ""):  # "" = the legacy unversioned paths
            app.router.add_put(f"{prefix}/transactions/{{txn_id}}", self.transaction)
            app.router.add_get(f"{prefix}/users/{{user_id}}", self.user)
            app.router.add_get(f"{prefix}/rooms/{{alias}}", self.room_alias)
        app.router.add_post("/_matrix/app/v1/ping", self.ping)

    def authorised(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        bearer = header[7:].strip() if header.lower().startswith("bearer ") else None
        query = request.query.get("access_token")
        given = [t for t in (bearer, query) if t is not None]
        if not given:
            return False
        # Every token given must match (the spec: "ensure both match if both are provided").
        return all(hmac.compare_digest(t.encode(), self._token) for t in given)

    async def transaction(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return _error(403, "M_FORBIDDEN", "bad or missing homeserver token")
        txn_id = request.match_info["txn_id"]
        try:
            body = await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError):
            log.warning("transaction %s: body is not JSON", txn_id)
            return _error(400, "M_NOT_JSON", "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "M_BAD_JSON", "the body is not a JSON object")
        events = body.get("events", [])
        ephemeral = body.get("ephemeral", body.get("de.sorunome.msc2409.ephemeral", []))
        if not isinstance(events, list) or not isinstance(ephemeral, list):
            return _error(400, "M_BAD_JSON", "events and ephemeral must be lists")
        events = [e for e in events if isinstance(e, dict)]
        ephemeral = [e for e in ephemeral if isinstance(e, dict)]
        new = await self._handler(txn_id, events, ephemeral)
        if not new:
            log.info("transaction %s replayed; nothing new stored", txn_id)
        return web.json_response({})

    async def ping(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return _error(403, "M_FORBIDDEN", "bad or missing homeserver token")
        return web.json_response({})

    async def user(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return _error(403, "M_FORBIDDEN", "bad or missing homeserver token")
        if await self._query_user(request.match_info["user_id"]):
            return web.json_response({})
        return _error(404, "M_NOT_FOUND", "no such user")

    async def room_alias(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return _error(403, "M_FORBIDDEN", "bad or missing homeserver token")
        return _error(404, "M_NOT_FOUND", "summon does not provide room aliases")
