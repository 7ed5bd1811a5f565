"""The appservice API endpoint, owned here rather than by mautrix's stock handler, so that:

- the homeserver's token is compared in constant time, from the Bearer header or the legacy query
  parameter (both must match when both are given): none given is 401 ``M_UNAUTHORIZED``, a wrong one
  403 ``M_FORBIDDEN`` (the spec's two answers);
- the body is read under the listener's cap while it streams in (413 ``M_TOO_LARGE`` at the first chunk
  past it), and read as a transaction by ``read_transaction``, pure, so it can be fuzzed;
- an unknown ``/_matrix/app/…`` route is 404 and a known one asked with the wrong method 405, both
  ``M_UNRECOGNIZED`` in JSON, as the spec asks of an application service;
- the transaction id and every new event are stored before the 200, in one database transaction (a room's
  events each in one, when it carries several rooms': ``dispatch``) — mautrix acknowledges before its handlers
  run and remembers txn ids only in memory;
- a replayed transaction stores and summons nothing new, across restarts.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from appservice.bodies import read_capped, too_large

log = logging.getLogger(__name__)

# Receives the events of a transaction not seen before; returns after they are stored, or raises.
TransactionHandler = Callable[[str, list[dict[str, Any]], list[dict[str, Any]]], Awaitable[bool]]
UserQuery = Callable[[str], Awaitable[bool]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, errcode: str, message: str) -> web.Response:
    return web.json_response({"errcode": errcode, "error": message}, status=status)


@dataclass(frozen=True)
class Transaction:
    events: list[dict[str, Any]]
    ephemeral: list[dict[str, Any]]


@dataclass(frozen=True)
class BadBody:
    errcode: str  # M_NOT_JSON or M_BAD_JSON
    message: str  # said to the homeserver and logged


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_transaction(body: bytes) -> Transaction | BadBody:
    """A transaction's body as its events and ephemeral events (the ones that are objects), or why it is
    not one. Pure; never raises, whatever the bytes."""
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError:
        return BadBody("M_NOT_JSON", "the body is not UTF-8")
    except ValueError as exc:
        return BadBody("M_NOT_JSON", f"the body is not JSON ({exc})")
    except RecursionError:
        return BadBody("M_NOT_JSON", "the body is nested too deeply to read")
    if not isinstance(data, dict):
        return BadBody("M_BAD_JSON", "the body is not a JSON object")
    events = data.get("events", [])
    ephemeral = data.get("ephemeral", data.get("de.sorunome.msc2409.ephemeral", []))
    if not isinstance(events, list) or not isinstance(ephemeral, list):
        return BadBody("M_BAD_JSON", "events and ephemeral must be lists")
    return Transaction([e for e in events if isinstance(e, dict)], [e for e in ephemeral if isinstance(e, dict)])


class TransactionEndpoint:
    def __init__(self, hs_token: str, handler: TransactionHandler, query_user: UserQuery) -> None:
        self._token = hs_token.encode()
        self._handler = handler
        self._query_user = query_user

    def routes(self, app: web.Application) -> None:
        known: list[tuple[str, str, Handler]] = []
        for prefix in ("/_matrix/app/v1", ""):  # "" = the legacy unversioned paths
            known += [
                ("PUT", f"{prefix}/transactions/{{txn_id}}", self.transaction),
                ("GET", f"{prefix}/users/{{user_id}}", self.user),
                ("GET", f"{prefix}/rooms/{{alias}}", self.room_alias),
            ]
        known.append(("POST", "/_matrix/app/v1/ping", self.ping))
        for method, path, handler in known:
            if method == "GET":
                app.router.add_get(path, handler)  # and HEAD
            else:
                app.router.add_route(method, path, handler)
            app.router.add_route("*", path, self.wrong_method)
        # After every known route: what is left under /_matrix/app is a route this service does not have.
        app.router.add_route("*", "/_matrix/app{rest:(/.*)?}", self.unknown)

    async def unknown(self, request: web.Request) -> web.Response:
        return _error(404, "M_UNRECOGNIZED", f"no such appservice route: {request.method} {request.path}")

    async def wrong_method(self, request: web.Request) -> web.Response:
        return _error(405, "M_UNRECOGNIZED", f"{request.path} does not take {request.method}")

    def authorised(self, request: web.Request) -> bool:
        return self._refusal(request) is None

    def _refusal(self, request: web.Request) -> web.Response | None:
        """None when the homeserver's token was given and is right; else the spec's answer."""
        header = request.headers.get("Authorization", "")
        bearer = header[7:].strip() if header.lower().startswith("bearer ") else None
        query = request.query.get("access_token")
        given = [t for t in (bearer, query) if t]
        if not given:
            return _error(401, "M_UNAUTHORIZED", "no homeserver token given")
        # Every token given must match (the spec: "ensure both match if both are provided").
        if not all(hmac.compare_digest(t.encode(), self._token) for t in given):
            return _error(403, "M_FORBIDDEN", "bad homeserver token")
        return None

    async def transaction(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        txn_id = request.match_info["txn_id"]
        limit = request.client_max_size
        body = await read_capped(request, limit)
        if body is None:
            log.warning("transaction %s: body larger than %d bytes; refused", txn_id, limit)
            return too_large(_error(413, "M_TOO_LARGE", f"the body is larger than {limit} bytes"))
        read = read_transaction(body)
        if isinstance(read, BadBody):
            log.warning("transaction %s refused: %s", txn_id, read.message)
            return _error(400, read.errcode, read.message)
        new = await self._handler(txn_id, read.events, read.ephemeral)
        if not new:
            log.info("transaction %s replayed; nothing new stored", txn_id)
        return web.json_response({})

    async def ping(self, request: web.Request) -> web.Response:
        return self._refusal(request) or web.json_response({})

    async def user(self, request: web.Request) -> web.Response:
        refused = self._refusal(request)
        if refused is not None:
            return refused
        if await self._query_user(request.match_info["user_id"]):
            return web.json_response({})
        return _error(404, "M_NOT_FOUND", "no such user")

    async def room_alias(self, request: web.Request) -> web.Response:
        return self._refusal(request) or _error(404, "M_NOT_FOUND", "summon does not provide room aliases")
