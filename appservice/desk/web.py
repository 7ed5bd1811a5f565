"""What the desk's two APIs share: a JSON body read under its cap while it streams in, and refusals as JSON."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from aiohttp import web

from appservice.bodies import read_capped, too_large
from appservice.desk.errors import RequestRefused
from engine.errors import StoreUnavailable

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024  # a message, not a file: read under this cap as it streams in, 413 past it
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # JSON may carry them; PostgreSQL's text and UTF-8 cannot


def refused(exc: RequestRefused) -> web.Response:
    return web.json_response({"error": str(exc)}, status=exc.status)


async def body_of(request: web.Request) -> dict[str, Any]:
    """The request's JSON object; raises ``RequestRefused`` (413 past the cap, 400 for anything not an object)."""
    raw = await read_capped(request, MAX_BODY)
    if raw is None:
        raise RequestRefused(413, f"the body is larger than {MAX_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nested past the parser's depth: no body of ours
        raise RequestRefused(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise RequestRefused(400, "the body is not a JSON object")
    return body


def text_field(body: dict[str, Any], name: str, *, required: bool = False, limit: int = 200) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise RequestRefused(422, f"{name} is required")
        return None
    if not isinstance(value, str):
        raise RequestRefused(422, f"{name} is text")
    if len(value) > limit:
        raise RequestRefused(422, f"{name} is at most {limit} characters")
    if UNSTORABLE.search(value):
        raise RequestRefused(422, f"{name} is text without NUL or lone surrogate characters")
    return value


def int_of(request: web.Request, name: str) -> int:
    given = request.match_info[name]
    if not given.isdecimal() or len(given) > 18:
        raise RequestRefused(404, f"no such {name.replace('_id', '')}")
    return int(given)


@web.middleware
async def refusals(request: web.Request, handler: Any) -> web.StreamResponse:
    """A ``RequestRefused`` anywhere under a handler is its status and words (413 also closes the connection)."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except RequestRefused as exc:
        if exc.status >= 500:
            log.error("desk request %s %s refused: %s", request.method, request.path, exc)
        answer = refused(exc)
        return too_large(answer) if exc.status == 413 else answer
    except StoreUnavailable as exc:  # nothing of it stood: the caller may send it again (an echo id makes it once)
        log.warning("desk request %s %s: the database is unavailable: %s", request.method, request.path, exc)
        return web.json_response({"error": "the desk is unavailable for a moment; try again"}, status=503,
                                 headers={"Retry-After": "1"})
